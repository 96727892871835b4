//! SPEC H7: concurrent writers on different and on the same ARTs, readers, scans (both
//! directions) and `check` during writes. Results are checked, not only the absence of
//! crashes: every value a reader sees is one some writer wrote for that key, scans are
//! sorted, `check` (which waits for a quiescent HART) finds nothing wrong, and the final
//! contents are exactly what the writers left.

mod common;
use common::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Values name their key and round (out of line: longer than 8 bytes).
const VALUE_LEN: usize = 12;

#[test]
fn writers_readers_and_scans() {
    let h = Arc::new(sim_hart(16 << 20, 2));
    // Simulated pools are slow to flush only with a hook; none is installed here.
    let stop = Arc::new(AtomicBool::new(false));
    // Writers start once every reader has gone round once: on a busy machine they could
    // otherwise finish before a reader was scheduled, and nothing would be checked
    // concurrently.
    let ready = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..3u8)
        .map(|w| {
            let (h, ready) = (h.clone(), ready.clone());
            std::thread::spawn(move || {
                while ready.load(Ordering::Acquire) < 4 {
                    std::thread::yield_now();
                }
                // Writer 0 and 1 share hash keys ("aa"); writer 2 has its own ("zz").
                let prefix = if w == 2 { "zz" } else { "aa" };
                for round in 0..3u32 {
                    for i in 0..1500u32 {
                        let k = format!("{prefix}{w}-{i:05}");
                        h.put(k.as_bytes(), &tagged_value(k.as_bytes(), round, VALUE_LEN)).unwrap();
                    }
                    for i in (0..1500u32).filter(|i| i % 5 == round % 5) {
                        let k = format!("{prefix}{w}-{i:05}");
                        h.delete(k.as_bytes()).unwrap();
                    }
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..4)
        .map(|r| {
            let (h, stop, ready) = (h.clone(), stop.clone(), ready.clone());
            std::thread::spawn(move || {
                let mut checks = 0u64;
                let mut rounds = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if rounds == 1 {
                        ready.fetch_add(1, Ordering::AcqRel);
                    }
                    rounds += 1;
                    if r == 0 {
                        for i in (0..1500u32).step_by(37) {
                            for (p, w) in [("aa", 0), ("aa", 1), ("zz", 2)] {
                                let k = format!("{p}{w}-{i:05}");
                                if let Some(v) = get(&h, k.as_bytes()) {
                                    assert!(tag_of(k.as_bytes(), &v).is_some(), "{k} has foreign value {v:02x?}");
                                    checks += 1;
                                }
                            }
                        }
                    } else if r == 3 {
                        h.check().unwrap();
                        checks += 1;
                    } else {
                        let reverse = r == 2;
                        let mut last: Option<Vec<u8>> = None;
                        h.scan(&pmkv_core::KeyRange::from(&b"aa1"[..]), 2000, reverse, &mut |k, v| {
                            if let Some(l) = &last {
                                assert!((l.as_slice() < k) != reverse, "scan not sorted");
                            }
                            assert!(tag_of(k, v).is_some(), "scan pairs key and value wrongly");
                            last = Some(k.to_vec());
                            checks += 1;
                            true
                        })
                        .unwrap();
                    }
                }
                checks
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let seen: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(seen > 0, "readers checked nothing");
    let mut want = Model::new();
    for w in 0..3u8 {
        let prefix = if w == 2 { "zz" } else { "aa" };
        for i in 0..1500u32 {
            // Last round is 2: keys with i % 5 == 2 were deleted after it.
            if i % 5 != 2 {
                let k = format!("{prefix}{w}-{i:05}").into_bytes();
                want.insert(k.clone(), tagged_value(&k, 2, VALUE_LEN));
            }
        }
    }
    assert_eq!(contents(&h), want);
    h.check().unwrap();
}

/// ARTs created and freed (SPEC H6) over and over while readers, scans, `len` and `check`
/// run: the table finds ARTs without a lock of its own, and a freed ART's cell is reused
/// for the next hash key, so a reader may lock a cell that meanwhile holds another ART (it
/// must see that and look again, never read the other ART as this hash key's). Both
/// indexes: direct (k_h = 2) and the sharded map (k_h = 3).
#[test]
fn arts_created_and_freed_under_readers() {
    for kh in [2usize, 3] {
        let h = Arc::new(sim_hart(16 << 20, kh));
        let stop = Arc::new(AtomicBool::new(false));
        // Each round a writer puts 4 keys into one ART, reads them back and deletes them.
        // Writers 0 and 1 share their hash keys (round by round), so one's deletes free
        // the ART the other is about to write; writer 2 has its own.
        let key = move |w: u8, round: u32, i: u32| -> Vec<u8> {
            let hk = [b'a' + w / 2, b'a' + (round % 26) as u8, b'a' + (round / 26 % 26) as u8];
            let mut k = hk[..kh].to_vec();
            k.extend(format!("-{w}-{i}").bytes());
            k
        };
        const ROUNDS: u32 = 2000;
        let writers: Vec<_> = (0..3u8)
            .map(|w| {
                let h = h.clone();
                std::thread::spawn(move || {
                    for round in 0..ROUNDS {
                        for i in 0..4 {
                            let k = key(w, round, i);
                            h.put(&k, &tagged_value(&k, round, VALUE_LEN)).unwrap();
                        }
                        for i in 0..4 {
                            let k = key(w, round, i);
                            assert_eq!(get(&h, &k), Some(tagged_value(&k, round, VALUE_LEN)), "{k:?}");
                        }
                        for i in 0..4 {
                            assert!(h.delete(&key(w, round, i)).unwrap());
                        }
                        assert_eq!(get(&h, &key(w, round, 0)), None);
                    }
                })
            })
            .collect();
        let readers: Vec<_> = (0..3u32)
            .map(|r| {
                let (h, stop) = (h.clone(), stop.clone());
                std::thread::spawn(move || {
                    let (mut seen, mut x) = (0u64, 0x9e37_79b9u32 ^ r);
                    while !stop.load(Ordering::Relaxed) {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        match r {
                            0 => {
                                let k = key((x % 3) as u8, x / 3 % ROUNDS, x / 7 % 4);
                                if let Some(v) = get(&h, &k) {
                                    assert!(tag_of(&k, &v).is_some(), "{k:?} has foreign value {v:02x?}");
                                    seen += 1;
                                }
                            }
                            1 => {
                                h.scan(&pmkv_core::KeyRange::all(), 64, x % 2 == 0, &mut |k, v| {
                                    assert!(tag_of(k, v).is_some(), "scan pairs key and value wrongly");
                                    seen += 1;
                                    true
                                })
                                .unwrap();
                            }
                            _ => {
                                assert!(h.len() <= 12);
                                h.check().unwrap();
                                seen += 1;
                            }
                        }
                    }
                    seen
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(h.len(), 0);
        assert!(contents(&h).is_empty());
        h.check().unwrap();
    }
}
