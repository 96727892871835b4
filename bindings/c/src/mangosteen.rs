//! Mangosteen's callback API (the paper's Listing 1, SPEC M1) in C: a C application hands
//! its request processing to the runtime, which makes its state durable.
//!
//! The application keeps its state in the durable region and touches it only in
//! `process_request`, which receives the region's base address: a read-only request may
//! read it (in parallel with other reads), a read-write request may read and write it
//! with plain stores. Read-write requests are flat-combined into batches; their writes are
//! found by page protection (no instrumentation, no `record` calls) or, for code built
//! with `pmkv-cc` / `pmkv-c++`, by the compiler's instrumentation (`capture`), and
//! a response is handed back only once its batch is durable. By default the region is a
//! fresh mapping at each open, so the state must hold offsets, not pointers. With
//! `split_heap` (M7) the region is mapped at an address fixed when the pool is created and
//! holds a persistent heap: inside a read-write request `malloc`, `calloc`, `realloc` and
//! `free` (and C++'s `new` and `delete`) allocate from it, when the program opted in by
//! loading libpmkv_malloc (`bindings/c/malloc`; `src/split.rs`), so the application keeps
//! ordinary pointers, and finds its state again through
//! [`pmkv_mg_root`] / [`pmkv_mg_set_root`].
//!
//! Listing 1 maps one to one: `initAppClient` → `init_client`, `destroyAppClient` →
//! `destroy_client`, `deserializeRequest` → `deserialize_request`, `isReadOnly` →
//! `is_read_only`, `processRequest` → `process_request` (plus the region), `getResponse` →
//! `get_response`; `initMangosteen` → [`pmkv_mg_open`], and the two modes are
//! [`pmkv_mg_client_cmd`] (local: the application calls `ClientCmd`) and
//! [`pmkv_mg_serve`] (RPC: length-prefixed frames over TCP, see `pmkv_mangosteen::serve`).

use crate::{bytes, cstr, fail, guard};
use pmkv::ErrorKind;
use pmkv_mangosteen as mg;
use pmkv_mangosteen::{Application, Capture, Frontend, Heap, Instrumented, Mangosteen, Registration, SplitAlloc, Tx};
use pmkv_substrate::{Mode, Pool, PoolError, PoolOptions};
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The application's callbacks (Listing 1). All are required. They are called from the
/// runtime's threads: `process_request` of a read-write request may run on another
/// client's thread (the flat combiner), so it must touch only its client context and the
/// region, and must not call back into the runtime.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmkv_mg_callbacks {
    /// A new client: returns its context, from the `params` given to [`pmkv_mg_open`].
    pub init_client: Option<unsafe extern "C" fn(params: *mut c_void) -> *mut c_void>,
    /// A client went away: release its context.
    pub destroy_client: Option<unsafe extern "C" fn(client: *mut c_void)>,
    /// Parse `len` bytes at `req` into the client's current request; non-zero means
    /// malformed (the caller gets an error and nothing runs).
    pub deserialize_request: Option<unsafe extern "C" fn(client: *mut c_void, req: *const u8, len: usize) -> c_int>,
    /// Whether the current request only reads the state.
    pub is_read_only: Option<unsafe extern "C" fn(client: *mut c_void) -> bool>,
    /// Run the current request on the state at `region` (`region_len` bytes); a
    /// read-only request must not write it.
    pub process_request: Option<unsafe extern "C" fn(client: *mut c_void, region: *mut u8, region_len: usize)>,
    /// The current request's response: `*len` bytes at the returned pointer, owned by the
    /// client and valid until its next request.
    pub get_response: Option<unsafe extern "C" fn(client: *mut c_void, len: *mut usize) -> *const u8>,
}

