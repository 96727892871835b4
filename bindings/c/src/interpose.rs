//! The C side of split allocation (SPEC M7): `malloc`, `calloc`, `realloc` and `free`,
//! exported by libpmkv, so that a C or C++ application's allocations made inside a
//! read-write request of a runtime opened with `split_heap` come from the persistent heap
//! in its durable region, and all others from the C library — without changing the
//! application's code. C++'s `new` and `delete` call `malloc` and `free` in libstdc++, so
//! they follow.
//!
//! **How the symbols take effect.** A program linked with `-lpmkv` (shared or static), or
//! run with libpmkv in `LD_PRELOAD`, resolves `malloc` to these functions (the dynamic
//! linker searches the program, then its libraries in order, and the C library comes
//! last); glibc supports replacing its allocator this way as long as `malloc`, `free`,
//! `calloc` and `realloc` are all replaced. A libpmkv loaded later with `dlopen` does not
//! interpose: `pmkv_mg_open` checks that these functions really receive the program's
//! calls and refuses `split_heap` otherwise (see [`active`]).
//!
//! **Forwarding.** Outside a request (the common case: one thread-local read) each call
//! goes to the next definition, the C library's, found with `dlsym(RTLD_NEXT, ...)` on the
//! first call. `dlsym` may itself allocate; a thread that is resolving is served from a
//! small static arena, whose blocks `free` ignores.
//!
//! **Inside a request** ([`pmkv_mangosteen::SplitAlloc::scope`], entered by the C API
//! around `process_request` of a read-write request): `malloc`/`calloc` take 16-byte
//! aligned blocks from the heap (NULL with `ENOMEM` when it is full); `free` of a heap
//! block returns it to the heap; `realloc` moves between them as needed. A free of a heap
//! block *outside* a request is not done (it would change persistent state no batch
//! captures) and is counted as a stray free, as Rust's `SplitAlloc` does. Aligned
//! allocations (`posix_memalign`, `aligned_alloc`, C++'s aligned `new`) are not
//! redirected: they stay in the C library's heap, transient, even inside a request.

use pmkv_mangosteen::SplitAlloc;
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

type MallocFn = unsafe extern "C" fn(usize) -> *mut c_void;
type CallocFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type ReallocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);

/// The C library's functions, resolved once (0: not yet).
static NEXT_MALLOC: AtomicUsize = AtomicUsize::new(0);
static NEXT_CALLOC: AtomicUsize = AtomicUsize::new(0);
static NEXT_REALLOC: AtomicUsize = AtomicUsize::new(0);
static NEXT_FREE: AtomicUsize = AtomicUsize::new(0);
/// Set by the first call that reaches these functions (see [`active`]).
static CALLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This thread is inside `dlsym`: allocations come from [`ARENA`].
    static RESOLVING: Cell<bool> = const { Cell::new(false) };
}

/// The bootstrap arena for allocations made while `dlsym` resolves (a few, small).
const ARENA_SIZE: usize = 64 << 10;
#[repr(C, align(16))]
struct Arena(std::cell::UnsafeCell<[u8; ARENA_SIZE]>);
// SAFETY: disjoint pieces are handed out by an atomic bump pointer; never freed.
unsafe impl Sync for Arena {}
static ARENA: Arena = Arena(std::cell::UnsafeCell::new([0; ARENA_SIZE]));
static ARENA_USED: AtomicUsize = AtomicUsize::new(0);

fn arena_alloc(n: usize) -> *mut c_void {
    let n = n.max(1).next_multiple_of(16);
    let at = ARENA_USED.fetch_add(n, Ordering::Relaxed);
    if at.checked_add(n).is_none_or(|e| e > ARENA_SIZE) {
        return std::ptr::null_mut();
    }
    // SAFETY: `[at, at + n)` lies in the arena and was handed to no one else.
    unsafe { (ARENA.0.get() as *mut u8).add(at) as *mut c_void }
}

fn in_arena(p: *const c_void) -> bool {
    let b = ARENA.0.get() as usize;
    (b..b + ARENA_SIZE).contains(&(p as usize))
}

/// The C library's definition of `name` (the next one after libpmkv), resolved once.
fn next(slot: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    let f = slot.load(Ordering::Acquire);
    if f != 0 {
        return f;
    }
    RESOLVING.with(|r| r.set(true));
    // SAFETY: `name` is NUL-terminated; RTLD_NEXT asks for the definition after this
    // object's, which exists for the C library's allocator functions.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    RESOLVING.with(|r| r.set(false));
    if f == 0 {
        // No C library allocator to forward to: nothing sane can go on.
        std::process::abort();
    }
    slot.store(f, Ordering::Release);
    f
}

fn resolving() -> bool {
    RESOLVING.with(Cell::get)
}

