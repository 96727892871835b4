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

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &Panel) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let (x, y) = (x_axis(p), y_axis(p));
    let cats = match &p.kind {
        PanelKind::Bars { categories, .. } => Some(categories),
        PanelKind::Lines { .. } => None,
    };
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
        .label_style((FONT, 14).into_font())
        .axis_desc_style((FONT, 15).into_font())
        .bold_line_style(RGBColor(220, 220, 220))
        .light_line_style(TRANSPARENT)
        .disable_x_mesh()
        .draw()
        .map_err(e)?;
    match &p.kind {
        PanelKind::Bars { categories, series } => draw_bars(&mut chart, categories.len(), series, &y)?,
        PanelKind::Lines { series, .. } => draw_lines(&mut chart, series, &x, &y)?,
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

/// Grouped bars: series `si` is bar `si` of every category's group; values above the bars
/// when there are few of them.
fn draw_bars<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
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
    Ok(())
}

/// Lines, solid or dashed, with a dot on each point when there are few.
fn draw_lines<DB: DrawingBackend>(chart: &mut Chart<'_, DB>, series: &[Line], x: &Axis, y: &Axis) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    for s in series {
        let c = color(s.color);
        let pts: Vec<(f64, f64)> = s.points.iter().map(|&(a, b)| (x.map(a), y.map(b))).collect();
        let style = c.stroke_width(2);
        if s.dashed {
            chart
                .draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))
                .map_err(e)?
                .label(s.name.clone())
                .legend(move |(px, py)| DashedPathElement::new(vec![(px, py), (px + 22, py)], 6, 4, c.stroke_width(2)));
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
    Ok(())
}
