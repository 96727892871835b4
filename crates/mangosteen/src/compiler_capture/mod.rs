//! Write capture by the compiler (the paper's §3.2 captures writes by instrumenting the
//! application's code; pmkv does it at compile time rather than with DynamoRIO).
//!
//! The application code — the `mangosteen` engine's `BTreeMap` — is compiled by the
//! build script into a shared library with LLVM's store tracing and wrapped `mem*` calls
//! (`instrumented/`: `app.rs` the map, `hooks.rs` the capture runtime, `abi.rs` the C ABI
//! both sides share). The library is embedded in this crate and loaded once per process
//! from memory (`memfd_create` + `dlopen`), so nothing is installed beside the program and
//! no flag of the user's build is involved. While a batch runs, the runtime hands the
//! hooks a [`Ctx`] naming the region and its deduplication set ([`Capture::begin`]); every
//! store into the region then lands in the set, and stores anywhere else (stack, the
//! ordinary heap) return after one compare.

// The ABI is a module of its own at the crate root (the deduplication set reads its
// RANGE_BLOCKS too); `hooks` names it as `super::abi`.
pub(crate) use crate::abi;
/// The capture runtime's own copy, for C and C++ code (`tsan`).
#[path = "../../instrumented/hooks.rs"]
#[allow(dead_code)]
mod hooks;
mod module;
#[cfg(feature = "c-hooks")]
mod tsan;

use module::func;
pub use module::CapturedModule;

use crate::dedup::DedupSet;
use abi::{Bound, Ctx, RecordVisitFn, ValueFn};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The ABI token that code compiled with `pmkv-cc` / `pmkv-c++` registers with
/// (`PMKV_CAPTURE_ABI` in bindings/c/include/pmkv_capture.h): which hooks its
/// instrumentation calls and what they mean. Bumped whenever that changes, so that code
/// built for another release is refused rather than captured wrongly.
pub(crate) const CAPTURE_ABI: u32 = 1;

/// Modules (programs and shared libraries, by load address) holding code that registered
/// itself as compiled with capture (0: a free slot).
static MODULES: [AtomicUsize; 64] = [const { AtomicUsize::new(0) }; 64];
/// The last other ABI a module registered with (0: none), named when code is refused.
static FOREIGN_ABI: AtomicU32 = AtomicU32::new(0);

/// The load address and file name of the module holding `addr`, if any.
fn module_of(addr: usize) -> Option<(usize, String)> {
    // SAFETY: all-zero is a valid `Dl_info` (plain pointers and integers).
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `dladdr` takes any address and only writes the `Dl_info` it is given.
    if addr == 0 || unsafe { libc::dladdr(addr as *const c_void, &mut info) } == 0 || info.dli_fbase.is_null() {
        return None;
    }
    let name = if info.dli_fname.is_null() {
        String::new()
    } else {
        // SAFETY: a NUL-terminated path owned by the dynamic linker while the module is loaded.
        unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned()
    };
    Some((info.dli_fbase as usize, name))
}

/// A translation unit compiled with capture, at load (its constructor, from
/// pmkv_capture.h, passes an object of its own): its module is recorded as instrumented.
/// 0, or -1 if `abi` is another release's, the address is in no module, or 64 modules
/// registered already (its code is then refused at open, with the reason).
#[cfg_attr(not(feature = "c-hooks"), allow(dead_code))]
pub(crate) fn register(abi: u32, code: usize) -> i32 {
    if abi != CAPTURE_ABI {
        FOREIGN_ABI.store(abi, Ordering::Relaxed);
        return -1;
    }
    let Some((base, _)) = module_of(code) else { return -1 };
    for m in &MODULES {
        match m.compare_exchange(0, base, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return 0,
            Err(b) if b == base => return 0,
            Err(_) => {}
        }
    }
    -1
}

/// Whether the code at `addr` lies in a module that registered itself as compiled with
/// capture, or why not (a message naming the module and the fix).
pub(crate) fn registered(addr: usize) -> Result<(), String> {
    let module = module_of(addr);
    if let Some((base, _)) = &module {
        if MODULES.iter().any(|m| m.load(Ordering::Acquire) == *base) {
            return Ok(());
        }
    }
    let name = module
        .map_or_else(|| "no loaded module".to_string(), |(_, n)| if n.is_empty() { "the program".into() } else { n });
    let foreign = match FOREIGN_ABI.load(Ordering::Relaxed) {
        0 => String::new(),
        a => format!(" (code compiled for capture ABI {a} registered, where this libpmkv needs {CAPTURE_ABI}: rebuild it with this release's pmkv-cc)"),
    };
    Err(format!(
        "the writing code at {addr:#x} (process_request, or the function given to pmkv_mg_write), in {name}, was not compiled with pmkv-cc / pmkv-c++{foreign}: its writes to \
         the region would not be captured, would be acknowledged, and would be lost at the next open. Compile every \
         file of the program's writing code with bindings/c/bin/pmkv-cc or pmkv-c++ (CC=pmkv-cc CXX=pmkv-c++), or \
         open with capture = PMKV_MG_CAPTURE_PAGES"
    ))
}

