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

/// Draw `fig` as `out/ID.png` and `.svg`; the plot list of report.md gets `id`.
fn save(fig: &Figure, out: &Path, id: &str) -> std::result::Result<Plots, String> {
    plot::render(fig, &out.join(id))?;
    Ok(vec![(id.to_string(), out.join(id))])
}

/// A panel's letter: (a), (b), ...
fn letter(j: usize) -> char {
    (b'a' + j as u8) as char
}

/// Lines of `exp`'s records: for each engine and each (operation, dashed), the points `xy`
/// gives, named by `name`.
fn engine_lines(
    recs: &[Record],
    exp: &str,
    engines: &[EngineSpec],
    ops: &[(&str, bool)],
    name: impl Fn(&EngineSpec, &str) -> String,
    xy: fn(&Record) -> (f64, f64),
) -> Vec<Line> {
    let mut lines = Vec::new();
    for e in engines {
        for &(op, dashed) in ops {
            let points = ok(recs, exp).filter(|r| r.engine == e.name() && r.op == op).map(xy).collect();
            lines.push(Line { name: name(e, op), color: engine_color(e.name()), dashed, points });
        }
    }
    lines
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
                let t = format!("({}) {}", letter(j), w.name());
                latency_panel(recs, "fig4-7", &e47, w.name(), op, &t, "ns per operation", |r| r.ns_per_op)
            })
            .collect();
        let fig = Figure {
            title: format!("HART Fig. {}: {} performance (ns/op, 1 thread, adr)", 4 + i, names[i]),
            cols: 3,
            panels,
        };
        done.extend(save(&fig, out, &format!("fig{}", 4 + i))?);
    }
    Ok(done)
}

/// Fig. 8: ns/op against the number of records.
fn fig8(recs: &[Record], out: &Path, all: &[EngineSpec]) -> std::result::Result<Plots, String> {
    let e8 = engine_names(recs, "fig8", all);
    let panels = OPS
        .iter()
        .enumerate()
        .map(|(j, op)| {
            let series = engine_lines(
                recs,
                "fig8",
                &e8,
                &[(op, false)],
                |e, _| legend_name(e),
                |r| (r.records.max(r.ops) as f64, r.ns_per_op),
            );
            lines_panel(&format!("({}) {op}", letter(j)), "records (log scale)", "ns per operation", true, series)
        })
        .collect();
    let fig =
        Figure { title: "HART Fig. 8: impact of the number of records (Random, 300/100)".into(), cols: 2, panels };
    save(&fig, out, "fig8")
}

/// Fig. 9: the mixed workloads.
fn fig9(recs: &[Record], out: &Path, all: &[EngineSpec]) -> std::result::Result<Plots, String> {
    let e9 = engine_names(recs, "fig9", all);
    let panels = ["read-intensive", "read-modify-write", "write-intensive"]
        .iter()
        .enumerate()
        .map(|(j, m)| {
            let title = format!("({}) {m}", letter(j));
            latency_panel(recs, "fig9", &e9, "random (uniform)", m, &title, "ns per operation", |r| r.ns_per_op)
        })
        .collect();
    let fig = Figure { title: "HART Fig. 9: mixed workloads (Random keys, uniform requests)".into(), cols: 3, panels };
    save(&fig, out, "fig9")
}

/// Fig. 10: range query, memory, recovery, scalability.
fn fig10(recs: &[Record], out: &Path, all: &[EngineSpec]) -> std::result::Result<Plots, String> {
    let fig = Figure {
        title: "HART Fig. 10: range query, memory, recovery, scalability".into(),
        cols: 2,
        panels: vec![fig10a(recs, all), fig10b(recs, all), fig10c(recs, all), fig10d(recs, all)],
    };
    save(&fig, out, "fig10")
}

/// Fig. 10 (a): ms per range query in each latency setting.
fn fig10a(recs: &[Record], all: &[EngineSpec]) -> Panel {
    let range_op = ok(recs, "fig10a").map(|r| r.op.clone()).next().unwrap_or_else(|| "range".into());
    let ea = engine_names(recs, "fig10a", all);
    let title = format!("(a) {range_op}-record range query");
    latency_panel(recs, "fig10a", &ea, "sequential", &range_op, &title, "ms per range query", |r| r.ns_per_op / 1e6)
}

/// Fig. 10 (b): DRAM and PM after loading, per engine.
fn fig10b(recs: &[Record], all: &[EngineSpec]) -> Panel {
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
    Panel::new(
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
    )
}

/// Fig. 10 (c): build and recovery time against records.
fn fig10c(recs: &[Record], all: &[EngineSpec]) -> Panel {
    let ec = engine_names(recs, "fig10c", all);
    let ops = [("build", false), ("recovery", true)];
    let lines =
        engine_lines(recs, "fig10c", &ec, &ops, |e, op| format!("{} {op}", e.name()), |r| (r.records as f64, r.wall_s));
    lines_panel(
        "(c) build (solid) vs recovery (dashed), Random, 300/100",
        "records (log scale)",
        "seconds",
        true,
        lines.into_iter().filter(|l| !l.points.is_empty()).collect(),
    )
}

/// Fig. 10 (d): insert and search throughput against threads.
fn fig10d(recs: &[Record], all: &[EngineSpec]) -> Panel {
    let ed = engine_names(recs, "fig10d", all);
    let ops = [("insert", false), ("search", true)];
    let lines =
        engine_lines(recs, "fig10d", &ed, &ops, |e, op| format!("{} {op}", e.name()), |r| (r.threads as f64, r.mops));
    lines_panel("(d) scalability: insert (solid), search (dashed)", "threads", "Mops/s", false, lines)
}

/// Fig. 10d in full: throughput against threads for every operation.
fn fig10d_ops(recs: &[Record], out: &Path, all: &[EngineSpec]) -> std::result::Result<Plots, String> {
    let ed = engine_names(recs, "fig10d", all);
    let panels = OPS
        .iter()
        .map(|op| {
            let series = engine_lines(
                recs,
                "fig10d",
                &ed,
                &[(op, false)],
                |e, _| e.name().into(),
                |r| (r.threads as f64, r.mops),
            );
            lines_panel(op, "threads", "Mops/s", false, series)
        })
        .collect();
    let fig =
        Figure { title: "HART Fig. 10d in full: throughput vs threads (Random, 300/100)".into(), cols: 2, panels };
    save(&fig, out, "fig10d-ops")
}

/// Latency CDFs, Dictionary at 300/300 (baselines: no latency).
fn latency_cdf(recs: &[Record], out: &Path, all: &[EngineSpec]) -> std::result::Result<Plots, String> {
    let e47 = engine_names(recs, "fig4-7", all);
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
    save(&fig, out, "latency-cdf")
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
