//! DRAM index of chunks and extents: a table of [`Item`]s and a map from pool offset to
//! item, rebuilt at open. `free(off)` and `publish(off)` receive only an offset, and the
//! paper's `MemChunkOf(object)` must find the chunk in O(1) without a lock.
//!
//! **Offset map.** The heap is cut into 256-byte granules; entry `g` holds the id of the
//! item covering byte `g·256`. Every chunk is longer than a granule (the smallest is 464
//! bytes), so the item holding an offset covers the start of the offset's granule or of
//! the next one: a lookup reads at most two entries. Extents only register the granule of
//! their (page-aligned) start, which holds their one object's offset. The map costs
//! 4 bytes per 256 bytes of heap that holds chunks (1.6 %), allocated lazily in leaves.
//!
//! **Item table.** Items live in segments that double in size and never move, so a
//! reference obtained without a lock stays valid. Ids of recycled items are reused; every
//! reuse bumps the item's generation, which callers holding an id from an earlier moment
//! (a thread's current chunk) compare before trusting the item.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

/// log2 of the map granule.
const GRANULE_SHIFT: u32 = 8;
const FIRST_SEG: usize = 1024;
const SEGS: usize = 22;

/// One chunk or extent. Cache-line aligned: the reservation words of two threads'
/// current chunks must not share a line, or every reservation would bounce it.
#[derive(Default, Debug)]
#[repr(align(64))]
pub(crate) struct Item {
    /// Pool offset of the chunk / extent (0 while the item is unused).
    pub off: AtomicU64,
    /// Its length in bytes.
    pub len: AtomicU64,
    /// Chunk: DRAM reservation bits (bit i = slot i reserved or used), plus [`LOCKED`]
    /// while the chunk is being recycled or the item is unused. Extent: one of the
    /// `EXT_*` states.
    pub reserved: AtomicU64,
    /// Index of its list (directory entry).
    pub list: AtomicU32,
    /// Generation: bumped whenever the item is retired, so that stale ids are detected.
    pub gen: AtomicU32,
    /// Neighbours in the list's DRAM mirror (ids, 0 = none); changed under the list lock.
    pub prev: AtomicU32,
    pub next: AtomicU32,
    /// Whether the item is in its list's `partial` vector (under the list lock).
    pub in_partial: AtomicBool,
}

/// Reservation word value of an item that is being recycled or not in use: no slot can be
/// reserved, since every reservation is a CAS that requires this bit clear.
pub(crate) const LOCKED: u64 = 1 << 63;

pub(crate) struct Index {
    segs: Vec<OnceLock<Box<[Item]>>>,
    ids: Mutex<Ids>,
    leaf_shift: u32,
    map: Box<[OnceLock<Box<[AtomicU32]>>]>,
}

#[derive(Default)]
struct Ids {
    free: Vec<u32>,
    next: u32,
}

fn seg_of(id: u32) -> (usize, usize) {
    let p = id as usize - 1 + FIRST_SEG;
    let k = (usize::BITS - 1 - p.leading_zeros()) as usize - FIRST_SEG.trailing_zeros() as usize;
    (k, p - (FIRST_SEG << k))
}

