//! # EPallocator (SPEC P7): persistent allocation that cannot leak
//!
//! HART's "enhanced persistent memory allocator" (paper §III.A points 4–6, Algorithms 2
//! and 6, Fig. 2 and 3), generalised to any number of object types and 25 size classes
//! from 8 bytes to 4 KiB, with extents for larger objects, and made concurrent.
//!
//! * [`chunk`] — the 56-slot memory chunk and its crash-atomic 8-byte header word (Fig. 2);
//! * [`size_class`] — classes and chunk geometry;
//! * [`recycle_log`] — EPRecycle (Algorithm 6) with the `PCurrent`/`PPrev` micro-log and
//!   all of its recovery cases;
//! * [`extent`] — objects above 4 KiB;
//! * `space` — free space, which is *implicit*: whatever no persistent list reaches;
//! * `index` — DRAM offset → chunk index (the paper's `MemChunkOf`);
//! * `recovery` — `open`: log recovery and the rebuild of all DRAM state;
//! * [`checker`] — proves the pool's allocator state consistent and leak-free.
//!
//! ## Protocol
//!
//! An object's life: [`EpAlloc::alloc`] *reserves* a free slot in DRAM (no PM write; a
//! crash forgets the reservation), the engine writes and persists the object's content,
//! then [`EpAlloc::publish`] sets the slot's bit with one persisted 8-byte store: only now
//! is the object *used* (SPEC P7, paper point 6). [`EpAlloc::free`] resets the bit and, if
//! the chunk became empty, recycles it (Algorithm 6). A reserved slot that will never be
//! published goes back with [`EpAlloc::unreserve`].
//!
//! ## Ownership of the heap
//!
//! After [`EpAlloc::create`] every byte of the pool heap above the allocator's root block
//! belongs to the allocator: at open, heap bytes that no chunk list reaches are free
//! space. Engines therefore obtain *all* their PM through [`EpAlloc::alloc`] (any size,
//! including their own superblocks and logs, published like any object) and must not call
//! [`Pool::take_heap`] after `create` (before `create` is fine: that space lies below the
//! allocator's heap). Engines use pool roots 1..7; root 0 is the allocator's.
//!
//! ## Concurrency
//!
//! Each list has, per shard (threads are spread over 16 shards), a *current chunk*: the
//! allocation fast path is one compare-and-swap on that chunk's DRAM reservation word, no
//! lock. `publish` and `free` are one compare-and-swap on the PM header word plus a
//! persist, no lock. A list's mutex is taken only to change the list: a new chunk (once per
//! 56 allocations), a chunk that becomes non-full or empty, extents.

pub mod checker;
pub mod chunk;
pub mod extent;
mod index;
pub mod recovery;
pub mod recycle_log;
pub mod root;
pub mod size_class;
mod space;

pub use checker::CheckReport;
pub use recovery::RecoveryReport;
pub use recycle_log::RecycleCase;
pub use size_class::{class_of, CLASSES, MAX_CLASS_SIZE, NUM_CLASSES, SLOTS};

use crate::error::{PoolError, Result};
use crate::pool::Pool;
use chunk::BITMAP_MASK;
use extent::{EXT_HEAD, EXT_RESERVED, EXT_USED, PAGE};
use index::{Index, Item, LOCKED};
use parking_lot::{Mutex, RwLock};
use root::{Entry, Root, DIR_CAP};
use size_class::{Geometry, EXTENT_CLASS, GEOMETRY};
use space::FreeSpace;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// The pool root slot that holds the allocator's root block; engines use 1..7.
pub const EPALLOC_ROOT: usize = 0;

/// An object type chosen by the engine (e.g. HART: LEAF = 1, VALUE = 2, KEY = 3). Every
/// (type, size class) pair has its own chunk list, so recovery can walk the objects of one
/// type (HART Algorithm 7) without looking at any other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TypeId(pub u16);

/// Shards of the per-list current chunk. A power of two.
const SHARDS: usize = 16;
/// Types below this get a lock-free lookup table for their lists.
const DIRECT_TYPES: usize = 256;
const KINDS: usize = NUM_CLASSES + 1;

#[repr(align(64))]
struct Padded<T>(T);

pub(crate) fn pack(id: u32, gen: u32) -> u64 {
    (gen as u64) << 32 | id as u64
}
fn unpack(p: u64) -> (u32, u32) {
    (p as u32, (p >> 32) as u32)
}

/// This thread's shard, assigned round robin at its first allocation.
fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|s| *s)
}

/// DRAM state of one chunk list (one directory entry).
pub(crate) struct ListState {
    pub idx: u32,
    pub entry: Entry,
    pub ty: TypeId,
    /// Class code: index into [`CLASSES`], or [`EXTENT_CLASS`].
    pub class: u8,
    /// Chunk geometry; `None` for an extent list.
    pub geo: Option<Geometry>,
    /// Current chunk per shard (`pack(id, gen)`, 0 = none).
    cur: Box<[Padded<AtomicU64>]>,
    pub inner: Mutex<ListInner>,
}

/// The part of a list changed only under its lock.
#[derive(Default)]
pub(crate) struct ListInner {
    /// First item of the DRAM mirror of the persistent list (same order), 0 = empty.
    pub head: u32,
    /// Chunks that may have free slots and are nobody's current chunk (`pack(id, gen)`).
    pub partial: Vec<u64>,
    /// Items on the list.
    pub count: u64,
}

