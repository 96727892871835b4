//! HART's figures drawn from the records of a run: one function per figure, each writing
//! PNG and SVG and returning (id, path) pairs for report.md.

use super::*;

/// (figure id, path without extension) of each plot written.
type Plots = Vec<(String, PathBuf)>;

/// Every figure of the run; the first error (no font, say) stops the plotting.
pub(super) fn figures(recs: &[Record], out: &Path, all: &[EngineSpec]) -> std::result::Result<Plots, String> {
    let mut done = Vec::new();
    done.extend(fig4_7(recs, out, all)?);
    done.extend(fig8(recs, out, all)?);
    done.extend(fig9(recs, out, all)?);
    done.extend(fig10(recs, out, all)?);
    done.extend(fig10d_ops(recs, out, all)?);
    done.extend(latency_cdf(recs, out, all)?);
    Ok(done)
}

/// Figs. 4–7: one figure per operation, a panel per workload.
fn fig4_7(recs: &[Record], out: &Path, all: &[EngineSpec]) -> std::result::Result<Plots, String> {
    let mut done = Vec::new();
    let names = ["Insertion", "Search", "Update", "Deletion"];
    let e47 = engine_names(recs, "fig4-7", all);
    for (i, op) in OPS.iter().enumerate() {
        let panels = WORKLOADS
            .iter()
            .enumerate()
            .map(|(j, w)| {
                let t = format!("({}) {}", (b'a' + j as u8) as char, w.name());
                latency_panel(recs, "fig4-7", &e47, w.name(), op, &t, "ns per operation", |r| r.ns_per_op)
            })
            .collect();
        let id = format!("fig{}", 4 + i);
        let fig = Figure {
            title: format!("HART Fig. {}: {} performance (ns/op, 1 thread, adr)", 4 + i, names[i]),
            cols: 3,
            panels,
        };
        plot::render(&fig, &out.join(&id))?;
        done.push((id.clone(), out.join(&id)));
    }
    Ok(done)
}

/// Fig. 8: ns/op against the number of records.
fn fig8(recs: &[Record], out: &Path, all: &[EngineSpec]) -> std::result::Result<Plots, String> {
    let mut done = Vec::new();
    // Fig. 8.
    let e8 = engine_names(recs, "fig8", all);
    let panels = OPS
        .iter()
        .enumerate()
        .map(|(j, op)| {
            let series = e8
                .iter()
                .map(|e| Line {
                    name: legend_name(e),
                    color: engine_color(e.name()),
                    dashed: false,
                    points: ok(recs, "fig8")
                        .filter(|r| r.engine == e.name() && r.op == *op)
                        .map(|r| (r.records.max(r.ops) as f64, r.ns_per_op))
                        .collect(),
                })
                .collect();
            lines_panel(
                &format!("({}) {op}", (b'a' + j as u8) as char),
                "records (log scale)",
                "ns per operation",
                true,
                series,
            )
        })
        .collect();
    let fig =
        Figure { title: "HART Fig. 8: impact of the number of records (Random, 300/100)".into(), cols: 2, panels };
    plot::render(&fig, &out.join("fig8"))?;
    done.push(("fig8".into(), out.join("fig8")));
    Ok(done)
}

/// Fig. 9: the mixed workloads.
fn fig9(recs: &[Record], out: &Path, all: &[EngineSpec]) -> std::result::Result<Plots, String> {
    let mut done = Vec::new();
    // Fig. 9.
    let e9 = engine_names(recs, "fig9", all);
    let panels = ["read-intensive", "read-modify-write", "write-intensive"]
        .iter()
        .enumerate()
        .map(|(j, m)| {
            latency_panel(
                recs,
                "fig9",
                &e9,
                "random (uniform)",
                m,
                &format!("({}) {m}", (b'a' + j as u8) as char),
                "ns per operation",
                |r| r.ns_per_op,
            )
        })
        .collect();
    let fig = Figure { title: "HART Fig. 9: mixed workloads (Random keys, uniform requests)".into(), cols: 3, panels };
    plot::render(&fig, &out.join("fig9"))?;
    done.push(("fig9".into(), out.join("fig9")));
    Ok(done)
}

