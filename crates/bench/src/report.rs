//! Results: one [`Record`] per measured (engine, setting, workload, operation); written as a
//! terminal table, JSON (serde_json) and CSV.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// One measurement.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Record {
    /// Experiment id: "main", "run", "fig4", …
    pub experiment: String,
    pub engine: String,
    /// What a completed write survives.
    pub durability: String,
    /// Persistence mode, "-" where it does not apply.
    pub mode: String,
    /// Emulated PM write/read latency ("300/100"), "none", or "-".
    pub latency: String,
    pub workload: String,
    pub op: String,
    pub threads: usize,
    /// Records in the store when the phase started (or built, for build/recovery).
    pub records: u64,
    /// Operations measured.
    pub ops: u64,
    pub wall_s: f64,
    pub ns_per_op: f64,
    pub mops: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub flushes_per_op: f64,
    pub fences_per_op: f64,
    pub lines_written_per_op: f64,
    pub lines_read_per_op: f64,
    pub found: u64,
    pub missed: u64,
    pub errors: u64,
    /// How many runs the figures are the median of ([`crate::stats::combine`]); 0 or 1:
    /// a single run, and the `*_min`/`*_max` fields say nothing.
    #[serde(default)]
    pub runs: u32,
    /// The range of `ns_per_op`, `mops` and `wall_s` over those runs.
    #[serde(default)]
    pub ns_per_op_min: f64,
    #[serde(default)]
    pub ns_per_op_max: f64,
    #[serde(default)]
    pub mops_min: f64,
    #[serde(default)]
    pub mops_max: f64,
    #[serde(default)]
    pub wall_s_min: f64,
    #[serde(default)]
    pub wall_s_max: f64,
    /// The first error an operation returned (the numbers are still reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_error: Option<String>,
    /// Further numbers of this measurement (e.g. "dram_bytes", "pm_bytes").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, f64>,
    /// Latency CDF points (ns, fraction) — JSON only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdf: Vec<(u64, f64)>,
    /// Why the engine produced no numbers (open failed, panicked, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Record {
    /// Whether the figures are medians of more than one run.
    pub fn repeated(&self) -> bool {
        self.runs > 1
    }

    /// (lowest, highest) ns/op over the runs; the figure itself twice for one run.
    pub fn ns_range(&self) -> (f64, f64) {
        if self.repeated() {
            (self.ns_per_op_min, self.ns_per_op_max)
        } else {
            (self.ns_per_op, self.ns_per_op)
        }
    }

    /// (lowest, highest) Mops/s over the runs.
    pub fn mops_range(&self) -> (f64, f64) {
        if self.repeated() {
            (self.mops_min, self.mops_max)
        } else {
            (self.mops, self.mops)
        }
    }

    /// (lowest, highest) wall time in seconds over the runs.
    pub fn wall_range(&self) -> (f64, f64) {
        if self.repeated() {
            (self.wall_s_min, self.wall_s_max)
        } else {
            (self.wall_s, self.wall_s)
        }
    }

    /// ns/op as a table cell: the median, and the range of the runs when there were several:
    /// `211 (205–230)`.
    pub fn ns_cell(&self, f: impl Fn(f64) -> String) -> String {
        let (lo, hi) = self.ns_range();
        crate::human::with_range(self.ns_per_op, lo, hi, f)
    }

    /// Mops/s as a table cell, like [`Record::ns_cell`].
    pub fn mops_cell(&self, f: impl Fn(f64) -> String) -> String {
        let (lo, hi) = self.mops_range();
        crate::human::with_range(self.mops, lo, hi, f)
    }

    /// Wall seconds as a table cell, like [`Record::ns_cell`].
    pub fn wall_cell(&self, f: impl Fn(f64) -> String) -> String {
        let (lo, hi) = self.wall_range();
        crate::human::with_range(self.wall_s, lo, hi, f)
    }
}

/// Where and how results were produced.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Meta {
    pub tool: String,
    pub command: String,
    pub seed: u64,
    pub unix_time: u64,
    pub cpus: usize,
    pub flush_instruction: String,
    pub pool_dir: String,
    pub notes: Vec<String>,
}

