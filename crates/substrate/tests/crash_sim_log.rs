//! SPEC P6: the crash simulator catches ordering bugs.
//!
//! A tiny persistent append-only log lives in this file: a committed-count word on its own
//! cache line, followed by 24-byte entries (so entries straddle line boundaries). Appending
//! entry `k` is
//!
//! 1. write the entry, 2. persist it, 3. write `count = k + 1`, 4. persist the count.
//!
//! The deliberately broken variant drops the fence between the entry and the count: it
//! writes both and only then persists them, so a cache may evict the count line to PM
//! before the entry line. Every flush and every fence of a run is a crash point; at each
//! one the test takes the standard crash images (nothing evicted, everything evicted, a
//! random half of the dirty lines, a random half of the dirty 8-byte words), recovers a
//! pool from each and checks the log's invariant:
//!
//! * the recovered count is the value before or after the append in flight, and
//! * every entry below the count is exactly what was appended.
//!
//! The correct variant must pass at every image; the broken one must be caught.

use pmkv_substrate::{CrashPoint, Eviction, Mode, PointKind, Pool, PoolOptions};
use pmkv_testutil::{pool_opts, read_bytes, write_bytes, CrashFindings};
use std::sync::{Arc, Mutex};

const LAYOUT: &str = "crashlog";
const ENTRY: u64 = 24;
const APPENDS: u64 = 1000;
/// Offset of the entries from the start of the log region (the count has line 0).
const ENTRIES_AT: u64 = 64;
/// Phase value while the log is being created.
const SETUP: u64 = u64::MAX;

fn opts(mode: Mode) -> PoolOptions {
    // 128 KiB: the simulator compares the whole pool at every image, so keep it small.
    pool_opts(mode, 128 << 10, 128 << 10)
}

fn entry_bytes(k: u64) -> [u8; ENTRY as usize] {
    let a = (k + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut e = [0u8; ENTRY as usize];
    e[0..8].copy_from_slice(&(k + 1).to_le_bytes());
    e[8..16].copy_from_slice(&a.to_le_bytes());
    e[16..24].copy_from_slice(&(!a).to_le_bytes());
    e
}

/// The log: root 0 holds the offset of its region.
struct Log<'a> {
    pool: &'a Pool,
    off: u64,
}

