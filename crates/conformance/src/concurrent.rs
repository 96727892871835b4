//! Concurrent readers and writers, with every result checked.

use crate::util::*;
use pmkv::{EngineFactory, KeyRange};
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};

const WRITERS: u32 = 2;
const KEYS: u32 = 400;
const OPS: u32 = 6000;

fn key(w: u32, i: u32) -> Vec<u8> {
    format!("w{w}-{i:04}").into_bytes()
}

/// Writers own disjoint key sets and keep a model each; readers meanwhile get random
/// keys and run cursors, and every value they see must be a well-formed value of that
/// key (never torn, never another key's) and every cursor strictly ordered. At the end
/// the store equals the union of the writers' models and `check` is clean.
pub fn readers_and_writers(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, _) = fresh(f, &d);
    let stop = AtomicBool::new(false);
    let models: Vec<Model> = std::thread::scope(|sc| {
        let readers: Vec<_> = (0..2u64)
            .map(|r| {
                let (s, stop) = (&s, &stop);
                sc.spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(100 + r);
                    let mut reads = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let k = key(rng.gen_range(0..WRITERS), rng.gen_range(0..KEYS));
                        if let Some(v) = s.get(&k).unwrap() {
                            assert!(tag_of(&k, &v).is_some(), "torn or foreign value for {k:?}");
                        }
                        if reads.is_multiple_of(50) {
                            let mut last: Option<Vec<u8>> = None;
                            let r = KeyRange::prefix(format!("w{}", rng.gen_range(0..WRITERS)).into_bytes());
                            let rev = rng.gen_bool(0.5);
                            let it: Box<dyn Iterator<Item = _>> =
                                if rev { Box::new(s.range(&r).rev()) } else { Box::new(s.range(&r)) };
                            for x in it.take(200) {
                                let (k, v) = x.unwrap();
                                assert!(tag_of(&k, &v).is_some(), "cursor: torn value for {k:?}");
                                if let Some(l) = &last {
                                    assert!(if rev { *l > k } else { *l < k }, "cursor out of order");
                                }
                                last = Some(k);
                            }
                        }
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let s = &s;
                sc.spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(w as u64);
                    let mut m = Model::new();
                    for op in 0..OPS {
                        let i = rng.gen_range(0..KEYS);
                        let k = key(w, i);
                        match rng.gen_range(0..10) {
                            0..=5 => {
                                let v = tagged_value(&k, op, rng.gen_range(0..64));
                                s.put(&k, &v).unwrap();
                                m.insert(k, v);
                            }
                            6..=8 => {
                                assert_eq!(s.delete(&k).unwrap(), m.remove(&k).is_some(), "delete {k:?}");
                            }
                            _ => {
                                let mut b = pmkv::WriteBatch::new();
                                let k2 = key(w, (i + 1) % KEYS);
                                let v = tagged_value(&k, op, 9);
                                b.put(k.clone(), v.clone()).delete(k2.clone());
                                s.write(&b).unwrap();
                                m.insert(k, v);
                                m.remove(&k2);
                            }
                        }
                        if op % 97 == 0 {
                            assert_eq!(s.get(&key(w, i)).unwrap(), m.get(&key(w, i)).cloned());
                        }
                    }
                    m
                })
            })
            .collect();
        let models: Vec<Model> = writers.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        models
    });
    let mut all = Model::new();
    for m in models {
        all.extend(m);
    }
    assert_eq!(contents(&s), all);
    assert_eq!(s.len().unwrap(), all.len() as u64);
    let c = s.check().unwrap();
    assert!(c.is_ok(), "{c}");
}
