//! Micro-logs (paper §4): the two persistent logs that make a leaf split and a leaf
//! unlink crash-safe and leak-free, and their recovery.
//!
//! Both live in line 1 of the superblock (one of each suffices: structural changes run
//! under the index's write lock, one at a time; the paper keeps an array of them for its
//! concurrent version). Each is two words, written in order, each persisted before the
//! next store: a log is *in use* while its second word is non-zero, and its first word
//! is meaningful only then.
//!
//! **Split** ([`split_leaf`], the paper's SplitLeaf). The new leaf is written whole —
//! the upper half of the entries, in their slots, its bitmap, the old leaf's `next` — and
//! persisted while still only reserved, then named in the log, then published, then
//! linked (`old.next = new`, the split's commit), then the moved entries are dropped from
//! the old leaf's bitmap (one store), then the log is reset. Recovery: a log naming a new
//! leaf that the old one links to is finished (the old leaf's bitmap loses the new leaf's
//! slots: idempotent); one naming a leaf not linked yet is undone (the new leaf is freed
//! if it was published). Between the link and the bitmap store a key is in both leaves;
//! nobody reads PM then (the index is write-locked) and recovery removes the copy.
//!
//! **Delete** ([`unlink_leaf`], the paper's delete of an emptied leaf). An empty leaf is unlinked:
//! predecessor and leaf named in the log, `prev.next = leaf.next` (the commit), the leaf
//! freed, the log reset. Recovery redoes whichever of the unlink and the free had not
//! happened.

use crate::error::{corrupt, Result};
use crate::layout::*;
use crate::leaf::{commit_word, load, Leaf};
use pmkv_substrate::epalloc::EpAlloc;
use pmkv_substrate::Pool;

/// The logs of the superblock at `sb`.
#[derive(Clone, Copy)]
pub(crate) struct MicroLogs<'p> {
    pub(crate) pool: &'p Pool,
    pub(crate) sb: u64,
}

/// What recovery did with the logs.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Replayed {
    pub(crate) forward: u64,
    pub(crate) back: u64,
}

impl MicroLogs<'_> {
    /// Whether neither log is in use.
    pub(crate) fn idle(&self) -> bool {
        load(self.pool, self.sb + SB_SPLIT_NEW) == 0 && load(self.pool, self.sb + SB_DEL_LEAF) == 0
    }

    /// Whether `off` is a used leaf object.
    fn is_leaf(alloc: &EpAlloc, off: u64) -> bool {
        off != 0 && alloc.type_of(off) == Some(LEAF) && alloc.is_used(off)
    }

    /// Finish or undo what the logs say was interrupted, then reset them. Idempotent: a
    /// crash during it leaves the logs for the next recovery to replay again.
    pub(crate) fn recover(&self, alloc: &EpAlloc) -> Result<Replayed> {
        let pool = self.pool;
        let mut r = Replayed::default();
        let new = load(pool, self.sb + SB_SPLIT_NEW);
        if new != 0 {
            let cur = load(pool, self.sb + SB_SPLIT_CUR);
            if !Self::is_leaf(alloc, cur) {
                return Err(corrupt(format!("the split log names {cur:#x}, which is not a leaf")));
            }
            let old = Leaf::new(pool, cur);
            if old.next() == new {
                if !Self::is_leaf(alloc, new) {
                    return Err(corrupt(format!("leaf {cur:#x} links the split's new leaf {new:#x}, not a leaf")));
                }
                let moved = Leaf::new(pool, new).bitmap();
                let bm = old.bitmap();
                if bm & moved != 0 {
                    old.commit_bitmap(bm & !moved);
                }
                r.forward += 1;
            } else {
                if Self::is_leaf(alloc, new) {
                    alloc.try_free(new)?;
                }
                r.back += 1;
            }
            commit_word(pool, self.sb + SB_SPLIT_NEW, 0);
        }
        let leaf = load(pool, self.sb + SB_DEL_LEAF);
        if leaf != 0 {
            let prev = load(pool, self.sb + SB_DEL_PREV);
            if !Self::is_leaf(alloc, prev) {
                return Err(corrupt(format!("the delete log names {prev:#x}, which is not a leaf")));
            }
            let p = Leaf::new(pool, prev);
            if p.next() == leaf {
                if !Self::is_leaf(alloc, leaf) {
                    return Err(corrupt(format!("leaf {prev:#x} links {leaf:#x}, which is not a leaf")));
                }
                p.set_next(Leaf::new(pool, leaf).next());
            }
            if Self::is_leaf(alloc, leaf) {
                alloc.try_free(leaf)?;
            }
            r.forward += 1;
            commit_word(pool, self.sb + SB_DEL_LEAF, 0);
        }
        Ok(r)
    }
}

/// Split the leaf at `cur`: move the entries of the slots in `moved` to a new leaf linked
/// after it (see the module doc). Returns the new leaf. The caller holds the index's
/// write lock, so nothing else reads or writes either leaf or the logs.
pub(crate) fn split_leaf(logs: MicroLogs<'_>, alloc: &EpAlloc, cur: u64, moved: u64) -> Result<u64> {
    let pool = logs.pool;
    let old = Leaf::new(pool, cur);
    let new = alloc.alloc(LEAF, LEAF_SIZE)?;
    // SAFETY: the log words are written by structural changes only, serialised by the
    // index's write lock.
    unsafe { pool.store_u64(logs.sb + SB_SPLIT_CUR, cur) };
    pool.flush_off(logs.sb + SB_SPLIT_CUR, 8);
    let src = old.image();
    let mut img = vec![0u8; LEAF_SIZE];
    img[L_BITMAP as usize..L_BITMAP as usize + 8].copy_from_slice(&moved.to_le_bytes());
    img[L_NEXT as usize..L_NEXT as usize + 8].copy_from_slice(&old.next().to_le_bytes());
    let mut m = moved;
    while m != 0 {
        let slot = m.trailing_zeros() as usize;
        m &= m - 1;
        let fp = L_FPS as usize + slot;
        img[fp] = src[fp];
        let e = entry_off(0, slot) as usize;
        img[e..e + ENTRY as usize].copy_from_slice(&src[e..e + ENTRY as usize]);
    }
    // SAFETY: a reserved leaf object of LEAF_SIZE bytes that no one else can reach.
    unsafe { std::ptr::copy_nonoverlapping(img.as_ptr(), pool.at::<u8>(new), LEAF_SIZE) };
    pool.persist_off(new, LEAF_SIZE);
    commit_word(pool, logs.sb + SB_SPLIT_NEW, new);
    if let Err(e) = alloc.try_publish(new) {
        commit_word(pool, logs.sb + SB_SPLIT_NEW, 0);
        alloc.unreserve(new);
        return Err(e.into());
    }
    old.set_next(new);
    old.commit_bitmap(old.bitmap() & !moved);
    commit_word(pool, logs.sb + SB_SPLIT_NEW, 0);
    Ok(new)
}

/// Unlink the empty leaf at `leaf` from after `prev` and free it (see the module doc).
/// The caller holds the index's write lock.
pub(crate) fn unlink_leaf(logs: MicroLogs<'_>, alloc: &EpAlloc, prev: u64, leaf: u64) -> Result<()> {
    let pool = logs.pool;
    commit_word(pool, logs.sb + SB_DEL_PREV, prev);
    commit_word(pool, logs.sb + SB_DEL_LEAF, leaf);
    Leaf::new(pool, prev).set_next(Leaf::new(pool, leaf).next());
    alloc.try_free(leaf)?;
    commit_word(pool, logs.sb + SB_DEL_LEAF, 0);
    Ok(())
}
