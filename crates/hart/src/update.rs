//! Update (Algorithm 3): out of place through the per-thread micro-log, or, for
//! same-length values of at most 8 bytes (see `Options::paper_updates`), in the leaf:
//! into its second value slot with one persist, or in place with two in `adr`.

use crate::checksum::{self, Meta};
use crate::error::{Error, Result};
use crate::hart::Hart;
use crate::layout::*;
use crate::micro_log::{self, UpdateLog};
use crate::pm::{current_value_in, has_slot_b, leaf_word, leaf_words, write_u64};

impl Hart {
    fn log_at(&self, i: usize) -> u64 {
        self.pm.logs_off + (i as u64) * LOG_SIZE
    }

    /// Update (Algorithm 3): out of place, or in place for a same-length value of at most 8
    /// bytes (see `Options::paper_updates`).
    ///
    /// # Safety
    ///
    /// `leaf` is a used leaf of an ART whose write lock the caller holds: no one else reads
    /// or writes the leaf or its value meanwhile.
    pub(crate) unsafe fn update(&self, leaf: u64, value: &[u8]) -> Result<()> {
        let pool = &*self.pm.pool;
        // The leaf's bounds checked once for the words read here (`leaf_words`).
        let lw = leaf_words(pool, leaf);
        let m = Meta::decode(leaf_word(lw, LEAF_META));
        let flags = m.flags;
        // The old value word is what a crash rolls back to: never build on a damaged one.
        let Some((old, old_slot, old_check)) = current_value_in(pool, lw, leaf, m) else {
            let e = Error::Corrupt(format!("leaf {leaf:#x}: the value check does not match its value word"));
            self.pm.note_damage(&e);
            return Err(e);
        };
        let old_inline = inline_len(flags);
        if old_inline == Some(value.len()) && !self.paper_updates {
            let w = inline_word(value);
            let new_check = checksum::value_check(leaf, w, flags);
            if pool.mode().flushes() && has_slot_b(m) {
                // Two slots (see `layout`): the new value into the slot not in use, then
                // the check word (new check, current check); one flush of the leaf's line
                // and one fence. Whichever of the two words a crash keeps, a slot verifies:
                // only the value → the current check still proves the old slot; only the
                // check word → the new slot fails, the previous check proves the old one.
                let slot = if old_slot == LEAF_P_VALUE { LEAF_SLOT_B } else { LEAF_P_VALUE };
                // SAFETY: the leaf's words, ours under the ART write lock (the contract);
                // slot B is outside the key (a key of at most SLOT_B_KEY bytes).
                unsafe {
                    write_u64(pool, leaf + slot, w);
                    write_u64(pool, leaf + LEAF_VCHECK, checksum::vcheck_word(new_check, old_check));
                }
                pool.flush_off(leaf, LEAF_SIZE);
                // A fence, not a commit fence that a group commit would defer: the next
                // update of this leaf (even in the same group) overwrites the old slot and
                // the check word, which is safe only once this update is durable; and the
                // previous check below may be dropped only then. Inside a group this costs
                // what the one-slot update's first persist costs.
                pool.fence();
                // Durable: drop the previous check, so that damage to the new slot later
                // cannot fall back silently to the old slot's intact value. A plain store,
                // not flushed (a second write-back of the line would cost as much as the
                // fence saved); until the line is written back, a crash image keeps the
                // previous check, which only a damaged new slot would ever consult.
                // SAFETY: the leaf's check word, ours under the ART write lock (the
                // contract); no slice of PM covers it.
                unsafe { write_u64(pool, leaf + LEAF_VCHECK, checksum::vcheck_word(new_check, new_check)) };
                return Ok(());
            }
            // One slot, in place: the new value check, then the value word, both in the
            // leaf's line. The check word keeps the old check beside the new one, so
            // whichever of the two stores a crash keeps, the leaf verifies: old value (old
            // check still there) or new. In adr the check is persisted before the word,
            // since two stores to one line may reach PM in either order when the line is
            // evicted between them (the crash simulator's torn-line model); in eadr stores
            // persist in program order and one fence suffices. (A pool written without
            // `paper_updates` and reopened with it moves such values out of line with
            // Algorithm 3 instead.)
            let vc = checksum::vcheck_word(new_check, old_check);
            // SAFETY: the leaf's words, ours under the ART write lock (the contract).
            unsafe { write_u64(pool, leaf + LEAF_VCHECK, vc) };
            if pool.mode().flushes() {
                pool.persist_off(leaf + LEAF_VCHECK, 8);
            }
            // SAFETY: the leaf's value slot, ours under the ART write lock (the contract);
            // no slice of PM covers it while we hold that lock.
            unsafe { write_u64(pool, leaf + old_slot, w) };
            pool.flush_off(leaf + old_slot, 8);
            pool.commit_fence();
            return Ok(());
        }
        if old_inline.is_none() {
            // Freed at the end: its chunk's metadata loads while the new value is written.
            self.pm.alloc.prefetch_meta(old);
        }
        // The micro-log's lane first: taking a lock is a locked instruction, which on x86
        // waits for every earlier `clwb` to complete as a fence does; taken after the new
        // value's flush it made `adr` wait for that flush alone, then for the log's.
        let i = crate::insert_log::my_lane();
        let _log = self.lanes[i].lock.lock();
        let new = self.pm.new_value(leaf, value)?; // lines 4–5 (flushed)
        let at = self.log_at(i);
        // SAFETY: `new` is ours (written above, not published); log `i` is ours (its lock).
        let crc = unsafe { micro_log::value_crc(pool, new) }.unwrap_or(0);
        // Lines 2, 3, 6 in one line with a check word that covers the new value.
        let log = UpdateLog { leaf, old_value: old, new_value: new, old_flags: flags };
        // SAFETY: `at` is micro-log `i`, whose lock (`_log`) this thread holds, as
        // `micro_log::write` requires.
        unsafe { micro_log::write(pool, at, log, crc) };
        pool.fence(); // fence 1: new value and log durable

        // Lines 7–8 in the paper's order: set the new value's bit (line 7; flushed, not
        // fenced), then swing p_value (line 8; for an inline value also clearing the
        // inline flags in the same line; flushed), and fence both (fence 2). Recovery
        // decides by the new value's bit alone: set → roll forward (it rewrites p_value,
        // flags and check from the log, whatever of line 8 reached PM), clear → roll back
        // to the logged word and flags (the old value was not yet freed). The new value
        // is durable (fence 1) before its bit can be, as EPallocator requires. (pmkv
        // swung first until 2026-11-26; but setting a bit is a locked compare-and-swap,
        // which on x86 waits for every earlier `clwb` as a fence does, so after line 8's
        // flush it cost `adr` a wait of its own. Right after fence 1 nothing is in flight,
        // and the two flushes complete together under fence 2.)
        self.pm.alloc.publish_unfenced(new);
        // SAFETY: the leaf's words, ours under the ART write lock (the contract).
        // The value check goes first and keeps the old check beside the new one; a crash
        // that tears these words leaves a valid log, and recovery rewrites all three.
        unsafe {
            let new_flags = flags & !INLINE_MASK;
            let vc = checksum::vcheck_word(checksum::value_check(leaf, new, new_flags), old_check);
            write_u64(pool, leaf + LEAF_VCHECK, vc);
            if old_inline.is_some() {
                write_u64(pool, leaf + LEAF_META, Meta { flags: new_flags, ..m }.encode());
            }
            write_u64(pool, leaf + LEAF_P_VALUE, new);
        }
        pool.flush_off(leaf + LEAF_P_VALUE, 24);
        pool.fence(); // fence 2
        if old_inline.is_some() {
            // No old object to free: reclaim the log with a fence of its own (fence 3).
            // SAFETY: log `i`, whose lock we hold.
            unsafe { micro_log::clear(pool, at) };
            return Ok(());
        }
        // Lines 9–11: reset the old value's bit (flushed, not fenced; its locked
        // compare-and-swap comes right after fence 2, with nothing in flight to wait
        // for), reclaim the log (flushed), and fence both (fence 3). Either may reach PM
        // first: a cleared log with the old bit set leaves an orphan the recovery sweep
        // frees; a valid log with the old bit clear rolls forward again, and the sweep
        // frees `old` only if no used leaf names it (its slot may have been reused). The
        // log is durably clear before the leaf can change again (we hold the ART lock),
        // so a stale log never swings a later p_value back.
        self.pm.alloc.free_unfenced(old);
        // SAFETY: log `i`, whose lock we hold.
        unsafe { micro_log::clear(pool, at) }; // fence 3
        Ok(())
    }
}