/// See `crate::heap_written`.
#[inline]
pub(crate) fn heap_written(p: *const u8, n: usize) {
    hooks::store(p as usize, n)
}

/// The instrumented library, as the build script made it.
static IMAGE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libpmkv_mgapp.so"));

type PutFn = unsafe extern "C" fn(*mut u8, usize, u64, *const u8, usize, *const u8, usize);
type DeleteFn = unsafe extern "C" fn(*mut u8, usize, u64, *const u8, usize) -> bool;
type GetFn = unsafe extern "C" fn(*mut u8, u64, *const u8, usize, ValueFn, *mut c_void) -> bool;
type ScanFn = unsafe extern "C" fn(*mut u8, u64, &Bound, &Bound, bool, usize, RecordVisitFn, *mut c_void);

/// The library's entry points. Each is `unsafe`: see `instrumented/app.rs` for the
/// contract of each (the region is the caller's for a batch, or not written meanwhile).
pub(crate) struct App {
    /// The loaded library (its capture hooks).
    pub(crate) module: &'static CapturedModule,
    pub(crate) create: unsafe extern "C" fn(*mut u8, usize) -> u64,
    pub(crate) put: PutFn,
    pub(crate) delete: DeleteFn,
    pub(crate) get: GetFn,
    pub(crate) scan: ScanFn,
    pub(crate) len: unsafe extern "C" fn(*mut u8, u64) -> u64,
    pub(crate) ordered: unsafe extern "C" fn(*mut u8, u64) -> bool,
    /// Test support: see `pmkv_mgapp_scribble`.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) scribble: unsafe extern "C" fn(*mut u8, usize, u32, usize),
}

static APP: OnceLock<Result<App, String>> = OnceLock::new();

/// The loaded library (loaded at the first call), or why it could not be.
pub(crate) fn app() -> Result<&'static App, String> {
    APP.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// The engine's map, loaded through the public path any program's module takes.
fn load() -> Result<App, String> {
    let module = CapturedModule::load(IMAGE).map_err(|e| e.to_string())?;
    // SAFETY: (every `func` below) each symbol is the `extern "C"` function of that name
    // in `instrumented/app.rs`, whose signature is the field's (the ABI version, checked
    // at load, is bumped whenever one changes).
    unsafe {
        Ok(App {
            module,
            create: func(module.symbol(c"pmkv_mgapp_create")?),
            put: func(module.symbol(c"pmkv_mgapp_put")?),
            delete: func(module.symbol(c"pmkv_mgapp_delete")?),
            get: func(module.symbol(c"pmkv_mgapp_get")?),
            scan: func(module.symbol(c"pmkv_mgapp_scan")?),
            len: func(module.symbol(c"pmkv_mgapp_len")?),
            ordered: func(module.symbol(c"pmkv_mgapp_ordered")?),
            scribble: func(module.symbol(c"pmkv_mgapp_scribble")?),
        })
    }
}

/// The hooks' callback: a captured write of `len` bytes at region offset `off`.
unsafe extern "C" fn record(arg: *mut c_void, off: usize, len: usize) {
    // SAFETY: `arg` is the `DedupSet` `Capture::begin` was given, alive and not otherwise
    // borrowed until the guard drops (`begin`'s contract).
    let dedup = unsafe { &mut *(arg as *mut DedupSet) };
    // Inside a split-heap request: the set's own growth is the runtime's, not the
    // application's (see `SplitAlloc::outside`). A write into one block that the table
    // takes allocates nothing and skips that thread-local switch (most of the calls).
    if !dedup.try_record(off as u64, len) {
        crate::SplitAlloc::outside(|| dedup.record(off as u64, len));
    }
}

/// Compiler capture active on this thread for one batch; ends when dropped.
pub(crate) struct Capture {
    module: &'static CapturedModule,
    /// Boxed: the hooks hold its address until the guard drops (`None` only then).
    ctx: Option<Box<Ctx>>,
    /// The buffer the hooks append short writes' blocks to (`Ctx::buf`), or null; its length
    /// is set to what they appended when the guard drops.
    blocks: *mut Vec<u64>,
}

