//! Every write path of FPTree under the crash simulator, in `adr` (every flush and fence
//! is a crash point; an image keeps what was persisted plus random lines or torn 8-byte
//! words) and in `eadr` (every PM store is a crash point too, and an image keeps every
//! store before it): inserts of inline and object keys and values, out-of-place updates,
//! deletes, leaf splits (the split micro-log) and unlinks of emptied leaves (the delete
//! micro-log). Each image must recover to a tree that passes `check` (no leak, no
//! micro-log in use) and holds exactly the state before or after the interrupted
//! operation.

use pmkv_fptree::FpTree;
use pmkv_substrate::{Eviction, Mode, Pool};
use pmkv_testutil::{apply, model_of_scan, sim_opts, CrashFindings, Model, Op};
use std::sync::Arc;

fn contents(t: &FpTree) -> Model {
    let mut out = Vec::new();
    t.scan(&pmkv_core::KeyRange::all(), usize::MAX, false, &mut |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        true
    })
    .expect("scan");
    model_of_scan(out)
}

fn recover(img: &[u8], mode: Mode) -> Result<FpTree, String> {
    let pool = Pool::from_image(img, Some("fptree"), &sim_opts(1 << 20).mode(mode)).map_err(|e| e.to_string())?;
    FpTree::open(Arc::new(pool)).map_err(|e| e.to_string())
}

fn evictions(seed: u64, i: u64) -> Vec<Eviction> {
    let s = seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut v = Eviction::standard(i).to_vec();
    v.extend([Eviction::OnlyNewest, Eviction::Words(s ^ 0x5555)]);
    v
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

/// Run `ops` on a fresh simulated pool in `mode`, checking the crash images of every
/// crash point of each. Returns the images checked.
fn explore(ops: &[Op], mode: Mode) -> u64 {
    let seed = std::env::var("PMKV_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_u64);
    let pool = Arc::new(Pool::create_sim("fptree", &sim_opts(2 << 20).mode(mode)).expect("sim pool"));
    let t = FpTree::open(pool).expect("format");
    let found = CrashFindings::new();
    let mut model = Model::new();
    for (i, op) in ops.iter().enumerate() {
        let before = model.clone();
        apply(&mut model, op);
        let after = model.clone();
        let (f, desc) = (found.clone(), format!("{mode:?} op {i} {op:?}"));
        t.pool().sim().unwrap().set_hook_with(true, mode == Mode::Eadr, move |pt| {
            f.check_images(pt, evictions(seed, pt.index), &desc, |img| {
                let r = recover(img, mode)?;
                r.check().map_err(|e| format!("check after recovery: {e}"))?;
                let got = contents(&r);
                if got != before && got != after {
                    return Err(format!("state is neither before nor after ({} keys)", got.len()));
                }
                // A second recovery of the recovered pool finds nothing left to do.
                let again = r.pool().sim().unwrap().image_now(r.pool(), Eviction::None);
                drop(r);
                let r2 = recover(&again, mode)?;
                if r2.recovery_report().orphans_freed + r2.recovery_report().rolled_forward != 0 {
                    return Err(format!("a second recovery still repaired: {}", r2.recovery_report()));
                }
                Ok(())
            });
        });
        match op {
            Op::Put(k, v) => t.put(k, v).unwrap(),
            Op::Delete(k) => assert!(t.delete(k).unwrap()),
        }
        t.pool().sim().unwrap().clear_hook();
    }
    found.assert_none("crash consistency violated");
    assert_eq!(contents(&t), model);
    t.check().unwrap();
    let img = t.pool().sim().unwrap().image_now(t.pool(), Eviction::None);
    let r = recover(&img, mode).unwrap();
    r.check().unwrap();
    assert_eq!(contents(&r), model);
    found.images()
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
    use pmkv_substrate::batch_log::Op as BOp;
    for mode in [Mode::Adr, Mode::Eadr] {
        let pool = Arc::new(Pool::create_sim("fptree", &sim_opts(2 << 20).mode(mode)).expect("sim pool"));
        let t = FpTree::open(pool).expect("format");
        let mut model = Model::new();
        for i in (0..120).step_by(4) {
            t.put(&key(i), &value(i, 0)).unwrap();
            apply(&mut model, &Op::Put(key(i), value(i, 0)));
        }
        let mut batch: Vec<Op> =
            (0..120).filter(|i| i % 4 != 0).take(60).map(|i| Op::Put(key(i), value(i, 3))).collect();
        batch.extend((0..40).step_by(8).map(|i| Op::Put(key(i), value(i, 5))));
        batch.extend((4..40).step_by(8).map(|i| Op::Delete(key(i))));
        batch.push(Op::Delete(b"missing".to_vec()));
        let before = model.clone();
        for op in &batch {
            apply(&mut model, op);
        }
        let after = model.clone();
        let found = CrashFindings::new();
        let (f, desc) = (found.clone(), format!("{mode:?} batch"));
        t.pool().sim().unwrap().set_hook_with(true, mode == Mode::Eadr, move |pt| {
            f.check_images(pt, Eviction::standard(pt.index), &desc, |img| {
                let r = recover(img, mode)?;
                r.check().map_err(|e| e.to_string())?;
                let got = contents(&r);
                if got != before && got != after {
                    return Err(format!("state is neither before nor after the batch ({} keys)", got.len()));
                }
                Ok(())
            });
        });
        let ops: Vec<BOp<'_>> = batch
            .iter()
            .map(|op| match op {
                Op::Put(k, v) => BOp::Put(k, v),
                Op::Delete(k) => BOp::Delete(k),
            })
            .collect();
        t.write_batch(&ops, true).unwrap();
        t.pool().sim().unwrap().clear_hook();
        found.assert_none("atomic batches are not all or nothing");
        eprintln!("{mode:?}: an atomic batch, {} crash images checked", found.images());
        assert_eq!(contents(&t), model);
        t.check().unwrap();
    }
}
