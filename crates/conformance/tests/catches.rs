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

/// HART with its batches applied one operation after the other, as before it had a batch
/// log, while it still declares `atomic_batches`: a crash then keeps a prefix of a batch.
struct PrefixBatches(Box<dyn Engine>);

impl Engine for PrefixBatches {
    fn info(&self) -> EngineInfo {
        self.0.info()
    }
    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        self.0.get_with(key, f)
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.0.put(key, value)
    }
    fn delete(&self, key: &[u8]) -> Result<bool> {
        self.0.delete(key)
    }
    // `write_batch`: the trait's default, one operation after the other.
    fn scan(&self, range: &KeyRange, dir: Direction, limit: usize, visit: Visitor<'_>) -> Result<()> {
        self.0.scan(range, dir, limit, visit)
    }
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn memory(&self) -> MemoryUsage {
        self.0.memory()
    }
    fn check(&self) -> Result<CheckReport> {
        self.0.check()
    }
    fn sync(&self) -> Result<()> {
        self.0.sync()
    }
    fn close(self: Box<Self>) -> Result<()> {
        self.0.close()
    }
    fn poison(&self) {
        self.0.poison()
    }
    fn pool(&self) -> Option<&std::sync::Arc<pmkv_core::Pool>> {
        self.0.pool()
    }
}

struct PrefixFactory;

impl EngineFactory for PrefixFactory {
    fn info(&self) -> EngineInfo {
        pmkv_hart::FACTORY.info()
    }
    fn layout(&self) -> Option<&'static str> {
        pmkv_hart::FACTORY.layout()
    }
    fn open_pool(&self, pool: std::sync::Arc<pmkv_core::Pool>, opts: &Options) -> Result<Box<dyn Engine>> {
        Ok(Box::new(PrefixBatches(pmkv_hart::FACTORY.open_pool(pool, opts)?)))
    }
}

static PREFIX: PrefixFactory = PrefixFactory;

#[test]
fn atomic_batch_case_catches_a_batch_applied_without_its_log() {
    assert!(PREFIX.info().atomic_batches, "HART declares atomic batches");
    let r = std::panic::catch_unwind(|| pmkv_conformance::crash::atomic_batch_every_crash_point(&PREFIX));
    let msg = match r {
        Ok(()) => panic!("a batch applied one operation after the other passed the atomic batch case"),
        Err(p) => p.downcast_ref::<String>().cloned().unwrap_or_default(),
    };
    assert!(msg.contains("crash consistency violated") && msg.contains("none of the 2 allowed"), "{msg}");
}

/// HART, except that each put first stores zeros over its superblock's magic (the first
/// word of the object pool root 1 names) and then stores the magic back: a word that takes
/// a transient invalid value, in two stores that no flush or fence separates. At every
/// flush and fence the superblock is whole, so the `adr` cases, whose crash points those
/// are, pass; a crash between the two stores, which eADR allows (a store is persistent
/// when it is made), leaves a pool whose HART cannot be opened.
struct TransientMagic(Box<dyn Engine>);

impl Engine for TransientMagic {
    fn info(&self) -> EngineInfo {
        self.0.info()
    }
    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        self.0.get_with(key, f)
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let pool = self.0.pool().expect("HART runs on a pool");
        let sb = pool.root(1);
        // SAFETY: the superblock is an 8-aligned object inside the pool that HART writes
        // only when it is created; this test runs one thread, and no reference to the
        // word is alive while it is read and stored to.
        unsafe {
            let magic = pool.load_u64(sb);
            pool.store_u64(sb, 0);
            pool.store_u64(sb, magic);
        }
        self.0.put(key, value)
    }
    fn delete(&self, key: &[u8]) -> Result<bool> {
        self.0.delete(key)
    }
    fn write_batch(&self, batch: &pmkv_core::WriteBatch) -> Result<()> {
        self.0.write_batch(batch)
    }
    fn scan(&self, range: &KeyRange, dir: Direction, limit: usize, visit: Visitor<'_>) -> Result<()> {
        self.0.scan(range, dir, limit, visit)
    }
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn memory(&self) -> MemoryUsage {
        self.0.memory()
    }
    fn check(&self) -> Result<CheckReport> {
        self.0.check()
    }
    fn sync(&self) -> Result<()> {
        self.0.sync()
    }
    fn close(self: Box<Self>) -> Result<()> {
        self.0.close()
    }
    fn poison(&self) {
        self.0.poison()
    }
    fn pool(&self) -> Option<&std::sync::Arc<pmkv_core::Pool>> {
        self.0.pool()
    }
}

struct TransientMagicFactory;

impl EngineFactory for TransientMagicFactory {
    fn info(&self) -> EngineInfo {
        pmkv_hart::FACTORY.info()
    }
    fn layout(&self) -> Option<&'static str> {
        pmkv_hart::FACTORY.layout()
    }
    fn open_pool(&self, pool: std::sync::Arc<pmkv_core::Pool>, opts: &Options) -> Result<Box<dyn Engine>> {
        Ok(Box::new(TransientMagic(pmkv_hart::FACTORY.open_pool(pool, opts)?)))
    }
}

static TRANSIENT: TransientMagicFactory = TransientMagicFactory;

#[test]
fn eadr_cases_catch_a_word_torn_between_two_stores() {
    // Consistent at every flush and fence: the adr case passes.
    pmkv_conformance::crash::put_delete_every_crash_point(&TRANSIENT);
    let r = std::panic::catch_unwind(|| pmkv_conformance::crash::eadr_put_delete_every_store_point(&TRANSIENT));
    let msg = match r {
        Ok(()) => panic!("a pool left invalid between two stores passed the eadr case"),
        Err(p) => p.downcast_ref::<String>().cloned().unwrap_or_default(),
    };
    assert!(msg.contains("crash consistency violated") && msg.contains("Store"), "{msg}");
}
