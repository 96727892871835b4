//! `pmkv bench reproduce <paper>`: the papers' experiments, scaled to this machine.
//!
//! **hart** regenerates the experiments behind HART's Figures 4–10 (ICDE'19 paper, §IV) for
//! every engine in `pmkv::Registry::builtin()` and the baselines, writes one plot per figure (PNG and
//! SVG), `results.json`, `results.csv`, and `report.md`, which puts each figure beside
//! what the paper claims and what this run measured.
//!
//! How the paper's setup is mapped here:
//! * PM latency configurations 300/100, 300/300, 600/300 (write/read ns) through the
//!   substrate's emulation (extra write latency per flushed line, extra read latency per PM
//!   line an engine reports reading), in `adr` mode — the paper added the write latency to
//!   each `persistent()` call, which is a flush on an ADR platform;
//! * baselines (the volatile `BTreeMap`, LMDB) have no PM, so latency settings do not apply
//!   to them: they are measured once per workload and drawn in every latency group;
//! * single-threaded except Fig. 10d, as in the paper;
//! * record counts: `--scale paper` uses the paper's where this machine (2 cores, 24 GiB)
//!   can hold them — 1 M Sequential/Random records (the paper's count for 300/300 and
//!   600/300), Fig. 8/10c up to 10 M (the paper went to 100 M); `small` finishes in a few
//!   minutes; `tiny-for-tests` is for the test suite only.
//!
//! **nbtree** and **mangosteen**: the engines are not built yet; the command says so and
//! fails (exit status 2) rather than writing an empty report that looks like a result.

use crate::cli::{engine_color, series_label};
use crate::engines::{self, EngineSpec};
use crate::experiment::{self, Settings, Target};
use crate::plot::{self, Bars, Figure, Line, Panel, PanelKind};
use crate::progress::Progress;
use crate::report::{self, Meta, Record, Report};
use crate::workload::mix::Mix;
use crate::workload::{KeyKind, KeySet};
use crate::{measure, pool_dir, BenchError, Result};
use pmkv::{Latency, Mode};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paper {
    Hart,
    Nbtree,
    Mangosteen,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Seconds; for the test suite only.
    #[value(name = "tiny-for-tests")]
    Tiny,
    /// A few minutes on a 2-core machine.
    Small,
    /// The paper's record counts where the machine can hold them (long).
    Paper,
}

impl Scale {
    pub fn name(self) -> &'static str {
        match self {
            Scale::Tiny => "tiny-for-tests",
            Scale::Small => "small",
            Scale::Paper => "paper",
        }
    }
}

/// `pmkv bench reproduce`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReproduceArgs {
    /// Which paper's experiments: hart, nbtree, mangosteen.
    #[arg(value_enum)]
    pub paper: Paper,
    /// small (minutes), paper (the paper's sizes where they fit; long), tiny-for-tests.
    #[arg(long, value_enum, default_value_t = Scale::Small)]
    pub scale: Scale,
    /// Output directory: report.md, results.json, results.csv, figN.png/.svg.
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
    /// Only these engines (repeatable); default every engine in pmkv::Registry::builtin() plus baselines.
    #[arg(long = "engine", short = 'e')]
    pub engines: Vec<String>,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Where temporary pools go (default /dev/shm); deleted afterwards.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// No progress output.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

pub fn reproduce(a: &ReproduceArgs) -> Result<()> {
    match a.paper {
        Paper::Hart => hart(a).map(|_| ()),
        Paper::Nbtree => not_built("nbtree", "NBTree", "int-uniform, int-zipf, ycsb-a, rw-sweep, skew-sweep"),
        Paper::Mangosteen => not_built("mangosteen", "Mangosteen", "ycsb-a … ycsb-f, rw-sweep, skew-sweep"),
    }
}

fn not_built(engine: &str, paper: &str, workloads: &str) -> Result<()> {
    let present = pmkv::Registry::builtin().names().contains(&engine);
    let why = if present {
        format!("the {engine} engine exists, but reproducing {paper}'s figures is not implemented yet")
    } else {
        format!(
            "the {engine} engine is not built yet (pmkv::Registry::builtin() = {})",
            pmkv::Registry::builtin().names().join(", ")
        )
    };
    Err(BenchError(format!(
        "reproduce {engine}: {why}; nothing was run. Its workloads already run on the other engines: \
         pmkv bench run --workload W, with W one of {workloads}"
    )))
}