/// How to open a Mangosteen pool. Zero-initialise it and set what you need: a NULL `mode`
/// means "adr"; `region_size` 0 means 1 MiB (fixed when the pool is created);
/// `initial_size` 0 means 64 KiB (the pool grows on demand to hold the region).
#[repr(C)]
pub struct pmkv_mg_options {
    /// Persistence mode: "adr", "eadr", "msync" or "none", or NULL.
    pub mode: *const c_char,
    /// Create the pool if it does not exist (non-zero).
    pub create: c_int,
    /// Size of a new pool file in bytes (0: 64 KiB); it grows on demand, to at least the
    /// region, its redo ring and its page checks.
    pub initial_size: u64,
    /// Bytes of the durable region of a new pool (0: 1 MiB). The pool also holds a redo
    /// ring of twice the region's size (a record per 32-byte block), so that any batch fits.
    /// At a later open, 0 or at most the existing size opens the region as it is; a larger
    /// size is refused (`PMKV_E_INVALID_ARGUMENT`, naming the existing size): a region
    /// does not grow.
    pub region_size: u64,
    /// Run the backend on a thread of its own (non-zero, the paper's design) instead of
    /// applying each batch right after its commit.
    pub background: c_int,
    /// Split allocation (non-zero; SPEC M7): the region is mapped at an address fixed when
    /// the pool is created and holds a persistent heap, from which `malloc`, `calloc`,
    /// `realloc` and `free` (and C++'s `new` and `delete`) allocate while a read-write
    /// request runs `process_request`; everywhere else they are the C library's. Opt-in:
    /// libpmkv itself leaves `malloc` alone; the program must be linked with
    /// `-lpmkv_malloc` (`pkg-config pmkv-malloc`) or run with `LD_PRELOAD=libpmkv_malloc.so`,
    /// which defines those functions; otherwise the open fails with `PMKV_E_UNSUPPORTED`
    /// and a message naming that fix. Every other entry point (`posix_memalign`,
    /// `aligned_alloc`, `memalign`, `valloc`, `pvalloc`, `reallocarray`, C++'s aligned and
    /// nothrow `new`) follows the same split. Must match how the pool was created.
    pub split_heap: c_int,
    /// How the application's writes are found: 0 (`PMKV_MG_CAPTURE_PAGES`) by page
    /// protection, for code that is not recompiled (a fault and a page copy per page a
    /// batch writes); 1 (`PMKV_MG_CAPTURE_COMPILER`) by the instrumentation of code built
    /// with `pmkv-cc` / `pmkv-c++` (a call per store, no fault). Compiler capture is
    /// refused (`PMKV_E_UNSUPPORTED`) when `process_request` lies in a program or shared
    /// library not built with them (each file they compile registers its module when
    /// loaded): such code's writes would go uncaptured. The check is per module: a file of
    /// the same module compiled with a plain compiler is found only by `verify_capture`.
    pub capture: c_int,
    /// After every batch compare the whole region with the one before and fail the
    /// request (`PMKV_E_INTERNAL`, naming the first missed offset) if any change was not
    /// captured, logging it anyway (non-zero; for tests: a compare of the region per batch).
    pub verify_capture: c_int,
    /// Log every captured write as it is made and fence it before the next (non-zero):
    /// the per-write baseline the Mangosteen paper compares against (Persimmon-like), for
    /// measurements; needs compiler capture. 0: the batch's blocks are deduplicated and
    /// committed under one fence.
    pub per_write_log: c_int,
}

/// `pmkv_mg_options.capture`: page protection.
pub const PMKV_MG_CAPTURE_PAGES: c_int = 0;
/// `pmkv_mg_options.capture`: compiler instrumentation (`pmkv-cc`).
pub const PMKV_MG_CAPTURE_COMPILER: c_int = 1;

/// The application's functions and its parameters (C pointers: the contract of
/// [`pmkv_mg_open`] makes them usable from any thread).
struct CApp {
    cb: pmkv_mg_callbacks,
    params: *mut c_void,
    /// Read-write requests allocate from the region's heap (`split_heap`).
    heap: bool,
}

// SAFETY: the header's contract — the callbacks and `params` may be used from any thread.
unsafe impl Send for CApp {}
// SAFETY: the header's contract lets the callbacks and `params` be called from several
// threads at once; `heap` is a plain bool that is never written after construction.
unsafe impl Sync for CApp {}

/// A client context of the C application.
pub struct CClient(*mut c_void);
// SAFETY: a client context is used by one request at a time (the runtime's contract), on
// whichever thread runs it; the header requires contexts not to be thread-bound.
unsafe impl Send for CClient {}

/// The current request lives in the client context (Listing 1); this names it.
pub struct CRequest(*mut c_void);
// SAFETY: a request lives in its client context, which the runtime hands to one
// request at a time on whichever thread runs it (as for `CClient`); not thread-bound.
unsafe impl Send for CRequest {}
// SAFETY: the runtime only passes a request to one callback at a time.
unsafe impl Sync for CRequest {}

impl CApp {
    fn response(&self, c: *mut c_void) -> Vec<u8> {
        let Some(get) = self.cb.get_response else { return Vec::new() };
        let mut len = 0usize;
        // SAFETY: the application's callback, on its client (the header's contract).
        let p = unsafe { get(c, &mut len) };
        // SAFETY: `len` bytes at `p`, valid until the client's next request.
        unsafe { bytes(p, len) }.map(<[u8]>::to_vec).unwrap_or_default()
    }
}

