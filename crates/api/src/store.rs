//! [`Store`]: one engine over one pool, with the guarantees every front end needs.

use crate::cursor::Cursor;
use crate::registry::Registry;
use pmkv_core::{
    BatchOp, CheckReport, Direction, Engine, EngineFactory, EngineInfo, Error, ErrorKind, KeyRange, MemoryUsage,
    Options, RecoveryReport, Result, WriteBatch,
};
use pmkv_substrate::{Durability, Medium, Mode};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

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
    engine: Option<Box<dyn Engine>>,
    info: EngineInfo,
    poisoned: AtomicBool,
    /// The first `Corrupt` error a call met: it left the pool marked unclean, and
    /// [`close`](Store::close) reports it rather than only "poisoned", which would hide
    /// the cause and suggest that reopening mends it.
    damage: OnceLock<Error>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("engine", &self.info.name).field("poisoned", &self.is_poisoned()).finish()
    }
}

/// A panic payload as text.
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string())
}

/// A [`ErrorKind::Corrupt`] error with what to do next: the pool's path (an engine's
/// message may not name it) and the two commands that help, `pmkv check` (what is
/// damaged) and `pmkv salvage` (copy the intact records into a new pool, which recovers
/// what can be). Written here, where every front end's errors pass, so that the CLI, the
/// Python exception and the C API's message all say it. Other errors pass unchanged.
fn damage_hint(e: Error, path: Option<&Path>) -> Error {
    if e.kind() != ErrorKind::Corrupt || e.message().contains("pmkv salvage") {
        return e;
    }
    let Some(path) = path else { return e };
    let p = path.display().to_string();
    let head = if e.message().contains(&p) { String::new() } else { format!("{p}: ") };
    let text = format!(
        "{head}{}; `pmkv check {p}` shows the damage, `pmkv salvage {p} NEW_POOL` copies every intact record \
         into a new pool",
        e.message()
    );
    Error::with_source(ErrorKind::Corrupt, Hinted { text, cause: e })
}

/// An error whose message [`damage_hint`] extended; its source is the original error.
#[derive(Debug)]
struct Hinted {
    text: String,
    cause: Error,
}

