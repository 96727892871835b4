//! # pmkv-fastfair — FAST&FAIR on pmkv's substrate
//!
//! FAST&FAIR (Hwang, Kim, Won, Nam, "Endurable Transient Inconsistency in
//! Byte-Addressable Persistent B+-Tree", FAST 2018): a B+-tree whose every node lives in
//! PM, sorted, kept consistent without logging or copy-on-write. FAST (failure-atomic
//! shift) inserts and deletes by shifting entries one 8-byte store at a time in an order
//! whose every intermediate state reads as before or after, because a reader skips the
//! duplicate pointer a shift leaves; FAIR (failure-atomic in-place rebalance) splits by
//! making the sibling, linking it, then truncating, with searches moving right past a
//! split (B-link). As the paper and the authors' code: 1 KB nodes, a shift flushes each
//! line it dirties once (correct under the line-granular, in-order crash model the engine
//! declares, `CrashModel::LinesInOrder`), node locks in DRAM, linear search in place.
//! Where pmkv departs from the paper (reads validated by a version word; inner levels
//! rebuilt by recovery; keys and values of any size in checked out-of-line records) the
//! module docs and docs/design/fastfair.md say why.
//!
//! ## Layers, lowest first
//!
//! 1. `layout`: the bytes on PM: superblock, nodes, objects, key words; `error` names
//!    its limits.
//! 2. `node`: reading a node as its live entries, node locks, objects.
//! 3. `tree`: [`FastFair`]: search, insert, update, delete, scans;
//!    `fast` (the shifts, FAST) and `fair` (splits, FAIR) extend it.
//! 4. `recovery`: open, crash recovery, the clean close's seal.
//! 5. `checker`: the invariants and space accounting.
//! 6. `engine`: FAST&FAIR behind `pmkv-core`'s engine contract ([`FACTORY`]).
//!
//! The public API is the crate root: [`FACTORY`], [`Options`], [`Error`], [`Result`] and
//! [`FastFair`] itself. Everything else is crate-private.

mod checker;
mod engine;
mod error;
mod fair;
mod fast;
mod layout;
mod node;
mod read;
mod recovery;
mod tree;

pub use engine::{FastFairFactory, FACTORY};
pub use error::{Error, Result};
pub use tree::{FastFair, Options};
