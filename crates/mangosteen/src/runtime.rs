//! The runtime: a durable byte region with a DRAM copy and a PM copy (paper §3.2).
//!
//! Reads run on the DRAM copy, in parallel (the reader side of the writer-preference
//! lock of Fig. 2). A batch of writes runs under the writer side: each write goes to the
//! DRAM copy and its blocks into the deduplication set; at the end of the batch (`end_tx`,
//! Fig. 3 lines 20–32) every dirty block is logged once with its final content, then the
//! COMMIT, one fence, the tail, one persist — and only then does `batch` return. The
//! backend applies committed batches to the PM copy, inline after each batch or on a
//! thread of its own ([`Options::background`]).

use crate::backend::{self, line_check, DirtyLines, PmCopy, LINE};
use crate::capture::{PageCapture, RegionBuf};
use crate::compiler_capture::{self, CapturedModule};
use crate::dedup::DedupSet;
use crate::error::{Error, Result};
use crate::flat_combining::{Batch, Combining, Outcome};
use crate::layout::*;
use crate::recovery::{self, Replay};
use crate::redo_log::{self, RedoLog};
use crate::tx::{EagerLog, Tx};
use parking_lot::{Mutex, RwLock};
use pmkv_substrate::epalloc::{extent, EpAlloc};
use pmkv_substrate::Pool;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Options of a Mangosteen region. Size, block size and ring capacity are fixed when the
/// pool is created and read back at open.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Bytes of the region, fixed when it is created. At a later open a larger size is
    /// refused ([`Error::RegionSize`]: a region does not grow); 0 means "the existing
    /// region's size" (1 MiB for a new one).
    pub region_size: u64,
    /// Deduplication and log granularity: 8, 16 or 32 bytes (the paper's default, 32).
    pub block_size: usize,
    /// 64-byte slots in the redo ring (a record takes one or more; the name is format 2's,
    /// where each record took one).
    pub ring_records: u64,
    /// Entries of the deduplication table (a power of two; 4,096 = 32 KiB, cache-sized).
    pub dedup_slots: usize,
    /// Deduplicate (false: the paper's ablation, every write logged).
    pub dedup: bool,
    /// Run the backend on a thread of its own (the paper's design); false applies each
    /// batch inline right after its commit (deterministic, for tests and tools).
    pub background: bool,
    /// How a batch's writes are captured.
    pub capture: Capture,
    /// How captured writes reach the log: batched and deduplicated (the paper's design),
    /// or each persisted as soon as it is made (the per-write baseline it is measured
    /// against).
    pub log: Log,
    /// After every batch, compare the whole region with its content after the batch
    /// before, and fail the batch ([`Error::CaptureMissed`]) if any changed block was not
    /// captured (the missed blocks are logged all the same, so nothing is lost). For tests
    /// and for checking an application's capture; costs a copy and a compare of the
    /// region per batch.
    pub verify_capture: bool,
    /// Map the DRAM copy at one address for the life of the pool, chosen at creation
    /// (the split heap, M7: state that holds absolute pointers into the region stays
    /// valid across restarts). Only read at creation; an existing pool keeps its choice.
    pub fixed_address: bool,
    /// Compiler capture: a `memcpy`, `memmove` or `memset` into the region is captured as
    /// one write (the paper's memcpy interception; default). `false` is the paper's
    /// "nomemcpy" ablation (Fig. 8d): every 8-byte store of the copy goes through the store
    /// hook, as binary instrumentation sees a copy it does not intercept.
    pub memcpy_capture: bool,
}

/// How the writes of a batch are found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capture {
    /// Only what `Tx::write` and `Tx::record` say (the API compiler instrumentation calls).
    Explicit,
    /// Also every byte changed through plain pointers into the region, found by page
    /// protection (the region is write-protected for a batch and each page snapshotted at
    /// its first write); one region per process may use it at a time.
    Pages,
    /// Also every store that code compiled with pmkv's instrumentation makes into the
    /// region (the `mangosteen` engine's map; see `compiler_capture`): a hook call per
    /// store, no fault, no page copy. No Rust code of a caller's is such code, so
    /// [`Mangosteen::open`] refuses it unless `verify_capture` is on; C and C++ built with
    /// `pmkv-cc` / `pmkv-c++` get it through [`Mangosteen::open_instrumented`].
    Compiler,
}

/// How a batch's captured writes reach the redo log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Log {
    /// Mangosteen (§4.3): the batch's dirty blocks are deduplicated and logged once each,
    /// with their final content, when the batch ends; one fence and one persist commit it.
    #[default]
    Batched,
    /// The baseline the paper compares against (Persimmon-like: every write persisted
    /// before the program goes on): each captured write is logged as soon as it has been
    /// made, a REDO record of the blocks it touches, flushed and fenced before the next
    /// write proceeds; nothing is deduplicated. The batch then commits as in `Batched`
    /// (COMMIT, fence, tail, persist), so recovery and the log's format are unchanged.
    /// Compiler and explicit capture only (page capture finds writes at the batch's end).
    PerWrite,
}

/// A new region's size when none is asked for (`region_size` 0).
const DEFAULT_REGION: u64 = 1 << 20;

impl Default for Options {
    fn default() -> Self {
        Options {
            region_size: DEFAULT_REGION,
            block_size: 32,
            ring_records: 4096,
            dedup_slots: 4096,
            dedup: true,
            background: false,
            capture: Capture::Explicit,
            log: Log::Batched,
            verify_capture: false,
            fixed_address: false,
            memcpy_capture: true,
        }
    }
}

/// The writer's state: the batch being built and the frontend's cached log indices.
struct Frontend {
    dedup: DedupSet,
    pages: Option<PageCapture>,
    /// Compiler capture: the instrumented library's hooks.
    compiler: Option<&'static CapturedModule>,
    /// Verify mode: the region as the last batch left it.
    shadow: Option<Vec<u8>>,
    tail: u64,
    /// The persistent head as last made durable: slots below it + capacity are free.
    head: u64,
    /// Records the inline backend applied to the PM copy (flushed, maybe not fenced yet):
    /// the next commit's fence makes them durable and its tail's persist carries the head
    /// up to here. The background backend keeps its own; then this stays at `head`.
    applied: u64,
    /// Inline backend, deferred apply: the lines the committed batches whose records lie
    /// in `[applied, pended)` wrote, not yet applied to the PM copy (see `end_tx`).
    pending: DirtyLines,
    /// Where the records `pending` describes end: the tail of the last batch added.
    pended: u64,
    /// The tail when the running batch began (per-write logging moves it during the batch).
    started: u64,
    /// Verify mode: blocks the capture missed in this batch (logged at its end).
    missed: Vec<u64>,
    /// Scratch kept between batches: the batch's blocks and ranges, their runs, a record's
    /// words.
    blocks: Vec<u64>,
    ranges: Vec<(u64, u64)>,
    runs: Vec<(u64, u64)>,
    rec: Vec<u64>,
    /// Compiler capture: the short writes the hooks appended during the batch, one block
    /// entry each (see `abi::Ctx::buf` and `redo_log::entry_span`), with duplicates;
    /// merged with the set's blocks at the commit.
    appended: Vec<u64>,
}

/// Room for writes appended by the hooks per batch (2 KiB, in the cache); a Dictionary
/// insert appends ~16, a batch that writes more sends the rest to the dedup set.
const APPENDED: usize = 256;

/// Per-write logging ([`Log::PerWrite`]) for one batch: the write the hooks last
/// reported, not yet logged (the hooks run before the store), and the first error.
struct Eager {
    rt: *const Mangosteen,
    front: *mut Frontend,
    dram: *const u8,
    pending: Option<(u64, usize)>,
    err: Option<Error>,
}

