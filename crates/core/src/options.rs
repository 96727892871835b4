//! Options for opening a store: what every engine shares, plus typed per-engine options.
//!
//! The common part describes the pool (mode, sizes, latency emulation, create, read-only).
//! What only one engine understands lives with that engine as its own type (e.g.
//! `pmkv_hart::Options`), attached with [`Options::with_engine_options`]; front ends
//! that only have strings (CLI flags, Python keyword arguments, a C options struct, a
//! server config) pass `key=value` pairs with [`Options::param`], which the engine's
//! factory parses against the [`Param`](crate::Param)s it declares and refuses if unknown.
//!
//! `Default` reads nothing from the environment: a library must behave the same whatever
//! the caller's environment holds. Front ends that honour `PMKV_LATENCY` read it
//! themselves ([`Latency::from_env`]).

use pmkv_substrate::{Latency, Mode, PoolOptions, SyncPolicy, DEFAULT_INITIAL_SIZE};
use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;

/// A typed per-engine options value. Any `Clone + Debug + Send + Sync + 'static` type is
/// one; engines downcast with [`Options::engine_options`].
pub trait EngineOptions: Any + Debug + Send + Sync {
    /// Upcast for downcasting.
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any + Debug + Send + Sync> EngineOptions for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// How to open a store. Construct with [`Options::default`] (or [`Options::new`]) and the
/// builder methods; fields may be read and assigned directly. More fields may be added, so
/// struct literals are not available outside this crate.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub struct Options {
    /// Persistence mode (SPEC P3). Default `adr`: correct on every medium, and durable
    /// against power loss on real PM. On a disk file or tmpfs it promises more than the
    /// medium gives; the open store says what its writes survive
    /// ([`Pool::durability`](pmkv_substrate::Pool::durability)), and front ends warn.
    /// On a disk file mode `wal` keeps the promise; why the library does not choose it
    /// there by itself, as the front ends do: [`wal_on_disk`](Self::wal_on_disk).
    pub mode: Mode,
    /// Size of a new pool in bytes; it grows on demand up to `max_size`. Default
    /// [`DEFAULT_INITIAL_SIZE`] (64 KiB).
    pub initial_size: u64,
    /// Maximum pool size, fixed when the pool is created (the address range reserved).
    /// Default 64 GiB.
    pub max_size: u64,
    /// Emulated PM latency (SPEC P5). Default none.
    pub latency: Latency,
    /// Create the pool if it does not exist. Default true.
    pub create: bool,
    /// Open for reading only: nothing in the file changes, other read-only handles may be
    /// open at once, writes fail with `ReadOnly`, and a pool that needs crash recovery is
    /// refused (`NeedsRecovery`). Default false.
    pub read_only: bool,
    /// Prefault a new pool's pages at creation and each extent it grows by, so that no
    /// operation pays the kernel's first touch of a page (see
    /// [`PoolOptions::prefault`]; only for a pool in memory, not in `msync` mode). Default
    /// true.
    pub prefault: bool,
    /// When writes of a `wal` pool are acknowledged (`always`, `everysec`, `no`, as Redis's
    /// `appendfsync`). Default `always`: an acknowledged write is on the device.
    pub sync: SyncPolicy,
    /// Use mode `wal` instead of `mode` when the pool file is on a disk (detected at
    /// open): [`Options::wal_on_disk`]. Front ends turn it on when no mode is given (the
    /// CLI, Python, C), so that a new user on a disk gets `wal` with `always`, durable
    /// against a power loss, and `adr` on PM and tmpfs. [`Options::mode`] turns it off.
    ///
    /// Off in the library's defaults, on purpose: `wal` makes each unbatched write wait
    /// for an `fdatasync` (milliseconds, against microseconds in `adr`), keeps the pool
    /// file at its last checkpoint while the store is open (the rest is in
    /// `<pool>.wal`, so a program reading a live pool file's bytes sees old ones), adds
    /// that second file, and holds private copies of written pages in anonymous memory.
    /// A program chooses those; docs/design/substrate.md, "Mode wal", "Defaults".
    pub wal_on_disk: bool,
    engine: Vec<Arc<dyn EngineOptions>>,
    params: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::Adr,
            initial_size: DEFAULT_INITIAL_SIZE,
            max_size: 64 << 30,
            latency: Latency::NONE,
            create: true,
            read_only: false,
            prefault: true,
            sync: SyncPolicy::Always,
            wal_on_disk: false,
            engine: Vec::new(),
            params: Vec::new(),
        }
    }
}

