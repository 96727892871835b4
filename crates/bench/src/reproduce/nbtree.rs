//! `pmkv bench reproduce nbtree`: the experiments of the NBTree paper (VLDB'22, §6) on this
//! machine, for NBTree, the paper's competitors that pmkv builds (FPTree, FAST&FAIR, uTree
//! when registered), HART and the volatile baseline (or the engines given), with report.md
//! putting each measurement beside the paper's claim and a table of the paper's relative
//! claims checked as ratios ([`claims::NBTREE`]).
//!
//! How the paper's setup maps here:
//! * 8-byte integer keys, uniform (Table 1, Figs. 5, 6, 11, 13) or Zipfian (YCSB, Figs.
//!   8, 9, 12), values of 8 bytes; Fig. 10's large keys and values are the Random string
//!   key set with 64-byte values;
//! * the base operations run "under random key-access distribution" (§6.2): after the
//!   inserts, searches, updates and deletes visit the keys in an independent random order
//!   ([`OpOrder::Shuffled`]), not the insert order replayed (HART's methodology, which lets
//!   HART read its leaves nearly in allocation order);
//! * `eadr` (fences only) by default, as the paper; `adr` (clwb + sfence) for Fig. 11/12;
//!   `none` (no persistence at all: the DRAM setting) for Fig. 13;
//! * thread counts: 1 and 2 (this machine has 2 cores; the paper went to 56);
//! * the paper's 16M-record trees become `--scale paper`'s 4M (the size of the authors'
//!   prototype figures in docs/results/nbtree-prototype.md), `small`'s 500K;
//! * of the paper's competitors pmkv builds FPTree, FAST&FAIR and uTree (each run when
//!   registered; a missing one is named in the report and its claims read "not measured");
//!   NVTree, WB+Tree, RNTree and BzTree are not built; of the ablations, NBTree-W
//!   (per-leaf write locks, `write_locks=true`) runs in the YCSB experiment, NBTree-SL
//!   (single-layer leaves, `single_layer=true`) in the base operations (eadr at every
//!   thread count, adr at 1 thread: Figs. 5, 6, 11 and Table 1); NBTree-WR (HTM reads) is
//!   not built.

use super::*;
use crate::experiment::{OpOrder, Settings};
use crate::progress::Plan;

/// Record counts and threads of one scale.
#[derive(Clone, Debug)]
pub struct NbScale {
    pub keys: usize,
    pub ops: u64,
    pub threads: Vec<usize>,
}

impl NbScale {
    pub fn of(s: Scale) -> NbScale {
        match s {
            Scale::Tiny => NbScale { keys: 3_000, ops: 3_000, threads: vec![1, 2] },
            Scale::Small => NbScale { keys: 500_000, ops: 500_000, threads: vec![1, 2] },
            Scale::Paper => NbScale { keys: 4_000_000, ops: 4_000_000, threads: vec![1, 2] },
        }
    }
}

const THETAS: [f64; 5] = [0.5, 0.6, 0.7, 0.9, 0.99];
const WRITE_RATIOS: [f64; 5] = [0.0, 0.25, 0.5, 0.75, 1.0];

/// The paper's Table 1 for NBTree: flushes, PM lines written per insert/delete/update,
/// PM lines read per search.
const TABLE1: [(&str, f64); 4] = [("insert", 1.0), ("delete", 1.0), ("update", 1.0), ("search", 1.0)];

/// The NBTree authors' prototype on this kind of machine (docs/results/nbtree-prototype.md): eADR, /dev/shm,
/// 4M 8-byte random keys; Mops/s at 1 and 2 threads. Measured in other runs than this one.
const PROTOTYPE: [(&str, f64, f64); 5] = [
    ("search", 1.30, 1.58),
    ("insert", 0.85, 1.55),
    ("update", 1.14, 1.35),
    ("delete", 1.10, 1.19),
    ("r50:w50 zipf 0.99", 1.31, 1.52),
];

const CLAIMS: [(&str, &str); 9] = [
    ("table1", "Table 1: NBTree writes 1 PM line (1 flush in ADR) per insert, delete and update, and reads 1 PM line per search."),
    ("fig5", "Fig. 5 (1 thread, uniform): NBTree has the lowest latency of every base operation, thanks to one PM line read per operation."),
    ("fig6", "Fig. 6 (56 threads, uniform): NBTree's throughput is 1.6-7.5x higher on insert, 1.5-5.0x on update, 2.0-4.9x on delete, 1.6-5.1x on search than the other trees."),
    ("fig7", "Fig. 7: DRAM:PM consumption of NBTree is about 1:7 after 16M inserts, and stays so after 16M more."),
    ("fig8", "Fig. 8 (YCSB 50:50, Zipf 0.99): NBTree scales almost linearly with threads with near-constant p99 latency; at 56 threads 6.0x the throughput and 32x lower p99 than the others."),
    ("fig9", "Fig. 9: NBTree gains with skew (in-place updates and log-structured inserts hit the cache), and its lead grows with the write ratio (11x at 100% writes)."),
    ("fig10", "Fig. 10: with keys and values larger than 8 bytes NBTree still leads, most at high skew."),
    ("fig11", "Figs. 11-12: every tree is faster in eADR than in ADR; NBTree has the lowest overhead in ADR (one flush per write)."),
    ("fig13", "Fig. 13: on DRAM (no persistence) NBTree searches 1.7x and inserts 1.8x faster than on PM. Recovery (§3.2): rebuilding from the PM leaves is 32x faster than building from the base data."),
];

