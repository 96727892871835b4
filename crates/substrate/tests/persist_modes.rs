//! Persistence modes (SPEC P3), counters (SPEC P4) and latency emulation (SPEC P5).
//!
//! One workload function runs unchanged in every mode; what differs is only what the
//! counters say (and, in `adr`, the emulated write latency).

use pmkv_substrate::counters::{self, Counters};
use pmkv_substrate::{Latency, Mode, Pool, PoolOptions, ReadModel, LINE};
use pmkv_testutil::{pool_dir, pool_opts, read_bytes, write_bytes};
use std::path::Path;
use std::time::{Duration, Instant};

const LAYOUT: &str = "modes";

fn opts(mode: Mode) -> PoolOptions {
    pool_opts(mode, 256 << 10, 1 << 20)
}

/// Fill `len` bytes at `off` with a byte pattern.
fn fill(pool: &Pool, off: u64, len: usize, seed: u8) {
    let pattern: Vec<u8> = (0..len).map(|i| seed.wrapping_add(i as u8)).collect();
    write_bytes(pool, off, &pattern);
}

/// What the workload does, in units the counters must report.
const WL_LINES: u64 = 100 + 10 * 3 + 64 + 1;
const WL_FENCES: u64 = 100 + 10 + 1;
const WL_READS: u64 = 17;
const WL_AREA: u64 = 20 << 10;

/// The same engine code for every mode: small persists inside one line, unaligned persists
/// across line boundaries, a batch of flushes ordered by one fence, an empty flush, and
/// reported reads. Each persist (and the batch) is one operation ([`counters::begin_op`]):
/// the lines it dirties count once per operation. Returns the area it wrote.
fn workload(pool: &Pool, area: u64) {
    assert_eq!(area % LINE as u64, 0);
    // 100 persists of 8 bytes, each inside one line.
    for i in 0..100u64 {
        counters::begin_op();
        let off = area + 8 * i;
        fill(pool, off, 8, i as u8);
        pool.persist_off(off, 8);
    }
    // 10 persists of 100 bytes starting 40 bytes into a line: 3 lines each.
    for i in 0..10u64 {
        counters::begin_op();
        let off = area + 4096 + 40 + 256 * i;
        fill(pool, off, 100, 100 + i as u8);
        pool.persist_off(off, 100);
    }
    // 65 lines flushed by two flushes, one fence for both.
    counters::begin_op();
    fill(pool, area + 8192, 4096, 7);
    fill(pool, area + 16384, 64, 9);
    pool.flush_off(area + 8192, 4096);
    pool.flush_off(area + 16384, 64);
    pool.flush_off(area + 16384, 0);
    pool.fence();
    pool.note_read_at(area, WL_READS as usize * 64);
}

fn expected(mode: Mode) -> Counters {
    let (flushes, fences) = match mode {
        Mode::Adr | Mode::Msync | Mode::Wal => (WL_LINES, WL_FENCES),
        Mode::Eadr => (0, WL_FENCES),
        Mode::None => (0, 0),
    };
    Counters { flushes, fences, lines_written: WL_LINES, lines_read: WL_READS, lines_missed: 0 }
}

fn run_file(dir: &Path, mode: Mode) -> (Counters, Vec<u8>) {
    let path = dir.join(format!("{mode}.pool"));
    let pool = Pool::create(&path, LAYOUT, &opts(mode)).unwrap();
    let area = pool.take_heap(WL_AREA, 4096).unwrap();
    pool.set_root(0, area);
    let c0 = counters::snapshot();
    workload(&pool, area);
    let c = counters::snapshot().since(&c0);
    let bytes = read_bytes(&pool, area, WL_AREA as usize);
    drop(pool);
    // What the workload wrote is in the file after reopening (in any mode).
    let pool = Pool::open(&path, Some(LAYOUT), &opts(Mode::None)).unwrap();
    assert_eq!(read_bytes(&pool, pool.root(0), WL_AREA as usize), bytes, "{mode}: content after reopen");
    (c, bytes)
}

