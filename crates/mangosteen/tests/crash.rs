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
    (0..24u64)
        .map(|b| {
            (0..1 + b % 4)
                .map(|i| {
                    let off = (b * 97 + i * 61) % (SIZE - 40);
                    (off, vec![(b * 7 + i) as u8 + 1; 1 + ((b + i) % 40) as usize])
                })
                .collect()
        })
        .collect()
}

/// The region after the first `n` batches.
fn after(n: usize) -> Vec<u8> {
    let mut r = vec![0u8; SIZE as usize];
    for batch in &batches()[..n] {
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

/// Run every batch with a crash image at every flush and fence point; returns how many
/// images were recovered.
fn every_crash_point_recovers(o: Options) -> u64 {
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
            if got != after(acked) && got != after(acked + 1) {
                return Err(format!("the region is no prefix with the {acked} acknowledged batches"));
            }
            // Crash the recovery itself at each of its points (every 5th image, to keep
            // the run short) and recover again: the same region.
            if pt.index % 5 == 0 {
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
    for (i, batch) in batches().iter().enumerate() {
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
    assert_eq!(m.read(|r| r.to_vec()), after(batches().len()));
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