impl Application for CApp {
    type Client = CClient;
    type Request = CRequest;

    fn init_client(&self) -> CClient {
        // SAFETY: checked non-NULL at open; the application's callback.
        CClient(self.cb.init_client.map_or(std::ptr::null_mut(), |f| unsafe { f(self.params) }))
    }
    fn destroy_client(&self, client: CClient) {
        if let Some(f) = self.cb.destroy_client {
            // SAFETY: a context `init_client` returned, destroyed once.
            unsafe { f(client.0) }
        }
    }
    fn deserialize(&self, client: &mut CClient, b: &[u8]) -> Result<CRequest, String> {
        let f = self.cb.deserialize_request.ok_or("no deserialize_request callback")?;
        // SAFETY: the application's callback with `b.len()` readable bytes.
        match unsafe { f(client.0, b.as_ptr(), b.len()) } {
            0 => Ok(CRequest(client.0)),
            n => Err(format!("the application refused the request (deserialize_request returned {n})")),
        }
    }
    fn is_read_only(&self, req: &CRequest) -> bool {
        // SAFETY: the application's callback on the request's client.
        self.cb.is_read_only.is_some_and(|f| unsafe { f(req.0) })
    }
    fn process_read(&self, state: &[u8], req: &CRequest) -> Vec<u8> {
        if let Some(f) = self.cb.process_request {
            // SAFETY: a read-only request reads the region only (the header's contract).
            unsafe { f(req.0, state.as_ptr() as *mut u8, state.len()) }
        }
        self.response(req.0)
    }
    fn process_write(&self, tx: &mut Tx<'_>, req: &CRequest) -> Vec<u8> {
        self.run_write(tx, req);
        self.response(req.0)
    }
}

/// [`ABORT`]: not inside a read-write request's `process_request`; inside one; inside one
/// that called [`pmkv_mg_abort`].
const OUTSIDE: u8 = 0;
const IN_WRITE: u8 = 1;
const ABORTING: u8 = 2;

thread_local! {
    /// Where this thread is with respect to `process_request` of a read-write request.
    static ABORT: std::cell::Cell<u8> = const { std::cell::Cell::new(OUTSIDE) };
}

impl CApp {
    fn run_write(&self, tx: &mut Tx<'_>, req: &CRequest) {
        if let Some(f) = self.cb.process_request {
            // SAFETY: the application's callback on the request's client, with the region
            // ours for the batch (the header's contract).
            self.write_request(tx, |p, len| unsafe { f(req.0, p, len) });
        }
    }

    /// Run `f` on the region as a read-write request of the batch `tx`: from the region's
    /// heap if `split_heap`, and rolled back if it calls [`pmkv_mg_abort`].
    fn write_request(&self, tx: &mut Tx<'_>, f: impl FnOnce(*mut u8, usize)) {
        ABORT.with(|a| a.set(IN_WRITE));
        let region = tx.region();
        let (p, len) = (region.as_mut_ptr(), region.len());
        if self.heap {
            // SAFETY: the region holds a formatted heap (made at open) and is ours for
            // the batch.
            let h = unsafe { Heap::new(p, len) };
            SplitAlloc::scope(h, || f(p, len));
        } else {
            // The region, ours for the batch; its writes are captured by page protection
            // or the compiler's instrumentation.
            f(p, len)
        }
        if ABORT.with(|a| a.replace(OUTSIDE)) == ABORTING {
            tx.abort();
        }
    }
}

/// Give up the read-write request whose `process_request` is running on this thread:
/// when it returns, every write of its batch is rolled back (the region is as the last
/// committed batch left it, its heap included) and [`pmkv_mg_client_cmd`] returns
/// `PMKV_E_INVALID_ARGUMENT` ("the request aborted ..."). Other requests flat combining
/// put in the same batch are run again, unaffected. For a request that cannot finish and
/// must not leave half its writes: `malloc` returned NULL (the region's heap is full), or
/// in C++ an exception (`pmkv.hpp`'s `pmkv::guard_request` catches it and calls this; an
/// exception that leaves `process_request` ends the process, since libpmkv cannot catch
/// it). Returns 0, or `PMKV_E_INVALID_ARGUMENT` outside a read-write request.
#[no_mangle]
pub extern "C" fn pmkv_mg_abort() -> c_int {
    match ABORT.with(|a| a.get()) {
        OUTSIDE => fail(ErrorKind::InvalidArgument, "pmkv_mg_abort outside process_request of a read-write request"),
        _ => {
            ABORT.with(|a| a.set(ABORTING));
            0
        }
    }
}