fn claim(id: &str) -> &'static str {
    CLAIMS.iter().find(|c| c.0 == id).map_or("", |c| c.1)
}

/// Targets of `engines` in `mode` (baselines once, in `eadr` only).
fn in_mode(engines: &[EngineSpec], mode: Mode) -> Vec<Target> {
    engines
        .iter()
        .filter(|e| e.uses_pool() || mode == Mode::Eadr)
        .map(|&e| Target::new(e, mode, Latency::NONE))
        .collect()
}

/// Reproduce the NBTree paper's experiments: run, then write results, plots and report.md.
pub fn nbtree(a: &ReproduceArgs) -> Result<Report> {
    let started = Instant::now();
    let sc = NbScale::of(a.scale);
    let engines = paper_engines(&a.engines, NBTREE_DEFAULT)?;
    let tmp = pool_dir(a.dir.as_deref())?;
    let mut s = Settings::new(tmp.path(), a.seed);
    s.keep_cdf = false;
    s.op_order = OpOrder::Shuffled;
    let runs = a.runs.max(1) as usize;
    let keys = KeySet::generate(KeyKind::Int, sc.keys, a.seed)?;
    let big = KeySet::generate(KeyKind::Random, sc.keys, a.seed)?;
    let variants = Variants::of(&s);
    let plan = plan(&s, &variants, &sc, &engines, &keys, &big, runs);
    if !a.quiet {
        eprintln!(
            "reproduce nbtree --scale {}: engines {}; {} measurements ({runs} runs of each){}",
            a.scale.name(),
            engines.iter().map(|e| e.name()).collect::<Vec<_>>().join(", "),
            plan.len(),
            if a.engines.is_empty() { left_out_note(&engines, NBTREE_DEFAULT) } else { String::new() }
        );
    }
    measure::calibrate();
    let (ran, timings) = plan.run(a.quiet, |pg, label, recs| run::report_failures(pg, label, recs));
    let recs = crate::stats::combine_steps(ran);
    drop((keys, big));
    drop(tmp);

    let rep = save_results(a, &sc, runs, &timings, &[], recs)?;
    let plots = plots_or_none(plots(&rep.records, &a.out, &engines, &sc));
    let max_t = sc.threads.iter().copied().max().unwrap_or(1);
    let checked = claims::check(claims::NBTREE, &rep.records, max_t);
    claims::add_to_json(&a.out, &checked)?;
    let md = report_md(&rep.records, &engines, &sc, a, &plots, &checked, started.elapsed().as_secs_f64());
    std::fs::write(a.out.join("report.md"), md)?;
    println!("{}", table1(&rep.records));
    println!(
        "wrote {}/report.md, results.json, results.csv and {} plots ({:.0} s)",
        a.out.display(),
        plots.len() * 2,
        started.elapsed().as_secs_f64()
    );
    Ok(rep)
}

/// The settings of the ablations and of Fig. 10, derived from the run's.
struct Variants {
    /// NBTree-SL: leaf metadata in the PM blocks (a pool created with it).
    single_layer: Settings,
    /// NBTree-W: per-leaf write locks instead of lock-free writes.
    write_locks: Settings,
    /// Fig. 10: 64-byte values.
    large: Settings,
}

impl Variants {
    fn of(s: &Settings) -> Variants {
        let with = |k: &str| {
            let mut v = s.clone();
            v.params.push((k.into(), "true".into()));
            v
        };
        let mut large = s.clone();
        large.value_size = 64;
        Variants { single_layer: with("single_layer"), write_locks: with("write_locks"), large }
    }
}

/// Rename the records of an ablation run to the ablation's name.
fn renamed(mut r: Vec<Record>, name: &str) -> Vec<Record> {
    for x in &mut r {
        x.engine = name.into();
    }
    r
}

