//! What the cases share: fresh pools, opening through a factory, reading a whole store.

use pmkv::{EngineFactory, ErrorKind, KeyRange, Options, Result, Store};
use std::path::PathBuf;

use pmkv_testutil::model_of_scan;
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
    model_of_scan(s.range(&KeyRange::all()).map(|r| r.expect("cursor step")))
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
