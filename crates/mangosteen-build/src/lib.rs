//! Compiles a Rust module with Mangosteen's compiler capture, from a build script, so a
//! program can make its own data structure durable at the cost of compiler capture
//! rather than page capture (docs/design/mangosteen.md, "Compiler capture of a Rust
//! program's own structure").
//!
//! ```no_run
//! // build.rs of a program (pmkv-mangosteen-build as a [build-dependency]):
//! pmkv_mangosteen_build::compile("src/durable_part.rs", "my_index");
//! // then, in the program:
//! // static MODULE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/my_index.so"));
//! // let module = pmkv_mangosteen::CapturedModule::load(MODULE)?;
//! ```
//!
//! Why a build script and a library of its own: a store is traced only if the code that
//! makes it was compiled with LLVM's SanitizerCoverage store tracing, and Cargo on stable
//! Rust cannot give one crate (let alone one module) its own codegen flags. So the
//! module is compiled here by the same `rustc`, as a `cdylib` with its own copy of the
//! standard library, together with the capture runtime (`instrumented/` of
//! pmkv-mangosteen: the hooks, the C ABI, the persistent heap, and `rt.rs`, the
//! module's allocator and entry points). The result lands in `OUT_DIR`, for
//! `include_bytes!`; pmkv-mangosteen loads it from memory. The `mangosteen` engine's own
//! map is built by this very function (its build script), so the engine's library and a
//! user's are compiled with one flag list.
//!
//! The capture runtime's sources are pmkv-mangosteen's (one copy, compiled into both
//! the loader and every module). They are read from pmkv-mangosteen's own package at
//! build time: its build script names its directory to the build scripts of the
//! packages that depend on it (Cargo's `links` metadata, `DEP_PMKV_MANGOSTEEN_ROOT`), so
//! a program's module is compiled with the runtime of the pmkv-mangosteen it will be
//! loaded by, and each crate is packaged from its own files (no path outside a package).
//! The module's ABI version, checked at load, refuses a mismatch anyway.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The capture runtime compiled into every module: (file name in the generated crate,
/// its path in pmkv-mangosteen's package).
pub const RUNTIME: [(&str, &str); 5] = [
    ("abi.rs", "instrumented/abi.rs"),
    ("hooks.rs", "instrumented/hooks.rs"),
    ("sancov.rs", "instrumented/sancov.rs"),
    ("rt.rs", "instrumented/rt.rs"),
    ("heap.rs", "src/heap.rs"),
];

/// The environment variable Cargo gives the build script of a package that depends on
/// pmkv-mangosteen: the directory of pmkv-mangosteen's package (its build script prints
/// it as `cargo:root=`, under `links = "pmkv_mangosteen"`).
pub const RUNTIME_ROOT_VAR: &str = "DEP_PMKV_MANGOSTEEN_ROOT";

/// The codegen flags of every module: the one list the engine's library and users'
/// modules share.
///
/// * `-Cpanic=unwind`: a panic inside a write is caught in the module (`rt.rs`) and the
///   write rolled back; nothing unwinds across the C ABI (an `extern "C"` function that
///   would unwind aborts instead).
/// * `--cfg pmkv_mgapp`: names the hooks' slow path so that the coverage pass skips it
///   (hooks.rs, `in_span`), and marks the module as built here (rt.rs).
/// * LLVM's heap profiler pass (`memprof`) with its load, store and atomic
///   instrumentation off: all it then does is turn every `llvm.memcpy`, `memmove` and
///   `memset` intrinsic into a call to `__memprof_memcpy` (...), which the hooks define
///   (sancov.rs). Without it, a copy or fill of a constant size is expanded by the back
///   end, after the store-tracing pass ran, into plain stores or `rep movs` that no hook
///   sees: a hash map's insertion of a 48-byte entry was lost so (verify mode found it).
/// * SanitizerCoverage with store tracing only: a call before every store.
/// * `--wrap=memcpy,memmove,memset`: the module's calls to these (the precompiled
///   standard library's included) go to the hooks first (sancov.rs).
/// * `-Bsymbolic`: its own calls to its own symbols (the hooks above all) bind inside it.
pub const FLAGS: &[&str] = &[
    "--edition=2021",
    "--crate-type=cdylib",
    "-Copt-level=3",
    "-Cpanic=unwind",
    "-Cdebuginfo=0",
    "-Cstrip=debuginfo",
    "--cfg",
    "pmkv_mgapp",
    "-Cpasses=function(memprof) sancov-module",
    "-Cllvm-args=-memprof-instrument-reads=false",
    "-Cllvm-args=-memprof-instrument-writes=false",
    "-Cllvm-args=-memprof-instrument-atomics=false",
    "-Cllvm-args=-sanitizer-coverage-level=1",
    "-Cllvm-args=-sanitizer-coverage-trace-stores",
    "-Clink-arg=-Wl,--wrap=memcpy,--wrap=memmove,--wrap=memset",
    "-Clink-arg=-Wl,-Bsymbolic",
];

