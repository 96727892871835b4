//! Update (Algorithm 3): out of place through the per-thread micro-log, or in place for
//! same-length values of at most 8 bytes (see `HartOptions::paper_updates`).

use crate::error::Result;
use crate::hart::Hart;
use crate::layout::*;
use crate::micro_log::{self, UpdateLog};
use crate::pm::{read_u32, read_u64, write_u32, write_u64};
use std::sync::atomic::{AtomicUsize, Ordering};

static NEXT_LOG: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static MY_LOG: usize = NEXT_LOG.fetch_add(1, Ordering::Relaxed);
}

impl Hart {
    fn log_at(&self, i: usize) -> u64 {
        self.logs_off + (i as u64) * LOG_SIZE
    }

    /// Update (Algorithm 3): out of place, or in place for a same-length value of at most 8
    /// bytes (see `HartOptions::paper_updates`).
    ///
    /// # Safety
    ///
    /// `leaf` is a used leaf of an ART whose write lock the caller holds: no one else reads
    /// or writes the leaf or its value meanwhile.
    pub(crate) unsafe fn update(&self, leaf: u64, value: &[u8]) -> Result<()> {
        let pool = &*self.pool;
        let old = read_u64(pool, leaf + LEAF_P_VALUE);
        let flags = read_u32(pool, leaf + LEAF_FLAGS);
        let old_inline = inline_len(flags);
        if old_inline == Some(value.len()) && !self.paper_updates {
            // An inline value of the same length: one atomic 8-byte store of the leaf's
            // value word, persisted (a crash leaves the old or the new value). (A pool
            // written without `paper_updates` and reopened with it moves such values out
            // of line with Algorithm 3 instead.)
            let mut w = [0u8; 8];
            w[..value.len()].copy_from_slice(value);
            // SAFETY: the leaf's value word, ours under the ART write lock (the contract).
            unsafe { write_u64(pool, leaf + LEAF_P_VALUE, u64::from_le_bytes(w)) };
            pool.persist_off(leaf + LEAF_P_VALUE, 8);
            return Ok(());
        }
        if old_inline.is_none()
            && !self.paper_updates
            && value.len() <= 8
            && read_u32(pool, old) as usize == value.len()
        {
            // In place: the value's data word is one aligned 8-byte store, which PM writes
            // atomically, so a crash leaves the old or the new value (see HartOptions).
            let mut w = [0u8; 8];
            w[..value.len()].copy_from_slice(value);
            // SAFETY: the value's data word, ours under the ART write lock (the contract).
            unsafe { write_u64(pool, old + VALUE_HDR as u64, u64::from_le_bytes(w)) };
            pool.persist_off(old + VALUE_HDR as u64, 8);
            return Ok(());
        }
        let new = self.new_value(value)?; // lines 4–5 (flushed)
        let i = MY_LOG.with(|x| *x) % NUM_LOGS as usize;
        let _log = self.log_locks[i].lock();
        let at = self.log_at(i);
        // SAFETY: `new` is ours (written above, not published); log `i` is ours (its lock).
        let crc = unsafe { micro_log::value_crc(pool, new) }.unwrap_or(0);
        // Lines 2, 3, 6 in one line with a check word that covers the new value.
        let log = UpdateLog { leaf, old_value: old, new_value: new, old_flags: flags };
        // SAFETY: as above.
        unsafe { micro_log::write(pool, at, log, crc) };
        pool.fence(); // fence 1: new value and log durable

        // Lines 7–8: swing p_value (and, for an inline value, clear the inline flags in the
        // same line; both flushed) then set the new value's bit; publish's fence (fence 2)
        // covers them. Recovery decides by the new value's bit: set → roll forward (swing),
        // clear → roll back to the logged word and flags (the old value was not yet freed).
        // SAFETY: the leaf's words, ours under the ART write lock (the contract).
        unsafe {
            write_u64(pool, leaf + LEAF_P_VALUE, new);
            if old_inline.is_some() {
                write_u32(pool, leaf + LEAF_FLAGS, flags & !INLINE_MASK);
            }
        }
        pool.flush_off(leaf + LEAF_P_VALUE, 16);
        self.alloc.publish(new);
        if old_inline.is_some() {
            // No old object to free: reclaim the log with a fence of its own (fence 3).
            // SAFETY: log `i`, whose lock we hold.
            unsafe { micro_log::clear(pool, at) };
            return Ok(());
        }
        // Line 11 before lines 9–10: reclaim the log (flushed, not fenced), then reset the
        // old value's bit, whose fence (fence 3) makes both durable. Either may reach PM
        // first: a cleared log with the old bit set leaves an orphan the recovery sweep
        // frees; a valid log with the old bit clear rolls forward again, and the sweep
        // frees `old` only if no used leaf names it (its slot may have been reused). The
        // log is durably clear before the leaf can change again (we hold the ART lock),
        // so a stale log never swings a later p_value back.
        // SAFETY: log `i`, whose lock we hold.
        unsafe { micro_log::clear_unfenced(pool, at) };
        self.alloc.free(old);
        Ok(())
    }
}
