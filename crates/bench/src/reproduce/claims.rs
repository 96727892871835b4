//! The papers' relative claims as data, and their check against a run: every claim that a
//! tree is N× faster (or slower, or uses more PM lines, ...) than another names the
//! experiment, engines, settings and operations it compares, and the paper's ratio. The
//! reports print one table row per claim: the paper's ratio, pmkv's ratio of medians in
//! the matching setting of this run, and a verdict by [`RULE`].
//!
//! Kept in one table ([`HART`], [`NBTREE`]) so that the claims are read and reviewed in one
//! place, not found scattered over the report code.

use crate::report::Record;
use std::fmt::Write as _;

/// How a verdict is reached, printed under every claims table.
pub const RULE: &str = "Ratios are oriented so that > 1 means the paper's first-named tree is better (faster, \
     fewer PM lines, less memory): the other tree's median time (or lines, or bytes) over the first's, or the \
     first's median throughput over the other's. **holds**: same side of 1 as the paper and within a factor of \
     2 of its ratio (every end of a range; a claim with no number needs only the side; \"about the same\" \
     needs 0.8–1.25×); **holds in direction only**: same side of 1, further than 2× from the paper's number; \
     **does not hold**: the other side of 1 (or outside 0.8–1.25× for \"about the same\"). A claim over several \
     cells (workloads, latencies, operations, trees) aggregates their ratios as its row says: best (max), \
     worst (min), median, mean or range (min–max). Caveat for PM reads: the substrate adds the read latency \
     to every PM line an engine reports reading, cached or not, and at 300/100 too; the HART paper added only \
     the stall cycles of cache misses, and nothing at 300/100. Trees whose inner nodes live in PM (WOART, \
     ART+CoW, FAST&FAIR) report a line per node visited and pay most for it.";

/// What the paper says about the ratio.
#[derive(Clone, Copy, Debug)]
pub enum Expect {
    /// This ratio.
    Point(f64),
    /// Between these (several trees or settings).
    Range(f64, f64),
    /// Better (> 1), no number given.
    Better,
    /// Worse (< 1), no number given.
    Worse,
    /// About the same (1).
    Same,
}

/// How the ratios of a claim's cells become one figure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Agg {
    /// The one cell (the first if several match).
    One,
    Best,
    Worst,
    Median,
    Mean,
    Range,
}

/// What is compared.
#[derive(Clone, Copy, Debug)]
pub enum Metric {
    /// ns per operation (lower is better).
    Time,
    /// Throughput (higher is better).
    Mops,
    /// Wall seconds (build, recovery; lower is better).
    Wall,
    /// p99 latency (lower is better).
    P99,
    /// PM lines read / written per operation, flushes per operation (lower is better).
    LinesRead,
    LinesWritten,
    /// DRAM / PM bytes (`extra.dram_bytes`, `extra.pm_bytes`; lower is better).
    Dram,
    Pm,
    /// The subject's own PM bytes over its DRAM bytes (no other engine).
    PmPerDram,
}

/// Which thread count a claim's cells have.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Threads {
    Any,
    One,
    /// The most threads of the run.
    Max,
    N(usize),
}

/// One relative claim of a paper.
#[derive(Clone, Copy, Debug)]
pub struct Claim {
    pub id: &'static str,
    pub text: &'static str,
    /// The paper's setting and how pmkv matches it.
    pub setting: &'static str,
    pub expect: Expect,
    pub agg: Agg,
    pub metric: Metric,
    pub exp: &'static str,
    /// The tree the claim is about (better when the ratio is > 1).
    pub subject: &'static str,
    /// The trees it is compared with; empty: the subject itself in another setting (`vs_*`).
    pub others: &'static [&'static str],
    /// Cells of the subject: empty = any.
    pub workloads: &'static [&'static str],
    /// Latency ("300/100") or mode ("eadr") of the subject's cells; empty = any.
    pub settings: &'static [&'static str],
    /// Operations; "range" and "range by search" match `range N` and `range N by search`.
    pub ops: &'static [&'static str],
    pub threads: Threads,
    /// The other side's cell where it differs from the subject's.
    pub vs_setting: Option<&'static str>,
    pub vs_op: Option<&'static str>,
    pub vs_workload: Option<&'static str>,
    pub vs_threads: Option<usize>,
    /// The other side's experiment where it differs from the subject's (its cells are then
    /// matched without comparing record counts: the two experiments load differently).
    pub vs_exp: Option<&'static str>,
    /// Non-empty: the claim cannot be measured here, and why.
    pub skip: &'static str,
}

const BASE: Claim = Claim {
    id: "",
    text: "",
    setting: "",
    expect: Expect::Better,
    agg: Agg::One,
    metric: Metric::Time,
    exp: "",
    subject: "hart",
    others: &[],
    workloads: &[],
    settings: &[],
    ops: &[],
    threads: Threads::Any,
    vs_setting: None,
    vs_op: None,
    vs_workload: None,
    vs_threads: None,
    vs_exp: None,
    skip: "",
};

const LATS: &[&str] = &["300/100", "300/300", "600/300"];
const SLOW_READS: &[&str] = &["300/300", "600/300"];
const HART_RIVALS: &[&str] = &["woart", "artcow", "fptree"];
const FIG47: Claim = Claim { exp: "fig4-7", settings: LATS, ..BASE };
const BEST9: &str =
    "§IV names no setting for this best case: pmkv's best cell of Figs. 4–7 (3 workloads × 3 latencies)";

