//! Two-layer leaf nodes (paper §3.1, SPEC N1): the DRAM metadata layer ([`Leaf`]) over
//! a PM key-value block, and the leaf-level reads of Algorithm 5 (`find`) with the
//! bitmap and fingerprint filters (§3.2 "Efficient Search", SPEC N3).
//!
//! Both layers are singly linked: `Leaf::next` in DRAM, the block's first word in PM.
//! A leaf's metadata is owned by the tree: it is freed through crossbeam-epoch once an
//! SMO has replaced it and no thread can still hold it (SPEC N4).

use crate::arena::Slab;
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

/// Where the leaves' metadata lives (see `arena`): shared by the tree and the deferred
/// frees of retired leaves.
pub(crate) type LeafArena = Slab<Leaf>;

/// The DRAM metadata of one leaf (paper §3.1: fps, num, bitmap, data_ptr, copy_ptr, flag,
/// next), plus the fences this implementation needs for byte-string keys.
///
/// Laid out for a search: the bitmap and the fingerprints it filters by are the first
/// 72 bytes, on the leaf's first two cache lines (fetched together by the adjacent-line
/// prefetcher); the rest is touched by writers and SMOs.
///
/// **NBTree-SL** ([`Leaf::sl`]): the bitmap, `num` and fingerprints are read and written
/// in the PM block instead (`layout::M_BITMAP` ...), through the pool's atomic accessors,
/// so that every operation pays the PM line reads (and, in `adr`, the flushes) a
/// single-layer leaf costs; the DRAM words then only carry values between building a
/// leaf and storing it. The SMO-only fields (`copy`, `flag`, `next`, fences) stay in DRAM
/// in both kinds: they are touched once per SMO, not per operation, and the paper's
/// ablation is about the per-operation metadata.
#[repr(C, align(64))]
pub(crate) struct Leaf {
    /// Committed slots, and [`SMO_BIT`] (two-layer leaves; see [`Leaf::bits`]).
    bitmap: AtomicU64,
    /// One-byte fingerprints of the slots' keys, eight to a word (slot `i` is byte `i % 8`
    /// of word `i / 8`), so that a search compares all of them in a few word operations
    /// ([`Leaf::matching`]) instead of a loop over the slots.
    fps: [AtomicU64; 8],
    /// SMO phase flags ([`LINKED`]).
    pub(crate) flag: AtomicU8,
    /// NBTree-SL: the metadata words live in the PM block. Set before the leaf is shared.
    pub(crate) sl: bool,
    /// The paper's `data_ptr`: pool offset of the key-value block. Never changes.
    pub(crate) block: u64,
    /// The paper's `copy_ptr`: the first new leaf of this leaf's SMO, once copied.
    pub(crate) copy: AtomicPtr<Leaf>,
    /// Slots taken by committed and in-flight inserts (fetch-and-add, Algorithm 1 line 2).
    num: AtomicU32,
    /// Written since its seal was last computed (the seal is rewritten at clean close).
    pub(crate) dirty: AtomicBool,
    /// The next leaf of the metadata layer.
    pub(crate) next: AtomicPtr<Leaf>,
    /// Inclusive lower fence: no key below it is ever stored here (empty for the first
    /// leaf and the sentinel).
    pub(crate) low: Arc<[u8]>,
    /// For the left leaf of a two-way SMO: keys `>= split` belong to `sibling`.
    pub(crate) split: Option<Arc<[u8]>>,
    /// The right leaf of the same SMO (null if the SMO made one leaf).
    pub(crate) sibling: AtomicPtr<Leaf>,
    /// NBTree-W (the paper's ablation, §6.4): writers of this leaf take this lock
    /// instead of relying on the lock-free protocol alone. Unused otherwise.
    pub(crate) wlock: parking_lot::Mutex<()>,
}

