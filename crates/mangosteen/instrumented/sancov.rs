//! The hooks LLVM's store tracing calls in the instrumented library, and the wrappers its
//! `memcpy`, `memmove` and `memset` calls are linked to (`build.rs`: `--wrap`), including
//! those inside the precompiled standard library linked into it. Each reports the write
//! to `hooks` and, for the wrappers, then does it.

use crate::hooks::{mem, store};
use std::ffi::c_void;

macro_rules! stores {
    ($($name:ident($t:ty) = $n:expr),*) => {
        $(
            #[no_mangle]
            pub extern "C" fn $name(p: *mut $t) {
                store(p as usize, $n)
            }
        )*
    };
}

stores!(
    __sanitizer_cov_store1(u8) = 1,
    __sanitizer_cov_store2(u16) = 2,
    __sanitizer_cov_store4(u32) = 4,
    __sanitizer_cov_store8(u64) = 8,
    __sanitizer_cov_store16(u128) = 16
);

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
    mem(d as usize, n);
    // SAFETY: the caller's.
    unsafe { __real_memcpy(d, s, n) }
}

/// # Safety
///
/// `memmove`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __wrap_memmove(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    mem(d as usize, n);
    // SAFETY: the caller's.
    unsafe { __real_memmove(d, s, n) }
}

/// # Safety
///
/// `memset`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __wrap_memset(d: *mut c_void, c: i32, n: usize) -> *mut c_void {
    mem(d as usize, n);
    // SAFETY: the caller's.
    unsafe { __real_memset(d, c, n) }
}

/// The heap profiler pass (`memprof`, pmkv-mangosteen-build's flags) turns every
/// `memcpy`, `memmove` and `memset` intrinsic into a call to these, constant sizes
/// included (which the back end would otherwise expand into stores no hook sees).
///
/// # Safety
///
/// `memcpy`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __memprof_memcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    // SAFETY: the caller's.
    unsafe { __wrap_memcpy(d, s, n) }
}

/// # Safety
///
/// `memmove`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __memprof_memmove(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    // SAFETY: the caller's.
    unsafe { __wrap_memmove(d, s, n) }
}

/// # Safety
///
/// `memset`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __memprof_memset(d: *mut c_void, c: i32, n: usize) -> *mut c_void {
    // SAFETY: the caller's.
    unsafe { __wrap_memset(d, c, n) }
}

/// Read by the prologue the `memprof` pass adds to each function it changes (for the
/// shadow memory it would use); with its access instrumentation off nothing uses it.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static __memprof_shadow_memory_dynamic_address: u64 = 0;
