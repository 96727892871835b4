//! # pmkv — one API over every engine (SPEC U1)
//!
//! ```no_run
//! use pmkv::{Store, Options};
//! let store = Store::open("/dev/shm/demo.pool", "hart", &Options::default()).unwrap();
//! store.put(b"hello", b"world").unwrap();
//! assert_eq!(store.get(b"hello").unwrap().as_deref(), Some(&b"world"[..]));
//! ```
//!
//! Engines live in their own crates and know nothing of this one; this crate adapts each
//! to the [`Engine`] trait, so front ends (CLI, server, Python, C, benchmarks) are written
//! once against `dyn Engine`.

pub mod engine;
pub mod error;
pub mod hart;
pub mod volatile;

pub use engine::{Engine, MemoryUsage, Options, ScanRange, Store, ENGINES};
pub use error::{Error, Result};
pub use pmkv_substrate::{Counters, Latency, Mode};
