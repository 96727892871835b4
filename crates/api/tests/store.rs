//! SPEC U1: one API over every engine — open by path + engine name + options, get, put,
//! delete, ordered range scan, len; errors as values.

use pmkv::{Error, Options, ScanRange, Store, ENGINES};
use std::ops::Bound;

fn dir() -> tempfile::TempDir {
    if std::path::Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

#[test]
fn every_engine_behaves_the_same() {
    let d = dir();
    for &engine in ENGINES {
        let path = d.path().join(format!("{engine}.pool"));
        let s = Store::open(&path, engine, &Options::default()).unwrap();
        assert!(s.is_empty());
        for i in (0..200u32).rev() {
            s.put(format!("k{i:03}").as_bytes(), &i.to_le_bytes()).unwrap();
        }
        s.put(b"k005", b"five").unwrap();
        assert_eq!(s.get(b"k005").unwrap().as_deref(), Some(&b"five"[..]));
        assert_eq!(s.get(b"nope").unwrap(), None);
        assert!(s.delete(b"k010").unwrap());
        assert!(!s.delete(b"k010").unwrap());
        assert_eq!(s.len(), 199);
        let r =
            ScanRange { start: Bound::Included(b"k008".to_vec()), end: Bound::Excluded(b"k013".to_vec()), limit: 3 };
        let keys: Vec<_> = s.scan(&r).unwrap().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, vec![b"k008".to_vec(), b"k009".to_vec(), b"k011".to_vec()], "{engine}");
        assert_eq!(s.engine().min_max().unwrap(), Some((b"k000".to_vec(), b"k199".to_vec())));
        s.engine().check().unwrap();
    }
}

#[test]
fn persistent_engines_reopen_by_layout() {
    let d = dir();
    let path = d.path().join("h.pool");
    {
        let s = Store::open(&path, "hart", &Options::default()).unwrap();
        s.put(b"a", b"1").unwrap();
    }
    let s = Store::open_existing(&path, &Options::default()).unwrap();
    assert_eq!(s.engine().name(), "hart");
    assert_eq!(s.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert!(s.engine().recovery_info().unwrap().contains("clean"));
}

#[test]
fn errors_are_values() {
    let d = dir();
    let path = d.path().join("x.pool");
    assert!(matches!(Store::open(&path, "nosuch", &Options::default()), Err(Error::UnknownEngine(_))));
    let o = Options { create: false, ..Options::default() };
    assert!(matches!(Store::open(&path, "hart", &o), Err(Error::Pool(pmkv_substrate::PoolError::NotFound { .. }))));
    let s = Store::open(&path, "hart", &Options::default()).unwrap();
    // A second open of the same pool is refused while the first is open.
    assert!(matches!(
        Store::open(&path, "hart", &Options::default()),
        Err(Error::Pool(pmkv_substrate::PoolError::Locked { .. }))
    ));
    assert!(matches!(s.put(&vec![0u8; 1 << 20], b"v"), Err(Error::KeyTooLarge { .. })));
    drop(s);
    // A pool of another layout is refused by name.
    let other = d.path().join("other.pool");
    drop(pmkv_substrate::Pool::create(&other, "nbtree", &pmkv_substrate::PoolOptions::default()).unwrap());
    assert!(Store::open(&other, "hart", &Options::default()).is_err());
    assert!(matches!(Store::open_existing(&other, &Options::default()), Err(Error::UnknownEngine(_))));
}
