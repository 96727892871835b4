//! The DRAM hash table of HART (§III.A.1, Fig. 1): hash key (the first k_h bytes of a key)
//! → its ART, plus an ordered index of hash keys for range scans (SPEC H8).
//!
//! *Hash keys* are packed into a `u64`: up to 7 key bytes big-endian in the top 56 bits and
//! the byte count in the low 8. Comparing packed values compares byte strings
//! lexicographically ("a" < "a\0" < "ab"), so the ordered index yields ARTs in key order.
//!
//! *Concurrency* (SPEC H7, §IV.G): every ART has its own reader-writer lock, the paper's
//! per-ART lock, and an operation holds it for its whole duration. Finding an ART takes no
//! lock of the table: with k_h ≤ 2 (the default) the hash key indexes an array of ART
//! pointers directly (65,793 slots, one for every hash key of 0, 1 or 2 bytes: one load,
//! no hashing, no probe); with longer hash keys a hash map in 64 shards is read under its
//! shard's read lock for the lookup alone. An ART lives in a [`Cell`] that is never freed
//! while the table lives: freeing an empty ART (SPEC H6) marks its cell dead under the
//! ART's write lock, unlinks it and keeps it for the next ART created. So a pointer found
//! without a lock can always be locked, and once it is, the cell's hash key and live flag
//! (read under the lock) say whether it still holds the ART looked for; if not, the lookup
//! starts again. Creating and freeing ARTs are serialised by one mutex, which lookups
//! never take.
//!
//! Why: every operation used to hold its shard's read lock too (two locked instructions)
//! and probe a SwissTable: without them a Dictionary search went 78–85 → 69–70 ns and a
//! delete 105–107 → 99–100 (docs/design/hart.md, "Tried and measured").

use crate::art::arena::NodeArena;
use crate::art::Art;
use crate::art_lock::ArtLock;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;

pub(crate) type HashKey = u64;
const SHARDS: usize = 64;

/// Pack the hash key of `key` (its first `kh` bytes, or all of it if shorter).
pub(crate) fn hash_key(key: &[u8], kh: usize) -> HashKey {
    let n = key.len().min(kh);
    if n == 2 {
        // The default k_h: one two-byte load instead of the loop.
        return (u16::from_be_bytes([key[0], key[1]]) as u64) << 48 | 2;
    }
    let mut v = 0u64;
    for (i, &b) in key[..n].iter().enumerate() {
        v |= (b as u64) << (56 - 8 * i);
    }
    v | n as u64
}

/// The bytes of a packed hash key.
pub(crate) fn hash_key_bytes(hk: HashKey) -> Vec<u8> {
    let n = (hk & 0xff) as usize;
    (0..n).map(|i| (hk >> (56 - 8 * i)) as u8).collect()
}

/// A hasher for packed hash keys: murmur3's 64-bit finaliser, which lets every input bit
/// reach the low bits the table indexes with. (A plain multiply does not: a packed hash key
/// has its varying bytes at the top and constant low bits, and the low bits of a product
/// depend only on the low bits of its factors, so every hash key of a given length fell in
/// one bucket: 65,536 two-byte hash keys of random integer keys probed in one chain, 1.2 µs
/// per search instead of 0.3.)
#[derive(Default)]
pub(crate) struct MulHasher(u64);
impl Hasher for MulHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        self.0 = fmix64(self.0);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = fmix64(v);
    }
}

#[inline]
fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// What a cell's lock guards: the ART and what identifies it.
pub(crate) struct Held {
    hk: HashKey,
    /// False once the ART was freed (SPEC H6); the cell then waits to be reused.
    alive: bool,
    art: Art,
}

/// One ART behind its reader-writer lock. Never freed while the table lives (see the
/// module doc).
pub(crate) struct Cell(ArtLock<Held>);

/// Hash key → cell, for hash keys longer than [`DIRECT_KH`] bytes.
type Map = HashMap<HashKey, *const Cell, BuildHasherDefault<MulHasher>>;

/// Longest hash key indexed directly.
const DIRECT_KH: usize = 2;
/// Direct slots: one for the empty hash key, 256 of one byte, 65,536 of two.
const DIRECT_SLOTS: usize = 1 + 256 + 65_536;

enum Index {
    /// Slot [`direct_slot`] of each hash key: its cell, or null.
    Direct(Box<[AtomicPtr<Cell>]>),
    Map(Vec<RwLock<Map>>),
}

/// The cells, owned here; the free ones (dead ARTs) are reused first.
#[derive(Default)]
struct Cells {
    /// Boxed so that a cell keeps its address when the vector grows: lookups hold cell
    /// pointers without any lock.
    #[allow(clippy::vec_box)]
    all: Vec<Box<Cell>>,
    free: Vec<*const Cell>,
}