/// HART (ICDE'19): the abstract's best cases and §IV's ratios.
pub const HART: &[Claim] = &[
    Claim { id: "abs-insert-woart", text: "Abstract: HART inserts up to 4.1× faster than WOART", setting: "§IV: Fig. 4a, Dictionary, 300/300 (where §IV puts the best case, 4.0×)", expect: Expect::Point(4.1), others: &["woart"], workloads: &["dictionary"], settings: &["300/300"], ops: &["insert"], ..FIG47 },
    Claim { id: "abs-search-woart", text: "Abstract: HART searches up to 3.3× faster than WOART", setting: BEST9, expect: Expect::Point(3.3), agg: Agg::Best, others: &["woart"], ops: &["search"], ..FIG47 },
    Claim { id: "abs-update-woart", text: "Abstract: HART updates up to 2.4× faster than WOART", setting: BEST9, expect: Expect::Point(2.4), agg: Agg::Best, others: &["woart"], ops: &["update"], ..FIG47 },
    Claim { id: "abs-delete-woart", text: "Abstract: HART deletes up to 2.3× faster than WOART", setting: BEST9, expect: Expect::Point(2.3), agg: Agg::Best, others: &["woart"], ops: &["delete"], ..FIG47 },
    Claim { id: "abs-insert-artcow", text: "Abstract: HART inserts up to 5.4× faster than ART+CoW", setting: BEST9, expect: Expect::Point(5.4), agg: Agg::Best, others: &["artcow"], ops: &["insert"], ..FIG47 },
    Claim { id: "abs-search-artcow", text: "Abstract: HART searches up to 4.4× faster than ART+CoW", setting: BEST9, expect: Expect::Point(4.4), agg: Agg::Best, others: &["artcow"], ops: &["search"], ..FIG47 },
    Claim { id: "abs-update-artcow", text: "Abstract: HART updates up to 2.4× faster than ART+CoW", setting: BEST9, expect: Expect::Point(2.4), agg: Agg::Best, others: &["artcow"], ops: &["update"], ..FIG47 },
    Claim { id: "abs-delete-artcow", text: "Abstract: HART deletes up to 2.3× faster than ART+CoW", setting: BEST9, expect: Expect::Point(2.3), agg: Agg::Best, others: &["artcow"], ops: &["delete"], ..FIG47 },
    Claim { id: "abs-insert-fptree", text: "Abstract: HART inserts up to 4.0× faster than FPTree", setting: "§IV: Fig. 4b, Sequential, 300/300", expect: Expect::Point(4.0), others: &["fptree"], workloads: &["sequential"], settings: &["300/300"], ops: &["insert"], ..FIG47 },
    Claim { id: "abs-search-fptree", text: "Abstract: HART searches up to 7.1× faster than FPTree", setting: BEST9, expect: Expect::Point(7.1), agg: Agg::Best, others: &["fptree"], ops: &["search"], ..FIG47 },
    Claim { id: "abs-update-fptree", text: "Abstract: HART updates up to 4.6× faster than FPTree", setting: BEST9, expect: Expect::Point(4.6), agg: Agg::Best, others: &["fptree"], ops: &["update"], ..FIG47 },
    Claim { id: "abs-delete-fptree", text: "Abstract: HART deletes up to 5.4× faster than FPTree", setting: BEST9, expect: Expect::Point(5.4), agg: Agg::Best, others: &["fptree"], ops: &["delete"], ..FIG47 },
    Claim { id: "fig4-all", text: "Fig. 4: HART consistently outperforms all its competitors on insertion", setting: "every cell of Fig. 4, each competitor (worst)", agg: Agg::Worst, others: HART_RIVALS, ops: &["insert"], ..FIG47 },
    Claim { id: "fig4-woart-worst", text: "Fig. 4: worst case against WOART, 1.4× faster", setting: "Fig. 4b, Sequential, 600/300", expect: Expect::Point(1.4), others: &["woart"], workloads: &["sequential"], settings: &["600/300"], ops: &["insert"], ..FIG47 },
    Claim { id: "fig4-fptree-worst", text: "Fig. 4: worst case against FPTree, 1.9× faster", setting: "Fig. 4c, Random, 600/300", expect: Expect::Point(1.9), others: &["fptree"], workloads: &["random"], settings: &["600/300"], ops: &["insert"], ..FIG47 },
    Claim { id: "fig4-artcow", text: "Fig. 4: ART+CoW performs the worst in most cases (here: WOART against ART+CoW)", setting: "every cell of Fig. 4 (median)", agg: Agg::Median, subject: "woart", others: &["artcow"], ops: &["insert"], ..FIG47 },
    Claim { id: "fig5-slow-reads", text: "Fig. 5: HART searches faster under 300/300 and 600/300 on all three workloads", setting: "Fig. 5, 300/300 and 600/300, every workload and competitor (worst)", agg: Agg::Worst, others: HART_RIVALS, settings: SLOW_READS, ops: &["search"], ..FIG47 },
    Claim { id: "fig5-woart-300/100", text: "Fig. 5: under 300/100 WOART searches faster than HART", setting: "Fig. 5, 300/100, every workload (best)", expect: Expect::Worse, agg: Agg::Best, others: &["woart"], settings: &["300/100"], ops: &["search"], ..FIG47 },
    Claim { id: "fig5-fptree-dict", text: "Fig. 5: FPTree searches faster than WOART under Dictionary in 300/300 and 600/300", setting: "Fig. 5a, 300/300 and 600/300 (worst)", agg: Agg::Worst, subject: "fptree", others: &["woart"], workloads: &["dictionary"], settings: SLOW_READS, ops: &["search"], ..FIG47 },
    Claim { id: "fig6-fptree", text: "Fig. 6: HART updates faster than FPTree in all cases", setting: "every cell of Fig. 6 (worst)", agg: Agg::Worst, others: &["fptree"], ops: &["update"], ..FIG47 },
    Claim { id: "fig6-art", text: "Fig. 6: HART updates faster than WOART and ART+CoW in most cases", setting: "every cell of Fig. 6, both trees (median)", agg: Agg::Median, others: &["woart", "artcow"], ops: &["update"], ..FIG47 },
    Claim { id: "fig7-dict", text: "Fig. 7: under Dictionary FPTree deletes fastest", setting: "Fig. 7a, every latency (best)", expect: Expect::Worse, agg: Agg::Best, others: &["fptree"], workloads: &["dictionary"], ops: &["delete"], ..FIG47 },
    Claim { id: "fig7-fptree", text: "Fig. 7: under Random and Sequential FPTree deletes slowest", setting: "Fig. 7b–c, every latency (worst)", agg: Agg::Worst, others: &["fptree"], workloads: &["sequential", "random"], ops: &["delete"], ..FIG47 },
    Claim { id: "fig8-insert", text: "Fig. 8: HART scales much better for insertion as records grow", setting: "Random, 300/100, every size, each competitor (median; the growth column of the Fig. 8 table shows the scaling itself)", agg: Agg::Median, exp: "fig8", others: HART_RIVALS, settings: &["300/100"], ops: &["insert"], ..BASE },
    Claim { id: "fig8-search-fptree", text: "Fig. 8b: FPTree searches slowest (key comparisons)", setting: "Random, 300/100, every size (worst)", agg: Agg::Worst, exp: "fig8", others: &["fptree"], settings: &["300/100"], ops: &["search"], ..BASE },
    Claim { id: "fig8-art-similar", text: "Fig. 8b–c: the ART-based trees search and update at very similar speeds", setting: "Random, 300/100, every size, search and update (median)", expect: Expect::Same, agg: Agg::Median, exp: "fig8", others: &["woart", "artcow"], settings: &["300/100"], ops: &["search", "update"], ..BASE },
    Claim { id: "fig8-delete", text: "Fig. 8d: little difference among HART, WOART and FPTree in deletion", setting: "Random, 300/100, every size (median)", expect: Expect::Same, agg: Agg::Median, exp: "fig8", others: &["woart", "fptree"], settings: &["300/100"], ops: &["delete"], ..BASE },
    Claim { id: "fig9-woart", text: "Fig. 9: other than 300/100, HART is 2.0–2.6× faster than WOART on the three mixes", setting: "3 mixes × 300/300, 600/300 (range)", expect: Expect::Range(2.0, 2.6), agg: Agg::Range, exp: "fig9", others: &["woart"], settings: SLOW_READS, ..BASE },
    Claim { id: "fig9-fptree", text: "Fig. 9: other than 300/100, HART is 2.4–5.7× faster than FPTree on the three mixes", setting: "3 mixes × 300/300, 600/300 (range)", expect: Expect::Range(2.4, 5.7), agg: Agg::Range, exp: "fig9", others: &["fptree"], settings: SLOW_READS, ..BASE },
    Claim { id: "fig9-rmw", text: "Fig. 9b: the exception, Read-Modify-Write at 300/100: WOART and ART+CoW are faster", setting: "read-modify-write, 300/100 (best)", expect: Expect::Worse, agg: Agg::Best, exp: "fig9", others: &["woart", "artcow"], settings: &["300/100"], ops: &["read-modify-write"], ..BASE },
    Claim { id: "fig10a-300/100", text: "Fig. 10a: HART's range query is 2.6× slower than FPTree's at 300/100", setting: "Sequential; HART searching key by key (the paper's method) against FPTree's leaf scan", expect: Expect::Point(1.0 / 2.6), exp: "fig10a", others: &["fptree"], settings: &["300/100"], ops: &["range by search"], vs_op: Some("range"), ..BASE },
    Claim { id: "fig10a-300/300", text: "Fig. 10a: HART's range query is 2.3× slower than FPTree's at 300/300", setting: "as above, 300/300", expect: Expect::Point(1.0 / 2.3), exp: "fig10a", others: &["fptree"], settings: &["300/300"], ops: &["range by search"], vs_op: Some("range"), ..BASE },
    Claim { id: "fig10a-600/300", text: "Fig. 10a: HART's range query is 2.3× slower than FPTree's at 600/300", setting: "as above, 600/300", expect: Expect::Point(1.0 / 2.3), exp: "fig10a", others: &["fptree"], settings: &["600/300"], ops: &["range by search"], vs_op: Some("range"), ..BASE },
    Claim { id: "fig10a-art", text: "Fig. 10a: HART's range query beats WOART's and ART+CoW's when PM reads are slower than DRAM", setting: "300/300 and 600/300, every ART tree searching key by key (worst)", agg: Agg::Worst, exp: "fig10a", others: &["woart", "artcow"], settings: SLOW_READS, ops: &["range by search"], ..BASE },
    Claim { id: "fig10b-dram", text: "Fig. 10b: HART uses much more DRAM than FPTree", setting: "Sequential records loaded (DRAM bytes)", expect: Expect::Worse, metric: Metric::Dram, exp: "fig10b", others: &["fptree"], ..BASE },
    Claim { id: "fig10b-pm", text: "Fig. 10b: FPTree uses more PM than HART", setting: "Sequential records loaded (PM bytes)", metric: Metric::Pm, exp: "fig10b", others: &["fptree"], ..BASE },
    Claim { id: "fig10c-hart", text: "Fig. 10c: HART's recovery is on average 2.4× faster than its build", setting: "Random, 300/100, every size (mean of build / recovery)", expect: Expect::Point(2.4), agg: Agg::Mean, metric: Metric::Wall, exp: "fig10c", ops: &["recovery"], vs_op: Some("build"), ..BASE },
    Claim { id: "fig10c-fptree-self", text: "Fig. 10c: FPTree's recovery is shorter than its build", setting: "Random, 300/100, every size (worst)", agg: Agg::Worst, metric: Metric::Wall, exp: "fig10c", subject: "fptree", ops: &["recovery"], vs_op: Some("build"), ..BASE },
    Claim { id: "fig10c-fptree", text: "Fig. 10c: FPTree's recovery is much shorter than HART's", setting: "Random, 300/100, every size (best)", expect: Expect::Worse, agg: Agg::Best, metric: Metric::Wall, exp: "fig10c", others: &["fptree"], ops: &["recovery"], ..BASE },
    Claim { id: "fig10d-2", text: "Fig. 10d: 2 threads give 1.96/1.94/1.93/1.93× one thread's throughput (insert/search/update/delete)", setting: "Random, 300/100, HART at 2 threads against 1 (range over the 4 operations)", expect: Expect::Range(1.93, 1.96), agg: Agg::Range, metric: Metric::Mops, exp: "fig10d", threads: Threads::N(2), vs_threads: Some(1), ops: &["insert", "search", "update", "delete"], workloads: &["random"], settings: &["300/100"], ..BASE },
    Claim { id: "fig10d-8", text: "Fig. 10d: 8 threads give 7.18/7.30/7.13/7.09× one thread's throughput", setting: "8 threads", expect: Expect::Range(7.09, 7.30), skip: "8 threads need 8 cores; this machine has 2", ..BASE },
];