impl ListState {
    pub(crate) fn new(idx: usize, entry: Entry, ty: TypeId, class: u8) -> ListState {
        ListState {
            idx: idx as u32,
            entry,
            ty,
            class,
            geo: (class != EXTENT_CLASS).then(|| GEOMETRY[class as usize]),
            cur: (0..SHARDS).map(|_| Padded(AtomicU64::new(0))).collect(),
            inner: Mutex::new(ListInner::default()),
        }
    }

    /// Whether `p` is some shard's current chunk; the calling thread's own shard, the
    /// usual answer, is looked at first.
    fn is_cur(&self, p: u64) -> bool {
        self.cur[shard()].0.load(Ordering::Acquire) == p || self.cur.iter().any(|c| c.0.load(Ordering::Acquire) == p)
    }
}

/// Where an object offset lives.
struct Loc<'a> {
    id: u32,
    it: &'a Item,
    list: &'a ListState,
    /// Offset of the chunk or extent.
    base: u64,
    /// Slot index in the chunk; `None` for an extent.
    slot: Option<usize>,
}

/// The allocator of one pool. `Send + Sync`; share it through an `Arc` or references.
pub struct EpAlloc {
    pub(crate) pool: Arc<Pool>,
    pub(crate) root: Root,
    pub(crate) lists: Box<[OnceLock<ListState>]>,
    /// (type < 256, kind) -> list index + 1.
    direct: Box<[AtomicU32]>,
    /// (type >= 256, class code) -> list index.
    other: RwLock<HashMap<(u16, u8), u32>>,
    dir_lock: Mutex<()>,
    pub(crate) index: Index,
    pub(crate) space: Mutex<FreeSpace>,
    pub(crate) recovery: RecoveryReport,
    /// Process-unique id of this allocator, for the per-thread cache of [`EpAlloc::locate`]
    /// (never reused, so a cache entry of a dropped allocator can never match).
    uid: u64,
}

/// The chunk a thread located last (see [`EpAlloc::locate`]).
#[derive(Clone, Copy)]
struct LastChunk {
    uid: u64,
    start: u64,
    end: u64,
    id: u32,
    gen: u32,
    it: *const Item,
    list: *const ListState,
}

thread_local! {
    static LAST_CHUNK: std::cell::Cell<LastChunk> = const {
        std::cell::Cell::new(LastChunk {
            uid: 0,
            start: 0,
            end: 0,
            id: 0,
            gen: 0,
            it: std::ptr::null(),
            list: std::ptr::null(),
        })
    };
}
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// Space accounting of one list (SPEC H9).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassStats {
    pub ty: TypeId,
    /// Slot size; `None` for the type's extents.
    pub class_size: Option<usize>,
    /// Chunks (or extents) on the list.
    pub chunks: u64,
    /// Slots in those chunks (extents: one each).
    pub slots: u64,
    /// Used slots (published objects).
    pub used: u64,
    /// Bytes of used slots (extents: their capacity).
    pub used_bytes: u64,
    /// Bytes of free slots in those chunks.
    pub free_slot_bytes: u64,
    /// Allocator metadata inside the chunks: chunk heads, extent headers.
    pub overhead_bytes: u64,
    /// All bytes of the list's chunks: used + free slots + overhead.
    pub chunk_bytes: u64,
}

/// Space accounting of the whole allocator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocStats {
    pub lists: Vec<ClassStats>,
    pub used_bytes: u64,
    pub free_slot_bytes: u64,
    pub overhead_bytes: u64,
    pub chunk_bytes: u64,
    /// Heap bytes not in any chunk or extent (includes reserved, unpublished extents).
    pub free_space_bytes: u64,
    /// The root block (directory and recycle logs).
    pub root_bytes: u64,
    /// The allocator's whole heap, root block included.
    pub heap_bytes: u64,
}

impl AllocStats {
    /// (used bytes, chunk bytes) of one type.
    pub fn of_type(&self, ty: TypeId) -> (u64, u64) {
        self.lists.iter().filter(|l| l.ty == ty).fold((0, 0), |a, l| (a.0 + l.used_bytes, a.1 + l.chunk_bytes))
    }
}

impl std::fmt::Display for AllocStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:>6} {:>7} {:>7} {:>8} {:>12} {:>12} {:>10}",
            "type", "class", "chunks", "used", "used B", "chunk B", "overhead B"
        )?;
        for l in &self.lists {
            let class = l.class_size.map_or("extent".to_string(), |c| c.to_string());
            writeln!(
                f,
                "{:>6} {:>7} {:>7} {:>8} {:>12} {:>12} {:>10}",
                l.ty.0, class, l.chunks, l.used, l.used_bytes, l.chunk_bytes, l.overhead_bytes
            )?;
        }
        write!(
            f,
            "total: {} B used, {} B in free slots, {} B chunk overhead, {} B free space, {} B root, {} B heap",
            self.used_bytes,
            self.free_slot_bytes,
            self.overhead_bytes,
            self.free_space_bytes,
            self.root_bytes,
            self.heap_bytes
        )
    }
}

