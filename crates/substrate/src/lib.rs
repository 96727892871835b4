//! # pmkv-substrate
//!
//! The bottom layer of pmkv, shared by every engine:
//!
//! * `pool` — pool files ([`Pool`]) mapped at a fixed base that grows in place (SPEC P1, P2);
//! * [`header`] — the pool header and its crash-atomic update;
//! * `durability` — what a pool sits on ([`Medium`]) and what its acknowledged writes
//!   survive in each mode;
//! * `persist` — `adr` / `eadr` / `msync` / `wal` / `none` persistence (P3), the only code
//!   that issues flushes and fences;
//! * `wal` — the redo log with group commit behind mode `wal` (durable pools on disk
//!   files); `power` — with the `crash-sim` feature only: its power-loss simulation;
//! * [`counters`] — per-thread flush/fence/line counters (P4);
//! * [`latency`] — PM latency emulation (P5); `llc` — the model of the last-level cache
//!   by which it can charge only the reads that would miss;
//! * `crash_sim` — with the `crash-sim` feature only: the crash simulator (P6), simulated
//!   pools whose every flush, fence and store is a crash point; for tests;
//! * [`epalloc`] — EPallocator, the leak-proof persistent allocator (P7);
//! * [`batch_log`] — the redo log that makes an engine's write batches all or nothing
//!   across a crash, kept in EPallocator objects;
//! * [`huge`] — DRAM blocks on 2 MiB pages, for the engines' DRAM structures;
//! * `fault` — with the `fault-injection` feature only: a hook at every flush and fence of
//!   any pool, for tests that make an engine panic mid-write on a file pool.
//!
//! Nothing here knows about engines; engines depend on this crate, never the reverse.

// What the engines and the layers above use by module path stays `pub`; the rest is
// reached through the names re-exported below, so its files can be reorganised without
// breaking a caller (scripts/layers checks who may use this crate at all).
pub mod batch_log;
pub mod checksum;
pub mod counters;
#[cfg(feature = "crash-sim")]
pub(crate) mod crash_sim;
pub(crate) mod durability;
pub mod epalloc;
pub(crate) mod error;
#[cfg(feature = "fault-injection")]
pub(crate) mod fault;
pub mod header;
pub mod huge;
pub mod latency;
pub(crate) mod llc;
pub(crate) mod persist;
pub(crate) mod pool;
#[cfg(feature = "crash-sim")]
pub(crate) mod power;
pub(crate) mod wal;

pub use counters::Counters;
#[cfg(feature = "crash-sim")]
pub use crash_sim::{CrashPoint, Eviction, PointKind, SimState};
pub use durability::{Durability, Event, Medium, Survives};
pub use error::{PoolError, Result};
#[cfg(feature = "fault-injection")]
pub use fault::{FaultHook, FaultPoint};
pub use latency::{Charge, Latency, ReadModel};
pub use persist::{flush_insn, CrashModel, FlushInsn, Mode, SyncPolicy, LINE};
pub use pool::{EngineClaim, Pool, PoolInfo, PoolOptions, DEFAULT_INITIAL_SIZE, MIN_POOL_SIZE};
#[cfg(feature = "crash-sim")]
pub use power::{PowerEvent, PowerLog, Tear, SECTOR};
pub use wal::{remove_pool, Replayed, WalFile, CHECKPOINT_BYTES};
