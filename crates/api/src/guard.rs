//! The engine behind a [`Store`](crate::Store) and the guards every call to it goes
//! through: a panic is caught and poisons it, a `Corrupt` error is kept for `close`. A
//! module of its own because both the store and its cursors call the engine this way
//! (with the guard in `store`, `store` and `cursor` imported each other).

use pmkv_core::{Engine, EngineInfo, Error, ErrorKind, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// An engine with its guards.
pub(crate) struct Guarded {
    engine: Option<Box<dyn Engine>>,
    pub(crate) info: EngineInfo,
    poisoned: AtomicBool,
    /// The first `Corrupt` error a call met: it left the pool marked unclean, and
    /// [`close`](crate::Store::close) reports it rather than only "poisoned", which would
    /// hide the cause and suggest that reopening mends it.
    damage: OnceLock<Error>,
}

/// A panic payload as text.
pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string())
}

impl Guarded {
    pub(crate) fn new(engine: Box<dyn Engine>, info: EngineInfo) -> Guarded {
        Guarded { engine: Some(engine), info, poisoned: AtomicBool::new(false), damage: OnceLock::new() }
    }

    /// The engine, unless the store has been closed.
    pub(crate) fn engine_opt(&self) -> Option<&dyn Engine> {
        self.engine.as_deref()
    }

    /// The engine itself, bypassing the guards.
    pub(crate) fn engine(&self) -> &dyn Engine {
        self.engine.as_deref().expect("engine present until close")
    }

    /// Take the engine out, to close it.
    pub(crate) fn take_engine(&mut self) -> Box<dyn Engine> {
        self.engine.take().expect("engine present until close")
    }

    /// Whether an engine panic poisoned the store.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// The first `Corrupt` error a call met, if any.
    pub(crate) fn damage(&self) -> Option<&Error> {
        self.damage.get()
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
        // Each call is one operation for the lines-written counter (distinct lines per call).
        pmkv_substrate::counters::begin_op();
        match catch_unwind(AssertUnwindSafe(|| {
            let r = f(engine);
            // Debug builds: an operation fences every flush it made, on its own thread
            // (`Pool::unfenced_flushes` says why), checked for every engine.
            #[cfg(debug_assertions)]
            if let (Ok(_), Some(pool)) = (&r, engine.pool()) {
                let n = pool.unfenced_flushes();
                assert!(n == 0, "engine '{}' ended {what} with {n} flushes of its pool not fenced", self.info.name);
            }
            r
        })) {
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
}

/// A [`ErrorKind::Corrupt`] error with what to do next: the pool's path (an engine's
/// message may not name it) and the two commands that help, `pmkv check` (what is
/// damaged) and `pmkv salvage` (copy the intact records into a new pool, which recovers
/// what can be). Written here, where every front end's errors pass, so that the CLI, the
/// Python exception and the C API's message all say it. Other errors pass unchanged.
pub(crate) fn damage_hint(e: Error, path: Option<&std::path::Path>) -> Error {
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
