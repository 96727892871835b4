//! HART's operations: insert (Algorithm 1), update (Algorithm 3), search (Algorithm 4),
//! delete (Algorithm 5), ordered scans (SPEC H8), over a pool shared with EPallocator.
//!
//! Fences per operation, against the paper's `persistent()` calls (SPEC H4 asks for fewer
//! without weakening the guarantees; each is explained where it is issued):
//!
//! | operation | paper | pmkv (short key) |
//! |-----------|-------|------------------|
//! | insert    | 6     | 2 (value bit or, for an inline value, a plain fence, after which contents are durable; leaf bit) |
//! | update    | 8     | 3 (value+log; new bit+p_value; log reclaim+old bit); 1 in place for same-size values of ≤ 8 bytes |
//! | delete    | 2     | 1 (leaf bit; the value bit, if any, is flushed, durable at the next fence) |
//!
//! plus one per chunk recycled (Algorithm 6) and one per new chunk.

use crate::art::{Art, ArtStats, KeySource};
use crate::error::{HartError, Result};
use crate::hash_table::{hash_key, hash_key_bytes, HashKey, HashTable};
use crate::layout::*;
use crate::micro_log::{self, UpdateLog};
use parking_lot::Mutex;
use pmkv_substrate::epalloc::EpAlloc;
use pmkv_substrate::{Pool, LINE};
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[inline]
pub(crate) fn read_u64(pool: &Pool, off: u64) -> u64 {
    // SAFETY: callers pass offsets of live objects inside the pool.
    unsafe { pool.at::<u64>(off).read() }
}
#[inline]
pub(crate) fn read_u32(pool: &Pool, off: u64) -> u32 {
    // SAFETY: as above.
    unsafe { pool.at::<u32>(off).read() }
}
#[inline]
fn write_u64(pool: &Pool, off: u64, v: u64) {
    // SAFETY: callers own the object (reserved slot, or leaf under the ART write lock).
    unsafe { pool.at::<u64>(off).write(v) }
}

fn lines(len: usize) -> u64 {
    len.div_ceil(LINE) as u64
}

/// Reads leaf keys from PM for the ART (lazy expansion compares whole keys at leaves).
pub(crate) struct PmKeys<'a>(pub &'a Pool);

impl KeySource for PmKeys<'_> {
    #[inline]
    fn with_key<R>(&self, leaf: u64, f: impl FnOnce(&[u8]) -> R) -> R {
        let pool = self.0;
        let len = read_u32(pool, leaf + LEAF_KEY_LEN) as usize;
        let flags = read_u32(pool, leaf + LEAF_FLAGS);
        pool.note_read(1);
        let at = if flags & FLAG_KEY_OUT != 0 {
            let k = read_u64(pool, leaf + LEAF_KEY);
            pool.note_read(lines(len));
            k
        } else {
            leaf + LEAF_KEY
        };
        // SAFETY: a used leaf's key (inline or key object) is `len` bytes inside the pool.
        f(unsafe { std::slice::from_raw_parts(pool.at::<u8>(at), len.min(MAX_KEY)) })
    }
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

/// Bytes in use, by structure name (SPEC H9).
pub type ByStructure = Vec<(String, u64)>;

/// Options of a HART pool.
#[derive(Clone, Copy, Debug)]
pub struct HartOptions {
    /// k_h: bytes of the key that select an ART (SPEC H1). Fixed when the pool is created.
    pub hash_key_len: usize,
    /// Store and update values exactly as the paper: every value in its own object, every
    /// update out of place with the micro-log (Algorithm 3). When false (the default),
    /// pmkv makes two changes. A value of at most 8 bytes inserted with a new key is kept
    /// inline in the leaf's `p_value` word (see `layout`): one object per record instead
    /// of two. And a value of at most 8 bytes replaced by one of the same length is
    /// overwritten in place with one atomic 8-byte store and one persist: a crash leaves
    /// the old or the new value, as with Algorithm 3, with 1 fence instead of 3 and no
    /// allocation. Larger or resized values always take Algorithm 3.
    pub paper_updates: bool,
}

