//! Every write path of FPTree under the crash simulator, in `adr` (every flush and fence
//! is a crash point; an image keeps what was persisted plus random lines or torn 8-byte
//! words) and in `eadr` (every PM store is a crash point too, and an image keeps every
//! store before it): inserts of inline and object keys and values, out-of-place updates,
//! deletes, leaf splits (the split micro-log) and unlinks of emptied leaves (the delete
//! micro-log). Each image must recover to a tree that passes `check` (no leak, no
//! micro-log in use) and holds exactly the state before or after the interrupted
//! operation.

use pmkv_core::NativeEngine;
use pmkv_substrate::{Eviction, Mode};
use pmkv_testutil::{NativeCrash, Op};

fn evictions(seed: u64, i: u64) -> Vec<Eviction> {
    let s = seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut v = Eviction::standard(i).to_vec();
    v.extend([Eviction::OnlyNewest, Eviction::Words(s ^ 0x5555)]);
    v
}

/// A second recovery of the recovered pool finds nothing left to do.
fn second_recovery_clean(r: &pmkv_fptree::FpTree, _: &Op) -> Result<(), String> {
    let run = NativeCrash::new(&pmkv_fptree::FACTORY, r.pool().mode());
    let again = r.pool().sim().unwrap().image_now(r.pool(), Eviction::None);
    let r2 = run.recover(&again)?;
    let rep = r2.recovery();
    if rep.orphans_freed + rep.rolled_forward != 0 {
        return Err(format!("a second recovery still repaired: {rep}"));
    }
    Ok(())
}

/// Run `ops` on a fresh simulated pool in `mode` under the kit's crash harness, checking
/// the crash images of every crash point of each. Returns the images checked.
fn explore(ops: &[Op], mode: Mode) -> u64 {
    let mut run = NativeCrash::new(&pmkv_fptree::FACTORY, mode);
    run.evictions = evictions;
    run.live_on = Some(second_recovery_clean);
    run.explore(ops, |_| true)
}

/// Key `i`: ascending in `i`; every fourth is long enough for a key object.
fn key(i: u32) -> Vec<u8> {
    if i % 4 == 3 {
        format!("k{i:04}-a-key-long-enough-for-an-object").into_bytes()
    } else {
        format!("k{i:04}").into_bytes()
    }
}

/// Inline (up to 8 bytes) and object values.
fn value(i: u32, round: u32) -> Vec<u8> {
    vec![(i + round) as u8; [3, 8, 9, 40][(i + round) as usize % 4]]
}

/// Enough ascending inserts to split leaves several times, updates of every kind of
/// value, a contiguous run of deletes that empties leaves (unlinks), re-inserts of part
/// of the run, and deletes of the rest.
fn workload(n: u32) -> Vec<Op> {
    let mut ops: Vec<Op> = (0..n).map(|i| Op::Put(key(i), value(i, 0))).collect();
    for i in (0..n).step_by(3) {
        ops.push(Op::Put(key(i), value(i, 1)));
    }
    ops.extend((10..n - 10).map(|i| Op::Delete(key(i))));
    ops.extend((20..30).map(|i| Op::Put(key(i), value(i, 2))));
    ops.extend((0..10).map(|i| Op::Delete(key(i))));
    ops
}

#[test]
fn adr_every_crash_point() {
    let n = explore(&workload(100), Mode::Adr);
    eprintln!("adr: {n} crash images checked");
}

#[test]
fn eadr_every_store_point() {
    let n = explore(&workload(100), Mode::Eadr);
    eprintln!("eadr: {n} crash images checked");
}

/// Atomic write batches (the substrate's batch log) in `adr` at every flush and fence and
/// in `eadr` at every store: 70 operations on a tree of 30 keys (new keys enough to split
/// leaves, updates, deletes, a missing key). Every image recovers to exactly the state
/// before or after the batch and passes `check`.
#[test]
fn atomic_batch_every_crash_point_and_eadr_store() {
    for mode in [Mode::Adr, Mode::Eadr] {
        let setup: Vec<Op> = (0..120).step_by(4).map(|i| Op::Put(key(i), value(i, 0))).collect();
        let mut batch: Vec<Op> =
            (0..120).filter(|i| i % 4 != 0).take(60).map(|i| Op::Put(key(i), value(i, 3))).collect();
        batch.extend((0..40).step_by(8).map(|i| Op::Put(key(i), value(i, 5))));
        batch.extend((4..40).step_by(8).map(|i| Op::Delete(key(i))));
        batch.push(Op::Delete(b"missing".to_vec()));
        let mut run = NativeCrash::new(&pmkv_fptree::FACTORY, mode);
        run.evictions = |_, i| Eviction::standard(i).to_vec();
        let (n, _) = run.explore_batches(&setup, &[batch], |t| t);
        eprintln!("{mode:?}: an atomic batch, {n} crash images checked");
    }
}
