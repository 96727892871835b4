//! The suite can fail: cases run against engines broken on purpose must panic. (A case
//! that passes whatever the engine does checks nothing.)

use pmkv_core::{
    BatchOp, CheckReport, Direction, Engine, EngineFactory, EngineInfo, KeyRange, MemoryUsage, Options, Result,
    Visitor, WriteBatch,
};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What a broken engine does differently from the engine it wraps: each hook defaults to
/// the wrapped engine's own operation.
trait Fault: Send + Sync + 'static {
    fn get_with(&self, inner: &dyn Engine, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        inner.get_with(key, f)
    }
    fn put(&self, inner: &dyn Engine, key: &[u8], value: &[u8]) -> Result<()> {
        inner.put(key, value)
    }
    fn write_batch(&self, inner: &dyn Engine, batch: &WriteBatch) -> Result<()> {
        inner.write_batch(batch)
    }
}

/// An engine with a [`Fault`]; everything the fault leaves alone goes to `inner`.
struct Broken<F: Fault> {
    inner: Box<dyn Engine>,
    fault: F,
}

impl<F: Fault> Engine for Broken<F> {
    fn info(&self) -> EngineInfo {
        self.inner.info()
    }
    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        self.fault.get_with(&*self.inner, key, f)
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.fault.put(&*self.inner, key, value)
    }
    fn delete(&self, key: &[u8]) -> Result<bool> {
        self.inner.delete(key)
    }
    fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        self.fault.write_batch(&*self.inner, batch)
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
    fn pool(&self) -> Option<&Arc<pmkv_core::Pool>> {
        self.inner.pool()
    }
}

/// Opens `base`'s engine and wraps it in the fault `make` gives.
struct BrokenFactory<F: Fault> {
    base: &'static dyn EngineFactory,
    make: fn() -> F,
}

impl<F: Fault> BrokenFactory<F> {
    fn wrap(&self, inner: Box<dyn Engine>) -> Box<dyn Engine> {
        Box::new(Broken { inner, fault: (self.make)() })
    }
}

impl<F: Fault> EngineFactory for BrokenFactory<F> {
    fn info(&self) -> EngineInfo {
        self.base.info()
    }
    fn layout(&self) -> Option<&'static str> {
        self.base.layout()
    }
    fn open(&self, path: &Path, opts: &Options) -> Result<Box<dyn Engine>> {
        Ok(self.wrap(self.base.open(path, opts)?))
    }
    fn open_pool(&self, pool: Arc<pmkv_core::Pool>, opts: &Options) -> Result<Box<dyn Engine>> {
        Ok(self.wrap(self.base.open_pool(pool, opts)?))
    }
}

/// Per key, the value before its latest `put` (`None`: absent), and a count of `get`s.
type Previous = (u64, HashMap<Vec<u8>, Option<Vec<u8>>>);

/// The volatile baseline, except that one `get` in four of a key answers with the value
/// that key held before its latest `put`: a stale read, as a reader that missed a
/// writer's publication would give.
#[derive(Default)]
struct StaleReads(Mutex<Previous>);

impl Fault for StaleReads {
    fn get_with(&self, inner: &dyn Engine, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let stale = {
            let mut p = self.0.lock().unwrap();
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
            None => inner.get_with(key, f),
        }
    }
    fn put(&self, inner: &dyn Engine, key: &[u8], value: &[u8]) -> Result<()> {
        let mut before = None;
        inner.get_with(key, &mut |v| before = Some(v.to_vec()))?;
        self.0.lock().unwrap().1.insert(key.to_vec(), before);
        inner.put(key, value)
    }
}

static STALE: BrokenFactory<StaleReads> = BrokenFactory { base: &pmkv_volatile::FACTORY, make: StaleReads::default };

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
struct PrefixBatches;

impl Fault for PrefixBatches {
    fn write_batch(&self, inner: &dyn Engine, batch: &WriteBatch) -> Result<()> {
        batch.ops().iter().try_for_each(|op| match op {
            BatchOp::Put(k, v) => inner.put(k, v),
            BatchOp::Delete(k) => inner.delete(k).map(drop),
        })
    }
}

static PREFIX: BrokenFactory<PrefixBatches> = BrokenFactory { base: &pmkv_hart::FACTORY, make: || PrefixBatches };

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
struct TransientMagic;

impl Fault for TransientMagic {
    fn put(&self, inner: &dyn Engine, key: &[u8], value: &[u8]) -> Result<()> {
        let pool = inner.pool().expect("HART runs on a pool");
        let sb = pool.root(1);
        // SAFETY: the superblock is an 8-aligned object inside the pool that HART writes
        // only when it is created; this test runs one thread, and no reference to the
        // word is alive while it is read and stored to.
        unsafe {
            let magic = pool.load_u64(sb);
            pool.store_u64(sb, 0);
            pool.store_u64(sb, magic);
        }
        inner.put(key, value)
    }
}

static TRANSIENT: BrokenFactory<TransientMagic> = BrokenFactory { base: &pmkv_hart::FACTORY, make: || TransientMagic };

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
