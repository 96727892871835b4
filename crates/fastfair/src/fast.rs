//! FAST, failure-atomic shift (the paper's FAST): an entry goes into a sorted node, or
//! leaves it, by shifting the entries after it one 8-byte store at a time, in an order
//! whose every prefix reads (`read::live`) as the node before or after the operation.
//!
//! **Insert** (shift right, direction [`RIGHT`]): from the last entry down to the
//! insertion point, copy each entry one slot right, pointer first, then key: while the
//! pointer is copied and the key not, the slot repeats its left neighbour's pointer and
//! is skipped. At the insertion point the slot's pointer is set to its left neighbour's
//! (a duplicate again), then the new key, then the new pointer: the store that commits.
//! **Delete** (shift left, direction [`LEFT`]): from the deleted slot on, copy each next
//! entry one slot left, pointer first (the deleted entry now repeats its right
//! neighbour's pointer and is skipped: the store that commits), then key; the last copy
//! is the terminating null pointer.
//!
//! The direction word is stored before a shift in the other direction starts, when the
//! node holds no duplicate, so it is right whenever a duplicate exists.
//!
//! As the paper (§4.1) and the authors' btree.h do, a shift flushes each cache line
//! once, when its stores are complete and before the first store to the next line
//! ([`ShiftWriter`]): a flush and a fence per dirtied line. That is correct because x86
//! writes a line back whole, holding a prefix of one thread's stores to it in program
//! order (TSO), so a crash leaves every earlier line complete and the current one at
//! some prefix of its stores, each of which reads right. FAST&FAIR declares that crash
//! model ([`CrashModel::LinesInOrder`](pmkv_substrate::CrashModel)) and its crash tests
//! run under it; under the strict model (any subset of a line's dirty words) a shift
//! would have to persist each 8-byte store on its own, as pmkv's format 1 did (25
//! flushes an insert). In eADR stores are persistent in program order and nothing is
//! flushed.

use crate::layout::*;
use crate::read::Raw;
use crate::tree::FastFair;

/// The stores of one shift: each line flushed and fenced once, when the shift moves on
/// to another line or ends (in the flushing modes; in eADR plain stores).
pub(crate) struct ShiftWriter<'a> {
    t: &'a FastFair,
    /// The line the last store went to, not yet flushed.
    line: Option<u64>,
}

impl<'a> ShiftWriter<'a> {
    pub(crate) fn new(t: &'a FastFair) -> Self {
        ShiftWriter { t, line: None }
    }

    /// Store `v` at `off`, first persisting the line written before if it is another.
    pub(crate) fn store(&mut self, off: u64, v: u64) {
        if self.t.flushes && self.line != Some(off / 64) {
            self.finish();
            self.line = Some(off / 64);
        }
        // SAFETY: the word belongs to a node this thread has locked (or recovery's, which
        // runs alone); readers read it with atomic loads.
        unsafe { self.t.pool.store_u64(off, v) };
    }

    /// Persist the line written last.
    pub(crate) fn finish(&mut self) {
        if let Some(l) = self.line.take() {
            self.t.pool.flush_off(l * 64, 64);
            self.t.pool.fence();
        }
    }
}

impl FastFair {
    /// Insert `(kw, ptr)` at live position `pos` of locked `node`, which holds `n` live
    /// entries and no duplicate (`n < CAP`).
    pub(crate) fn fast_insert(&self, node: u64, raw: &Raw, pos: usize, kw: u64, ptr: u64) {
        let n = raw.n;
        let mut w = ShiftWriter::new(self);
        debug_assert!(n < CAP && pos <= n);
        if self.load(node + H_DIR) != RIGHT {
            w.store(node + H_DIR, RIGHT);
        }
        // The slot after the last one that will be used must end the entries.
        if n + 1 < SLOTS && self.load(ptr_at(node, n + 1)) != 0 {
            w.store(ptr_at(node, n + 1), 0);
        }
        if pos == n {
            // Past the terminator: invisible until its pointer is stored.
            w.store(key_at(node, n), kw);
            w.store(ptr_at(node, n), ptr);
            w.finish();
            return;
        }
        for j in (pos..n).rev() {
            w.store(ptr_at(node, j + 1), raw.ptr[j]);
            w.store(key_at(node, j + 1), raw.kw[j]);
        }
        let level = self.load(node + H_LEVEL) as u32;
        let left = if pos == 0 { Self::left_of(level, self.load(node + H_LEFTMOST)) } else { raw.ptr[pos - 1] };
        w.store(ptr_at(node, pos), left);
        w.store(key_at(node, pos), kw);
        w.store(ptr_at(node, pos), ptr);
        w.finish();
    }

    /// Delete the entry in slot `p` of locked `node`, whose slots are `raw`, by shifting
    /// the slots after it left. Also finishes a delete a crash interrupted at `p`.
    pub(crate) fn fast_delete(&self, node: u64, raw: &Raw, p: usize) {
        let mut w = ShiftWriter::new(self);
        if self.load(node + H_DIR) != LEFT {
            w.store(node + H_DIR, LEFT);
        }
        for i in p..raw.n {
            let next = if i + 1 < raw.n { raw.ptr[i + 1] } else { 0 };
            if self.load(ptr_at(node, i)) != next {
                w.store(ptr_at(node, i), next);
            }
            if next != 0 && self.load(key_at(node, i)) != raw.kw[i + 1] {
                w.store(key_at(node, i), raw.kw[i + 1]);
            }
        }
        w.finish();
    }

    /// Recovery: remove the duplicate an interrupted shift left in `node` (at most one
    /// per interrupted operation), leaving the live entries as they read. Idempotent and
    /// crash-safe: every store leaves a node that reads the same.
    pub(crate) fn fix_duplicates(&self, node: u64) -> usize {
        let mut fixed = 0;
        for _ in 0..SLOTS {
            let raw = self.raw(node);
            let dir = self.load(node + H_DIR);
            let level = self.load(node + H_LEVEL) as u32;
            let left = Self::left_of(level, self.load(node + H_LEFTMOST));
            if dir == LEFT {
                // A delete stopped at slot d: its pointer repeats slot d+1's. Finish it.
                let Some(d) = (0..raw.n.saturating_sub(1)).find(|&i| raw.ptr[i] == raw.ptr[i + 1]) else {
                    return fixed;
                };
                self.fast_delete(node, &raw, d);
            } else {
                // An insert stopped: slot d repeats its left neighbour's pointer. Make
                // the two slots equal (slot d is skipped meanwhile), then delete one of
                // them by a left shift (which reads them the same in either direction).
                let Some(d) = (0..raw.n).find(|&i| raw.ptr[i] == if i == 0 { left } else { raw.ptr[i - 1] }) else {
                    return fixed;
                };
                let pair = if d == 0 {
                    if raw.n == 1 {
                        self.pstore(ptr_at(node, 0), 0);
                        fixed += 1;
                        continue;
                    }
                    self.pstore(key_at(node, 0), raw.kw[1]);
                    self.pstore(ptr_at(node, 0), raw.ptr[1]);
                    0
                } else {
                    if raw.kw[d] != raw.kw[d - 1] {
                        self.pstore(key_at(node, d), raw.kw[d - 1]);
                    }
                    d - 1
                };
                let raw = self.raw(node);
                self.pstore(node + H_DIR, LEFT);
                self.fast_delete(node, &raw, pair);
            }
            fixed += 1;
        }
        fixed
    }
}
