//! `pmkv bench reproduce <paper>`: the papers' experiments, scaled to this machine.
//!
//! **hart** regenerates the experiments behind HART's Figures 4–10 (ICDE'19 paper, §IV) for
//! HART, the paper's competitors (WOART, ART+CoW, FPTree: pmkv engines built after their
//! papers), pmkv's NBTree and the baselines ([`HART_DEFAULT`]), writes one plot per figure
//! (PNG and SVG), `results.json`, `results.csv`, and `report.md`, which puts each figure
//! beside what the paper claims and what this run measured, and checks each of the paper's
//! relative claims as a ratio of medians ([`claims`](mod@claims)).
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
//!   minutes with three runs of each measurement; `tiny-for-tests` is for the test suite
//!   only;
//! * engines: [`HART_DEFAULT`], those of them this build has (a competitor another crate
//!   has not delivered yet is skipped and named in the report); the others (FAST&FAIR,
//!   and those whose every write waits for a slow sync of its own, [`engines::SLOW_WRITES`])
//!   run when named.
//!
//! **nbtree** runs the NBTree paper's experiments (Table 1, Figs. 5-13, recovery) for
//! NBTree, its paper's competitors that pmkv builds (FPTree, FAST&FAIR, uTree), HART and
//! the volatile baseline ([`NBTREE_DEFAULT`]): see [`nbtree`](mod@nbtree).
//!
//! **mangosteen** runs the Mangosteen paper's evaluation (Figs. 5–9) for the `mangosteen`
//! engine, its per-write, page-capture and no-deduplication configurations, the volatile
//! `BTreeMap`, HART, NBTree and LMDB ([`MANGOSTEEN_DEFAULT`]): see
//! [`mangosteen`](mod@mangosteen).

mod claims;
mod figures;
mod mangosteen;
mod nbtree;
mod report_md;
mod run;

pub use mangosteen::{mangosteen, MgScale, MANGOSTEEN_DEFAULT};
pub use nbtree::nbtree;
pub use run::hart;
pub(crate) use run::report_failures;

use crate::engines::{self, EngineSpec};
use crate::experiment::{self, Settings, Target};
use crate::plot::{self, Bars, Figure, Line, Panel, PanelKind};
use crate::plot::{engine_color, series_label};
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
    /// Minutes on a 2-core machine (see `--help` for each paper's).
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
#[command(after_help = REPRODUCE_DURATIONS)]
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
    /// Only these engines (repeatable; `all`: every one). Default for hart: hart, the
    /// paper's competitors woart, artcow, fptree, and nbtree, volatile, lmdb-wm-nosync; for
    /// nbtree: nbtree, its paper's competitors fptree, fastfair, utree, and hart, volatile;
    /// for mangosteen: mangosteen (with its perwrite, pages and nodedup configurations),
    /// volatile, hart, nbtree, lmdb-wm-nosync, lmdb-sync. A default engine this build
    /// lacks is skipped and named in the report. Not run by hart and nbtree unless named:
    /// mangosteen (not their papers') and lmdb-sync (an fdatasync a write).
    #[arg(long = "engine", short = 'e')]
    pub engines: Vec<String>,
    /// Runs of each measurement, in alternating rounds; reports give the median and the
    /// range (min–max) of the runs, and ratios of medians.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Where temporary pools go (default /dev/shm); deleted afterwards.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// No progress output.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// hart: which PM reads pay the read latency. `per-line`: every line an engine
    /// reports; `llc`: only the runs of lines a per-thread model of the paper's 20 MB L3,
    /// scaled with the record count, misses, each paying the PM latency less this
    /// machine's DRAM latency (as the paper's emulation, §4; docs/design/substrate.md).
    #[arg(long, value_enum, default_value_t = Reads::PerLine)]
    pub reads: Reads,
}

/// How a reproduction charges PM reads (`--reads`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Reads {
    PerLine,
    Llc,
}

impl Reads {
    /// The read model of a latency setting before it is scaled to an experiment's records.
    pub fn model(self) -> pmkv::ReadModel {
        match self {
            Reads::PerLine => pmkv::ReadModel::PerLine,
            Reads::Llc => pmkv::ReadModel::Llc { kib: pmkv::ReadModel::PAPER_LLC_KIB },
        }
    }

    /// What the results' notes say of it.
    pub fn note(self) -> String {
        match self {
            Reads::PerLine => "PM reads: every line an engine reports pays the read latency (--reads per-line)".into(),
            Reads::Llc => format!(
                "PM reads: only runs of lines missing a model of the paper's 20 MB L3 (scaled by records / the paper's) \
                 pay, the read latency less this machine's DRAM latency, {} ns (--reads llc)",
                pmkv::dram_ns()
            ),
        }
    }
}

