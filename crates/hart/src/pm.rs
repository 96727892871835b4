//! Reading and writing HART's PM objects: word accessors, leaf keys for the ART (lazy
//! expansion compares whole keys at leaves), a leaf's value, and new value objects.
//!
//! [`Pm`] is the handle every layer above uses for PM: the pool, its EPallocator, the
//! superblock's facts (k_h, where the micro-logs lie) and the first damage a read met.
//! It knows nothing of the DRAM index, so the logs, recovery and the operations can all
//! build on it without naming the `Hart` that owns it.

use crate::art::KeySource;
use crate::checksum::{self, Meta};
use crate::error::{Error, Result};
use crate::layout::*;
use pmkv_substrate::epalloc::EpAlloc;
use pmkv_substrate::Pool;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// HART's handle on its pool: what reading and writing its PM objects needs, and nothing
/// of the DRAM index. `Hart` owns one; recovery builds one before any tree exists.
pub(crate) struct Pm {
    pub(crate) pool: Arc<Pool>,
    pub(crate) alloc: EpAlloc,
    /// k_h, as stored in the superblock (SPEC H1).
    pub(crate) kh: usize,
    /// Offset of the micro-log array (see `layout`).
    pub(crate) logs_off: u64,
    /// The first damage a read met (a check that failed). From then on writes are
    /// refused: a write could build on the damaged object (an update's roll-back value, a
    /// delete that frees what a damaged pointer names) and spread the damage.
    damage: OnceLock<String>,
    /// The write batches' redo log state (see `batch`): the publication order, the gate
    /// the checker closes, and whether a batch failed half-way (writes are then refused).
    pub(crate) batches: pmkv_substrate::batch_log::BatchLog,
}

impl Pm {
    /// The handle on `pool` with its allocator and the superblock's facts.
    pub(crate) fn new(pool: Arc<Pool>, alloc: EpAlloc, kh: usize, logs_off: u64) -> Pm {
        Pm { pool, alloc, kh, logs_off, damage: OnceLock::new(), batches: Default::default() }
    }

    /// Remember the first damage a read met (see [`Pm::check_write`]).
    pub(crate) fn note_damage(&self, e: &Error) {
        if let Error::Corrupt(what) = e {
            let _ = self.damage.set(what.clone());
        }
    }

    /// Before any write: the pool is writable, no read has met damage in it, and no write
    /// batch was left half applied (whose replay at the next open would undo this write).
    #[inline]
    pub(crate) fn check_write(&self) -> Result<()> {
        self.pool.check_writable()?;
        self.batches.check_writes()?;
        match self.damage.get() {
            Some(what) => Err(Self::refused(what)),
            None => Ok(()),
        }
    }

    /// The error of a write refused after damage, out of line: every write's check above
    /// stays a few compares.
    #[cold]
    #[inline(never)]
    fn refused(what: &str) -> Error {
        Error::Corrupt(format!(
            "writes are refused: the pool is damaged ({what}); `pmkv salvage` copies every intact record to a new pool"
        ))
    }
}

/// The PM word of type `T` at `off`, checked: `off` must be aligned for `T` and the word
/// must lie inside the mapped pool.
///
/// # Panics
///
/// If it does not: a corrupt offset. Recovery validates every offset it accepts from the
/// pool, so this is a last line of defence against a read or write outside the mapping
/// (one compare on top of a PM access).
#[inline]
fn word<T>(pool: &Pool, off: u64) -> *mut T {
    let size = std::mem::size_of::<T>() as u64;
    assert!(
        off.is_multiple_of(size) && pool.contains(off, size),
        "HART PM word at {off:#x} is misaligned or outside the pool's {} bytes",
        pool.size()
    );
    pool.at::<T>(off)
}

/// Read the 8-byte PM word at `off` (checked as [`word`]).
///
/// The PM word accessors are atomic (relaxed: plain moves on x86-64). HART's locks order
/// every access to a word that matters; the atomics, which cost nothing, keep a race on a
/// word (were one to slip through) defined behaviour: the old or the new value.
#[inline]
pub(crate) fn read_u64(pool: &Pool, off: u64) -> u64 {
    // SAFETY: `word` checked that the 8 bytes are aligned and inside the mapping, which
    // stays mapped while `pool` is borrowed; any bit pattern is a valid u64.
    unsafe { AtomicU64::from_ptr(word(pool, off)) }.load(Ordering::Relaxed)
}

