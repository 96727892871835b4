//! Recovery (Algorithm 7, SPEC H5): rebuild the hash table and every ART from the used
//! leaves of EPallocator's leaf chunk list; after a crash, also finish or roll back
//! interrupted updates from the micro-logs and free orphaned values and key objects.
//!
//! **Orphans.** A crash can leave a value or key object used but named by no used leaf:
//! an insert between its value bit and its leaf bit (Algorithm 1 lines 14–18), a delete
//! between its leaf bit and its value bit (Algorithm 5 lines 11–12), an update's old value
//! between the pointer swing and its free. The paper reclaims the first case in
//! `EPMalloc` (Algorithm 2 lines 12–16) when it reuses the leaf slot, by following the
//! free slot's stale `p_value`. That is unsafe as written — a deleted leaf's slot keeps
//! its stale `p_value`, whose value slot may since have been reused by another leaf, so
//! the check can free a live value — and incomplete: once the leaf's chunk is recycled
//! (Algorithm 6) its free slots are no longer on any list, and the orphan is never found.
//! (pmkv's crash simulator found exactly that.) pmkv instead runs, after an unclean
//! shutdown only, a mark-and-sweep: every `p_value` and `p_key` of a used leaf is marked
//! while the leaves are scanned anyway; every used value or key object not marked is
//! freed. It costs one sort of 8 bytes per key, and never runs after a clean shutdown,
//! when no operation was in flight.

use crate::art::KeySource;
use crate::checksum::{self, Meta};
use crate::error::{Error, Result};
use crate::hash_table::{hash_key, HashTable};
use crate::insert_log;
use crate::layout::*;
use crate::micro_log;
use crate::pm::{bytes, leaf_damage, meta, read_u32, read_u64, write_u64, Pm, PmKeys};
use pmkv_core::RecoveryReport;
use pmkv_substrate::epalloc::EpAlloc;
use pmkv_substrate::Pool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What opening a pool builds, for `Hart` to own: the PM handle, the DRAM hash table of
/// ARTs (empty for a new pool) and the report of what recovery did.
pub(crate) struct Parts {
    pub(crate) pm: Pm,
    pub(crate) table: HashTable,
    pub(crate) report: RecoveryReport,
    /// Write batches a crash left committed but maybe not applied, validated before
    /// recovery wrote anything (see `batch`): the open finishes them on the rebuilt trees.
    pub(crate) pending: Vec<pmkv_substrate::batch_log::Pending>,
}

/// HART's own recovery figures, reported as details of the common [`RecoveryReport`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    /// Used leaves put back into the ARTs (the number of keys).
    pub(crate) leaves: u64,
    /// ARTs rebuilt (hash keys in use).
    pub(crate) arts: u64,
    /// Interrupted updates finished from their micro-log (rolled forward).
    pub(crate) updates_redone: u64,
    /// Interrupted updates undone (a valid log whose new value never became durable, or
    /// a torn log).
    pub(crate) updates_rolled_back: u64,
    /// One-persist inserts a crash cut short (a leaf a lane names, used but failing its
    /// checks: see `insert_log`), undone.
    pub(crate) inserts_rolled_back: u64,
    /// Value and key objects freed because no used leaf named them.
    pub(crate) orphans_freed: u64,
    /// Leaves found complete in free slots (version 8: inserts whose bit a crash lost),
    /// taken back.
    pub(crate) inserts_adopted: u64,
}

/// The common report of a recovery that found `c` in `took` (SPEC H5): records are the
/// leaves, rolled forward the redone updates, rolled back the undone updates and inserts;
/// every figure of `c` is also a detail by its field name, and `micros` the time taken.
pub(crate) fn report(clean: bool, c: &Counts, took: Duration) -> RecoveryReport {
    let mut r = RecoveryReport::new("hart")
        .with_detail("leaves", c.leaves)
        .with_detail("arts", c.arts)
        .with_detail("updates_redone", c.updates_redone)
        .with_detail("updates_rolled_back", c.updates_rolled_back)
        .with_detail("inserts_rolled_back", c.inserts_rolled_back)
        .with_detail("inserts_adopted", c.inserts_adopted)
        .with_detail("micros", took.as_micros());
    r.clean_shutdown = clean;
    r.records = c.leaves;
    r.rolled_forward = c.updates_redone;
    r.rolled_back = c.updates_rolled_back + c.inserts_rolled_back;
    r.orphans_freed = c.orphans_freed;
    r.duration = took;
    r
}

fn corrupt(what: impl Into<String>) -> Error {
    Error::Corrupt(what.into())
}

