//! # pmkv-hart — HART on pmkv's substrate
//!
//! HART (Pan et al., "HART: A Concurrent Hash-Assisted Radix Tree for DRAM-PM Hybrid
//! Memory Systems", IPDPS 2019): a DRAM hash table keyed by the first k_h bytes of a key
//! (`hash_table`), one adaptive radix tree per hash key in DRAM (`art`), leaves and values
//! in PM allocated by EPallocator ([`layout`]), an update micro-log (`micro_log`), and
//! recovery from the leaf chunk lists (`recovery`). One module per operation, named as the
//! paper names it: `insert` (Algorithm 1), `update` (Algorithm 3), `search` (Algorithm 4),
//! `delete` (Algorithm 5), `scan` (ordered scans, SPEC H8), `recovery` (Algorithm 7);
//! `pm` reads and writes the PM objects, `memory` accounts for them (SPEC H9), `checker`
//! verifies them, and `engine` puts HART behind pmkv's engine contract ([`FACTORY`]).

// Internals are crate-private: the ART node code hands out raw node handles and slices
// whose validity rests on the crate's own locking (a node is freed only under its ART's
// write lock), and the micro-log and hash table write PM at offsets they are given. Only
// the operations on `Hart`, its options and reports, the engine factory and the on-PM
// layout constants (documentation of the format, no code that touches memory) are public.
pub(crate) mod art;
mod checker;
mod delete;
mod engine;
pub mod error;
mod hart;
pub(crate) mod hash_table;
mod insert;
pub mod layout;
mod memory;
pub(crate) mod micro_log;
mod pm;
mod recovery;
mod scan;
mod search;
mod update;

pub use engine::{hart_options, HartEngine, HartFactory, FACTORY, LAYOUT};
pub use error::{HartError, Result};
pub use hart::{Hart, HartOptions, RecoveryReport};
pub use memory::ByStructure;