impl EagerLog for Eager {
    /// Log the write of `len` bytes at `off` as the DRAM copy holds it now: a REDO record
    /// of its blocks, flushed, then one fence. The blocks also go into the batch's set,
    /// which here only tells the backend and verify mode what the batch changed.
    fn log(&mut self, off: u64, len: usize) {
        if self.err.is_some() || len == 0 {
            return;
        }
        // SAFETY: `rt`, `front` and `dram` outlive the batch this `Eager` belongs to (it is
        // a local of `Mangosteen::batch`'s commit closure), and no other reference to the
        // frontend is used while this one lives (the batch runs on this thread).
        let (rt, front) = unsafe { (&*self.rt, &mut *self.front) };
        front.dedup.record(off, len);
        let b = rt.block as u64;
        let end = (off + len as u64).min(rt.shared.size);
        // SAFETY: the DRAM copy, `size` bytes; the bytes were written by the store just
        // reported, and nothing writes them concurrently.
        let dram = unsafe { std::slice::from_raw_parts(self.dram, rt.shared.size as usize) };
        let r = rt.log_runs(front, &[], &[(off & !(b - 1), end.next_multiple_of(b))], false, dram);
        if let Err(e) = r {
            self.err = Some(e);
            return;
        }
        rt.shared.log.pool.fence();
    }

    /// Log the write the hooks reported last (its store has been made by now).
    fn settle(&mut self) {
        if let Some((off, len)) = self.pending.take() {
            self.log(off, len);
        }
    }
}

/// The hooks' callback under per-write logging: the write reported before this one has
/// been made, so log it now; this one is logged at the next write or at the batch's end.
unsafe extern "C" fn record_eager(arg: *mut std::ffi::c_void, off: usize, len: usize) {
    // SAFETY: `arg` is the batch's `Eager`, alive until the capture guard drops, and used
    // by nothing else while the instrumented code runs.
    let e = unsafe { &mut *(arg as *mut Eager) };
    // Inside a split-heap request: what logging allocates (the batch's set growing) is
    // the runtime's, not the application's (see `SplitAlloc::outside`; without it a large
    // write's blocks grew the set from the persistent heap, inside the hooks, and a C++
    // `fill100K` crashed).
    crate::SplitAlloc::outside(|| {
        e.settle();
        e.pending = Some((off as u64, len));
    });
}

/// Shared between the runtime and its backend thread.
struct Shared {
    log: RedoLog,
    pm: PmCopy,
    size: u64,
    stop: AtomicBool,
    /// The first error the backend met (then it stops; batches still commit durably).
    failed: Mutex<Option<String>>,
}

/// The DRAM copy: owned, or — for read-only opens of a pool whose region has a fixed
/// address — shared by every read-only open of that pool in this process (they all need
/// the one address, and nothing can write the pool while they are open).
enum Dram {
    Own(RegionBuf),
    Shared(Arc<RegionBuf>),
}

impl std::ops::Deref for Dram {
    type Target = RegionBuf;
    fn deref(&self) -> &RegionBuf {
        match self {
            Dram::Own(b) => b,
            Dram::Shared(b) => b,
        }
    }
}

impl Dram {
    /// The copy, for a batch; read-only opens run none (`batch` refuses them first).
    fn own(&mut self) -> &mut RegionBuf {
        match self {
            Dram::Own(b) => b,
            Dram::Shared(_) => unreachable!("a read-only open runs no batch"),
        }
    }
}

/// Fixed-address DRAM copies of read-only opens: address, pool file, the copy.
#[allow(clippy::type_complexity)]
static READ_ONLY_COPIES: Mutex<Vec<(u64, std::path::PathBuf, std::sync::Weak<RegionBuf>)>> = Mutex::new(Vec::new());

/// A durable region (paper §3.2): reads run on a DRAM copy in parallel; a batch of
/// writes ([`Mangosteen::batch`]) is flat-combined with other threads' batches, its dirty
/// blocks are deduplicated and logged, and it returns only once its COMMIT is durable.
/// The backend applies committed batches to the PM copy; an open first replays what was
/// committed and not applied (M8), see [`Mangosteen::recovery`].
pub struct Mangosteen {
    shared: Arc<Shared>,
    dram: RwLock<Dram>,
    front: Mutex<Frontend>,
    block: usize,
    log: Log,
    /// `Ctx::mem_store` of compiler capture: 0, or 8 without memcpy capture.
    mem_store: usize,
    background: bool,
    /// Inline backend: apply the committed batches to the PM copy once their records take
    /// this many slots (see `end_tx`).
    apply_every: u64,
    backend: Option<std::thread::JoinHandle<()>>,
    recovery: pmkv_core::RecoveryReport,
    combining: Combining,
    batches: AtomicU64,
    requests: AtomicU64,
    _alloc: EpAlloc,
}

/// How a batch's commit reports that verification found missed writes.
const MISSED: &str = "capture missed: ";
/// How a batch reports that a request aborted it (`Tx::abort`) and it was rolled back.
const ROLLED_BACK: &str = "rolled back";

/// The inline backend applies committed batches to the PM copy once their records take
/// this many 64-byte slots (or half the ring, if less; or see `APPLY_LINES`), not after
/// every batch. A block
/// that several of those batches wrote (a node's length, a leaf being filled, the heap's
/// free lists) is then copied, checked and flushed once instead of once per batch; the
/// records stay in the ring until then, so a crash replays them (at most this many slots
/// more). Measured on the Dictionary (`examples/dictionary`, see docs/design/mangosteen.md).
const APPLY_EVERY: u64 = 512;

/// ... or once the window's batches wrote this many distinct lines of the PM copy. The
/// write that closes a window pays for applying all of it: with random keys (a batch
/// writing ~10 lines of its own) a 512-slot window held ~350 lines and put one write in
/// 30 at 30–35 µs, tripling the p99 of `bench run -w random` (34 µs where applying each
/// batch at once gave 12). At 64 lines that p99 is 11–13 µs, and a Dictionary insert
/// writes 12.2 PM lines instead of 11.4.
const APPLY_LINES: usize = 64;

/// Verify mode: the blocks the batch changed but did not capture, logged all the same
/// (added to the set), and described; `None` if there were none or verification is off.
/// Then the shadow becomes the region as the batch left it.
fn verify(front: &mut Frontend, dram: &[u8], block: usize) -> Option<String> {
    let shadow = front.shadow.as_mut()?;
    let (mut blocks, mut bytes, mut first) = (0usize, 0usize, None);
    // Whole pages first (one `memcmp` each), blocks only inside a page that changed.
    const PAGE: usize = 4096;
    for (p, (now_page, was_page)) in dram.chunks(PAGE).zip(shadow.chunks_mut(PAGE)).enumerate() {
        if now_page == was_page {
            continue;
        }
        for (i, (now, was)) in now_page.chunks(block).zip(was_page.chunks(block)).enumerate() {
            let off = (p * PAGE + i * block) as u64;
            let appended = || {
                front.appended.iter().any(|&e| {
                    let (s, t) = redo_log::entry_span(e, block as u64);
                    (s..t).contains(&off)
                })
            };
            if now != was && !front.dedup.contains(off) && !appended() {
                blocks += 1;
                bytes += now.iter().zip(was).filter(|(a, b)| a != b).count();
                first.get_or_insert(off);
                front.dedup.record(off, now.len());
                front.missed.push(off);
            }
        }
        was_page.copy_from_slice(now_page);
    }
    first
        .map(|f| format!("{bytes} changed bytes in {blocks} blocks were not captured (the first at region offset {f})"))
}

/// The core's recovery report for an open that replayed `r` (see [`Mangosteen::recovery`]).
fn report(pool: &Pool, r: Replay, took: std::time::Duration) -> pmkv_core::RecoveryReport {
    let mut rep =
        pmkv_core::RecoveryReport::new("mangosteen").with_detail("log_head", r.head).with_detail("log_tail", r.tail);
    rep.clean_shutdown = pool.was_clean();
    rep.rolled_forward = r.records;
    rep.duration = took;
    rep
}

