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

/// An engine's factory with parameters added to every open, so that a variant with
/// another write path (NBTree's single-layer leaves, Mangosteen's ablations) runs the
/// whole suite: `static F: WithParams = WithParams { inner: &X, params: &[("k", "v")] };`.
/// A case that sets one of these parameters itself keeps its own value.
pub struct WithParams {
    /// The engine's own factory.
    pub inner: &'static dyn EngineFactory,
    /// `key=value` parameters added to every open.
    pub params: &'static [(&'static str, &'static str)],
}

impl WithParams {
    fn opts(&self, opts: &Options) -> Options {
        let mut o = opts.clone();
        for (k, v) in self.params {
            if !opts.params().iter().any(|(set, _)| set == k) {
                o = o.param(*k, *v);
            }
        }
        o
    }
}

impl EngineFactory for WithParams {
    fn info(&self) -> pmkv_core::EngineInfo {
        self.inner.info()
    }
    fn layout(&self) -> Option<&'static str> {
        self.inner.layout()
    }
    fn params(&self) -> Vec<pmkv_core::Param> {
        self.inner.params()
    }
    fn open(&self, path: &std::path::Path, opts: &Options) -> Result<Box<dyn pmkv_core::Engine>> {
        self.inner.open(path, &self.opts(opts))
    }
    fn open_pool(&self, pool: std::sync::Arc<pmkv_core::Pool>, opts: &Options) -> Result<Box<dyn pmkv_core::Engine>> {
        self.inner.open_pool(pool, &self.opts(opts))
    }
    fn salvage(&self, image: &[u8], emit: pmkv_core::Emit<'_>) -> Result<pmkv_core::SalvageReport> {
        self.inner.salvage(image, emit)
    }
}
