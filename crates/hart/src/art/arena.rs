//! The node arena: where a HART's ART nodes live in DRAM.
//!
//! ART nodes are small, numerous and short-lived (every insert may grow one, every delete
//! may shrink or free one), so a general-purpose allocator is a poor fit: glibc spends a
//! good part of a Dictionary delete in `free` and in the consolidation that mass frees
//! trigger later, and its 16-byte chunk headers put a 64-byte Node4 across two cache
//! lines half of the time. The arena instead carves nodes of one kind out of large
//! blocks, in slots rounded up to whole cache lines (a Node4 is exactly one line), and
//! keeps freed nodes on a per-kind free list for the next allocation of that kind.
//!
//! * **Concurrency.** ARTs are changed in parallel under their own locks, so the arena is
//!   shared: it has 16 shards, each with one mutex-protected pool per node kind, and a
//!   thread uses the shard picked by its thread index. Uncontended, a lock costs two
//!   atomic instructions — less than a `malloc`/`free` pair.
//! * **Block sizes.** A pool's next block is half of what it holds already, between
//!   64 KiB and 2 MiB, so the space not yet carved stays below a third of the pool's
//!   nodes (small HARTs stay small). 2 MiB blocks are `pmkv_substrate::huge::HugeBlock`s,
//!   on huge pages where the kernel gives them: a large tree's nodes then cost a few TLB
//!   entries instead of thousands (expensive misses under virtualisation). (They were
//!   `std::alloc` blocks advised afterwards, which got no huge page: the allocator zeroed
//!   them first, see `huge`.)
//! * **First touch off the inserting thread.** The 2 MiB blocks come from a
//!   [`HugeSupply`](pmkv_substrate::huge::HugeSupply) that keeps two ready with their
//!   pages faulted in, made by a helper thread: a fresh huge page cost its first toucher
//!   ~5 ms here (zeroing, compaction, the host backing it), 70–100 ns of every insert at
//!   16M keys (docs/results/hart-growth.md).
//! * **Memory.** Nodes are returned to the free lists, not to the system; the blocks are
//!   released when the HART closes. [`NodeArena::reserved`] reports the bytes held
//!   (SPEC H9 accounts them against the nodes in use).

use crate::art_lock::ShortLock;
use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const SHARDS: usize = 16;
/// First blocks are this large (small trees stay small).
const SMALL_BLOCK: usize = 64 << 10;
/// Largest block: one huge page.
const HUGE_BLOCK: usize = pmkv_substrate::huge::HUGE_PAGE;

/// What the arena needs to know of a node kind: which of its pools holds the kind's slots,
/// and their size. The node module implements it for its `NodeType`, so the arena depends
/// on no node layout (and the node code, which allocates from the arena, does not form a
/// cycle with it).
pub(crate) trait SlotKind: Copy {
    /// The pool of this kind, below [`KINDS`].
    fn pool(self) -> usize;
    /// Bytes of one slot: line-aligned, at least one line (a free slot links the next).
    fn slot_bytes(self) -> usize;
}

/// Node kinds the arena keeps apart (ART's four).
pub(crate) const KINDS: usize = 4;

/// Free nodes and the block being carved, for one node kind.
struct KindPool {
    /// The free slots, as a list threaded through the slots themselves: each free slot's
    /// first word holds the next free slot (null ends the list). A `Vec` of pointers
    /// instead grew as mass deletes freed nodes, and its reallocations (a copy, and the
    /// kernel zeroing the new pages on first touch) cost a Dictionary delete ~5 %.
    free: *mut u8,
    /// Next uncarved byte of the current block, and how many bytes follow it.
    bump: *mut u8,
    left: usize,
    blocks: Vec<(NonNull<u8>, Layout)>,
    huge: Vec<pmkv_substrate::huge::HugeBlock>,
}

#[repr(align(64))]
struct Shard([ShortLock<KindPool>; KINDS]);

pub(crate) struct NodeArena {
    shards: Box<[Shard]>,
    /// Where the 2 MiB blocks come from (made ahead; see the module doc).
    supply: pmkv_substrate::huge::HugeSupply,
    reserved: AtomicU64,
    /// Nodes handed out and not returned (unit tests check that removals leak none).
    #[cfg(test)]
    live: std::sync::atomic::AtomicI64,
}

// SAFETY: the raw pointers in the pools name heap blocks the arena owns (released only in
// `drop`, which has `&mut self`); the arena reads and writes its bookkeeping only under
// the pools' mutexes or through atomics, and touches a slot's memory only while it is
// free (zeroing it before handing it out); slots in use are accessed by the node code
// under its own contracts (the owning ART's lock). Nothing is tied to the thread that
// allocated it.
unsafe impl Send for NodeArena {}
// SAFETY: as above: `&self` methods lock a pool's mutex or use atomics.
unsafe impl Sync for NodeArena {}

impl Default for NodeArena {
    fn default() -> Self {
        let pool = || {
            ShortLock::new(KindPool {
                free: std::ptr::null_mut(),
                bump: std::ptr::null_mut(),
                left: 0,
                blocks: Vec::new(),
                huge: Vec::new(),
            })
        };
        NodeArena {
            shards: (0..SHARDS).map(|_| Shard([pool(), pool(), pool(), pool()])).collect(),
            supply: pmkv_substrate::huge::HugeSupply::new(2),
            reserved: AtomicU64::new(0),
            #[cfg(test)]
            live: std::sync::atomic::AtomicI64::new(0),
        }
    }
}

fn my_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|s| *s)
}

