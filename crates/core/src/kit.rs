//! The engine kit: what every engine would otherwise write again to stand behind
//! [`Engine`] — written once here.
//!
//! An engine crate provides its tree (or runtime) with a native API and implements two
//! traits for it:
//!
//! * [`NativeEngine`] on the open structure: point operations, a scan over a
//!   [`KeyRange`], a batch as the substrate's log operations, its own check, recovery
//!   report, memory, sync and close, all returning the one shared [`EngineError`];
//! * [`NativeFactory`] on a static value: what the engine is ([`EngineInfo`]), its pool
//!   layout, its typed options ([`EngineSettings`], whose `key=value` parameters are
//!   declared once, with their doc and parser) and how to open it on a pool.
//!
//! Every `NativeFactory` is an [`EngineFactory`] (a blanket impl) whose engines are the
//! native ones wrapped in [`Native`], the one [`Engine`] impl: the translations of
//! errors, ranges, batches, options and check reports live there and nowhere else.
//! Why this shape, and how to add an engine: docs/design/engine-kit.md.

pub use crate::batch::apply_in_order;
use crate::batch::WriteBatch;
use crate::engine::{Emit, Engine, EngineFactory, EngineInfo, Param, Visitor};
use crate::error::{Error, ErrorKind, Result};
pub(crate) use crate::options::no_such_param;
use crate::options::Options;
use crate::range::{Direction, KeyRange};
use crate::report::{CheckReport, MemoryUsage, RecoveryReport, SalvageReport};
use pmkv_substrate::batch_log::Op;
use pmkv_substrate::{Pool, PoolError};
use std::fmt::Debug;
use std::sync::Arc;

/// Why an engine's native operation failed: one type for every engine's native API, so
/// that the translation to [`Error`] is written once. An engine whose failures need a
/// kind of their own (Mangosteen's locked address, its capture refusals) classifies them
/// itself and passes the [`Error`] through [`EngineError::Other`].
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The pool refused (full, read-only, damaged allocator, ...).
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// A key longer than the engine's limit; nothing was changed.
    #[error("key of {len} bytes is longer than the limit {max}")]
    KeyTooLarge {
        /// The key's length.
        len: usize,
        /// The engine's limit.
        max: usize,
    },
    /// A value longer than the engine's limit; nothing was changed.
    #[error("value of {len} bytes is longer than the limit {max}")]
    ValueTooLarge {
        /// The value's length.
        len: usize,
        /// The engine's limit.
        max: usize,
    },
    /// The engine's data in the pool is damaged: one problem a line.
    #[error("pool data is damaged: {0}")]
    Corrupt(String),
    /// Options or an open that do not fit the pool.
    #[error("{0}")]
    Invalid(String),
    /// A format this build cannot read.
    #[error("{0}")]
    Version(String),
    /// An error the engine classified itself.
    #[error(transparent)]
    Other(#[from] Error),
}

/// The result of a native engine operation.
pub type EngineResult<T> = std::result::Result<T, EngineError>;

impl EngineError {
    /// A [`EngineError::Corrupt`] saying `what`.
    pub fn corrupt(what: impl Into<String>) -> EngineError {
        EngineError::Corrupt(what.into())
    }

    /// The API error, its message naming `engine` where the native one does not.
    pub fn into_error(self, engine: &str) -> Error {
        match self {
            EngineError::Corrupt(what) => Error::new(ErrorKind::Corrupt, format!("{engine} data is damaged: {what}")),
            e => e.into(),
        }
    }
}

impl From<EngineError> for Error {
    fn from(e: EngineError) -> Error {
        match e {
            EngineError::Pool(p) => p.into(),
            EngineError::KeyTooLarge { len, max } => Error::key_too_large(len, max),
            EngineError::ValueTooLarge { len, max } => Error::value_too_large(len, max),
            EngineError::Invalid(m) => Error::invalid(m),
            EngineError::Other(e) => e,
            e @ EngineError::Corrupt(_) => Error::with_source(ErrorKind::Corrupt, e),
            e @ EngineError::Version(_) => Error::with_source(ErrorKind::Version, e),
        }
    }
}

/// `KeyTooLarge`/`ValueTooLarge` if `key` or `value` exceed an engine's limits: the check
/// every write path makes before it touches the pool.
pub fn check_sizes(key: &[u8], value: Option<&[u8]>, max_key: usize, max_value: usize) -> EngineResult<()> {
    if key.len() > max_key {
        return Err(EngineError::KeyTooLarge { len: key.len(), max: max_key });
    }
    match value {
        Some(v) if v.len() > max_value => Err(EngineError::ValueTooLarge { len: v.len(), max: max_value }),
        _ => Ok(()),
    }
}

