//! The `mangosteen` engine's application: the standard library's `BTreeMap`, unchanged,
//! behind a C ABI, compiled by `build.rs` into a shared library with store tracing (see
//! `hooks.rs`) and loaded by the runtime (`src/compiler_capture/`).
//!
//! Why a library of its own: a store is traced only if the code that makes it was
//! compiled with the instrumentation, and a generic type like `BTreeMap<K, V>` is
//! compiled where it is instantiated. Cargo on stable Rust cannot give one crate its own
//! codegen flags, so the build script compiles this file with pmkv-mangosteen-build, the
//! helper any program uses for its own structure (the capture runtime, `rt.rs`, is
//! compiled in beside it), and the runtime loads the result from memory through the
//! public `CapturedModule`. Nothing else in the process is instrumented, and the
//! module's global allocator (`rt.rs`) is what sends the map's allocations to the
//! region's persistent heap: the program that opens the engine installs nothing.
//!
//! Every function takes the region's base and length; those that change the map run
//! only inside a batch, on the thread the runtime captures for.

use crate::abi::{Bound as CBound, RecordVisitFn, ValueFn};
use crate::heap;
use crate::rt::with_heap;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::ops::Bound;

/// The map the application keeps.
type Map = BTreeMap<Box<[u8]>, Box<[u8]>>;

/// The map at region offset `root`.
///
/// # Safety
///
/// `root` names a map this library made in the region at `base`, mapped where it was.
unsafe fn map<'a>(base: *mut u8, root: u64) -> &'a mut Map {
    // SAFETY: the caller's contract.
    unsafe { &mut *(base.add(root as usize) as *mut Map) }
}

/// # Safety
///
/// `p` is valid for `n` bytes (or `n` is 0).
unsafe fn bytes<'a>(p: *const u8, n: usize) -> &'a [u8] {
    if n == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(p, n) }
    }
}

/// Format the heap of the region if it is not, make an empty map, name it the heap's
/// root, and return its region offset.
///
/// # Safety
///
/// The region at `base` (`len` bytes, 16-aligned, zero past a heap header if any) is this
/// batch's.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mgapp_create(base: *mut u8, len: usize) -> u64 {
    with_heap(base, len, |h| {
        if !h.is_formatted() {
            h.format();
            // Its header is zeroed with a fixed-size `memset` (see `crate::hooks::written`).
            crate::hooks::written(base, heap::FIRST_BLOCK);
        }
        let m = Box::into_raw(Box::new(Map::new()));
        // So is the new map (a 24-byte fill).
        crate::hooks::written(m as *const u8, std::mem::size_of::<Map>());
        let off = m as u64 - base as u64;
        h.set_root(off);
        off
    })
}

/// Insert or overwrite.
///
/// # Safety
///
/// `pmkv_mgapp_create`'s region; `root` its map; the key and value valid.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mgapp_put(base: *mut u8, len: usize, root: u64, k: *const u8, kl: usize, v: *const u8, vl: usize) {
    // SAFETY: the caller's contract.
    let (m, key, value) = unsafe { (map(base, root), bytes(k, kl), bytes(v, vl)) };
    with_heap(base, len, |_| match m.get_mut(key) {
        Some(old) if old.len() == value.len() => old.copy_from_slice(value),
        Some(old) => *old = value.into(),
        None => {
            m.insert(key.into(), value.into());
        }
    })
}

/// Remove; whether the key was there.
///
/// # Safety
///
/// As `pmkv_mgapp_put`.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mgapp_delete(base: *mut u8, len: usize, root: u64, k: *const u8, kl: usize) -> bool {
    // SAFETY: the caller's contract.
    let (m, key) = unsafe { (map(base, root), bytes(k, kl)) };
    with_heap(base, len, |_| m.remove(key).is_some())
}

