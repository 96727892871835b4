//! Opening an allocator: recovery after a crash, and the rebuild of every DRAM structure.
//!
//! 1. Validate the root block that pool root 0 names (magic, CRC, version, geometry). If
//!    the crash came inside [`EpAlloc::create`] after root 0 was set but before the heap
//!    top covered the root block, raise the heap top now.
//! 2. Format 3: check the directory before anything is repaired — every tag and link
//!    word passes its check, used entries come first (entries are created in index
//!    order), and their number is the count word's, or more after a crash between
//!    lists' creation and their count's write-back (then the count is rewritten).
//! 3. For each directory entry: finish the list's interrupted recycle, if any
//!    (`recycle_log::recover`, every case of Algorithm 6), then walk its persistent list
//!    (Algorithm 7's walk), validating each chunk (aligned, inside the heap, header word
//!    valid — format 3: its check holds, format 2: consistent; extents: magic, length and,
//!    format 3, the length's check), each `PNext` (format 3: its check) and rejecting a
//!    chunk reached twice (a cycle, or a chunk on two lists). The DRAM mirror of the list,
//!    the offset index and the reservation words (= the PM bitmaps) are built on the way.
//! 4. Sort everything the lists reach; any overlap is corruption. Free space is the rest
//!    of `[heap_start, heap_top)`: this is where a chunk taken but never linked, a
//!    recycled chunk, an extent reserved but never published, or heap-top growth not yet
//!    used by the time of the crash goes back to — nothing leaks.
//!
//! Reservations are DRAM-only, so after a crash every slot that was reserved but not
//! published is free again (paper §III.A point 6).

use super::check::Format;
use super::chunk;
use super::extent::{self, EXT_USED, PAGE};
use super::recycle_log::{self, RecycleCase};
use super::root::{decode_tag, Root, DIR_CAP};
use super::seal::{self, Sealer};
use super::size_class::{Geometry, EXTENT_CLASS, GEOMETRY, MIN_CHUNK_LEN};
use super::space::FreeSpace;
use super::{pack, EpAlloc, ListState, TypeId, EPALLOC_ROOT};
use crate::error::{PoolError, Result};
use crate::pool::Pool;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What [`EpAlloc::open`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The recycle-log case applied to each list: (type, class code, case).
    pub cases: Vec<(TypeId, u8, RecycleCase)>,
    /// Lists in the directory.
    pub lists: usize,
    /// Chunks and extents on them.
    pub chunks: u64,
    pub extents: u64,
    /// Used slots (published objects in chunks).
    pub used_slots: u64,
    /// Free space recomputed from the lists.
    pub free_bytes: u64,
    /// The crash came inside `create`: the heap top had to be raised over the root block.
    pub finished_create: bool,
}

impl RecoveryReport {
    /// Lists whose recycle log was not clean, with the case that recovered them.
    pub fn repaired(&self) -> impl Iterator<Item = &(TypeId, u8, RecycleCase)> {
        self.cases.iter().filter(|c| c.2 != RecycleCase::Clean)
    }
}

fn corrupt<T>(what: String) -> Result<T> {
    Err(PoolError::CorruptAllocator(what))
}

/// Whether `off` can be an item of a list with geometry `geo` (`None`: extents).
pub(crate) fn item_ok(
    pool: &Pool,
    fmt: Format,
    geo: Option<Geometry>,
    off: u64,
    heap_start: u64,
    heap_top: u64,
) -> bool {
    if off < heap_start {
        return false;
    }
    match geo {
        Some(g) => {
            off.is_multiple_of(g.align as u64) && off.checked_add(g.chunk_len as u64).is_some_and(|e| e <= heap_top)
        }
        None => {
            off.is_multiple_of(PAGE) && off + PAGE <= heap_top && extent::read_len(pool, fmt, off, heap_top).is_some()
        }
    }
}

/// Format 3: the directory's own checks, before any repair (see the module doc, step 2).
/// A tag that fails its check, a used entry after an unused one, or a number of used
/// entries other than the count (or the count plus one after a crash) is `Corrupt`.
fn check_directory(pool: &Pool, root: &Root) -> Result<()> {
    let fmt = root.fmt;
    let mut used = 0u64;
    let mut first_unused = None;
    for i in 0..DIR_CAP {
        let e = root.entry(i);
        match decode_tag(fmt, e, e.raw_tag(pool)).map_err(PoolError::CorruptAllocator)? {
            None => {
                first_unused.get_or_insert(i);
            }
            Some(_) => {
                if let Some(u) = first_unused {
                    return corrupt(format!(
                        "directory entry {i} at {:#x} is in use after unused entry {u} (an entry was zeroed)",
                        e.0
                    ));
                }
                used += 1;
            }
        }
    }
    let count = root.count(pool)?;
    if used == count {
        return Ok(());
    }
    if used > count && !pool.was_clean() {
        // A crash between lists' creation (tag persisted) and their count's write-back: the
        // count is stored after its tag, flushed but not fenced, by any thread creating a
        // list (one at a time, under the directory lock, so it only grows), so a crash can
        // leave it behind by as many lists as threads created since their last fences —
        // never ahead. A zeroed entry makes the directory shorter than the count instead.
        if !pool.is_read_only() {
            root.set_count(pool, used, true);
        }
        return Ok(());
    }
    corrupt(format!(
        "directory count word at {:#x} says {count} entries are in use, the directory has {used} (an entry was zeroed)",
        root.count_at()
    ))
}

