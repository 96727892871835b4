//! The engine contract: [`Engine`] (an open engine) and [`EngineFactory`] (how to open one).
//!
//! The contract is written for engines of different kinds: an index with per-structure
//! locks (HART), a lock-free tree (NBTree), a runtime that serialises writers through a
//! combiner (Mangosteen), and a volatile baseline. So it asks only for what all can give:
//! point operations, an ordered scan with a visitor, a write batch whose atomicity the
//! engine declares, `sync`, `close`, reports. Cursors, re-entrancy and panic containment
//! are built once above it, in the `pmkv` crate's `Store`, not in every engine.

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::range::{Direction, KeyRange};
use crate::report::{CheckReport, MemoryUsage, RecoveryReport, SalvageReport};
use pmkv_substrate::{Pool, PoolError};
use std::path::Path;
use std::sync::Arc;

/// A scan visitor: called with each record in order; return `false` to stop.
/// Where [`EngineFactory::salvage`] hands each intact record (key, value); an error stops
/// the salvage.
pub type Emit<'a> = &'a mut dyn FnMut(&[u8], &[u8]) -> Result<()>;

pub type Visitor<'a> = &'a mut dyn FnMut(&[u8], &[u8]) -> bool;

/// What an engine is and offers. Front ends adapt to it instead of to engine names.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineInfo {
    /// The name it is registered under (`hart`, `volatile`, ...).
    pub name: &'static str,
    /// One line for `--help` texts and `pmkv engines`.
    pub description: &'static str,
    /// Data survives close and crash (a pool file). A volatile engine ignores the path.
    pub persistent: bool,
    /// An atomic [`WriteBatch`] (not [`WriteBatch::independent`]) given to
    /// [`Engine::write_batch`] is **all or nothing across a crash**: the next open after a
    /// crash, kill or panic holds none of its writes or all of them, and all of them are
    /// durable once it has returned `Ok`. It does *not* promise isolation: an engine that
    /// applies a logged batch in place (HART, NBTree) lets a concurrent reader see part of
    /// it, and a concurrent write of one of its keys may be overwritten by it — front ends
    /// that need isolation lock the keys (see the `batch` module). When false, batch
    /// operations are applied in order, each durable before the next, so a crash leaves
    /// a prefix of the batch applied.
    pub atomic_batches: bool,
    /// Longest key accepted, in bytes.
    pub max_key_len: usize,
    /// Longest value accepted, in bytes.
    pub max_value_len: usize,
    /// The engine's DRAM state lives at an address fixed per pool (Mangosteen's split
    /// heap), so one process can have only one open of a pool — or of any copy of it,
    /// crash images included — at a time (read-only opens share theirs). Tests that open
    /// crash images close the live store first.
    pub fixed_address: bool,
    /// Most keys one node of the engine's structure holds before a write must restructure
    /// it — split a leaf (NBTree: keys per leaf), grow an index node (HART: the 256
    /// children of the largest ART node, which also spans several allocator chunks of
    /// leaves), split a map node (Mangosteen: a `BTreeMap` node) — or 0 if it has none.
    /// The conformance suite sizes its structural crash workloads from it instead of
    /// guessing, so a workload surely splits, grows, merges and recycles.
    pub node_keys: usize,
    /// One of the papers' competitors (FPTree, WOART, FAST&FAIR, ART+CoW): built so that
    /// the reproductions compare with it, not an engine a user picks. The benchmark's
    /// main job leaves such engines to `reproduce`.
    pub competitor: bool,
    /// What a crash may leave of unpersisted stores, as the engine's correctness assumes
    /// it (see [`CrashModel`](pmkv_substrate::CrashModel)); its crash tests use this
    /// model. Every engine but FAST&FAIR assumes the strict default.
    pub crash_model: pmkv_substrate::CrashModel,
    /// The engine may run on a pool in mode `wal` (and be given it by default on a disk).
    /// That mode logs, at each fence, the lines the *fencing thread* flushed since its
    /// last fence, so an engine qualifies when every operation fences, on its own thread,
    /// each line it flushed before it returns: a flush left for a later operation's fence
    /// reaches the log only when the thread that made it fences again, which on a server
    /// whose operations hop between worker threads may come after writes that depend on
    /// it (docs/design/substrate.md, "Mode wal"; the API checks the rule after every call in debug builds). True
    /// unless the registration says otherwise; `Store::open_with` refuses mode `wal` to
    /// an engine that says false and never picks it for one by default.
    pub mode_wal: bool,
}

