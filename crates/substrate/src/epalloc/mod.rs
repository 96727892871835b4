//! # EPallocator (SPEC P7): persistent allocation that cannot leak
//!
//! HART's "enhanced persistent memory allocator" (paper §III.A points 4–6, Algorithms 2
//! and 6, Fig. 2 and 3), generalised to any number of object types and 25 size classes
//! from 8 bytes to 4 KiB, with extents for larger objects, and made concurrent.
//!
//! * [`chunk`] — the 56-slot memory chunk and its crash-atomic 8-byte header word (Fig. 2);
//! * [`check`] — format 3's self-checked words: every word a list walk trusts carries an
//!   8-bit check of its content and its own offset in the same 8 bytes;
//! * [`size_class`] — classes and chunk geometry;
//! * [`recycle_log`] — EPRecycle (Algorithm 6) with the `PCurrent`/`PPrev` micro-log and
//!   all of its recovery cases;
//! * [`extent`] — objects above 4 KiB;
//! * `lists` — the per-(type, class) chunk lists in DRAM: allocation fast and slow paths,
//!   linking and recycling chunks;
//! * `stats` — space accounting by type and class (SPEC H9);
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
//! lock (or one for a run of several slots, [`EpAlloc::reserve_run`], which an engine
//! hands out under a lock of its own with plain stores). `publish` and `free` are one
//! compare-and-swap on the PM header word plus a persist, no lock. A list's mutex is
//! taken only to change the list: a new chunk (once per 56 allocations), a chunk that
//! becomes non-full or empty, extents.

pub mod check;
pub mod checker;
pub mod chunk;
pub mod extent;
mod index;
mod lists;
pub mod recovery;
pub mod recycle_log;
pub mod root;
mod seal;
pub mod size_class;
mod space;
mod stats;

pub use checker::CheckReport;
pub use recovery::RecoveryReport;
pub use recycle_log::RecycleCase;
pub use size_class::{class_of, CLASSES, MAX_CLASS_SIZE, NUM_CLASSES, SLOTS};
pub use stats::{AllocStats, ClassStats};

use crate::error::{PoolError, Result};
use crate::pool::Pool;
pub use check::Format;
use chunk::{HeaderWord, BITMAP_MASK};
use extent::{EXT_HEAD, EXT_USED, PAGE};
use index::{Index, Item, LOCKED};
pub(crate) use lists::ListState;
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

/// A slot reserved by [`EpAlloc::reserve`]: its offset, and its chunk's item, header
/// and generation, which stay valid while the slot is reserved (a chunk with a reserved
/// slot is never recycled).
#[must_use = "a reservation is published or given back"]
pub struct Reserved<'a> {
    off: u64,
    /// Offset of the chunk.
    base: u64,
    slot: u32,
    gen: u32,
    it: &'a Item,
}

impl Reserved<'_> {
    /// The object's pool offset.
    #[inline]
    pub fn off(&self) -> u64 {
        self.off
    }
}

/// Slots of one chunk reserved together by [`EpAlloc::reserve_run`] and not handed out
/// yet, for an engine that keeps a few ready under a lock of its own (HART: per ART, under
/// the ART's write lock): [`EpAlloc::take_reserved`] hands the next one out with plain
/// stores, no locked instruction, where [`EpAlloc::reserve`] pays a compare-and-swap on
/// the chunk's reservation word for each. Reservations are DRAM state only, so a crash
/// forgets the run as it forgets any reservation (nothing can leak); a run that is
/// dropped without [`EpAlloc::unreserve_run`] keeps its slots from other writers until
/// the allocator is closed. Its chunk is not recycled while the run holds slots.
#[derive(Debug, Default)]
pub struct ReservedRun {
    id: u32,
    gen: u32,
    /// Offset of the chunk.
    base: u64,
    /// Offset of the chunk's slot 0, and the slot size.
    first: u64,
    stride: u64,
    /// The slots held (bit i = slot i).
    mask: u64,
}

impl ReservedRun {
    /// How many slots the run holds.
    pub fn len(&self) -> u32 {
        self.mask.count_ones()
    }

