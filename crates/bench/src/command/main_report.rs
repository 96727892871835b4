//! The main job's report directory, and `pmkv bench report`, which rebuilds its text from
//! the JSON: what a user keeps from `pmkv bench`, and what the README's figures table and
//! engine advice are generated from (never typed).
//!
//! The directory holds, in the order to read them:
//!
//! * `summary.md` — per workload and operation, the fastest durable engine, by how much it
//!   leads the next, and whether that lead is larger than the spread of the runs; then the
//!   figures table per workload (the README's format);
//! * `tables.md` — the full table as markdown; `results.csv`, `results.json` — every field;
//! * `plots/WORKLOAD.svg` (and `.png`) — ns/op and p99 per operation, a bar per engine and
//!   mode.
//!
//! "Durable" is mode `adr`, the default: every acknowledged write flushed and fenced, so it
//! survives a power loss on real PM. `eadr` rows skip the flushes and are durable only on
//! eADR hardware; the baselines (volatile, LMDB without sync) are not durable at all. They
//! are in the tables and plots for comparison, not in the "fastest durable" answer.

use crate::plot::{self, run::uniq};
use crate::report::{self, Col, Record, Report};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The mode whose rows are the durable ones (see the module documentation).
const DURABLE_MODE: &str = "adr";

/// The operations in the order the tables list them.
fn ops(records: &[&Record]) -> Vec<String> {
    uniq(records.iter().map(|r| r.op.clone()))
}

/// `211 (205–230)`: the median and the range of the runs.
fn ns(r: &Record) -> String {
    let (lo, hi) = r.ns_range();
    if r.repeated() {
        format!("{:.0} ({:.0}–{:.0})", r.ns_per_op, lo, hi)
    } else {
        format!("{:.0}", r.ns_per_op)
    }
}

/// A record's row label: `hart [adr]`, or the engine alone for a baseline.
fn label(r: &Record) -> String {
    if r.mode == "-" || r.mode == "none" {
        r.engine.clone()
    } else {
        format!("{} [{}]", r.engine, r.mode)
    }
}

/// One answer of the summary: the fastest durable engine for a workload and operation,
/// and the next one.
pub struct Verdict<'a> {
    pub workload: &'a str,
    pub op: &'a str,
    pub best: &'a Record,
    pub next: Option<&'a Record>,
}

impl Verdict<'_> {
    /// How many times faster the best is than the next (median over median).
    pub fn lead(&self) -> Option<f64> {
        self.next.map(|n| n.ns_per_op / self.best.ns_per_op.max(f64::MIN_POSITIVE))
    }

    /// Whether the lead is beyond the runs' spread: the best's slowest run is faster than
    /// the next's fastest run.
    pub fn clear(&self) -> bool {
        self.next.is_some_and(|n| self.best.ns_range().1 < n.ns_range().0)
    }
}

/// The verdicts of `records`, per workload and operation in the order they ran.
pub fn verdicts(records: &[Record]) -> Vec<Verdict<'_>> {
    let ok: Vec<&Record> = records.iter().filter(|r| r.error.is_none() && r.ns_per_op > 0.0).collect();
    let mut out = Vec::new();
    for w in uniq(ok.iter().map(|r| r.workload.as_str())) {
        for op in uniq(ok.iter().filter(|r| r.workload == w).map(|r| r.op.as_str())) {
            let mut durable: Vec<&Record> =
                ok.iter().copied().filter(|r| r.workload == w && r.op == op && r.mode == DURABLE_MODE).collect();
            durable.sort_by(|a, b| a.ns_per_op.total_cmp(&b.ns_per_op));
            if let Some(&best) = durable.first() {
                out.push(Verdict { workload: w, op, best, next: durable.get(1).copied() });
            }
        }
    }
    out
}