/// Every measurement of `reproduce nbtree`, each group `runs` rounds.
#[allow(clippy::too_many_arguments)]
fn plan<'a>(
    s: &'a Settings,
    v: &'a Variants,
    sc: &'a NbScale,
    engines: &'a [EngineSpec],
    keys: &'a KeySet,
    big: &'a KeySet,
    runs: usize,
) -> Plan<'a, Vec<Record>> {
    let mut plan = Plan::new();
    let max_t = sc.threads.iter().copied().max().unwrap_or(1);
    let nbtree = engines.iter().copied().find(|e| e.name() == "nbtree");
    // Table 1, Figs. 5, 6, 11, 13: the base operations, every mode and thread count.
    for mode in [Mode::Eadr, Mode::Adr, Mode::None] {
        for &th in &sc.threads {
            for tg in in_mode(engines, mode) {
                let label = format!("base {} {} {th}T", tg.engine.name(), mode.name());
                plan.step(label, move || experiment::basic_ops(s, &tg, "base", "int", keys, th));
            }
        }
    }
    if let Some(nb) = nbtree {
        // Fig. 6's NBTree-SL, at every thread count in eadr and at one thread in adr.
        for (mode, th) in sc.threads.iter().map(|&th| (Mode::Eadr, th)).chain([(Mode::Adr, 1)]) {
            let tg = Target::new(nb, mode, Latency::NONE);
            plan.step(format!("base nbtree-sl {} {th}T", mode.name()), move || {
                renamed(experiment::basic_ops(&v.single_layer, &tg, "base", "int", keys, th), "nbtree-sl")
            });
        }
        // Table 1 counts an individual insert: the same inserts, split by whether they ran
        // an SMO (the second half of the key set into a tree holding the first half).
        for mode in [Mode::Eadr, Mode::Adr] {
            let tg = Target::new(nb, mode, Latency::NONE);
            plan.step(format!("individual inserts nbtree {}", mode.name()), move || {
                experiment::individual_inserts(s, &tg, "table1", "int", keys, sc.keys / 2)
            });
        }
    }
    plan.rounds(runs, "base operations");
    // Fig. 7: space after N/2 keys and after N.
    for (label, n) in [("initial", sc.keys / 2), ("after inserts", sc.keys)] {
        for tg in in_mode(engines, Mode::Eadr) {
            plan.step(format!("space {label} {}", tg.engine.name()), move || {
                experiment::memory(s, &tg, "space", label, &keys.prefix(n))
            });
        }
    }
    plan.rounds(runs, "space");
    // Figs. 8 and 12: YCSB 50:50, Zipf 0.99, by threads, eADR and ADR.
    let ycsb = Mix::read_write(0.5, 0.99);
    let (n, ops) = (sc.keys as u64, sc.ops);
    for mode in [Mode::Eadr, Mode::Adr] {
        for &th in &sc.threads {
            for tg in in_mode(engines, mode) {
                let m = ycsb.clone();
                plan.step(format!("ycsb {} {} {th}T", tg.engine.name(), mode.name()), move || {
                    experiment::mix_run(s, &tg, "ycsb", "int zipf 0.99", keys, &m, n, ops, th)
                });
            }
        }
    }
    // Fig. 8's NBTree-W: per-leaf write locks instead of lock-free writes (eadr).
    if let Some(nb) = nbtree {
        for &th in &sc.threads {
            let (tg, m) = (Target::new(nb, Mode::Eadr, Latency::NONE), ycsb.clone());
            plan.step(format!("ycsb nbtree-w {th}T"), move || {
                renamed(
                    experiment::mix_run(&v.write_locks, &tg, "ycsb", "int zipf 0.99", keys, &m, n, ops, th),
                    "nbtree-w",
                )
            });
        }
    }
    // Fig. 9: skew and write ratio, at the most threads.
    for theta in THETAS {
        for tg in in_mode(engines, Mode::Eadr) {
            let m = Mix::read_write(0.5, theta);
            plan.step(format!("skew {theta} {}", tg.engine.name()), move || {
                experiment::mix_run(s, &tg, "skew", &format!("{theta}"), keys, &m, n, ops, max_t)
            });
        }
    }
    for w in WRITE_RATIOS {
        for tg in in_mode(engines, Mode::Eadr) {
            let m = Mix::read_write(1.0 - w, 0.99);
            plan.step(format!("writes {w} {}", tg.engine.name()), move || {
                experiment::mix_run(s, &tg, "writes", &format!("{w}"), keys, &m, n, ops, max_t)
            });
        }
    }
    plan.rounds(runs, "YCSB");
    // Fig. 10: large keys (Random strings) and 64-byte values; recovery against build.
    for tg in in_mode(engines, Mode::Eadr) {
        let m = ycsb.clone();
        plan.step(format!("large {}", tg.engine.name()), move || {
            experiment::mix_run(&v.large, &tg, "large", "random keys, 64-byte values", big, &m, n, ops, max_t)
        });
    }
    for tg in in_mode(engines, Mode::Eadr) {
        plan.step(format!("recovery {}", tg.engine.name()), move || {
            experiment::build_recover(s, &tg, "recovery", "int", keys)
        });
    }
    plan.rounds(runs, "large and recovery");
    plan
}

fn rec<'a>(
    recs: &'a [Record],
    exp: &str,
    engine: &str,
    mode: &str,
    workload: &str,
    op: &str,
    th: usize,
) -> Option<&'a Record> {
    recs.iter().find(|r| {
        r.experiment == exp
            && r.error.is_none()
            && r.engine == engine
            && (r.mode == mode || r.mode == "-")
            && r.workload == workload
            && r.op == op
            && r.threads == th
    })
}

fn pool_engines(engines: &[EngineSpec]) -> impl Iterator<Item = &EngineSpec> {
    engines.iter().filter(|e| !e.is_null())
}

/// The paper's Table 1 for the trees pmkv builds: flushes and PM lines written per
/// insert/delete/update (ADR), and PM lines read per operation.
const TABLE1_PAPER: [(&str, [&str; 3], [&str; 3], &str); 4] = [
    ("nbtree", ["1", "1", "1"], ["1", "1", "1"], "1"),
    ("fptree", ["3", "1", "3"], ["3", "1", "3"], "3"),
    ("fastfair", ["O(n)", "O(n)", "1"], ["O(n)", "O(n)", "1"], "O(n)"),
    ("utree", ["2", "1", "1"], ["2", "2", "1"], "2"),
];

