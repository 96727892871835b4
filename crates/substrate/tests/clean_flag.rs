//! SPEC R4: a pool is marked clean only by an orderly drop or close — never while a panic
//! unwinds, never once poisoned — and `close` reports what a drop must swallow.

use pmkv_substrate::{Mode, Pool, PoolError, PoolOptions};
use std::panic::{catch_unwind, AssertUnwindSafe};

use pmkv_testutil::{pool_dir, pool_file, pool_opts};

fn opts(mode: Mode) -> PoolOptions {
    pool_opts(mode, 1 << 20, 16 << 20)
}

#[test]
fn r4_a_pool_dropped_during_a_panic_stays_unclean() {
    let (_d, path) = pool_file("p.pool");
    drop(Pool::create(&path, "t", &opts(Mode::Adr)).unwrap());
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _pool = Pool::open(&path, Some("t"), &opts(Mode::Adr)).unwrap();
        panic!("the engine broke mid-write");
    }));
    assert!(r.is_err());
    let p = Pool::open(&path, Some("t"), &opts(Mode::Adr)).unwrap();
    assert!(!p.was_clean(), "a pool dropped while panicking was marked clean");
    drop(p);
    assert!(Pool::open(&path, Some("t"), &opts(Mode::Adr)).unwrap().was_clean());
}

#[test]
fn r4_a_poisoned_pool_stays_unclean_and_close_says_so() {
    let d = pool_dir();
    for mode in [Mode::Adr, Mode::Eadr, Mode::Msync] {
        let path = d.path().join(format!("{mode}.pool"));
        let p = Pool::create(&path, "t", &opts(mode)).unwrap();
        p.sync().unwrap();
        assert!(!p.is_poisoned());
        p.close().unwrap();
        let p = Pool::open(&path, Some("t"), &opts(mode)).unwrap();
        assert!(p.was_clean(), "{mode}: close did not mark the pool clean");
        p.poison();
        assert!(p.is_poisoned());
        assert!(matches!(p.close(), Err(PoolError::Poisoned { .. })), "{mode}");
        let p = Pool::open(&path, Some("t"), &opts(mode)).unwrap();
        assert!(!p.was_clean(), "{mode}: a poisoned pool was marked clean");
        p.poison();
        drop(p);
        assert!(!Pool::open(&path, Some("t"), &opts(mode)).unwrap().was_clean(), "{mode}: drop after poison");
    }
}

#[test]
fn r2_read_only_pools_never_write_on_poison_or_close() {
    let (_d, path) = pool_file("ro.pool");
    drop(Pool::create(&path, "t", &opts(Mode::Adr)).unwrap());
    let before = std::fs::read(&path).unwrap();
    let p = Pool::open_read_only(&path, Some("t"), &opts(Mode::Adr)).unwrap();
    p.sync().unwrap();
    p.close().unwrap();
    let p = Pool::open_read_only(&path, Some("t"), &opts(Mode::Msync)).unwrap();
    p.poison();
    assert!(p.close().is_err());
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let _p = Pool::open_read_only(&path, Some("t"), &opts(Mode::Adr)).unwrap();
        panic!("unwinding with a read-only pool");
    }));
    assert!(std::fs::read(&path).unwrap() == before, "a read-only pool changed the file");
}

#[cfg(feature = "fault-injection")]
#[test]
fn fault_hook_fires_at_every_flush_and_fence_of_a_file_pool() {
    use pmkv_substrate::PointKind;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let (_d, path) = pool_file("f.pool");
    let p = Pool::create(&path, "t", &opts(Mode::Adr)).unwrap();
    let off = p.take_heap(4096, 64).unwrap();
    let (flushes, fences) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (fl, fe) = (flushes.clone(), fences.clone());
    p.set_fault_hook(Box::new(move |pt| {
        match pt.kind {
            PointKind::Flush => fl.fetch_add(1, Ordering::SeqCst),
            PointKind::Fence => fe.fetch_add(1, Ordering::SeqCst),
            _ => 0, // store points are not fault points
        };
        if pt.index == 5 {
            panic!("fault at point 5");
        }
    }));
    p.persist_off(off, 64);
    p.persist_off(off + 64, 64);
    assert_eq!((flushes.load(Ordering::SeqCst), fences.load(Ordering::SeqCst)), (2, 2));
    let r = catch_unwind(AssertUnwindSafe(|| p.persist_off(off + 128, 64)));
    assert!(r.is_err(), "the hook's panic reaches the caller");
    p.clear_fault_hook();
    p.persist_off(off, 64);
    assert_eq!(flushes.load(Ordering::SeqCst), 3);
}

/// `Pool::abandon` (an open the engine refused): a cleanly closed pool is left byte for
/// byte as it was, in every mode; a pool that needed crash recovery stays marked so (its
/// recovery did not complete), where a plain drop would have marked it clean.
#[test]
fn p1_an_abandoned_open_changes_nothing_and_an_unrecovered_pool_stays_unclean() {
    let d = pool_dir();
    for mode in [Mode::Adr, Mode::Eadr, Mode::Msync] {
        let path = d.path().join(format!("{mode}.pool"));
        Pool::create(&path, "t", &opts(mode)).unwrap().close().unwrap();
        let before = std::fs::read(&path).unwrap();
        let p = Pool::open(&path, Some("t"), &opts(mode)).unwrap();
        assert!(std::fs::read(&path).unwrap() != before, "{mode}: opening marks the pool in use");
        p.abandon();
        assert!(std::fs::read(&path).unwrap() == before, "{mode}: an abandoned open changed the file");
        // A pool left unclean (a crash: here, a drop while panicking) and abandoned stays so.
        let _ = catch_unwind(AssertUnwindSafe(|| {
            let _p = Pool::open(&path, Some("t"), &opts(mode)).unwrap();
            panic!("crash");
        }));
        let p = Pool::open(&path, Some("t"), &opts(mode)).unwrap();
        assert!(!p.was_clean());
        p.abandon();
        assert!(!Pool::open(&path, Some("t"), &opts(mode)).unwrap().was_clean(), "{mode}: abandon marked it clean");
    }
}
