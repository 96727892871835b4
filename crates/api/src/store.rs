//! [`Store`]: one engine over one pool, with the guarantees every front end needs.

use crate::cursor::Cursor;
use crate::guard::{damage_hint, panic_text, Guarded};
use crate::registry::Registry;
use pmkv_core::{
    BatchOp, CheckReport, Direction, Engine, EngineFactory, EngineInfo, Error, ErrorKind, KeyRange, MemoryUsage,
    Options, RecoveryReport, Result, WriteBatch,
};
use pmkv_substrate::{Durability, Medium, Mode, SyncPolicy};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

/// An open store. `Send + Sync`: share it between threads by reference or in an `Arc`.
///
/// * Every call returns errors as values; an engine panic is caught, reported as an
///   [`ErrorKind::Internal`] error, and poisons the store: later calls fail with
///   [`ErrorKind::Poisoned`], and the pool is left marked unclean so that the next open
///   runs recovery (SPEC R4).
/// * [`range`](Store::range) cursors and [`scan`](Store::scan) callbacks run no user code
///   while the engine holds a lock, so they may call back into the store.
/// * [`close`](Store::close) reports what a drop would have to swallow. Dropping a store
///   closes it too, best effort.
pub struct Store {
    /// The engine and the state of the guards around it, shared with [`Cursor`]s.
    g: Guarded,
    /// [`Store::defer_acknowledgements`] was called: writes do not wait for their log
    /// record; the caller waits ([`Store::wait_lsn`]) before acknowledging them.
    deferred: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("engine", &self.g.info.name).field("poisoned", &self.is_poisoned()).finish()
    }
}

impl Store {
    /// Open (or, with `opts.create`, create) the pool at `path` with the engine named
    /// `engine` from the builtin [`Registry`].
    pub fn open(path: impl AsRef<Path>, engine: &str, opts: &Options) -> Result<Store> {
        Store::open_with(Registry::builtin().get(engine)?, path, opts)
    }

    /// Open an existing pool with the engine its header names.
    pub fn open_existing(path: impl AsRef<Path>, opts: &Options) -> Result<Store> {
        let path = path.as_ref();
        let factory = Registry::builtin().for_pool(path).map_err(|e| damage_hint(e, Some(path)))?;
        Store::open_with(factory, path, &opts.clone().create(false))
    }