/// Look a key up; `f` sees its value.
///
/// # Safety
///
/// The map at `root` of the region at `base`, which no batch changes meanwhile.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mgapp_get(base: *mut u8, root: u64, k: *const u8, kl: usize, f: ValueFn, arg: *mut c_void) -> bool {
    // SAFETY: the caller's contract.
    let (m, key) = unsafe { (map(base, root), bytes(k, kl)) };
    match m.get(key) {
        Some(v) => {
            // SAFETY: the caller's callback and argument.
            unsafe { f(arg, v.as_ptr(), v.len()) };
            true
        }
        None => false,
    }
}

/// # Safety
///
/// `b.ptr` valid for `b.len` bytes when `b.kind` is 1 or 2.
unsafe fn bound<'a>(b: &CBound) -> Bound<&'a [u8]> {
    // SAFETY: the caller's contract.
    match b.kind {
        1 => Bound::Included(unsafe { bytes(b.ptr, b.len) }),
        2 => Bound::Excluded(unsafe { bytes(b.ptr, b.len) }),
        _ => Bound::Unbounded,
    }
}

/// Visit up to `limit` records between the bounds, in order or reversed, until `f`
/// returns false.
///
/// # Safety
///
/// As `pmkv_mgapp_get`; the bounds' bytes valid; start <= end (`BTreeMap::range` panics,
/// which aborts here, otherwise).
#[no_mangle]
pub unsafe extern "C" fn pmkv_mgapp_scan(
    base: *mut u8,
    root: u64,
    start: &CBound,
    end: &CBound,
    reverse: bool,
    limit: usize,
    f: RecordVisitFn,
    arg: *mut c_void,
) {
    // SAFETY: the caller's contract.
    let (m, s, e) = unsafe { (map(base, root), bound(start), bound(end)) };
    let it = m.range::<[u8], _>((s, e));
    // SAFETY: the caller's callback and argument.
    let mut go = |(k, v): (&Box<[u8]>, &Box<[u8]>)| unsafe { f(arg, k.as_ptr(), k.len(), v.as_ptr(), v.len()) };
    if reverse {
        let _ = it.rev().take(limit).all(&mut go);
    } else {
        let _ = it.take(limit).all(&mut go);
    }
}

/// Records in the map.
///
/// # Safety
///
/// As `pmkv_mgapp_get`.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mgapp_len(base: *mut u8, root: u64) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { map(base, root) }.len() as u64
}

/// Whether the map's keys are in strictly increasing order (a check of its structure).
///
/// # Safety
///
/// As `pmkv_mgapp_get`.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mgapp_ordered(base: *mut u8, root: u64) -> bool {
    // SAFETY: the caller's contract.
    let m = unsafe { map(base, root) };
    m.keys().zip(m.keys().skip(1)).all(|(a, b)| a < b)
}

/// For the capture tests (`compiler_capture`'s unit tests): one write of `len` bytes at
/// `base + off` of the given kind — 0 plain 8-byte store (`len` ignored), 1 `memcpy`,
/// 2 `memmove`, 3 `memset` — after writes to this function's stack and to the ordinary
/// heap, which must not be captured.
///
/// # Safety
///
/// `base + off .. + max(len, 8)` is writable.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mgapp_scribble(base: *mut u8, off: usize, kind: u32, len: usize) {
    let mut stack = [0u8; 256];
    for (i, b) in stack.iter_mut().enumerate() {
        *b = std::hint::black_box(i as u8);
    }
    std::hint::black_box(&mut stack);
    let heap: Vec<u64> = (0..std::hint::black_box(64)).collect();
    std::hint::black_box(&heap);
    let src = vec![0xA5u8; len.max(8)];
    let len = std::hint::black_box(len);
    // SAFETY: the caller's contract.
    unsafe {
        let dst = base.add(off);
        match kind {
            0 => dst.cast::<u64>().write_unaligned(std::hint::black_box(0x0123_4567_89ab_cdef)),
            1 => std::ptr::copy_nonoverlapping(src.as_ptr(), dst, len),
            2 => std::ptr::copy(dst.add(1), dst, len),
            _ => std::ptr::write_bytes(dst, 0x5A, len),
        }
    }
}
