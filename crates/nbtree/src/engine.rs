//! NBTree behind the engine contract of `pmkv-core`, through the engine kit: the tree is
//! a [`NativeEngine`] and [`NbTreeFactory`] a [`NativeFactory`]; its typed [`Options`]
//! declare the `key=value` parameters.

use crate::layout::{MAX_KEY, MAX_VALUE};
use crate::tree::{NbTree, Options};
use pmkv_core::{
    parse_bool, Emit, EngineInfo, EngineResult, EngineSettings, NativeEngine, NativeFactory, Pool, Result,
    SalvageReport, Setting,
};
use std::sync::Arc;

impl EngineSettings for Options {
    const SETTINGS: &'static [Setting<Options>] = &[
        Setting {
            name: "write_locks",
            doc: "true: NBTree-W, the paper's ablation: writers take a per-leaf lock instead of writing lock-free (default false)",
            set: |o, v| parse_bool(v).map(|x| o.write_locks = x),
        },
        Setting {
            name: "single_layer",
            doc: "true: NBTree-SL, the paper's ablation: leaf metadata (bitmap, num, fingerprints) in the PM block instead of DRAM; chosen when the pool is created (default false)",
            set: |o, v| parse_bool(v).map(|x| o.single_layer = x),
        },
    ];
}

/// The factory the registry lists.
pub static FACTORY: NbTreeFactory = NbTreeFactory;

/// Opens NBTree engines.
#[derive(Debug, Default)]
pub struct NbTreeFactory;

impl NativeFactory for NbTreeFactory {
    type Engine = NbTree;
    type Settings = Options;
    fn info(&self) -> EngineInfo {
        EngineInfo::new(
            "nbtree",
            "NBTree: lock-free B+-tree, DRAM leaf metadata and inner nodes over PM key-value blocks (Zhang et al., VLDB 2022)",
        )
        .persistent(true)
        .atomic_batches(true)
        .limits(MAX_KEY, MAX_VALUE)
        .node_keys(crate::layout::CAP)
    }
    fn open_native(&self, pool: Arc<Pool>, o: Options, _: &pmkv_core::Options) -> EngineResult<NbTree> {
        NbTree::open_with(pool, o)
    }
    fn salvage(&self, image: &[u8], emit: Emit<'_>) -> Result<SalvageReport> {
        crate::salvage::salvage(image, emit)
    }
}

/// Atomic batches of two or more operations go through the batch log (all or nothing
/// across a crash, see `batch`); independent ones are applied in order.
impl NativeEngine for NbTree {
    pmkv_core::native_methods!(
        get_with,
        delete,
        write_batch,
        scan,
        len,
        check,
        recovery_report,
        sync,
        close,
        pool,
        memory_pair
    );
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        NbTree::put(self, key, value).map(drop)
    }
}
