//! Open, recovery and the clean close's seals (paper §4, recovery).
//!
//! FPTree's recovery is the rebuild of its DRAM inner nodes: the micro-logs are replayed
//! (`micro_log`), then the leaf list is walked from the first leaf and each leaf's
//! smallest key becomes its fence in a new DRAM index (`inner`). That walk reads every
//! valid key of every leaf (the smallest key of an unsorted leaf needs them all, and a
//! key object is a pointer dereference), which is what makes FPTree's recovery linear
//! in the data, the figure the HART paper compares its own recovery with.
//!
//! After a crash a read-write open also sweeps: every used leaf off the list and every
//! used key or value object that no valid entry names is freed (an object published but
//! never committed, or whose entry was deleted or replaced just before the crash). The
//! paper frees the keys that invalid slots name; pmkv sweeps the allocator's used
//! objects instead, which also covers objects whose slot was reused. Empty leaves other
//! than the first (a crash between a delete and its unlink) are unlinked.
//!
//! **Damage.** A clean close writes each written leaf's seal; a clean open verifies every
//! seal and every key object's CRC, so a damaged file is refused instead of read wrong.
//! Value objects carry a CRC checked at every read.

use crate::error::{corrupt, Error, Result};
use crate::inner::{Index, LeafNode};
use crate::layout::*;
use crate::leaf::{bytes, load, Leaf};
use crate::micro_log::{unlink_leaf, MicroLogs};
use crate::tree::FpTree;
use parking_lot::RwLock;
use pmkv_core::RecoveryReport;
use pmkv_substrate::batch_log::{self, BatchLog};
use pmkv_substrate::epalloc::{EpAlloc, EPALLOC_ROOT};
use pmkv_substrate::{EngineClaim, Pool};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Format a new tree: one empty leaf, then the superblock naming it, published last and
/// named by the pool root (one atomic update); a crash before that leaves objects that
/// the next try frees.
fn format(pool: Arc<Pool>, claim: EngineClaim, t0: Instant) -> Result<FpTree> {
    let alloc =
        if pool.root(EPALLOC_ROOT) == 0 { EpAlloc::create(pool.clone())? } else { EpAlloc::open(pool.clone())? };
    for ty in [SUPER, LEAF, KEY, VALUE, batch_log::LOG] {
        let mut stale = Vec::new();
        alloc.for_each_used(ty, |o| stale.push(o));
        for o in stale {
            alloc.try_free(o)?;
        }
    }
    let new_object = |ty, img: &[u8]| -> Result<u64> {
        let off = alloc.alloc(ty, img.len())?;
        // SAFETY: a reserved object of `img.len()` bytes nobody else can reach.
        unsafe { std::ptr::copy_nonoverlapping(img.as_ptr(), pool.at::<u8>(off), img.len()) };
        pool.persist_off(off, img.len());
        alloc.try_publish(off)?;
        Ok(off)
    };
    let head = new_object(LEAF, &[0u8; LEAF_SIZE])?;
    let mut sb = [0u8; SUPER_SIZE];
    sb[..8].copy_from_slice(SUPER_MAGIC);
    sb[SB_VERSION as usize..SB_VERSION as usize + 4].copy_from_slice(&SUPER_VERSION.to_le_bytes());
    sb[SB_CAP as usize..SB_CAP as usize + 4].copy_from_slice(&(CAP as u32).to_le_bytes());
    sb[SB_HEAD as usize..SB_HEAD as usize + 8].copy_from_slice(&head.to_le_bytes());
    let crc = super_crc(&sb);
    sb[SB_CRC as usize..SB_CRC as usize + 4].copy_from_slice(&crc.to_le_bytes());
    let sbo = new_object(SUPER, &sb)?;
    pool.set_root(SUPER_ROOT, sbo);
    let mut rep = RecoveryReport::new("fptree");
    rep.clean_shutdown = true;
    rep.duration = t0.elapsed();
    let index = Index::build(vec![(Box::from(&b""[..]), LeafNode::new(head, true))]);
    Ok(assemble(pool, alloc, sbo, head, index, 0, rep.with_detail("leaves", 1), claim))
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    pool: Arc<Pool>,
    alloc: EpAlloc,
    sb: u64,
    head: u64,
    index: Index,
    count: u64,
    recovery: RecoveryReport,
    claim: EngineClaim,
) -> FpTree {
    FpTree {
        pool,
        alloc,
        sb,
        head,
        index: RwLock::new(index),
        count: AtomicU64::new(count),
        recovery,
        batches: BatchLog::new(),
        closed: false,
        _claim: claim,
    }
}

