//! Repeated runs: every measured cell of the long commands (the main job, the reproductions)
//! runs several times, in alternating rounds, and is reported as the median with the range
//! of the runs. One figure on this shared 2-core machine moves by ±20% between hours; a
//! median of three rounds, with its range beside it, says how far to trust it, and a ratio
//! of two medians of the same rounds compares like with like.

use crate::report::Record;
use std::collections::HashMap;

/// The median and the range of repeated measurements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: usize,
}

/// The median of `xs` (the mean of the middle two for an even count), ignoring NaN;
/// `None` for no numbers.
pub fn median(xs: &[f64]) -> Option<f64> {
    spread(xs).map(|s| s.median)
}

/// Median, lowest and highest of `xs`, ignoring NaN; `None` for no numbers.
pub fn spread(xs: &[f64]) -> Option<Spread> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    Some(Spread { median, min: v[0], max: v[n - 1], runs: n })
}

/// What makes two records measurements of the same cell: everything but the numbers.
type CellKey = (String, String, String, String, String, String, usize, u64, bool);

fn cell_key(r: &Record) -> CellKey {
    (
        r.experiment.clone(),
        r.engine.clone(),
        r.mode.clone(),
        r.latency.clone(),
        r.workload.clone(),
        r.op.clone(),
        r.threads,
        r.records,
        r.error.is_some(),
    )
}

/// Records of repeated runs, one per cell and run, into one record per cell, in the order
/// the cells first appear. A combined record's figures are the medians of its runs (ns/op,
/// Mops/s and wall time each its own median, so a ratio of two records is a ratio of
/// medians), its `runs` field says how many, and `*_min`/`*_max` hold the range of ns/op,
/// Mops/s and wall time. Percentiles, persistence counters and `extra` numbers are medians
/// too; the latency CDF and the hit tallies are the run whose ns/op is the median's
/// (nearest to it for an even count). A cell that failed in some runs keeps one failed
/// record, its error saying in how many.
pub fn combine(records: Vec<Record>) -> Vec<Record> {
    let mut order: Vec<CellKey> = Vec::new();
    let mut cells: HashMap<CellKey, Vec<Record>> = HashMap::new();
    for r in records {
        let k = cell_key(&r);
        let v = cells.entry(k.clone()).or_default();
        if v.is_empty() {
            order.push(k);
        }
        v.push(r);
    }
    order.into_iter().filter_map(|k| cells.remove(&k)).map(combine_cell).collect()
}

/// The records of a [`crate::progress::Plan`]'s steps, each with its step's index (the
/// rounds of one step share it), combined step by step with [`combine`]: only a step's own
/// rounds are ever merged, so two steps' records that look alike (two mixes that failed to
/// open, with nothing to tell them apart but the step) stay apart. Steps keep the order in
/// which they first ran.
pub fn combine_steps(ran: Vec<(usize, Vec<Record>)>) -> Vec<Record> {
    let mut order: Vec<usize> = Vec::new();
    let mut by_step: HashMap<usize, Vec<Record>> = HashMap::new();
    for (step, recs) in ran {
        let v = by_step.entry(step).or_default();
        if v.is_empty() && !order.contains(&step) {
            order.push(step);
        }
        v.extend(recs);
    }
    order.into_iter().filter_map(|s| by_step.remove(&s)).flat_map(combine).collect()
}