/// Validate the superblock; returns (k_h, logs offset).
fn read_super(pool: &Pool, alloc: &EpAlloc) -> Result<(usize, u64)> {
    let sb = pool.root(SUPER_ROOT);
    if !sb.is_multiple_of(8) || !pool.contains(sb, SUPER_SIZE) || alloc.type_of(sb) != Some(SUPER) || !alloc.is_used(sb)
    {
        return Err(corrupt("superblock offset does not name a used superblock object"));
    }
    // SAFETY: recovery runs alone: nothing writes the superblock meanwhile.
    let magic = unsafe { bytes(pool, sb, 8) };
    if magic != SUPER_MAGIC {
        return Err(corrupt("bad superblock magic"));
    }
    let version = read_u32(pool, sb + 8);
    if !(SUPER_VERSION_MIN..=SUPER_VERSION).contains(&version) {
        let why = if version < SUPER_VERSION_MIN {
            "; it was written by an older pmkv, before leaf and value checksums: dump it with that build and \
             load the dump with this one"
        } else {
            ""
        };
        return Err(Error::Version(format!(
            "HART format version {version} is not supported (this build reads {SUPER_VERSION_MIN} to {SUPER_VERSION}){why}"
        )));
    }
    let kh = read_u32(pool, sb + 12) as usize;
    let n = read_u32(pool, sb + 16);
    let logs = read_u64(pool, sb + 24);
    if kh > 7 || n != NUM_LOGS || logs != sb + SUPER_SIZE || !pool.contains(logs, NUM_LOGS as u64 * LOG_SIZE) {
        return Err(corrupt("superblock fields out of range"));
    }
    Ok((kh, logs))
}

