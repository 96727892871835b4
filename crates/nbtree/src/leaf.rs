//! Two-layer leaf nodes (paper §3.1, SPEC N1): the DRAM metadata layer ([`Leaf`]) over
//! a PM key-value block, and the leaf-level reads of Algorithm 5 (`find`) with the
//! bitmap and fingerprint filters (§3.2 "Efficient Search", SPEC N3).
//!
//! Both layers are singly linked: `Leaf::next` in DRAM, the block's first word in PM.
//! A leaf's metadata is owned by the tree: it is freed through crossbeam-epoch once an
//! SMO has replaced it and no thread can still hold it (SPEC N4).

use crate::layout::*;
use pmkv_substrate::Pool;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Bit 63 of `bitmap`: the leaf is full and an SMO has started (Algorithm 1 line 4).
pub(crate) const SMO_BIT: u64 = 1 << 63;
/// Bits of committed slots.
pub(crate) const SLOTS_MASK: u64 = (1 << CAP) - 1;
/// `flag`: the link phase is complete (new leaves in both lists and in the parent).
pub(crate) const LINKED: u8 = 1;

/// The DRAM metadata of one leaf (paper §3.1: fps, num, bitmap, data_ptr, copy_ptr, flag,
/// next), plus the fences this implementation needs for byte-string keys.
///
/// Laid out for a search: the bitmap and the fingerprints it filters by are the first
/// 72 bytes, on the leaf's first two cache lines (fetched together by the adjacent-line
/// prefetcher); the rest is touched by writers and SMOs.
#[repr(C, align(64))]
pub(crate) struct Leaf {
    /// Committed slots, and [`SMO_BIT`].
    pub bitmap: AtomicU64,
    /// One-byte fingerprints of the slots' keys, eight to a word (slot `i` is byte `i % 8`
    /// of word `i / 8`), so that a search compares all of them in a few word operations
    /// ([`Leaf::matching`]) instead of a loop over the slots.
    fps: [AtomicU64; 8],
    /// SMO phase flags ([`LINKED`]).
    pub flag: AtomicU8,
    /// The paper's `data_ptr`: pool offset of the key-value block. Never changes.
    pub block: u64,
    /// The paper's `copy_ptr`: the first new leaf of this leaf's SMO, once copied.
    pub copy: AtomicPtr<Leaf>,
    /// Slots taken by committed and in-flight inserts (fetch-and-add, Algorithm 1 line 2).
    pub num: AtomicU32,
    /// Written since its seal was last computed (the seal is rewritten at clean close).
    pub dirty: AtomicBool,
    /// The next leaf of the metadata layer.
    pub next: AtomicPtr<Leaf>,
    /// Inclusive lower fence: no key below it is ever stored here (empty for the first
    /// leaf and the sentinel).
    pub low: Arc<[u8]>,
    /// For the left leaf of a two-way SMO: keys `>= split` belong to `sibling`.
    pub split: Option<Arc<[u8]>>,
    /// The right leaf of the same SMO (null if the SMO made one leaf).
    pub sibling: AtomicPtr<Leaf>,
    /// NBTree-W (the paper's ablation, §6.4): writers of this leaf take this lock
    /// instead of relying on the lock-free protocol alone. Unused otherwise.
    pub wlock: parking_lot::Mutex<()>,
}

