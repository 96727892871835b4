//! Insert (Algorithm 1): a new leaf (with its value inline or in its own object, and a
//! key object for long keys) linked into the ART, then published; an existing key goes to
//! the update of Algorithm 3 (`update`).

use crate::art::Art;
use crate::checksum::{self, Meta};
use crate::error::{Error, Result};
use crate::hart::Hart;
use crate::hash_table::hash_key;
use crate::layout::*;
use crate::pm::{HotKeys, PmKeys};
use pmkv_substrate::epalloc::{Reserved, ReservedRun};

impl Hart {
    pub(crate) fn check_sizes(key: &[u8], value: &[u8]) -> Result<()> {
        pmkv_core::check_sizes(key, Some(value), MAX_KEY, MAX_VALUE)
    }

    /// Insert or update (upsert): Algorithm 1, with Algorithm 3 for an existing key.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Self::check_sizes(key, value)?;
        self.pm.check_write()?;
        let hk = hash_key(key, self.pm.kh);
        let depth = key.len().min(self.pm.kh);
        self.table.with_or_create(hk, depth, |art| self.put_locked(art, key, value))
    }

    /// Puts in order, with group commit ([`Pool::group`](pmkv_substrate::Pool::group)):
    /// a run of consecutive puts whose keys fall in one ART is applied under one
    /// acquisition of its write lock and shares one commit fence, issued before the lock
    /// is released, so no other thread sees (or builds on) a put before it is durable. A
    /// crash keeps a prefix of `puts`; an error stops at the failing put, the ones before
    /// it applied and durable.
    pub fn put_many(&self, puts: &[(&[u8], &[u8])]) -> Result<()> {
        for (k, v) in puts {
            Self::check_sizes(k, v)?;
        }
        self.pm.check_write()?;
        let mut i = 0;
        while i < puts.len() {
            let hk = hash_key(puts[i].0, self.pm.kh);
            let run = puts[i..].iter().take_while(|(k, _)| hash_key(k, self.pm.kh) == hk).count();
            let depth = puts[i].0.len().min(self.pm.kh);
            self.table.with_or_create(hk, depth, |art| {
                self.pm.pool.group(|| puts[i..i + run].iter().try_for_each(|(k, v)| self.put_locked(art, k, v)))
            })?;
            i += run;
        }
        Ok(())
    }

    /// The body of a put, under the write lock of the key's ART.
    ///
    /// An insert persists its leaf alone, under one fence, and sets the leaf's bit
    /// afterwards without persisting it (format 8; docs/design/hart.md, "One line per
    /// insert"): recovery takes a free leaf slot whose content passes every check for a
    /// leaf whose bit a crash lost, and sets the bit. The bit is set only after the fence,
    /// so a bit that reaches PM always covers a durable leaf; a crash before the fence
    /// leaves a slot that fails its checks (a torn leaf: see [`Hart::make_leaf`] for why
    /// the previous occupant's words cannot complete it) or a complete leaf, the insert
    /// done.
    fn put_locked(&self, art: &mut Art, key: &[u8], value: &[u8]) -> Result<()> {
        // One traversal: the new leaf is made only at the insertion point.
        let mut made = None;
        let want = leaf_run(art.len());
        let make = |run: &mut ReservedRun| {
            let r = self.make_leaf(run, want, key, value)?;
            let off = r.off();
            made = Some(r);
            Ok::<u64, Error>(off)
        };
        // SAFETY: given only leaves of this ART, under its write lock.
        let ks = HotKeys { keys: unsafe { PmKeys::new(&self.pm.pool) }, hot: art.hot };
        match art.upsert(key, make, &ks)? {
            // SAFETY: a used leaf of this ART, whose write lock we hold.
            Err(existing) => unsafe { self.update(existing, value) },
            Ok(()) => {
                // `upsert` links a new leaf only after `make` returned it.
                let Some(r) = made else { return Ok(()) };
                let leaf = r.off();
                // Line 18's persist: the leaf's line (with any value and key object and
                // their bits, flushed by `make_leaf`) under one real fence, also inside a
                // group commit, since the bit below must follow durable content. Flushed
                // only now, after line 17 linked the leaf into the DRAM tree: the
                // write-back overlaps that work instead of stalling before it.
                self.pm.pool.flush_off(leaf, LEAF_SIZE);
                self.pm.pool.fence();
                // Line 18: the leaf bit, not persisted (see above), set through the
                // reservation (no lookup of the offset).
                self.pm.alloc.publish_reserved_lazy(r);
                art.hot.remember(leaf, key);
                Ok(())
            }
        }
    }

    /// Algorithm 1 lines 10–16 for a key not in the tree (caller holds the ART write
    /// lock): allocate and write leaf, value and key object, and publish the value and key
    /// object. Returns the leaf's reservation: the leaf is flushed and published through
    /// it by [`Hart::put`] (line 18) once it is in the tree.
    ///
    /// **The leaf's slot** comes from `run`, the ART's slots reserved ahead, refilled with
    /// up to `want` slots of one chunk by a single compare-and-swap when it is empty
    /// (`EpAlloc::reserve_run`): a slot taken from the run costs no locked instruction,
    /// since the ART's write lock, which the caller holds, guards the run. A reservation
    /// is DRAM state, so EPallocator's guarantee is unchanged: a crash forgets the run and
    /// leaks nothing; the slot is still used only once its bit is set after the fence.
    ///
    /// **Generation.** The slot may hold a previous occupant: an erased leaf, or a torn
    /// insert's leftovers. A crash can tear the new leaf's line at any 8-byte word, and
    /// recovery takes a free slot that passes its checks for a lost bit, so no mix of new
    /// and old words may pass them but the new leaf itself. Words of the key area are
    /// checked by the key check in the new meta word (an old meta word is an erase mark
    /// or fails). What remains is the old value word (or slot B) with the old value check:
    /// they prove each other. The leaf's generation, covered by the value check, is
    /// chosen so that they do not prove each other under the new flags (usually the old
    /// generation plus one; a fresh slot, all zero, needs no search).
    pub(crate) fn make_leaf(&self, run: &mut ReservedRun, want: u32, key: &[u8], value: &[u8]) -> Result<Reserved<'_>> {
        let pool = &*self.pm.pool;
        let reserved = match self.pm.alloc.take_reserved(run) {
            Some(r) => r,
            None => self.pm.alloc.reserve_run(LEAF, LEAF_SIZE, want, run)?,
        };
        let leaf = reserved.off();
        let inline = !self.paper_updates && value.len() <= INLINE_VALUE;
        let v = if inline {
            0
        } else {
            match self.pm.new_value(leaf, value) {
                Ok(v) => v,
                Err(e) => {
                    self.pm.alloc.unreserve(leaf);
                    return Err(e);
                }
            }
        };
        let mut kobj = 0;
        if key.len() > INLINE_KEY {
            kobj = match self.pm.alloc.alloc(KEY, key.len()) {
                Ok(k) => k,
                Err(e) => {
                    self.pm.alloc.unreserve(leaf);
                    if v != 0 {
                        self.pm.alloc.unreserve(v);
                    }
                    return Err(e.into());
                }
            };
            // SAFETY: reserved key object of `key.len()` bytes.
            unsafe { std::ptr::copy_nonoverlapping(key.as_ptr(), pool.at::<u8>(kobj), key.len()) };
            pool.flush_off(kobj, key.len());
        }
        // Lines 12–13, 15–16: value, p_value, key and key_len are written and flushed
        // together, with no fence of their own. The paper persists each separately, but
        // none is reachable before the *leaf* bit is set, and the fence inside the value
        // bit's publish (below) makes them all durable before that. If the value bit
        // reaches PM before the value's bytes, the value is an unreferenced orphan that
        // recovery sweeps. (The crash-simulator tests confirm an extra fence here buys
        // nothing.)
        let mut flags = 0;
        if kobj != 0 {
            flags |= FLAG_KEY_OUT;
        }
        if inline {
            flags |= FLAG_VALUE_INLINE | ((value.len() as u32) << INLINE_LEN_SHIFT);
        }
        flags |= fresh_gen(pool, leaf, flags) << GEN_SHIFT;
        let word = if inline { inline_word(value) } else { v };
        let m = Meta { key_len: key.len(), flags, key_check: checksum::key_check(leaf, key, kobj != 0) };
        let vc = checksum::value_check(leaf, word, flags);
        // The leaf is built in registers and stored as one 64-byte block: a `memset` and a
        // variable-length `memcpy` call straight into PM cost ~3 % of an insert.
        let mut img = [0u8; LEAF_SIZE];
        img[..8].copy_from_slice(&word.to_le_bytes());
        img[LEAF_META as usize..][..8].copy_from_slice(&m.encode().to_le_bytes());
        img[LEAF_VCHECK as usize..][..8].copy_from_slice(&checksum::vcheck_word(vc, vc).to_le_bytes());
        let key_area: &mut [u8; INLINE_KEY] = (&mut img[LEAF_KEY as usize..]).try_into().expect("40 bytes");
        if kobj != 0 {
            key_area[..8].copy_from_slice(&kobj.to_le_bytes());
        } else {
            put_short(key_area, key);
        }
        // SAFETY: reserved leaf slot of 64 bytes, ours until published.
        unsafe { std::ptr::copy_nonoverlapping(img.as_ptr(), pool.at::<u8>(leaf), LEAF_SIZE) };
        // Line 14: the value bit, and the key object's, flushed but not fenced: the fence
        // that makes them and the leaf's bytes durable is issued by `put_locked` after the
        // leaf is linked into the DRAM tree. Nothing orders them before the leaf's line:
        // recovery takes a leaf whose bit was lost only if its value and key objects are
        // used and pass their checks, so a leaf that reached PM before them is a torn
        // insert. A crash after a bit and before the leaf leaves a used object no leaf
        // names, which recovery's sweep frees (the safe replacement of Algorithm 2 lines
        // 12–16, see `recovery`); one that reaches PM before the object's bytes is such an
        // orphan too.
        if v != 0 {
            self.pm.alloc.publish_unfenced(v);
        }
        if kobj != 0 {
            self.pm.alloc.publish_unfenced(kobj);
        }
        Ok(reserved)
    }
}