/// Read the 4-byte PM word at `off` (checked as [`word`]).
#[inline]
pub(crate) fn read_u32(pool: &Pool, off: u64) -> u32 {
    // SAFETY: `word` checked that the 4 bytes are aligned and inside the mapping, which
    // stays mapped while `pool` is borrowed; any bit pattern is a valid u32.
    unsafe { AtomicU32::from_ptr(word(pool, off)) }.load(Ordering::Relaxed)
}

/// The 64-byte leaf at `leaf` as its eight PM words, checked once (aligned, inside the
/// pool) for all of them: a search reads three or four words of one leaf, and checking
/// each as [`read_u64`] does cost a load of the pool's size and two compares per word.
/// Loads through it are relaxed atomics, as [`read_u64`]'s.
///
/// # Panics
///
/// As [`word`]: if the leaf is misaligned or not wholly inside the pool.
#[inline]
pub(crate) fn leaf_words(pool: &Pool, leaf: u64) -> &[AtomicU64; LEAF_SIZE / 8] {
    assert!(
        leaf.is_multiple_of(8) && pool.contains(leaf, LEAF_SIZE as u64),
        "HART leaf at {leaf:#x} is misaligned or outside the pool's {} bytes",
        pool.size()
    );
    // SAFETY: 64 aligned bytes inside the mapping (checked), which stays mapped while
    // `pool` is borrowed; `AtomicU64` has `u64`'s layout and any bit pattern is valid.
    unsafe { &*pool.at::<[AtomicU64; LEAF_SIZE / 8]>(leaf) }
}

/// Word `field` (a `LEAF_*` byte offset) of a leaf's words.
#[inline(always)]
pub(crate) fn leaf_word(w: &[AtomicU64; LEAF_SIZE / 8], field: u64) -> u64 {
    w[field as usize / 8].load(Ordering::Relaxed)
}

/// Write the 8-byte PM word at `off` (checked as [`word`]); not flushed.
///
/// # Safety
///
/// No reference to these bytes is alive anywhere (PM bytes are handed out as slices:
/// keys, values): the caller owns the object, i.e. it is reserved and not yet reachable,
/// or it is a leaf (or its value) of an ART whose write lock the caller holds.
#[inline]
pub(crate) unsafe fn write_u64(pool: &Pool, off: u64, v: u64) {
    // SAFETY: no reference overlaps the word (the contract); `store_u64` checks the
    // bounds. Through the pool's store function, so that the crash simulator's store
    // points (the eADR model) see every store HART makes to a reachable object.
    unsafe { pool.store_u64(off, v) }
}

/// Write the 4-byte PM word at `off` (checked as [`word`]); not flushed.
///
/// # Safety
///
/// As [`write_u64`].
#[inline]
pub(crate) unsafe fn write_u32(pool: &Pool, off: u64, v: u32) {
    // SAFETY: no reference overlaps the word (the contract); `store_u32` checks the
    // bounds and alignment, and goes through the pool so the crash simulator sees it.
    unsafe { pool.store_u32(off, v) }
}

/// The `len` PM bytes at `off` as a slice, which lives as long as the borrow of `pool`.
///
/// # Panics
///
/// If the range is not inside the mapped pool (a corrupt offset or length).
///
/// # Safety
///
/// Nothing writes these bytes while the slice is in use: they belong to an object that no
/// one may write while the caller holds the lock it holds (an ART's lock for a leaf, its
/// key and its value; a micro-log's lock for the log's new value), or the caller runs
/// alone (recovery, a quiesced `check`).
#[inline]
pub(crate) unsafe fn bytes(pool: &Pool, off: u64, len: usize) -> &[u8] {
    assert!(pool.contains(off, len as u64), "HART PM range {off:#x}+{len} is outside the pool's {} bytes", pool.size());
    // SAFETY: inside the mapping (checked), which stays mapped while `pool` is borrowed;
    // not written while the slice is in use (the contract); any byte is a valid u8.
    unsafe { std::slice::from_raw_parts(pool.at::<u8>(off), len) }
}

/// Reads leaf keys from PM for the ART (lazy expansion compares whole keys at leaves).
pub(crate) struct PmKeys<'a>(&'a Pool);

impl<'a> PmKeys<'a> {
    /// Key reader over `pool`.
    ///
    /// # Safety
    ///
    /// For as long as the reader is used, no one writes the key of a leaf it is given: each
    /// is a leaf of an ART whose lock (read or write) the caller holds — a used leaf is
    /// freed, and its slot reused, only under its ART's write lock — or the caller runs
    /// alone (recovery, a quiesced `check`).
    pub(crate) unsafe fn new(pool: &'a Pool) -> Self {
        PmKeys(pool)
    }
}

