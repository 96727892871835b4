//! PM leaves (paper §3 and §4): an unsorted array of entries, a validity bitmap
//! and a fingerprint per entry, in one EPallocator object; and the key and value objects
//! that entries name when a key or value does not fit its words.
//!
//! [`Leaf`] reads and writes one leaf in place. It has no lock of its own: the tree holds
//! the leaf's DRAM lock (`inner::LeafNode::lock`) around every use, shared to read,
//! exclusive to write, so the plain loads and stores here never race. Every change a
//! crash must not tear is one 8-byte store of the bitmap or `next` word, persisted after
//! everything it commits (the paper's p-atomic commit, §4).

use crate::error::{corrupt, Result};
use crate::fingerprint;
use crate::layout::*;
use pmkv_substrate::epalloc::{EpAlloc, TypeId};
use pmkv_substrate::Pool;
use smallvec::SmallVec;

/// One entry's four words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) k0: u64,
    pub(crate) k1: u64,
    pub(crate) value: u64,
    pub(crate) meta: u64,
}

impl Entry {
    /// The entry naming key `k` and the value word `value` with its meta bits `vmeta`.
    pub(crate) fn new(k: KeyWords, value: u64, vmeta: u64) -> Entry {
        Entry { k0: k.k0, k1: k.k1, value, meta: k.meta | vmeta }
    }
    /// How this entry names its key.
    pub(crate) fn key_words(&self) -> KeyWords {
        KeyWords { k0: self.k0, k1: self.k1, meta: self.meta & M_KEY_BITS }
    }
    /// The key object this entry names, if its key is in one.
    pub(crate) fn key_obj(&self) -> Option<u64> {
        (self.meta & M_KOBJ != 0).then_some(self.k0)
    }
    /// The value object this entry names, if its value is in one.
    pub(crate) fn value_obj(&self) -> Option<u64> {
        (self.meta & M_VOBJ != 0).then_some(self.value)
    }
}

/// A key read from a leaf: in the entry's words, or in the pool (a key object).
pub(crate) enum KeyBytes<'p> {
    Inline([u8; INLINE_KEY], usize),
    Pm(&'p [u8]),
}

impl KeyBytes<'_> {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            KeyBytes::Inline(b, n) => &b[..*n],
            KeyBytes::Pm(s) => s,
        }
    }
}

/// A value read from a leaf: in the entry's value word, or in the pool (a value object).
pub(crate) enum ValueBytes<'p> {
    Inline([u8; INLINE_VALUE], usize),
    Pm(&'p [u8]),
}

impl ValueBytes<'_> {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            ValueBytes::Inline(b, n) => &b[..*n],
            ValueBytes::Pm(s) => s,
        }
    }
}

/// The 8-byte word at `off`.
#[inline]
pub(crate) fn load(pool: &Pool, off: u64) -> u64 {
    // SAFETY: FPTree's shared PM words (bitmaps, `next` words, the micro-logs) are written
    // with atomic stores (`Pool::store_u64`) under the lock that orders them with this
    // load; other words are written with plain stores only under the same locks, or
    // before the object is published, when no other thread can reach it.
    unsafe { pool.load_u64(off) }
}

/// The `len` bytes at `off`, if they lie in the pool.
pub(crate) fn bytes(pool: &Pool, off: u64, len: usize) -> Result<&[u8]> {
    if !pool.contains(off, len as u64) {
        return Err(corrupt(format!("[{off:#x}, +{len}) lies outside the pool")));
    }
    // SAFETY: in the mapped pool (checked above), which lives as long as `pool`; the
    // caller holds the lock that keeps the object from being freed or rewritten.
    Ok(unsafe { std::slice::from_raw_parts(pool.at::<u8>(off), len) })
}

/// Store `v` at the 8-byte word `off` and persist it: one p-atomic commit.
pub(crate) fn commit_word(pool: &Pool, off: u64, v: u64) {
    // SAFETY: the caller owns the word by the tree's locks (or recovery runs alone).
    unsafe { pool.store_u64(off, v) };
    pool.persist_off(off, 8);
}

