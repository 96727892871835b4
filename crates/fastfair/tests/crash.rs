//! Every write path of FAST&FAIR under the crash simulator, in `adr` (every flush and
//! fence is a crash point; images keep what was persisted, plus random whole lines or
//! random in-order prefixes of each dirty line's stores: the line-granular model
//! FAST&FAIR declares, `CrashModel::LinesInOrder`) and in `eadr` (every PM store is a crash point and an image keeps every
//! store before it): inserts at the front, middle and end of leaves (FAST right shifts),
//! updates, deletes (left shifts), leaf and inner splits (FAIR) and new roots. The
//! recovered tree must pass `check` (no leak), hold exactly the state before or after
//! the interrupted operation, take writes, and recover again to the same state.

use pmkv_fastfair::FastFair;
use pmkv_substrate::{Eviction, Mode, Pool};
use pmkv_testutil::{native_contents as contents, probe_write, sim_opts, NativeCrash, Op};
use std::sync::Arc;

fn recover(img: &[u8], mode: Mode) -> Result<FastFair, String> {
    NativeCrash::new(&pmkv_fastfair::FACTORY, mode).recover(img)
}

/// The crash model FAST&FAIR declares (a line reaches PM whole, holding a prefix of its
/// stores: `CrashModel::LinesInOrder`), with the newest pending line alone and left out.
fn evictions(seed: u64, i: u64) -> Vec<Eviction> {
    let mut v = Eviction::for_model(pmkv_core::NativeFactory::info(&pmkv_fastfair::FACTORY).crash_model, i, seed);
    v.extend([Eviction::OnlyNewest, Eviction::AllButNewest]);
    v
}

/// Run `ops` on a fresh simulated pool in `mode` under the kit's crash harness, checking
/// the crash images of every crash point of the ops `select` picks; each recovered tree
/// must also take a write next to the operation's key. Returns the images checked.
fn explore(ops: &[Op], mode: Mode, select: impl Fn(usize) -> bool) -> u64 {
    let mut run = NativeCrash::new(&pmkv_fastfair::FACTORY, mode);
    run.evictions = evictions;
    run.seed = 0x00c0_ffee;
    run.live_on = Some(probe_write);
    run.explore(ops, select)
}

/// Keys of every kind: 8-byte integers, short keys, keys that share their first 8
/// bytes (told apart by their records), long keys.
fn key(i: u32) -> Vec<u8> {
    match i % 4 {
        0 => (0x0100_0000_0000_0000u64 + i as u64 * 7919).to_be_bytes().to_vec(),
        1 => format!("s{i:04}").into_bytes(),
        2 => format!("shared-prefix-{i:06}").into_bytes(),
        _ => format!("a-longer-key-{i:06}-with-more-bytes").into_bytes(),
    }
}

fn value(i: u32, round: u32) -> Vec<u8> {
    vec![(i + round) as u8; [3, 8, 40][(i + round) as usize % 3]]
}

/// Inserts in an order that puts keys at the front, middle and end of leaves, enough
/// for leaf splits, inner splits and new roots; updates; deletes; re-inserts.
fn workload(n: u32) -> Vec<Op> {
    let order: Vec<u32> = (0..n).map(|i| (i * 37) % n).collect();
    let mut ops: Vec<Op> = order.iter().map(|&i| Op::Put(key(i), value(i, 0))).collect();
    for i in (0..n).step_by(5) {
        ops.push(Op::Put(key(i), value(i, 1)));
    }
    for i in (0..n).filter(|i| i % 3 != 0) {
        ops.push(Op::Delete(key(i)));
    }
    for i in (0..n).filter(|i| i % 3 == 1).take(40) {
        ops.push(Op::Put(key(i), value(i, 2)));
    }
    ops
}

/// Every op of a small workload (one leaf split), and a sample of a larger one's.
#[test]
fn adr_every_crash_point() {
    let n = explore(&workload(40), Mode::Adr, |_| true);
    eprintln!("adr: {n} crash images checked");
}

#[test]
fn eadr_every_store_point() {
    let n = explore(&workload(40), Mode::Eadr, |_| true);
    eprintln!("eadr: {n} crash images checked");
}

