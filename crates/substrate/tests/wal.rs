//! Mode `wal` (redo log with group commit) on file pools: power-loss simulation at every
//! sync point with torn sectors, recovery after a process exit without close, a
//! checkpointed log, and group commit across threads.

#![cfg(feature = "crash-sim")]

use pmkv_substrate::{Durability, Mode, Pool, PoolOptions, PowerLog, SyncPolicy, Tear};
use std::path::Path;
use std::sync::Arc;

const LAYOUT: &str = "waltest";
/// Slots per writer: op `i` of a writer stores `i + 1` into slot `i % SLOTS`.
const SLOTS: u64 = 48;

fn opts(sync: SyncPolicy, checkpoint: u64) -> PoolOptions {
    PoolOptions::default()
        .mode(Mode::Wal)
        .sync(sync)
        .checkpoint_bytes(checkpoint)
        .initial_size(64 << 10)
        .max_size(64 << 20)
        .latency(pmkv_substrate::Latency::NONE)
}

fn log_of(p: &Path) -> std::path::PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".wal");
    s.into()
}

/// A writer's region: word 0 its count of operations, then `SLOTS` slots. Root `w` of
/// the header points at writer `w`'s region.
fn region_words() -> u64 {
    1 + SLOTS
}

/// One operation of writer `w` on its region at `r`: the slot store, an ordering fence,
/// then the count (committed by the operation's commit fence). A prefix of the log thus
/// holds the slot of operation `count` possibly, and nothing later.
fn op(pool: &Pool, r: u64, i: u64, grow_every: u64) {
    let slot = r + 8 * (1 + i % SLOTS);
    // SAFETY: the region lies in the pool; this writer owns it.
    unsafe { pool.store_u64(slot, i + 1) };
    pool.flush_off(slot, 8);
    pool.fence();
    if grow_every > 0 && i % grow_every == grow_every - 1 {
        // Take heap now and then, so the pool grows (a durable length change) and the
        // header slot is logged between operations.
        pool.take_heap(24 << 10, 64).unwrap();
    }
    // SAFETY: as above.
    unsafe { pool.store_u64(r, i + 1) };
    pool.flush_off(r, 8);
    pool.commit_fence();
}

/// Check writer `w`'s region in a recovered pool: its count `c` covers every acknowledged
/// operation, and the slots hold exactly operations `0..c` (plus possibly operation
/// `c`'s slot store, logged before its count).
fn check_region(pool: &Pool, w: usize, acked: u64, what: &str) -> u64 {
    let r = pool.root(w);
    assert_ne!(r, 0, "{what}: root {w} lost");
    // SAFETY: the region lies in the pool, nothing else runs.
    let c = unsafe { pool.load_u64(r) };
    assert!(c >= acked, "{what}: writer {w} recovered {c} operations, {acked} were acknowledged");
    for x in 0..SLOTS {
        // SAFETY: as above.
        let got = unsafe { pool.load_u64(r + 8 * (1 + x)) };
        let want = (0..c).rev().find(|j| j % SLOTS == x).map_or(0, |j| j + 1);
        let next = c % SLOTS == x && got == c + 1;
        assert!(got == want || next, "{what}: writer {w} slot {x} = {got}, want {want} (count {c})");
    }
    c
}

fn setup(dir: &Path, writers: usize, o: &PoolOptions) -> (Arc<Pool>, Vec<u64>) {
    let path = dir.join("p.pool");
    let pool = Pool::create(&path, LAYOUT, o).unwrap();
    let regions: Vec<u64> = (0..writers)
        .map(|w| {
            let r = pool.take_heap(8 * region_words(), 64).unwrap();
            pool.set_root(w, r);
            r
        })
        .collect();
    pool.commit_wait().unwrap();
    (Arc::new(pool), regions)
}

/// Rebuild the two files a power cut leaves and open the pool on them (which replays
/// the log), in a fresh directory.
fn recover(dir: &Path, pool_bytes: &[u8], log_bytes: &[u8]) -> Pool {
    let path = dir.join("p.pool");
    let _ = std::fs::remove_file(&path);
    std::fs::write(&path, pool_bytes).unwrap();
    std::fs::write(log_of(&path), log_bytes).unwrap();
    Pool::open(&path, Some(LAYOUT), &opts(SyncPolicy::Always, 1 << 20)).unwrap()
}

