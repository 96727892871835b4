//! FAST, failure-atomic shift (the paper's FAST): an entry goes into a sorted node, or
//! leaves it, by shifting the entries after it one 8-byte store at a time, in an order
//! whose every prefix reads (`read::live`) as the node before or after the operation.
//!
//! **Inner nodes** (child pointers, unique in a node; they only grow, nothing merges):
//! an insert shifts right: from the last entry down to the
//! insertion point, copy each entry one slot right, pointer first, then key: while the
//! pointer is copied and the key not, the slot repeats its left neighbour's pointer and
//! is skipped. At the insertion point the slot's pointer is set to its left neighbour's
//! (a duplicate again), then the new key, then the new pointer: the store that commits.
//!
//! **Leaves** (format 3: value words inline, so they repeat; the stale-slot test is
//! `read::leaf_stale`, which compares each slot with the last live entry before it on
//! the word unique to that entry): an insert copies each entry one slot right, storing
//! first the word unique to it (a record's value word, an inline entry's key word), so
//! the half-copied slot repeats the entry on its left; at the insertion point it opens a
//! [`HOLE`] (value word), stores the key word, then the value word: the store that
//! commits. A delete stores the [`HOLE`] in the entry's value word (the commit), then
//! moves the hole to the end: each next entry's key word, then its value word (the pair
//! now repeats and the right copy is stale), then the hole one slot on; the last hole
//! becomes the terminating zero.
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
use crate::read::{leaf_stale, Raw};
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

    /// Flush the line written last, for the operation's commit fence
    /// (`Pool::commit_fence`) to make durable: for a shift that is the operation's last
    /// PM write, so nothing after it needs ordering behind it.
    pub(crate) fn flush_last(&mut self) {
        if let Some(l) = self.line.take() {
            self.t.pool.flush_off(l * 64, 64);
        }
    }
}

impl FastFair {
    /// Insert `(kw, ptr)` at live position `pos` of locked `node`, which holds `n` live
    /// entries and no stale slot (`n < CAP`). `last`: the operation's last PM write, whose
    /// final line the caller's commit fence makes durable.
    pub(crate) fn fast_insert(&self, node: u64, raw: &Raw, pos: usize, kw: u64, ptr: u64, last: bool) {
        let n = raw.n;
        let mut w = ShiftWriter::new(self);
        debug_assert!(n < CAP && pos <= n);
        let level = self.load(node + H_LEVEL) as u32;
        // The slot after the last one that will be used must end the entries.
        if n + 1 < SLOTS && self.load(ptr_at(node, n + 1)) != 0 {
            w.store(ptr_at(node, n + 1), 0);
        }
        if pos == n {
            // Past the terminator: invisible until its pointer is stored.
            w.store(key_at(node, n), kw);
            w.store(ptr_at(node, n), ptr);
            Self::end(&mut w, last);
            return;
        }
        for j in (pos..n).rev() {
            if level > 0 || is_rec(raw.ptr[j]) {
                w.store(ptr_at(node, j + 1), raw.ptr[j]);
                w.store(key_at(node, j + 1), raw.kw[j]);
            } else {
                w.store(key_at(node, j + 1), raw.kw[j]);
                w.store(ptr_at(node, j + 1), raw.ptr[j]);
            }
        }
        let open = if level == 0 {
            HOLE
        } else if pos == 0 {
            self.load(node + H_LEFTMOST)
        } else {
            raw.ptr[pos - 1]
        };
        w.store(ptr_at(node, pos), open);
        w.store(key_at(node, pos), kw);
        w.store(ptr_at(node, pos), ptr);
        Self::end(&mut w, last);
    }

    fn end(w: &mut ShiftWriter<'_>, last: bool) {
        if last {
            w.flush_last();
        } else {
            w.finish();
        }
    }

    /// Delete the entry in slot `p` of locked leaf `node`, whose slots are `raw`: the
    /// hole (the commit), then the hole moved to the end. `last` as `fast_insert`'s.
    pub(crate) fn fast_delete(&self, node: u64, raw: &Raw, p: usize, last: bool) {
        let mut w = ShiftWriter::new(self);
        w.store(ptr_at(node, p), HOLE);
        Self::close_hole(&mut w, node, raw, p);
        Self::end(&mut w, last);
    }

    /// Move the hole in slot `p` of leaf `node` (slots `raw` as before it) to the end and
    /// make it the terminator: every prefix of the stores reads the same entries.
    fn close_hole(w: &mut ShiftWriter<'_>, node: u64, raw: &Raw, p: usize) {
        for i in p..raw.n.saturating_sub(1) {
            w.store(key_at(node, i), raw.kw[i + 1]);
            w.store(ptr_at(node, i), raw.ptr[i + 1]);
            w.store(ptr_at(node, i + 1), HOLE);
        }
        w.store(ptr_at(node, raw.n - 1), 0);
    }

    /// Recovery: remove the stale slots (a half-copied slot or a hole) an interrupted
    /// shift left in leaf `node`, leaving the live entries as they read: each becomes a
    /// hole (it was skipped, so it reads the same), which is then moved out. Idempotent
    /// and crash-safe: every store leaves a leaf that reads the same.
    pub(crate) fn fix_duplicates(&self, node: u64) -> usize {
        let mut fixed = 0;
        for _ in 0..SLOTS {
            let raw = self.raw(node);
            let mut prev = None;
            let mut stale = None;
            for i in 0..raw.n {
                let e = (raw.kw[i], raw.ptr[i]);
                if leaf_stale(prev, e) {
                    stale = Some(i);
                    break;
                }
                prev = Some(e);
            }
            let Some(p) = stale else {
                return fixed;
            };
            let mut w = ShiftWriter::new(self);
            if raw.ptr[p] != HOLE {
                w.store(ptr_at(node, p), HOLE);
            }
            Self::close_hole(&mut w, node, &raw, p);
            w.finish();
            fixed += 1;
        }
        fixed
    }
}