/// An open Mangosteen runtime with its application (opaque).
pub struct pmkv_mg {
    fe: Arc<Frontend<CApp>>,
    /// The region, registered with split allocation (`split_heap`): a free of one of its
    /// blocks outside a request is leaked rather than handed to the C library. Dropped
    /// after `fe`, so after the region is unmapped.
    _registration: Option<Registration>,
    /// Opened with compiler capture: [`pmkv_mg_write`] checks that its function was
    /// compiled with it.
    compiler: bool,
    /// Write functions [`pmkv_mg_write`] found compiled with capture (0: free), replaced
    /// round-robin: a program passes few (one per lambda of `pmkv::durable`), so these
    /// spare the module lookup (`dladdr`) on almost every write.
    instrumented_fns: [AtomicUsize; 8],
    /// The slot of `instrumented_fns` the next function found takes.
    next_fn: AtomicUsize,
}

/// A local-mode client (opaque): its context, made by `init_client`.
pub struct pmkv_mg_client {
    c: CClient,
}

fn mg_err(e: mg::Error) -> c_int {
    match e {
        mg::Error::Pool(p) => crate::from_err(p.into()),
        mg::Error::InvalidOption(m) => fail(ErrorKind::InvalidArgument, &m),
        mg::Error::OutOfRegion { .. } => fail(ErrorKind::InvalidArgument, &e.to_string()),
        mg::Error::Corrupt(_) => fail(ErrorKind::Corrupt, &e.to_string()),
        mg::Error::Io(_) => fail(ErrorKind::Io, &e.to_string()),
        mg::Error::Full(_) => fail(ErrorKind::Full, &e.to_string()),
        mg::Error::AddressInUse { .. } => fail(ErrorKind::Locked, &e.to_string()),
        mg::Error::Version { .. } => fail(ErrorKind::Version, &e.to_string()),
        mg::Error::Panicked(_) | mg::Error::CaptureMissed(_) => fail(ErrorKind::Internal, &e.to_string()),
        mg::Error::Capture(_) | mg::Error::NotInstrumented(_) => fail(ErrorKind::Unsupported, &e.to_string()),
        mg::Error::RegionSize { .. } | mg::Error::Aborted | mg::Error::RolledBack => {
            fail(ErrorKind::InvalidArgument, &e.to_string())
        }
    }
}