/// The figures table of one workload, as the README shows it: a row per engine and mode,
/// a column per operation, median ns/op.
pub fn figures_table(records: &[Record], workload: &str) -> String {
    let rows: Vec<&Record> = records.iter().filter(|r| r.workload == workload && r.error.is_none()).collect();
    let ops = ops(&rows);
    let mut s = format!("| engine | mode | {} |\n|---|---|{}\n", ops.join(" | "), "---:|".repeat(ops.len()));
    for l in uniq(rows.iter().map(|r| (r.engine.clone(), r.mode.clone()))) {
        let cells: Vec<String> = ops
            .iter()
            .map(|op| {
                rows.iter()
                    .find(|r| (&r.engine, &r.mode) == (&l.0, &l.1) && &r.op == op)
                    .map_or("–".into(), |r| crate::human::thousands(r.ns_per_op.round() as u64))
            })
            .collect();
        let mode = if l.1 == "-" || l.1 == "none" { "–" } else { &l.1 };
        let _ = writeln!(s, "| {} | {mode} | {} |", l.0, cells.join(" | "));
    }
    s
}

/// The advice the summary opens with: per workload and operation, the fastest durable
/// engine, its lead and whether the runs' spread allows calling it.
pub fn advice(records: &[Record]) -> String {
    let v = verdicts(records);
    if v.is_empty() {
        return format!("No durable (mode {DURABLE_MODE}) measurement completed: nothing to compare.\n");
    }
    let mut s = String::from(
        "| workload | op | fastest durable (adr) | ns/op (runs' range) | next | ns/op (runs' range) | lead |\n\
         |---|---|---|---:|---|---:|---|\n",
    );
    for x in &v {
        let (next, next_ns) = x.next.map_or(("–".into(), "–".into()), |n| (n.engine.clone(), ns(n)));
        let lead = match x.lead() {
            Some(l) if x.clear() => format!("{l:.2}×"),
            Some(l) => format!("{l:.2}× (within the runs' spread)"),
            None => "–".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {next} | {next_ns} | {lead} |",
            x.workload,
            x.op,
            x.best.engine,
            ns(x.best)
        );
    }
    // Wins per engine, counting only the clear ones.
    let mut wins: Vec<(String, usize, usize)> = Vec::new();
    for x in &v {
        match wins.iter_mut().find(|w| w.0 == x.best.engine) {
            Some(w) => {
                w.1 += 1;
                w.2 += usize::from(x.clear());
            }
            None => wins.push((x.best.engine.clone(), 1, usize::from(x.clear()))),
        }
    }
    wins.sort_by_key(|w| std::cmp::Reverse(w.1));
    let said: Vec<String> = wins
        .iter()
        .map(|(e, n, clear)| format!("`{e}` fastest in {n} of {} ({clear} beyond the runs' spread)", v.len()))
        .collect();
    let _ = writeln!(s, "\nDurable engines (mode adr) on this machine: {}.", said.join("; "));
    s
}

/// `summary.md`: the advice, then the figures table of each workload.
pub fn summary_md(records: &[Record], header: &str) -> String {
    let mut s = format!("# pmkv bench — main job\n\n{header}\n\n## Which engine\n\n{}", advice(records));
    let w: Vec<&str> = uniq(records.iter().filter(|r| r.error.is_none()).map(|r| r.workload.as_str()));
    for w in w {
        let _ = write!(s, "\n## {w}: median ns per operation\n\n{}", figures_table(records, w));
    }
    let failed: Vec<String> =
        records.iter().filter_map(|r| Some(format!("- {} {}: {}", label(r), r.workload, r.error.as_ref()?))).collect();
    if !failed.is_empty() {
        let _ = write!(s, "\n## Failed\n\n{}\n", failed.join("\n"));
    }
    s += "\nFull tables: tables.md, results.csv, results.json; plots: plots/.\n";
    s
}