fn check_options(o: &Options) -> Result<()> {
    let bad = |m: &str| Err(Error::InvalidOption(m.into()));
    if ![8, 16, 32].contains(&o.block_size) {
        return bad("block_size must be 8, 16 or 32");
    }
    if o.region_size == 0 || !o.region_size.is_multiple_of(o.block_size as u64) || o.region_size > 1 << 36 {
        return bad("region_size must be a positive multiple of the block size, at most 64 GiB");
    }
    if o.ring_records < 2 || o.ring_records > 1 << 30 {
        return bad("ring_records must be between 2 and 2^30");
    }
    if !o.dedup_slots.is_power_of_two() {
        return bad("dedup_slots must be a power of two");
    }
    if o.log == Log::PerWrite && o.capture == Capture::Pages {
        return bad(
            "per-write logging needs compiler or explicit capture (page capture finds writes only at the batch's end)",
        );
    }
    Ok(())
}

/// Why [`Mangosteen::open`] refuses [`Capture::Compiler`] without verify mode.
const NOT_INSTRUMENTED: &str = "Capture::Compiler captures only the stores of code compiled with pmkv's \
    instrumentation, which from Rust is only the mangosteen engine's own map (engine \"mangosteen\", \
    MangosteenEngine); the stores a batch closure makes into the region (to a structure of its own, a HashMap \
    say) would not be captured, would be acknowledged, and would be lost at the next open. Use Capture::Pages \
    for your own structures (or Tx::write / Tx::record), or C or C++ built with pmkv-cc / pmkv-c++ through the \
    C API; verify_capture: true allows it for checking (every uncaptured write then fails its batch and is \
    logged all the same)";

/// Proof that the code which writes a region's batches was compiled with pmkv's
/// instrumentation, for [`Mangosteen::open_instrumented`]: made only by
/// [`Instrumented::code_at`], which finds the code's module among those that registered
/// themselves when loaded (C and C++ built with `pmkv-cc` / `pmkv-c++`, `c-hooks`).
#[derive(Debug)]
pub struct Instrumented(());

impl Instrumented {
    /// The token for the compiler-captured code at `addr` (a function of the application,
    /// such as its `process_request`), or why there is none: its module (the program or
    /// shared library holding it) did not register itself when it was loaded, which code
    /// compiled with `pmkv-cc` / `pmkv-c++` does; or it registered with another ABI.
    pub fn code_at(addr: usize) -> Result<Instrumented> {
        compiler_capture::registered(addr).map(|()| Instrumented(())).map_err(Error::NotInstrumented)
    }
}

/// Whether an open may refuse a larger `region_size` than the region has (see `open`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SizeCheck {
    /// The size was asked for: refuse a larger one.
    Strict,
    /// The size is the caller's default, not the user's wish: open whatever size exists.
    Existing,
}

impl Mangosteen {
    /// Open the region in `pool`, creating it (with `opts`' geometry) if the pool has none;
    /// an existing region is recovered (committed batches replayed) before this returns.
    ///
    /// Refused: an existing region smaller than `opts.region_size` ([`Error::RegionSize`]:
    /// regions keep their size, and a larger one asked for must not be silently ignored);
    /// [`Capture::Compiler`] without `verify_capture` ([`Error::NotInstrumented`]: only
    /// instrumented code's stores are captured, and no Rust code of the caller's is; see
    /// [`Mangosteen::open_instrumented`]).
    pub fn open(pool: Arc<Pool>, opts: Options) -> Result<Mangosteen> {
        if opts.capture == Capture::Compiler && !opts.verify_capture {
            return Err(Error::NotInstrumented(NOT_INSTRUMENTED.into()));
        }
        Self::open_inner(pool, opts, SizeCheck::Strict, None)
    }

    /// [`Mangosteen::open`] for a region whose batches' stores are made by code compiled
    /// with pmkv's instrumentation, which `_code` proves (the C API opens compiler-captured
    /// regions this way, after finding `process_request` registered).
    pub fn open_instrumented(pool: Arc<Pool>, opts: Options, _code: &Instrumented) -> Result<Mangosteen> {
        Self::open_inner(pool, opts, SizeCheck::Strict, None)
    }

