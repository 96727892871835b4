//! The conformance suite for every engine of this build (SPEC U1). An engine joins by
//! adding a module here; `every_registered_engine_is_covered` fails until it does.

mod hart {
    pmkv_conformance::suite!(pmkv_hart::FACTORY);
}

mod volatile {
    pmkv_conformance::suite!(pmkv_volatile::FACTORY);
}

mod nbtree {
    pmkv_conformance::suite!(pmkv_nbtree::FACTORY);
}

/// NBTree-SL (`single_layer=true`, the paper's ablation: leaf metadata in the PM blocks):
/// a different block format and a different write path, so it runs the whole suite too,
/// through a factory that adds the parameter to every open.
mod nbtree_single_layer {
    use pmkv_core::{Emit, Engine, EngineFactory, EngineInfo, Options, Param, Pool, Result, SalvageReport};
    use std::path::Path;
    use std::sync::Arc;

    struct SingleLayer;

    /// `opts` with `single_layer=true`, unless a case set the parameter itself.
    fn sl(opts: &Options) -> Options {
        if opts.params().iter().any(|(k, _)| k == "single_layer") {
            return opts.clone();
        }
        opts.clone().param("single_layer", "true")
    }

    impl EngineFactory for SingleLayer {
        fn info(&self) -> EngineInfo {
            pmkv_nbtree::FACTORY.info()
        }
        fn layout(&self) -> Option<&'static str> {
            pmkv_nbtree::FACTORY.layout()
        }
        fn params(&self) -> &'static [Param] {
            pmkv_nbtree::FACTORY.params()
        }
        fn open(&self, path: &Path, opts: &Options) -> Result<Box<dyn Engine>> {
            pmkv_nbtree::FACTORY.open(path, &sl(opts))
        }
        fn open_pool(&self, pool: Arc<Pool>, opts: &Options) -> Result<Box<dyn Engine>> {
            pmkv_nbtree::FACTORY.open_pool(pool, &sl(opts))
        }
        fn salvage(&self, image: &[u8], emit: Emit<'_>) -> Result<SalvageReport> {
            pmkv_nbtree::FACTORY.salvage(image, emit)
        }
    }

    static FACTORY: SingleLayer = SingleLayer;
    pmkv_conformance::suite!(FACTORY);
}

mod fptree {
    pmkv_conformance::suite!(pmkv_fptree::FACTORY);
}

mod woart {
    pmkv_conformance::suite!(pmkv_woart::FACTORY);
}

mod artcow {
    pmkv_conformance::suite!(pmkv_woart::ARTCOW_FACTORY);
}

mod fastfair {
    pmkv_conformance::suite!(pmkv_fastfair::FACTORY);
}

mod mangosteen {
    pmkv_conformance::suite!(pmkv_mangosteen::FACTORY);
}

/// The `mangosteen` engine allocates through it (split allocation, SPEC M7).
#[global_allocator]
static ALLOC: pmkv::SplitAlloc = pmkv::SplitAlloc;

/// The engines this file runs the suite for.
const COVERED: &[&str] = &["hart", "volatile", "mangosteen", "nbtree", "fptree", "woart", "fastfair", "artcow"];

#[test]
fn every_registered_engine_is_covered() {
    for name in pmkv::Registry::builtin().names() {
        assert!(COVERED.contains(&name), "engine '{name}' is registered but does not run the conformance suite");
    }
}
