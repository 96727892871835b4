//! The [`Engine`] trait every engine is adapted to, and [`Store`], the handle users open.

use crate::error::{Error, Result};
use crate::volatile::Volatile;
use pmkv_substrate::{Latency, Mode};
use std::ops::Bound;
use std::path::Path;

/// Engine names accepted by [`Store::open`].
pub const ENGINES: &[&str] = &["hart", "volatile"];

/// Options for opening a store.
#[derive(Clone, Debug)]
pub struct Options {
    pub mode: Mode,
    /// Initial pool size for a new pool.
    pub initial_size: u64,
    /// Maximum pool size (fixed at creation).
    pub max_size: u64,
    pub latency: Latency,
    /// Create the pool if it does not exist.
    pub create: bool,
    /// HART: bytes of the key that select an ART (SPEC H1); default 2.
    pub hash_key_len: usize,
    /// HART: every update out of place exactly as the paper's Algorithm 3 (default false:
    /// same-size values of ≤ 8 bytes are updated in place, atomically).
    pub hart_paper_updates: bool,
    /// Open an existing pool for reading only ([`pmkv_substrate::Pool::open_read_only`]):
    /// nothing in the file changes, other readers may open it at the same time, writes
    /// return an error, and a pool that needs crash recovery is refused. Default false.
    pub read_only: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::Adr,
            initial_size: 64 << 20,
            max_size: 64 << 30,
            latency: Latency::from_env(),
            create: true,
            hash_key_len: 2,
            hart_paper_updates: false,
            read_only: false,
        }
    }
}

impl Options {
    pub fn pool_options(&self) -> pmkv_substrate::PoolOptions {
        pmkv_substrate::PoolOptions::default()
            .mode(self.mode)
            .initial_size(self.initial_size)
            .max_size(self.max_size)
            .latency(self.latency)
    }
}

/// DRAM and PM bytes in use, by structure (SPEC H9).
#[derive(Clone, Debug, Default)]
pub struct MemoryUsage {
    pub dram: Vec<(String, u64)>,
    pub pm: Vec<(String, u64)>,
}

impl MemoryUsage {
    pub fn dram_total(&self) -> u64 {
        self.dram.iter().map(|x| x.1).sum()
    }
    pub fn pm_total(&self) -> u64 {
        self.pm.iter().map(|x| x.1).sum()
    }
}

/// A key range for scans; both ends as `Bound`s over byte strings.
#[derive(Clone, Debug)]
pub struct ScanRange {
    pub start: Bound<Vec<u8>>,
    pub end: Bound<Vec<u8>>,
    /// Stop after this many records (`usize::MAX`: no limit).
    pub limit: usize,
}

impl ScanRange {
    pub fn all() -> Self {
        ScanRange { start: Bound::Unbounded, end: Bound::Unbounded, limit: usize::MAX }
    }
    /// The start bound over byte slices (what engines' own range APIs take).
    pub fn start_bound(&self) -> Bound<&[u8]> {
        self.start.as_ref().map(Vec::as_slice)
    }
    /// The end bound over byte slices.
    pub fn end_bound(&self) -> Bound<&[u8]> {
        self.end.as_ref().map(Vec::as_slice)
    }
    /// Whether `key` lies at or after the start bound.
    pub fn after_start(&self, key: &[u8]) -> bool {
        match &self.start {
            Bound::Unbounded => true,
            Bound::Included(s) => key >= s.as_slice(),
            Bound::Excluded(s) => key > s.as_slice(),
        }
    }
    /// Whether `key` lies at or before the end bound.
    pub fn before_end(&self, key: &[u8]) -> bool {
        match &self.end {
            Bound::Unbounded => true,
            Bound::Included(e) => key <= e.as_slice(),
            Bound::Excluded(e) => key < e.as_slice(),
        }
    }
}

/// What every engine offers. Implementations are thread-safe (`&self` everywhere).
pub trait Engine: Send + Sync {
    /// Engine name as given to [`Store::open`].
    fn name(&self) -> &'static str;
    /// Call `f` with the value of `key`, if present; returns whether it was.
    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool>;
    /// Insert or replace (upsert).
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Remove `key`; returns whether it was present.
    fn delete(&self, key: &[u8]) -> Result<bool>;
    /// Visit records of `range` in ascending key order until `f` returns false.
    fn scan(&self, range: &ScanRange, f: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()>;
    /// Number of records.
    fn len(&self) -> u64;
    /// Whether there are no records.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Memory in use by structure.
    fn memory(&self) -> MemoryUsage;
    /// Verify the engine's persistent invariants; returns a human-readable summary.
    fn check(&self) -> Result<String> {
        Ok(format!("{}: no checker", self.name()))
    }
    /// What the engine's recovery did when it was opened (persistent engines).
    fn recovery_info(&self) -> Option<String> {
        None
    }
    /// Smallest and largest key.
    fn min_max(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut first = None;
        self.scan(&ScanRange::all(), &mut |k, _| {
            first = Some(k.to_vec());
            false
        })?;
        let Some(first) = first else { return Ok(None) };
        let mut last = first.clone();
        self.scan(&ScanRange::all(), &mut |k, _| {
            last = k.to_vec();
            true
        })?;
        Ok(Some((first, last)))
    }
}

/// An open store: one engine over one pool.
pub struct Store {
    engine: Box<dyn Engine>,
}

impl Store {
    /// Open (or, with `opts.create`, create) the pool at `path` with engine `engine`.
    pub fn open(path: impl AsRef<Path>, engine: &str, opts: &Options) -> Result<Store> {
        let engine: Box<dyn Engine> = match engine {
            "hart" => Box::new(crate::hart::HartEngine::open(path.as_ref(), opts)?),
            "volatile" => Box::new(Volatile::new()),
            other => return Err(Error::UnknownEngine(other.to_string())),
        };
        Ok(Store { engine })
    }

    /// Open an existing pool with the engine its header names.
    pub fn open_existing(path: impl AsRef<Path>, opts: &Options) -> Result<Store> {
        let info = pmkv_substrate::Pool::inspect(path.as_ref())?;
        let opts = Options { create: false, ..opts.clone() };
        match info.header.layout.as_str() {
            l if ENGINES.contains(&l) => Store::open(path, l, &opts),
            other => Err(Error::UnknownEngine(other.to_string())),
        }
    }

    /// Wrap an engine built elsewhere (benchmarks' baselines).
    pub fn from_engine(engine: Box<dyn Engine>) -> Store {
        Store { engine }
    }

    pub fn engine(&self) -> &dyn Engine {
        &*self.engine
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = None;
        self.engine.get_with(key, &mut |v| out = Some(v.to_vec()))?;
        Ok(out)
    }
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.engine.put(key, value)
    }
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.engine.delete(key)
    }
    pub fn len(&self) -> u64 {
        self.engine.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Collect a range into a vector.
    pub fn scan(&self, range: &ScanRange) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.engine.scan(range, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }
}