/// Record counts of one scale.
#[derive(Clone, Debug)]
pub struct HartScale {
    pub dict: usize,
    pub seq: usize,
    pub rand: usize,
    pub fig8: Vec<usize>,
    pub mix_load: u64,
    pub mix_ops: u64,
    pub range_keys: usize,
    pub range_len: usize,
    pub range_reps: usize,
    pub mem_keys: usize,
    pub recovery: Vec<usize>,
    pub scal_keys: usize,
    pub threads: Vec<usize>,
}

impl HartScale {
    pub fn of(s: Scale) -> HartScale {
        let words = crate::workload::dictionary::WORDS;
        match s {
            Scale::Tiny => HartScale {
                dict: 2_000,
                seq: 2_000,
                rand: 2_000,
                fig8: vec![500, 1_000, 2_000],
                mix_load: 1_000,
                mix_ops: 1_000,
                range_keys: 3_000,
                range_len: 1_000,
                range_reps: 3,
                mem_keys: 2_000,
                recovery: vec![500, 1_000],
                scal_keys: 2_000,
                threads: vec![1, 2],
            },
            Scale::Small => HartScale {
                dict: words,
                seq: 200_000,
                rand: 200_000,
                fig8: vec![50_000, 100_000, 200_000, 400_000],
                mix_load: 200_000,
                mix_ops: 200_000,
                range_keys: 200_000,
                range_len: 100_000,
                range_reps: 5,
                mem_keys: 200_000,
                recovery: vec![100_000, 200_000, 400_000],
                scal_keys: 200_000,
                threads: vec![1, 2, 4],
            },
            Scale::Paper => HartScale {
                dict: words,
                seq: 1_000_000,
                rand: 1_000_000,
                fig8: vec![1_000_000, 3_000_000, 10_000_000],
                mix_load: 1_000_000,
                mix_ops: 1_000_000,
                range_keys: 1_000_000,
                range_len: 100_000,
                range_reps: 10,
                mem_keys: 10_000_000,
                recovery: vec![1_000_000, 3_000_000, 10_000_000],
                scal_keys: 10_000_000,
                threads: vec![1, 2, 4, 8, 16],
            },
        }
    }
}

/// The paper's three PM latency configurations.
pub const HART_LATENCIES: [Latency; 3] = [
    Latency { write_ns: 300, read_ns: 100 },
    Latency { write_ns: 300, read_ns: 300 },
    Latency { write_ns: 600, read_ns: 300 },
];

const OPS: [&str; 4] = ["insert", "search", "update", "delete"];
const WORKLOADS: [KeyKind; 3] = [KeyKind::Dictionary, KeyKind::Sequential, KeyKind::Random];

/// Pool engines in each latency setting, baselines once.
fn targets(engines: &[EngineSpec], lats: &[Latency]) -> Vec<Target> {
    let mut v = Vec::new();
    for &e in engines {
        if e.uses_pool() {
            v.extend(lats.iter().map(|&l| Target::new(e, Mode::Adr, l)));
        } else {
            v.push(Target::new(e, Mode::Adr, Latency::NONE));
        }
    }
    v
}

