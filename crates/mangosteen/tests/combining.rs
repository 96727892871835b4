//! SPEC M2: flat combining under many threads. Writers increment their own counter and a
//! shared one in each request (a read-modify-write of the region); readers check, while
//! they run, that every state they see has the shared counter equal to the sum of the
//! others (no request seen half applied). At the end every increment is there — no
//! request lost or run twice — in the DRAM copy and, after a reopen, in the PM copy; a
//! panicking request is re-raised in its own writer and leaves the others' alone.

use pmkv_mangosteen::{Mangosteen, Options};
use pmkv_substrate::Pool;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

const WRITERS: u64 = 4;
const EACH: u64 = 300;

fn counter(r: &[u8], i: u64) -> u64 {
    u64::from_le_bytes(r[(8 * i) as usize..(8 * i + 8) as usize].try_into().unwrap())
}

fn bump(tx: &mut pmkv_mangosteen::Tx<'_>, i: u64) {
    let v = counter(tx.region(), i) + 1;
    tx.write(8 * i, &v.to_le_bytes()).unwrap();
}

#[test]
fn m2_many_writers_share_batches_and_lose_nothing() {
    let dir = pmkv_testutil::pool_dir();
    let path = dir.path().join("fc.pool");
    let opts = Options { region_size: 4096, background: true, ..Options::default() };
    {
        let pool = Arc::new(Pool::create(&path, "mangosteen", &pmkv_testutil::small_opts()).unwrap());
        let m = Arc::new(Mangosteen::open(pool, opts).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        // Writers start only once every reader has read: on a busy machine the writers
        // (whose lock prefers them) could otherwise finish before a reader was scheduled,
        // and nothing would have been checked concurrently (this failed CI once).
        let ready = Arc::new(AtomicUsize::new(0));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (m, stop, ready) = (m.clone(), stop.clone(), ready.clone());
                std::thread::spawn(move || {
                    let mut seen = 0u64;
                    while !stop.load(Ordering::Acquire) {
                        m.read(|r| {
                            let sum: u64 = (1..=WRITERS).map(|i| counter(r, i)).sum();
                            assert_eq!(counter(r, 0), sum, "a reader saw a request half applied");
                        });
                        if seen == 0 {
                            ready.fetch_add(1, Ordering::AcqRel);
                        }
                        seen += 1;
                    }
                    seen
                })
            })
            .collect();
        while ready.load(Ordering::Acquire) < 2 {
            std::thread::yield_now();
        }
        let writers: Vec<_> = (1..=WRITERS)
            .map(|w| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..EACH {
                        m.batch(|tx| {
                            bump(tx, 0);
                            bump(tx, w);
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Release);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        // A panicking request: re-raised in its writer; the region keeps every other write.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            m.batch(|_| panic!("request failed")).unwrap();
        }));
        assert!(r.is_err());
        m.read(|r| {
            assert_eq!(counter(r, 0), WRITERS * EACH);
            for w in 1..=WRITERS {
                assert_eq!(counter(r, w), EACH);
            }
        });
        let (batches, requests) = m.batch_stats();
        eprintln!(
            "flat combining: {requests} requests in {batches} batches (B = {:.2})",
            requests as f64 / batches as f64
        );
        assert_eq!(requests, WRITERS * EACH + 1);
        m.quiesce().unwrap();
    }
    let pool = Arc::new(Pool::open(&path, Some("mangosteen"), &pmkv_testutil::small_opts()).unwrap());
    let m = Mangosteen::open(pool, opts).unwrap();
    m.read(|r| assert_eq!(counter(r, 0), WRITERS * EACH, "the PM copy holds every request"));
}

/// A batch that dirties more blocks than the redo ring holds can never commit (its COMMIT
/// would come after records the ring already overwrote): it is refused with an error, in
/// both backend modes, instead of waiting forever for room.
#[test]
fn a_batch_larger_than_the_ring_is_refused_not_waited_for() {
    for background in [false, true] {
        let dir = pmkv_testutil::pool_dir();
        let path = dir.path().join("big.pool");
        let opts = Options { region_size: 4096, ring_records: 8, background, ..Options::default() };
        let pool = Arc::new(Pool::create(&path, "mangosteen", &pmkv_testutil::small_opts()).unwrap());
        let m = Mangosteen::open(pool, opts).unwrap();
        // A batch that fits commits.
        m.batch(|tx| tx.write(0, &[1; 64]).unwrap()).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // 20 distinct 32-byte blocks: 20 REDO records and a COMMIT, in a ring of 8.
            let r = m.batch(|tx| {
                for b in 0..20u64 {
                    tx.write(b * 64, &[2; 32]).unwrap();
                }
            });
            let _ = tx.send(r.map_err(|e| e.to_string()));
        });
        let r = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("the oversized batch hung");
        let e = r.expect_err("a batch larger than the ring committed");
        assert!(e.contains("does not fit in the redo ring"), "background {background}: {e}");
    }
}
