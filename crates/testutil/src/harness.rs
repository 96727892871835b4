//! Scenarios that every engine's own integration tests run the same way, over a small
//! trait ([`Kv`]) that each engine's `tests/common` implements for a wrapper of its type.
//! (The conformance suite runs through the `Engine` trait instead; these scenarios drive
//! an engine's own type directly, with its own options and pool handling, so that a
//! failure points at the engine and not at the API layer above it.)

use crate::model::{model_of_scan, Model, Records};
use std::ops::Bound;

/// What a scenario needs of an engine's own type. (`len` without `is_empty`: the
/// scenarios compare counts with the model's, they never ask whether a store is empty.)
#[allow(clippy::len_without_is_empty)]
pub trait Kv {
    fn put(&self, key: &[u8], value: &[u8]);
    fn get(&self, key: &[u8]) -> Option<Vec<u8>>;
    fn delete(&self, key: &[u8]) -> bool;
    fn len(&self) -> u64;
    /// At most `limit` records of `[start, end]` in key order (descending if `reverse`).
    fn scan(&self, start: Bound<&[u8]>, end: Bound<&[u8]>, limit: usize, reverse: bool) -> Records;
    /// The engine's own invariant check; panics on a finding.
    fn check(&self);
    /// A clean shutdown.
    fn close(self);
}

/// Every record, as a model.
pub fn contents<K: Kv>(kv: &K) -> Model {
    model_of_scan(kv.scan(Bound::Unbounded, Bound::Unbounded, usize::MAX, false))
}

/// The Dictionary workload (docs/requirements.md, W): every word of data/words.txt.gz
/// with its line number as value, searched, scanned in order and in reverse, every third
/// word deleted, closed, reopened with `reopen`, and compared with the model again.
pub fn dictionary<K: Kv>(create: impl FnOnce() -> K, reopen: impl FnOnce() -> K) {
    let words = crate::words();
    assert_eq!(words.len(), crate::WORDS);
    let mut model = Model::new();
    let kv = create();
    for (i, w) in words.iter().enumerate() {
        let v = (i + 1).to_string().into_bytes();
        kv.put(w, &v);
        model.insert(w.clone(), v);
    }
    assert_eq!(kv.len(), model.len() as u64);
    for (w, v) in &model {
        assert_eq!(kv.get(w).as_ref(), Some(v), "word {:?}", String::from_utf8_lossy(w));
    }
    assert_eq!(kv.get(b"no-such-word-xyz"), None);
    assert!(contents(&kv) == model, "scan differs from the model");
    let rev = kv.scan(Bound::Unbounded, Bound::Unbounded, 1000, true);
    let want: Vec<_> = model.iter().rev().take(1000).map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(rev, want, "reverse scan");
    for w in words.iter().step_by(3) {
        if model.remove(w).is_some() {
            assert!(kv.delete(w));
        }
    }
    kv.check();
    kv.close();
    let kv = reopen();
    assert_eq!(kv.len(), model.len() as u64);
    assert!(contents(&kv) == model, "after reopening");
    kv.check();
}

/// `n` keys put in a scattered order, the first `deleted` of them deleted, closed, and
/// reopened with `reopen`: everything is there. Returns the reopened store and the model
/// for the engine's own further checks.
pub fn reopen_keeps_everything<K: Kv>(
    create: impl FnOnce() -> K,
    reopen: impl FnOnce() -> K,
    n: u32,
    deleted: u32,
) -> (K, Model) {
    let mut m = Model::new();
    let kv = create();
    for i in 0..n {
        let k = format!("key{}", i as u64 * 7919 % n as u64).into_bytes();
        let v = format!("value {i}").into_bytes();
        kv.put(&k, &v);
        m.insert(k, v);
    }
    for i in 0..deleted {
        let k = format!("key{i}").into_bytes();
        assert!(kv.delete(&k));
        m.remove(&k);
    }
    kv.close();
    let kv = reopen();
    assert_eq!(contents(&kv), m);
    kv.check();
    (kv, m)
}

/// Declares `pub struct $wrapper(pub $engine)` with `Deref` to the engine and the [`Kv`]
/// impl every engine's tests write alike: the engine's `put`, `delete`, `len`, `check`
/// and `close`, and the `get(&engine, key)` and `scan(&engine, start, end, limit,
/// reverse)` helpers that the invoking test module defines.
#[macro_export]
macro_rules! kv_wrapper {
    ($(#[$m:meta])* $wrapper:ident, $engine:ty) => {
        $(#[$m])*
        pub struct $wrapper(pub $engine);

        impl std::ops::Deref for $wrapper {
            type Target = $engine;
            fn deref(&self) -> &$engine {
                &self.0
            }
        }

        impl $crate::harness::Kv for $wrapper {
            fn put(&self, key: &[u8], value: &[u8]) {
                self.0.put(key, value).expect("put");
            }
            fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
                get(&self.0, key)
            }
            fn delete(&self, key: &[u8]) -> bool {
                self.0.delete(key).expect("delete")
            }
            fn len(&self) -> u64 {
                self.0.len()
            }
            fn scan(
                &self,
                start: std::ops::Bound<&[u8]>,
                end: std::ops::Bound<&[u8]>,
                limit: usize,
                reverse: bool,
            ) -> $crate::Records {
                scan(&self.0, start, end, limit, reverse)
            }
            fn check(&self) {
                self.0.check().expect("check");
            }
            fn close(self) {
                self.0.close().expect("close");
            }
        }
    };
}
