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
    // check every line, those they write too, all before replaying: a pool refused for
    // damage is then refused unchanged (SPEC R2).
    let pending = backend::Pending::read(log, pm, head, tail)?;
    let touched = pending.lines();
    verify_touched(log, pm, &pending, &touched)?;
    pm.verify_except(&log.pool, &touched)?;
    // Each byte written once, with the content of the last record that wrote it: the
    // inline backend leaves a window of batches unapplied (see `APPLY_EVERY` in the
    // runtime), and those batches write many of the same blocks; replayed record by
    // record, a recovery wrote and flushed them once per batch. A crash before the head
    // moves leaves it where it was, and the next recovery reads the same bytes again.
    if pending.end > head {
        pending.write_checked(&log.pool, pm);
        log.pool.fence(); // the replayed bytes are durable (their checks already are)
        log.set_p_head(pending.end);
    }
    Ok(Replay { records: tail - head, head, tail })
}

/// Verify each line the replay writes (`touched`, sorted) before writing it. A record's
/// runs are blocks (8 to 32 bytes), so a replayed line keeps bytes no record writes;
/// recomputing its check after the replay, as recovery used to, blessed damage to those
/// bytes (a zeroed key word beside a replayed block read back as data, found by the damage
/// soak). The backend stores a line's new check before its new bytes, fenced
/// (`Pending::write_checked`), so a crash leaves such a line in one of two states its
/// check vouches for: not yet written (the line as it is matches its check) or with its
/// new check (the line with the records' bytes put in matches it). A line matching
/// neither is damaged.
fn verify_touched(log: &RedoLog, pm: &backend::PmCopy, pending: &backend::Pending, touched: &[u64]) -> Result<()> {
    let pool = &log.pool;
    for &l in touched {
        let want = pm.stored(pool, l);
        if pm.compute(pool, l) == want {
            continue;
        }
        let start = l * backend::LINE;
        if backend::line_check(start, &pending.line_after(pool, pm, l)) != want {
            return Err(Error::Corrupt(format!(
                "line {l} of the region (bytes {start}..{}) fails its check, before and after the redo log's \
                 bytes are put in: the pool file is damaged",
                (start + backend::LINE).min(pm.size)
            )));
        }
    }
    Ok(())
}
