//! The backend (paper Fig. 4): applies committed records to the PM copy of the region and
//! advances the persistent head.
//!
//! For each record from the head: a REDO's block is copied to its place in the PM copy and
//! flushed (line 15–17); at a COMMIT, one fence makes the batch's blocks durable and the
//! head moves past it, persisted (lines 21–24). A crash anywhere leaves the head at or
//! before the batch being applied; recovery applies that batch again, which is harmless:
//! a REDO record writes the same bytes to the same place however often it is replayed.
//! The backend never reads past the persistent tail, so it only ever applies whole,
//! durable batches.

use crate::error::{MangosteenError, Result};
use crate::redo_log::{Record, RedoLog};

/// Apply every record in `[from, to)` to the PM copy at `region` (of `size` bytes);
/// returns the new head. `to` must not exceed the persistent tail.
pub(crate) fn apply(log: &RedoLog, region: u64, size: u64, from: u64, to: u64) -> Result<u64> {
    let pool = &log.pool;
    let mut head = from;
    for idx in from..to {
        match log.read(idx)? {
            Record::Redo { addr, len, data } => {
                if addr.checked_add(len as u64).is_none_or(|e| e > size) {
                    return Err(MangosteenError::Corrupt(format!(
                        "redo record {idx} writes {len} bytes at {addr}, outside the {size}-byte region"
                    )));
                }
                let at = region + addr;
                // SAFETY: inside the region (checked), an object of this pool that only
                // the backend (or recovery, which runs alone) writes; the DRAM copy is a
                // separate buffer, so no reference into these bytes exists.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), pool.at::<u8>(at), len) };
                pool.flush_off(at, len);
            }
            Record::Commit { .. } => {
                pool.fence(); // line 21: the batch's blocks are durable
                head = idx + 1;
                log.set_p_head(head); // lines 22–24
            }
        }
    }
    Ok(head)
}
