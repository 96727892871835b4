//! The insert log (pmkv's, not the paper's): in the flushing modes (`adr`, `msync`), an
//! insert of a record that fits its leaf (key of at most 40 bytes, value of at most 8)
//! persists once instead of twice.
//!
//! **Why two persists.** Algorithm 1 makes a leaf durable and then sets its bit, because
//! recovery trusts a used leaf: a leaf whose bit reached PM but whose bytes did not would
//! be taken for a damaged one (the open fails), or worse, the slot's previous occupant (a
//! deleted leaf whose erase, a plain store, never reached PM) would come back. Each
//! persist costs ~170 ns here, more than the rest of an `adr` insert.
//!
//! **One persist.** Each writer lane (one per micro-log, shared round-robin by threads)
//! keeps one leaf slot *ready* for its next insert: reserved in DRAM, its whole line zeroed
//! in PM, and its offset written into one of the lane's two PM words; all three made
//! durable by the fence of the insert that prepared it. An insert into the ready slot then
//! writes the leaf, prepares the next ready slot (named in the *other* word), sets the
//! leaf's bit, and fences once. A crash before that fence leaves the leaf's line as any
//! mix of zero words and new words, its bit set or not, and the leaf still named by its
//! lane. After a crash, recovery treats a used leaf named by a lane that fails its checks
//! as that interrupted insert: it frees it and counts it as rolled back. (One whose meta
//! word is zero is freed like any erased leaf, as a delete finished.)
//! A named leaf that passes its checks is a finished insert (every word of it reached PM:
//! words left zero fail the key or the value check). The zeroed line is what rules out the
//! previous occupant: none of its words survive into the slot.
//!
//! **What it costs.** One more line written per insert (the next slot's zeroing) and a
//! lane lock; the second fence saved is worth far more here (docs/design/hart.md, "One persist per insert"). The
//! price in detection: after a crash, damage to a leaf a lane still names (at most two
//! per lane: the last insert and the ready slot) is reported as a rolled-back insert
//! instead of failing the open, and that record is dropped. Every other leaf is verified
//! as before. Every writable open clears the lane words, so names never outlive a session.
//!
//! Records with a key object or a value object keep the two-persist insert: their
//! objects' bytes are not covered by the leaf's checks, and a value object's own check is
//! seeded by its leaf's offset, which the new leaf may share with a deleted one whose
//! value object lay in the same slot: a torn insert could then show the deleted record's
//! value, checks and all, unless the value slot were zeroed first too.
//!
//! **Layout.** The two words of lane `i` are bytes 32..48 of micro-log line `i`, which the
//! micro-log leaves zero; 0 names nothing (offset 0 is the pool header, never a leaf).
//! The lane's DRAM state and its micro-log share one mutex, taken after the ART's lock.

use crate::art_lock::ShortLock;
use crate::layout::*;
use crate::pm::{read_u64, write_u64, Pm};
use pmkv_substrate::Pool;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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

/// DRAM state of one writer lane; lives in the mutex that also guards the lane's
/// micro-log.
#[derive(Default)]
pub(crate) struct Lane {
    /// A leaf slot reserved for this lane's next insert, whose line is zero in PM and
    /// which word [`Lane::word`] names, both durable; 0 = none (the next eligible insert
    /// takes the two-persist path and prepares one).
    pub(crate) ready: u64,
    /// Which of the two words names `ready` (or, once it is used, the leaf in it).
    pub(crate) word: u64,
    /// The slot to make ready next, reserved one insert ahead so that its line, fetched
    /// for writing then, is in the cache when it is zeroed (0 = none yet).
    spare: u64,
}

/// A lane: its state under the mutex, and a copy of its ready slot that an insert reads
/// without the lock to start fetching the lines it will write. One cache line each, so
/// that writers on different lanes share none.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct LaneSlot {
    pub(crate) lock: ShortLock<Lane>,
    hint: AtomicU64,
}

impl LaneSlot {
    /// Before an insert that may use lane `i` (this slot): start fetching, for writing,
    /// the lines its one-persist path writes (the ready slot, its chunk's header, the
    /// lane's words), so that their misses overlap the tree's descent. Each was evicted by
    /// the `clwb` of the insert before (on this CPU). A stale hint costs a wasted prefetch.
    pub(crate) fn prefetch(&self, pm: &Pm, i: usize) {
        let ready = self.hint.load(Ordering::Relaxed);
        if ready != 0 {
            pm.pool.prefetch_write(ready);
            pm.alloc.prefetch_meta(ready);
        }
        pm.pool.prefetch_write(lane_word_at(pm.logs_off, i as u64, 0));
    }

    /// Make `next` (from [`reserve_next`]; 0 = none) the ready slot of lane `i` (this
    /// slot): zero its line and name it in the word that does not name the lane's current
    /// leaf, both flushed, not fenced: the caller's next fence makes them durable, and the
    /// slot is used only by an insert after that fence.
    ///
    /// # Safety
    ///
    /// `lane` is this slot's state, whose mutex the caller holds; `next` is a reserved,
    /// unpublished leaf slot no one else uses, or 0.
    pub(crate) unsafe fn make_ready(&self, pm: &Pm, lane: &mut Lane, i: usize, next: u64) {
        let pool = &*pm.pool;
        lane.ready = next;
        if next != 0 {
            // SAFETY: `next` is a reserved, unpublished 64-byte leaf slot that only this
            // lane holds (the contract), so no other thread reads or writes its line.
            unsafe { std::ptr::write_bytes(pool.at::<u8>(next), 0, LEAF_SIZE) };
            pool.flush_off(next, LEAF_SIZE);
            let w = 1 - lane.word;
            let at = lane_word_at(pm.logs_off, i as u64, w);
            // SAFETY: the lane's word, which only the holder of the lane's mutex (the
            // caller, by the contract) writes, and which no slice of PM covers.
            unsafe { write_u64(pool, at, next) };
            pool.flush_off(at, 8);
            lane.word = w;
        }
        self.hint.store(next, Ordering::Relaxed);
    }
}

/// The slot a lane makes ready next (0 if the pool is full): the spare reserved by the
/// insert before, and a new spare reserved (and fetched for writing) for the insert
/// after. Only reservations, with their compare-and-swaps: an insert calls this before it
/// flushes anything, because on x86 a locked instruction waits for every earlier `clwb`
/// to complete, as a fence would.
pub(crate) fn reserve_next(pm: &Pm, lane: &mut Lane) -> u64 {
    let next = match lane.spare {
        0 => pm.alloc.alloc(LEAF, LEAF_SIZE).unwrap_or(0),
        s => s,
    };
    lane.spare = if next == 0 { 0 } else { pm.alloc.alloc(LEAF, LEAF_SIZE).unwrap_or(0) };
    if lane.spare != 0 {
        pm.pool.prefetch_write(lane.spare);
    }
    next
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