    /// `open` without the check of the capture (the engine's map, or `module`, is
    /// instrumented code): compiler capture starts `module`'s hooks around each batch, or
    /// the engine's library's when `None` (C code's hooks are this crate's, started too).
    pub(crate) fn open_inner(
        pool: Arc<Pool>,
        mut opts: Options,
        mut sizes: SizeCheck,
        module: Option<&'static CapturedModule>,
    ) -> Result<Mangosteen> {
        if opts.region_size == 0 {
            opts.region_size = DEFAULT_REGION;
            sizes = SizeCheck::Existing;
        }
        check_options(&opts)?;
        let started = std::time::Instant::now();
        let fresh = pool.root(SUPER_ROOT) == 0;
        let (alloc, sb) = if fresh {
            pool.check_writable()?;
            format(pool.clone(), &opts)?
        } else {
            let alloc = EpAlloc::open(pool.clone())?;
            let sb = pool.root(SUPER_ROOT);
            (alloc, sb)
        };
        let (version, block, cap, size, ring, region, addr, checks) = read_super(&pool, &alloc, sb)?;
        if sizes == SizeCheck::Strict && opts.region_size > size {
            return Err(Error::RegionSize { existing: size, asked: opts.region_size });
        }
        let pm = PmCopy { region, size, checks };
        let mut log = RedoLog::new(pool.clone(), ring, cap, sb, version);
        let replay = if pool.is_read_only() {
            Replay { head: log.p_head(), tail: log.p_tail(), records: 0 }
        } else {
            recovery::replay(&log, &pm)?
        };
        if !pool.is_read_only() {
            // A superblock the root does not name is one an interrupted upgrade left.
            let mut stale = Vec::new();
            alloc.for_each_used(SUPER, |o| stale.extend((o != sb).then_some(o)));
            for o in stale {
                alloc.free(o);
            }
            if version == SUPER_VERSION_2 {
                let sb = upgrade(&pool, &alloc, sb)?;
                log = RedoLog::new(pool.clone(), ring, cap, sb, SUPER_VERSION);
            }
        }
        let (head, tail) = (log.p_head(), log.p_tail());
        if pool.is_read_only() && head != tail {
            return Err(Error::Pool(pmkv_substrate::PoolError::NeedsRecovery {
                path: pool.path().map(|p| p.to_path_buf()).unwrap_or_default(),
            }));
        }
        let map_at = |a: u64| {
            RegionBuf::new_at(a as usize, size as usize).map_err(|e| match e.kind() {
                std::io::ErrorKind::AddrInUse | std::io::ErrorKind::AlreadyExists => Error::AddressInUse { addr: a },
                _ => Error::Io(e),
            })
        };
        // SAFETY: the region object lies inside the pool (validated by `read_super`) and
        // nothing writes it now (recovery is done; the backend is not running yet).
        let pm_copy = || unsafe { std::slice::from_raw_parts(pool.at::<u8>(region), size as usize) };
        // A region this call just formatted is all zero, as a new anonymous mapping is:
        // nothing to copy (and no DRAM page touched before the application uses it).
        let dram = if addr == 0 {
            let mut d = RegionBuf::new(size as usize)?;
            if !fresh {
                d.fill_from(pm_copy());
            }
            Dram::Own(d)
        } else if pool.is_read_only() {
            let file = pool.path().map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()));
            let mut copies = READ_ONLY_COPIES.lock();
            copies.retain(|(_, _, w)| w.strong_count() > 0);
            let found = copies
                .iter()
                .find(|(a, f, _)| *a == addr && file.as_ref() == Some(f))
                .and_then(|(_, _, w)| w.upgrade());
            match found {
                Some(d) => Dram::Shared(d),
                None => {
                    let mut d = map_at(addr)?;
                    d.fill_from(pm_copy());
                    let d = Arc::new(d);
                    if let Some(f) = file {
                        copies.push((addr, f, Arc::downgrade(&d)));
                    }
                    Dram::Shared(d)
                }
            }
        } else {
            let mut d = map_at(addr)?;
            if !fresh {
                d.fill_from(pm_copy());
            }
            Dram::Own(d)
        };
        // A region this call just formatted holds what its checks were computed from; every
        // other open proves its whole PM copy against them.
        if !fresh {
            pm.verify(&pool)?;
        }
        let compiler = match opts.capture {
            Capture::Compiler if !pool.is_read_only() => match module {
                Some(m) => Some(m),
                None => Some(compiler_capture::app().map_err(Error::Capture)?.module),
            },
            _ => None,
        };
        let recovery = report(&pool, replay, started.elapsed());
        let shared = Arc::new(Shared { log, pm, size, stop: AtomicBool::new(false), failed: Mutex::new(None) });
        let backend = (opts.background && !pool.is_read_only()).then(|| {
            let s = shared.clone();
            std::thread::spawn(move || run_backend(&s))
        });
        Ok(Mangosteen {
            front: Mutex::new(Frontend {
                dedup: DedupSet::new(block, opts.dedup_slots, opts.dedup),
                pages: (opts.capture == Capture::Pages && !pool.is_read_only()).then(|| PageCapture::new(&dram)),
                compiler,
                shadow: (opts.verify_capture && !pool.is_read_only()).then(|| dram.to_vec()),
                tail,
                head,
                applied: head,
                pending: DirtyLines::new(size),
                pended: head,
                started: tail,
                missed: Vec::new(),
                blocks: Vec::new(),
                ranges: Vec::new(),
                runs: Vec::new(),
                rec: Vec::new(),
                appended: Vec::with_capacity(APPENDED),
            }),
            shared,
            dram: RwLock::new(dram),
            block,
            log: opts.log,
            mem_store: if opts.memcpy_capture { 0 } else { 8 },
            background: backend.is_some(),
            apply_every: (cap / 2).clamp(1, APPLY_EVERY),
            backend,
            recovery,
            combining: Combining::default(),
            batches: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            _alloc: alloc,
        })
    }

    /// What the open's recovery did (M8), in the core's report: `clean_shutdown` as the
    /// pool recorded it, `rolled_forward` = the redo log's 64-byte slots replayed onto
    /// the PM copy (the records of whole batches), `duration` = the replay plus the
    /// rebuild of the DRAM copy, and the log's persistent head and tail as found, as the
    /// details `log_head` and `log_tail` (read them with `detail_u64`). `records` is left 0: the region is bytes to the
    /// runtime; the `mangosteen` engine fills it with its map's length.
    pub fn recovery(&self) -> &pmkv_core::RecoveryReport {
        &self.recovery
    }

    /// The redo log's persistent head and tail (records applied / records committed,
    /// counted since the region was created).
    pub fn log_indices(&self) -> (u64, u64) {
        (self.shared.log.p_head(), self.shared.log.p_tail())
    }

    /// Region size in bytes.
    pub fn size(&self) -> u64 {
        self.shared.size
    }

    /// The pool the region lives in.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.shared.log.pool
    }

    /// The DRAM copy's first byte: fixed for the pool's life with
    /// [`Options::fixed_address`], else for this open's.
    pub fn region_base(&self) -> usize {
        self.dram.read().base()
    }

    /// Read the region (the DRAM copy), in parallel with other readers.
    pub fn read<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.dram.read())
    }

    /// Run `f` as part of a batch of writes; returns once the batch is durable (its
    /// COMMIT and the tail covering it are persistent). Concurrent callers are combined
    /// into one batch by flat combining (the paper's Fig. 2): `f` may run on
    /// another thread, and shares the batch's single fence and persist with the others.
    /// Writes `f` made before it returned an error (or panicked) still commit: they are in
    /// the DRAM copy, which must not run ahead of the log. A panic in `f` is re-raised here.
    pub fn batch<R: Send>(&self, f: impl FnOnce(&mut Tx<'_>) -> R + Send) -> Result<R> {
        self.shared.log.pool.check_writable()?;
        let mut f = Some(f);
        let mut result: Option<R> = None;
        // Whether this request aborted its batch (`Tx::abort` called while it ran).
        let mut aborted_here = false;
        let mut job = |tx: &mut Tx<'_>| {
            if let Some(f) = f.take() {
                let before = tx.aborted;
                result = Some(f(tx));
                aborted_here = !before && tx.aborted;
            }
        };
        let mem_store = self.mem_store;
        let outcome = self.combining.submit(&mut job, &|b: &mut Batch| {
            let mut front = self.front.lock();
            let mut guard = self.dram.write();
            let dram = guard.own();
            front.started = front.tail;
            let mut aborted = false;
            {
                let front = &mut *front;
                match &mut front.pages {
                    None if self.log == Log::PerWrite => {
                        let fp: *mut Frontend = front;
                        // SAFETY: `fp` is the locked frontend, valid for this block.
                        let dedup: *mut DedupSet = unsafe { &raw mut (*fp).dedup };
                        let mut eager = Eager { rt: self, front: fp, dram: dram.as_ptr(), pending: None, err: None };
                        let ep: *mut Eager = &mut eager;
                        {
                            // SAFETY: `eager` outlives the guard, dropped at the end of
                            // this block; the hooks and `tx` use it on this thread only.
                            let _capture = unsafe { (*fp).compiler }.map(|module| unsafe {
                                compiler_capture::Capture::begin_with(
                                    module,
                                    dram,
                                    1,
                                    mem_store,
                                    record_eager,
                                    ep.cast(),
                                )
                            });
                            let mut tx = Tx::new(&mut *dram, dedup);
                            tx.eager = NonNull::new(ep as *mut dyn EagerLog);
                            b.run(&mut tx);
                            aborted = tx.aborted;
                        }
                        crate::SplitAlloc::outside(|| eager.settle());
                        if let Some(e) = eager.err {
                            return Err(e.to_string());
                        }
                    }
                    None => {
                        let dedup: *mut DedupSet = &mut front.dedup;
                        // The ablation without deduplication keeps every block in capture
                        // order in the set: nothing is appended aside.
                        let mut none = Vec::new();
                        let appended: *mut Vec<u64> =
                            if front.dedup.is_enabled() { &mut front.appended } else { &mut none };
                        // SAFETY: `dedup` and `appended` outlive the guard, dropped at the
                        // end of this block, and nothing else uses them meanwhile.
                        let _capture = front.compiler.map(|module| unsafe {
                            compiler_capture::Capture::begin(module, dram, self.block, mem_store, dedup, appended)
                        });
                        let mut tx = Tx::new(&mut *dram, dedup);
                        b.run(&mut tx);
                        aborted = tx.aborted;
                    }
                    Some(pages) => {
                        let dedup = &mut front.dedup;
                        let mut changed = Vec::new();
                        pages.run(
                            dram,
                            self.block,
                            |buf| {
                                let mut tx = Tx::new(buf, &mut *dedup);
                                b.run(&mut tx);
                                aborted = tx.aborted;
                            },
                            |off| changed.push(off),
                        );
                        for off in changed {
                            dedup.record(off, self.block);
                        }
                    }
                }
            }
            if aborted {
                self.roll_back(&mut front, dram).map_err(|e| e.to_string())?;
                return Err(ROLLED_BACK.into());
            }
            // Only the combiner, holding `front`, moves them: a load and a store each, not
            // two locked read-modify-writes per batch.
            self.batches.store(self.batches.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            self.requests.store(self.requests.load(Ordering::Relaxed) + b.len() as u64, Ordering::Relaxed);
            let missed = verify(&mut front, dram, self.block);
            // Readers wait until the batch is durable: one that saw its writes before a
            // crash lost them would have seen a state that never was (durable
            // linearizability).
            self.end_tx(&mut front, dram).map_err(|e| e.to_string())?;
            match missed {
                Some(m) => Err(format!("{MISSED}{m}")),
                None => Ok(()),
            }
        });
        match outcome {
            Outcome::Ok => Ok(result.expect("a request that ran has a result")),
            Outcome::CommitPanicked => Err(Error::Panicked("the combiner panicked while committing the batch".into())),
            Outcome::Failed(e) if e == ROLLED_BACK => {
                Err(if aborted_here { Error::Aborted } else { Error::RolledBack })
            }
            Outcome::Failed(e) => match e.strip_prefix(MISSED) {
                Some(m) => Err(Error::CaptureMissed(m.to_string())),
                None => Err(Error::Corrupt(format!("the batch could not be committed: {e}"))),
            },
            Outcome::Panicked(p) => std::panic::resume_unwind(p),
        }
    }

    /// Batches committed and requests they held, since the open: requests ÷ batches is the
    /// flat-combining batch size B of the paper's cost model.
    pub fn batch_stats(&self) -> (u64, u64) {
        (self.batches.load(Ordering::Relaxed), self.requests.load(Ordering::Relaxed))
    }

    /// Fig. 3 lines 20–32: log every dirty block, then the COMMIT; one fence; the tail;
    /// one persist (§4.3: "1 pfence and 1 psync" per batch).
    ///
    /// The inline backend adds two fences per window of batches, none per batch. The
    /// paper's backend fences each batch's blocks and persists the head (Fig. 4 lines
    /// 21–24), which is a second fence and persist when it runs on the committing thread.
    /// Here it keeps the batch's runs and, once a window of batches is committed
    /// (`APPLY_EVERY`), applies them at once after a commit, checks then bytes, each
    /// fenced on this thread (`backend::apply_from_dram`; left to the next batch's fence,
    /// the bytes were ordered by no fence when that batch ran on another thread: issue
    /// 62); the head is moved past them at the next batch's commit, stored and flushed
    /// before the tail so that the tail's persist makes both durable. A
    /// crash in between leaves the head before the applied window, which recovery replays
    /// (the replay is idempotent, and the open's line check skips the lines pending
    /// records write). Slots are reused only below the durable head (`front.head`).
    fn end_tx(&self, front: &mut Frontend, dram: &[u8]) -> Result<()> {
        if front.dedup.is_empty() && front.appended.is_empty() {
            return Ok(());
        }
        let log = &self.shared.log;
        let (mut blocks, mut ranges) = (std::mem::take(&mut front.blocks), std::mem::take(&mut front.ranges));
        // The paper's no-deduplication ablation (Fig. 7) logs every captured write's blocks
        // as they came, duplicates included; merging sorted runs would deduplicate them.
        let dedup = front.dedup.is_enabled();
        front.dedup.drain_into(&mut blocks, &mut ranges);
        // The hooks' appended blocks, duplicates included: sorted with the set's, the
        // batch's runs hold each block once (`runs_of`).
        blocks.extend_from_slice(&front.appended);
        front.appended.clear();
        if dedup {
            blocks.sort_unstable();
            ranges.sort_unstable();
        }
        let start = front.started;
        // One record of the batch's runs, its COMMIT. Per-write logging logged every
        // captured write already; only what verify mode found missed is left.
        let r = if self.log == Log::PerWrite {
            let mut missed = std::mem::take(&mut front.missed);
            missed.sort_unstable();
            let r = self.log_runs(front, &missed, &[], true, dram);
            missed.clear();
            front.missed = missed;
            r
        } else if dedup {
            front.missed.clear();
            self.log_runs(front, &blocks, &ranges, true, dram)
        } else {
            front.missed.clear();
            let (b, size) = (self.block as u64, self.shared.size);
            let mut runs = std::mem::take(&mut front.runs);
            runs.clear();
            runs.extend(blocks.iter().map(|&a| (a, (a + b).min(size))));
            front.runs = runs;
            blocks.sort_unstable();
            self.log_record(front, true, dram)
        };
        if let Err(e) = r {
            (front.blocks, front.ranges) = (blocks, ranges);
            return Err(e);
        }
        log.pool.fence(); // line 28
        let head = front.applied;
        if !self.background && head > front.head {
            log.store_p_head(head);
        }
        log.set_p_tail(front.tail); // lines 29–31: the tail (and the head) durable
        let mut r = Ok(());
        if !self.background {
            front.head = head;
            if front.pended == start {
                // The batched log's record holds exactly the batch's runs (`log_runs` left
                // them in `front.runs`); per-write logging's COMMIT only the missed ones,
                // and the no-deduplication ablation's every block as captured.
                let mut runs = std::mem::take(&mut front.runs);
                if self.log == Log::PerWrite || !dedup {
                    redo_log::runs_of(&blocks, &ranges, self.block as u64, self.shared.size, &mut runs);
                }
                front.pending.add(&runs);
                front.runs = runs;
                front.pended = front.tail;
                if front.tail - front.applied >= self.apply_every || front.pending.len() >= APPLY_LINES {
                    self.apply_pending(front, dram);
                }
            } else {
                // An earlier batch's records are not in `pending` (an apply from the
                // records failed): go by the records.
                r = backend::apply(log, &self.shared.pm, front.applied, front.tail, false).map(|a| front.applied = a);
                front.pending.clear();
                front.pended = front.applied;
            }
        }
        (front.blocks, front.ranges) = (blocks, ranges);
        r
    }

    /// Undo a batch a request aborted (`Tx::abort`): put every block it wrote back as the
    /// last committed batch left it, and forget the batch (nothing of it is logged, and
    /// per-write logging's records past the committed tail are dropped: never covered by
    /// a COMMIT, recovery never reads them). The before images come from the PM copy,
    /// first brought up to the committed state (the inline backend applies the records
    /// it deferred, from the log; the background one is waited for), or in verify mode
    /// from the shadow, which restores uncaptured writes too. Nothing durable changes
    /// but what the backend would apply anyway, with flushes only: a crash here recovers
    /// the last committed state, as before the batch.
    fn roll_back(&self, front: &mut Frontend, dram: &mut RegionBuf) -> Result<()> {
        let log = &self.shared.log;
        let committed = front.started;
        let (b, size) = (self.block as u64, self.shared.size);
        let (mut blocks, mut ranges) = (std::mem::take(&mut front.blocks), std::mem::take(&mut front.ranges));
        front.dedup.drain_into(&mut blocks, &mut ranges);
        ranges.extend(blocks.iter().map(|&a| (a, a + b)));
        ranges.extend(front.appended.drain(..).map(|e| redo_log::entry_span(e, b)));
        front.missed.clear();
        if self.background {
            while log.p_head() < committed {
                if let Some(e) = self.shared.failed.lock().clone() {
                    return Err(Error::Corrupt(format!("the backend stopped: {e}")));
                }
                std::thread::yield_now();
            }
        } else {
            if front.applied < committed {
                front.applied = backend::apply(log, &self.shared.pm, front.applied, committed, false)?;
            }
            front.pending.clear();
            front.pended = front.applied;
        }
        front.tail = committed;
        // Page capture keeps the region read-only between batches.
        let protected = front.pages.is_some();
        if protected {
            dram.protect(libc::PROT_READ | libc::PROT_WRITE);
        }
        match &front.shadow {
            Some(shadow) => dram.copy_from_slice(shadow),
            None => {
                let pm = self.shared.pm.region;
                for &(s, t) in &ranges {
                    let t = t.min(size);
                    // SAFETY: `s..t` lies in the PM copy (region offsets below its size),
                    // which nothing writes now (no batch commits while we hold the frontend,
                    // and the backend has applied everything committed).
                    let src = unsafe { std::slice::from_raw_parts(log.pool.at::<u8>(pm + s), (t - s) as usize) };
                    dram[s as usize..t as usize].copy_from_slice(src);
                }
            }
        }
        if protected {
            dram.protect(libc::PROT_READ);
        }
        blocks.clear();
        ranges.clear();
        (front.blocks, front.ranges) = (blocks, ranges);
        Ok(())
    }

    /// Log `blocks` and `ranges` (sorted; see `redo_log::runs_of`; their bytes as `dram`
    /// holds them) as one record at the tail
    /// (Fig. 3 lines 20–26 and 33–41, `rb_enque` of the batch's runs at once): a COMMIT
    /// if `commit`, else a REDO of a batch still running. Waits while the ring is full
    /// (back-pressure on the backend).
    fn log_runs(
        &self,
        front: &mut Frontend,
        blocks: &[u64],
        ranges: &[(u64, u64)],
        commit: bool,
        dram: &[u8],
    ) -> Result<()> {
        redo_log::runs_of(blocks, ranges, self.block as u64, self.shared.size, &mut front.runs);
        self.log_record(front, commit, dram)
    }

    /// Log `front.runs` as one record at the tail (see [`log_runs`](Mangosteen::log_runs)).
    fn log_record(&self, front: &mut Frontend, commit: bool, dram: &[u8]) -> Result<()> {
        let log = &self.shared.log;
        let runs = std::mem::take(&mut front.runs);
        let slots = redo_log::slots_for(&runs);
        let r = self.make_room(front, slots);
        if r.is_ok() {
            let mut rec = std::mem::take(&mut front.rec);
            front.tail += log.write(front.tail, commit, &runs, dram, &mut rec);
            front.rec = rec;
        }
        front.runs = runs;
        r
    }

    /// Wait until `slots` slots are free at the tail.
    fn make_room(&self, front: &mut Frontend, slots: u64) -> Result<()> {
        let log = &self.shared.log;
        let too_big = || {
            Err(Error::InvalidOption(format!(
                "a batch of more than {} slots of records does not fit in the redo ring",
                log.cap
            )))
        };
        if slots > log.cap {
            return too_big();
        }
        while front.tail + slots - front.head > log.cap {
            if self.background {
                if let Some(e) = self.shared.failed.lock().clone() {
                    return Err(Error::Corrupt(format!("the backend stopped: {e}")));
                }
                // Everything committed is applied and the ring is still full: it holds
                // only this batch, which can never commit. Refuse it.
                if log.p_head() == log.p_tail() && front.head == log.p_head() {
                    return too_big();
                }
                std::thread::yield_now();
                front.head = log.p_head();
            } else {
                // Inline backend: apply what is committed so far and make it durable. A
                // batch larger than the ring cannot commit (its first records would be
                // overwritten before its COMMIT): refuse it rather than wait forever.
                let durable = log.p_tail();
                if durable == front.head {
                    return too_big();
                }
                self.settle(front, durable)?;
            }
        }
        Ok(())
    }

    /// Inline backend, deferred apply: copy the blocks of every committed batch not yet
    /// applied from the DRAM copy to the PM copy, each block once however many of those
    /// batches wrote it. `dram` must hold exactly the committed state (no batch running:
    /// the caller holds the frontend, after `end_tx` or outside any batch), and `pending`
    /// must describe every record past `applied` (`pended` is the tail). The blocks are
    /// durable when it returns (fenced on this thread, see `backend::apply_from_dram`);
    /// the head is moved past their records at the next commit (or `settle`), so a crash
    /// before that replays them.
    fn apply_pending(&self, front: &mut Frontend, dram: &[u8]) {
        let mut runs = std::mem::take(&mut front.runs);
        front.pending.drain_runs(self.shared.size, &mut runs);
        backend::apply_from_dram(&self.shared.log.pool, &self.shared.pm, dram, &runs);
        front.runs = runs;
        front.applied = front.pended;
    }

    /// Inline backend: apply the records up to `to` (at most the persistent tail) not yet
    /// applied, make them durable, and persist the head past them (Fig. 4 lines 21–24).
    fn settle(&self, front: &mut Frontend, to: u64) -> Result<()> {
        let log = &self.shared.log;
        if front.applied < to {
            front.applied = backend::apply(log, &self.shared.pm, front.applied, to, false)?;
            if front.applied >= front.pended {
                front.pending.clear();
                front.pended = front.applied;
            }
        }
        if front.head < front.applied {
            // Every apply fenced its bytes on its own thread already.
            log.set_p_head(front.applied);
            front.head = front.applied;
        }
        Ok(())
    }

    /// Wait until the backend has applied every committed batch and made it durable (the
    /// PM copy is then the DRAM copy, and the persistent head equals the tail).
    pub fn quiesce(&self) -> Result<()> {
        let log = &self.shared.log;
        if !self.background {
            // No backend thread: apply here what is committed and not yet applied (a
            // batch whose commit was interrupted after its tail became durable).
            let mut front = self.front.lock();
            let tail = log.p_tail();
            if front.head < tail && !log.pool.is_read_only() {
                // Holding the frontend, no batch runs: the DRAM copy is the committed state.
                if front.applied < front.pended && front.pended == tail {
                    self.apply_pending(&mut front, &self.dram.read());
                }
                self.settle(&mut front, tail)?;
            }
            return Ok(());
        }
        let tail = log.p_tail();
        while log.p_head() < tail {
            if let Some(e) = self.shared.failed.lock().clone() {
                return Err(Error::Corrupt(format!("the backend stopped: {e}")));
            }
            std::thread::yield_now();
        }
        Ok(())
    }
}

