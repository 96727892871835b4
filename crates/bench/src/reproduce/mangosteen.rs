//! `pmkv bench reproduce mangosteen`: the evaluation of the Mangosteen paper (§6, Figs.
//! 5–9) on this machine, for the `mangosteen` engine (the standard `BTreeMap` made durable
//! by compiler capture, flat combining and the deduplicated redo log), its configurations
//! that stand in for the paper's baselines and ablations, the same `BTreeMap` without
//! durability (`volatile`), HART, NBTree and LMDB (or the engines given), with report.md
//! putting each measurement beside the paper's claim and the paper's relative claims
//! checked as ratios ([`claims::MANGOSTEEN`]).
//!
//! How the paper's setup maps here:
//! * Redis with YCSB over the network (Figs. 5–7) becomes the engines behind the library
//!   API in this process, each thread a closed-loop client: 8-byte integer keys, 100-byte
//!   values, searches and updates at a fixed ratio, Zipf 0.99 (Fig. 7 also uniform);
//!   the paper's 2–96 clients on 32 cores become 1, 2 and 4 threads on 2 cores;
//! * Persimmon (shadow execution with an undo log persisted at every write) is not
//!   available; `mangosteen-perwrite` stands in for it: the same engine with
//!   `log=perwrite`, every captured store logged and fenced at once, nothing deduplicated;
//! * Fig. 7's ablation is `mangosteen-nodedup` (`dedup=false`), Fig. 8d's
//!   `mangosteen-nomemcpy` (`memcpy=false`: every 8-byte store of a copy through the store
//!   hook, as binary instrumentation sees a `memcpy` it does not intercept);
//!   `mangosteen-pages` (`capture=pages`) is capture by page protection instead of
//!   instrumentation;
//! * the LevelDB suite of Figs. 8–9 in local mode becomes `fillseq` (Sequential string
//!   keys), `fillrandom` and `overwrite` (Random string keys), 100-byte values,
//!   `fill100K` (100,000-byte values), `readseq`/`readreverse` (whole-store ordered scans,
//!   100-byte and 1,000-byte values); RomulusDB is not available, so its claims are not
//!   measured and the per-write baseline and LMDB stand beside Mangosteen instead;
//! * pool engines run in `adr` (a flush and a fence per persist) with the substrate's PM
//!   latency emulation at [`PM_LATENCY`]: 300 ns per fence that completes flushed lines
//!   (write-backs overlap, as `clwb` on the paper's Optane; pmkv_substrate::latency), 100
//!   ns per PM line read. The pool is DRAM (/dev/shm), and without emulation a fence per
//!   store costs little; with the HART paper's per-line charge the per-write baseline
//!   keeps up with Mangosteen (both flush about as many lines: 21.5 fences a
//!   `fillrandom` write against 2, but 65 lines against 57), which is not what Optane
//!   does with a fence per store.

use super::*;
use crate::progress::Plan;

/// The emulated PM latency of the pool engines: HART's first setting, 300/100 ns, with the
/// write latency charged per fence (see the module doc).
pub const PM_LATENCY: Latency = Latency { charge: pmkv::Charge::Fence, ..Latency::per_line(300, 100) };

/// Record counts and threads of one scale.
#[derive(Clone, Debug)]
pub struct MgScale {
    /// Records loaded for the YCSB-like mixes and the LevelDB fills.
    pub keys: usize,
    /// Measured operations of a mix.
    pub ops: u64,
    /// Records of `fill100K`.
    pub big: usize,
    pub threads: Vec<usize>,
    /// The `mangosteen` engine's region (`region_mib`): sized to the largest experiment
    /// (Fig. 9's 1,000-byte values), because creating a region writes and checks all of
    /// it (the engine's default, 256 MiB, made each of the hundred opens take a second).
    pub region_mib: u64,
}

impl MgScale {
    pub fn of(s: Scale) -> MgScale {
        match s {
            Scale::Tiny => MgScale { keys: 2_000, ops: 2_000, big: 16, threads: vec![1, 2], region_mib: 24 },
            // Minutes on 2 cores with --runs 1: page capture (tens of µs a write) and
            // lmdb-sync load every store they measure.
            Scale::Small => MgScale { keys: 20_000, ops: 20_000, big: 100, threads: vec![1, 2, 4], region_mib: 64 },
            // The LevelDB suite's million records and fill100K's thousand values (YCSB's
            // 13 M records of 10 fields would need a region of tens of GiB).
            Scale::Paper => {
                MgScale { keys: 1_000_000, ops: 1_000_000, big: 1_000, threads: vec![1, 2, 4], region_mib: 2_560 }
            }
        }
    }
}