impl EngineInfo {
    /// Info with the given name and description; persistent, non-atomic batches, and
    /// unlimited sizes until set.
    pub fn new(name: &'static str, description: &'static str) -> EngineInfo {
        EngineInfo {
            name,
            description,
            persistent: true,
            atomic_batches: false,
            max_key_len: usize::MAX,
            max_value_len: usize::MAX,
            fixed_address: false,
            node_keys: 0,
            competitor: false,
            crash_model: pmkv_substrate::CrashModel::Words,
            mode_wal: true,
        }
    }
    /// Declare the crash model the engine's correctness assumes (see the field).
    pub fn crash_model(mut self, model: pmkv_substrate::CrashModel) -> Self {
        self.crash_model = model;
        self
    }
    /// Set whether the engine may run in mode `wal` (see the field).
    pub fn mode_wal(mut self, yes: bool) -> Self {
        self.mode_wal = yes;
        self
    }
    /// Mark the engine as one of the papers' competitors (see the field).
    pub fn competitor(mut self, yes: bool) -> Self {
        self.competitor = yes;
        self
    }
    /// Set whether the engine's state lives at a fixed address (see the field).
    pub fn fixed_address(mut self, yes: bool) -> Self {
        self.fixed_address = yes;
        self
    }
    /// Set the keys one node holds before a write restructures it (see the field).
    pub fn node_keys(mut self, n: usize) -> Self {
        self.node_keys = n;
        self
    }
    /// Set whether data survives close and crash.
    pub fn persistent(mut self, yes: bool) -> Self {
        self.persistent = yes;
        self
    }
    /// Set whether batches are atomic.
    pub fn atomic_batches(mut self, yes: bool) -> Self {
        self.atomic_batches = yes;
        self
    }
    /// Set the size limits.
    pub fn limits(mut self, max_key_len: usize, max_value_len: usize) -> Self {
        self.max_key_len = max_key_len;
        self.max_value_len = max_value_len;
        self
    }
    /// `KeyTooLarge`/`ValueTooLarge` if `key`/`value` exceed the limits.
    pub fn check_sizes(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if key.len() > self.max_key_len {
            return Err(Error::key_too_large(key.len(), self.max_key_len));
        }
        match value {
            Some(v) if v.len() > self.max_value_len => Err(Error::value_too_large(v.len(), self.max_value_len)),
            _ => Ok(()),
        }
    }
}

/// A `key=value` parameter an engine accepts (see [`Options::param`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    /// The key.
    pub name: &'static str,
    /// What it does, its values and default.
    pub doc: &'static str,
}

/// An open engine over one pool. Every method takes `&self` and is safe to call from many
/// threads at once.
///
/// **Not re-entrant.** The closures passed to [`get_with`](Engine::get_with) and
/// [`scan`](Engine::scan) may run while the engine holds internal locks: they must not
/// call back into the same engine, nor block on another thread that does. The `pmkv`
/// `Store` passes only closures that copy bytes out, and gives users cursors and
/// callbacks that hold no engine lock.
pub trait Engine: Send + Sync {
    /// What the engine is and offers.
    fn info(&self) -> EngineInfo;

    /// Call `f` with the value of `key`, if present; returns whether it was.
    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool>;

    /// Insert or replace.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;

    /// Remove `key`; returns whether it was present.
    fn delete(&self, key: &[u8]) -> Result<bool>;

    /// Apply `batch` in order. The store has already checked every size against
    /// [`EngineInfo`]. The default applies the operations one by one (not atomic); an
    /// engine that declares `atomic_batches` overrides it, and may apply a
    /// [`WriteBatch::independent`] one without paying for atomicity.
    fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        crate::batch::apply_in_order(&batch.log_ops(), |k, v| self.put(k, v), |k| self.delete(k))
    }

    /// Visit the records of `range` in `dir` order until `visit` returns false or `limit`
    /// records were visited. `visit` may run under engine locks (see the trait's docs).
    fn scan(&self, range: &KeyRange, dir: Direction, limit: usize, visit: Visitor<'_>) -> Result<()>;

    /// Number of records.
    fn len(&self) -> u64;

    /// Whether there are no records.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Memory in use, by structure.
    fn memory(&self) -> MemoryUsage;

    /// Verify the engine's persistent and volatile invariants. `Ok` with problems listed
    /// when the check ran and found damage; `Err` when it could not run.
    fn check(&self) -> Result<CheckReport>;

    /// What the open's recovery did (persistent engines).
    fn recovery(&self) -> Option<RecoveryReport> {
        None
    }

    /// Make every acknowledged write durable in the pool's mode (msync for `msync` pools;
    /// `adr`/`eadr` writes are durable when acknowledged, so a fence at most).
    fn sync(&self) -> Result<()>;

    /// Release the engine: DRAM state dropped, the pool closed and marked clean. Errors
    /// that a plain drop would have to swallow (a failed msync, a poisoned pool) are
    /// returned.
    fn close(self: Box<Self>) -> Result<()>;

    /// The engine may have been left mid-operation (it panicked): from now on the pool
    /// must not be marked clean when it is closed, so that the next open runs recovery.
    fn poison(&self);

    /// The pool under the engine, for crash-simulation tests and counters. `None` for
    /// engines without one.
    fn pool(&self) -> Option<&Arc<Pool>> {
        None
    }
}

