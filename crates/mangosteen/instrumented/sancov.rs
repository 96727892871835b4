//! The hooks LLVM's store tracing calls in the instrumented library, and the wrappers its
//! `memcpy`, `memmove` and `memset` calls are linked to (`build.rs`: `--wrap`), including
//! those inside the precompiled standard library linked into it. Each reports the write
//! to `hooks` and, for the wrappers, then does it.

use crate::hooks::store;
use std::ffi::c_void;

#[no_mangle]
pub extern "C" fn __sanitizer_cov_store1(p: *mut u8) {
    store(p as usize, 1)
}
#[no_mangle]
pub extern "C" fn __sanitizer_cov_store2(p: *mut u16) {
    store(p as usize, 2)
}
#[no_mangle]
pub extern "C" fn __sanitizer_cov_store4(p: *mut u32) {
    store(p as usize, 4)
}
#[no_mangle]
pub extern "C" fn __sanitizer_cov_store8(p: *mut u64) {
    store(p as usize, 8)
}
#[no_mangle]
pub extern "C" fn __sanitizer_cov_store16(p: *mut u128) {
    store(p as usize, 16)
}

extern "C" {
    fn __real_memcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void;
    fn __real_memmove(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void;
    fn __real_memset(d: *mut c_void, c: i32, n: usize) -> *mut c_void;
}

/// # Safety
///
/// `memcpy`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __wrap_memcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    store(d as usize, n);
    // SAFETY: the caller's.
    unsafe { __real_memcpy(d, s, n) }
}

/// # Safety
///
/// `memmove`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __wrap_memmove(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    store(d as usize, n);
    // SAFETY: the caller's.
    unsafe { __real_memmove(d, s, n) }
}

/// # Safety
///
/// `memset`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __wrap_memset(d: *mut c_void, c: i32, n: usize) -> *mut c_void {
    store(d as usize, n);
    // SAFETY: the caller's.
    unsafe { __real_memset(d, c, n) }
}
