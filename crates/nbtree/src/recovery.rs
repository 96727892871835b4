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
//! verifies every seal, and every open every key object's CRC, so a damaged file is
//! refused instead of read wrong. Value objects carry a CRC checked at every read.

use crate::error::{Error, Result};
use crate::inner::{self, NodeArena};
use crate::layout::*;
use crate::leaf::{self, load, Fmt, Leaf, LeafArena};
use crate::reclaim::Reclaimer;
use crate::tree::{NbTree, Options, Striped};
use parking_lot::Mutex;
use pmkv_core::RecoveryReport;
use pmkv_substrate::epalloc::{EpAlloc, EPALLOC_ROOT};
use pmkv_substrate::EngineClaim as PoolClaim;
use pmkv_substrate::Pool;
use std::collections::HashSet;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn corrupt(what: impl Into<String>) -> Error {
    Error::Corrupt(what.into())
}

/// Zero-filled block or superblock written, persisted and published; a block's `next`
/// word is set to name `next` once its own offset is known (`None`: not a block).
fn new_zeroed(
    pool: &Pool,
    alloc: &EpAlloc,
    ty: pmkv_substrate::epalloc::TypeId,
    img: &mut [u8],
    next: Option<u64>,
) -> Result<u64> {
    let off = alloc.alloc(ty, img.len())?;
    if let Some(n) = next {
        img[..8].copy_from_slice(&next_word(n, off, true).to_le_bytes());
        img[BLK_TRAILER as usize..].copy_from_slice(&trailer_word(off).to_le_bytes());
    }
    // SAFETY: a reserved object nobody else can reach.
    unsafe { std::ptr::copy_nonoverlapping(img.as_ptr(), pool.at::<u8>(off), img.len()) };
    pool.persist_off(off, img.len());
    alloc.try_publish(off)?;
    Ok(off)
}

/// Format a new tree: one empty leaf after the sentinel. The superblock is published
/// last and named by the atomic root update; a crash before that leaves objects no root
/// names, freed on the next try.
fn format(pool: Arc<Pool>, claim: PoolClaim, t0: Instant, sl: bool) -> Result<NbTree> {
    let alloc =
        if pool.root(EPALLOC_ROOT) == 0 { EpAlloc::create(pool.clone())? } else { EpAlloc::open(pool.clone())? };
    for ty in [SUPER, BLOCK, KEY, VALUE] {
        let mut stale = Vec::new();
        alloc.for_each_used(ty, |o| stale.push(o));
        for o in stale {
            alloc.try_free(o)?;
        }
    }
    // The first leaf: empty; a single-layer one starts taking slots after its metadata.
    let mut first_leaf = Leaf::new(0, Arc::from(&b""[..]));
    // New pools are the newest format: `next` words with checks, empty slots marked.
    let fmt = Fmt::of(SUPER_VERSION);
    let empty_block = |first: usize| {
        let mut words = [0u64; BLOCK_SIZE / 8];
        fmt.mark_empty(&mut words, first);
        let mut img = [0u8; BLOCK_SIZE];
        for (b, w) in img.chunks_exact_mut(8).zip(words) {
            b.copy_from_slice(&w.to_ne_bytes());
        }
        img
    };
    let mut img = empty_block(if sl { SL_FIRST } else { 0 });
    if sl {
        first_leaf.init_meta(&[0; CAP], SL_FIRST, 0);
        for (o, v) in first_leaf.meta_words() {
            img[o as usize..o as usize + 8].copy_from_slice(&v.to_le_bytes());
        }
    }
    let first = new_zeroed(&pool, &alloc, BLOCK, &mut img, Some(0))?;
    first_leaf.block = first;
    first_leaf.sl = sl;
    let mut img = empty_block(0);
    let head = new_zeroed(&pool, &alloc, BLOCK, &mut img, Some(first))?;
    let mut sb = [0u8; SUPER_SIZE];
    sb[..8].copy_from_slice(SUPER_MAGIC);
    sb[8..12].copy_from_slice(&(SUPER_VERSION | BATCH_LOGS).to_le_bytes());
    let cap = fmt.cap();
    sb[12..16].copy_from_slice(&(if sl { cap - SL_FIRST } else { cap } as u32).to_le_bytes());
    sb[16..24].copy_from_slice(&head.to_le_bytes());
    let crc = super_crc(&sb);
    sb[24..28].copy_from_slice(&crc.to_le_bytes());
    let sbo = new_zeroed(&pool, &alloc, SUPER, &mut sb, None)?;
    pool.set_root(SUPER_ROOT, sbo);
    let arena = Arc::new(LeafArena::new());
    let first_leaf = arena.alloc(first_leaf);
    let sentinel = Leaf::new(head, Arc::from(&b""[..]));
    sentinel.next.store(first_leaf, Ordering::Relaxed);
    let nodes = Arc::new(NodeArena::new());
    // SAFETY: `first_leaf` was just made and is alive.
    let root = unsafe { inner::build(vec![(inner::Sep::of(b""), first_leaf as *const Leaf)], &nodes) };
    let mut rep = RecoveryReport::new("nbtree");
    rep.clean_shutdown = true;
    rep.duration = Duration::from_micros(t0.elapsed().as_micros() as u64);
    let rep = with_figures(rep, 1, 1, [0; 4]);
    let t = assemble(pool, alloc, sbo, sentinel, root, 0, rep, claim, (sl, fmt), (arena, nodes));
    t.batch_logs.store(true, Ordering::Relaxed);
    Ok(t)
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
    (sl, fmt): (bool, Fmt),
    (arena, nodes): (Arc<LeafArena>, Arc<NodeArena>),
) -> NbTree {
    NbTree {
        pool,
        alloc,
        sb,
        head: arena.alloc(sentinel),
        root: AtomicPtr::new(root),
        inner_lock: Mutex::new(()),
        reclaim: Reclaimer::default(),
        count: Striped::new(count),
        recovery,
        closed: false,
        write_locks: false,
        sl,
        fmt,
        arena,
        nodes,
        batches: Default::default(),
        batch_logs: std::sync::atomic::AtomicBool::new(false),
        _claim: claim,
    }
}

/// Validate the superblock; returns the head block, whether leaves are single-layer and
/// what the format has.
fn read_super(pool: &Pool, alloc: &EpAlloc, sb: u64) -> Result<(u64, bool, Fmt, bool)> {
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
    let word = u32::from_le_bytes(field(SB_VERSION, 4).try_into().expect("4 bytes"));
    let (version, batch_logs) = (word & !BATCH_LOGS, word & BATCH_LOGS != 0);
    if !(SUPER_VERSION_MIN..=SUPER_VERSION).contains(&version) {
        return Err(Error::Version(format!(
            "NBTree format version {word:#x} is not supported (this build reads {SUPER_VERSION_MIN} to {SUPER_VERSION}, \
             with or without the batch-log flag {BATCH_LOGS:#x})"
        )));
    }
    if u32::from_le_bytes(field(SB_CRC, 4).try_into().expect("4 bytes")) != super_crc(b) {
        return Err(corrupt("the superblock fails its checksum"));
    }
    let fmt = Fmt::of(version);
    let sl = match u32::from_le_bytes(field(SB_CAP, 4).try_into().expect("4 bytes")) as usize {
        c if c == fmt.cap() => false,
        c if c == fmt.cap() - SL_FIRST => true,
        _ => return Err(corrupt("the superblock's leaf capacity is not this build's")),
    };
    Ok((u64::from_le_bytes(field(SB_HEAD, 8).try_into().expect("8 bytes")), sl, fmt, batch_logs))
}

