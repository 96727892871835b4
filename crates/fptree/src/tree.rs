//! [`FpTree`] and its operations (paper §4: find, insert, update, delete;
//! §3 "Selective Concurrency" for the concurrent versions).
//!
//! Every operation read-locks the DRAM index, finds its leaf there and takes the leaf's
//! lock (`inner`): shared for a lookup or a scan, exclusive for a write. A write that
//! needs a structural change (a full leaf split, an emptied leaf unlinked) drops both and
//! retakes the index exclusively, which the paper's TSX fallback path does too.
//!
//! * **Insert**: the entry goes to a free slot (its key and value in objects first if
//!   they do not fit their words), with its fingerprint; both are persisted; then the
//!   slot's bitmap bit is set by one persisted 8-byte store, the commit.
//! * **Update** (the paper's out-of-place update): the new entry goes to a free slot and
//!   one bitmap store sets its bit and clears the old one's; the old value object is
//!   freed after. The key words (a key object too) are reused.
//! * **Delete**: one bitmap store clears the slot's bit; the key and value objects are
//!   freed after. A leaf left empty is unlinked (`micro_log::unlink_leaf`) unless it is
//!   the first, which the superblock names.
//!
//! A crash between a commit and the frees after it (or between an object's publication
//! and its commit) leaves used objects that no valid entry names: the recovery sweep
//! frees them (`recovery`), as the paper's recovery frees the keys of invalid slots.

use crate::error::Result;
use crate::fingerprint;
use crate::inner::{Index, LeafNode};
use crate::layout::*;
use crate::leaf::{write_object, Entry, Leaf};
use crate::micro_log::{self, MicroLogs};
use parking_lot::RwLock;
use pmkv_core::{KeyRange, RecoveryReport, Visitor};
use pmkv_substrate::batch_log::BatchLog;
use pmkv_substrate::epalloc::EpAlloc;
use pmkv_substrate::{EngineClaim, Pool};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Options of an FPTree open. FPTree has none yet; the type is here so that programs can
/// attach it like the other engines' options.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {}

/// An FPTree over one pool.
pub struct FpTree {
    pub(crate) pool: Arc<Pool>,
    pub(crate) alloc: EpAlloc,
    /// Offset of the superblock.
    pub(crate) sb: u64,
    /// Offset of the first leaf (never unlinked).
    pub(crate) head: u64,
    pub(crate) index: RwLock<Index>,
    pub(crate) count: AtomicU64,
    pub(crate) recovery: RecoveryReport,
    /// Write-batch logs in flight (`batch`).
    pub(crate) batches: BatchLog,
    /// `close` ran (sealed already).
    pub(crate) closed: bool,
    pub(crate) _claim: EngineClaim,
}

/// What a write into one leaf did.
enum Put {
    /// Done; `true` if the key was new.
    Done(bool),
    /// The leaf has no free slot: split it first.
    Full,
}

