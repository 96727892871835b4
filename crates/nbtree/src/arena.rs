//! Where the DRAM layer lives: leaves and inner nodes in slots carved from 2 MiB blocks on
//! huge pages (`pmkv_substrate::huge`), recycled through a free list ([`Slab`]).
//!
//! Why not `Box`: a search's DRAM misses are its inner nodes and its leaf's metadata, and
//! spread over glibc's heap in 4 KiB pages each is a TLB miss too (a two-level page walk
//! in a VM). Tens of thousands of leaves and nodes in a few huge pages cost a few TLB
//! entries (measured: about 6% of a search at 4M keys for the leaves alone). Both are
//! allocated once per SMO (every ~30 inserts) and freed through the epoch scheme, so one
//! mutex is no bottleneck.
//!
//! Each slab's blocks come from its own [`HugeSupply`]: from a slab's third block on, a
//! helper thread has the next one ready with its pages faulted in, so an insert that
//! needs a new leaf does not pay the first touch of a huge page (~5 ms here; see HART's
//! node arena, which does the same).

use parking_lot::Mutex;
use pmkv_substrate::huge::{HugeBlock, HugeSupply};

/// Bytes of each block.
const BLOCK: usize = pmkv_substrate::huge::HUGE_PAGE;

struct Inner<T> {
    /// Free slots, threaded through the slots themselves (each one's first word names the
    /// next; null ends the list), so freeing never allocates. (HART's node arena kept a
    /// `Vec` of free slots, whose regrowth during mass deletes cost ~5% of a delete.)
    free: *mut T,
    bump: *mut T,
    left: usize,
    blocks: Vec<HugeBlock>,
}

/// Slots for values of one type (see the module doc). Shared by the tree and the deferred
/// frees of retired leaves and nodes, which may run after the tree is gone: held in an
/// `Arc`.
pub(crate) struct Slab<T> {
    inner: Mutex<Inner<T>>,
    supply: HugeSupply,
}

// SAFETY: the raw pointers name slots of blocks the arena owns (released only when it
// drops); the bookkeeping is touched only under the mutex, a slot's memory only while it
// is free or by the leaf's owner.
unsafe impl<T: Send> Send for Slab<T> {}
// SAFETY: a shared `&Slab` only locks the mutex to touch the free list and bump pointer, and hands
// each slot to one caller at a time; the blocks are freed only when the slab drops, so sharing it
// between threads is sound for any `T: Send`.
unsafe impl<T: Send> Sync for Slab<T> {}

impl<T> Slab<T> {
    pub(crate) fn new() -> Slab<T> {
        const {
            assert!(
                std::mem::size_of::<T>() >= std::mem::size_of::<*mut T>()
                    && std::mem::align_of::<T>() >= std::mem::align_of::<*mut T>(),
                "a free slot holds the free list's link"
            )
        };
        Slab {
            inner: Mutex::new(Inner {
                free: std::ptr::null_mut(),
                bump: std::ptr::null_mut(),
                left: 0,
                blocks: Vec::new(),
            }),
            supply: HugeSupply::new(1),
        }
    }

    /// Move `l` into a slot; it lives there until [`Slab::free`].
    pub(crate) fn alloc(&self, l: T) -> *mut T {
        let mut a = self.inner.lock();
        let slot = match std::ptr::NonNull::new(a.free) {
            Some(p) => {
                // SAFETY: a free slot of the list: its first word names the next (`free`).
                a.free = unsafe { p.as_ptr().cast::<*mut T>().read() };
                p.as_ptr()
            }
            None => {
                if a.left == 0 {
                    let Some(b) = self.supply.take() else {
                        std::alloc::handle_alloc_error(std::alloc::Layout::new::<[u8; BLOCK]>())
                    };
                    a.bump = b.as_ptr() as *mut T;
                    a.left = b.len() / std::mem::size_of::<T>();
                    a.blocks.push(b);
                }
                let p = a.bump;
                // SAFETY: `left > 0` slots remain in the block after `p`.
                a.bump = unsafe { p.add(1) };
                a.left -= 1;
                p
            }
        };
        drop(a);
        // SAFETY: a free slot of this slab (block memory, aligned for `T`: blocks are
        // 2 MiB-aligned and slots a multiple of `T`'s alignment apart), owned by nobody.
        unsafe { slot.write(l) };
        slot
    }

    /// Drop the value at `p` and keep its slot for reuse.
    ///
    /// # Safety
    ///
    /// `p` came from [`Slab::alloc`] of this slab, is freed once, and nothing uses it
    /// afterwards.
    pub(crate) unsafe fn free(&self, p: *mut T) {
        // SAFETY: the caller's contract: a live value nobody uses any more.
        unsafe { std::ptr::drop_in_place(p) };
        let mut a = self.inner.lock();
        // SAFETY: the slot is the slab's again, large and aligned enough for the link (the
        // assertion in `new`).
        unsafe { p.cast::<*mut T>().write(a.free) };
        a.free = p;
    }

    /// Bytes held from the system.
    pub(crate) fn reserved(&self) -> u64 {
        self.inner.lock().blocks.iter().map(|b| b.len() as u64).sum::<u64>() + self.supply.spare_bytes() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leaf::{Leaf, LeafArena};
    use std::sync::Arc;

    #[test]
    fn slots_are_aligned_distinct_and_reused() {
        let a: LeafArena = Slab::new();
        let n = 3 * (BLOCK / std::mem::size_of::<Leaf>()) + 5; // spans four blocks
        let mut ps: Vec<*mut Leaf> = (0..n).map(|i| a.alloc(Leaf::new(i as u64, Arc::from(&b""[..])))).collect();
        assert!(ps.iter().all(|&p| (p as usize).is_multiple_of(std::mem::align_of::<Leaf>())));
        // SAFETY: live leaves of this arena.
        assert!(ps.iter().enumerate().all(|(i, &p)| unsafe { &*p }.block == i as u64), "no slot was handed out twice");
        // Four blocks in use, and at most one made ahead by the supply.
        let blocks = |a: &LeafArena| a.inner.lock().blocks.len();
        assert_eq!(blocks(&a), 4);
        assert!((4..=5).contains(&(a.reserved() / BLOCK as u64)), "{}", a.reserved());
        let p = ps.pop().unwrap();
        // SAFETY: from this arena, freed once, not used again.
        unsafe { a.free(p) };
        let q = a.alloc(Leaf::new(7, Arc::from(&b"x"[..])));
        assert_eq!(p, q);
        assert_eq!(blocks(&a), 4, "a freed slot is reused before a new block");
        for p in ps.into_iter().chain([q]) {
            // SAFETY: each pointer came from `a.alloc`, is freed exactly once in this loop (the
            // popped `p` was freed above and reallocated as `q`), and none is read afterwards.
            unsafe { a.free(p) };
        }
    }
}