/// What decoding one block found: plain data, no heap allocation in the common case (a
/// clean open decodes ~100,000 blocks per 4M records; a `Box`ed leaf and two `Arc` keys per
/// block, allocated by a worker and freed by the main thread, once cost a third of the
/// open). The leaf itself is built from it once the list order is known.
struct Decoded<'p> {
    /// The block's `next` word (the PM list).
    next: u64,
    /// Fingerprints, `num` (highest slot with a non-zero key, plus one) and bitmap of the
    /// leaf's metadata.
    fps: [u8; CAP],
    num: u32,
    bitmap: u64,
    /// Live entries kept.
    live: u32,
    /// Smallest and largest key kept (keys longer than 8 bytes borrow the pool's key object).
    min: Option<RKey<'p>>,
    max: Option<RKey<'p>>,
    /// PM words to rewrite (offset, value): repairs after a crash.
    fixes: Vec<(u64, u64)>,
    /// Objects the kept entries name.
    objects: Vec<u64>,
}

/// A key as recovery compares it: keys of up to 16 bytes held in the entry by their
/// zero-padded first and second words and length (for such keys that order is byte
/// order: equal padded words make the shorter key a prefix of the longer), keys in
/// objects of more than 8 bytes by their bytes. A small `Copy` struct: recovery compares
/// every key once or more, and moving enums of slices around cost more than the
/// comparisons.
#[derive(Clone, Copy)]
struct RKey<'a> {
    prefix: u64,
    /// Bytes 8..16, zero-padded, of a key held in the entry (0 otherwise).
    second: u64,
    len: u32,
    /// The bytes of a key in an object longer than 8 bytes (empty otherwise).
    long: &'a [u8],
}

impl<'a> RKey<'a> {
    #[inline]
    fn of(k: &leaf::KeyBytes<'a>) -> RKey<'a> {
        let s = k.as_slice();
        let second = if s.len() > 8 { inner::prefix(&s[8..]) } else { 0 };
        let long = match k {
            leaf::KeyBytes::Obj(o) if o.len() > 8 => *o,
            _ => &[],
        };
        RKey { prefix: inner::prefix(s), second, len: s.len() as u32, long }
    }

    #[inline]
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        if self.long.is_empty() {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&self.prefix.to_be_bytes());
            b[8..].copy_from_slice(&self.second.to_be_bytes());
            f(&b[..self.len as usize])
        } else {
            f(self.long)
        }
    }

    #[inline]
    fn cmp(&self, o: &RKey<'_>) -> std::cmp::Ordering {
        if self.prefix != o.prefix {
            return self.prefix.cmp(&o.prefix);
        }
        if self.long.is_empty() && o.long.is_empty() {
            return (self.second, self.len).cmp(&(o.second, o.len));
        }
        self.with_bytes(|a| o.with_bytes(|b| a.cmp(b)))
    }
}

/// An entry with a key, as decoding collects them: (key, slot, key word, payload,
/// fingerprint).
type Found<'p> = (RKey<'p>, usize, u64, u64, u8);