impl Default for HartOptions {
    fn default() -> Self {
        HartOptions { hash_key_len: 2, paper_updates: false }
    }
}

/// What recovery found and did (SPEC H5).
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    pub clean: bool,
    pub leaves: u64,
    pub arts: u64,
    pub updates_redone: u64,
    pub updates_rolled_back: u64,
    pub orphans_freed: u64,
    pub micros: u128,
}

/// A HART over one pool.
pub struct Hart {
    pub(crate) pool: Arc<Pool>,
    pub(crate) alloc: EpAlloc,
    pub(crate) kh: usize,
    pub(crate) table: HashTable,
    pub(crate) logs_off: u64,
    log_locks: Vec<Mutex<()>>,
    pub(crate) recovery: RecoveryReport,
    paper_updates: bool,
}

static NEXT_LOG: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static MY_LOG: usize = NEXT_LOG.fetch_add(1, Ordering::Relaxed);
}

impl Hart {
    /// Open the HART in `pool`, formatting it if the pool is new (root unset).
    pub fn open(pool: Arc<Pool>, opts: HartOptions) -> Result<Hart> {
        if opts.hash_key_len > 7 {
            return Err(HartError::BadHashKeyLen(opts.hash_key_len));
        }
        let sb = pool.root(SUPER_ROOT);
        if sb == 0 {
            pool.check_writable()?; // a read-only pool without a HART cannot get one
        }
        let mut h = if sb == 0 { Self::format(pool, opts)? } else { crate::recovery::recover(pool)? };
        h.paper_updates = opts.paper_updates;
        Ok(h)
    }

    fn format(pool: Arc<Pool>, opts: HartOptions) -> Result<Hart> {
        let alloc = if pool.root(pmkv_substrate::epalloc::EPALLOC_ROOT) == 0 {
            EpAlloc::create(pool.clone())?
        } else {
            EpAlloc::open(pool.clone())?
        };
        // The superblock and the log array are one allocator object of type SUPER, so the
        // allocator's checker accounts for every byte. Written and persisted, then
        // published, then named by the atomic root update. A crash between publish and
        // root leaves a used SUPER object that no root names: freed here on the next try.
        let mut stale = Vec::new();
        alloc.for_each_used(SUPER, |o| stale.push(o));
        for o in stale {
            alloc.free(o);
        }
        let logs_bytes = NUM_LOGS as u64 * LOG_SIZE;
        let sb = alloc.alloc(SUPER, (SUPER_SIZE + logs_bytes) as usize)?;
        let logs_off = sb + SUPER_SIZE;
        // SAFETY: a reserved object of SUPER_SIZE + logs_bytes bytes.
        unsafe {
            std::ptr::write_bytes(pool.at::<u8>(sb), 0, (SUPER_SIZE + logs_bytes) as usize);
            std::ptr::copy_nonoverlapping(SUPER_MAGIC.as_ptr(), pool.at::<u8>(sb), 8);
            pool.at::<u32>(sb + 8).write(SUPER_VERSION);
            pool.at::<u32>(sb + 12).write(opts.hash_key_len as u32);
            pool.at::<u32>(sb + 16).write(NUM_LOGS);
            pool.at::<u64>(sb + 24).write(logs_off);
        }
        pool.persist_off(sb, (SUPER_SIZE + logs_bytes) as usize);
        alloc.publish(sb);
        pool.set_root(SUPER_ROOT, sb);
        Ok(Self::assemble(pool, alloc, opts.hash_key_len, logs_off))
    }