impl Leaf {
    pub(crate) fn new(block: u64, low: Arc<[u8]>) -> Leaf {
        Leaf {
            bitmap: AtomicU64::new(0),
            num: AtomicU32::new(0),
            flag: AtomicU8::new(0),
            sl: false,
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

    /// Atomically update the PM word `off` of a single-layer leaf with `f` (a CAS loop:
    /// the pool's CAS is the one read-modify-write the eADR crash model sees as a store).
    /// Returns the old value, or `None` if `f` declined.
    #[inline]
    fn pm_update(pool: &Pool, off: u64, mut f: impl FnMut(u64) -> Option<u64>) -> Option<u64> {
        let mut cur = load(pool, off);
        loop {
            let new = f(cur)?;
            // SAFETY: a metadata word of a single-layer block this leaf owns, shared by
            // threads only through atomic accesses.
            match unsafe { pool.cas_u64(off, cur, new) } {
                Ok(_) => return Some(cur),
                Err(now) => cur = now,
            }
        }
    }

    /// The bitmap: committed slots and [`SMO_BIT`].
    #[inline]
    pub(crate) fn bits(&self, pool: &Pool) -> u64 {
        if self.sl {
            load(pool, self.block + M_BITMAP)
        } else {
            self.bitmap.load(Ordering::Acquire)
        }
    }

    /// Commit: CAS the bitmap from `old` to `new` (Algorithm 1 line 8). A single-layer
    /// leaf's bitmap is its commit record in PM, so in `adr` it is persisted, with the
    /// fingerprint and `num` words written before it (the two metadata lines).
    #[inline]
    pub(crate) fn cas_bits(&self, pool: &Pool, old: u64, new: u64) -> bool {
        if !self.sl {
            return self.bitmap.compare_exchange(old, new, Ordering::AcqRel, Ordering::Acquire).is_ok();
        }
        // SAFETY: the bitmap word of a single-layer block, changed only by CAS.
        if unsafe { pool.cas_u64(self.block + M_BITMAP, old, new) }.is_err() {
            return false;
        }
        // Written back in `adr`; in `eadr` this only counts the lines (SPEC P4), which
        // the caches make durable without a flush or fence.
        pool.flush_off(self.block + M_BITMAP, (M_FPS + 64 - M_BITMAP) as usize);
        if !matches!(pool.mode(), pmkv_substrate::Mode::Eadr | pmkv_substrate::Mode::None) {
            pool.commit_fence();
        }
        true
    }

    /// Set [`SMO_BIT`] (Algorithm 1 line 4).
    #[inline]
    pub(crate) fn set_smo(&self, pool: &Pool) {
        if self.sl {
            Self::pm_update(pool, self.block + M_BITMAP, |b| Some(b | SMO_BIT));
        } else {
            self.bitmap.fetch_or(SMO_BIT, Ordering::AcqRel);
        }
    }

    /// Take the next slot (fetch-and-add on `num`, Algorithm 1 line 2).
    #[inline]
    pub(crate) fn take_slot(&self, pool: &Pool) -> usize {
        if self.sl {
            // Saturates at the capacity: a full leaf's `num` stays a small PM word.
            Self::pm_update(pool, self.block + M_NUM, |n| Some((n + 1).min(CAP as u64 + 1))).unwrap_or(0) as usize
        } else {
            self.num.fetch_add(1, Ordering::AcqRel) as usize
        }
    }

    /// Word `i` of the fingerprints.
    #[inline]
    fn fp_word(&self, pool: &Pool, i: usize) -> u64 {
        if self.sl {
            load(pool, self.block + M_FPS + 8 * i as u64)
        } else {
            self.fps[i].load(Ordering::Relaxed)
        }
    }

    /// The fingerprint of `slot`.
    #[inline]
    pub(crate) fn fp(&self, pool: &Pool, slot: usize) -> u8 {
        (self.fp_word(pool, slot / 8) >> (8 * (slot % 8))) as u8
    }

    /// Set the fingerprint of `slot` (a slot this thread owns: other bytes of the word may
    /// change meanwhile, so the byte is replaced by a CAS loop).
    #[inline]
    pub(crate) fn set_fp(&self, pool: &Pool, slot: usize, fp: u8) {
        let sh = 8 * (slot % 8);
        let f = |w: u64| Some(w & !(0xff << sh) | (fp as u64) << sh);
        if self.sl {
            Self::pm_update(pool, self.block + M_FPS + 8 * (slot / 8) as u64, f);
        } else {
            let _ = self.fps[slot / 8].fetch_update(Ordering::Release, Ordering::Relaxed, f);
        }
    }

    /// Set the metadata of a leaf no other thread can see yet (a leaf being built or
    /// recovered): plain stores of whole words, not a read-modify-write per slot. For a
    /// single-layer leaf these are the values [`Leaf::store_meta`] writes to its block.
    pub(crate) fn init_meta(&self, fps: &[u8; CAP], num: usize, bitmap: u64) {
        for (w, chunk) in self.fps.iter().zip(fps.chunks(8)) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            w.store(u64::from_le_bytes(b), Ordering::Relaxed);
        }
        self.num.store(num as u32, Ordering::Relaxed);
        self.bitmap.store(bitmap, Ordering::Relaxed);
    }

    /// The PM metadata words of a single-layer leaf, from the values [`Leaf::init_meta`]
    /// set: (offset in the block, value).
    pub(crate) fn meta_words(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let head = [(M_BITMAP, self.bitmap.load(Ordering::Relaxed)), (M_NUM, self.num.load(Ordering::Relaxed) as u64)];
        head.into_iter().chain((0..8).map(|i| (M_FPS + 8 * i as u64, self.fps[i].load(Ordering::Relaxed))))
    }

    /// Make a leaf single-layer: store its metadata into its block and read it from there
    /// from now on. For a leaf no other thread can see yet (recovery), unflushed: the
    /// words are rebuilt from the entries at every open, so they need no durability of
    /// their own until the clean close seals the block.
    pub(crate) fn store_meta(&mut self, pool: &Pool) {
        for (o, v) in self.meta_words() {
            // SAFETY: a metadata word of a used block that only this thread can reach.
            unsafe { pool.store_u64(self.block + o, v) };
        }
        self.sl = true;
    }

    /// The slots whose fingerprint is `fp`, as a bitmap (`match_sse2` on x86-64,
    /// `match_swar` elsewhere).
    #[inline]
    pub(crate) fn matching(&self, pool: &Pool, fp: u8) -> u64 {
        if self.sl {
            // The bitmap's and the fingerprints' lines of the block.
            pool.note_read_at(self.block + M_BITMAP, (M_FPS + 64 - M_BITMAP) as usize);
        }
        let words: [u64; 8] = std::array::from_fn(|i| self.fp_word(pool, i));
        #[cfg(target_arch = "x86_64")]
        return match_sse2(&words, fp);
        #[cfg(not(target_arch = "x86_64"))]
        return match_swar(&words, fp);
    }

    /// The slot the next insert will probably take (`num` now), for prefetching.
    #[inline]
    pub(crate) fn next_slot(&self, pool: &Pool) -> usize {
        if self.sl {
            load(pool, self.block + M_NUM) as usize
        } else {
            self.num.load(Ordering::Relaxed) as usize
        }
    }

    /// Whether an SMO has started on this leaf.
    #[inline]
    pub(crate) fn in_smo(&self, pool: &Pool) -> bool {
        self.bits(pool) & SMO_BIT != 0
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

/// A key read from an entry: inline bytes (up to 16, [`KIND_PAIR`]) or a slice of its
/// key object.
pub(crate) enum KeyBytes<'a> {
    Inline([u8; 16], usize),
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

    /// Byte order of the keys, as `as_slice().cmp()`, given their [`KeyBytes::words`]
    /// (`w`, `ow`), but decided by two word comparisons whenever the zero-padded first 16
    /// bytes differ (nearly always for distinct keys); only keys equal there (one a
    /// prefix of the other, or sharing 16 bytes) fall back to the slices. An SMO selects
    /// its median key over records that carry the words (`smo::copy_phase`); `memcmp`
    /// calls were a visible share of it.
    #[inline]
    pub(crate) fn cmp_key(&self, w: (u64, u64), other: &Self, ow: (u64, u64)) -> std::cmp::Ordering {
        // Zero-padded words: when they differ, so do the keys, in the same order; when
        // they are equal, the bytes after them and the lengths decide.
        w.cmp(&ow).then_with(|| self.as_slice().cmp(other.as_slice()))
    }

    /// The key's first 16 bytes, zero-padded, as two big-endian words: their order is
    /// the keys' byte order wherever they differ (see [`KeyBytes::cmp_key`]).
    #[inline]
    pub(crate) fn words(&self) -> (u64, u64) {
        let s = self.as_slice();
        let mut b = [0u8; 16];
        let n = s.len().min(16);
        b[..n].copy_from_slice(&s[..n]);
        (u64::from_be_bytes(b[..8].try_into().expect("8")), u64::from_be_bytes(b[8..].try_into().expect("8")))
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

/// The key of the entry at `entry` with key word `kw` and payload `p`; `None` if it is
/// not a valid key (damage), or the key object fails its CRC when `verify`. The second
/// key word of a [`KIND_PAIR`] key is read from the entry (immutable once the entry is
/// committed, like the key word's other half).
///
/// # Safety
/// As [`object`] for a key object the entry names.
#[inline]
pub(crate) unsafe fn entry_key<'a>(pool: &'a Pool, entry: u64, kw: u64, p: u64, verify: bool) -> Option<KeyBytes<'a>> {
    match (p & KIND_MASK) >> KIND_SHIFT {
        KIND_OBJ => {
            // SAFETY: a key object a committed entry names; the caller keeps it allocated while the
            // slice is used (this function's `# Safety`, passed on to `object`).
            unsafe { object(pool, kw, MAX_KEY, verify) }.map(KeyBytes::Obj)
        }
        KIND_PAIR => inline_key(kw, load(pool, entry + E_KEY2), p).map(|(b, n)| KeyBytes::Inline(b, n)),
        _ => inline_key(kw, 0, p).map(|(b, n)| KeyBytes::Inline(b, n)),
    }
}

/// Call `f` with the value of payload `p` and value word `w`; `false` if it is damaged.
///
/// # Safety
/// As [`object`] for the value object `p` names.
#[inline]
pub(crate) unsafe fn with_value(pool: &Pool, p: u64, w: u64, checks: bool, f: &mut dyn FnMut(&[u8])) -> bool {
    if p & VAL_PTR == 0 {
        let Some((b, n)) = inline_value_bytes(p, w) else { return false };
        f(&b[..n]);
        return true;
    }
    let off = val_off(p, checks);
    // SAFETY: the value object `p` names; the caller keeps it allocated while `f` runs (this
    // function's `# Safety`, passed on to `object`).
    match unsafe { object(pool, off, MAX_VALUE, true) } {
        Some(v) => {
            pool.note_read_at(off, OBJ_HEAD + v.len());
            f(v);
            true
        }
        None => false,
    }
}

/// The bytes of `words` (slot `i` is byte `i % 8` of word `i / 8`) equal to `fp`, as a
/// bitmap of slots: 16 bytes at a time with SSE2, part of every x86-64 CPU. Two words go
/// into a vector register, a byte-wise compare with `fp` in every byte sets matching
/// bytes to all ones, and their 16 sign bits are gathered into the mask, four times. It
/// replaced `match_swar`, about ten arithmetic instructions a word: on a cached tree the
/// match is a visible part of an operation (docs/design/nbtree.md, "Tried and measured").
#[cfg(target_arch = "x86_64")]
#[inline]
fn match_sse2(words: &[u64; 8], fp: u8) -> u64 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_movemask_epi8, _mm_set1_epi8, _mm_set_epi64x};
    // SAFETY: SSE2 is part of the x86-64 baseline; the intrinsics touch registers only.
    unsafe {
        let pat = _mm_set1_epi8(fp as i8);
        // Slots 16k..16k+16: words 2k and 2k+1, whose little-endian bytes are in slot order.
        let pair = |k: usize| {
            let v = _mm_set_epi64x(words[2 * k + 1] as i64, words[2 * k] as i64);
            _mm_movemask_epi8(_mm_cmpeq_epi8(v, pat)) as u16 as u64
        };
        pair(0) | pair(1) << 16 | pair(2) << 32 | pair(3) << 48
    }
}