/// Open an existing HART pool (Algorithm 7): validate the superblock, replay or roll back
/// the micro-logs and undo torn inserts after a crash, rebuild the table from the used
/// leaves, and sweep orphans after a crash.
pub(crate) fn recover(pool: Arc<Pool>) -> Result<Parts> {
    let t0 = Instant::now();
    let alloc = EpAlloc::open(pool.clone())?;
    let (kh, logs_off) = read_super(&pool, &alloc)?;
    // Batch logs are checked before recovery writes anything: a damaged one refuses the
    // pool as it found it.
    let pending = pmkv_substrate::batch_log::pending(&alloc)?;
    let sb = pool.root(SUPER_ROOT);
    let version = read_u32(&pool, sb + 8);
    // Up to version 5 a delete erased a leaf to 0 (see `erased_word`).
    let zero_erases = version < 6;
    // From version 8 a leaf's bit is set after its insert and not persisted (`insert`): a
    // free leaf slot whose leaf passes every check is a record whose bit was lost, and is
    // taken back ("adopted"). Older pools' bits are authoritative (a free slot there may
    // hold a deleted leaf whose erase mark never reached PM) until the upgrade below.
    let adopt = version >= 8;
    if version < 7 && !pool.is_read_only() {
        // A version-3 to 6 pool (no second value slot, insert log, erase mark or batch
        // log, see `SUPER_VERSION_MIN`): its leaves and logs are version-7 ones as they
        // are; mark it before anything may write slot B, a lane word, an erase mark or a
        // batch log. (Version 8 is marked at the end, once no free slot holds a leaf
        // that passes its checks.)
        // SAFETY: the superblock's version field; recovery runs alone.
        unsafe { pool.at::<u32>(sb + 8).write(7) };
        pool.persist_off(sb + 8, 4);
    }
    let clean = pool.was_clean();
    let pm = Pm::new(pool.clone(), alloc, kh, logs_off);
    let table = HashTable::new(kh);
    let mut rep = Counts::default();

    if !clean {
        // Micro-logs first (they only change `p_value` of used leaves). A valid log means
        // the crash came after Algorithm 3 line 6. If the new value's bit is set, the
        // update reached line 7: roll forward (line 8); the old value is then unmarked
        // and swept below unless a leaf uses its slot again. If the bit is clear, line 7
        // never became durable, so neither did the free of the old value (line 9, after
        // it): roll back to the old value, and the new slot stays free. An invalid,
        // non-empty log is a torn or unfenced one: nothing of its update was visible.
        for i in 0..NUM_LOGS as u64 {
            let at = logs_off + i * LOG_SIZE;
            if read_u32(&pool, at + 24) == 0 {
                continue;
            }
            // SAFETY: recovery runs alone: nothing writes the logs or values meanwhile.
            match unsafe { micro_log::read(&pool, at) } {
                // A valid log names a leaf that was in the tree at the crash (the log is
                // durably cleared before its leaf can change again, see `update`); from
                // version 8 its bit may be one the crash lost.
                Some(log) if pm.alloc.type_of(log.leaf) == Some(LEAF) && (adopt || pm.alloc.is_used(log.leaf)) => {
                    // The flags go with the word: an inline value's flags are restored on
                    // roll-back and cleared on roll-forward (see `micro_log`).
                    let target = if pm.alloc.is_used(log.new_value) {
                        rep.updates_redone += 1;
                        (log.new_value, log.old_flags & !INLINE_MASK)
                    } else {
                        rep.updates_rolled_back += 1;
                        (log.old_value, log.old_flags)
                    };
                    // The three words are rewritten whole (the crash may have torn them),
                    // the value check proving the target and nothing else.
                    let leaf = log.leaf;
                    let m = Meta { flags: target.1, ..meta(&pool, leaf) };
                    let vc = checksum::value_check(leaf, target.0, target.1);
                    // SAFETY: a used leaf (checked); recovery runs alone and holds no
                    // reference into PM here.
                    unsafe {
                        write_u64(&pool, leaf + LEAF_VCHECK, checksum::vcheck_word(vc, vc));
                        write_u64(&pool, leaf + LEAF_META, m.encode());
                        write_u64(&pool, leaf + LEAF_P_VALUE, target.0);
                    }
                    pool.persist_off(leaf + LEAF_P_VALUE, 24);
                }
                _ => rep.updates_rolled_back += 1,
            }
            // SAFETY: recovery runs alone; `at` is a micro-log of the validated array.
            unsafe { micro_log::clear(&pool, at) }; // line 11
        }
    }

    // Algorithm 7 lines 2–6: every used leaf goes back into its ART.
    let mut values: Vec<u64> = Vec::new();
    let mut keys: Vec<u64> = Vec::new();
    let mut leaves: Vec<(u64, u64)> = Vec::new();
    let mut err = None;
    let mut erased = Vec::new();
    // The leaves whose inserts may have been cut short (`insert_log`, versions 5 to 7):
    // only after a crash.
    let named = if clean { Vec::new() } else { insert_log::named(&pool, logs_off) };
    let mut adopted = Vec::new();
    pm.alloc.for_each_slot(LEAF, |leaf, used| {
        if err.is_some() {
            return;
        }
        if !used {
            // A free slot: a record whose bit was lost if its leaf passes every check and
            // its value and key objects are used (they were durable before the leaf's
            // fence; a leaf that reached PM before them is an insert the crash cut short).
            // Anything else (zero, an erase mark, a torn insert's words) stays free.
            // SAFETY: recovery runs alone: nothing writes leaves meanwhile.
            if !adopt || unsafe { leaf_damage(&pool, leaf, true) }.is_some() || !objects_used(&pm, leaf) {
                return;
            }
            adopted.push(leaf);
        } else {
            let torn = named.binary_search(&leaf).is_ok();
            let raw = read_u64(&pool, leaf + LEAF_META);
            if !clean && (is_erased(leaf, raw) || raw == 0 && (torn || zero_erases)) {
                // A delete erased the leaf and the crash came before its bit was reset:
                // finish the delete (its value and key object are then orphans, swept
                // below). Or a one-persist insert of version 5 to 7 whose bit alone
                // reached PM (a lane names it): undone the same way (not counted: in a
                // version-5 pool the two cannot be told apart, and both end in no
                // record). A zero meta word anywhere else is damage (`leaf_damage`
                // below): a version-6 delete writes the erase mark.
                erased.push(leaf);
                return;
            }
            // Every leaf is verified before it enters a tree: a leaf that fails its checks
            // makes the open fail (the pool is damaged; `salvage` copies what is intact),
            // unless a lane names it: then it is an insert the crash cut short, undone.
            // (From version 8 a bit is set only after its leaf is durable, so no used
            // leaf is a torn insert.)
            // SAFETY: recovery runs alone: nothing writes leaves meanwhile.
            if let Some(why) = unsafe { leaf_damage(&pool, leaf, true) } {
                if torn {
                    erased.push(leaf);
                    rep.inserts_rolled_back += 1;
                    return;
                }
                err = Some(corrupt(format!("{why}; `pmkv salvage` copies every intact record to a new pool")));
                return;
            }
            if meta(&pool, leaf).key_out() && !pm.alloc.is_used(read_u64(&pool, leaf + LEAF_KEY)) {
                err = Some(corrupt(format!("leaf {leaf:#x} names a key object that is not in use")));
                return;
            }
        }
        // SAFETY: recovery runs alone: nothing writes leaves meanwhile.
        let prefix = unsafe { PmKeys::new(&pool) }.with_key_prefix(leaf);
        leaves.push((prefix, leaf));
        if !clean {
            let flags = meta(&pool, leaf).flags;
            if inline_len(flags).is_none() {
                values.push(read_u64(&pool, leaf + LEAF_P_VALUE));
            }
            if flags & FLAG_KEY_OUT != 0 {
                keys.push(read_u64(&pool, leaf + LEAF_KEY));
            }
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    for &leaf in &erased {
        pm.alloc.free(leaf);
    }
    rep.inserts_adopted = adopted.len() as u64;
    if !pool.is_read_only() {
        // The lost bits, set again and persisted under one fence (a read-only open puts
        // the leaves in its trees and writes nothing).
        for &leaf in &adopted {
            pm.alloc.adopt(leaf)?;
        }
        if !adopted.is_empty() {
            pool.fence();
        }
        insert_log::clear(&pool, logs_off);
        if version < 8 {
            upgrade_to_8(&pm)?;
        }
    }
    rep.leaves = leaves.len() as u64;
    insert_recovered(&pm, &table, leaves)?;
    if !clean {
        rep.orphans_freed += sweep(&pm.alloc, VALUE, values);
        rep.orphans_freed += sweep(&pm.alloc, KEY, keys);
    }
    rep.arts = table.arts() as u64;
    let report = report(clean, &rep, t0.elapsed());
    Ok(Parts { pm, table, report, pending })
}

/// Whether the value and key objects a leaf (which passed its own checks, the key
/// object's bytes included) names are used and its value object passes its check: a leaf
/// found in a free slot is adopted only then.
fn objects_used(pm: &Pm, leaf: u64) -> bool {
    let pool = &*pm.pool;
    let m = meta(pool, leaf);
    let value_ok = inline_len(m.flags).is_some()
        // SAFETY: recovery runs alone: nothing writes the leaf or its value meanwhile.
        || pm.alloc.is_used(read_u64(pool, leaf + LEAF_P_VALUE)) && unsafe { pm.value_of(leaf) }.is_ok();
    value_ok && (!m.key_out() || pm.alloc.is_used(read_u64(pool, leaf + LEAF_KEY)))
}

/// Make a version-7 (or older) pool version 8 (a writable open, after recovery): erase
/// every free leaf slot whose leaf passes its checks (a deleted leaf whose erase mark, a
/// plain store before version 8, never reached PM), persist, then mark the version. From
/// then on recovery takes such a leaf for a record whose bit was lost.
fn upgrade_to_8(pm: &Pm) -> Result<()> {
    let pool = &*pm.pool;
    let mut stale = Vec::new();
    pm.alloc.for_each_slot(LEAF, |leaf, used| {
        // SAFETY: recovery runs alone: nothing writes leaves meanwhile.
        if !used && unsafe { leaf_damage(pool, leaf, false) }.is_none() {
            stale.push(leaf);
        }
    });
    for &leaf in &stale {
        // SAFETY: a free leaf slot; recovery runs alone.
        unsafe { write_u64(pool, leaf + LEAF_META, erased_word(leaf, 0)) };
        pool.flush_off(leaf + LEAF_META, 8);
    }
    pool.fence();
    let sb = pool.root(SUPER_ROOT);
    // SAFETY: the superblock's version field; recovery runs alone.
    unsafe { pool.at::<u32>(sb + 8).write(SUPER_VERSION) };
    pool.persist_off(sb + 8, 4);
    Ok(())
}

/// Free every used object of type `ty` whose offset is not in `marked`.
fn sweep(alloc: &EpAlloc, ty: pmkv_substrate::epalloc::TypeId, mut marked: Vec<u64>) -> u64 {
    marked.sort_unstable();
    let mut orphans = Vec::new();
    alloc.for_each_used(ty, |o| {
        if marked.binary_search(&o).is_err() {
            orphans.push(o);
        }
    });
    for &o in &orphans {
        alloc.free(o);
    }
    orphans.len() as u64
}

/// Insert existing used leaves into the DRAM structures (recovery, Algorithm 7 line 6).
///
/// `leaves` holds (first 8 key bytes big-endian, leaf offset) pairs. They are sorted by
/// key prefix first, so consecutive insertions walk the same ART paths (cache-hot)
/// and take each ART's lock once per run of equal hash keys; large recoveries are
/// split at hash-key boundaries over the available cores, since different ARTs are
/// independent. The paper inserts leaves in chunk order, one lock each.
fn insert_recovered(pm: &Pm, table: &HashTable, mut leaves: Vec<(u64, u64)>) -> Result<()> {
    leaves.sort_unstable();
    // `PMKV_RECOVERY_THREADS` overrides the core count (1 = the paper's serial recovery).
    let threads = std::env::var("PMKV_RECOVERY_THREADS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, 8);
    if threads < 2 || leaves.len() < 200_000 {
        return insert_sorted(pm, table, &leaves);
    }
    // Cut points where the 8-byte prefix's hash key changes, near equal shares.
    let mut parts = Vec::new();
    let mut from = 0;
    for t in 1..threads {
        let mut at = (leaves.len() * t / threads).max(from);
        let hk = |i: usize| hash_key(&leaves[i].0.to_be_bytes(), pm.kh.min(8));
        while at < leaves.len() && at > 0 && hk(at) == hk(at - 1) {
            at += 1;
        }
        parts.push(&leaves[from..at]);
        from = at;
    }
    parts.push(&leaves[from..]);
    std::thread::scope(|s| {
        let handles: Vec<_> = parts.into_iter().map(|p| s.spawn(move || insert_sorted(pm, table, p))).collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().unwrap_or_else(|_| Err(Error::Corrupt("recovery thread panicked".into()))))
    })
}

fn insert_sorted(pm: &Pm, table: &HashTable, leaves: &[(u64, u64)]) -> Result<()> {
    /// How far ahead recovery prefetches leaves (about the misses one insert overlaps).
    const PREFETCH_AHEAD: usize = 8;
    // SAFETY: recovery: the other threads insert leaves of other hash keys, and nothing
    // writes a leaf meanwhile.
    let ks = unsafe { PmKeys::new(&pm.pool) };
    let mut i = 0;
    while i < leaves.len() {
        let (hk, depth) = ks.with_key(leaves[i].1, |k| (hash_key(k, pm.kh), k.len().min(pm.kh)));
        i = table.with_or_create(hk, depth, |art| {
            let mut j = i;
            while j < leaves.len() {
                let leaf = leaves[j].1;
                // Leaves sorted by key lie at random places in the pool: fetch the line
                // of a leaf a few steps ahead while this one is inserted.
                if let Some(&(_, ahead)) = leaves.get(j + PREFETCH_AHEAD) {
                    pm.pool.prefetch(ahead);
                }
                let r = ks.with_key(leaf, |key| {
                    if hash_key(key, pm.kh) != hk {
                        return Ok(false);
                    }
                    match art.insert(key, leaf, &ks) {
                        Ok(()) => Ok(true),
                        Err(other) => {
                            Err(Error::Corrupt(format!("two used leaves ({other:#x} and {leaf:#x}) hold the same key")))
                        }
                    }
                })?;
                if !r {
                    break;
                }
                j += 1;
            }
            Ok::<usize, Error>(j)
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hart::{Hart, Options};
    use pmkv_substrate::{Mode, PoolOptions};
    use std::os::unix::fs::FileExt;

    use pmkv_testutil::pool_dir;

    fn opts() -> PoolOptions {
        PoolOptions::default().mode(Mode::Adr).initial_size(4 << 20)
    }

    fn create(path: &std::path::Path) -> Hart {
        Hart::open(Arc::new(Pool::create(path, "hart", &opts()).unwrap()), Options::default()).unwrap()
    }

    fn reopen(path: &std::path::Path) -> Result<Hart> {
        Hart::open(Arc::new(Pool::open(path, Some("hart"), &opts()).unwrap()), Options::default())
    }

    fn get(h: &Hart, k: &[u8]) -> Option<Vec<u8>> {
        let mut out = None;
        h.get_with(k, &mut |v| out = Some(v.to_vec())).unwrap();
        out
    }

    /// A pool whose leaves or values were corrupted on disk gives errors, never a read
    /// outside the mapping or a panic.
    #[test]
    fn corrupt_leaves_and_values_are_errors() {
        let dir = pool_dir();
        let path = dir.path().join("c.pool");
        let (leaf, value) = {
            let h = create(&path);
            h.put(b"key", b"a value too long to be inline").unwrap();
            let mut leaf = 0;
            h.pm.alloc.for_each_used(LEAF, |l| leaf = l);
            (leaf, read_u64(&h.pm.pool, leaf + LEAF_P_VALUE))
        };
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        // A value length far beyond the pool: `get` reports corruption.
        let mut saved = [0u8; 4];
        file.read_exact_at(&mut saved, value).unwrap();
        file.write_all_at(&u32::MAX.to_le_bytes(), value).unwrap();
        {
            let h = reopen(&path).unwrap();
            assert!(matches!(h.get_with(b"key", &mut |_| {}), Err(Error::Corrupt(_))));
            assert!(matches!(h.check(), Err(Error::Corrupt(_))));
        }
        file.write_all_at(&saved, value).unwrap();
        // A leaf naming a value outside the pool, or a misaligned one: open reports
        // corruption.
        for bad in [1u64 << 40, value + 3] {
            file.write_all_at(&bad.to_le_bytes(), leaf + LEAF_P_VALUE).unwrap();
            let r = reopen(&path);
            assert!(matches!(r, Err(Error::Corrupt(_))), "{:?}", r.err());
        }
        file.write_all_at(&value.to_le_bytes(), leaf + LEAF_P_VALUE).unwrap();
        // A leaf claiming an inline value of 15 bytes (at most 8 fit): open reports
        // corruption.
        file.write_all_at(&((FLAG_VALUE_INLINE | 15 << 8) as u16).to_le_bytes(), leaf + LEAF_META + 2).unwrap();
        let r = reopen(&path);
        assert!(matches!(r, Err(Error::Corrupt(_))), "{:?}", r.err());
    }

    /// A closed pool holding `key` = `value`: its directory, path, superblock offset and
    /// the file opened for patching, with a reader of the superblock's version field.
    struct Closed {
        _dir: pmkv_testutil::TempDir,
        path: std::path::PathBuf,
        sb: u64,
        file: std::fs::File,
    }

    impl Closed {
        fn new(key: &[u8], value: &[u8]) -> Closed {
            let dir = pool_dir();
            let path = dir.path().join("v.pool");
            let sb = {
                let h = create(&path);
                h.put(key, value).unwrap();
                h.pool().root(SUPER_ROOT)
            };
            let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
            Closed { _dir: dir, path, sb, file }
        }

        fn version(&self) -> u32 {
            let mut b = [0u8; 4];
            self.file.read_exact_at(&mut b, self.sb + 8).unwrap();
            u32::from_le_bytes(b)
        }

        fn set_version(&self, v: u32) {
            self.file.write_all_at(&v.to_le_bytes(), self.sb + 8).unwrap();
        }
    }

    /// Pools of the formats before checksums (1, 2) and of unknown ones are refused with a
    /// version error, and nothing past the pool header (whose open/close state slots change
    /// on every open) is written.
    #[test]
    fn format_versions() {
        let c = Closed::new(b"old", b"a value too long to be inline");
        let path = &c.path;
        assert_eq!(c.version(), SUPER_VERSION);
        for v in [1u32, 2, SUPER_VERSION + 1] {
            c.set_version(v);
            let before = std::fs::read(path).unwrap();
            let r = reopen(path);
            let msg = format!("{:?}", r.as_ref().err());
            assert!(matches!(r, Err(Error::Version(_))), "{msg}");
            assert!(v > SUPER_VERSION || msg.contains("older pmkv"), "{msg}");
            drop(r);
            assert!(std::fs::read(path).unwrap()[4096..] == before[4096..]);
        }
        c.set_version(SUPER_VERSION);
        let h = reopen(path).unwrap();
        assert_eq!(get(&h, b"old").as_deref(), Some(&b"a value too long to be inline"[..]));
    }

    /// An inline value updated into the leaf's second slot: the update's previous check
    /// is dropped once durable, so a flipped bit in the new slot is damage at open, never
    /// a silent return of the old value still intact in the other slot. Both slots read
    /// back across reopens.
    #[test]
    fn damage_to_the_second_slot_is_not_hidden_by_the_first() {
        let dir = pool_dir();
        let path = dir.path().join("b.pool");
        let leaf = {
            let h = create(&path);
            h.put(b"short key", b"1111").unwrap();
            h.put(b"short key", b"2222").unwrap(); // into slot B
            let mut leaf = 0;
            h.pm.alloc.for_each_used(LEAF, |l| leaf = l);
            assert_eq!(read_u64(&h.pm.pool, leaf + LEAF_SLOT_B) as u32, u32::from_le_bytes(*b"2222"));
            leaf
        };
        assert_eq!(get(&reopen(&path).unwrap(), b"short key").as_deref(), Some(&b"2222"[..]));
        {
            let h = reopen(&path).unwrap();
            h.put(b"short key", b"3333").unwrap(); // back into slot A
        }
        let h = reopen(&path).unwrap();
        assert_eq!(get(&h, b"short key").as_deref(), Some(&b"3333"[..]));
        h.put(b"short key", b"4444").unwrap();
        drop(h);
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let mut b = [0u8; 1];
        file.read_exact_at(&mut b, leaf + LEAF_SLOT_B).unwrap();
        assert_eq!(b[0], b'4');
        file.write_all_at(&[b[0] ^ 1], leaf + LEAF_SLOT_B).unwrap();
        let r = reopen(&path);
        assert!(matches!(r, Err(Error::Corrupt(_))), "{:?}", r.as_ref().map(|h| get(h, b"short key")));
    }

    /// Pools of versions 3 (before the second value slot) and 4 (before the insert log)
    /// open, read as they are, and are marked the current version by a writable open,
    /// before any update can use slot B or any insert a lane word; a read-only open leaves
    /// them as they were.
    #[test]
    fn older_versions_open_and_are_marked_current() {
        for v in SUPER_VERSION_MIN..SUPER_VERSION {
            let c = Closed::new(b"k", b"12345678");
            c.set_version(v);
            {
                let pool = Arc::new(Pool::open_read_only(&c.path, Some("hart"), &opts()).unwrap());
                let h = Hart::open(pool, Options::default()).unwrap();
                assert_eq!(get(&h, b"k").as_deref(), Some(&b"12345678"[..]));
            }
            assert_eq!(c.version(), v);
            let h = reopen(&c.path).unwrap();
            assert_eq!(c.version(), SUPER_VERSION);
            h.put(b"k", b"87654321").unwrap();
            h.put(b"k2", b"2").unwrap();
            h.put(b"k3", b"3").unwrap();
            assert_eq!(get(&h, b"k").as_deref(), Some(&b"87654321"[..]));
        }
    }

    /// Version 8: an insert's bit is not persisted, so after a crash its leaf may sit in a
    /// free slot; recovery takes it back if it passes every check, counts it, and sets its
    /// bit. A torn one (its value check never reached PM) stays free, and the rest opens.
    /// Damage to a leaf whose bit is set still fails the open.
    #[test]
    fn a_leaf_whose_bit_was_lost_is_adopted_and_a_torn_one_stays_free() {
        let sim = pmkv_testutil::sim_opts(1 << 20);
        let h = Hart::open(Arc::new(Pool::create_sim("hart", &sim).unwrap()), Options::default()).unwrap();
        for i in 0..4u8 {
            h.put(&[b'a' + i], &[i]).unwrap();
        }
        let mut leaves = Vec::new();
        h.pm.alloc.for_each_used(LEAF, |l| leaves.push(l));
        let (first, last) = (leaves[0], *leaves.iter().max().unwrap());
        let img = h.pool().sim().unwrap().image_now(h.pool(), pmkv_substrate::Eviction::None);
        drop(h);
        let open =
            |img: &[u8]| Hart::open(Arc::new(Pool::from_image(img, Some("hart"), &sim).unwrap()), Options::default());
        // Only what was flushed and fenced: the leaves, not their bits.
        let h = open(&img).unwrap();
        assert_eq!(h.recovery_report().detail_u64("inserts_adopted"), Some(4));
        assert_eq!(h.len(), 4);
        h.check().unwrap();
        drop(h);
        // Tear the last insert: its value check word never reached PM.
        let mut torn = img.clone();
        torn[(last + LEAF_VCHECK) as usize..][..8].fill(0);
        let h = open(&torn).unwrap();
        assert_eq!(h.recovery_report().detail_u64("inserts_adopted"), Some(3));
        assert_eq!(h.len(), 3, "the torn insert is undone, the others kept");
        assert_eq!(get(&h, b"a").as_deref(), Some(&[0u8][..]));
        h.check().unwrap();
        // Once the bits are set (the open above persisted them), the same damage to a
        // used leaf fails the open.
        let mut img = h.pool().sim().unwrap().image_now(h.pool(), pmkv_substrate::Eviction::None);
        drop(h);
        img[(first + LEAF_VCHECK) as usize..][..8].fill(0);
        let r = open(&img);
        assert!(matches!(r, Err(Error::Corrupt(_))), "{:?}", r.err());
    }

    /// A version-7 delete's erase mark was a plain store, which a crash could lose: such a
    /// deleted leaf sits in a free slot and passes its checks. The writable open that
    /// upgrades the pool to version 8 erases it before marking the version, so the
    /// record does not come back (version-8 recovery adopts complete leaves in free slots).
    #[test]
    fn the_upgrade_to_8_erases_deleted_leaves_that_lost_their_erase_mark() {
        let sim = pmkv_testutil::sim_opts(1 << 20);
        let h = Hart::open(Arc::new(Pool::create_sim("hart", &sim).unwrap()), Options::default()).unwrap();
        h.put(b"gone", b"1").unwrap();
        h.put(b"kept", b"2").unwrap();
        let mut leaves = Vec::new();
        h.pm.alloc.for_each_used(LEAF, |l| leaves.push(l));
        let leaf =
            *leaves.iter().find(|&&l| read_u32(&h.pm.pool, l + LEAF_KEY) == u32::from_le_bytes(*b"gone")).unwrap();
        let meta_word = read_u64(&h.pm.pool, leaf + LEAF_META);
        assert!(h.delete(b"gone").unwrap());
        let sb = h.pool().root(SUPER_ROOT);
        let mut img = h.pool().sim().unwrap().image_now(h.pool(), pmkv_substrate::Eviction::None);
        drop(h);
        // A version-7 pool whose delete of "gone" lost its erase mark.
        img[(sb + 8) as usize..][..4].copy_from_slice(&7u32.to_le_bytes());
        img[(leaf + LEAF_META) as usize..][..8].copy_from_slice(&meta_word.to_le_bytes());
        let h = Hart::open(Arc::new(Pool::from_image(&img, Some("hart"), &sim).unwrap()), Options::default()).unwrap();
        assert_eq!(get(&h, b"gone"), None);
        assert_eq!(get(&h, b"kept").as_deref(), Some(&b"2"[..]));
        assert_eq!(read_u32(&h.pm.pool, sb + 8), SUPER_VERSION);
        assert!(is_erased(leaf, read_u64(&h.pm.pool, leaf + LEAF_META)));
        // And a crash right after the upgrade keeps it so.
        let img = h.pool().sim().unwrap().image_now(h.pool(), pmkv_substrate::Eviction::None);
        drop(h);
        let h = Hart::open(Arc::new(Pool::from_image(&img, Some("hart"), &sim).unwrap()), Options::default()).unwrap();
        assert_eq!(get(&h, b"gone"), None);
        assert_eq!(h.len(), 1);
    }

    /// An insert into a slot whose previous leaf was deleted, torn so that only its meta
    /// word reached PM, must not come back with the deleted record's value: the new
    /// leaf's generation makes the old value check fail (`insert::fresh_gen`).
    #[test]
    fn a_torn_reinsert_into_a_deleted_slot_does_not_resurrect_the_old_value() {
        let sim = pmkv_testutil::sim_opts(1 << 20);
        let h = Hart::open(Arc::new(Pool::create_sim("hart", &sim).unwrap()), Options::default()).unwrap();
        h.put(b"k", b"old").unwrap();
        let mut leaves = Vec::new();
        h.pm.alloc.for_each_used(LEAF, |l| leaves.push(l));
        let leaf = leaves[0];
        assert!(h.delete(b"k").unwrap());
        let before = h.pool().sim().unwrap().image_now(h.pool(), pmkv_substrate::Eviction::None);
        h.put(b"k", b"new").unwrap();
        let mut l2 = Vec::new();
        h.pm.alloc.for_each_used(LEAF, |l| l2.push(l));
        assert_eq!(l2, vec![leaf], "the slot is reused");
        let after = h.pool().sim().unwrap().image_now(h.pool(), pmkv_substrate::Eviction::None);
        drop(h);
        let open =
            |img: &[u8]| Hart::open(Arc::new(Pool::from_image(img, Some("hart"), &sim).unwrap()), Options::default());
        // Every mix of the slot's 8 words, old or new.
        for mask in 0..256u32 {
            let mut img = before.clone();
            for w in 0..8 {
                if mask & (1 << w) != 0 {
                    let at = leaf as usize + 8 * w;
                    img[at..at + 8].copy_from_slice(&after[at..at + 8]);
                }
            }
            let h = open(&img).unwrap();
            let v = get(&h, b"k");
            assert!(v.is_none() || v.as_deref() == Some(&b"new"[..]), "mix {mask:#x}: {v:?}");
        }
    }

    /// After a crash a used leaf whose line was zeroed (a zeroed page of leaves) is damage,
    /// not a delete to finish: deletes write the erase mark, not 0 (version 6). A used leaf
    /// that carries the mark is a delete the crash cut short, finished by the open.
    #[test]
    fn after_a_crash_a_zeroed_leaf_is_damage_and_an_erased_one_a_delete() {
        let sim = pmkv_testutil::sim_opts(1 << 20);
        let h = Hart::open(Arc::new(Pool::create_sim("hart", &sim).unwrap()), Options::default()).unwrap();
        for i in 0..4u8 {
            h.put(&[b'a' + i], &[i; 20]).unwrap();
        }
        let mut leaves = Vec::new();
        h.pm.alloc.for_each_used(LEAF, |l| leaves.push(l));
        let first = leaves[0];
        let open =
            |img: &[u8]| Hart::open(Arc::new(Pool::from_image(img, Some("hart"), &sim).unwrap()), Options::default());
        // An open persists the bits the inserts left unpersisted (version 8).
        let img = h.pool().sim().unwrap().image_now(h.pool(), pmkv_substrate::Eviction::None);
        drop(h);
        let h = open(&img).unwrap();
        let img = h.pool().sim().unwrap().image_now(h.pool(), pmkv_substrate::Eviction::None);
        drop(h);
        let mut zeroed = img.clone();
        zeroed[first as usize..][..LEAF_SIZE].fill(0);
        let r = open(&zeroed);
        assert!(matches!(&r, Err(Error::Corrupt(m)) if m.contains("meta word is zero")), "{:?}", r.err());
        let mut erased = img.clone();
        erased[(first + LEAF_META) as usize..][..8].copy_from_slice(&erased_word(first, 0).to_le_bytes());
        let h = open(&erased).unwrap();
        assert_eq!(h.len(), 3, "the delete is finished");
        h.check().unwrap();
    }
}