/// [`PmKeys`] for a removal: when the descent reaches its leaf, the allocator metadata
/// that freeing the leaf will read is prefetched before the key is compared, so that
/// those misses overlap with the leaf's own.
pub(crate) struct FreeingKeys<'a> {
    pub keys: PmKeys<'a>,
    pub alloc: &'a pmkv_substrate::epalloc::EpAlloc,
}

/// [`PmKeys`] that serves one leaf's key from its DRAM copy (an insert's descent: the
/// ART's [`HotLeaf`], the leaf of its last insert, whose line the flushing modes evicted).
pub(crate) struct HotKeys<'a> {
    pub keys: PmKeys<'a>,
    pub hot: crate::art::HotLeaf,
}

impl KeySource for HotKeys<'_> {
    #[inline]
    fn with_key<R>(&self, leaf: u64, f: impl FnOnce(&[u8]) -> R) -> R {
        match self.hot.key_of(leaf) {
            Some(k) => f(k),
            None => self.keys.with_key(leaf, f),
        }
    }
}

impl KeySource for FreeingKeys<'_> {
    #[inline]
    fn with_key<R>(&self, leaf: u64, f: impl FnOnce(&[u8]) -> R) -> R {
        self.alloc.prefetch_meta(leaf);
        self.keys.with_key(leaf, f)
    }
}

impl KeySource for PmKeys<'_> {
    /// # Panics
    ///
    /// If `leaf` or its key lies outside the pool (recovery refuses such leaves, so only a
    /// pool changed behind HART's back gets here).
    #[inline]
    fn with_key<R>(&self, leaf: u64, f: impl FnOnce(&[u8]) -> R) -> R {
        let pool = self.0;
        let w = leaf_words(pool, leaf);
        let m = Meta::decode(leaf_word(w, LEAF_META));
        let len = m.key_len;
        pool.note_read_at(leaf, 1);
        let at = if m.key_out() {
            let k = leaf_word(w, LEAF_KEY);
            pool.note_read_at(k, len);
            k
        } else {
            leaf + LEAF_KEY
        };
        // SAFETY: no one writes this key while it is borrowed (the contract of `new`; a
        // used leaf's key never changes, only a freed leaf's slot is rewritten).
        f(unsafe { bytes(pool, at, len) })
    }
}

/// The meta word of the leaf at `leaf`, decoded.
#[inline]
pub(crate) fn meta(pool: &Pool, leaf: u64) -> Meta {
    Meta::decode(read_u64(pool, leaf + LEAF_META))
}

/// Why the leaf at `leaf` fails its checks (`None`: it passes): flags this build never
/// writes, a key outside the pool, or a key check (and, `with_value`, a value check) that
/// does not match.
///
/// # Safety
///
/// Nothing writes the leaf or its key meanwhile: it is a leaf of an ART whose lock the
/// caller holds, or the caller runs alone (recovery, a quiesced `check`).
pub(crate) unsafe fn leaf_damage(pool: &Pool, leaf: u64, with_value: bool) -> Option<String> {
    let raw = read_u64(pool, leaf + LEAF_META);
    if is_erased(leaf, raw) {
        return Some(format!("leaf {leaf:#x} is used but was erased"));
    }
    let m = Meta::decode(raw);
    if m.key_check == 0 {
        return Some(format!("leaf {leaf:#x} is used but its meta word is zero"));
    }
    if !m.flags_valid() {
        return Some(format!("leaf {leaf:#x} has invalid flags {:#x} for a {}-byte key", m.flags, m.key_len));
    }
    let at = if m.key_out() { read_u64(pool, leaf + LEAF_KEY) } else { leaf + LEAF_KEY };
    if !pool.contains(at, m.key_len as u64) {
        return Some(format!("leaf {leaf:#x} names a key object {at:#x} outside the pool"));
    }
    // SAFETY: inside the pool (checked); not written meanwhile (the contract).
    let key = unsafe { bytes(pool, at, m.key_len) };
    if checksum::key_check(leaf, key, m.key_out()) != m.key_check {
        return Some(format!("leaf {leaf:#x}: the key check does not match its key"));
    }
    if with_value && current_value(pool, leaf, m).is_none() {
        return Some(format!("leaf {leaf:#x}: the value check does not match its value word"));
    }
    None
}

