//! The `mangosteen` engine: an ordinary `BTreeMap` — the standard library's, unchanged —
//! made durable by the runtime (paper §3).
//!
//! The map and everything it allocates live in the durable region, which is mapped at
//! the same address for the pool's whole life (`Options::fixed_address`), so
//! its pointers stay valid across restarts. The map's code is the instrumented library
//! (`compiler_capture`, `instrumented/app.rs`): its own global allocator sends the map's
//! allocations to the region's persistent heap ([`Heap`]) while a write runs, so the
//! program that opens the engine installs no allocator. A put or delete is a read-write
//! request: it runs in a batch (flat-combined with other threads' writes); its writes —
//! the map's nodes, the heap's lists — are captured by the compiler's store hooks
//! (`capture=compiler`, the default) or by page protection (`capture=pages`) and logged,
//! and the call returns once the batch's COMMIT is durable. A get or scan is a read-only
//! request on the DRAM copy, in parallel with other readers. A write batch is one
//! request, hence atomic.

use crate::compiler_capture::{self, abi, App};
use crate::error::Error as MgError;
use crate::heap::Heap;
use crate::runtime::{Capture, Log, Mangosteen, Options as MgOptions, SizeCheck};
use pmkv_core::{
    parse_bool, parse_choice, parse_in, CheckReport, Emit, EngineError, EngineInfo, EngineResult, EngineSettings,
    Error, ErrorKind, KeyRange, LogOp, MemoryUsage, NativeEngine, NativeFactory, Options, Pool, RecoveryReport, Result,
    SalvageReport, Setting, Visitor,
};
use std::ffi::c_void;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The largest region (MiB) debug builds verify capture for by default.
const VERIFY_DEFAULT_MIB: u64 = 16;

/// Most records in the redo ring (see `options`).
const RING_MAX: u64 = 256 << 10;

/// The pool layout name of the engine.
pub const LAYOUT: &str = "mangosteen-map";

/// Room a write must leave in the heap's untouched part besides its key and value: the
/// map's node splits along a root-to-leaf path (a few hundred bytes per level).
const HEADROOM: u64 = 16 << 10;

/// The factory the registry lists.
pub static FACTORY: MangosteenFactory = MangosteenFactory;

/// Opens `mangosteen` stores (a `BTreeMap` made durable by the runtime) for `pmkv::Store`.
#[derive(Debug, Default)]
pub struct MangosteenFactory;

/// The `mangosteen` engine's typed options, attached with
/// [`Options::with_engine_options`] like every engine's, or set by the `key=value`
/// parameters they declare. They choose the runtime's [`MgOptions`] (with the pool's
/// `max_size`, which sizes a default region).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapOptions {
    /// MiB of the durable region; `None`: `max_size / 64`, between 1 and 256. Asked for,
    /// a larger size than an existing region's is refused rather than ignored.
    pub region_mib: Option<u64>,
    /// Deduplicate logged blocks (false: the paper's ablation).
    pub dedup: bool,
    /// How writes are found.
    pub capture: Capture,
    /// How captured writes are logged.
    pub log: Log,
    /// Capture a mem* call as one write (false: the paper's nomemcpy ablation).
    pub memcpy: bool,
    /// Verify capture after every batch; `None`: on in debug builds for regions up to
    /// 16 MiB.
    pub verify_capture: Option<bool>,
    /// Apply committed batches on a backend thread.
    pub background: bool,
}

impl Default for MapOptions {
    fn default() -> MapOptions {
        MapOptions {
            region_mib: None,
            dedup: true,
            capture: Capture::Compiler,
            log: Log::Batched,
            memcpy: true,
            verify_capture: None,
            background: false,
        }
    }
}