    /// Whether the run holds no slot.
    pub fn is_empty(&self) -> bool {
        self.mask == 0
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
    /// Set once the open has validated everything: only then does the drop write a seal
    /// (an open that failed on damage must neither change the file nor bless the damage).
    pub(crate) opened: bool,
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

impl LastChunk {
    /// Whether this entry, taken by allocator `uid`, names a chunk whose range holds `off`
    /// (its item's generation still to be checked before trusting it).
    #[inline]
    fn covers(&self, uid: u64, off: u64) -> bool {
        self.uid == uid && self.start <= off && off < self.end
    }
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

impl EpAlloc {
    /// Format allocator metadata in `pool` and set pool root 0. Fails if root 0 is set.
    ///
    /// The root block is written and persisted above the heap top, then root 0 is set,
    /// then the heap top is raised over the block: a crash before root 0 is set leaves the
    /// pool as it was; a crash after it is finished by [`EpAlloc::open`].
    pub fn create(pool: Arc<Pool>) -> Result<EpAlloc> {
        Self::create_format(pool, Format::V3)
    }

    /// [`EpAlloc::create`] in an older format (format 2), for tests of the format-2 code
    /// paths that existing pools still take. Not for production: format 2 has no checks.
    #[doc(hidden)]
    pub fn create_format(pool: Arc<Pool>, fmt: Format) -> Result<EpAlloc> {
        if pool.root(EPALLOC_ROOT) != 0 {
            return Err(PoolError::Allocator("the pool already has an EPallocator (root slot 0 is set)".into()));
        }
        let at = pool.heap_top().next_multiple_of(PAGE);
        pool.ensure_size(at + root::ROOT_SIZE)?;
        let r = Root::format(&pool, at, fmt);
        pool.set_root(EPALLOC_ROOT, at);
        pool.raise_heap_top(r.heap_start)?;
        // Nothing to verify against: the lists are empty and no seal was ever written.
        recovery::open(pool, false)
    }

    /// Open the allocator of `pool`: validate its root, finish or undo interrupted
    /// recycles (Algorithm 6 recovery), walk every chunk list and rebuild DRAM state.
    /// Corrupt metadata is an error, never a panic.
    pub fn open(pool: Arc<Pool>) -> Result<EpAlloc> {
        recovery::open(pool, true)
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
            opened: false,
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
            Some(c) => self.alloc_slot(ty, c).map(|r| r.off),
            None => self.alloc_extent(ty, size),
        }
    }

    /// [`EpAlloc::alloc`] for a slot object (at most [`MAX_CLASS_SIZE`] bytes; larger
    /// sizes are refused, they need an extent), returned with where its bit lives, so that
    /// [`EpAlloc::publish_reserved_lazy`] sets the bit without looking the offset up
    /// again: for an engine's hottest allocation (HART's leaf, one per insert), where the
    /// lookup was a quarter of the allocator's instructions. Give it back with
    /// [`EpAlloc::unreserve`] of [`Reserved::off`] if it is not published.
    #[inline]
    pub fn reserve(&self, ty: TypeId, size: usize) -> Result<Reserved<'_>> {
        self.pool.check_writable()?;
        match class_of(size) {
            Some(c) => self.alloc_slot(ty, c),
            None => Err(PoolError::Allocator(format!(
                "reserve({size} bytes): larger than a slot ({MAX_CLASS_SIZE} bytes); use alloc"
            ))),
        }
    }

    /// [`EpAlloc::reserve`] of up to `want` slots of one chunk with one compare-and-swap:
    /// returns the first, and leaves the others in `rest` (which must be empty) for
    /// [`EpAlloc::take_reserved`]. Fewer than `want` when the chunk has fewer free slots, or
    /// when a new chunk had to be found (then only the one returned).
    pub fn reserve_run(&self, ty: TypeId, size: usize, want: u32, rest: &mut ReservedRun) -> Result<Reserved<'_>> {
        self.pool.check_writable()?;
        debug_assert!(rest.is_empty(), "reserve_run into a run that still holds slots");
        let Some(c) = class_of(size) else {
            return Err(PoolError::Allocator(format!(
                "reserve_run({size} bytes): larger than a slot ({MAX_CLASS_SIZE} bytes); use alloc"
            )));
        };
        let list = self.list_for(ty, c as u8)?;
        let s = shard();
        let p = list.cur[s].0.load(Ordering::Acquire);
        if p != 0 {
            if let Some(r) = self.try_reserve_run(list, p, want, Some(rest)) {
                return Ok(r);
            }
        }
        self.alloc_slow(list, s)
    }