impl Options {
    /// The defaults.
    pub fn new() -> Options {
        Options::default()
    }
    /// Set the persistence mode, on every medium (no `wal` default on disks).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self.wal_on_disk = false;
        self
    }
    /// Use mode `wal` when the pool file turns out to be on a disk (see the field).
    pub fn wal_on_disk(mut self, on: bool) -> Self {
        self.wal_on_disk = on;
        self
    }
    /// Set the sync policy of mode `wal`.
    pub fn sync(mut self, sync: SyncPolicy) -> Self {
        self.sync = sync;
        self
    }
    /// Set the size of a new pool.
    pub fn initial_size(mut self, bytes: u64) -> Self {
        self.initial_size = bytes;
        self
    }
    /// Set the maximum pool size.
    pub fn max_size(mut self, bytes: u64) -> Self {
        self.max_size = bytes;
        self
    }
    /// Set the emulated PM latency.
    pub fn latency(mut self, latency: Latency) -> Self {
        self.latency = latency;
        self
    }
    /// Create the pool if missing (default true).
    pub fn create(mut self, create: bool) -> Self {
        self.create = create;
        self
    }
    /// Open read-only (default false).
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }
    /// Prefault the pages a pool adds (default true).
    pub fn prefault(mut self, prefault: bool) -> Self {
        self.prefault = prefault;
        self
    }
    /// Attach typed options for an engine, replacing any earlier value of the same type.
    /// Engines that do not know the type ignore it, so one `Options` can carry settings
    /// for several engines.
    pub fn with_engine_options<T: EngineOptions>(mut self, value: T) -> Self {
        self.engine.retain(|o| !(**o).as_any().is::<T>());
        self.engine.push(Arc::new(value));
        self
    }
    /// The typed options of type `T`, if attached.
    pub fn engine_options<T: EngineOptions>(&self) -> Option<&T> {
        self.engine.iter().find_map(|o| (**o).as_any().downcast_ref::<T>())
    }
    /// Add a `key=value` engine parameter (for front ends that only have strings). The
    /// engine refuses a key it does not declare with `InvalidArgument`. A later value of
    /// the same key replaces an earlier one.
    pub fn param(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let key = key.into();
        self.params.retain(|(k, _)| *k != key);
        self.params.push((key, value.into()));
        self
    }
    /// The `key=value` parameters, in the order given.
    pub fn params(&self) -> &[(String, String)] {
        &self.params
    }
    /// The substrate's options for the pool these options describe.
    pub fn pool_options(&self) -> PoolOptions {
        PoolOptions::default()
            .mode(self.mode)
            .initial_size(self.initial_size)
            .max_size(self.max_size)
            .latency(self.latency)
            .prefault(self.prefault)
            .sync(self.sync)
            .disk_mode(self.wal_on_disk.then_some(Mode::Wal))
    }
}

/// The refusal of parameter `key`, which engine `engine` does not have: it names those
/// it has.
pub(crate) fn no_such_param<'a>(engine: &str, key: &str, known: impl Iterator<Item = &'a str>) -> crate::error::Error {
    let names: Vec<&str> = known.collect();
    let has = if names.is_empty() { "none".to_string() } else { names.join(", ") };
    crate::error::Error::new(
        crate::error::ErrorKind::InvalidArgument,
        format!("engine '{engine}' has no parameter '{key}' (it has: {has})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct A(u32);
    #[derive(Clone, Debug, PartialEq)]
    struct B(&'static str);

    #[test]
    fn typed_options_by_type_latest_wins() {
        let o = Options::new().with_engine_options(A(1)).with_engine_options(B("x")).with_engine_options(A(2));
        assert_eq!(o.engine_options::<A>(), Some(&A(2)));
        assert_eq!(o.engine_options::<B>(), Some(&B("x")));
        assert_eq!(o.engine_options::<u64>(), None);
    }

    #[test]
    fn params_replace_and_keep_order() {
        let o = Options::new().param("a", "1").param("b", "2").param("a", "3");
        assert_eq!(o.params(), &[("b".to_string(), "2".to_string()), ("a".to_string(), "3".to_string())]);
    }

    #[test]
    fn default_reads_no_environment() {
        assert_eq!(Options::default().latency, Latency::NONE);
    }
}