/// Validate the superblock at `sb`; returns the head leaf.
fn read_super(pool: &Pool, alloc: &EpAlloc, sb: u64) -> Result<u64> {
    if alloc.type_of(sb) != Some(SUPER) || !alloc.is_used(sb) {
        return Err(corrupt(format!("the pool root names {sb:#x}, which is not an FPTree superblock")));
    }
    let img = bytes(pool, sb, SUPER_SIZE)?;
    if &img[..8] != SUPER_MAGIC {
        return Err(corrupt("the superblock's magic is wrong"));
    }
    let crc = u32::from_le_bytes(img[SB_CRC as usize..SB_CRC as usize + 4].try_into().expect("4 bytes"));
    if crc != super_crc(img) {
        return Err(corrupt("the superblock fails its checksum"));
    }
    let version = u32::from_le_bytes(img[SB_VERSION as usize..SB_VERSION as usize + 4].try_into().expect("4 bytes"));
    if version != SUPER_VERSION {
        return Err(Error::Version(format!("FPTree format {version}: this build reads format {SUPER_VERSION} only")));
    }
    let cap = u32::from_le_bytes(img[SB_CAP as usize..SB_CAP as usize + 4].try_into().expect("4 bytes"));
    if cap as usize != CAP {
        return Err(corrupt(format!("the superblock says {cap} entries a leaf, this format has {CAP}")));
    }
    Ok(load(pool, sb + SB_HEAD))
}

/// What the walk found in one leaf.
struct Walked {
    off: u64,
    /// Its smallest key (`None`: empty).
    min: Option<Vec<u8>>,
    live: u64,
}

impl FpTree {
    /// Open the FPTree in `pool`, formatting it if the pool is new. A pool that another
    /// live engine uses is refused (`PoolError::Locked`).
    pub fn open(pool: Arc<Pool>) -> Result<FpTree> {
        Self::open_with(pool, crate::Options::default())
    }

