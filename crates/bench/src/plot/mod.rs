//! Plots (SPEC U5) with plotters: PNG (bitmap backend) and SVG of every figure, with
//! titles, axis units and legends. Grouped bar charts (per operation / workload), line
//! charts (throughput vs threads, time vs records) and latency CDFs.
//!
//! Text is rendered with plotters' `ab_glyph` feature from a TrueType font loaded at run
//! time — no fontconfig or FreeType needed, so plots work headless. The font is the first
//! found of: `$PMKV_FONT`, DejaVu Sans from Debian's `fonts-dejavu-core`
//! (`/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf`), Liberation Sans, FreeSans, or any
//! other `*.ttf` under `/usr/share/fonts` or `/usr/local/share/fonts`.

mod axis;
mod draw;
mod font;
pub mod run;

pub use font::init_fonts;

use plotters::prelude::*;
use std::path::{Path, PathBuf};

const FONT: &str = "sans-serif";

/// Tableau 10: distinguishable, colour-blind-friendlier than the primaries.
pub(crate) const PALETTE: [(u8, u8, u8); 10] = [
    (0x4E, 0x79, 0xA7),
    (0xF2, 0x8E, 0x2B),
    (0xE1, 0x57, 0x59),
    (0x76, 0xB7, 0xB2),
    (0x59, 0xA1, 0x4F),
    (0xED, 0xC9, 0x48),
    (0xB0, 0x7A, 0xA1),
    (0xFF, 0x9D, 0xA7),
    (0x9C, 0x75, 0x5F),
    (0xBA, 0xB0, 0xAC),
];

pub fn color(i: usize) -> RGBColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    RGBColor(r, g, b)
}

/// One bar series: a value (or nothing) per category.
#[derive(Clone, Debug)]
pub struct Bars {
    pub name: String,
    pub color: usize,
    pub values: Vec<Option<f64>>,
}

/// One line: points (x, y), solid or dashed.
#[derive(Clone, Debug)]
pub struct Line {
    pub name: String,
    pub color: usize,
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
}

#[derive(Clone, Debug)]
pub enum PanelKind {
    /// Grouped bars: one group per category, one bar per series.
    Bars {
        categories: Vec<String>,
        series: Vec<Bars>,
    },
    Lines {
        series: Vec<Line>,
        log_x: bool,
    },
}

#[derive(Clone, Debug)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_y: bool,
    pub kind: PanelKind,
    /// Fixed y range (linear axes), e.g. 0..1 for CDFs; the legend then goes lower right.
    pub y_range: Option<(f64, f64)>,
}

impl Panel {
    pub fn new(title: &str, x_label: &str, y_label: &str, log_y: bool, kind: PanelKind) -> Panel {
        Panel { title: title.into(), x_label: x_label.into(), y_label: y_label.into(), log_y, kind, y_range: None }
    }

    /// A latency CDF: x = latency (log), y = fraction 0..1.
    pub fn cdf(title: &str, series: Vec<Line>) -> Panel {
        Panel {
            y_range: Some((0.0, 1.0)),
            ..Panel::new(
                title,
                "latency (ns, log scale)",
                "fraction of operations",
                false,
                PanelKind::Lines { series, log_x: true },
            )
        }
    }
}

/// A figure: a title and panels laid out `cols` wide.
#[derive(Clone, Debug)]
pub struct Figure {
    pub title: String,
    pub cols: usize,
    pub panels: Vec<Panel>,
}

const PANEL_W: u32 = 680;
const PANEL_H: u32 = 460;
const TITLE_H: u32 = 50;

