//! The conformance suite for every engine of this build (SPEC U1). The engines' modules are
//! made from `pmkv::with_engines!`, the one list of built-in engines, so an engine joins
//! by being listed there; variants of an engine (parameters that change its format or
//! write path) are added here by hand.

/// One module per engine of `pmkv::with_engines!`, the one list of built-in engines.
macro_rules! suites {
    ($root:tt; $($name:ident($feature:literal): $krate:ident => $factory:ident),* $(,)?) => {
        $(
            mod $name {
                pmkv_conformance::suite!($root::engines::$name::$factory);
                /// The same engine with its pools in mode `wal`.
                mod wal {
                    pmkv_conformance::suite_wal!($root::engines::$name::$factory);
                }
            }
        )*
        /// The engines this file runs the suite for.
        const COVERED: &[&str] = &[$(stringify!($name)),*];
    };
}
pmkv::with_engines!(suites);

/// NBTree-SL (`single_layer=true`, the paper's ablation: leaf metadata in the PM blocks):
/// a different block format and a different write path, so it runs the whole suite too,
/// through a factory that adds the parameter to every open.
mod nbtree_single_layer {
    use pmkv_conformance::util::WithParams;
    static FACTORY: WithParams = WithParams { inner: &pmkv_nbtree::FACTORY, params: &[("single_layer", "true")] };
    pmkv_conformance::suite!(FACTORY);
}

/// Mangosteen's ablations together: no deduplication (each captured block logged as a run
/// of its own, in capture order: another record shape through the log and its replay) and
/// no memcpy capture (a mem* call reported store by store: another capture path).
mod mangosteen_ablations {
    use pmkv_conformance::util::WithParams;
    static FACTORY: WithParams =
        WithParams { inner: &pmkv_mangosteen::FACTORY, params: &[("dedup", "false"), ("memcpy", "false")] };
    pmkv_conformance::suite!(FACTORY);
}

/// The list's names are the engines' registered names (a module named other than its
/// engine would hide the engine from every `pmkv` front end that names it).
#[test]
fn every_registered_engine_is_covered() {
    for name in pmkv::Registry::builtin().names() {
        assert!(COVERED.contains(&name), "engine '{name}' is registered but does not run the conformance suite");
    }
}

/// The engines whose `eadr_*` cases are skipped, and why. The cases of an engine that
/// refuses an `eadr` pool print a `SKIPPED` line and pass, which a test run does not show;
/// this list is where a skip is visible, and `eadr_skips_are_declared` fails when an engine
/// starts or stops refusing `eadr` without the list saying so.
const EADR_SKIPPED: &[(&str, &str)] = &[("volatile", "not a persistent engine")];

/// The engines whose mode-`wal` cases are skipped, and why (as [`EADR_SKIPPED`]).
const WAL_SKIPPED: &[(&str, &str)] = &[("volatile", "not a persistent engine")];

/// Every engine skips a group of cases (`skipped(f)` says why) exactly when `declared`
/// lists it, for the reason it gives.
fn skips_match(what: &str, declared: &[(&str, &str)], skipped: fn(&dyn pmkv::EngineFactory) -> Option<String>) {
    for f in pmkv::Registry::builtin().factories() {
        let name = f.info().name;
        let declared = declared.iter().find(|(n, _)| *n == name);
        match (skipped(*f), declared) {
            (None, None) => {}
            (Some(why), Some((_, reason))) => assert!(why.contains(reason), "engine '{name}': skipped because {why}"),
            (Some(why), None) => panic!("engine '{name}' skips its {what} cases undeclared: {why}"),
            (None, Some(_)) => panic!("engine '{name}' runs its {what} cases but the list of skips has it"),
        }
    }
}

#[test]
fn wal_skips_are_declared() {
    skips_match("wal", WAL_SKIPPED, pmkv_conformance::util::wal_unsupported);
}

#[test]
fn eadr_skips_are_declared() {
    skips_match("eadr", EADR_SKIPPED, pmkv_conformance::crash::eadr_unsupported);
}
