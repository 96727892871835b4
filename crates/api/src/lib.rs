//! # pmkv — one API over every engine (SPEC U1)
//!
//! ```
//! use pmkv::{KeyRange, Options, Store, WriteBatch};
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("demo.pool");
//! let store = Store::open(&path, "hart", &Options::default())?;
//! store.put(b"hello", b"world")?;
//! assert_eq!(store.get(b"hello")?.as_deref(), Some(&b"world"[..]));
//!
//! let mut batch = WriteBatch::new();
//! batch.put("a", "1").put("b", "2").delete("hello");
//! store.write(&batch)?;
//!
//! // A cursor holds no engine lock between steps: writing while iterating is fine.
//! for record in store.range(&KeyRange::all()) {
//!     let (key, value) = record?;
//!     store.put(&[&key[..], b"-seen"].concat(), &value)?;
//! }
//! let newest_first: Vec<_> = store.range(&KeyRange::all()).rev().take(2).collect::<Result<_, _>>()?;
//! assert_eq!(newest_first[0].0, b"b-seen");
//! store.close()?; // a clean shutdown, with errors reported rather than swallowed
//! # Ok::<(), pmkv::Error>(())
//! ```
//!
//! The engines know nothing of this crate: each implements `pmkv_core::EngineFactory`
//! and is listed once in the [`Registry`]. [`Store`] adds what every front end needs on
//! top of any engine: cursors that hold no lock between steps, callbacks that may call
//! back into the store, size checks before a batch starts, and panic containment (an
//! engine panic becomes an `Internal` error, poisons the store and leaves the pool marked
//! unclean, so the next open recovers). Why this shape: `docs/design/api.md`.

#![forbid(unsafe_code)]

mod cursor;
mod guard;
pub mod pool;
mod registry;
mod store;

pub use cursor::Cursor;
pub use registry::Registry;
pub use store::Store;

pub use pmkv_core::{
    BatchOp, CheckReport, Direction, Engine, EngineFactory, EngineInfo, EngineOptions, Error, ErrorKind, KeyRange,
    MemoryUsage, Options, Param, RecoveryReport, Result, Visitor, WriteBatch,
};
/// The DRAM latency the cache model of the read-latency emulation subtracts (measured once
/// per process, or `PMKV_DRAM_NS`).
pub use pmkv_substrate::latency::dram_ns;
pub use pmkv_substrate::{
    remove_pool, Charge, Counters, Durability, Event, Latency, Medium, Mode, ReadModel, Survives, SyncPolicy,
    DEFAULT_INITIAL_SIZE,
};

/// The README's Rust examples, compiled and run as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The engines built into pmkv: **the one list**, a line each — `name("feature"): crate
/// => factory`, where `name` is the engine's registered name and its module in
/// [`engines`], and `feature` the cargo feature that builds it in (the same word). The registry ([`Registry::builtin`]), the [`engines`]
/// re-exports and the conformance suite's engine modules are all made from it: adding an
/// engine is its own crate plus one line here (and its optional dependency and feature in
/// this crate's `Cargo.toml`). docs/design/engine-kit.md says more.
///
/// `with_engines!(m)` calls the macro `m` with `$crate; name("name"): crate => FACTORY, ...`.
/// The list names every engine pmkv knows, whatever this build's features: a caller
/// outside this crate (the conformance suite) builds pmkv with its default features,
/// which are all of them.
#[macro_export]
macro_rules! with_engines {
    ($m:path) => {
        $m! {
            $crate;
            hart("hart"): pmkv_hart => FACTORY,
            volatile("volatile"): pmkv_volatile => FACTORY,
            mangosteen("mangosteen"): pmkv_mangosteen => FACTORY,
            nbtree("nbtree"): pmkv_nbtree => FACTORY,
            fptree("fptree"): pmkv_fptree => FACTORY,
            woart("woart"): pmkv_woart => FACTORY,
            fastfair("fastfair"): pmkv_fastfair => FACTORY,
            artcow("artcow"): pmkv_woart => ARTCOW_FACTORY,
        }
    };
}

/// The registry's engines and the [`engines`] modules, from [`with_engines!`], each behind
/// the cargo feature of its name.
macro_rules! builtin_engines {
    ($root:tt; $($name:ident($feature:literal): $krate:ident => $factory:ident),* $(,)?) => {
        /// Engine crates compiled into this build, for typed options (e.g.
        /// `pmkv::engines::hart::Options`) and native APIs: one module per engine (ART+CoW
        /// is in `woart`'s crate, so `engines::artcow` is that crate too).
        pub mod engines {
            $(
                #[cfg(feature = $feature)]
                pub use $krate as $name;
            )*
        }

        /// Register every engine this build has.
        pub(crate) fn register_builtin(r: &mut Registry) {
            $(
                #[cfg(feature = $feature)]
                r.register(&$krate::$factory);
            )*
            let _ = r;
        }
    };
}
with_engines!(builtin_engines);

/// Split allocation (SPEC M7) for applications built on the Mangosteen runtime with page
/// capture: installed as the program's global allocator
/// (`#[global_allocator] static ALLOC: pmkv::SplitAlloc = pmkv::SplitAlloc;`), it sends a
/// read-write request's allocations to the durable region. The `mangosteen` engine does
/// not need it (its map allocates through the instrumented library's own allocator), and
/// no engine changes the program's allocator.
#[cfg(feature = "mangosteen")]
pub use pmkv_mangosteen::SplitAlloc;