/// `match_sse2` in plain word arithmetic (SWAR: a zero byte of `word ^ fp·0x0101..` is a
/// match, found without carries between bytes), where SSE2 is not available.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn match_swar(words: &[u64; 8], fp: u8) -> u64 {
    const LO7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let pat = (fp as u64).wrapping_mul(0x0101_0101_0101_0101);
    let mut out = 0u64;
    for (i, &word) in words.iter().enumerate() {
        let x = word ^ pat;
        // High bit of each byte set iff that byte of `x` is non-zero.
        let nonzero = ((x & LO7).wrapping_add(LO7) | x) & !LO7;
        let zero = !nonzero & !LO7;
        // Gather the 8 high bits into one byte.
        let bits = ((zero >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) & 0xff;
        out |= bits << (8 * i);
    }
    out
}

/// Algorithm 5's leaf search: the committed slot of `bitmap` whose key is `key`, with its
/// payload. Only slots whose fingerprint matches are read: one PM line in the common case
/// (SPEC N3). Deleted slots (key 0, or [`DEL`]) are skipped.
///
/// # Safety
/// `leaf` is pinned (its block and the objects its entries name stay allocated).
/// `fmt`: what the pool's format has (see [`Fmt`]).
pub(crate) unsafe fn find(pool: &Pool, leaf: &Leaf, key: &[u8], fp: u8, bitmap: u64, fmt: Fmt) -> Option<(usize, u64)> {
    // SAFETY: `leaf` is pinned by the caller (this function's `# Safety`), which is `find_among`'s
    // contract too.
    unsafe { find_among(pool, leaf, key, candidates(pool, leaf, fp, bitmap), fmt) }
}