impl EngineSettings for MapOptions {
    const SETTINGS: &'static [Setting<MapOptions>] = &[
        Setting {
            name: "region_mib",
            doc: "MiB of the durable region holding the map, taken whole when the pool is created and never grown: the pool file is at least this plus its redo ring (default: max_size / 64, between 1 and 256)",
            set: |o, v| parse_in(v, 1..=1 << 16).map(|x| o.region_mib = Some(x)),
        },
        Setting {
            name: "dedup",
            doc: "false: log every captured block, the paper's no-deduplication ablation (default true)",
            set: |o, v| parse_bool(v).map(|x| o.dedup = x),
        },
        Setting {
            name: "capture",
            doc: "how writes are found: compiler (the map's stores, traced by the instrumentation it was compiled with; default) or pages (page protection: a fault and a page copy per page a batch writes, for comparison)",
            set: |o, v| parse_choice(v, &[("compiler", Capture::Compiler), ("pages", Capture::Pages)]).map(|x| o.capture = x),
        },
        Setting {
            name: "log",
            doc: "how captured writes are logged: batched (deduplicated, one fence per batch; default) or perwrite (the per-write baseline the paper compares against: every captured write logged and fenced at once, nothing deduplicated; needs capture=compiler)",
            set: |o, v| parse_choice(v, &[("batched", Log::Batched), ("perwrite", Log::PerWrite)]).map(|x| o.log = x),
        },
        Setting {
            name: "memcpy",
            doc: "false: report every 8-byte store of a memcpy, memmove or memset into the region through the store hook instead of the call as one write, the paper's nomemcpy ablation of Fig. 8d (default true; capture=compiler)",
            set: |o, v| parse_bool(v).map(|x| o.memcpy = x),
        },
        Setting {
            name: "verify_capture",
            doc: "true: after every batch compare the whole region with the one before and fail the write if any changed byte was not captured, logging it anyway (a compare of the region per batch; default: true in debug builds for regions up to 16 MiB, so the tests run it)",
            set: |o, v| parse_bool(v).map(|x| o.verify_capture = Some(x)),
        },
        Setting {
            name: "background",
            doc: "true: apply committed batches on a backend thread, the paper's design (default false: inline, right after each commit)",
            set: |o, v| parse_bool(v).map(|x| o.background = x),
        },
    ];
}

fn info() -> EngineInfo {
    EngineInfo::new(
        "mangosteen",
        "Mangosteen: a standard BTreeMap made durable by flat combining, compiler write capture and a deduplicated redo log (Lersch et al.)",
    )
    .persistent(true)
    .atomic_batches(true)
    .fixed_address(true)
    .node_keys(11)
}

fn err(e: MgError) -> Error {
    match e {
        MgError::Pool(p) => p.into(),
        MgError::InvalidOption(_) | MgError::OutOfRegion { .. } => Error::with_source(ErrorKind::InvalidArgument, e),
        MgError::Corrupt(_) => Error::with_source(ErrorKind::Corrupt, e),
        MgError::Version { .. } => Error::with_source(ErrorKind::Version, e),
        MgError::AddressInUse { .. } => Error::with_source(ErrorKind::Locked, e),
        MgError::Io(_) => Error::with_source(ErrorKind::Io, e),
        MgError::Full(_) => Error::with_source(ErrorKind::Full, e),
        MgError::Panicked(_) | MgError::CaptureMissed(_) => Error::with_source(ErrorKind::Internal, e),
        MgError::Capture(_) | MgError::NotInstrumented(_) => Error::with_source(ErrorKind::Unsupported, e),
        MgError::RegionSize { .. } | MgError::Aborted | MgError::RolledBack => {
            Error::with_source(ErrorKind::InvalidArgument, e)
        }
    }
}

/// The runtime's options for `m`, on a pool of `opts`.
fn runtime_options(m: &MapOptions, opts: &Options) -> MgOptions {
    let region_mib = m.region_mib.unwrap_or((opts.max_size >> 26).clamp(1, 256));
    let mut o = MgOptions {
        capture: m.capture,
        fixed_address: true,
        dedup: m.dedup,
        background: m.background,
        log: m.log,
        memcpy_capture: m.memcpy,
        ..Default::default()
    };
    o.region_size = region_mib << 20;
    // Verification compares the whole region after every batch: on by default in debug
    // builds (so every test runs it) for regions small enough to make that cheap.
    o.verify_capture = m.verify_capture.unwrap_or(cfg!(debug_assertions) && region_mib <= VERIFY_DEFAULT_MIB);
    // Room in the ring for every block of the region (then any batch fits: the dedup set
    // logs each block once), up to 256K records (16 MiB of PM); past that a batch that
    // dirties more than 8 MiB of the region is refused (values are limited to a quarter
    // of that, see `info`).
    o.ring_records = (o.region_size / o.block_size as u64 + 1).clamp(4096, RING_MAX);
    o
}

