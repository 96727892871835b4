//! NBTree behind the engine contract of `pmkv-core` (SPEC U1).

use crate::error::Error as NbError;
use crate::layout::{MAX_KEY, MAX_VALUE};
use crate::tree::{NbTree, Options as NbOptions};
use pmkv_core::{
    CheckReport, Direction, Engine, EngineFactory, EngineInfo, Error, ErrorKind, KeyRange, MemoryUsage, Options, Pool,
    RecoveryReport, Result, Visitor, WriteBatch,
};
use std::sync::Arc;

/// The layout name NBTree pools carry in their header.
pub(crate) const LAYOUT: &str = "nbtree";

const PARAMS: &[pmkv_core::Param] = &[
    pmkv_core::Param {
        name: "write_locks",
        doc: "true: NBTree-W, the paper's ablation: writers take a per-leaf lock instead of writing lock-free (default false)",
    },
    pmkv_core::Param {
        name: "single_layer",
        doc: "true: NBTree-SL, the paper's ablation: leaf metadata (bitmap, num, fingerprints) in the PM block instead of DRAM; chosen when the pool is created (default false)",
    },
];

/// The options `opts` give NBTree: the typed [`crate::Options`] if attached, then any
/// `key=value` parameters on top.
pub(crate) fn nbtree_options(opts: &Options) -> Result<NbOptions> {
    let mut o = opts.engine_options::<NbOptions>().copied().unwrap_or_default();
    for (k, v) in opts.params() {
        let flag = match k.as_str() {
            "write_locks" => &mut o.write_locks,
            "single_layer" => &mut o.single_layer,
            _ => continue,
        };
        *flag = v.parse().map_err(|_| Error::invalid(format!("nbtree parameter {k}={v}: not true or false")))?;
    }
    Ok(o)
}

/// The factory the registry lists.
pub static FACTORY: NbTreeFactory = NbTreeFactory;

/// Opens NBTree engines.
#[derive(Debug, Default)]
pub struct NbTreeFactory;

fn info() -> EngineInfo {
    EngineInfo::new(
        "nbtree",
        "NBTree: lock-free B+-tree, DRAM leaf metadata and inner nodes over PM key-value blocks (Zhang et al., VLDB 2022)",
    )
    .persistent(true)
    .atomic_batches(true)
    .limits(MAX_KEY, MAX_VALUE)
    .node_keys(crate::layout::CAP)
}

impl From<NbError> for Error {
    fn from(e: NbError) -> Error {
        match e {
            NbError::Pool(p) => p.into(),
            NbError::KeyTooLarge(len) => Error::key_too_large(len, MAX_KEY),
            NbError::ValueTooLarge(len) => Error::value_too_large(len, MAX_VALUE),
            NbError::Corrupt(_) => Error::with_source(ErrorKind::Corrupt, e),
            NbError::Version(_) => Error::with_source(ErrorKind::Version, e),
            NbError::Invalid(m) => Error::invalid(m),
        }
    }
}

impl EngineFactory for NbTreeFactory {
    fn info(&self) -> EngineInfo {
        info()
    }
    fn layout(&self) -> Option<&'static str> {
        Some(LAYOUT)
    }
    fn params(&self) -> &'static [pmkv_core::Param] {
        PARAMS
    }
    fn open_pool(&self, pool: Arc<Pool>, opts: &Options) -> Result<Box<dyn Engine>> {
        self.check_params(opts)?;
        Ok(Box::new(NbTreeEngine(NbTree::open_with(pool, nbtree_options(opts)?)?)))
    }
    fn salvage(&self, image: &[u8], emit: pmkv_core::Emit<'_>) -> Result<pmkv_core::SalvageReport> {
        crate::salvage::salvage(image, emit)
    }
}

/// An open NBTree as an [`Engine`].
pub(crate) struct NbTreeEngine(NbTree);

impl Engine for NbTreeEngine {
    fn info(&self) -> EngineInfo {
        info()
    }
    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        Ok(self.0.get_with(key, f)?)
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.0.put(key, value)?;
        Ok(())
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
        let mut r = CheckReport::new("nbtree");
        match self.0.check() {
            Ok(summary) => {
                r.fact("summary", summary);
            }
            Err(NbError::Corrupt(problems)) => {
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
