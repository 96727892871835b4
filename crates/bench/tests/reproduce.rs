//! SPEC U5: `reproduce hart` end to end at a test-only scale, `run` writing its outputs, and
//! the papers whose engines are missing refusing clearly.

use pmkv_bench::command::run::{run, RunArgs};
use pmkv_bench::reproduce::{reproduce, Paper, Reads, ReproduceArgs, Scale};
use std::path::Path;

fn decode_png(p: &Path) -> (u32, u32, usize) {
    let f = std::fs::File::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut dec = png::Decoder::new(f).read_info().unwrap_or_else(|e| panic!("{}: not a PNG: {e}", p.display()));
    let mut buf = vec![0; dec.output_buffer_size()];
    let info = dec.next_frame(&mut buf).unwrap();
    let bytes = &buf[..info.buffer_size()];
    // A drawn figure is not a blank page: count non-white bytes.
    let inked = bytes.iter().filter(|&&b| b < 200).count();
    (info.width, info.height, inked)
}

/// Every claim of results.json has a verdict, and a measured ratio unless it says why not;
/// report.md has one row per claim. Returns the claims.
fn check_claims(json: &serde_json::Value) -> Vec<serde_json::Value> {
    let claims = json["claims"].as_array().expect("results.json has claims").clone();
    assert!(!claims.is_empty());
    for c in &claims {
        let v = c["verdict"].as_str().unwrap();
        if c["measured"].is_number() {
            assert!(["holds", "holds in direction only", "does not hold"].contains(&v), "{c}");
            assert!(c["measured"].as_f64().unwrap() > 0.0, "{c}");
        } else {
            assert_eq!(v, "not measured", "{c}");
            let why = c["pmkv"].as_str().unwrap();
            assert!(why.starts_with("not measured: ") && why.len() > 20, "{c}");
        }
    }
    claims
}

/// Under the cache model (`--reads llc`) the results keep the paper's setting names (the
/// claims look them up so) and say in their notes how reads were charged.
#[test]
fn reproduce_hart_under_the_cache_model_names_settings_as_the_paper() {
    let out = tempfile::tempdir().unwrap();
    let a = ReproduceArgs {
        paper: Paper::Hart,
        scale: Scale::Tiny,
        out: out.path().to_path_buf(),
        engines: vec!["hart".into(), "woart".into()],
        runs: 1,
        seed: 1,
        dir: None,
        quiet: true,
        reads: Reads::Llc,
    };
    let rep = pmkv_bench::reproduce::hart(&a).unwrap();
    for lat in ["300/100", "300/300", "600/300"] {
        assert!(rep.records.iter().any(|r| r.experiment == "fig4-7" && r.latency == lat), "no {lat} rows");
    }
    assert!(rep.records.iter().all(|r| !r.latency.contains("llc")));
    assert!(rep.meta.notes.iter().any(|n| n.contains("--reads llc")), "{:?}", rep.meta.notes);
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(md.contains("miss a model of the paper's 20 MB L3"), "report.md names the read model");
    assert!(!md.contains("per PM line an engine reports reading"));
}