/// Open (or, with `opts->create`, create) the Mangosteen pool at `path` for the
/// application `cb`, recovering it first (committed batches are replayed); `params` is
/// passed to `init_client`. On success `*out` is the runtime, released by
/// [`pmkv_mg_close`].
///
/// # Safety
///
/// `path` is a NUL-terminated string; `opts` NULL or valid; `cb` points to callbacks that,
/// with `params`, stay valid and callable from any thread until [`pmkv_mg_close`]; `out`
/// is writable.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mg_open(
    path: *const c_char,
    opts: *const pmkv_mg_options,
    cb: *const pmkv_mg_callbacks,
    params: *mut c_void,
    out: *mut *mut pmkv_mg,
) -> c_int {
    guard(|| {
        if out.is_null() || cb.is_null() {
            return fail(ErrorKind::InvalidArgument, "NULL callbacks or out pointer");
        }
        // SAFETY: checked non-NULL; the caller's contract.
        let cb = unsafe { *cb };
        if cb.init_client.is_none()
            || cb.destroy_client.is_none()
            || cb.deserialize_request.is_none()
            || cb.is_read_only.is_none()
            || cb.process_request.is_none()
            || cb.get_response.is_none()
        {
            return fail(ErrorKind::InvalidArgument, "every callback of pmkv_mg_callbacks is required");
        }
        // SAFETY: `path` is NULL (answered below) or NUL-terminated, per this function's
        // `# Safety`; `cstr` reads no further than the NUL.
        let path = match unsafe { cstr(path, "path") } {
            Ok(Some(p)) => p,
            Ok(None) => return fail(ErrorKind::InvalidArgument, "NULL path"),
            Err(e) => return e,
        };
        // SAFETY: NULL or valid (the caller's contract).
        let o = unsafe { opts.as_ref() };
        // SAFETY: `o.mode` is NULL or NUL-terminated (the options' contract in the
        // header); `cstr` checks NULL and reads up to the NUL only.
        let mode = match o.map(|o| unsafe { cstr(o.mode, "mode") }).transpose() {
            Ok(m) => m.flatten().unwrap_or("adr"),
            Err(e) => return e,
        };
        let mode: Mode = match mode.parse() {
            Ok(m) => m,
            Err(e) => return fail(ErrorKind::InvalidArgument, &e),
        };
        let capture = match o.map_or(PMKV_MG_CAPTURE_PAGES, |o| o.capture) {
            PMKV_MG_CAPTURE_PAGES => Capture::Pages,
            PMKV_MG_CAPTURE_COMPILER => Capture::Compiler,
            c => return fail(ErrorKind::InvalidArgument, &format!("capture {c}: not 0 (pages) or 1 (compiler)")),
        };
        // Compiler capture sees only the stores of code compiled with it: an application
        // built with a plain compiler would have its writes acknowledged and lost. Its
        // process_request must lie in a module that registered itself as instrumented
        // (pmkv_capture.h), checked before anything is created.
        let instrumented = match capture {
            Capture::Compiler => match Instrumented::code_at(cb.process_request.map_or(0, |f| f as usize)) {
                Ok(t) => Some(t),
                Err(e) => return mg_err(e),
            },
            _ => None,
        };
        let initial = o.map_or(0, |o| o.initial_size);
        let mut po = PoolOptions::default().mode(mode);
        if initial != 0 {
            po = po.initial_size(initial);
        }
        let pool = match Pool::open(path, Some("mangosteen"), &po) {
            Err(PoolError::NotFound { .. }) if o.is_some_and(|o| o.create != 0) => {
                Pool::create(path, "mangosteen", &po)
            }
            r => r,
        };
        let pool = match pool {
            Ok(p) => Arc::new(p),
            Err(e) => return crate::from_err(e.into()),
        };
        let region = o.map_or(0, |o| o.region_size);
        let heap = o.is_some_and(|o| o.split_heap != 0);
        if heap {
            if let Err(why) = crate::split::attach() {
                return fail(ErrorKind::Unsupported, why);
            }
        }
        // 0: the existing region's size, or 1 MiB for a new one (the runtime's rule).
        let ring_for = if region == 0 { 1 << 20 } else { region };
        let mo = mg::Options {
            region_size: region,
            // A record for every block of the region (with at least the runtime's default
            // of 4,096): the deduplication set logs a block once per batch, so no batch
            // can outgrow the ring. A batch the ring refuses would have written the DRAM
            // copy already, and a C application's writes cannot be taken back; an
            // unchanged data structure may touch much of its state in one request (a hash
            // table that rehashes every entry when it grows).
            ring_records: (ring_for / 32 + 1).max(4096),
            background: o.is_some_and(|o| o.background != 0),
            capture,
            verify_capture: o.is_some_and(|o| o.verify_capture != 0),
            log: if o.is_some_and(|o| o.per_write_log != 0) { mg::Log::PerWrite } else { mg::Log::Batched },
            fixed_address: heap,
            ..mg::Options::default()
        };
        let opened = match &instrumented {
            Some(t) => Mangosteen::open_instrumented(pool, mo, t),
            None => Mangosteen::open(pool, mo),
        };
        let m = match opened {
            Ok(m) => m,
            Err(e) => return mg_err(e),
        };
        let registration = if heap {
            let Some(r) = SplitAlloc::register(m.region_base(), m.size() as usize) else {
                return fail(ErrorKind::Unsupported, "more than 64 Mangosteen regions open in one process");
            };
            // A new pool's heap is formatted in a batch of its own, durable before use.
            // SAFETY: reads of the heap header in the DRAM copy; no batch runs yet.
            let formatted = m.read(|r| unsafe { Heap::new(r.as_ptr() as *mut u8, r.len()) }.is_formatted());
            if !formatted {
                let r = m.batch(|tx| {
                    let r = tx.region();
                    // SAFETY: the region, ours for the batch.
                    unsafe { Heap::new(r.as_mut_ptr(), r.len()) }.format();
                });
                if let Err(e) = r {
                    return mg_err(e);
                }
            }
            Some(r)
        } else {
            None
        };
        let fe = Arc::new(Frontend::new(CApp { cb, params, heap }, m));
        let m = pmkv_mg {
            fe,
            _registration: registration,
            compiler: capture == Capture::Compiler,
            instrumented_fns: Default::default(),
            next_fn: AtomicUsize::new(0),
        };
        // SAFETY: checked non-NULL, writable (the caller's contract).
        unsafe { *out = Box::into_raw(Box::new(m)) };
        0
    })
}

/// The durable region's size in bytes (0 for a NULL runtime).
///
/// # Safety
///
/// `m` is NULL or an open runtime.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mg_region_size(m: *const pmkv_mg) -> u64 {
    // SAFETY: NULL or open (the caller's contract).
    unsafe { m.as_ref() }.map_or(0, |m| m.fe.runtime().size())
}

