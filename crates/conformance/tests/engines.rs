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

mod mangosteen {
    pmkv_conformance::suite!(pmkv_mangosteen::engine::FACTORY);
}

/// The `mangosteen` engine allocates through it (split allocation, SPEC M7).
#[global_allocator]
static ALLOC: pmkv::SplitAlloc = pmkv::SplitAlloc;

/// The engines this file runs the suite for.
const COVERED: &[&str] = &["hart", "volatile", "mangosteen", "nbtree"];

#[test]
fn every_registered_engine_is_covered() {
    for name in pmkv::Registry::builtin().names() {
        assert!(COVERED.contains(&name), "engine '{name}' is registered but does not run the conformance suite");
    }
}