/// The engines `reproduce mangosteen` runs by default (and the `mangosteen` variants when
/// `mangosteen` is among them, [`VARIANTS`]).
pub const MANGOSTEEN_DEFAULT: &[&str] = &["mangosteen", "volatile", "hart", "nbtree", "lmdb-wm-nosync", "lmdb-sync"];

/// A configuration of the engine: report name, engine parameters, and where it runs:
/// `None` in every experiment, else only in that one ("fig7", or "fill100K" of Fig. 8).
pub type Variant = (&'static str, &'static [(&'static str, &'static str)], Option<&'static str>);

/// The `mangosteen` configurations run beside it.
pub const VARIANTS: [Variant; 4] = [
    ("mangosteen-perwrite", &[("log", "perwrite")], None),
    ("mangosteen-pages", &[("capture", "pages")], None),
    ("mangosteen-nodedup", &[("dedup", "false")], Some("fig7")),
    ("mangosteen-nomemcpy", &[("memcpy", "false")], Some("fill100K")),
];

/// Update ratios of Fig. 6, and of Fig. 7 (with both skews).
const FIG6_UPDATES: [f64; 5] = [0.0, 0.25, 0.5, 0.75, 1.0];
const FIG7_UPDATES: [f64; 4] = [0.25, 0.5, 0.75, 1.0];

const CLAIMS: [(&str, &str); 5] = [
    ("fig5", "Fig. 5 (YCSB, Zipf 0.99, 2–96 clients on 32 cores): at 10% updates Mangosteen's peak throughput is about 2.9× both Persimmon's and in-memory Redis's (read-only requests run concurrently); at 90% updates 1.6× Persimmon's and 1.3× Redis's, with slightly higher latency than both (write batching)."),
    ("fig6", "Fig. 6: Mangosteen outperforms Persimmon at every update ratio by 2×–5× and degrades gracefully (no backend bottleneck, thanks to deduplication); Persimmon's undo logging becomes the bottleneck at 70–80% updates; Mangosteen beats Redis even at 100% updates."),
    ("fig7", "Fig. 7: deduplication's gain grows with the update ratio: at 100% updates +26% throughput for Zipfian, +21% for uniform requests."),
    ("fig8", "Fig. 8 (LevelDB suite, local mode): for fillSeq, fillRandom and overwrite Mangosteen scales better than RomulusDB, 5.5–6.5× lower latency per operation at 32 cores; fill100K (Fig. 8d): with memcpy instrumentation a 100 kB value costs one clean call and one sequential log write, 2.4× RomulusDB; without it (nomemcpy) performance plummets."),
    ("fig9", "Fig. 9 (LevelDB read workloads): Mangosteen reads from DRAM, slightly faster than RomulusDB on readSeq, less so on readReverse; 5× and 2.8× on readSeq1KB and readReverse1KB at 32 cores."),
];

fn claim(id: &str) -> &'static str {
    CLAIMS.iter().find(|c| c.0 == id).map_or("", |c| c.1)
}

/// One configuration measured: its name in the report, its engine, its settings.
struct Run {
    name: String,
    target: Target,
    settings: Settings,
    /// `None`: runs in every experiment; else only in the one named (see [`Variant`]).
    only: Option<&'static str>,
}

impl Run {
    fn go(&self, recs: Vec<Record>) -> Vec<Record> {
        if self.name == self.target.engine.name() {
            recs
        } else {
            recs.into_iter()
                .map(|mut r| {
                    r.engine = self.name.clone();
                    r
                })
                .collect()
        }
    }
}

