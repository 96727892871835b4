//! FPTree behind the engine contract of `pmkv-core`, through the engine kit: the tree is a
//! [`NativeEngine`] and [`FpTreeFactory`] a [`NativeFactory`].

use crate::layout::{CAP, MAX_KEY, MAX_VALUE};
use crate::tree::{FpTree, Options};
use pmkv_core::{EngineInfo, EngineResult, EngineSettings, MemoryUsage, NativeEngine, NativeFactory, Pool, Setting};
use std::sync::Arc;

/// The factory the registry lists.
pub static FACTORY: FpTreeFactory = FpTreeFactory;

/// Opens FPTree engines.
#[derive(Debug, Default)]
pub struct FpTreeFactory;

/// No parameters yet.
impl EngineSettings for Options {
    const SETTINGS: &'static [Setting<Options>] = &[];
}

impl NativeFactory for FpTreeFactory {
    type Engine = FpTree;
    type Settings = Options;
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
    fn open_native(&self, pool: Arc<Pool>, o: Options, _: &pmkv_core::Options) -> EngineResult<FpTree> {
        FpTree::open_with(pool, o)
    }
}

/// Atomic batches of two or more operations go through the batch log (all or nothing
/// across a crash, see `batch`); independent ones are applied in order.
impl NativeEngine for FpTree {
    pmkv_core::native_methods!(
        get_with,
        put,
        delete,
        write_batch,
        scan,
        len,
        check,
        recovery_report,
        sync,
        close,
        pool
    );
    fn memory(&self) -> MemoryUsage {
        let (dram, pm) = FpTree::memory(self);
        MemoryUsage { dram, pm }
    }
}