/// What a pool's format has: [`KIND_PAIR`] keys (format 2 on), entry checks and checked
/// `next` words (format 3 on), and the key word of an empty slot ([`EMPTY_KEY`] from
/// format 4 on, where a zero key word is damage; 0 before).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fmt {
    pub(crate) pairs: bool,
    pub(crate) checks: bool,
    pub(crate) empty: u64,
}

impl Fmt {
    /// The format of superblock version `v`.
    pub(crate) fn of(v: u32) -> Fmt {
        Fmt { pairs: v >= 2, checks: v >= CHECKS_VERSION, empty: if v >= MARKS_VERSION { EMPTY_KEY } else { 0 } }
    }

    /// Whether empty slots are marked ([`EMPTY_KEY`]), so that a zero key word is damage.
    #[inline]
    pub(crate) fn marks(self) -> bool {
        self.empty != 0
    }

    /// Write the empty slots' key words into a new block's image (format 4; nothing
    /// before, where a zero word is empty): slots `first..cap()`.
    pub(crate) fn mark_empty(self, img: &mut [u64; BLOCK_SIZE / 8], first: usize) {
        if self.marks() {
            for slot in first..self.cap() {
                img[((BLK_ENTRIES + slot as u64 * ENTRY) / 8) as usize] = self.empty.to_le();
            }
        }
    }