impl std::fmt::Display for Hinted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Hinted {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.cause)
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
        Store { engine: Some(engine), info, poisoned: AtomicBool::new(false), damage: OnceLock::new() }
    }

    /// What the engine is and offers.
    pub fn info(&self) -> &EngineInfo {
        &self.info
    }

    /// What the store's acknowledged writes survive: the medium its pool sits on
    /// (detected at open) and the mode it was opened in. An engine without a pool
    /// (`volatile`) keeps nothing past the process: anonymous memory, mode `none`.
    ///
    /// Front ends show it, and print [`Durability::warning`] once when they open a store
    /// for writing and the mode promises more than the medium gives (`adr` on a disk file
    /// or on tmpfs); the library itself prints nothing.
    pub fn durability(&self) -> Durability {
        match self.engine.as_deref().and_then(|e| e.pool()) {
            Some(pool) => pool.durability(),
            None => Durability::new(Medium::Anonymous, Mode::None),
        }
    }

    /// The engine itself, bypassing the store's guards: its callbacks are not re-entrant
    /// and its panics are not caught. For benchmarks and tests that need the raw engine.
    pub fn engine(&self) -> &dyn Engine {
        self.engine.as_deref().expect("engine present until close")
    }

    /// Whether an engine panic poisoned this store.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Run `f` on the engine: refused once poisoned; a panic poisons the store and the
    /// pool. A `Corrupt` error also marks the pool unclean (the next open re-verifies it
    /// through recovery) but leaves the store usable for the undamaged parts.
    pub(crate) fn call<T>(&self, what: &str, f: impl FnOnce(&dyn Engine) -> Result<T>) -> Result<T> {
        if self.is_poisoned() {
            return Err(Error::new(
                ErrorKind::Poisoned,
                format!(
                    "store of engine '{}' is poisoned by an earlier panic; close it and open the pool again \
                     (recovery runs then)",
                    self.info.name
                ),
            ));
        }
        let engine = self.engine();
        match catch_unwind(AssertUnwindSafe(|| f(engine))) {
            Ok(Err(e)) if e.kind() == ErrorKind::Corrupt => {
                let e = damage_hint(e, engine.pool().and_then(|p| p.path()));
                engine.poison();
                let _ = self.damage.set(Error::new(ErrorKind::Corrupt, e.message()));
                Err(e)
            }
            Ok(r) => r,
            Err(p) => {
                self.poisoned.store(true, Ordering::Release);
                engine.poison();
                Err(Error::new(
                    ErrorKind::Internal,
                    format!(
                        "engine '{}' panicked during {what}: {}; the store is poisoned and the pool stays \
                         marked unclean, so the next open runs recovery",
                        self.info.name,
                        panic_text(&*p)
                    ),
                ))
            }
        }
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
        if key.len() > self.info.max_key_len {
            *buf = None;
            return Ok(false); // no such key can have been stored
        }
        let mut found = None;
        let present = self.call("get", |e| {
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
        if key.len() > self.info.max_key_len {
            return Ok(false);
        }
        self.call("get", |e| e.get_with(key, &mut |_| {}))
    }

    /// Insert or replace. Durable when it returns (in the pool's mode).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.info.check_sizes(key, Some(value))?;
        self.call("put", |e| e.put(key, value))
    }

    /// Remove `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        if key.len() > self.info.max_key_len {
            return Ok(false);
        }
        self.call("delete", |e| e.delete(key))
    }

    /// Apply a batch in order. Every size is checked before the first operation, so a
    /// batch is never refused half-way for its sizes. Atomic if
    /// [`EngineInfo::atomic_batches`]; otherwise each operation is durable before the
    /// next, and a crash leaves a prefix of the batch applied.
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        for op in batch.ops() {
            match op {
                BatchOp::Put(k, v) => self.info.check_sizes(k, Some(v))?,
                BatchOp::Delete(k) => self.info.check_sizes(k, None)?,
            }
        }
        self.call("write batch", |e| e.write_batch(batch))
    }

    /// A cursor over `range`, ascending; `.rev()` walks it descending, and both ends may
    /// be consumed alternately. It holds no engine lock between steps (see [`Cursor`]).
    pub fn range(&self, range: &KeyRange) -> Cursor<'_> {
        Cursor::new(self, range.clone())
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
        self.call("scan", |e| {
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
        self.call("len", |e| Ok(e.len()))
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Memory in use by structure.
    pub fn memory(&self) -> Result<MemoryUsage> {
        self.call("memory", |e| Ok(e.memory()))
    }

    /// Verify the engine's invariants.
    pub fn check(&self) -> Result<CheckReport> {
        self.call("check", |e| e.check())
    }

    /// What the open's recovery did (persistent engines).
    pub fn recovery(&self) -> Option<RecoveryReport> {
        self.engine().recovery()
    }

    /// Make every acknowledged write durable (matters in `msync` mode).
    pub fn sync(&self) -> Result<()> {
        self.call("sync", |e| e.sync())
    }

    /// Close: the pool is marked clean, and failures are reported. A poisoned store is
    /// closed too but returns `Poisoned`, and its pool stays marked unclean. A store
    /// whose calls met damage is closed, its pool left unclean, and returns that damage
    /// (the first `Corrupt` error, kind `Corrupt`): crash recovery at the next open does
    /// not repair it.
    pub fn close(mut self) -> Result<()> {
        let engine = self.engine.take().expect("engine present until close");
        let poisoned = self.is_poisoned();
        let r = catch_unwind(AssertUnwindSafe(|| engine.close())).map_err(|p| {
            Error::new(
                ErrorKind::Internal,
                format!("engine '{}' panicked while closing: {}", self.info.name, panic_text(&*p)),
            )
        });
        if poisoned {
            return Err(Error::new(
                ErrorKind::Poisoned,
                format!(
                    "store of engine '{}' was poisoned by a panic; the pool is left marked unclean",
                    self.info.name
                ),
            ));
        }
        match (r?, self.damage.get()) {
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