impl NativeFactory for MangosteenFactory {
    type Engine = MangosteenEngine;
    type Settings = MapOptions;
    fn info(&self) -> EngineInfo {
        info()
    }
    fn layout(&self) -> &'static str {
        LAYOUT
    }
    /// Whole or nothing: see `salvage`.
    fn salvage(&self, image: &[u8], emit: Emit<'_>) -> Result<SalvageReport> {
        crate::salvage::salvage(self, image, emit)
    }
    fn open_native(&self, pool: Arc<Pool>, m: MapOptions, opts: &Options) -> EngineResult<MangosteenEngine> {
        // A region size the user asked for (`region_mib`) must not be silently ignored by
        // an existing, smaller region; one derived from `max_size` is only a default.
        let sizes = if m.region_mib.is_some() { SizeCheck::Strict } else { SizeCheck::Existing };
        Ok(MangosteenEngine::open(pool, runtime_options(&m, opts), sizes)?)
    }
}

/// An open `mangosteen` store.
pub struct MangosteenEngine {
    m: Mangosteen,
    /// The map's code (loaded once per process).
    app: &'static App,
    /// Region offset of the map.
    root: usize,
    poisoned: AtomicBool,
    read_only: bool,
}

/// A panic raised in a callback the map's code called (a scan's visitor): caught there,
/// since it may not unwind through the library's frames, and raised again once the
/// library returned.
type Caught = Option<Box<dyn std::any::Any + Send>>;

impl MangosteenEngine {
    /// Open (recovering first) the region in `pool`, and create the empty map on a new one.
    ///
    /// With `SizeCheck::Strict`, a larger `o.region_size` than an existing region's is
    /// refused (`InvalidArgument`).
    pub(crate) fn open(pool: Arc<Pool>, o: MgOptions, sizes: SizeCheck) -> Result<MangosteenEngine> {
        let app = compiler_capture::app().map_err(|e| err(MgError::Capture(e)))?;
        let read_only = pool.is_read_only();
        // The map is instrumented code: compiler capture needs no further proof.
        let m = Mangosteen::open_inner(pool, o, sizes, Some(app.module)).map_err(err)?;
        let size = m.size() as usize;
        let root = m.read(|r| {
            // SAFETY: only reads of the heap header inside the region (the DRAM copy,
            // mapped for `m`'s life); no batch runs yet.
            let h = unsafe { Heap::new(r.as_ptr() as *mut u8, r.len()) };
            if h.is_formatted() {
                h.root()
            } else {
                0
            }
        });
        let root = if root != 0 {
            root
        } else if read_only {
            return Err(Error::new(ErrorKind::Corrupt, "the pool holds no map (it was never formatted)"));
        } else {
            // The first open: format the heap and allocate the empty map in a batch of its
            // own, so both are durable before the pool is used.
            m.batch(|tx| {
                let r = tx.region();
                // SAFETY: the region, ours for the batch, 16-aligned, zero but for a heap
                // header a crashed earlier attempt may have left.
                unsafe { (app.create)(r.as_mut_ptr(), r.len()) }
            })
            .map_err(err)?
        };
        if root as usize >= size || !(root as usize).is_multiple_of(crate::heap::MAX_ALIGN) {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!("map root {root:#x} is no block of the {size}-byte region"),
            ));
        }
        Ok(MangosteenEngine { m, app, root: root as usize, poisoned: AtomicBool::new(false), read_only })
    }

    fn writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::new(ErrorKind::ReadOnly, "store opened read-only"));
        }
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::new(ErrorKind::Poisoned, "an earlier write failed; reopen the store"));
        }
        Ok(())
    }

    /// Run `f` with the region's base address as a read-only request.
    fn read<R>(&self, f: impl FnOnce(*mut u8) -> R) -> R {
        // The base pointer is only read through (`get`, `scan`, ...): no batch writes the
        // copy while the read side is held.
        self.m.read(|r| f(r.as_ptr() as *mut u8))
    }

    /// Run `f` (given the region's base and length) as a read-write request: in a batch;
    /// `need` bytes must remain untouched in the heap, else `Full`.
    fn write<R: Send>(&self, need: u64, f: impl FnOnce(*mut u8, usize) -> R + Send) -> Result<R> {
        self.writable()?;
        let r = self.m.batch(move |tx| {
            let r = tx.region();
            // SAFETY: the region, ours for the batch; only the header is read.
            let h = unsafe { Heap::new(r.as_mut_ptr(), r.len()) };
            if h.untouched() < need + HEADROOM {
                return Err(Error::new(
                    ErrorKind::Full,
                    format!("the {}-byte durable region is full (region_mib sets its size at creation)", r.len()),
                ));
            }
            Ok(f(r.as_mut_ptr(), r.len()))
        });
        match r {
            Ok(r) => r,
            Err(e) => {
                self.poison();
                if let MgError::Panicked(m) = e {
                    // The commit panicked on the combining thread: raise it here too, so
                    // the store handles it as it handles any engine panic (poisoned,
                    // pool left unclean, recovery at the next open).
                    panic!("{m}");
                }
                Err(err(e))
            }
        }
    }

    /// Insert or overwrite, in a batch.
    fn put_in(&self, base: *mut u8, len: usize, key: &[u8], value: &[u8]) {
        // SAFETY: the region of this batch and its map (`open`); the slices are valid.
        unsafe { (self.app.put)(base, len, self.root as u64, key.as_ptr(), key.len(), value.as_ptr(), value.len()) }
    }

    /// Remove, in a batch.
    fn delete_in(&self, base: *mut u8, len: usize, key: &[u8]) -> bool {
        // SAFETY: as `put_in`.
        unsafe { (self.app.delete)(base, len, self.root as u64, key.as_ptr(), key.len()) }
    }
}