pub(crate) struct HashTable {
    index: Index,
    /// Serialises creating and freeing ARTs; never taken to find one.
    cells: Mutex<Cells>,
    ordered: RwLock<BTreeSet<HashKey>>,
    /// Where every ART of the table allocates its nodes.
    arena: Arc<NodeArena>,
}

// SAFETY: the raw cell pointers name boxes in `cells.all`, which live as long as the table
// and are only ever accessed through their `RwLock`.
unsafe impl Send for HashTable {}
// SAFETY: shared use is sound for the same reason: through `&HashTable` the cell pointers
// are read atomically (`AtomicPtr`) or under a shard's `RwLock`, a cell's ART only under
// the cell's own lock, and `cells` only under its `Mutex`.
unsafe impl Sync for HashTable {}

impl HashTable {
    /// A table for hash keys of at most `kh` bytes.
    pub(crate) fn new(kh: usize) -> HashTable {
        let index = if kh <= DIRECT_KH {
            Index::Direct(null_slots())
        } else {
            Index::Map((0..SHARDS).map(|_| RwLock::new(Map::default())).collect())
        };
        HashTable {
            index,
            cells: Mutex::new(Cells::default()),
            ordered: RwLock::new(BTreeSet::new()),
            arena: Arc::new(NodeArena::new()),
        }
    }
}

/// [`DIRECT_SLOTS`] null slots (514 KiB) in zeroed memory. An allocation this large is a
/// fresh mapping (glibc's `calloc` then writes nothing), whose pages the kernel provides
/// only where a slot is first set: a HART of a few hash keys holds a few pages of it.
fn null_slots() -> Box<[AtomicPtr<Cell>]> {
    // `vec!` of a null pointer allocates zeroed memory (the element is all zero bits).
    let slots: Box<[*mut Cell]> = vec![std::ptr::null_mut(); DIRECT_SLOTS].into_boxed_slice();
    // SAFETY: `AtomicPtr<Cell>` has the size, alignment and bit validity of `*mut Cell`,
    // so the boxed slice is a valid slice of atomics of the same length, owned once.
    unsafe { Box::from_raw(Box::into_raw(slots) as *mut [AtomicPtr<Cell>]) }
}

/// The direct slot of a hash key of at most [`DIRECT_KH`] bytes.
#[inline]
fn direct_slot(hk: HashKey) -> usize {
    match hk & 0xff {
        0 => 0,
        1 => 1 + (hk >> 56) as usize,
        _ => 257 + (hk >> 48) as usize,
    }
}