/// Write `bytes` as a new object of type `ty` (length, CRC, bytes), persist it and
/// publish it. The caller links it into an entry; a crash before that leaves it used and
/// unreferenced, which the recovery sweep frees.
pub(crate) fn write_object(pool: &Pool, alloc: &EpAlloc, ty: TypeId, data: &[u8]) -> Result<u64> {
    let len = OBJ_HEAD + data.len();
    let off = alloc.alloc(ty, len)?;
    let mut head = [0u8; OBJ_HEAD];
    head[..4].copy_from_slice(&(data.len() as u32).to_le_bytes());
    head[4..].copy_from_slice(&obj_crc(data).to_le_bytes());
    // SAFETY: a reserved object of at least `len` bytes that no one else can reach.
    unsafe {
        std::ptr::copy_nonoverlapping(head.as_ptr(), pool.at::<u8>(off), OBJ_HEAD);
        std::ptr::copy_nonoverlapping(data.as_ptr(), pool.at::<u8>(off + OBJ_HEAD as u64), data.len());
    }
    pool.persist_off(off, len);
    if let Err(e) = alloc.try_publish(off) {
        alloc.unreserve(off);
        return Err(e.into());
    }
    Ok(off)
}

/// The bytes of the object at `off`, which an entry says hold `len` bytes; `verify`:
/// check its CRC too. A length that differs, an object outside the pool or a failed CRC
/// is damage.
pub(crate) fn object(pool: &Pool, off: u64, len: usize, verify: bool) -> Result<&[u8]> {
    pool.note_read_at(off, OBJ_HEAD + len);
    let head = bytes(pool, off, OBJ_HEAD)?;
    let stored = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
    if stored != len {
        return Err(corrupt(format!("object {off:#x} holds {stored} bytes, its entry says {len}")));
    }
    let data = bytes(pool, off + OBJ_HEAD as u64, len)?;
    if verify && u32::from_le_bytes(head[4..].try_into().expect("4 bytes")) != obj_crc(data) {
        return Err(corrupt(format!("object {off:#x} fails its checksum")));
    }
    Ok(data)
}

/// One PM leaf, by offset.
#[derive(Clone, Copy)]
pub(crate) struct Leaf<'p> {
    pub(crate) pool: &'p Pool,
    pub(crate) off: u64,
}

impl<'p> Leaf<'p> {
    pub(crate) fn new(pool: &'p Pool, off: u64) -> Leaf<'p> {
        Leaf { pool, off }
    }

    /// The validity bitmap.
    #[inline]
    pub(crate) fn bitmap(&self) -> u64 {
        load(self.pool, self.off + L_BITMAP)
    }

    /// The next leaf's offset (0: the last leaf).
    #[inline]
    pub(crate) fn next(&self) -> u64 {
        load(self.pool, self.off + L_NEXT)
    }

    /// The fingerprints.
    #[inline]
    pub(crate) fn fps(&self) -> [u8; CAP] {
        // SAFETY: the leaf lies in the pool (it is a used leaf object) and its fingerprint
        // bytes are written only under the exclusive leaf lock the caller excludes.
        unsafe { std::ptr::read(self.pool.at::<[u8; CAP]>(self.off + L_FPS)) }
    }

    /// Entry `slot` (one PM line read, counted for the counters and the read-latency
    /// emulation; so are line 0 and objects, below).
    #[inline]
    pub(crate) fn entry(&self, slot: usize) -> Entry {
        let o = entry_off(self.off, slot);
        self.pool.note_read_at(o, ENTRY as usize);
        // SAFETY: as `fps`, for the entry's 32 bytes (32-aligned in the leaf).
        let w = unsafe { std::ptr::read(self.pool.at::<[u64; 4]>(o)) };
        Entry { k0: w[0], k1: w[1], value: w[2], meta: w[3] }
    }

    /// The key of `e`, an entry of this leaf. Key objects are verified when `verify`.
    pub(crate) fn key(&self, e: &Entry, verify: bool) -> Result<KeyBytes<'p>> {
        let len = key_len(e.meta);
        match e.key_obj() {
            Some(o) => Ok(KeyBytes::Pm(object(self.pool, o, len, verify)?)),
            None => {
                if len > INLINE_KEY {
                    return Err(corrupt(format!("leaf {:#x}: an inline key of {len} bytes", self.off)));
                }
                let mut b = [0u8; INLINE_KEY];
                b[..8].copy_from_slice(&e.k0.to_le_bytes());
                b[8..].copy_from_slice(&e.k1.to_le_bytes());
                Ok(KeyBytes::Inline(b, len))
            }
        }
    }