    /// The slots of a block are `first..cap()` (the first is 0, or [`SL_FIRST`] in
    /// NBTree-SL): format 3 gives the last entry's space to the block's trailer.
    #[inline]
    pub(crate) fn cap(self) -> usize {
        if self.checks {
            CAP_CHECKED
        } else {
            CAP
        }
    }
}

/// The committed slots of `bitmap` whose fingerprint is `fp`: the only slots that can
/// hold the key (none: the key is certainly absent, and no PM line need be read).
#[inline]
pub(crate) fn candidates(pool: &Pool, leaf: &Leaf, fp: u8, bitmap: u64) -> u64 {
    bitmap & SLOTS_MASK & leaf.matching(pool, fp)
}

/// The value word of committed entry `slot` whose payload was read as `p`, and the
/// payload it belongs to. The word is the one `p` selects ([`SLOT_B`], format 3); the
/// payload is read again after it, and if what names the value changed meanwhile (an
/// in-place update committed, and the next one may be rewriting the slot read), both are
/// read again. A [`BUSY`] bit set meanwhile is no change: that update writes the slot
/// not in use, or (a [`KIND_PAIR`] key's one slot) either value is one the update allows.
/// In formats 1 and 2 the payload does not change on an in-place update: one extra load
/// of a line being read.
#[inline]
pub(crate) fn value_of(pool: &Pool, leaf: &Leaf, slot: usize, mut p: u64) -> (u64, u64) {
    let e = leaf.key_at(slot);
    loop {
        let w = load(pool, e + value_word_off(p));
        // A value object is immutable and stays allocated while pinned: `p` names it.
        if p & VAL_PTR != 0 {
            return (p, w);
        }
        let again = load(pool, e + E_PAYLOAD);
        if again & VAL_PTR == 0 && (again ^ p) & !(FROZEN | DEL | BUSY | CHK << CHK_PREV_SHIFT) == 0 {
            return (p, w);
        }
        p = again;
    }
}

