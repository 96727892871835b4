//! A sound public surface: the safe functions that take an offset from an engine check it
//! and panic on a bug (the `pmkv` API contains the panic), instead of flushing an
//! unmapped address, reading outside a mapping, or writing a header the next open would
//! refuse. Each panic leaves the pool intact and openable.

use pmkv_substrate::{Eviction, Mode, Pool};
use pmkv_testutil::{pool_dir, pool_opts, small_opts};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The message of the panic `f` raises.
fn panic_message(f: impl FnOnce()) -> String {
    let err = catch_unwind(AssertUnwindSafe(f)).expect_err("no panic");
    err.downcast_ref::<String>().cloned().or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string())).unwrap()
}

#[test]
fn flushes_outside_the_mapped_pool_panic_and_name_the_range() {
    for mode in Mode::ALL {
        let pool = Pool::create_sim("t", &small_opts().mode(mode)).unwrap();
        let size = pool.size();
        pool.persist_off(size - 64, 64);
        pool.flush_off(0, size as usize);
        let msg = panic_message(|| pool.flush_off(size - 8, 16));
        assert!(msg.contains(&format!("{:#x}", size - 8)) && msg.contains("+16"), "{mode}: {msg}");
        let msg = panic_message(|| pool.persist_off(u64::MAX - 4, 8));
        assert!(msg.contains("outside the pool"), "{mode}: {msg}");
        // The pool is unharmed: it still persists and its image still opens.
        pool.persist_off(4096, 8);
        let img = pool.sim().unwrap().image_now(&pool, Eviction::None);
        Pool::from_image(&img, Some("t"), &small_opts().mode(mode)).unwrap();
    }
}

#[test]
fn a_root_outside_the_heap_is_refused_before_the_header_changes() {
    let dir = pool_dir();
    let path = dir.path().join("roots.pool");
    let pool = Pool::create(&path, "t", &small_opts()).unwrap();
    let off = pool.take_heap(64, 64).unwrap();
    pool.set_root(1, off);
    let size = pool.size();
    for bad in [size, size + 4096, 100, u64::MAX] {
        let msg = panic_message(|| pool.set_root(1, bad));
        assert!(msg.contains("outside the pool's heap"), "{bad:#x}: {msg}");
    }
    assert!(panic_message(|| pool.set_root(8, off)).contains("root index 8"));
    assert_eq!(pool.root(1), off);
    pool.set_root(2, 0);
    drop(pool);
    // Had a bad root been written, this open would fail with CorruptHeader.
    let pool = Pool::open(&path, Some("t"), &small_opts()).unwrap();
    assert!(pool.was_clean());
    assert_eq!(pool.root(1), off);
}

#[test]
fn a_crash_image_is_only_taken_of_the_simulators_own_pool() {
    let small = Pool::create_sim("t", &small_opts()).unwrap();
    let large = Pool::create_sim("t", &pool_opts(Mode::Adr, 1 << 20, 4 << 20)).unwrap();
    let msg = panic_message(|| drop(small.sim().unwrap().image_now(&large, Eviction::All)));
    assert!(msg.contains("does not belong"), "{msg}");
    let msg = panic_message(|| drop(large.sim().unwrap().image_now(&small, Eviction::All)));
    assert!(msg.contains("does not belong"), "{msg}");
    let dir = pool_dir();
    let file = Pool::create(dir.path().join("f.pool"), "t", &small_opts()).unwrap();
    assert!(panic_message(|| drop(small.sim().unwrap().image_now(&file, Eviction::None))).contains("does not belong"));
    assert_eq!(small.sim().unwrap().image_now(&small, Eviction::All).len() as u64, small.size());
}