#[test]
fn p3_p4_same_code_in_every_mode_counters_per_mode() {
    let dir = pool_dir();
    let mut contents = Vec::new();
    for mode in Mode::ALL {
        let (c, bytes) = run_file(dir.path(), mode);
        assert_eq!(c, expected(mode), "{mode}: counters of the workload");
        contents.push(bytes);
    }
    assert!(contents.windows(2).all(|w| w[0] == w[1]), "every mode computes the same content");
    assert!(contents[0].iter().any(|&b| b != 0));
}

#[test]
fn p4_counters_of_the_named_cases() {
    // adr: flushes == lines, one fence per persist.
    let pool = Pool::create_sim(LAYOUT, &opts(Mode::Adr)).unwrap();
    let off = pool.take_heap(4096, 64).unwrap();
    let c0 = counters::snapshot();
    counters::begin_op();
    pool.persist_off(off, 64 * 5);
    counters::begin_op();
    pool.persist_off(off + 1, 64); // unaligned: 2 lines
    let c = counters::snapshot().since(&c0);
    assert_eq!(c, Counters { flushes: 7, fences: 2, lines_written: 7, lines_read: 0, lines_missed: 0 });

    // One operation flushing a line twice: by default each flushed line counts (7), with
    // exact counting the line dirtied once counts once (5 distinct lines).
    for (exact, lines) in [(false, 7), (true, 5)] {
        counters::set_exact(exact);
        let c0 = counters::snapshot();
        counters::begin_op();
        pool.persist_off(off, 64 * 5);
        pool.persist_off(off + 1, 64);
        let c = counters::snapshot().since(&c0);
        assert_eq!(
            c,
            Counters { flushes: 7, fences: 2, lines_written: lines, lines_read: 0, lines_missed: 0 },
            "exact {exact}"
        );
    }
    counters::set_exact(false);

    // eadr: no flush instructions, but lines written and fences are counted.
    let pool = Pool::create_sim(LAYOUT, &opts(Mode::Eadr)).unwrap();
    let c0 = counters::snapshot();
    counters::begin_op();
    pool.persist_off(off, 64 * 5);
    counters::begin_op();
    pool.persist_off(off + 1, 64);
    let c = counters::snapshot().since(&c0);
    assert_eq!(c, Counters { flushes: 0, fences: 2, lines_written: 7, lines_read: 0, lines_missed: 0 });

    // With exact counting, stores dirty lines in every mode, flushed or not: three words
    // in two lines, a failed compare-and-swap (which writes nothing), then a bulk write
    // the engine reports, overlapping one of those lines. By default stores count nothing.
    for mode in [Mode::Adr, Mode::Eadr, Mode::None] {
        let pool = Pool::create_sim(LAYOUT, &opts(mode)).unwrap();
        let off = pool.take_heap(4096, 64).unwrap();
        let c0 = counters::snapshot();
        // SAFETY: the words lie in the heap area just taken; nothing else references them.
        unsafe {
            pool.store_u64(off, 1);
            assert_eq!(pool.cas_u64(off + 8, 0, 6), Ok(0));
        }
        pool.note_write(off + 64, 192);
        assert_eq!(counters::snapshot().since(&c0).lines_written, 0, "{mode}: exact counting off");
        counters::set_exact(true);
        let c0 = counters::snapshot();
        counters::begin_op();
        // SAFETY: the words lie in the heap area just taken; nothing else references them.
        unsafe {
            pool.store_u64(off, 1);
            pool.store_u64(off + 8, 2);
            pool.store_u32(off + 64, 3);
            assert_eq!(pool.cas_u64(off + 128, 5, 6), Err(0));
        }
        let c = counters::snapshot().since(&c0);
        assert_eq!(c.lines_written, 2, "{mode}: two lines stored to, one CAS that failed");
        pool.note_write(off + 64, 192);
        let c = counters::snapshot().since(&c0);
        assert_eq!(c.lines_written, 4, "{mode}: the bulk write adds the two lines not yet dirtied");
        assert_eq!(c.flushes, 0, "{mode}: stores alone flush nothing");
        counters::begin_op();
        // SAFETY: as above.
        unsafe { pool.store_u64(off, 7) };
        assert_eq!(counters::snapshot().since(&c0).lines_written, 5, "{mode}: a new operation counts the line again");
        counters::set_exact(false);
    }

    // none: no flushes, no fences; lines still counted (they are the engine's writes).
    let pool = Pool::create_sim(LAYOUT, &opts(Mode::None)).unwrap();
    let c0 = counters::snapshot();
    counters::begin_op();
    pool.persist_off(off, 64 * 5);
    pool.fence();
    pool.note_read_at(off, 3 * 64);
    pool.note_read_at(off + 1, 0);
    let c = counters::snapshot().since(&c0);
    assert_eq!(c, Counters { flushes: 0, fences: 0, lines_written: 5, lines_read: 3, lines_missed: 0 });

    // Simulated pools count exactly like file pools: the same workload, the same numbers.
    for mode in [Mode::Adr, Mode::Eadr, Mode::None] {
        let pool = Pool::create_sim(LAYOUT, &opts(mode)).unwrap();
        let area = pool.take_heap(WL_AREA, 4096).unwrap();
        let c0 = counters::snapshot();
        workload(&pool, area);
        assert_eq!(counters::snapshot().since(&c0), expected(mode), "{mode} (simulated)");
    }
}

