//! FAST&FAIR behind the engine contract of `pmkv-core` (SPEC U1).

use crate::error::Error as FfError;
use crate::layout::{CAP, MAX_KEY, MAX_VALUE};
use crate::tree::FastFair;
use pmkv_core::{
    CheckReport, Direction, Engine, EngineFactory, EngineInfo, Error, ErrorKind, KeyRange, MemoryUsage, Options, Pool,
    RecoveryReport, Result, Visitor,
};
use std::sync::Arc;

/// The layout name FAST&FAIR pools carry in their header.
pub(crate) const LAYOUT: &str = "fastfair";

/// The factory the registry lists.
pub static FACTORY: FastFairFactory = FastFairFactory;

/// Opens FAST&FAIR engines.
#[derive(Debug, Default)]
pub struct FastFairFactory;

fn info() -> EngineInfo {
    EngineInfo::new(
        "fastfair",
        "FAST&FAIR: B+-tree wholly in PM, failure-atomic shifts and in-place splits, readers take no lock (Hwang et al., FAST 2018)",
    )
    .persistent(true)
    .atomic_batches(false)
    .limits(MAX_KEY, MAX_VALUE)
    .node_keys(CAP)
}

impl From<FfError> for Error {
    fn from(e: FfError) -> Error {
        match e {
            FfError::Pool(p) => p.into(),
            FfError::KeyTooLarge(len) => Error::key_too_large(len, MAX_KEY),
            FfError::ValueTooLarge(len) => Error::value_too_large(len, MAX_VALUE),
            FfError::Corrupt(_) => Error::with_source(ErrorKind::Corrupt, e),
            FfError::Version(_) => Error::with_source(ErrorKind::Version, e),
        }
    }
}

impl EngineFactory for FastFairFactory {
    fn info(&self) -> EngineInfo {
        info()
    }
    fn layout(&self) -> Option<&'static str> {
        Some(LAYOUT)
    }
    fn open_pool(&self, pool: Arc<Pool>, opts: &Options) -> Result<Box<dyn Engine>> {
        self.check_params(opts)?;
        let o = opts.engine_options::<crate::tree::Options>().copied().unwrap_or_default();
        Ok(Box::new(FastFairEngine(FastFair::open_with(pool, o)?)))
    }
}

/// An open FAST&FAIR tree as an [`Engine`].
pub(crate) struct FastFairEngine(FastFair);

impl Engine for FastFairEngine {
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
        // The tree keeps nothing in DRAM but its handle: every node is in PM.
        MemoryUsage { dram: vec![("handle".into(), std::mem::size_of::<FastFair>() as u64)], pm: self.0.memory() }
    }
    fn check(&self) -> Result<CheckReport> {
        let mut r = CheckReport::new("fastfair");
        match self.0.check() {
            Ok(summary) => {
                r.fact("summary", summary);
            }
            Err(FfError::Corrupt(problems)) => {
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