impl Leaf {
    pub(crate) fn new(block: u64, low: Arc<[u8]>) -> Leaf {
        Leaf {
            bitmap: AtomicU64::new(0),
            num: AtomicU32::new(0),
            flag: AtomicU8::new(0),
            dirty: AtomicBool::new(true),
            block,
            copy: AtomicPtr::new(std::ptr::null_mut()),
            next: AtomicPtr::new(std::ptr::null_mut()),
            low,
            split: None,
            sibling: AtomicPtr::new(std::ptr::null_mut()),
            wlock: parking_lot::Mutex::new(()),
            fps: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// The fingerprint of `slot`.
    #[inline]
    pub(crate) fn fp(&self, slot: usize) -> u8 {
        (self.fps[slot / 8].load(Ordering::Relaxed) >> (8 * (slot % 8))) as u8
    }

    /// Set the fingerprint of `slot` (a slot this thread owns: other bytes of the word may
    /// change meanwhile, so the byte is replaced by a CAS loop).
    #[inline]
    pub(crate) fn set_fp(&self, slot: usize, fp: u8) {
        let sh = 8 * (slot % 8);
        let _ = self.fps[slot / 8]
            .fetch_update(Ordering::Release, Ordering::Relaxed, |w| Some(w & !(0xff << sh) | (fp as u64) << sh));
    }

    /// Set every fingerprint of a leaf no other thread can see yet (a leaf being built):
    /// plain stores of whole words, not a read-modify-write per slot.
    pub(crate) fn init_fps(&self, fps: &[u8; CAP]) {
        for (w, chunk) in self.fps.iter().zip(fps.chunks(8)) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            w.store(u64::from_le_bytes(b), Ordering::Relaxed);
        }
    }

    /// The slots whose fingerprint is `fp`, as a bitmap (SWAR: a zero byte of
    /// `word ^ fp·0x0101..` is a match, found without carries between bytes).
    #[inline]
    pub(crate) fn matching(&self, fp: u8) -> u64 {
        const LO7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
        let pat = (fp as u64).wrapping_mul(0x0101_0101_0101_0101);
        let mut out = 0u64;
        for (i, w) in self.fps.iter().enumerate() {
            let x = w.load(Ordering::Relaxed) ^ pat;
            // High bit of each byte set iff that byte of `x` is non-zero.
            let nonzero = ((x & LO7).wrapping_add(LO7) | x) & !LO7;
            let zero = !nonzero & !LO7;
            // Gather the 8 high bits into one byte.
            let bits = ((zero >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) & 0xff;
            out |= bits << (8 * i);
        }
        out
    }

    /// Whether an SMO has started on this leaf.
    #[inline]
    pub(crate) fn in_smo(&self) -> bool {
        self.bitmap.load(Ordering::Acquire) & SMO_BIT != 0
    }

    /// Note a write (for the seal at close). A load first: the flag is usually set, and a
    /// store every time would bounce the line between writers.
    #[inline]
    pub(crate) fn touch(&self) {
        if !self.dirty.load(Ordering::Relaxed) {
            self.dirty.store(true, Ordering::Relaxed);
        }
    }

    /// Offset of the key word of `slot`.
    #[inline]
    pub(crate) fn key_at(&self, slot: usize) -> u64 {
        entry_off(self.block, slot)
    }

    /// Offset of the payload of `slot`.
    #[inline]
    pub(crate) fn payload_at(&self, slot: usize) -> u64 {
        entry_off(self.block, slot) + E_PAYLOAD
    }

    /// Offset of the inline value word of `slot`.
    #[inline]
    pub(crate) fn value_at(&self, slot: usize) -> u64 {
        entry_off(self.block, slot) + E_VALUE
    }
}

/// Which new leaf of an SMO that started at `left` holds `key`.
#[inline]
pub(crate) fn pick(left: &Leaf, key: &[u8]) -> *const Leaf {
    match &left.split {
        Some(s) if key >= &s[..] => left.sibling.load(Ordering::Acquire),
        _ => left as *const Leaf,
    }
}

/// Which new leaf of an SMO holds the keys just below `bound` (for reverse scans).
#[inline]
pub(crate) fn pick_below(left: &Leaf, bound: &[u8]) -> *const Leaf {
    match &left.split {
        Some(s) if &s[..] < bound => left.sibling.load(Ordering::Acquire),
        _ => left as *const Leaf,
    }
}

/// A key read from an entry: inline bytes or a slice of its key object.
pub(crate) enum KeyBytes<'a> {
    Inline([u8; 8], usize),
    Obj(&'a [u8]),
}

impl KeyBytes<'_> {
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            KeyBytes::Inline(b, n) => &b[..*n],
            KeyBytes::Obj(s) => s,
        }
    }
}

/// Read the PM word at `off` (atomically).
#[inline]
pub(crate) fn load(pool: &Pool, off: u64) -> u64 {
    // SAFETY: every PM word of NBTree that threads share (entries, block next words) is
    // written with atomic stores (`Pool::store_u64`/`cas_u64`); blocks and objects are
    // written with plain stores only before they are published, when no other thread can
    // reach them.
    unsafe { pool.load_u64(off) }
}

/// The bytes of the object at `off` if it is sane: its length fits `max` and the pool.
/// The CRC is checked only with `verify`.
///
/// # Safety
/// `off` names a published key or value object that stays allocated while the slice is
/// used (the caller is pinned in the epoch in which it read the reference).
pub(crate) unsafe fn object(pool: &Pool, off: u64, max: usize, verify: bool) -> Option<&[u8]> {
    if off == 0 || !off.is_multiple_of(8) || !pool.contains(off, OBJ_HEAD as u64) {
        return None;
    }
    let len = (load(pool, off) & 0xffff_ffff) as usize;
    let crc = (load(pool, off) >> 32) as u32;
    if len > max || !pool.contains(off + OBJ_HEAD as u64, len as u64) {
        return None;
    }
    // SAFETY: inside the pool (checked); immutable while the caller is pinned (contract).
    let b = unsafe { std::slice::from_raw_parts(pool.at::<u8>(off + OBJ_HEAD as u64), len) };
    if verify && obj_crc(b) != crc {
        return None;
    }
    Some(b)
}

