//! Drawing figures with plotters: a figure's panels side by side, each with its axes, bars
//! or lines, and legend.

use super::axis::{x_axis, y_axis, Axis, Ticked};
use super::{color, fmt_num, Bars, Figure, Line, Panel, PanelKind, FONT};
use plotters::coord::{cartesian::Cartesian2d, Shift};
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// A panel's chart: plotters' context over the two ticked axes.
type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<Ticked, Ticked>>;

fn e<E: std::fmt::Debug>(x: E) -> String {
    format!("plot: {x:?}")
}

pub(super) fn draw_figure<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, fig: &Figure) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(e)?;
    let (title, size) = fit(&root, &fig.title, 24, root.dim_in_pixel().0.saturating_sub(16));
    let root = root.titled(&title, (FONT, size).into_font()).map_err(e)?;
    let cols = fig.cols.max(1);
    let rows = fig.panels.len().div_ceil(cols).max(1);
    let areas = root.split_evenly((rows, cols));
    for (p, a) in fig.panels.iter().zip(areas.iter()) {
        draw_panel(a, p)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &Panel) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let (x, y) = (x_axis(p), y_axis(p));
    let cats = match &p.kind {
        PanelKind::Bars { categories, .. } => Some(categories),
        PanelKind::Lines { .. } => None,
    };
    let (title, size) = fit(area, &p.title, 19, area.dim_in_pixel().0.saturating_sub(24));
    let mut chart = ChartBuilder::on(area)
        .caption(&title, (FONT, size).into_font())
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
        .label_style((FONT, 14).into_font())
        .axis_desc_style((FONT, 15).into_font())
        .bold_line_style(RGBColor(220, 220, 220))
        .light_line_style(TRANSPARENT)
        .disable_x_mesh()
        .draw()
        .map_err(e)?;
    match &p.kind {
        PanelKind::Bars { categories, series } => draw_bars(&mut chart, categories.len(), &distinct(series), &y)?,
        PanelKind::Lines { series, .. } => draw_lines(&mut chart, &distinct(series), &x, &y)?,
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

/// `text` in the largest font size up to `max` whose rendering fits `width` pixels (down to
/// 10 px), cut with "…" if even that is too wide: a title is never clipped at the edges.
fn fit<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, text: &str, max: u32, width: u32) -> (String, u32) {
    let fits = |t: &str, size: u32| {
        area.estimate_text_size(t, &TextStyle::from((FONT, size).into_font())).is_ok_and(|(w, _)| w <= width)
    };
    if let Some(size) = (10..=max).rev().find(|&s| fits(text, s)) {
        return (text.to_string(), size);
    }
    let chars: Vec<char> = text.chars().collect();
    let cut = (1..chars.len()).rev().map(|n| chars[..n].iter().collect::<String>() + "…").find(|t| fits(t, 10));
    (cut.unwrap_or_default(), 10)
}

/// A panel's series with colours made distinct: a series whose colour an earlier one has
/// (two settings of one engine, or names outside the engine list, which all map to one
/// grey) gets the first palette colour no series of the panel uses. Together with the
/// marker of its position ([`marker_points`]), series then differ by colour and by shape, so a
/// plot still reads in grey print or for a reader who confuses two colours.
fn distinct<T: Clone + Colored>(series: &[T]) -> Vec<T> {
    let mut used: Vec<usize> = Vec::new();
    let mut out = series.to_vec();
    let all: Vec<usize> = series.iter().map(Colored::color).collect();
    for s in out.iter_mut() {
        let c = s.color();
        if used.contains(&c) {
            let free = (0..super::PALETTE.len()).find(|i| !used.contains(i) && !all.contains(i));
            let free = free.or_else(|| (0..super::PALETTE.len()).find(|i| !used.contains(i)));
            if let Some(f) = free {
                s.set_color(f);
            }
        }
        used.push(s.color());
    }
    out
}

/// A series with a palette colour.
trait Colored {
    fn color(&self) -> usize;
    fn set_color(&mut self, c: usize);
}

impl Colored for Bars {
    fn color(&self) -> usize {
        self.color
    }
    fn set_color(&mut self, c: usize) {
        self.color = c;
    }
}

impl Colored for Line {
    fn color(&self) -> usize {
        self.color
    }
    fn set_color(&mut self, c: usize) {
        self.color = c;
    }
}

/// How many marker shapes there are.
pub(super) const MARKERS: usize = 7;

