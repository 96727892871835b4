//! # pmkv-hart — HART on pmkv's substrate
//!
//! HART (Pan et al., "HART: A Concurrent Hash-Assisted Radix Tree for DRAM-PM Hybrid
//! Memory Systems", IPDPS 2019): a DRAM hash table keyed by the first k_h bytes of a key
//! ([`hash_table`]), one adaptive radix tree per hash key in DRAM ([`art`]), leaves and
//! values in PM allocated by EPallocator ([`layout`]), an update micro-log
//! ([`micro_log`]), and recovery from the leaf chunk list ([`recovery`]).

// Internals are crate-private: the ART node code hands out raw node handles and slices
// whose validity rests on the crate's own locking (a node is freed only under its ART's
// write lock), and the micro-log and hash table write PM at offsets they are given. Only
// the operations on `Hart`, its options and reports, the engine factory and the on-PM
// layout constants (documentation of the format, no code that touches memory) are public.
pub(crate) mod art;
mod checker;
mod engine;
pub mod error;
mod hart;
pub(crate) mod hash_table;
pub mod layout;
pub(crate) mod micro_log;
mod recovery;

pub use engine::{hart_options, HartEngine, HartFactory, FACTORY, LAYOUT};
pub use error::{HartError, Result};
pub use hart::{ByStructure, Hart, HartOptions, RecoveryReport};