pub(crate) fn open(pool: Arc<Pool>, verify_seal: bool) -> Result<EpAlloc> {
    let root = Root::read(&pool, pool.root(EPALLOC_ROOT))?;
    let mut rep = RecoveryReport::default();
    if pool.heap_top() < root.heap_start {
        pool.raise_heap_top(root.heap_start)?;
        rep.finished_create = true;
    }
    let heap_top = pool.heap_top();
    let hs = root.heap_start;
    let max_steps = (heap_top - hs) / MIN_CHUNK_LEN as u64 + 1;
    let mut ep = EpAlloc::empty(pool.clone(), root, RecoveryReport::default());
    let mut tags = HashSet::new();
    let mut seen = HashSet::new();
    let mut spans: Vec<(u64, u64)> = Vec::new();
    let mut sealer = Sealer::new();
    let fmt = root.fmt;
    if fmt.checked() {
        check_directory(&pool, &root)?;
    }
    for i in 0..DIR_CAP {
        let e = root.entry(i);
        let tag = e.raw_tag(&pool);
        let Some((ty, class)) = decode_tag(fmt, e, tag).map_err(PoolError::CorruptAllocator)? else {
            if !e.links_empty(&pool, fmt) {
                return corrupt(format!("unused directory entry {i} at {:#x} has a list or a log", e.0));
            }
            continue;
        };
        if !tags.insert((ty, class)) {
            return corrupt(format!("two directory entries for type {} class code {class}", ty.0));
        }
        let geo = (class != EXTENT_CLASS).then(|| GEOMETRY[class as usize]);
        let valid = |off: u64| item_ok(&pool, fmt, geo, off, hs, heap_top);
        let case = recycle_log::recover(&pool, fmt, e, &valid, max_steps)?;
        rep.cases.push((ty, class, case));
        sealer.list(i, tag);
        rep.lists += 1;
        let list = ListState::new(i, e, ty, class);
        {
            let mut inner = list.inner.lock();
            let mut tail = 0u32;
            let mut off = e.head(&pool, fmt)?;
            while off != 0 {
                if !valid(off) {
                    return corrupt(format!(
                        "list of type {} class code {class} reaches {off:#x}, not a valid item",
                        ty.0
                    ));
                }
                if !seen.insert(off) {
                    return corrupt(format!("chunk {off:#x} is reached twice (a cycle, or on two lists)"));
                }
                let (len, reserved) = match geo {
                    Some(g) => {
                        let h = chunk::header(&pool, off);
                        sealer.item(off, h.0);
                        if !h.is_valid(fmt, off) {
                            return corrupt(format!("chunk {off:#x} has a damaged header word {:#x}", h.0));
                        }
                        rep.chunks += 1;
                        rep.used_slots += h.used_count() as u64;
                        (g.chunk_len as u64, h.bitmap())
                    }
                    None => {
                        rep.extents += 1;
                        let len = extent::read_len(&pool, fmt, off, heap_top).unwrap_or(PAGE);
                        sealer.item(off, len);
                        (len, EXT_USED)
                    }
                };
                let id = ep.index.alloc_id();
                let it = ep.index.item(id).expect("fresh id");
                ep.init_item(it, &list, off, len);
                it.prev.store(tail, Ordering::Release);
                match ep.index.item(tail) {
                    Some(t) => t.next.store(id, Ordering::Release),
                    None => inner.head = id,
                }
                tail = id;
                inner.count += 1;
                ep.index.register(id, off, off + len, geo.is_some());
                it.reserved.store(reserved, Ordering::Release);
                if geo.is_some() && reserved != chunk::BITMAP_MASK {
                    it.in_partial.store(true, Ordering::Relaxed);
                    inner.partial.push(pack(id, it.gen.load(Ordering::Acquire)));
                }
                spans.push((off, off + len));
                off = chunk::next(&pool, fmt, off)?;
            }
        }
        ep.install_list(list);
    }
    // After a clean shutdown the lists must be exactly what was sealed then (see `seal`):
    // otherwise a link was cut or redirected, or a header or tag changed, since.
    if verify_seal && pool.was_clean() {
        let (want, found) = (pool.seal(), sealer.finish());
        if want != found {
            return corrupt(format!(
                "the chunk lists differ from those sealed at the last clean shutdown (sealed: {}; found: {}): \
                 a list was cut or redirected, or a chunk header changed",
                seal::describe(want),
                seal::describe(found)
            ));
        }
    }
    spans.sort_unstable();
    let mut free = FreeSpace::default();
    let mut at = hs;
    for (s, e) in spans {
        if s < at {
            return corrupt(format!("item at {s:#x} overlaps the item before it (ending at {at:#x})"));
        }
        free.insert(at, s);
        at = e;
    }
    free.insert(at, heap_top);
    rep.free_bytes = free.bytes();
    *ep.space.lock() = free;
    ep.recovery = rep;
    ep.opened = true;
    Ok(ep)
}
