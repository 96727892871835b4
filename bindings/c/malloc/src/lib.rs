//! libpmkv_malloc: the opt-in half of split allocation from C and C++ (SPEC M7). It
//! defines `malloc`, `calloc`, `realloc` and `free` (and the aligned and other entry points
//! below), so that a C or C++ application's
//! allocations made inside a read-write request of a Mangosteen runtime opened with
//! `split_heap` come from the persistent heap in its durable region, and all others from
//! the C library — without changing the application's code. C++'s `new` and `delete` call
//! `malloc` and `free` in libstdc++, so they follow.
//!
//! **Opt-in.** libpmkv itself defines no allocator function, so linking it never replaces
//! a program's `malloc`. A program that wants `split_heap` links this library
//! (`-lpmkv_malloc`, `pkg-config pmkv-malloc`) or runs with it in `LD_PRELOAD`: the
//! dynamic linker searches the program, then its libraries in order, and the C library
//! comes last; glibc supports replacing its allocator this way as long as `malloc`,
//! `free`, `calloc` and `realloc` are all replaced. A copy loaded later with `dlopen` does
//! not interpose. Until libpmkv opens a `split_heap` runtime, every call is forwarded.
//!
//! **The hand-over.** libpmkv (`bindings/c/src/split.rs`), at such an open, finds
//! [`pmkv_malloc_attach`] with `dlsym`, checks that the program's `malloc` is this
//! library's (else it refuses `split_heap`, naming the fix) and passes its [`Hooks`]:
//! from then on each call first asks libpmkv whether the thread is inside a request. This
//! library has no link dependency on libpmkv (it can be preloaded into any program), and
//! the split state stays in one place, libpmkv. A shared library only: `dlsym` does not
//! see the symbols of an archive linked into a program.
//!
//! **Forwarding.** Outside a request (the common case: an atomic load, and once attached
//! one call into libpmkv that reads a thread-local) each call goes to the allocator these
//! functions stand in front of, resolved on the first call:
//! - when they are the program's `malloc` (the normal case), the next definition, the C
//!   library's (`dlsym(RTLD_NEXT, ...)`);
//! - when another allocator comes first (AddressSanitizer's, an `LD_PRELOAD`ed one, or a
//!   copy loaded with `dlopen`), the program's own (`dlsym(RTLD_DEFAULT, ...)`), so that a
//!   block this library's own code (Rust's `System` allocator, whose `malloc` calls the
//!   compiler may bind to these definitions) obtains and one freed through the program's
//!   `free` end in the same allocator. A re-entrant call (that allocator calling the
//!   definition after it, which is this one) goes to the C library instead, so the two can
//!   never call each other in a loop.
//!
//! `dlsym` may itself allocate; a thread that is resolving is served from a small static
//! arena, whose blocks `free` ignores (as it ignores any free while resolving: there is
//! nothing to forward it to yet).
//!
//! **Inside a request** (libpmkv enters `SplitAlloc::scope` around `process_request` of a
//! read-write request): `malloc`/`calloc` take 16-byte aligned blocks from the heap (NULL
//! with `ENOMEM` when it is full); `free` of a heap block returns it to the heap;
//! `realloc` moves between them as needed. A free of a heap block *outside* a request is
//! not done (it would change persistent state no batch captures) and is counted as a stray
//! free, as Rust's `SplitAlloc` does. Every other allocation entry point of the C library
//! follows the same split: `posix_memalign`, `aligned_alloc`, `memalign`, `valloc` and
//! `pvalloc` (aligned blocks of the heap, see `Heap::alloc`), `reallocarray`, and
//! `malloc_usable_size`; C++'s `new` and `delete` in all their forms (aligned, nothrow,
//! sized) reach these in libc++ and libstdc++, as the C library's own allocations
//! (`strdup`, ...) do. A program that must keep a block out of the region inside a request
//! (a response it reuses later) allocates it inside `pmkv_mg_transient_begin` /
//! `pmkv_mg_transient_end` (libpmkv's hook then answers "outside").

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering};

/// The version of [`Hooks`] this library understands (libpmkv's `split.rs` sends it).
const HOOKS_VERSION: u32 = 3;

