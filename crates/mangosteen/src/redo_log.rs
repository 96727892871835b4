//! The batched redo log (paper §4.3, "Batched Redo Logging"; Fig. 3 lines 20–41).
//!
//! A ring of one-line records in PM with a persistent head (first record the backend has
//! not applied) and tail (one past the last COMMIT). The frontend appends the REDO records
//! of a batch and its COMMIT, each flushed as it is written but none fenced; then one
//! fence, the new tail, and one persist (Fig. 3 lines 27–31): the batch is durable, and
//! its requests may be answered, exactly when the tail that covers its COMMIT is. A crash
//! before that leaves records past the persistent tail, which recovery never reads: the
//! batch is lost whole, and it was never acknowledged. Records carry their own index and
//! a CRC-32C (the SSE4.2 instruction where the CPU has it: a record's check is on every
//! commit's critical path), so damage, or a stale record of an earlier lap of the ring, is an error instead
//! of a write of garbage into the PM copy.

use crate::error::{Error, Result};
use crate::layout::*;
use pmkv_substrate::Pool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A record's check: CRC-32C of its first 60 bytes (inline `crc32` instructions, see
/// `pmkv_substrate::checksum`: through the `crc32c` crate's call this was a fifth of a
/// `mangosteen` insert).
fn record_check(w: &[u64; RECORD / 8]) -> u32 {
    let seven: [u64; 7] = w[..7].try_into().expect("7 words");
    pmkv_substrate::checksum::crc32c_words_then(seven, w[7] as u32)
}

/// A decoded record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// `len` bytes of `data` go to region offset `addr`.
    Redo { addr: u64, len: usize, data: [u8; MAX_BLOCK] },
    /// The end of batch `batch`.
    Commit { batch: u64 },
}

/// The ring and its persistent head and tail.
pub struct RedoLog {
    pub(crate) pool: Arc<Pool>,
    /// Offset of the ring's first slot.
    ring: u64,
    /// Capacity in records.
    pub(crate) cap: u64,
    /// Offsets of the persistent head and tail words.
    head_at: u64,
    tail_at: u64,
}

impl RedoLog {
    pub(crate) fn new(pool: Arc<Pool>, ring: u64, cap: u64, sb: u64) -> RedoLog {
        RedoLog { pool, ring, cap, head_at: sb + HEAD_AT, tail_at: sb + TAIL_AT }
    }

    fn word(&self, off: u64) -> &AtomicU64 {
        assert!(off.is_multiple_of(8) && self.pool.contains(off, 8), "redo log word {off:#x} outside the pool");
        // SAFETY: aligned and inside the mapping (checked), which lives as long as `pool`;
        // the head and tail words are only ever accessed atomically.
        unsafe { AtomicU64::from_ptr(self.pool.at::<u64>(off)) }
    }

    /// `p_rb_head`. Acquire: the backend's stores to the PM copy and its release of ring
    /// slots happen before a frontend that reads the new head reuses them.
    pub fn p_head(&self) -> u64 {
        self.word(self.head_at).load(Ordering::Acquire)
    }

    /// `p_rb_tail`. Acquire: the records below it were written before it was published.
    pub fn p_tail(&self) -> u64 {
        self.word(self.tail_at).load(Ordering::Acquire)
    }

    /// Store and persist `p_rb_head` (the backend, Fig. 4 lines 22–24).
    pub(crate) fn set_p_head(&self, h: u64) {
        self.word(self.head_at).store(h, Ordering::Release);
        self.pool.persist_off(self.head_at, 8);
    }

    /// Store and flush `p_rb_head`, no fence: the inline backend's head, made durable by
    /// the tail's persist that follows it (see `Mangosteen::end_tx`).
    pub(crate) fn store_p_head(&self, h: u64) {
        self.word(self.head_at).store(h, Ordering::Release);
        self.pool.flush_off(self.head_at, 8);
    }