impl Capture {
    /// Capture every instrumented write into `region` (this thread's, for the batch) until
    /// the returned guard is dropped: a write of fewer than 8 blocks as one block entry
    /// (`redo_log::entry_span`) appended to `blocks` (emptied first) while its capacity
    /// lasts, duplicates included (the caller deduplicates them when it sorts them), every
    /// other write into `dedup`.
    ///
    /// # Safety
    ///
    /// `dedup` and `blocks` are valid until the guard is dropped, and not borrowed while
    /// this thread runs instrumented code (the hooks make their own short-lived `&mut`
    /// from `dedup` and write `blocks`' spare capacity).
    pub(crate) unsafe fn begin(
        module: &'static CapturedModule,
        region: &mut [u8],
        block: usize,
        mem_store: usize,
        dedup: *mut DedupSet,
        blocks: *mut Vec<u64>,
    ) -> Capture {
        // SAFETY: `record` takes the `DedupSet` it is given; the caller's contract.
        let mut c = unsafe { Capture::begin_with(module, region, block, mem_store, record, dedup as *mut c_void) };
        // SAFETY: the caller's contract: `blocks` is valid and ours until the guard drops.
        let v = unsafe { &mut *blocks };
        v.clear();
        let ctx = c.ctx.as_mut().expect("a live capture has its Ctx");
        (ctx.buf, ctx.len, ctx.cap) = (v.as_mut_ptr(), 0, v.capacity());
        c.blocks = blocks;
        c
    }

    /// Capture every instrumented write into `region` by calling `record(arg, off, len)`,
    /// `block` being the span within which stores that follow one another are reported
    /// once (1: every store but a repeated 1-byte one; the per-write log's choice), and
    /// `mem_store` how `mem*` calls are reported (`abi::Ctx::mem_store`).
    ///
    /// # Safety
    ///
    /// `record` may be called with `arg` from this thread's instrumented code until the
    /// guard is dropped; `arg` must be what it expects for that whole time.
    pub(crate) unsafe fn begin_with(
        module: &'static CapturedModule,
        region: &mut [u8],
        block: usize,
        mem_store: usize,
        record: abi::RecordFn,
        arg: *mut c_void,
    ) -> Capture {
        let lo = region.as_mut_ptr() as usize;
        let fresh = Ctx {
            lo,
            hi: lo + region.len(),
            block,
            last: usize::MAX,
            record,
            arg,
            mem_store,
            buf: std::ptr::null_mut(),
            len: 0,
            cap: 0,
        };
        // The previous batch's box, if this thread has one: a batch allocates nothing.
        let mut ctx = match SPARE.take() {
            Some(mut b) => {
                *b = fresh;
                b
            }
            None => Box::new(fresh),
        };
        // Both copies of the hooks: the engine's library, and this crate's for C code.
        // SAFETY: `ctx` is boxed (its address stable) and lives in the guard, which ends
        // the capture on this thread before dropping it.
        unsafe {
            (module.capture_begin)(&mut *ctx);
            hooks::begin(&mut *ctx);
        }
        Capture { module, ctx: Some(ctx), blocks: std::ptr::null_mut() }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        // SAFETY: ends the capture `begin` started on this thread (a guard is not Send:
        // `Ctx` holds raw pointers), before `ctx` is freed.
        unsafe { (self.module.capture_end)() };
        hooks::end();
        if let (false, Some(ctx)) = (self.blocks.is_null(), &self.ctx) {
            // SAFETY: `begin`'s contract: the buffer is valid and not otherwise borrowed;
            // the hooks initialised its first `ctx.len <= capacity` slots.
            unsafe { (*self.blocks).set_len(ctx.len) };
        }
        // Kept for this thread's next batch (no hook refers to it any more).
        SPARE.set(self.ctx.take());
    }
}