/// Whether a leaf with meta `m` may hold its inline value in slot B (see `layout`).
#[inline]
pub(crate) fn has_slot_b(m: Meta) -> bool {
    inline_len(m.flags).is_some() && !m.key_out() && m.key_len <= SLOT_B_KEY
}

/// The leaf's value word as its value check proves it, the offset in the leaf of the slot
/// that holds it and the check that proves it (see `checksum::value_word`); `None` if no
/// check proves a slot.
///
/// The common case, the current check proving `p_value` (every value in `eadr`, every
/// out-of-line value), is inlined: one check computed, as before slot B existed.
#[inline(always)]
pub(crate) fn current_value(pool: &Pool, leaf: u64, m: Meta) -> Option<(u64, u64, u32)> {
    current_value_in(pool, leaf_words(pool, leaf), leaf, m)
}

/// [`current_value`] of a leaf whose words the caller has already checked.
#[inline(always)]
pub(crate) fn current_value_in(
    pool: &Pool,
    w: &[AtomicU64; LEAF_SIZE / 8],
    leaf: u64,
    m: Meta,
) -> Option<(u64, u64, u32)> {
    let vw = leaf_word(w, LEAF_VCHECK);
    let a = leaf_word(w, LEAF_P_VALUE);
    let c = checksum::value_check(leaf, a, m.flags);
    if c == vw as u32 {
        return Some((a, LEAF_P_VALUE, c));
    }
    other_value(pool, leaf, m, vw, a, c)
}

/// [`current_value`] when the current check does not prove `p_value`.
#[inline(never)]
fn other_value(pool: &Pool, leaf: u64, m: Meta, vw: u64, a: u64, ca: u32) -> Option<(u64, u64, u32)> {
    let b = has_slot_b(m).then(|| read_u64(pool, leaf + LEAF_SLOT_B));
    checksum::value_word(leaf, vw, a, ca, b, m.flags)
}

/// What a search finds in the leaf the descent led it to ([`lookup`]).
pub(crate) enum Lookup<'a> {
    /// The leaf holds another key: `key` is absent.
    Missing,
    /// The leaf holds `key`, and this inline value, proved by the leaf's current value
    /// check.
    Value(&'a [u8]),
    /// The leaf holds `key`, but its value is not an inline value that the current check
    /// proves in `p_value` (a value object, slot B, or damage): [`Pm::value_of`] reads it
    /// or reports the damage. (Taking slot B here too, through [`current_value_in`], cost
    /// every search 12 instructions, callgrind; slot B holds the value only after every
    /// other same-size `adr` update of a leaf with a short key, whose reads then pay
    /// `value_of`'s second decode of the leaf.)
    Elsewhere,
}

/// A search's single visit of its leaf: the stored key compared with `key` (unless the
/// descent matched it already, `key` = `None`) and the common value read, an inline value
/// in `p_value`, with one bounds check and one decode of the meta word for both. The key
/// check is not recomputed (see `search`); the value check is, on every read, as
/// [`Pm::value_of`] does: the value is never returned unproved.
///
/// # Safety
///
/// As [`PmKeys::new`]: no one writes the leaf or its key while the returned slice lives
/// (the caller holds the leaf's ART lock).
///
/// # Panics
///
/// As [`leaf_words`], if the leaf or its key lies outside the pool.
#[inline(always)]
pub(crate) unsafe fn lookup<'a>(pool: &'a Pool, leaf: u64, key: Option<&[u8]>) -> Lookup<'a> {
    let w = leaf_words(pool, leaf);
    let m = Meta::decode(leaf_word(w, LEAF_META));
    pool.note_read_at(leaf, 1);
    if let Some(key) = key {
        let at = if m.key_out() {
            pool.note_read_at(leaf_word(w, LEAF_KEY), m.key_len);
            leaf_word(w, LEAF_KEY)
        } else {
            leaf + LEAF_KEY
        };
        // SAFETY: not written while borrowed (the contract); `bytes` checks the bounds.
        if !crate::art::same(unsafe { bytes(pool, at, m.key_len) }, key) {
            return Lookup::Missing;
        }
    }
    if let Some(len) = inline_len(m.flags) {
        let a = leaf_word(w, LEAF_P_VALUE);
        if checksum::value_check(leaf, a, m.flags) == leaf_word(w, LEAF_VCHECK) as u32 {
            // SAFETY: `p_value`'s 8 bytes lie inside the leaf, which `leaf_words` checked
            // is inside the pool; not written while borrowed (the contract).
            return Lookup::Value(unsafe {
                std::slice::from_raw_parts(pool.at::<u8>(leaf + LEAF_P_VALUE), len.min(INLINE_VALUE))
            });
        }
    }
    Lookup::Elsewhere
}