/// [`find`] among the slots of `cands` (from [`candidates`]). Entries are not verified
/// here: every open verifies every entry (recovery decodes every block), and nothing but
/// this process writes the pool while it is open.
///
/// # Safety
/// As [`find`].
#[inline]
pub(crate) unsafe fn find_among(pool: &Pool, leaf: &Leaf, key: &[u8], cands: u64, fmt: Fmt) -> Option<(usize, u64)> {
    let mut bits = cands;
    let inline = key_word(key, fmt.pairs, fmt.empty);
    while bits != 0 {
        let slot = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        pool.note_read_at(leaf.key_at(slot), ENTRY as usize);
        let kw = load(pool, leaf.key_at(slot));
        if kw == fmt.empty {
            continue;
        }
        let p = load(pool, leaf.payload_at(slot));
        if p & DEL != 0 {
            continue;
        }
        let hit = match inline {
            // A pair key's second word is in the entry's line, already being read.
            KeyWord::Inline { word, word2, bits } => {
                p & KEY_BITS == bits
                    && kw == word
                    && ((bits & KIND_MASK) >> KIND_SHIFT != KIND_PAIR
                        || load(pool, leaf.key_at(slot) + E_KEY2) == word2)
            }
            KeyWord::Object => {
                (p & KIND_MASK) >> KIND_SHIFT == KIND_OBJ
                    // SAFETY: a key object of a committed entry of the pinned `leaf` (the caller's
                    // `# Safety`), allocated while compared.
                    && unsafe { object(pool, kw, MAX_KEY, false) }.is_some_and(|b| {
                        pool.note_read_at(kw, OBJ_HEAD + b.len());
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
/// `empty`: the key word of an empty slot ([`Fmt::empty`]); a zero one is skipped too (in
/// format 4 that is damage done since the open, which `check` reports).
pub(crate) fn live_entries(pool: &Pool, leaf: &Leaf, empty: u64) -> Vec<(usize, u64, u64, u64)> {
    let mut bits = leaf.bits(pool) & SLOTS_MASK;
    let mut out = Vec::with_capacity(bits.count_ones() as usize);
    let mut line = u64::MAX;
    while bits != 0 {
        let slot = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        // Each line of entries once (two entries to a line).
        if leaf.key_at(slot) / 64 != line {
            line = leaf.key_at(slot) / 64;
            pool.note_read_at(leaf.key_at(slot), ENTRY as usize);
        }
        let kw = load(pool, leaf.key_at(slot));
        let p = load(pool, leaf.payload_at(slot));
        if kw != 0 && kw != empty && p & DEL == 0 {
            let (p, w) = value_of(pool, leaf, slot, p);
            out.push((slot, kw, p, w));
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

    /// Both kinds of leaf: DRAM metadata, and NBTree-SL's metadata in a PM block.
    fn leaves(pool: &Pool) -> [Leaf; 2] {
        let block = pool.take_heap(BLOCK_SIZE as u64, 64).unwrap();
        let mut sl = Leaf::new(block, Arc::from(&b""[..]));
        sl.store_meta(pool);
        [Leaf::new(0, Arc::from(&b""[..])), sl]
    }

    #[test]
    fn cmp_key_is_byte_order() {
        // Keys of 0..=24 bytes over a small alphabet with zero bytes in it, so that many
        // share their padded words and the fallback decides; inline and object forms alike.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for _ in 0..600 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 25) as usize;
            keys.push((0..len).map(|i| [0u8, 1, 0x7f, 0x80, 0xff][((x >> (i % 60)) % 5) as usize]).collect());
        }
        fn as_kb(k: &[u8]) -> KeyBytes<'_> {
            if k.len() <= 16 {
                let mut b = [0u8; 16];
                b[..k.len()].copy_from_slice(k);
                KeyBytes::Inline(b, k.len())
            } else {
                KeyBytes::Obj(k)
            }
        }
        for a in &keys {
            for b in keys.iter().step_by(7) {
                let (ka, kb) = (as_kb(a), as_kb(b));
                assert_eq!(ka.cmp_key(ka.words(), &kb, kb.words()), a.as_slice().cmp(b.as_slice()), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn matching_finds_exactly_the_equal_fingerprints() {
        let pool = Pool::create_sim("t", &pmkv_substrate::PoolOptions::default()).unwrap();
        for l in leaves(&pool) {
            let mut x = 0x1234_5678_9abc_def1u64;
            let mut fps = [0u8; CAP];
            for (i, f) in fps.iter_mut().enumerate() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Few distinct values, zero and 0xff and 0x80 and 0x01 among them.
                *f = [0u8, 1, 0x7f, 0x80, 0xff, 0x42][(x % 6) as usize];
                l.set_fp(&pool, i, *f);
            }
            for (i, f) in fps.iter().enumerate() {
                assert_eq!(l.fp(&pool, i), *f);
            }
            for fp in [0u8, 1, 2, 0x7f, 0x80, 0x81, 0xfe, 0xff, 0x42] {
                let want = (0..CAP).filter(|&i| fps[i] == fp).fold(0u64, |m, i| m | 1 << i);
                assert_eq!(l.matching(&pool, fp) & SLOTS_MASK, want, "sl {} fp {fp:#x}", l.sl);
                // The portable version too (x86-64 runs the SSE2 one above).
                let words: [u64; 8] = std::array::from_fn(|w| l.fp_word(&pool, w));
                assert_eq!(match_swar(&words, fp) & SLOTS_MASK, want, "swar, sl {} fp {fp:#x}", l.sl);
            }
        }
    }

    #[test]
    fn bitmap_and_slots_work_on_both_kinds() {
        let pool = Pool::create_sim("t", &pmkv_substrate::PoolOptions::default()).unwrap();
        for l in leaves(&pool) {
            assert_eq!(l.take_slot(&pool), 0);
            assert_eq!(l.take_slot(&pool), 1);
            assert!(l.cas_bits(&pool, 0, 0b10));
            assert!(!l.cas_bits(&pool, 0, 0b1), "a stale CAS must fail");
            assert_eq!(l.bits(&pool), 0b10);
            assert!(!l.in_smo(&pool));
            l.set_smo(&pool);
            assert!(l.in_smo(&pool));
            assert_eq!(l.bits(&pool) & SLOTS_MASK, 0b10);
        }
        // The single-layer leaf's metadata is in its block, not in DRAM.
        let [dram, sl] = leaves(&pool);
        assert!(sl.cas_bits(&pool, 0, 0b100));
        assert_eq!(load(&pool, sl.block + M_BITMAP), 0b100);
        assert_eq!(dram.bits(&pool), 0);
    }
}
