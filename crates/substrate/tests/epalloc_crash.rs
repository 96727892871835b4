//! SPEC P7 crash tests of EPallocator with the crash simulator (SPEC P6).
//!
//! Each scenario runs with a hook at *every* crash point (flushes and fences). At each
//! point, the four standard crash images (nothing evicted, everything evicted, a random
//! half of the dirty lines, a random half of the dirty 8-byte words) are recovered with
//! `Pool::from_image` + `EpAlloc::open`, and:
//!
//! * the checker passes (lists acyclic, headers consistent, no overlap, no leaked byte);
//! * the recovered used set — objects with their persistent content — equals the state
//!   before or after the interrupted operation, so no object the test published is lost
//!   or left free while the test still references it, and no object is used that the
//!   test did not publish (a reserved-but-unpublished slot is free again);
//! * the recovered allocator can allocate, publish and free.
//!
//! The recycle scenario also asserts that every recovery case of the recycle micro-log
//! (Algorithm 6: resume from line 6, 8, 10, 11, and the log reclaim) was exercised.

mod epalloc_util;

use epalloc_util::*;
use pmkv_substrate::epalloc::{EpAlloc, RecycleCase, TypeId, SLOTS};
use pmkv_substrate::{Eviction, Pool, PoolError};
use std::sync::{Arc, Mutex};

const T1: TypeId = TypeId(1);
const T2: TypeId = TypeId(2);

/// The test's model of what it published, kept in step with the hook's allowed states.
struct Run {
    ep: EpAlloc,
    model: Used,
    shared: Shared,
    tag: u64,
}

impl Run {
    fn new(shared: &Shared, types: &[TypeId]) -> Run {
        let o = opts();
        let pool = new_sim(&o);
        let ep = EpAlloc::create(pool).unwrap();
        {
            let mut g = shared.lock().unwrap();
            g.types = types.to_vec();
            g.stride = 1;
        }
        install_hook(ep.pool(), shared, &o);
        Run { ep, model: Used::new(), shared: shared.clone(), tag: 1 }
    }

    fn allow(&self, states: Vec<Used>) {
        self.shared.lock().unwrap().allowed = states;
    }

    /// Stop checking (setup steps whose crash points are not under test).
    fn quiet(&self) {
        self.allow(Vec::new());
    }

    fn checking(&self) {
        self.allow(vec![self.model.clone()]);
    }

    /// alloc + write content + publish. Until publish starts, only the old state may be
    /// recovered; during publish, the old or the new.
    fn put(&mut self, ty: TypeId, size: usize) -> u64 {
        let checking = !self.shared.lock().unwrap().allowed.is_empty();
        let before = self.model.clone();
        if checking {
            self.allow(vec![before.clone()]);
        }
        let off = self.ep.alloc(ty, size).unwrap();
        self.tag += 1;
        write_tag(self.ep.pool(), off, self.tag);
        let mut after = before.clone();
        assert!(after.insert(off, (ty.0, self.tag)).is_none(), "offset {off:#x} handed out twice");
        if checking {
            self.allow(vec![before, after.clone()]);
        }
        self.ep.publish(off);
        self.model = after;
        if checking {
            self.checking();
        }
        off
    }

    fn free(&mut self, off: u64) {
        let checking = !self.shared.lock().unwrap().allowed.is_empty();
        let before = self.model.clone();
        let mut after = before.clone();
        after.remove(&off).expect("freeing a published object");
        if checking {
            self.allow(vec![before, after.clone()]);
        }
        self.ep.try_free(off).unwrap();
        self.model = after;
        if checking {
            self.checking();
        }
    }

    fn finish(self, name: &str) -> (u64, std::collections::BTreeMap<RecycleCase, u64>) {
        self.ep.pool().sim().unwrap().clear_hook();
        // The final state recovers too.
        let img = self.ep.pool().sim().unwrap().image_now(self.ep.pool(), Eviction::None);
        let types = self.shared.lock().unwrap().types.clone();
        check_image(&img, &opts(), &types, std::slice::from_ref(&self.model)).unwrap();
        assert_eq!(used_set(&self.ep, &types), self.model);
        self.ep.check().unwrap();
        let g = self.shared.lock().unwrap();
        assert!(g.failures.is_empty(), "{name}: {} failing images, e.g.\n{}", g.failures.len(), g.failures.join("\n"));
        let twice = DOUBLE_CRASH_IMAGES.load(std::sync::atomic::Ordering::Relaxed);
        eprintln!(
            "SPEC P7 {name}: {} crash points, {} crash images recovered and checked, recycle cases {:?}; \
             {twice} images of crashed recoveries recovered again (all tests so far)",
            g.points, g.images, g.cases
        );
        if g.cases.keys().any(|c| *c != RecycleCase::Clean) {
            assert!(twice > 0, "{name}: recoveries that repaired a recycle were crash-tested");
        }
        (g.images, g.cases.clone())
    }
}