const NB: Claim = Claim { subject: "nbtree", exp: "base", workloads: &["int"], ..BASE };
const NB1: Claim = Claim { settings: &["eadr"], threads: Threads::One, ..NB };
const NB_RIVALS: &[&str] = &["fptree", "fastfair", "utree"];
/// Fig. 8: YCSB under eADR at the most threads here.
const FIG8: Claim = Claim { exp: "ycsb", workloads: &[], settings: &["eadr"], threads: Threads::Max, ..NB };
/// Fig. 8 against each of the other trees, the worst ratio standing for all.
const FIG8_RIVALS: Claim = Claim { agg: Agg::Worst, others: NB_RIVALS, ..FIG8 };
const T1: &str = "Table 1 (eadr, 1 thread, mean over the base phase)";
const T1_INSERT: &str = "Table 1 (eadr, 1 thread): NBTree's individual inserts (no SMO, as the paper counts \
     them) against the other tree's mean insert over the base phase (its splits included)";
/// Table 1's insert rows: NBTree's individual inserts (experiment `table1`) against the
/// other tree's mean insert (`base`).
const T1_INS: Claim = Claim {
    setting: T1_INSERT,
    exp: "table1",
    ops: &["insert (individual)"],
    vs_exp: Some("base"),
    vs_op: Some("insert"),
    metric: Metric::LinesWritten,
    ..NB1
};