/// Compile `module` (a path relative to the package, e.g. `"src/durable_part.rs"`) with
/// compiler capture into `$OUT_DIR/<name>.so`, and tell Cargo to rebuild when any of its
/// source files change. Panics with rustc's errors if it does not compile: it runs in a
/// build script, where a panic is how a failure is reported.
///
/// The module is compiled as a submodule (`user`) of a generated crate whose root holds
/// the capture runtime; it defines its structure and its writes with the runtime's
/// macros, `capture_root!(Type);` and `capture_write! { fn name(t: &mut Type, a: Args)
/// -> Out { ... } }` (see `rt.rs` in pmkv-mangosteen), and may include further files with
/// `#[path]` modules. `name` names the library (letters, digits, `_`).
///
/// The package must depend on pmkv-mangosteen (it loads the module with it anyway): the
/// capture runtime is taken from there ([`RUNTIME_ROOT_VAR`]).
pub fn compile(module: &str, name: &str) -> PathBuf {
    let runtime = PathBuf::from(std::env::var_os(RUNTIME_ROOT_VAR).unwrap_or_else(|| {
        panic!(
            "{RUNTIME_ROOT_VAR} is not set: the package whose build script compiles a captured module must depend on \
             pmkv-mangosteen ([dependencies]), which gives the capture runtime"
        )
    }));
    compile_with_runtime(module, name, &runtime)
}

/// [`compile`] with the capture runtime taken from `runtime`, the directory of
/// pmkv-mangosteen's package (its own build script passes its own).
pub fn compile_with_runtime(module: &str, name: &str, runtime: &Path) -> PathBuf {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target = std::env::var("TARGET").ok().filter(|t| std::env::var("HOST").ok().as_ref() != Some(t));
    compile_to(&dir.join(module), name, runtime, &out, target.as_deref())
}

/// [`compile`] with every path given: `module` (absolute), the runtime's package
/// directory, the output directory, and the target triple when cross-compiling.
pub fn compile_to(module: &Path, name: &str, runtime: &Path, out: &Path, target: Option<&str>) -> PathBuf {
    assert!(
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
        "module name {name:?}: letters, digits and _ only"
    );
    let module = module.canonicalize().unwrap_or_else(|e| panic!("the module {}: {e}", module.display()));
    let src = out.join(format!("pmkv-capture-{name}"));
    std::fs::create_dir_all(&src).expect("create the module's source directory in OUT_DIR");
    for (file, from) in RUNTIME {
        let from = runtime.join(from);
        let text = std::fs::read_to_string(&from).unwrap_or_else(|e| {
            panic!("the capture runtime's {} ({e}): is this pmkv-mangosteen's package?", from.display())
        });
        write_if_changed(&src.join(file), &text);
        println!("cargo:rerun-if-changed={}", from.display());
    }
    let root = src.join("lib.rs");
    write_if_changed(&root, &root_source(&module));
    let lib = out.join(format!("{name}.so"));
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let mut cmd = Command::new(rustc);
    cmd.arg(&root).args(FLAGS).arg(format!("--crate-name={name}"));
    let dep = lib.with_extension("d");
    cmd.arg(format!("--emit=link={},dep-info={}", lib.display(), dep.display()));
    if let Some(t) = target {
        cmd.arg(format!("--target={t}"));
    }
    let st = cmd.status().expect("run rustc for the captured module");
    assert!(st.success(), "compiling {} with compiler capture failed: {st}", module.display());
    // Every source file rustc read (the module's own `#[path]` files included).
    let deps = std::fs::read_to_string(&dep).unwrap_or_default();
    for line in deps.lines() {
        if let Some((_, files)) = line.split_once(": ") {
            for f in files.split_whitespace().filter(|f| !f.starts_with(&*src.to_string_lossy())) {
                println!("cargo:rerun-if-changed={f}");
            }
        }
    }
    println!("cargo:rerun-if-changed={}", module.display());
    lib
}

/// The generated crate root: the capture runtime, then the user's module.
fn root_source(module: &Path) -> String {
    format!(
        "//! Generated by pmkv-mangosteen-build: the capture runtime, then the module.\n\
         #![allow(dead_code)]\n\
         mod abi;\n\
         mod hooks;\n\
         mod sancov;\n\
         mod heap;\n\
         #[macro_use]\n\
         mod rt;\n\
         /// The heap's stores are traced here (it is compiled with the module).\n\
         #[inline(always)]\n\
         fn heap_written(_p: *const u8, _n: usize) {{}}\n\
         #[path = {:?}]\n\
         mod user;\n",
        module.display().to_string()
    )
}

/// Write `text` unless the file holds it already (its time stamp then stays).
fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
}