/// What libpmkv hands over (the layout of `bindings/c/src/split.rs`'s `Hooks`).
#[repr(C)]
pub struct Hooks {
    version: u32,
    /// Inside a request: `*out` = a block of the request's heap aligned to `align` (NULL
    /// when full), and 1.
    alloc: unsafe extern "C" fn(n: usize, align: usize, out: *mut *mut c_void) -> c_int,
    /// 1 if libpmkv dealt with the block (a heap block freed, or a stray free counted).
    free: unsafe extern "C" fn(p: *mut c_void) -> c_int,
    /// 1 and the usable size for a block of the current request's heap; -1 for a
    /// persistent block outside its request; 0 for anything else.
    block: unsafe extern "C" fn(p: *const c_void, size: *mut usize) -> c_int,
    /// Bytes written here into a block of the current request's heap (`calloc`'s
    /// zeroing, `realloc`'s copy), which compiler capture's instrumentation does not see:
    /// reported to the capture (nothing outside a compiler-captured batch).
    wrote: unsafe extern "C" fn(p: *mut c_void, n: usize),
}

/// libpmkv's hooks, once a `split_heap` runtime was opened (null: forward everything).
static HOOKS: AtomicPtr<Hooks> = AtomicPtr::new(std::ptr::null_mut());

/// Called by libpmkv when it opens a `split_heap` runtime: from then on, calls made inside
/// its read-write requests are served from their heaps. 0 on success, -1 if `hooks` is
/// NULL or of another version (a libpmkv of another release).
///
/// # Safety
///
/// `hooks` is NULL or points to a `Hooks` that stays valid for the life of the process.
#[no_mangle]
pub unsafe extern "C" fn pmkv_malloc_attach(hooks: *const Hooks) -> c_int {
    // SAFETY: NULL or valid (the caller's contract); only the version is read here.
    match unsafe { hooks.as_ref() } {
        Some(h) if h.version == HOOKS_VERSION => {
            HOOKS.store(hooks as *mut Hooks, Ordering::Release);
            0
        }
        _ => -1,
    }
}

fn hooks() -> Option<&'static Hooks> {
    // SAFETY: null or set by `pmkv_malloc_attach`, valid for the process's life.
    unsafe { HOOKS.load(Ordering::Acquire).as_ref() }
}

/// Report `n` bytes written here at `p` to libpmkv's capture (see [`Hooks`]).
fn wrote(p: *mut c_void, n: usize) {
    if let Some(h) = hooks() {
        // SAFETY: libpmkv's hook, which only records the range.
        unsafe { (h.wrote)(p, n) };
    }
}

/// Inside a request: `Some(block of its heap aligned to `align`, or NULL with ENOMEM)`.
fn heap_alloc(n: usize, align: usize) -> Option<*mut c_void> {
    let h = hooks()?;
    let mut p = std::ptr::null_mut();
    // SAFETY: libpmkv's hook, given a local to write.
    if unsafe { (h.alloc)(n, align, &mut p) } == 0 {
        return None;
    }
    if p.is_null() {
        set_enomem();
    }
    Some(p)
}

/// Whether libpmkv took `p` (a persistent block).
fn heap_free(p: *mut c_void) -> bool {
    // SAFETY: libpmkv's hook; it only compares `p` with its regions' bounds before use.
    hooks().is_some_and(|h| unsafe { (h.free)(p) } != 0)
}

/// For `realloc`: `Ok(Some(size))` for a block of the current request's heap, `Ok(None)`
/// for anything not persistent, `Err(())` for a persistent block outside its request.
fn heap_block(p: *const c_void) -> Result<Option<usize>, ()> {
    let Some(h) = hooks() else { return Ok(None) };
    let mut n = 0;
    // SAFETY: libpmkv's hook, given a local to write.
    match unsafe { (h.block)(p, &mut n) } {
        1 => Ok(Some(n)),
        0 => Ok(None),
        _ => Err(()),
    }
}

type MallocFn = unsafe extern "C" fn(usize) -> *mut c_void;
type CallocFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type ReallocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);

/// The C library's functions (`RTLD_NEXT`), resolved once (0: not yet).
static NEXT_MALLOC: AtomicUsize = AtomicUsize::new(0);
static NEXT_CALLOC: AtomicUsize = AtomicUsize::new(0);
static NEXT_REALLOC: AtomicUsize = AtomicUsize::new(0);
static NEXT_FREE: AtomicUsize = AtomicUsize::new(0);
/// The program's functions (`RTLD_DEFAULT`) when they are not these, resolved once (0:
/// not yet, or they are these).
static PROGRAM_MALLOC: AtomicUsize = AtomicUsize::new(0);
static PROGRAM_CALLOC: AtomicUsize = AtomicUsize::new(0);
static PROGRAM_REALLOC: AtomicUsize = AtomicUsize::new(0);
static PROGRAM_FREE: AtomicUsize = AtomicUsize::new(0);

