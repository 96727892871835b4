//! # pmkv-volatile — the volatile baseline
//!
//! A `BTreeMap` behind a reader-writer lock, with no persistence at all. Every benchmark
//! measures it in the same run as the engines, so that "faster than DRAM" claims are
//! ratios on one machine, not figures from elsewhere; and it is the simplest engine that
//! passes the conformance suite, which makes it the suite's reference. It ignores the
//! pool path: nothing survives `close`.
//!
//! Its root names are those every engine crate has: [`FACTORY`], [`Options`], [`Error`] and
//! [`Result`], so that code (and docs) can treat the engines alike.

#![forbid(unsafe_code)]

use parking_lot::RwLock;
use pmkv_core::{
    BatchOp, CheckReport, Direction, Engine, EngineFactory, EngineInfo, ErrorKind, KeyRange, MemoryUsage, Visitor,
    WriteBatch,
};
/// The engine's errors are the core's: a map behind a lock fails in no way of its own
/// (only a read-only open refuses writes, with `ErrorKind::ReadOnly`).
pub use pmkv_core::{Error, Result};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

/// The factory the registry lists.
pub static FACTORY: VolatileFactory = VolatileFactory;

/// The engine's typed options, for uniformity with the other engine crates: there is
/// nothing to tune in a `BTreeMap` behind a lock, so this is empty (and `#[non_exhaustive]`,
/// so that a knob can be added later without breaking callers). Attaching it with
/// `pmkv_core::Options::with_engine_options` is accepted and changes nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {}

/// Opens [`Volatile`] engines.
#[derive(Debug, Default)]
pub struct VolatileFactory;

fn info() -> EngineInfo {
    EngineInfo::new("volatile", "BTreeMap behind a reader-writer lock; no persistence (the baseline)")
        .persistent(false)
        .atomic_batches(true)
}

impl EngineFactory for VolatileFactory {
    fn info(&self) -> EngineInfo {
        info()
    }
    fn layout(&self) -> Option<&'static str> {
        None
    }
    fn open(&self, _path: &Path, opts: &pmkv_core::Options) -> Result<Box<dyn Engine>> {
        self.check_params(opts)?;
        Ok(Box::new(Volatile { read_only: opts.read_only, ..Volatile::default() }))
    }
}

/// The engine.
#[derive(Default)]
pub struct Volatile {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
    /// Opened read-only: an always-empty map that refuses writes, as a read-only open of
    /// a persistent engine refuses them.
    read_only: bool,
}

impl Volatile {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    fn writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::new(ErrorKind::ReadOnly, "volatile store opened read-only"));
        }
        Ok(())
    }
}

fn upsert(m: &mut BTreeMap<Vec<u8>, Vec<u8>>, key: &[u8], value: &[u8]) {
    match m.get_mut(key) {
        Some(v) => {
            v.clear();
            v.extend_from_slice(value);
        }
        None => {
            m.insert(key.to_vec(), value.to_vec());
        }
    }
}

impl Engine for Volatile {
    fn info(&self) -> EngineInfo {
        info()
    }
    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let m = self.map.read();
        Ok(m.get(key).map(|v| f(v)).is_some())
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.writable()?;
        upsert(&mut self.map.write(), key, value);
        Ok(())
    }
    fn delete(&self, key: &[u8]) -> Result<bool> {
        self.writable()?;
        Ok(self.map.write().remove(key).is_some())
    }
    /// Atomic: one write lock over the whole batch.
    fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        self.writable()?;
        let mut m = self.map.write();
        for op in batch.ops() {
            match op {
                BatchOp::Put(k, v) => upsert(&mut m, k, v),
                BatchOp::Delete(k) => {
                    m.remove(k.as_slice());
                }
            }
        }
        Ok(())
    }
    fn scan(&self, range: &KeyRange, dir: Direction, limit: usize, visit: Visitor<'_>) -> Result<()> {
        if range.is_empty() {
            return Ok(());
        }
        let m = self.map.read();
        let bounds: (Bound<&[u8]>, Bound<&[u8]>) = (range.start_bound(), range.end_bound());
        let it = m.range::<[u8], _>(bounds);
        let mut go = |(k, v): (&Vec<u8>, &Vec<u8>)| visit(k, v);
        match dir {
            Direction::Forward => it.take(limit).all(&mut go),
            Direction::Reverse => it.rev().take(limit).all(&mut go),
        };
        Ok(())
    }
    fn len(&self) -> u64 {
        self.map.read().len() as u64
    }
    fn memory(&self) -> MemoryUsage {
        let m = self.map.read();
        let bytes: u64 = m.iter().map(|(k, v)| (k.capacity() + v.capacity() + 48) as u64).sum();
        MemoryUsage { dram: vec![("btree entries (estimate)".into(), bytes)], pm: vec![] }
    }
    fn check(&self) -> Result<CheckReport> {
        let m = self.map.read();
        let mut r = CheckReport::new("volatile");
        r.fact("records", m.len());
        Ok(r)
    }
    fn sync(&self) -> Result<()> {
        Ok(())
    }
    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
    fn poison(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_options_are_accepted_and_the_store_works() {
        let opts = pmkv_core::Options::default().with_engine_options(Options::default());
        assert_eq!(opts.engine_options::<Options>(), Some(&Options::default()));
        let e = FACTORY.open(Path::new("unused"), &opts).unwrap();
        e.put(b"k", b"v").unwrap();
        let mut got = Vec::new();
        assert!(e.get_with(b"k", &mut |v| got = v.to_vec()).unwrap());
        assert_eq!(got, b"v");
        assert!(!e.delete(b"missing").unwrap());
        let mut ro = opts.clone();
        ro.read_only = true;
        let r: Result<()> = FACTORY.open(Path::new("unused"), &ro).unwrap().put(b"k", b"v");
        let err: Error = r.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ReadOnly);
    }
}