impl EpAlloc {
    /// Format allocator metadata in `pool` and set pool root 0. Fails if root 0 is set.
    ///
    /// The root block is written and persisted above the heap top, then root 0 is set,
    /// then the heap top is raised over the block: a crash before root 0 is set leaves the
    /// pool as it was; a crash after it is finished by [`EpAlloc::open`].
    pub fn create(pool: Arc<Pool>) -> Result<EpAlloc> {
        if pool.root(EPALLOC_ROOT) != 0 {
            return Err(PoolError::Allocator("the pool already has an EPallocator (root slot 0 is set)".into()));
        }
        let at = pool.heap_top().next_multiple_of(PAGE);
        pool.ensure_size(at + root::ROOT_SIZE)?;
        let r = Root::format(&pool, at);
        pool.set_root(EPALLOC_ROOT, at);
        pool.raise_heap_top(r.heap_start)?;
        Self::open(pool)
    }

    /// Open the allocator of `pool`: validate its root, finish or undo interrupted
    /// recycles (Algorithm 6 recovery), walk every chunk list and rebuild DRAM state.
    /// Corrupt metadata is an error, never a panic.
    pub fn open(pool: Arc<Pool>) -> Result<EpAlloc> {
        recovery::open(pool)
    }

    pub(crate) fn empty(pool: Arc<Pool>, root: Root, recovery: RecoveryReport) -> EpAlloc {
        let max = pool.max_size();
        EpAlloc {
            pool,
            root,
            lists: (0..DIR_CAP).map(|_| OnceLock::new()).collect(),
            direct: (0..DIRECT_TYPES * KINDS).map(|_| AtomicU32::new(0)).collect(),
            other: RwLock::new(HashMap::new()),
            dir_lock: Mutex::new(()),
            index: Index::new(max),
            space: Mutex::new(FreeSpace::default()),
            recovery,
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
        }
    }

    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// What [`EpAlloc::open`] found and repaired.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// Reserve an object of at least `size` bytes of type `ty` and return its offset. The
    /// object is *not* used yet: write and persist its content, then [`EpAlloc::publish`]
    /// it, or give it back with [`EpAlloc::unreserve`]. A crash before `publish` frees it.
    /// Sizes above 4 KiB get an extent. A full pool is [`PoolError::Full`].
    pub fn alloc(&self, ty: TypeId, size: usize) -> Result<u64> {
        self.pool.check_writable()?;
        match class_of(size) {
            Some(c) => self.alloc_slot(ty, c),
            None => self.alloc_extent(ty, size),
        }
    }

    /// Mark the reserved object at `off` used: set its bit with one 8-byte store and
    /// persist it (Algorithm 1 lines 14 and 18). Its content must already be persistent.
    /// Offsets that are not a reserved, unpublished object are ignored
    /// (see [`EpAlloc::try_publish`]).
    pub fn publish(&self, off: u64) {
        let _ = self.try_publish(off);
    }

    /// [`EpAlloc::publish`] that reports misuse.
    pub fn try_publish(&self, off: u64) -> Result<()> {
        self.pool.check_writable()?;
        let loc = self.locate(off).ok_or_else(|| misuse("publish", off, "not an object offset"))?;
        let Some(i) = loc.slot else { return self.publish_extent(&loc) };
        if loc.it.reserved.load(Ordering::Acquire) & (1 << i) == 0 {
            return Err(misuse("publish", off, "the slot is not reserved"));
        }
        chunk::set_bit(&self.pool, loc.base, i, true).ok_or_else(|| misuse("publish", off, "already published"))?;
        Ok(())
    }

    /// Give back a reserved object that was never published. No PM write.
    pub fn unreserve(&self, off: u64) {
        let _ = self.try_unreserve(off);
    }

    /// [`EpAlloc::unreserve`] that reports misuse.
    pub fn try_unreserve(&self, off: u64) -> Result<()> {
        let loc = self.locate(off).ok_or_else(|| misuse("unreserve", off, "not an object offset"))?;
        let Some(i) = loc.slot else { return self.unreserve_extent(&loc) };
        if chunk::header(&self.pool, loc.base).is_used(i) {
            return Err(misuse("unreserve", off, "the object is published; free it instead"));
        }
        let gen = loc.it.gen.load(Ordering::Acquire);
        let old = loc.it.reserved.fetch_and(!(1 << i), Ordering::AcqRel);
        if old & (1 << i) == 0 {
            return Err(misuse("unreserve", off, "the slot is not reserved"));
        }
        self.released(loc.list, loc.id, gen, old, 1 << i);
        Ok(())
    }

    /// Free the used object at `off`: reset its bit with one persisted 8-byte store, then
    /// recycle its chunk if it became empty (Algorithm 5 lines 11–14, Algorithm 6).
    /// Offsets that are not a used object are ignored (see [`EpAlloc::try_free`]).
    pub fn free(&self, off: u64) {
        let _ = self.try_free(off);
    }

    /// [`EpAlloc::free`] that reports misuse.
    pub fn try_free(&self, off: u64) -> Result<()> {
        self.free_ordered(off, true)
    }

    /// Free without waiting for durability: the reset bit is flushed but not fenced, so it
    /// becomes durable at this thread's next fence (or with the next persisted write of
    /// the same header word by any thread, since a later set or reset of another bit
    /// writes the whole word). Until then a crash may leave the object marked used. Only
    /// for engines whose recovery frees used objects that nothing references (HART's
    /// sweep); everyone else uses [`EpAlloc::free`]. Extents are freed as by `free`.
    pub fn free_unfenced(&self, off: u64) {
        let _ = self.free_ordered(off, false);
    }

