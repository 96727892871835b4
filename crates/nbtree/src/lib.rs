//! # pmkv-nbtree — NBTree on pmkv's substrate
//!
//! NBTree (Zhang, Zheng, Qi, Huang, "NBTree: a Lock-free PM-friendly Persistent B+-Tree
//! for eADR-enabled PM Systems", VLDB 2022): a B+-tree whose leaves have two layers, DRAM
//! metadata over unsorted PM key-value blocks, with lock-free log-structured inserts,
//! in-place updates and deletes, a cooperative structural modification, DRAM inner nodes
//! and recovery that rebuilds everything in DRAM from the key-value layer. Where pmkv
//! departs from the paper (no HTM on this CPU; entries frozen during an SMO instead of
//! synchronised after it; keys and values of any size) the module docs and
//! docs/design/nbtree.md say why.
//!
//! ## Layers, lowest first
//!
//! Each module imports only the ones before it (`scripts/module-graph crates/nbtree`
//! checks that there is no cycle):
//!
//! 1. `layout`: the bytes on PM (§3.1, Figure 1): superblock, 2 KiB key-value blocks of
//!    32-byte entries, key and value objects, the key encodings and fingerprints.
//!    Beside it, importing nothing: `arena` (huge-page slabs for the DRAM layer),
//!    `reclaim` (epoch-deferred PM frees, SPEC N4) and `chaos` (test-only schedule
//!    noise); `error` names only `layout`'s limits.
//! 2. `leaf`: the two-layer leaf (§3.1): `Leaf` is the DRAM metadata (bitmap,
//!    fingerprints, `num`, `copy_ptr`, flag, next) over one PM block, with the leaf-level
//!    search of Algorithm 5 (§3.2 "Efficient Search", §5.3).
//! 3. `inner`: DRAM inner nodes (§4.3), copy-on-write instead of HTM; routes keys to
//!    leaves. It names leaves, never the tree.
//! 4. `tree`: [`NbTree`] and its base operations (§3.2, §4.1, §5): insert (Algorithm 1),
//!    update (Algorithm 3), delete (Algorithm 4), search (Algorithm 5) and ordered scans;
//!    `batch` applies write batches with them, all or nothing across a crash through the
//!    substrate's batch log.
//! 5. `smo`: the cooperative structural modification, copy and link phases (§4.2,
//!    Algorithm 2). It extends `NbTree` (a writer that meets a leaf in SMO helps finish
//!    it, so `tree`'s writers call it as a method), and is the only code that replaces
//!    leaves and inner nodes.
//! 6. `recovery`: open, crash recovery and the clean close's seals (§3.2 "Crash
//!    Consistency", SPEC N6), which rebuild layers 2-3 from layer 1.
//! 7. `checker`: the invariants of every layer (`NbTree::check`) and memory accounting.
//! 8. `engine`: NBTree behind `pmkv-core`'s engine contract ([`FACTORY`]).
//!
//! The public API is the crate root: [`FACTORY`] (how pmkv opens NBTree), [`Options`],
//! [`Error`], [`Result`], and [`NbTree`] itself for programs and tests that use the tree
//! directly (its open reports recovery as a [`pmkv_core::RecoveryReport`]). Everything
//! else is crate-private.

mod arena;
mod batch;
mod chaos;
#[cfg(feature = "chaos")]
pub use chaos::enable as enable_chaos;
mod checker;
mod engine;
mod error;
mod inner;
mod layout;
mod leaf;
mod reclaim;
mod recovery;
mod salvage;
mod smo;
mod tree;

pub use engine::{NbTreeFactory, FACTORY};
pub use error::{Error, Result};
pub use tree::{NbTree, Options};