/// The paper's cell of Table 1 for `engine` and `op`: "flushes / lines W / lines R".
fn table1_paper(engine: &str, op: &str) -> String {
    let Some((_, f, w, r)) = TABLE1_PAPER.iter().find(|t| t.0 == engine) else { return "-".into() };
    match ["insert", "delete", "update"].iter().position(|o| *o == op) {
        Some(i) => format!("{} / {} / {r}", f[i], w[i]),
        None => format!("- / - / {r}"),
    }
}

/// Table 1, measured: per-operation flushes (adr), PM lines written and read (eadr), for
/// NBTree, the competitors of the paper's Table 1 that this run has, and HART.
fn table1(recs: &[Record]) -> String {
    let mut rows = Vec::new();
    for e in ["nbtree", "nbtree-sl", "fptree", "fastfair", "utree", "hart"] {
        for (op, paper) in TABLE1 {
            let (Some(a), Some(x)) =
                (rec(recs, "base", e, "adr", "int", op, 1), rec(recs, "base", e, "eadr", "int", op, 1))
            else {
                continue;
            };
            let lines = if op == "search" { x.lines_read_per_op } else { x.lines_written_per_op };
            rows.push(vec![
                e.to_string(),
                op.to_string(),
                format!("{:.2}", a.flushes_per_op),
                format!("{:.2}", x.lines_written_per_op),
                format!("{:.2}", x.lines_read_per_op),
                table1_paper(e, op),
                if e == "nbtree" && op == "insert" {
                    "- (SMOs included: see the next row)".into()
                } else if e == "nbtree" {
                    format!("{paper:.0} ({})", if lines <= paper + 0.1 { "met" } else { "not met" })
                } else {
                    "-".into()
                },
            ]);
            if e == "nbtree" && op == "insert" {
                if let Some(row) = individual_row(recs) {
                    rows.push(row);
                }
            }
        }
    }
    md_table(
        &[
            "engine",
            "op",
            "flushes/op (adr)",
            "PM lines W/op (eadr)",
            "PM lines R/op (eadr)",
            "paper: flushes / lines W / lines R",
            "NBTree's 1 line",
        ]
        .map(String::from),
        &rows,
    )
}

/// Table 1's row for an individual NBTree insert (one that ran no SMO), from
/// [`experiment::individual_inserts`] in both modes, judged against the paper's 1 line.
fn individual_row(recs: &[Record]) -> Option<Vec<String>> {
    let op = "insert (individual)";
    let (a, x) =
        (rec(recs, "table1", "nbtree", "adr", "int", op, 1)?, rec(recs, "table1", "nbtree", "eadr", "int", op, 1)?);
    let share = x.extra.get("individual_share").copied().unwrap_or(0.0);
    Some(vec![
        "nbtree".into(),
        format!("insert, no SMO ({:.1}% of inserts)", 100.0 * share),
        format!("{:.2}", a.flushes_per_op),
        format!("{:.2}", x.lines_written_per_op),
        format!("{:.2}", x.lines_read_per_op),
        table1_paper("nbtree", "insert"),
        format!("1 ({})", if x.lines_written_per_op <= 1.1 { "met" } else { "not met" }),
    ])
}

/// The engines of the base-operation tables and plots: the pool engines, and the NBTree-SL
/// ablation after `nbtree` where it ran.
fn base_names(recs: &[Record], engines: &[EngineSpec]) -> Vec<String> {
    let mut names: Vec<String> = pool_engines(engines).map(|e| e.name().to_string()).collect();
    if recs.iter().any(|r| r.engine == "nbtree-sl") {
        let at = names.iter().position(|n| n == "nbtree").map_or(names.len(), |i| i + 1);
        names.insert(at, "nbtree-sl".into());
    }
    names
}

/// ns/op or Mops table of the base operations of `mode` at `th` threads (engines with no
/// figure there are left out).
fn base_table(recs: &[Record], engines: &[EngineSpec], mode: &str, th: usize, mops: bool) -> String {
    let ops = ["insert", "search", "update", "delete"];
    let rows = base_names(recs, engines)
        .into_iter()
        .filter(|e| ops.iter().any(|op| rec(recs, "base", e, mode, "int", op, th).is_some()))
        .map(|e| {
            let mut row = vec![e.clone()];
            row.extend(ops.iter().map(|op| {
                rec(recs, "base", &e, mode, "int", op, th).map_or("-".into(), |r| {
                    if mops {
                        r.mops_cell(|x| format!("{x:.2}"))
                    } else {
                        r.ns_cell(fmt)
                    }
                })
            }));
            row
        })
        .collect::<Vec<_>>();
    let mut head = vec!["engine".to_string()];
    head.extend(ops.iter().map(|o| o.to_string()));
    md_table(&head, &rows)
}