/// One cell's runs (at least one record) into one record.
fn combine_cell(runs: Vec<Record>) -> Record {
    let n = runs.len();
    if runs[0].error.is_some() {
        let mut r = runs.into_iter().next().unwrap_or_default();
        if n > 1 {
            r.error = r.error.map(|e| format!("{e} (in {n} runs)"));
        }
        r.runs = n as u32;
        return r;
    }
    let pick = |f: fn(&Record) -> f64| {
        let v: Vec<f64> = runs.iter().map(f).collect();
        spread(&v).unwrap_or(Spread { median: 0.0, min: 0.0, max: 0.0, runs: 0 })
    };
    let ns = pick(|r| r.ns_per_op);
    let mops = pick(|r| r.mops);
    let wall = pick(|r| r.wall_s);
    let mid = |f: fn(&Record) -> f64| pick(f).median;
    let at_median = runs
        .iter()
        .enumerate()
        .min_by(|a, b| (a.1.ns_per_op - ns.median).abs().total_cmp(&(b.1.ns_per_op - ns.median).abs()))
        .map_or(0, |(i, _)| i);
    let mut r = runs[at_median].clone();
    r.runs = n as u32;
    (r.ns_per_op, r.ns_per_op_min, r.ns_per_op_max) = (ns.median, ns.min, ns.max);
    (r.mops, r.mops_min, r.mops_max) = (mops.median, mops.min, mops.max);
    (r.wall_s, r.wall_s_min, r.wall_s_max) = (wall.median, wall.min, wall.max);
    r.p50_ns = mid(|r| r.p50_ns as f64).round() as u64;
    r.p99_ns = mid(|r| r.p99_ns as f64).round() as u64;
    r.p999_ns = mid(|r| r.p999_ns as f64).round() as u64;
    r.flushes_per_op = mid(|r| r.flushes_per_op);
    r.fences_per_op = mid(|r| r.fences_per_op);
    r.lines_written_per_op = mid(|r| r.lines_written_per_op);
    r.lines_read_per_op = mid(|r| r.lines_read_per_op);
    r.errors = runs.iter().map(|x| x.errors).max().unwrap_or(0);
    r.op_error = runs.iter().find_map(|x| x.op_error.clone());
    for (k, v) in r.extra.iter_mut() {
        let xs: Vec<f64> = runs.iter().filter_map(|x| x.extra.get(k).copied()).collect();
        if let Some(m) = median(&xs) {
            *v = m;
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_range() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN]), None);
        assert_eq!(median(&[5.0]), Some(5.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        let s = spread(&[10.0, f64::NAN, 30.0, 20.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.runs), (20.0, 10.0, 30.0, 3));
    }

    fn rec(engine: &str, op: &str, ns: f64) -> Record {
        Record {
            experiment: "e".into(),
            engine: engine.into(),
            op: op.into(),
            ns_per_op: ns,
            mops: 1000.0 / ns,
            wall_s: ns / 100.0,
            p99_ns: ns as u64 * 2,
            ..Default::default()
        }
    }

    /// Three rounds of two cells: one record per cell, in first-seen order, each figure its
    /// own median with the range beside it, and a ratio of two cells a ratio of medians.
    #[test]
    fn combine_takes_medians_per_cell_in_order() {
        let rounds = [[300.0, 100.0], [200.0, 400.0], [250.0, 150.0]];
        let recs: Vec<Record> =
            rounds.iter().flat_map(|[a, b]| [rec("a", "insert", *a), rec("b", "insert", *b)]).collect();
        let out = combine(recs);
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].engine.as_str(), out[1].engine.as_str()), ("a", "b"));
        let a = &out[0];
        assert_eq!((a.runs, a.ns_per_op, a.ns_per_op_min, a.ns_per_op_max), (3, 250.0, 200.0, 300.0));
        assert_eq!((a.mops, a.mops_min, a.mops_max), (4.0, 1000.0 / 300.0, 5.0));
        assert_eq!((a.wall_s, a.p99_ns), (2.5, 500));
        assert_eq!(out[1].ns_per_op, 150.0);
        assert_eq!(out[1].ns_per_op / a.ns_per_op, 0.6);
    }

    /// Rounds of one step are combined; two steps whose failures look alike are not.
    #[test]
    fn combine_steps_merges_only_a_steps_own_rounds() {
        let mut failed = rec("m", "-", 0.0);
        failed.error = Some("open: no allocator".into());
        let ran = vec![
            (0, vec![rec("a", "insert", 100.0)]),
            (1, vec![failed.clone()]),
            (2, vec![failed.clone()]),
            (0, vec![rec("a", "insert", 300.0)]),
            (1, vec![failed.clone()]),
            (2, vec![failed]),
        ];
        let out = combine_steps(ran);
        assert_eq!(out.len(), 3);
        assert_eq!((out[0].runs, out[0].ns_per_op), (2, 200.0));
        assert_eq!(out[1].error.as_deref(), Some("open: no allocator (in 2 runs)"));
        assert_eq!(out[2].error.as_deref(), Some("open: no allocator (in 2 runs)"));
    }

    /// Different operations, thread counts or record counts are different cells; a failed
    /// cell stays one failed record that says in how many runs it failed.
    #[test]
    fn combine_keeps_cells_apart_and_failures_visible() {
        let mut two_threads = rec("a", "insert", 100.0);
        two_threads.threads = 2;
        let mut failed = rec("a", "-", 0.0);
        failed.error = Some("open: no space".into());
        let out =
            combine(vec![rec("a", "insert", 100.0), rec("a", "search", 50.0), two_threads, failed.clone(), failed]);
        assert_eq!(out.len(), 4);
        assert!(out[..3].iter().all(|r| r.runs == 1 && r.ns_per_op_min == r.ns_per_op_max));
        assert_eq!(out[3].error.as_deref(), Some("open: no space (in 2 runs)"));
    }
}
