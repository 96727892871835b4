//! SPEC M5/M6/M8 under the crash simulator (SPEC P6): batches of writes to a Mangosteen
//! region, with a crash at every flush and fence point — log appends, the commit fence,
//! the tail persist, the backend's apply and head advance — and during recovery itself.
//! Each image must recover to exactly the state after some prefix of the batches that
//! includes every batch acknowledged before the crash, and pass the allocator's checker
//! (nothing leaked).

use pmkv_mangosteen::{Log, Mangosteen, Options};
use pmkv_substrate::epalloc::EpAlloc;
use pmkv_substrate::{Eviction, PointKind, Pool};
use pmkv_testutil::{sim_opts, CrashFindings};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const SIZE: u64 = 4096;

fn opts() -> Options {
    // A small ring, so that batches wrap around it and wait for the backend.
    Options { region_size: SIZE, ring_records: 24, ..Options::default() }
}

/// The batches: each writes a few overlapping ranges (deduplicated into blocks).
fn batches() -> Vec<Vec<(u64, Vec<u8>)>> {
    batches_in(SIZE)
}

/// The batches for a region of `size` bytes (a multiple of `SIZE`): the same writes,
/// their offsets spread over the region; 24 of them, 48 in a larger region (whose
/// writes land in more lines).
fn batches_in(size: u64) -> Vec<Vec<(u64, Vec<u8>)>> {
    (0..if size > SIZE { 48 } else { 24u64 })
        .map(|b| {
            (0..1 + b % 4)
                .map(|i| {
                    let off = ((b * 97 + i * 61) * (size / SIZE)) % (size - 40);
                    (off, vec![(b * 7 + i) as u8 + 1; 1 + ((b + i) % 40) as usize])
                })
                .collect()
        })
        .collect()
}

/// The region after the first `n` batches.
fn after(n: usize) -> Vec<u8> {
    after_in(SIZE, n)
}

/// The region of `size` bytes after the first `n` of `batches_in(size)`.
fn after_in(size: u64, n: usize) -> Vec<u8> {
    let mut r = vec![0u8; size as usize];
    for batch in &batches_in(size)[..n] {
        for (off, bytes) in batch {
            r[*off as usize..*off as usize + bytes.len()].copy_from_slice(bytes);
        }
    }
    r
}

fn recover(img: &[u8], o: Options) -> Result<Vec<u8>, String> {
    let pool = Arc::new(Pool::from_image(img, Some("mangosteen"), &sim_opts(1 << 20)).map_err(|e| e.to_string())?);
    let m = Mangosteen::open(pool.clone(), o).map_err(|e| e.to_string())?;
    let region = m.read(|r| r.to_vec());
    drop(m);
    EpAlloc::open(pool).map_err(|e| e.to_string())?.check().map_err(|e| format!("leak or damage: {e}"))?;
    Ok(region)
}

#[test]
fn m8_every_crash_point_of_a_batch_recovers_a_prefix_with_every_acknowledged_batch() {
    let images = every_crash_point_recovers(opts());
    assert!(images > 500);
}

/// The inline backend's apply window also closes once its batches wrote 64 distinct
/// lines (`APPLY_LINES`), long before their records fill 512 slots: a region of 64 KiB
/// with the batches spread over it and a ring of 2,048 slots, where no window closes by
/// its slots and the ring never fills. The head moves before the store closes only if
/// the lines closed a window; every crash point recovers as with the small ring.
#[test]
fn a_window_closed_by_its_lines_recovers_at_every_crash_point() {
    let o = Options { region_size: 64 << 10, ring_records: 2048, ..Options::default() };
    // Recoveries replay up to a window here (64 lines): crash every 40th.
    let images = every_crash_point_recovers_then(
        o,
        40,
        Some(&|m: &Mangosteen| {
            let (head, tail) = m.log_indices();
            assert!(head > 0 && tail < 512, "head {head}, tail {tail}: no window closed by its lines");
            assert!(tail > head, "the last window is still open");
        }),
    );
    assert!(images > 200, "{images} images");
}

/// The no-deduplication ablation (`dedup: false`, the paper's Fig. 7) logs each captured
/// block as a run of its own in capture order, duplicates included: another record shape
/// (more runs, the same block more than once) through the same writer and replay, so it
/// gets its own images. Replay must apply the runs in order for the last write to win.
#[test]
fn without_deduplication_every_crash_point_recovers_a_prefix() {
    let images = every_crash_point_recovers(Options { dedup: false, ..opts() });
    assert!(images > 500, "{images} images");
}