/// Format 3's inline entries: 8-byte keys with 8-byte values, many of them equal (a
/// leaf's value words repeat, so the stale-slot test must not rely on them), some the
/// word 0 (a record), and every fifth key a longer one sharing the key word of an inline
/// key (both become records, and the survivor inline again on its next update).
fn inline_workload(n: u32) -> Vec<Op> {
    let key = |i: u32| {
        if i % 5 == 4 {
            format!("{:08}+", i - 4).into_bytes()
        } else {
            format!("{i:08}").into_bytes()
        }
    };
    let value = |i: u32, round: u32| match (i + round) % 4 {
        0 => [7u8; 8],
        1 => [0u8; 8],
        _ => ((i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ round as u64).to_le_bytes(),
    };
    let order: Vec<u32> = (0..n).map(|i| (i * 37) % n).collect();
    let mut ops: Vec<Op> = order.iter().map(|&i| Op::Put(key(i), value(i, 0).to_vec())).collect();
    for i in (0..n).step_by(3) {
        ops.push(Op::Put(key(i), value(i, 1).to_vec()));
    }
    for i in (0..n).filter(|i| i % 5 == 4 || i % 7 == 2) {
        ops.push(Op::Delete(key(i)));
    }
    for i in (0..n).filter(|i| i % 5 == 0) {
        ops.push(Op::Put(key(i), value(i, 2).to_vec()));
    }
    ops
}

#[test]
fn adr_every_crash_point_of_inline_entries() {
    let n = explore(&inline_workload(60), Mode::Adr, |_| true);
    eprintln!("adr inline: {n} crash images checked");
}

#[test]
fn eadr_every_store_point_of_inline_entries() {
    let n = explore(&inline_workload(60), Mode::Eadr, |_| true);
    eprintln!("eadr inline: {n} crash images checked");
}

/// Crash points of each op of `ops` in `mode`, from a run without images.
fn points_per_op(ops: &[Op], mode: Mode) -> Vec<u64> {
    let pool = Arc::new(Pool::create_sim("fastfair", &sim_opts(2 << 20).mode(mode)).expect("sim pool"));
    let t = FastFair::open(pool).expect("format");
    let sim = t.pool().sim().unwrap();
    sim.set_hook_with(true, mode == Mode::Eadr, |_| {});
    let mut v = Vec::new();
    for op in ops {
        let before = sim.points();
        match op {
            Op::Put(k, x) => t.put(k, x).unwrap(),
            Op::Delete(k) => assert!(t.delete(k).unwrap()),
        }
        v.push(sim.points() - before);
    }
    sim.clear_hook();
    v
}

/// A tree of three levels: the ops with the most crash points (inner splits, new
/// roots, leaf splits: the restructuring ones) and every 97th op, explored in full.
#[test]
fn adr_and_eadr_deeper_tree_restructuring_ops() {
    let ops = workload(700);
    for mode in [Mode::Adr, Mode::Eadr] {
        let points = points_per_op(&ops, mode);
        let mut by_points: Vec<usize> = (0..ops.len()).collect();
        by_points.sort_by_key(|&i| (std::cmp::Reverse(points[i]), i));
        let chosen: std::collections::HashSet<usize> =
            by_points.iter().take(8).copied().chain((0..ops.len()).filter(|i| i % 97 == 50)).collect();
        eprintln!("{mode:?}: exploring {:?}", by_points.iter().take(8).map(|&i| (i, points[i])).collect::<Vec<_>>());
        let n = explore(&ops, mode, |i| chosen.contains(&i));
        eprintln!("{mode:?}: {n} crash images checked");
    }
}

/// Recovery crashed at each of its own crash points, then run again, gives what an
/// uninterrupted recovery gives.
#[test]
fn recovery_survives_its_own_crash() {
    for mode in [Mode::Adr, Mode::Eadr] {
        let pool = Arc::new(Pool::create_sim("fastfair", &sim_opts(2 << 20).mode(mode)).expect("sim pool"));
        let t = FastFair::open(pool).expect("format");
        for i in 0..120 {
            t.put(&key(i), &value(i, 0)).unwrap();
        }
        // Crash in the middle of a shift of a leaf: a duplicate for recovery to fix.
        let mut imgs = Vec::new();
        let pts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let p2 = pts.clone();
        t.pool().sim().unwrap().set_hook_with(true, mode == Mode::Eadr, move |pt| {
            p2.lock().unwrap().push(pt.image(Eviction::All));
        });
        t.put(&key(1000), b"new").unwrap();
        t.delete(&key(5)).unwrap();
        t.pool().sim().unwrap().clear_hook();
        imgs.extend(pts.lock().unwrap().drain(..));
        drop(t);
        let mut checked = 0;
        for img in imgs.iter().step_by(5) {
            let reference = contents(&recover(img, mode).unwrap());
            let pool = Pool::from_image(img, Some("fastfair"), &sim_opts(1 << 20).mode(mode)).unwrap();
            let nested = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let n2 = nested.clone();
            pool.sim().unwrap().set_hook_with(true, mode == Mode::Eadr, move |pt| {
                let mut v = n2.lock().unwrap();
                for ev in [Eviction::None, Eviction::All, Eviction::OnlyNewest, Eviction::InOrder(pt.index)] {
                    v.push(pt.image(ev));
                }
            });
            let r = FastFair::open(Arc::new(pool)).unwrap();
            assert_eq!(contents(&r), reference);
            drop(r);
            for img2 in nested.lock().unwrap().drain(..) {
                let r = recover(&img2, mode).unwrap();
                r.check().unwrap();
                assert_eq!(contents(&r), reference);
                checked += 1;
            }
        }
        assert!(checked > 0);
        eprintln!("{mode:?}: {checked} images of interrupted recoveries");
    }
}
