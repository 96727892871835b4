//! Plots (SPEC U5) with plotters: PNG (bitmap backend) and SVG of every figure, with
//! titles, axis units and legends. Grouped bar charts (per operation / workload), line
//! charts (throughput vs threads, time vs records) and latency CDFs.
//!
//! Text is rendered with plotters' `ab_glyph` feature from a TrueType font loaded at run
//! time — no fontconfig or FreeType needed, so plots work headless. The font is the first
//! found of: `$PMKV_FONT`, DejaVu Sans from Debian's `fonts-dejavu-core`
//! (`/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf`), Liberation Sans, FreeSans, or any
//! other `*.ttf` under `/usr/share/fonts` or `/usr/local/share/fonts`.

pub mod run;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::register_font;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const FONT: &str = "sans-serif";

/// Tableau 10: distinguishable, colour-blind-friendlier than the primaries.
const PALETTE: [(u8, u8, u8); 10] = [
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

/// Find and register the font once per process; returns its path.
pub fn init_fonts() -> Result<PathBuf, String> {
    static DONE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let path = find_font().ok_or_else(|| {
            "no TrueType font found for plot text: install Debian's fonts-dejavu-core \
             (apt-get install fonts-dejavu-core) or set PMKV_FONT=/path/to/font.ttf"
                .to_string()
        })?;
        register(&path, FontStyle::Normal)?;
        let bold = path.with_file_name(
            path.file_stem().and_then(|s| s.to_str()).map(|s| format!("{s}-Bold.ttf")).unwrap_or_default(),
        );
        if bold.is_file() {
            let _ = register(&bold, FontStyle::Bold);
        }
        Ok(path)
    })
    .clone()
}

fn register(path: &Path, style: FontStyle) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // plotters keeps fonts for the whole process and wants 'static bytes: one leak per
    // process (at most two fonts).
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    register_font(FONT, style, bytes).map_err(|_| format!("{}: not a usable TrueType font", path.display()))
}

fn find_font() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PMKV_FONT").map(PathBuf::from).filter(|p| p.is_file()) {
        return Some(p);
    }
    let known = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf",
        "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    ];
    if let Some(p) = known.iter().map(PathBuf::from).find(|p| p.is_file()) {
        return Some(p);
    }
    let mut found = Vec::new();
    for root in ["/usr/share/fonts", "/usr/local/share/fonts"] {
        walk(Path::new(root), &mut found, 0);
    }
    found.sort();
    let score = |p: &PathBuf| {
        let n = p.file_name().and_then(|s| s.to_str()).unwrap_or("").to_ascii_lowercase();
        (!n.contains("sans"), n.contains("mono") || n.contains("bold") || n.contains("italic") || n.contains("oblique"))
    };
    found.into_iter().min_by_key(score)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 4 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out, depth + 1);
        } else if p.extension().is_some_and(|x| x.eq_ignore_ascii_case("ttf")) {
            out.push(p);
        }
    }
}

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

/// An axis: the plotted range and tick positions, in plot space (log10 for log axes).
struct Axis {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
    log: bool,
}

impl Axis {
    /// Axis covering `[min, max]` of the data, with headroom above.
    fn new(min: f64, max: f64, log: bool, from_zero: bool, headroom: f64) -> Axis {
        if log {
            let min = if min > 0.0 { min } else { max.max(1e-9) / 10.0 };
            let max = max.max(min * 1.0001);
            let lo = min.log10().floor();
            let hi = max.log10() + headroom * (max.log10() - lo).max(1.0);
            let mut ticks = Vec::new();
            let mut e = lo;
            while e <= hi.ceil() {
                for m in [1.0, 2.0, 5.0] {
                    let t = e + f64::log10(m);
                    if t >= lo - 1e-9 && t <= hi + 1e-9 {
                        ticks.push(t);
                    }
                }
                e += 1.0;
            }
            // Too many ticks over many decades: keep the powers of ten.
            if ticks.len() > 12 {
                ticks.retain(|t| (t - t.round()).abs() < 1e-9);
            }
            Axis { lo, hi, ticks, log }
        } else {
            let lo = if from_zero { 0.0f64.min(min) } else { min };
            let span = (max - lo).max(1e-12);
            let hi = max + span * headroom;
            let raw = (hi - lo) / 6.0;
            let mag = 10f64.powf(raw.log10().floor());
            let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
            let mut ticks = Vec::new();
            let mut t = (lo / step).ceil() * step;
            while t <= hi + 1e-9 * step {
                ticks.push(t);
                t += step;
            }
            Axis { lo, hi, ticks, log }
        }
    }

