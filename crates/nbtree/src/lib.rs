//! # pmkv-nbtree — NBTree on pmkv's substrate
//!
//! NBTree (Zhang, Zheng, Qi, Huang, "NBTree: a Lock-free PM-friendly Persistent B+-Tree
//! for eADR-enabled PM Systems", VLDB 2022): a B+-tree whose leaves have two layers, DRAM
//! metadata over unsorted PM key-value blocks (`leaf`, `layout`), with lock-free
//! log-structured inserts, in-place updates and deletes (`tree`: Algorithms 1, 3, 4, 5),
//! a cooperative structural modification (`smo`: Algorithm 2), DRAM inner nodes
//! (`inner`), epoch-based reclamation (`reclaim`) and recovery that rebuilds everything in
//! DRAM from the key-value layer (`recovery`). Where pmkv departs from the paper (no HTM
//! on this CPU; entries frozen during an SMO instead of synchronised after it; keys and
//! values of any size) the module docs and docs/DESIGN.md say why.
//!
//! The public API is [`NbTree`], [`RecoveryReport`], [`NbError`], [`Result`], the limits
//! and the engine factory. Everything else is crate-private.

pub(crate) mod arena;
mod chaos;
#[cfg(feature = "chaos")]
pub use chaos::enable as enable_chaos;
pub(crate) mod checker;
mod engine;
mod error;
pub(crate) mod inner;
pub(crate) mod layout;
pub(crate) mod leaf;
mod reclaim;
mod recovery;
mod smo;
mod tree;

pub use checker::ByStructure;
pub use engine::{nbtree_options, NbTreeEngine, NbTreeFactory, FACTORY, LAYOUT};
pub use error::{NbError, Result};
pub use layout::{MAX_KEY, MAX_VALUE};
pub use tree::{NbOptions, NbTree, RecoveryReport};

use std::sync::Arc;

/// A value alone on its cache line(s).
#[repr(align(64))]
pub(crate) struct Padded<T>(pub T);

impl NbTree {
    /// Open the NBTree in `pool`, formatting it if the pool is new. A pool that another
    /// live tree uses is refused (`PoolError::Locked`).
    pub fn open(pool: Arc<pmkv_substrate::Pool>) -> Result<NbTree> {
        recovery::open(pool, false)
    }

    /// [`NbTree::open`] with options.
    pub fn open_with(pool: Arc<pmkv_substrate::Pool>, opts: NbOptions) -> Result<NbTree> {
        let mut t = recovery::open(pool, opts.single_layer)?;
        t.write_locks = opts.write_locks;
        Ok(t)
    }
}
