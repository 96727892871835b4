//! # pmkv-woart — WOART and ART+CoW on pmkv's substrate
//!
//! WOART, the write-optimal adaptive radix tree of Lee, Lim, Kim, Noh, "WORT: Write
//! Optimal Radix Tree for Persistent Memory Storage Systems" (FAST'17): an adaptive
//! radix tree (Node4/16/48/256, path compression) that lives wholly in PM and makes
//! every change failure-atomic with 8-byte atomic stores ordered by persists, without
//! logging or copy-on-write. Keys and values of any size (up to the limits) are
//! leaf objects of EPallocator, named by 8-byte tagged pointers. Where pmkv departs from
//! the paper, docs/design/woart.md says why.
//!
//! ## Layers, lowest first
//!
//! 1. `layout`: the bytes on PM (docs/format/woart.md): superblock, node kinds, the
//!    8-byte node header of the paper's path compression, leaves, tagged pointers; `error` names its limits.
//! 2. `node`: reading and changing one node with WOART's commit words.
//! 3. `tree`: [`Woart`]'s operations: insert, path-compression split, node
//!    growth, delete, lookup and scans, under one `RwLock` (the paper's WOART is
//!    single-writer).
//! 4. `recovery`: open, format, the walk that verifies and counts, the unclean open's
//!    repairs of stale headers (the paper's lazy recovery, done by the walk) and sweep of
//!    unreachable objects; `check`.
//! 5. `cow`: the type ART+CoW is opened as; its write paths are `tree`'s, by variant.
//! 6. `engine`: both behind `pmkv-core`'s engine contract ([`FACTORY`], [`ARTCOW_FACTORY`]).

mod cow;
mod engine;
mod error;
mod layout;
mod node;
mod recovery;
mod tree;

pub use cow::ArtCow;
pub use engine::{WoartFactory, ARTCOW_FACTORY, FACTORY};
pub use error::{Error, Result};
pub use tree::{Options, Woart};

impl Woart {
    /// Open (or, in a new pool, format) the tree in `pool`.
    pub fn open_with(pool: std::sync::Arc<pmkv_substrate::Pool>, _opts: Options) -> Result<Woart> {
        recovery::open(pool, layout::Variant::Woart)
    }
}