/// [`check_sizes`] over every put of a batch, before any of it is logged or applied (a
/// delete of a key too long to be present changes nothing, so it is not refused).
pub fn check_batch_sizes(ops: &[Op<'_>], max_key: usize, max_value: usize) -> EngineResult<()> {
    ops.iter().try_for_each(|op| match op {
        Op::Put(k, v) => check_sizes(k, Some(v), max_key, max_value),
        Op::Delete(_) => Ok(()),
    })
}

/// Close `pool` once `release` (which drops the engine's last other handle) has run, if
/// this is its last handle; a pool still shared elsewhere (a test's crash image, a clone)
/// is left to its other owner. What every engine's `close` does after sealing.
pub fn close_after(pool: Arc<Pool>, release: impl FnOnce()) -> EngineResult<()> {
    release();
    match Arc::try_unwrap(pool) {
        Ok(pool) => Ok(pool.close()?),
        Err(_) => Ok(()),
    }
}

/// One `key=value` parameter of an engine's typed options `O`, declared once: its name,
/// what it does (values, default) and how it sets `O` (the parser and the check of the
/// value; the error says why the value is refused).
pub struct Setting<O> {
    /// The key.
    pub name: &'static str,
    /// What it does, its values and default.
    pub doc: &'static str,
    /// Parse and check `value`, and set it in the options.
    pub set: fn(&mut O, &str) -> std::result::Result<(), String>,
}

/// An engine's typed options: what a Rust caller attaches with
/// [`Options::with_engine_options`], and what the `key=value` parameters of front ends set.
pub trait EngineSettings: Default + Clone + Debug + Send + Sync + 'static {
    /// The parameters, each declared once ([`Setting`]).
    const SETTINGS: &'static [Setting<Self>];

    /// A check across settings, made after every parameter is set.
    fn validate(&self) -> std::result::Result<(), String> {
        Ok(())
    }
}

/// The options `opts` give an engine: the typed `O` if attached (else its default), then
/// every `key=value` parameter on top. An unknown key is refused with the known ones
/// named; a bad value with the parameter and why. The one place parameters are parsed.
pub fn parse_settings<O: EngineSettings>(engine: &str, opts: &Options) -> Result<O> {
    let mut o = opts.engine_options::<O>().cloned().unwrap_or_default();
    for (k, v) in opts.params() {
        let Some(s) = O::SETTINGS.iter().find(|s| s.name == k) else {
            return Err(no_such_param(engine, k, O::SETTINGS.iter().map(|s| s.name)));
        };
        (s.set)(&mut o, v).map_err(|why| Error::invalid(format!("{engine} parameter {k}={v}: {why}")))?;
    }
    o.validate().map_err(|why| Error::invalid(format!("{engine} parameters: {why}")))?;
    Ok(o)
}

/// The `true`/`false` value of a parameter.
pub fn parse_bool(v: &str) -> std::result::Result<bool, String> {
    v.parse().map_err(|_| "not true or false".to_string())
}

/// A whole number in `range`.
pub fn parse_in<T>(v: &str, range: std::ops::RangeInclusive<T>) -> std::result::Result<T, String>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
{
    match v.parse::<T>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(format!("not a whole number from {} to {}", range.start(), range.end())),
    }
}

/// One of `choices` (name, value).
pub fn parse_choice<T: Copy>(v: &str, choices: &[(&str, T)]) -> std::result::Result<T, String> {
    choices.iter().find(|(n, _)| *n == v).map(|(_, t)| *t).ok_or_else(|| {
        let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
        format!("not one of {}", names.join(", "))
    })
}

/// Options for an engine without parameters.
impl EngineSettings for () {
    const SETTINGS: &'static [Setting<()>] = &[];
}

