//! Builds the instrumented application library (`instrumented/app.rs`): the `mangosteen`
//! engine's `BTreeMap`, compiled with LLVM's store tracing and with `memcpy`, `memmove`
//! and `memset` wrapped, so that every write it makes reaches the capture hooks
//! (docs/design/mangosteen.md, "Compiler capture"). Cargo on stable cannot give one crate
//! its own codegen flags, so this script calls the same `rustc` on the file directly; the
//! library is embedded in the crate (`include_bytes!`) and loaded from memory at run time.
//! The user's RUSTFLAGS are deliberately not passed on: the library's flags are fixed.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for f in
        ["instrumented/app.rs", "instrumented/abi.rs", "instrumented/hooks.rs", "instrumented/sancov.rs", "src/heap.rs"]
    {
        println!("cargo:rerun-if-changed={}", dir.join(f).display());
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let lib = out.join("libpmkv_mgapp.so");
    let mut cmd = Command::new(rustc);
    cmd.arg(dir.join("instrumented/app.rs"))
        .args(["--edition=2021", "--crate-type=cdylib", "--crate-name=pmkv_mgapp"])
        .args(["-Copt-level=3", "-Cpanic=abort", "-Cdebuginfo=0", "-Cstrip=debuginfo"])
        // Names the hooks' slow path so that the coverage pass skips it (hooks.rs, `in_span`).
        .args(["--cfg", "pmkv_mgapp"])
        // SanitizerCoverage with store tracing only: a call before every store.
        .args(["-Cpasses=sancov-module", "-Cllvm-args=-sanitizer-coverage-level=1"])
        .arg("-Cllvm-args=-sanitizer-coverage-trace-stores")
        // The library's calls to these go to the hooks first (hooks.rs).
        .arg("-Clink-arg=-Wl,--wrap=memcpy,--wrap=memmove,--wrap=memset")
        // Its own calls to its own symbols (the hooks above all) bind inside it.
        .arg("-Clink-arg=-Wl,-Bsymbolic")
        .arg("-o")
        .arg(&lib);
    if let (Ok(target), Ok(host)) = (std::env::var("TARGET"), std::env::var("HOST")) {
        if target != host {
            cmd.arg(format!("--target={target}"));
        }
    }
    let st = cmd.status().expect("run rustc for the instrumented library");
    assert!(st.success(), "building the instrumented library (instrumented/app.rs) failed: {st}");
}
