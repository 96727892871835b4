//! `sync` and `close`: close marks the pool clean through `Pool::close` when the HART holds
//! the last handle to it, and leaves the pool to its last holder otherwise.

mod common;
use common::*;
use pmkv_hart::{Hart, HartOptions};
use pmkv_substrate::{Mode, Pool, PoolOptions};
use std::sync::Arc;

#[test]
fn close_marks_the_pool_clean_and_keeps_everything() {
    let dir = pool_dir();
    let path = dir.path().join("c.pool");
    let opts = PoolOptions::default().mode(Mode::Msync).initial_size(4 << 20);
    let h = Hart::open(Arc::new(Pool::create(&path, "hart", &opts).unwrap()), HartOptions::default()).unwrap();
    h.put(b"a", b"1").unwrap();
    h.sync().unwrap();
    h.put(b"b", b"a value longer than eight bytes").unwrap();
    h.close().unwrap();

    // Closed by its last handle: clean, nothing to recover.
    let pool = Arc::new(Pool::open(&path, Some("hart"), &opts).unwrap());
    assert!(pool.was_clean());
    let h = Hart::open(pool.clone(), HartOptions::default()).unwrap();
    assert!(h.recovery_report().clean);
    assert_eq!(get(&h, b"b").as_deref(), Some(&b"a value longer than eight bytes"[..]));
    h.put(b"c", b"3").unwrap();
    // Another handle is alive: close drops the HART and leaves the pool open to it.
    h.close().unwrap();
    assert!(!pool.is_poisoned());
    drop(pool);

    let h = Hart::open(Arc::new(Pool::open(&path, Some("hart"), &opts).unwrap()), HartOptions::default()).unwrap();
    assert!(h.recovery_report().clean, "the last handle's drop closed the pool cleanly");
    assert_eq!(h.len(), 3);
    h.check().unwrap();
}