/// The heap of a `split_heap` region given to `process_request`, checked.
///
/// # Safety
///
/// `region` and `region_len` are what `process_request` received.
unsafe fn heap_of(region: *mut u8, region_len: usize) -> Option<Heap> {
    if region.is_null() || !SplitAlloc::in_region(region) {
        return None;
    }
    // SAFETY: a registered region (the caller's contract: the whole region).
    let h = unsafe { Heap::new(region, region_len) };
    h.is_formatted().then_some(h)
}

/// The application's root object in a `split_heap` region (set by [`pmkv_mg_set_root`]),
/// or NULL if none was set (a new pool) or the region has no heap. Call it from
/// `process_request` with the region it received.
///
/// # Safety
///
/// `region` and `region_len` are what `process_request` received, during that call.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mg_root(region: *mut u8, region_len: usize) -> *mut c_void {
    // SAFETY: `region`/`region_len` are what `process_request` received, during that
    // call (`# Safety`); `heap_of` only reads the region's heap header.
    let Some(h) = (unsafe { heap_of(region, region_len) }) else { return std::ptr::null_mut() };
    match h.root() as usize {
        0 => std::ptr::null_mut(),
        // SAFETY: an offset inside the region (the heap keeps it so).
        off if off < region_len => unsafe { region.add(off) as *mut c_void },
        _ => std::ptr::null_mut(),
    }
}

/// Make `root` (a block `malloc` returned in a read-write request, or NULL) the
/// application's root object in a `split_heap` region: durable with the request's batch,
/// and what [`pmkv_mg_root`] returns from then on, after restarts too. Only from
/// `process_request` of a read-write request, with the region it received.
///
/// # Safety
///
/// `region` and `region_len` are what `process_request` received, during that call.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mg_set_root(region: *mut u8, region_len: usize, root: *mut c_void) -> c_int {
    guard(|| {
        // SAFETY: `region`/`region_len` are what `process_request` received, during that
        // call (`# Safety`); `heap_of` checks it is a split_heap region before use.
        let Some(h) = (unsafe { heap_of(region, region_len) }) else {
            return fail(ErrorKind::InvalidArgument, "not a split_heap region");
        };
        if SplitAlloc::scope_heap().is_none() {
            return fail(ErrorKind::InvalidArgument, "pmkv_mg_set_root outside a read-write request");
        }
        let off = if root.is_null() {
            0
        } else if h.usable_size(root as *const u8).is_some() {
            root as usize - region as usize
        } else {
            return fail(ErrorKind::InvalidArgument, "the root is no block of the region's heap");
        };
        h.set_root(off as u64);
        0
    })
}

/// Open a transient section on this thread: until the matching
/// [`pmkv_mg_transient_end`], `malloc` and friends (C++'s `new`) inside a read-write
/// request of a `split_heap` runtime take blocks from the C library, not the region, as
/// everywhere else. For what a request makes that must not persist: a response buffer the
/// client reuses in later requests (reads included) would otherwise be a block of the
/// region written outside any batch, which verify mode reports and a reopen does not
/// hold. Frees of the region's blocks still go to its heap. Sections nest; a section left
/// open when a request ends does not carry into the next request.
#[no_mangle]
pub extern "C" fn pmkv_mg_transient_begin() {
    SplitAlloc::transient_begin();
}

/// Close the innermost transient section (see [`pmkv_mg_transient_begin`]): 0, or
/// `PMKV_E_INVALID_ARGUMENT` if none is open on this thread.
#[no_mangle]
pub extern "C" fn pmkv_mg_transient_end() -> c_int {
    if SplitAlloc::transient_end() {
        0
    } else {
        fail(ErrorKind::InvalidArgument, "pmkv_mg_transient_end without an open pmkv_mg_transient_begin")
    }
}

/// A new local-mode client (its context from `init_client`), released by
/// [`pmkv_mg_client_close`] before the runtime is closed.
///
/// # Safety
///
/// `m` is an open runtime; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mg_client_open(m: *const pmkv_mg, out: *mut *mut pmkv_mg_client) -> c_int {
    guard(|| {
        // SAFETY: NULL or open (the caller's contract).
        let Some(m) = (unsafe { m.as_ref() }) else { return fail(ErrorKind::InvalidArgument, "NULL runtime") };
        if out.is_null() {
            return fail(ErrorKind::InvalidArgument, "NULL out pointer");
        }
        let c = m.fe.app().init_client();
        // SAFETY: checked non-NULL (the caller's contract).
        unsafe { *out = Box::into_raw(Box::new(pmkv_mg_client { c })) };
        0
    })
}

