//! WOART and ART+CoW behind the engine contract of `pmkv-core`, through the engine kit:
//! the tree is a [`NativeEngine`] and [`WoartFactory`] a [`NativeFactory`].

use crate::cow::ArtCow;
use crate::layout::{Variant, MAX_KEY, MAX_VALUE};
use crate::tree::{Options, Woart};
use pmkv_core::{EngineInfo, EngineResult, MemoryUsage, NativeEngine, NativeFactory, Pool};
use std::sync::Arc;

/// The factory of WOART engines the registry lists.
pub static FACTORY: WoartFactory = WoartFactory(Variant::Woart);

/// The factory of ART+CoW engines (`artcow`), the paper's copy-on-write competitor.
pub static ARTCOW_FACTORY: WoartFactory = WoartFactory(Variant::ArtCow);

/// Opens WOART engines, or ART+CoW's ([`ARTCOW_FACTORY`]): one type, since the two trees
/// share everything but their write paths.
#[derive(Debug)]
pub struct WoartFactory(Variant);

impl Default for WoartFactory {
    fn default() -> WoartFactory {
        WoartFactory(Variant::Woart)
    }
}

fn info(v: Variant) -> EngineInfo {
    let about = match v {
        Variant::Woart => {
            "WOART: write-optimal adaptive radix tree in PM, 8-byte failure-atomic updates (Lee et al., FAST'17)"
        }
        Variant::ArtCow => {
            "ART+CoW: adaptive radix tree in PM made failure-atomic by copy-on-write (Lee et al., FAST'17)"
        }
    };
    EngineInfo::new(v.name(), about)
        .persistent(true)
        .atomic_batches(false)
        .limits(MAX_KEY, MAX_VALUE)
        .node_keys(256)
        .competitor(true)
}

impl NativeFactory for WoartFactory {
    type Engine = Woart;
    /// No parameters yet (its typed `Options` are empty).
    type Settings = ();
    fn info(&self) -> EngineInfo {
        info(self.0)
    }
    fn open_native(&self, pool: Arc<Pool>, _: (), _: &pmkv_core::Options) -> EngineResult<Woart> {
        let o = Options::default();
        match self.0 {
            Variant::Woart => Woart::open_with(pool, o),
            Variant::ArtCow => Ok(ArtCow::open_with(pool, o)?.into_inner()),
        }
    }
}

impl NativeEngine for Woart {
    pmkv_core::native_methods!(tree);
    fn memory(&self) -> MemoryUsage {
        MemoryUsage {
            dram: vec![("tree".into(), std::mem::size_of::<Woart>() as u64)],
            pm: vec![("heap".into(), self.pool.used())],
        }
    }
}
