//! Split allocation (SPEC M7): the application's allocator calls are redirected, without
//! changing its code, to the persistent heap (`crate::heap`) while a read-write request
//! runs, and to the ordinary transient heap otherwise. [`SplitAlloc`]'s doc says how; it
//! is the public face of this module, re-exported at the crate root.

use crate::heap::Heap;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

thread_local! {
    /// The persistent heap this thread allocates from, if inside a scope.
    static CURRENT: Cell<Option<Heap>> = const { Cell::new(None) };
    /// Open transient sections on this thread ([`SplitAlloc::transient`]): while non-zero,
    /// allocations go to the system allocator even inside a scope.
    static TRANSIENT: Cell<u32> = const { Cell::new(0) };
    /// Inside [`SplitAlloc::scope_checked`]: [`ARMED`] or [`OVERFLOWED`]; else 0.
    static CHECKED: Cell<u8> = const { Cell::new(0) };
}

/// [`CHECKED`]: the scope takes a full heap's allocations from the system and reports it.
const ARMED: u8 = 1;
/// [`CHECKED`]: an allocation of the scope found the heap full.
const OVERFLOWED: u8 = 2;

/// A heap allocation of `l` that found the heap full (`p` null): inside a checked scope,
/// a block from the system instead, and the scope told; elsewhere null (Rust aborts).
fn full_or(p: *mut u8, l: Layout, zeroed: bool) -> *mut u8 {
    if !p.is_null() || CHECKED.with(Cell::get) == 0 {
        return p;
    }
    CHECKED.with(|c| c.set(OVERFLOWED));
    // SAFETY: the caller's layout (non-zero size, the `GlobalAlloc` contract), unchanged.
    unsafe {
        if zeroed {
            System.alloc_zeroed(l)
        } else {
            System.alloc(l)
        }
    }
}

/// The heap this thread's allocations come from now: the scope's, unless a transient
/// section is open.
fn alloc_heap() -> Option<Heap> {
    if TRANSIENT.with(Cell::get) != 0 {
        return None;
    }
    CURRENT.with(Cell::get)
}

const SLOTS: usize = 64;
/// Registered regions: start and end addresses, 0 = free slot.
static REGIONS: [(AtomicUsize, AtomicUsize); SLOTS] = [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; SLOTS];
static REGISTERED: AtomicUsize = AtomicUsize::new(0);
static STRAY: AtomicU64 = AtomicU64::new(0);
static SEEN: AtomicBool = AtomicBool::new(false);

/// The global allocator that splits (SPEC M7).
///
/// The final program installs it (`#[global_allocator] static A: SplitAlloc =
/// SplitAlloc;`; a library cannot do it for the program). It forwards to the system
/// allocator unless the calling thread is inside [`SplitAlloc::scope`], which the runtime
/// enters around the application's code on the thread that runs a batch. Frees go to
/// where the block came from: a pointer inside the scope's region goes back to its heap; a
/// pointer inside another registered region ([`SplitAlloc::register`]) outside a scope is
/// *leaked* and counted ([`SplitAlloc::stray_frees`]) — freeing it would change
/// persistent state that no batch captures; everything else goes to the system
/// allocator.
///
/// Inside a scope, an allocation the heap cannot satisfy (full) returns null, which Rust
/// turns into an abort: callers check the room left first (the `mangosteen` engine
/// refuses a put with `Full` before it could run out), or run the request in a checked
/// scope that is rolled back instead ([`crate::Durable`]: `Error::Full`). Alignments above 16 bytes are
/// served inside larger blocks (`Heap::alloc`). What must not persist although it is
/// made inside a scope (a response reused after the request) is allocated inside
/// [`SplitAlloc::transient`].
pub struct SplitAlloc;

fn in_registered(p: usize) -> bool {
    if REGISTERED.load(Ordering::Acquire) == 0 {
        return false;
    }
    REGIONS.iter().any(|(s, e)| {
        let s = s.load(Ordering::Acquire);
        s != 0 && p >= s && p < e.load(Ordering::Acquire)
    })
}

