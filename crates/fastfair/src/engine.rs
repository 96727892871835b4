//! FAST&FAIR behind the engine contract of `pmkv-core`, through the engine kit: the tree
//! is a [`NativeEngine`] and [`FastFairFactory`] a [`NativeFactory`].

use crate::layout::{CAP, MAX_KEY, MAX_VALUE};
use crate::tree::{FastFair, Options};
use pmkv_core::{EngineInfo, EngineResult, MemoryUsage, NativeEngine, NativeFactory, Pool};
use std::sync::Arc;

/// The factory the registry lists.
pub static FACTORY: FastFairFactory = FastFairFactory;

/// Opens FAST&FAIR engines.
#[derive(Debug, Default)]
pub struct FastFairFactory;

impl NativeFactory for FastFairFactory {
    type Engine = FastFair;
    /// No parameters yet (its typed `Options` are empty).
    type Settings = ();
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
        // FAST flushes a line once its stores are done (see `fast`): correct when a line
        // reaches PM whole, holding a prefix of its stores, as on x86.
        .crash_model(pmkv_substrate::CrashModel::LinesInOrder)
    }
    fn open_native(&self, pool: Arc<Pool>, _: (), _: &pmkv_core::Options) -> EngineResult<FastFair> {
        FastFair::open_with(pool, Options::default())
    }
}

impl NativeEngine for FastFair {
    pmkv_core::native_methods!(tree);
    fn memory(&self) -> MemoryUsage {
        // The tree keeps nothing in DRAM but its handle: every node is in PM.
        MemoryUsage {
            dram: vec![("handle".into(), std::mem::size_of::<FastFair>() as u64)],
            pm: FastFair::memory(self),
        }
    }
}