thread_local! {
    /// A `Ctx` box a finished capture left on this thread, for the next one.
    static SPARE: std::cell::Cell<Option<Box<Ctx>>> = const { std::cell::Cell::new(None) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The blocks one scribble of `kind` records, with its region at a 64-aligned offset
    /// inside an ordinary heap buffer (capture works wherever the region is).
    fn captured(kind: u32, off: usize, len: usize) -> Vec<u64> {
        captured_with(kind, off, len, 0)
    }

    /// As `captured`, with `mem_store` (`abi::Ctx::mem_store`); the same blocks whether
    /// short writes are appended to a buffer (room for 64 writes, or for 9, the rest going
    /// to the set) or all go to the set.
    fn captured_with(kind: u32, off: usize, len: usize, mem_store: usize) -> Vec<u64> {
        let app = app().expect("the instrumented library loads");
        let mut buf = vec![0u8; 8192 + 64];
        let skew = buf.as_ptr().align_offset(64);
        let region = &mut buf[skew..skew + 8192];
        let mut all = Vec::new();
        for cap in [0, 9, 64] {
            // SAFETY: the write stays inside the region (off + len + 1 <= 8192 below).
            let got = in_batch(app.module, region, mem_store, cap, |r| unsafe {
                (app.scribble)(r.as_mut_ptr(), off, kind, len)
            });
            all.push(got);
        }
        assert!(all.windows(2).all(|w| w[0] == w[1]), "the buffer changes what is captured: {all:?}");
        all.pop().unwrap()
    }

    /// The blocks a capture of `region` records while `f` runs, from the set and from a
    /// buffer with room for `cap` blocks: sorted, each once.
    fn in_batch(
        module: &'static CapturedModule,
        region: &mut [u8],
        mem_store: usize,
        cap: usize,
        f: impl FnOnce(&mut [u8]),
    ) -> Vec<u64> {
        let mut dedup = DedupSet::new(32, 1024, true);
        let mut appended = Vec::with_capacity(cap);
        // SAFETY: `dedup` and `appended` outlive the guard and are not borrowed while it lives.
        let guard = unsafe { Capture::begin(module, region, 32, mem_store, &mut dedup, &mut appended) };
        f(region);
        drop(guard);
        assert!(appended.len() <= cap);
        let mut got = Vec::new();
        for e in appended {
            let (s, t) = crate::redo_log::entry_span(e, 32);
            got.extend((s..t).step_by(32));
        }
        dedup.drain(|a| got.push(a));
        got.sort_unstable();
        got.dedup();
        got
    }

    fn blocks(off: u64, len: u64) -> Vec<u64> {
        (off / 32..(off + len).div_ceil(32)).map(|b| b * 32).collect()
    }

    /// Every kind of write is captured, block for block; the function's stack and ordinary
    /// heap writes (hundreds of bytes) are not.
    #[test]
    fn stores_and_mem_calls_are_captured_and_nothing_else() {
        assert_eq!(captured(0, 100, 0), blocks(100, 8), "a plain store across two blocks");
        for (kind, name) in [(1, "memcpy"), (2, "memmove"), (3, "memset")] {
            for (off, len) in [(0u64, 1u64), (40, 100), (4000, 3000)] {
                assert_eq!(captured(kind, off as usize, len as usize), blocks(off, len), "{name} of {len} at {off}");
                // Without memcpy capture: the same blocks, from the copy's 8-byte stores.
                let per_store = captured_with(kind, off as usize, len as usize, 8);
                assert_eq!(per_store, blocks(off, len), "{name} of {len} at {off}, store by store");
            }
        }
    }

    /// Outside a batch (no capture begun on this thread) nothing is recorded, even into a
    /// region another thread captures.
    #[test]
    fn other_threads_and_no_batch_record_nothing() {
        let app = app().unwrap();
        let mut region = vec![0u8; 4096];
        let p = region.as_mut_ptr() as usize;
        let got = in_batch(app.module, &mut region, 0, 64, |_| {
            std::thread::spawn(move || {
                // SAFETY: 8 bytes inside the live buffer; the capturing thread is not using it.
                unsafe { (app.scribble)(p as *mut u8, 0, 0, 8) }
            })
            .join()
            .unwrap();
        });
        assert!(got.is_empty());
    }

    /// Threads capturing at the same time each record their own writes only, whichever of
    /// them holds the hooks' fast slot (`hooks::fast`) and whichever takes the
    /// thread-local path; a thread that begins after another ended gets the slot.
    #[test]
    fn concurrent_captures_each_record_their_own_writes() {
        let app = app().unwrap();
        let barrier = std::sync::Barrier::new(4);
        std::thread::scope(|s| {
            for t in 0..4usize {
                let barrier = &barrier;
                s.spawn(move || {
                    for round in 0..50 {
                        let mut region = vec![0u8; 4096];
                        let off = 64 * (t + 4 * (round % 8));
                        let got = in_batch(app.module, &mut region, 0, 8 * (round % 2), |r| {
                            if round == 0 {
                                barrier.wait(); // all four capture at once
                            }
                            // SAFETY: 8 bytes inside this thread's region.
                            unsafe { (app.scribble)(r.as_mut_ptr(), off, 0, 8) };
                        });
                        assert_eq!(got, blocks(off as u64, 8), "thread {t}, round {round}");
                    }
                });
            }
        });
    }
}