fn plots(
    recs: &[Record],
    out: &Path,
    engines: &[EngineSpec],
    sc: &NbScale,
) -> std::result::Result<Vec<(String, PathBuf)>, String> {
    let ops = ["insert", "search", "update", "delete"];
    let cats: Vec<String> = ops.iter().map(|s| s.to_string()).collect();
    let names = base_names(recs, engines);
    let bars = |exp: &str, mode: &str, th: usize, y: fn(&Record) -> f64| -> Vec<Bars> {
        names
            .iter()
            .map(|e| Bars {
                name: e.clone(),
                color: engine_color(e),
                values: ops.iter().map(|op| rec(recs, exp, e, mode, "int", op, th).map(y)).collect(),
            })
            .filter(|b| b.values.iter().any(Option::is_some))
            .collect()
    };
    let max_t = sc.threads.iter().copied().max().unwrap_or(1);
    let mut done = Vec::new();
    let mut save = |fig: Figure, id: &str| -> std::result::Result<(), String> {
        plot::render(&fig, &out.join(id))?;
        done.push((id.to_string(), out.join(id)));
        Ok(())
    };
    let bar_panel = |title: &str, y: &str, series: Vec<Bars>| {
        Panel::new(title, "operation", y, false, PanelKind::Bars { categories: cats.clone(), series })
    };
    save(
        Figure {
            title: "NBTree Fig. 5: latency of base operations (1 thread, uniform 8-byte keys, eadr)".into(),
            cols: 1,
            panels: vec![bar_panel("ns per operation", "ns/op", bars("base", "eadr", 1, |r| r.ns_per_op))],
        },
        "fig5",
    )?;
    save(
        Figure {
            title: format!("NBTree Fig. 6: throughput of base operations ({max_t} threads, eadr)"),
            cols: 1,
            panels: vec![bar_panel("Mops/s", "Mops/s", bars("base", "eadr", max_t, |r| r.mops))],
        },
        "fig6",
    )?;
    save(
        Figure {
            title: "NBTree Fig. 11: base operations in adr and eadr (1 thread)".into(),
            cols: 2,
            panels: vec![
                bar_panel("(a) adr: ns/op", "ns/op", bars("base", "adr", 1, |r| r.ns_per_op)),
                bar_panel("(b) eadr: ns/op", "ns/op", bars("base", "eadr", 1, |r| r.ns_per_op)),
            ],
        },
        "fig11",
    )?;
    save(
        Figure {
            title: "NBTree Fig. 13: on DRAM (mode none) and in eadr (1 thread)".into(),
            cols: 2,
            panels: vec![
                bar_panel("(a) none: Mops/s", "Mops/s", bars("base", "none", 1, |r| r.mops)),
                bar_panel("(b) eadr: Mops/s", "Mops/s", bars("base", "eadr", 1, |r| r.mops)),
            ],
        },
        "fig13",
    )?;
    // Fig. 8: YCSB by threads.
    let lines = |mode: &str, y: fn(&Record) -> f64| -> Vec<Line> {
        pool_engines(engines)
            .map(|e| Line {
                name: e.name().into(),
                color: engine_color(e.name()),
                dashed: false,
                points: sc
                    .threads
                    .iter()
                    .filter_map(|&t| {
                        recs.iter()
                            .find(|r| {
                                r.experiment == "ycsb"
                                    && r.error.is_none()
                                    && r.engine == e.name()
                                    && (r.mode == mode || r.mode == "-")
                                    && r.threads == t
                            })
                            .map(|r| (t as f64, y(r)))
                    })
                    .collect(),
            })
            .collect()
    };
    save(
        Figure {
            title: "NBTree Fig. 8: YCSB 50:50, Zipf 0.99 (eadr)".into(),
            cols: 2,
            panels: vec![
                Panel::new(
                    "(a) throughput",
                    "threads",
                    "Mops/s",
                    false,
                    PanelKind::Lines { series: lines("eadr", |r| r.mops), log_x: false },
                ),
                Panel::new(
                    "(b) p99 latency",
                    "threads",
                    "ns",
                    false,
                    PanelKind::Lines { series: lines("eadr", |r| r.p99_ns as f64), log_x: false },
                ),
            ],
        },
        "fig8",
    )?;
    let sweep = |exp: &str| -> Vec<Line> {
        pool_engines(engines)
            .map(|e| Line {
                name: e.name().into(),
                color: engine_color(e.name()),
                dashed: false,
                points: recs
                    .iter()
                    .filter(|r| r.experiment == exp && r.error.is_none() && r.engine == e.name())
                    .filter_map(|r| r.workload.parse::<f64>().ok().map(|x| (x, r.mops)))
                    .collect(),
            })
            .collect()
    };
    save(
        Figure {
            title: format!("NBTree Fig. 9: YCSB by skew (50:50) and by write ratio (Zipf 0.99), {max_t} threads, eadr"),
            cols: 2,
            panels: vec![
                Panel::new(
                    "(a) skew",
                    "Zipf theta",
                    "Mops/s",
                    false,
                    PanelKind::Lines { series: sweep("skew"), log_x: false },
                ),
                Panel::new(
                    "(b) write ratio",
                    "share of writes",
                    "Mops/s",
                    false,
                    PanelKind::Lines { series: sweep("writes"), log_x: false },
                ),
            ],
        },
        "fig9",
    )?;
    // Figs. 7, 10, 12 and recovery: one bar per engine and category.
    let names: Vec<&str> = pool_engines(engines).map(|e| e.name()).collect();
    let by_engine = |cats: &[&str], value: &dyn Fn(&str, &str) -> Option<f64>| -> Vec<Bars> {
        names
            .iter()
            .map(|&n| Bars {
                name: n.into(),
                color: engine_color(n),
                values: cats.iter().map(|c| value(n, c)).collect(),
            })
            .collect()
    };
    let find_x = |exp: &str, engine: &str, pred: &dyn Fn(&Record) -> bool| -> Option<Record> {
        recs.iter().find(|r| r.experiment == exp && r.engine == engine && r.error.is_none() && pred(r)).cloned()
    };
    let space_cats = ["initial", "after inserts"];
    let space = |key: &'static str| {
        by_engine(&space_cats, &|n, c| {
            find_x("space", n, &|r| r.workload == c).and_then(|r| r.extra.get(key).map(|b| b / 1048576.0))
        })
    };
    let cat = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    save(
        Figure {
            title: "NBTree Fig. 7: space after N/2 and N keys".into(),
            cols: 2,
            panels: vec![
                Panel::new(
                    "(a) DRAM",
                    "when",
                    "MiB",
                    false,
                    PanelKind::Bars { categories: cat(&space_cats), series: space("dram_bytes") },
                ),
                Panel::new(
                    "(b) PM",
                    "when",
                    "MiB",
                    false,
                    PanelKind::Bars { categories: cat(&space_cats), series: space("pm_bytes") },
                ),
            ],
        },
        "fig7",
    )?;
    let modes = ["eadr", "adr"];
    let ycsb = by_engine(&modes, &|n, m| {
        find_x("ycsb", n, &|r| (r.mode == m || (r.mode == "-" && m == "eadr")) && r.threads == max_t).map(|r| r.mops)
    });
    let large = by_engine(&["YCSB 50:50"], &|n, _| find_x("large", n, &|_| true).map(|r| r.mops));
    let rec_cats = ["build", "recovery"];
    let recovery = by_engine(&rec_cats, &|n, c| find_x("recovery", n, &|r| r.op == c).map(|r| r.wall_s));
    save(
        Figure {
            title: format!("NBTree Figs. 10 and 12, and recovery ({max_t} threads for the mixes)"),
            cols: 3,
            panels: vec![
                Panel::new(
                    "(a) Fig. 10: large keys and values",
                    "",
                    "Mops/s",
                    false,
                    PanelKind::Bars { categories: cat(&["YCSB 50:50"]), series: large },
                ),
                Panel::new(
                    "(b) Fig. 12: YCSB 50:50 by mode",
                    "mode",
                    "Mops/s",
                    false,
                    PanelKind::Bars { categories: cat(&modes), series: ycsb },
                ),
                Panel::new(
                    "(c) build vs recovery",
                    "",
                    "seconds",
                    true,
                    PanelKind::Bars { categories: cat(&rec_cats), series: recovery },
                ),
            ],
        },
        "fig10-12",
    )?;
    Ok(done)
}

