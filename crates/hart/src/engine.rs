//! HART behind the engine contract of `pmkv-core`, through the engine kit: [`Hart`] is a
//! [`NativeEngine`], the factory a [`NativeFactory`], and the typed [`Options`] declare
//! the `key=value` parameters.

use crate::hart::{Hart, Options};
use crate::layout::{MAX_KEY, MAX_VALUE};
use pmkv_core::{
    parse_bool, parse_in, Emit, EngineInfo, EngineResult, EngineSettings, NativeEngine, NativeFactory, Pool, Result,
    SalvageReport, Setting,
};
use std::sync::Arc;

/// The factory the registry lists.
pub static FACTORY: HartFactory = HartFactory;

/// Opens HART engines. Reached only through [`FACTORY`] (as a `dyn EngineFactory`), so
/// the crate root does not export the type.
#[derive(Debug, Default)]
pub struct HartFactory;

impl EngineSettings for Options {
    const SETTINGS: &'static [Setting<Options>] = &[
        Setting {
            name: "hash_key_len",
            doc: "k_h, bytes of the key that select an ART (0..=7, default 2; fixed when the pool is created)",
            set: |o, v| parse_in(v, 0..=7).map(|x| o.hash_key_len = x),
        },
        Setting {
            name: "paper_updates",
            doc: "true: every value out of line and every update out of place, exactly as Algorithm 3 (default false)",
            set: |o, v| parse_bool(v).map(|x| o.paper_updates = x),
        },
    ];
}

impl NativeFactory for HartFactory {
    type Engine = Hart;
    type Settings = Options;
    fn info(&self) -> EngineInfo {
        EngineInfo::new(
            "hart",
            "HART: hash table of adaptive radix trees in DRAM over PM leaves (Pan et al., IPDPS 2019)",
        )
        .persistent(true)
        .atomic_batches(true)
        .limits(MAX_KEY, MAX_VALUE)
        .node_keys(256)
    }
    fn open_native(&self, pool: Arc<Pool>, o: Options, _: &pmkv_core::Options) -> EngineResult<Hart> {
        Hart::open(pool, o)
    }
    fn salvage(&self, image: &[u8], emit: Emit<'_>) -> Result<SalvageReport> {
        crate::salvage::salvage(image, emit)
    }
}

/// Atomic batches of two or more operations go through the batch log (all or nothing
/// across a crash, see `batch`); independent ones are applied in order (a crash keeps a
/// prefix), with group commit: consecutive puts go through [`Hart::put_many`], which
/// shares one commit fence among the puts of a run that fall in one ART.
impl NativeEngine for Hart {
    pmkv_core::native_methods!(tree, write_batch, memory_pair);
}