/// The key of an entry with key word `kw` and payload `p`; `None` if it is not a valid
/// key (damage), or the key object fails its CRC when `verify`.
///
/// # Safety
/// As [`object`] for a key object the entry names.
#[inline]
pub(crate) unsafe fn entry_key<'a>(pool: &'a Pool, kw: u64, p: u64, verify: bool) -> Option<KeyBytes<'a>> {
    match (p & KIND_MASK) >> KIND_SHIFT {
        KIND_OBJ => {
            // SAFETY: the caller's contract.
            unsafe { object(pool, kw, MAX_KEY, verify) }.map(KeyBytes::Obj)
        }
        k => inline_key(kw, k).map(|(b, n)| KeyBytes::Inline(b, n)),
    }
}

/// Call `f` with the value of payload `p` and value word `w`; `false` if it is damaged.
///
/// # Safety
/// As [`object`] for the value object `p` names.
#[inline]
pub(crate) unsafe fn with_value(pool: &Pool, p: u64, w: u64, f: &mut dyn FnMut(&[u8])) -> bool {
    if p & VAL_PTR == 0 {
        let Some((b, n)) = inline_value_bytes(p, w) else { return false };
        f(&b[..n]);
        return true;
    }
    // SAFETY: the caller's contract.
    match unsafe { object(pool, p & DATA_MASK, MAX_VALUE, true) } {
        Some(v) => {
            pool.note_read(1 + (v.len() as u64 + 8) / 64);
            f(v);
            true
        }
        None => false,
    }
}

/// Algorithm 5's leaf search: the committed slot of `bitmap` whose key is `key`, with its
/// payload. Only slots whose fingerprint matches are read: one PM line in the common case
/// (SPEC N3). Deleted slots (key 0, or [`DEL`]) are skipped.
///
/// # Safety
/// `leaf` is pinned (its block and the objects its entries name stay allocated).
pub(crate) unsafe fn find(pool: &Pool, leaf: &Leaf, key: &[u8], fp: u8, bitmap: u64) -> Option<(usize, u64)> {
    let mut bits = bitmap & SLOTS_MASK & leaf.matching(fp);
    let inline = key_word(key);
    while bits != 0 {
        let slot = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        pool.note_read(1);
        let kw = load(pool, leaf.key_at(slot));
        if kw == 0 {
            continue;
        }
        let p = load(pool, leaf.payload_at(slot));
        if p & DEL != 0 {
            continue;
        }
        let hit = match inline {
            KeyWord::Inline(w, k) => (p & KIND_MASK) >> KIND_SHIFT == k && kw == w,
            KeyWord::Object => {
                (p & KIND_MASK) >> KIND_SHIFT == KIND_OBJ
                    // SAFETY: the caller's contract.
                    && unsafe { object(pool, kw, MAX_KEY, false) }.is_some_and(|b| {
                        pool.note_read(b.len() as u64 / 64);
                        b == key
                    })
            }
        };
        if hit {
            return Some((slot, p));
        }
    }
    None
}

/// The live entries of a leaf's committed slots: (slot, key word, payload, value word).
pub(crate) fn live_entries(pool: &Pool, leaf: &Leaf) -> Vec<(usize, u64, u64, u64)> {
    let mut bits = leaf.bitmap.load(Ordering::Acquire) & SLOTS_MASK;
    let mut out = Vec::with_capacity(bits.count_ones() as usize);
    pool.note_read((bits.count_ones() as u64).div_ceil(2));
    while bits != 0 {
        let slot = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        let kw = load(pool, leaf.key_at(slot));
        let p = load(pool, leaf.payload_at(slot));
        if kw != 0 && p & DEL == 0 {
            out.push((slot, kw, p, load(pool, leaf.value_at(slot))));
        }
    }
    out
}

/// The right leaf of the SMO whose left leaf is `left`, with its fence.
pub(crate) fn sibling_of(left: &Leaf) -> Option<(Arc<[u8]>, *const Leaf)> {
    let r = left.sibling.load(Ordering::Acquire);
    match (&left.split, r.is_null()) {
        (Some(s), false) => Some((s.clone(), r as *const Leaf)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_finds_exactly_the_equal_fingerprints() {
        let l = Leaf::new(0, Arc::from(&b""[..]));
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut fps = [0u8; CAP];
        for (i, f) in fps.iter_mut().enumerate() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Few distinct values, zero and 0xff and 0x80 and 0x01 among them.
            *f = [0u8, 1, 0x7f, 0x80, 0xff, 0x42][(x % 6) as usize];
            l.set_fp(i, *f);
        }
        for (i, f) in fps.iter().enumerate() {
            assert_eq!(l.fp(i), *f);
        }
        for fp in [0u8, 1, 2, 0x7f, 0x80, 0x81, 0xfe, 0xff, 0x42] {
            let want = (0..CAP).filter(|&i| fps[i] == fp).fold(0u64, |m, i| m | 1 << i);
            assert_eq!(l.matching(fp) & SLOTS_MASK, want, "fp {fp:#x}");
        }
    }
}
