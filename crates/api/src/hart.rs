//! Adapter: HART behind the [`Engine`] trait.

use crate::engine::{Engine, MemoryUsage, Options, ScanRange};
use crate::error::{Error, Result};
use pmkv_hart::{Hart, HartError, HartOptions};
use pmkv_substrate::{Pool, PoolError};
use std::path::Path;
use std::sync::Arc;

impl From<HartError> for Error {
    fn from(e: HartError) -> Error {
        match e {
            HartError::Pool(p) => Error::Pool(p),
            HartError::KeyTooLarge(len) => Error::KeyTooLarge { len, max: pmkv_hart::layout::MAX_KEY },
            HartError::ValueTooLarge(len) => Error::ValueTooLarge { len, max: pmkv_hart::layout::MAX_VALUE },
            HartError::BadHashKeyLen(n) => Error::Other(format!("hash key length {n} is out of range (0..=7)")),
            HartError::Corrupt(s) => Error::Corrupt(s),
        }
    }
}

pub struct HartEngine(pub Hart);

impl HartEngine {
    pub fn open(path: &Path, opts: &Options) -> Result<HartEngine> {
        let po = opts.pool_options();
        let pool = if opts.read_only {
            Pool::open_read_only(path, Some("hart"), &po)?
        } else {
            match Pool::open(path, Some("hart"), &po) {
                Err(PoolError::NotFound { .. }) if opts.create => Pool::create(path, "hart", &po)?,
                r => r?,
            }
        };
        Ok(HartEngine(Hart::open(
            Arc::new(pool),
            HartOptions { hash_key_len: opts.hash_key_len, paper_updates: opts.hart_paper_updates },
        )?))
    }
}

impl Engine for HartEngine {
    fn name(&self) -> &'static str {
        "hart"
    }
    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        Ok(self.0.get_with(key, f)?)
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.0.put(key, value)?)
    }
    fn delete(&self, key: &[u8]) -> Result<bool> {
        Ok(self.0.delete(key)?)
    }
    fn scan(&self, range: &ScanRange, f: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        Ok(self.0.scan(range.start_bound(), range.end_bound(), range.limit, f)?)
    }
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn memory(&self) -> MemoryUsage {
        let (dram, pm) = self.0.memory();
        MemoryUsage { dram, pm }
    }
    fn check(&self) -> Result<String> {
        Ok(self.0.check()?)
    }
    fn min_max(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        Ok(self.0.min_max())
    }
    fn recovery_info(&self) -> Option<String> {
        let r = self.0.recovery_report();
        Some(format!(
            "{} shutdown; {} leaves into {} ARTs in {:.3} ms; updates redone {}, rolled back {}; orphans freed {}",
            if r.clean { "clean" } else { "unclean" },
            r.leaves,
            r.arts,
            r.micros as f64 / 1000.0,
            r.updates_redone,
            r.updates_rolled_back,
            r.orphans_freed
        ))
    }
}