/// A markdown table of `records` with the columns `cols` (failed rows after it).
pub fn markdown_table(records: &[Record], cols: &[Col]) -> String {
    let ok: Vec<&Record> = records.iter().filter(|r| r.error.is_none()).collect();
    let mut s = format!(
        "| {} |\n|{}\n",
        cols.iter().map(|c| c.head).collect::<Vec<_>>().join(" | "),
        cols.iter().map(|c| if c.right { "---:|" } else { "---|" }).collect::<String>()
    );
    for r in ok {
        let _ =
            writeln!(s, "| {} |", cols.iter().map(|c| (c.get)(r).replace('|', "\\|")).collect::<Vec<_>>().join(" | "));
    }
    s
}

/// Write the report directory `dir` (created; files in it replaced). Returns the files.
pub fn write(dir: &Path, rep: &Report, header: &str) -> Result<Vec<PathBuf>, String> {
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut files = Vec::new();
    let mut put = |name: &str, text: String| -> Result<(), String> {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| io(&p, e))?;
        files.push(p);
        Ok(())
    };
    put("summary.md", summary_md(&rep.records, header))?;
    let tables = format!(
        "# pmkv bench — main job: every measurement\n\n{header}\n\n{}\nDurability of each engine and mode:\n\n{}",
        markdown_table(&rep.records, &report::main_job_columns()),
        report::legend(&rep.records).lines().map(|l| format!("- {}\n", l.trim())).collect::<String>()
    );
    put("tables.md", tables)?;
    report::write_files(dir, "results", rep).map_err(|e| io(dir, e))?;
    files.push(dir.join("results.csv"));
    files.push(dir.join("results.json"));
    for w in uniq(rep.records.iter().filter(|r| r.error.is_none()).map(|r| r.workload.as_str())) {
        let rows: Vec<Record> = rep.records.iter().filter(|r| r.workload == w).cloned().collect();
        let stem = dir.join("plots").join(slug(w));
        files.extend(plot::run::ops_plot(&rows, &stem, &format!("pmkv bench main job: {w}"))?);
    }
    Ok(files)
}

/// A workload's name as a file name: `sequential (first 50,000)` -> `sequential-first-50-000`.
fn slug(w: &str) -> String {
    let s: String = w.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    s.split('-').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("-")
}

/// The default report directory: `pmkv-report-YYYYMMDDTHHMMSSZ` (UTC) in the current one.
pub fn default_dir() -> PathBuf {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    PathBuf::from(format!("pmkv-report-{}", now.replace(['-', ':'], "")))
}

#[derive(clap::Args)]
pub struct ReportArgs {
    /// A main job's results.json (or its report directory).
    pub results: PathBuf,
}

/// `pmkv bench report RESULTS`: the README's figures table (the Dictionary's) and the
/// engine advice, generated from a main job's JSON, on standard output.
pub fn run(a: ReportArgs) -> super::CmdResult {
    let path = if a.results.is_dir() { a.results.join("results.json") } else { a.results.clone() };
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let rep: Report =
        serde_json::from_str(&text).map_err(|e| format!("{}: not a results.json: {e}", path.display()))?;
    print!("{}", readme_md(&rep));
    Ok(())
}