/// The per-write baseline (`Log::PerWrite`): every write is logged and fenced as it is
/// made, many fences per batch, and yet a crash at any of them leaves the state before or
/// after the batch in flight: its records lie past the persistent tail until its COMMIT.
#[test]
fn per_write_logging_recovers_the_state_before_or_after_the_batch_at_every_crash_point() {
    let o = Options { log: Log::PerWrite, ..opts() };
    let pool = Arc::new(Pool::create_sim("mangosteen", &sim_opts(1 << 20)).unwrap());
    let m = Mangosteen::open(pool.clone(), o).unwrap();
    let fences = Arc::new(AtomicUsize::new(0));
    let f = fences.clone();
    pool.sim().unwrap().set_hook(true, move |pt| {
        if pt.kind == PointKind::Fence {
            f.fetch_add(1, Ordering::Relaxed);
        }
    });
    let batch = &batches()[3];
    m.batch(|tx| {
        for (off, bytes) in batch {
            tx.write(*off, bytes).unwrap();
        }
    })
    .unwrap();
    pool.sim().unwrap().clear_hook();
    // One fence per write, then the commit's.
    assert!(fences.load(Ordering::Relaxed) > batch.len(), "{} fences", fences.load(Ordering::Relaxed));
    drop(m);
    let images = every_crash_point_recovers(o);
    assert!(images > 1000, "{images} images");
}

/// A batch that aborts (`Tx::abort`) before every batch: the rollback brings the PM copy
/// to the committed state (the inline backend applies its deferred records, flushed) and
/// drops the aborted batch's per-write records. A crash at any of those points, or at the
/// next batches', recovers a prefix with every acknowledged batch and nothing of the
/// aborted ones; batched with a ring that wraps, and per-write.
#[test]
fn aborted_batches_leave_nothing_at_every_crash_point() {
    for o in [opts(), Options { log: Log::PerWrite, ..opts() }] {
        let images = every_crash_point_recovers_with(o, 5, None, true);
        assert!(images > 500, "{images} images");
    }
}

/// Run every batch with a crash image at every flush and fence point; returns how many
/// images were recovered.
fn every_crash_point_recovers(o: Options) -> u64 {
    every_crash_point_recovers_then(o, 5, None)
}

/// [`every_crash_point_recovers`], crashing the recovery of every `nested`-th image, then
/// `after_run` on the store before it closes.
fn every_crash_point_recovers_then(o: Options, nested: u64, after_run: Option<&dyn Fn(&Mangosteen)>) -> u64 {
    every_crash_point_recovers_with(o, nested, after_run, false)
}