    /// Open with a given factory (an engine of your own, or one from another registry).
    pub fn open_with(factory: &dyn EngineFactory, path: impl AsRef<Path>, opts: &Options) -> Result<Store> {
        let path = path.as_ref();
        factory.check_params(opts)?;
        let without_wal;
        let opts = if !factory.info().mode_wal && (opts.wal_on_disk || opts.mode == Mode::Wal) {
            // An engine that declares it cannot run in mode wal (`EngineInfo::mode_wal`) is
            // refused it when asked, and never given it by default.
            if opts.mode == Mode::Wal {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "mode wal is not available for the {} engine; use adr, or msync on a disk",
                        factory.info().name
                    ),
                ));
            }
            without_wal = opts.clone().wal_on_disk(false);
            &without_wal
        } else {
            opts
        };
        let engine = catch_unwind(AssertUnwindSafe(|| factory.open(path, opts)))
            .map_err(|p| {
                Error::new(
                    ErrorKind::Internal,
                    format!(
                        "engine '{}' panicked while opening {}: {}",
                        factory.info().name,
                        path.display(),
                        panic_text(&*p)
                    ),
                )
            })?
            .map_err(|e| damage_hint(e, Some(path)))?;
        Ok(Store::from_engine(engine))
    }

    /// Wrap an engine opened elsewhere (benchmark baselines, tests).
    pub fn from_engine(engine: Box<dyn Engine>) -> Store {
        let info = engine.info();
        Store { g: Guarded::new(engine, info), deferred: std::sync::atomic::AtomicBool::new(false) }
    }

    /// What the engine is and offers.
    pub fn info(&self) -> &EngineInfo {
        &self.g.info
    }

    /// What the store's acknowledged writes survive: the medium its pool sits on
    /// (detected at open) and the mode it was opened in. An engine without a pool
    /// (`volatile`) keeps nothing past the process: anonymous memory, mode `none`.
    ///
    /// Front ends show it, and print [`Durability::warning`] once when they open a store
    /// for writing and the mode promises more than the medium gives (`adr` on a disk file
    /// or on tmpfs); the library itself prints nothing.
    pub fn durability(&self) -> Durability {
        match self.g.engine_opt().and_then(|e| e.pool()) {
            Some(pool) => pool.durability(),
            None => Durability::new(Medium::Anonymous, Mode::None),
        }
    }

    /// The engine itself, bypassing the store's guards: its callbacks are not re-entrant
    /// and its panics are not caught. For benchmarks and tests that need the raw engine.
    pub fn engine(&self) -> &dyn Engine {
        self.g.engine()
    }

    /// Whether an engine panic poisoned this store.
    pub fn is_poisoned(&self) -> bool {
        self.g.is_poisoned()
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = None;
        self.get_into(key, &mut out)?;
        Ok(out)
    }

    /// The value of `key` into `buf` (cleared first; reused allocation). Returns whether
    /// the key was present. For front ends that answer many gets.
    pub fn get_into(&self, key: &[u8], buf: &mut Option<Vec<u8>>) -> Result<bool> {
        if key.len() > self.g.info.max_key_len {
            *buf = None;
            return Ok(false); // no such key can have been stored
        }
        let mut found = None;
        let present = self.g.call("get", |e| {
            e.get_with(key, &mut |v| {
                let mut b = buf.take().unwrap_or_default();
                b.clear();
                b.extend_from_slice(v);
                found = Some(b);
            })
        })?;
        *buf = found;
        Ok(present)
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        if key.len() > self.g.info.max_key_len {
            return Ok(false);
        }
        self.g.call("get", |e| e.get_with(key, &mut |_| {}))
    }

    /// Insert or replace. Durable when it returns (in the pool's mode).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.g.info.check_sizes(key, Some(value))?;
        self.g.call("put", |e| e.put(key, value))?;
        self.acknowledge()
    }

    /// The acknowledgement point of a write (mode `wal`): wait, outside every engine
    /// lock, until the write is as safe as the sync policy promises; writers of several
    /// threads waiting here share one `fdatasync` (group commit). Nothing in other modes.
    fn acknowledge(&self) -> Result<()> {
        if self.deferred.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        match self.g.engine_opt().and_then(|e| e.pool()) {
            Some(pool) => pool.commit_wait().map_err(Into::into),
            None => Ok(()),
        }
    }

    /// Remove `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        if key.len() > self.g.info.max_key_len {
            return Ok(false);
        }
        let found = self.g.call("delete", |e| e.delete(key))?;
        self.acknowledge()?;
        Ok(found)
    }

    /// Apply a batch in order. Every size is checked before the first operation, so a
    /// batch is never refused half-way for its sizes. Atomic if
    /// [`EngineInfo::atomic_batches`]; otherwise each operation is durable before the
    /// next, and a crash leaves a prefix of the batch applied.
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        for op in batch.ops() {
            match op {
                BatchOp::Put(k, v) => self.g.info.check_sizes(k, Some(v))?,
                BatchOp::Delete(k) => self.g.info.check_sizes(k, None)?,
            }
        }
        self.g.call("write batch", |e| e.write_batch(batch))?;
        self.acknowledge()
    }

    /// A cursor over `range`, ascending; `.rev()` walks it descending, and both ends may
    /// be consumed alternately. It holds no engine lock between steps (see [`Cursor`]).
    pub fn range(&self, range: &KeyRange) -> Cursor<'_> {
        Cursor::new(&self.g, range.clone())
    }

    /// Call `f` for each record of `range` in `dir` order until it returns false. `f` runs
    /// outside engine locks, so it may read and write this store.
    pub fn scan(&self, range: &KeyRange, dir: Direction, mut f: impl FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        let mut c = self.range(range);
        loop {
            let next = match dir {
                Direction::Forward => c.next_entry(),
                Direction::Reverse => c.next_back_entry(),
            };
            match next {
                None => return Ok(()),
                Some(Err(e)) => return Err(e),
                Some(Ok((k, v))) => {
                    if !f(k, v) {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Up to `limit` records of `range` in `dir` order, collected.
    pub fn collect(&self, range: &KeyRange, dir: Direction, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.g.call("scan", |e| {
            e.scan(range, dir, limit, &mut |k, v| {
                out.push((k.to_vec(), v.to_vec()));
                true
            })
        })?;
        Ok(out)
    }

    /// The record with the smallest key.
    pub fn first(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        Ok(self.collect(&KeyRange::all(), Direction::Forward, 1)?.pop())
    }

    /// The record with the largest key.
    pub fn last(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        Ok(self.collect(&KeyRange::all(), Direction::Reverse, 1)?.pop())
    }

    /// Number of records.
    pub fn len(&self) -> Result<u64> {
        self.g.call("len", |e| Ok(e.len()))
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Memory in use by structure.
    pub fn memory(&self) -> Result<MemoryUsage> {
        self.g.call("memory", |e| Ok(e.memory()))
    }

    /// Verify the engine's invariants.
    pub fn check(&self) -> Result<CheckReport> {
        self.g.call("check", |e| e.check())
    }

    /// What the open's recovery did (persistent engines).
    pub fn recovery(&self) -> Option<RecoveryReport> {
        self.engine().recovery()
    }

    /// Make every acknowledged write durable (matters in `msync` mode, and in `wal` mode
    /// with sync policy `everysec` or `no`).
    pub fn sync(&self) -> Result<()> {
        self.g.call("sync", |e| e.sync())?;
        match self.g.engine_opt().and_then(|e| e.pool()) {
            Some(pool) => pool.sync_log().map_err(Into::into),
            None => Ok(()),
        }
    }

    /// From now on, writes return once applied, without waiting for their log record
    /// (mode `wal`): the caller acknowledges them itself, after [`Store::wait_lsn`] of
    /// [`Store::appended_lsn`] taken after the writes. For a server that gathers many
    /// clients' writes and replies (and must not block a task per write); no effect in
    /// other modes, where a write is durable when it returns.
    pub fn defer_acknowledgements(&self) {
        self.deferred.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The LSN of the last log record appended (mode `wal`; 0 otherwise).
    pub fn appended_lsn(&self) -> u64 {
        self.g.engine_opt().and_then(|e| e.pool()).map_or(0, |p| p.appended_lsn())
    }

    /// The LSN up to which the log is on the device (mode `wal`; 0 otherwise).
    pub fn durable_lsn(&self) -> u64 {
        self.g.engine_opt().and_then(|e| e.pool()).map_or(0, |p| p.durable_lsn())
    }

    /// The LSN up to which the log is as safe as the sync policy promises (mode `wal`; 0
    /// otherwise): a reply that waits for a record at or below it need not call
    /// [`Store::wait_lsn`].
    pub fn acknowledged_lsn(&self) -> u64 {
        self.g.engine_opt().and_then(|e| e.pool()).map_or(0, |p| p.acknowledged_lsn())
    }

    /// Block until log record `lsn` is as safe as the sync policy promises (group commit:
    /// threads waiting at once share one `fdatasync`). At once outside mode `wal`.
    pub fn wait_lsn(&self, lsn: u64) -> Result<()> {
        match self.g.engine_opt().and_then(|e| e.pool()) {
            Some(pool) => pool.wait_lsn(lsn).map_err(Into::into),
            None => Ok(()),
        }
    }

    /// The sync policy of a store in mode `wal` (`None` in other modes).
    pub fn sync_policy(&self) -> Option<SyncPolicy> {
        self.g.engine_opt().and_then(|e| e.pool()).and_then(|p| p.sync_policy())
    }

    /// Close: the pool is marked clean, and failures are reported. A poisoned store is
    /// closed too but returns `Poisoned`, and its pool stays marked unclean. A store
    /// whose calls met damage is closed, its pool left unclean, and returns that damage
    /// (the first `Corrupt` error, kind `Corrupt`): crash recovery at the next open does
    /// not repair it.
    pub fn close(mut self) -> Result<()> {
        let engine = self.g.take_engine();
        let poisoned = self.is_poisoned();
        let r = catch_unwind(AssertUnwindSafe(|| engine.close())).map_err(|p| {
            Error::new(
                ErrorKind::Internal,
                format!("engine '{}' panicked while closing: {}", self.g.info.name, panic_text(&*p)),
            )
        });
        if poisoned {
            return Err(Error::new(
                ErrorKind::Poisoned,
                format!(
                    "store of engine '{}' was poisoned by a panic; the pool is left marked unclean",
                    self.g.info.name
                ),
            ));
        }
        match (r?, self.g.damage()) {
            (Err(e), Some(d)) if e.kind() == ErrorKind::Poisoned => Err(Error::new(
                ErrorKind::Corrupt,
                format!(
                    "{} (met by an earlier call: the store is closed and its pool left marked unclean; reopening \
                     does not repair damage: `pmkv check` reports it, `pmkv salvage` copies out what is intact)",
                    d.message()
                ),
            )),
            (r, _) => r,
        }
    }
}