impl<'a> Log<'a> {
    fn create(pool: &'a Pool, capacity: u64, phase: &Phase) -> Log<'a> {
        let off = pool.take_heap(ENTRIES_AT + capacity * ENTRY, 64).unwrap();
        write_bytes(pool, off, &0u64.to_le_bytes());
        pool.persist_off(off, 8);
        phase.lock().unwrap().log_off = off;
        pool.set_root(0, off);
        Log { pool, off }
    }

    /// Append entry `k` (the log holds `k` entries). `ORDERED = false` is the bug.
    fn append<const ORDERED: bool>(&self, k: u64) {
        let e = self.off + ENTRIES_AT + k * ENTRY;
        write_bytes(self.pool, e, &entry_bytes(k));
        if ORDERED {
            self.pool.persist_off(e, ENTRY as usize);
            write_bytes(self.pool, self.off, &(k + 1).to_le_bytes());
            self.pool.persist_off(self.off, 8);
        } else {
            write_bytes(self.pool, self.off, &(k + 1).to_le_bytes());
            self.pool.persist_off(e, ENTRY as usize);
            self.pool.persist_off(self.off, 8);
        }
    }
}

/// Recover a log from a crash image and check it against the append in flight
/// (`in_flight == SETUP` while the log is created).
fn check(image: &[u8], mode: Mode, in_flight: u64, log_off: u64) -> Result<(), String> {
    let pool = Pool::from_image(image, Some(LAYOUT), &opts(mode)).map_err(|e| format!("recovery failed: {e}"))?;
    let root = pool.root(0);
    if root == 0 {
        return if in_flight == SETUP { Ok(()) } else { Err("log root lost".into()) };
    }
    if root != log_off {
        return Err(format!("root {root:#x}, log is at {log_off:#x}"));
    }
    let count = u64::from_le_bytes(read_bytes(&pool, root, 8).try_into().unwrap());
    let allowed = if in_flight == SETUP { 0..=0 } else { in_flight..=in_flight + 1 };
    if !allowed.contains(&count) {
        return Err(format!("count {count}, expected {allowed:?}"));
    }
    for k in 0..count {
        let got = read_bytes(&pool, root + ENTRIES_AT + k * ENTRY, ENTRY as usize);
        if got != entry_bytes(k) {
            return Err(format!("count {count} but entry {k} is {got:02x?}"));
        }
    }
    Ok(())
}

#[derive(Default)]
struct Stats {
    in_flight: u64,
    log_off: u64,
    points: u64,
    flush_points: u64,
    images: u64,
    failures: u64,
    first_failure: Option<String>,
}

type Phase = Arc<Mutex<Stats>>;

fn on_point(stats: &Phase, mode: Mode, pt: &CrashPoint<'_>) {
    let mut s = stats.lock().unwrap();
    s.points += 1;
    if pt.kind == PointKind::Flush {
        s.flush_points += 1;
    }
    for ev in Eviction::standard(pt.index) {
        let img = pt.image(ev);
        s.images += 1;
        if let Err(e) = check(&img, mode, s.in_flight, s.log_off) {
            s.failures += 1;
            if s.first_failure.is_none() {
                s.first_failure = Some(format!("crash point {} ({:?}), {ev:?}: {e}", pt.index, pt.kind));
            }
        }
    }
}

/// Run `appends` appends with a crash check at every flush and fence; returns the stats.
fn run<const ORDERED: bool>(mode: Mode, appends: u64) -> Stats {
    let pool = Pool::create_sim(LAYOUT, &opts(mode)).unwrap();
    let sim = pool.sim().unwrap();
    let stats: Phase = Arc::new(Mutex::new(Stats { in_flight: SETUP, ..Default::default() }));
    let hook_stats = stats.clone();
    sim.set_hook(true, move |pt| on_point(&hook_stats, mode, pt));

    let log = Log::create(&pool, appends, &stats);
    for k in 0..appends {
        stats.lock().unwrap().in_flight = k;
        log.append::<ORDERED>(k);
    }
    sim.clear_hook();
    // After the run, with no crash: the full log, whatever the caches still hold.
    for ev in Eviction::standard(sim.points()) {
        let img = sim.image_now(&pool, ev);
        let s = stats.lock().unwrap();
        assert_eq!(check(&img, mode, appends - 1, s.log_off), Ok(()), "final image {ev:?}");
        // The last append ended with a fence: everything is persistent now.
        let recovered = Pool::from_image(&img, Some(LAYOUT), &opts(mode)).unwrap();
        let count = u64::from_le_bytes(read_bytes(&recovered, s.log_off, 8).try_into().unwrap());
        assert_eq!(count, appends, "final count with {ev:?}");
    }
    drop(pool);
    Arc::try_unwrap(stats).ok().unwrap().into_inner().unwrap()
}

#[test]
fn p6_correct_log_survives_every_crash_point() {
    let t = std::time::Instant::now();
    let s = run::<true>(Mode::Adr, APPENDS);
    println!(
        "P6 correct log (adr): {} appends, {} crash points ({} at flushes), {} images checked, {} failures, {:?}",
        APPENDS,
        s.points,
        s.flush_points,
        s.images,
        s.failures,
        t.elapsed()
    );
    assert_eq!(s.failures, 0, "first failure: {:?}", s.first_failure);
    // Every flush and every fence is a crash point: setup makes 3 persists (heap top,
    // count, root) and each append 2, each persist one flush and one fence.
    assert_eq!(s.flush_points, 3 + 2 * APPENDS);
    assert_eq!(s.points, 2 * (3 + 2 * APPENDS));
    assert_eq!(s.images, 4 * s.points);
}

#[test]
fn p6_broken_log_is_caught() {
    let t = std::time::Instant::now();
    let s = run::<false>(Mode::Adr, APPENDS);
    println!(
        "P6 broken log (adr, no fence between entry and count): {} crash points, {} images checked, \
         {} failing images, first: {}, {:?}",
        s.points,
        s.images,
        s.failures,
        s.first_failure.as_deref().unwrap_or("-"),
        t.elapsed()
    );
    assert!(s.failures > 0, "the simulator did not catch the missing fence");
    // The failure is the one the bug allows: a committed count ahead of its entry.
    let first = s.first_failure.unwrap();
    assert!(first.contains("but entry"), "{first}");
}

#[test]
fn p6_eadr_needs_only_ordering() {
    // In eadr the caches are persistent: a crash image is what the CPU sees, stores reach
    // it in program order, so the log is correct with fences alone (and even the variant
    // without the middle fence is correct there, because x86 stores are not reordered).
    let s = run::<true>(Mode::Eadr, 300);
    assert_eq!(s.failures, 0, "first failure: {:?}", s.first_failure);
    assert_eq!(s.flush_points, 600 + 3, "eadr still reports every flush call as a crash point");
    let s = run::<false>(Mode::Eadr, 300);
    assert_eq!(s.failures, 0, "first failure: {:?}", s.first_failure);
}

#[test]
fn p6_crash_during_growth_recovers() {
    // A pool that grows while a hook watches: at every crash point of the growth steps
    // (file extent, header state slot), every image must recover, with the old or the new
    // size and the data written before the growth intact.
    let o = pool_opts(Mode::Adr, 16 << 10, 256 << 10);
    let pool = Pool::create_sim(LAYOUT, &o).unwrap();
    let a = pool.take_heap(4096, 64).unwrap();
    write_bytes(&pool, a, &[0xab; 4096]);
    pool.persist_off(a, 4096);
    let sim = pool.sim().unwrap();
    let found = CrashFindings::new();
    let sizes: Arc<Mutex<Vec<u64>>> = Arc::default();
    let (f2, s2) = (found.clone(), sizes.clone());
    let o2 = o.clone();
    sim.set_hook(true, move |pt| {
        f2.check_images(pt, Eviction::standard(pt.index), "growth", |img| {
            let p = Pool::from_image(img, Some(LAYOUT), &o2).map_err(|e| e.to_string())?;
            s2.lock().unwrap().push(p.size());
            if read_bytes(&p, a, 4096) != [0xab; 4096] {
                return Err("data lost".into());
            }
            Ok(())
        });
    });
    let mut grown = vec![pool.size()];
    while pool.size() < 256 << 10 {
        pool.take_heap(8 << 10, 64).unwrap();
        if *grown.last().unwrap() != pool.size() {
            grown.push(pool.size());
        }
    }
    sim.clear_hook();
    found.assert_none("growth is not crash consistent");
    let sizes = sizes.lock().unwrap();
    assert_eq!(grown, [16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10]);
    assert!(sizes.iter().all(|s| grown.contains(s)), "recovered sizes {sizes:?}");
    for g in &grown[1..] {
        assert!(sizes.contains(g), "some image recovers with the grown size {g}");
    }
}

/// P6 with several threads: when two threads flush the same line and fence in the
/// opposite order, the persisted image keeps the newer copy (hardware never writes an
/// older line back over a newer one).
#[test]
fn p6_newer_flush_of_a_shared_line_wins() {
    let pool = std::sync::Arc::new(Pool::create_sim(LAYOUT, &opts(Mode::Adr)).unwrap());
    let off = 16384u64;
    let (a_flushed_tx, a_flushed_rx) = std::sync::mpsc::channel();
    let (b_done_tx, b_done_rx) = std::sync::mpsc::channel();
    let p = pool.clone();
    let a = std::thread::spawn(move || {
        write_bytes(&p, off, &[1u8; 8]);
        p.flush_off(off, 8); // copy "1" captured, not yet fenced
        a_flushed_tx.send(()).unwrap();
        b_done_rx.recv().unwrap();
        p.fence(); // must not install the older copy over "2"
    });
    a_flushed_rx.recv().unwrap();
    write_bytes(&pool, off, &[2u8; 8]);
    pool.persist_off(off, 8);
    b_done_tx.send(()).unwrap();
    a.join().unwrap();
    let img = pool.sim().unwrap().image_now(&pool, pmkv_substrate::Eviction::None);
    assert_eq!(&img[off as usize..off as usize + 8], &[2u8; 8]);
}
