//! The `mangosteen` engine: an ordinary `BTreeMap` — the standard library's, unchanged —
//! made durable by the runtime (paper §3).
//!
//! The map and everything it allocates live in the durable region, which is mapped at
//! the same address for the pool's whole life (`Options::fixed_address`), so
//! its pointers stay valid across restarts. A put or delete is a read-write request: it
//! runs in a batch (flat-combined with other threads' writes) inside a split-allocation
//! scope, so the map's allocations come from the region's persistent heap
//! ([`Heap`], through [`SplitAlloc`]); its writes — the map's
//! nodes, the heap's lists — are found by page protection and logged, and the call
//! returns once the batch's COMMIT is durable. A get or scan is a read-only request on the
//! DRAM copy, in parallel with other readers. A write batch is one request, hence atomic.
//!
//! The program must install `SplitAlloc` as its global allocator (the `pmkv` CLI, server,
//! bindings and test binaries do); without it the engine refuses to open.

use crate::error::Error as MgError;
use crate::heap::Heap;
use crate::runtime::{Capture, Mangosteen, Options as MgOptions};
use crate::split_alloc::{Registration, SplitAlloc};
use pmkv_core::{
    BatchOp, CheckReport, Direction, Engine, EngineFactory, EngineInfo, Error, ErrorKind, KeyRange, MemoryUsage,
    Options, Param, Pool, RecoveryReport, Result, Visitor, WriteBatch,
};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The map the application keeps: unchanged standard-library code.
type Map = BTreeMap<Box<[u8]>, Box<[u8]>>;

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

const PARAMS: &[Param] = &[
    Param {
        name: "region_mib",
        doc: "MiB of the durable region holding the map, taken whole when the pool is created and never grown: the pool file is at least this plus its redo ring (default: max_size / 64, between 1 and 256)",
    },
    Param { name: "dedup", doc: "false: log every captured block, the paper's no-deduplication ablation (default true)" },
    Param {
        name: "background",
        doc: "true: apply committed batches on a backend thread, the paper's design (default false: inline, right after each commit)",
    },
];

fn info() -> EngineInfo {
    EngineInfo::new(
        "mangosteen",
        "Mangosteen: a standard BTreeMap made durable by flat combining, page capture and a deduplicated redo log (Lersch et al.)",
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
        MgError::Panicked(_) => Error::with_source(ErrorKind::Internal, e),
    }
}

fn options(opts: &Options) -> Result<MgOptions> {
    let mut region_mib = (opts.max_size >> 26).clamp(1, 256);
    let mut o = MgOptions { capture: Capture::Pages, fixed_address: true, ..Default::default() };
    for (k, v) in opts.params() {
        let bad = || Error::invalid(format!("mangosteen parameter {k}={v}: not a valid value"));
        match k.as_str() {
            "region_mib" => {
                region_mib = v.parse().ok().filter(|&m: &u64| (1..=1 << 16).contains(&m)).ok_or_else(bad)?
            }
            "dedup" => o.dedup = v.parse().map_err(|_| bad())?,
            "background" => o.background = v.parse().map_err(|_| bad())?,
            _ => {}
        }
    }
    o.region_size = region_mib << 20;
    // Room in the ring for every block of the region (then any batch fits: the dedup set
    // logs each block once), up to 256K records (16 MiB of PM); past that a batch that
    // dirties more than 8 MiB of the region is refused (values are limited to a quarter
    // of that, see `info`).
    o.ring_records = (o.region_size / o.block_size as u64 + 1).clamp(4096, RING_MAX);
    Ok(o)
}

impl EngineFactory for MangosteenFactory {
    fn info(&self) -> EngineInfo {
        info()
    }
    fn layout(&self) -> Option<&'static str> {
        Some(LAYOUT)
    }
    fn params(&self) -> &'static [Param] {
        PARAMS
    }
    /// Whole or nothing: see `salvage`.
    fn salvage(&self, image: &[u8], emit: pmkv_core::Emit<'_>) -> Result<pmkv_core::SalvageReport> {
        crate::salvage::salvage(self, image, emit)
    }
    fn open_pool(&self, pool: Arc<Pool>, opts: &Options) -> Result<Box<dyn Engine>> {
        self.check_params(opts)?;
        Ok(Box::new(MangosteenEngine::open(pool, options(opts)?)?))
    }
}

/// An open `mangosteen` store.
pub struct MangosteenEngine {
    m: Mangosteen,
    /// Region offset of the map.
    root: usize,
    _registration: Registration,
    poisoned: AtomicBool,
    read_only: bool,
}