/// Release a local-mode client (`destroy_client`). NULL is ignored.
///
/// # Safety
///
/// `c` is NULL or a client of `m` not yet closed; `m` is open.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mg_client_close(m: *const pmkv_mg, c: *mut pmkv_mg_client) {
    let _ = guard(|| {
        // SAFETY: `m` is an open runtime (`# Safety`); should it be NULL anyway, `as_ref`
        // maps it to None and nothing is done.
        if let (Some(m), false) = (unsafe { m.as_ref() }, c.is_null()) {
            // SAFETY: from `pmkv_mg_client_open`, closed once.
            let c = unsafe { Box::from_raw(c) };
            m.fe.app().destroy_client(c.c);
        }
        0
    });
}

/// Local mode's `ClientCmd`: run the request `req` (`len` bytes) of client `c`: parsed,
/// then run as a read, or in a batch of writes whose response comes back once the batch is
/// durable. The response is copied to a buffer `*resp` of `*resp_len` bytes, released with
/// `pmkv_free`. A request the application refuses is `PMKV_E_INVALID_ARGUMENT`.
///
/// # Safety
///
/// `m` is open; `c` one of its clients, used by one thread at a time; `req` has `len`
/// readable bytes; `resp` and `resp_len` are writable.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mg_client_cmd(
    m: *const pmkv_mg,
    c: *mut pmkv_mg_client,
    req: *const u8,
    len: usize,
    resp: *mut *mut u8,
    resp_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: `m` is open and `c` one of its clients, used by one thread at a time
        // (`# Safety`); a NULL either way becomes None and is refused.
        let (Some(m), Some(c)) = (unsafe { m.as_ref() }, unsafe { c.as_mut() }) else {
            return fail(ErrorKind::InvalidArgument, "NULL runtime or client");
        };
        if resp.is_null() || resp_len.is_null() {
            return fail(ErrorKind::InvalidArgument, "NULL response pointers");
        }
        // SAFETY: `req` is valid for `len` bytes (or NULL with 0) per `# Safety`; `bytes`
        // refuses NULL with a non-zero length.
        let req = match unsafe { bytes(req, len) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let out = match m.fe.handle(&mut c.c, req) {
            Ok(Ok(r)) => r,
            Ok(Err(msg)) => return fail(ErrorKind::InvalidArgument, &msg),
            Err(e) => return mg_err(e),
        };
        let n = out.len();
        let p = Box::into_raw(out.into_boxed_slice()) as *mut u8;
        // SAFETY: checked non-NULL (the caller's contract).
        unsafe {
            *resp = p;
            *resp_len = n;
        }
        0
    })
}

/// Run `read(arg, region, region_len)` on the state directly, in parallel with other reads
/// and never beside a batch of writes (the runtime's reader side): no request is
/// encoded, no response copied. For state in the region's heap, `pmkv_mg_root(region,
/// region_len)` finds the root inside `read`. `read` must not write the region, call back
/// into the runtime, or let a C++ exception out (`pmkv.hpp`'s `pmkv::durable` catches and
/// rethrows them after this returns). Returns 0, or `PMKV_E_INVALID_ARGUMENT` for a NULL
/// runtime or function.
///
/// # Safety
///
/// `m` is open; `read` is callable with `arg` from this thread.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mg_read(
    m: *const pmkv_mg,
    read: Option<unsafe extern "C" fn(arg: *mut c_void, region: *const u8, region_len: usize)>,
    arg: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: NULL or open (the caller's contract).
        let (Some(m), Some(f)) = (unsafe { m.as_ref() }, read) else {
            return fail(ErrorKind::InvalidArgument, "NULL runtime or read function");
        };
        // SAFETY: the caller's function and argument, on this thread, over the DRAM copy
        // held by the reader side for the call.
        m.fe.runtime().read(|r| unsafe { f(arg, r.as_ptr(), r.len()) });
        0
    })
}

/// A write function and its argument, run by whichever thread combines the batch.
struct WriteCall(unsafe extern "C" fn(*mut c_void, *mut u8, usize), *mut c_void);
// SAFETY: [`pmkv_mg_write`]'s contract makes the function callable with its argument from
// any thread while the call lasts, which is as long as the batch holds this.
unsafe impl Send for WriteCall {}
// SAFETY: only the one request that holds it calls it, once per batch it runs in.
unsafe impl Sync for WriteCall {}