/// [`every_crash_point_recovers_then`], with an aborted batch before each batch if `aborts`.
fn every_crash_point_recovers_with(
    o: Options,
    nested: u64,
    after_run: Option<&dyn Fn(&Mangosteen)>,
    aborts: bool,
) -> u64 {
    let pool = Arc::new(Pool::create_sim("mangosteen", &sim_opts(1 << 20)).unwrap());
    let m = Mangosteen::open(pool.clone(), o).unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let found = CrashFindings::new();
    let (f, d) = (found.clone(), done.clone());
    let twice = Arc::new(AtomicUsize::new(0));
    let tw = twice.clone();
    pool.sim().unwrap().set_hook(true, move |pt| {
        let acked = d.load(Ordering::Acquire);
        f.check_images(pt, Eviction::standard(pt.index), "", |img| {
            let got = recover(img, o)?;
            // Acknowledged batches are there; the one in flight is there whole or not at all.
            if got != after_in(o.region_size, acked) && got != after_in(o.region_size, acked + 1) {
                return Err(format!("the region is no prefix with the {acked} acknowledged batches"));
            }
            // Crash the recovery itself at each of its points (every 5th image, to keep
            // the run short) and recover again: the same region.
            if pt.index % nested == 0 {
                let pool2 = Arc::new(Pool::from_image(img, Some("mangosteen"), &sim_opts(1 << 20)).unwrap());
                let imgs = Arc::new(parking_lot::Mutex::new(Vec::new()));
                let sink = imgs.clone();
                pool2.sim().unwrap().set_hook(true, move |p2| sink.lock().push(p2.image(Eviction::Words(p2.index))));
                let m2 = Mangosteen::open(pool2.clone(), o).map_err(|e| e.to_string())?;
                pool2.sim().unwrap().clear_hook();
                drop(m2);
                for i2 in imgs.lock().iter() {
                    if recover(i2, o)? != got {
                        return Err("recovery crashed and recovered again gives another region".into());
                    }
                    tw.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(())
        });
    });
    for (i, batch) in batches_in(o.region_size).iter().enumerate() {
        if aborts {
            let e = m
                .batch(|tx| {
                    for (off, bytes) in batch {
                        tx.write(*off, &vec![0xEE; bytes.len()]).unwrap();
                    }
                    tx.abort();
                })
                .unwrap_err();
            assert!(matches!(e, pmkv_mangosteen::Error::Aborted), "{e}");
            assert_eq!(m.read(|r| r.to_vec()), after_in(o.region_size, i), "batch {i}: rolled back");
        }
        m.batch(|tx| {
            for (off, bytes) in batch {
                tx.write(*off, bytes).unwrap();
            }
        })
        .unwrap();
        done.store(i + 1, Ordering::Release);
    }
    pool.sim().unwrap().clear_hook();
    found.assert_none("Mangosteen crash consistency");
    eprintln!(
        "mangosteen: {} crash images recovered; {} images of crashed recoveries recovered again",
        found.images(),
        twice.load(Ordering::Relaxed)
    );
    assert!(twice.load(Ordering::Relaxed) > 0);
    assert_eq!(m.read(|r| r.to_vec()), after_in(o.region_size, batches_in(o.region_size).len()));
    if let Some(check) = after_run {
        check(&m);
    }
    found.images()
}

/// The backend on its own thread: batches commit while it applies, the ring wraps many
/// times, and a reopen sees exactly every batch.
#[test]
fn m6_background_backend_keeps_up_and_reopen_sees_every_batch() {
    let dir = pmkv_testutil::pool_dir();
    let path = dir.path().join("m.pool");
    let o = Options { background: true, ..opts() };
    {
        let pool = Arc::new(Pool::create(&path, "mangosteen", &pmkv_testutil::small_opts()).unwrap());
        let m = Mangosteen::open(pool, o).unwrap();
        for round in 0..20 {
            for batch in batches() {
                m.batch(|tx| {
                    for (off, bytes) in &batch {
                        let v: Vec<u8> = bytes.iter().map(|b| b.wrapping_add(round)).collect();
                        tx.write(*off, &v).unwrap();
                    }
                })
                .unwrap();
            }
        }
        m.quiesce().unwrap();
    }
    let mut want = vec![0u8; SIZE as usize];
    for round in 0..20u8 {
        for batch in batches() {
            for (off, bytes) in batch {
                let v: Vec<u8> = bytes.iter().map(|b| b.wrapping_add(round)).collect();
                want[off as usize..off as usize + v.len()].copy_from_slice(&v);
            }
        }
    }
    let pool = Arc::new(Pool::open(&path, Some("mangosteen"), &pmkv_testutil::small_opts()).unwrap());
    let m = Mangosteen::open(pool, o).unwrap();
    assert_eq!(m.read(|r| r.to_vec()), want);
    // Out-of-region writes are errors, and the batch's other writes still commit.
    let r = m.batch(|tx| {
        tx.write(0, b"ok").unwrap();
        tx.write(SIZE - 1, b"xx")
    });
    assert!(r.unwrap().is_err());
    assert_eq!(m.read(|r| r[..2].to_vec()), b"ok");
}

/// A clean image after the first five batches, rewritten to format 2 (the two formats
/// differ only in the ring's records, which a clean pool holds none of), with the
/// superblock's offset in the image.
fn format_2_image() -> (Vec<u8>, usize) {
    let pool = Arc::new(Pool::create_sim("mangosteen", &sim_opts(1 << 20)).unwrap());
    let m = Mangosteen::open(pool.clone(), opts()).unwrap();
    for batch in &batches()[..5] {
        m.batch(|tx| {
            for (off, bytes) in batch {
                tx.write(*off, bytes).unwrap();
            }
        })
        .unwrap();
    }
    m.quiesce().unwrap();
    drop(m);
    let mut img = pool.sim().unwrap().image_now(&pool, Eviction::None);
    let sb = img.windows(8).position(|w| w == b"MANGOST1").expect("the superblock");
    assert_eq!(img[sb + 8..sb + 12], 3u32.to_le_bytes(), "a new pool is of format 3");
    img[sb + 8..sb + 12].copy_from_slice(&2u32.to_le_bytes());
    let crc = crc32fast::hash(&img[sb..sb + 60]);
    img[sb + 60..sb + 64].copy_from_slice(&crc.to_le_bytes());
    (img, sb)
}

/// The superblock's format version in an image (the root may have moved to a new one).
fn version_of(img: &[u8]) -> Vec<u32> {
    img.windows(8)
        .enumerate()
        .filter(|(_, w)| *w == b"MANGOST1")
        .map(|(at, _)| u32::from_le_bytes(img[at + 8..at + 12].try_into().unwrap()))
        .collect()
}

/// A format-2 pool is moved to format 3 at its first writable open (a copy of the
/// superblock with the new version, then the pool root moved to it, then the old one
/// freed): a crash at every flush and fence of that open leaves a pool that opens with
/// the same region and nothing leaked, and a completed open leaves format 3 alone.
#[test]
fn the_move_from_format_2_survives_a_crash_at_every_point() {
    let (img, _) = format_2_image();
    let want = after(5);
    let pool = Arc::new(Pool::from_image(&img, Some("mangosteen"), &sim_opts(1 << 20)).unwrap());
    let imgs = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let sink = imgs.clone();
    pool.sim().unwrap().set_hook(true, move |p| sink.lock().push(p.image(Eviction::Words(p.index))));
    let m = Mangosteen::open(pool.clone(), opts()).unwrap();
    pool.sim().unwrap().clear_hook();
    assert_eq!(m.read(|r| r.to_vec()), want);
    drop(m);
    let done = pool.sim().unwrap().image_now(&pool, Eviction::None);
    assert!(version_of(&done).contains(&3));
    let imgs = imgs.lock();
    assert!(imgs.len() >= 3, "{} crash points in the upgrading open", imgs.len());
    for (i, img) in imgs.iter().enumerate() {
        assert_eq!(recover(img, opts()), Ok(want.clone()), "crash point {i} of the move to format 3");
        // The allocator's check cannot see an unnamed superblock (it is a used object):
        // count them. After an open, the one the root names is the only one.
        let pool = Arc::new(Pool::from_image(img, Some("mangosteen"), &sim_opts(1 << 20)).unwrap());
        drop(Mangosteen::open(pool.clone(), opts()).unwrap());
        let mut supers = 0;
        EpAlloc::open(pool).unwrap().for_each_used(pmkv_substrate::epalloc::TypeId(1), |_| supers += 1);
        assert_eq!(supers, 1, "crash point {i}: superblocks after the open");
    }
}

/// A format-2 pool that crashed with a committed batch in its ring: the batch's format-2
/// records are replayed, then the pool moves to format 3 and takes new batches.
#[test]
fn a_crashed_format_2_ring_is_replayed() {
    let (mut img, sb) = format_2_image();
    let word = |img: &[u8], at: usize| u64::from_le_bytes(img[at..at + 8].try_into().unwrap());
    let (cap, ring, head) = (word(&img, sb + 16), word(&img, sb + 32) as usize, word(&img, sb + 64));
    assert_eq!(head, word(&img, sb + 128), "a clean pool's ring is empty");
    // Format 2's records: a REDO of the 32 bytes at region offset 64, then a COMMIT; each
    // one slot: kind, length, offset or batch, the bytes, the index, CRC-32C of 60 bytes.
    let record = |idx: u64, w: [u64; 6]| {
        let mut r = [w[0], w[1], w[2], w[3], w[4], w[5], idx, 0];
        let seven: [u64; 7] = r[..7].try_into().unwrap();
        r[7] = (pmkv_substrate::checksum::crc32c_words_then(seven, 0) as u64) << 32;
        r
    };
    let data = u64::from_le_bytes([0xAB; 8]);
    let recs = [record(head, [1 | 32 << 32, 64, data, data, data, data]), record(head + 1, [2, 9, 0, 0, 0, 0])];
    for (i, r) in recs.iter().enumerate() {
        let at = ring + ((head + i as u64) % cap) as usize * 64;
        for (j, w) in r.iter().enumerate() {
            img[at + 8 * j..at + 8 * j + 8].copy_from_slice(&w.to_le_bytes());
        }
    }
    img[sb + 128..sb + 136].copy_from_slice(&(head + 2).to_le_bytes());
    let mut want = after(5);
    want[64..96].fill(0xAB);
    assert_eq!(recover(&img, opts()), Ok(want.clone()));
    let pool = Arc::new(Pool::from_image(&img, Some("mangosteen"), &sim_opts(1 << 20)).unwrap());
    let m = Mangosteen::open(pool.clone(), opts()).unwrap();
    assert_eq!(m.recovery().rolled_forward, 2, "two format-2 records replayed");
    m.batch(|tx| tx.write(0, &[5; 8]).unwrap()).unwrap();
    want[..8].fill(5);
    assert_eq!(m.read(|r| r.to_vec()), want);
}
