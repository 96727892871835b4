//! The `Hart` handle: options, opening (format or recovery), accessors, sync and close.
//! The operations live in one module each (`insert`, `update`, `search`, `delete`,
//! `scan`), over a pool shared with EPallocator.
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

use crate::error::{HartError, Result};
use crate::hash_table::HashTable;
use crate::insert_log::LaneSlot;
use crate::layout::*;
use pmkv_substrate::epalloc::EpAlloc;
use pmkv_substrate::Pool;
use std::sync::Arc;

/// Options of a HART pool.
#[derive(Clone, Copy, Debug)]
pub struct HartOptions {
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

impl Default for HartOptions {
    fn default() -> Self {
        HartOptions { hash_key_len: 2, paper_updates: false }
    }
}

/// What recovery found and did (SPEC H5).
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    /// The pool was closed cleanly (no micro-logs to replay, no orphan sweep).
    pub clean: bool,
    /// Used leaves put back into the ARTs (the number of keys).
    pub leaves: u64,
    /// ARTs rebuilt (hash keys in use).
    pub arts: u64,
    /// Interrupted updates finished from their micro-log (rolled forward).
    pub updates_redone: u64,
    /// Interrupted updates undone (a valid log whose new value never became durable, or
    /// a torn log).
    pub updates_rolled_back: u64,
    /// One-persist inserts a crash cut short (a leaf a lane names, used but failing its
    /// checks: see `insert_log`), undone.
    pub inserts_rolled_back: u64,
    /// Value and key objects freed because no used leaf named them.
    pub orphans_freed: u64,
    /// Time the open's recovery took, in microseconds.
    pub micros: u128,
}

/// A HART over one pool.
pub struct Hart {
    pub(crate) pool: Arc<Pool>,
    pub(crate) alloc: EpAlloc,
    pub(crate) kh: usize,
    pub(crate) table: HashTable,
    pub(crate) logs_off: u64,
    /// One per micro-log: the lane's ready leaf slot (`insert_log`), and the mutex that
    /// also guards the micro-log.
    pub(crate) lanes: Vec<LaneSlot>,
    pub(crate) recovery: RecoveryReport,
    pub(crate) paper_updates: bool,
    /// The first damage a read met (a check that failed). From then on writes are
    /// refused: a write could build on the damaged object (an update's roll-back value, a
    /// delete that frees what a damaged pointer names) and spread the damage.
    pub(crate) damage: std::sync::OnceLock<String>,
    /// Last, so that it is released after everything else that uses the pool.
    _claim: PoolClaim,
}

/// One HART per pool mapping (see [`pmkv_substrate::EngineClaim`]).
pub(crate) type PoolClaim = pmkv_substrate::EngineClaim;

impl Hart {
    /// Open the HART in `pool`, formatting it if the pool is new (root unset). A pool
    /// that another live HART uses is refused (`PoolError::Locked`).
    pub fn open(pool: Arc<Pool>, opts: HartOptions) -> Result<Hart> {
        if opts.hash_key_len > 7 {
            return Err(HartError::BadHashKeyLen(opts.hash_key_len));
        }
        let claim = PoolClaim::take(&pool)?;
        let sb = pool.root(SUPER_ROOT);
        if sb == 0 {
            pool.check_writable()?; // a read-only pool without a HART cannot get one
        }
        let mut h = if sb == 0 { Self::format(pool, opts, claim)? } else { crate::recovery::recover(pool, claim)? };
        h.paper_updates = opts.paper_updates;
        Ok(h)
    }

    fn format(pool: Arc<Pool>, opts: HartOptions, claim: PoolClaim) -> Result<Hart> {
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
        Ok(Self::assemble(pool, alloc, opts.hash_key_len, logs_off, claim))
    }

    pub(crate) fn assemble(pool: Arc<Pool>, alloc: EpAlloc, kh: usize, logs_off: u64, claim: PoolClaim) -> Hart {
        Hart {
            pool,
            alloc,
            kh,
            table: HashTable::new(kh),
            logs_off,
            lanes: (0..NUM_LOGS).map(|_| LaneSlot::default()).collect(),
            recovery: RecoveryReport { clean: true, ..Default::default() },
            paper_updates: false,
            damage: std::sync::OnceLock::new(),
            _claim: claim,
        }
    }

    /// Remember the first damage a read met (see [`Hart::check_write`]).
    pub(crate) fn note_damage(&self, e: &HartError) {
        if let HartError::Corrupt(what) = e {
            let _ = self.damage.set(what.clone());
        }
    }

    /// Before any write: the pool is writable and no read has met damage in it.
    pub(crate) fn check_write(&self) -> Result<()> {
        self.pool.check_writable()?;
        match self.damage.get() {
            Some(what) => Err(HartError::Corrupt(format!(
                "writes are refused: the pool is damaged ({what}); `pmkv salvage` copies every intact record to a new pool"
            ))),
            None => Ok(()),
        }
    }

    /// The pool the HART lives in.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }
    /// k_h, as stored in the pool (options given to a later open do not change it).
    pub fn hash_key_len(&self) -> usize {
        self.kh
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
    /// What the last open's recovery did.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
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