/// An open engine's native API, as the kit needs it. Implemented by the engine's own
/// structure (a tree, a runtime); [`Native`] makes it an [`Engine`].
///
/// Every method takes `&self` but `close`, and may be called from many threads at once.
pub trait NativeEngine: Send + Sync + Sized + 'static {
    /// What the open engine is and offers: its factory's info (`info`), which the default
    /// keeps; an engine whose limits depend on the open pool adjusts them.
    fn info(&self, info: EngineInfo) -> EngineInfo {
        info
    }
    /// Call `f` with the value of `key`, if present; returns whether it was.
    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> EngineResult<bool>;
    /// Insert or replace.
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()>;
    /// Remove `key`; returns whether it was present.
    fn delete(&self, key: &[u8]) -> EngineResult<bool>;
    /// Apply `ops` in order; all or nothing across a crash if `atomic` and the engine
    /// declares atomic batches. The default applies them one by one (a crash keeps a
    /// prefix).
    fn write_batch(&self, ops: &[Op<'_>], atomic: bool) -> EngineResult<()> {
        let _ = atomic;
        apply_in_order(ops, |k, v| self.put(k, v), |k| self.delete(k))
    }
    /// Visit the records of `range` (never empty: the kit answers empty ranges), in
    /// descending order if `reverse`, until `visit` returns false or `limit` were visited.
    fn scan(&self, range: &KeyRange, limit: usize, reverse: bool, visit: Visitor<'_>) -> EngineResult<()>;
    /// Number of records.
    fn len(&self) -> u64;
    /// Whether there are no records.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Memory in use, by structure.
    fn memory(&self) -> MemoryUsage;
    /// Verify the engine's invariants: a one-line summary, or `Corrupt` with one problem
    /// a line. The default report ([`NativeEngine::check_report`]) is built from it.
    fn check(&self) -> EngineResult<String>;
    /// The check as a report: the summary as a fact, or each problem. A damaged allocator
    /// found by the check is a problem too, not a failure to check.
    fn check_report(&self, engine: &str) -> EngineResult<CheckReport> {
        let mut r = CheckReport::new(engine);
        match self.check() {
            Ok(summary) => {
                r.fact("summary", summary);
            }
            Err(EngineError::Corrupt(problems)) => {
                for p in problems.lines() {
                    r.problem(p);
                }
            }
            Err(EngineError::Pool(e @ PoolError::CorruptAllocator(_))) => {
                r.problem(e.to_string());
            }
            Err(e) => return Err(e),
        }
        Ok(r)
    }
    /// What the open's recovery did.
    fn recovery(&self) -> RecoveryReport;
    /// Make every acknowledged write durable in the pool's mode.
    fn sync(&self) -> EngineResult<()>;
    /// Release the engine and close its pool cleanly.
    fn close(self) -> EngineResult<()>;
    /// The pool under the engine.
    fn pool(&self) -> &Arc<Pool>;
    /// Leave the pool marked unclean at close (the engine panicked mid-operation). The
    /// default poisons the pool; an engine with DRAM state of its own to fence off
    /// overrides it.
    fn poison(&self) {
        self.pool().poison();
    }
}

/// Implement [`NativeEngine`] methods by calling the engine's inherent methods of the same
/// name and signature, so that an engine whose native API already has them writes only
/// what differs (`memory`, ...) in its impl:
///
/// ```ignore
/// impl NativeEngine for MyTree {
///     pmkv_core::native_methods!(get_with, put, delete, scan, len, check, recovery_report, sync, close, pool);
///     fn memory(&self) -> MemoryUsage { ... }
/// }
/// ```
///
/// `tree` stands for the ten methods every tree engine has (`get_with`, `put`, `delete`,
/// `scan`, `len`, `check`, `recovery_report`, `sync`, `close`, `pool`). `recovery_report`
/// (returning `&RecoveryReport`) gives [`NativeEngine::recovery`]; `memory_pair` (an
/// inherent `memory` returning DRAM and PM use) gives [`NativeEngine::memory`]; the others
/// give the trait method of their name. A missing inherent method would make the
/// call recurse, which rustc's `unconditional_recursion` lint refuses.
#[macro_export]
macro_rules! native_methods {
    (tree $(, $m:ident)* $(,)?) => {
        $crate::native_methods!(get_with, put, delete, scan, len, check, recovery_report, sync, close, pool $(, $m)*);
    };
    ($($m:ident),* $(,)?) => { $( $crate::native_methods!(@ $m); )* };
    (@ memory_pair) => {
        fn memory(&self) -> $crate::MemoryUsage {
            let (dram, pm) = Self::memory(self);
            $crate::MemoryUsage { dram, pm }
        }
    };
    (@ get_with) => {
        fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> $crate::EngineResult<bool> {
            Self::get_with(self, key, f)
        }
    };
    (@ put) => {
        fn put(&self, key: &[u8], value: &[u8]) -> $crate::EngineResult<()> {
            Self::put(self, key, value)
        }
    };
    (@ delete) => {
        fn delete(&self, key: &[u8]) -> $crate::EngineResult<bool> {
            Self::delete(self, key)
        }
    };
    (@ write_batch) => {
        fn write_batch(&self, ops: &[$crate::LogOp<'_>], atomic: bool) -> $crate::EngineResult<()> {
            Self::write_batch(self, ops, atomic)
        }
    };
    (@ scan) => {
        fn scan(
            &self,
            range: &$crate::KeyRange,
            limit: usize,
            reverse: bool,
            visit: $crate::Visitor<'_>,
        ) -> $crate::EngineResult<()> {
            Self::scan(self, range, limit, reverse, visit)
        }
    };
    (@ len) => {
        fn len(&self) -> u64 {
            Self::len(self)
        }
    };
    (@ check) => {
        fn check(&self) -> $crate::EngineResult<String> {
            Self::check(self)
        }
    };
    (@ recovery_report) => {
        fn recovery(&self) -> $crate::RecoveryReport {
            Self::recovery_report(self).clone()
        }
    };
    (@ sync) => {
        fn sync(&self) -> $crate::EngineResult<()> {
            Self::sync(self)
        }
    };
    (@ close) => {
        fn close(self) -> $crate::EngineResult<()> {
            Self::close(self)
        }
    };
    (@ pool) => {
        fn pool(&self) -> &std::sync::Arc<$crate::Pool> {
            Self::pool(self)
        }
    };
}

/// How to open a [`NativeEngine`]: one static value per engine (its `FACTORY`). Every
/// `NativeFactory` is an [`EngineFactory`].
pub trait NativeFactory: Send + Sync + 'static {
    /// The open engine.
    type Engine: NativeEngine;
    /// Its typed options and `key=value` parameters.
    type Settings: EngineSettings;
    /// What the engine is.
    fn info(&self) -> EngineInfo;
    /// The layout name the engine writes into a pool header; by default its name.
    fn layout(&self) -> &'static str {
        self.info().name
    }
    /// Open (recovering first) or format the engine on `pool`, with `settings` parsed from
    /// `opts` (which the engine may read for pool-wide choices such as sizes).
    fn open_native(&self, pool: Arc<Pool>, settings: Self::Settings, opts: &Options) -> EngineResult<Self::Engine>;
    /// See [`EngineFactory::salvage`]; the default refuses.
    fn salvage(&self, image: &[u8], emit: Emit<'_>) -> Result<SalvageReport> {
        let _ = (image, emit);
        Err(Error::unsupported(self.info().name, "salvage"))
    }
}