impl Meta {
    pub fn new(command: &str, seed: u64, pool_dir: &Path) -> Meta {
        Meta {
            tool: format!("pmkv-bench {}", env!("CARGO_PKG_VERSION")),
            command: command.into(),
            seed,
            unix_time: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            flush_instruction: pmkv_substrate::flush_insn().name().into(),
            pool_dir: pool_dir.display().to_string(),
            notes: vec![],
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Report {
    pub meta: Meta,
    pub records: Vec<Record>,
}

/// A column of the terminal table and the CSV.
pub struct Col {
    pub head: &'static str,
    pub get: fn(&Record) -> String,
    /// Right-align (numbers).
    pub right: bool,
}

fn f1(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn f3(x: f64) -> String {
    format!("{x:.3}")
}

macro_rules! col {
    ($h:expr, $r:expr, $f:expr) => {
        Col { head: $h, get: $f, right: $r }
    };
}

/// Columns for basic-operation and mix tables.
pub fn standard_columns() -> Vec<Col> {
    vec![
        col!("engine", false, |r| r.engine.clone()),
        col!("mode", false, |r| r.mode.clone()),
        col!("latency", false, |r| r.latency.clone()),
        col!("workload", false, |r| r.workload.clone()),
        col!("op", false, |r| r.op.clone()),
        col!("thr", true, |r| r.threads.to_string()),
        col!("records", true, |r| r.records.to_string()),
        col!("ns/op", true, |r| f1(r.ns_per_op)),
        col!("runs: min–max", true, ns_range_cell),
        col!("Mops/s", true, |r| f3(r.mops)),
        col!("p50", true, |r| r.p50_ns.to_string()),
        col!("p99", true, |r| r.p99_ns.to_string()),
        col!("p99.9", true, |r| r.p999_ns.to_string()),
    ]
    .into_iter()
    .chain(counter_columns())
    .collect()
}

/// The range of ns/op over a record's runs, `3: 205–230` (empty for one run: the table then
/// leaves the column out).
fn ns_range_cell(r: &Record) -> String {
    if r.repeated() {
        let (lo, hi) = r.ns_range();
        format!("{}: {}–{}", r.runs, f1(lo), f1(hi))
    } else {
        String::new()
    }
}

/// The persistence counters per operation, the last columns of every table.
fn counter_columns() -> [Col; 4] {
    [
        col!("fences/op", true, |r| f1(r.fences_per_op)),
        col!("flushes/op", true, |r| f1(r.flushes_per_op)),
        col!("PM lines W/op", true, |r| f1(r.lines_written_per_op)),
        col!("PM lines R/op", true, |r| f1(r.lines_read_per_op)),
    ]
}

/// Columns of the default main job's table.
pub fn main_job_columns() -> Vec<Col> {
    vec![
        col!("workload", false, |r| r.workload.clone()),
        col!("engine", false, |r| r.engine.clone()),
        col!("mode", false, |r| r.mode.clone()),
        col!("op", false, |r| r.op.clone()),
        col!("ns/op", true, |r| f1(r.ns_per_op)),
        col!("runs: min–max", true, ns_range_cell),
        col!("Mops/s", true, |r| f3(r.mops)),
        col!("p99 ns", true, |r| r.p99_ns.to_string()),
    ]
    .into_iter()
    .chain(counter_columns())
    .collect()
}

/// A plain-text table of `records` (failed engines get one line with their error). A column
/// empty in every row (the range of runs, when each cell ran once) is left out.
pub fn table(records: &[Record], cols: &[Col]) -> String {
    let ok: Vec<&Record> = records.iter().filter(|r| r.error.is_none()).collect();
    let all: Vec<Vec<String>> = ok.iter().map(|r| cols.iter().map(|c| (c.get)(r)).collect()).collect();
    let keep: Vec<bool> = (0..cols.len()).map(|i| all.is_empty() || all.iter().any(|row| !row[i].is_empty())).collect();
    let cols: Vec<&Col> = cols.iter().zip(&keep).filter(|(_, k)| **k).map(|(c, _)| c).collect();
    let cells: Vec<Vec<String>> =
        all.into_iter().map(|row| row.into_iter().zip(&keep).filter(|(_, k)| **k).map(|(c, _)| c).collect()).collect();
    let widths: Vec<usize> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| cells.iter().map(|row| row[i].chars().count()).chain([c.head.chars().count()]).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    let line = |out: &mut String, row: Vec<String>| {
        let parts: Vec<String> = row
            .iter()
            .zip(&cols)
            .zip(&widths)
            .map(|((s, c), &w)| if c.right { format!("{s:>w$}") } else { format!("{s:<w$}") })
            .collect();
        let _ = writeln!(out, "{}", parts.join("  ").trim_end());
    };
    line(&mut out, cols.iter().map(|c| c.head.to_string()).collect());
    let _ = writeln!(out, "{}", widths.iter().map(|&w| "-".repeat(w)).collect::<Vec<_>>().join("  "));
    for row in cells {
        line(&mut out, row);
    }
    for r in records.iter().filter(|r| r.error.is_some()) {
        let _ = writeln!(out, "{} ({} {}): FAILED: {}", r.engine, r.mode, r.workload, r.error.as_deref().unwrap_or(""));
    }
    out
}

/// Durability legend for the engines that appear in `records`.
pub fn legend(records: &[Record]) -> String {
    let mut seen = BTreeMap::new();
    for r in records {
        seen.entry(format!("{} [{}]", r.engine, r.mode)).or_insert_with(|| r.durability.clone());
    }
    seen.into_iter().map(|(k, v)| format!("  {k}: {v}\n")).collect()
}

/// Quote a CSV field if needed (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// CSV with every scalar field of [`Record`] (extra values as `extra:NAME` columns).
pub fn csv(records: &[Record]) -> String {
    let extra_keys: Vec<String> = {
        let mut k: Vec<String> = records.iter().flat_map(|r| r.extra.keys().cloned()).collect();
        k.sort();
        k.dedup();
        k
    };
    let mut heads: Vec<String> = [
        "experiment",
        "engine",
        "durability",
        "mode",
        "latency",
        "workload",
        "op",
        "threads",
        "records",
        "ops",
        "wall_s",
        "ns_per_op",
        "mops",
        "runs",
        "ns_per_op_min",
        "ns_per_op_max",
        "mops_min",
        "mops_max",
        "wall_s_min",
        "wall_s_max",
        "p50_ns",
        "p99_ns",
        "p999_ns",
        "flushes_per_op",
        "fences_per_op",
        "lines_written_per_op",
        "lines_read_per_op",
        "found",
        "missed",
        "errors",
        "op_error",
        "error",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    heads.extend(extra_keys.iter().map(|k| format!("extra:{k}")));
    let mut out = heads.join(",") + "\n";
    for r in records {
        let mut row = vec![
            r.experiment.clone(),
            r.engine.clone(),
            r.durability.clone(),
            r.mode.clone(),
            r.latency.clone(),
            r.workload.clone(),
            r.op.clone(),
            r.threads.to_string(),
            r.records.to_string(),
            r.ops.to_string(),
            format!("{:.6}", r.wall_s),
            format!("{:.2}", r.ns_per_op),
            format!("{:.4}", r.mops),
            r.runs.max(1).to_string(),
            format!("{:.2}", r.ns_range().0),
            format!("{:.2}", r.ns_range().1),
            format!("{:.4}", r.mops_range().0),
            format!("{:.4}", r.mops_range().1),
            format!("{:.6}", r.wall_range().0),
            format!("{:.6}", r.wall_range().1),
            r.p50_ns.to_string(),
            r.p99_ns.to_string(),
            r.p999_ns.to_string(),
            format!("{:.4}", r.flushes_per_op),
            format!("{:.4}", r.fences_per_op),
            format!("{:.4}", r.lines_written_per_op),
            format!("{:.4}", r.lines_read_per_op),
            r.found.to_string(),
            r.missed.to_string(),
            r.errors.to_string(),
            r.op_error.clone().unwrap_or_default(),
            r.error.clone().unwrap_or_default(),
        ];
        row.extend(extra_keys.iter().map(|k| r.extra.get(k).map_or(String::new(), |v| format!("{v}"))));
        out += &row.iter().map(|s| csv_field(s)).collect::<Vec<_>>().join(",");
        out.push('\n');
    }
    out
}

/// Write `report` as `DIR/STEM.json` and `DIR/STEM.csv`.
pub fn write_files(dir: &Path, stem: &str, report: &Report) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(report).map_err(std::io::Error::other)?;
    std::fs::write(dir.join(format!("{stem}.json")), json + "\n")?;
    std::fs::write(dir.join(format!("{stem}.csv")), csv(&report.records))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_and_table_aligns() {
        let r = Record {
            engine: "lmdb-sync".into(),
            durability: "durable, really".into(),
            op: "insert".into(),
            ns_per_op: 1234.5,
            ..Default::default()
        };
        let c = csv(std::slice::from_ref(&r));
        assert!(c.contains("\"durable, really\""));
        assert_eq!(c.lines().count(), 2);
        let t = table(&[r], &main_job_columns());
        assert!(t.contains("1234") && t.lines().count() == 3);
    }
}