// SAFETY: every path either forwards to `System` with the caller's arguments, or hands
// out a payload of a `Heap` (at least `size` bytes, 16-byte aligned, checked `align <=
// 16`) that no one else owns, or returns null; frees of heap payloads go back to the
// heap they came from.
unsafe impl GlobalAlloc for SplitAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if !SEEN.load(Ordering::Relaxed) {
            SEEN.store(true, Ordering::Relaxed);
        }
        match alloc_heap() {
            Some(h) => full_or(h.alloc(l.size(), l.align()), l, false),
            // SAFETY: outside a scope every block is `System`'s: the caller's layout (non-zero
            // size, the `GlobalAlloc` contract) is passed on unchanged.
            None => unsafe { System.alloc(l) },
        }
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        match alloc_heap() {
            Some(h) => {
                let p = h.alloc(l.size(), l.align());
                if p.is_null() {
                    return full_or(p, l, true);
                }
                // SAFETY: a fresh payload of at least `l.size()` bytes.
                unsafe { std::ptr::write_bytes(p, 0, l.size()) };
                p
            }
            // SAFETY: outside a scope every block is `System`'s: the caller's layout (non-zero
            // size, the `GlobalAlloc` contract) is passed on unchanged.
            None => unsafe { System.alloc_zeroed(l) },
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if let Some(h) = CURRENT.with(Cell::get) {
            if h.contains(p) {
                h.free(p);
                return;
            }
        }
        if in_registered(p as usize) {
            STRAY.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // SAFETY: not a heap payload, so it came from `System` with this layout.
        unsafe { System.dealloc(p, l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let here = CURRENT.with(Cell::get);
        if here.is_none() && !in_registered(p as usize) {
            // SAFETY: a `System` block, forwarded.
            return unsafe { System.realloc(p, l, new) };
        }
        // SAFETY: `new` is non-zero and, rounded to `l.align()`, fits `isize` (the
        // caller's contract of `realloc`).
        let nl = unsafe { Layout::from_size_align_unchecked(new, l.align()) };
        // SAFETY: `nl` has a non-zero size (`new`, by `realloc`'s contract) and a valid
        // alignment (the old layout's), which is all `alloc` requires.
        let q = unsafe { self.alloc(nl) };
        if !q.is_null() {
            // SAFETY: both blocks hold at least the smaller size; they are distinct.
            unsafe { std::ptr::copy_nonoverlapping(p, q, l.size().min(new)) };
            // SAFETY: the old block, given back once.
            unsafe { self.dealloc(p, l) };
        }
        q
    }
}

/// A registered region (see [`SplitAlloc::register`]); unregisters on drop.
pub struct Registration(usize);

impl Drop for Registration {
    fn drop(&mut self) {
        REGIONS[self.0].0.store(0, Ordering::Release);
        REGIONS[self.0].1.store(0, Ordering::Release);
        REGISTERED.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The split's controls: what the runtime, the engine and the C API's `malloc`
/// interposer call around a request (associated functions, so that the crate root
/// exports one name for the split allocator).
impl SplitAlloc {
    /// Run `f` with this thread's allocations coming from `heap` (and frees of its blocks
    /// going back to it); the previous setting is restored afterwards, also on a panic.
    pub fn scope<R>(heap: Heap, f: impl FnOnce() -> R) -> R {
        // A transient section left open by an earlier request must not make this one's
        // allocations transient (they would be lost at the next open).
        let open = TRANSIENT.with(|t| t.replace(0));
        let r = Self::with_current(Some(heap), f);
        TRANSIENT.with(|t| t.set(open));
        r
    }

    /// [`SplitAlloc::scope`] for a request that can be rolled back: an allocation the heap
    /// cannot serve (the region is full) is taken from the system allocator instead of
    /// returning null (which Rust turns into an abort), so `f` runs to its end, and the
    /// second value returned says so. The caller must then roll the request back
    /// (`Tx::abort`): the state may hold blocks from outside the region, lost at the next
    /// open. What the rollback takes away of those blocks is leaked, never freed (the
    /// request's result may still own some).
    pub(crate) fn scope_checked<R>(heap: Heap, f: impl FnOnce() -> R) -> (R, bool) {
        struct Restore(u8);
        impl Drop for Restore {
            fn drop(&mut self) {
                CHECKED.with(|c| c.set(self.0));
            }
        }
        let restore = Restore(CHECKED.with(|c| c.replace(ARMED)));
        let r = Self::scope(heap, f);
        let full = CHECKED.with(Cell::get) == OVERFLOWED;
        drop(restore);
        (r, full)
    }

    /// Run `f` with this thread's allocations going to the system allocator even inside a
    /// scope: for what a request makes that must not persist (a response buffer the
    /// application reuses in later requests, reads included, whose writes no batch would
    /// capture). Frees of persistent blocks still go to the scope's heap.
    pub fn transient<R>(f: impl FnOnce() -> R) -> R {
        struct Close;
        impl Drop for Close {
            fn drop(&mut self) {
                SplitAlloc::transient_end();
            }
        }
        Self::transient_begin();
        let _close = Close;
        f()
    }

    /// Open a transient section on this thread (see [`SplitAlloc::transient`]); sections
    /// nest. For callers that cannot pass a closure (the C API).
    pub fn transient_begin() {
        TRANSIENT.with(|t| t.set(t.get().saturating_add(1)));
    }

    /// Close the innermost transient section; `false` if none was open.
    pub fn transient_end() -> bool {
        TRANSIENT.with(|t| match t.get() {
            0 => false,
            n => {
                t.set(n - 1);
                true
            }
        })
    }

    /// Run `f` with this thread's current heap set to `heap`, restoring the previous
    /// setting afterwards, also on a panic.
    fn with_current<R>(heap: Option<Heap>, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<Heap>);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(CURRENT.with(|c| c.replace(heap)));
        f()
    }

    /// Run `f` with this thread's allocations going to the system allocator even inside a
    /// scope: for the runtime's own work done in the middle of a request (recording a
    /// captured write may grow the deduplication set). Without it that growth came from
    /// the persistent heap, whose allocation records a write of its own, which grew the
    /// set again: a C++ request that allocated after a reopen overflowed the stack.
    pub(crate) fn outside<R>(f: impl FnOnce() -> R) -> R {
        Self::with_current(None, f)
    }

    /// Declare `[start, start+len)` a persistent region, so that a free of one of its
    /// blocks outside a scope is leaked rather than handed to the system allocator. `None`
    /// if all 64 slots are taken.
    pub fn register(start: usize, len: usize) -> Option<Registration> {
        for (i, (s, e)) in REGIONS.iter().enumerate() {
            if s.compare_exchange(0, start, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                e.store(start + len, Ordering::Release);
                REGISTERED.fetch_add(1, Ordering::AcqRel);
                return Some(Registration(i));
            }
        }
        None
    }

    /// The persistent heap this thread allocates from: `Some` inside a
    /// [`SplitAlloc::scope`], outside a transient section. For allocators other than
    /// `SplitAlloc` that split the same way (the C API's `malloc` interposer).
    pub fn current() -> Option<Heap> {
        alloc_heap()
    }

    /// The heap of the scope this thread is in, transient section or not: where frees of
    /// its blocks go.
    pub fn scope_heap() -> Option<Heap> {
        CURRENT.with(Cell::get)
    }

    /// Whether `p` lies in a registered persistent region (see [`SplitAlloc::register`]).
    pub fn in_region(p: *const u8) -> bool {
        in_registered(p as usize)
    }

    /// Count a free of a persistent block outside any scope, which is leaked instead (see
    /// [`SplitAlloc`]).
    pub fn note_stray() {
        STRAY.fetch_add(1, Ordering::Relaxed);
    }

    /// Frees of persistent blocks made outside any scope (leaked, see [`SplitAlloc`]).
    pub fn stray_frees() -> u64 {
        STRAY.load(Ordering::Relaxed)
    }

    /// Whether this program's global allocator is `SplitAlloc`.
    pub fn installed() -> bool {
        let b = std::hint::black_box(Box::new(7u64));
        drop(b);
        SEEN.load(Ordering::Relaxed)
    }
}