/// The runs: each engine in `adr` (baselines have no pool), and after `mangosteen` its
/// [`VARIANTS`].
fn runs(engines: &[EngineSpec], s: &Settings, region_mib: u64) -> Vec<Run> {
    let mut v = Vec::new();
    for &e in engines {
        let lat = if e.uses_pool() { PM_LATENCY } else { Latency::NONE };
        let target = Target::new(e, Mode::Adr, lat);
        if e.name() != "mangosteen" {
            v.push(Run { name: e.name().into(), target, settings: s.clone(), only: None });
        } else {
            let mut s = s.clone();
            s.params.push(("region_mib".into(), region_mib.to_string()));
            v.push(Run { name: e.name().into(), target, settings: s.clone(), only: None });
            for (name, params, only) in VARIANTS {
                let mut settings = s.clone();
                settings.params.extend(params.iter().map(|(k, v)| (k.to_string(), v.to_string())));
                v.push(Run { name: name.into(), target, settings, only });
            }
        }
    }
    v
}

/// Reproduce the Mangosteen paper's evaluation: run, then write results, plots and report.md.
pub fn mangosteen(a: &ReproduceArgs) -> Result<Report> {
    let started = Instant::now();
    let sc = MgScale::of(a.scale);
    let engines = paper_engines(&a.engines, MANGOSTEEN_DEFAULT)?;
    let tmp = pool_dir(a.dir.as_deref())?;
    let mut s = Settings::new(tmp.path(), a.seed);
    s.keep_cdf = false;
    s.value_size = 100;
    s.op_order = crate::experiment::OpOrder::Shuffled;
    let runs_n = a.runs.max(1) as usize;
    let runs = runs(&engines, &s, sc.region_mib);
    let ints = KeySet::generate(KeyKind::Int, sc.keys, a.seed)?;
    let seq = KeySet::generate(KeyKind::Sequential, sc.keys, a.seed)?;
    let rnd = KeySet::generate(KeyKind::Random, sc.keys, a.seed)?;
    let big = KeySet::generate(KeyKind::Random, sc.big, a.seed ^ 0x100)?;
    let keys = Keys { ints, seq, rnd, big };
    let plan = plan(&runs, &sc, &keys, runs_n);
    if !a.quiet {
        eprintln!(
            "reproduce mangosteen --scale {}: {}; {} measurements ({runs_n} runs of each){}",
            a.scale.name(),
            runs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", "),
            plan.len(),
            if a.engines.is_empty() { left_out_note(&engines, MANGOSTEEN_DEFAULT) } else { String::new() }
        );
    }
    measure::calibrate();
    let (ran, timings) = plan.run(a.quiet, |pg, label, recs| run::report_failures(pg, label, recs));
    let recs = crate::stats::combine_steps(ran);
    drop(keys);
    drop(tmp);

    let rep = save_results(a, &sc, runs_n, &timings, &[], recs)?;
    let names: Vec<String> = runs.iter().filter(|r| !r.target.engine.is_null()).map(|r| r.name.clone()).collect();
    let plots = plots_or_none(plots(&rep.records, &a.out, &names, &sc));
    let max_t = max_threads(&sc);
    let checked = claims::check(claims::MANGOSTEEN, &rep.records, max_t);
    claims::add_to_json(&a.out, &checked)?;
    let md = report_md(&rep.records, &names, &sc, a, &plots, &checked, started.elapsed().as_secs_f64());
    std::fs::write(a.out.join("report.md"), md)?;
    println!("{}", fig6_table(&rep.records, &names));
    println!(
        "wrote {}/report.md, results.json, results.csv and {} plots ({:.0} s)",
        a.out.display(),
        plots.len() * 2,
        started.elapsed().as_secs_f64()
    );
    Ok(rep)
}

/// The most threads of the scale that fit the cores (the peak-throughput figures run there).
fn max_threads(sc: &MgScale) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    sc.threads.iter().copied().filter(|&t| t <= cores.max(1)).max().unwrap_or(1)
}

struct Keys {
    ints: KeySet,
    seq: KeySet,
    rnd: KeySet,
    big: KeySet,
}

fn updates_label(u: f64) -> String {
    format!("{:.0}% updates", u * 100.0)
}

/// Rename the operations of a LevelDB-like run (`basic_ops`' phases) and keep those named.
fn leveldb_ops(recs: Vec<Record>, names: &[(&str, &str)]) -> Vec<Record> {
    recs.into_iter()
        .filter_map(|mut r| {
            if r.error.is_some() {
                return Some(r);
            }
            let (_, to) = names.iter().find(|(from, _)| *from == r.op)?;
            r.op = to.to_string();
            Some(r)
        })
        .collect()
}

