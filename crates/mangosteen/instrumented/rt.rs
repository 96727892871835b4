//! The runtime of a module built with compiler capture (pmkv-mangosteen-build compiles it
//! into every module, beside the hooks): the module's global allocator, the entry points
//! the loader needs (ABI version, capture begin and end), and the macros with which the
//! module declares its durable structure and its writes.
//!
//! A module is a library of its own: its allocations go through [`Split`], which sends
//! them to the region's persistent heap while a write runs on this thread and to the
//! system otherwise. A write that finds the heap full goes on with the system's memory
//! (Rust cannot report an allocation failure as an error on stable) and is marked, so
//! that it is rolled back and reported as full; a panic is caught here (`-Cpanic=unwind`)
//! and reported with its message, and the write rolled back. Nothing unwinds across the
//! C ABI.

#[cfg(not(pmkv_mgapp))]
compile_error!("a capture module is compiled by pmkv-mangosteen-build, which sets the instrumentation flags");

use crate::abi::{self, Ctx, Msg, Root, ABI, WRITE_FULL, WRITE_OK, WRITE_PANICKED};
use crate::heap::{self, Heap};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::AssertUnwindSafe;

thread_local! {
    /// The persistent heap this thread allocates from while it runs a write.
    static HEAP: Cell<Option<Heap>> = const { Cell::new(None) };
    /// Whether the heap refused an allocation during this thread's write.
    static FULL: Cell<bool> = const { Cell::new(false) };
}

/// Allocations made while a write runs come from the region's heap; any other (the
/// standard library's own, a read's) go to the system allocator.
struct Split;

// SAFETY: every path forwards to `System` with the caller's arguments, or hands out a
// payload of the thread's `Heap` (at least `size` bytes, aligned, never handed out
// twice); frees go back to where the block came from.
unsafe impl GlobalAlloc for Split {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if let Some(h) = HEAP.with(Cell::get) {
            let p = h.alloc(l.size(), l.align());
            if !p.is_null() {
                return p;
            }
            // Full: the write goes on, and is rolled back when it ends (`run`).
            FULL.with(|f| f.set(true));
        }
        // SAFETY: the caller's contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        match HEAP.with(Cell::get) {
            Some(h) if h.contains(p) => h.free(p),
            // A region block freed outside a write cannot happen (reads free nothing);
            // leaking it is the safe answer, and `System` must never see it.
            _ if in_regions(p) => {}
            // SAFETY: the caller's contract; `p` came from `System`.
            _ => unsafe { System.dealloc(p, l) },
        }
    }
}

#[global_allocator]
static ALLOC: Split = Split;

/// Whether `p` lies where fixed-address regions are mapped.
fn in_regions(p: *mut u8) -> bool {
    (0x2000_0000_0000..0x5000_0000_0000).contains(&(p as usize))
}

/// Run `f` with the heap of the region at `base` as this thread's allocator.
pub fn with_heap<R>(base: *mut u8, len: usize, f: impl FnOnce(Heap) -> R) -> R {
    // SAFETY: the exported functions' contract: the region is ours for the batch.
    let h = unsafe { Heap::new(base, len) };
    HEAP.with(|c| c.set(Some(h)));
    let r = f(h);
    HEAP.with(|c| c.set(None));
    r
}

/// The marker the loader looks for in the image (`abi::MARK`).
#[used]
#[no_mangle]
pub static PMKV_MGMOD_MARK: [u8; abi::MARK.len()] = abi::MARK;

#[no_mangle]
pub extern "C" fn pmkv_mgmod_abi() -> u32 {
    ABI
}

/// Start capturing this thread's writes into `ctx` (see `hooks::begin`).
///
/// # Safety
///
/// As `hooks::begin`.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mgmod_capture_begin(ctx: *mut Ctx) {
    // SAFETY: the caller's contract.
    unsafe { crate::hooks::begin(ctx) }
}

#[no_mangle]
pub extern "C" fn pmkv_mgmod_capture_end() {
    crate::hooks::end()
}

/// Format the region's heap if it is not, allocate the root `Root<T>` (a `T::default()`)
/// and name it the heap's root; its region offset, or 0 if the heap is full.
///
/// # Safety
///
/// The region at `base` (`len` bytes, 16-aligned) is this batch's.
pub unsafe fn create<T: Default>(base: *mut u8, len: usize) -> u64 {
    FULL.with(|f| f.set(false));
    let off = with_heap(base, len, |h| {
        if !h.is_formatted() {
            h.format();
            // Its header is zeroed with a fixed-size `memset` (see `hooks::written`).
            crate::hooks::written(base, heap::FIRST_BLOCK);
        }
        let p = Box::into_raw(Box::new(Root { tag: abi::type_tag::<T>(abi::FNV_START), value: T::default() }));
        crate::hooks::written(p as *const u8, std::mem::size_of::<Root<T>>());
        let off = p as u64 - base as u64;
        if !FULL.with(Cell::get) {
            h.set_root(off);
        }
        off
    });
    if FULL.with(Cell::get) {
        0
    } else {
        off
    }
}

