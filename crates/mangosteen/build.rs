//! Builds the instrumented application library (`instrumented/app.rs`): the `mangosteen`
//! engine's `BTreeMap`, compiled with LLVM's store tracing and with `memcpy`, `memmove`
//! and `memset` wrapped, so that every write it makes reaches the capture hooks
//! (docs/design/mangosteen.md, "Compiler capture"). It is compiled by
//! pmkv-mangosteen-build, the helper a program uses for its own structure: one flag list
//! for the engine and every user module. The library is embedded in the crate
//! (`include_bytes!`) and loaded from memory at run time. The user's RUSTFLAGS are
//! deliberately not passed on: the library's flags are fixed.

fn main() {
    pmkv_mangosteen_build::compile("instrumented/app.rs", "libpmkv_mgapp");
    // The capture runtime compiled into it (the helper embeds these at its own build).
    for f in
        ["instrumented/abi.rs", "instrumented/hooks.rs", "instrumented/sancov.rs", "instrumented/rt.rs", "src/heap.rs"]
    {
        println!("cargo:rerun-if-changed={f}");
    }
}
