//! Recovery (SPEC M8): replay the committed records onto the PM copy, then rebuild the
//! DRAM copy from it.
//!
//! The records between the persistent head and tail are whole batches (the tail only
//! ever moves to just past a COMMIT, after a fence that made the batch's records
//! durable), so replaying them with the backend's own code brings the PM copy to the
//! state after every batch that was acknowledged — and no further: a batch whose tail
//! never became durable is not replayed, and since its requests were never answered,
//! losing it whole is what durable linearizability allows. Replay is idempotent, so a
//! crash during recovery is recovered by running it again. It writes each replayed byte
//! once, with its last record's content (`apply_merged`), not record by record.

use crate::backend;
use crate::error::{Error, Result};
use crate::redo_log::RedoLog;

/// What replaying the log did; the runtime reports it as a `pmkv_core::RecoveryReport`
/// (see `Mangosteen::recovery`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Replay {
    /// Ring slots replayed (the records of whole batches).
    pub(crate) records: u64,
    /// The persistent head and tail found.
    pub(crate) head: u64,
    pub(crate) tail: u64,
}

pub(crate) fn replay(log: &RedoLog, pm: &backend::PmCopy) -> Result<Replay> {
    let (head, tail) = (log.p_head(), log.p_tail());
    if tail < head || tail - head > log.cap {
        return Err(Error::Corrupt(format!(
            "redo log head {head} and tail {tail} are inconsistent with a ring of {} slots",
            log.cap
        )));
    }
    // Read (and verify) every pending record, check that each run lies in the region, and
    // check every line they do not write, all before replaying: a pool refused for damage
    // is then refused unchanged (SPEC R2).
    let mut spans = Vec::new();
    let (mut committed, mut end) = (0, head);
    let (mut idx, mut buf) = (head, Vec::new());
    while idx < tail {
        let rec = log.read(idx, tail, &mut buf)?;
        for (addr, data) in rec.runs(&buf) {
            let len = data.len() as u64;
            if addr.checked_add(len).is_none_or(|e| e > pm.size) {
                return Err(Error::Corrupt(format!(
                    "redo record {idx} writes {len} bytes at {addr}, outside the {}-byte region",
                    pm.size
                )));
            }
            if len > 0 {
                spans.push((addr, addr + len));
            }
        }
        idx = rec.next;
        if rec.commit {
            (committed, end) = (spans.len(), idx);
        }
    }
    // Only whole batches: runs after the last COMMIT (none, as the tail moves only past a
    // COMMIT) are left out.
    spans.truncate(committed);
    merge_runs(&mut spans);
    let mut touched: Vec<u64> = spans.iter().flat_map(|&(s, e)| s / backend::LINE..=(e - 1) / backend::LINE).collect();
    touched.dedup();
    pm.verify_except(&log.pool, &touched)?;
    apply_merged(log, pm, head, end, &spans)?;
    Ok(Replay { records: tail - head, head, tail })
}

/// Replay `[head, end)` (whole batches: `end` is past a COMMIT) with each byte written
/// once, with the content of the last record that wrote it: the batches' bytes are first
/// gathered in memory (`spans`, the merged runs of every record), then each span is
/// written to the PM copy, its lines' checks recomputed, one fence, and the head
/// persisted at `end`. The inline backend
/// leaves a window of batches unapplied (see `APPLY_EVERY` in the runtime), and those
/// batches write many of the same blocks; replayed record by record, a recovery wrote
/// and flushed them once per batch. A crash before the head moves leaves it where it was,
/// and the next recovery gathers the same bytes again.
fn apply_merged(log: &RedoLog, pm: &backend::PmCopy, head: u64, end: u64, spans: &[(u64, u64)]) -> Result<()> {
    if head == end {
        return Ok(());
    }
    let pool = &log.pool;
    // Where each span's bytes start in `bytes`.
    let mut at = Vec::with_capacity(spans.len());
    let mut total = 0usize;
    for &(s, e) in spans {
        at.push(total);
        total += (e - s) as usize;
    }
    let mut bytes = vec![0u8; total];
    let (mut idx, mut buf) = (head, Vec::new());
    while idx < end {
        let rec = log.read(idx, end, &mut buf)?;
        for (addr, data) in rec.runs(&buf) {
            if data.is_empty() {
                continue;
            }
            // The span holding this run: the last one starting at or before it (spans
            // are disjoint and cover every run of `[head, end)`, read the same way).
            let i = spans.partition_point(|&(s, _)| s <= addr).wrapping_sub(1);
            let Some(&(s, _)) = spans.get(i).filter(|&&(_, e)| addr + data.len() as u64 <= e) else {
                return Err(Error::Corrupt(format!("redo record {idx} changed while it was replayed")));
            };
            let from = at[i] + (addr - s) as usize;
            bytes[from..from + data.len()].copy_from_slice(data);
        }
        idx = rec.next;
    }
    for (&(s, e), &from) in spans.iter().zip(&at) {
        let len = (e - s) as usize;
        // SAFETY: `[s, e)` lies inside the region (checked by `replay`), an object of this
        // pool that recovery, running alone, is the only one to write.
        unsafe { std::ptr::copy_nonoverlapping(bytes[from..].as_ptr(), pool.at::<u8>(pm.region + s), len) };
        pool.flush_off(pm.region + s, len);
        let (first, last) = (s / backend::LINE, (e - 1) / backend::LINE);
        for l in first..=last {
            let c = pm.compute(pool, l);
            // SAFETY: the check word of line `l` inside the checks object; recovery runs
            // alone and no reference to it exists.
            unsafe { pool.store_u32(pm.checks + 4 * l, c) };
        }
        pool.flush_off(pm.checks + 4 * first, 4 * (last - first + 1) as usize);
    }
    pool.fence(); // the replayed bytes and their checks are durable
    log.set_p_head(end);
    Ok(())
}

/// Sort `runs` and merge those that overlap or touch, in place: the runs of several
/// records, each byte once, in address order (`apply_merged`).
fn merge_runs(runs: &mut Vec<(u64, u64)>) {
    runs.sort_unstable();
    let mut w = 0;
    for i in 0..runs.len() {
        let (s, e) = runs[i];
        if w > 0 && s <= runs[w - 1].1 {
            runs[w - 1].1 = runs[w - 1].1.max(e);
        } else {
            runs[w] = (s, e);
            w += 1;
        }
    }
    runs.truncate(w);
}

#[cfg(test)]
mod tests {
    #[test]
    fn runs_of_several_batches_merge_into_sorted_disjoint_runs() {
        let mut runs = vec![(64, 96), (0, 32), (32, 64), (128, 160), (64, 128), (200, 232), (224, 256), (300, 301)];
        super::merge_runs(&mut runs);
        assert_eq!(runs, vec![(0, 160), (200, 256), (300, 301)]);
        let mut none: Vec<(u64, u64)> = Vec::new();
        super::merge_runs(&mut none);
        assert!(none.is_empty());
        // Every byte of the input is covered once, nothing else.
        let mut apart = vec![(96, 128), (0, 32)];
        super::merge_runs(&mut apart);
        assert_eq!(apart, vec![(0, 32), (96, 128)]);
    }
}