impl<F: NativeFactory> EngineFactory for F {
    fn info(&self) -> EngineInfo {
        NativeFactory::info(self)
    }
    fn layout(&self) -> Option<&'static str> {
        Some(NativeFactory::layout(self))
    }
    fn params(&self) -> Vec<Param> {
        F::Settings::SETTINGS.iter().map(|s| Param { name: s.name, doc: s.doc }).collect()
    }
    fn open_pool(&self, pool: Arc<Pool>, opts: &Options) -> Result<Box<dyn Engine>> {
        let info = NativeFactory::info(self);
        let settings = parse_settings::<F::Settings>(info.name, opts)?;
        let engine = self.open_native(pool, settings, opts).map_err(|e| e.into_error(info.name))?;
        Ok(Box::new(Native { info: engine.info(info), engine }))
    }
    fn salvage(&self, image: &[u8], emit: Emit<'_>) -> Result<SalvageReport> {
        NativeFactory::salvage(self, image, emit)
    }
    fn check_params(&self, opts: &Options) -> Result<()> {
        parse_settings::<F::Settings>(NativeFactory::info(self).name, opts).map(drop)
    }
}

/// A [`NativeEngine`] as an [`Engine`]: the one adapter.
pub struct Native<E> {
    /// What the engine is, fixed at open.
    info: EngineInfo,
    engine: E,
}

impl<E: NativeEngine> Native<E> {
    fn err(&self, e: EngineError) -> Error {
        e.into_error(self.info.name)
    }
}

