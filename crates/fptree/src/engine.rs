//! FPTree behind the engine contract of `pmkv-core`, through the engine kit: the tree is a
//! [`NativeEngine`] and [`FpTreeFactory`] a [`NativeFactory`].

use crate::layout::{CAP, MAX_KEY, MAX_VALUE};
use crate::tree::{FpTree, Options};
use pmkv_core::{EngineInfo, EngineResult, NativeEngine, NativeFactory, Pool};
use std::sync::Arc;

/// The factory the registry lists.
pub static FACTORY: FpTreeFactory = FpTreeFactory;

/// Opens FPTree engines.
#[derive(Debug, Default)]
pub struct FpTreeFactory;

impl NativeFactory for FpTreeFactory {
    type Engine = FpTree;
    /// No parameters yet (its typed `Options` are empty).
    type Settings = ();
    fn info(&self) -> EngineInfo {
        EngineInfo::new(
            "fptree",
            "FPTree: DRAM inner nodes over fingerprinted unsorted PM leaves, locks instead of TSX (Oukid et al., SIGMOD 2016)",
        )
        .persistent(true)
        .atomic_batches(true)
        .limits(MAX_KEY, MAX_VALUE)
        .node_keys(CAP)
        .competitor(true)
    }
    fn open_native(&self, pool: Arc<Pool>, _: (), _: &pmkv_core::Options) -> EngineResult<FpTree> {
        FpTree::open_with(pool, Options::default())
    }
}

/// Atomic batches of two or more operations go through the batch log (all or nothing
/// across a crash, see `batch`); independent ones are applied in order.
impl NativeEngine for FpTree {
    pmkv_core::native_methods!(tree, write_batch, memory_pair);
}
