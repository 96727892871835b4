//! What the cases share: fresh pools, opening through a factory, reading a whole store.

use pmkv::{EngineFactory, ErrorKind, KeyRange, Options, Result, Store};
use std::path::PathBuf;

pub use pmkv_testutil::{edge_keys, pool_dir, tag_of, tagged_value, Model};

/// Options for test pools: small, growing on demand.
pub fn opts() -> Options {
    Options::default().initial_size(4 << 20).max_size(1 << 30)
}

/// A fresh store of `f` in `dir`, with its path.
pub fn fresh(f: &dyn EngineFactory, dir: &tempfile::TempDir) -> (Store, PathBuf) {
    let path = dir.path().join(format!("{}.pool", f.info().name));
    let s = Store::open_with(f, &path, &opts()).expect("open a fresh store");
    (s, path)
}

/// Every record, read with a cursor, checked to come out strictly ascending.
pub fn contents(s: &Store) -> Model {
    let mut m = Model::new();
    let mut last: Option<Vec<u8>> = None;
    for r in s.range(&KeyRange::all()) {
        let (k, v) = r.expect("cursor step");
        if let Some(l) = &last {
            assert!(*l < k, "cursor out of order: {l:?} then {k:?}");
        }
        last = Some(k.clone());
        m.insert(k, v);
    }
    m
}

/// Fill `s` (and `m`) with `pairs`.
pub fn fill(s: &Store, m: &mut Model, pairs: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) {
    for (k, v) in pairs {
        s.put(&k, &v).expect("put");
        m.insert(k, v);
    }
}

/// `r` failed with `kind`.
#[track_caller]
pub fn assert_kind<T: std::fmt::Debug>(r: Result<T>, kind: ErrorKind) {
    match r {
        Err(e) => assert_eq!(e.kind(), kind, "wrong error kind for: {e}"),
        Ok(v) => panic!("expected a {kind} error, got Ok({v:?})"),
    }
}