/// Every measurement of `reproduce mangosteen`, each group `runs` rounds.
fn plan<'a>(runs: &'a [Run], sc: &'a MgScale, k: &'a Keys, rounds: usize) -> Plan<'a, Vec<Record>> {
    let mut plan = Plan::new();
    let max_t = max_threads(sc);
    let n = sc.keys as u64;
    let main = || runs.iter().filter(|r| r.only.is_none());
    // Run `r` on mix `m` over the loaded integer keys at `th` threads, recorded as
    // experiment `exp`, workload `w` (Figs. 5-7 differ only in these).
    let mix = move |r: &Run, exp: &str, w: &str, m: &Mix, th: usize| {
        r.go(experiment::mix_run(&r.settings, &r.target, exp, w, &k.ints, m, n, sc.ops, th))
    };
    // Fig. 5: latency and throughput by threads, 10% and 90% updates.
    for u in [0.1, 0.9] {
        for &th in &sc.threads {
            for r in main() {
                let m = Mix::read_write(1.0 - u, 0.99);
                plan.step(format!("fig5 {} {} {th}T", r.name, updates_label(u)), move || {
                    mix(r, "fig5", &updates_label(u), &m, th)
                });
            }
        }
    }
    plan.rounds(rounds, "fig5");
    // Fig. 6: peak throughput by update ratio.
    for u in FIG6_UPDATES {
        for r in main() {
            let m = Mix::read_write(1.0 - u, 0.99);
            plan.step(format!("fig6 {} {}", r.name, updates_label(u)), move || {
                mix(r, "fig6", &updates_label(u), &m, max_t)
            });
        }
    }
    plan.rounds(rounds, "fig6");
    // Fig. 7: deduplication on and off, Zipfian and uniform.
    for (skew, theta) in [("zipf 0.99", 0.99), ("uniform", 0.0)] {
        for u in FIG7_UPDATES {
            for r in runs.iter().filter(|r| r.name == "mangosteen" || r.only == Some("fig7")) {
                let m = Mix::read_write(1.0 - u, theta);
                let w = format!("{skew}, {}", updates_label(u));
                plan.step(format!("fig7 {} {w}", r.name), move || mix(r, "fig7", &w, &m, max_t));
            }
        }
    }
    plan.rounds(rounds, "fig7");
    // Fig. 8: the LevelDB suite's writes.
    for th in [1, max_t] {
        for r in runs.iter().filter(|r| r.only.is_none() || r.only == Some("fill100K")) {
            plan.step(format!("fig8 fill100K {} {th}T", r.name), move || {
                let mut s = r.settings.clone();
                s.value_size = 100_000;
                let recs = experiment::basic_ops(&s, &r.target, "fig8", "100,000-byte values", &k.big, th);
                r.go(leveldb_ops(recs, &[("insert", "fill100K")]))
            });
            if r.only.is_some() {
                continue;
            }
            plan.step(format!("fig8 fillseq {} {th}T", r.name), move || {
                let recs = experiment::basic_ops(&r.settings, &r.target, "fig8", "sequential", &k.seq, th);
                r.go(leveldb_ops(recs, &[("insert", "fillseq")]))
            });
            plan.step(format!("fig8 fillrandom {} {th}T", r.name), move || {
                let recs = experiment::basic_ops(&r.settings, &r.target, "fig8", "random", &k.rnd, th);
                r.go(leveldb_ops(recs, &[("insert", "fillrandom"), ("update", "overwrite")]))
            });
        }
    }
    plan.rounds(rounds, "fig8");
    // Fig. 9: the LevelDB suite's whole-store scans, 100-byte and 1,000-byte values.
    for th in [1, max_t] {
        for (w, vs) in [("100-byte values", 100), ("1,000-byte values", 1000)] {
            for r in main() {
                plan.step(format!("fig9 {} {w} {th}T", r.name), move || {
                    let mut s = r.settings.clone();
                    s.value_size = vs;
                    r.go(experiment::full_scans(&s, &r.target, "fig9", w, &k.rnd, th))
                });
            }
        }
    }
    plan.rounds(rounds, "fig9");
    plan
}

/// Fig. 8's LevelDB-suite writes as (benchmark, workload), in the order the figure and
/// the report's table show them.
const FIG8_CASES: [(&str, &str); 4] =
    [("fillseq", "sequential"), ("fillrandom", "random"), ("overwrite", "random"), ("fill100K", "100,000-byte values")];