fn report_md(
    recs: &[Record],
    engines: &[EngineSpec],
    sc: &NbScale,
    a: &ReproduceArgs,
    plots: &[(String, PathBuf)],
    checked: &[claims::Checked],
    secs: f64,
) -> String {
    let img = |id: &str| super::img(plots, id);
    let max_t = sc.threads.iter().copied().max().unwrap_or(1);
    let mut s = String::new();
    let _ = writeln!(s, "# NBTree (VLDB 2022) reproduced by pmkv\n");
    let _ = writeln!(
        s,
        "`{}`: {} 8-byte keys, {} operations per mix, threads {:?}, engines {}; {}. \
         Every number below was measured in this run unless marked otherwise: {}. The paper's competitors that pmkv builds \
         (`fptree`, `fastfair`, `utree`: engines written after their papers over the same substrate) run in the same \
         rounds as NBTree{}; HART and the volatile `BTreeMap` (no persistence) stand beside them, and `null` is the \
         harness's own cost. \
         The base operations visit the keys in a random order independent of the insert order (the paper's random key \
         access; `--op-order shuffled`). This machine has {} cores (the paper: 56 threads).\n",
        command(a),
        sc.keys,
        sc.ops,
        sc.threads,
        engines.iter().map(|e| e.name()).collect::<Vec<_>>().join(", "),
        crate::human::duration(secs),
        {
            let m = missing_defaults(NBTREE_DEFAULT);
            if m.is_empty() || !a.engines.is_empty() {
                String::new()
            } else {
                format!(" (not in this build, skipped: {}; their claims read \"not measured\")", m.join(", "))
            }
        },
        if a.runs > 1 {
            format!(
                "each measurement ran {} times in alternating rounds; a cell gives the median and, in parentheses, \
                 the range (min–max) of the runs, and a ratio is a ratio of medians (p99 and counters: medians)",
                a.runs
            )
        } else {
            "each measurement ran once (`--runs 1`): single figures".into()
        },
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    s.push_str(&claims::section(checked));
    let _ = writeln!(
        s,
        "## Table 1: PM overhead per operation\n\n**Paper.** {} Its Table 1 for the other trees is in the \
         \"paper\" column (an individual insert/delete/update; the paper gives one PM line read figure per tree).\n\n{}",
        claim("table1"),
        table1(recs)
    );
    let _ = writeln!(
        s,
        "\"Met\" allows 0.1 line above the paper's 1: a fingerprint collision (1 in 256 per other key of \
         the leaf) costs a second line now and then, in the paper's design as here. The paper's Table 1 counts an \
         individual insert; the `insert` row above is the mean over all the inserts of the base phase, SMOs included \
         (two new 2 KiB blocks for every ~40 inserts), and the row after it the inserts that ran no SMO: the second \
         half of the key set inserted one at a time into a tree holding the first half, each insert's counters read \
         around it, those that wrote fewer than 8 lines counted (an SMO writes at least a whole new block). In \
         `adr` an insert flushes its line twice (the payload before the key is stored, since a crash may persist any \
         subset of a line's 8-byte words), where the paper flushes once.\n"
    );
    let _ = writeln!(
        s,
        "## Fig. 5: latency, 1 thread (eadr, ns/op)\n\n**Paper.** {}\n\n{}{}",
        claim("fig5"),
        base_table(recs, engines, "eadr", 1, false),
        img("fig5")
    );
    let _ = writeln!(
        s,
        "## Fig. 6: throughput, {max_t} threads (eadr, Mops/s)\n\n**Paper.** {}\n\n{}{}",
        claim("fig6"),
        base_table(recs, engines, "eadr", max_t, true),
        img("fig6")
    );
    let sl: Vec<String> = ["insert", "search", "update", "delete"]
        .iter()
        .filter_map(|op| {
            let two = rec(recs, "base", "nbtree", "eadr", "int", op, max_t)?;
            let one = rec(recs, "base", "nbtree-sl", "eadr", "int", op, max_t)?;
            Some(format!("{op} {:.2}x", two.mops / one.mops))
        })
        .collect();
    if !sl.is_empty() {
        let _ = writeln!(
            s,
            "Two-layer leaves against single-layer ones (nbtree / nbtree-sl, {max_t} threads): {}. The paper: 2.4x on \
             insert, up to 1.29x on update, delete and search. Here PM is DRAM (/dev/shm, no added latency), so an \
             extra metadata line read from PM costs what a DRAM line costs.\n",
            sl.join(", ")
        );
    }
    // Against the authors' prototype (docs/results/nbtree-prototype.md).
    let mut rows = Vec::new();
    for (op, p1, p2) in PROTOTYPE {
        for (th, p) in [(1usize, p1), (2, p2)] {
            let got = if op.starts_with('r') {
                recs.iter().find(|r| {
                    r.experiment == "ycsb"
                        && r.engine == "nbtree"
                        && r.mode == "eadr"
                        && r.threads == th
                        && r.error.is_none()
                })
            } else {
                rec(recs, "base", "nbtree", "eadr", "int", op, th)
            };
            if let Some(r) = got {
                rows.push(vec![op.to_string(), th.to_string(), format!("{p:.2}"), r.mops_cell(|x| format!("{x:.2}"))]);
            }
        }
    }
    let _ = writeln!(
        s,
        "### Beside the authors' prototype\n\nFor orientation only: the prototype's figures are from other runs (4M random \
         8-byte keys, eADR, /dev/shm, docs/results/nbtree-prototype.md), pmkv's from this run at this scale, so \
         no ratio is drawn here. The like-for-like comparison, both built and run in the same rounds, is \
         docs/results/nbtree-prototype.md.\n\n{}",
        md_table(&["operation", "threads", "prototype Mops/s (other runs)", "pmkv nbtree Mops/s (this run)"].map(String::from), &rows)
    );
    // Fig. 7.
    let mut rows = Vec::new();
    for e in pool_engines(engines) {
        for label in ["initial", "after inserts"] {
            if let Some(r) = recs
                .iter()
                .find(|r| r.experiment == "space" && r.engine == e.name() && r.workload == label && r.error.is_none())
            {
                let d = r.extra.get("dram_bytes").copied().unwrap_or(0.0);
                let p = r.extra.get("pm_bytes").copied().unwrap_or(0.0);
                rows.push(vec![
                    e.name().into(),
                    format!("{label} ({} keys)", r.records),
                    format!("{:.1}", d / 1048576.0),
                    format!("{:.1}", p / 1048576.0),
                    if d > 0.0 && p > 0.0 { format!("1:{:.1}", p / d) } else { "-".into() },
                ]);
            }
        }
    }
    let _ = writeln!(
        s,
        "## Fig. 7: space\n\n**Paper.** {}\n\n{}",
        claim("fig7"),
        md_table(&["engine", "when", "DRAM MiB", "PM MiB", "DRAM:PM"].map(String::from), &rows),
    );
    s.push_str(&img("fig7"));
    // Fig. 8 and 12.
    let mut rows = Vec::new();
    let mut names: Vec<&str> = pool_engines(engines).map(|e| e.name()).collect();
    names.insert(1.min(names.len()), "nbtree-w");
    for e in names {
        for mode in ["eadr", "adr"] {
            for &th in &sc.threads {
                if let Some(r) = recs.iter().find(|r| {
                    r.experiment == "ycsb"
                        && r.engine == e
                        && (r.mode == mode || r.mode == "-")
                        && r.threads == th
                        && r.error.is_none()
                }) {
                    if r.mode == "-" && mode == "adr" {
                        continue;
                    }
                    rows.push(vec![
                        e.into(),
                        r.mode.clone(),
                        th.to_string(),
                        r.mops_cell(|x| format!("{x:.2}")),
                        r.p99_ns.to_string(),
                    ]);
                }
            }
        }
    }
    let _ = writeln!(
        s,
        "## Figs. 8 and 12: YCSB 50:50, Zipf 0.99\n\n**Paper.** {} NBTree-W (per-leaf write locks) \
         reaches 1/5.5 of NBTree's throughput at 56 threads.\n\n{}{}",
        claim("fig8"),
        md_table(&["engine", "mode", "threads", "Mops/s", "p99 ns"].map(String::from), &rows),
        img("fig8")
    );
    // Fig. 9.
    let mut rows = Vec::new();
    for exp in ["skew", "writes"] {
        for e in pool_engines(engines) {
            let mut row = vec![exp.to_string(), e.name().into()];
            for r in recs.iter().filter(|r| r.experiment == exp && r.engine == e.name() && r.error.is_none()) {
                row.push(format!("{}: {}", r.workload, r.mops_cell(|x| format!("{x:.2}"))));
            }
            rows.push(row);
        }
    }
    let width = rows.iter().map(|r| r.len()).max().unwrap_or(2);
    for r in &mut rows {
        r.resize(width, String::new());
    }
    let mut head = vec!["sweep".to_string(), "engine".into()];
    head.extend((2..width).map(|i| format!("point {}", i - 1)));
    let _ = writeln!(
        s,
        "## Fig. 9: skew and write ratio ({max_t} threads, Mops/s)\n\n**Paper.** {}\n\n{}{}",
        claim("fig9"),
        md_table(&head, &rows),
        img("fig9")
    );
    // Fig. 10.
    let rows: Vec<Vec<String>> = pool_engines(engines)
        .filter_map(|e| recs.iter().find(|r| r.experiment == "large" && r.engine == e.name() && r.error.is_none()))
        .map(|r| vec![r.engine.clone(), r.mops_cell(|x| format!("{x:.2}")), r.p99_ns.to_string()])
        .collect();
    let _ = writeln!(s, "## Fig. 10: large keys and values\n\n**Paper.** {}\n\nRandom string keys, 64-byte values, YCSB 50:50 Zipf 0.99, {max_t} threads:\n\n{}", claim("fig10"), md_table(&["engine", "Mops/s", "p99 ns"].map(String::from), &rows));
    let _ = writeln!(
        s,
        "## Figs. 11 and 12: adr against eadr\n\n**Paper.** {}\n\nadr, 1 thread (ns/op):\n\n{}{}",
        claim("fig11"),
        base_table(recs, engines, "adr", 1, false),
        img("fig11")
    );
    let _ = writeln!(
        s,
        "## Fig. 13 and recovery\n\n**Paper.** {}\n\nMode none (DRAM, no persistence), 1 thread (Mops/s):\n\n{}{}",
        claim("fig13"),
        base_table(recs, engines, "none", 1, true),
        img("fig13")
    );
    let mut rows = Vec::new();
    for e in pool_engines(engines) {
        let b = recs
            .iter()
            .find(|r| r.experiment == "recovery" && r.engine == e.name() && r.op == "build" && r.error.is_none());
        let r = recs
            .iter()
            .find(|r| r.experiment == "recovery" && r.engine == e.name() && r.op == "recovery" && r.error.is_none());
        if let (Some(b), Some(r)) = (b, r) {
            rows.push(vec![
                e.name().into(),
                b.wall_cell(|x| format!("{x:.3}")),
                r.wall_cell(|x| format!("{x:.3}")),
                format!("{:.1}x", b.wall_s / r.wall_s.max(1e-9)),
            ]);
        }
    }
    let _ = writeln!(
        s,
        "Recovery (a clean reopen: every block's seal verified, metadata and inner nodes rebuilt) against building \
         the same tree by inserting every key:\n\n{}",
        md_table(&["engine", "build s", "recovery s", "build / recovery"].map(String::from), &rows)
    );
    let _ = writeln!(s, "Figs. 10 and 12 and the recovery times as bars:\n\n{}", img("fig10-12"));
    let _ = writeln!(
        s,
        "## Not reproduced\n\n- The paper's NVTree, WB+Tree, RNTree and BzTree, and the ablation NBTree-WR (HTM reads), \
         are not built in pmkv (NBTree-W is: `--param write_locks=true`, the `nbtree-w` rows; so is NBTree-SL: `--param \
         single_layer=true` at creation, the `nbtree-sl` rows).\n- Thread counts above {} (this machine's cores).\n",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    s
}
