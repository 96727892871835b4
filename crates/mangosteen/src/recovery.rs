//! Recovery (SPEC M8): replay the committed records onto the PM copy, then rebuild the
//! DRAM copy from it.
//!
//! The records between the persistent head and tail are whole batches (the tail only
//! ever moves to just past a COMMIT, after a fence that made the batch's records
//! durable), so replaying them with the backend's own code brings the PM copy to the
//! state after every batch that was acknowledged — and no further: a batch whose tail
//! never became durable is not replayed, and since its requests were never answered,
//! losing it whole is what durable linearizability allows. Replay is idempotent, so a
//! crash during recovery is recovered by running it again.

use crate::backend;
use crate::error::Result;
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
        return Err(crate::error::Error::Corrupt(format!(
            "redo log head {head} and tail {tail} are inconsistent with a ring of {} slots",
            log.cap
        )));
    }
    // Read (and verify) every pending record and check every line they do not write
    // before replaying: a pool refused for damage is then refused unchanged (SPEC R2).
    let mut touched = Vec::new();
    let (mut idx, mut buf) = (head, Vec::new());
    while idx < tail {
        let rec = log.read(idx, tail, &mut buf)?;
        for (addr, data) in rec.runs(&buf) {
            let last = addr.saturating_add(data.len().max(1) as u64 - 1);
            touched.extend(addr / backend::LINE..=last.min(pm.size.saturating_sub(1)) / backend::LINE);
        }
        idx = rec.next;
    }
    touched.sort_unstable();
    touched.dedup();
    pm.verify_except(&log.pool, &touched)?;
    backend::apply(log, pm, head, tail, true)?;
    Ok(Replay { records: tail - head, head, tail })
}