    fn free_ordered(&self, off: u64, fence: bool) -> Result<()> {
        self.pool.check_writable()?;
        let loc = self.locate(off).ok_or_else(|| misuse("free", off, "not an object offset"))?;
        let Some(i) = loc.slot else { return self.free_extent(&loc) };
        let gen = loc.it.gen.load(Ordering::Acquire);
        // PM first, DRAM second: the slot must not be reserved again while its PM bit is set.
        chunk::set_bit_ordered(&self.pool, loc.base, i, false, fence)
            .ok_or_else(|| misuse("free", off, "the object is not used"))?;
        let old = loc.it.reserved.fetch_and(!(1 << i), Ordering::AcqRel);
        self.released(loc.list, loc.id, gen, old, 1 << i);
        Ok(())
    }

    /// Whether the object at `off` is used (published and not freed).
    pub fn is_used(&self, off: u64) -> bool {
        match self.locate(off) {
            Some(Loc { slot: Some(i), base, .. }) => chunk::header(&self.pool, base).is_used(i),
            Some(loc) => loc.it.reserved.load(Ordering::Acquire) == EXT_USED,
            None => false,
        }
    }

    /// Usable bytes of the object at `off` (0 if `off` is not an object).
    pub fn capacity(&self, off: u64) -> usize {
        match self.locate(off) {
            Some(Loc { slot: Some(_), list, .. }) => list.geo.map_or(0, |g| g.slot),
            Some(loc) => loc.it.len.load(Ordering::Acquire).saturating_sub(EXT_HEAD) as usize,
            None => 0,
        }
    }

    /// The type of the object at `off`, if it is an object.
    pub fn type_of(&self, off: u64) -> Option<TypeId> {
        self.locate(off).map(|l| l.list.ty)
    }

    /// Call `f` with the offset of every used object of type `ty`, walking the persistent
    /// chunk lists (what HART's recovery, Algorithm 7, iterates). `f` may allocate and free.
    pub fn for_each_used(&self, ty: TypeId, mut f: impl FnMut(u64)) {
        self.for_each_slot(ty, |off, used| {
            if used {
                f(off)
            }
        })
    }

    /// Call `f(offset, used)` for every slot of every chunk of type `ty`, and
    /// `f(offset, true)` for each of its published extents.
    pub fn for_each_slot(&self, ty: TypeId, mut f: impl FnMut(u64, bool)) {
        for list in self.lists_of(ty) {
            let chunks = {
                let _g = list.inner.lock();
                self.walk_pm(list)
            };
            for c in chunks {
                match list.geo {
                    Some(g) => {
                        let h = chunk::header(&self.pool, c);
                        for i in 0..SLOTS {
                            f(g.slot_off(c, i), h.is_used(i));
                        }
                    }
                    None => f(c + EXT_HEAD, true),
                }
            }
        }
    }

    /// The safe form of Algorithm 2 lines 12–16, for recovery. For every *free* slot of
    /// type `parent` whose 8-byte offset at byte `child_ptr_at` names a *used* object of
    /// type `child` that no *used* `parent` slot references, free that child. Returns how
    /// many were freed. Call it after the engine's own logs are recovered, before new
    /// allocations.
    ///
    /// The paper checks this at run time when it reuses a leaf slot. That is unsafe: a
    /// deleted leaf keeps its stale `p_value`, and the value slot it names may have been
    /// reused by another leaf since, so freeing it would destroy a live value. Requiring
    /// that no used parent references the child makes the rule safe, and it still
    /// reclaims the values of half-inserted leaves (Algorithm 1 crashed between lines 14
    /// and 18) — the case the paper's check exists for.
    pub fn reclaim_orphans(&self, parent: TypeId, child_ptr_at: usize, child: TypeId) -> Result<u64> {
        let read = |off: u64| -> u64 {
            // SAFETY: callers only pass slot offsets whose slot holds `child_ptr_at + 8`
            // bytes (checked below), inside the mapped pool.
            unsafe { std::ptr::read_unaligned(self.pool.at::<u64>(off + child_ptr_at as u64)) }
        };
        let mut referenced = std::collections::HashSet::new();
        let mut candidates = Vec::new();
        self.for_each_slot(parent, |off, used| {
            if self.capacity(off) < child_ptr_at + 8 {
                return;
            }
            let p = read(off);
            if used {
                referenced.insert(p);
            } else if p != 0 {
                candidates.push(p);
            }
        });
        candidates.sort_unstable();
        candidates.dedup();
        let mut freed = 0;
        for p in candidates {
            if !referenced.contains(&p) && self.type_of(p) == Some(child) && self.is_used(p) {
                self.try_free(p)?;
                freed += 1;
            }
        }
        Ok(freed)
    }

    /// Recycle every empty chunk, including threads' current chunks (which `free` keeps
    /// so that alternating alloc/free does not recycle and re-create a chunk each time).
    /// Returns the number of chunks recycled. Safe to call at any time.
    pub fn release_empty_chunks(&self) -> usize {
        let mut n = 0;
        for list in self.lists.iter().filter_map(|l| l.get()) {
            if list.geo.is_none() {
                continue;
            }
            let mut inner = list.inner.lock();
            let mut id = inner.head;
            while let Some(it) = self.index.item(id) {
                let next = it.next.load(Ordering::Acquire);
                let p = pack(id, it.gen.load(Ordering::Acquire));
                if it.reserved.load(Ordering::Acquire) == 0 {
                    for c in list.cur.iter() {
                        let _ = c.0.compare_exchange(p, 0, Ordering::AcqRel, Ordering::Relaxed);
                    }
                    if self.recycle_locked(list, &mut inner, id, it) {
                        n += 1;
                    } else {
                        // Reserved meanwhile: it may have lost its shard; keep it findable.
                        self.displace(&mut inner, p);
                    }
                }
                id = next;
            }
        }
        n
    }