impl FpTree {
    /// The pool under the tree.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// What the open's recovery did (`leaves` in its details).
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Whether the tree holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn logs(&self) -> MicroLogs<'_> {
        MicroLogs { pool: &self.pool, sb: self.sb }
    }

    fn leaf(&self, node: &LeafNode) -> Leaf<'_> {
        Leaf::new(&self.pool, node.off)
    }

    /// Call `f` with the value of `key`, if present; returns whether it was.
    pub fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        if key.len() > MAX_KEY {
            return Ok(false);
        }
        let fp = fingerprint::of(key);
        let idx = self.index.read();
        let node = idx.find(key).1;
        let _g = node.lock.read();
        let leaf = self.leaf(node);
        match leaf.find(key, fp, leaf.bitmap())? {
            Some((_, e)) => {
                f(leaf.value(&e)?.as_slice());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Insert or replace.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        pmkv_core::check_sizes(key, Some(value), MAX_KEY, MAX_VALUE)?;
        self.pool.check_writable()?;
        self.batches.check_writes()?;
        let fp = fingerprint::of(key);
        loop {
            {
                let idx = self.index.read();
                let node = idx.find(key).1;
                let _g = node.lock.write();
                if let Put::Done(new) = self.put_in_leaf(node, key, value, fp)? {
                    if new {
                        self.count.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(());
                }
            }
            // The leaf is full: split it with the index write-locked (no other operation
            // is in any leaf then), and write into the half that takes the key.
            let mut idx = self.index.write();
            let node = idx.find(key).1.clone();
            if self.leaf(&node).bitmap() & SLOTS_MASK == SLOTS_MASK {
                self.split(&mut idx, &node)?;
            }
            let node = idx.find(key).1;
            if let Put::Done(new) = self.put_in_leaf(node, key, value, fp)? {
                if new {
                    self.count.fetch_add(1, Ordering::Relaxed);
                }
                return Ok(());
            }
        }
    }

    /// Insert or update `key` in the leaf of `node`, whose lock (or the index's write
    /// lock) the caller holds exclusively.
    fn put_in_leaf(&self, node: &LeafNode, key: &[u8], value: &[u8], fp: u8) -> Result<Put> {
        let leaf = self.leaf(node);
        let bm = leaf.bitmap();
        let old = leaf.find(key, fp, bm)?;
        let free = !bm & SLOTS_MASK;
        if free == 0 {
            return Ok(Put::Full);
        }
        let slot = free.trailing_zeros() as usize;
        let (kw, new_key_obj) = match &old {
            Some((_, e)) => (e.key_words(), None),
            None if key.len() <= INLINE_KEY => (inline_key(key), None),
            None => {
                let o = write_object(&self.pool, &self.alloc, KEY, key)?;
                (object_key(o, key.len()), Some(o))
            }
        };
        let (vw, vmeta) = if value.len() <= INLINE_VALUE {
            inline_value(value)
        } else {
            match write_object(&self.pool, &self.alloc, VALUE, value) {
                Ok(o) => object_value(o, value.len()),
                Err(e) => {
                    if let Some(k) = new_key_obj {
                        self.alloc.free(k);
                    }
                    return Err(e);
                }
            }
        };
        node.dirty.store(true, Ordering::Relaxed);
        leaf.write_entry(slot, &Entry::new(kw, vw, vmeta), fp);
        self.pool.fence();
        let mut nbm = bm | 1 << slot;
        if let Some((j, _)) = old {
            nbm &= !(1 << j);
        }
        leaf.commit_bitmap(nbm);
        if let Some((_, e)) = old {
            if let Some(v) = e.value_obj() {
                self.alloc.free(v);
            }
        }
        Ok(Put::Done(old.is_none()))
    }

    /// Remove `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        if key.len() > MAX_KEY {
            return Ok(false);
        }
        self.pool.check_writable()?;
        self.batches.check_writes()?;
        let fp = fingerprint::of(key);
        let emptied: Box<[u8]> = {
            let idx = self.index.read();
            let (low, node) = idx.find(key);
            let _g = node.lock.write();
            let leaf = self.leaf(node);
            let bm = leaf.bitmap();
            let Some((slot, e)) = leaf.find(key, fp, bm)? else { return Ok(false) };
            node.dirty.store(true, Ordering::Relaxed);
            let nbm = bm & !(1 << slot);
            leaf.commit_bitmap(nbm);
            for o in [e.key_obj(), e.value_obj()].into_iter().flatten() {
                self.alloc.free(o);
            }
            self.count.fetch_sub(1, Ordering::Relaxed);
            if nbm & SLOTS_MASK != 0 || node.off == self.head {
                return Ok(true);
            }
            low.into()
        };
        // The leaf is empty: unlink it, unless a write filled it again meanwhile.
        let mut idx = self.index.write();
        if let Some(node) = idx.get(&emptied) {
            if self.leaf(node).bitmap() & SLOTS_MASK == 0 {
                self.unlink(&mut idx, &emptied)?;
            }
        }
        Ok(true)
    }

    /// Split the full leaf of `node` (paper §4, SplitLeaf): its upper half moves to
    /// a new leaf, indexed by the smallest moved key. The index is write-locked.
    fn split(&self, idx: &mut Index, node: &Arc<LeafNode>) -> Result<()> {
        let leaf = self.leaf(node);
        let keys = leaf.sorted_entries(|_| true)?;
        let half = keys.len() / 2;
        let moved = keys[half..].iter().fold(0u64, |m, (_, s, _)| m | 1 << s);
        let low: Box<[u8]> = keys[half].0.as_slice().into();
        let new = micro_log::split_leaf(self.logs(), &self.alloc, node.off, moved)?;
        node.dirty.store(true, Ordering::Relaxed);
        idx.insert(low, LeafNode::new(new, true));
        Ok(())
    }

    /// Unlink the empty leaf whose low fence is `low` (paper §4, the delete of an emptied leaf). The
    /// index is write-locked.
    pub(crate) fn unlink(&self, idx: &mut Index, low: &[u8]) -> Result<()> {
        let (Some(prev), Some(node)) = (idx.prev(low), idx.get(low)) else { return Ok(()) };
        micro_log::unlink_leaf(self.logs(), &self.alloc, prev.off, node.off)?;
        prev.dirty.store(true, Ordering::Relaxed);
        idx.remove(low);
        Ok(())
    }

    /// Visit the records of `range` in order, or in reverse, until `visit` returns false
    /// or `limit` records were visited. Each leaf is read under its shared lock, the
    /// entries in the range read once and sorted (the leaves are unsorted), and visited.
    pub fn scan(&self, range: &KeyRange, limit: usize, reverse: bool, visit: Visitor<'_>) -> Result<()> {
        let (start, end) = (range.start_bound(), range.end_bound());
        let after_start = |k: &[u8]| range.after_start(k);
        let before_end = |k: &[u8]| range.before_end(k);
        let bound_key = |b: Bound<&[u8]>| match b {
            Bound::Included(k) | Bound::Excluded(k) => Some(k.to_vec()),
            Bound::Unbounded => None,
        };
        let mut left = limit;
        if left == 0 {
            return Ok(());
        }
        let idx = self.index.read();
        let leaves: Box<dyn Iterator<Item = (&[u8], &Arc<LeafNode>)>> = if reverse {
            Box::new(idx.back_from(bound_key(end).as_deref()))
        } else {
            Box::new(idx.from(bound_key(start).as_deref()))
        };
        for (low, node) in leaves {
            if !reverse && !before_end(low) {
                break;
            }
            let _g = node.lock.read();
            let leaf = self.leaf(node);
            let mut keys = leaf.sorted_entries(|k| after_start(k) && before_end(k))?;
            if reverse {
                keys.reverse();
            }
            for (k, _, e) in keys {
                if !visit(k.as_slice(), leaf.value(&e)?.as_slice()) {
                    return Ok(());
                }
                left -= 1;
                if left == 0 {
                    return Ok(());
                }
            }
            if reverse && !after_start(low) {
                break;
            }
        }
        Ok(())
    }

    /// Make every acknowledged write durable (they are when acknowledged in `adr` and
    /// `eadr`; `msync` pools sync here).
    pub fn sync(&self) -> Result<()> {
        Ok(self.pool.sync()?)
    }

    /// Seal, release the DRAM state and close the pool, marking it clean.
    pub fn close(mut self) -> Result<()> {
        self.seal();
        self.closed = true;
        pmkv_core::close_after(self.pool.clone(), || drop(self))
    }
}

impl Drop for FpTree {
    /// Seal unless `close` did, or a panic is unwinding or has poisoned the pool (it is
    /// then not marked clean and the next open recovers, so nothing should be written).
    fn drop(&mut self) {
        if !self.closed && !std::thread::panicking() && !self.pool.is_poisoned() {
            self.seal();
        }
    }
}
