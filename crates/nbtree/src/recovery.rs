//! Open, recovery and close (§3.2 "Crash Consistency", SPEC N6).
//!
//! Only the key-value layer is in PM. Every open walks the block list from the sentinel,
//! then decodes the blocks on every core: each slot with a non-zero key is a live entry;
//! from them it rebuilds each leaf's metadata (bitmap, fingerprints, `num`), then the
//! inner nodes bottom-up. After a crash (or a close that left retired objects unfreed)
//! a read-write open also repairs what an interrupted operation left (a frozen bit, a
//! delete that set [`DEL`] but had not zeroed the key, two copies of one key left by
//! racing inserts), and sweeps: every used block, key and value object that no live entry
//! of a reachable block names is freed. That is what makes the allocation leak-proof
//! without logs (SPEC P7): an SMO's unlinked copy, a replaced block, an object whose
//! entry never committed.
//!
//! **Damage.** A clean close writes each written block's seal (CRC-32C); a clean open
//! verifies every seal, and key objects' CRCs, so a damaged file is refused instead of
//! read wrong. Value objects carry a CRC checked at every read.

use crate::claim::PoolClaim;
use crate::error::{NbError, Result};
use crate::inner;
use crate::layout::*;
use crate::leaf::{self, load, Leaf};
use crate::reclaim::Reclaimer;
use crate::tree::{NbTree, RecoveryReport, Striped};
use parking_lot::Mutex;
use pmkv_substrate::epalloc::{EpAlloc, EPALLOC_ROOT};
use pmkv_substrate::Pool;
use std::collections::HashSet;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn corrupt(what: impl Into<String>) -> NbError {
    NbError::Corrupt(what.into())
}

/// Zero-filled block or superblock written, persisted and published.
fn new_zeroed(pool: &Pool, alloc: &EpAlloc, ty: pmkv_substrate::epalloc::TypeId, img: &[u8]) -> Result<u64> {
    let off = alloc.alloc(ty, img.len())?;
    // SAFETY: a reserved object nobody else can reach.
    unsafe { std::ptr::copy_nonoverlapping(img.as_ptr(), pool.at::<u8>(off), img.len()) };
    pool.persist_off(off, img.len());
    alloc.try_publish(off)?;
    Ok(off)
}

/// Format a new tree: one empty leaf after the sentinel. The superblock is published
/// last and named by the atomic root update; a crash before that leaves objects no root
/// names, freed on the next try.
fn format(pool: Arc<Pool>, claim: PoolClaim, t0: Instant) -> Result<NbTree> {
    let alloc =
        if pool.root(EPALLOC_ROOT) == 0 { EpAlloc::create(pool.clone())? } else { EpAlloc::open(pool.clone())? };
    for ty in [SUPER, BLOCK, KEY, VALUE] {
        let mut stale = Vec::new();
        alloc.for_each_used(ty, |o| stale.push(o));
        for o in stale {
            alloc.try_free(o)?;
        }
    }
    let first = new_zeroed(&pool, &alloc, BLOCK, &[0u8; BLOCK_SIZE])?;
    let mut img = [0u8; BLOCK_SIZE];
    img[..8].copy_from_slice(&first.to_le_bytes());
    let head = new_zeroed(&pool, &alloc, BLOCK, &img)?;
    let mut sb = [0u8; SUPER_SIZE];
    sb[..8].copy_from_slice(SUPER_MAGIC);
    sb[8..12].copy_from_slice(&SUPER_VERSION.to_le_bytes());
    sb[12..16].copy_from_slice(&(CAP as u32).to_le_bytes());
    sb[16..24].copy_from_slice(&head.to_le_bytes());
    let crc = super_crc(&sb);
    sb[24..28].copy_from_slice(&crc.to_le_bytes());
    let sbo = new_zeroed(&pool, &alloc, SUPER, &sb)?;
    pool.set_root(SUPER_ROOT, sbo);
    let first_leaf = Box::into_raw(Box::new(Leaf::new(first, Arc::from(&b""[..]))));
    let sentinel = Leaf::new(head, Arc::from(&b""[..]));
    sentinel.next.store(first_leaf, Ordering::Relaxed);
    let root = inner::build(&[(Arc::from(&b""[..]), first_leaf as *const Leaf)]);
    let rep = RecoveryReport {
        clean: true,
        leaves: 1,
        threads: 1,
        micros: t0.elapsed().as_micros() as u64,
        ..Default::default()
    };
    Ok(assemble(pool, alloc, sbo, sentinel, root, 0, rep, claim))
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    pool: Arc<Pool>,
    alloc: EpAlloc,
    sb: u64,
    sentinel: Leaf,
    root: *mut inner::INode,
    count: i64,
    recovery: RecoveryReport,
    claim: PoolClaim,
) -> NbTree {
    NbTree {
        pool,
        alloc,
        sb,
        head: Box::into_raw(Box::new(sentinel)),
        root: AtomicPtr::new(root),
        inner_lock: Mutex::new(()),
        reclaim: Reclaimer::default(),
        count: Striped::new(count),
        recovery,
        closed: false,
        _claim: claim,
    }
}

