//! # pmkv-core — the engine contract
//!
//! pmkv has several engines of different kinds (HART: an index with per-ART locks;
//! NBTree: a lock-free B+-tree; Mangosteen: a runtime that makes an in-memory map durable)
//! and several front ends (the Rust API, the CLI, the server, Python, C). This crate is
//! the one thing they all agree on, and it names no engine:
//!
//! * [`Engine`] — what an open engine does; [`EngineFactory`] — how one is opened, what
//!   it is ([`EngineInfo`]) and which string parameters it takes ([`Param`]);
//! * [`Options`] — pool options common to every engine, plus typed per-engine options
//!   ([`Options::with_engine_options`]) and `key=value` parameters for front ends;
//! * [`Error`] with a stable [`ErrorKind`] and numeric [`ErrorKind::code`] for C and
//!   Python to map;
//! * [`KeyRange`], [`Direction`] — ordered range scans, forward and reverse;
//! * [`WriteBatch`] — several writes in one call, atomic where the engine says so;
//! * [`CheckReport`], [`RecoveryReport`], [`MemoryUsage`] — structured reports;
//! * the engine kit — [`NativeEngine`], [`NativeFactory`], [`EngineError`],
//!   [`EngineSettings`]: an engine implements its native API once and the kit stands it
//!   behind [`Engine`] (docs/design/engine-kit.md).
//!
//! Layering: `pmkv-substrate` → `pmkv-core` → engines (`pmkv-hart`, `pmkv-volatile`, ...)
//! → `pmkv` (the user-facing `Store`, cursors, the engine registry) → front ends.
//! Why each choice, and what redb, LMDB and RocksDB do: `docs/design/api.md`.

#![forbid(unsafe_code)]

mod batch;
mod engine;
mod error;
mod kit;
mod options;
mod range;
mod report;

pub use batch::{BatchOp, WriteBatch};
pub use engine::{open_engine_file, open_pool_file, Emit, Engine, EngineFactory, EngineInfo, Param, Visitor};
pub use error::{Error, ErrorKind, Result};
pub use kit::{
    apply_in_order, check_batch_sizes, check_sizes, close_after, parse_bool, parse_choice, parse_in, parse_settings,
    EngineError, EngineResult, EngineSettings, Native, NativeEngine, NativeFactory, Setting,
};
pub use options::{EngineOptions, Options};
pub use range::{Direction, KeyRange};
pub use report::{CheckReport, MemoryUsage, RecoveryReport, SalvageReport};

pub use pmkv_substrate::batch_log::Op as LogOp;
pub use pmkv_substrate::{Latency, Mode, Pool, SyncPolicy};