/// Whether the program's `malloc` is the one defined here: unknown, yes, no.
const UNKNOWN: u8 = 0;
const OURS: u8 = 1;
const OTHER: u8 = 2;
static PROGRAM_IS: AtomicU8 = AtomicU8::new(UNKNOWN);

thread_local! {
    /// This thread is inside `dlsym`: allocations come from [`ARENA`].
    static RESOLVING: Cell<bool> = const { Cell::new(false) };
    /// This thread is inside the program's allocator, called from here: a call that
    /// arrives here meanwhile goes to the C library (see the module doc).
    static FORWARDING: Cell<bool> = const { Cell::new(false) };
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

/// Whether the function at `f` lies in the object (libpmkv.so, or the program that
/// linked libpmkv.a) that holds this code.
fn defined_here(f: usize) -> bool {
    // SAFETY: `Dl_info` is plain data (pointers and integers) for which all-zero is a
    // valid value; `dladdr` only writes it.
    let mut theirs: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: all-zero is a valid `Dl_info` (plain pointers and integers).
    let mut ours: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `dladdr` takes any address and fills the `Dl_info` it is given, which
    // outlives the call; the arena is a static of this object, so names it.
    let (a, b) = unsafe {
        (libc::dladdr(f as *const c_void, &mut theirs), libc::dladdr(ARENA.0.get() as *const c_void, &mut ours))
    };
    a != 0 && b != 0 && theirs.dli_fbase == ours.dli_fbase
}

/// Whether the program's `malloc` is the one defined here (see the module doc), found
/// once.
fn program_is_ours() -> bool {
    match PROGRAM_IS.load(Ordering::Acquire) {
        OURS => return true,
        OTHER => return false,
        _ => {}
    }
    RESOLVING.with(|r| r.set(true));
    // SAFETY: a NUL-terminated name looked up in the program's global scope.
    let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"malloc".as_ptr()) } as usize;
    let ours = f == 0 || defined_here(f);
    RESOLVING.with(|r| r.set(false));
    PROGRAM_IS.store(if ours { OURS } else { OTHER }, Ordering::Release);
    ours
}

/// The program's definition of `name` (another allocator's), resolved once; 0 when
/// calls must go to the C library instead: these functions are the program's, or this
/// thread is already inside the program's allocator.
fn program(slot: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    if program_is_ours() || FORWARDING.with(Cell::get) {
        return 0;
    }
    let f = slot.load(Ordering::Acquire);
    if f != 0 {
        return f;
    }
    RESOLVING.with(|r| r.set(true));
    // SAFETY: a NUL-terminated name looked up in the program's global scope.
    let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) } as usize;
    RESOLVING.with(|r| r.set(false));
    // Defined here after all (not the case `program_is_ours` saw): the C library's.
    let f = if f == 0 || defined_here(f) { 0 } else { f };
    slot.store(f, Ordering::Release);
    f
}

/// Run `f`, a call into the program's allocator, marked as such for this thread.
fn forwarding<R>(f: impl FnOnce() -> R) -> R {
    FORWARDING.with(|c| c.set(true));
    let r = f();
    FORWARDING.with(|c| c.set(false));
    r
}

fn set_enomem() {
    // SAFETY: `__errno_location` returns this thread's errno, valid for writes for the
    // thread's life; no other thread touches it.
    unsafe { *libc::__errno_location() = libc::ENOMEM };
}

