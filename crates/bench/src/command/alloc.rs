//! `pmkv bench alloc`: EPallocator against PMDK's libpmemobj (the allocator HART's paper
//! built EPallocator on and compared with), in one run, side by side.
//!
//! One *pair* is an allocation of a durable 64-byte object and its free:
//!
//! * EPallocator: `alloc` + `publish` + `free` — publish is included because only then is
//!   the object allocated durably, as it is when `pmemobj_alloc` returns;
//! * libpmemobj: `pmemobj_alloc` (no constructor) + `pmemobj_free`.
//!
//! Both pools are files on /dev/shm (memory; the closest thing to PM here) and both use
//! flush instructions: pmkv in `adr` mode, PMDK with `PMEM_IS_PMEM_FORCE=1` (otherwise PMDK
//! sees a non-DAX file and falls back to `msync`, which would measure the kernel, not the
//! allocator). libpmemobj is loaded at run time from `libpmemobj.so.1`, so building pmkv
//! never needs it; without it the column is skipped with a hint how to install it.

use super::CmdResult;
use pmkv_substrate::epalloc::{EpAlloc, TypeId};
use pmkv_substrate::{counters, Latency, Mode, Pool, PoolOptions};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct AllocArgs {
    /// Directory for the temporary pools (default /dev/shm if present, else the temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Allocate+free pairs per thread.
    #[arg(long, default_value_t = 200_000)]
    pub iters: u64,
    /// Object size in bytes.
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// Thread counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<usize>,
    /// Persistence mode of the EPallocator pool. With `eadr` or `none` PMDK is told to
    /// skip flushes too (`PMEM_NO_FLUSH=1`), so both columns measure the same thing.
    #[arg(long, default_value = "adr")]
    pub mode: Mode,
}

impl Default for AllocArgs {
    fn default() -> Self {
        AllocArgs { dir: None, iters: 200_000, size: 64, threads: vec![1, 2], mode: Mode::Adr }
    }
}

/// Removes the pool file when dropped.
struct TempFile(PathBuf);
impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Run `threads` workers, each doing `iters` pairs after a warm-up; returns the mean
/// per-thread nanoseconds per pair.
fn timed(threads: usize, iters: u64, work: impl Fn(u64) + Sync) -> f64 {
    let barrier = Barrier::new(threads);
    let total: Duration = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let (barrier, work) = (&barrier, &work);
                s.spawn(move || {
                    work(iters / 10 + 1);
                    barrier.wait();
                    let t = Instant::now();
                    work(iters);
                    t.elapsed()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("benchmark thread")).sum()
    });
    total.as_nanos() as f64 / threads as f64 / iters as f64
}