/// Run HART's experiments; returns the report (also written to `a.out`).
pub fn hart(a: &ReproduceArgs) -> Result<Report> {
    let started = Instant::now();
    let sc = HartScale::of(a.scale);
    let engines = engines::parse_list(&a.engines)?;
    let tmp = pool_dir(a.dir.as_deref())?;
    let mut s = Settings::new(tmp.path(), a.seed);
    s.keep_cdf = true;
    let l1 = [HART_LATENCIES[0]];
    let t3 = targets(&engines, &HART_LATENCIES);
    let t1 = targets(&engines, &l1);
    let t0 = targets(&engines, &[Latency::NONE]);
    let steps = WORKLOADS.len() * t3.len()
        + sc.fig8.len() * t1.len()
        + 3 * t3.len()
        + t3.len()
        + t0.len()
        + sc.recovery.len() * t1.len()
        + sc.threads.len() * t1.len();
    let mut pg = Progress::new(steps as u64, a.quiet);
    pg.println(&format!(
        "reproduce hart --scale {}: engines {}; {} measurements",
        a.scale.name(),
        engines.iter().map(|e| e.name()).collect::<Vec<_>>().join(", "),
        steps
    ));
    measure::calibrate();
    let mut recs: Vec<Record> = Vec::new();
    let mut timings: Vec<(String, f64)> = Vec::new();
    let step = |pg: &mut Progress, recs: &mut Vec<Record>, label: String, f: &mut dyn FnMut() -> Vec<Record>| {
        pg.set(&label);
        let r = f();
        for x in r.iter().filter(|x| x.error.is_some()) {
            pg.println(&format!("  {}: {} — {}", label, x.engine, x.error.as_deref().unwrap_or("")));
        }
        recs.extend(r);
        pg.inc(&label);
    };

    // Figs. 4–7: the four basic operations, three workloads, three latency settings.
    let t = Instant::now();
    for kind in WORKLOADS {
        let n = match kind {
            KeyKind::Dictionary => sc.dict,
            KeyKind::Sequential => sc.seq,
            _ => sc.rand,
        };
        let keys = KeySet::generate(kind, n, a.seed)?;
        for tg in &t3 {
            let label = format!("fig4-7 {} {} {}", kind.name(), tg.engine.name(), tg.engine.latency_label(tg.latency));
            step(&mut pg, &mut recs, label, &mut || experiment::basic_ops(&s, tg, "fig4-7", kind.name(), &keys, 1));
        }
    }
    timings.push(("Figs. 4–7".into(), t.elapsed().as_secs_f64()));

    // Fig. 8: number of records, Random, 300/100.
    let t = Instant::now();
    let biggest = KeySet::generate(KeyKind::Random, sc.fig8.iter().copied().max().unwrap_or(0), a.seed)?;
    for &n in &sc.fig8 {
        let keys = biggest.prefix(n);
        for tg in &t1 {
            let label = format!("fig8 {n} records {}", tg.engine.name());
            step(&mut pg, &mut recs, label, &mut || {
                experiment::basic_ops(&s, tg, "fig8", &format!("random {n}"), &keys, 1)
            });
        }
    }
    drop(biggest);
    timings.push(("Fig. 8".into(), t.elapsed().as_secs_f64()));

    // Fig. 9: mixed workloads over Random keys, uniform requests.
    let t = Instant::now();
    let mixes = [Mix::hart_read_intensive(), Mix::hart_read_modify_write(), Mix::hart_write_intensive()];
    let need = mixes.iter().map(|m| experiment::mix_keys_needed(&s, m, sc.mix_load, sc.mix_ops, 1)).max().unwrap_or(0);
    let keys = KeySet::generate(KeyKind::Random, need as usize, a.seed)?;
    for m in &mixes {
        for tg in &t3 {
            let label = format!("fig9 {} {} {}", m.name, tg.engine.name(), tg.engine.latency_label(tg.latency));
            step(&mut pg, &mut recs, label, &mut || {
                experiment::mix_run(&s, tg, "fig9", "random (uniform)", &keys, m, sc.mix_load, sc.mix_ops, 1)
            });
        }
    }
    drop(keys);
    timings.push(("Fig. 9".into(), t.elapsed().as_secs_f64()));

    // Fig. 10a: range query of 100,000 records under Sequential.
    let t = Instant::now();
    let keys = KeySet::generate(KeyKind::Sequential, sc.range_keys, a.seed)?;
    for tg in &t3 {
        let label = format!("fig10a range {} {}", tg.engine.name(), tg.engine.latency_label(tg.latency));
        step(&mut pg, &mut recs, label, &mut || {
            experiment::range_query(&s, tg, "fig10a", "sequential", &keys, sc.range_len, sc.range_reps)
        });
    }
    // Fig. 10b: memory after loading Sequential records (latency does not change it).
    let keys = KeySet::generate(KeyKind::Sequential, sc.mem_keys, a.seed)?;
    for tg in &t0 {
        let label = format!("fig10b memory {}", tg.engine.name());
        step(&mut pg, &mut recs, label, &mut || experiment::memory(&s, tg, "fig10b", "sequential", &keys));
    }
    // Fig. 10c: build vs recovery, Random, 300/100.
    let biggest = KeySet::generate(KeyKind::Random, sc.recovery.iter().copied().max().unwrap_or(0), a.seed)?;
    for &n in &sc.recovery {
        let keys = biggest.prefix(n);
        for tg in &t1 {
            let label = format!("fig10c recovery {n} {}", tg.engine.name());
            step(&mut pg, &mut recs, label, &mut || experiment::build_recover(&s, tg, "fig10c", "random", &keys));
        }
    }
    // Fig. 10d: threads, Random, 300/100.
    let keys = KeySet::generate(KeyKind::Random, sc.scal_keys, a.seed)?;
    for &th in &sc.threads {
        for tg in &t1 {
            let label = format!("fig10d {th} threads {}", tg.engine.name());
            step(&mut pg, &mut recs, label, &mut || experiment::basic_ops(&s, tg, "fig10d", "random", &keys, th));
        }
    }
    timings.push(("Fig. 10".into(), t.elapsed().as_secs_f64()));
    pg.finish();
    drop(pg);
    drop(tmp);

    // Outputs.
    std::fs::create_dir_all(&a.out)?;
    let mut meta = Meta::new(
        &format!("pmkv bench reproduce hart --scale {} --out {}", a.scale.name(), a.out.display()),
        a.seed,
        a.dir.as_deref().unwrap_or(Path::new("/dev/shm")),
    );
    meta.notes.push(format!("scale {:?}", sc));
    meta.notes.extend(timings.iter().map(|(k, v)| format!("{k}: {v:.1} s")));
    meta.notes.push(format!("total {:.1} s", started.elapsed().as_secs_f64()));
    let rep = Report { meta, records: recs };
    report::write_files(&a.out, "results", &rep)?;
    let figs = match figures(&rep.records, &a.out, &engines) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("pmkv bench: plots skipped: {e}");
            vec![]
        }
    };
    let md = report_md(&rep, &sc, a, &engines, &figs, started.elapsed().as_secs_f64());
    std::fs::write(a.out.join("report.md"), md)?;
    println!("{}", summary_table(&rep.records));
    println!(
        "wrote {}/report.md, results.json, results.csv and {} plots ({:.0} s)",
        a.out.display(),
        figs.len() * 2,
        started.elapsed().as_secs_f64()
    );
    Ok(rep)
}