/// NBTree (VLDB'22): Table 1's line counts as ratios, §6's figures.
pub const NBTREE: &[Claim] = &[
    Claim {
        id: "t1-fptree-insert",
        text: "Table 1: FPTree writes 3 PM lines per insert, NBTree 1",
        expect: Expect::Point(3.0),
        others: &["fptree"],
        ..T1_INS
    },
    Claim {
        id: "t1-fptree-delete",
        text: "Table 1: FPTree writes 1 PM line per delete, as NBTree",
        setting: T1,
        expect: Expect::Same,
        metric: Metric::LinesWritten,
        others: &["fptree"],
        ops: &["delete"],
        ..NB1
    },
    Claim {
        id: "t1-fptree-update",
        text: "Table 1: FPTree writes 3 PM lines per update, NBTree 1",
        setting: T1,
        expect: Expect::Point(3.0),
        metric: Metric::LinesWritten,
        others: &["fptree"],
        ops: &["update"],
        ..NB1
    },
    Claim {
        id: "t1-fptree-search",
        text: "Table 1: FPTree reads 3 PM lines per search, NBTree 1",
        setting: T1,
        expect: Expect::Point(3.0),
        metric: Metric::LinesRead,
        others: &["fptree"],
        ops: &["search"],
        ..NB1
    },
    Claim {
        id: "t1-fastfair-insert",
        text: "Table 1: FAST&FAIR writes O(n) PM lines per insert, NBTree 1",
        others: &["fastfair"],
        ..T1_INS
    },
    Claim {
        id: "t1-fastfair-delete",
        text: "Table 1: FAST&FAIR writes O(n) PM lines per delete, NBTree 1",
        setting: T1,
        metric: Metric::LinesWritten,
        others: &["fastfair"],
        ops: &["delete"],
        ..NB1
    },
    Claim {
        id: "t1-fastfair-update",
        text: "Table 1: FAST&FAIR writes 1 PM line per update, as NBTree",
        setting: T1,
        expect: Expect::Same,
        metric: Metric::LinesWritten,
        others: &["fastfair"],
        ops: &["update"],
        ..NB1
    },
    Claim {
        id: "t1-fastfair-search",
        text: "Table 1: FAST&FAIR reads O(n) PM lines per search, NBTree 1",
        setting: T1,
        metric: Metric::LinesRead,
        others: &["fastfair"],
        ops: &["search"],
        ..NB1
    },
    Claim {
        id: "t1-utree-insert",
        text: "Table 1: uTree writes 2 PM lines per insert, NBTree 1",
        expect: Expect::Point(2.0),
        others: &["utree"],
        ..T1_INS
    },
    Claim {
        id: "t1-utree-delete",
        text: "Table 1: uTree writes 2 PM lines per delete, NBTree 1",
        setting: T1,
        expect: Expect::Point(2.0),
        metric: Metric::LinesWritten,
        others: &["utree"],
        ops: &["delete"],
        ..NB1
    },
    Claim {
        id: "t1-utree-update",
        text: "Table 1: uTree writes 1 PM line per update, as NBTree",
        setting: T1,
        expect: Expect::Same,
        metric: Metric::LinesWritten,
        others: &["utree"],
        ops: &["update"],
        ..NB1
    },
    Claim {
        id: "t1-utree-search",
        text: "Table 1: uTree reads 2 PM lines per search, NBTree 1",
        setting: T1,
        expect: Expect::Point(2.0),
        metric: Metric::LinesRead,
        others: &["utree"],
        ops: &["search"],
        ..NB1
    },
    Claim {
        id: "fig5-insert",
        text: "Fig. 5: NBTree has the lowest insert latency",
        setting: "eadr, 1 thread, uniform; each competitor (worst)",
        agg: Agg::Worst,
        others: NB_RIVALS,
        ops: &["insert"],
        ..NB1
    },
    Claim {
        id: "fig5-search",
        text: "Fig. 5: NBTree has the lowest search latency",
        setting: "eadr, 1 thread, uniform; each competitor (worst)",
        agg: Agg::Worst,
        others: NB_RIVALS,
        ops: &["search"],
        ..NB1
    },
    Claim {
        id: "fig5-update",
        text: "Fig. 5: NBTree has the lowest update latency",
        setting: "eadr, 1 thread, uniform; each competitor (worst)",
        agg: Agg::Worst,
        others: NB_RIVALS,
        ops: &["update"],
        ..NB1
    },
    Claim {
        id: "fig5-delete",
        text: "Fig. 5: NBTree has the lowest delete latency",
        setting: "eadr, 1 thread, uniform; each competitor (worst)",
        agg: Agg::Worst,
        others: NB_RIVALS,
        ops: &["delete"],
        ..NB1
    },
    Claim {
        id: "fig6-insert",
        text: "Fig. 6: NBTree's insert throughput is 1.6–7.5× the other trees'",
        setting: "eadr, the most threads here (paper: 56); range over the competitors",
        expect: Expect::Range(1.6, 7.5),
        agg: Agg::Range,
        metric: Metric::Mops,
        others: NB_RIVALS,
        settings: &["eadr"],
        threads: Threads::Max,
        ops: &["insert"],
        ..NB
    },
    Claim {
        id: "fig6-update",
        text: "Fig. 6: NBTree's update throughput is 1.5–5.0× the other trees'",
        setting: "as above",
        expect: Expect::Range(1.5, 5.0),
        agg: Agg::Range,
        metric: Metric::Mops,
        others: NB_RIVALS,
        settings: &["eadr"],
        threads: Threads::Max,
        ops: &["update"],
        ..NB
    },
    Claim {
        id: "fig6-delete",
        text: "Fig. 6: NBTree's delete throughput is 2.0–4.9× the other trees'",
        setting: "as above",
        expect: Expect::Range(2.0, 4.9),
        agg: Agg::Range,
        metric: Metric::Mops,
        others: NB_RIVALS,
        settings: &["eadr"],
        threads: Threads::Max,
        ops: &["delete"],
        ..NB
    },
    Claim {
        id: "fig6-search",
        text: "Fig. 6: NBTree's search throughput is 1.6–5.1× the other trees'",
        setting: "as above",
        expect: Expect::Range(1.6, 5.1),
        agg: Agg::Range,
        metric: Metric::Mops,
        others: NB_RIVALS,
        settings: &["eadr"],
        threads: Threads::Max,
        ops: &["search"],
        ..NB
    },
    Claim {
        id: "fig6-sl-insert",
        text: "Fig. 6: two-layer leaves insert 2.4× faster than single-layer ones (NBTree-SL)",
        setting: "eadr, the most threads here",
        expect: Expect::Point(2.4),
        metric: Metric::Mops,
        others: &["nbtree-sl"],
        settings: &["eadr"],
        threads: Threads::Max,
        ops: &["insert"],
        ..NB
    },
    Claim {
        id: "fig6-sl-uds",
        text: "Fig. 6: two-layer leaves speed update, delete and search up by up to 29%",
        setting: "eadr, the most threads here (range over the 3 operations)",
        expect: Expect::Range(1.0, 1.29),
        agg: Agg::Range,
        metric: Metric::Mops,
        others: &["nbtree-sl"],
        settings: &["eadr"],
        threads: Threads::Max,
        ops: &["update", "delete", "search"],
        ..NB
    },
    Claim {
        id: "fig7",
        text: "Fig. 7: NBTree's DRAM:PM consumption is about 1:7 (PM bytes / DRAM bytes = 7)",
        setting: "eadr, after all the inserts",
        expect: Expect::Point(7.0),
        metric: Metric::PmPerDram,
        exp: "space",
        workloads: &["after inserts"],
        ..NB
    },
    Claim {
        id: "fig8-tput",
        text: "Fig. 8: under YCSB 50:50 Zipf 0.99 NBTree's throughput is 6.0× the other trees'",
        setting: "eadr, the most threads here (paper: 56); each competitor (worst)",
        expect: Expect::Point(6.0),
        metric: Metric::Mops,
        ..FIG8_RIVALS
    },
    Claim {
        id: "fig8-p99",
        text: "Fig. 8: ... and its p99 latency 32× lower",
        setting: "as above",
        expect: Expect::Point(32.0),
        metric: Metric::P99,
        ..FIG8_RIVALS
    },
    Claim {
        id: "fig8-nbtree-w",
        text: "Fig. 8: lock-free writes give NBTree 5.5× NBTree-W's throughput",
        setting: "eadr, the most threads here",
        expect: Expect::Point(5.5),
        metric: Metric::Mops,
        others: &["nbtree-w"],
        ..FIG8
    },
    Claim {
        id: "fig9-skew",
        text: "Fig. 9a: NBTree gains with skew",
        setting: "YCSB 50:50, eadr, the most threads: Zipf 0.99 against 0.5",
        metric: Metric::Mops,
        exp: "skew",
        workloads: &["0.99"],
        vs_workload: Some("0.5"),
        ..NB
    },
    Claim {
        id: "fig9-write-only",
        text: "Fig. 9b: under write-only YCSB NBTree's throughput is 11× the other trees'",
        setting: "100% writes, Zipf 0.99, eadr, the most threads; each competitor (worst)",
        expect: Expect::Point(11.0),
        agg: Agg::Worst,
        metric: Metric::Mops,
        exp: "writes",
        workloads: &["1"],
        others: NB_RIVALS,
        ..NB
    },
    Claim {
        id: "fig10",
        text: "Fig. 10: with large keys and values NBTree still has significantly higher throughput",
        setting: "Random string keys, 64-byte values, YCSB 50:50, eadr, the most threads; each competitor (worst)",
        agg: Agg::Worst,
        metric: Metric::Mops,
        exp: "large",
        workloads: &[],
        others: NB_RIVALS,
        ..NB
    },
    Claim {
        id: "fig11-adr",
        text: "Fig. 11: in ADR NBTree has the lowest overhead (one flush per write)",
        setting: "adr, 1 thread, insert/update/delete, each competitor (worst)",
        agg: Agg::Worst,
        others: NB_RIVALS,
        settings: &["adr"],
        threads: Threads::One,
        ops: &["insert", "update", "delete"],
        ..NB
    },
    Claim {
        id: "fig11-nbtree",
        text: "Fig. 11: every tree is faster in eADR than in ADR (NBTree)",
        setting: "1 thread, eadr against adr, insert/update/delete (worst; a search flushes nothing in either)",
        agg: Agg::Worst,
        ops: &["insert", "update", "delete"],
        vs_setting: Some("adr"),
        ..NB1
    },
    Claim {
        id: "fig11-fptree",
        text: "Fig. 11: every tree is faster in eADR than in ADR (FPTree)",
        setting: "as above",
        agg: Agg::Worst,
        subject: "fptree",
        ops: &["insert", "update", "delete"],
        vs_setting: Some("adr"),
        ..NB1
    },
    Claim {
        id: "fig11-fastfair",
        text: "Fig. 11: every tree is faster in eADR than in ADR (FAST&FAIR)",
        setting: "as above",
        agg: Agg::Worst,
        subject: "fastfair",
        ops: &["insert", "update", "delete"],
        vs_setting: Some("adr"),
        ..NB1
    },
    Claim {
        id: "fig13-search",
        text: "Fig. 13: on DRAM NBTree searches 1.7× faster than on PM",
        setting: "mode none (no persistence) against eadr, 1 thread; PM here is DRAM (/dev/shm)",
        expect: Expect::Point(1.7),
        metric: Metric::Mops,
        settings: &["none"],
        threads: Threads::One,
        vs_setting: Some("eadr"),
        ops: &["search"],
        ..NB
    },
    Claim {
        id: "fig13-insert",
        text: "Fig. 13: on DRAM NBTree inserts 1.8× faster than on PM",
        setting: "as above",
        expect: Expect::Point(1.8),
        metric: Metric::Mops,
        settings: &["none"],
        threads: Threads::One,
        vs_setting: Some("eadr"),
        ops: &["insert"],
        ..NB
    },
    Claim {
        id: "recovery",
        text: "§3.2: rebuilding from the PM leaves is 32× faster than building from the base data",
        setting: "eadr, build against a clean reopen",
        expect: Expect::Point(32.0),
        metric: Metric::Wall,
        exp: "recovery",
        ops: &["recovery"],
        vs_op: Some("build"),
        ..NB
    },
];

