//! The `Hart` facade: options, opening (format or recovery), accessors, sync and close.
//! It owns the parts the layers below build — the PM handle (`pm::Pm`), the DRAM hash
//! table of ARTs, the writer lanes — and no layer below names it. The operations live in
//! one module each above it (`insert`, `update`, `search`, `delete`, `scan`), over a pool
//! shared with EPallocator.
//!
//! Fences per operation, against the paper's `persistent()` calls (SPEC H4 asks for fewer
//! without weakening the guarantees; each is explained where it is issued):
//!
//! | operation | paper | pmkv (short key) |
//! |-----------|-------|------------------|
//! | insert    | 6     | in `eadr`, and in `adr` for a record with a key or value object: 2 (a plain fence after which contents and object bits are durable; leaf bit); in `adr` for a record that fits its leaf: 1 (`insert_log`: the leaf, its bit and the lane's next slot together) |
//! | update    | 8     | 3 (value+log; new bit+p_value; log reclaim+old bit); in place for a same-size inline value: 1 in eadr, 2 in adr (value check, then value word) |
//! | delete    | 2     | 1 (leaf bit; the value bit, if any, is flushed, durable at the next fence) |
//!
//! plus one per chunk recycled (Algorithm 6) and one per new chunk.

use crate::error::{Error, Result};
use crate::hash_table::HashTable;
use crate::insert_log::LaneSlot;
use crate::layout::*;
use crate::pm::Pm;
use crate::recovery::{self, Parts};
use pmkv_core::RecoveryReport;
use pmkv_substrate::epalloc::EpAlloc;
use pmkv_substrate::Pool;
use std::sync::Arc;

/// Options of a HART pool.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// k_h: bytes of the key that select an ART (SPEC H1). Fixed when the pool is created.
    pub hash_key_len: usize,
    /// Store and update values exactly as the paper: every value in its own object, every
    /// update out of place with the micro-log (Algorithm 3). When false (the default),
    /// pmkv makes two changes. A value of at most 8 bytes inserted with a new key is kept
    /// inline in the leaf's `p_value` word (see `layout`): one object per record instead
    /// of two. And an inline value replaced by one of the same length is overwritten in
    /// place: the leaf's value check (which keeps the previous check too), then its value
    /// word, persisted (in `adr` the check first, so 2 fences; in `eadr` 1): a crash leaves
    /// the old or the new value, as with Algorithm 3, with no allocation and no log.
    /// Out-of-line, larger or resized values always take Algorithm 3.
    pub paper_updates: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { hash_key_len: 2, paper_updates: false }
    }
}

/// A HART over one pool: the facade that owns the parts the layers below build (the PM
/// handle, the DRAM hash table of ARTs, the writer lanes) and what the last open's
/// recovery did. Its operations live one module each above it.
pub struct Hart {
    /// The pool, its allocator, the superblock's facts and the damage seen (`pm`).
    pub(crate) pm: Pm,
    pub(crate) table: HashTable,
    /// One per micro-log: the lane's ready leaf slot (`insert_log`), and the mutex that
    /// also guards the micro-log.
    pub(crate) lanes: Vec<LaneSlot>,
    /// What the last open's recovery found and did (SPEC H5); HART's own figures are its
    /// details (see `recovery`).
    pub(crate) recovery: RecoveryReport,
    pub(crate) paper_updates: bool,
    /// Last, so that it is released after everything else that uses the pool.
    _claim: PoolClaim,
}

/// One HART per pool mapping (see [`pmkv_substrate::EngineClaim`]).
type PoolClaim = pmkv_substrate::EngineClaim;

impl Hart {
    /// Open the HART in `pool`, formatting it if the pool is new (root unset). A pool
    /// that another live HART uses is refused (`PoolError::Locked`).
    pub fn open(pool: Arc<Pool>, opts: Options) -> Result<Hart> {
        if opts.hash_key_len > 7 {
            return Err(Error::Invalid(format!("hash key length {} is out of range (0..=7)", opts.hash_key_len)));
        }
        let claim = PoolClaim::take(&pool)?;
        let sb = pool.root(SUPER_ROOT);
        if sb == 0 {
            pool.check_writable()?; // a read-only pool without a HART cannot get one
        }
        let t0 = std::time::Instant::now();
        let parts = if sb == 0 { Self::format(pool, opts)? } else { recovery::recover(pool)? };
        let mut h = Hart {
            pm: parts.pm,
            table: parts.table,
            lanes: (0..NUM_LOGS).map(|_| LaneSlot::default()).collect(),
            recovery: parts.report,
            paper_updates: opts.paper_updates,
            _claim: claim,
        };
        // Write batches a crash interrupted after their log was published are finished
        // now, on the rebuilt trees, before anything else may write (see `batch`).
        let finished = h.finish_batches(parts.pending)?;
        h.recovery = std::mem::take(&mut h.recovery).with_detail("batches_finished", finished);
        h.recovery.rolled_forward += finished;
        if finished > 0 {
            h.recovery.records = h.len();
            h.recovery.duration = t0.elapsed();
        }
        Ok(h)
    }

    /// Format a new pool: the superblock and the micro-log array, and an empty table.
    fn format(pool: Arc<Pool>, opts: Options) -> Result<Parts> {
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
        // SAFETY: `sb` is an object of SUPER_SIZE + logs_bytes bytes just reserved by
        // this thread and not yet published or named by a root, so nothing else reads or
        // writes it; every write below lies inside it, at offsets aligned for its type.
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
        let kh = opts.hash_key_len;
        Ok(Parts {
            pm: Pm::new(pool, alloc, kh, logs_off),
            table: HashTable::new(kh),
            report: recovery::report(true, &Default::default(), std::time::Duration::ZERO),
            pending: Vec::new(),
        })
    }

    /// The pool the HART lives in.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pm.pool
    }
    /// k_h, as stored in the pool (options given to a later open do not change it).
    pub fn hash_key_len(&self) -> usize {
        self.pm.kh
    }
    /// Number of keys: the sum of the ARTs' counts. Kept per ART (under its lock) rather
    /// than in one shared atomic, which every insert and delete would otherwise contend on.
    pub fn len(&self) -> u64 {
        let mut n = 0;
        self.table.for_each(|_, a| n += a.len());
        n
    }
    /// Whether the HART holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// What the last open's recovery did (SPEC H5). Besides the common fields, its
    /// details hold HART's own figures by name: `leaves`, `arts`, `updates_redone`,
    /// `updates_rolled_back`, `inserts_rolled_back`, `micros` (see
    /// [`RecoveryReport::detail_u64`]).
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// Make every acknowledged write durable (matters in `msync` mode).
    pub fn sync(&self) -> Result<()> {
        Ok(self.pm.pool.sync()?)
    }

    /// Close: DRAM state is dropped and the pool records a clean shutdown, with failures
    /// reported (a failed msync, a poisoned pool). If other handles to the pool are still
    /// alive, the pool closes when the last of them is dropped.
    pub fn close(self) -> Result<()> {
        let pool = self.pm.pool.clone();
        drop(self);
        match Arc::try_unwrap(pool) {
            Ok(pool) => Ok(pool.close()?),
            Err(_) => Ok(()),
        }
    }
}