/// Decode the entries of `block`; `keys` is the worker's scratch (reused across blocks).
fn decode<'p>(
    pool: &'p Pool,
    block: u64,
    first_slot: usize,
    dedup: bool,
    fmt: Fmt,
    keys: &mut Vec<Found<'p>>,
) -> Result<Decoded<'p>> {
    let checks = fmt.checks;
    keys.clear();
    let mut d = Decoded {
        next: 0,
        fps: [0; CAP],
        num: first_slot as u32,
        bitmap: 0,
        live: 0,
        min: None,
        max: None,
        fixes: Vec::new(),
        objects: Vec::new(),
    };
    // The block's words, read as plain memory: recovery runs alone (no thread writes the
    // block meanwhile), and per-word checked atomic loads cost more than the reads.
    assert!(pool.contains(block, BLOCK_SIZE as u64) && block.is_multiple_of(8), "a used block lies in the pool");
    // SAFETY: inside the mapped pool (checked) and 8-aligned; nothing writes it meanwhile.
    let words = unsafe { std::slice::from_raw_parts(pool.at::<u64>(block), BLOCK_SIZE / 8) };
    let next = words[(BLK_NEXT / 8) as usize];
    d.next = next_of(next, block, checks)
        .ok_or_else(|| corrupt(format!("block {block:#x}: the next word {next:#x} fails its check")))?;
    let entry_words = (ENTRY / 8) as usize;
    let first = (BLK_ENTRIES / 8) as usize;
    if checks && words[(BLK_TRAILER / 8) as usize] != trailer_word(block) {
        return Err(corrupt(format!("block {block:#x}: the trailer word fails its check")));
    }
    for slot in first_slot..if checks { CAP_CHECKED } else { CAP } {
        let ko = entry_off(block, slot);
        let kw = words[first + slot * entry_words];
        if kw == fmt.empty {
            continue;
        }
        // Format 4 marks empty slots, so a zero key word is a record whose key was lost
        // (docs/design/integrity.md, "Empty slots"): refused, not read as empty.
        if kw == 0 {
            return Err(corrupt(format!(
                "block {block:#x} slot {slot}: the key word is zero (a record's key is lost)"
            )));
        }
        d.num = slot as u32 + 1;
        let mut p = words[first + slot * entry_words + (E_PAYLOAD / 8) as usize];
        // Every entry's check, at every open: after a crash the seals are stale, and this
        // is what still vouches for the entries (docs/design/integrity.md). An in-place
        // update the crash cut short verifies in one of its two value words; the payload
        // is rewritten at rest, naming that one.
        if checks {
            let e = first + slot * entry_words;
            let (wa, w4) = (words[e + (E_VALUE / 8) as usize], words[e + (E_KEY2 / 8) as usize]);
            let Some((rest, _)) = verified(kw, p, wa, w4) else {
                return Err(corrupt(format!("block {block:#x} slot {slot}: the entry fails its check")));
            };
            if p & DEL == 0 && rest & !FROZEN != p {
                p = rest & !FROZEN;
                d.fixes.push((ko + E_PAYLOAD, p)); // an update cut short, or an SMO that never linked
            }
        }
        if p & DEL != 0 {
            d.fixes.push((ko, fmt.empty)); // finish the delete
            continue;
        }
        if p & FROZEN != 0 {
            p &= !FROZEN;
            d.fixes.push((ko + E_PAYLOAD, p)); // an SMO that never linked
        }
        if p & VAL_PTR != 0 {
            let v = val_off(p, checks);
            if !v.is_multiple_of(8) || !pool.contains(v, OBJ_HEAD as u64) {
                return Err(corrupt(format!("block {block:#x} slot {slot}: bad value offset {v:#x}")));
            }
        }
        if (p & KIND_MASK) >> KIND_SHIFT == KIND_INLINE8 {
            // The paper's 8-byte keys: the word is the key.
            let k = RKey { prefix: kw, second: 0, len: 8, long: &[] };
            keys.push((k, slot, kw, p, k.with_bytes(fingerprint)));
            continue;
        }
        if (p & KIND_MASK) >> KIND_SHIFT == KIND_PAIR {
            let kw2 = words[first + slot * entry_words + (E_KEY2 / 8) as usize];
            let Some((_, len)) = inline_key(kw, kw2, p) else {
                return Err(corrupt(format!("block {block:#x} slot {slot}: the key is damaged")));
            };
            let k = RKey { prefix: kw, second: kw2, len: len as u32, long: &[] };
            keys.push((k, slot, kw, p, k.with_bytes(fingerprint)));
            continue;
        }
        // Key objects are immutable, so their CRCs hold after a crash too: always checked
        // (scans hand key bytes out without checking them again).
        // SAFETY: recovery runs alone; objects stay allocated.
        let k = unsafe { leaf::entry_key(pool, ko, kw, p, true) }
            .ok_or_else(|| corrupt(format!("block {block:#x} slot {slot}: the key is damaged")))?;
        let k = RKey::of(&k);
        keys.push((k, slot, kw, p, k.with_bytes(fingerprint)));
    }
    // Two entries of one key: inserts that raced, cut short by the crash. Either was in
    // flight, so keeping either is a state the operations allow: keep the first slot.
    // The other's objects are named by no kept entry, so the sweep frees them. Only a
    // crash leaves duplicates, so only then are they looked for. Two copies of one key
    // have one fingerprint, so a key is compared only with the earlier keys of its
    // fingerprint (a 256-bit set says whether there are any): a handful of comparisons
    // per block, where sorting every block's keys cost as much as the rest of its
    // decoding. Keys are collected in slot order, so the first slot stays.
    if dedup {
        let mut present = [0u64; 4];
        let mut kept = 0;
        for r in 0..keys.len() {
            let (k, slot, _, _, fp) = keys[r];
            let (word, bit) = ((fp >> 6) as usize, 1u64 << (fp & 63));
            if present[word] & bit != 0 && keys[..kept].iter().any(|o| o.4 == fp && o.0.cmp(&k).is_eq()) {
                d.fixes.push((entry_off(block, slot), fmt.empty));
                continue;
            }
            present[word] |= bit;
            keys[kept] = keys[r];
            kept += 1;
        }
        keys.truncate(kept);
    }
    for (k, slot, kw, p, fp) in keys.iter() {
        if p & VAL_PTR != 0 {
            d.objects.push(val_off(*p, checks));
        }
        if (p & KIND_MASK) >> KIND_SHIFT == KIND_OBJ {
            d.objects.push(*kw);
        }
        if d.min.is_none_or(|m| k.cmp(&m).is_lt()) {
            d.min = Some(*k);
        }
        if d.max.is_none_or(|m| k.cmp(&m).is_gt()) {
            d.max = Some(*k);
        }
        d.fps[*slot] = *fp;
        d.bitmap |= 1 << slot;
    }
    // Slots up to the last non-zero key stay used (their keys may be zeroed only now).
    d.live = keys.len() as u32;
    Ok(d)
}

