//! Bad input gets a clear error and loses nothing: keys and values too large, a full pool,
//! a read-only pool. (Pools corrupted on disk are tested inside the crate, in `recovery`,
//! which knows where the leaves are.)

mod common;
use common::*;
use pmkv_hart::{Error, Hart, Options, MAX_KEY, MAX_VALUE};
use pmkv_substrate::{Mode, Pool, PoolError};
use std::sync::Arc;

#[test]
fn oversized_keys_and_values_are_refused() {
    let h = sim_hart(1 << 20, 2);
    h.put(b"keep", b"me").unwrap();
    assert!(matches!(h.put(&vec![1u8; MAX_KEY + 1], b"v"), Err(Error::KeyTooLarge { .. })));
    assert!(matches!(h.put(b"k", &vec![1u8; MAX_VALUE + 1]), Err(Error::ValueTooLarge { .. })));
    assert!(matches!(h.put(b"keep", &vec![1u8; MAX_VALUE + 1]), Err(Error::ValueTooLarge { .. })));
    assert_eq!(get(&h, b"keep").as_deref(), Some(&b"me"[..]));
    assert_eq!(h.len(), 1);
    assert!(!h.delete(&vec![1u8; MAX_KEY + 1]).unwrap());
    h.check().unwrap();
}

/// A full pool is an error that loses nothing, with values out of line (two persists per
/// insert) and inline (one persist, through the insert log's lanes, which hold reserved
/// slots when the pool fills).
#[test]
fn a_full_pool_is_an_error_and_keeps_what_it_has() {
    for value_len in [100usize, 8] {
        let (_dir, path) = pool_file("full.pool");
        let opts = pool_opts(Mode::Adr, 1 << 20, 2 << 20);
        let h = create_hart(&path, &opts);
        let mut model = Model::new();
        let mut full = None;
        for i in 0..1_000_000u32 {
            let k = format!("key{i:07}").into_bytes();
            let v = vec![(i % 251) as u8; value_len];
            match h.put(&k, &v) {
                Ok(()) => {
                    model.insert(k, v);
                }
                Err(e) => {
                    full = Some(e);
                    break;
                }
            }
        }
        let e = full.expect("a 2 MiB pool fills up");
        assert!(matches!(e, Error::Pool(PoolError::Full { .. })), "{e}");
        // Updates that need space fail too; deletes free space and work.
        assert_eq!(contents(&h), model);
        h.check().unwrap();
        let first = model.keys().next().unwrap().clone();
        assert!(h.delete(&first).unwrap());
        model.remove(&first);
        drop(h);
        let h = reopen_hart(&path, &opts);
        assert_eq!(contents(&h), model);
        h.check().unwrap();
    }
}

/// A HART opened read-only answers reads and refuses writes with an error (never a fault
/// on the read-only mapping), and the file does not change.
#[test]
fn read_only_hart() {
    let (_dir, path) = pool_file("ro.pool");
    let opts = pool_opts(Mode::Adr, 4 << 20, 64 << 20);
    {
        let h = create_hart(&path, &opts);
        for i in 0..200u32 {
            h.put(format!("k{i:03}").as_bytes(), &i.to_le_bytes().repeat(1 + i as usize % 5)).unwrap();
        }
    }
    let before = std::fs::read(&path).unwrap();
    {
        let pool = Arc::new(Pool::open_read_only(&path, Some("hart"), &opts).unwrap());
        let h = Hart::open(pool, Options::default()).unwrap();
        assert_eq!(h.len(), 200);
        assert_eq!(get(&h, b"k007").unwrap(), 7u32.to_le_bytes().repeat(3));
        h.check().unwrap();
        let ro = |r: Result<(), Error>| matches!(r, Err(Error::Pool(PoolError::ReadOnly { .. })));
        assert!(ro(h.put(b"k007", b"x")));
        assert!(ro(h.put(b"new", b"x")));
        assert!(ro(h.delete(b"k007").map(|_| ())));
        assert_eq!(get(&h, b"k007").unwrap(), 7u32.to_le_bytes().repeat(3));
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // That a read-only pool without a HART cannot be given one is close.rs's
    // `one_hart_per_pool`.
}

/// Inline values written by default, reopened with `paper_updates`: a same-length update
/// takes Algorithm 3 and moves the value out of line; everything stays checkable.
#[test]
fn inline_values_under_paper_updates() {
    let (_dir, path) = pool_file("p.pool");
    let opts = pool_opts(Mode::Adr, 4 << 20, 64 << 20);
    {
        let h = create_hart(&path, &opts);
        h.put(b"a", b"12345678").unwrap();
        h.put(b"b", b"xy").unwrap();
        assert!(h.check().unwrap().contains("0 value objects, 2 inline values"));
    }
    let paper = Options { paper_updates: true, ..Options::default() };
    let h = Hart::open(Arc::new(Pool::open(&path, Some("hart"), &opts).unwrap()), paper).unwrap();
    h.put(b"a", b"87654321").unwrap();
    h.put(b"c", b"new").unwrap();
    assert_eq!(get(&h, b"a").as_deref(), Some(&b"87654321"[..]));
    assert_eq!(get(&h, b"b").as_deref(), Some(&b"xy"[..]));
    assert_eq!(get(&h, b"c").as_deref(), Some(&b"new"[..]));
    assert!(h.check().unwrap().contains("2 value objects, 1 inline values"), "{}", h.check().unwrap());
}