/// `malloc`: see the module doc.
///
/// # Safety
///
/// As C's `malloc`.
#[no_mangle]
pub unsafe extern "C" fn malloc(n: usize) -> *mut c_void {
    if resolving() {
        return arena_alloc(n);
    }
    if let Some(p) = heap_alloc(n, 16) {
        return p;
    }
    let p = program(&PROGRAM_MALLOC, c"malloc");
    if p != 0 {
        // SAFETY: the program's malloc (another allocator's), resolved by name.
        return forwarding(|| unsafe { std::mem::transmute::<usize, MallocFn>(p)(n) });
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
    let Some(total) = n.checked_mul(size) else {
        set_enomem();
        return std::ptr::null_mut();
    };
    if let Some(p) = heap_alloc(total, 16) {
        if !p.is_null() {
            // SAFETY: a fresh block of at least `total` bytes.
            unsafe { std::ptr::write_bytes(p as *mut u8, 0, total) };
            // This code is not instrumented: tell compiler capture (a no-op otherwise).
            wrote(p, total);
        }
        return p;
    }
    let p = program(&PROGRAM_CALLOC, c"calloc");
    if p != 0 {
        // SAFETY: the program's calloc (another allocator's), resolved by name.
        return forwarding(|| unsafe { std::mem::transmute::<usize, CallocFn>(p)(n, size) });
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
    // Nothing to forward a free to while resolving (and a free there must not start a
    // second resolution): the block, if not the arena's, is leaked.
    if p.is_null() || in_arena(p) || resolving() {
        return;
    }
    if heap_free(p) {
        return;
    }
    let f = program(&PROGRAM_FREE, c"free");
    if f != 0 {
        // SAFETY: a block of the program's allocator (another one's: everything this
        // object hands out outside requests came from it), given back to it.
        return forwarding(|| unsafe { std::mem::transmute::<usize, FreeFn>(f)(p) });
    }
    // SAFETY: a block of the C library's allocator (neither the arena nor a region).
    unsafe { std::mem::transmute::<usize, FreeFn>(next(&NEXT_FREE, c"free"))(p) }
}

/// `realloc` of a block of the allocator these functions forward to, forwarded to it.
///
/// # Safety
///
/// `p` is a live block of that allocator (neither the arena's nor a persistent heap's).
unsafe fn forward_realloc(p: *mut c_void, n: usize) -> *mut c_void {
    let f = program(&PROGRAM_REALLOC, c"realloc");
    if f != 0 {
        // SAFETY: the program's realloc on one of its blocks (the caller's contract).
        return forwarding(|| unsafe { std::mem::transmute::<usize, ReallocFn>(f)(p, n) });
    }
    // SAFETY: the C library's realloc on one of its blocks (the caller's contract).
    unsafe { std::mem::transmute::<usize, ReallocFn>(next(&NEXT_REALLOC, c"realloc"))(p, n) }
}

/// `realloc`: see the module doc.
///
/// # Safety
///
/// As C's `realloc`.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, n: usize) -> *mut c_void {
    if p.is_null() {
        // SAFETY: `realloc(NULL, n)` is `malloc(n)`, which has no precondition.
        return unsafe { malloc(n) };
    }
    let old = if in_arena(p) {
        // Arena blocks carry no size: at most the rest of the arena.
        ARENA_SIZE - (p as usize - ARENA.0.get() as usize)
    } else {
        match heap_block(p) {
            Ok(Some(old)) => old,
            Err(()) => {
                // A persistent block outside its request: it may not change.
                set_enomem();
                return std::ptr::null_mut();
            }
            // A C library block (inside a request too: it stays in the C library's heap,
            // it was never persistent), grown there.
            // SAFETY: a block of the allocator this forwards to (the caller's contract: a
            // live block that is neither the arena's nor a persistent one).
            Ok(None) => return unsafe { forward_realloc(p, n) },
        }
    };
    if n == 0 {
        // SAFETY: `p` is a live block (the caller's contract) that is freed here once and
        // not used again: `realloc(p, 0)` frees it and returns NULL.
        unsafe { free(p) };
        return std::ptr::null_mut();
    }
    // SAFETY: `malloc` has no precondition; it routes `n` bytes to the request's heap or
    // the forwarded allocator as any other call.
    let q = unsafe { malloc(n) };
    if !q.is_null() {
        // SAFETY: both blocks hold at least `old.min(n)` bytes; they are distinct.
        unsafe { std::ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, old.min(n)) };
        // Not instrumented either (see `calloc`).
        wrote(q, old.min(n));
        // SAFETY: the old block, given back once.
        unsafe { free(p) };
    }
    q
}

/// The allocator these functions stand in front of: `name`'s definition in the program's
/// other allocator (`Ok`, called through [`forwarding`]) or the C library's (`Err`).
fn forward_to(program_slot: &AtomicUsize, next_slot: &AtomicUsize, name: &std::ffi::CStr) -> Result<usize, usize> {
    match program(program_slot, name) {
        0 => Err(next(next_slot, name)),
        f => Ok(f),
    }
}

static NEXT_MEMALIGN: AtomicUsize = AtomicUsize::new(0);
static PROGRAM_MEMALIGN: AtomicUsize = AtomicUsize::new(0);
static NEXT_USABLE: AtomicUsize = AtomicUsize::new(0);
static PROGRAM_USABLE: AtomicUsize = AtomicUsize::new(0);