    /// Store and persist `p_rb_tail` (the frontend, Fig. 3 lines 29–31).
    pub(crate) fn set_p_tail(&self, t: u64) {
        self.word(self.tail_at).store(t, Ordering::Release);
        self.pool.persist_off(self.tail_at, 8);
    }

    /// The eight words of the record slot at `at`, checked once (not per word: a record
    /// write is on every commit's path).
    fn words(&self, at: u64) -> &[AtomicU64; RECORD / 8] {
        assert!(at.is_multiple_of(8) && self.pool.contains(at, RECORD as u64), "ring slot {at:#x} outside the pool");
        // SAFETY: aligned and inside the mapping (checked), which lives as long as `pool`;
        // ring slots are only ever accessed through these atomics.
        unsafe { &*(self.pool.at::<u64>(at) as *const [AtomicU64; RECORD / 8]) }
    }

    fn slot(&self, idx: u64) -> u64 {
        self.ring + (idx % self.cap) * RECORD as u64
    }

    /// Write record `idx` into its slot and flush it (no fence: Fig. 3 line 37's pwb).
    /// The caller owns the slot: `idx` is at or past the persistent tail and less than
    /// head + capacity, so neither the backend nor recovery reads it before the tail that
    /// covers it is published.
    ///
    /// The record is built as eight words, not bytes: the check then reads registers. (Built
    /// in a byte array with stores of 4 and 8 bytes, its 8-byte loads for the check could
    /// not be forwarded from those stores, and the stall was a tenth of a `mangosteen`
    /// insert.)
    pub(crate) fn write(&self, idx: u64, rec: &Record) {
        let mut w = [0u64; RECORD / 8];
        match rec {
            Record::Redo { addr, len, data } => {
                w[0] = REDO as u64 | (*len as u64) << 32;
                w[1] = *addr;
                for (w, d) in w[2..6].iter_mut().zip(data.chunks_exact(8)) {
                    *w = u64::from_le_bytes(d.try_into().expect("8 bytes"));
                }
            }
            Record::Commit { batch } => {
                w[0] = COMMIT as u64;
                w[1] = *batch;
            }
        }
        w[6] = idx;
        // Bytes 56..60 stay zero; the check covers them and lies in bytes 60..64.
        w[7] = (record_check(&w) as u64) << 32;
        let at = self.slot(idx);
        for (slot, w) in self.words(at).iter().zip(w) {
            // Word stores through atomics: the simulator and a backend thread may read the
            // line concurrently (they only trust it below the published tail).
            slot.store(w, Ordering::Relaxed);
        }
        self.pool.flush_off(at, RECORD);
    }

    /// Read and verify record `idx` (which must lie below the persistent tail).
    pub(crate) fn read(&self, idx: u64) -> Result<Record> {
        let at = self.slot(idx);
        let mut w = [0u64; RECORD / 8];
        for (w, slot) in w.iter_mut().zip(self.words(at)) {
            *w = slot.load(Ordering::Relaxed);
        }
        let mut b = [0u8; RECORD];
        for (b, w) in b.chunks_exact_mut(8).zip(w) {
            b.copy_from_slice(&w.to_le_bytes());
        }
        let bad = |what: &str| Err(Error::Corrupt(format!("redo record {idx} (slot {at:#x}): {what}")));
        if (w[7] >> 32) as u32 != record_check(&w) {
            return bad("checksum does not match");
        }
        if u64::from_le_bytes(b[48..56].try_into().unwrap()) != idx {
            return bad("it is a record of another lap of the ring");
        }
        let field = u64::from_le_bytes(b[8..16].try_into().unwrap());
        match u32::from_le_bytes(b[0..4].try_into().unwrap()) {
            REDO => {
                let len = u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize;
                if len > MAX_BLOCK {
                    return bad("block longer than a record holds");
                }
                let mut data = [0u8; MAX_BLOCK];
                data.copy_from_slice(&b[16..48]);
                Ok(Record::Redo { addr: field, len, data })
            }
            COMMIT => Ok(Record::Commit { batch: field }),
            _ => bad("unknown kind"),
        }
    }
}
