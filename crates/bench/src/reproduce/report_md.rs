//! report.md of `reproduce hart`: each figure's numbers beside the paper's claim, one
//! function per section.

use super::*;
use std::fmt::Write as _;

/// What every section of the report reads.
pub(super) struct Ctx<'a> {
    pub rep: &'a Report,
    pub sc: &'a HartScale,
    pub a: &'a ReproduceArgs,
    pub engines: &'a [EngineSpec],
    pub figs: &'a [(String, PathBuf)],
    pub secs: f64,
    pub claims: &'a [claims::Checked],
}

/// The whole report.
pub(super) fn report_md(c: &Ctx<'_>) -> String {
    let mut md = String::new();
    intro(&mut md, c);
    md.push_str(&claims::section(c.claims));
    fig4_7(&mut md, c);
    fig8(&mut md, c);
    fig9(&mut md, c);
    fig10a(&mut md, c);
    fig10b(&mut md, c);
    fig10c(&mut md, c);
    fig10d(&mut md, c);
    tail(&mut md, c);
    md
}

/// Title, command, setup, scale, failed measurements.
fn intro(md: &mut String, c: &Ctx<'_>) {
    let rep = c.rep;
    let sc = c.sc;
    let a = c.a;
    let engines = c.engines;
    let figs = c.figs;
    let secs = c.secs;
    let recs = &c.rep.records;
    let _ = writeln!(md, "# HART (ICDE 2019), Figures 4–10, reproduced with pmkv\n");
    let _ = writeln!(
        md,
        "Command: `{}` — {:.0} s on {} CPUs (flush instruction {}), seed {}, pools on {} (tmpfs).\n",
        rep.meta.command, secs, rep.meta.cpus, rep.meta.flush_instruction, rep.meta.seed, rep.meta.pool_dir
    );
    let left: Vec<String> = crate::engines::all()
        .iter()
        .filter(|e| !e.is_null() && !engines.contains(e))
        .map(|e| format!("`{}`", e.name()))
        .collect();
    if !left.is_empty() && a.engines.is_empty() {
        let _ = writeln!(
            md,
            "Not run (the default runs HART, the paper's competitors, NBTree and the baselines; `-e NAME` or `-e all` \
             adds the others, among them the engines whose every write waits for a slow sync of its own): {}.\n",
            left.join(", ")
        );
    }
    let missing = super::missing_defaults(HART_DEFAULT);
    if !missing.is_empty() && a.engines.is_empty() {
        let _ = writeln!(
            md,
            "Not in this build (skipped; their claims below read \"not measured\"): {}.\n",
            missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ")
        );
    }
    let _ = writeln!(md, "Engines: {}. Numbers: `results.json` / `results.csv` (every record, with p50/p99/p99.9 latency and persistence counters per operation).\n", engines.iter().map(|e| format!("`{}`", e.name())).collect::<Vec<_>>().join(", "));
    let reads = match a.reads {
        super::Reads::PerLine => "the read latency per PM line an engine reports reading".to_string(),
        super::Reads::Llc => format!(
            "the read latency, less this machine's DRAM latency ({} ns), once per run of contiguous PM lines that miss a \
             model of the paper's 20 MB L3 scaled by records over the paper's (`--reads llc`)",
            pmkv::dram_ns()
        ),
    };
    let _ = write!(
        md,
        "How this maps the paper's setup: PM write/read latency (300/100, 300/300, 600/300 ns) is emulated by the substrate — \
         the write latency after every flushed line (`adr` mode: clwb/clflushopt + sfence, as the paper's `persistent()`), \
         {reads}. The baselines have no PM: `volatile` (a `BTreeMap` in DRAM) \
         and LMDB (`lmdb-wm-nosync`: write-map + no-sync, survives a process crash but not power loss; `lmdb-sync`: fdatasync \
         per commit, power-loss durable — nearly free on tmpfs) are measured once and drawn in every latency group. \
         The paper's competitors are pmkv engines built after their papers over the same substrate: `woart` (WOART), \
         `artcow` (ART+CoW) and `fptree` (FPTree); they run in the same rounds as HART, so the table of claims \
         below compares like with like, as ratios of medians of this run.\n\n"
    );
    let _ = writeln!(
        md,
        "Scale `{}`: Dictionary {} words, Sequential {} and Random {} records (Figs. 4–7); Fig. 8 {:?}; Fig. 9 {} loaded + {} operations; \
         Fig. 10a {} records, {} scans of {}; Fig. 10b {}; Fig. 10c {:?}; Fig. 10d {} records, threads {:?}.\n",
        a.scale.name(),
        sc.dict,
        sc.seq,
        sc.rand,
        sc.fig8,
        sc.mix_load,
        sc.mix_ops,
        sc.range_keys,
        sc.range_reps,
        sc.range_len,
        sc.mem_keys,
        sc.recovery,
        sc.scal_keys,
        sc.threads
    );
    let runs = recs.iter().map(|r| r.runs.max(1)).max().unwrap_or(1);
    if runs > 1 {
        let _ = writeln!(
            md,
            "Every measurement ran {runs} times, in alternating rounds (round 1 of every engine and setting of a figure, \
             then round 2, ...). Tables give the median, and in parentheses the range (min–max) of the runs; plots show \
             medians; every ratio is a ratio of two medians of this run.\n"
        );
    } else {
        md.push_str("Every measurement ran once (`--runs 1`): single figures, no range; on this shared machine they move by ±20%.\n\n");
    }
    if figs.is_empty() {
        md.push_str("**Plots were not drawn** (no font found: install `fonts-dejavu-core`); the tables below have the numbers.\n\n");
    }
    let failed: Vec<&Record> = recs.iter().filter(|r| r.error.is_some()).collect();
    if !failed.is_empty() {
        md.push_str("Measurements without numbers (not applicable, or the engine failed):\n\n");
        for r in failed.iter().take(30) {
            let _ = writeln!(
                md,
                "- {} `{}` ({}, {}, {} records): {}",
                r.experiment,
                r.engine,
                r.workload,
                r.latency,
                r.records,
                r.error.as_deref().unwrap_or("")
            );
        }
        md.push('\n');
    }
}