/// What the README's "Current figures" section shows, from one run.
pub fn readme_md(rep: &Report) -> String {
    let when =
        humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(rep.meta.unix_time));
    let runs = rep.records.iter().map(|r| r.runs.max(1)).max().unwrap_or(1);
    let first = rep.records.iter().find(|r| r.error.is_none()).map_or("dictionary", |r| r.workload.as_str());
    format!(
        "Workload `{}`: ns per operation, medians of {runs} run(s) of the main job ({when}, {} CPUs, flush {}):\n\n{}\n{}",
        first,
        rep.meta.cpus,
        rep.meta.flush_instruction,
        figures_table(&rep.records, first),
        advice(&rep.records)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(engine: &str, mode: &str, op: &str, ns: f64, lo: f64, hi: f64) -> Record {
        Record {
            engine: engine.into(),
            mode: mode.into(),
            workload: "dictionary".into(),
            op: op.into(),
            ns_per_op: ns,
            runs: 3,
            ns_per_op_min: lo,
            ns_per_op_max: hi,
            ..Default::default()
        }
    }

    #[test]
    fn the_fastest_durable_engine_its_lead_and_whether_the_spread_allows_it() {
        let rs = vec![
            rec("hart", "adr", "insert", 300.0, 290.0, 310.0),
            rec("nbtree", "adr", "insert", 600.0, 580.0, 620.0),
            rec("hart", "eadr", "insert", 100.0, 90.0, 110.0), // not durable: not counted
            rec("volatile", "-", "insert", 50.0, 50.0, 50.0),  // baseline: not counted
            rec("hart", "adr", "search", 80.0, 70.0, 100.0),
            rec("nbtree", "adr", "search", 90.0, 85.0, 95.0),
        ];
        let v = verdicts(&rs);
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].op, v[0].best.engine.as_str()), ("insert", "hart"));
        assert_eq!(v[0].lead(), Some(2.0));
        assert!(v[0].clear());
        assert_eq!((v[1].op, v[1].best.engine.as_str()), ("search", "hart"));
        assert!(!v[1].clear(), "hart's slowest run (100) is slower than nbtree's fastest (85)");
        let a = advice(&rs);
        assert!(a.contains("| dictionary | insert | hart | 300 (290–310) | nbtree | 600 (580–620) | 2.00× |"), "{a}");
        assert!(a.contains("| 1.12× (within the runs' spread) |"), "{a}");
        assert!(a.contains("`hart` fastest in 2 of 2 (1 beyond the runs' spread)"), "{a}");
        let t = figures_table(&rs, "dictionary");
        assert!(t.starts_with("| engine | mode | insert | search |\n|---|---|---:|---:|\n"), "{t}");
        assert!(t.contains("| hart | adr | 300 | 80 |") && t.contains("| volatile | – | 50 | – |"), "{t}");
    }

    /// The directory holds what the summary promises, and `pmkv bench report` regenerates
    /// the README text from its JSON alone.
    #[test]
    fn the_report_directory_and_the_readme_text_from_its_json() {
        let rs = vec![
            rec("hart", "adr", "insert", 300.0, 290.0, 310.0),
            rec("nbtree", "adr", "insert", 600.0, 580.0, 620.0),
            rec("hart", "adr", "search", 80.0, 70.0, 100.0),
            rec("nbtree", "adr", "search", 90.0, 85.0, 95.0),
        ];
        let rep = Report { meta: report::Meta::new("pmkv bench", 42, Path::new("/tmp")), records: rs };
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r");
        let files = write(&out, &rep, "header line").unwrap();
        for f in
            ["summary.md", "tables.md", "results.csv", "results.json", "plots/dictionary.svg", "plots/dictionary.png"]
        {
            assert!(out.join(f).is_file() && files.contains(&out.join(f)), "{f} missing: {files:?}");
        }
        let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
        assert!(summary.starts_with("# pmkv bench — main job\n\nheader line\n\n## Which engine\n"), "{summary}");
        assert!(
            summary.contains(&advice(&rep.records)) && summary.contains(&figures_table(&rep.records, "dictionary"))
        );
        let tables = std::fs::read_to_string(out.join("tables.md")).unwrap();
        assert_eq!(tables.lines().filter(|l| l.starts_with("| dictionary |")).count(), 4, "{tables}");
        let back: Report = serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
        let readme = readme_md(&back);
        assert!(
            readme.contains("| hart | adr | 300 | 80 |") && readme.contains("`hart` fastest in 2 of 2"),
            "{readme}"
        );
    }

    #[test]
    fn slugs_are_file_names() {
        assert_eq!(slug("sequential (first 50,000)"), "sequential-first-50-000");
        assert_eq!(slug("dictionary"), "dictionary");
    }
}
