//! The suite can fail: cases run against engines broken on purpose must panic. (A case
//! that passes whatever the engine does checks nothing.)

use pmkv_core::{
    CheckReport, Direction, Engine, EngineFactory, EngineInfo, KeyRange, MemoryUsage, Options, Result, Visitor,
};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

/// Per key, the value before its latest `put` (`None`: absent), and a count of `get`s.
type Previous = (u64, HashMap<Vec<u8>, Option<Vec<u8>>>);

/// The volatile baseline, except that one `get` in four of a key answers with the value
/// that key held before its latest `put`: a stale read, as a reader that missed a
/// writer's publication would give.
struct StaleReads {
    inner: Box<dyn Engine>,
    previous: Mutex<Previous>,
}

impl Engine for StaleReads {
    fn info(&self) -> EngineInfo {
        self.inner.info()
    }
    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let stale = {
            let mut p = self.previous.lock().unwrap();
            p.0 += 1;
            if p.0.is_multiple_of(4) {
                p.1.get(key).cloned()
            } else {
                None
            }
        };
        match stale {
            Some(Some(v)) => {
                f(&v);
                Ok(true)
            }
            Some(None) => Ok(false),
            None => self.inner.get_with(key, f),
        }
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut before = None;
        self.inner.get_with(key, &mut |v| before = Some(v.to_vec()))?;
        self.previous.lock().unwrap().1.insert(key.to_vec(), before);
        self.inner.put(key, value)
    }
    fn delete(&self, key: &[u8]) -> Result<bool> {
        self.inner.delete(key)
    }
    fn scan(&self, range: &KeyRange, dir: Direction, limit: usize, visit: Visitor<'_>) -> Result<()> {
        self.inner.scan(range, dir, limit, visit)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn memory(&self) -> MemoryUsage {
        self.inner.memory()
    }
    fn check(&self) -> Result<CheckReport> {
        self.inner.check()
    }
    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }
    fn close(self: Box<Self>) -> Result<()> {
        self.inner.close()
    }
    fn poison(&self) {
        self.inner.poison()
    }
}

struct StaleFactory;

impl EngineFactory for StaleFactory {
    fn info(&self) -> EngineInfo {
        pmkv_volatile::FACTORY.info()
    }
    fn layout(&self) -> Option<&'static str> {
        pmkv_volatile::FACTORY.layout()
    }
    fn open(&self, path: &Path, opts: &Options) -> Result<Box<dyn Engine>> {
        let inner = pmkv_volatile::FACTORY.open(path, opts)?;
        Ok(Box::new(StaleReads { inner, previous: Mutex::new((0, HashMap::new())) }))
    }
}

static STALE: StaleFactory = StaleFactory;

#[test]
fn linearizability_case_catches_stale_reads() {
    // The engine it wraps, unbroken, passes.
    pmkv_conformance::concurrent::histories_are_linearizable(&pmkv_volatile::FACTORY);
    let r = std::panic::catch_unwind(|| pmkv_conformance::concurrent::histories_are_linearizable(&STALE));
    let msg = match r {
        Ok(()) => panic!("stale reads passed the linearizability case"),
        Err(p) => p.downcast_ref::<String>().cloned().unwrap_or_default(),
    };
    assert!(msg.contains("not linearizable") || msg.contains("fits no order"), "{msg}");
}