/// ns/op rows: one per engine and latency setting (a baseline once, at "-"), a column per
/// (workload, operation) of `cols`.
fn latency_rows(recs: &[Record], exp: &str, engines: &[EngineSpec], cols: &[(&str, &str)]) -> Vec<Vec<String>> {
    let lats = lat_names();
    let mut rows = Vec::new();
    for e in engines {
        let ls: Vec<String> = if e.uses_pool() { lats.clone() } else { vec!["-".into()] };
        for l in ls {
            let mut row = vec![e.name().to_string(), l.clone()];
            row.extend(
                cols.iter()
                    .map(|(w, op)| find(recs, exp, e.name(), &l, w, op).map_or("–".into(), |r| r.ns_cell(fmt))),
            );
            rows.push(row);
        }
    }
    rows
}

/// Figs. 4–7: ns/op tables per operation and workload.
fn fig4_7(md: &mut String, c: &Ctx<'_>) {
    let engines = c.engines;
    let figs = c.figs;
    let recs = &c.rep.records;
    let names = ["Insertion", "Search", "Update", "Deletion"];
    let e47 = engine_names(recs, "fig4-7", engines);
    for (i, op) in OPS.iter().enumerate() {
        let id = format!("fig{}", 4 + i);
        let _ = writeln!(md, "## Fig. {} — {}\n", 4 + i, names[i]);
        let _ = writeln!(md, "**Paper:** {}\n", claim(&id));
        md.push_str(&img(figs, &id));
        let mut head = vec!["engine".to_string(), "latency".to_string()];
        head.extend(WORKLOADS.iter().map(|w| format!("{} ns/op", w.name())));
        let cols: Vec<(&str, &str)> = WORKLOADS.iter().map(|w| (w.name(), *op)).collect();
        md.push_str(&md_table(&head, &latency_rows(recs, "fig4-7", &e47, &cols)));
        md.push('\n');
        md.push_str(&ratios(recs, "fig4-7", engines, &[op]));
        if i == 0 {
            md.push_str(
                "For scale: the HART authors' prototype with persistence compiled out (all \"PM\" in DRAM) measured 668 / 148 / 445 / 237 ns \
                 for insert / search / update / delete on the Dictionary, one thread, on this kind of machine (docs/results/main.md, \"Beside the HART authors' prototype\"). Those figures \
                 have no flush and no emulated latency; compare them with `pmkv bench` (eadr, no latency emulation), not with this figure.\n\n",
            );
        }
    }
}