#[test]
fn u5_reproduce_hart_tiny_writes_report_json_csv_and_plots() {
    let out = tempfile::tempdir().unwrap();
    let a = ReproduceArgs {
        paper: Paper::Hart,
        scale: Scale::Tiny,
        out: out.path().to_path_buf(),
        engines: vec!["all".into()],
        runs: 2,
        seed: 1,
        dir: None,
        quiet: true,
        reads: Reads::PerLine,
    };
    let rep = pmkv_bench::reproduce::hart(&a).unwrap();
    for exp in ["fig4-7", "fig8", "fig9", "fig10a", "fig10b", "fig10c", "fig10d"] {
        assert!(rep.records.iter().any(|r| r.experiment == exp && r.error.is_none()), "no result for {exp}");
    }
    // `-e all`: every engine of pmkv::Registry::builtin() and the baselines took part.
    for e in pmkv_bench::engines::all() {
        assert!(rep.records.iter().any(|r| r.engine == e.name()), "engine {} missing", e.name());
    }
    // Each measurement ran twice: one record per cell, the median with the range of the runs.
    for r in rep.records.iter().filter(|r| r.error.is_none()) {
        assert_eq!(r.runs, 2, "{} {} {}", r.experiment, r.engine, r.op);
        assert!(r.ns_per_op_min <= r.ns_per_op && r.ns_per_op <= r.ns_per_op_max, "{r:?}");
    }
    // One record per cell however many runs: Fig. 8 has 3 sizes x 4 operations per engine
    // (none for an engine that cannot open here, such as mangosteen without its allocator).
    for e in pmkv_bench::engines::all() {
        let n =
            rep.records.iter().filter(|r| r.experiment == "fig8" && r.engine == e.name() && r.error.is_none()).count();
        assert!(n == 3 * 4 || (n == 0 && e.name() != "hart"), "{}: {n} fig8 records", e.name());
    }
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(md.contains("ran 2 times, in alternating rounds"), "report.md does not say how many runs");
    assert!(md.contains("–"), "report.md shows no range");
    for fig in ["Fig. 4", "Fig. 5", "Fig. 6", "Fig. 7", "Fig. 8", "Fig. 9", "Fig. 10", "**Paper:**"] {
        assert!(md.contains(fig), "report.md lacks {fig}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("results.json")).unwrap()).unwrap();
    assert!(json["records"].as_array().unwrap().len() >= rep.records.len());
    // The paper's claims: one row each in report.md and results.json, each with a measured
    // ratio and a verdict, or "not measured" and why.
    assert!(md.contains("## The paper's claims, with ratios"), "{md}");
    let claims = check_claims(&json);
    for id in [
        "abs-insert-woart",
        "abs-search-fptree",
        "fig4-all",
        "fig9-fptree",
        "fig10a-300/100",
        "fig10c-hart",
        "fig10d-2",
    ] {
        let c = claims.iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("no claim {id}"));
        assert!(c["measured"].is_number(), "{id} not measured: {c}");
    }
    let registered = pmkv::Registry::builtin().names();
    let artcow = claims.iter().find(|c| c["id"] == "abs-insert-artcow").unwrap();
    assert_eq!(artcow["measured"].is_number(), registered.contains(&"artcow"), "{artcow}");
    // The competitors ran in every figure's experiments.
    for e in ["woart", "fptree"] {
        assert!(registered.contains(&e));
        for exp in ["fig4-7", "fig8", "fig9", "fig10a", "fig10b", "fig10c"] {
            assert!(rep.records.iter().any(|r| r.experiment == exp && r.engine == e && r.error.is_none()), "{e} {exp}");
        }
    }
    let csv = std::fs::read_to_string(out.path().join("results.csv")).unwrap();
    assert!(csv.starts_with("experiment,engine,"));
    assert_eq!(csv.lines().count(), rep.records.len() + 1);
    for fig in ["fig4", "fig5", "fig6", "fig7", "fig8", "fig9", "fig10", "fig10d-ops", "latency-cdf"] {
        let png = out.path().join(format!("{fig}.png"));
        let (w, h, inked) = decode_png(&png);
        assert!(w > 0 && h > 0, "{fig}.png is empty");
        assert!(inked > 1000, "{fig}.png looks blank");
        assert!(md.contains(&format!("({fig}.png)")), "report.md does not show {fig}.png");
        let svg = std::fs::read_to_string(out.path().join(format!("{fig}.svg"))).unwrap();
        assert!(svg.contains("<svg") && svg.contains("<text"), "{fig}.svg has no text");
    }
}

/// `pmkv bench run -q -e ENGINES -w WORKLOAD -n KEYS --out OUT`.
fn quiet_run(engines: &[&str], workload: &str, keys: u64, out: &Path) -> RunArgs {
    RunArgs {
        engines: engines.iter().map(|e| e.to_string()).collect(),
        workload: workload.into(),
        keys: Some(keys),
        out: Some(out.to_path_buf()),
        quiet: true,
        ..RunArgs::default()
    }
}

#[test]
fn u5_run_sweep_and_mix_write_json_csv_png() {
    let out = tempfile::tempdir().unwrap();
    let a = RunArgs { ops: Some(2_000), ..quiet_run(&["volatile", "lmdb"], "rw-sweep", 2_000, out.path()) };
    run(a).unwrap();
    for f in ["results.json", "results.csv", "sweep.png", "sweep.svg"] {
        assert!(out.path().join(f).is_file(), "{f} missing");
    }
    assert!(decode_png(&out.path().join("sweep.png")).2 > 1000);
    let out2 = tempfile::tempdir().unwrap();
    let a = RunArgs { threads: vec![1, 2], ..quiet_run(&["volatile"], "random", 3_000, out2.path()) };
    run(a).unwrap();
    for f in ["ops.png", "threads.png", "latency-cdf.png", "results.csv"] {
        assert!(out2.path().join(f).is_file(), "{f} missing");
    }
}

#[test]
fn u5_unknown_engine_and_workload_are_errors() {
    let a = RunArgs { engines: vec!["nosuch".into()], ..RunArgs::default() };
    assert!(run(a).unwrap_err().to_string().contains("unknown engine"));
    let a = RunArgs { workload: "nosuch".into(), engines: vec!["volatile".into()], ..RunArgs::default() };
    assert!(run(a).unwrap_err().to_string().contains("unknown workload"));
}

#[test]
fn u5_reproduce_papers_without_engines_say_so() {
    for (paper, name) in [(Paper::Nbtree, "nbtree"), (Paper::Mangosteen, "mangosteen")] {
        if pmkv::Registry::builtin().names().contains(&name) {
            continue;
        }
        let out = tempfile::tempdir().unwrap();
        let a = ReproduceArgs {
            paper,
            scale: Scale::Tiny,
            out: out.path().join("x"),
            engines: vec![],
            runs: 1,
            seed: 1,
            dir: None,
            quiet: true,
            reads: Reads::PerLine,
        };
        let e = reproduce(&a).unwrap_err().to_string();
        assert!(e.contains("not built yet"), "{e}");
        assert!(!out.path().join("x").exists(), "nothing is written");
    }
}

#[test]
fn u5_reproduce_nbtree_writes_its_report() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("nb");
    let a = ReproduceArgs {
        paper: Paper::Nbtree,
        scale: Scale::Tiny,
        out: dir.clone(),
        // The default engines: NBTree, its paper's competitors, HART, volatile.
        engines: vec![],
        runs: 1,
        seed: 1,
        dir: None,
        quiet: true,
        reads: Reads::PerLine,
    };
    reproduce(&a).unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for section in
        ["## Table 1", "## Fig. 5", "## Fig. 7", "## Figs. 8 and 12", "## Fig. 9", "## Fig. 10", "## Fig. 13"]
    {
        assert!(md.contains(section), "report.md lacks {section}");
    }
    // Table 1 has measured rows for nbtree (flushes in adr, lines in eadr).
    assert!(md.lines().any(|l| l.starts_with("| nbtree | insert |")), "{md}");
    // ... and the individual inserts (those that ran no SMO), measured in both modes: one
    // line written each in eadr, as the paper's Table 1 says.
    let single = md.lines().find(|l| l.starts_with("| nbtree | insert, no SMO (")).unwrap_or_else(|| panic!("{md}"));
    let cells: Vec<&str> = single.split('|').map(str::trim).collect();
    assert_eq!(cells[4], "1.00", "{single}");
    assert_eq!(cells[6], "1 / 1 / 1", "{single}");
    assert!(cells[7].starts_with("1 (met)"), "{single}");
    // Table 1 has the competitors' measured counters beside the paper's figures.
    let fp = md.lines().find(|l| l.starts_with("| fptree | search |")).unwrap_or_else(|| panic!("{md}"));
    assert!(fp.contains("| - / - / 3 |"), "{fp}");
    let ff = md.lines().find(|l| l.starts_with("| fastfair | update |")).unwrap_or_else(|| panic!("{md}"));
    assert!(ff.contains("| 1 / 1 / O(n) |"), "{ff}");
    for l in [fp, ff] {
        let cells: Vec<&str> = l.split('|').map(str::trim).collect();
        assert!(cells[5].parse::<f64>().unwrap() > 0.0, "no PM line reads reported: {l}");
    }
    // The NBTree-SL ablation ran (its own Table 1 rows, and a row of the Fig. 6 table
    // beside the two-layer comparison).
    assert!(md.lines().any(|l| l.starts_with("| nbtree-sl | search |")), "{md}");
    assert!(md.contains("nbtree / nbtree-sl"), "{md}");
    let json = std::fs::read_to_string(dir.join("results.json")).unwrap();
    assert!(md.contains("## The paper's claims, with ratios"), "{md}");
    let claims = check_claims(&serde_json::from_str(&json).unwrap());
    for id in
        ["t1-fptree-search", "t1-fastfair-search", "fig5-search", "fig6-insert", "fig8-tput", "fig11-adr", "recovery"]
    {
        let c = claims.iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("no claim {id}"));
        assert!(c["measured"].is_number(), "{id} not measured: {c}");
    }
    if !pmkv::Registry::builtin().names().contains(&"utree") {
        let c = claims.iter().find(|c| c["id"] == "t1-utree-search").unwrap();
        assert!(c["pmkv"].as_str().unwrap().contains("utree not registered"), "{c}");
        assert!(md.contains("utree"), "the report names the missing competitor");
    }
    for exp in
        ["\"base\"", "\"table1\"", "\"space\"", "\"ycsb\"", "\"skew\"", "\"writes\"", "\"large\"", "\"recovery\""]
    {
        assert!(json.contains(exp), "results.json lacks experiment {exp}");
    }
    assert!(dir.join("results.csv").exists());
}