#[test]
fn p7_crash_alloc_publish_at_every_point() {
    let shared: Shared = Arc::default();
    let mut r = Run::new(&shared, &[T1, T2]);
    r.checking();
    // New lists, new chunks, heap growth, extents.
    for size in [8, 8, 64, 100, 4096, 5000, 20_000, 64, 8] {
        r.put(T1, size);
    }
    // Fill the 8-byte chunk and spill into a second one.
    for _ in 0..SLOTS {
        r.put(T1, 8);
    }
    // A reserved slot that is given back, or simply never published, is never used.
    let x = r.ep.alloc(T2, 16).unwrap();
    write_tag(r.ep.pool(), x, 0xdead);
    r.ep.unreserve(x);
    let _never_published = r.ep.alloc(T2, 16).unwrap();
    // Recycled space is reused by another class: empty the 64-byte chunk (it is the
    // current chunk, so release it explicitly), then allocate a 48-byte chunk.
    r.quiet();
    let sixty_fours: Vec<u64> = r.model.iter().filter(|(&o, _)| r.ep.capacity(o) == 64).map(|(&o, _)| o).collect();
    for o in sixty_fours {
        r.free(o);
    }
    r.checking();
    let top = r.ep.pool().heap_top();
    assert!(r.ep.release_empty_chunks() >= 1);
    r.put(T2, 48);
    assert_eq!(r.ep.pool().heap_top(), top, "the 48-byte chunk reuses the recycled space");
    // An extent reuses the pages of a freed extent.
    let ext: Vec<u64> = r.model.iter().filter(|(&o, _)| r.ep.capacity(o) > 4096).map(|(&o, _)| o).collect();
    r.free(ext[0]);
    r.put(T2, 4500);
    assert_eq!(r.ep.pool().heap_top(), top);
    let (images, _) = r.finish("alloc+publish");
    assert!(images > 1000, "{images} images");
}

#[test]
fn p7_crash_free_and_recycle_head_middle_tail_at_every_point() {
    let shared: Shared = Arc::default();
    let mut r = Run::new(&shared, &[T1, T2]);
    // Setup, unchecked: three full chunks X1, X2, X3 of 64-byte objects (list: X3, X2,
    // X1; X3 is the current chunk) and three extents (list: E3, E2, E1).
    r.quiet();
    let x: Vec<Vec<u64>> = (0..3).map(|_| (0..SLOTS).map(|_| r.put(T1, 64)).collect()).collect();
    let e: Vec<u64> = (0..3).map(|i| r.put(T2, 5000 + i)).collect();
    assert_eq!(r.ep.check().unwrap().chunks, 3);
    r.checking();
    // Middle of the list (Algorithm 6 lines 8-10): X2 has a predecessor and a successor.
    for &o in &x[1] {
        r.free(o);
    }
    assert_eq!(r.ep.check().unwrap().chunks, 2);
    // Tail: X1 (predecessor X3, no successor).
    for &o in &x[0] {
        r.free(o);
    }
    assert_eq!(r.ep.check().unwrap().chunks, 1);
    // Head (lines 5-6): make the head chunk not the current chunk. X3 is full; a new
    // chunk X4 becomes head and current; fill it; free one object of X3; the next
    // allocation moves the current chunk back to X3. Then empty X4, the head.
    let mut x4 = vec![r.put(T1, 64)];
    for _ in 1..SLOTS {
        x4.push(r.put(T1, 64));
    }
    r.free(x[2][0]);
    let back = r.put(T1, 64);
    assert_eq!(back, x[2][0], "the freed slot of X3 is reused");
    assert_eq!(r.ep.check().unwrap().chunks, 2);
    for &o in &x4 {
        r.free(o);
    }
    assert_eq!(r.ep.check().unwrap().chunks, 1, "the head chunk X4 was recycled");
    // Extents: middle, head, last.
    for i in [1, 2, 0] {
        r.free(e[i]);
    }
    // The current chunk X3, emptied and released explicitly (head and only chunk).
    let rest: Vec<u64> = r.model.keys().copied().collect();
    for o in rest {
        r.free(o);
    }
    assert_eq!(r.ep.release_empty_chunks(), 1);
    assert_eq!(r.ep.check().unwrap().chunks, 0);
    let (images, cases) = r.finish("free+recycle");
    for c in [
        RecycleCase::ReclaimPPrev,
        RecycleCase::FromLine10,
        RecycleCase::FromLine6,
        RecycleCase::FromLine11,
        RecycleCase::FromLine8,
    ] {
        assert!(cases.get(&c).copied().unwrap_or(0) > 0, "recovery case {c:?} never exercised: {cases:?}");
    }
    assert!(images > 1000, "{images} images");
}

#[test]
fn p7_crash_inside_create_leaves_no_allocator_or_a_whole_one() {
    let o = opts();
    let pool = new_sim(&o);
    let seen: Arc<Mutex<(u64, u64, Vec<String>)>> = Arc::default();
    let s = seen.clone();
    let o2 = o.clone();
    let top0 = pool.heap_top();
    pool.sim().unwrap().set_hook(true, move |pt| {
        for ev in Eviction::standard(pt.index) {
            let img = pt.image(ev);
            let p = Arc::new(Pool::from_image(&img, Some(LAYOUT), &o2).unwrap());
            let mut g = s.lock().unwrap();
            match EpAlloc::open(p.clone()) {
                Err(PoolError::Allocator(_)) if p.root(0) == 0 && p.heap_top() == top0 => g.0 += 1,
                Ok(ep) => match ep.check() {
                    Ok(rep) if rep.chunks == 0 => g.1 += 1,
                    other => g.2.push(format!("point {}: {other:?}", pt.index)),
                },
                Err(e) => g.2.push(format!("point {}: {e}", pt.index)),
            }
        }
    });
    let ep = EpAlloc::create(pool.clone()).unwrap();
    pool.sim().unwrap().clear_hook();
    let g = seen.lock().unwrap();
    assert!(g.2.is_empty(), "{:?}", g.2);
    assert!(g.0 > 0 && g.1 > 0, "both outcomes occur: {} / {}", g.0, g.1);
    eprintln!("SPEC P7 create: {} crash images checked", g.0 + g.1);
    drop(ep);
}