/// What a get hands its callback: the caller's closure, and a panic it raised.
type GetArg<'a> = (&'a mut dyn FnMut(&[u8]), Caught);

/// The library's bytes as a slice (for the callbacks below, which only run inside a call
/// to the library that passes valid bytes, and use the slice before returning).
fn bytes<'a>(p: *const u8, n: usize) -> &'a [u8] {
    if n == 0 {
        &[]
    } else {
        // SAFETY: the library passes `n` valid bytes at `p`, alive for the callback.
        unsafe { std::slice::from_raw_parts(p, n) }
    }
}

/// A get's callback: the value goes to the caller's closure.
unsafe extern "C" fn got(arg: *mut c_void, v: *const u8, len: usize) {
    // SAFETY: `get_with` passes `&mut GetArg`, live for the call.
    let (f, caught) = unsafe { &mut *(arg as *mut GetArg<'_>) };
    let v = bytes(v, len);
    if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(v))) {
        *caught = Some(p);
    }
}

/// A scan's callback: the record goes to the visitor; a panic stops the scan.
unsafe extern "C" fn visited(arg: *mut c_void, k: *const u8, kl: usize, v: *const u8, vl: usize) -> bool {
    // SAFETY: `scan` passes `&mut (Visitor, Caught)`, live for the call; the library
    // passes a record's bytes.
    let (visit, caught) = unsafe { &mut *(arg as *mut (Visitor<'_>, Caught)) };
    let (k, v) = (bytes(k, kl), bytes(v, vl));
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| visit(k, v))) {
        Ok(go) => go,
        Err(p) => {
            *caught = Some(p);
            false
        }
    }
}

fn c_bound(b: Bound<&[u8]>) -> abi::Bound {
    match b {
        Bound::Unbounded => abi::Bound { kind: 0, ptr: std::ptr::null(), len: 0 },
        Bound::Included(k) => abi::Bound { kind: 1, ptr: k.as_ptr(), len: k.len() },
        Bound::Excluded(k) => abi::Bound { kind: 2, ptr: k.as_ptr(), len: k.len() },
    }
}

impl NativeEngine for MangosteenEngine {
    /// Keys up to 64 KiB and values up to an eighth of the region (so that a record always
    /// fits an empty region with room for the map's nodes), and up to 2 MiB (so that a
    /// batch of a few such writes fits the redo ring).
    fn info(&self, info: EngineInfo) -> EngineInfo {
        let r = self.m.size() as usize;
        let ring_bytes = (RING_MAX * 32) as usize;
        info.limits((64 << 10).min(r / 16), (r / 8).min(ring_bytes / 4))
    }
    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> EngineResult<bool> {
        let mut arg: GetArg<'_> = (f, None);
        let found = self.read(|base| {
            // SAFETY: the map of this region, not written under the read side; `arg`
            // outlives the call and is what `got` expects.
            unsafe {
                (self.app.get)(base, self.root as u64, key.as_ptr(), key.len(), got, &mut arg as *mut _ as *mut c_void)
            }
        });
        if let Some(p) = arg.1 {
            std::panic::resume_unwind(p);
        }
        Ok(found)
    }
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        Ok(self.write((key.len() + value.len()) as u64, |b, l| self.put_in(b, l, key, value))?)
    }
    fn delete(&self, key: &[u8]) -> EngineResult<bool> {
        Ok(self.write(0, |b, l| self.delete_in(b, l, key))?)
    }
    /// Atomic whether or not asked: one request, so one batch in the log (all or nothing
    /// across a crash).
    fn write_batch(&self, ops: &[LogOp<'_>], _atomic: bool) -> EngineResult<()> {
        let need = ops.iter().map(|op| op.key().len() + 64).sum::<usize>()
            + ops.iter().map(|op| if let LogOp::Put(_, v) = op { v.len() } else { 0 }).sum::<usize>();
        Ok(self.write(need as u64, |b, l| {
            for op in ops {
                match *op {
                    LogOp::Put(k, v) => self.put_in(b, l, k, v),
                    LogOp::Delete(k) => {
                        self.delete_in(b, l, k);
                    }
                }
            }
        })?)
    }
    fn scan(&self, range: &KeyRange, limit: usize, reverse: bool, visit: Visitor<'_>) -> EngineResult<()> {
        let (start, end) = (c_bound(range.start_bound()), c_bound(range.end_bound()));
        let mut arg: (Visitor<'_>, Caught) = (visit, None);
        self.read(|base| {
            // SAFETY: as in `get_with`; the bounds' keys live in `range`, and a non-empty
            // range has start <= end.
            unsafe {
                (self.app.scan)(
                    base,
                    self.root as u64,
                    &start,
                    &end,
                    reverse,
                    limit,
                    visited,
                    &mut arg as *mut _ as *mut c_void,
                )
            }
        });
        if let Some(p) = arg.1 {
            std::panic::resume_unwind(p);
        }
        Ok(())
    }
    fn len(&self) -> u64 {
        // SAFETY: the map of this region, not written under the read side.
        self.read(|base| unsafe { (self.app.len)(base, self.root as u64) })
    }
    fn memory(&self) -> MemoryUsage {
        let (size, used) = self.m.read(|r| {
            // SAFETY: `r` is the whole DRAM copy (16-aligned, mapped for `m`'s life); under
            // the read side no batch writes it, and only the heap header is read (`used`).
            let h = unsafe { Heap::new(r.as_ptr() as *mut u8, r.len()) };
            (r.len() as u64, h.used())
        });
        MemoryUsage {
            dram: vec![(format!("region (DRAM copy; {used} bytes in heap blocks)"), size)],
            pm: vec![("region (PM copy)".into(), size)],
        }
    }
    /// The report's problems as one `Corrupt` error, or its facts as a summary.
    fn check(&self) -> EngineResult<String> {
        let rep = self.check_report("mangosteen")?;
        if !rep.is_ok() {
            return Err(EngineError::Corrupt(rep.problems.join("\n")));
        }
        Ok(rep.facts.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", "))
    }
    fn check_report(&self, engine: &str) -> EngineResult<CheckReport> {
        let mut rep = CheckReport::new(engine);
        let (heap, len, ordered) = self.m.read(|r| {
            let base = r.as_ptr() as *mut u8;
            // SAFETY: `r` is the whole DRAM copy (16-aligned, mapped for `m`'s life); under
            // the read side no batch writes it, and the heap is only read (`check`).
            let h = unsafe { Heap::new(base, r.len()) };
            // SAFETY: the map of this region (`open`), not written under the read side.
            let (len, ordered) =
                unsafe { ((self.app.len)(base, self.root as u64), (self.app.ordered)(base, self.root as u64)) };
            (h.check(), len, ordered)
        });
        rep.fact("records", len);
        if let Err(e) = heap {
            rep.problem(format!("persistent heap: {e}"));
        }
        if !ordered {
            rep.problem("the map's keys are out of order");
        }
        let (head, tail) = self.m.log_indices();
        rep.fact("redo log head", head);
        rep.fact("redo log tail", tail);
        Ok(rep)
    }
    fn recovery(&self) -> RecoveryReport {
        let mut rep: RecoveryReport = self.m.recovery().clone();
        rep.records = self.len();
        rep
    }
    fn sync(&self) -> EngineResult<()> {
        Ok(self.m.quiesce().map_err(err)?)
    }
    fn close(self) -> EngineResult<()> {
        // The map is never dropped: it lives in the region, which the next open maps again.
        Ok(self.m.quiesce().map_err(err)?)
    }
    /// Refuse further writes and leave the pool marked unclean, so the next open recovers.
    fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
        self.m.pool().poison();
    }
    fn pool(&self) -> &Arc<Pool> {
        self.m.pool()
    }
}
