//! Concurrent readers and writers, with every result checked.

use crate::util::*;
use pmkv::{EngineFactory, KeyRange, Store};
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
    // Writers start once both readers have read: on a busy machine they could otherwise
    // finish before a reader was scheduled, and nothing would be checked concurrently.
    let ready = std::sync::atomic::AtomicUsize::new(0);
    let models: Vec<Model> = std::thread::scope(|sc| {
        let readers: Vec<_> = (0..2u64)
            .map(|r| {
                let (s, stop, ready) = (&s, &stop, &ready);
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
                        if reads == 0 {
                            ready.fetch_add(1, Ordering::AcqRel);
                        }
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        while ready.load(Ordering::Acquire) < 2 {
            std::thread::yield_now();
        }
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

const LIN_THREADS: u64 = 4;
/// The contended rounds: few keys, so that operations on one key overlap.
const LIN_KEYS: usize = 6;
const LIN_OPS: u64 = 2000;
const LIN_ROUNDS: u64 = 50;
/// The wide round: enough keys that engines split leaves and make new ARTs under it.
const WIDE_KEYS: usize = 3000;
const WIDE_OPS: u64 = 4000;

/// Key `i` of the shared set: short keys, 12-byte ones (two key words in NBTree's entry)
/// and long ones (out of line where an engine has such keys), in turn.
fn lin_key(i: usize) -> Vec<u8> {
    match i % 3 {
        0 => format!("c{i}").into_bytes(),
        1 => format!("pair-{i:07}").into_bytes(),
        _ => format!("contended-key-{i}-long-enough-to-live-in-an-object").into_bytes(),
    }
}

/// The value `put` number `id` writes to `key`: the id, then `key` repeated to a length
/// that depends on the id (inline and out-of-line values alike), so that a torn or
/// foreign value is recognised.
fn lin_value(key: &[u8], id: u64) -> Vec<u8> {
    let len = [8usize, 9, 40, 300][(id % 4) as usize];
    let mut v = id.to_be_bytes().to_vec();
    v.extend(key.iter().cycle().take(len - 8));
    v
}

/// The id of a value `get` returned for `key`, if it is one [`lin_value`] made.
fn lin_id(key: &[u8], v: &[u8]) -> Option<u64> {
    let id = u64::from_be_bytes(v.get(..8)?.try_into().ok()?);
    (lin_value(key, id) == v).then_some(id)
}

/// Linearizable histories (docs/requirements.md, N2: every returned value checked against a
/// sequential model): four threads run random puts, gets and deletes on shared keys,
/// each operation stamped with one sequentially consistent counter before its call and
/// after its return; then every key's history, closed by the value it holds at the end
/// of the round, must be linearizable as a register ([`crate::linearizability`]).
/// Unlike `readers_and_writers`, writers share keys, so a lost update, a stale or torn
/// read, or a delete that reports the wrong presence is caught however the threads
/// interleave.
///
/// First on six keys, so that operations on one key overlap. A round is short next to a
/// scheduler's time slice, so on a busy machine its threads may happen to run one after
/// another: rounds repeat (each from the state the last one left) until operations on
/// one key have overlapped in time, so that the check is never merely sequential. Then
/// one wide round on 3,000 keys, whose inserts make the engines restructure (NBTree
/// splits leaves, HART grows nodes and makes ARTs) while other threads read and write.
pub fn histories_are_linearizable(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, _) = fresh(f, &d);
    let clock = std::sync::atomic::AtomicU64::new(0);
    let mut state: Vec<Option<u64>> = vec![None; LIN_KEYS];
    let (mut overlapped, mut rounds) = (0, 0);
    while overlapped == 0 && rounds < LIN_ROUNDS {
        overlapped += linearizable_round(&s, &clock, rounds, LIN_OPS, &mut state);
        rounds += 1;
    }
    assert!(overlapped > 0, "in {LIN_ROUNDS} rounds no two operations on one key ran at the same time");
    let mut wide: Vec<Option<u64>> = vec![None; WIDE_KEYS];
    wide[..LIN_KEYS].copy_from_slice(&state);
    let wide_overlapped = linearizable_round(&s, &clock, rounds, WIDE_OPS, &mut wide);
    eprintln!(
        "{}: {rounds} contended round(s) of {} operations on {LIN_KEYS} keys, {overlapped} of them overlapping another on its key; a wide round of {} on {WIDE_KEYS} keys, {wide_overlapped} overlapping",
        f.info().name,
        LIN_THREADS * LIN_OPS,
        LIN_THREADS * WIDE_OPS
    );
    let c = s.check().unwrap();
    assert!(c.is_ok(), "{c}");
}

/// One round of [`histories_are_linearizable`] on the keys `0..state.len()`, which held
/// `state` before it; afterwards `state` holds what they hold now. Returns how many
/// operations overlapped another on their key.
fn linearizable_round(
    s: &Store,
    clock: &std::sync::atomic::AtomicU64,
    round: u64,
    ops: u64,
    state: &mut [Option<u64>],
) -> usize {
    use crate::linearizability::{check_register, Event, Op};
    let keys = state.len();
    let start = std::sync::Barrier::new(LIN_THREADS as usize);
    let histories: Vec<Vec<(usize, Event)>> = std::thread::scope(|sc| {
        let threads: Vec<_> = (0..LIN_THREADS)
            .map(|t| {
                let start = &start;
                sc.spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(0x11ea + t + 16 * round);
                    let mut h = Vec::with_capacity(ops as usize);
                    start.wait();
                    for n in 0..ops {
                        let i = rng.gen_range(0..keys);
                        let k = lin_key(i);
                        let choice = rng.gen_range(0..10);
                        let id = 1 + (round << 40 | t << 32 | n);
                        let v = lin_value(&k, id);
                        let call = clock.fetch_add(1, Ordering::SeqCst);
                        let op = match choice {
                            0..=3 => {
                                s.put(&k, &v).unwrap();
                                Op::Put(id)
                            }
                            4..=7 => {
                                let got = s.get(&k).unwrap();
                                Op::Get(got.map(|g| {
                                    lin_id(&k, &g).unwrap_or_else(|| panic!("torn or foreign value for {k:?}: {g:?}"))
                                }))
                            }
                            _ => Op::Delete(s.delete(&k).unwrap()),
                        };
                        let ret = clock.fetch_add(1, Ordering::SeqCst);
                        h.push((i, Event { call, ret, op }));
                    }
                    h
                })
            })
            .collect();
        threads.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut per_key: Vec<Vec<Event>> = vec![Vec::new(); keys];
    for (i, e) in histories.into_iter().flatten() {
        per_key[i].push(e);
    }
    let mut overlapped = 0;
    for (i, (mut h, state)) in per_key.into_iter().zip(state.iter_mut()).enumerate() {
        let k = lin_key(i);
        // Operations on this key that ran at the same time as another (necessarily
        // another thread's): what makes the check more than a sequential one.
        h.sort_by_key(|e| e.call);
        let mut latest_ret = 0;
        for e in &h {
            overlapped += usize::from(latest_ret > e.call);
            latest_ret = latest_ret.max(e.ret);
        }
        // The value the key holds now (the round is over) closes its history.
        let end = s.get(&k).unwrap().map(|g| lin_id(&k, &g).expect("a well-formed value"));
        let at = clock.fetch_add(2, Ordering::SeqCst);
        h.push(Event { call: at, ret: at + 1, op: Op::Get(end) });
        if let Err(e) = check_register(&h, *state) {
            panic!("round {round}, key {:?}: {e}", String::from_utf8_lossy(&k));
        }
        *state = end;
    }
    overlapped
}