    /// The value of `e`, an entry of this leaf; value objects are verified (CRC) at every
    /// read, so that damage is an error, never other data.
    pub(crate) fn value(&self, e: &Entry) -> Result<ValueBytes<'p>> {
        let len = value_len(e.meta);
        match e.value_obj() {
            Some(o) => Ok(ValueBytes::Pm(object(self.pool, o, len, true)?)),
            None => {
                if len > INLINE_VALUE {
                    return Err(corrupt(format!("leaf {:#x}: an inline value of {len} bytes", self.off)));
                }
                Ok(ValueBytes::Inline(e.value.to_le_bytes(), len))
            }
        }
    }

    /// Whether `e` holds `key` (whose length the caller knows matches no other way).
    #[inline]
    fn holds(&self, e: &Entry, key: &[u8]) -> Result<bool> {
        if key_len(e.meta) != key.len() {
            return Ok(false);
        }
        Ok(self.key(e, false)?.as_slice() == key)
    }

    /// The valid slot holding `key` (fingerprint `fp`) under bitmap `bitmap`: only the
    /// slots whose fingerprint matches are compared (§3 "Fingerprinting").
    pub(crate) fn find(&self, key: &[u8], fp: u8, bitmap: u64) -> Result<Option<(usize, Entry)>> {
        self.pool.note_read_at(self.off, 64); // line 0: the bitmap and the fingerprints
        let mut cands = fingerprint::matching(&self.fps(), fp, bitmap & SLOTS_MASK);
        while cands != 0 {
            let slot = cands.trailing_zeros() as usize;
            cands &= cands - 1;
            let e = self.entry(slot);
            if self.holds(&e, key)? {
                return Ok(Some((slot, e)));
            }
        }
        Ok(None)
    }

    /// Write entry `slot` and its fingerprint and flush them; the caller fences and then
    /// commits the slot by its bitmap bit. The slot must be invalid (not in the bitmap).
    pub(crate) fn write_entry(&self, slot: usize, e: &Entry, fp: u8) {
        let o = entry_off(self.off, slot);
        // SAFETY: an invalid slot of a used leaf, written under the exclusive leaf lock;
        // readers ignore it until its bitmap bit is set.
        unsafe {
            std::ptr::write(self.pool.at::<[u64; 4]>(o), [e.k0, e.k1, e.value, e.meta]);
            std::ptr::write(self.pool.at::<u8>(self.off + L_FPS + slot as u64), fp);
        }
        self.pool.flush_off(o, ENTRY as usize);
        self.pool.flush_off(self.off + L_FPS + slot as u64, 1);
    }

    /// Replace the bitmap with `bitmap`: the commit of an insert, update or delete.
    pub(crate) fn commit_bitmap(&self, bitmap: u64) {
        commit_word(self.pool, self.off + L_BITMAP, bitmap);
    }

    /// Point `next` at `next`, persisted.
    pub(crate) fn set_next(&self, next: u64) {
        commit_word(self.pool, self.off + L_NEXT, next);
    }

    /// The leaf's bytes.
    pub(crate) fn image(&self) -> &'p [u8] {
        // SAFETY: a used leaf object inside the pool; the caller excludes its writers.
        unsafe { std::slice::from_raw_parts(self.pool.at::<u8>(self.off), LEAF_SIZE) }
    }

    /// The valid entries of the leaf whose keys `keep` accepts, in key order, each entry
    /// read once: its key (in place: the entry's words, or its key object), its slot and
    /// its words. For a split and scans. The leaves are unsorted (§3), so a scan must sort
    /// a leaf's keys, but it reads each entry once and allocates nothing for it (at most
    /// [`CAP`] entries, on the stack): the authors' scan sorts the slots of one leaf in
    /// place and reads the entries it visits, and so does this. Key objects are not
    /// verified here: the open verified every object it reached, and nothing but this
    /// process writes the pool while it is open.
    pub(crate) fn sorted_entries(
        &self,
        keep: impl Fn(&[u8]) -> bool,
    ) -> Result<SmallVec<[(KeyBytes<'p>, usize, Entry); CAP]>> {
        self.pool.note_read_at(self.off, 64);
        let mut v = SmallVec::new();
        let mut m = self.bitmap() & SLOTS_MASK;
        while m != 0 {
            let slot = m.trailing_zeros() as usize;
            m &= m - 1;
            let e = self.entry(slot);
            let k = self.key(&e, false)?;
            if keep(k.as_slice()) {
                v.push((k, slot, e));
            }
        }
        v.sort_unstable_by(|a: &(KeyBytes<'p>, usize, Entry), b| a.0.as_slice().cmp(b.0.as_slice()));
        Ok(v)
    }
}