    pub(crate) fn assemble(pool: Arc<Pool>, alloc: EpAlloc, kh: usize, logs_off: u64) -> Hart {
        Hart {
            pool,
            alloc,
            kh,
            table: HashTable::default(),
            logs_off,
            log_locks: (0..NUM_LOGS).map(|_| Mutex::new(())).collect(),
            recovery: RecoveryReport { clean: true, ..Default::default() },
            paper_updates: false,
        }
    }

    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }
    pub fn allocator(&self) -> &EpAlloc {
        &self.alloc
    }
    pub fn hash_key_len(&self) -> usize {
        self.kh
    }
    /// Number of keys: the sum of the ARTs' counts. Kept per ART (under its lock) rather
    /// than in one shared atomic, which every insert and delete would otherwise contend on.
    pub fn len(&self) -> u64 {
        let mut n = 0;
        self.table.for_each(|_, a| n += a.read().len());
        n
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// What the last open's recovery did.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    fn check_sizes(key: &[u8], value: &[u8]) -> Result<()> {
        if key.len() > MAX_KEY {
            return Err(HartError::KeyTooLarge(key.len()));
        }
        if value.len() > MAX_VALUE {
            return Err(HartError::ValueTooLarge(value.len()));
        }
        Ok(())
    }

    /// Search (Algorithm 4): call `f` with the value of `key`.
    pub fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        if key.len() > MAX_KEY {
            return Ok(false);
        }
        let hk = hash_key(key, self.kh);
        let ks = PmKeys(&self.pool);
        let found = self.table.with(hk, |art| {
            let art = art.read();
            // Algorithm 4 lines 9–10 check the leaf bit: under the per-ART lock a leaf in
            // the tree is always used (writers publish it before releasing the lock), so
            // the check is needed only in recovery and in `check`.
            let Some(leaf) = art.get(key, &ks) else { return Ok(false) };
            self.read_value(leaf, f)?;
            Ok(true)
        });
        found.unwrap_or(Ok(false))
    }

    /// Call `f` with the value of a used leaf. Recovery checked that `p_value` lies in the
    /// pool; the length is checked here against the pool's bounds, so a corrupt pool gives
    /// an error instead of a read outside the mapping.
    fn read_value(&self, leaf: u64, f: &mut dyn FnMut(&[u8])) -> Result<()> {
        if let Some(len) = inline_len(read_u32(&self.pool, leaf + LEAF_FLAGS)) {
            // SAFETY: a used leaf's first 8 bytes; recovery checked len <= 8.
            f(unsafe { std::slice::from_raw_parts(self.pool.at::<u8>(leaf + LEAF_P_VALUE), len.min(INLINE_VALUE)) });
            return Ok(());
        }
        let v = read_u64(&self.pool, leaf + LEAF_P_VALUE);
        let len = read_u32(&self.pool, v) as usize;
        if len > MAX_VALUE || !self.pool.contains(v, (VALUE_HDR + len) as u64) {
            return Err(HartError::Corrupt(format!("value {v:#x} of leaf {leaf:#x} claims {len} bytes")));
        }
        self.pool.note_read(lines(VALUE_HDR + len));
        // SAFETY: bounds checked above; a used leaf's value object is not written while a
        // reader holds the ART lock.
        f(unsafe { std::slice::from_raw_parts(self.pool.at::<u8>(v + VALUE_HDR as u64), len) });
        Ok(())
    }

    /// Allocate and write a value object; flushed, not fenced, not published.
    fn new_value(&self, value: &[u8]) -> Result<u64> {
        let v = self.alloc.alloc(VALUE, VALUE_HDR + value.len())?;
        // SAFETY: `v` is a reserved slot of at least VALUE_HDR + len bytes.
        unsafe {
            self.pool.at::<u64>(v).write(value.len() as u64);
            std::ptr::copy_nonoverlapping(value.as_ptr(), self.pool.at::<u8>(v + VALUE_HDR as u64), value.len());
        }
        self.pool.flush_off(v, VALUE_HDR + value.len());
        Ok(v)
    }

    /// Insert or update (upsert): Algorithm 1, with Algorithm 3 for an existing key.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Self::check_sizes(key, value)?;
        self.pool.check_writable()?;
        let hk = hash_key(key, self.kh);
        let depth = key.len().min(self.kh);
        self.table.with_or_create(hk, depth, |art| {
            let mut art = art.write();
            // One traversal: the new leaf is made only at the insertion point.
            let mut made = 0;
            let make = || {
                made = self.make_leaf(key, value)?;
                Ok::<u64, HartError>(made)
            };
            match art.upsert(key, make, &PmKeys(&self.pool))? {
                Err(existing) => self.update(existing, value),
                Ok(()) => {
                    // Line 18: the leaf bit (fence 2), after line 17 linked the leaf into
                    // the DRAM tree.
                    self.alloc.publish(made);
                    Ok(())
                }
            }
        })
    }

    /// Algorithm 1 lines 10–16 for a key not in the tree (caller holds the ART write
    /// lock): allocate and write leaf, value and key object, and publish the value and key
    /// object. The leaf is published by [`Hart::publish_leaf`] once it is in the tree.
    fn make_leaf(&self, key: &[u8], value: &[u8]) -> Result<u64> {
        let pool = &*self.pool;
        let leaf = self.alloc.alloc(LEAF, LEAF_SIZE)?;
        let inline = !self.paper_updates && value.len() <= INLINE_VALUE;
        let v = if inline {
            0
        } else {
            match self.new_value(value) {
                Ok(v) => v,
                Err(e) => {
                    self.alloc.unreserve(leaf);
                    return Err(e);
                }
            }
        };
        let mut kobj = 0;
        if key.len() > INLINE_KEY {
            kobj = match self.alloc.alloc(KEY, key.len()) {
                Ok(k) => k,
                Err(e) => {
                    self.alloc.unreserve(leaf);
                    if v != 0 {
                        self.alloc.unreserve(v);
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
        // SAFETY: reserved leaf slot of 64 bytes.
        unsafe {
            let p = pool.at::<u8>(leaf);
            std::ptr::write_bytes(p, 0, LEAF_SIZE);
            if inline {
                std::ptr::copy_nonoverlapping(value.as_ptr(), p, value.len());
            } else {
                (p as *mut u64).write(v);
            }
            (p.add(8) as *mut u32).write(key.len() as u32);
            (p.add(12) as *mut u32).write(flags);
            if kobj != 0 {
                (p.add(16) as *mut u64).write(kobj);
            } else {
                std::ptr::copy_nonoverlapping(key.as_ptr(), p.add(16), key.len());
            }
        }
        pool.flush_off(leaf, LEAF_SIZE);
        // Line 14: the value bit (fence 1, inside publish). A crash after it and before
        // the leaf bit leaves a used value no leaf names: recovery's sweep frees it (the
        // safe replacement of Algorithm 2 lines 12–16, see `recovery`). With an inline
        // value and no key object there is no bit to set, but the leaf's contents must
        // still be durable before its bit is: a plain fence.
        if v != 0 {
            self.alloc.publish(v);
        }
        if kobj != 0 {
            self.alloc.publish(kobj);
        }
        if v == 0 && kobj == 0 {
            pool.fence();
        }
        Ok(leaf)
    }

    fn log_at(&self, i: usize) -> u64 {
        self.logs_off + (i as u64) * LOG_SIZE
    }

    /// Out-of-place update (Algorithm 3); the caller holds the ART write lock.
    fn update(&self, leaf: u64, value: &[u8]) -> Result<()> {
        let pool = &*self.pool;
        let old = read_u64(pool, leaf + LEAF_P_VALUE);
        let flags = read_u32(pool, leaf + LEAF_FLAGS);
        let old_inline = inline_len(flags);
        if old_inline == Some(value.len()) && !self.paper_updates {
            // An inline value of the same length: one atomic 8-byte store of the leaf's
            // value word, persisted (a crash leaves the old or the new value). (A pool
            // written without `paper_updates` and reopened with it moves such values out
            // of line with Algorithm 3 instead.)
            let mut w = [0u8; 8];
            w[..value.len()].copy_from_slice(value);
            write_u64(pool, leaf + LEAF_P_VALUE, u64::from_le_bytes(w));
            pool.persist_off(leaf + LEAF_P_VALUE, 8);
            return Ok(());
        }
        if old_inline.is_none()
            && !self.paper_updates
            && value.len() <= 8
            && read_u32(pool, old) as usize == value.len()
        {
            // In place: the value's data word is one aligned 8-byte store, which PM writes
            // atomically, so a crash leaves the old or the new value (see HartOptions).
            let mut w = [0u8; 8];
            w[..value.len()].copy_from_slice(value);
            write_u64(pool, old + VALUE_HDR as u64, u64::from_le_bytes(w));
            pool.persist_off(old + VALUE_HDR as u64, 8);
            return Ok(());
        }
        let new = self.new_value(value)?; // lines 4–5 (flushed)
        let i = MY_LOG.with(|x| *x) % NUM_LOGS as usize;
        let _log = self.log_locks[i].lock();
        let at = self.log_at(i);
        let crc = micro_log::value_crc(pool, new).unwrap_or(0);
        // Lines 2, 3, 6 in one line with a check word that covers the new value.
        micro_log::write(pool, at, UpdateLog { leaf, old_value: old, new_value: new, old_flags: flags }, crc);
        pool.fence(); // fence 1: new value and log durable

        // Lines 7–8: swing p_value (and, for an inline value, clear the inline flags in the
        // same line; both flushed) then set the new value's bit; publish's fence (fence 2)
        // covers them. Recovery decides by the new value's bit: set → roll forward (swing),
        // clear → roll back to the logged word and flags (the old value was not yet freed).
        write_u64(pool, leaf + LEAF_P_VALUE, new);
        if old_inline.is_some() {
            // SAFETY: the leaf's flags word; we hold the ART write lock.
            unsafe { pool.at::<u32>(leaf + LEAF_FLAGS).write(flags & !INLINE_MASK) };
        }
        pool.flush_off(leaf + LEAF_P_VALUE, 16);
        self.alloc.publish(new);
        if old_inline.is_some() {
            // No old object to free: reclaim the log with a fence of its own (fence 3).
            micro_log::clear(pool, at);
            return Ok(());
        }
        // Line 11 before lines 9–10: reclaim the log (flushed, not fenced), then reset the
        // old value's bit, whose fence (fence 3) makes both durable. Either may reach PM
        // first: a cleared log with the old bit set leaves an orphan the recovery sweep
        // frees; a valid log with the old bit clear rolls forward again, and the sweep
        // frees `old` only if no used leaf names it (its slot may have been reused). The
        // log is durably clear before the leaf can change again (we hold the ART lock),
        // so a stale log never swings a later p_value back.
        micro_log::clear_unfenced(pool, at);
        self.alloc.free(old);
        Ok(())
    }

    /// Delete (Algorithm 5). Returns whether the key was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        if key.len() > MAX_KEY {
            return Ok(false);
        }
        self.pool.check_writable()?;
        let hk = hash_key(key, self.kh);
        let pool = &*self.pool;
        let (found, now_empty) = self
            .table
            .with(hk, |art| {
                let mut art = art.write();
                // Line 9: out of the DRAM tree first.
                let Some(leaf) = art.remove(key, &PmKeys(pool)) else { return (false, false) };
                let v = read_u64(pool, leaf + LEAF_P_VALUE);
                let flags = read_u32(pool, leaf + LEAF_FLAGS);
                let v = if inline_len(flags).is_some() { 0 } else { v };
                let kobj = if flags & FLAG_KEY_OUT != 0 { read_u64(pool, leaf + LEAF_KEY) } else { 0 };
                // Lines 11–14: leaf bit first (fence 1), then the value bit — flushed but
                // not fenced: until this thread's next fence a crash may leave the value
                // used and named by no leaf, an orphan recovery's sweep frees (the paper
                // fences it: 2 fences). The other order could resurrect the key with a
                // value slot that another writer has reused meanwhile.
                self.alloc.free(leaf);
                if v != 0 {
                    self.alloc.free_unfenced(v);
                }
                if kobj != 0 {
                    self.alloc.free_unfenced(kobj);
                }
                (true, art.is_empty())
            })
            .unwrap_or((false, false));
        // Lines 15–16: free the ART if it became empty (SPEC H6).
        if now_empty {
            self.table.remove_if_empty(hk);
        }
        Ok(found)
    }

    /// Visit records with keys in `[start, end]` (per the bounds) in ascending order, or
    /// descending with `reverse`, until `f` returns false or `limit` records were visited
    /// (SPEC H8). ARTs are visited in the order of the hash-key index (backwards for a
    /// reverse scan), so nothing is sorted at scan time.
    ///
    /// `f` runs while the ART's read lock is held: it must not call into this HART. (The
    /// `pmkv` API never runs user code here: it copies records out in chunks.)
    pub fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let pool = &*self.pool;
        let ks = PmKeys(pool);
        fn bound_key(b: Bound<&[u8]>) -> Option<&[u8]> {
            match b {
                Bound::Included(s) | Bound::Excluded(s) => Some(s),
                Bound::Unbounded => None,
            }
        }
        let (start_key, end_key) = (bound_key(start), bound_key(end));
        let after_start = |k: &[u8]| match start {
            Bound::Included(s) => k >= s,
            Bound::Excluded(s) => k > s,
            Bound::Unbounded => true,
        };
        let before_end = |k: &[u8]| match end {
            Bound::Included(e) => k <= e,
            Bound::Excluded(e) => k < e,
            Bound::Unbounded => true,
        };
        // First hash key to visit. Packed hash keys order as the key prefixes they hold
        // (see hash_table), and prefix truncation preserves order: every key >= start has
        // hash key >= hk(start), and every key <= end has hash key <= hk(end). Keys of the
        // first and last ART visited that lie outside the bounds are skipped below.
        let mut cursor = if reverse {
            end_key.map(|e| hash_key(e, self.kh)).unwrap_or(u64::MAX)
        } else {
            start_key.map(|s| hash_key(s, self.kh)).unwrap_or(0)
        };
        let mut visited = 0usize;
        let mut stop = false;
        let mut err = None;
        /// Leaves between the tree walk and the visit (see the prefetch below).
        const SCAN_AHEAD: usize = 16;
        let mut window = std::collections::VecDeque::with_capacity(SCAN_AHEAD + 1);
        while !stop {
            let next = if reverse { self.table.prev_at_or_before(cursor) } else { self.table.next_at_or_after(cursor) };
            let Some(hk) = next else { break };
            let hk_bytes = hash_key_bytes(hk);
            // Every key of this ART begins with `hk_bytes`: past the far bound, so is
            // every later ART.
            let far = if reverse { start_key } else { end_key };
            if let Some(e) = far {
                let n = hk_bytes.len().min(e.len());
                if (!reverse && hk_bytes[..n] > e[..n]) || (reverse && hk_bytes[..n] < e[..n]) {
                    break;
                }
            }
            self.table.with(hk, |art| {
                let art = art.read();
                let mut visit = |leaf: u64| {
                    ks.with_key(leaf, |k| {
                        let (near_ok, far_ok) =
                            if reverse { (before_end(k), after_start(k)) } else { (after_start(k), before_end(k)) };
                        if !near_ok {
                            return true;
                        }
                        if !far_ok || visited >= limit {
                            stop = true;
                            return false;
                        }
                        let mut go = true;
                        if let Err(e) = self.read_value(leaf, &mut |v| go = f(k, v)) {
                            err = Some(e);
                            go = false;
                        }
                        visited += 1;
                        if !go {
                            stop = true;
                        }
                        go
                    })
                };
                // Leaves in key order lie anywhere in the pool: prefetch each as the tree
                // yields it and visit it SCAN_AHEAD leaves later, so that the PM reads
                // overlap instead of costing a miss each (a 100,000-record scan of 1M Random
                // keys: 17.4 ms without, 9-10 ms with).
                let mut ahead = |leaf: u64| {
                    pool.prefetch(leaf);
                    window.push_back(leaf);
                    if window.len() > SCAN_AHEAD {
                        visit(window.pop_front().expect("non-empty window"))
                    } else {
                        true
                    }
                };
                let mut go = if reverse {
                    art.scan_rev(&hk_bytes, end_key, &mut ahead)
                } else {
                    art.scan(&hk_bytes, start_key, &mut ahead)
                };
                while go {
                    let Some(leaf) = window.pop_front() else { break };
                    go = visit(leaf);
                }
                window.clear();
            });
            if let Some(e) = err {
                return Err(e);
            }
            match (reverse, hk) {
                (false, u64::MAX) | (true, 0) => break,
                (false, _) => cursor = hk + 1,
                (true, _) => cursor = hk - 1,
            }
        }
        Ok(())
    }

    /// Smallest and largest key (SPEC H8): one forward and one reverse step.
    pub fn min_max(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut ends = [None, None];
        for (i, reverse) in [false, true].into_iter().enumerate() {
            self.scan(Bound::Unbounded, Bound::Unbounded, 1, reverse, &mut |k, _| {
                ends[i] = Some(k.to_vec());
                false
            })?;
        }
        let [min, max] = ends;
        Ok(min.zip(max))
    }

    /// DRAM and PM use by structure (SPEC H9).
    pub fn memory(&self) -> (ByStructure, ByStructure) {
        let mut st = ArtStats::default();
        let mut arts = 0u64;
        self.table.for_each(|_, a| {
            a.read().stats(&mut st);
            arts += 1;
        });
        let (table, ordered) = self.table.dram_bytes();
        let mut dram = vec![
            ("hash table".to_string(), table),
            ("hash-key order index".to_string(), ordered),
            ("art headers".to_string(), arts * std::mem::size_of::<parking_lot::RwLock<Art>>() as u64),
        ];
        for (i, t) in crate::art::node::NodeType::ALL.iter().enumerate() {
            dram.push((format!("{} ({} nodes)", t.name(), st.nodes[i]), st.bytes[i]));
        }
        // Heap prefixes are counted with their nodes but live outside the arena.
        let in_nodes: u64 =
            crate::art::node::NodeType::ALL.iter().enumerate().map(|(i, t)| st.nodes[i] * t.slot_bytes() as u64).sum();
        dram.push((
            "art arena (free nodes, uncarved blocks)".to_string(),
            self.table.arena().reserved().saturating_sub(in_nodes),
        ));
        let s = self.alloc.stats();
        let mut pm = Vec::new();
        for (name, ty) in [("leaves", LEAF), ("values", VALUE), ("key objects", KEY)] {
            let (used, total) = s.of_type(ty);
            pm.push((format!("{name} (used bytes)"), used));
            pm.push((format!("{name} (allocator overhead and free slots)"), total.saturating_sub(used)));
        }
        pm.push(("superblock and micro-logs".to_string(), SUPER_SIZE + NUM_LOGS as u64 * LOG_SIZE));
        (dram, pm)
    }

    /// Run `f` for every used leaf of every ART, with its hash key (for the checker).
    pub(crate) fn for_each_tree_leaf(&self, f: &mut dyn FnMut(HashKey, u64)) {
        self.table.for_each(|hk, a| {
            let a = a.read();
            let b = hash_key_bytes(hk);
            a.scan(&b, None, &mut |l| {
                f(hk, l);
                true
            });
        });
    }

    /// Insert existing used leaves into the DRAM structures (recovery, Algorithm 7 line 6).
    ///
    /// `leaves` holds (first 8 key bytes big-endian, leaf offset) pairs. They are sorted by
    /// key prefix first, so consecutive insertions walk the same ART paths (cache-hot)
    /// and take each ART's lock once per run of equal hash keys; large recoveries are
    /// split at hash-key boundaries over the available cores, since different ARTs are
    /// independent. The paper inserts leaves in chunk order, one lock each.
    pub(crate) fn insert_recovered(&self, mut leaves: Vec<(u64, u64)>) -> Result<()> {
        leaves.sort_unstable();
        // `PMKV_RECOVERY_THREADS` overrides the core count (1 = the paper's serial recovery).
        let threads = std::env::var("PMKV_RECOVERY_THREADS")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .clamp(1, 8);
        if threads < 2 || leaves.len() < 200_000 {
            return self.insert_sorted(&leaves);
        }
        // Cut points where the 8-byte prefix's hash key changes, near equal shares.
        let mut parts = Vec::new();
        let mut from = 0;
        for t in 1..threads {
            let mut at = (leaves.len() * t / threads).max(from);
            let hk = |i: usize| hash_key(&leaves[i].0.to_be_bytes(), self.kh.min(8));
            while at < leaves.len() && at > 0 && hk(at) == hk(at - 1) {
                at += 1;
            }
            parts.push(&leaves[from..at]);
            from = at;
        }
        parts.push(&leaves[from..]);
        std::thread::scope(|s| {
            let handles: Vec<_> = parts.into_iter().map(|p| s.spawn(move || self.insert_sorted(p))).collect();
            handles.into_iter().try_for_each(|h| {
                h.join().unwrap_or_else(|_| Err(HartError::Corrupt("recovery thread panicked".into())))
            })
        })
    }

    fn insert_sorted(&self, leaves: &[(u64, u64)]) -> Result<()> {
        /// How far ahead recovery prefetches leaves (about the misses one insert overlaps).
        const PREFETCH_AHEAD: usize = 8;
        let ks = PmKeys(&self.pool);
        let mut i = 0;
        while i < leaves.len() {
            let (hk, depth) = ks.with_key(leaves[i].1, |k| (hash_key(k, self.kh), k.len().min(self.kh)));
            i = self.table.with_or_create(hk, depth, |art| {
                let mut art = art.write();
                let mut j = i;
                while j < leaves.len() {
                    let leaf = leaves[j].1;
                    // Leaves sorted by key lie at random places in the pool: fetch the line
                    // of a leaf a few steps ahead while this one is inserted.
                    if let Some(&(_, ahead)) = leaves.get(j + PREFETCH_AHEAD) {
                        self.pool.prefetch(ahead);
                    }
                    let r = ks.with_key(leaf, |key| {
                        if hash_key(key, self.kh) != hk {
                            return Ok(false);
                        }
                        match art.insert(key, leaf, &ks) {
                            Ok(()) => Ok(true),
                            Err(other) => Err(HartError::Corrupt(format!(
                                "two used leaves ({other:#x} and {leaf:#x}) hold the same key"
                            ))),
                        }
                    })?;
                    if !r {
                        break;
                    }
                    j += 1;
                }
                Ok::<usize, HartError>(j)
            })?;
        }
        Ok(())
    }

    /// Make every acknowledged write durable (matters in `msync` mode).
    pub fn sync(&self) -> Result<()> {
        Ok(self.pool.sync()?)
    }

    /// Close: DRAM state is dropped and the pool records a clean shutdown, with failures
    /// reported (a failed msync, a poisoned pool). If other handles to the pool are still
    /// alive, the pool closes when the last of them is dropped.
    pub fn close(self) -> Result<()> {
        let pool = self.pool.clone();
        drop(self);
        match Arc::try_unwrap(pool) {
            Ok(pool) => Ok(pool.close()?),
            Err(_) => Ok(()),
        }
    }
}