fn crash_everywhere(
    rec: &PowerLog,
    base: &(Vec<u8>, Vec<u8>),
    writers: usize,
    acked_of: impl Fn(&[u64], usize) -> u64,
) {
    let scratch = tempfile::tempdir().unwrap();
    let points = rec.sync_points();
    assert!(points.len() > 20, "only {} sync points", points.len());
    let mut checked = 0;
    for &cut in &points {
        let marks = rec.marks_before(cut);
        for tear in
            [Tear::DropAll, Tear::KeepAll, Tear::Sectors(cut as u64 * 7 + 1), Tear::Sectors(cut as u64 * 13 + 5)]
        {
            let (p, l) = rec.crash_files(&base.0, &base.1, cut, tear);
            let pool = recover(scratch.path(), &p, &l);
            assert!(!pool.was_clean(), "a crash leaves the pool unclean");
            for w in 0..writers {
                check_region(&pool, w, acked_of(&marks, w), &format!("cut {cut}/{} {tear:?}", points.len() - 1));
            }
            drop(pool);
            checked += 1;
        }
    }
    eprintln!("{checked} power-loss images recovered");
}

#[test]
fn power_loss_at_every_sync_point_keeps_a_prefix_with_every_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    // A small checkpoint threshold: several checkpoints (pool-file writes that a power
    // cut may tear) happen during the run.
    let o = opts(SyncPolicy::Always, 24 << 10);
    let (pool, regions) = setup(dir.path(), 1, &o);
    pool.sync_log().unwrap();
    let path = dir.path().join("p.pool");
    let rec = pool.record_power().unwrap();
    let base = (std::fs::read(&path).unwrap(), std::fs::read(log_of(&path)).unwrap());
    for i in 0..400 {
        op(&pool, regions[0], i, 97);
        pool.commit_wait().unwrap();
        rec.mark(i + 1);
    }
    assert!(pool.checkpoints() >= 3, "only {} checkpoints", pool.checkpoints());
    crash_everywhere(&rec, &base, 1, |m, _| m.iter().copied().max().unwrap_or(0));
}

#[test]
fn power_loss_with_concurrent_writers_sharing_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(SyncPolicy::Always, 64 << 10);
    let writers = 4;
    let (pool, regions) = setup(dir.path(), writers, &o);
    pool.sync_log().unwrap();
    let path = dir.path().join("p.pool");
    let rec = pool.record_power().unwrap();
    let base = (std::fs::read(&path).unwrap(), std::fs::read(log_of(&path)).unwrap());
    let ops = 150u64;
    std::thread::scope(|s| {
        for (w, &r) in regions.iter().enumerate() {
            let (pool, rec) = (&pool, &rec);
            s.spawn(move || {
                for i in 0..ops {
                    op(pool, r, i, 0);
                    pool.commit_wait().unwrap();
                    // Mark = writer * 1e6 + operations acknowledged.
                    rec.mark(w as u64 * 1_000_000 + i + 1);
                }
            });
        }
    });
    let syncs = rec.events().iter().filter(|e| matches!(e, pmkv_substrate::PowerEvent::Sync { .. })).count();
    eprintln!("{} acknowledged writes, {syncs} fdatasyncs", writers as u64 * ops);
    crash_everywhere(&rec, &base, writers, |m, w| {
        m.iter().filter(|&&x| x / 1_000_000 == w as u64).map(|x| x % 1_000_000).max().unwrap_or(0)
    });
}

/// A process that exits without closing (as SIGKILL leaves it: nothing of the private
/// mapping reaches the file) keeps every write acknowledged under each policy, since each
/// acknowledgement wrote its record to the kernel.
#[test]
fn an_unclosed_pool_keeps_every_acknowledged_write_under_each_policy() {
    for sync in SyncPolicy::ALL {
        let dir = tempfile::tempdir().unwrap();
        let o = opts(sync, 1 << 20);
        let (pool, regions) = setup(dir.path(), 1, &o);
        // The pool reports its policy, and with it what a power loss keeps.
        let d = pool.durability();
        assert_eq!(d.sync, Some(sync));
        assert_eq!(d, Durability::new(d.medium, Mode::Wal).with_sync(sync));
        assert_eq!(pool.sync_policy(), Some(sync));
        for i in 0..100 {
            op(&pool, regions[0], i, 0);
            pool.commit_wait().unwrap();
        }
        // Leave the pool as a killed process would: copy the files while it is open.
        let path = dir.path().join("p.pool");
        let p = std::fs::read(&path).unwrap();
        let l = std::fs::read(log_of(&path)).unwrap();
        assert!(!l.is_empty(), "{sync}: acknowledged writes are in the log");
        drop(pool);
        let scratch = tempfile::tempdir().unwrap();
        let pool = recover(scratch.path(), &p, &l);
        assert!(!pool.was_clean());
        assert_eq!(check_region(&pool, 0, 100, sync.name()), 100, "{sync}");
    }
}