/// How many leaf slots an ART of `len` leaves reserves at a time (see [`Hart::make_leaf`]):
/// one for a small ART, up to 16 for a large one, so that slots held ahead stay within an
/// eighth of an ART's leaves and 16 per ART (1 KiB).
#[inline]
fn leaf_run(len: u64) -> u32 {
    (len / 8).clamp(1, 16) as u32
}

/// The generation for a new leaf with `flags` (generation bits clear) in the slot at
/// `leaf`: one under which the slot's current value word (or slot B) and value check do
/// not prove each other, starting after the generation its meta word carries (see
/// [`Hart::make_leaf`]).
fn fresh_gen(pool: &pmkv_substrate::Pool, leaf: u64, flags: u32) -> u32 {
    use crate::pm::{leaf_word, leaf_words};
    // The slot's bounds checked once for its four words (`leaf_words`).
    let lw = leaf_words(pool, leaf);
    let old_vw = leaf_word(lw, LEAF_VCHECK);
    let mut gen = (gen_of(leaf, leaf_word(lw, LEAF_META)) + 1) & 0xf;
    if old_vw == 0 {
        return gen;
    }
    let words = [leaf_word(lw, LEAF_P_VALUE), leaf_word(lw, LEAF_SLOT_B)];
    for _ in 0..16 {
        let f = flags | gen << GEN_SHIFT;
        let proves = |w: u64| {
            let c = checksum::value_check(leaf, w, f);
            c == old_vw as u32 || c == (old_vw >> 32) as u32
        };
        if !words.iter().any(|&w| proves(w)) {
            break;
        }
        gen = (gen + 1) & 0xf;
    }
    gen
}
