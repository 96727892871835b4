//! Builds the instrumented application library (`instrumented/app.rs`): the `mangosteen`
//! engine's `BTreeMap`, compiled with LLVM's store tracing and with `memcpy`, `memmove`
//! and `memset` wrapped, so that every write it makes reaches the capture hooks
//! (docs/design/mangosteen.md, "Compiler capture"). It is compiled by
//! pmkv-mangosteen-build, the helper a program uses for its own structure: one flag list
//! for the engine and every user module. The library is embedded in the crate
//! (`include_bytes!`) and loaded from memory at run time. The user's RUSTFLAGS are
//! deliberately not passed on: the library's flags are fixed.

fn main() {
    let dir = std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    // The engine's map, compiled with the runtime of this very package.
    pmkv_mangosteen_build::compile_with_runtime("instrumented/app.rs", "libpmkv_mgapp", &dir);
    // Given to the build scripts of the packages that depend on this one (`links`), whose
    // modules pmkv_mangosteen_build::compile builds with this package's capture runtime.
    println!("cargo:root={}", dir.display());
}
