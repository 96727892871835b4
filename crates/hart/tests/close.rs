//! A HART's life: one HART per pool; `sync`; `close` marks the pool clean through
//! `Pool::close` when the HART holds the last handle to it, and leaves the pool to its last
//! holder otherwise.

mod common;
use common::*;
use pmkv_hart::Error;
use pmkv_hart::{Hart, Options};
use pmkv_substrate::{Mode, Pool, PoolError};
use std::sync::Arc;

#[test]
fn close_marks_the_pool_clean_and_keeps_everything() {
    let (_dir, path) = pool_file("c.pool");
    let opts = pool_opts(Mode::Msync, 4 << 20, 64 << 20);
    let h = create_hart(&path, &opts);
    h.put(b"a", b"1").unwrap();
    h.sync().unwrap();
    h.put(b"b", b"a value longer than eight bytes").unwrap();
    h.close().unwrap();

    // Closed by its last handle: clean, nothing to recover.
    let pool = Arc::new(Pool::open(&path, Some("hart"), &opts).unwrap());
    assert!(pool.was_clean());
    let h = Hart::open(pool.clone(), Options::default()).unwrap();
    assert!(h.recovery_report().clean_shutdown);
    assert_eq!(get(&h, b"b").as_deref(), Some(&b"a value longer than eight bytes"[..]));
    h.put(b"c", b"3").unwrap();
    // Another handle is alive: close drops the HART and leaves the pool open to it.
    h.close().unwrap();
    assert!(!pool.is_poisoned());
    drop(pool);

    let h = reopen_hart(&path, &opts);
    assert!(h.recovery_report().clean_shutdown, "the last handle's drop closed the pool cleanly");
    assert_eq!(h.len(), 3);
    h.check().unwrap();
}

/// A second HART over a pool that a live HART uses would run a second allocator over the
/// same slots: refused until the first is gone.
#[test]
fn one_hart_per_pool() {
    let pool = sim_pool(1 << 20);
    let h = Hart::open(pool.clone(), Options::default()).unwrap();
    h.put(b"k", b"v").unwrap();
    let second = Hart::open(pool.clone(), Options::default());
    assert!(matches!(second, Err(Error::Pool(PoolError::Locked { .. }))), "{:?}", second.err());
    // Another pool is not affected, nor is the first HART.
    let other = sim_hart(1 << 20, 2);
    other.put(b"k", b"w").unwrap();
    assert_eq!(get(&h, b"k").as_deref(), Some(&b"v"[..]));
    drop(h);
    let h = Hart::open(pool.clone(), Options::default()).unwrap();
    assert_eq!(get(&h, b"k").as_deref(), Some(&b"v"[..]));
    assert!(Hart::open(pool, Options::default()).is_err());
    drop(h);
    // A failed open releases its claim: a read-only pool without a HART cannot get one,
    // and says so again (not "in use") on the next try.
    let (_dir, path) = pool_file("empty.pool");
    let opts = pool_opts(Mode::Adr, 1 << 20, 64 << 20);
    drop(Pool::create(&path, "hart", &opts).unwrap());
    let ro = Arc::new(Pool::open_read_only(&path, Some("hart"), &opts).unwrap());
    for _ in 0..2 {
        let r = Hart::open(ro.clone(), Options::default());
        assert!(matches!(r, Err(Error::Pool(PoolError::ReadOnly { .. }))), "{:?}", r.err());
    }
}
