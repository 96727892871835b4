//! # pmkv-fptree — FPTree on pmkv's substrate
//!
//! FPTree (Oukid, Lasperas, Nica, Willhalm, Lehner, "FPTree: A Hybrid SCM-DRAM Persistent
//! and Concurrent B-Tree for Storage Class Memory", SIGMOD 2016): a B+-tree whose inner
//! nodes live in DRAM and are rebuilt from the leaves at every open, and whose leaves live
//! in PM as a linked list of unsorted entry arrays with a validity bitmap and one-byte
//! fingerprints, so that a lookup compares only the keys whose fingerprint matches. Writes
//! commit with one persisted 8-byte bitmap store; leaf splits and unlinks are made
//! crash-safe by micro-logs. It is one of the HART paper's competitors; pmkv builds it so
//! that `reproduce hart` compares like for like. Where pmkv departs from the paper (no
//! TSX on this CPU: locks; keys and values of any size; seals and CRCs against damage) the
//! module docs and docs/design/fptree.md say why.
//!
//! ## Layers, lowest first
//!
//! Each module imports only the ones before it:
//!
//! 1. `layout`: the bytes on PM (superblock with the micro-logs, leaves, entries, key
//!    and value objects); `error` names only its limits.
//! 2. `fingerprint`: the one-byte key hash and the probe of a leaf's fingerprints.
//! 3. `leaf`: one PM leaf read and written in place, and the key and value objects.
//! 4. `micro_log`: the split and delete micro-logs, the PM side of the structural
//!    changes, and their recovery.
//! 5. `inner`: the DRAM inner nodes and the locks (the paper's TSX fallback).
//! 6. `tree`: [`FpTree`] and its operations: find, insert, update, delete, scans, splits
//!    and unlinks.
//!    `batch` applies write batches with them, all or nothing across a crash through the
//!    substrate's batch log.
//! 7. `recovery`: open, the rebuild of the inner nodes, the sweep after a crash, the
//!    seals of a clean close.
//! 8. `checker`: the invariants of every layer (`FpTree::check`) and memory accounting.
//! 9. `engine`: FPTree behind `pmkv-core`'s engine contract ([`FACTORY`]).
//!
//! The public API is the crate root: [`FACTORY`], [`Options`], [`Error`], [`Result`], and
//! [`FpTree`] itself for programs and tests that use the tree directly. Everything else is
//! crate-private.

mod batch;
mod checker;
mod engine;
mod error;
mod fingerprint;
mod inner;
mod layout;
mod leaf;
mod micro_log;
mod recovery;
mod tree;

pub use engine::{FpTreeFactory, FACTORY};
pub use error::{Error, Result};
pub use tree::{FpTree, Options};