const MG: Claim = Claim { subject: "mangosteen", metric: Metric::Mops, threads: Threads::Max, ..BASE };
/// Persimmon is not available: the per-write baseline stands in for it.
const PERSIMMON: &[&str] = &["mangosteen-perwrite"];
const NO_ROMULUS: &str = "RomulusDB is not available (its claims need it; the per-write baseline and LMDB stand beside Mangosteen in the figure instead)";

/// Mangosteen (§6, Figs. 5–9). Persimmon's place is taken by `mangosteen-perwrite` (every
/// captured store logged and fenced at once) and in-memory Redis's by `volatile` (the same
/// `BTreeMap` without durability); RomulusDB's claims are not measured.
pub const MANGOSTEEN: &[Claim] = &[
    Claim {
        id: "fig5a-persimmon",
        text: "Fig. 5a: at 10% updates Mangosteen's peak throughput is about 2.9× Persimmon's",
        setting: "YCSB-like, Zipf 0.99, the most threads that fit the cores; Persimmon: the per-write baseline",
        expect: Expect::Point(2.9),
        exp: "fig5",
        others: PERSIMMON,
        workloads: &["10% updates"],
        ..MG
    },
    Claim {
        id: "fig5a-redis",
        text: "Fig. 5a: at 10% updates Mangosteen's peak throughput is about 2.9× in-memory Redis's",
        setting: "as above; Redis (single-threaded): the same BTreeMap without durability (volatile, parallel reads)",
        expect: Expect::Point(2.9),
        exp: "fig5",
        others: &["volatile"],
        vs_setting: Some("-"),
        workloads: &["10% updates"],
        ..MG
    },
    Claim {
        id: "fig5b-persimmon",
        text: "Fig. 5b: at 90% updates Mangosteen's peak throughput is 1.6× Persimmon's",
        setting: "as Fig. 5a, 90% updates",
        expect: Expect::Point(1.6),
        exp: "fig5",
        others: PERSIMMON,
        workloads: &["90% updates"],
        ..MG
    },
    Claim {
        id: "fig5b-redis",
        text: "Fig. 5b: at 90% updates Mangosteen's peak throughput is 1.3× in-memory Redis's",
        setting: "as Fig. 5a, 90% updates, against volatile",
        expect: Expect::Point(1.3),
        exp: "fig5",
        others: &["volatile"],
        vs_setting: Some("-"),
        workloads: &["90% updates"],
        ..MG
    },
    Claim {
        id: "fig6-persimmon",
        text: "Fig. 6: Mangosteen outperforms Persimmon at every update ratio by 2×–5×",
        setting: "0–100% updates, Zipf 0.99 (range over the ratios; at 0% nothing is logged)",
        expect: Expect::Range(2.0, 5.0),
        agg: Agg::Range,
        exp: "fig6",
        others: PERSIMMON,
        workloads: &["25% updates", "50% updates", "75% updates", "100% updates"],
        ..MG
    },
    Claim {
        id: "fig6-redis-100",
        text: "Fig. 6: Mangosteen beats in-memory Redis even at 100% updates",
        setting: "100% updates against volatile (Mangosteen's edge over Redis, parallel request parsing, has no counterpart in process)",
        exp: "fig6",
        others: &["volatile"],
        vs_setting: Some("-"),
        workloads: &["100% updates"],
        ..MG
    },
    Claim {
        id: "fig7-zipf",
        text: "Fig. 7: at 100% updates deduplication adds 26% throughput (Zipfian)",
        setting: "Zipf 0.99, 100% updates; dedup=false for the ablation",
        expect: Expect::Point(1.26),
        exp: "fig7",
        others: &["mangosteen-nodedup"],
        workloads: &["zipf 0.99, 100% updates"],
        ..MG
    },
    Claim {
        id: "fig7-uniform",
        text: "Fig. 7: at 100% updates deduplication adds 21% throughput (uniform)",
        setting: "uniform, 100% updates",
        expect: Expect::Point(1.21),
        exp: "fig7",
        others: &["mangosteen-nodedup"],
        workloads: &["uniform, 100% updates"],
        ..MG
    },
    Claim {
        id: "fig8-romulus",
        text: "Fig. 8a–c: 5.5–6.5× lower latency per write than RomulusDB at 32 cores (fillSeq, fillRandom, overwrite)",
        setting: "32 cores",
        expect: Expect::Range(5.5, 6.5),
        skip: NO_ROMULUS,
        ..MG
    },
    Claim {
        id: "fig8-perwrite",
        text: "Fig. 8a–c (pmkv's stand-in): Mangosteen writes faster than the per-write baseline on fillSeq, fillRandom and overwrite",
        setting: "1 and 2 threads, every write workload (worst)",
        agg: Agg::Worst,
        metric: Metric::Time,
        exp: "fig8",
        others: PERSIMMON,
        ops: &["fillseq", "fillrandom", "overwrite"],
        threads: Threads::Any,
        ..MG
    },
    Claim {
        id: "fig8d-romulus",
        text: "Fig. 8d: with memcpy capture Mangosteen fills 100 kB values 2.4× faster than RomulusDB at 32 cores",
        setting: "32 cores",
        expect: Expect::Point(2.4),
        skip: NO_ROMULUS,
        ..MG
    },
    Claim {
        id: "fig8d-pages",
        text: "Fig. 8d: memcpy capture makes a large value one capture and one sequential log write (here: faster than page capture)",
        setting: "fill100K, 1 and 2 threads (worst)",
        agg: Agg::Worst,
        metric: Metric::Time,
        exp: "fig8",
        others: &["mangosteen-pages"],
        ops: &["fill100K"],
        threads: Threads::Any,
        ..MG
    },
    Claim {
        id: "fig8d-nomemcpy",
        text: "Fig. 8d: without memcpy instrumentation (nomemcpy) every store of a large value is intercepted and performance plummets",
        setting: "fill100K, 1 and 2 threads (worst); nomemcpy here is `memcpy=false`: each 8-byte store of the copy through the store hook (the paper's is DynamoRIO intercepting each store instruction)",
        agg: Agg::Worst,
        metric: Metric::Time,
        exp: "fig8",
        others: &["mangosteen-nomemcpy"],
        ops: &["fill100K"],
        threads: Threads::Any,
        ..MG
    },
    Claim {
        id: "fig9-romulus",
        text: "Fig. 9: Mangosteen scans 5× (readSeq1KB) and 2.8× (readReverse1KB) faster than RomulusDB, reading DRAM",
        setting: "32 cores",
        expect: Expect::Range(2.8, 5.0),
        skip: NO_ROMULUS,
        ..MG
    },
    Claim {
        id: "fig9-dram",
        text: "Fig. 9: Mangosteen reads from its DRAM copy, so it scans at in-memory speed (pmkv: as fast as the same BTreeMap without durability)",
        setting: "readseq and readreverse, 100-byte and 1,000-byte values, 1 and 2 threads (median)",
        expect: Expect::Same,
        agg: Agg::Median,
        exp: "fig9",
        others: &["volatile"],
        vs_setting: Some("-"),
        threads: Threads::Any,
        ..MG
    },
];

