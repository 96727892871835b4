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
//! Only then is the write recorded, once per block in a row (`Ctx::last`): a short write
//! (fewer than 8 blocks) appended to the batch's buffer (`Ctx::buf`), anything else, or
//! anything once the buffer is full, handed to the runtime's callback. The hooks run
//! before the store: what is logged is the block's content at commit, so the order does
//! not matter.

use super::abi::{Ctx, RANGE_BLOCKS};
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
    // Read first: the span rarely grows, and a read-modify-write is a locked instruction
    // on every batch.
    if lo < SPAN_LO.load(Ordering::Relaxed) {
        SPAN_LO.fetch_min(lo, Ordering::Relaxed);
    }
    if hi > SPAN_HI.load(Ordering::Relaxed) {
        SPAN_HI.fetch_max(hi, Ordering::Relaxed);
    }
    CURRENT.with(|c| c.set(ctx));
    fast::claim(ctx);
}

/// Stop capturing on this thread.
pub fn end() {
    fast::release();
    CURRENT.with(|c| c.set(std::ptr::null_mut()));
}

/// The batch this thread captures for, or null.
#[inline(always)]
fn current() -> *mut Ctx {
    fast::current().unwrap_or_else(|| CURRENT.with(Cell::get))
}

/// One capture found without the thread-local lookup. This library is loaded with
/// `dlopen`, so its thread-locals live in dynamic TLS and every `CURRENT` read is a call
/// to `__tls_get_addr`, made for every store into the region (with the per-batch
/// savings below, a Dictionary insert took 0.94× its time before). One thread at a time (the one that claimed it, almost always the
/// only one capturing) is instead recognised by its thread pointer, a register read, and
/// finds its `Ctx` in a global; any other capturing thread goes through `CURRENT`.
///
/// Why the orderings suffice: `THREAD` holds the thread pointer of the owner or 0, and
/// only the owner stores `CTX` or releases `THREAD`. A thread compares `THREAD` with its
/// own pointer, so it can only match a value it stored itself (a live thread's pointer
/// is unique), and then reads the `CTX` it stored after claiming, in its own program
/// order. A claim acquires the release of the previous owner, so that owner's `CTX`
/// stores happen before the new owner's (coherence: the new owner never reads an older
/// one). The owner always releases in `end`, before its thread can exit and its pointer
/// be reused (the runtime's `Capture` guard calls `end` when dropped).
#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
mod fast {
    use super::Ctx;
    use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

    static THREAD: AtomicUsize = AtomicUsize::new(0);
    static CTX: AtomicPtr<Ctx> = AtomicPtr::new(std::ptr::null_mut());

    /// The thread pointer: the address of this thread's control block, never 0 and
    /// unique among live threads (the x86-64 and AArch64 TLS ABIs).
    #[inline(always)]
    fn thread_pointer() -> usize {
        let tp: usize;
        // SAFETY: reads this thread's thread pointer; no memory is written, no flag changed.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags))
        };
        // SAFETY: as above (a system register read).
        #[cfg(target_arch = "aarch64")]
        unsafe {
            std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nomem, nostack, preserves_flags))
        };
        tp
    }

    /// Take the slot for this thread's capture `ctx` if it is free (or already ours: a
    /// nested `begin` replaces the batch, as `CURRENT` does).
    pub(super) fn claim(ctx: *mut Ctx) {
        let me = thread_pointer();
        let ours = THREAD.load(Ordering::Relaxed) == me
            || THREAD.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed).is_ok();
        if ours {
            CTX.store(ctx, Ordering::Relaxed);
        }
    }

    /// Give the slot back if this thread holds it.
    pub(super) fn release() {
        if THREAD.load(Ordering::Relaxed) == thread_pointer() {
            CTX.store(std::ptr::null_mut(), Ordering::Relaxed);
            THREAD.store(0, Ordering::Release);
        }
    }

    /// This thread's `Ctx` if it holds the slot.
    #[inline(always)]
    pub(super) fn current() -> Option<*mut Ctx> {
        (THREAD.load(Ordering::Relaxed) == thread_pointer()).then(|| CTX.load(Ordering::Relaxed))
    }
}

/// Elsewhere every capture goes through `CURRENT`.
#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
mod fast {
    use super::Ctx;
    pub(super) fn claim(_: *mut Ctx) {}
    pub(super) fn release() {}
    #[inline(always)]
    pub(super) fn current() -> Option<*mut Ctx> {
        None
    }
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
    let p = current();
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

/// Writes of fewer blocks than this are appended to the batch's buffer (`Ctx::buf`);
/// longer ones go to the runtime's set, which keeps each as one range.
const APPEND_BLOCKS: usize = RANGE_BLOCKS;

/// Out of line: the hooks' fast path (the span check) stays small where it is inlined.
///
/// In the instrumented library its symbol starts with `__sanitizer_`, which the coverage
/// pass leaves uninstrumented (as it does its own callbacks): otherwise each of this
/// function's own stores (`last`, the appended block, `len`) got a span check and a
/// possible call back into it, and the register saves that call needs (1,302 instructions
/// per Dictionary insert in this function before, its ~23 calls included).
#[inline(never)]
#[cfg_attr(pmkv_mgapp, export_name = "__sanitizer_pmkv_in_span")]
fn in_span(a: usize, n: usize) {
    let p = current();
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
    let last = (off + len - 1) & !(ctx.block - 1);
    if first == ctx.last && last == first {
        return;
    }
    ctx.last = last;
    // A write of fewer than `APPEND_BLOCKS` blocks is appended as one entry (its first
    // block, its block count less one in the low bits; the block size is a power of two,
    // so a shift counts them) while the buffer has room. One entry per write rather than
    // per block: a node's shift (a `memmove` of up to 7 blocks) is one entry to sort.
    if last - first < APPEND_BLOCKS * ctx.block && ctx.len < ctx.cap {
        let extra = ((last - first) >> ctx.block.trailing_zeros()) as u64;
        // SAFETY: slot `len` is inside `cap` (checked above); `buf` holds `cap` slots for
        // the batch (`begin`'s contract: the `Ctx` is the runtime's, valid until `end`).
        unsafe { ctx.buf.add(ctx.len).write(first as u64 | extra) };
        ctx.len += 1;
        return;
    }
    // SAFETY: the runtime's callback, with the argument it gave for it.
    unsafe { (ctx.record)(ctx.arg, off, len) }
}