/// Fig. 8: number of records.
fn fig8(md: &mut String, c: &Ctx<'_>) {
    let engines = c.engines;
    let figs = c.figs;
    let recs = &c.rep.records;
    let _ = writeln!(md, "## Fig. 8 — number of records (Random, 300/100)\n\n**Paper:** {}\n", claim("fig8"));
    md.push_str(&img(figs, "fig8"));
    let e8 = engine_names(recs, "fig8", engines);
    let sizes: Vec<u64> = {
        let mut v: Vec<u64> = ok(recs, "fig8").filter(|r| r.op == "search").map(|r| r.records).collect();
        v.sort();
        v.dedup();
        v
    };
    let mut head = vec!["engine".to_string(), "op".to_string()];
    head.extend(sizes.iter().map(|n| format!("{} ns/op", plot::fmt_num(*n as f64))));
    head.push("growth".into());
    let mut rows = Vec::new();
    for e in &e8 {
        for op in OPS {
            let cells: Vec<Option<&Record>> = sizes
                .iter()
                .map(|&n| {
                    ok(recs, "fig8").find(|r| r.engine == e.name() && r.op == op && r.workload == format!("random {n}"))
                })
                .collect();
            let mut row = vec![e.name().to_string(), op.to_string()];
            row.extend(cells.iter().map(|v| v.map_or("–".into(), |r| r.ns_cell(fmt))));
            let g = match (cells.first().copied().flatten(), cells.last().copied().flatten()) {
                (Some(a), Some(b)) if a.ns_per_op > 0.0 => format!("{:.2}×", b.ns_per_op / a.ns_per_op),
                _ => "–".into(),
            };
            row.push(g);
            rows.push(row);
        }
    }
    md.push_str(&md_table(&head, &rows));
    md.push_str("\n\"growth\" is the median ns/op at the largest size over the median at the smallest: 1.00× is perfect scaling with the record count.\n\n");
}

/// Fig. 9: mixed workloads.
fn fig9(md: &mut String, c: &Ctx<'_>) {
    let engines = c.engines;
    let figs = c.figs;
    let recs = &c.rep.records;
    let _ =
        writeln!(md, "## Fig. 9 — mixed workloads (Random keys, uniform requests)\n\n**Paper:** {}\n", claim("fig9"));
    md.push_str(&img(figs, "fig9"));
    let e9 = engine_names(recs, "fig9", engines);
    let mixes = ["read-intensive", "read-modify-write", "write-intensive"];
    let mut head = vec!["engine".to_string(), "latency".to_string()];
    head.extend(mixes.iter().map(|m| format!("{m} ns/op")));
    let cols: Vec<(&str, &str)> = mixes.iter().map(|m| ("random (uniform)", *m)).collect();
    md.push_str(&md_table(&head, &latency_rows(recs, "fig9", &e9, &cols)));
    md.push('\n');
    md.push_str(&ratios(recs, "fig9", engines, &mixes));
}

/// Fig. 10 (a): range query.
fn fig10a(md: &mut String, c: &Ctx<'_>) {
    let figs = c.figs;
    let recs = &c.rep.records;
    let _ = writeln!(md, "## Fig. 10 — range query, memory, recovery, scalability\n");
    md.push_str(&img(figs, "fig10"));
    let _ = writeln!(md, "### (a) Range query\n\n**Paper:** {}\n", claim("fig10a"));
    let mut rows = Vec::new();
    for r in ok(recs, "fig10a") {
        rows.push(vec![
            r.engine.clone(),
            r.latency.clone(),
            r.op.clone(),
            r.ns_cell(|x| format!("{:.2}", x / 1e6)),
            format!("{:.1}", r.extra.get("ns_per_record").copied().unwrap_or(0.0)),
        ]);
    }
    md.push_str(&md_table(
        &["engine", "latency", "query", "ms per query", "ns per record (median)"].map(String::from),
        &rows,
    ));
    md.push_str("\npmkv's range query is the engine's ordered `scan` (SPEC H8); the rows \"by search\" run the paper's method (one search per key of the range) on the same engine and keys, for comparison.\n\n");
}

/// Fig. 10 (b): memory.
fn fig10b(md: &mut String, c: &Ctx<'_>) {
    let recs = &c.rep.records;
    let _ = writeln!(md, "### (b) Memory\n\n**Paper:** {}\n", claim("fig10b"));
    let mut rows = Vec::new();
    for r in ok(recs, "fig10b") {
        let d = r.extra.get("dram_bytes").copied().unwrap_or(0.0);
        let p = r.extra.get("pm_bytes").copied().unwrap_or(0.0);
        let n = r.records.max(1) as f64;
        rows.push(vec![
            r.engine.clone(),
            r.records.to_string(),
            format!("{:.1}", d / (1 << 20) as f64),
            format!("{:.1}", p / (1 << 20) as f64),
            format!("{:.0}", d / n),
            format!("{:.0}", p / n),
        ]);
    }
    md.push_str(&md_table(
        &["engine", "records", "DRAM MiB", "PM MiB", "DRAM B/record", "PM B/record"].map(String::from),
        &rows,
    ));
    md.push_str("\nAs each engine accounts it (`Engine::memory`); the volatile baseline's figure is an estimate, LMDB's \"PM\" is its file's pages in use.\n\n");
}