/// One claim checked against a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Checked {
    pub id: String,
    pub claim: String,
    pub setting: String,
    pub paper: String,
    /// The aggregated ratio (the lower end for a range); `None`: not measured.
    pub measured: Option<f64>,
    pub measured_max: Option<f64>,
    /// The text of the pmkv column ("2.31× (dictionary 300/300 vs woart)", or "not measured: why").
    pub pmkv: String,
    pub verdict: String,
    /// Competitors the claim names that this run lacks, and why.
    pub skipped: Vec<String>,
}

fn op_matches(pat: &str, op: &str) -> bool {
    match pat {
        "range" => op.starts_with("range ") && !op.ends_with(" by search"),
        "range by search" => op.starts_with("range ") && op.ends_with(" by search"),
        p => p == op,
    }
}

/// A setting is a persistence mode ("eadr", "adr", "none", "msync") or a latency ("300/100").
fn setting_matches(s: &str, r: &Record) -> bool {
    if ["eadr", "adr", "none", "msync"].contains(&s) {
        r.mode == s
    } else {
        r.latency == s
    }
}

fn value(m: Metric, r: &Record, key: &str) -> f64 {
    match m {
        Metric::Time => r.ns_per_op,
        Metric::Mops => r.mops,
        Metric::Wall => r.wall_s,
        Metric::P99 => r.p99_ns as f64,
        Metric::LinesRead => r.lines_read_per_op,
        Metric::LinesWritten => r.lines_written_per_op,
        Metric::Dram | Metric::Pm | Metric::PmPerDram => r.extra.get(key).copied().unwrap_or(0.0),
    }
}