impl PmKeys<'_> {
    /// The first 8 key bytes, big-endian, zero-padded: a sort key for recovery.
    pub(crate) fn with_key_prefix(&self, leaf: u64) -> u64 {
        self.with_key(leaf, |k| {
            let mut b = [0u8; 8];
            let n = k.len().min(8);
            b[..n].copy_from_slice(&k[..n]);
            u64::from_be_bytes(b)
        })
    }
}

impl Pm {
    /// Call `f` with the value of a used leaf. Recovery checked that `p_value` lies in the
    /// pool; the length is checked here against the pool's bounds, so a corrupt pool gives
    /// an error instead of a read outside the mapping.
    ///
    /// # Safety
    ///
    /// `leaf` is a used leaf of an ART whose lock (read or write) the caller holds, so that
    /// no one writes the value while `f` borrows it.
    pub(crate) unsafe fn read_value(&self, leaf: u64, f: &mut dyn FnMut(&[u8])) -> Result<()> {
        // SAFETY: the caller's contract is `value_of`'s.
        let v = unsafe { self.value_of(leaf) }.inspect_err(|e| self.note_damage(e))?;
        f(v);
        Ok(())
    }

    /// The value of a used leaf, verified: the leaf's value check, and for a value object
    /// its bounds and its own check. A mismatch is [`Error::Corrupt`], never wrong data.
    ///
    /// # Safety
    ///
    /// As [`Pm::read_value`]: no one writes the leaf or its value while the slice lives.
    pub(crate) unsafe fn value_of(&self, leaf: u64) -> Result<&[u8]> {
        let pool = &*self.pool;
        let w = leaf_words(pool, leaf);
        let m = Meta::decode(leaf_word(w, LEAF_META));
        let Some((word, slot, _)) = current_value_in(pool, w, leaf, m) else {
            return Err(Error::Corrupt(format!("leaf {leaf:#x}: the value check does not match its value word")));
        };
        if let Some(len) = inline_len(m.flags) {
            // SAFETY: the leaf's value slot, which only a writer holding the ART write lock
            // changes (the caller holds the ART lock); len <= 8 (flags are verified when
            // the leaf enters the tree).
            return Ok(unsafe { bytes(pool, leaf + slot, len.min(INLINE_VALUE)) });
        }
        let v = word;
        if !v.is_multiple_of(8) || !pool.contains(v, VALUE_HDR as u64) {
            return Err(Error::Corrupt(format!("leaf {leaf:#x} names value {v:#x}: misaligned or outside the pool")));
        }
        let len = read_u32(pool, v) as usize;
        if len > MAX_VALUE || !pool.contains(v, (VALUE_HDR + len) as u64) {
            return Err(Error::Corrupt(format!("value {v:#x} of leaf {leaf:#x} claims {len} bytes")));
        }
        pool.note_read_at(v, VALUE_HDR + len);
        // SAFETY: bounds checked above; a used leaf's value object is never written after
        // it is published (updates are out of place).
        let bytes = unsafe { bytes(pool, v + VALUE_HDR as u64, len) };
        if checksum::object_check(leaf, bytes) != read_u32(pool, v + 4) {
            return Err(Error::Corrupt(format!("value {v:#x} of leaf {leaf:#x} fails its check")));
        }
        Ok(bytes)
    }

    /// Allocate and write a value object owned by the leaf at `leaf` (its check is seeded
    /// with the leaf's offset); flushed, not fenced, not published.
    pub(crate) fn new_value(&self, leaf: u64, value: &[u8]) -> Result<u64> {
        let v = self.alloc.alloc(VALUE, VALUE_HDR + value.len())?;
        let check = checksum::object_check(leaf, value);
        // SAFETY: `v` is a reserved slot of at least VALUE_HDR + len bytes.
        unsafe {
            self.pool.at::<u64>(v).write(value.len() as u64 | (check as u64) << 32);
            std::ptr::copy_nonoverlapping(value.as_ptr(), self.pool.at::<u8>(v + VALUE_HDR as u64), value.len());
        }
        self.pool.flush_off(v, VALUE_HDR + value.len());
        Ok(v)
    }
}
