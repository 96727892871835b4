//! Plots of `pmkv bench run`: ns/op per operation, Mops/s against threads, sweeps as lines,
//! latency CDFs.

use super::{self as plot, engine_color, series_label, Bars, Figure, Line, Panel, PanelKind};
use crate::report::Record;
use std::path::{Path, PathBuf};

/// One solid line per series name, coloured by its position, with the points `points`
/// gives for the name.
fn numbered_lines(names: &[String], mut points: impl FnMut(&String) -> Vec<(f64, f64)>) -> Vec<Line> {
    names
        .iter()
        .enumerate()
        .map(|(i, name)| Line { name: name.clone(), color: i, dashed: false, points: points(name) })
        .collect()
}

pub(crate) fn uniq<T: PartialEq + Clone>(v: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// Plots of a `run`: ns/op per operation; Mops/s vs threads (several thread counts);
/// sweeps as lines; latency CDFs.
pub fn plot_run(records: &[Record], out: &Path, workload: &str) -> std::result::Result<Vec<PathBuf>, String> {
    let ok: Vec<&Record> = records.iter().filter(|r| r.error.is_none()).collect();
    if ok.is_empty() {
        return Ok(vec![]);
    }
    let mut files = Vec::new();
    let threads = uniq(ok.iter().map(|r| r.threads));
    let label = |r: &Record| {
        if threads.len() > 1 {
            format!("{} ×{}", series_label(r), r.threads)
        } else {
            series_label(r)
        }
    };
    let sweep = ok.iter().any(|r| r.extra.contains_key("sweep_x"));
    let ops = uniq(ok.iter().map(|r| r.op.clone()));
    let series = uniq(ok.iter().map(|r| label(r)));
    let panel = |metric: &str, get: fn(&Record) -> f64| -> Panel {
        let bars = series
            .iter()
            .map(|sname| {
                let first = ok.iter().find(|r| &label(r) == sname).map(|r| r.engine.clone()).unwrap_or_default();
                Bars {
                    name: sname.clone(),
                    color: engine_color(&first),
                    values: ops
                        .iter()
                        .map(|op| ok.iter().find(|r| &r.op == op && &label(r) == sname).map(|r| get(r)))
                        .collect(),
                }
            })
            .collect::<Vec<_>>();
        let vals: Vec<f64> =
            bars.iter().flat_map(|b| b.values.iter().flatten().copied()).filter(|v| *v > 0.0).collect();
        let spread = vals.iter().copied().fold(0.0, f64::max) / vals.iter().copied().fold(f64::INFINITY, f64::min);
        Panel::new(
            metric,
            "operation",
            metric,
            spread > 30.0,
            PanelKind::Bars { categories: ops.clone(), series: bars },
        )
    };
    // Distinct colours per series when one engine appears in several settings.
    let recolor = |mut p: Panel| {
        if let PanelKind::Bars { series, .. } = &mut p.kind {
            let engines_n = uniq(series.iter().map(|s| s.color)).len();
            if engines_n < series.len() {
                for (i, s) in series.iter_mut().enumerate() {
                    s.color = i;
                }
            }
        }
        p
    };
    if sweep {
        let xname = if workload.contains("skew") { "Zipf θ" } else { "writes (% of operations)" };
        let base_series = uniq(ok.iter().map(|r| label(r)));
        let mk = |title: &str, ylab: &str, get: fn(&Record) -> f64| Panel {
            title: title.into(),
            x_label: xname.into(),
            y_label: ylab.into(),
            log_y: false,
            y_range: None,
            kind: PanelKind::Lines {
                log_x: false,
                series: numbered_lines(&base_series, |sname| {
                    ok.iter().filter(|r| &label(r) == sname).map(|r| (r.extra["sweep_x"], get(r))).collect()
                }),
            },
        };
        let fig = Figure {
            title: format!("pmkv bench run --workload {workload}"),
            cols: 2,
            panels: vec![
                mk("throughput", "Mops/s", |r| r.mops),
                mk("99th percentile latency", "p99 latency (ns)", |r| r.p99_ns as f64),
            ],
        };
        files.extend(plot::render(&fig, &out.join("sweep"))?);
        return Ok(files);
    }
    let fig = Figure {
        title: format!("pmkv bench run --workload {workload}: time per operation"),
        cols: 2,
        panels: vec![
            recolor(panel("ns/op (mean)", |r| r.ns_per_op)),
            recolor(panel("p99 latency (ns)", |r| r.p99_ns as f64)),
        ],
    };
    files.extend(plot::render(&fig, &out.join("ops"))?);
    if threads.len() > 1 {
        let base = uniq(ok.iter().map(|r| series_label(r)));
        let panels = ops
            .iter()
            .map(|op| Panel {
                title: format!("{op}: throughput vs threads"),
                x_label: "threads".into(),
                y_label: "Mops/s".into(),
                log_y: false,
                y_range: None,
                kind: PanelKind::Lines {
                    log_x: false,
                    series: base
                        .iter()
                        .enumerate()
                        .map(|(i, b)| Line {
                            name: b.clone(),
                            color: i,
                            dashed: false,
                            points: ok
                                .iter()
                                .filter(|r| &r.op == op && &series_label(r) == b)
                                .map(|r| (r.threads as f64, r.mops))
                                .collect(),
                        })
                        .collect(),
                },
            })
            .collect();
        let fig = Figure { title: format!("pmkv bench run --workload {workload}: scalability"), cols: 2, panels };
        files.extend(plot::render(&fig, &out.join("threads"))?);
    }
    if ok.iter().any(|r| !r.cdf.is_empty()) {
        let panels = ops
            .iter()
            .map(|op| {
                Panel::cdf(
                    &format!("{op}: latency CDF"),
                    numbered_lines(&series, |sname| {
                        ok.iter()
                            .find(|r| &r.op == op && &label(r) == sname)
                            .map(|r| r.cdf.iter().map(|&(ns, q)| (ns.max(1) as f64, q)).collect())
                            .unwrap_or_default()
                    })
                    .into_iter()
                    .filter(|l| !l.points.is_empty())
                    .collect(),
                )
            })
            .collect();
        let fig = Figure { title: format!("pmkv bench run --workload {workload}: latency CDF"), cols: 2, panels };
        files.extend(plot::render(&fig, &out.join("latency-cdf"))?);
    }
    Ok(files)
}