/// Fig. 9's LevelDB-suite scans, likewise.
const FIG9_CASES: [(&str, &str); 4] = [
    ("readseq", "100-byte values"),
    ("readreverse", "100-byte values"),
    ("readseq", "1,000-byte values"),
    ("readreverse", "1,000-byte values"),
];

fn find<'a>(
    recs: &'a [Record],
    exp: &str,
    engine: &str,
    workload: &str,
    op: Option<&str>,
    th: usize,
) -> Option<&'a Record> {
    recs.iter().find(|r| {
        r.experiment == exp
            && r.error.is_none()
            && r.engine == engine
            && r.workload == workload
            && op.is_none_or(|o| r.op == o)
            && r.threads == th
    })
}

fn mops(r: &Record) -> String {
    r.mops_cell(|x| format!("{x:.3}"))
}

/// Fig. 6 as a table: Mops/s of each engine by update ratio.
fn fig6_table(recs: &[Record], names: &[String]) -> String {
    let th = recs.iter().filter(|r| r.experiment == "fig6").map(|r| r.threads).max().unwrap_or(1);
    let cols: Vec<String> = FIG6_UPDATES.iter().map(|&u| updates_label(u)).collect();
    let rows: Vec<Vec<String>> = names
        .iter()
        .filter_map(|e| {
            let cells: Vec<String> =
                cols.iter().map(|w| find(recs, "fig6", e, w, None, th).map_or("-".into(), mops)).collect();
            cells.iter().any(|c| c != "-").then(|| std::iter::once(e.clone()).chain(cells).collect())
        })
        .collect();
    let mut head = vec!["engine (Mops/s)".to_string()];
    head.extend(cols);
    md_table(&head, &rows)
}

fn plots(
    recs: &[Record],
    out: &Path,
    names: &[String],
    sc: &MgScale,
) -> std::result::Result<Vec<(String, PathBuf)>, String> {
    let max_t = max_threads(sc);
    let mut done = Vec::new();
    let mut save = |fig: Figure, id: &str| -> std::result::Result<(), String> {
        plot::render(&fig, &out.join(id))?;
        done.push((id.to_string(), out.join(id)));
        Ok(())
    };
    // Fig. 5: median latency against throughput, a point per thread count.
    let fig5 = |w: &str| -> Vec<Line> {
        names
            .iter()
            .map(|e| Line {
                name: e.clone(),
                color: engine_color(e),
                dashed: e.starts_with("mangosteen-"),
                points: sc
                    .threads
                    .iter()
                    .filter_map(|&t| find(recs, "fig5", e, w, None, t))
                    .map(|r| (r.mops, r.p50_ns.max(1) as f64 / 1000.0))
                    .collect(),
            })
            .filter(|l| !l.points.is_empty())
            .collect()
    };
    let panels = ["10% updates", "90% updates"]
        .iter()
        .map(|w| {
            Panel::new(
                &format!("{w}: a point per thread count {:?}", sc.threads),
                "Mops/s",
                "median latency, µs",
                true,
                PanelKind::Lines { series: fig5(w), log_x: true },
            )
        })
        .collect();
    save(
        Figure {
            title: "Mangosteen Fig. 5: latency against throughput (YCSB-like, Zipf 0.99)".into(),
            cols: 2,
            panels,
        },
        "fig5",
    )?;
    // Fig. 6: throughput by update ratio.
    let series: Vec<Line> = names
        .iter()
        .map(|e| Line {
            name: e.clone(),
            color: engine_color(e),
            dashed: e.starts_with("mangosteen-"),
            points: FIG6_UPDATES
                .iter()
                .filter_map(|&u| find(recs, "fig6", e, &updates_label(u), None, max_t).map(|r| (u * 100.0, r.mops)))
                .collect(),
        })
        .filter(|l| !l.points.is_empty())
        .collect();
    save(
        Figure {
            title: format!("Mangosteen Fig. 6: throughput by update ratio ({max_t} threads, Zipf 0.99)"),
            cols: 1,
            panels: vec![Panel::new("", "% updates", "Mops/s", true, PanelKind::Lines { series, log_x: false })],
        },
        "fig6",
    )?;
    // Fig. 7: deduplication on and off.
    let cats: Vec<String> = FIG7_UPDATES.iter().map(|&u| updates_label(u)).collect();
    let panels = ["zipf 0.99", "uniform"]
        .iter()
        .map(|skew| {
            let series = ["mangosteen", "mangosteen-nodedup"]
                .iter()
                .map(|e| Bars {
                    name: e.to_string(),
                    color: engine_color(e),
                    values: cats
                        .iter()
                        .map(|c| find(recs, "fig7", e, &format!("{skew}, {c}"), None, max_t).map(|r| r.mops))
                        .collect(),
                })
                .filter(|b| b.values.iter().any(Option::is_some))
                .collect();
            Panel::new(skew, "", "Mops/s", false, PanelKind::Bars { categories: cats.clone(), series })
        })
        .collect();
    save(
        Figure { title: format!("Mangosteen Fig. 7: deduplication on and off ({max_t} threads)"), cols: 2, panels },
        "fig7",
    )?;
    // Fig. 8: µs per write.
    let f8 = FIG8_CASES;
    let cats: Vec<String> = f8.iter().map(|c| c.0.to_string()).collect();
    let panels = suite_panels(recs, names, "fig8", &f8, &cats, [1, max_t], "µs per write", |r| r.ns_per_op / 1000.0);
    save(Figure { title: "Mangosteen Fig. 8: LevelDB-suite writes".into(), cols: 2, panels }, "fig8")?;
    // Fig. 9: records scanned per µs.
    let f9 = FIG9_CASES;
    let cats: Vec<String> = ["readseq", "readreverse", "readseq 1KB", "readreverse 1KB"].map(String::from).to_vec();
    let panels = suite_panels(recs, names, "fig9", &f9, &cats, [1, max_t], "M records/s", |r| r.mops);
    save(Figure { title: "Mangosteen Fig. 9: LevelDB-suite scans".into(), cols: 2, panels }, "fig9")?;
    Ok(done)
}