/// Validate the superblock; returns the head block.
fn read_super(pool: &Pool, alloc: &EpAlloc, sb: u64) -> Result<u64> {
    if !sb.is_multiple_of(8)
        || !pool.contains(sb, SUPER_SIZE as u64)
        || alloc.type_of(sb) != Some(SUPER)
        || !alloc.is_used(sb)
    {
        return Err(corrupt("the superblock offset does not name a used superblock object"));
    }
    // SAFETY: inside the pool (checked); nothing writes it while the tree opens.
    let b = unsafe { std::slice::from_raw_parts(pool.at::<u8>(sb), SUPER_SIZE) };
    if &b[..8] != SUPER_MAGIC {
        return Err(corrupt("bad superblock magic"));
    }
    let field = |at: u64, n: usize| &b[at as usize..at as usize + n];
    let version = u32::from_le_bytes(field(SB_VERSION, 4).try_into().expect("4 bytes"));
    if version != SUPER_VERSION {
        return Err(NbError::Version(format!(
            "NBTree format version {version} is not supported (this build reads {SUPER_VERSION})"
        )));
    }
    if u32::from_le_bytes(field(SB_CRC, 4).try_into().expect("4 bytes")) != super_crc(b) {
        return Err(corrupt("the superblock fails its checksum"));
    }
    if u32::from_le_bytes(field(SB_CAP, 4).try_into().expect("4 bytes")) != CAP as u32 {
        return Err(corrupt("the superblock's leaf capacity is not this build's"));
    }
    Ok(u64::from_le_bytes(field(SB_HEAD, 8).try_into().expect("8 bytes")))
}

/// What decoding one block found.
#[derive(Default)]
struct Decoded {
    /// (slot, fingerprint) of each live entry kept.
    live: Vec<(usize, u8)>,
    /// Highest slot with a non-zero key, plus one.
    num: usize,
    min: Option<Vec<u8>>,
    max: Option<Vec<u8>>,
    /// PM words to rewrite (offset, value): repairs after a crash.
    fixes: Vec<(u64, u64)>,
    /// Objects the kept entries name.
    objects: Vec<u64>,
}

/// Decode the entries of `block`.
fn decode(pool: &Pool, block: u64, verify: bool) -> Result<Decoded> {
    let mut d = Decoded::default();
    // (key, slot, key word, payload) of each entry with a key.
    let mut keys: Vec<(Vec<u8>, usize, u64, u64)> = Vec::new();
    for slot in 0..CAP {
        let ko = entry_off(block, slot);
        let kw = load(pool, ko);
        if kw == 0 {
            continue;
        }
        d.num = slot + 1;
        let mut p = load(pool, ko + E_PAYLOAD);
        if p & DEL != 0 {
            d.fixes.push((ko, 0)); // finish the delete
            continue;
        }
        if p & FROZEN != 0 {
            p &= !FROZEN;
            d.fixes.push((ko + E_PAYLOAD, p)); // an SMO that never linked
        }
        // SAFETY: recovery runs alone; objects stay allocated.
        let k = unsafe { leaf::entry_key(pool, kw, p, verify) }
            .ok_or_else(|| corrupt(format!("block {block:#x} slot {slot}: the key is damaged")))?;
        if p & VAL_PTR != 0 {
            let v = p & DATA_MASK;
            if !v.is_multiple_of(8) || !pool.contains(v, OBJ_HEAD as u64) {
                return Err(corrupt(format!("block {block:#x} slot {slot}: bad value offset {v:#x}")));
            }
        }
        keys.push((k.as_slice().to_vec(), slot, kw, p));
    }
    // Two entries of one key: inserts that raced, cut short by the crash. Either was in
    // flight, so keeping either is a state the operations allow: keep the first slot.
    // The other's objects are named by no kept entry, so the sweep frees them.
    keys.sort();
    let mut kept: Vec<(Vec<u8>, usize)> = Vec::with_capacity(keys.len());
    for (k, slot, kw, p) in keys {
        if kept.last().is_some_and(|l| l.0 == k) {
            d.fixes.push((entry_off(block, slot), 0));
            continue;
        }
        if p & VAL_PTR != 0 {
            d.objects.push(p & DATA_MASK);
        }
        if (p & KIND_MASK) >> KIND_SHIFT == KIND_OBJ {
            d.objects.push(kw);
        }
        kept.push((k, slot));
    }
    d.min = kept.first().map(|x| x.0.clone());
    d.max = kept.last().map(|x| x.0.clone());
    d.live = kept.iter().map(|(k, s)| (*s, fingerprint(k))).collect();
    Ok(d)
}

