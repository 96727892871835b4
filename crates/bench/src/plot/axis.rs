//! Axes: the plotted range and ticks of a panel's x and y, chosen from its data.

use super::{fmt_num, Panel, PanelKind};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::Ranged;
use std::ops::Range;

/// An axis: the plotted range and tick positions, in plot space (log10 for log axes).
pub(super) struct Axis {
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) ticks: Vec<f64>,
    pub(super) log: bool,
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

    pub(super) fn map(&self, v: f64) -> f64 {
        if self.log {
            v.max(1e-300).log10()
        } else {
            v
        }
    }

    pub(super) fn label(&self, p: f64) -> String {
        fmt_num(if self.log { 10f64.powf(p) } else { p })
    }
}

/// A linear f64 axis whose ticks are exactly [`Axis::ticks`] (plotters' own f64 axis picks
/// its ticks itself, and its key-point decorator loses label formatting).
#[derive(Clone)]
pub(super) struct Ticked {
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
    pub(super) fn coord(&self) -> Ticked {
        Ticked { lo: self.lo, hi: self.hi, ticks: self.ticks.clone() }
    }
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

/// The y axis of a panel: its fixed range, else the data's with room above for the legend.
pub(super) fn y_axis(p: &Panel) -> Axis {
    let (values, nseries): (Vec<f64>, usize) = match &p.kind {
        PanelKind::Bars { series, .. } => {
            (series.iter().flat_map(|s| s.values.iter().flatten().copied()).collect(), series.len())
        }
        PanelKind::Lines { series, .. } => {
            (series.iter().flat_map(|s| s.points.iter().map(|q| q.1)).collect(), series.len())
        }
    };
    let ymin = values.iter().copied().filter(|v| !p.log_y || *v > 0.0).fold(f64::INFINITY, f64::min);
    let ymax = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (ymin, ymax) = if ymin.is_finite() && ymax.is_finite() { (ymin, ymax) } else { (0.0, 1.0) };
    // Room above the data for the legend.
    let headroom = 0.12 + 0.075 * nseries as f64;
    match p.y_range {
        Some((lo, hi)) if !p.log_y => {
            let mut a = Axis::new(lo, hi, false, true, 0.0);
            a.lo = lo;
            a.hi = hi + (hi - lo) * 0.02;
            a
        }
        _ => Axis::new(ymin, ymax, p.log_y, true, headroom),
    }
}

/// The x axis of a panel: one slot per category for bars; for lines the data's range with
/// a margin, ticked at the data's x values when there are few.
pub(super) fn x_axis(p: &Panel) -> Axis {
    let (series, log_x) = match &p.kind {
        PanelKind::Bars { categories, .. } => {
            let n = categories.len().max(1) as f64;
            return Axis { lo: 0.0, hi: n, ticks: (0..categories.len()).map(|i| i as f64 + 0.5).collect(), log: false };
        }
        PanelKind::Lines { series, log_x } => (series, *log_x),
    };
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
    let mut a = Axis::new(lo, hi, log_x, false, 0.0);
    if log_x {
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
    a
}
