//! What the `fault-injection` feature is for (`cargo test -p pmkv-substrate --features
//! fault-injection`): an engine made to panic in the middle of a write on a real *file*
//! pool, and the next open of the file running recovery. Here EPallocator plays the
//! engine: a `free` that empties a chunk recycles it (Algorithm 6, several persisted
//! steps), and a panic is injected at each of its flushes and fences in turn.
#![cfg(feature = "fault-injection")]

mod epalloc_util;

use epalloc_util::*;
use pmkv_substrate::epalloc::{EpAlloc, RecycleCase, TypeId, SLOTS};
use pmkv_substrate::{FaultPoint, Pool};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

const A: TypeId = TypeId(1);

#[test]
fn a_panic_at_any_point_of_a_recycle_on_a_file_pool_is_recovered_at_the_next_open() {
    let dir = pool_dir();
    let o = opts();
    let mut cases = std::collections::BTreeSet::new();
    let mut k = 1;
    loop {
        let path = dir.path().join(format!("recycle-{k}.pool"));
        let ep = EpAlloc::create(Arc::new(Pool::create(&path, LAYOUT, &o).unwrap())).unwrap();
        // A full first chunk, and a second that is the current one, so that emptying the
        // first recycles it.
        let first: Vec<u64> = (0..SLOTS as u64).map(|i| put(&ep, A, 64, i)).collect();
        let keep = put(&ep, A, 64, 1000);
        for &off in &first[1..] {
            ep.free(off);
        }
        let last = first[0];
        ep.pool().set_fault_hook(Box::new(move |pt: FaultPoint| {
            if pt.index == k {
                panic!("injected fault at {pt:?}");
            }
        }));
        // The allocator, and with it the pool, is dropped inside the closure: while the
        // panic unwinds, exactly as an engine's handle would be.
        let r = catch_unwind(AssertUnwindSafe(move || {
            ep.free(last);
            drop(ep);
        }));
        let panicked = r.is_err();
        let pool = Arc::new(Pool::open(&path, Some(LAYOUT), &o).unwrap());
        assert_eq!(pool.was_clean(), !panicked, "point {k}: the clean flag after the free");
        let ep = EpAlloc::open(pool).unwrap();
        cases.extend(ep.recovery().repaired().map(|c| c.2));
        ep.check().unwrap_or_else(|e| panic!("point {k}: {e}"));
        let used = used_set(&ep, &[A]);
        assert!(used.contains_key(&keep), "point {k}: an untouched object was lost");
        assert!(first[1..].iter().all(|o| !used.contains_key(o)), "point {k}: a freed object came back");
        assert!(used.len() <= 2, "point {k}: {used:?}");
        if !panicked {
            assert!(!used.contains_key(&last), "the free completed");
            break;
        }
        k += 1;
        assert!(k < 100, "the free never finished without a fault");
    }
    eprintln!("faults injected at points 1..{k}; recycle-log cases recovered: {cases:?}");
    assert!(k > 3, "a recycling free passes several flush and fence points, got {k}");
    assert!(cases.iter().any(|&c| c != RecycleCase::Clean), "no fault landed inside the recycle: {cases:?}");
}