/// Run `f` over `items` on every core, keeping order.
fn parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> (Vec<R>, usize) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len().div_ceil(256)).max(1);
    if threads == 1 {
        return (items.iter().map(&f).collect(), 1);
    }
    let chunk = items.len().div_ceil(threads);
    let out = std::thread::scope(|s| {
        let hs: Vec<_> = items.chunks(chunk).map(|c| s.spawn(|| c.iter().map(&f).collect::<Vec<R>>())).collect();
        hs.into_iter().flat_map(|h| h.join().expect("recovery worker panicked")).collect()
    });
    (out, threads)
}

/// Open the tree in `pool`, formatting it if the pool is new.
pub(crate) fn open(pool: Arc<Pool>) -> Result<NbTree> {
    let t0 = Instant::now();
    let claim = PoolClaim::take(&pool)?;
    let sb = pool.root(SUPER_ROOT);
    if sb == 0 {
        pool.check_writable()?;
        return format(pool, claim, t0);
    }
    let alloc = EpAlloc::open(pool.clone())?;
    let head = read_super(&pool, &alloc, sb)?;
    let clean = pool.was_clean();
    let rw = !pool.is_read_only();
    let sweep = !clean || load(&pool, sb + SB_SWEEP) != 0;
    let mut used_blocks = 0u64;
    alloc.for_each_used(BLOCK, |_| used_blocks += 1);
    // The PM list, validated: every link a used block, no cycle.
    let mut blocks = Vec::new();
    let mut off = head;
    while off != 0 {
        if !off.is_multiple_of(64) || alloc.type_of(off) != Some(BLOCK) || !alloc.is_used(off) {
            return Err(corrupt(format!("the block list names {off:#x}, which is not a used block")));
        }
        blocks.push(off);
        if blocks.len() as u64 > used_blocks {
            return Err(corrupt("the block list has a cycle"));
        }
        pool.prefetch(load(&pool, off + BLK_NEXT));
        off = load(&pool, off + BLK_NEXT);
    }
    if blocks.len() < 2 {
        return Err(corrupt("the block list has no leaf after the sentinel"));
    }
    let verify = clean;
    let (decoded, threads) = parallel(&blocks, |&b| -> Result<Decoded> {
        if verify {
            // SAFETY: a used block inside the pool; nothing writes it while the tree opens.
            let img = unsafe { std::slice::from_raw_parts(pool.at::<u8>(b), BLOCK_SIZE) };
            let seal = u32::from_le_bytes(img[BLK_SEAL as usize..BLK_SEAL as usize + 4].try_into().expect("4"));
            if seal != block_seal(img) {
                return Err(corrupt(format!("block {b:#x} fails its seal (checksum)")));
            }
        }
        decode(&pool, b, verify)
    });
    let decoded: Vec<Decoded> = decoded.into_iter().collect::<Result<_>>()?;
    if !decoded[0].live.is_empty() {
        return Err(corrupt("the sentinel block holds entries"));
    }
    // Repairs, then the sweep (read-write opens after a crash or an unswept close).
    let mut rep = RecoveryReport { clean, leaves: blocks.len() as u64 - 1, threads, ..Default::default() };
    let fixes: usize = decoded.iter().map(|d| d.fixes.len()).sum();
    if fixes > 0 && !rw {
        return Err(corrupt("entries need repair, which a read-only open cannot do"));
    }
    if rw {
        for (d, &b) in decoded.iter().zip(&blocks) {
            for &(o, v) in &d.fixes {
                // SAFETY: recovery runs alone; an entry word of a used block.
                unsafe { pool.store_u64(o, v) };
                pool.flush_off(o, 8);
            }
            if !d.fixes.is_empty() {
                pool.fence();
                rep.repaired += d.fixes.len() as u64;
                let _ = b;
            }
        }
        if sweep {
            let mut keep: HashSet<u64> = blocks.iter().copied().collect();
            keep.insert(sb);
            for d in &decoded {
                keep.extend(d.objects.iter().copied());
            }
            for ty in [SUPER, BLOCK, KEY, VALUE] {
                let mut orphans = Vec::new();
                alloc.for_each_used(ty, |o| {
                    if !keep.contains(&o) {
                        orphans.push(o)
                    }
                });
                for o in orphans {
                    alloc.try_free(o)?;
                    rep.orphans_freed += 1;
                }
            }
            // SAFETY: recovery runs alone; the superblock's sweep word.
            unsafe { pool.store_u64(sb + SB_SWEEP, 0) };
            pool.persist_off(sb + SB_SWEEP, 8);
        }
    }
    // Keys in order across leaves.
    let mut last_max: Option<&Vec<u8>> = None;
    for (d, &b) in decoded.iter().zip(&blocks).skip(1) {
        if let (Some(m), Some(min)) = (last_max, &d.min) {
            if min <= m {
                return Err(corrupt(format!("block {b:#x} holds keys out of order with its predecessor")));
            }
        }
        if d.max.is_some() {
            last_max = d.max.as_ref();
        }
    }
    // The metadata layer and the inner nodes.
    let sentinel = Leaf::new(head, Arc::from(&b""[..]));
    sentinel.dirty.store(!clean, Ordering::Relaxed);
    let mut index: Vec<(Arc<[u8]>, *const Leaf)> = Vec::with_capacity(blocks.len());
    let mut prev: *const Leaf = &sentinel;
    let mut prev_low: Arc<[u8]> = Arc::from(&b""[..]);
    let mut count = 0i64;
    for (i, (d, &b)) in decoded.iter().zip(&blocks).enumerate().skip(1) {
        let indexed = i == 1 || d.min.is_some();
        let low: Arc<[u8]> = if i == 1 {
            Arc::from(&b""[..])
        } else {
            match &d.min {
                Some(m) => Arc::from(&m[..]),
                None => prev_low.clone(), // an empty leaf: reached only through the list
            }
        };
        let l = Leaf::new(b, low.clone());
        l.dirty.store(!clean, Ordering::Relaxed);
        let mut bm = 0u64;
        for &(slot, fp) in &d.live {
            l.fps[slot].store(fp, Ordering::Relaxed);
            bm |= 1 << slot;
        }
        l.bitmap.store(bm, Ordering::Relaxed);
        // Slots up to the last non-zero key stay used (their keys may be zeroed only now).
        l.num.store(d.num as u32, Ordering::Relaxed);
        count += d.live.len() as i64;
        let l = Box::into_raw(Box::new(l));
        // SAFETY: `prev` is the sentinel or a leaf built just before, owned here.
        unsafe { &*prev }.next.store(l, Ordering::Relaxed);
        prev = l;
        if indexed {
            index.push((low.clone(), l));
        }
        prev_low = low;
    }
    rep.records = count as u64;
    let root = inner::build(&index);
    rep.micros = t0.elapsed().as_micros() as u64;
    Ok(assemble(pool, alloc, sb, sentinel, root, count, rep, claim))
}

