//! `pmkv bench run`: any workload, engines, modes, latencies and thread counts; a table on
//! stdout, and with `--out DIR` results.json, results.csv and plots.

use crate::engines::{self, EngineSpec};
use crate::experiment::{self, OpOrder, Settings, Target};
use crate::plot::run::plot_run;
use crate::progress::Plan;
use crate::report::{self, Meta, Report};
use crate::workload::mix::{Dist, Mix};
use crate::workload::{KeyKind, KeySet};
use crate::{measure, pool_dir, stats, BenchError, Result};
use pmkv::{Latency, Mode};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `pmkv bench run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Engine to run; repeatable or comma-separated. Default: every engine in pmkv::Registry::builtin()
    /// plus the baselines lmdb-wm-nosync and lmdb-sync.
    #[arg(long = "engine", short = 'e')]
    pub engines: Vec<String>,
    /// Workload: dictionary, sequential, random, int-uniform, int-dense (insert/search/
    /// update/delete over a key set; int-dense: the keys 1..=n in a shuffled order, the
    /// NBTree prototype's dense keys); int-zipf (search and upsert, Zipfian); read-intensive (ri),
    /// read-modify-write (rmw), write-intensive (wi); ycsb-a … ycsb-f; rw-sweep; skew-sweep;
    /// range; recovery; memory.
    #[arg(long, short = 'w', default_value = "dictionary")]
    pub workload: String,
    /// Records: keys inserted (basic workloads) or loaded first (mixes). Default: the whole
    /// dictionary for Dictionary, 1,000,000 otherwise.
    #[arg(long, short = 'n')]
    pub keys: Option<u64>,
    /// Measured operations of a mix (default: as many as records).
    #[arg(long)]
    pub ops: Option<u64>,
    /// Key set of mixes, sweeps, recovery and memory: dictionary, sequential, random, int or
    /// dense (default: random for HART's mixes, recovery; int for YCSB and sweeps;
    /// sequential for range and memory, as in the papers). A mix's Zipfian ranks are
    /// scrambled over the key set, so with `dense` its hot keys are spread over the key
    /// range (the NBTree prototype maps rank r to key r+1, so its hot keys are adjacent).
    #[arg(long)]
    pub key_kind: Option<KeyKind>,
    /// Thread counts, e.g. 1,2,4.
    #[arg(long, short = 't', value_delimiter = ',', default_value = "1")]
    pub threads: Vec<usize>,
    /// Persistence modes of pmkv engines: adr, eadr, msync, none (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "eadr")]
    pub mode: Vec<Mode>,
    /// Emulated PM write/read latency in ns: none, 300/100, 300/300, 600/300 (comma-
    /// separated); the write latency is charged per flushed line (the HART paper's
    /// model), or once per fence with `/fence` (300/100/fence: write-backs overlap, as
    /// `clwb` on Optane). Reads are charged per reported line, or with `/llc` (or
    /// `/llc=2M`) only for the runs of lines a model of a 20 MB (2 MiB) last-level cache
    /// misses, each the read latency less DRAM's (300/300/llc). Default: $PMKV_LATENCY,
    /// else none.
    #[arg(long, value_delimiter = ',')]
    pub latency: Vec<String>,
    /// Zipf θ of skewed workloads.
    #[arg(long, default_value_t = crate::zipf::DEFAULT_THETA)]
    pub theta: f64,
    /// Where a Zipfian mix's hot keys lie: `scrambled` (YCSB's way: spread over the key set)
    /// or `key` (ranks follow key order: the hottest keys are the smallest, and neighbours,
    /// as in the NBTree prototype's YCSB on its dense keys).
    #[arg(long, default_value = "scrambled")]
    pub zipf_order: String,
    /// Value size in bytes.
    #[arg(long, default_value_t = 8)]
    pub value_size: usize,
    /// Seed of every key set and operation stream.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Write results.json, results.csv and plots (PNG + SVG) here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Where temporary pools go (default /dev/shm); deleted afterwards.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Time one operation in N for latency percentiles (power of two; 1 = all). Timing one
    /// costs ~25 ns (two timestamp reads, a histogram update): one in 64 keeps that under
    /// half a nanosecond per operation (the `null` row shows the harness's whole cost).
    #[arg(long, default_value_t = 64)]
    pub sample_every: usize,
    /// Untimed warm-up before measuring, as a fraction of the measured operations.
    #[arg(long, default_value_t = 0.1)]
    pub warmup: f64,
    /// Order of the search, update and delete phases of basic workloads: `insert` replays
    /// the insert order (the HART paper's experiments), `shuffled` is an independent random
    /// order (the NBTree paper's "random key access"). Replay favours an engine that lays
    /// records out in arrival order, as HART's leaves are: its PM reads become sequential.
    #[arg(long, value_enum, default_value = "insert")]
    pub op_order: OpOrder,
    /// Records scanned per range query (range workload).
    #[arg(long, default_value_t = 100_000)]
    pub scan_len: usize,
    /// Runs of each measurement, in alternating rounds: the table gives the median and the
    /// range of the runs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// No progress output.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// An engine parameter for pmkv engines, KEY=VALUE (repeatable), e.g. hash_key_len=3.
    #[arg(long = "param", short = 'p', value_name = "KEY=VALUE")]
    pub params: Vec<String>,
}

impl Default for RunArgs {
    fn default() -> Self {
        RunArgs {
            engines: vec![],
            workload: "dictionary".into(),
            keys: None,
            ops: None,
            key_kind: None,
            threads: vec![1],
            mode: vec![Mode::Eadr],
            latency: vec![],
            theta: crate::zipf::DEFAULT_THETA,
            zipf_order: "scrambled".into(),
            value_size: 8,
            seed: 42,
            out: None,
            dir: None,
            sample_every: 64,
            warmup: 0.1,
            op_order: OpOrder::Insert,
            scan_len: 100_000,
            runs: 1,
            quiet: false,
            params: Vec::new(),
        }
    }
}

/// Parse latency settings ("none", "300/100", …).
pub fn parse_latencies(v: &[String]) -> Result<Vec<Latency>> {
    if v.is_empty() {
        return Ok(vec![Latency::from_env()]);
    }
    v.iter()
        .map(|s| {
            Latency::parse(s)
                .ok_or_else(|| BenchError(format!("bad latency '{s}' (expected W/R in ns, e.g. 300/100, or none)")))
        })
        .collect()
}

/// Every (engine, mode, latency) combination; engines without a pool once.
pub fn targets(engines: &[EngineSpec], modes: &[Mode], lats: &[Latency]) -> Vec<Target> {
    let mut out = Vec::new();
    for &e in engines {
        if e.uses_pool() {
            for &m in modes {
                for &l in lats {
                    out.push(Target::new(e, m, l));
                }
            }
        } else {
            out.push(Target::new(e, modes.first().copied().unwrap_or(Mode::Eadr), Latency::NONE));
        }
    }
    out
}

fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

enum What {
    Basic(KeyKind),
    Mixes(Vec<(Mix, Option<f64>)>),
    Range,
    Recovery,
    Memory,
}

fn parse_workload(a: &RunArgs) -> Result<(What, KeyKind)> {
    let (mut what, kind) = parse_workload_name(a)?;
    match a.zipf_order.to_ascii_lowercase().as_str() {
        "scrambled" => {}
        "key" => {
            if let What::Mixes(ms) = &mut what {
                for (m, _) in ms.iter_mut() {
                    if let Dist::Zipf(t) = m.dist {
                        m.dist = Dist::ZipfByKey(t);
                    }
                }
            }
        }
        other => return Err(BenchError(format!("--zipf-order must be scrambled or key, got '{other}'"))),
    }
    Ok((what, kind))
}

fn parse_workload_name(a: &RunArgs) -> Result<(What, KeyKind)> {
    let w = a.workload.to_ascii_lowercase();
    let kk = |d: KeyKind| a.key_kind.unwrap_or(d);
    let theta = a.theta;
    if !(theta.is_finite() && theta >= 0.0) {
        return Err(BenchError(format!("--theta must be >= 0, got {theta}")));
    }
    Ok(match w.as_str() {
        "dictionary" | "dict" => (What::Basic(KeyKind::Dictionary), KeyKind::Dictionary),
        "sequential" | "seq" => (What::Basic(KeyKind::Sequential), KeyKind::Sequential),
        "random" | "rand" => (What::Basic(KeyKind::Random), KeyKind::Random),
        "int-uniform" | "int" => (What::Basic(KeyKind::Int), KeyKind::Int),
        "int-dense" | "dense" => (What::Basic(KeyKind::Dense), KeyKind::Dense),
        "int-zipf" => {
            let mut s = Mix::read_write(1.0, theta);
            s.name = format!("search zipf {theta}");
            let mut u = Mix::read_write(0.0, theta);
            u.name = format!("upsert zipf {theta}");
            (What::Mixes(vec![(s, None), (u, None)]), kk(KeyKind::Int))
        }
        "rw-sweep" => {
            // 50% is the point Mangosteen's target is stated at (>= 0.7x the volatile map).
            let v = [0.0, 0.2, 0.4, 0.5, 0.6, 0.8, 1.0]
                .iter()
                .map(|&wr| (Mix::read_write(1.0 - wr, theta), Some(wr * 100.0)))
                .collect();
            (What::Mixes(v), kk(KeyKind::Int))
        }
        "skew-sweep" => {
            let v = [0.0, 0.5, 0.7, 0.9, 0.99, 1.2].iter().map(|&t| (Mix::read_write(0.5, t), Some(t))).collect();
            (What::Mixes(v), kk(KeyKind::Int))
        }
        "range" => (What::Range, kk(KeyKind::Sequential)),
        "recovery" => (What::Recovery, kk(KeyKind::Random)),
        "memory" => (What::Memory, kk(KeyKind::Sequential)),
        other => match Mix::by_name(other, theta) {
            Some(m) => {
                let d = if m.name.starts_with("ycsb") { KeyKind::Int } else { KeyKind::Random };
                (What::Mixes(vec![(m, None)]), kk(d))
            }
            None => return Err(BenchError(format!("unknown workload '{}' (see pmkv bench run --help)", a.workload))),
        },
    })
}

/// `pmkv bench run`.
pub fn run(a: RunArgs) -> Result<()> {
    let started = Instant::now();
    let engines = engines::parse_list(&a.engines)?;
    let lats = parse_latencies(&a.latency)?;
    if a.mode.is_empty() || a.threads.is_empty() || a.threads.contains(&0) {
        return Err("need at least one mode and thread counts >= 1".into());
    }
    let (what, kind) = parse_workload(&a)?;
    let n = a.keys.map(|k| k as usize).unwrap_or_else(|| kind.default_count());
    if n == 0 {
        return Err("--keys must be at least 1".into());
    }
    let tmp = pool_dir(a.dir.as_deref())?;
    let mut s = Settings::new(tmp.path(), a.seed);
    s.value_size = a.value_size;
    s.sample_every = a.sample_every.max(1);
    s.warmup = a.warmup.clamp(0.0, 10.0);
    s.op_order = a.op_order;
    s.keep_cdf = a.out.is_some();
    for p in &a.params {
        let (k, v) = p.split_once('=').ok_or_else(|| format!("--param {p}: expected KEY=VALUE"))?;
        s.params.push((k.trim().to_string(), v.trim().to_string()));
    }
    let tg = targets(&engines, &a.mode, &lats);
    let pages = crate::pages::pool_pages(tmp.path());
    measure::calibrate();
    let keys = match &what {
        What::Mixes(mixes) => KeySet::generate(kind, mix_keys(&a, &s, mixes, n), a.seed)?,
        What::Basic(k) => KeySet::generate(*k, n, a.seed)?,
        _ => KeySet::generate(kind, n, a.seed)?,
    };
    let (s, keys) = (&s, &keys);
    let mut plan = Plan::new();
    match &what {
        What::Basic(k) => {
            let wl = basic_label(*k, s.op_order);
            for &t in &tg {
                for &th in &a.threads {
                    let wl = wl.clone();
                    let label = format!("{} {} {} threads", t.engine.name(), k.name(), th);
                    plan.step(label, move || experiment::basic_ops(s, &t, EXP, &wl, keys, th));
                }
            }
        }
        What::Mixes(mixes) => {
            let ops = a.ops.unwrap_or(n as u64);
            for (m, x) in mixes {
                for &t in &tg {
                    for &th in &a.threads {
                        let label = format!("{} {} {} threads", t.engine.name(), m.name, th);
                        let wl = format!("{} ({})", kind.name(), m.dist.label());
                        plan.step(label, move || {
                            let mut rs = experiment::mix_run(s, &t, EXP, &wl, keys, m, n as u64, ops, th);
                            if let Some(x) = x {
                                rs.iter_mut().for_each(|r| {
                                    r.extra.insert("sweep_x".into(), *x);
                                });
                            }
                            rs
                        });
                    }
                }
            }
        }
        What::Range => {
            let len = a.scan_len.min(n);
            for &t in &tg {
                plan.step(t.engine.name(), move || experiment::range_query(s, &t, EXP, kind.name(), keys, len, 5));
            }
        }
        What::Recovery => {
            for &t in &tg {
                plan.step(t.engine.name(), move || experiment::build_recover(s, &t, EXP, kind.name(), keys));
            }
        }
        What::Memory => {
            for &t in &tg {
                plan.step(t.engine.name(), move || experiment::memory(s, &t, EXP, kind.name(), keys));
            }
        }
    }
    plan.rounds(a.runs as usize, "run");
    let (ran, _) = plan.run(a.quiet, |pg, label, recs| crate::reproduce::report_failures(pg, label, recs));
    let records = stats::combine_steps(ran);
    drop(tmp);
    print!("{}", report::table(&records, &report::standard_columns()));
    println!("durability:\n{}", report::legend(&records));
    println!("{pages}");
    let mut meta = Meta::new(&command_line(), a.seed, a.dir.as_deref().unwrap_or(Path::new("/dev/shm")));
    meta.notes.push(format!("wall time {:.1} s", started.elapsed().as_secs_f64()));
    meta.notes.push(pages);
    write_outputs(&a, &Report { meta, records })
}

/// The experiment name of every record of a `run`.
const EXP: &str = "run";

/// The workload column of a basic run: the key set, and the operation order when it is not
/// the insert order.
fn basic_label(k: KeyKind, order: OpOrder) -> String {
    match order {
        OpOrder::Insert => k.name().to_string(),
        o => format!("{}/{}", k.name(), o.name()),
    }
}

/// Keys the mixes need: every mix at every thread count (a mix with inserts uses fresh
/// keys beyond the loaded ones; a sweep's points carry their x in `sweep_x`).
fn mix_keys(a: &RunArgs, s: &Settings, mixes: &[(Mix, Option<f64>)], n: usize) -> usize {
    let ops = a.ops.unwrap_or(n as u64);
    mixes
        .iter()
        .flat_map(|(m, _)| a.threads.iter().map(move |&th| experiment::mix_keys_needed(s, m, n as u64, ops, th)))
        .max()
        .unwrap_or(n as u64) as usize
}

/// With `--out`: results.json, results.csv and the plots, then the list of files written.
fn write_outputs(a: &RunArgs, rep: &Report) -> Result<()> {
    let Some(out) = &a.out else { return Ok(()) };
    report::write_files(out, "results", rep)?;
    let mut files = vec![out.join("results.json"), out.join("results.csv")];
    match plot_run(&rep.records, out, &a.workload) {
        Ok(f) => files.extend(f),
        Err(e) => eprintln!("pmkv bench: plots skipped: {e}"),
    }
    println!("wrote:");
    for f in files {
        println!("  {}", f.display());
    }
    Ok(())
}