/// A clean close checkpoints: the log is empty, the pool file holds everything, and any
/// mode opens it.
#[test]
fn close_checkpoints_and_empties_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(SyncPolicy::Always, 1 << 20);
    let (pool, regions) = setup(dir.path(), 1, &o);
    for i in 0..50 {
        op(&pool, regions[0], i, 10);
    }
    pool.commit_wait().unwrap();
    Arc::into_inner(pool).unwrap().close().unwrap();
    let path = dir.path().join("p.pool");
    assert_eq!(std::fs::metadata(log_of(&path)).unwrap().len(), 0);
    let pool = Pool::open(&path, Some(LAYOUT), &PoolOptions::default().mode(Mode::Adr)).unwrap();
    assert!(pool.was_clean());
    assert_eq!(check_region(&pool, 0, 50, "after close"), 50);
}

/// A log left by another pool of the same name is neither replayed nor appended after.
#[test]
fn a_stale_log_of_another_pool_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.pool");
    let o = opts(SyncPolicy::Always, 1 << 20);
    let (pool, regions) = setup(dir.path(), 1, &o);
    for i in 0..20 {
        op(&pool, regions[0], i, 0);
    }
    pool.commit_wait().unwrap();
    let stale = std::fs::read(log_of(&path)).unwrap();
    drop(pool);
    std::fs::remove_file(&path).unwrap();
    std::fs::write(log_of(&path), &stale).unwrap();
    let (pool, regions) = setup(dir.path(), 1, &o);
    for i in 0..5 {
        op(&pool, regions[0], i, 0);
        pool.commit_wait().unwrap();
    }
    let p = std::fs::read(&path).unwrap();
    let l = std::fs::read(log_of(&path)).unwrap();
    drop(pool);
    let scratch = tempfile::tempdir().unwrap();
    let pool = recover(scratch.path(), &p, &l);
    assert_eq!(check_region(&pool, 0, 5, "new pool"), 5);
}

/// A read-only open of a pool whose log holds records is refused (replaying writes).
#[test]
fn a_read_only_open_refuses_a_log_to_replay() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(SyncPolicy::Always, 1 << 20);
    let (pool, regions) = setup(dir.path(), 1, &o);
    op(&pool, regions[0], 0, 0);
    pool.commit_wait().unwrap();
    let path = dir.path().join("p.pool");
    let (p, l) = (std::fs::read(&path).unwrap(), std::fs::read(log_of(&path)).unwrap());
    drop(pool);
    std::fs::write(&path, p).unwrap();
    std::fs::write(log_of(&path), l).unwrap();
    let e = Pool::open_read_only(&path, Some(LAYOUT), &PoolOptions::default()).err().unwrap();
    assert!(matches!(e, pmkv_substrate::PoolError::NeedsRecovery { .. }), "{e}");
}

/// After a checkpoint the log file is written again from its start, not truncated and
/// regrown: its length stays a whole number of zero-filled 4 MiB steps across checkpoints
/// (so an `fdatasync` journals no new size), and what lies past the newest records —
/// older records of this process — is never replayed.
#[test]
fn the_log_file_is_reused_after_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(SyncPolicy::Always, 16 << 10);
    let (pool, regions) = setup(dir.path(), 1, &o);
    let path = dir.path().join("p.pool");
    let mut lengths = std::collections::BTreeSet::new();
    for i in 0..300 {
        op(&pool, regions[0], i, 0);
        pool.commit_wait().unwrap();
        lengths.insert(std::fs::metadata(log_of(&path)).unwrap().len());
    }
    assert!(pool.checkpoints() >= 3, "only {} checkpoints", pool.checkpoints());
    assert_eq!(lengths.into_iter().collect::<Vec<_>>(), vec![4 << 20], "the log file was resized");
    // A crash now: the log holds this cycle's records, then older ones of earlier cycles.
    let p = std::fs::read(&path).unwrap();
    let l = std::fs::read(log_of(&path)).unwrap();
    drop(pool);
    let scratch = tempfile::tempdir().unwrap();
    let pool = recover(scratch.path(), &p, &l);
    assert_eq!(check_region(&pool, 0, 300, "reused log"), 300);
}
