//! SPEC P7 model test: random sequences of alloc/publish/free over several types and sizes
//! (small classes, 4 KiB, extents above 4 KiB), reservations that are abandoned or given
//! back, and releases of empty chunks, crashed at a random crash point. Every crash image
//! of that point must recover to exactly the model's used set before or after the
//! interrupted operation, with each object's content, and pass the checker.

mod epalloc_util;

use epalloc_util::*;
use pmkv_substrate::epalloc::{EpAlloc, TypeId};
use pmkv_substrate::Eviction;
use proptest::prelude::*;
use std::sync::{Arc, Mutex};

const SIZES: [usize; 9] = [8, 16, 40, 64, 200, 1000, 4096, 5000, 9000];
const TYPES: [TypeId; 3] = [TypeId(1), TypeId(2), TypeId(7)];

#[derive(Clone, Debug)]
enum Op {
    /// alloc + content + publish.
    Put(usize, usize),
    /// Free the n-th live object (modulo).
    Free(usize),
    /// alloc + content, never published (a crash-before-publish in disguise).
    Abandon(usize, usize),
    /// alloc, then unreserve.
    Unreserve(usize, usize),
    /// Recycle empty chunks, current ones included.
    Release,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..TYPES.len(), 0..SIZES.len()).prop_map(|(t, s)| Op::Put(t, s)),
        4 => any::<usize>().prop_map(Op::Free),
        1 => (0..TYPES.len(), 0..SIZES.len()).prop_map(|(t, s)| Op::Abandon(t, s)),
        1 => (0..TYPES.len(), 0..SIZES.len()).prop_map(|(t, s)| Op::Unreserve(t, s)),
        1 => Just(Op::Release),
    ]
}

/// What the hook saves at the chosen crash point.
#[derive(Default)]
struct Capture {
    /// The point to crash at (index among all crash points of the run).
    at: Option<u64>,
    allowed: Vec<Used>,
    /// `allowed` at the moment of the crash.
    at_crash: Vec<Used>,
    images: Vec<(Eviction, Vec<u8>)>,
    points: u64,
}

/// Run `ops`; with `crash_at`, save the crash images of that point. Returns the number of
/// crash points of the run and the capture.
fn run(ops: &[Op], crash_at: Option<u64>) -> (u64, Capture) {
    let o = opts();
    let ep = EpAlloc::create(new_sim(&o)).unwrap();
    let cap: Arc<Mutex<Capture>> = Arc::new(Mutex::new(Capture { at: crash_at, ..Capture::default() }));
    let c2 = cap.clone();
    let base = ep.pool().sim().unwrap().points();
    ep.pool().sim().unwrap().set_hook(true, move |pt| {
        let mut c = c2.lock().unwrap();
        c.points += 1;
        if c.at == Some(pt.index - base) {
            c.images = Eviction::standard(pt.index).iter().map(|&ev| (ev, pt.image(ev))).collect();
            c.at_crash = c.allowed.clone();
        }
    });
    let mut model = Used::new();
    let mut live: Vec<u64> = Vec::new();
    let set_allowed = |states: Vec<Used>| cap.lock().unwrap().allowed = states;
    let mut tag = 0u64;
    for op in ops {
        let before = model.clone();
        set_allowed(vec![before.clone()]);
        match *op {
            Op::Put(t, s) => {
                let off = ep.alloc(TYPES[t], SIZES[s]).unwrap();
                tag += 1;
                write_tag(ep.pool(), off, tag);
                assert!(model.insert(off, (TYPES[t].0, tag)).is_none(), "{off:#x} handed out twice");
                set_allowed(vec![before, model.clone()]);
                ep.publish(off);
                live.push(off);
            }
            Op::Free(n) if !live.is_empty() => {
                let off = live.swap_remove(n % live.len());
                model.remove(&off);
                set_allowed(vec![before, model.clone()]);
                ep.try_free(off).unwrap();
            }
            Op::Free(_) => {}
            Op::Abandon(t, s) => {
                let off = ep.alloc(TYPES[t], SIZES[s]).unwrap();
                write_tag(ep.pool(), off, u64::MAX);
            }
            Op::Unreserve(t, s) => {
                let off = ep.alloc(TYPES[t], SIZES[s]).unwrap();
                ep.try_unreserve(off).unwrap();
            }
            Op::Release => {
                ep.release_empty_chunks();
            }
        }
        set_allowed(vec![model.clone()]);
    }
    ep.pool().sim().unwrap().clear_hook();
    assert_eq!(used_set(&ep, &TYPES), model);
    ep.check().unwrap();
    let cap = std::mem::take(&mut *cap.lock().unwrap());
    (cap.points, cap)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn p7_model_random_ops_random_crash(ops in prop::collection::vec(op(), 1..60), pick in any::<u64>()) {
        let (points, _) = run(&ops, None);
        prop_assume!(points > 0);
        let at = pick % points;
        let (again, cap) = run(&ops, Some(at));
        prop_assert_eq!(again, points, "runs are deterministic");
        prop_assert_eq!(cap.images.len(), 4);
        for (ev, img) in &cap.images {
            let r = check_image(img, &opts(), &TYPES, &cap.at_crash);
            prop_assert!(r.is_ok(), "crash point {} of {}, {:?}: {}", at, points, ev, r.unwrap_err());
        }
    }
}