/// Fig. 10 (c): recovery against build.
fn fig10c(md: &mut String, c: &Ctx<'_>) {
    let engines = c.engines;
    let recs = &c.rep.records;
    let _ = writeln!(
        md,
        "### (c) Recovery vs build\n\n**Paper:** {}\n",
        claim("fig10c").split(" Fig. 10d:").next().unwrap_or("")
    );
    let mut rows = Vec::new();
    let ec = engine_names(recs, "fig10c", engines);
    for e in &ec {
        let mut sizes: Vec<u64> =
            ok(recs, "fig10c").filter(|r| r.engine == e.name() && r.op == "build").map(|r| r.records).collect();
        sizes.sort();
        for n in sizes {
            let b = ok(recs, "fig10c").find(|r| r.engine == e.name() && r.op == "build" && r.records == n);
            let rc = recs
                .iter()
                .find(|r| r.experiment == "fig10c" && r.engine == e.name() && r.op == "recovery" && r.records == n);
            let (rtxt, ratio) = match (b, rc) {
                (Some(b), Some(rc)) if rc.error.is_none() && rc.wall_s > 0.0 => (
                    rc.wall_cell(|x| format!("{x:.4}")),
                    format!("{:.1}× ({})", b.wall_s / rc.wall_s, if rc.wall_s < b.wall_s { "yes" } else { "no" }),
                ),
                (_, Some(rc)) => (rc.error.clone().unwrap_or_else(|| "–".into()), "–".into()),
                _ => ("–".into(), "–".into()),
            };
            rows.push(vec![
                e.name().to_string(),
                n.to_string(),
                b.map_or("–".into(), |b| b.wall_cell(|x| format!("{x:.3}"))),
                rtxt,
                ratio,
            ]);
        }
    }
    md.push_str(&md_table(
        &["engine", "records", "build s", "recovery s", "build / recovery (recovery faster?)"].map(String::from),
        &rows,
    ));
    md.push_str("\nRecovery = drop the store and open the same pool again through `Store::open`, timed, then every record counted and 1,000 sampled.\n\n");
}

/// Fig. 10 (d): scalability.
fn fig10d(md: &mut String, c: &Ctx<'_>) {
    let rep = c.rep;
    let sc = c.sc;
    let engines = c.engines;
    let figs = c.figs;
    let recs = &c.rep.records;
    let _ = writeln!(
        md,
        "### (d) Scalability\n\n**Paper:** {}\n",
        claim("fig10c").split(" Fig. 10d: ").nth(1).unwrap_or("")
    );
    md.push_str(&img(figs, "fig10d-ops"));
    let ed = engine_names(recs, "fig10d", engines);
    let mut head = vec!["engine".to_string(), "op".to_string()];
    head.extend(sc.threads.iter().map(|t| format!("{t} thr Mops/s")));
    head.extend(sc.threads.iter().skip(1).map(|t| format!("×{t} speedup")));
    let mut rows = Vec::new();
    for e in &ed {
        for op in OPS {
            let cells: Vec<Option<&Record>> = sc
                .threads
                .iter()
                .map(|&t| ok(recs, "fig10d").find(|r| r.engine == e.name() && r.op == op && r.threads == t))
                .collect();
            let m: Vec<Option<f64>> = cells.iter().map(|c| c.map(|r| r.mops)).collect();
            let mut row = vec![e.name().to_string(), op.to_string()];
            row.extend(cells.iter().map(|v| v.map_or("–".into(), |r| r.mops_cell(|x| format!("{x:.3}")))));
            row.extend(m.iter().skip(1).map(|v| match (v, m[0]) {
                (Some(x), Some(b)) if b > 0.0 => format!("{:.2}×", x / b),
                _ => "–".into(),
            }));
            rows.push(row);
        }
    }
    md.push_str(&md_table(&head, &rows));
    let _ = writeln!(
        md,
        "\nThis machine has {} CPUs: thread counts above that share cores, so speedups there measure oversubscription, not scaling.\n",
        rep.meta.cpus
    );
}

/// Latency distributions and timings.
fn tail(md: &mut String, c: &Ctx<'_>) {
    let rep = c.rep;
    let figs = c.figs;
    let _ = writeln!(md, "## Latency distributions\n");
    md.push_str(&img(figs, "latency-cdf"));
    md.push_str("CDFs of per-operation latency (one operation in 8 timed with the TSC), Dictionary at 300/300 for pmkv engines, baselines without latency.\n\n");
    let _ = writeln!(md, "## Timings\n");
    for n in &rep.meta.notes {
        let _ = writeln!(md, "- {n}");
    }
}