    /// Space accounting by type and class (SPEC H9). Takes each list's lock in turn.
    pub fn stats(&self) -> AllocStats {
        let mut s = AllocStats::default();
        let mut lists: Vec<&ListState> = self.lists.iter().filter_map(|l| l.get()).collect();
        lists.sort_by_key(|l| (l.ty, l.class));
        for list in lists {
            let chunks = {
                let _g = list.inner.lock();
                self.walk_pm(list)
            };
            let mut c = ClassStats {
                ty: list.ty,
                class_size: list.geo.map(|g| g.slot),
                chunks: chunks.len() as u64,
                slots: 0,
                used: 0,
                used_bytes: 0,
                free_slot_bytes: 0,
                overhead_bytes: 0,
                chunk_bytes: 0,
            };
            for off in chunks {
                match list.geo {
                    Some(g) => {
                        let used = chunk::header(&self.pool, off).used_count() as u64;
                        c.slots += SLOTS as u64;
                        c.used += used;
                        c.used_bytes += used * g.slot as u64;
                        c.free_slot_bytes += (SLOTS as u64 - used) * g.slot as u64;
                        c.overhead_bytes += g.head as u64;
                        c.chunk_bytes += g.chunk_len as u64;
                    }
                    None => {
                        let len = chunk::word(&self.pool, off + 16).load(Ordering::Acquire);
                        c.slots += 1;
                        c.used += 1;
                        c.used_bytes += len - EXT_HEAD;
                        c.overhead_bytes += EXT_HEAD;
                        c.chunk_bytes += len;
                    }
                }
            }
            s.used_bytes += c.used_bytes;
            s.free_slot_bytes += c.free_slot_bytes;
            s.overhead_bytes += c.overhead_bytes;
            s.chunk_bytes += c.chunk_bytes;
            s.lists.push(c);
        }
        s.root_bytes = root::ROOT_SIZE;
        s.heap_bytes = self.pool.heap_top() - self.root.at;
        s.free_space_bytes = s.heap_bytes - s.root_bytes - s.chunk_bytes;
        s
    }

    /// Run the checker (see [`checker`]). Call it while no other thread uses the
    /// allocator.
    pub fn check(&self) -> Result<CheckReport> {
        checker::check(self)
    }

    // ----- internals ---------------------------------------------------------------------