/// Run `f` over `items` on every core, keeping order; each thread gets its own scratch
/// state from `init`. The results are written in place into one buffer advised to be huge
/// pages: collecting per-thread vectors and concatenating them faulted and zeroed tens of
/// megabytes in 4 KiB pages, which took 40% of the workers' time at 4M records.
fn parallel<T: Sync, S, R: Send>(
    items: &[T],
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> (Vec<R>, usize) {
    // Threads only when there is work enough to pay for starting them.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len() / 64).max(1);
    let mut out: Vec<R> = Vec::with_capacity(items.len());
    let spare = &mut out.spare_capacity_mut()[..items.len()];
    pmkv_substrate::huge::advise(spare);
    let run = |c: &[T], o: &mut [std::mem::MaybeUninit<R>]| {
        let mut st = init();
        for (x, slot) in c.iter().zip(o) {
            slot.write(f(&mut st, x));
        }
    };
    if threads == 1 {
        run(items, spare);
    } else {
        let chunk = items.len().div_ceil(threads);
        std::thread::scope(|s| {
            let hs: Vec<_> =
                items.chunks(chunk).zip(spare.chunks_mut(chunk)).map(|(c, o)| s.spawn(|| run(c, o))).collect();
            for h in hs {
                h.join().expect("recovery worker panicked");
            }
        });
    }
    // SAFETY: every one of the first `items.len()` slots was written above (each thread
    // wrote all of its chunk, or the join panicked before this point).
    unsafe { out.set_len(items.len()) };
    (out, threads)
}

/// `rep` with NBTree's own figures in its `details` (SPEC N6), each a number:
/// `leaves` (key-value blocks on the list), `repaired` (entries an interrupted operation
/// left and the open fixed: frozen bits, half-done deletes, duplicates; the same count as
/// `rolled_forward`), `threads` (that decoded the blocks), and the microseconds of the
/// open's four phases: `allocator_us` (opening the allocator), `list_us` (listing the used
/// blocks), `decode_us` (checking seals, decoding the blocks, following the list),
/// `build_us` (repairs, the sweep, the metadata layer and the inner nodes).
fn with_figures(rep: RecoveryReport, leaves: u64, threads: usize, phases: [u64; 4]) -> RecoveryReport {
    let repaired = rep.rolled_forward;
    let [allocator, list, decode, build] = phases;
    rep.with_detail("leaves", leaves)
        .with_detail("repaired", repaired)
        .with_detail("threads", threads)
        .with_detail("allocator_us", allocator)
        .with_detail("list_us", list)
        .with_detail("decode_us", decode)
        .with_detail("build_us", build)
}

impl NbTree {
    /// Open the NBTree in `pool`, formatting it if the pool is new. A pool that another
    /// live tree uses is refused (`PoolError::Locked`).
    pub fn open(pool: Arc<Pool>) -> Result<NbTree> {
        open(pool, false)
    }

    /// [`NbTree::open`] with options.
    pub fn open_with(pool: Arc<Pool>, opts: Options) -> Result<NbTree> {
        let mut t = open(pool, opts.single_layer)?;
        t.write_locks = opts.write_locks;
        Ok(t)
    }
}

/// Open the tree in `pool`, formatting it if the pool is new.
fn open(pool: Arc<Pool>, want_sl: bool) -> Result<NbTree> {
    let t0 = Instant::now();
    let claim = PoolClaim::take(&pool)?;
    let sb = pool.root(SUPER_ROOT);
    if sb == 0 {
        pool.check_writable()?;
        return format(pool, claim, t0, want_sl);
    }
    let alloc = EpAlloc::open(pool.clone())?;
    let mut phases = [t0.elapsed().as_micros() as u64, 0, 0, 0];
    let (head, sl, fmt, batch_logs) = read_super(&pool, &alloc, sb)?;
    // Batch logs are checked before recovery writes anything: a damaged one refuses the
    // pool as it found it. They are finished once the tree is rebuilt.
    let pending = pmkv_substrate::batch_log::pending(&alloc)?;
    if want_sl && !sl {
        return Err(Error::Invalid(
            "single_layer: this pool was created with two-layer leaves (the kind is chosen at creation)".into(),
        ));
    }
    let first_slot = if sl { SL_FIRST } else { 0 };
    let clean = pool.was_clean();
    let rw = !pool.is_read_only();
    let sweep = !clean || load(&pool, sb + SB_SWEEP) != 0;
    // Every used block is decoded in parallel in address order (streaming reads the
    // hardware prefetcher follows), then the list is followed through a DRAM map of the
    // blocks' `next` words instead of by chasing PM pointers one miss at a time. A block
    // off the list (an SMO copy a crash left unlinked, a replaced block not freed yet)
    // is decoded for nothing and never used; its errors do not count.
    let mut all: Vec<u64> = Vec::new();
    alloc.for_each_used(BLOCK, |o| all.push(o));
    let verify = clean;
    phases[1] = t0.elapsed().as_micros() as u64;
    let pool_ref: &Pool = &pool;
    let (results, threads) = parallel(
        &all,
        || Vec::with_capacity(CAP),
        |keys, &b| -> Result<Decoded<'_>> {
            if verify {
                // SAFETY: a used block inside the pool; nothing writes it while the tree opens.
                let img = unsafe { std::slice::from_raw_parts(pool_ref.at::<u8>(b), BLOCK_SIZE) };
                let seal = u32::from_le_bytes(img[BLK_SEAL as usize..BLK_SEAL as usize + 4].try_into().expect("4"));
                if seal != block_seal(img) {
                    return Err(corrupt(format!("block {b:#x} fails its seal (checksum)")));
                }
            }
            decode(pool_ref, b, first_slot, !clean, fmt, keys)
        },
    );
    // Block offset -> index in `all`, by offset / BLOCK_SIZE: two blocks lie at least a
    // block apart, so no two share a cell. A flat array: cheaper than any hash map. The
    // list is followed through it and a compact copy of the `next` words (8 bytes a block,
    // in cache) rather than through the decoded blocks or PM, one miss per hop.
    let cells = (pool.size() / BLOCK_SIZE as u64 + 1) as usize;
    let mut pos = vec![u32::MAX; cells];
    for (i, &o) in all.iter().enumerate() {
        pos[(o / BLOCK_SIZE as u64) as usize] = i as u32;
    }
    // A block whose decoding failed gets u64::MAX, which names no block; the walk below
    // checks `results` for the failure itself (a damaged `next` word may hold u64::MAX too).
    let nexts: Vec<u64> = results.iter().map(|r| r.as_ref().map_or(u64::MAX, |d| d.next)).collect();
    // The list, validated: every link a used block, decoded without error, no cycle (a
    // block seen twice). `order` holds indexes into `all`, sentinel first.
    let mut seen = vec![false; all.len()];
    let mut order: Vec<u32> = Vec::with_capacity(all.len());
    let mut off = head;
    while off != 0 {
        let found = pos
            .get((off / BLOCK_SIZE as u64) as usize)
            .copied()
            .filter(|&i| i != u32::MAX && all[i as usize] == off && !seen[i as usize]);
        let Some(i) = found else {
            return Err(corrupt(format!("the block list names {off:#x}, which is not a used block, or twice")));
        };
        if results[i as usize].is_err() {
            let mut results = results;
            return Err(results.swap_remove(i as usize).err().expect("an error, checked above"));
        }
        seen[i as usize] = true;
        order.push(i);
        off = nexts[i as usize];
    }
    drop(nexts);
    if order.len() < 2 {
        return Err(corrupt("the block list has no leaf after the sentinel"));
    }
    let decoded = |k: usize| results[order[k] as usize].as_ref().expect("blocks on the list decoded without error");
    phases[2] = t0.elapsed().as_micros() as u64;
    if decoded(0).live != 0 {
        return Err(corrupt("the sentinel block holds entries"));
    }
    // Repairs, then the sweep (read-write opens after a crash or an unswept close).
    let mut rep = RecoveryReport::new("nbtree");
    rep.clean_shutdown = clean;
    // Repairs and the sweep go through the blocks on the list in address order (`seen`),
    // a streaming pass, not in list order, which jumps around `results`.
    let on_list = || results.iter().zip(&seen).filter(|(_, &on)| on).map(|(r, _)| r.as_ref().expect("decoded"));
    let fixes: usize = on_list().map(|d| d.fixes.len()).sum();
    if fixes > 0 && !rw {
        return Err(corrupt("entries need repair, which a read-only open cannot do"));
    }
    if rw {
        for d in on_list() {
            for &(o, v) in &d.fixes {
                // SAFETY: recovery runs alone; an entry word of a used block.
                unsafe { pool.store_u64(o, v) };
                pool.flush_off(o, 8);
            }
            if !d.fixes.is_empty() {
                pool.fence();
                rep.rolled_forward += d.fixes.len() as u64;
            }
        }
        if sweep {
            // Kept: the superblock, the blocks on the list (found through `pos` and
            // `seen`: a hash set of ~100,000 blocks cost milliseconds) and the objects
            // their entries name.
            let objects: HashSet<u64> = on_list().flat_map(|d| d.objects.iter().copied()).collect();
            let keep = |o: u64| {
                o == sb
                    || pos
                        .get((o / BLOCK_SIZE as u64) as usize)
                        .is_some_and(|&i| i != u32::MAX && all[i as usize] == o && seen[i as usize])
                    || objects.contains(&o)
            };
            for ty in [SUPER, BLOCK, KEY, VALUE] {
                let mut orphans = Vec::new();
                alloc.for_each_used(ty, |o| {
                    if !keep(o) {
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
    // The metadata layer, in list order: each leaf built from its decoded block, its lower
    // fence its smallest key (an empty leaf takes its predecessor's: it is reached only
    // through the list), keys checked to ascend across leaves; then the inner nodes.
    let empty: Arc<[u8]> = Arc::from(&b""[..]);
    let make = |k: usize, low: Arc<[u8]>| -> Leaf {
        let d = decoded(k);
        let l = Leaf::new(all[order[k] as usize], low);
        l.init_meta(&d.fps, d.num as usize, d.bitmap);
        l.dirty.store(!clean, Ordering::Relaxed);
        l
    };
    let sentinel = make(0, empty.clone());
    let mut index: Vec<(inner::Sep, *const Leaf)> = Vec::with_capacity(order.len());
    let arena = Arc::new(LeafArena::new());
    let mut prev: *const Leaf = &sentinel;
    let mut prev_low: Arc<[u8]> = empty.clone();
    let mut last_max: Option<RKey<'_>> = None;
    let mut count = 0i64;
    for k in 1..order.len() {
        #[cfg(target_arch = "x86_64")]
        if let Some(&i) = order.get(k + 4) {
            // The decoded blocks are in address order and the list in key order: fetch a
            // few hops ahead so that the misses overlap.
            let p = &results[i as usize] as *const Result<Decoded<'_>> as *const i8;
            // SAFETY: prefetches of an element of `results` (its first two lines); they
            // never fault.
            unsafe {
                std::arch::x86_64::_mm_prefetch(p, std::arch::x86_64::_MM_HINT_T0);
                std::arch::x86_64::_mm_prefetch(p.add(64), std::arch::x86_64::_MM_HINT_T0);
            }
        }
        let d = decoded(k);
        if let (Some(m), Some(min)) = (last_max, d.min) {
            if min.cmp(&m).is_le() {
                return Err(corrupt(format!(
                    "block {:#x} holds keys out of order with its predecessor",
                    all[order[k] as usize]
                )));
            }
        }
        if d.max.is_some() {
            last_max = d.max;
        }
        let indexed = k == 1 || d.min.is_some();
        let low: Arc<[u8]> = match &d.min {
            Some(m) if k > 1 => m.with_bytes(|b| Arc::from(b)),
            Some(_) => empty.clone(),
            None => prev_low.clone(),
        };
        let mut l = make(k, low.clone());
        if sl && rw {
            // NBTree-SL: the rebuilt metadata goes to the block (where it may differ
            // from what the crash or the last close left), so the block is resealed at
            // close. A read-only open cannot write it and keeps it in DRAM: reads see the
            // same entries either way.
            l.store_meta(&pool);
            l.dirty.store(true, Ordering::Relaxed);
        }
        count += d.live as i64;
        let l = arena.alloc(l);
        // SAFETY: `prev` is the sentinel or a leaf built just before, owned here.
        unsafe { &*prev }.next.store(l, Ordering::Relaxed);
        prev = l;
        if indexed {
            index.push((inner::Sep::of(&low), l));
        }
        prev_low = low;
    }
    rep.records = count as u64;
    drop(results);
    let nodes = Arc::new(NodeArena::new());
    // SAFETY: the index names the leaves just made, all alive.
    let root = unsafe { inner::build(index, &nodes) };
    let micros = t0.elapsed().as_micros() as u64;
    rep.duration = Duration::from_micros(micros);
    phases[3] = micros;
    for i in (1..4).rev() {
        phases[i] -= phases[i - 1];
    }
    let rep = with_figures(rep, order.len() as u64 - 1, threads, phases);
    let mut t = assemble(pool, alloc, sb, sentinel, root, count, rep, claim, (sl, fmt), (arena, nodes));
    t.batch_logs.store(batch_logs, Ordering::Relaxed);
    // Write batches a crash interrupted after their log was published are finished now,
    // on the rebuilt tree, before anything else may write (see `batch`).
    let finished = t.finish_batches(pending)?;
    t.recovery = std::mem::take(&mut t.recovery).with_detail("batches_finished", finished);
    if finished > 0 {
        t.recovery.rolled_forward += finished;
        t.recovery.records = t.len();
        t.recovery.duration = Duration::from_micros(t0.elapsed().as_micros() as u64);
    }
    Ok(t)
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
            // The whole block, not only the seal: an in-place update's last step (format
            // 3's release of its entry, `NbTree::update_checked`) is not flushed, and the
            // seal covers it.
            self.pool.flush_off(l.block, BLOCK_SIZE);
        }
        if self.reclaim.pending() > 0 {
            // SAFETY: the superblock's sweep word, written only at open and close.
            unsafe { self.pool.store_u64(self.sb + SB_SWEEP, 1) };
            self.pool.flush_off(self.sb + SB_SWEEP, 8);
        }
        self.pool.fence();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmkv_substrate::{Mode, PoolOptions};

    /// The first block after the sentinel, in any format.
    fn first_block(pool: &Pool) -> u64 {
        let head = load(pool, pool.root(SUPER_ROOT) + SB_HEAD);
        let w = load(pool, head + BLK_NEXT);
        next_of(w, head, true).unwrap_or(w)
    }

    fn get(t: &NbTree, k: &[u8]) -> Option<Vec<u8>> {
        let mut v = None;
        t.get_with(k, &mut |b| v = Some(b.to_vec())).unwrap();
        v
    }

    /// Two entries of one key, as racing inserts cut short by a crash leave them: the
    /// recovery keeps the first slot's, repairs the other, and the tree holds each key
    /// once. Checked for an 8-byte key, a short key, a key in a key object (whose copy
    /// names the same object, which must survive the sweep) and a two-word key.
    #[test]
    fn a_crash_recovery_keeps_one_entry_of_a_duplicated_key() {
        let path = std::env::temp_dir().join(format!("pmkv-nbtree-dup-{}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let opts = PoolOptions::default().mode(Mode::Eadr).initial_size(16 << 20);
        let long = vec![b'L'; 40];
        let keys: Vec<Vec<u8>> = vec![
            7u64.to_be_bytes().to_vec(),
            b"abc".to_vec(),
            long.clone(),
            b"two-word-key-16b".to_vec(),
            9u64.to_be_bytes().to_vec(),
            b"zz".to_vec(),
            b"two-word-key-16".to_vec(),
        ];
        let t = NbTree::open(Arc::new(Pool::create(&path, "nbtree", &opts).unwrap())).unwrap();
        for (i, k) in keys.iter().enumerate() {
            t.put(k, &[i as u8; 4]).unwrap();
        }
        t.close().unwrap();
        let pool = Arc::new(Pool::open(&path, Some("nbtree"), &opts).unwrap());
        let first = first_block(&pool);
        let used = (0..CAP).filter(|&s| ![0, EMPTY_KEY].contains(&load(&pool, entry_off(first, s)))).count();
        assert_eq!(used, keys.len(), "every key in the first leaf, slots 0..7");
        // Slots 0, 1, 2, 3 (the 8-byte, short, long and two-word keys) copied after the
        // others with a different value word.
        for (from, to) in [(0, used), (1, used + 1), (2, used + 2), (3, used + 3)] {
            for w in 0..(ENTRY / 8) {
                let mut v = load(&pool, entry_off(first, from) + 8 * w);
                if w * 8 == E_VALUE {
                    v ^= 0xff;
                }
                if w * 8 == E_PAYLOAD {
                    // Format 3: the copy's own entry check (its value word differs).
                    let e = entry_off(first, from);
                    let val = load(&pool, e + E_VALUE) ^ 0xff;
                    v = entry_check(load(&pool, e), load(&pool, e + E_KEY2), v, val);
                }
                // SAFETY: entry words of a used block; no tree is open on the pool.
                unsafe { pool.store_u64(entry_off(first, to) + 8 * w, v) };
            }
        }
        pool.poison(); // not marked clean: the next open recovers as after a crash
        drop(pool);
        let t = NbTree::open(Arc::new(Pool::open(&path, Some("nbtree"), &opts).unwrap())).unwrap();
        assert!(!t.recovery_report().clean_shutdown);
        assert_eq!(t.recovery_report().detail_u64("repaired"), Some(4));
        assert_eq!(t.recovery_report().orphans_freed, 0, "the long key's object is still named");
        assert_eq!(t.len(), keys.len() as u64);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(get(&t, k), Some(vec![i as u8; 4]), "the first slot's value");
        }
        let mut seen = Vec::new();
        t.scan(&pmkv_core::KeyRange::all(), usize::MAX, false, &mut |k, _| {
            seen.push(k.to_vec());
            true
        })
        .unwrap();
        let mut want = keys.clone();
        want.sort();
        assert_eq!(seen, want, "each key once, in order");
        t.check().unwrap();
        t.close().unwrap();
        // The repair was durable: a clean reopen finds nothing to fix.
        let t = NbTree::open(Arc::new(Pool::open(&path, Some("nbtree"), &opts).unwrap())).unwrap();
        assert!(t.recovery_report().clean_shutdown);
        assert_eq!(t.len(), keys.len() as u64);
        t.close().unwrap();
        let _ = std::fs::remove_file(&path);
    }

    /// A format-1 pool (from before two-word keys) opens, keeps putting 9-to-16-byte keys
    /// in key objects (so the binaries that wrote it can still read it), and stays
    /// format 1; a format this build does not know is refused.
    #[test]
    fn a_format_1_pool_keeps_its_format() {
        let path = std::env::temp_dir().join(format!("pmkv-nbtree-v1-{}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let opts = PoolOptions::default().mode(Mode::Adr).initial_size(16 << 20);
        let set_version = |v: u32| {
            let pool = Pool::open(&path, Some("nbtree"), &opts).unwrap();
            let sb = pool.root(SUPER_ROOT);
            let mut img = [0u8; SUPER_SIZE];
            // SAFETY: the superblock, inside the pool; no tree is open on it.
            unsafe { std::ptr::copy_nonoverlapping(pool.at::<u8>(sb), img.as_mut_ptr(), SUPER_SIZE) };
            img[SB_VERSION as usize..SB_VERSION as usize + 4].copy_from_slice(&v.to_le_bytes());
            img[SB_CAP as usize..SB_CAP as usize + 4].copy_from_slice(&(Fmt::of(v).cap() as u32).to_le_bytes());
            let crc = super_crc(&img);
            img[SB_CRC as usize..SB_CRC as usize + 4].copy_from_slice(&crc.to_le_bytes());
            // SAFETY: `sb` names the superblock object, `SUPER_SIZE` bytes inside the mapped pool;
            // no tree is open on the pool, so nothing else reads or writes it meanwhile.
            unsafe { std::ptr::copy_nonoverlapping(img.as_ptr(), pool.at::<u8>(sb), SUPER_SIZE) };
            pool.flush_off(sb, SUPER_SIZE);
            // The `next` words of the empty pool's two blocks, in the format's encoding.
            let head = u64::from_le_bytes(img[SB_HEAD as usize..SB_HEAD as usize + 8].try_into().unwrap());
            let mut b = head;
            while b != 0 {
                let w = load(&pool, b + BLK_NEXT);
                let next = next_of(w, b, true).or_else(|| next_of(w, b, false)).unwrap();
                // SAFETY: the `next` word of a used block; no tree is open on the pool.
                unsafe { pool.store_u64(b + BLK_NEXT, next_word(next, b, v >= CHECKS_VERSION)) };
                // Before format 4 an empty slot's key word is 0.
                for slot in 0..CAP {
                    if v < MARKS_VERSION && load(&pool, entry_off(b, slot)) == EMPTY_KEY {
                        // SAFETY: a key word of a used block; no tree is open on the pool.
                        unsafe { pool.store_u64(entry_off(b, slot), 0) };
                    }
                }
                // Resealed, as the clean close before left it.
                // SAFETY: a used block inside the pool; no tree is open on it.
                let seal = block_seal(unsafe { std::slice::from_raw_parts(pool.at::<u8>(b), BLOCK_SIZE) });
                // SAFETY: as above, its seal word.
                unsafe { pool.store_u32(b + BLK_SEAL, seal) };
                pool.flush_off(b, 64);
                b = next;
            }
            pool.fence();
        };
        // An empty new pool (format 2), marked format 1 as an older build made it.
        let t = NbTree::open(Arc::new(Pool::create(&path, "nbtree", &opts).unwrap())).unwrap();
        assert!(t.fmt.pairs && t.fmt.checks, "a new pool has two-word keys and checks");
        t.close().unwrap();
        set_version(1);
        let t = NbTree::open(Arc::new(Pool::open(&path, Some("nbtree"), &opts).unwrap())).unwrap();
        assert!(!t.fmt.pairs && !t.fmt.checks);
        for (i, k) in [&b"twelve-bytes"[..], b"sixteen-bytes-ok", b"nine-byte"].iter().enumerate() {
            t.put(k, &[i as u8; 3]).unwrap();
        }
        let first = first_block(&t.pool);
        for slot in 0..3 {
            let p = load(&t.pool, entry_off(first, slot) + E_PAYLOAD);
            assert_eq!((p & KIND_MASK) >> KIND_SHIFT, KIND_OBJ, "slot {slot}: a key object in format 1");
        }
        t.check().unwrap();
        t.close().unwrap();
        let t = NbTree::open(Arc::new(Pool::open(&path, Some("nbtree"), &opts).unwrap())).unwrap();
        assert!(!t.fmt.pairs && !t.fmt.checks, "the format is kept");
        assert_eq!(get(&t, b"sixteen-bytes-ok"), Some(vec![1; 3]));
        t.close().unwrap();
        set_version(SUPER_VERSION + 1);
        let r = NbTree::open(Arc::new(Pool::open(&path, Some("nbtree"), &opts).unwrap()));
        assert!(matches!(r, Err(Error::Version(_))), "{:?}", r.err());
        let _ = std::fs::remove_file(&path);
    }

    /// A `next` word damaged to all ones, in a pool whose seals a crash left unchecked:
    /// the open refuses the list with an error (u64::MAX also marks a block that failed
    /// to decode, which must not be confused with it).
    #[test]
    fn a_next_word_of_all_ones_is_refused_not_a_panic() {
        let path = std::env::temp_dir().join(format!("pmkv-nbtree-next-{}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let opts = PoolOptions::default().mode(Mode::Eadr).initial_size(16 << 20);
        let t = NbTree::open(Arc::new(Pool::create(&path, "nbtree", &opts).unwrap())).unwrap();
        for i in 1..100u64 {
            t.put(&i.to_be_bytes(), b"v").unwrap();
        }
        t.close().unwrap();
        let pool = Arc::new(Pool::open(&path, Some("nbtree"), &opts).unwrap());
        let first = first_block(&pool);
        // SAFETY: the `next` word of a used block; no tree is open on the pool.
        unsafe { pool.store_u64(first + BLK_NEXT, u64::MAX) };
        pool.poison();
        drop(pool);
        let r = NbTree::open(Arc::new(Pool::open(&path, Some("nbtree"), &opts).unwrap()));
        assert!(matches!(r, Err(Error::Corrupt(_))), "{:?}", r.err());
        let _ = std::fs::remove_file(&path);
    }

    /// A format-3 pool with an inline record (`secret` = `ABCDEFGH`, slot 0 of the first
    /// leaf), one whose value is in an object (slot 1) and enough keys for several leaves,
    /// closed, then damaged by `poke` and marked not clean, as a SIGKILL leaves it: the
    /// seals are stale and unchecked. Returns what the open and then a read of each record
    /// gave.
    fn damaged_after_crash(tag: &str, poke: impl Fn(&Pool, u64)) -> Result<()> {
        let path = std::env::temp_dir().join(format!("pmkv-nbtree-dmg-{tag}-{}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let opts = PoolOptions::default().mode(Mode::Eadr).initial_size(16 << 20);
        let t = NbTree::open(Arc::new(Pool::create(&path, "nbtree", &opts).unwrap())).unwrap();
        t.put(b"secret", b"ABCDEFGH").unwrap();
        t.put(b"big", &[7u8; 100]).unwrap();
        for i in 1..200u64 {
            t.put(format!("z{i:05}").as_bytes(), b"v").unwrap();
        }
        t.close().unwrap();
        let pool = Arc::new(Pool::open(&path, Some("nbtree"), &opts).unwrap());
        let first = first_block(&pool);
        poke(&pool, first);
        pool.poison();
        drop(pool);
        let r = (|| {
            let t = NbTree::open(Arc::new(Pool::open(&path, Some("nbtree"), &opts)?))?;
            assert!(!t.recovery_report().clean_shutdown);
            for k in [&b"secret"[..], b"big"] {
                t.get_with(k, &mut |_| {})?;
            }
            t.scan(&pmkv_core::KeyRange::all(), usize::MAX, false, &mut |_, _| true)?;
            t.check()?;
            Ok(())
        })();
        let _ = std::fs::remove_file(&path);
        r
    }

    /// The entry of `key` in `block`.
    fn entry_of(pool: &Pool, block: u64, key: &[u8]) -> u64 {
        let KeyWord::Inline { word, .. } = key_word(key, true, 0) else { panic!() };
        (0..CAP).map(|s| entry_off(block, s)).find(|&e| load(pool, e) == word).expect("the key is in the block")
    }

    /// Change byte `i` of the PM word at `off` with `f`.
    fn poke_byte(pool: &Pool, off: u64, i: usize, f: impl Fn(u8) -> u8) {
        let mut w = load(pool, off).to_le_bytes();
        w[i] = f(w[i]);
        // SAFETY: a word of a used block; no tree is open on the pool.
        unsafe { pool.store_u64(off, u64::from_le_bytes(w)) };
    }

    #[test]
    fn undamaged_pool_recovers_after_a_crash() {
        damaged_after_crash("none", |_, _| {}).unwrap();
    }

    /// The bug report: `ABCDEFGH` overwritten with `ABCDEFGX` after a crash was read back
    /// with no error. Now the open refuses the entry, naming block and slot.
    #[test]
    fn a_changed_inline_value_byte_is_refused_after_a_crash() {
        let r = damaged_after_crash("value", |pool, first| {
            poke_byte(pool, entry_of(pool, first, b"secret") + E_VALUE, 7, |_| b'X')
        });
        assert!(matches!(&r, Err(Error::Corrupt(m)) if m.contains("fails its check")), "{r:?}");
    }

    #[test]
    fn a_changed_inline_key_byte_is_refused_after_a_crash() {
        let r = damaged_after_crash("key", |pool, first| {
            poke_byte(pool, entry_of(pool, first, b"secret"), 0, |b| b ^ 0x20)
        });
        assert!(matches!(&r, Err(Error::Corrupt(m)) if m.contains("fails its check")), "{r:?}");
    }

    #[test]
    fn a_changed_payload_byte_is_refused_after_a_crash() {
        for (i, key) in [(6usize, &b"secret"[..]), (2, b"big"), (5, b"big")] {
            let r = damaged_after_crash("payload", |pool, first| {
                poke_byte(pool, entry_of(pool, first, key) + E_PAYLOAD, i, |b| b ^ 0x10)
            });
            assert!(matches!(r, Err(Error::Corrupt(_))), "{key:?} byte {i}: {r:?}");
        }
    }

    #[test]
    fn a_zeroed_entry_check_is_refused_after_a_crash() {
        for (key, check) in [(&b"secret"[..], CHK), (b"big", CHECK_PTR)] {
            let r = damaged_after_crash("check", |pool, first| {
                let po = entry_of(pool, first, key) + E_PAYLOAD;
                // SAFETY: a word of a used block; no tree is open on the pool.
                unsafe { pool.store_u64(po, load(pool, po) & !check) };
            });
            assert!(matches!(r, Err(Error::Corrupt(_))), "{key:?}: {r:?}");
        }
    }

    /// A zeroed `next` word used to end the list there: the blocks after it were swept
    /// as leaks and their records lost without a word.
    #[test]
    fn a_zeroed_next_word_is_refused_after_a_crash() {
        let r = damaged_after_crash("next", |pool, first| {
            assert_ne!(next_of(load(pool, first + BLK_NEXT), first, true), Some(0), "several leaves");
            // SAFETY: a word of a used block; no tree is open on the pool.
            unsafe { pool.store_u64(first + BLK_NEXT, 0) };
        });
        assert!(matches!(&r, Err(Error::Corrupt(m)) if m.contains("next word")), "{r:?}");
    }

    /// Damage after the open is not read back silently by `check` (reads trust what the
    /// open verified: nothing but this process writes an open pool).
    #[test]
    fn damage_after_the_open_fails_check() {
        let opts = PoolOptions::default().mode(Mode::Eadr).initial_size(16 << 20);
        let t = NbTree::open(Arc::new(Pool::create_sim("nbtree", &opts).unwrap())).unwrap();
        t.put(b"secret", b"ABCDEFGH").unwrap();
        t.put(b"other", b"x").unwrap();
        t.check().unwrap();
        let first = first_block(&t.pool);
        poke_byte(&t.pool, entry_off(first, 0) + E_VALUE, 7, |_| b'X');
        let r = t.check();
        assert!(matches!(&r, Err(e) if e.to_string().contains("slot 0")), "{r:?}");
    }

    /// How the source pool of the aimed tests was left.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Left {
        /// Closed cleanly: the seals verify.
        Clean,
        /// Opened writable again, written, and not closed (a crash): the seals are stale.
        Crashed,
        /// Opened writable again and not closed, with no write in between (the zeroed-key-word report's
        /// `pmkv serve` killed before any request).
        OpenedThenKilled,
    }

    /// A pool with every kind of key (8-byte, short, two-word, in an object) and value
    /// (inline, in an object), updated in place, to objects and deleted, left as `left`
    /// says. Returns the file's bytes and the records it must hold.
    fn aimed_source(left: Left) -> (Vec<u8>, std::collections::BTreeMap<Vec<u8>, Vec<u8>>) {
        let path = std::env::temp_dir().join(format!("pmkv-nbtree-aim-{left:?}-{}.pool", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let opts = PoolOptions::default().mode(Mode::Adr).initial_size(2 << 20);
        let mut model = std::collections::BTreeMap::new();
        let key = |i: u32| -> Vec<u8> {
            match i % 4 {
                0 => (0x0200_0000_0000_0000u64 + u64::from(i) * 7919).to_be_bytes().to_vec(),
                1 => format!("s{i:04}").into_bytes(),
                2 => format!("pair-key-{i:05}").into_bytes(),
                _ => format!("a-key-long-enough-for-an-object-{i:05}").into_bytes(),
            }
        };
        let value = |i: u32, r: u32| vec![b'a' + ((i + r) % 26) as u8; [3, 8, 40][((i + r) % 3) as usize]];
        let t = NbTree::open(Arc::new(Pool::create(&path, "nbtree", &opts).unwrap())).unwrap();
        let put = |model: &mut std::collections::BTreeMap<Vec<u8>, Vec<u8>>, t: &NbTree, k: Vec<u8>, v: Vec<u8>| {
            t.put(&k, &v).unwrap();
            model.insert(k, v);
        };
        for i in 0..300 {
            put(&mut model, &t, key(i), value(i, 0));
        }
        for i in (0..300).step_by(3) {
            put(&mut model, &t, key(i), value(i, 3)); // same length: in place; else an object
        }
        for i in (0..300).step_by(5) {
            t.delete(&key(i)).unwrap();
            model.remove(&key(i));
        }
        t.close().unwrap();
        if left != Left::Clean {
            let pool = Arc::new(Pool::open(&path, Some("nbtree"), &opts).unwrap());
            let t = NbTree::open(pool.clone()).unwrap();
            if left == Left::Crashed {
                for i in (1..300).step_by(7) {
                    put(&mut model, &t, key(i), value(i, 6));
                }
                for i in (2..300).step_by(11) {
                    t.delete(&key(i)).unwrap();
                    model.remove(&key(i));
                }
            }
            pool.poison(); // no seal, not marked clean: as a SIGKILL leaves it
            drop(t);
            drop(pool);
        }
        let image = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        (image, model)
    }

    /// Records as a scan gives them.
    type Records = Vec<(Vec<u8>, Vec<u8>)>;

    /// Open `image` (in memory) and read every record, or the error that refused it; and
    /// whether the open found a clean shutdown.
    fn read_all(image: &[u8]) -> Result<(Records, bool)> {
        let opts = PoolOptions::default().mode(Mode::Adr);
        let t = NbTree::open(Arc::new(Pool::from_image(image, Some("nbtree"), &opts)?))?;
        let clean = t.recovery_report().clean_shutdown;
        let mut out = Vec::new();
        t.scan(&pmkv_core::KeyRange::all(), usize::MAX, false, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        t.check()?;
        Ok((out, clean))
    }

    /// The entry offsets of the live records of every block on the list of `image`.
    fn live_entries_of(image: &[u8]) -> Vec<u64> {
        let opts = PoolOptions::default().mode(Mode::Adr);
        let t = NbTree::open(Arc::new(Pool::from_image(image, Some("nbtree"), &opts).unwrap())).unwrap();
        let mut out = Vec::new();
        for l in t.leaves_quiesced() {
            // SAFETY: a live leaf of a tree no other thread uses.
            let l = unsafe { &*l };
            out.extend(leaf::live_entries(&t.pool, l, t.fmt.empty).iter().map(|e| l.key_at(e.0)));
        }
        out // the tree writes only its in-memory copy: `image` stays as it was
    }

    /// A record's key word zeroed used to read as an empty slot, the record gone
    /// with no error once the seals were stale (after a crash, or a writable open that
    /// was killed). Now every word of a third of the records (key word, payload, value
    /// word A, fourth word), and the whole entry, zeroed in a pool left each way, is refused
    /// (`Corrupt`) or reads exactly as the undamaged pool: no silent wrong answer.
    #[test]
    fn zeroed_words_of_records_are_never_read_as_empty() {
        for left in [Left::Clean, Left::Crashed, Left::OpenedThenKilled] {
            let (image, model) = aimed_source(left);
            let want: Records = model.into_iter().collect();
            let (got, clean) = read_all(&image).unwrap();
            assert_eq!(got, want, "{left:?}: the undamaged pool");
            assert_eq!(clean, left == Left::Clean, "{left:?}");
            let entries = live_entries_of(&image);
            assert_eq!(entries.len(), want.len(), "{left:?}");
            let (mut refused, mut right) = (0, 0);
            // Every third live record: every kind of key and value is among them.
            for &e in entries.iter().step_by(3) {
                for (what, at, len) in [
                    ("key word", 0, 8),
                    ("payload", 8, 8),
                    ("value word", 16, 8),
                    ("fourth word", 24, 8),
                    ("entry", 0, 32),
                ] {
                    let mut b = image.clone();
                    b[(e + at) as usize..(e + at + len) as usize].fill(0);
                    match read_all(&b) {
                        Err(Error::Corrupt(_)) => refused += 1,
                        Err(err) => panic!("{left:?} entry {e:#x} {what} zeroed: {err}"),
                        Ok((got, _)) => {
                            assert!(
                                got == want,
                                "{left:?} entry {e:#x} {what} zeroed: a silent wrong answer ({} records, not {})",
                                got.len(),
                                want.len()
                            );
                            right += 1;
                        }
                    }
                }
            }
            // Every key word and every whole entry is refused (a zero key word is never a
            // record's; the zeroed words that read right are unused value slots).
            let sampled = entries.len().div_ceil(3);
            assert!(refused >= 2 * sampled, "{left:?}: {refused} refused, {right} read right");
            eprintln!(
                "{left:?}: {sampled} records sampled, {refused} zeroed words refused, {right} read right, 0 wrong"
            );
        }
    }

    /// A format-4 empty slot's key word is `EMPTY_KEY`: a zeroed one (damage to a slot
    /// nobody used) is refused too, as the format says, not taken as empty.
    #[test]
    fn a_zeroed_empty_slot_is_refused() {
        let (image, _) = aimed_source(Left::Crashed);
        let opts = PoolOptions::default().mode(Mode::Adr);
        let pool = Pool::from_image(&image, Some("nbtree"), &opts).unwrap();
        let first = first_block(&pool);
        let slot =
            (0..CAP_CHECKED).rev().find(|&s| load(&pool, entry_off(first, s)) == EMPTY_KEY).expect("an empty slot");
        let mut b = image.clone();
        b[entry_off(first, slot) as usize..][..8].fill(0);
        let r = read_all(&b).map(|_| ());
        assert!(matches!(&r, Err(Error::Corrupt(m)) if m.contains("key word is zero")), "{r:?}");
    }
}