#[test]
fn p4_counters_are_per_thread() {
    let dir = pool_dir();
    let pool = Pool::create(dir.path().join("t.pool"), LAYOUT, &opts(Mode::Adr)).unwrap();
    let off = pool.take_heap(64 << 10, 64).unwrap();
    let main0 = counters::snapshot();
    let per_thread: Vec<Counters> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3u64)
            .map(|t| {
                let pool = &pool;
                s.spawn(move || {
                    let c0 = counters::snapshot();
                    assert_eq!(c0, Counters::default(), "a new thread starts at zero");
                    for i in 0..(10 * (t + 1)) {
                        counters::begin_op();
                        let o = off + (t * 16 + i % 16) * 1024;
                        fill(pool, o, 64, i as u8);
                        pool.persist_off(o, 64);
                    }
                    pool.note_read_at(off, t as usize * 64);
                    counters::snapshot().since(&c0)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (t, c) in per_thread.iter().enumerate() {
        let n = 10 * (t as u64 + 1);
        assert_eq!(*c, Counters { flushes: n, fences: n, lines_written: n, lines_read: t as u64, lines_missed: 0 });
    }
    assert_eq!(counters::snapshot(), main0, "other threads' work is not counted here");
    let sum = per_thread.iter().fold(Counters::default(), |a, c| a.add(c));
    assert_eq!(sum, Counters { flushes: 60, fences: 60, lines_written: 60, lines_read: 3, lines_missed: 0 });
}

#[test]
fn p5_latency_is_zero_by_default() {
    assert_eq!(Latency::default(), Latency::NONE);
    assert_eq!(Latency::parse("300/100"), Some(Latency::per_line(300, 100)));
    let o = PoolOptions::default();
    if std::env::var_os("PMKV_LATENCY").is_none() {
        assert_eq!(o.latency, Latency::NONE);
    }
    let pool = Pool::create_sim(LAYOUT, &opts(Mode::Adr)).unwrap();
    assert_eq!(pool.latency(), Latency::NONE);
}

/// Charged per fence, every fence after a flush waits the write latency once: a lower
/// bound, as above (the model itself, per line or per fence, is unit-tested in `latency`).
#[test]
fn p5_write_latency_charged_per_fence_adds_at_least_one_latency_per_fence() {
    let lat = Latency { charge: pmkv_substrate::Charge::Fence, ..Latency::per_line(2000, 0) };
    let pool = Pool::create_sim(LAYOUT, &opts(Mode::Adr).latency(lat)).unwrap();
    let off = pool.take_heap(64 << 10, 64).unwrap();
    let t = Instant::now();
    for i in 0..100u64 {
        pool.persist_off(off + 256 * i, 256);
    }
    let took = t.elapsed();
    assert!(took >= Duration::from_micros(150), "100 persists took {took:?}");
}

/// Emulated latency is a busy wait, so it guarantees a lower bound on elapsed time; only
/// that bound (with a 25% margin for TSC calibration) is asserted — never an upper one.
#[test]
fn p5_write_and_read_latency_add_at_least_the_configured_time() {
    let lat = Latency::per_line(2000, 3000);
    let pool = Pool::create_sim(LAYOUT, &opts(Mode::Adr).latency(lat)).unwrap();
    assert_eq!(pool.latency(), lat);
    let off = pool.take_heap(64 << 10, 64).unwrap();

    // 100 persists of one line: at least 100 × 2 µs of emulated write latency.
    let t = Instant::now();
    for i in 0..100u64 {
        pool.persist_off(off + 64 * i, 8);
    }
    let writes = t.elapsed();
    assert!(writes >= Duration::from_micros(150), "100 one-line persists took {writes:?}");

    // 50 persists of 4 lines: latency is per flushed line (≥ 50 × 4 × 2 µs).
    let t = Instant::now();
    for i in 0..50u64 {
        pool.persist_off(off + 256 * i, 256);
    }
    let wide = t.elapsed();
    assert!(wide >= Duration::from_micros(300), "50 four-line persists took {wide:?}");

    // Reads: 100 reported lines at 3 µs.
    let t = Instant::now();
    for _ in 0..100 {
        pool.note_read_at(off, 64);
    }
    let reads = t.elapsed();
    assert!(reads >= Duration::from_micros(225), "100 line reads took {reads:?}");
    let t = Instant::now();
    pool.note_read_at(off, 100 * 64);
    assert!(t.elapsed() >= Duration::from_micros(225));
}

/// The cache model charges misses only: a line read again is a hit, a line flushed in
/// `adr` misses again (clflush evicts), a line written in `eadr` hits; a run of
/// contiguous missing lines pays once. Counted exactly, timed as a lower bound only.
#[test]
fn p5_the_cache_model_charges_only_the_lines_that_miss() {
    let extra = 20_000; // ns above DRAM's, per run of missing lines
    let lat = Latency::per_line(0, (pmkv_substrate::latency::dram_ns() + extra) as u32)
        .with_reads(ReadModel::Llc { kib: 1024 });
    let missed = |pool: &Pool, off: u64, len: usize| {
        let c0 = counters::snapshot();
        pool.note_read_at(off, len);
        let c = counters::snapshot().since(&c0);
        assert_eq!(c.lines_read, len.div_ceil(64) as u64);
        c.lines_missed
    };
    let pool = Pool::create_sim(LAYOUT, &opts(Mode::Adr).latency(lat)).unwrap();
    let off = pool.take_heap(64 << 10, 64).unwrap();
    let t = Instant::now();
    assert_eq!(missed(&pool, off, 64), 1, "first read: a miss");
    assert!(t.elapsed() >= Duration::from_micros(15), "a miss waits: {:?}", t.elapsed());
    for _ in 0..100 {
        assert_eq!(missed(&pool, off, 64), 0, "cached");
    }
    assert_eq!(missed(&pool, off, 4 * 64), 3, "three new lines beside a cached one");
    pool.persist_off(off + 64, 64);
    assert_eq!(missed(&pool, off, 4 * 64), 1, "adr: the flushed line left the cache");
    // Eight contiguous missing lines wait once (≥ 15 µs), not eight times: timed as a
    // lower bound only, so the one-run rule is checked by the counters above and the
    // unit tests of the model.
    let t = Instant::now();
    assert_eq!(missed(&pool, off + 8192, 8 * 64), 8);
    assert!(t.elapsed() >= Duration::from_micros(15));

    let pool = Pool::create_sim(LAYOUT, &opts(Mode::Eadr).latency(lat)).unwrap();
    let off = pool.take_heap(64 << 10, 64).unwrap();
    fill(&pool, off + 4096, 128, 1);
    pool.persist_off(off + 4096, 128);
    assert_eq!(missed(&pool, off + 4096, 128), 0, "eadr: written lines stay cached");

    // Reads no slower than DRAM's cost nothing and the model is not run.
    let pool = Pool::create_sim(
        LAYOUT,
        &opts(Mode::Adr).latency(Latency::per_line(300, 1).with_reads(ReadModel::Llc { kib: 1024 })),
    )
    .unwrap();
    let off = pool.take_heap(64 << 10, 64).unwrap();
    assert_eq!(missed(&pool, off, 64), 0);
}