    fn map(&self, v: f64) -> f64 {
        if self.log {
            v.max(1e-300).log10()
        } else {
            v
        }
    }

    fn label(&self, p: f64) -> String {
        fmt_num(if self.log { 10f64.powf(p) } else { p })
    }
}

/// A linear f64 axis whose ticks are exactly [`Axis::ticks`] (plotters' own f64 axis picks
/// its ticks itself, and its key-point decorator loses label formatting).
#[derive(Clone)]
struct Ticked {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = (self.hi - self.lo).max(1e-300);
        let r = (v - self.lo) / span;
        limit.0 + (r * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, _hint: H) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

impl Axis {
    fn coord(&self) -> Ticked {
        Ticked { lo: self.lo, hi: self.hi, ticks: self.ticks.clone() }
    }
}

fn e<E: std::fmt::Debug>(x: E) -> String {
    format!("plot: {x:?}")
}

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &Panel) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let values: Vec<f64> = match &p.kind {
        PanelKind::Bars { series, .. } => series.iter().flat_map(|s| s.values.iter().flatten().copied()).collect(),
        PanelKind::Lines { series, .. } => series.iter().flat_map(|s| s.points.iter().map(|q| q.1)).collect(),
    };
    let ymin = values.iter().copied().filter(|v| !p.log_y || *v > 0.0).fold(f64::INFINITY, f64::min);
    let ymax = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (ymin, ymax) = if ymin.is_finite() && ymax.is_finite() { (ymin, ymax) } else { (0.0, 1.0) };
    let nseries = match &p.kind {
        PanelKind::Bars { series, .. } => series.len(),
        PanelKind::Lines { series, .. } => series.len(),
    };
    // Room above the data for the legend.
    let headroom = 0.12 + 0.075 * nseries as f64;
    let y = match p.y_range {
        Some((lo, hi)) if !p.log_y => {
            let mut a = Axis::new(lo, hi, false, true, 0.0);
            a.lo = lo;
            a.hi = hi + (hi - lo) * 0.02;
            a
        }
        _ => Axis::new(ymin, ymax, p.log_y, true, headroom),
    };
    let (x, cats) = match &p.kind {
        PanelKind::Bars { categories, .. } => {
            let n = categories.len().max(1) as f64;
            (
                Axis { lo: 0.0, hi: n, ticks: (0..categories.len()).map(|i| i as f64 + 0.5).collect(), log: false },
                Some(categories),
            )
        }
        PanelKind::Lines { series, log_x } => {
            let xs: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|q| q.0)).collect();
            let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let (lo, hi) = if lo.is_finite() && hi > lo {
                (lo, hi)
            } else if lo.is_finite() {
                (lo * 0.5, lo * 1.5 + 1.0)
            } else {
                (0.0, 1.0)
            };
            let mut a = Axis::new(lo, hi, *log_x, false, 0.0);
            if *log_x {
                let d = (hi.log10() - lo.log10()).max(0.3) * 0.06;
                a.lo = lo.log10() - d;
                a.hi = hi.log10() + d;
                a.ticks = distinct_ticks(&xs, true).unwrap_or(a.ticks);
            } else {
                let d = (hi - lo) * 0.04;
                a.lo = lo - d;
                a.hi = hi + d;
                if let Some(t) = distinct_ticks(&xs, false) {
                    a.ticks = t;
                }
            }
            (a, None)
        }
    };
    let label_style = (FONT, 14).into_font();
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, (FONT, 19).into_font())
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x.coord(), y.coord())
        .map_err(e)?;
    let xfmt = |v: &f64| match cats {
        Some(c) => c.get(v.floor().max(0.0) as usize).cloned().unwrap_or_default(),
        None => x.label(*v),
    };
    let yfmt = |v: &f64| y.label(*v);
    chart
        .configure_mesh()
        .x_desc(&p.x_label)
        .y_desc(&p.y_label)
        .x_label_formatter(&xfmt)
        .y_label_formatter(&yfmt)
        .label_style(label_style.clone())
        .axis_desc_style((FONT, 15).into_font())
        .bold_line_style(RGBColor(220, 220, 220))
        .light_line_style(TRANSPARENT)
        .disable_x_mesh()
        .draw()
        .map_err(e)?;
    match &p.kind {
        PanelKind::Bars { categories, series } => {
            let ns = series.len().max(1) as f64;
            let pad = 0.12;
            let w = (1.0 - 2.0 * pad) / ns;
            let base = y.lo;
            let show_values = categories.len() * series.len() <= 24;
            for (si, s) in series.iter().enumerate() {
                let c = color(s.color);
                let rects = s.values.iter().enumerate().filter_map(|(ci, v)| {
                    let v = (*v)?;
                    let x0 = ci as f64 + pad + si as f64 * w;
                    Some(Rectangle::new([(x0, base), (x0 + w * 0.92, y.map(v).max(base))], c.filled()))
                });
                chart
                    .draw_series(rects)
                    .map_err(e)?
                    .label(s.name.clone())
                    .legend(move |(px, py)| Rectangle::new([(px, py - 6), (px + 14, py + 6)], c.filled()));
                if show_values {
                    let style = TextStyle::from((FONT, 11).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
                    let texts = s.values.iter().enumerate().filter_map(|(ci, v)| {
                        let v = (*v)?;
                        let xc = ci as f64 + pad + si as f64 * w + w * 0.46;
                        Some(Text::new(fmt_num(v), (xc, y.map(v).max(base)), style.clone()))
                    });
                    chart.draw_series(texts).map_err(e)?;
                }
            }
        }
        PanelKind::Lines { series, .. } => {
            for s in series {
                let c = color(s.color);
                let pts: Vec<(f64, f64)> = s.points.iter().map(|&(a, b)| (x.map(a), y.map(b))).collect();
                let style = c.stroke_width(2);
                if s.dashed {
                    chart
                        .draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))
                        .map_err(e)?
                        .label(s.name.clone())
                        .legend(move |(px, py)| {
                            DashedPathElement::new(vec![(px, py), (px + 22, py)], 6, 4, c.stroke_width(2))
                        });
                } else {
                    chart
                        .draw_series(LineSeries::new(pts.clone(), style))
                        .map_err(e)?
                        .label(s.name.clone())
                        .legend(move |(px, py)| PathElement::new(vec![(px, py), (px + 20, py)], c.stroke_width(2)));
                }
                if pts.len() <= 12 {
                    chart.draw_series(pts.iter().map(|&q| Circle::new(q, 3, c.filled()))).map_err(e)?;
                }
            }
        }
    }
    chart
        .configure_series_labels()
        .position(if p.y_range.is_some() { SeriesLabelPosition::LowerRight } else { SeriesLabelPosition::UpperLeft })
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(160, 160, 160))
        .label_font((FONT, 13).into_font())
        .draw()
        .map_err(e)?;
    Ok(())
}

/// Ticks at the data's x values when there are few of them (threads, record counts).
fn distinct_ticks(xs: &[f64], log: bool) -> Option<Vec<f64>> {
    let mut v: Vec<f64> = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v.dedup();
    if v.is_empty() || v.len() > 10 {
        return None;
    }
    Some(v.into_iter().map(|x| if log { x.log10() } else { x }).collect())
}

fn draw_figure<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, fig: &Figure) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(e)?;
    let root = root.titled(&fig.title, (FONT, 24).into_font()).map_err(e)?;
    let cols = fig.cols.max(1);
    let rows = fig.panels.len().div_ceil(cols).max(1);
    let areas = root.split_evenly((rows, cols));
    for (p, a) in fig.panels.iter().zip(areas.iter()) {
        draw_panel(a, p)?;
    }
    root.present().map_err(e)?;
    Ok(())
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
    draw_figure(BitMapBackend::new(&png, dims).into_drawing_area(), &fig)?;
    draw_figure(SVGBackend::new(&svg, dims).into_drawing_area(), &fig)?;
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
    use super::fmt_num;

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
