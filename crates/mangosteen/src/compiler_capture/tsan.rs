//! The capture hooks for C and C++ built with `pmkv-cc` / `pmkv-c++` (bindings/c): clang's
//! ThreadSanitizer instrumentation, used at compile time only, with these functions in
//! place of its runtime (the wrapper passes `-fno-sanitize-link-runtime`). Unlike store
//! tracing, it also turns every `memcpy`, `memmove` and `memset` — the intrinsics the
//! compiler would otherwise expand into unseen stores, struct copies included — into calls
//! here, and reports C++ virtual-table pointer writes. Writes go to [`super::hooks`];
//! reads, function entry and exit do nothing. Atomic operations are left uninstrumented
//! (`-tsan-instrument-atomics=0`): an atomic store into the region is not captured, which
//! verify mode reports.
//!
//! Exported only with the `c-hooks` feature (the C library enables it): a Rust program
//! built with a real ThreadSanitizer must not find these symbols in pmkv.

use super::hooks::{mem, store};
use std::ffi::c_void;

macro_rules! hooks {
    (write: $($w:ident = $n:expr),* ; nothing: $($r:ident),*) => {
        $(
            #[no_mangle]
            pub extern "C" fn $w(p: *mut c_void) {
                store(p as usize, $n)
            }
        )*
        $(
            #[no_mangle]
            pub extern "C" fn $r(_p: *mut c_void) {}
        )*
    };
}

hooks!(
    write: __tsan_write1 = 1, __tsan_write2 = 2, __tsan_write4 = 4, __tsan_write8 = 8, __tsan_write16 = 16,
        __tsan_unaligned_write2 = 2, __tsan_unaligned_write4 = 4, __tsan_unaligned_write8 = 8,
        __tsan_unaligned_write16 = 16, __tsan_volatile_write1 = 1, __tsan_volatile_write2 = 2,
        __tsan_volatile_write4 = 4, __tsan_volatile_write8 = 8, __tsan_volatile_write16 = 16;
    nothing: __tsan_read1, __tsan_read2, __tsan_read4, __tsan_read8, __tsan_read16, __tsan_unaligned_read2,
        __tsan_unaligned_read4, __tsan_unaligned_read8, __tsan_unaligned_read16, __tsan_volatile_read1,
        __tsan_volatile_read2, __tsan_volatile_read4, __tsan_volatile_read8, __tsan_volatile_read16,
        __tsan_func_entry, __tsan_vptr_read
);

#[no_mangle]
pub extern "C" fn __tsan_init() {}

/// A translation unit compiled with `pmkv-cc` / `pmkv-c++` registers its module at load
/// (the constructor in bindings/c/include/pmkv_capture.h, which the wrappers include in
/// every file they compile): `abi` its `PMKV_CAPTURE_ABI`, `code` an object of its own.
/// 0, or -1 if refused (another release's ABI); the C API then refuses compiler capture
/// for code of that module at open (`super::registered`).
#[no_mangle]
pub extern "C" fn pmkv_capture_register(abi: u32, code: *const c_void) -> i32 {
    super::register(abi, code as usize)
}

#[no_mangle]
pub extern "C" fn __tsan_func_exit() {}

#[no_mangle]
pub extern "C" fn __tsan_write_range(p: *mut c_void, n: usize) {
    store(p as usize, n)
}

#[no_mangle]
pub extern "C" fn __tsan_read_range(_p: *mut c_void, _n: usize) {}

/// A C++ object's virtual-table pointer is written (construction, destruction).
#[no_mangle]
pub extern "C" fn __tsan_vptr_update(p: *mut *mut c_void, _new: *mut c_void) {
    store(p as usize, std::mem::size_of::<*mut c_void>())
}

/// # Safety
///
/// `memcpy`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __tsan_memcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    mem(d as usize, n);
    // SAFETY: the caller's.
    unsafe { libc::memcpy(d, s, n) }
}

/// # Safety
///
/// `memmove`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __tsan_memmove(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    mem(d as usize, n);
    // SAFETY: the caller's.
    unsafe { libc::memmove(d, s, n) }
}

/// # Safety
///
/// `memset`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __tsan_memset(d: *mut c_void, c: i32, n: usize) -> *mut c_void {
    mem(d as usize, n);
    // SAFETY: the caller's.
    unsafe { libc::memset(d, c, n) }
}