    /// The chunk (or extent) holding object offset `off`, and its slot.
    ///
    /// Frees and publishes by one thread tend to hit the same chunk many times in a row
    /// (objects allocated together are freed together), so the chunk located last is
    /// remembered per thread and checked first: its index item and list live as long as
    /// the allocator, and the item's generation, which changes whenever the chunk is
    /// retired, proves that the entry still names the same chunk. A hit skips the
    /// offset index's dependent loads — about a third of a `free`.
    fn locate(&self, off: u64) -> Option<Loc<'_>> {
        let last = LAST_CHUNK.with(|c| c.get());
        if last.uid == self.uid && last.start <= off && off < last.end {
            // SAFETY: `uid` matches, so both pointers were taken from this allocator,
            // whose items and lists are never freed while it lives.
            let (it, list) = unsafe { (&*last.it, &*last.list) };
            if it.gen.load(Ordering::Acquire) == last.gen && it.off.load(Ordering::Acquire) == last.start {
                let g = list.geo?;
                let slot = g.slot_index(last.start, off)?;
                return Some(Loc { id: last.id, it, list, base: last.start, slot: Some(slot) });
            }
        }
        let (id, it) = self.index.lookup(off)?;
        let gen = it.gen.load(Ordering::Acquire);
        let list = self.lists.get(it.list.load(Ordering::Acquire) as usize)?.get()?;
        let base = it.off.load(Ordering::Acquire);
        let slot = match list.geo {
            Some(g) => Some(g.slot_index(base, off)?),
            None if off == base + EXT_HEAD => None,
            None => return None,
        };
        if let Some(g) = list.geo {
            let (start, end) = (base, base + g.chunk_len as u64);
            LAST_CHUNK.with(|c| c.set(LastChunk { uid: self.uid, start, end, id, gen, it, list }));
        }
        Some(Loc { id, it, list, base, slot })
    }

    /// The lists of type `ty`, by class.
    fn lists_of(&self, ty: TypeId) -> Vec<&ListState> {
        let mut v: Vec<&ListState> = self.lists.iter().filter_map(|l| l.get()).filter(|l| l.ty == ty).collect();
        v.sort_by_key(|l| l.class);
        v
    }

    /// Offsets on `list`'s persistent chain, head first. The caller holds the list lock.
    pub(crate) fn walk_pm(&self, list: &ListState) -> Vec<u64> {
        let mut v = Vec::new();
        let mut off = list.entry.head(&self.pool);
        while off != 0 && v.len() as u64 <= self.max_items() {
            v.push(off);
            off = chunk::next(&self.pool, off);
        }
        v
    }

    /// An upper bound on the number of chunks the heap can hold (bounds list walks).
    pub(crate) fn max_items(&self) -> u64 {
        (self.pool.heap_top().saturating_sub(self.root.heap_start)) / size_class::MIN_CHUNK_LEN as u64 + 1
    }

    fn kind_of(class: u8) -> usize {
        if class == EXTENT_CLASS {
            NUM_CLASSES
        } else {
            class as usize
        }
    }

    /// The list of (`ty`, `class`), created on first use.
    fn list_for(&self, ty: TypeId, class: u8) -> Result<&ListState> {
        if (ty.0 as usize) < DIRECT_TYPES {
            let v = self.direct[ty.0 as usize * KINDS + Self::kind_of(class)].load(Ordering::Acquire);
            if v != 0 {
                if let Some(l) = self.lists[v as usize - 1].get() {
                    return Ok(l);
                }
            }
        } else if let Some(&i) = self.other.read().get(&(ty.0, class)) {
            if let Some(l) = self.lists[i as usize].get() {
                return Ok(l);
            }
        }
        self.create_list(ty, class)
    }

    /// Register a list (at open, or when created).
    pub(crate) fn install_list(&self, list: ListState) {
        let (i, ty, class) = (list.idx as usize, list.ty, list.class);
        let _ = self.lists[i].set(list);
        if (ty.0 as usize) < DIRECT_TYPES {
            self.direct[ty.0 as usize * KINDS + Self::kind_of(class)].store(i as u32 + 1, Ordering::Release);
        } else {
            self.other.write().insert((ty.0, class), i as u32);
        }
    }

    /// Allocate a directory entry for (`ty`, `class`): one persisted 8-byte tag store.
    fn create_list(&self, ty: TypeId, class: u8) -> Result<&ListState> {
        let _g = self.dir_lock.lock();
        let want = root::tag(ty, class);
        let mut free = None;
        for i in 0..DIR_CAP {
            let e = self.root.entry(i);
            let t = e.raw_tag(&self.pool);
            if t == want {
                // Created by another thread meanwhile.
                return self.lists[i].get().ok_or_else(|| PoolError::CorruptAllocator("directory out of sync".into()));
            }
            if t == 0 && free.is_none() {
                free = Some(i);
            }
        }
        let Some(i) = free else {
            return Err(PoolError::Allocator(format!(
                "allocator directory full: at most {DIR_CAP} (object type, size class) lists per pool"
            )));
        };
        let e = self.root.entry(i);
        chunk::word(&self.pool, e.tag_at()).store(want, Ordering::Release);
        self.pool.persist_off(e.tag_at(), 8);
        self.install_list(ListState::new(i, e, ty, class));
        Ok(self.lists[i].get().expect("just installed"))
    }

    /// Algorithm 2, fast path: a slot of the shard's current chunk.
    fn alloc_slot(&self, ty: TypeId, class: usize) -> Result<u64> {
        let list = self.list_for(ty, class as u8)?;
        let s = shard();
        let p = list.cur[s].0.load(Ordering::Acquire);
        if p != 0 {
            if let Some(off) = self.try_reserve(list, p) {
                return Ok(off);
            }
        }
        self.alloc_slow(list, s)
    }

    /// Reserve the lowest free slot of chunk `p = pack(id, gen)` in DRAM (Algorithm 2
    /// `GetFreeObject`, lines 3 and 11). The PM next-free index says the same for the used
    /// bits, but reservations must not write PM, so the DRAM reservation word decides.
    fn try_reserve(&self, list: &ListState, p: u64) -> Option<u64> {
        let (id, gen) = unpack(p);
        let it = self.index.item(id)?;
        let geo = list.geo?;
        let mut r = it.reserved.load(Ordering::Acquire);
        loop {
            if r & LOCKED != 0 || r & BITMAP_MASK == BITMAP_MASK {
                return None;
            }
            let i = (!r).trailing_zeros() as usize;
            match it.reserved.compare_exchange_weak(r, r | 1 << i, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    if it.gen.load(Ordering::Acquire) != gen || it.list.load(Ordering::Acquire) != list.idx {
                        // The chunk was recycled and its item reused since `p` was read
                        // (only on the lock-free fast path, see `alloc_slow`): undo.
                        let old = it.reserved.fetch_and(!(1 << i), Ordering::AcqRel);
                        if let Some(l) = self.lists.get(it.list.load(Ordering::Acquire) as usize).and_then(|l| l.get())
                        {
                            self.released(l, id, it.gen.load(Ordering::Acquire), old, 1 << i);
                        }
                        return None;
                    }
                    return Some(geo.slot_off(it.off.load(Ordering::Acquire), i));
                }
                Err(now) => r = now,
            }
        }
    }

    /// Algorithm 2, slow path, under the list lock: another chunk with a free slot
    /// (lines 2–7, from the DRAM `partial` set instead of a list walk), else a new chunk
    /// linked at the head of the list (lines 8–11).
    fn alloc_slow(&self, list: &ListState, s: usize) -> Result<u64> {
        let mut inner = list.inner.lock();
        // Under the lock, an item of this list that has the expected generation cannot be
        // retired (retiring takes this lock), so `try_reserve` below never meets a stale
        // item and never calls `released`, which could take this lock again.
        let old = list.cur[s].0.load(Ordering::Acquire);
        if self.is_live_in(list, old) {
            if let Some(off) = self.try_reserve(list, old) {
                return Ok(off);
            }
        }
        while let Some(p) = inner.partial.pop() {
            if !self.is_live_in(list, p) {
                continue;
            }
            let Some(it) = self.index.item(unpack(p).0) else { continue };
            it.in_partial.store(false, Ordering::Relaxed);
            if let Some(off) = self.try_reserve(list, p) {
                list.cur[s].0.store(p, Ordering::Release);
                self.displace(&mut inner, old);
                return Ok(off);
            }
        }
        let p = self.new_chunk(list, &mut inner)?;
        let off = self
            .try_reserve(list, p)
            .ok_or_else(|| PoolError::CorruptAllocator("a new chunk has no free slot".into()))?;
        list.cur[s].0.store(p, Ordering::Release);
        self.displace(&mut inner, old);
        Ok(off)
    }

    /// Whether `p = pack(id, gen)` is still the same incarnation of an item of `list`.
    fn is_live_in(&self, list: &ListState, p: u64) -> bool {
        let (id, gen) = unpack(p);
        self.index
            .item(id)
            .is_some_and(|it| it.gen.load(Ordering::Acquire) == gen && it.list.load(Ordering::Acquire) == list.idx)
    }

    /// A shard's previous current chunk `old` is replaced: keep it findable if it still
    /// has free slots (another thread of the shard may have freed into it).
    fn displace(&self, inner: &mut ListInner, old: u64) {
        let (id, gen) = unpack(old);
        if let Some(it) = self.index.item(id) {
            let r = it.reserved.load(Ordering::Acquire);
            if it.gen.load(Ordering::Acquire) == gen
                && r & LOCKED == 0
                && r & BITMAP_MASK != BITMAP_MASK
                && !it.in_partial.swap(true, Ordering::AcqRel)
            {
                inner.partial.push(old);
            }
        }
    }

    /// Algorithm 2 lines 9–10: a new chunk, initialised and persisted while unlinked, then
    /// linked at the head with one persisted store — the moment its space becomes
    /// allocated in PM. Returns `pack(id, gen)`.
    fn new_chunk(&self, list: &ListState, inner: &mut ListInner) -> Result<u64> {
        let geo = list.geo.expect("chunk list");
        let off = self.take_space(geo.chunk_len as u64, geo.align as u64)?;
        chunk::init(&self.pool, off, list.entry.head(&self.pool));
        list.entry.set_head(&self.pool, off);
        let id = self.link_item(list, inner, off, geo.chunk_len as u64, true);
        let it = self.index.item(id).expect("fresh id");
        it.reserved.store(0, Ordering::Release);
        Ok(pack(id, it.gen.load(Ordering::Acquire)))
    }

    /// DRAM side of linking an item at the head of `list` (the PM side is done).
    pub(crate) fn link_item(&self, list: &ListState, inner: &mut ListInner, off: u64, len: u64, whole: bool) -> u32 {
        let id = self.index.alloc_id();
        let it = self.index.item(id).expect("fresh id");
        self.init_item(it, list, off, len);
        it.next.store(inner.head, Ordering::Release);
        if let Some(h) = self.index.item(inner.head) {
            h.prev.store(id, Ordering::Release);
        }
        inner.head = id;
        inner.count += 1;
        self.index.register(id, off, off + len, whole);
        id
    }

    pub(crate) fn init_item(&self, it: &Item, list: &ListState, off: u64, len: u64) {
        it.len.store(len, Ordering::Release);
        it.list.store(list.idx, Ordering::Release);
        it.prev.store(0, Ordering::Release);
        it.next.store(0, Ordering::Release);
        it.off.store(off, Ordering::Release);
    }

    /// Space for a chunk or extent: from the free-space map, else from the top of the
    /// heap. The pool's persistent heap top is raised *before* the space is used; until
    /// the space is linked into a list it is free space that the next open recomputes.
    pub(crate) fn take_space(&self, len: u64, align: u64) -> Result<u64> {
        let mut sp = self.space.lock();
        if let Some(off) = sp.take(len, align) {
            return Ok(off);
        }
        let top = self.pool.heap_top();
        let base = sp.block_ending_at(top).unwrap_or(top);
        let start = base.next_multiple_of(align);
        let end = start.checked_add(len).ok_or(PoolError::Full {
            requested: len,
            available: 0,
            max: self.pool.max_size(),
        })?;
        self.pool.raise_heap_top(end)?;
        if base < top {
            sp.remove_exact(base, top);
        }
        sp.insert(base, start);
        Ok(start)
    }

    /// Bit(s) `bits` of a chunk's reservation word were just cleared (`old` is the word
    /// before): make the chunk findable again if it was full, recycle it if it is empty.
    fn released(&self, list: &ListState, id: u32, gen: u32, old: u64, bits: u64) {
        let new = old & !bits;
        if old & BITMAP_MASK == BITMAP_MASK && old & LOCKED == 0 {
            let mut inner = list.inner.lock();
            if let Some(it) = self.index.item(id) {
                if it.gen.load(Ordering::Acquire) == gen && !it.in_partial.swap(true, Ordering::AcqRel) {
                    inner.partial.push(pack(id, gen));
                }
            }
        }
        if new == 0 {
            self.maybe_recycle(list, id, gen);
        }
    }

    /// EPRecycle's caller side (Algorithm 6 lines 1–2): recycle the chunk if nothing in
    /// it is used or reserved and it is no shard's current chunk. Keeping current chunks
    /// is the allocator's hysteresis: a thread that allocates and frees one object in a
    /// loop would otherwise create and recycle a chunk on every iteration.
    fn maybe_recycle(&self, list: &ListState, id: u32, gen: u32) {
        // Unlocked pre-check: the common case (a thread freeing into its own current
        // chunk) must not take the list lock. Re-checked under the lock below.
        if list.is_cur(pack(id, gen)) {
            return;
        }
        let mut inner = list.inner.lock();
        let Some(it) = self.index.item(id) else { return };
        if it.gen.load(Ordering::Acquire) != gen || list.is_cur(pack(id, gen)) {
            return;
        }
        self.recycle_locked(list, &mut inner, id, it);
    }

    /// Recycle chunk `id` if its reservation word is 0, under the list lock.
    fn recycle_locked(&self, list: &ListState, inner: &mut ListInner, id: u32, it: &Item) -> bool {
        if it.reserved.compare_exchange(0, LOCKED, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return false; // line 1: something was reserved meanwhile
        }
        let off = it.off.load(Ordering::Acquire);
        if chunk::header(&self.pool, off).bitmap() != 0 {
            // Cannot happen (DRAM reservations include every used bit); refuse rather
            // than lose objects.
            it.reserved.store(chunk::header(&self.pool, off).bitmap(), Ordering::Release);
            return false;
        }
        self.unlink_locked(list, inner, it);
        self.retire(id, it, true);
        true
    }

    /// Algorithm 6 lines 3–10 and 12 for item `id` (PM), then the DRAM mirror.
    pub(crate) fn unlink_locked(&self, list: &ListState, inner: &mut ListInner, it: &Item) {
        let prev_id = it.prev.load(Ordering::Acquire);
        let next_id = it.next.load(Ordering::Acquire);
        let prev_off = self.index.item(prev_id).map_or(0, |p| p.off.load(Ordering::Acquire));
        recycle_log::unlink(&self.pool, list.entry, it.off.load(Ordering::Acquire), prev_off);
        match self.index.item(prev_id) {
            Some(p) => p.next.store(next_id, Ordering::Release),
            None => inner.head = next_id,
        }
        if let Some(n) = self.index.item(next_id) {
            n.prev.store(prev_id, Ordering::Release);
        }
        inner.count -= 1;
    }

    /// Algorithm 6 line 11 (`pfree`): forget the item and return its space.
    pub(crate) fn retire(&self, id: u32, it: &Item, whole: bool) {
        let off = it.off.load(Ordering::Acquire);
        let len = it.len.load(Ordering::Acquire);
        self.index.unregister(id, off, off + len, whole);
        self.index.free_id(id);
        self.space.lock().insert(off, off + len);
    }

    // ----- extents -------------------------------------------------------------------------

    /// Reserve an extent: pages from the free-space map, nothing in PM.
    fn alloc_extent(&self, ty: TypeId, size: usize) -> Result<u64> {
        let len = extent::extent_len(size).filter(|&l| l <= self.pool.max_size()).ok_or(PoolError::Full {
            requested: size as u64,
            available: 0,
            max: self.pool.max_size(),
        })?;
        let list = self.list_for(ty, EXTENT_CLASS)?;
        let off = self.take_space(len, PAGE)?;
        let id = self.index.alloc_id();
        let it = self.index.item(id).expect("fresh id");
        self.init_item(it, list, off, len);
        it.reserved.store(EXT_RESERVED, Ordering::Release);
        self.index.register(id, off, off + len, false);
        Ok(off + EXT_HEAD)
    }

    /// Publish an extent: header persisted, then linked at the head (one persisted store).
    fn publish_extent(&self, loc: &Loc<'_>) -> Result<()> {
        let mut inner = loc.list.inner.lock();
        if loc.it.reserved.compare_exchange(EXT_RESERVED, EXT_USED, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(misuse("publish", loc.base + EXT_HEAD, "the extent is not reserved"));
        }
        let len = loc.it.len.load(Ordering::Acquire);
        extent::write_header(&self.pool, loc.base, len, loc.list.entry.head(&self.pool));
        loc.list.entry.set_head(&self.pool, loc.base);
        // DRAM mirror: the item already exists (and is registered); link it at the head.
        loc.it.prev.store(0, Ordering::Release);
        loc.it.next.store(inner.head, Ordering::Release);
        if let Some(h) = self.index.item(inner.head) {
            h.prev.store(loc.id, Ordering::Release);
        }
        inner.head = loc.id;
        inner.count += 1;
        Ok(())
    }

    fn unreserve_extent(&self, loc: &Loc<'_>) -> Result<()> {
        let _g = loc.list.inner.lock();
        if loc.it.reserved.compare_exchange(EXT_RESERVED, LOCKED, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(misuse("unreserve", loc.base + EXT_HEAD, "the extent is not reserved"));
        }
        self.retire(loc.id, loc.it, false);
        Ok(())
    }

    /// Free an extent: unlink it with the recycle micro-log (Algorithm 6), then return its
    /// pages.
    fn free_extent(&self, loc: &Loc<'_>) -> Result<()> {
        let mut inner = loc.list.inner.lock();
        if loc.it.reserved.compare_exchange(EXT_USED, LOCKED, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(misuse("free", loc.base + EXT_HEAD, "the extent is not used"));
        }
        self.unlink_locked(loc.list, &mut inner, loc.it);
        self.retire(loc.id, loc.it, false);
        Ok(())
    }
}

fn misuse(op: &str, off: u64, why: &str) -> PoolError {
    PoolError::Allocator(format!("{op}({off:#x}): {why}"))
}