impl MangosteenEngine {
    /// Open (recovering first) the region in `pool`, and create the empty map on a new one.
    pub fn open(pool: Arc<Pool>, o: MgOptions) -> Result<MangosteenEngine> {
        if !SplitAlloc::installed() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "the mangosteen engine needs pmkv_mangosteen::SplitAlloc as this program's global allocator",
            ));
        }
        let read_only = pool.is_read_only();
        let m = Mangosteen::open(pool, o).map_err(err)?;
        let (base, size) = (m.region_base(), m.size() as usize);
        let registration = SplitAlloc::register(base, size)
            .ok_or_else(|| Error::new(ErrorKind::Unsupported, "more than 64 mangosteen stores open in one process"))?;
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
                // SAFETY: the region, ours for the batch.
                let h = unsafe { Heap::new(r.as_mut_ptr(), r.len()) };
                if !h.is_formatted() {
                    h.format();
                }
                let map = SplitAlloc::scope(h, || Box::into_raw(Box::new(Map::new())));
                let off = map as u64 - r.as_ptr() as u64;
                h.set_root(off);
                off
            })
            .map_err(err)?
        };
        if root as usize >= size || !(root as usize).is_multiple_of(crate::heap::MAX_ALIGN) {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!("map root {root:#x} is no block of the {size}-byte region"),
            ));
        }
        Ok(MangosteenEngine {
            m,
            root: root as usize,
            _registration: registration,
            poisoned: AtomicBool::new(false),
            read_only,
        })
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

    /// Run `f` on the map as a read-only request.
    fn read<R>(&self, f: impl FnOnce(&Map) -> R) -> R {
        self.m.read(|r| {
            // SAFETY: `root` names the map inside the region (checked at open); the DRAM
            // copy is mapped at the address its pointers were made for, and no batch
            // writes it while we hold the read side.
            let map = unsafe { &*(r.as_ptr().add(self.root) as *const Map) };
            f(map)
        })
    }

    /// Run `f` on the map as a read-write request: in a batch, allocating from the
    /// region's heap; `need` bytes must remain untouched in the heap, else `Full`.
    fn write<R: Send>(&self, need: u64, f: impl FnOnce(&mut Map) -> R + Send) -> Result<R> {
        self.writable()?;
        let root = self.root;
        let r = self.m.batch(move |tx| {
            let r = tx.region();
            // SAFETY: the region, ours for the batch; the map at `root` was made by this
            // heap at the region's fixed address.
            let h = unsafe { Heap::new(r.as_mut_ptr(), r.len()) };
            if h.untouched() < need + HEADROOM {
                return Err(Error::new(
                    ErrorKind::Full,
                    format!("the {}-byte durable region is full (region_mib sets its size at creation)", r.len()),
                ));
            }
            // SAFETY: as above; no one else touches the map during the batch.
            let map = unsafe { &mut *(r.as_mut_ptr().add(root) as *mut Map) };
            Ok(SplitAlloc::scope(h, || f(map)))
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
}

fn upsert(m: &mut Map, key: &[u8], value: &[u8]) {
    match m.get_mut(key) {
        Some(v) if v.len() == value.len() => v.copy_from_slice(value),
        Some(v) => *v = value.into(),
        None => {
            m.insert(key.into(), value.into());
        }
    }
}

impl Engine for MangosteenEngine {
    /// Keys up to 64 KiB and values up to an eighth of the region (so that a record always
    /// fits an empty region with room for the map's nodes), and up to 2 MiB (so that a
    /// batch of a few such writes fits the redo ring).
    fn info(&self) -> EngineInfo {
        let r = self.m.size() as usize;
        let ring_bytes = (RING_MAX * 32) as usize;
        info().limits((64 << 10).min(r / 16), (r / 8).min(ring_bytes / 4))
    }
    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        Ok(self.read(|m| m.get(key).map(|v| f(v)).is_some()))
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.write((key.len() + value.len()) as u64, |m| upsert(m, key, value))
    }
    fn delete(&self, key: &[u8]) -> Result<bool> {
        self.write(0, |m| m.remove(key).is_some())
    }
    /// Atomic: one request, so one batch in the log (all or nothing across a crash).
    fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        let need = batch.ops().iter().map(|op| op.key().len() + 64).sum::<usize>()
            + batch.ops().iter().map(|op| if let BatchOp::Put(_, v) = op { v.len() } else { 0 }).sum::<usize>();
        self.write(need as u64, |m| {
            for op in batch.ops() {
                match op {
                    BatchOp::Put(k, v) => upsert(m, k, v),
                    BatchOp::Delete(k) => {
                        m.remove(k.as_slice());
                    }
                }
            }
        })
    }
    fn scan(&self, range: &KeyRange, dir: Direction, limit: usize, visit: Visitor<'_>) -> Result<()> {
        if range.is_empty() {
            return Ok(());
        }
        self.read(|m| {
            let bounds: (Bound<&[u8]>, Bound<&[u8]>) = (range.start_bound(), range.end_bound());
            let it = m.range::<[u8], _>(bounds).map(|(k, v)| (&k[..], &v[..]));
            let mut go = |(k, v): (&[u8], &[u8])| visit(k, v);
            match dir {
                Direction::Forward => it.take(limit).all(&mut go),
                Direction::Reverse => it.rev().take(limit).all(&mut go),
            };
        });
        Ok(())
    }
    fn len(&self) -> u64 {
        self.read(|m| m.len() as u64)
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
    fn check(&self) -> Result<CheckReport> {
        let mut rep = CheckReport::new("mangosteen");
        let (heap, len, ordered) = self.m.read(|r| {
            // SAFETY: `r` is the whole DRAM copy (16-aligned, mapped for `m`'s life); under
            // the read side no batch writes it, and the heap is only read (`check`).
            let h = unsafe { Heap::new(r.as_ptr() as *mut u8, r.len()) };
            // SAFETY: `root` names the map inside the region (checked at open), whose
            // pointers were made for the copy's fixed address; no batch writes it under the
            // read side, so a shared reference is sound.
            let map = unsafe { &*(r.as_ptr().add(self.root) as *const Map) };
            let ordered = map.keys().zip(map.keys().skip(1)).all(|(a, b)| a < b);
            (h.check(), map.len(), ordered)
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
    fn recovery(&self) -> Option<RecoveryReport> {
        let mut rep: RecoveryReport = self.m.recovery().clone();
        rep.records = self.len();
        Some(rep)
    }
    fn sync(&self) -> Result<()> {
        self.m.quiesce().map_err(err)
    }
    fn close(self: Box<Self>) -> Result<()> {
        // The map is never dropped: it lives in the region, which the next open maps again.
        self.m.quiesce().map_err(err)
    }
    /// Refuse further writes and leave the pool marked unclean, so the next open recovers.
    fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
        self.m.pool().poison();
    }
    fn pool(&self) -> Option<&Arc<Pool>> {
        Some(self.m.pool())
    }
}
