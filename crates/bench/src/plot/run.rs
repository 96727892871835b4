//! Plots of `pmkv bench run`: ns/op per operation, Mops/s against threads, sweeps as lines,
//! latency CDFs.

use super::{engine_color, series_label, Bars, Figure, Line, Panel, PanelKind};
use crate::plot;
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

/// What every figure of a run reads: the records without errors, and the thread counts,
/// operations and series (legend labels) among them, in order of appearance.
struct Run<'a> {
    ok: Vec<&'a Record>,
    threads: Vec<usize>,
    ops: Vec<String>,
    series: Vec<String>,
    workload: &'a str,
}

impl<'a> Run<'a> {
    fn new(records: &'a [Record], workload: &'a str) -> Run<'a> {
        let ok: Vec<&Record> = records.iter().filter(|r| r.error.is_none()).collect();
        let threads = uniq(ok.iter().map(|r| r.threads));
        let ops = uniq(ok.iter().map(|r| r.op.clone()));
        let mut run = Run { ok, threads, ops, series: vec![], workload };
        run.series = uniq(run.ok.iter().map(|r| run.label(r)));
        run
    }

    /// A record's legend label; with several thread counts, the count too.
    fn label(&self, r: &Record) -> String {
        if self.threads.len() > 1 {
            format!("{} ×{}", series_label(r), r.threads)
        } else {
            series_label(r)
        }
    }

    /// Grouped bars of `get`: one group per operation, one bar per series; a log axis when
    /// the values spread over more than 30×.
    fn bars_panel(&self, metric: &str, get: fn(&Record) -> f64) -> Panel {
        let bars = self
            .series
            .iter()
            .map(|sname| {
                let first =
                    self.ok.iter().find(|r| &self.label(r) == sname).map(|r| r.engine.clone()).unwrap_or_default();
                Bars {
                    name: sname.clone(),
                    color: engine_color(&first),
                    values: self
                        .ops
                        .iter()
                        .map(|op| self.ok.iter().find(|r| &r.op == op && &self.label(r) == sname).map(|r| get(r)))
                        .collect(),
                }
            })
            .collect::<Vec<_>>();
        let vals: Vec<f64> =
            bars.iter().flat_map(|b| b.values.iter().flatten().copied()).filter(|v| *v > 0.0).collect();
        let spread = vals.iter().copied().fold(0.0, f64::max) / vals.iter().copied().fold(f64::INFINITY, f64::min);
        recolor(Panel::new(
            metric,
            "operation",
            metric,
            spread > 30.0,
            PanelKind::Bars { categories: self.ops.clone(), series: bars },
        ))
    }

    /// A sweep: throughput and p99 latency against the swept value, a line per series.
    fn sweep(&self, out: &Path) -> Result<Vec<PathBuf>, String> {
        let xname = if self.workload.contains("skew") { "Zipf θ" } else { "writes (% of operations)" };
        let mk = |title: &str, ylab: &str, get: fn(&Record) -> f64| Panel {
            title: title.into(),
            x_label: xname.into(),
            y_label: ylab.into(),
            log_y: false,
            y_range: None,
            kind: PanelKind::Lines {
                log_x: false,
                series: numbered_lines(&self.series, |sname| {
                    self.ok.iter().filter(|r| &self.label(r) == sname).map(|r| (r.extra["sweep_x"], get(r))).collect()
                }),
            },
        };
        let fig = Figure {
            title: format!("pmkv bench run --workload {}", self.workload),
            cols: 2,
            panels: vec![
                mk("throughput", "Mops/s", |r| r.mops),
                mk("99th percentile latency", "p99 latency (ns)", |r| r.p99_ns as f64),
            ],
        };
        plot::render(&fig, &out.join("sweep"))
    }

    /// Time per operation: mean ns/op and p99 latency.
    fn ops_figure(&self, out: &Path) -> Result<Vec<PathBuf>, String> {
        self.ops_figure_titled(
            &out.join("ops"),
            &format!("pmkv bench run --workload {}: time per operation", self.workload),
        )
    }

    /// [`Run::ops_figure`] with a title of its own, written to `stem`.
    fn ops_figure_titled(&self, stem: &Path, title: &str) -> Result<Vec<PathBuf>, String> {
        let fig = Figure {
            title: title.into(),
            cols: 2,
            panels: vec![
                self.bars_panel("ns/op (mean)", |r| r.ns_per_op),
                self.bars_panel("p99 latency (ns)", |r| r.p99_ns as f64),
            ],
        };
        plot::render(&fig, stem)
    }

    /// Scalability: Mops/s against threads, a panel per operation, a line per setting.
    fn threads_figure(&self, out: &Path) -> Result<Vec<PathBuf>, String> {
        let base = uniq(self.ok.iter().map(|r| series_label(r)));
        let panels = self
            .ops
            .iter()
            .map(|op| Panel {
                title: format!("{op}: throughput vs threads"),
                x_label: "threads".into(),
                y_label: "Mops/s".into(),
                log_y: false,
                y_range: None,
                kind: PanelKind::Lines {
                    log_x: false,
                    series: numbered_lines(&base, |b| {
                        self.ok
                            .iter()
                            .filter(|r| &r.op == op && &series_label(r) == b)
                            .map(|r| (r.threads as f64, r.mops))
                            .collect()
                    }),
                },
            })
            .collect();
        let title = format!("pmkv bench run --workload {}: scalability", self.workload);
        plot::render(&Figure { title, cols: 2, panels }, &out.join("threads"))
    }

    /// Latency CDFs, a panel per operation.
    fn cdf_figure(&self, out: &Path) -> Result<Vec<PathBuf>, String> {
        let panels = self
            .ops
            .iter()
            .map(|op| {
                Panel::cdf(
                    &format!("{op}: latency CDF"),
                    numbered_lines(&self.series, |sname| {
                        self.ok
                            .iter()
                            .find(|r| &r.op == op && &self.label(r) == sname)
                            .map(|r| r.cdf.iter().map(|&(ns, q)| (ns.max(1) as f64, q)).collect())
                            .unwrap_or_default()
                    })
                    .into_iter()
                    .filter(|l| !l.points.is_empty())
                    .collect(),
                )
            })
            .collect();
        let title = format!("pmkv bench run --workload {}: latency CDF", self.workload);
        plot::render(&Figure { title, cols: 2, panels }, &out.join("latency-cdf"))
    }
}

