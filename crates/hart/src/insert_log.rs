//! The insert log of formats 5 to 7 (pmkv's, not the paper's), kept for what a crash of
//! those formats left behind, and the writer lanes that share the micro-logs.
//!
//! **What it was.** In the flushing modes each writer lane kept one zeroed leaf slot
//! *ready* and named it in one of two PM words (bytes 32..48 of its micro-log line), so
//! that an insert persisted once instead of twice: leaf, next ready slot, lane word and
//! the leaf's bit under one fence, four lines. After a crash, recovery treated a used
//! leaf named by a lane that failed its checks as an insert cut short.
//!
//! **Why it went.** Format 8 persists one line per insert: the leaf, with its bit set
//! afterwards and not persisted (`insert`; docs/design/hart.md, "One line per insert").
//! Recovery finds leaves whose bit a crash lost by their checks, so nothing needs to
//! name them. The lane words stay in the layout: recovery of a version-5 to 7 pool still
//! reads them ([`named`]) and a writable open clears them ([`clear`]), after which they
//! are always zero.
//!
//! **Lanes.** Threads still take micro-logs round-robin ([`my_lane`]); a lane's mutex
//! guards its micro-log (`update`).

use crate::art_lock::ShortLock;
use crate::layout::*;
use crate::pm::{read_u64, write_u64};
use pmkv_substrate::Pool;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Byte offset of a lane's two words in its micro-log line.
pub(crate) const LANE_WORDS: u64 = 32;

/// Offset of word `w` (0 or 1) of lane `i`, in the micro-log array at `logs_off`.
fn lane_word_at(logs_off: u64, i: u64, w: u64) -> u64 {
    logs_off + i * LOG_SIZE + LANE_WORDS + 8 * w
}

static NEXT_LANE: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static MY_LANE: usize = NEXT_LANE.fetch_add(1, Ordering::Relaxed);
}

/// This thread's lane (and micro-log): threads take them round-robin.
pub(crate) fn my_lane() -> usize {
    MY_LANE.with(|x| *x) % NUM_LOGS as usize
}

/// A writer lane: the mutex of its micro-log, one cache line per lane so that writers
/// on different lanes share none.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct LaneSlot {
    pub(crate) lock: ShortLock<()>,
}

/// Every leaf offset the lanes name (recovery: the inserts that may be torn).
pub(crate) fn named(pool: &Pool, logs_off: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..NUM_LOGS as u64)
        .flat_map(|i| [0, 1].map(|w| read_u64(pool, lane_word_at(logs_off, i, w))))
        .filter(|&o| o != 0)
        .collect();
    v.sort_unstable();
    v
}

/// Zero every lane word (a writable open, after recovery has read them): persisted, so
/// that no name outlives the session that wrote it.
pub(crate) fn clear(pool: &Pool, logs_off: u64) {
    let mut any = false;
    for i in 0..NUM_LOGS as u64 {
        let at = lane_word_at(logs_off, i, 0);
        if read_u64(pool, at) != 0 || read_u64(pool, at + 8) != 0 {
            // SAFETY: the lane words of the validated log array; recovery runs alone.
            unsafe {
                write_u64(pool, at, 0);
                write_u64(pool, at + 8, 0);
            }
            pool.flush_off(at, 16);
            any = true;
        }
    }
    if any {
        pool.fence();
    }
}
