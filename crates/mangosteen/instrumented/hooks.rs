//! Write capture by the compiler: the runtime half (the paper captures with binary
//! instrumentation, §3.2). Compiled twice, with its own state each time: into the
//! instrumented application library (whose `sancov.rs` hooks call it) and into the runtime
//! (`compiler_capture`, whose `tsan` hooks serve C and C++ built with `pmkv-cc`).
//!
//! Every hook calls [`written`], which asks two questions:
//!
//! 1. is the address inside the span of every region ever captured (two loads and a
//!    compare; the stack, the transient heap and everything else stop here), and
//! 2. is this thread running a batch whose region holds it (a thread-local pointer)?
//!
//! Only then is the write recorded, once per block in a row (`Ctx::last`). The hooks run
//! before the store: what is logged is the block's content at commit, so the order does
//! not matter.

use super::abi::Ctx;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

thread_local! {
    /// The batch this thread captures for, or null.
    static CURRENT: Cell<*mut Ctx> = const { Cell::new(std::ptr::null_mut()) };
}

/// The smallest span holding every region captured so far (never shrinks; only used to
/// turn most stores away cheaply, the exact check is against the thread's `Ctx`).
static SPAN_LO: AtomicUsize = AtomicUsize::new(usize::MAX);
static SPAN_HI: AtomicUsize = AtomicUsize::new(0);

/// Capture this thread's writes into `ctx`'s region until [`end`].
///
/// # Safety
///
/// `ctx` stays valid, and is not otherwise used, until `end` is called on this thread.
pub unsafe fn begin(ctx: *mut Ctx) {
    // SAFETY: the caller's contract.
    let (lo, hi) = unsafe { ((*ctx).lo, (*ctx).hi) };
    SPAN_LO.fetch_min(lo, Ordering::Relaxed);
    SPAN_HI.fetch_max(hi, Ordering::Relaxed);
    CURRENT.with(|c| c.set(ctx));
}

/// Stop capturing on this thread.
pub fn end() {
    CURRENT.with(|c| c.set(std::ptr::null_mut()));
}

/// A write of `n` bytes at `a` is about to happen (or just happened): record it if this
/// thread captures a region that holds it.
#[inline(always)]
pub fn store(a: usize, n: usize) {
    if a < SPAN_LO.load(Ordering::Relaxed) || a >= SPAN_HI.load(Ordering::Relaxed) || n == 0 {
        return;
    }
    in_span(a, n)
}

/// A `memcpy`, `memmove` or `memset` of `n` bytes at `a` is about to happen: one write,
/// or (`Ctx::mem_store`, the paper's "nomemcpy") the stores a copy loop would make, each
/// reported as a store.
#[inline(always)]
pub fn mem(a: usize, n: usize) {
    if a >= SPAN_HI.load(Ordering::Relaxed) || a.saturating_add(n) <= SPAN_LO.load(Ordering::Relaxed) || n == 0 {
        return;
    }
    let p = CURRENT.with(Cell::get);
    // SAFETY: `begin`'s contract: valid until `end`; this thread only (read, not kept).
    let w = if p.is_null() { 0 } else { unsafe { (*p).mem_store } };
    if w == 0 {
        return in_span(a, n);
    }
    let mut at = a;
    while at < a + n {
        let k = w.min(a + n - at);
        store(at, k);
        at += k;
    }
}

/// Record a write the instrumentation cannot see: a fixed-size copy or fill that the
/// compiler's back end expands into plain stores after the store-tracing pass ran (the
/// IR of this library shows which: `--emit=llvm-ir`, constant-length `llvm.mem*` calls).
pub fn written(p: *const u8, n: usize) {
    store(p as usize, n)
}

#[inline(never)]
fn in_span(a: usize, n: usize) {
    let p = CURRENT.with(Cell::get);
    if p.is_null() {
        return;
    }
    // SAFETY: `begin`'s contract: valid and ours until `end`; this thread only.
    let ctx = unsafe { &mut *p };
    if a < ctx.lo || a >= ctx.hi {
        return;
    }
    let off = a - ctx.lo;
    let len = n.min(ctx.hi - a);
    let first = off & !(ctx.block - 1);
    if first == ctx.last && (off + len - 1) & !(ctx.block - 1) == first {
        return;
    }
    ctx.last = first;
    // SAFETY: the runtime's callback, with the argument it gave for it.
    unsafe { (ctx.record)(ctx.arg, off, len) }
}