impl Index {
    /// An index for a pool whose size never exceeds `max_size`.
    pub fn new(max_size: u64) -> Index {
        let granules = (max_size >> GRANULE_SHIFT) + 2;
        // At most 65536 leaves, each at least 16 Ki entries (4 MiB of pool).
        let mut leaf_shift = 14;
        while granules >> leaf_shift > 65536 {
            leaf_shift += 1;
        }
        let leaves = (granules >> leaf_shift) as usize + 1;
        Index {
            segs: (0..SEGS).map(|_| OnceLock::new()).collect(),
            ids: Mutex::new(Ids { free: Vec::new(), next: 1 }),
            leaf_shift,
            map: (0..leaves).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The item with id `id` (ids come from [`Index::alloc_id`] or the map).
    #[inline]
    pub fn item(&self, id: u32) -> Option<&Item> {
        if id == 0 {
            return None;
        }
        let (k, i) = seg_of(id);
        self.segs.get(k)?.get().map(|s| &s[i])
    }

    /// A fresh id whose item is unused (`reserved == LOCKED`, `off == 0`).
    pub fn alloc_id(&self) -> u32 {
        let mut ids = self.ids.lock();
        if let Some(id) = ids.free.pop() {
            return id;
        }
        let id = ids.next;
        ids.next += 1;
        let (k, _) = seg_of(id);
        self.segs[k].get_or_init(|| {
            (0..FIRST_SEG << k).map(|_| Item { reserved: AtomicU64::new(LOCKED), ..Item::default() }).collect()
        });
        id
    }

    /// Retire `id`: its item must already be detached from every list and the map.
    pub fn free_id(&self, id: u32) {
        if let Some(it) = self.item(id) {
            it.gen.fetch_add(1, Ordering::AcqRel);
            it.reserved.store(LOCKED, Ordering::Release);
            it.off.store(0, Ordering::Release);
            it.len.store(0, Ordering::Release);
            it.in_partial.store(false, Ordering::Relaxed);
        }
        self.ids.lock().free.push(id);
    }

    /// Every id handed out and not retired (for the checker; not concurrent-safe).
    pub fn live_ids(&self) -> Vec<u32> {
        let ids = self.ids.lock();
        let free: std::collections::HashSet<u32> = ids.free.iter().copied().collect();
        (1..ids.next).filter(|id| !free.contains(id)).collect()
    }

    fn entry(&self, g: u64) -> Option<&AtomicU32> {
        let leaf = self.map.get((g >> self.leaf_shift) as usize)?;
        let mask = (1u64 << self.leaf_shift) - 1;
        let leaf = leaf.get_or_init(|| (0..1usize << self.leaf_shift).map(|_| AtomicU32::new(0)).collect());
        leaf.get((g & mask) as usize)
    }

    fn entry_if_present(&self, g: u64) -> Option<&AtomicU32> {
        let leaf = self.map.get((g >> self.leaf_shift) as usize)?.get()?;
        leaf.get((g & ((1u64 << self.leaf_shift) - 1)) as usize)
    }

    fn granules(start: u64, end: u64, whole: bool) -> std::ops::Range<u64> {
        let g = 1u64 << GRANULE_SHIFT;
        if whole {
            start.div_ceil(g)..end.div_ceil(g)
        } else {
            // An extent: only the granule of its page-aligned start.
            start >> GRANULE_SHIFT..(start >> GRANULE_SHIFT) + 1
        }
    }

    /// Make `id` (whose `off`/`len` are set) findable by offset: all granules of a chunk
    /// (`whole`), only the first of an extent.
    pub fn register(&self, id: u32, start: u64, end: u64, whole: bool) {
        for g in Self::granules(start, end, whole) {
            if let Some(e) = self.entry(g) {
                e.store(id, Ordering::Release);
            }
        }
    }

    /// Undo [`Index::register`].
    pub fn unregister(&self, id: u32, start: u64, end: u64, whole: bool) {
        for g in Self::granules(start, end, whole) {
            if let Some(e) = self.entry_if_present(g) {
                let _ = e.compare_exchange(id, 0, Ordering::AcqRel, Ordering::Relaxed);
            }
        }
    }

    /// Prefetch the item the map names for `off`'s own granule and return its chunk's
    /// offset, with no check that the item covers `off` (a prefetch hint's guess: wrong
    /// only when `off` lies in the granule where its chunk begins).
    #[inline]
    pub fn guess(&self, off: u64) -> Option<u64> {
        let id = self.entry_if_present(off >> GRANULE_SHIFT)?.load(Ordering::Relaxed);
        let it = self.item(id)?;
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults and has no architectural effect.
        unsafe {
            std::arch::x86_64::_mm_prefetch((it as *const Item).cast::<i8>(), std::arch::x86_64::_MM_HINT_T0)
        };
        Some(it.off.load(Ordering::Relaxed))
    }

    /// The item that contains offset `off`, if any.
    #[inline]
    pub fn lookup(&self, off: u64) -> Option<(u32, &Item)> {
        let g = off >> GRANULE_SHIFT;
        for g in [g, g + 1] {
            let Some(e) = self.entry_if_present(g) else { continue };
            let id = e.load(Ordering::Acquire);
            if let Some(it) = self.item(id) {
                let s = it.off.load(Ordering::Acquire);
                if s != 0 && s <= off && off < s + it.len.load(Ordering::Acquire) {
                    return Some((id, it));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_map_to_doubling_segments() {
        assert_eq!(seg_of(1), (0, 0));
        assert_eq!(seg_of(1024), (0, 1023));
        assert_eq!(seg_of(1025), (1, 0));
        assert_eq!(seg_of(1024 + 2048), (1, 2047));
        assert_eq!(seg_of(1024 + 2048 + 1), (2, 0));
    }

    #[test]
    fn lookup_finds_adjacent_chunks_and_extents() {
        let ix = Index::new(1 << 20);
        let mk = |off: u64, len: u64, whole: bool| {
            let id = ix.alloc_id();
            let it = ix.item(id).unwrap();
            it.off.store(off, Ordering::Release);
            it.len.store(len, Ordering::Release);
            ix.register(id, off, off + len, whole);
            id
        };
        let a = mk(8192 + 16, 464, true);
        let b = mk(8192 + 16 + 464, 464, true);
        let e = mk(16384, 8192, false);
        assert_eq!(ix.lookup(8192 + 16).map(|x| x.0), Some(a));
        assert_eq!(ix.lookup(8192 + 16 + 463).map(|x| x.0), Some(a));
        assert_eq!(ix.lookup(8192 + 16 + 464).map(|x| x.0), Some(b));
        assert_eq!(ix.lookup(8192 + 16 + 927).map(|x| x.0), Some(b));
        assert_eq!(ix.lookup(8192 + 16 + 928).map(|x| x.0), None);
        assert_eq!(ix.lookup(16384 + 64).map(|x| x.0), Some(e));
        assert_eq!(ix.lookup(8192).map(|x| x.0), None);
        ix.unregister(a, 8192 + 16, 8192 + 16 + 464, true);
        ix.free_id(a);
        assert_eq!(ix.lookup(8192 + 16).map(|x| x.0), None);
        assert_eq!(ix.alloc_id(), a, "ids are reused");
        assert_eq!(ix.item(a).unwrap().gen.load(Ordering::Relaxed), 1);
        assert!(ix.lookup(u64::MAX - 1000).is_none());
    }
}