/// Format a number compactly with at most 3 significant digits: 0.8, 12.3, 150, 2k, 1.5M.
pub fn fmt_num(v: f64) -> String {
    fn sig3(x: f64) -> String {
        let a = x.abs();
        let decimals = if a >= 100.0 {
            0
        } else if a >= 10.0 {
            1
        } else if a >= 1.0 {
            2
        } else {
            (2 - a.log10().floor() as i32).clamp(0, 6) as usize
        };
        let s = format!("{x:.decimals$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e9 {
        format!("{}G", sig3(v / 1e9))
    } else if a >= 1e6 {
        format!("{}M", sig3(v / 1e6))
    } else if a >= 1e3 {
        format!("{}k", sig3(v / 1e3))
    } else if a >= 1e-3 {
        sig3(v)
    } else {
        format!("{v:.0e}")
    }
}

/// Size in pixels of a figure.
pub fn size(fig: &Figure) -> (u32, u32) {
    let cols = fig.cols.max(1).min(fig.panels.len().max(1));
    let rows = fig.panels.len().div_ceil(fig.cols.max(1)).max(1);
    (PANEL_W * cols as u32, PANEL_H * rows as u32 + TITLE_H)
}

/// Write `STEM.png` and `STEM.svg`; returns the two paths.
pub fn render(fig: &Figure, stem: &Path) -> Result<Vec<PathBuf>, String> {
    init_fonts()?;
    let fig = Figure { cols: fig.cols.max(1).min(fig.panels.len().max(1)), ..fig.clone() };
    let dims = size(&fig);
    let png = stem.with_extension("png");
    let svg = stem.with_extension("svg");
    if let Some(d) = stem.parent() {
        std::fs::create_dir_all(d).map_err(|x| format!("{}: {x}", d.display()))?;
    }
    draw::draw_figure(BitMapBackend::new(&png, dims).into_drawing_area(), &fig)?;
    draw::draw_figure(SVGBackend::new(&svg, dims).into_drawing_area(), &fig)?;
    Ok(vec![png, svg])
}

/// A legend label for a record's engine and setting.
pub fn series_label(r: &crate::report::Record) -> String {
    let mut parts = Vec::new();
    if r.mode != "-" {
        parts.push(r.mode.clone());
    }
    if r.latency != "-" && r.latency != "none" {
        parts.push(r.latency.clone());
    }
    if parts.is_empty() {
        r.engine.clone()
    } else {
        format!("{} [{}]", r.engine, parts.join(", "))
    }
}

/// Colour index of an engine: its position in the full engine list.
pub fn engine_color(name: &str) -> usize {
    crate::engines::all().iter().position(|e| e.name() == name).unwrap_or(9)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Series that arrive with one colour (names outside the engine list all map to the
    /// same grey, as `reproduce mangosteen`'s did) are drawn in distinct colours and with
    /// distinct markers, and a title too long for its panel is shrunk to fit, not cut.
    #[test]
    fn series_differ_by_colour_and_marker_and_titles_fit() {
        let dir = tempfile::tempdir().unwrap();
        let long = "Fig. 6: a title far too long for the width of one panel of this figure, \
                    which was cut at both of its edges before";
        let bars = (0..4)
            .map(|i| Bars { name: format!("bars {i}"), color: 9, values: vec![Some(10.0 + i as f64), Some(20.0)] })
            .collect();
        let lines = (0..4)
            .map(|i| Line {
                name: format!("line {i}"),
                color: 9,
                dashed: false,
                points: vec![(1.0, i as f64 + 1.0), (2.0, i as f64 + 3.0)],
            })
            .collect();
        let fig = Figure {
            title: "figure".into(),
            cols: 2,
            panels: vec![
                Panel::new(
                    long,
                    "x",
                    "y",
                    false,
                    PanelKind::Bars { categories: vec!["a".into(), "b".into()], series: bars },
                ),
                Panel::new("lines", "x", "y", false, PanelKind::Lines { series: lines, log_x: false }),
            ],
        };
        let files = render(&fig, &dir.path().join("f")).unwrap();
        let svg = std::fs::read_to_string(files.iter().find(|f| f.extension().unwrap() == "svg").unwrap()).unwrap();
        let used = PALETTE.iter().filter(|(r, g, b)| svg.contains(&format!("#{r:02X}{g:02X}{b:02X}"))).count();
        assert!(used >= 4, "{used} palette colours in the SVG");
        // Markers: polygons of distinct shapes (their outlines about their first point).
        let mut shapes = std::collections::BTreeSet::new();
        for p in svg.split("<polygon").skip(1) {
            let pts: Vec<(i64, i64)> = p
                .split("points=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .split_whitespace()
                .filter_map(|xy| xy.split_once(',').map(|(x, y)| (x.parse::<f64>().ok(), y.parse::<f64>().ok())))
                .filter_map(|(x, y)| Some((x? as i64, y? as i64)))
                .collect();
            let (x0, y0) = pts[0];
            shapes.insert(pts.iter().map(|(x, y)| (x - x0, y - y0)).collect::<Vec<_>>());
        }
        assert!(shapes.len() >= 4, "{} marker shapes", shapes.len());
        // The whole title is drawn (in one <text> element, whose font size precedes it).
        let at = svg.find(long).expect("the long title is drawn whole");
        let head = &svg[..at];
        let size = &head[head.rfind("font-size=\"").unwrap() + 11..];
        let size: f64 = size[..size.find('"').unwrap()].parse().unwrap();
        assert!(size < 19.0, "the long title keeps the full size, so its edges are cut: {size}");
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(fmt_num(0.8), "0.8");
        assert_eq!(fmt_num(20.0), "20");
        assert_eq!(fmt_num(3.64), "3.64");
        assert_eq!(fmt_num(150.0), "150");
        assert_eq!(fmt_num(2000.0), "2k");
        assert_eq!(fmt_num(12_345.0), "12.3k");
        assert_eq!(fmt_num(1.5e6), "1.5M");
        assert_eq!(fmt_num(0.0002), "2e-4");
        assert_eq!(fmt_num(0.05), "0.05");
    }
}