/// How to open an engine. One static value per engine, listed in a registry (the `pmkv`
/// crate's `Registry`); front ends find engines there by name or by a pool's layout.
pub trait EngineFactory: Send + Sync {
    /// What the engine is (the same as its open engines' [`Engine::info`]).
    fn info(&self) -> EngineInfo;

    /// The layout name the engine writes into a pool header (so an existing pool can be
    /// opened with the engine that made it), or `None` for an engine without a pool.
    fn layout(&self) -> Option<&'static str>;

    /// The `key=value` parameters [`open`](EngineFactory::open) understands.
    fn params(&self) -> Vec<Param> {
        Vec::new()
    }

    /// Open (or, with `opts.create`, create) the engine's pool at `path`. The default, for
    /// engines with a pool layout, opens the file as every such engine must
    /// ([`open_engine_file`]: a refused open leaves it untouched) and the engine on it
    /// with [`open_pool`](EngineFactory::open_pool).
    fn open(&self, path: &Path, opts: &Options) -> Result<Box<dyn Engine>> {
        let Some(layout) = self.layout() else {
            return Err(Error::unsupported(self.info().name, "opening a pool file (the engine has no pool layout)"));
        };
        self.check_params(opts)?;
        open_engine_file(path, layout, opts, |pool| self.open_pool(pool, opts))
    }

    /// Open the engine on a pool already open (crash-simulation images in tests, pools
    /// shared with other code). Engines without a pool return `Unsupported`.
    fn open_pool(&self, pool: Arc<Pool>, opts: &Options) -> Result<Box<dyn Engine>> {
        let _ = (pool, opts);
        Err(Error::unsupported(self.info().name, "opening on an existing pool"))
    }

    /// Salvage: find every intact record in `image`, the raw bytes of one of this engine's
    /// pool files, however damaged (header, allocator metadata, anything), and hand each to
    /// `emit` once. Records whose checks fail are counted, never emitted. Engines without
    /// self-verifying records return `Unsupported`.
    fn salvage(&self, image: &[u8], emit: Emit<'_>) -> Result<SalvageReport> {
        let _ = (image, emit);
        Err(Error::unsupported(self.info().name, "salvage"))
    }

    /// Refuse any parameter in `opts` that this engine does not declare.
    fn check_params(&self, opts: &Options) -> Result<()> {
        let known = self.params();
        match opts.params().iter().find(|(k, _)| !known.iter().any(|p| p.name == k)) {
            Some((k, _)) => Err(crate::options::no_such_param(self.info().name, k, known.iter().map(|p| p.name))),
            None => Ok(()),
        }
    }
}

/// Open the pool file at `path` (as [`open_pool_file`]) and the engine on it with `open`.
/// If the engine refuses the pool (damaged, a format it cannot read), the file is left
/// exactly as it was found ([`Pool::abandon`]): a refused open changes nothing.
pub fn open_engine_file<E>(
    path: &Path,
    layout: &str,
    opts: &Options,
    open: impl FnOnce(Arc<Pool>) -> Result<E>,
) -> Result<E> {
    let pool = Arc::new(open_pool_file(path, layout, opts)?);
    match open(pool.clone()) {
        Ok(e) => Ok(e),
        Err(e) => {
            if let Ok(p) = Arc::try_unwrap(pool) {
                p.abandon();
            }
            Err(e)
        }
    }
}

/// Open the pool file an engine with `layout` keeps at `path`, as `opts` say: read-only,
/// read-write, or created when missing and `opts.create`. Shared by every pool-backed
/// engine so that they refuse and create files the same way.
pub fn open_pool_file(path: &Path, layout: &str, opts: &Options) -> Result<Pool> {
    let po = opts.pool_options();
    if opts.read_only {
        return Ok(Pool::open_read_only(path, Some(layout), &po)?);
    }
    match Pool::open(path, Some(layout), &po) {
        Err(PoolError::NotFound { .. }) if opts.create => Ok(Pool::create(path, layout, &po)?),
        r => Ok(r?),
    }
}