    /// [`FpTree::open`] with options.
    pub fn open_with(pool: Arc<Pool>, _opts: crate::Options) -> Result<FpTree> {
        let t0 = Instant::now();
        let claim = EngineClaim::take(&pool)?;
        let sb = pool.root(SUPER_ROOT);
        if sb == 0 {
            pool.check_writable()?;
            return format(pool, claim, t0);
        }
        let alloc = EpAlloc::open(pool.clone())?;
        let head = read_super(&pool, &alloc, sb)?;
        // Batch logs are validated before recovery writes anything (a damaged one refuses
        // the pool as it found it) and finished once the tree is rebuilt.
        let pending = batch_log::pending(&alloc)?;
        let clean = pool.was_clean();
        let rw = !pool.is_read_only();
        if !pending.is_empty() && !rw {
            return Err(Error::Invalid(
                "the pool holds an interrupted write batch: open it read-write once to finish it".into(),
            ));
        }
        let logs = MicroLogs { pool: &pool, sb };
        let mut rep = RecoveryReport::new("fptree");
        rep.clean_shutdown = clean;
        if !logs.idle() {
            if clean {
                return Err(corrupt("a micro-log is in use in a pool closed cleanly"));
            }
            if !rw {
                return Err(Error::Invalid(
                    "the pool holds an interrupted split or unlink: open it read-write once to recover it".into(),
                ));
            }
            let r = logs.recover(&alloc)?;
            rep.rolled_forward += r.forward;
            rep.rolled_back += r.back;
        }
        let mut used: HashSet<u64> = HashSet::new();
        alloc.for_each_used(LEAF, |o| {
            used.insert(o);
        });
        // The walk: every link a used leaf, each once; keys ascending across leaves.
        let sweep = rw && !clean;
        let mut referenced: HashSet<u64> = HashSet::new();
        let mut walked: Vec<Walked> = Vec::new();
        let mut last_max: Option<Vec<u8>> = None;
        let mut off = head;
        while off != 0 {
            if !used.remove(&off) {
                return Err(corrupt(format!("the leaf list names {off:#x}, which is not a used leaf, or twice")));
            }
            let leaf = Leaf::new(&pool, off);
            pool.note_read_at(off, 64);
            if clean {
                pool.note_read_at(off, LEAF_SIZE);
                let img = leaf.image();
                let seal = u32::from_le_bytes(img[L_SEAL as usize..L_SEAL as usize + 4].try_into().expect("4"));
                if seal != leaf_seal(off, img) {
                    return Err(corrupt(format!("leaf {off:#x} fails its seal (checksum)")));
                }
            }
            let bm = leaf.bitmap();
            if bm & !SLOTS_MASK != 0 {
                return Err(corrupt(format!("leaf {off:#x}: the bitmap {bm:#x} names slots past {CAP}")));
            }
            let (mut min, mut max): (Option<Vec<u8>>, Option<Vec<u8>>) = (None, None);
            let mut m = bm;
            while m != 0 {
                let slot = m.trailing_zeros() as usize;
                m &= m - 1;
                let e = leaf.entry(slot);
                if !meta_is_sane(e.meta) {
                    return Err(corrupt(format!("leaf {off:#x} slot {slot}: meta word {:#x}", e.meta)));
                }
                let k = leaf.key(&e, true)?;
                let k = k.as_slice();
                if min.as_deref().is_none_or(|m| k < m) {
                    min = Some(k.to_vec());
                }
                if max.as_deref().is_none_or(|m| k > m) {
                    max = Some(k.to_vec());
                }
                if sweep {
                    referenced.extend([e.key_obj(), e.value_obj()].into_iter().flatten());
                }
            }
            if let (Some(lm), Some(mn)) = (&last_max, &min) {
                if mn <= lm {
                    return Err(corrupt(format!("leaf {off:#x} holds keys out of order with its predecessor")));
                }
            }
            if max.is_some() {
                last_max = max;
            }
            walked.push(Walked { off, min, live: u64::from(bm.count_ones()) });
            off = leaf.next();
        }
        // Repairs, only once the whole list has been validated: a refused open writes
        // nothing.
        let mut leaves: Vec<(Box<[u8]>, Arc<LeafNode>)> = Vec::with_capacity(walked.len());
        let mut count = 0u64;
        let mut unlinked = 0u64;
        let mut prev = head;
        for (i, w) in walked.into_iter().enumerate() {
            count += w.live;
            let low: Box<[u8]> = match w.min {
                _ if i == 0 => Box::from(&b""[..]),
                Some(m) => m.into_boxed_slice(),
                None => {
                    // An empty leaf other than the first: a crash between a delete and
                    // its unlink. A read-only open leaves it out of the index (the list
                    // still reaches it; nothing is read through it).
                    if rw {
                        unlink_leaf(logs, &alloc, prev, w.off)?;
                        unlinked += 1;
                    }
                    continue;
                }
            };
            leaves.push((low, LeafNode::new(w.off, !clean)));
            prev = w.off;
        }
        let mut orphans = 0u64;
        if sweep {
            let sb_keep = sb;
            for o in used {
                alloc.try_free(o)?;
                orphans += 1;
            }
            for ty in [SUPER, KEY, VALUE] {
                let mut stale = Vec::new();
                alloc.for_each_used(ty, |o| {
                    if !(o == sb_keep || referenced.contains(&o)) {
                        stale.push(o);
                    }
                });
                for o in stale {
                    alloc.try_free(o)?;
                    orphans += 1;
                }
            }
        }
        rep.orphans_freed = orphans;
        rep.rolled_forward += unlinked;
        rep.records = count;
        let n = leaves.len();
        let index = Index::build(leaves);
        rep.duration = t0.elapsed();
        let rep = rep.with_detail("leaves", n).with_detail("empty_leaves_unlinked", unlinked);
        let mut t = assemble(pool, alloc, sb, head, index, count, rep, claim);
        let finished = t.finish_batches(pending)?;
        t.recovery = std::mem::take(&mut t.recovery).with_detail("batches_finished", finished);
        if finished > 0 {
            t.recovery.rolled_forward += finished;
            t.recovery.records = t.len();
            t.recovery.duration = t0.elapsed();
        }
        Ok(t)
    }

    /// Write the seal of every leaf written since its last seal, so that the next clean
    /// open can verify the leaves. Run with no other thread in the tree.
    pub(crate) fn seal(&self) {
        if self.pool.is_read_only() {
            return;
        }
        let idx = self.index.write();
        for (_, node) in idx.iter() {
            if !node.dirty.swap(false, Ordering::AcqRel) {
                continue;
            }
            let seal = leaf_seal(node.off, Leaf::new(&self.pool, node.off).image());
            // SAFETY: the leaf's seal word, written by nobody else (the index is
            // write-locked).
            unsafe { self.pool.store_u32(node.off + L_SEAL, seal) };
            self.pool.flush_off(node.off + L_SEAL, 4);
        }
        self.pool.fence();
    }
}