/// The subject's ratio over `o` (> 1: the subject is better).
fn ratio(m: Metric, s: &Record, o: &Record) -> f64 {
    let (sv, ov) = match m {
        Metric::Dram => (value(m, s, "dram_bytes"), value(m, o, "dram_bytes")),
        Metric::Pm => (value(m, s, "pm_bytes"), value(m, o, "pm_bytes")),
        _ => (value(m, s, ""), value(m, o, "")),
    };
    let (num, den) = match m {
        Metric::Mops => (sv, ov),
        _ => (ov, sv),
    };
    if den > 0.0 {
        num / den
    } else if num > 0.0 {
        f64::INFINITY
    } else {
        1.0
    }
}

fn paper_text(e: Expect) -> String {
    let x = |v: f64| {
        if v < 1.0 {
            format!("{v:.2}× (1/{:.1})", 1.0 / v)
        } else {
            format!("{v:.1}×")
        }
    };
    match e {
        Expect::Point(p) => x(p),
        Expect::Range(a, b) => format!("{a:.2}–{b:.2}×"),
        Expect::Better => "> 1 (no number)".into(),
        Expect::Worse => "< 1 (no number)".into(),
        Expect::Same => "≈ 1 (about the same)".into(),
    }
}

/// The verdict of `lo..hi` (equal for a single figure) against `e`, by [`RULE`].
pub fn verdict(e: Expect, lo: f64, hi: f64) -> &'static str {
    const HOLDS: &str = "holds";
    const DIR: &str = "holds in direction only";
    const NOT: &str = "does not hold";
    let near = |v: f64, p: f64| v >= p / 2.0 && v <= p * 2.0;
    match e {
        Expect::Better => {
            if lo > 1.0 {
                HOLDS
            } else {
                NOT
            }
        }
        Expect::Worse => {
            if hi < 1.0 {
                HOLDS
            } else {
                NOT
            }
        }
        Expect::Same => {
            if lo >= 0.8 && hi <= 1.25 {
                HOLDS
            } else {
                NOT
            }
        }
        Expect::Point(p) => {
            let side = if p >= 1.0 { lo > 1.0 } else { hi < 1.0 };
            match (side, near(lo, p) && near(hi, p)) {
                (true, true) => HOLDS,
                (true, false) => DIR,
                _ => NOT,
            }
        }
        Expect::Range(a, b) => {
            let side = if a >= 1.0 { lo > 1.0 || (a == 1.0 && lo >= 1.0) } else { hi < 1.0 };
            match (side, lo >= a / 2.0 && hi <= b * 2.0) {
                (true, true) => HOLDS,
                (true, false) => DIR,
                _ => NOT,
            }
        }
    }
}

/// Why engine `name` has no records in this run.
fn absent(name: &str) -> String {
    if pmkv::Registry::builtin().names().contains(&name) {
        format!("{name} not in this run (-e)")
    } else {
        format!("{name} not registered in this build")
    }
}

/// Check every claim of `claims` against `recs`; `max_t` is the run's most threads.
pub fn check(claims: &[Claim], recs: &[Record], max_t: usize) -> Vec<Checked> {
    claims.iter().map(|c| check_one(c, recs, max_t)).collect()
}

fn check_one(c: &Claim, recs: &[Record], max_t: usize) -> Checked {
    let mut out = Checked {
        id: c.id.into(),
        claim: c.text.into(),
        setting: c.setting.into(),
        paper: paper_text(c.expect),
        measured: None,
        measured_max: None,
        pmkv: String::new(),
        verdict: "not measured".into(),
        skipped: vec![],
    };
    if !c.skip.is_empty() {
        out.pmkv = format!("not measured: {}", c.skip);
        return out;
    }
    let has = |e: &str| recs.iter().any(|r| r.engine == e && r.error.is_none());
    if !has(c.subject) {
        out.pmkv = format!("not measured: {}", absent(c.subject));
        return out;
    }
    let others: Vec<&str> = if c.others.is_empty() { vec![c.subject] } else { c.others.to_vec() };
    for o in &others {
        if !has(o) {
            out.skipped.push(absent(o));
        }
    }
    let subj = recs.iter().filter(|r| {
        r.experiment == c.exp
            && r.error.is_none()
            && r.engine == c.subject
            && (c.workloads.is_empty() || c.workloads.contains(&r.workload.as_str()))
            && (c.settings.is_empty() || c.settings.iter().any(|s| setting_matches(s, r)))
            && (c.ops.is_empty() || c.ops.iter().any(|p| op_matches(p, &r.op)))
            && match c.threads {
                Threads::Any => true,
                Threads::One => r.threads == 1,
                Threads::Max => r.threads == max_t,
                Threads::N(n) => r.threads == n,
            }
    });
    let mut cells: Vec<(f64, String)> = Vec::new();
    for s in subj {
        if let Metric::PmPerDram = c.metric {
            let (p, d) = (value(c.metric, s, "pm_bytes"), value(c.metric, s, "dram_bytes"));
            if d > 0.0 {
                cells.push((p / d, format!("{} {}", s.workload, s.mode)));
            }
            continue;
        }
        for o in others.iter().filter(|o| has(o)) {
            let want_op = c.vs_op.unwrap_or(&s.op);
            let want_w = c.vs_workload.unwrap_or(&s.workload);
            let want_t = c.vs_threads.unwrap_or(s.threads);
            let found = recs.iter().find(|r| {
                r.experiment == c.vs_exp.unwrap_or(c.exp)
                    && r.error.is_none()
                    && r.engine == *o
                    && r.workload == want_w
                    && r.threads == want_t
                    && (c.vs_exp.is_some() || r.records == s.records)
                    && match c.vs_op {
                        Some(p) => op_matches(p, &r.op),
                        // Another workload of a mix: its operation is named after it.
                        None => r.op == want_op || c.vs_workload.is_some(),
                    }
                    && match c.vs_setting {
                        Some(v) => setting_matches(v, r),
                        None => r.latency == s.latency && (r.mode == s.mode || r.mode == "-" || s.mode == "-"),
                    }
            });
            if let Some(r) = found {
                let mut label = vec![s.workload.clone(), setting_of(s), s.op.clone()];
                if s.threads > 1 {
                    label.push(format!("{}T", s.threads));
                }
                if c.others.is_empty() {
                    label.push(format!("vs {} {} {}", r.workload, setting_of(r), r.op));
                } else {
                    label.push(format!("vs {o}"));
                }
                cells.push((ratio(c.metric, s, r), label.join(" ")));
            }
        }
    }
    cells.retain(|x| x.0.is_finite());
    if cells.is_empty() {
        out.pmkv = if out.skipped.len() == others.len() && !c.others.is_empty() {
            format!("not measured: {}", out.skipped.join("; "))
        } else {
            "not measured: no matching cells in this run".into()
        };
        return out;
    }
    let mut sorted = cells.clone();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (lo, hi, text) = match c.agg {
        Agg::One => (cells[0].0, cells[0].0, format!("{:.2}× ({})", cells[0].0, cells[0].1)),
        Agg::Best => {
            let b = sorted.last().unwrap();
            (b.0, b.0, format!("{:.2}× (best: {})", b.0, b.1))
        }
        Agg::Worst => {
            let w = &sorted[0];
            (w.0, w.0, format!("{:.2}× (worst: {}; {} cells)", w.0, w.1, cells.len()))
        }
        Agg::Median => {
            let m = sorted[sorted.len() / 2].0;
            (
                m,
                m,
                format!(
                    "{m:.2}× (median of {} cells, {:.2}–{:.2}×)",
                    cells.len(),
                    sorted[0].0,
                    sorted.last().unwrap().0
                ),
            )
        }
        Agg::Mean => {
            let m = cells.iter().map(|x| x.0).sum::<f64>() / cells.len() as f64;
            (m, m, format!("{m:.2}× (mean of {} cells)", cells.len()))
        }
        Agg::Range => {
            let (a, b) = (sorted[0].0, sorted.last().unwrap().0);
            (a, b, format!("{a:.2}–{b:.2}× ({} cells; lowest {})", cells.len(), sorted[0].1))
        }
    };
    out.measured = Some(lo);
    out.measured_max = Some(hi);
    out.pmkv = text;
    if !out.skipped.is_empty() {
        let _ = write!(out.pmkv, "; without {}", out.skipped.join(", "));
    }
    out.verdict = verdict(c.expect, lo, hi).into();
    out
}