fn lat_names() -> Vec<String> {
    HART_LATENCIES.iter().map(|&l| engines::latency_name(l)).collect()
}

fn ok<'a>(recs: &'a [Record], exp: &'a str) -> impl Iterator<Item = &'a Record> + 'a {
    recs.iter().filter(move |r| r.experiment == exp && r.error.is_none())
}

fn find<'a>(recs: &'a [Record], exp: &str, engine: &str, lat: &str, workload: &str, op: &str) -> Option<&'a Record> {
    recs.iter().find(|r| {
        r.experiment == exp
            && r.error.is_none()
            && r.engine == engine
            && (r.latency == lat || r.latency == "-")
            && r.workload == workload
            && r.op == op
    })
}

fn engine_names(recs: &[Record], exp: &str, engines: &[EngineSpec]) -> Vec<EngineSpec> {
    engines
        .iter()
        .copied()
        .filter(|e| recs.iter().any(|r| r.experiment == exp && r.engine == e.name() && r.error.is_none()))
        .collect()
}

fn legend_name(e: &EngineSpec) -> String {
    if e.uses_pool() {
        format!("{} (adr)", e.name())
    } else {
        format!("{} (no PM latency)", e.name())
    }
}

fn spread(vals: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = vals.filter(|x| *x > 0.0).collect();
    if v.is_empty() {
        return 1.0;
    }
    v.iter().copied().fold(0.0, f64::max) / v.iter().copied().fold(f64::INFINITY, f64::min)
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

/// Draw every figure; returns (figure id, file stem) for the report.
fn figures(recs: &[Record], out: &Path, all: &[EngineSpec]) -> std::result::Result<Vec<(String, PathBuf)>, String> {
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

/// Table cells: whole nanoseconds (or 3 significant digits below 100).
fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        plot::fmt_num(v)
    }
}

/// Markdown table.
fn md_table(head: &[String], rows: &[Vec<String>]) -> String {
    let mut s = format!("| {} |\n|{}|\n", head.join(" | "), head.iter().map(|_| "---").collect::<Vec<_>>().join("|"));
    for r in rows {
        let _ = writeln!(s, "| {} |", r.join(" | "));
    }
    s
}