impl NbTree {
    /// Seal written blocks and note unfreed retired objects, so that the next open can
    /// verify the blocks and knows whether to sweep. Run with no other thread in the tree.
    pub(crate) fn seal(&self) {
        if self.pool.is_read_only() {
            return;
        }
        for _ in 0..8 {
            crossbeam_epoch::pin().flush();
            self.collect();
            if self.reclaim.pending() == 0 {
                break;
            }
        }
        let mut leaves = vec![self.head];
        leaves.extend(self.leaves_quiesced());
        for l in leaves {
            // SAFETY: leaves of the live list, alive while the tree is.
            let l = unsafe { &*l };
            if !l.dirty.swap(false, Ordering::AcqRel) {
                continue;
            }
            // SAFETY: a used block inside the pool; no other thread writes it now.
            let img = unsafe { std::slice::from_raw_parts(self.pool.at::<u8>(l.block), BLOCK_SIZE) };
            let seal = block_seal(img);
            // SAFETY: the block's seal word, written by nobody else.
            unsafe { self.pool.store_u32(l.block + BLK_SEAL, seal) };
            self.pool.flush_off(l.block + BLK_SEAL, 4);
        }
        if self.reclaim.pending() > 0 {
            // SAFETY: the superblock's sweep word, written only at open and close.
            unsafe { self.pool.store_u64(self.sb + SB_SWEEP, 1) };
            self.pool.flush_off(self.sb + SB_SWEEP, 8);
        }
        self.pool.fence();
    }
}