fn setting_of(r: &Record) -> String {
    if r.latency != "-" && r.latency != "none" && !r.latency.is_empty() {
        r.latency.clone()
    } else {
        r.mode.clone()
    }
}

/// The claims section of a report: one table, the rule, and a count of verdicts.
pub fn section(checked: &[Checked]) -> String {
    let mut rows = Vec::new();
    for (i, c) in checked.iter().enumerate() {
        rows.push(vec![
            (i + 1).to_string(),
            c.claim.replace('|', "/"),
            c.setting.replace('|', "/"),
            c.paper.clone(),
            c.pmkv.replace('|', "/"),
            if c.verdict == "not measured" { c.verdict.clone() } else { format!("**{}**", c.verdict) },
        ]);
    }
    let count = |v: &str| checked.iter().filter(|c| c.verdict == v).count();
    let mut s = String::from("## The paper's claims, with ratios\n\n");
    s += &super::md_table(
        &["#", "claim", "setting compared", "paper", "pmkv (this run, ratio of medians)", "verdict"].map(String::from),
        &rows,
    );
    let _ = write!(
        s,
        "\n{} claims: {} hold, {} hold in direction only, {} do not hold, {} not measured.\n\n{RULE}\n\n",
        checked.len(),
        count("holds"),
        count("holds in direction only"),
        count("does not hold"),
        count("not measured")
    );
    s
}

/// Add the checked claims to `dir/results.json` as `"claims"`.
pub fn add_to_json(dir: &std::path::Path, checked: &[Checked]) -> std::io::Result<()> {
    let p = dir.join("results.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p)?).map_err(std::io::Error::other)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("claim_rule".into(), RULE.into());
        o.insert("claims".into(), serde_json::to_value(checked).map_err(std::io::Error::other)?);
    }
    std::fs::write(&p, serde_json::to_string_pretty(&v).map_err(std::io::Error::other)? + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_rule() {
        assert_eq!(verdict(Expect::Point(4.0), 3.0, 3.0), "holds");
        assert_eq!(verdict(Expect::Point(4.0), 1.5, 1.5), "holds in direction only");
        assert_eq!(verdict(Expect::Point(4.0), 0.9, 0.9), "does not hold");
        assert_eq!(verdict(Expect::Point(0.4), 0.5, 0.5), "holds");
        assert_eq!(verdict(Expect::Point(0.4), 1.1, 1.1), "does not hold");
        assert_eq!(verdict(Expect::Range(2.0, 2.6), 1.2, 3.0), "holds");
        assert_eq!(verdict(Expect::Range(2.0, 2.6), 0.9, 3.0), "does not hold");
        assert_eq!(verdict(Expect::Range(2.0, 2.6), 1.2, 9.0), "holds in direction only");
        assert_eq!(verdict(Expect::Better, 1.01, 1.01), "holds");
        assert_eq!(verdict(Expect::Worse, 1.01, 1.01), "does not hold");
        assert_eq!(verdict(Expect::Same, 0.9, 1.1), "holds");
        assert_eq!(verdict(Expect::Same, 0.5, 1.1), "does not hold");
    }

    #[test]
    fn claim_ids_are_unique() {
        for t in [HART, NBTREE] {
            let mut ids: Vec<&str> = t.iter().map(|c| c.id).collect();
            ids.sort();
            let n = ids.len();
            ids.dedup();
            assert_eq!(ids.len(), n);
        }
    }

    /// A claim is measured from the matching cells: the other engine's time over the subject's.
    #[test]
    fn a_claim_is_checked_against_matching_records() {
        let r = |engine: &str, ns: f64| Record {
            experiment: "fig4-7".into(),
            engine: engine.into(),
            mode: "adr".into(),
            latency: "300/300".into(),
            workload: "dictionary".into(),
            op: "insert".into(),
            threads: 1,
            records: 10,
            ns_per_op: ns,
            ..Default::default()
        };
        let recs = vec![r("hart", 100.0), r("woart", 350.0)];
        let c = check_one(&HART[0], &recs, 1);
        assert_eq!(c.measured, Some(3.5));
        assert_eq!(c.verdict, "holds");
        // ART+CoW is not in the records: not measured, and why.
        let c = check_one(&HART[4], &recs, 1);
        assert_eq!(c.measured, None);
        assert!(c.pmkv.starts_with("not measured: artcow"), "{}", c.pmkv);
    }

    #[test]
    fn table_1_inserts_compare_nbtree_s_individual_inserts_with_the_other_s_mean() {
        let r = |exp: &str, engine: &str, op: &str, records: u64, lines: f64| Record {
            experiment: exp.into(),
            engine: engine.into(),
            mode: "eadr".into(),
            latency: "-".into(),
            workload: "int".into(),
            op: op.into(),
            threads: 1,
            records,
            lines_written_per_op: lines,
            ..Default::default()
        };
        let recs = vec![
            r("base", "nbtree", "insert", 1000, 3.3),
            r("table1", "nbtree", "insert (individual)", 500, 1.0),
            r("base", "fptree", "insert", 1000, 2.8),
        ];
        let c = NBTREE.iter().find(|c| c.id == "t1-fptree-insert").unwrap();
        let c = check_one(c, &recs, 1);
        // 2.8 lines over NBTree's individual 1.0, not over its mean with SMOs (3.3).
        assert_eq!(c.measured, Some(2.8));
        assert_eq!(c.verdict, "holds");
        // The other rows still compare the base phase with itself.
        let d = NBTREE.iter().find(|c| c.id == "t1-fptree-update").unwrap();
        assert_eq!(check_one(d, &recs, 1).measured, None);
    }
}