impl<E: NativeEngine> Engine for Native<E> {
    fn info(&self) -> EngineInfo {
        self.info.clone()
    }
    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        self.engine.get_with(key, f).map_err(|e| self.err(e))
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.engine.put(key, value).map_err(|e| self.err(e))
    }
    fn delete(&self, key: &[u8]) -> Result<bool> {
        self.engine.delete(key).map_err(|e| self.err(e))
    }
    /// Batches reach the engine as the substrate's log operations, with their atomicity;
    /// an engine without batch code of its own applies them in order (the trait's default).
    fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        self.engine.write_batch(&batch.log_ops(), batch.is_atomic()).map_err(|e| self.err(e))
    }
    fn scan(&self, range: &KeyRange, dir: Direction, limit: usize, visit: Visitor<'_>) -> Result<()> {
        if range.is_empty() || limit == 0 {
            return Ok(());
        }
        self.engine.scan(range, limit, dir == Direction::Reverse, visit).map_err(|e| self.err(e))
    }
    fn len(&self) -> u64 {
        self.engine.len()
    }
    fn memory(&self) -> MemoryUsage {
        self.engine.memory()
    }
    fn check(&self) -> Result<CheckReport> {
        self.engine.check_report(self.info.name).map_err(|e| self.err(e))
    }
    fn recovery(&self) -> Option<RecoveryReport> {
        Some(self.engine.recovery())
    }
    fn sync(&self) -> Result<()> {
        self.engine.sync().map_err(|e| self.err(e))
    }
    fn close(self: Box<Self>) -> Result<()> {
        let name = self.info.name;
        self.engine.close().map_err(|e| e.into_error(name))
    }
    fn poison(&self) {
        self.engine.poison();
    }
    fn pool(&self) -> Option<&Arc<Pool>> {
        Some(self.engine.pool())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, Default, PartialEq)]
    struct S {
        flag: bool,
        n: u64,
    }

    impl EngineSettings for S {
        const SETTINGS: &'static [Setting<S>] = &[
            Setting { name: "flag", doc: "a flag", set: |o, v| parse_bool(v).map(|x| o.flag = x) },
            Setting { name: "n", doc: "1..=8", set: |o, v| parse_in(v, 1..=8).map(|x| o.n = x) },
        ];
        fn validate(&self) -> std::result::Result<(), String> {
            if self.flag && self.n == 8 {
                return Err("flag and n=8 together".into());
            }
            Ok(())
        }
    }

    #[test]
    fn params_set_typed_options_on_top_of_attached_ones() {
        let o = Options::new().with_engine_options(S { flag: false, n: 3 }).param("flag", "true");
        assert_eq!(parse_settings::<S>("e", &o).unwrap(), S { flag: true, n: 3 });
        assert_eq!(parse_settings::<S>("e", &Options::new()).unwrap(), S::default());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused_by_name() {
        let e = parse_settings::<S>("e", &Options::new().param("nope", "1")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("'nope'") && e.message().contains("flag, n"), "{e}");
        let e = parse_settings::<S>("e", &Options::new().param("n", "9")).unwrap_err();
        assert!(e.message().contains("n=9") && e.message().contains("from 1 to 8"), "{e}");
        let e = parse_settings::<S>("e", &Options::new().param("flag", "yes")).unwrap_err();
        assert!(e.message().contains("not true or false"), "{e}");
        let e = parse_settings::<S>("e", &Options::new().param("flag", "true").param("n", "8")).unwrap_err();
        assert!(e.message().contains("together"), "{e}");
        let e = parse_settings::<()>("e", &Options::new().param("x", "1")).unwrap_err();
        assert!(e.message().contains("it has: none"), "{e}");
    }

    #[test]
    fn choices_name_the_allowed_values() {
        assert_eq!(parse_choice("b", &[("a", 1), ("b", 2)]), Ok(2));
        assert_eq!(parse_choice("c", &[("a", 1), ("b", 2)]), Err("not one of a, b".to_string()));
    }

    #[test]
    fn errors_keep_their_kind_and_name_the_engine() {
        let e = EngineError::corrupt("leaf 3 is out of order").into_error("fptree");
        assert_eq!((e.kind(), e.message()), (ErrorKind::Corrupt, "fptree data is damaged: leaf 3 is out of order"));
        let e: Error = EngineError::KeyTooLarge { len: 9, max: 8 }.into();
        assert_eq!(e.kind(), ErrorKind::KeyTooLarge);
        let e: Error = EngineError::Version("format 9".into()).into();
        assert_eq!(e.kind(), ErrorKind::Version);
        let e: Error = EngineError::Other(Error::new(ErrorKind::Locked, "taken")).into();
        assert_eq!(e.kind(), ErrorKind::Locked);
        assert!(check_sizes(b"abc", Some(b"v"), 3, 1).is_ok());
        assert!(matches!(check_sizes(b"abcd", None, 3, 1), Err(EngineError::KeyTooLarge { len: 4, max: 3 })));
        assert!(matches!(check_sizes(b"a", Some(b"vv"), 3, 1), Err(EngineError::ValueTooLarge { len: 2, max: 1 })));
    }
}