/// Distinct colours per series when one engine appears in several settings.
fn recolor(mut p: Panel) -> Panel {
    if let PanelKind::Bars { series, .. } = &mut p.kind {
        let engines_n = uniq(series.iter().map(|s| s.color)).len();
        if engines_n < series.len() {
            for (i, s) in series.iter_mut().enumerate() {
                s.color = i;
            }
        }
    }
    p
}

/// The main job's figure of one workload: ns/op and p99 per operation, a bar per engine
/// and mode; written to `stem` (.png and .svg).
pub fn ops_plot(records: &[Record], stem: &Path, title: &str) -> Result<Vec<PathBuf>, String> {
    let run = Run::new(records, "");
    if run.ok.is_empty() {
        return Ok(vec![]);
    }
    run.ops_figure_titled(stem, title)
}

/// Plots of a `run`: ns/op per operation; Mops/s vs threads (several thread counts);
/// sweeps as lines; latency CDFs.
pub fn plot_run(records: &[Record], out: &Path, workload: &str) -> Result<Vec<PathBuf>, String> {
    let run = Run::new(records, workload);
    if run.ok.is_empty() {
        return Ok(vec![]);
    }
    if run.ok.iter().any(|r| r.extra.contains_key("sweep_x")) {
        return run.sweep(out);
    }
    let mut files = run.ops_figure(out)?;
    if run.threads.len() > 1 {
        files.extend(run.threads_figure(out)?);
    }
    if run.ok.iter().any(|r| !r.cdf.is_empty()) {
        files.extend(run.cdf_figure(out)?);
    }
    Ok(files)
}
