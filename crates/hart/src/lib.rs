//! # pmkv-hart — HART on pmkv's substrate
//!
//! HART (Pan et al., "HART: A Concurrent Hash-Assisted Radix Tree for DRAM-PM Hybrid
//! Memory Systems", IPDPS 2019): a DRAM hash table keyed by the first k_h bytes of a key
//! (`hash_table`), one adaptive radix tree per hash key in DRAM (`art`), leaves and values
//! in PM allocated by EPallocator (`layout`), an update micro-log (`micro_log`), and
//! recovery from the leaf chunk lists (`recovery`). One module per operation, named as the
//! paper names it: `insert` (Algorithm 1), `update` (Algorithm 3), `search` (Algorithm 4),
//! `delete` (Algorithm 5), `scan` (ordered scans, SPEC H8), `recovery` (Algorithm 7);
//! `pm` reads and writes the PM objects, `memory` accounts for them (SPEC H9), `checker`
//! verifies them, and `engine` puts HART behind pmkv's engine contract ([`FACTORY`]).

//!
//! The public API is [`Hart`] (its operations), [`HartOptions`], [`RecoveryReport`],
//! [`HartError`] and [`Result`], the limits [`MAX_KEY`] and [`MAX_VALUE`], and the engine
//! factory. Everything else is crate-private: the ART node code hands out raw node
//! handles and slices whose validity rests on the crate's own locking (a node is freed
//! only under its ART's write lock), and the micro-log and PM accessors write PM at the
//! offsets they are given; their contracts are `unsafe fn`s with `# Safety` sections, and
//! the operations on `Hart` discharge them. The on-PM format is documented in `layout`
//! and in docs/DESIGN.md.
pub(crate) mod art;
mod art_lock;
mod checker;
pub(crate) mod checksum;
mod delete;
mod engine;
mod error;
mod hart;
pub(crate) mod hash_table;
mod insert;
mod insert_log;
pub(crate) mod layout;
mod memory;
pub(crate) mod micro_log;
mod pm;
mod recovery;
mod salvage;
mod scan;
mod search;
mod update;

pub use engine::{hart_options, HartEngine, HartFactory, FACTORY, LAYOUT};
pub use error::{HartError, Result};
pub use hart::{Hart, HartOptions, RecoveryReport};
pub use layout::{MAX_KEY, MAX_VALUE};
pub use memory::ByStructure;