/// `reproduce mangosteen` at the test scale: every figure's experiment has results for the
/// engine and its per-write, page-capture, no-dedup (Fig. 7 only) and no-memcpy (fill100K
/// only) configurations, report.md puts each
/// figure beside the paper's claim, the claims are checked (RomulusDB's say why not), and
/// each figure is drawn as PNG and SVG.
#[test]
fn u5_reproduce_mangosteen_writes_its_report() {
    if !pmkv::Registry::builtin().names().contains(&"mangosteen") {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("mg");
    let a = ReproduceArgs {
        paper: Paper::Mangosteen,
        scale: Scale::Tiny,
        out: dir.clone(),
        engines: vec!["mangosteen".into(), "volatile".into(), "lmdb-wm-nosync".into()],
        runs: 1,
        seed: 1,
        dir: None,
        quiet: true,
        reads: Reads::PerLine,
    };
    let rep = pmkv_bench::reproduce::mangosteen(&a).unwrap();
    let failed: Vec<_> = rep.records.iter().filter(|r| r.error.is_some()).collect();
    assert!(failed.is_empty(), "failed measurements: {failed:?}");
    for exp in ["fig5", "fig6", "fig7", "fig8", "fig9"] {
        for e in ["mangosteen", "mangosteen-perwrite", "mangosteen-pages", "mangosteen-nodedup", "volatile"] {
            let want = (exp == "fig7") == (e == "mangosteen-nodedup") || (exp == "fig7" && e == "mangosteen");
            let has = rep.records.iter().any(|r| r.experiment == exp && r.engine == e);
            assert_eq!(has, want, "{exp} {e}");
        }
    }
    let nomemcpy: Vec<_> = rep.records.iter().filter(|r| r.engine == "mangosteen-nomemcpy").collect();
    assert!(!nomemcpy.is_empty() && nomemcpy.iter().all(|r| r.experiment == "fig8" && r.op == "fill100K"));
    // The per-write baseline fences every captured store: many fences per write, where
    // Mangosteen's batch has two.
    let fences = |e: &str| {
        rep.records
            .iter()
            .find(|r| r.experiment == "fig8" && r.engine == e && r.op == "fillrandom" && r.threads == 1)
            .unwrap_or_else(|| panic!("no fillrandom for {e}"))
            .fences_per_op
    };
    assert!(fences("mangosteen") <= 2.5, "{}", fences("mangosteen"));
    assert!(fences("mangosteen-perwrite") > 4.0 * fences("mangosteen"), "{}", fences("mangosteen-perwrite"));
    for op in ["readseq", "readreverse"] {
        let r = rep.records.iter().find(|r| r.experiment == "fig9" && r.op == op).unwrap();
        assert!(r.mops > 0.0 && r.records == 2_000, "{r:?}");
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for section in ["## Fig. 5", "## Fig. 6", "## Fig. 7", "## Fig. 8", "## Fig. 9", "Persimmon", "RomulusDB"] {
        assert!(md.contains(section), "report.md lacks {section}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let claims = check_claims(&json);
    for id in [
        "fig5a-persimmon",
        "fig5a-redis",
        "fig6-persimmon",
        "fig7-zipf",
        "fig8-perwrite",
        "fig8d-pages",
        "fig8d-nomemcpy",
        "fig9-dram",
    ] {
        let c = claims.iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("no claim {id}"));
        assert!(c["measured"].is_number(), "{id} not measured: {c}");
    }
    let c = claims.iter().find(|c| c["id"] == "fig8-romulus").unwrap();
    assert!(c["pmkv"].as_str().unwrap().contains("RomulusDB is not available"), "{c}");
    for fig in ["fig5", "fig6", "fig7", "fig8", "fig9"] {
        let (w, h, inked) = decode_png(&dir.join(format!("{fig}.png")));
        assert!(w > 100 && h > 100 && inked > 1000, "{fig}.png looks empty");
        assert!(dir.join(format!("{fig}.svg")).exists());
    }
    assert!(dir.join("results.csv").exists());
}