/// Run `write(arg, region, region_len)` as a read-write request: flat-combined into a
/// batch with other threads' writes, its stores captured (the runtime's capture mode), its
/// allocations from the region's heap with `split_heap`; returns once the batch is
/// durable. `write` may run on another thread (the combiner) and must not call back into
/// the runtime or let a C++ exception out; it may call [`pmkv_mg_abort`] (then every
/// write of it is rolled back and this returns `PMKV_E_INVALID_ARGUMENT`) and
/// `pmkv_mg_root` / `pmkv_mg_set_root`.
///
/// With compiler capture, `write` must lie in a program or library built with `pmkv-cc` /
/// `pmkv-c++`: one that is not is refused here, before it runs (`PMKV_E_UNSUPPORTED`),
/// since its stores would be acknowledged and lost.
///
/// # Safety
///
/// `m` is open; `write` is callable with `arg` from any thread until this returns.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mg_write(
    m: *const pmkv_mg,
    write: Option<unsafe extern "C" fn(arg: *mut c_void, region: *mut u8, region_len: usize)>,
    arg: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: NULL or open (the caller's contract).
        let (Some(m), Some(f)) = (unsafe { m.as_ref() }, write) else {
            return fail(ErrorKind::InvalidArgument, "NULL runtime or write function");
        };
        if m.compiler && !m.instrumented_fns.iter().any(|s| s.load(Ordering::Relaxed) == f as usize) {
            match Instrumented::code_at(f as usize) {
                Ok(_) => {
                    let slot = m.next_fn.fetch_add(1, Ordering::Relaxed) % m.instrumented_fns.len();
                    m.instrumented_fns[slot].store(f as usize, Ordering::Relaxed);
                }
                Err(e) => return mg_err(e),
            }
        }
        let call = WriteCall(f, arg);
        let app = m.fe.app();
        loop {
            let call = &call;
            // SAFETY: the caller's function and argument (`# Safety`), on the region ours
            // for the batch.
            match m.fe.runtime().batch(move |tx| app.write_request(tx, |p, len| unsafe { (call.0)(call.1, p, len) })) {
                Ok(()) => return 0,
                // Another request of the batch aborted: nothing of this one was applied.
                Err(mg::Error::RolledBack) => continue,
                Err(e) => return mg_err(e),
            }
        }
    })
}

/// RPC mode: serve the application on 127.0.0.1:`port` (0: any free port) until the
/// process ends or the listener fails. Once listening, `ready(port, arg)` is called (if
/// not NULL) with the bound port. Each connection is a client (`init_client` /
/// `destroy_client`); framing is the runtime's (`pmkv_mangosteen::serve`: a 4-byte
/// little-endian length, then the bytes; responses start with a status byte, 0 = the
/// application's response, 1 = an error message). Returns only on an error.
///
/// # Safety
///
/// `m` is open and stays open while this runs; `ready` is NULL or callable with `arg`.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mg_serve(
    m: *const pmkv_mg,
    port: u16,
    ready: Option<unsafe extern "C" fn(port: u16, arg: *mut c_void)>,
    arg: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: `m` is open and stays open while this call serves (`# Safety`); a NULL
        // one becomes None and is refused.
        let Some(m) = (unsafe { m.as_ref() }) else { return fail(ErrorKind::InvalidArgument, "NULL runtime") };
        let l = match std::net::TcpListener::bind(("127.0.0.1", port)) {
            Ok(l) => l,
            Err(e) => return fail(ErrorKind::Io, &format!("listen on port {port}: {e}")),
        };
        let bound = l.local_addr().map(|a| a.port()).unwrap_or(port);
        if let Some(f) = ready {
            // SAFETY: `ready` is callable with `arg` (`# Safety`); it is called once, from
            // this thread, with the caller's own `arg`, before serving.
            unsafe { f(bound, arg) }
        }
        match mg::serve(l, m.fe.clone()) {
            Ok(()) => 0,
            Err(e) => fail(ErrorKind::Io, &format!("serving: {e}")),
        }
    })
}

/// Close the runtime: wait for the backend to apply every committed batch, then release
/// the pool. NULL is ignored. Returns 0, or an error if a batch could not be applied (the
/// log still holds it: the next open replays it).
///
/// # Safety
///
/// `m` is NULL or an open runtime with no client, cursor or `pmkv_mg_serve` still using it;
/// it is invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn pmkv_mg_close(m: *mut pmkv_mg) -> c_int {
    guard(|| {
        if m.is_null() {
            return 0;
        }
        // SAFETY: from `pmkv_mg_open`, closed once (the caller's contract).
        let m = unsafe { Box::from_raw(m) };
        let r = m.fe.runtime().quiesce();
        drop(m);
        match r {
            Ok(()) => 0,
            Err(e) => mg_err(e),
        }
    })
}