fn set_enomem() {
    // SAFETY: errno is this thread's.
    unsafe { *libc::__errno_location() = libc::ENOMEM };
}

/// Whether the program's `malloc` calls reach these functions: a call through the
/// program's `malloc` symbol must arrive here.
pub(crate) fn active() -> bool {
    // SAFETY: the program's malloc and free, called as C would.
    unsafe { libc::free(libc::malloc(16)) };
    CALLED.load(Ordering::Relaxed)
}

/// A block of `n` bytes from the heap of the current request.
fn heap_alloc(h: &pmkv_mangosteen::Heap, n: usize) -> *mut c_void {
    let p = h.alloc(n.max(1), 16) as *mut c_void;
    if p.is_null() {
        set_enomem();
    }
    p
}

/// `malloc`: see the module doc.
///
/// # Safety
///
/// As C's `malloc`.
#[no_mangle]
pub unsafe extern "C" fn malloc(n: usize) -> *mut c_void {
    if !CALLED.load(Ordering::Relaxed) {
        CALLED.store(true, Ordering::Relaxed);
    }
    if resolving() {
        return arena_alloc(n);
    }
    if let Some(h) = SplitAlloc::current() {
        return heap_alloc(&h, n);
    }
    // SAFETY: the C library's malloc, resolved by name.
    unsafe { std::mem::transmute::<usize, MallocFn>(next(&NEXT_MALLOC, c"malloc"))(n) }
}

/// `calloc`: see the module doc.
///
/// # Safety
///
/// As C's `calloc`.
#[no_mangle]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    if resolving() {
        // The arena is zeroed and never reused.
        return n.checked_mul(size).map_or(std::ptr::null_mut(), arena_alloc);
    }
    if let Some(h) = SplitAlloc::current() {
        let Some(total) = n.checked_mul(size) else {
            set_enomem();
            return std::ptr::null_mut();
        };
        let p = heap_alloc(&h, total);
        if !p.is_null() {
            // SAFETY: a fresh block of at least `total` bytes.
            unsafe { std::ptr::write_bytes(p as *mut u8, 0, total) };
        }
        return p;
    }
    // SAFETY: the C library's calloc, resolved by name.
    unsafe { std::mem::transmute::<usize, CallocFn>(next(&NEXT_CALLOC, c"calloc"))(n, size) }
}

/// `free`: see the module doc.
///
/// # Safety
///
/// As C's `free`.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() || in_arena(p) {
        return;
    }
    if let Some(h) = SplitAlloc::current() {
        if h.contains(p as *const u8) {
            h.free(p as *mut u8);
            return;
        }
    }
    if SplitAlloc::in_region(p as *const u8) {
        SplitAlloc::note_stray();
        return;
    }
    // SAFETY: a block of the C library's allocator (neither the arena nor a region).
    unsafe { std::mem::transmute::<usize, FreeFn>(next(&NEXT_FREE, c"free"))(p) }
}

/// `realloc`: see the module doc.
///
/// # Safety
///
/// As C's `realloc`.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, n: usize) -> *mut c_void {
    if p.is_null() {
        // SAFETY: as `malloc`.
        return unsafe { malloc(n) };
    }
    let heap = SplitAlloc::current();
    let from_heap = heap.and_then(|h| h.usable_size(p as *const u8));
    let old = if in_arena(p) {
        // Arena blocks carry no size: at most the rest of the arena.
        Some(ARENA_SIZE - (p as usize - ARENA.0.get() as usize))
    } else if from_heap.is_some() {
        from_heap
    } else if SplitAlloc::in_region(p as *const u8) {
        // A persistent block outside its request: it may not change.
        set_enomem();
        return std::ptr::null_mut();
    } else if heap.is_some() || resolving() {
        None // a C library block moved into the heap (or the arena): size unknown
    } else {
        // SAFETY: a C library block, forwarded.
        return unsafe { std::mem::transmute::<usize, ReallocFn>(next(&NEXT_REALLOC, c"realloc"))(p, n) };
    };
    let Some(old) = old else {
        // A C library block inside a request: it stays in the C library's heap (it was
        // never persistent), grown there.
        // SAFETY: a C library block, forwarded.
        return unsafe { std::mem::transmute::<usize, ReallocFn>(next(&NEXT_REALLOC, c"realloc"))(p, n) };
    };
    if n == 0 {
        // SAFETY: as `free`.
        unsafe { free(p) };
        return std::ptr::null_mut();
    }
    // SAFETY: as `malloc`.
    let q = unsafe { malloc(n) };
    if !q.is_null() {
        // SAFETY: both blocks hold at least `old.min(n)` bytes; they are distinct.
        unsafe { std::ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, old.min(n)) };
        // SAFETY: the old block, given back once.
        unsafe { free(p) };
    }
    q
}
