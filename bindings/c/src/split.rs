//! libpmkv's side of split allocation from C and C++ (SPEC M7): the hooks it hands to
//! libpmkv_malloc (`bindings/c/malloc`), the opt-in library that defines `malloc`,
//! `calloc`, `realloc` and `free`.
//!
//! libpmkv itself defines no allocator function: linking it leaves the program's `malloc`
//! the C library's. A program that wants `split_heap` links libpmkv_malloc too (or runs
//! with it in `LD_PRELOAD`); [`attach`], called when a runtime is opened with
//! `split_heap`, finds it with `dlsym`, checks that it really is the program's `malloc`,
//! and gives it [`HOOKS`], through which its functions ask whether the calling thread is
//! inside a read-write request ([`pmkv_mangosteen::SplitAlloc::current`]) and, if so,
//! allocate from that request's heap. Until then it forwards every call to the C library.
//!
//! Why a hand-over at run time rather than libpmkv_malloc calling libpmkv by name: then
//! libpmkv_malloc has no link dependency on libpmkv (it can be preloaded into any
//! program), and the split state lives in one place, libpmkv's copy of
//! `pmkv_mangosteen` (a second copy would have thread-locals of its own).

use pmkv_mangosteen::SplitAlloc;
use std::ffi::{c_int, c_void, CStr};

/// The version of [`Hooks`]; libpmkv_malloc refuses any other (a libpmkv_malloc of
/// another pmkv release).
const HOOKS_VERSION: u32 = 3;

/// What libpmkv_malloc calls (`bindings/c/malloc/src/lib.rs` declares the same layout).
#[repr(C)]
pub(crate) struct Hooks {
    version: u32,
    /// Inside a request: `*out` = a block of `n` bytes from its heap aligned to `align` (a
    /// power of two; 16 or less: 16), NULL when full, and 1. Outside: 0.
    alloc: unsafe extern "C" fn(n: usize, align: usize, out: *mut *mut c_void) -> c_int,
    /// 1 if `p` was dealt with here: a block of the current request's heap, freed; or a
    /// persistent block outside its request, leaked and counted as a stray free. 0: not
    /// persistent, the C library's to free.
    free: unsafe extern "C" fn(p: *mut c_void) -> c_int,
    /// For `realloc`: 1 and `*size` = the block's usable size if `p` is a block of the
    /// current request's heap; -1 if it is a persistent block outside its request (it may
    /// not change); 0 otherwise (the C library's).
    block: unsafe extern "C" fn(p: *const c_void, size: *mut usize) -> c_int,
    /// Bytes libpmkv_malloc wrote at `p` (`calloc`'s zeroing, `realloc`'s copy), which no
    /// instrumentation sees: recorded by compiler capture (nothing outside its batches).
    wrote: unsafe extern "C" fn(p: *mut c_void, n: usize),
}

unsafe extern "C" fn hook_alloc(n: usize, align: usize, out: *mut *mut c_void) -> c_int {
    let Some(h) = SplitAlloc::current() else { return 0 };
    // SAFETY: `out` is libpmkv_malloc's local, valid for a write.
    unsafe { *out = h.alloc(n.max(1), align.max(16)) as *mut c_void };
    1
}

unsafe extern "C" fn hook_free(p: *mut c_void) -> c_int {
    if let Some(h) = SplitAlloc::scope_heap() {
        if h.contains(p as *const u8) {
            h.free(p as *mut u8);
            return 1;
        }
    }
    if SplitAlloc::in_region(p as *const u8) {
        SplitAlloc::note_stray();
        return 1;
    }
    0
}

unsafe extern "C" fn hook_block(p: *const c_void, size: *mut usize) -> c_int {
    if let Some(n) = SplitAlloc::scope_heap().and_then(|h| h.usable_size(p as *const u8)) {
        // SAFETY: `size` is libpmkv_malloc's local, valid for a write.
        unsafe { *size = n };
        return 1;
    }
    if SplitAlloc::in_region(p as *const u8) {
        return -1;
    }
    0
}

extern "C" {
    /// Compiler capture's hook for a written range, defined in this library by
    /// `pmkv-mangosteen` (feature `c-hooks`).
    fn __tsan_write_range(p: *mut c_void, n: usize);
}

unsafe extern "C" fn hook_wrote(p: *mut c_void, n: usize) {
    // SAFETY: the hook only records the range.
    unsafe { __tsan_write_range(p, n) };
}

static HOOKS: Hooks =
    Hooks { version: HOOKS_VERSION, alloc: hook_alloc, free: hook_free, block: hook_block, wrote: hook_wrote };

/// libpmkv_malloc's entry point: `int pmkv_malloc_attach(const struct Hooks *)`, 0 on
/// success.
type AttachFn = unsafe extern "C" fn(*const Hooks) -> c_int;

/// The base address of the object that holds `p` (0 if none).
fn object_of(p: *const c_void) -> usize {
    // SAFETY: all-zero is a valid `Dl_info` (plain pointers and integers).
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `dladdr` takes any address and only writes the `Dl_info` it is given.
    if unsafe { libc::dladdr(p, &mut info) } == 0 {
        return 0;
    }
    info.dli_fbase as usize
}

fn lookup(name: &CStr) -> *mut c_void {
    // SAFETY: a NUL-terminated name looked up in the program's global scope.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

/// Make the program's `malloc` split for `split_heap` regions, or say why it cannot be:
/// libpmkv_malloc must be loaded, and its `malloc` must be the program's (not when it was
/// loaded with `dlopen`, or another allocator such as AddressSanitizer's comes first).
/// Idempotent.
pub(crate) fn attach() -> Result<(), &'static str> {
    let f = lookup(c"pmkv_malloc_attach");
    if f.is_null() {
        return Err("split_heap needs libpmkv_malloc, which is not loaded: link the program with \
                    -lpmkv_malloc (pkg-config pmkv-malloc), or run it with LD_PRELOAD=libpmkv_malloc.so");
    }
    let m = lookup(c"malloc");
    if m.is_null() || object_of(m) != object_of(f) {
        return Err("split_heap: libpmkv_malloc is loaded but the program's malloc is another's (libpmkv_malloc \
             loaded with dlopen, or an allocator such as AddressSanitizer's comes first): link it \
             before the C library, or put it first in LD_PRELOAD");
    }
    // SAFETY: `pmkv_malloc_attach`, found in the object that defines the program's
    // `malloc` (libpmkv_malloc), with the signature it exports; `HOOKS` is static.
    let r = unsafe { std::mem::transmute::<*mut c_void, AttachFn>(f)(&HOOKS) };
    if r != 0 {
        return Err("split_heap: libpmkv_malloc is of another pmkv release than libpmkv (install both together)");
    }
    pin();
    Ok(())
}

/// Keep libpmkv loaded for the life of the process once libpmkv_malloc holds its hooks
/// (a `dlclose` would leave them dangling).
fn pin() {
    // SAFETY: all-zero is a valid `Dl_info` (plain pointers and integers).
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `dladdr` only writes the `Dl_info`; `HOOKS` is a static of this object.
    if unsafe { libc::dladdr(&HOOKS as *const Hooks as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return;
    }
    // SAFETY: the path of an object that is loaded (this one), NUL-terminated by the
    // dynamic linker; RTLD_NOLOAD loads nothing, RTLD_NODELETE only pins it. The handle
    // is kept (never closed) on purpose.
    unsafe { libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE) };
}