fn shard_of(hk: HashKey) -> usize {
    (hk.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % SHARDS
}

impl HashTable {
    /// The cell that held the ART of `hk` when looked at (it may have been freed since:
    /// the caller checks under the cell's lock).
    ///
    /// The direct index (the default k_h <= 2) is inlined into every operation and the
    /// map's lookup kept out of line: as one function, with the shard's lock and the
    /// SwissTable probe in it, `find` was too large to inline and every operation paid a
    /// call for a single load (callgrind: 21 instructions per search).
    #[inline(always)]
    fn find(&self, hk: HashKey) -> Option<&Cell> {
        let p = match &self.index {
            Index::Direct(slots) => slots[direct_slot(hk)].load(Ordering::Acquire).cast_const(),
            Index::Map(shards) => Self::find_in_map(shards, hk),
        };
        // SAFETY: a non-null pointer of the index names a box of `cells.all`, which lives as
        // long as `self`.
        unsafe { p.as_ref() }
    }

    /// [`HashTable::find`] with hash keys longer than 2 bytes: the shard's map, under its
    /// read lock.
    #[inline(never)]
    fn find_in_map(shards: &[RwLock<Map>], hk: HashKey) -> *const Cell {
        shards[shard_of(hk)].read().get(&hk).copied().unwrap_or(std::ptr::null())
    }

    /// Point `hk`'s index entry at `cell` (or at nothing). Under the `cells` mutex.
    fn set_index(&self, hk: HashKey, cell: *const Cell) {
        match &self.index {
            Index::Direct(slots) => slots[direct_slot(hk)].store(cell.cast_mut(), Ordering::Release),
            Index::Map(shards) => {
                let mut m = shards[shard_of(hk)].write();
                if cell.is_null() {
                    m.remove(&hk);
                } else {
                    m.insert(hk, cell);
                }
            }
        }
    }

    /// Run `f` on the ART of `hk` under its read lock (None if there is no ART).
    #[inline]
    pub(crate) fn with<R>(&self, hk: HashKey, f: impl FnOnce(&Art) -> R) -> Option<R> {
        loop {
            let c = self.find(hk)?;
            let g = c.0.read();
            if g.alive && g.hk == hk {
                return Some(f(&g.art));
            }
            // Freed (and perhaps reused) since it was found: look again.
        }
    }

    /// Run `f` on the ART of `hk` under its write lock (None if there is no ART).
    #[inline]
    pub(crate) fn with_mut<R>(&self, hk: HashKey, f: impl FnOnce(&mut Art) -> R) -> Option<R> {
        loop {
            let c = self.find(hk)?;
            let mut g = c.0.write();
            if g.alive && g.hk == hk {
                return Some(f(&mut g.art));
            }
        }
    }

    /// Run `f` on the ART of `hk` under its write lock, creating an empty one (starting at
    /// `depth`) if needed. Inlined into its callers (every put): ~2 ns off an update (6
    /// alternating rounds of `examples/delete_profile`), whose HART result then need not
    /// go through memory.
    #[inline(always)]
    pub(crate) fn with_or_create<R>(&self, hk: HashKey, depth: usize, f: impl FnOnce(&mut Art) -> R) -> R {
        // As `with_mut`, written out so that `f` is moved only where it is called (an
        // `Option` around it cost a put ~13 instructions).
        loop {
            match self.find(hk) {
                Some(c) => {
                    let mut g = c.0.write();
                    if g.alive && g.hk == hk {
                        return f(&mut g.art);
                    }
                    // Freed (and perhaps reused) since it was found: look again.
                }
                None => self.create(hk, depth),
            }
        }
    }

    /// Give `hk` an empty ART if it has none.
    #[cold]
    fn create(&self, hk: HashKey, depth: usize) {
        let mut cells = self.cells.lock();
        if self.find(hk).is_some() {
            return; // created meanwhile
        }
        let held = Held { hk, alive: true, art: Art::new(depth, self.arena.clone()) };
        let cell = match cells.free.pop() {
            Some(c) => {
                // A lookup that found this cell under its old hash key may hold the lock
                // a moment; it sees the new identity and looks again.
                // SAFETY: a box of `cells.all` (see `find`).
                *unsafe { &*c }.0.write() = held;
                c
            }
            None => {
                let b = Box::new(Cell(ArtLock::new(held)));
                let p: *const Cell = &*b;
                cells.all.push(b);
                p
            }
        };
        self.set_index(hk, cell);
        self.ordered.write().insert(hk);
    }

    /// Free the ART of `hk` if it is (still) empty (SPEC H6).
    pub(crate) fn remove_if_empty(&self, hk: HashKey) -> bool {
        let mut cells = self.cells.lock();
        let Some(c) = self.find(hk) else { return false };
        let mut g = c.0.write();
        if !(g.alive && g.hk == hk && g.art.is_empty()) {
            return false;
        }
        // An empty tree has no nodes: nothing goes back to the arena.
        g.alive = false;
        self.set_index(hk, std::ptr::null());
        self.ordered.write().remove(&hk);
        drop(g);
        cells.free.push(c);
        true
    }

    /// Smallest hash key `>= from` that has an ART.
    pub(crate) fn next_at_or_after(&self, from: HashKey) -> Option<HashKey> {
        self.ordered.read().range(from..).next().copied()
    }

    /// Largest hash key `<= from` that has an ART.
    pub(crate) fn prev_at_or_before(&self, from: HashKey) -> Option<HashKey> {
        self.ordered.read().range(..=from).next_back().copied()
    }

    /// Number of ARTs.
    pub(crate) fn arts(&self) -> usize {
        self.ordered.read().len()
    }

    /// Run `f` on a quiescent table: no ART can be created or freed (the `cells` mutex) and
    /// every live ART is write-locked, so no operation is under way — each holds its ART's
    /// lock for its whole duration, and one ART's at a time, and never waits for the
    /// `cells` mutex while holding it — and none starts until `f` returns. `f` gets every
    /// ART with its hash key, in hash-key order. `f` must not call back into the table (it
    /// would wait for itself).
    pub(crate) fn quiesced<R>(&self, f: impl FnOnce(&[(HashKey, &Art)]) -> R) -> R {
        let cells = self.cells.lock();
        let guards: Vec<_> = cells.all.iter().map(|c| c.0.write()).collect();
        let mut arts: Vec<(HashKey, &Art)> = guards.iter().filter(|g| g.alive).map(|g| (g.hk, &g.art)).collect();
        arts.sort_unstable_by_key(|(k, _)| *k);
        f(&arts)
    }

    /// Visit every ART (order unspecified), each under its read lock.
    pub(crate) fn for_each(&self, mut f: impl FnMut(HashKey, &Art)) {
        let cells = self.cells.lock();
        for c in &cells.all {
            let g = c.0.read();
            if g.alive {
                f(g.hk, &g.art);
            }
        }
    }

    /// The node arena of the table's ARTs.
    pub(crate) fn arena(&self) -> &NodeArena {
        &self.arena
    }

    /// Approximate DRAM bytes of the index with its free cells (live ones are the ARTs'
    /// headers, counted with them), and of the ordered index.
    pub(crate) fn dram_bytes(&self) -> (u64, u64) {
        let mut table = match &self.index {
            // Counted whole, though only its pages with a set slot are in memory.
            Index::Direct(slots) => (slots.len() * 8) as u64,
            Index::Map(shards) => shards.iter().map(|s| (s.read().capacity() * (8 + 8 + 1)) as u64).sum::<u64>(),
        };
        table += (self.cells.lock().free.len() * std::mem::size_of::<Cell>()) as u64;
        let ordered = self.ordered.read().len() as u64 * 16;
        (table, ordered)
    }
}

#[cfg(test)]
mod hasher_tests {
    use super::*;
    use std::hash::Hash;

    /// Packed hash keys that differ only in their top bytes spread over the low bits.
    #[test]
    fn packed_hash_keys_spread_over_the_low_bits() {
        for kh in 1..=4usize {
            let mut buckets = std::collections::HashSet::new();
            for i in 0..4096u64 {
                let key = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_be_bytes();
                let mut h = MulHasher::default();
                hash_key(&key, kh).hash(&mut h);
                buckets.insert(h.finish() & 1023);
            }
            let distinct = 256usize.pow(kh.min(2) as u32).min(4096).min(1024);
            assert!(buckets.len() * 2 > distinct, "k_h {kh}: {} of 1024 buckets used", buckets.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_hash_keys_order_like_byte_strings() {
        let mut ks: Vec<&[u8]> = vec![b"", b"a", b"a\0", b"ab", b"b", b"\xff", b"\0", b"\0\0"];
        let mut packed: Vec<(u64, &[u8])> = ks.iter().map(|k| (hash_key(k, 2), *k)).collect();
        packed.sort();
        ks.sort();
        assert_eq!(packed.iter().map(|p| p.1).collect::<Vec<_>>(), ks);
        for k in ks {
            assert_eq!(hash_key_bytes(hash_key(k, 7)), k);
            // The two-byte fast path packs as the loop does.
            assert_eq!(hash_key_bytes(hash_key(k, 2)), &k[..k.len().min(2)]);
        }
        assert_eq!(hash_key(b"ab\xff", 2), 0x6162 << 48 | 2);
    }
}

#[cfg(test)]
mod cell_tests {
    use super::*;

    /// A freed ART's cell is reused for the next hash key; the old hash key then finds no
    /// ART (a stale pointer to the cell is rejected by its key check), the new one its
    /// own; `for_each`, `arts` and `quiesced` see live ARTs only. Both indexes.
    #[test]
    fn freed_cells_are_reused_and_never_answer_for_their_old_key() {
        for kh in [2usize, 3] {
            let t = HashTable::new(kh);
            let (a, b) = (hash_key(b"aaa", kh), hash_key(b"bbb", kh));
            assert!(t.with(a, |_| ()).is_none());
            t.with_or_create(a, kh, |art| assert!(art.is_empty()));
            let stale = t.find(a).expect("indexed") as *const Cell;
            assert!(t.remove_if_empty(a));
            assert!(!t.remove_if_empty(a), "already gone");
            assert!(t.with(a, |_| ()).is_none());
            t.with_or_create(b, kh, |_| ());
            assert_eq!(t.find(b).map(|c| c as *const Cell), Some(stale), "the cell is reused");
            // A lookup of `a` that found the cell before its reuse now holds `b`'s ART.
            // SAFETY: cells live as long as the table.
            let g = unsafe { &*stale }.0.read();
            assert!(g.alive && g.hk == b && g.hk != a);
            drop(g);
            assert!(t.with(a, |_| ()).is_none());
            assert!(t.with(b, |_| ()).is_some());
            let mut seen = Vec::new();
            t.for_each(|hk, _| seen.push(hk));
            assert_eq!(seen, [b]);
            assert_eq!(t.arts(), 1);
            assert_eq!(t.quiesced(|arts| arts.iter().map(|(k, _)| *k).collect::<Vec<_>>()), [b]);
        }
    }

    #[test]
    fn direct_slots_are_distinct_for_every_short_hash_key() {
        let mut keys: Vec<Vec<u8>> = vec![vec![]];
        keys.extend((0..=255u8).map(|x| vec![x]));
        keys.extend((0..=255u8).flat_map(|x| (0..=255u8).map(move |y| vec![x, y])));
        let mut slots: Vec<usize> = keys.iter().map(|k| direct_slot(hash_key(k, 2))).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots.len(), DIRECT_SLOTS);
        assert_eq!(slots.last(), Some(&(DIRECT_SLOTS - 1)));
    }
}
