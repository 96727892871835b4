//! FAST&FAIR behind the engine contract of `pmkv-core`, through the engine kit: the tree
//! is a [`NativeEngine`] and [`FastFairFactory`] a [`NativeFactory`].

use crate::layout::{CAP, MAX_KEY, MAX_VALUE};
use crate::tree::{FastFair, Options};
use pmkv_core::{EngineInfo, EngineResult, EngineSettings, MemoryUsage, NativeEngine, NativeFactory, Pool, Setting};
use std::sync::Arc;

/// The factory the registry lists.
pub static FACTORY: FastFairFactory = FastFairFactory;

/// Opens FAST&FAIR engines.
#[derive(Debug, Default)]
pub struct FastFairFactory;

/// No parameters: the node size is fixed by the format.
impl EngineSettings for Options {
    const SETTINGS: &'static [Setting<Options>] = &[];
}

impl NativeFactory for FastFairFactory {
    type Engine = FastFair;
    type Settings = Options;
    fn info(&self) -> EngineInfo {
        EngineInfo::new(
            "fastfair",
            "FAST&FAIR: B+-tree wholly in PM, failure-atomic shifts and in-place splits, readers take no lock (Hwang et al., FAST 2018)",
        )
        .persistent(true)
        .atomic_batches(false)
        .limits(MAX_KEY, MAX_VALUE)
        .node_keys(CAP)
        .competitor(true)
    }
    fn open_native(&self, pool: Arc<Pool>, o: Options, _: &pmkv_core::Options) -> EngineResult<FastFair> {
        FastFair::open_with(pool, o)
    }
}

impl NativeEngine for FastFair {
    pmkv_core::native_methods!(get_with, put, delete, scan, len, check, recovery_report, sync, close, pool);
    fn memory(&self) -> MemoryUsage {
        // The tree keeps nothing in DRAM but its handle: every node is in PM.
        MemoryUsage {
            dram: vec![("handle".into(), std::mem::size_of::<FastFair>() as u64)],
            pm: FastFair::memory(self),
        }
    }
}