/// `memalign(align, n)` of the allocator forwarded to (every aligned entry point below
/// comes down to it outside a request; a block of it is freed with its `free`).
fn forward_memalign(align: usize, n: usize) -> *mut c_void {
    type MemalignFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
    match forward_to(&PROGRAM_MEMALIGN, &NEXT_MEMALIGN, c"memalign") {
        // SAFETY: the program's memalign (another allocator's), resolved by name.
        Ok(f) => forwarding(|| unsafe { std::mem::transmute::<usize, MemalignFn>(f)(align, n) }),
        // SAFETY: the C library's memalign, resolved by name.
        Err(f) => unsafe { std::mem::transmute::<usize, MemalignFn>(f)(align, n) },
    }
}

/// A block of `n` bytes aligned to `align` (a power of two): from the request's heap
/// inside a request, else from the allocator forwarded to; NULL with `ENOMEM` if none.
fn aligned(align: usize, n: usize) -> *mut c_void {
    if resolving() {
        // The arena's blocks are 16-aligned: take room to align inside one.
        let p = arena_alloc(n.saturating_add(align));
        return if p.is_null() { p } else { (p as usize).next_multiple_of(align) as *mut c_void };
    }
    if let Some(p) = heap_alloc(n, align) {
        return p;
    }
    forward_memalign(align, n)
}

fn page() -> usize {
    // SAFETY: `sysconf` has no precondition.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(16)
}

/// `posix_memalign`: see the module doc.
///
/// # Safety
///
/// As C's `posix_memalign`.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, n: usize) -> c_int {
    if !align.is_power_of_two() || !align.is_multiple_of(std::mem::size_of::<*mut c_void>()) {
        return libc::EINVAL;
    }
    let p = aligned(align, n);
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: `out` is writable (the caller's contract).
    unsafe { *out = p };
    0
}

/// `aligned_alloc`: see the module doc.
///
/// # Safety
///
/// As C's `aligned_alloc`.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, n: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return std::ptr::null_mut();
    }
    aligned(align, n)
}

/// `memalign`: see the module doc (an alignment that is no power of two is rounded up to
/// one, as the C library does).
///
/// # Safety
///
/// As C's `memalign`.
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, n: usize) -> *mut c_void {
    match align.max(1).checked_next_power_of_two() {
        Some(a) => aligned(a, n),
        None => {
            set_enomem();
            std::ptr::null_mut()
        }
    }
}

/// `valloc`: a page-aligned block (see the module doc).
///
/// # Safety
///
/// As C's `valloc`.
#[no_mangle]
pub unsafe extern "C" fn valloc(n: usize) -> *mut c_void {
    aligned(page(), n)
}

/// `pvalloc`: a page-aligned block of whole pages (see the module doc).
///
/// # Safety
///
/// As C's `pvalloc`.
#[no_mangle]
pub unsafe extern "C" fn pvalloc(n: usize) -> *mut c_void {
    let pg = page();
    match n.max(1).checked_next_multiple_of(pg) {
        Some(n) => aligned(pg, n),
        None => {
            set_enomem();
            std::ptr::null_mut()
        }
    }
}

/// `reallocarray`: `realloc` of `n * size` bytes, NULL with `ENOMEM` on overflow.
///
/// # Safety
///
/// As C's `reallocarray`.
#[no_mangle]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: the caller's contract is `realloc`'s.
        Some(total) => unsafe { realloc(p, total) },
        None => {
            set_enomem();
            std::ptr::null_mut()
        }
    }
}

/// `malloc_usable_size`: a block of the current request's heap answers from the heap; a
/// persistent block outside its request 0 (its heap is not this thread's to read); others
/// the allocator forwarded to.
///
/// # Safety
///
/// As C's `malloc_usable_size`.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    type UsableFn = unsafe extern "C" fn(*mut c_void) -> usize;
    if p.is_null() || in_arena(p) || resolving() {
        return 0;
    }
    match heap_block(p) {
        Ok(Some(n)) => n,
        Err(()) => 0,
        Ok(None) => match forward_to(&PROGRAM_USABLE, &NEXT_USABLE, c"malloc_usable_size") {
            // SAFETY: a block of the program's allocator, asked of it.
            Ok(f) => forwarding(|| unsafe { std::mem::transmute::<usize, UsableFn>(f)(p) }),
            // SAFETY: a block of the C library's allocator, asked of it.
            Err(f) => unsafe { std::mem::transmute::<usize, UsableFn>(f)(p) },
        },
    }
}