/// Figs. 8 and 9 (the LevelDB suite): a panel per thread count in `threads`, in it a bar
/// per (benchmark, workload) of `cases` (labelled by `cats`) for each configuration that
/// ran any, each bar `value` of the run's record in experiment `exp`.
#[allow(clippy::too_many_arguments)]
fn suite_panels(
    recs: &[Record],
    names: &[String],
    exp: &str,
    cases: &[(&str, &str)],
    cats: &[String],
    threads: [usize; 2],
    unit: &str,
    value: fn(&Record) -> f64,
) -> Vec<Panel> {
    threads
        .iter()
        .map(|&t| {
            let series = names
                .iter()
                .map(|e| Bars {
                    name: e.clone(),
                    color: engine_color(e),
                    values: cases.iter().map(|(op, w)| find(recs, exp, e, w, Some(op), t).map(value)).collect(),
                })
                .filter(|b| b.values.iter().any(Option::is_some))
                .collect();
            Panel::new(&format!("{t} thread(s)"), "", unit, true, PanelKind::Bars { categories: cats.to_vec(), series })
        })
        .collect()
}

fn report_md(
    recs: &[Record],
    names: &[String],
    sc: &MgScale,
    a: &ReproduceArgs,
    plots: &[(String, PathBuf)],
    checked: &[claims::Checked],
    secs: f64,
) -> String {
    let img = |id: &str| super::img(plots, id);
    let max_t = max_threads(sc);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut s = String::new();
    let _ = writeln!(s, "# Mangosteen (Lersch et al.) reproduced by pmkv\n");
    let _ = writeln!(
        s,
        "`{}`: {} records loaded per mix and fill, {} operations per mix, threads {:?} ({} cores here; the paper: 32 \
         cores, up to 96 clients), {} records of 100,000 bytes for fill100K; configurations {}; {}. {}. Every number \
         below was measured in this run.\n",
        command(a),
        sc.keys,
        sc.ops,
        sc.threads,
        cores,
        sc.big,
        names.join(", "),
        crate::human::duration(secs),
        if a.runs > 1 {
            format!(
                "Each measurement ran {} times in alternating rounds; a cell gives the median and, in parentheses, the \
                 range (min–max) of the runs, and a ratio is a ratio of medians",
                a.runs
            )
        } else {
            "Each measurement ran once (`--runs 1`)".into()
        }
    );
    let _ = writeln!(
        s,
        "What stands in for what:\n\n\
         - **mangosteen**: the `mangosteen` engine, the standard `BTreeMap` made durable by compiler write capture \
         (LLVM store tracing and wrapped `memcpy`/`memmove`/`memset`, where the paper uses DynamoRIO), flat combining \
         and the deduplicated redo log (one fence and one persist per batch).\n\
         - **mangosteen-perwrite** (`log=perwrite`) stands in for **Persimmon**, which is not available: the same \
         engine and capture, but every captured store logged as it is made, one REDO record per block, each write \
         fenced before the next proceeds, nothing deduplicated; the batch then commits as Mangosteen's does. What \
         differs from Persimmon: Persimmon persists an undo log and re-executes each command on a shadow copy in PM \
         (its backend is the bottleneck); here there is no shadow execution, the records are redo records and flat \
         combining still batches the commits, so this baseline is cheaper than Persimmon's design.\n\
         - **mangosteen-nodedup** (`dedup=false`): Fig. 7's ablation. **mangosteen-pages** (`capture=pages`): capture \
         by page protection (a fault and a page copy per page a batch writes) instead of instrumentation.\n\
         - **volatile**: the same `BTreeMap` without durability, behind a reader-writer lock, standing where the paper \
         has in-memory **Redis** (single-threaded, over the network); Redis with `appendfsync always` is not run.\n\
         - **RomulusDB** (Figs. 8–9) is not available: its claims are not measured; LMDB (`lmdb-wm-nosync`: no sync; \
         `lmdb-sync`: an fsync per write) and the per-write baseline stand beside Mangosteen instead, with HART and \
         NBTree (pmkv's PM trees).\n\
         - Redis and YCSB over a 25 Gb/s network become in-process calls on {cores} cores: no request parsing to \
         parallelize, no network latency to hide the batching behind. Pool engines run in `adr` on /dev/shm (DRAM) \
         with emulated PM latency 300/100/fence: 300 ns once per fence that completes flushed lines (their \
         write-backs overlap, as `clwb`'s do on Optane; the HART paper's emulation charges every flushed line \
         instead, under which the per-write baseline flushes about as many lines as Mangosteen and keeps up with \
         it), 100 ns per PM line an engine reports reading (Mangosteen reads its DRAM copy).\n"
    );
    s.push_str(&claims::section(checked));
    // Fig. 5.
    let mut rows = Vec::new();
    for w in ["10% updates", "90% updates"] {
        for e in names {
            for &t in &sc.threads {
                if let Some(r) = find(recs, "fig5", e, w, None, t) {
                    rows.push(vec![
                        w.to_string(),
                        e.clone(),
                        t.to_string(),
                        mops(r),
                        format!("{:.2}", r.p50_ns as f64 / 1000.0),
                        format!("{:.2}", r.p99_ns as f64 / 1000.0),
                    ]);
                }
            }
        }
    }
    let _ = writeln!(
        s,
        "## Fig. 5: latency and throughput (YCSB-like, Zipf 0.99, 100-byte values)\n\n**Paper.** {}\n\n{}{}",
        claim("fig5"),
        md_table(&["mix", "engine", "threads", "Mops/s", "p50 µs", "p99 µs"].map(String::from), &rows),
        img("fig5")
    );
    let _ = writeln!(
        s,
        "## Fig. 6: throughput by update ratio ({max_t} threads)\n\n**Paper.** {}\n\n{}{}",
        claim("fig6"),
        fig6_table(recs, names),
        img("fig6")
    );
    // Fig. 7.
    let mut rows = Vec::new();
    for skew in ["zipf 0.99", "uniform"] {
        for u in FIG7_UPDATES {
            let w = format!("{skew}, {}", updates_label(u));
            let on = find(recs, "fig7", "mangosteen", &w, None, max_t);
            let off = find(recs, "fig7", "mangosteen-nodedup", &w, None, max_t);
            if on.is_none() && off.is_none() {
                continue;
            }
            rows.push(vec![
                w.clone(),
                on.map_or("-".into(), mops),
                off.map_or("-".into(), mops),
                match (on, off) {
                    (Some(a), Some(b)) if b.mops > 0.0 => format!("{:+.0}%", (a.mops / b.mops - 1.0) * 100.0),
                    _ => "-".into(),
                },
                on.map_or("-".into(), |r| format!("{:.1}", r.fences_per_op)),
                off.map_or("-".into(), |r| format!("{:.1}", r.lines_written_per_op)),
                on.map_or("-".into(), |r| format!("{:.1}", r.lines_written_per_op)),
            ]);
        }
    }
    let _ = writeln!(
        s,
        "## Fig. 7: deduplication ({max_t} threads)\n\n**Paper.** {}\n\n{}{}",
        claim("fig7"),
        md_table(
            &[
                "mix",
                "dedup Mops/s",
                "no dedup Mops/s",
                "gain",
                "fences/op (dedup)",
                "PM lines written/op (no dedup)",
                "PM lines written/op (dedup)",
            ]
            .map(String::from),
            &rows
        ),
        img("fig7")
    );
    // Fig. 8.
    let f8 = FIG8_CASES;
    let rows = rows_by_threads(names, max_t, |e, t| {
        f8.iter()
            .map(|(op, w)| {
                find(recs, "fig8", e, w, Some(op), t)
                    .map_or("-".into(), |r| r.ns_cell(|x| format!("{:.2}", x / 1000.0)))
            })
            .collect()
    });
    let fences = |e: &str| {
        find(recs, "fig8", e, "random", Some("fillrandom"), 1).map_or("-".into(), |r| format!("{:.1}", r.fences_per_op))
    };
    let big = |e: &str| find(recs, "fig8", e, "100,000-byte values", Some("fill100K"), 1).map(|r| r.ns_per_op);
    let nomemcpy = match (big("mangosteen-nomemcpy"), big("mangosteen")) {
        (Some(n), Some(m)) => format!("{:.2}×", n / m),
        _ => "not measured".into(),
    };
    let _ = writeln!(
        s,
        "## Fig. 8: LevelDB-suite writes (µs per write)\n\n**Paper.** {}\n\n{}\nFences per fillrandom write (1 thread): \
         mangosteen {}, mangosteen-perwrite {}. With memcpy capture a 100,000-byte value is one capture call, one \
         range in the deduplication set and one run in the batch's record; `mangosteen-nomemcpy` (`memcpy=false`, \
         the paper's nomemcpy) reports every 8-byte store of the copy through the store hook instead, as binary \
         instrumentation sees a copy it does not intercept: its fill100K write takes {} the time (1 thread). The \
         per-write baseline logs the value's blocks with a fence after the copy, and page capture faults and copies \
         every page the value lands on.\n\n{}",
        claim("fig8"),
        md_table(
            &["engine", "threads", "fillseq", "fillrandom", "overwrite", "fill100K"].map(String::from),
            &rows
        ),
        fences("mangosteen"),
        fences("mangosteen-perwrite"),
        nomemcpy,
        img("fig8")
    );
    // Fig. 9.
    let f9 = FIG9_CASES;
    let rows = rows_by_threads(names, max_t, |e, t| {
        f9.iter().map(|(op, w)| find(recs, "fig9", e, w, Some(op), t).map_or("-".into(), mops)).collect()
    });
    let _ = writeln!(
        s,
        "## Fig. 9: LevelDB-suite scans (million records visited per second, all threads)\n\n**Paper.** {}\n\n{}{}",
        claim("fig9"),
        md_table(
            &["engine", "threads", "readseq", "readreverse", "readseq 1KB", "readreverse 1KB"].map(String::from),
            &rows
        ),
        img("fig9")
    );
    let _ = writeln!(
        s,
        "## Not reproduced\n\n- Persimmon and RomulusDB (not available; stand-ins above), Redis (`appendfsync always`), \
         the network and YCSB's 13 M records of 10 fields.\n- Thread counts above {} (this machine's cores; 4 threads \
         oversubscribe).\n- Recovery time (§6.4): the engine's recovery is measured by `pmkv bench run -w recovery`.\n",
        cores
    );
    s
}

/// Table rows `engine, threads, cells…` at one thread and at `max_t`, for every engine in
/// `names` with at least one measured cell (`cells` gives "-" where nothing was measured).
fn rows_by_threads(names: &[String], max_t: usize, cells: impl Fn(&str, usize) -> Vec<String>) -> Vec<Vec<String>> {
    let threads: &[usize] = if max_t == 1 { &[1] } else { &[1, max_t] };
    let mut rows = Vec::new();
    for &t in threads {
        for e in names {
            let c = cells(e, t);
            if c.iter().any(|x| x != "-") {
                rows.push([vec![e.clone(), t.to_string()], c].concat());
            }
        }
    }
    rows
}