impl Drop for Mangosteen {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        // The inline backend's last batch is applied but its head not yet persisted: do it
        // now, so that the next open has nothing to replay. (A failure here changes
        // nothing durable: that open replays the batch.)
        // Not while unwinding: a second panic there (a fault hook's) would abort.
        if !self.background && !self.shared.log.pool.is_read_only() && !std::thread::panicking() {
            let _ = self.quiesce();
        }
        if let Some(t) = self.backend.take() {
            let _ = t.join();
        }
    }
}

/// The backend thread (Fig. 4 main loop): apply what is committed, else wait a little.
fn run_backend(s: &Shared) {
    // A panic (say, an injected fault) must not leave writers waiting for a head that
    // will never move: it becomes the backend's error.
    if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| backend_loop(s))) {
        let what = p.downcast_ref::<&str>().map(|m| m.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
        *s.failed.lock() = Some(format!("the backend panicked: {}", what.unwrap_or_default()));
    }
}

fn backend_loop(s: &Shared) {
    let mut head = s.log.p_head();
    loop {
        let tail = s.log.p_tail();
        if head < tail {
            match backend::apply(&s.log, &s.pm, head, tail, true) {
                Ok(h) => head = h,
                Err(e) => {
                    *s.failed.lock() = Some(e.to_string());
                    return;
                }
            }
        } else if s.stop.load(Ordering::Acquire) {
            return;
        } else {
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
    }
}

/// The most heap an allocator object of `size` bytes can take where none of its kind
/// exists yet: a new chunk of its size class (a chunk's header is smaller than an
/// extent's page), or its extent, each with a page for alignment.
fn space_for(size: u64) -> u64 {
    use pmkv_substrate::epalloc::{class_of, CLASSES, SLOTS};
    let body = match class_of(size as usize) {
        Some(c) => (SLOTS * CLASSES[c]) as u64 + extent::EXT_HEAD,
        None => extent::extent_len(size as usize).unwrap_or(u64::MAX),
    };
    body.saturating_add(extent::PAGE)
}

/// Create the superblock, ring and PM copy (all EPallocator objects, so nothing leaks):
/// written and persisted, published, and only then named by the pool root. A crash before
/// the root leaves published objects no root names; the next attempt frees them first.
fn format(pool: Arc<Pool>, o: &Options) -> Result<(EpAlloc, u64)> {
    let alloc = if pool.root(pmkv_substrate::epalloc::EPALLOC_ROOT) == 0 {
        EpAlloc::create(pool.clone())?
    } else {
        EpAlloc::open(pool.clone())?
    };
    for ty in [SUPER, RING, REGION, CHECKS] {
        let mut stale = Vec::new();
        alloc.for_each_used(ty, |o| stale.push(o));
        for s in stale {
            alloc.free(s);
        }
    }
    let ring_len = o.ring_records * RECORD as u64;
    // Grow the pool once, to hold all four objects: it grows by doubling, so allocating
    // the region (most of the pool) and then the smaller line checks after it would double
    // the file (272 → 544 MiB for the default region, every byte allocated). The
    // objects' order (and the pool's layout) stays as it was.
    let checks_bytes = PmCopy::checks_len(o.region_size).max(64);
    let need: u64 = [SUPER_SIZE as u64, ring_len, o.region_size, checks_bytes].iter().map(|&n| space_for(n)).sum();
    pool.ensure_size(pool.heap_top().saturating_add(need).min(pool.max_size()))?;
    let addr = if o.fixed_address { RegionBuf::pick_address(o.region_size as usize)? } else { 0 };
    let sb = alloc.alloc(SUPER, SUPER_SIZE)?;
    let ring = alloc.alloc(RING, ring_len as usize)?;
    let region = alloc.alloc(REGION, o.region_size as usize)?;
    let pm = PmCopy { region, size: o.region_size, checks: 0 };
    let checks_len = PmCopy::checks_len(o.region_size) as usize;
    // At least a line, so that the object is line-aligned and its offset ÷ 64 exact.
    let checks = alloc.alloc(CHECKS, checks_len.max(64))?;
    if !checks.is_multiple_of(64) {
        return Err(Error::Corrupt(format!("the line checks object at {checks:#x} is not line-aligned")));
    }
    // SAFETY: four reserved objects of these sizes, not yet reachable from anything.
    unsafe {
        std::ptr::write_bytes(pool.at::<u8>(sb), 0, SUPER_SIZE);
        std::ptr::write_bytes(pool.at::<u8>(ring), 0, ring_len as usize);
        std::ptr::write_bytes(pool.at::<u8>(region), 0, o.region_size as usize);
        let pm = PmCopy { checks, ..pm };
        // The checks of zero lines, from a zero line in a register rather than from the
        // region just cleared (a pass over it, read back from memory); the last line may
        // be short.
        let zero = [0u8; LINE as usize];
        for l in 0..pm.lines() {
            let len = LINE.min(pm.size - l * LINE) as usize;
            let c = if len == LINE as usize {
                // `line_check` of a whole zero line, unrolled (the same CRC-32C).
                pmkv_substrate::checksum::crc32c_words([l * LINE, 0, 0, 0, 0, 0, 0, 0, 0])
            } else {
                line_check(l * LINE, &zero[..len])
            };
            (pool.at::<u8>(checks + 4 * l) as *mut u32).write(c);
        }
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&SUPER_MAGIC);
        b[8..12].copy_from_slice(&SUPER_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(o.block_size as u32).to_le_bytes());
        b[16..24].copy_from_slice(&o.ring_records.to_le_bytes());
        b[24..32].copy_from_slice(&o.region_size.to_le_bytes());
        b[32..40].copy_from_slice(&ring.to_le_bytes());
        b[40..48].copy_from_slice(&region.to_le_bytes());
        b[48..56].copy_from_slice(&(addr as u64).to_le_bytes());
        b[56..60].copy_from_slice(&((checks / 64) as u32).to_le_bytes());
        let crc = crc32fast::hash(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        std::ptr::copy_nonoverlapping(b.as_ptr(), pool.at::<u8>(sb), 64);
    }
    pool.flush_off(sb, SUPER_SIZE);
    pool.flush_off(ring, ring_len as usize);
    pool.flush_off(region, o.region_size as usize);
    pool.flush_off(checks, checks_len);
    pool.fence();
    alloc.publish(sb);
    alloc.publish(ring);
    alloc.publish(region);
    alloc.publish(checks);
    pool.set_root(SUPER_ROOT, sb);
    Ok((alloc, sb))
}

/// Format version, block size, ring capacity, region size, ring and region offsets, fixed
/// DRAM address, line checks' offset.
type Super = (u32, usize, u64, u64, u64, u64, u64, u64);

/// The superblock's first line with its version set to `version` and its check recomputed.
fn super_line(mut b: [u8; 64], version: u32) -> [u8; 64] {
    b[8..12].copy_from_slice(&version.to_le_bytes());
    let crc = crc32fast::hash(&b[..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Move a pool of format 2 whose ring is empty (recovery has replayed it) to format 3:
/// the two differ only in the ring's records, which an empty ring holds none of. The
/// version lives in the superblock's checked first line, which a crash could leave torn
/// if it were rewritten in place; so a copy of the superblock with the new version is
/// written, persisted and published, the root is moved to it (one atomic 8-byte persist),
/// and the old one freed. A crash before the root moves leaves the pool at format 2 (and
/// the new copy to the next open's sweep of unnamed superblocks); after, at format 3 (and
/// the old copy to that sweep). Returns the new superblock.
fn upgrade(pool: &Pool, alloc: &EpAlloc, sb: u64) -> Result<u64> {
    let new = alloc.alloc(SUPER, SUPER_SIZE)?;
    let mut first = [0u8; 64];
    // SAFETY: both objects are SUPER_SIZE bytes inside the pool (`read_super` validated
    // the old one; the allocator gave the new one), distinct, and nothing else uses them:
    // the new one is not yet reachable, the old one is only read.
    unsafe {
        std::ptr::copy_nonoverlapping(pool.at::<u8>(sb), pool.at::<u8>(new), SUPER_SIZE);
        first.copy_from_slice(std::slice::from_raw_parts(pool.at::<u8>(sb), 64));
        let first = super_line(first, SUPER_VERSION);
        std::ptr::copy_nonoverlapping(first.as_ptr(), pool.at::<u8>(new), 64);
    }
    pool.flush_off(new, SUPER_SIZE);
    pool.fence();
    alloc.publish(new);
    pool.set_root(SUPER_ROOT, new);
    alloc.free(sb);
    Ok(new)
}

/// Validate the superblock and read its fields.
fn read_super(pool: &Pool, alloc: &EpAlloc, sb: u64) -> Result<Super> {
    let bad = |m: String| Err(Error::Corrupt(m));
    if alloc.type_of(sb) != Some(SUPER) || !alloc.is_used(sb) || !pool.contains(sb, SUPER_SIZE as u64) {
        return bad(format!("root {sb:#x} does not name a used superblock"));
    }
    let mut b = [0u8; 64];
    // SAFETY: inside the pool (checked); the superblock's first line is written once, by
    // `format`, before the root names it.
    b.copy_from_slice(unsafe { std::slice::from_raw_parts(pool.at::<u8>(sb), 64) });
    if b[0..8] != SUPER_MAGIC || u32::from_le_bytes(b[60..64].try_into().unwrap()) != crc32fast::hash(&b[..60]) {
        return bad("bad superblock magic or checksum".into());
    }
    let version = u32::from_le_bytes(b[8..12].try_into().unwrap());
    if version != SUPER_VERSION && version != SUPER_VERSION_2 {
        return Err(Error::Version { found: version, supported: SUPER_VERSION });
    }
    let block = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
    let cap = u64::from_le_bytes(b[16..24].try_into().unwrap());
    let size = u64::from_le_bytes(b[24..32].try_into().unwrap());
    let ring = u64::from_le_bytes(b[32..40].try_into().unwrap());
    let region = u64::from_le_bytes(b[40..48].try_into().unwrap());
    let addr = u64::from_le_bytes(b[48..56].try_into().unwrap());
    let checks = u32::from_le_bytes(b[56..60].try_into().unwrap()) as u64 * 64;
    let ok_obj = |o: u64, ty, len: u64| {
        alloc.type_of(o) == Some(ty) && alloc.is_used(o) && pool.contains(o, len) && alloc.capacity(o) as u64 >= len
    };
    if ![8, 16, 32].contains(&block)
        || cap < 2
        || !ok_obj(ring, RING, cap.saturating_mul(RECORD as u64))
        || !ok_obj(region, REGION, size)
        || checks == 0
        || !ok_obj(checks, CHECKS, PmCopy::checks_len(size))
        || !addr.is_multiple_of(4096)
        || addr.checked_add(size).is_none_or(|end| end > 1 << 47)
    {
        return bad("superblock geometry or object offsets are invalid".into());
    }
    Ok((version, block, cap, size, ring, region, addr, checks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmkv_substrate::{Eviction, Pool};

    /// The no-deduplication ablation logs a block written three times three times (three
    /// one-block runs: 24 + 3 × 8 + 3 × 32 bytes, three slots); deduplicated, once (one
    /// slot). Both leave the same region.
    #[test]
    fn without_deduplication_every_write_is_logged() {
        for (dedup, slots) in [(true, 1), (false, 3)] {
            let po = pmkv_testutil::sim_opts(8 << 20);
            let pool = Arc::new(Pool::create_sim("mangosteen", &po).unwrap());
            let m = Mangosteen::open(pool, Options { region_size: 64 << 10, dedup, ..Options::default() }).unwrap();
            let (_, before) = m.log_indices();
            m.batch(|tx| {
                for v in 1..=3u8 {
                    tx.write(8, &[v; 8]).unwrap();
                }
            })
            .unwrap();
            assert_eq!(m.log_indices().1 - before, slots, "dedup {dedup}");
            m.read(|r| assert_eq!(&r[..24], &[0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3, 3, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0]));
        }
    }

    /// M8 through the core's report: an open that replays the log says how many records
    /// it replayed (`rolled_forward`) and where the persistent head and tail were.
    #[test]
    fn m8_recovery_reports_the_replayed_records_in_the_core_report() {
        let po = pmkv_testutil::sim_opts(8 << 20);
        let opts = Options { region_size: 64 << 10, ..Options::default() };
        let pool = Arc::new(Pool::create_sim("mangosteen", &po).unwrap());
        let m = Mangosteen::open(pool.clone(), opts).unwrap();
        assert_eq!(m.recovery().engine, "mangosteen");
        assert_eq!(m.recovery().rolled_forward, 0, "a new region has nothing to replay");
        m.batch(|tx| tx.write(0, &[7u8; 64]).unwrap()).unwrap();
        m.quiesce().unwrap();
        let (head, tail) = m.log_indices();
        assert_eq!(head, tail, "quiesce made the inline backend's work durable");
        assert_eq!(tail, 2, "one record: a 24-byte header, a run's descriptor, two 32-byte blocks");
        // Rewind the persistent head: replay is idempotent, so the next open replays the
        // whole batch again, as after a crash before the backend applied it.
        m.shared.log.set_p_head(0);
        let img = pool.sim().unwrap().image_now(&pool, Eviction::None);
        drop(m);
        let again = Mangosteen::open(Arc::new(Pool::from_image(&img, None, &po).unwrap()), opts).unwrap();
        let r = again.recovery();
        assert_eq!(r.rolled_forward, tail);
        assert_eq!(r.detail_u64("log_head"), Some(0));
        assert_eq!(r.detail_u64("log_tail"), Some(tail));
        assert!(!r.clean_shutdown, "an image of a live pool is a crash");
        assert_eq!(again.log_indices(), (tail, tail), "the replay advanced the head");
        again.read(|s| assert_eq!(&s[..64], &[7u8; 64][..]));
    }

    /// A pool image after one batch, and its superblock, PM copy and line checks' offsets.
    fn image_after_a_batch() -> (Vec<u8>, u64, u64, u64) {
        let po = pmkv_testutil::sim_opts(8 << 20);
        let pool = Arc::new(Pool::create_sim("mangosteen", &po).unwrap());
        let m = Mangosteen::open(pool.clone(), Options { region_size: 64 << 10, ..Options::default() }).unwrap();
        m.batch(|tx| tx.write(0, &[7u8; 64]).unwrap()).unwrap();
        m.quiesce().unwrap();
        let img = pool.sim().unwrap().image_now(&pool, Eviction::None);
        (img, pool.root(SUPER_ROOT), m.shared.pm.region, m.shared.pm.checks)
    }

    fn open_image(img: &[u8]) -> Result<Mangosteen> {
        let po = pmkv_testutil::sim_opts(8 << 20);
        let o = Options { region_size: 64 << 10, ..Options::default() };
        Mangosteen::open(Arc::new(Pool::from_image(img, None, &po).unwrap()), o)
    }

    /// Version 1 (page checks, CRC-32 records) is refused by its version, not read as
    /// damage and not opened with the wrong checks.
    #[test]
    fn a_version_1_pool_is_refused_with_a_version_error() {
        let (mut img, sb, _, _) = image_after_a_batch();
        assert!(open_image(&img).is_ok());
        let sb = sb as usize;
        img[sb + 8..sb + 12].copy_from_slice(&1u32.to_le_bytes());
        let crc = crc32fast::hash(&img[sb..sb + 60]);
        img[sb + 60..sb + 64].copy_from_slice(&crc.to_le_bytes());
        match open_image(&img) {
            Err(e @ Error::Version { found: 1, supported: SUPER_VERSION }) => {
                assert!(e.to_string().contains("version 1"), "{e}")
            }
            other => panic!("a version-1 pool opened as {:?}", other.map(|_| ())),
        }
    }

    /// A crash image whose last batch the inline backend had not applied yet (its record
    /// between the persistent head and tail), a word of a line that batch writes zeroed
    /// outside the batch's block, or that line's check zeroed: the open refuses it. The
    /// replay used to skip those lines' checks and recompute them after writing its
    /// blocks, blessing the zeroed word, which then read back as data (the damage soak's
    /// finding in crashed Mangosteen pools). Undamaged, the image recovers the batch.
    #[test]
    fn damage_beside_a_replayed_block_is_refused_not_blessed() {
        let po = pmkv_testutil::sim_opts(8 << 20);
        let pool = Arc::new(Pool::create_sim("mangosteen", &po).unwrap());
        let m = Mangosteen::open(pool.clone(), Options { region_size: 64 << 10, ..Options::default() }).unwrap();
        m.batch(|tx| tx.write(0, &[5u8; 64]).unwrap()).unwrap();
        m.quiesce().unwrap();
        m.batch(|tx| tx.write(0, &[7u8; 8]).unwrap()).unwrap();
        let (head, tail) = m.log_indices();
        assert!(head < tail, "the second batch is left to recovery");
        let block = m.block as usize;
        assert!(block < 64, "the batch's block leaves bytes of its line unwritten");
        // Every store the process made (a killed process: nothing lost in the page cache).
        let img = pool.sim().unwrap().image_now(&pool, Eviction::All);
        let (region, checks) = (m.shared.pm.region as usize, m.shared.pm.checks as usize);
        drop(m);
        let mut want = [5u8; 64];
        want[..8].copy_from_slice(&[7; 8]);
        open_image(&img).unwrap().read(|r| assert_eq!(&r[..64], &want[..]));
        let mut zeroed = img.clone();
        zeroed[region + 56..region + 64].fill(0);
        let e = open_image(&zeroed).err().expect("a zeroed word beside the replayed block is refused");
        assert!(matches!(e, Error::Corrupt(ref m) if m.contains("line 0 ")), "{e}");
        let mut check = img.clone();
        check[checks..checks + 8].fill(0);
        let e = open_image(&check).err().expect("a zeroed check of a replayed line is refused");
        assert!(matches!(e, Error::Corrupt(ref m) if m.contains("line 0 ")), "{e}");
        // The same line, its check already the new one (the backend stores checks first):
        // still read right.
        let mut checked_first = img.clone();
        let c = crate::backend::line_check(0, &want);
        checked_first[checks..checks + 4].copy_from_slice(&c.to_le_bytes());
        open_image(&checked_first).unwrap().read(|r| assert_eq!(&r[..64], &want[..]));
    }

    /// One flipped byte in a line nobody wrote, and a written line copied with its check
    /// to another line, are both refused: a line's check covers its offset too.
    #[test]
    fn a_damaged_or_moved_line_is_refused() {
        let (img, _, region, checks) = image_after_a_batch();
        let (region, checks) = (region as usize, checks as usize);
        let mut flipped = img.clone();
        flipped[region + 3 * 4096 + 5] ^= 0x10;
        let e = open_image(&flipped).err().expect("a flipped byte is refused");
        assert!(matches!(e, Error::Corrupt(ref m) if m.contains("line 192 ")), "{e}");
        let mut moved = img;
        moved.copy_within(region..region + 64, region + 320);
        moved.copy_within(checks..checks + 4, checks + 20);
        let e = open_image(&moved).err().expect("a moved line is refused");
        assert!(matches!(e, Error::Corrupt(ref m) if m.contains("line 5 ")), "{e}");
    }
}