const CLAIMS: [(&str, &str); 9] = [
    ("fig4", "\"HART consistently outperforms all its competitors\": vs WOART from 4.0× (Dictionary, 300/300) down to 1.4× (Sequential, 600/300); vs FPTree from 4.0× (Sequential, 300/300) down to 1.9× (Random, 600/300). ART+CoW is the slowest in most cases."),
    ("fig5", "HART searches faster under 300/300 and 600/300 on all three workloads; under 300/100 WOART is faster (HART's larger DRAM footprint lowers the cache hit rate)."),
    ("fig6", "HART updates faster than WOART and ART+CoW in most cases and than FPTree in all cases (quick leaf search; out-of-place value update)."),
    ("fig7", "FPTree deletes fastest under Dictionary (small, shallow tree); HART shows its strength with PM latency above DRAM's and larger data sets."),
    ("fig8", "Random, 300/100, 1 M → 100 M records: HART scales much better for insertion; the ART-based trees are similar for search and update; deletion differs little."),
    ("fig9", "HART outperforms its competitors in almost all cases (exception: Read-Modified-Write at 300/100); otherwise 2.0–2.6× faster than WOART and 2.4–5.7× faster than FPTree."),
    ("fig10a", "Range query of 100,000 records (Sequential): HART is 2.6×, 2.3×, 2.3× slower than FPTree at 300/100, 300/300, 600/300 (its range query searches key by key), but faster than WOART and ART+CoW when PM reads are slower than DRAM."),
    ("fig10b", "Sequential, 100 M records: HART uses much more DRAM than FPTree (many Node256 for a 62-character alphabet, plus the hash table); FPTree uses more PM."),
    ("fig10c", "Recovery is shorter than build for both HART and FPTree; on average HART's recovery is 2.4× faster than its build (Random, 300/100, 1 M–100 M records). Fig. 10d: 2 threads give 1.96/1.94/1.93/1.93× the 1-thread throughput of insert/search/update/delete; 8 threads 7.18/7.30/7.13/7.09×."),
];

fn claim(id: &str) -> &'static str {
    CLAIMS.iter().find(|c| c.0 == id).map_or("", |c| c.1)
}

fn img(figs: &[(String, PathBuf)], id: &str) -> String {
    if figs.iter().any(|f| f.0 == id) {
        format!("![{id}]({id}.png) ([SVG]({id}.svg))\n\n")
    } else {
        format!("_(plot {id} not drawn: see the note at the top)_\n\n")
    }
}

/// Speed ratios of each pool engine against each baseline for records matched by `key`.
fn ratios(recs: &[Record], exp: &str, engines: &[EngineSpec], ops: &[&str]) -> String {
    let pool: Vec<&EngineSpec> = engines.iter().filter(|e| e.uses_pool()).collect();
    let base: Vec<&EngineSpec> = engines.iter().filter(|e| !e.uses_pool()).collect();
    if pool.is_empty() {
        return format!(
            "No pmkv engine with a pool is in `pmkv::Registry::builtin()` yet ({}), so there is no HART to compare: \
             the rows above are the baselines alone. Once the `hart` engine lands, this section compares it \
             with each baseline automatically.\n\n",
            pmkv::Registry::builtin().names().join(", ")
        );
    }
    let mut s = String::from("Same-run speed ratios (baseline time / engine time; > 1 means the engine is faster), min–max over workloads and latency settings:\n\n");
    for p in &pool {
        for b in &base {
            for op in ops {
                let rs: Vec<f64> = ok(recs, exp)
                    .filter(|r| r.engine == p.name() && r.op == *op)
                    .filter_map(|r| {
                        find(recs, exp, b.name(), "-", &r.workload, op).map(|br| br.ns_per_op / r.ns_per_op)
                    })
                    .collect();
                if !rs.is_empty() {
                    let lo = rs.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = rs.iter().copied().fold(0.0, f64::max);
                    let _ = writeln!(s, "- {} vs {} ({op}): {:.2}–{:.2}×", p.name(), b.name(), lo, hi);
                }
            }
        }
    }
    s.push('\n');
    s
}

