//! HART behind the engine contract of `pmkv-core` (SPEC U1): the factory the `pmkv`
//! registry lists, typed options ([`crate::Options`]) and their `key=value` form.
//!
//! Here `Error`, `Options` and `Result` are `pmkv-core`'s; HART's own are written
//! `crate::Error` and `crate::Options`.

use crate::hart::Hart;
use crate::layout::{MAX_KEY, MAX_VALUE};
use pmkv_core::{
    CheckReport, Direction, Emit, Engine, EngineFactory, EngineInfo, Error, ErrorKind, KeyRange, MemoryUsage, Options,
    Param, Pool, RecoveryReport, Result, SalvageReport, Visitor, WriteBatch,
};
use std::sync::Arc;

/// The layout name HART pools carry in their header.
const LAYOUT: &str = "hart";

/// The factory the registry lists.
pub static FACTORY: HartFactory = HartFactory;

/// Opens HART engines. Reached only through [`FACTORY`] (as a `dyn EngineFactory`), so
/// the crate root does not export the type.
#[derive(Debug, Default)]
pub struct HartFactory;

const PARAMS: &[Param] = &[
    Param {
        name: "hash_key_len",
        doc: "k_h, bytes of the key that select an ART (0..=7, default 2; fixed when the pool is created)",
    },
    Param {
        name: "paper_updates",
        doc: "true: every value out of line and every update out of place, exactly as Algorithm 3 (default false)",
    },
];

fn info() -> EngineInfo {
    EngineInfo::new("hart", "HART: hash table of adaptive radix trees in DRAM over PM leaves (Pan et al., IPDPS 2019)")
        .persistent(true)
        .atomic_batches(true)
        .limits(MAX_KEY, MAX_VALUE)
        .node_keys(256)
}

impl From<crate::Error> for Error {
    fn from(e: crate::Error) -> Error {
        match e {
            crate::Error::Pool(p) => p.into(),
            crate::Error::KeyTooLarge(len) => Error::key_too_large(len, MAX_KEY),
            crate::Error::ValueTooLarge(len) => Error::value_too_large(len, MAX_VALUE),
            crate::Error::BadHashKeyLen(_) => Error::with_source(ErrorKind::InvalidArgument, e),
            crate::Error::Corrupt(_) => Error::with_source(ErrorKind::Corrupt, e),
            crate::Error::Version(_) => Error::with_source(ErrorKind::Version, e),
        }
    }
}

/// The options `opts` give HART: the typed [`crate::Options`] if attached, then any
/// `key=value` parameters on top.
fn hart_options(opts: &Options) -> Result<crate::Options> {
    let mut h = opts.engine_options::<crate::Options>().copied().unwrap_or_default();
    for (k, v) in opts.params() {
        let bad = || Error::invalid(format!("hart parameter {k}={v}: not a valid value"));
        match k.as_str() {
            "hash_key_len" => h.hash_key_len = v.parse().map_err(|_| bad())?,
            "paper_updates" => h.paper_updates = v.parse().map_err(|_| bad())?,
            _ => {}
        }
    }
    Ok(h)
}

impl EngineFactory for HartFactory {
    fn info(&self) -> EngineInfo {
        info()
    }
    fn layout(&self) -> Option<&'static str> {
        Some(LAYOUT)
    }
    fn params(&self) -> &'static [Param] {
        PARAMS
    }
    fn salvage(&self, image: &[u8], emit: Emit<'_>) -> Result<SalvageReport> {
        crate::salvage::salvage(image, emit)
    }

    fn open_pool(&self, pool: Arc<Pool>, opts: &Options) -> Result<Box<dyn Engine>> {
        self.check_params(opts)?;
        Ok(Box::new(HartEngine(Hart::open(pool, hart_options(opts)?)?)))
    }
}

/// An open HART as an [`Engine`].
struct HartEngine(Hart);

impl Engine for HartEngine {
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
    /// across a crash, see `batch`); independent ones are applied in order (a crash keeps
    /// a prefix), with group commit: consecutive puts go through [`Hart::put_many`],
    /// which shares one commit fence among the puts of a run that fall in one ART.
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
        let mut r = CheckReport::new("hart");
        match self.0.check() {
            Ok(summary) => {
                r.fact("summary", summary);
            }
            Err(crate::Error::Corrupt(problems)) => {
                for p in problems.lines() {
                    r.problem(p);
                }
            }
            Err(crate::Error::Pool(e @ pmkv_substrate::PoolError::CorruptAllocator(_))) => {
                r.problem(e.to_string());
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