/// How long each reproduction takes here, for `--help`: measured runs of the defaults on
/// this project's 2-core machine (docs/results/reproduce-*.md record them).
pub const REPRODUCE_DURATIONS: &str = "Durations with the default engines and --runs 3, measured on this project's \
     2-core machine (2026-11-27, with the papers' competitors, both runs at once beside other builds, load ~14): hart \
     --scale small 24 min (1,450 s), nbtree --scale small 30 min (1,811 s); alone on an idle machine expect a third to \
     a half of that. --scale paper: nbtree took 655 s for one run (--runs 1) without the competitors; hart's was not \
     timed (long). The time grows with --runs; -e all adds mangosteen, by far the slowest, and lmdb-sync.";

pub fn reproduce(a: &ReproduceArgs) -> Result<()> {
    match a.paper {
        Paper::Hart => hart(a).map(|_| ()),
        Paper::Nbtree => nbtree(a).map(|_| ()),
        Paper::Mangosteen if pmkv::Registry::builtin().names().contains(&"mangosteen") => mangosteen(a).map(|_| ()),
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

/// The engines `reproduce hart` runs by default: HART, the HART paper's competitors
/// (WOART, ART+CoW, FPTree), pmkv's own NBTree, and the baselines (the volatile
/// `BTreeMap`, LMDB without sync). Names not registered in this build are skipped, and the
/// report says so (their claims read "not measured").
pub const HART_DEFAULT: &[&str] = &["hart", "nbtree", "woart", "artcow", "fptree", "volatile", "lmdb-wm-nosync"];

/// The engines `reproduce nbtree` runs by default: NBTree, the NBTree paper's competitors
/// built in pmkv (FPTree, FAST&FAIR, uTree), HART and the volatile baseline.
pub const NBTREE_DEFAULT: &[&str] = &["nbtree", "fptree", "fastfair", "utree", "hart", "volatile"];

/// The engines of a reproduction: those asked for (`all`: every engine), else `defaults`
/// that this build has (the `null` engine is added by [`engines::parse_list`]).
pub(crate) fn paper_engines(names: &[String], defaults: &[&str]) -> Result<Vec<EngineSpec>> {
    if names.iter().any(|n| n.trim().eq_ignore_ascii_case("all")) {
        return Ok(engines::all());
    }
    if names.is_empty() {
        let have: Vec<String> =
            defaults.iter().filter(|d| engines::all().iter().any(|e| e.name() == **d)).map(|d| d.to_string()).collect();
        return Ok(engines::parse_list(&have)?);
    }
    Ok(engines::parse_list(names)?)
}

/// The engines of `reproduce hart` ([`HART_DEFAULT`] unless given).
pub(crate) fn hart_engines(names: &[String]) -> Result<Vec<EngineSpec>> {
    paper_engines(names, HART_DEFAULT)
}

/// The default engines this build does not have (another helper's crate not merged yet,
/// say): listed in the header line and the report, their claims not measured.
pub(crate) fn missing_defaults(defaults: &[&'static str]) -> Vec<&'static str> {
    let all = engines::all();
    defaults.iter().copied().filter(|d| !all.iter().any(|e| e.name() == *d)).collect()
}

/// What the default engine list left out, for the header line ("" if nothing).
fn left_out_note(engines: &[EngineSpec], defaults: &[&'static str]) -> String {
    let out: Vec<&str> = engines::all()
        .iter()
        .map(|e| e.name())
        .filter(|n| !e_is_null(n) && !engines.iter().any(|e| e.name() == *n))
        .collect();
    let mut s = String::new();
    if !out.is_empty() {
        s += &format!("; not {} (not the paper's: add -e NAME, or -e all)", out.join(", "));
    }
    let missing = missing_defaults(defaults);
    if !missing.is_empty() {
        s += &format!("; {} not registered in this build (skipped: its claims are not measured)", missing.join(", "));
    }
    s
}

fn e_is_null(n: &str) -> bool {
    n == crate::baseline::null::NAME
}

/// Write a reproduction's results (`results.json`, `results.csv`) into `a.out`, with the
/// notes every reproduction records (scale, runs, each phase's seconds, then `extra`), and
/// return the report.
fn save_results(
    a: &ReproduceArgs,
    scale: &dyn std::fmt::Debug,
    runs: usize,
    timings: &[(String, f64)],
    extra: &[String],
    records: Vec<Record>,
) -> Result<Report> {
    std::fs::create_dir_all(&a.out)?;
    let mut meta = Meta::new(&command(a), a.seed, a.dir.as_deref().unwrap_or(Path::new("/dev/shm")));
    meta.notes.push(format!("scale {scale:?}"));
    meta.notes.push(format!("{runs} runs of each measurement, in alternating rounds; figures are medians"));
    if a.paper == Paper::Hart {
        meta.notes.push(a.reads.note());
    }
    meta.notes.extend(timings.iter().map(|(k, v)| format!("{k}: {v:.1} s")));
    meta.notes.extend(extra.iter().cloned());
    let rep = Report { meta, records };
    report::write_files(&a.out, "results", &rep)?;
    Ok(rep)
}

/// The plots a reproduction drew, or none (said on standard error) when drawing failed:
/// the figures and report stand without them.
fn plots_or_none<T>(drawn: std::result::Result<Vec<T>, String>) -> Vec<T> {
    drawn.unwrap_or_else(|e| {
        eprintln!("pmkv bench: plots skipped: {e}");
        vec![]
    })
}

/// The command line that regenerates a report with these arguments.
fn command(a: &ReproduceArgs) -> String {
    let paper = match a.paper {
        Paper::Hart => "hart",
        Paper::Nbtree => "nbtree",
        Paper::Mangosteen => "mangosteen",
    };
    let mut c = format!("pmkv bench reproduce {paper} --scale {} --runs {}", a.scale.name(), a.runs);
    if a.reads != Reads::PerLine {
        c += " --reads llc";
    }
    for e in &a.engines {
        c += &format!(" -e {e}");
    }
    c + &format!(" --out {}", a.out.display())
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
            // Three runs of each measurement (the default `--runs`) in a few minutes: half
            // the record counts of the single-run small scale before it (Sequential and
            // Random 200,000, Fig. 8 up to 400,000), the Dictionary still whole.
            Scale::Small => HartScale {
                dict: words,
                seq: 100_000,
                rand: 100_000,
                fig8: vec![25_000, 50_000, 100_000, 200_000],
                mix_load: 100_000,
                mix_ops: 100_000,
                range_keys: 200_000,
                range_len: 100_000,
                range_reps: 5,
                mem_keys: 100_000,
                recovery: vec![50_000, 100_000, 200_000],
                scal_keys: 100_000,
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
pub const HART_LATENCIES: [Latency; 3] =
    [Latency::per_line(300, 100), Latency::per_line(300, 300), Latency::per_line(600, 300)];

const OPS: [&str; 4] = ["insert", "search", "update", "delete"];
const WORKLOADS: [KeyKind; 3] = [KeyKind::Dictionary, KeyKind::Sequential, KeyKind::Random];

/// Pool engines in each latency setting, baselines once.
fn targets(engines: &[EngineSpec], lats: &[Latency], reads: Reads) -> Vec<Target> {
    let mut v = Vec::new();
    for &e in engines {
        if e.uses_pool() {
            v.extend(lats.iter().map(|&l| Target::new(e, Mode::Adr, l.with_reads(reads.model()))));
        } else {
            v.push(Target::new(e, Mode::Adr, Latency::NONE));
        }
    }
    v
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
    let mut s = String::from("Same-run speed ratios (the baseline's median time / the engine's median time; > 1 means the engine is faster), lowest–highest over workloads and latency settings:\n\n");
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `reproduce hart` runs the paper's trees and the baselines by default, the slow-write
    /// and other papers' engines when named, and every engine with `all`.
    #[test]
    fn hart_engines_are_the_papers_unless_asked() {
        let names = |v: Vec<EngineSpec>| v.iter().map(|e| e.name()).collect::<Vec<_>>();
        let default = names(hart_engines(&[]).unwrap());
        let all = names(engines::all());
        let want: Vec<&str> = HART_DEFAULT.iter().copied().filter(|n| all.contains(n)).collect();
        assert_eq!(default[..want.len()], want[..]);
        assert_eq!(default.len(), want.len() + 1, "and null: {default:?}");
        assert_eq!(names(hart_engines(&["all".into()]).unwrap()), all);
        for slow in engines::SLOW_WRITES.iter().filter(|n| all.contains(n)) {
            assert!(!default.contains(slow));
            assert!(names(hart_engines(&[slow.to_string()]).unwrap()).contains(slow));
            assert!(left_out_note(&hart_engines(&[]).unwrap(), HART_DEFAULT).contains(slow));
        }
        // A default competitor this build lacks is named, not silently dropped.
        for m in missing_defaults(HART_DEFAULT) {
            assert!(left_out_note(&hart_engines(&[]).unwrap(), HART_DEFAULT).contains(m));
        }
        let nb = names(paper_engines(&[], NBTREE_DEFAULT).unwrap());
        for c in ["nbtree", "fptree", "fastfair", "hart", "volatile"] {
            assert!(nb.contains(&c), "{nb:?}");
        }
    }
}
