//! FPTree behind the engine contract of `pmkv-core`.

use crate::error::Error as FpError;
use crate::layout::{CAP, MAX_KEY, MAX_VALUE};
use crate::tree::{FpTree, Options as FpOptions};
use pmkv_core::{
    CheckReport, Direction, Engine, EngineFactory, EngineInfo, Error, ErrorKind, KeyRange, MemoryUsage, Options, Pool,
    RecoveryReport, Result, Visitor, WriteBatch,
};
use std::sync::Arc;

/// The layout name FPTree pools carry in their header.
pub(crate) const LAYOUT: &str = "fptree";

/// The factory the registry lists.
pub static FACTORY: FpTreeFactory = FpTreeFactory;

/// Opens FPTree engines.
#[derive(Debug, Default)]
pub struct FpTreeFactory;

fn info() -> EngineInfo {
    EngineInfo::new(
        "fptree",
        "FPTree: DRAM inner nodes over fingerprinted unsorted PM leaves, locks instead of TSX (Oukid et al., SIGMOD 2016)",
    )
    .persistent(true)
    .atomic_batches(true)
    .limits(MAX_KEY, MAX_VALUE)
    .node_keys(CAP)
}

impl From<FpError> for Error {
    fn from(e: FpError) -> Error {
        match e {
            FpError::Pool(p) => p.into(),
            FpError::KeyTooLarge(len) => Error::key_too_large(len, MAX_KEY),
            FpError::ValueTooLarge(len) => Error::value_too_large(len, MAX_VALUE),
            FpError::Corrupt(_) => Error::with_source(ErrorKind::Corrupt, e),
            FpError::Version(_) => Error::with_source(ErrorKind::Version, e),
            FpError::Invalid(m) => Error::invalid(m),
        }
    }
}

impl EngineFactory for FpTreeFactory {
    fn info(&self) -> EngineInfo {
        info()
    }
    fn layout(&self) -> Option<&'static str> {
        Some(LAYOUT)
    }
    fn open_pool(&self, pool: Arc<Pool>, opts: &Options) -> Result<Box<dyn Engine>> {
        self.check_params(opts)?;
        let o = opts.engine_options::<FpOptions>().copied().unwrap_or_default();
        Ok(Box::new(FpTreeEngine(FpTree::open_with(pool, o)?)))
    }
}

/// An open FPTree as an [`Engine`].
pub(crate) struct FpTreeEngine(FpTree);

impl Engine for FpTreeEngine {
    fn info(&self) -> EngineInfo {
        info()
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
    /// Atomic batches of two or more operations go through the batch log (all or nothing
    /// across a crash, see `batch`); independent ones are applied in order.
    fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        Ok(self.0.write_batch(&batch.log_ops(), batch.is_atomic())?)
    }
    fn scan(&self, range: &KeyRange, dir: Direction, limit: usize, visit: Visitor<'_>) -> Result<()> {
        if range.is_empty() {
            return Ok(());
        }
        Ok(self.0.scan(range.start_bound(), range.end_bound(), limit, dir == Direction::Reverse, visit)?)
    }
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn memory(&self) -> MemoryUsage {
        let (dram, pm) = self.0.memory();
        MemoryUsage { dram, pm }
    }
    fn check(&self) -> Result<CheckReport> {
        let mut r = CheckReport::new("fptree");
        match self.0.check() {
            Ok(summary) => {
                r.fact("summary", summary);
            }
            Err(FpError::Corrupt(problems)) => {
                for p in problems.lines() {
                    r.problem(p);
                }
            }
            Err(e) => return Err(e.into()),
        }
        Ok(r)
    }
    fn recovery(&self) -> Option<RecoveryReport> {
        Some(self.0.recovery_report().clone())
    }
    fn sync(&self) -> Result<()> {
        Ok(self.0.sync()?)
    }
    fn close(self: Box<Self>) -> Result<()> {
        Ok(self.0.close()?)
    }
    fn poison(&self) {
        self.0.pool().poison();
    }
    fn pool(&self) -> Option<&Arc<Pool>> {
        Some(self.0.pool())
    }
}