/// Fig. 10: range query, memory, recovery, scalability.
fn fig10(recs: &[Record], out: &Path, all: &[EngineSpec]) -> std::result::Result<Plots, String> {
    let mut done = Vec::new();
    // Fig. 10.
    let range_op = ok(recs, "fig10a").map(|r| r.op.clone()).next().unwrap_or_else(|| "range".into());
    let ea = engine_names(recs, "fig10a", all);
    let pa = latency_panel(
        recs,
        "fig10a",
        &ea,
        "sequential",
        &range_op,
        &format!("(a) {range_op}-record range query"),
        "ms per range query",
        |r| r.ns_per_op / 1e6,
    );
    let eb = engine_names(recs, "fig10b", all);
    let mem = |key: &'static str| -> Vec<Option<f64>> {
        eb.iter()
            .map(|e| {
                ok(recs, "fig10b")
                    .find(|r| r.engine == e.name())
                    .and_then(|r| r.extra.get(key))
                    .map(|b| b / (1 << 20) as f64)
            })
            .collect()
    };
    let pb = Panel::new(
        "(b) memory after loading Sequential records",
        "engine",
        "MiB",
        false,
        PanelKind::Bars {
            categories: eb.iter().map(|e| e.name().to_string()).collect(),
            series: vec![
                Bars { name: "DRAM".into(), color: 0, values: mem("dram_bytes") },
                Bars { name: "PM (or file)".into(), color: 1, values: mem("pm_bytes") },
            ],
        },
    );
    let ec = engine_names(recs, "fig10c", all);
    let mut lines = Vec::new();
    for e in &ec {
        for (op, dashed) in [("build", false), ("recovery", true)] {
            let pts: Vec<(f64, f64)> = ok(recs, "fig10c")
                .filter(|r| r.engine == e.name() && r.op == op)
                .map(|r| (r.records as f64, r.wall_s))
                .collect();
            if !pts.is_empty() {
                lines.push(Line {
                    name: format!("{} {op}", e.name()),
                    color: engine_color(e.name()),
                    dashed,
                    points: pts,
                });
            }
        }
    }
    let pc = lines_panel(
        "(c) build (solid) vs recovery (dashed), Random, 300/100",
        "records (log scale)",
        "seconds",
        true,
        lines,
    );
    let ed = engine_names(recs, "fig10d", all);
    let mut lines = Vec::new();
    for e in &ed {
        for (op, dashed) in [("insert", false), ("search", true)] {
            let pts: Vec<(f64, f64)> = ok(recs, "fig10d")
                .filter(|r| r.engine == e.name() && r.op == op)
                .map(|r| (r.threads as f64, r.mops))
                .collect();
            lines.push(Line { name: format!("{} {op}", e.name()), color: engine_color(e.name()), dashed, points: pts });
        }
    }
    let pd = lines_panel("(d) scalability: insert (solid), search (dashed)", "threads", "Mops/s", false, lines);
    let fig = Figure {
        title: "HART Fig. 10: range query, memory, recovery, scalability".into(),
        cols: 2,
        panels: vec![pa, pb, pc, pd],
    };
    plot::render(&fig, &out.join("fig10"))?;
    done.push(("fig10".into(), out.join("fig10")));
    Ok(done)
}

/// Fig. 10d in full: throughput against threads for every operation.
fn fig10d_ops(recs: &[Record], out: &Path, all: &[EngineSpec]) -> std::result::Result<Plots, String> {
    let mut done = Vec::new();
    let ed = engine_names(recs, "fig10d", all);
    // Fig. 10d, every operation.
    let panels = OPS
        .iter()
        .map(|op| {
            let series = ed
                .iter()
                .map(|e| Line {
                    name: e.name().into(),
                    color: engine_color(e.name()),
                    dashed: false,
                    points: ok(recs, "fig10d")
                        .filter(|r| r.engine == e.name() && r.op == *op)
                        .map(|r| (r.threads as f64, r.mops))
                        .collect(),
                })
                .collect();
            lines_panel(op, "threads", "Mops/s", false, series)
        })
        .collect();
    let fig =
        Figure { title: "HART Fig. 10d in full: throughput vs threads (Random, 300/100)".into(), cols: 2, panels };
    plot::render(&fig, &out.join("fig10d-ops"))?;
    done.push(("fig10d-ops".into(), out.join("fig10d-ops")));
    Ok(done)
}

/// Latency CDFs, Dictionary at 300/300.
fn latency_cdf(recs: &[Record], out: &Path, all: &[EngineSpec]) -> std::result::Result<Plots, String> {
    let mut done = Vec::new();
    let e47 = engine_names(recs, "fig4-7", all);
    // Latency CDFs, Dictionary at 300/300 (baselines: no latency).
    let panels = OPS
        .iter()
        .map(|op| {
            let series = e47
                .iter()
                .filter_map(|e| {
                    let r = find(recs, "fig4-7", e.name(), "300/300", "dictionary", op)?;
                    Some(Line {
                        name: series_label(r),
                        color: engine_color(e.name()),
                        dashed: false,
                        points: r.cdf.iter().map(|&(ns, q)| (ns.max(1) as f64, q)).collect(),
                    })
                })
                .collect();
            Panel::cdf(op, series)
        })
        .collect();
    let fig = Figure { title: "Latency CDFs, Dictionary, 300/300 (sampled 1 op in 8)".into(), cols: 2, panels };
    plot::render(&fig, &out.join("latency-cdf"))?;
    done.push(("latency-cdf".into(), out.join("latency-cdf")));
    Ok(done)
}

/// Grouped bars: one group per latency setting, one bar per engine.
#[allow(clippy::too_many_arguments)]
fn latency_panel(
    recs: &[Record],
    exp: &str,
    engines: &[EngineSpec],
    workload: &str,
    op: &str,
    title: &str,
    y: &str,
    get: fn(&Record) -> f64,
) -> Panel {
    let lats = lat_names();
    let series: Vec<Bars> = engines
        .iter()
        .map(|e| Bars {
            name: legend_name(e),
            color: engine_color(e.name()),
            values: lats.iter().map(|l| find(recs, exp, e.name(), l, workload, op).map(get)).collect(),
        })
        .collect();
    let log_y = spread(series.iter().flat_map(|s| s.values.iter().flatten().copied())) > 30.0;
    let y = if log_y { format!("{y}, log scale") } else { y.into() };
    Panel::new(title, "PM write/read latency (ns)", &y, log_y, PanelKind::Bars { categories: lats, series })
}

fn lines_panel(title: &str, x: &str, y: &str, log_x: bool, series: Vec<Line>) -> Panel {
    let log_y = spread(series.iter().flat_map(|s| s.points.iter().map(|p| p.1))) > 30.0;
    let y = if log_y { format!("{y}, log scale") } else { y.into() };
    Panel::new(title, x, &y, log_y, PanelKind::Lines { series, log_x })
}
