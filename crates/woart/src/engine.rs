//! WOART and ART+CoW behind the engine contract of `pmkv-core`.

use crate::cow::ArtCow;
use crate::error::Error as WError;
use crate::layout::{Variant, MAX_KEY, MAX_VALUE};
use crate::tree::{Options as WOptions, Woart};
use pmkv_core::{
    CheckReport, Direction, Engine, EngineFactory, EngineInfo, Error, ErrorKind, KeyRange, MemoryUsage, Options, Pool,
    RecoveryReport, Result, Visitor,
};
use std::sync::Arc;

/// The factory of WOART engines the registry lists.
pub static FACTORY: WoartFactory = WoartFactory(Variant::Woart);

/// The factory of ART+CoW engines (`artcow`), the paper's copy-on-write competitor.
pub static ARTCOW_FACTORY: WoartFactory = WoartFactory(Variant::ArtCow);

/// Opens WOART engines, or ART+CoW's ([`ARTCOW_FACTORY`]): one type, since the two trees
/// share everything but their write paths.
#[derive(Debug)]
pub struct WoartFactory(Variant);

impl Default for WoartFactory {
    fn default() -> WoartFactory {
        WoartFactory(Variant::Woart)
    }
}

fn info(v: Variant) -> EngineInfo {
    let about = match v {
        Variant::Woart => {
            "WOART: write-optimal adaptive radix tree in PM, 8-byte failure-atomic updates (Lee et al., FAST'17)"
        }
        Variant::ArtCow => {
            "ART+CoW: adaptive radix tree in PM made failure-atomic by copy-on-write (Lee et al., FAST'17)"
        }
    };
    EngineInfo::new(v.name(), about).persistent(true).atomic_batches(false).limits(MAX_KEY, MAX_VALUE).node_keys(256)
}

impl From<WError> for Error {
    fn from(e: WError) -> Error {
        match e {
            WError::Pool(p) => p.into(),
            WError::KeyTooLarge(len) => Error::key_too_large(len, MAX_KEY),
            WError::ValueTooLarge(len) => Error::value_too_large(len, MAX_VALUE),
            WError::Corrupt(_) => Error::with_source(ErrorKind::Corrupt, e),
            WError::Version(_) => Error::with_source(ErrorKind::Version, e),
        }
    }
}

impl EngineFactory for WoartFactory {
    fn info(&self) -> EngineInfo {
        info(self.0)
    }
    fn layout(&self) -> Option<&'static str> {
        Some(self.0.name())
    }
    fn open_pool(&self, pool: Arc<Pool>, opts: &Options) -> Result<Box<dyn Engine>> {
        self.check_params(opts)?;
        let o = opts.engine_options::<WOptions>().copied().unwrap_or_default();
        let tree = match self.0 {
            Variant::Woart => Woart::open_with(pool, o)?,
            Variant::ArtCow => ArtCow::open_with(pool, o)?.into_inner(),
        };
        Ok(Box::new(WoartEngine(tree)))
    }
}

/// An open WOART or ART+CoW as an [`Engine`].
pub(crate) struct WoartEngine(Woart);

impl Engine for WoartEngine {
    fn info(&self) -> EngineInfo {
        info(self.0.variant)
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
        MemoryUsage {
            dram: vec![("tree".into(), std::mem::size_of::<Woart>() as u64)],
            pm: vec![("heap".into(), self.0.pool().used())],
        }
    }
    fn check(&self) -> Result<CheckReport> {
        let mut r = CheckReport::new(self.0.variant.name());
        match self.0.check() {
            Ok(summary) => {
                r.fact("summary", summary);
            }
            Err(WError::Corrupt(problems)) => {
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