/// The outline of marker `i` (mod [`MARKERS`]) of radius `r`, in pixels around its centre:
/// circle, square, triangle, diamond, inverted triangle, plus, hexagon.
pub(super) fn marker_points(i: usize, r: i32) -> Vec<(i32, i32)> {
    let ring = |n: usize, phase: f64| -> Vec<(i32, i32)> {
        (0..n)
            .map(|k| {
                let a = phase + k as f64 * std::f64::consts::TAU / n as f64;
                ((r as f64 * a.cos()).round() as i32, (r as f64 * a.sin()).round() as i32)
            })
            .collect()
    };
    let t = r / 3 + 1;
    match i % MARKERS {
        0 => ring(12, 0.0),
        1 => vec![(-r + 1, -r + 1), (r - 1, -r + 1), (r - 1, r - 1), (-r + 1, r - 1)],
        2 => vec![(0, -r), (r, r - 1), (-r, r - 1)],
        3 => vec![(0, -r), (r, 0), (0, r), (-r, 0)],
        4 => vec![(0, r), (r, -r + 1), (-r, -r + 1)],
        5 => vec![
            (-t, -r),
            (t, -r),
            (t, -t),
            (r, -t),
            (r, t),
            (t, t),
            (t, r),
            (-t, r),
            (-t, t),
            (-r, t),
            (-r, -t),
            (-t, -t),
        ],
        _ => ring(6, std::f64::consts::FRAC_PI_6),
    }
}

/// Grouped bars: series `si` is bar `si` of every category's group; values above the bars
/// when there are few of them.
fn draw_bars<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    ncats: usize,
    series: &[Bars],
    y: &Axis,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let ns = series.len().max(1) as f64;
    let pad = 0.12;
    let w = (1.0 - 2.0 * pad) / ns;
    let base = y.lo;
    let show_values = ncats * series.len() <= 24;
    for (si, s) in series.iter().enumerate() {
        let c = color(s.color);
        let rects = s.values.iter().enumerate().filter_map(|(ci, v)| {
            let v = (*v)?;
            let x0 = ci as f64 + pad + si as f64 * w;
            Some(Rectangle::new([(x0, base), (x0 + w * 0.92, y.map(v).max(base))], c.filled()))
        });
        chart.draw_series(rects).map_err(e)?.label(s.name.clone()).legend(move |(px, py)| {
            EmptyElement::at((px, py))
                + Rectangle::new([(0, -7), (16, 7)], c.filled())
                + Polygon::new(
                    marker_points(si, 4).into_iter().map(|(a, b)| (a + 8, b)).collect::<Vec<_>>(),
                    WHITE.filled(),
                )
        });
        // The series' marker in white just inside the top of each bar.
        let marks = s.values.iter().enumerate().filter_map(|(ci, v)| {
            let v = (*v)?;
            let xc = ci as f64 + pad + si as f64 * w + w * 0.46;
            Some(
                EmptyElement::at((xc, y.map(v).max(base)))
                    + Polygon::new(
                        marker_points(si, 4).into_iter().map(|(a, b)| (a, b + 7)).collect::<Vec<_>>(),
                        WHITE.filled(),
                    ),
            )
        });
        chart.draw_series(marks).map_err(e)?;
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
    Ok(())
}

/// Lines, solid or dashed, with a dot on each point when there are few.
fn draw_lines<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    series: &[Line],
    x: &Axis,
    y: &Axis,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    for (si, s) in series.iter().enumerate() {
        let c = color(s.color);
        let pts: Vec<(f64, f64)> = s.points.iter().map(|&(a, b)| (x.map(a), y.map(b))).collect();
        let style = c.stroke_width(2);
        if s.dashed {
            chart
                .draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))
                .map_err(e)?
                .label(s.name.clone())
                .legend(move |(px, py)| {
                    EmptyElement::at((px, py))
                        + DashedPathElement::new(vec![(0, 0), (22, 0)], 6, 4, c.stroke_width(2))
                        + Polygon::new(
                            marker_points(si, 4).into_iter().map(|(a, b)| (a + 11, b)).collect::<Vec<_>>(),
                            c.filled(),
                        )
                });
        } else {
            chart.draw_series(LineSeries::new(pts.clone(), style)).map_err(e)?.label(s.name.clone()).legend(
                move |(px, py)| {
                    EmptyElement::at((px, py))
                        + PathElement::new(vec![(0, 0), (22, 0)], c.stroke_width(2))
                        + Polygon::new(
                            marker_points(si, 4).into_iter().map(|(a, b)| (a + 11, b)).collect::<Vec<_>>(),
                            c.filled(),
                        )
                },
            );
        }
        // The series' marker on its points (on every n-th of a long line: at most 12).
        let every = pts.len().div_ceil(12).max(1);
        chart
            .draw_series(
                pts.iter()
                    .step_by(every)
                    .map(|&q| EmptyElement::at(q) + Polygon::new(marker_points(si, 4), c.filled())),
            )
            .map_err(e)?;
    }
    Ok(())
}