impl NodeArena {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Bytes held from the system (nodes in use, free nodes, uncarved block space, and
    /// the blocks made ahead).
    pub(crate) fn reserved(&self) -> u64 {
        self.reserved.load(Ordering::Relaxed) + self.supply.spare_bytes() as u64
    }

    /// Nodes allocated and not freed.
    #[cfg(test)]
    pub(crate) fn live(&self) -> i64 {
        self.live.load(Ordering::Relaxed)
    }

    /// A zeroed, line-aligned slot for a node of kind `t`.
    pub(crate) fn alloc(&self, t: impl SlotKind) -> NonNull<u8> {
        #[cfg(test)]
        self.live.fetch_add(1, Ordering::Relaxed);
        let size = t.slot_bytes();
        let mut pool = self.shards[my_shard()].0[t.pool()].lock();
        if let Some(p) = NonNull::new(pool.free) {
            // SAFETY: a free slot of the list, whose first word names the next one (`free`).
            pool.free = unsafe { p.as_ptr().cast::<*mut u8>().read() };
            drop(pool);
            // SAFETY: a free slot of `size` bytes owned by the arena, off the list now.
            unsafe { std::ptr::write_bytes(p.as_ptr(), 0, size) };
            return p;
        }
        if pool.left < size {
            self.new_block(&mut pool, size);
        }
        let p = pool.bump;
        // SAFETY: `size <= left`: the slot and the new bump stay inside the block.
        pool.bump = unsafe { p.add(size) };
        pool.left -= size;
        // Fresh block memory is zeroed (alloc_zeroed) and never handed out before.
        NonNull::new(p).expect("block memory is non-null")
    }

    /// Return the slot of a node of kind `t` for reuse.
    ///
    /// # Safety
    ///
    /// `p` came from [`NodeArena::alloc`] of this arena with the same kind `t`, is
    /// returned once, and nothing reads or writes it afterwards (the arena hands it out
    /// again, and releases its block when dropped).
    pub(crate) unsafe fn free(&self, t: impl SlotKind, p: NonNull<u8>) {
        #[cfg(test)]
        self.live.fetch_sub(1, Ordering::Relaxed);
        let mut pool = self.shards[my_shard()].0[t.pool()].lock();
        // SAFETY: the slot is the arena's again (the contract), line-aligned and at least
        // 64 bytes: its first word links it into the free list.
        unsafe { p.as_ptr().cast::<*mut u8>().write(pool.free) };
        pool.free = p.as_ptr();
    }

    fn new_block(&self, pool: &mut KindPool, size: usize) {
        let total: usize =
            pool.blocks.iter().map(|(_, l)| l.size()).sum::<usize>() + pool.huge.iter().map(|b| b.len()).sum::<usize>();
        let len = (total / 2).clamp(SMALL_BLOCK.max(32 * size), HUGE_BLOCK);
        let raw = match (len == HUGE_BLOCK).then(|| self.supply.take()).flatten() {
            Some(b) => {
                let raw = b.as_ptr();
                pool.huge.push(b);
                raw
            }
            None => {
                let layout = Layout::from_size_align(len, 64).expect("valid block layout");
                // SAFETY: `layout` has a non-zero size (len >= SMALL_BLOCK), the one
                // requirement of `alloc_zeroed`; a null result is handled just below.
                let raw = unsafe { std::alloc::alloc_zeroed(layout) };
                let Some(block) = NonNull::new(raw) else { std::alloc::handle_alloc_error(layout) };
                pool.blocks.push((block, layout));
                raw
            }
        };
        pool.bump = raw;
        pool.left = len;
        self.reserved.fetch_add(len as u64, Ordering::Relaxed);
    }
}

impl Drop for NodeArena {
    fn drop(&mut self) {
        for shard in self.shards.iter() {
            for pool in &shard.0 {
                let mut pool = pool.lock();
                for (block, layout) in pool.blocks.drain(..) {
                    // SAFETY: allocated in `new_block` with this layout, released once.
                    unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
                }
                pool.huge.clear(); // unmapped on drop
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::art::node::NodeType;

    #[test]
    fn slots_are_aligned_zeroed_reused_and_accounted() {
        let arena = NodeArena::new();
        let t = NodeType::N16;
        let mut live: Vec<NonNull<u8>> = (0..20_000).map(|_| arena.alloc(t)).collect();
        let mut addrs: Vec<usize> = live.iter().map(|p| p.as_ptr() as usize).collect();
        assert!(addrs.iter().all(|a| a % 64 == 0), "line-aligned slots");
        addrs.sort_unstable();
        assert!(addrs.windows(2).all(|w| w[1] - w[0] >= t.slot_bytes()), "slots do not overlap");
        // Bounded overhead: blocks grow by half of what the pool holds.
        let used = (20_000 * t.slot_bytes()) as u64;
        // (Plus up to the two 2 MiB blocks the supply makes ahead.)
        assert!(arena.reserved() >= used && arena.reserved() <= used * 3 / 2 + (6 << 20), "{}", arena.reserved());
        // A freed slot is handed out again, zeroed.
        let p = live.pop().unwrap();
        // SAFETY: a slot of `slot_bytes` bytes owned by this test.
        unsafe { std::ptr::write_bytes(p.as_ptr(), 0xab, t.slot_bytes()) };
        // SAFETY: `p` came from this arena's `alloc(t)` and is not accessed again.
        unsafe { arena.free(t, p) };
        let before = arena.reserved();
        let q = arena.alloc(t);
        assert_eq!(q, p);
        // SAFETY: `q` is a live slot of `slot_bytes` bytes this test owns (just allocated),
        // and nothing writes it while the slice is read.
        assert!(unsafe { std::slice::from_raw_parts(q.as_ptr(), t.slot_bytes()) }.iter().all(|&b| b == 0));
        assert_eq!(arena.reserved(), before);
    }
}