/// EPallocator: ns per pair and (flushes, fences) per pair.
fn epalloc(
    dir: &Path,
    mode: Mode,
    threads: usize,
    iters: u64,
    size: usize,
) -> Result<(f64, f64, f64), Box<dyn std::error::Error>> {
    let path = dir.join(format!("pmkv-bench-alloc-{}-{threads}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let _cleanup = TempFile(path.clone());
    let opts = PoolOptions::default().mode(mode).latency(Latency::NONE).initial_size(64 << 20).max_size(1 << 30);
    let ep = EpAlloc::create(Arc::new(Pool::create(&path, "bench-alloc", &opts)?))?;
    let failed = std::sync::atomic::AtomicBool::new(false);
    let counted = std::sync::Mutex::new((0u64, 0u64, 0u64));
    let ns = timed(threads, iters, |n| {
        let c0 = counters::snapshot();
        for _ in 0..n {
            match ep.alloc(TypeId(1), size) {
                Ok(off) => {
                    ep.publish(off);
                    ep.free(off);
                }
                Err(_) => failed.store(true, std::sync::atomic::Ordering::Relaxed),
            }
        }
        let c = counters::snapshot().since(&c0);
        let mut g = counted.lock().unwrap();
        g.0 += n;
        g.1 += c.flushes;
        g.2 += c.fences;
    });
    if failed.into_inner() {
        return Err("EPallocator: allocation failed during the benchmark".into());
    }
    ep.check()?;
    let (n, fl, fe) = counted.into_inner().unwrap();
    Ok((ns, fl as f64 / n as f64, fe as f64 / n as f64))
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PmemOid {
    pool_uuid_lo: u64,
    off: u64,
}

type CreateFn = unsafe extern "C" fn(*const c_char, *const c_char, usize, u32) -> *mut c_void;
type CloseFn = unsafe extern "C" fn(*mut c_void);
type ConstrFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void) -> c_int;
type AllocFn = unsafe extern "C" fn(*mut c_void, *mut PmemOid, usize, u64, Option<ConstrFn>, *mut c_void) -> c_int;
type FreeFn = unsafe extern "C" fn(*mut PmemOid);
type ErrFn = unsafe extern "C" fn() -> *const c_char;

/// libpmemobj's entry points, resolved at run time.
struct Pmdk {
    _lib: libloading::Library,
    create: CreateFn,
    close: CloseFn,
    alloc: AllocFn,
    free: FreeFn,
    errormsg: ErrFn,
}

impl Pmdk {
    fn load(mode: Mode) -> Result<Pmdk, String> {
        // PMDK reads these when the library initialises: treat /dev/shm as PM and flush
        // with CPU instructions, like pmkv's adr mode, instead of calling msync; skip
        // flushes where pmkv's mode has none.
        std::env::set_var("PMEM_IS_PMEM_FORCE", "1");
        if mode != Mode::Adr {
            std::env::set_var("PMEM_NO_FLUSH", "1");
        }
        // SAFETY: loading a system library whose initialisers are well behaved.
        let lib = unsafe { libloading::Library::new("libpmemobj.so.1") }.map_err(|e| e.to_string())?;
        // SAFETY: the symbol types match libpmemobj.h of PMDK 1.x.
        unsafe {
            let create = *lib.get::<CreateFn>(b"pmemobj_create\0").map_err(|e| e.to_string())?;
            let close = *lib.get::<CloseFn>(b"pmemobj_close\0").map_err(|e| e.to_string())?;
            let alloc = *lib.get::<AllocFn>(b"pmemobj_alloc\0").map_err(|e| e.to_string())?;
            let free = *lib.get::<FreeFn>(b"pmemobj_free\0").map_err(|e| e.to_string())?;
            let errormsg = *lib.get::<ErrFn>(b"pmemobj_errormsg\0").map_err(|e| e.to_string())?;
            Ok(Pmdk { _lib: lib, create, close, alloc, free, errormsg })
        }
    }

    fn error(&self) -> String {
        // SAFETY: pmemobj_errormsg returns a thread-local NUL-terminated string.
        unsafe { CStr::from_ptr((self.errormsg)()) }.to_string_lossy().into_owned()
    }
}

/// A PMEMobjpool pointer shared by the worker threads (libpmemobj is thread-safe).
struct PopPtr(*mut c_void);
// SAFETY: libpmemobj pools may be used from any thread concurrently.
unsafe impl Send for PopPtr {}
// SAFETY: as for Send: libpmemobj's allocation calls are thread-safe.
unsafe impl Sync for PopPtr {}

impl PopPtr {
    /// A method (not a field access) so that closures capture the whole `Sync` wrapper.
    fn get(&self) -> *mut c_void {
        self.0
    }
}

fn pmdk(lib: &Pmdk, dir: &Path, threads: usize, iters: u64, size: usize) -> Result<f64, Box<dyn std::error::Error>> {
    let path = dir.join(format!("pmkv-bench-alloc-pmdk-{}-{threads}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let _cleanup = TempFile(path.clone());
    let cpath = CString::new(path.to_string_lossy().as_bytes())?;
    let layout = CString::new("pmkv-bench-alloc")?;
    // SAFETY: valid C strings; the pool file does not exist yet.
    let pop = unsafe { (lib.create)(cpath.as_ptr(), layout.as_ptr(), 64 << 20, 0o600) };
    if pop.is_null() {
        return Err(format!("pmemobj_create: {}", lib.error()).into());
    }
    let pop = PopPtr(pop);
    let failed = std::sync::atomic::AtomicBool::new(false);
    let ns = timed(threads, iters, |n| {
        let mut oid = PmemOid::default();
        for _ in 0..n {
            // SAFETY: `pop` is an open pool; `oid` is a valid out-parameter.
            let rc = unsafe { (lib.alloc)(pop.get(), &mut oid, size, 1, None, std::ptr::null_mut()) };
            if rc != 0 {
                failed.store(true, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            // SAFETY: `oid` was just allocated in `pop`.
            unsafe { (lib.free)(&mut oid) };
        }
    });
    // SAFETY: all workers have finished.
    unsafe { (lib.close)(pop.get()) };
    if failed.into_inner() {
        return Err("pmemobj_alloc failed during the benchmark".into());
    }
    Ok(ns)
}

pub fn run(a: AllocArgs) -> CmdResult {
    let dir = crate::pool_base(a.dir.as_deref());
    if a.threads.is_empty() || a.threads.contains(&0) || a.iters == 0 {
        return Err("bench alloc: --threads must list positive counts and --iters must be positive".into());
    }
    if a.mode == Mode::Msync {
        return Err("bench alloc: msync mode is not comparable with PMDK; use adr, eadr or none".into());
    }
    let lib = match Pmdk::load(a.mode) {
        Ok(l) => Some(l),
        Err(e) => {
            println!("libpmemobj not installed: apt-get install libpmemobj1 ({e}); PMDK column skipped");
            None
        }
    };
    println!(
        "allocate + free of {}-byte objects, {} pairs per thread, {} mode, pools in {}",
        a.size,
        a.iters,
        a.mode,
        dir.display()
    );
    println!("EPallocator pair = alloc + publish + free; libpmemobj pair = pmemobj_alloc + pmemobj_free");
    println!(
        "{:>7}  {:>17}  {:>16}  {:>8}  {:>20}",
        "threads", "EPallocator ns", "libpmemobj ns", "ratio", "EPalloc flush/fence"
    );
    for &t in &a.threads {
        let (ep_ns, flushes, fences) = epalloc(&dir, a.mode, t, a.iters, a.size)?;
        let pm = match &lib {
            Some(lib) => Some(pmdk(lib, &dir, t, a.iters, a.size)?),
            None => None,
        };
        let (pm_cell, ratio) = match pm {
            Some(p) => (format!("{p:.1}"), format!("{:.1}x", p / ep_ns)),
            None => ("-".to_string(), "-".to_string()),
        };
        println!("{t:>7}  {ep_ns:>17.1}  {pm_cell:>16}  {ratio:>8}  {:>20}", format!("{flushes:.2} / {fences:.2}"));
    }
    println!("(ns per pair per thread; ratio = libpmemobj time / EPallocator time, higher is better for EPallocator)");
    Ok(())
}