/// Make the panic hook (the message, and a backtrace if asked for) allocate from the
/// system, not from the region: the standard library keeps what it allocates there
/// (the backtrace's symbol cache, the thread's name) for the process's life, and a
/// region's blocks are rolled back with the write and unmapped with the region, so the
/// next panic, on another region, read freed memory (a crash, found by the tests).
fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let heap = HEAP.with(|c| c.replace(None));
            previous(info);
            HEAP.with(|c| c.set(heap));
        }));
    });
}

/// Run the write `f` on the structure at `root` with the arguments at `args` (moved in),
/// its result written to `out`: `WRITE_OK`, or `WRITE_FULL` / `WRITE_PANICKED` (the
/// panic's message copied to `msg`), after which the caller rolls the write back.
///
/// # Safety
///
/// The region at `base` (`len` bytes) is this batch's; `root` names its `Root<T>`;
/// `args` holds an `A` the caller gives up, `out` room for an `R`, `msg` a valid `Msg`.
pub unsafe fn run<T, A: Copy, R: Copy>(
    base: *mut u8,
    len: usize,
    root: u64,
    args: *const u8,
    out: *mut u8,
    msg: *mut Msg,
    f: fn(&mut T, A) -> R,
) -> u32 {
    quiet_panics();
    // SAFETY: the caller's contract.
    let (a, t) = unsafe { ((args as *const A).read(), &mut (*(base.add(root as usize) as *mut Root<T>)).value) };
    FULL.with(|c| c.set(false));
    let r = with_heap(base, len, |_| std::panic::catch_unwind(AssertUnwindSafe(|| f(t, a))));
    match r {
        Ok(v) if !FULL.with(Cell::get) => {
            // SAFETY: the caller's contract.
            unsafe { (out as *mut R).write(v) };
            WRITE_OK
        }
        Ok(_) => WRITE_FULL,
        Err(p) => {
            let text = match (p.downcast_ref::<&str>(), p.downcast_ref::<String>()) {
                (Some(s), _) => s.as_bytes(),
                (None, Some(s)) => s.as_bytes(),
                _ => b"a write panicked",
            };
            // SAFETY: the caller's contract: `msg` is valid, its buffer `cap` bytes.
            unsafe {
                let m = &mut *msg;
                m.len = text.len().min(m.cap);
                std::ptr::copy_nonoverlapping(text.as_ptr(), m.ptr, m.len);
            }
            // The payload lies in the region, which the rollback restores: never freed.
            std::mem::forget(p);
            WRITE_PANICKED
        }
    }
}

/// Declare the module's durable structure: `capture_root!(Index);` (a type with
/// `Default`). Exports its creation and its type's tag, which the loader compares with
/// the type the program opens.

macro_rules! capture_root {
    ($t:ty) => {
        const _: () = {
            /// # Safety
            ///
            /// As `rt::create`.
            #[export_name = "pmkv_mgmod_create"]
            unsafe extern "C" fn create(base: *mut u8, len: usize) -> u64 {
                // SAFETY: the caller's contract.
                unsafe { $crate::rt::create::<$t>(base, len) }
            }
            #[export_name = "pmkv_mgmod_root_tag"]
            extern "C" fn root_tag() -> u64 {
                $crate::abi::type_tag::<$t>($crate::abi::FNV_START)
            }
        };
    };
}

/// Declare the module's writes, each an ordinary function of the structure and one
/// argument (a tuple for several; `Copy`, as is the result):
/// `capture_write! { fn add(i: &mut Index, (word, doc): (&str, u32)) -> usize { ... } }`.
/// Each is exported as `pmkv_mgop_<name>`, with its signature's tag as
/// `pmkv_mgsig_<name>`, which the loader checks against the types the program names.

macro_rules! capture_write {
    ($(fn $name:ident($t:ident: &mut $T:ty, $a:ident: $A:ty) -> $R:ty $body:block)*) => {
        $(
            const _: () = {
                fn body($t: &mut $T, $a: $A) -> $R $body
                /// # Safety
                ///
                /// As `rt::run`.
                #[export_name = concat!("pmkv_mgop_", stringify!($name))]
                unsafe extern "C" fn op(
                    base: *mut u8,
                    len: usize,
                    root: u64,
                    args: *const u8,
                    out: *mut u8,
                    msg: *mut $crate::abi::Msg,
                ) -> u32 {
                    // SAFETY: the caller's contract.
                    unsafe { $crate::rt::run::<$T, $A, $R>(base, len, root, args, out, msg, body) }
                }
                #[export_name = concat!("pmkv_mgsig_", stringify!($name))]
                extern "C" fn sig() -> u64 {
                    $crate::abi::write_tag::<$T, $A, $R>()
                }
            };
        )*
    };
}