    /// The next slot of `run`, reserved since [`EpAlloc::reserve_run`]: plain stores, no
    /// locked instruction (the caller's lock guards `run`). Publish it with
    /// [`EpAlloc::publish_reserved_lazy`] or give it back with [`EpAlloc::unreserve`].
    #[inline]
    pub fn take_reserved(&self, run: &mut ReservedRun) -> Option<Reserved<'_>> {
        if run.mask == 0 {
            return None;
        }
        let i = run.mask.trailing_zeros();
        // Valid while the run holds slots: a chunk with reserved slots is not recycled.
        let it = self.index.item(run.id)?;
        run.mask &= run.mask - 1;
        // As `try_reserve`: the publish's compare-and-swap needs the header line.
        self.pool.prefetch_write(run.base);
        Some(Reserved { off: run.first + i as u64 * run.stride, base: run.base, slot: i, gen: run.gen, it })
    }

    /// Give back the slots `run` still holds (no PM write), e.g. when its owner goes away.
    pub fn unreserve_run(&self, run: &mut ReservedRun) {
        let mask = std::mem::take(&mut run.mask);
        if mask == 0 {
            return;
        }
        let Some(it) = self.index.item(run.id) else { return };
        if it.gen.load(Ordering::Acquire) != run.gen {
            return; // cannot happen while the slots were reserved
        }
        let old = it.reserved.fetch_and(!mask, Ordering::AcqRel);
        if let Some(l) = self.lists.get(it.list.load(Ordering::Acquire) as usize).and_then(|l| l.get()) {
            self.released(l, run.id, run.gen, old, mask & old);
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
        self.publish_ordered(off, true)
    }

    /// [`EpAlloc::publish`] whose bit is flushed but not fenced: it becomes durable at
    /// this thread's next fence. For the last store of an operation, which the caller
    /// follows with [`Pool::commit_fence`] (so that a group commit, [`Pool::group`], can
    /// share that fence with the operations after it). Extents are published fenced.
    pub fn publish_unfenced(&self, off: u64) {
        let _ = self.publish_ordered(off, false);
    }

    fn publish_ordered(&self, off: u64, fence: bool) -> Result<()> {
        self.pool.check_writable()?;
        let loc = self.locate(off).ok_or_else(|| misuse("publish", off, "not an object offset"))?;
        let Some(i) = loc.slot else { return self.publish_extent(&loc) };
        if loc.it.reserved.load(Ordering::Acquire) & (1 << i) == 0 {
            return Err(misuse("publish", off, "the slot is not reserved"));
        }
        chunk::set_bit_ordered(&self.pool, self.root.fmt, loc.base, i, true, fence)
            .map_err(|e| bit_error(e, "publish", off, loc.base, "already published"))?;
        Ok(())
    }

    /// [`EpAlloc::publish`] of a slot from [`EpAlloc::reserve`], with no lookup, no flush
    /// and no fence: the bit is set in the cache and reaches PM whenever its line is
    /// written back (or with the next persisted change of the same header word). Only for
    /// a type whose recovery finds its used objects by their content as well as by their
    /// bits, so that a bit lost in a crash is restored (HART's leaves from format 8, see
    /// `adopt`); the content must be durable before this call, so that a bit that does
    /// reach PM never covers content that did not. A reservation given back meanwhile
    /// (its bit clear in the reservation word) or whose chunk was recycled since (another
    /// generation) is ignored: the chunk a stale handle names may hold other objects by
    /// now.
    #[inline]
    pub fn publish_reserved_lazy(&self, r: Reserved<'_>) {
        let bit = 1u64 << r.slot;
        if r.it.reserved.load(Ordering::Acquire) & bit == 0 || r.it.gen.load(Ordering::Acquire) != r.gen {
            return;
        }
        let _ = chunk::set_bit_lazy(&self.pool, self.root.fmt, r.base, r.slot as usize, true);
    }

    /// Recovery: mark the free slot at `off` used, as found by its content (an object
    /// published with [`EpAlloc::publish_reserved_lazy`] whose bit a crash lost). Its bit is
    /// flushed, not fenced: the caller fences once after adopting what it found.
    pub fn adopt(&self, off: u64) -> Result<()> {
        self.pool.check_writable()?;
        let loc = self.locate(off).ok_or_else(|| misuse("adopt", off, "not an object offset"))?;
        let Some(i) = loc.slot else { return Err(misuse("adopt", off, "an extent")) };
        let old = loc.it.reserved.fetch_or(1 << i, Ordering::AcqRel);
        if old & (1 << i) != 0 {
            return Err(misuse("adopt", off, "the slot is reserved or used"));
        }
        chunk::set_bit_ordered(&self.pool, self.root.fmt, loc.base, i, true, false)
            .map_err(|e| bit_error(e, "adopt", off, loc.base, "already used"))?;
        Ok(())
    }

    /// [`EpAlloc::free`] for an engine that persists more under the same fence: reset the
    /// bit (compare-and-swap, then flush), call `flush_more` (which flushes the engine's
    /// own lines, e.g. the object's erase mark), fence once, and only then let the slot be
    /// reserved again, so that no one writes into it before both the reset bit and the
    /// caller's lines are durable. The locked compare-and-swap comes before any flush,
    /// which it would otherwise wait for.
    pub fn free_with(&self, off: u64, flush_more: impl FnOnce()) -> Result<()> {
        self.pool.check_writable()?;
        let loc = self.locate(off).ok_or_else(|| misuse("free", off, "not an object offset"))?;
        let Some(i) = loc.slot else {
            flush_more();
            self.pool.fence();
            return self.free_extent(&loc);
        };
        let gen = loc.it.gen.load(Ordering::Acquire);
        chunk::set_bit_ordered(&self.pool, self.root.fmt, loc.base, i, false, false)
            .map_err(|e| bit_error(e, "free", off, loc.base, "the object is not used"))?;
        flush_more();
        self.pool.fence();
        let old = loc.it.reserved.fetch_and(!(1 << i), Ordering::AcqRel);
        self.released(loc.list, loc.id, gen, old, 1 << i);
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
        chunk::set_bit_ordered(&self.pool, self.root.fmt, loc.base, i, false, fence)
            .map_err(|e| bit_error(e, "free", off, loc.base, "the object is not used"))?;
        if !fence {
            self.pool.flush_tolerated(); // the header word's flush, see `free_unfenced`
        }
        let old = loc.it.reserved.fetch_and(!(1 << i), Ordering::AcqRel);
        self.released(loc.list, loc.id, gen, old, 1 << i);
        Ok(())
    }

    /// Hint that the object at `off` will soon be freed (or published): start loading
    /// the allocator metadata a `free` reads — the offset map's entry, then the chunk's
    /// index item and header word — so that these misses overlap with the caller's own
    /// work instead of following it one after the other. Nothing is written and nothing
    /// waits: a wrong or stale guess costs only a wasted prefetch.
    ///
    /// Worth it where consecutive frees fall in different chunks (random deletes of a
    /// large tree: 4M Random keys in shuffled order, a HART delete went from ~1040 to ~880
    /// ns, docs/design/epalloc.md, "Algorithm 2 (EPMalloc)"). When the object lies in the chunk this thread located
    /// last, its metadata is cached already: then only the header line is prefetched, and
    /// only in the flushing modes, where each bit change's `clwb` evicts it.
    #[inline]
    pub fn prefetch_meta(&self, off: u64) {
        let last = LAST_CHUNK.with(|c| c.get());
        if last.covers(self.uid, off) {
            // The metadata is cached; but in the flushing modes the header line itself was
            // evicted by the last bit change's `clwb` (on this CPU), and the free's CAS
            // would wait for it.
            if self.pool.mode().flushes() {
                self.pool.prefetch_write(last.start);
            }
            return;
        }
        if let Some(base) = self.index.guess(off) {
            self.pool.prefetch_write(base);
        }
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
            // Header words are read under the list lock, which keeps the chunks on the
            // list: a chunk recycled once the lock is released may be reused as anything,
            // an engine's object written with plain stores included. `f` runs after the
            // lock is released, so it may allocate and free.
            let chunks: Vec<(u64, HeaderWord)> = {
                let g = list.inner.lock();
                let chunks = self.walk_list(&g).into_iter();
                match list.geo {
                    Some(_) => chunks.map(|c| (c, chunk::header(&self.pool, c))).collect(),
                    None => chunks.map(|c| (c, HeaderWord(0))).collect(),
                }
            };
            for (c, h) in chunks {
                match list.geo {
                    Some(g) => {
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
    ///
    /// # Safety
    /// The child offsets are the engine's data, read with plain loads: while this runs, no
    /// other thread may write any slot of type `parent` (used or free) nor allocate or
    /// free objects of that type. Recovery, before the engine serves requests, is such a
    /// time.
    pub unsafe fn reclaim_orphans(&self, parent: TypeId, child_ptr_at: usize, child: TypeId) -> Result<u64> {
        let read = |off: u64| -> u64 {
            // SAFETY: `off` is a slot of type `parent` of at least `child_ptr_at + 8` bytes
            // (checked below before each call), so the 8 bytes lie in the mapped pool; the
            // caller guarantees that no thread writes them or recycles their chunk
            // meanwhile, so the plain load races with nothing.
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

    /// Run the checker (see [`checker`]). Call it while no other thread uses the
    /// allocator.
    pub fn check(&self) -> Result<CheckReport> {
        checker::check(self)
    }

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
        if last.covers(self.uid, off) {
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
}

/// The error of a refused bit change: misuse, or a damaged header word.
fn bit_error(e: chunk::BitError, op: &str, off: u64, chunk: u64, why: &str) -> PoolError {
    match e {
        chunk::BitError::Same => misuse(op, off, why),
        chunk::BitError::Damaged(w) => PoolError::CorruptAllocator(format!(
            "{op}({off:#x}): the header word of chunk {chunk:#x} is damaged ({w:#x} fails its check)"
        )),
    }
}

fn misuse(op: &str, off: u64, why: &str) -> PoolError {
    PoolError::Allocator(format!("{op}({off:#x}): {why}"))
}