fn report_md(
    rep: &Report,
    sc: &HartScale,
    a: &ReproduceArgs,
    engines: &[EngineSpec],
    figs: &[(String, PathBuf)],
    secs: f64,
) -> String {
    let recs = &rep.records;
    let mut md = String::new();
    let _ = writeln!(md, "# HART (ICDE 2019), Figures 4–10, reproduced with pmkv\n");
    let _ = writeln!(
        md,
        "Command: `{}` — {:.0} s on {} CPUs (flush instruction {}), seed {}, pools on {} (tmpfs).\n",
        rep.meta.command, secs, rep.meta.cpus, rep.meta.flush_instruction, rep.meta.seed, rep.meta.pool_dir
    );
    let _ = writeln!(md, "Engines: {}. Numbers: `results.json` / `results.csv` (every record, with p50/p99/p99.9 latency and persistence counters per operation).\n", engines.iter().map(|e| format!("`{}`", e.name())).collect::<Vec<_>>().join(", "));
    md.push_str(
        "How this maps the paper's setup: PM write/read latency (300/100, 300/300, 600/300 ns) is emulated by the substrate — \
         the write latency after every flushed line (`adr` mode: clwb/clflushopt + sfence, as the paper's `persistent()`), \
         the read latency per PM line an engine reports reading. The baselines have no PM: `volatile` (a `BTreeMap` in DRAM) \
         and LMDB (`lmdb-wm-nosync`: write-map + no-sync, survives a process crash but not power loss; `lmdb-sync`: fdatasync \
         per commit, power-loss durable — nearly free on tmpfs) are measured once and drawn in every latency group. \
         The paper's competitors (WOART, FPTree, ART+CoW) are not part of pmkv; where the paper compares HART with them, \
         this report compares each pmkv engine with the baselines measured in the same run.\n\n",
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
    if figs.is_empty() {
        md.push_str("**Plots were not drawn** (no font found: install `fonts-dejavu-core`); the tables below have the numbers.\n\n");
    }
    let failed: Vec<&Record> = recs.iter().filter(|r| r.error.is_some()).collect();
    if !failed.is_empty() {
        md.push_str("Measurements without numbers (not applicable, or the engine failed):\n\n");
        for r in failed.iter().take(30) {
            let _ = writeln!(
                md,
                "- {} `{}` ({}, {}): {}",
                r.experiment,
                r.engine,
                r.workload,
                r.latency,
                r.error.as_deref().unwrap_or("")
            );
        }
        md.push('\n');
    }
    let lats = lat_names();
    let names = ["Insertion", "Search", "Update", "Deletion"];
    let e47 = engine_names(recs, "fig4-7", engines);
    for (i, op) in OPS.iter().enumerate() {
        let id = format!("fig{}", 4 + i);
        let _ = writeln!(md, "## Fig. {} — {}\n", 4 + i, names[i]);
        let _ = writeln!(md, "**Paper:** {}\n", claim(&id));
        md.push_str(&img(figs, &id));
        let mut head = vec!["engine".to_string(), "latency".to_string()];
        head.extend(WORKLOADS.iter().map(|w| format!("{} ns/op", w.name())));
        let mut rows = Vec::new();
        for e in &e47 {
            let ls: Vec<String> = if e.uses_pool() { lats.clone() } else { vec!["-".into()] };
            for l in ls {
                let mut row = vec![e.name().to_string(), l.clone()];
                row.extend(WORKLOADS.iter().map(|w| {
                    find(recs, "fig4-7", e.name(), &l, w.name(), op).map_or("–".into(), |r| fmt(r.ns_per_op))
                }));
                rows.push(row);
            }
        }
        md.push_str(&md_table(&head, &rows));
        md.push('\n');
        md.push_str(&ratios(recs, "fig4-7", engines, &[op]));
        if i == 0 {
            md.push_str(
                "For scale: the HART authors' prototype with persistence compiled out (all \"PM\" in DRAM) measured 668 / 148 / 445 / 237 ns \
                 for insert / search / update / delete on the Dictionary, one thread, on this kind of machine (shared/ANCHORS.md). Those figures \
                 have no flush and no emulated latency; compare them with `pmkv bench` (eadr, no latency emulation), not with this figure.\n\n",
            );
        }
    }
    // Fig. 8
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
            let vals: Vec<Option<f64>> = sizes
                .iter()
                .map(|&n| {
                    ok(recs, "fig8")
                        .find(|r| r.engine == e.name() && r.op == op && r.workload == format!("random {n}"))
                        .map(|r| r.ns_per_op)
                })
                .collect();
            let mut row = vec![e.name().to_string(), op.to_string()];
            row.extend(vals.iter().map(|v| v.map_or("–".into(), fmt)));
            let g = match (vals.first().copied().flatten(), vals.last().copied().flatten()) {
                (Some(a), Some(b)) if a > 0.0 => format!("{:.2}×", b / a),
                _ => "–".into(),
            };
            row.push(g);
            rows.push(row);
        }
    }
    md.push_str(&md_table(&head, &rows));
    md.push_str("\n\"growth\" is ns/op at the largest size over ns/op at the smallest: 1.00× is perfect scaling with the record count.\n\n");
    // Fig. 9
    let _ =
        writeln!(md, "## Fig. 9 — mixed workloads (Random keys, uniform requests)\n\n**Paper:** {}\n", claim("fig9"));
    md.push_str(&img(figs, "fig9"));
    let e9 = engine_names(recs, "fig9", engines);
    let mixes = ["read-intensive", "read-modify-write", "write-intensive"];
    let mut head = vec!["engine".to_string(), "latency".to_string()];
    head.extend(mixes.iter().map(|m| format!("{m} ns/op")));
    let mut rows = Vec::new();
    for e in &e9 {
        let ls: Vec<String> = if e.uses_pool() { lats.clone() } else { vec!["-".into()] };
        for l in ls {
            let mut row = vec![e.name().to_string(), l.clone()];
            row.extend(mixes.iter().map(|m| {
                find(recs, "fig9", e.name(), &l, "random (uniform)", m).map_or("–".into(), |r| fmt(r.ns_per_op))
            }));
            rows.push(row);
        }
    }
    md.push_str(&md_table(&head, &rows));
    md.push('\n');
    md.push_str(&ratios(recs, "fig9", engines, &mixes));
    // Fig. 10
    let _ = writeln!(md, "## Fig. 10 — range query, memory, recovery, scalability\n");
    md.push_str(&img(figs, "fig10"));
    let _ = writeln!(md, "### (a) Range query\n\n**Paper:** {}\n", claim("fig10a"));
    let mut rows = Vec::new();
    for r in ok(recs, "fig10a") {
        rows.push(vec![
            r.engine.clone(),
            r.latency.clone(),
            r.op.clone(),
            format!("{:.2}", r.ns_per_op / 1e6),
            format!("{:.1}", r.extra.get("ns_per_record").copied().unwrap_or(0.0)),
        ]);
    }
    md.push_str(&md_table(&["engine", "latency", "query", "ms per query", "ns per record"].map(String::from), &rows));
    md.push_str("\npmkv's range query is the engine's ordered `scan` (SPEC H8); the rows \"by search\" run the paper's method (one search per key of the range) on the same engine and keys, for comparison.\n\n");
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
                    format!("{:.4}", rc.wall_s),
                    format!("{:.1}× ({})", b.wall_s / rc.wall_s, if rc.wall_s < b.wall_s { "yes" } else { "no" }),
                ),
                (_, Some(rc)) => (rc.error.clone().unwrap_or_else(|| "–".into()), "–".into()),
                _ => ("–".into(), "–".into()),
            };
            rows.push(vec![
                e.name().to_string(),
                n.to_string(),
                b.map_or("–".into(), |b| format!("{:.3}", b.wall_s)),
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
            let m: Vec<Option<f64>> = sc
                .threads
                .iter()
                .map(|&t| {
                    ok(recs, "fig10d").find(|r| r.engine == e.name() && r.op == op && r.threads == t).map(|r| r.mops)
                })
                .collect();
            let mut row = vec![e.name().to_string(), op.to_string()];
            row.extend(m.iter().map(|v| v.map_or("–".into(), |x| format!("{x:.3}"))));
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
    let _ = writeln!(md, "## Latency distributions\n");
    md.push_str(&img(figs, "latency-cdf"));
    md.push_str("CDFs of per-operation latency (one operation in 8 timed with the TSC), Dictionary at 300/300 for pmkv engines, baselines without latency.\n\n");
    let _ = writeln!(md, "## Timings\n");
    for n in &rep.meta.notes {
        let _ = writeln!(md, "- {n}");
    }
    md
}

/// A short table for the terminal: ns/op of Figs. 4–7 at 300/300 (and baselines).
fn summary_table(recs: &[Record]) -> String {
    let rows: Vec<Record> = recs
        .iter()
        .filter(|r| r.experiment == "fig4-7" && (r.latency == "300/300" || r.latency == "-"))
        .cloned()
        .collect();
    format!(
        "Figs. 4–7 at 300/300 (baselines without PM latency):\n{}",
        report::table(&rows, &report::standard_columns())
    )
}
