//! What the cases share: fresh pools, opening through a factory, reading a whole store.

use pmkv::{EngineFactory, ErrorKind, KeyRange, Options, Result, Store};
use std::path::PathBuf;

use pmkv_testutil::model_of_scan;
pub use pmkv_testutil::{edge_keys, pool_dir, tag_of, tagged_value, Model};

/// Options for test pools: small, growing on demand; in the mode [`in_wal`] sets for
/// this thread, if any.
pub fn opts() -> Options {
    let o = Options::default().initial_size(4 << 20).max_size(1 << 30);
    match MODE.get() {
        Some(m) => o.mode(m),
        None => o,
    }
}

thread_local! {
    /// The mode every pool the suite opens on this thread takes (`None`: the library's).
    static MODE: std::cell::Cell<Option<pmkv::Mode>> = const { std::cell::Cell::new(None) };
}

/// Why `f` does not run the suite in mode `wal` (`None`: it does): an engine without a
/// pool, or one that declares it cannot run in `wal` (`EngineInfo::mode_wal`).
pub fn wal_unsupported(f: &dyn EngineFactory) -> Option<String> {
    let info = f.info();
    if !info.persistent {
        return Some("not a persistent engine: it has no pool to log".into());
    }
    (!info.mode_wal).then(|| "declares it cannot run in mode wal (EngineInfo::mode_wal)".into())
}

/// Run case `run` for `f` with every pool opened in mode `wal` (the redo log beside the
/// pool, group commit, checkpoints): what an engine does must not depend on how its
/// flushes become durable. The checkpoint threshold is left at its default, so a case
/// that writes more than it (64 MiB of log) also passes a checkpoint. An engine that
/// cannot run in `wal` skips, saying why on stderr.
pub fn in_wal(f: &dyn EngineFactory, run: impl FnOnce()) {
    if let Some(why) = wal_unsupported(f) {
        eprintln!("SKIPPED in mode wal: engine '{}': {why}", f.info().name);
        return;
    }
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            MODE.set(None);
        }
    }
    MODE.set(Some(pmkv::Mode::Wal));
    let _reset = Reset;
    run();
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
