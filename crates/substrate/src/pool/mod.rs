//! Pools (SPEC P1, P2): a file mapped `MAP_SHARED` (with `MAP_SYNC` on DAX), or — for the
//! crash simulator — anonymous memory with a shadow "persisted image".
//!
//! **Growth with a fixed base.** At open, the whole `max_size` address range is reserved
//! with an inaccessible anonymous mapping (`PROT_NONE`, `MAP_NORESERVE`: costs no memory).
//! The file's current extent is then mapped over the start of that range with `MAP_FIXED`.
//! Growing extends the file (`posix_fallocate`, so a full disk is an error now and not a
//! `SIGBUS` later) and maps only the new extent, again with `MAP_FIXED`, right after the
//! old one. The base address never changes, so pointers derived from it stay valid while
//! other threads run, and everything stored *in* the pool is an offset (P2), so the next
//! open may map it anywhere.
//!
//! **Locking.** A pool file is locked with `flock(LOCK_EX | LOCK_NB)` for as long as it is
//! open; a second open (another process, or another handle in this one) gets
//! [`PoolError::Locked`]. The lock dies with the process, so a crash never leaves it stale.
//!
//! One file per concern: `open` (create, open, validate, inspect, simulated pools),
//! `mapping` (address reservation, fixed-base growth, MAP_SYNC probe), `state` (the
//! header's crash-atomic state slots: clean flag, roots, heap top) and `flush` (flush and
//! fence dispatch by persistence mode, msync, counters, latency emulation).

mod claim;
mod flush;
mod holder;
mod mapping;
mod open;
mod state;

pub use claim::EngineClaim;

use flush::msync_pending;
pub(crate) use mapping::reserve;
use mapping::{allocate_file, medium_of, probe_map_sync};

use crate::counters;
#[cfg(feature = "crash-sim")]
use crate::crash_sim::SimState;
use crate::durability::{Durability, Medium};
use crate::error::{PoolError, Result};
use crate::header::{Immutable, Mutable, FORMAT_VERSION, HEADER_SIZE, MAX_LAYOUT, NUM_ROOTS, SEAL_ROOT, SLOT_LEN};
use crate::latency::{spin_ns, Latency, ReadModel};
use crate::persist::{self, lines_in, Mode, SyncPolicy};
use crate::wal::Wal;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Smallest pool: the header and one page of heap.
pub const MIN_POOL_SIZE: u64 = HEADER_SIZE + 4096;
/// Size of a new pool unless the caller sets one: 64 KiB, the header and 60 KiB of heap.
/// A pool grows on demand (doubling up to 1 GiB, then 1 GiB at a time), so a large
/// initial size buys nothing but fewer growths, while every byte of it is allocated up
/// front (`posix_fallocate`: on tmpfs, memory). HART keeps 5 keys in 32 KiB, NBTree in
/// 136 KiB (docs/results/pool-pages.md, "Pools that start small").
pub const DEFAULT_INITIAL_SIZE: u64 = 64 << 10;
const PAGE: u64 = 4096;
// Linux values; defined here because not every libc target exports them.
const MAP_SHARED_VALIDATE: libc::c_int = 0x03;
const MAP_SYNC: libc::c_int = 0x80000;
const MAP_FIXED_NOREPLACE: libc::c_int = 0x100000;

/// How to create or open a pool.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// Persistence mode (P3).
    pub mode: Mode,
    /// Size of a new pool file (rounded up to a page); it grows on demand up to
    /// `max_size`. Default [`DEFAULT_INITIAL_SIZE`].
    pub initial_size: u64,
    /// Largest size the pool may grow to; fixed at creation.
    pub max_size: u64,
    /// Latency emulation (P5); defaults to `PMKV_LATENCY` or none.
    pub latency: Latency,
    /// Prefault the pages a pool adds — its whole size at creation, each new extent when it
    /// grows — so that no operation pays the kernel's first touch of a page (on tmpfs:
    /// allocating and zeroing it, 1–2 µs per 4 KiB page, a sixth to a third of a Dictionary
    /// insert into a new pool). PMDK offers the same (`prefault.at_create`).
    ///
    /// Done with `MADV_POPULATE_WRITE` (Linux ≥ 5.14; elsewhere pages fault in lazily as
    /// before), and only for pools in memory — a file on tmpfs (or ramfs, hugetlbfs) or on
    /// a DAX file system (mapped with `MAP_SYNC`) — and not in `msync` mode: on a disk
    /// file, write-faulting every page would dirty it, and writeback would write the whole
    /// pool to the disk. Pages of an existing pool are not touched at open, which would
    /// make every open (and recovery) pay for the whole file. Default: on.
    pub prefault: bool,
    /// When writes of a `wal` pool are acknowledged ([`SyncPolicy`]); ignored in other
    /// modes. Default `always`.
    pub sync: SyncPolicy,
    /// Mode `wal`: checkpoint when the log exceeds this many bytes (bounds the log file
    /// and the replay at the next open). Default [`crate::wal::CHECKPOINT_BYTES`], 64 MiB.
    pub checkpoint_bytes: u64,
    /// The mode to use instead of `mode` when the pool file turns out to be on a disk
    /// ([`Medium::Disk`], detected at open): how a front end makes `wal` the default on
    /// disks while `adr` stays the default on PM and tmpfs. Default `None`.
    pub disk_mode: Option<Mode>,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            mode: Mode::Adr,
            initial_size: DEFAULT_INITIAL_SIZE,
            max_size: 64 << 30,
            latency: Latency::from_env(),
            prefault: true,
            sync: SyncPolicy::Always,
            checkpoint_bytes: crate::wal::CHECKPOINT_BYTES,
            disk_mode: None,
        }
    }
}

impl PoolOptions {
    pub fn mode(mut self, m: Mode) -> Self {
        self.mode = m;
        self
    }
    pub fn initial_size(mut self, s: u64) -> Self {
        self.initial_size = s;
        self
    }
    pub fn max_size(mut self, s: u64) -> Self {
        self.max_size = s;
        self
    }
    pub fn latency(mut self, l: Latency) -> Self {
        self.latency = l;
        self
    }
    pub fn prefault(mut self, on: bool) -> Self {
        self.prefault = on;
        self
    }
    pub fn sync(mut self, p: SyncPolicy) -> Self {
        self.sync = p;
        self
    }
    pub fn disk_mode(mut self, m: Option<Mode>) -> Self {
        self.disk_mode = m;
        self
    }
    pub fn checkpoint_bytes(mut self, b: u64) -> Self {
        self.checkpoint_bytes = b;
        self
    }
}

/// Everything `pmkv info` shows, read without mapping or changing the file.
#[derive(Clone, Debug)]
pub struct PoolInfo {
    pub path: PathBuf,
    pub file_len: u64,
    pub header: Immutable,
    pub state: Mutable,
    /// Another process holds the pool open right now.
    pub in_use: bool,
    /// What the file lives on, detected as an open would ([`Medium::of_file`]).
    pub medium: Medium,
}

/// Where the pool's bytes live.
enum Backing {
    File {
        file: File,
        path: PathBuf,
    },
    /// Crash-simulation pool: no file; `SimState` holds the persisted image. Only made
    /// with the `crash-sim` feature; the matches on it stay so that they need no `cfg`.
    #[cfg_attr(not(feature = "crash-sim"), allow(dead_code))]
    Sim,
}

/// An open pool. `Send + Sync`: engines share it through an `Arc`.
pub struct Pool {
    base: *mut u8,
    /// Bytes of the reserved address range (== `max_size`).
    reserved: u64,
    /// Bytes currently mapped and backed (the pool's size).
    mapped: AtomicU64,
    mode: Mode,
    latency: Latency,
    /// The last-level cache model reads are charged by (`W/R/llc` with reads slower than
    /// DRAM's), else none.
    llc: Option<Box<crate::llc::Model>>,
    map_sync: bool,
    /// What the pool's bytes are mapped from (detected at open).
    medium: Medium,
    /// Prefault pages the pool adds ([`PoolOptions::prefault`]; only for a pool in memory,
    /// not in `msync` mode).
    prefault: bool,
    /// Parts of the reserved range this pool no longer owns (a failed `MAP_FIXED` left a
    /// hole that something else mapped before it could be re-reserved); never unmapped.
    lost: Mutex<Vec<(u64, u64)>>,
    imm: Immutable,
    state: Mutex<Mutable>,
    was_clean: bool,
    /// Mapped without write permission ([`Pool::open_read_only`]): the header is never
    /// written and the pool never grows.
    read_only: bool,
    backing: Backing,
    /// The redo log of a `wal` pool on a file opened for writing (see `wal`).
    wal: Option<Arc<Wal>>,
    /// The crash simulator of a simulated pool (`crash-sim` feature; without it the field
    /// and every check of it in the flush, fence and store paths are compiled out).
    #[cfg(feature = "crash-sim")]
    pub(crate) sim: Option<Box<SimState>>,
    /// A flush only counts its lines: mode `eadr` or `none`, no crash simulator and no
    /// fault injection (`flush_off`'s inlined fast path).
    counts_only: bool,
    /// The engine above may have left PM mid-operation (it panicked): never mark clean.
    poisoned: AtomicBool,
    /// The header slot that marking the pool in use overwrote, with its offset and the
    /// state it held: what [`Pool::abandon`] puts back.
    overwritten: Mutex<Option<(u64, [u8; SLOT_LEN], Mutable)>>,
    /// Set by [`Pool::abandon`]: the drop then leaves the header alone.
    abandoned: AtomicBool,
    /// The allocator's seal for the next clean shutdown ([`Pool::set_seal`]): written
    /// into the header together with the clean flag, in the same slot update, and never
    /// if the pool is not marked clean (an engine that refuses a crashed pool after its
    /// allocator opened must not write the header: SPEC R2).
    seal_at_close: Mutex<Option<u64>>,
    /// Test-only fault injection at every flush and fence (`fault-injection` feature).
    #[cfg(feature = "fault-injection")]
    fault: crate::fault::FaultSlot,
}

// SAFETY: the only field that is not `Send` by itself is `base`, a raw pointer to the
// reservation this pool owns for its whole life (unmapped only by its drop, whichever
// thread runs it); nothing about the mapping is tied to the thread that made it.
unsafe impl Send for Pool {}
// SAFETY: every `&Pool` method that changes shared state synchronises: the header state
// and growth behind `state`'s mutex, the size and the poison flag in atomics, lost ranges
// behind a mutex, the simulator behind its own lock. The pool's bytes are reached safely
// only through the header slots (written under the state lock with 8-byte atomic stores)
// and EPallocator's 8-byte atomic words; every other access goes through the raw pointers
// of `base`/`at`, which takes `unsafe` code that answers for its own synchronisation.
unsafe impl Sync for Pool {}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

impl Pool {
    /// Base address of the mapping. Valid until the pool is dropped.
    #[inline]
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Current size in bytes (mapped and backed).
    #[inline]
    pub fn size(&self) -> u64 {
        self.mapped.load(Ordering::Acquire)
    }

    /// Pointer to the byte at `off`. Computing it is always safe; dereferencing it is
    /// sound only for `off` (plus the access's size) below [`Pool::size`], and is the
    /// caller's `unsafe` business.
    #[inline]
    pub fn at<T>(&self, off: u64) -> *mut T {
        debug_assert!(off < self.reserved);
        // `wrapping_add`, not `add`: `add` past the end of the reservation would be
        // undefined behaviour even if the pointer were never used, and `off` comes from
        // safe callers. Both compile to the same address arithmetic.
        self.base.wrapping_add(off as usize) as *mut T
    }

    /// Offset of a pointer into this pool (P2).
    #[inline]
    pub fn offset_of<T>(&self, p: *const T) -> u64 {
        let off = (p as usize).wrapping_sub(self.base as usize) as u64;
        debug_assert!(off < self.reserved, "pointer outside the pool");
        off
    }

    /// Whether `[off, off+len)` lies inside the mapped pool (for validating stored offsets).
    #[inline]
    pub fn contains(&self, off: u64, len: u64) -> bool {
        off >= HEADER_SIZE && off.checked_add(len).is_some_and(|e| e <= self.size())
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn latency(&self) -> Latency {
        self.latency
    }

    pub fn map_sync(&self) -> bool {
        self.map_sync
    }

    /// What the pool's bytes are mapped from, detected at open.
    pub fn medium(&self) -> Medium {
        self.medium
    }

    /// What an acknowledged write to this pool survives: its medium, mode and (a `wal`
    /// pool opened for writing) sync policy.
    pub fn durability(&self) -> Durability {
        let d = Durability::new(self.medium, self.mode);
        match self.sync_policy() {
            Some(p) => d.with_sync(p),
            None => d,
        }
    }

    pub fn layout(&self) -> &str {
        &self.imm.layout
    }

    pub fn max_size(&self) -> u64 {
        self.imm.max_size
    }

    pub fn header(&self) -> &Immutable {
        &self.imm
    }

    /// Whether the previous session closed the pool cleanly (false after a crash).
    pub fn was_clean(&self) -> bool {
        self.was_clean
    }

    pub fn path(&self) -> Option<&Path> {
        match &self.backing {
            Backing::File { path, .. } => Some(path),
            Backing::Sim => None,
        }
    }

    /// Whether this is a crash-simulation pool (always false without the `crash-sim`
    /// feature, which is the only way to make one).
    pub fn is_sim(&self) -> bool {
        matches!(self.backing, Backing::Sim)
    }

    /// Whether the pool was opened with [`Pool::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// [`PoolError::ReadOnly`] if the pool is read-only: engines call it before writing.
    pub fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(PoolError::ReadOnly { path: self.path().unwrap_or(Path::new("<image>")).to_path_buf() });
        }
        Ok(())
    }

    /// The crash simulator of this pool (only for pools made by `create_sim`/`from_image`).
    #[cfg(feature = "crash-sim")]
    pub fn sim(&self) -> Option<&SimState> {
        self.sim.as_deref()
    }

    /// Call `hook` at every flush and fence of this pool until [`Pool::clear_fault_hook`]
    /// (or the pool's drop), with point indexes counted from 1 again (`fault-injection`
    /// feature; see the `fault` module). The hook may panic: that is its purpose. It runs
    /// holding the hook slot's lock, so it must not flush, fence or change the hook of
    /// this pool.
    #[cfg(feature = "fault-injection")]
    pub fn set_fault_hook(&self, hook: crate::fault::FaultHook) {
        self.fault.set(hook);
    }

    /// Remove the fault hook (`fault-injection` feature).
    #[cfg(feature = "fault-injection")]
    pub fn clear_fault_hook(&self) {
        self.fault.clear();
    }

    /// Record that the engine above may have left PM mid-operation (it panicked, or met
    /// damage): from now on nothing marks this pool clean, so the next open runs the
    /// engine's crash recovery (SPEC R4).
    pub fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
    }

    /// Whether [`Pool::poison`] was called.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Close: make everything durable, mark the pool cleanly shut down and release it.
    /// Unlike a drop, failures are reported: a failed msync, or a poisoned pool (which is
    /// released but stays marked unclean).
    pub fn close(self) -> Result<()> {
        if self.is_poisoned() {
            let path = self.path().map(Path::to_path_buf).unwrap_or_else(|| "<simulated>".into());
            drop(self);
            return Err(PoolError::Poisoned { path });
        }
        if let Some(wal) = &self.wal {
            if let Err(e) = wal.sync_all() {
                self.poison();
                return Err(e);
            }
        }
        if self.mode == Mode::Msync && !self.read_only && !self.is_sim() {
            if let Err(e) = self.msync_all() {
                // Durability is not proven: leave the pool marked unclean.
                self.poison();
                return Err(e);
            }
        }
        drop(self);
        Ok(())
    }
}

#[cfg(feature = "crash-sim")]
impl SimState {
    /// The image a crash right now would leave (for the end of a run).
    ///
    /// # Panics
    /// If `pool` is not the pool this simulator belongs to (`pool.sim()` is not `self`):
    /// the image is read from `pool`'s memory for this simulator's size, which another
    /// pool's mapping need not cover.
    pub fn image_now(&self, pool: &Pool, ev: crate::crash_sim::Eviction) -> Vec<u8> {
        assert!(
            pool.sim().is_some_and(|s| std::ptr::eq(s, self)),
            "SimState::image_now called with a pool this simulator does not belong to"
        );
        // SAFETY: `pool` is the pool this simulator belongs to (asserted above).
        unsafe { self.image_at(pool.base(), ev) }
    }
}

impl Pool {
    /// Give up an open that the engine refused (a damaged or foreign pool, a format it
    /// cannot read) without changing the file: the header slot that marking the pool in
    /// use overwrote is written back byte for byte, and the drop writes nothing. A refused
    /// open then leaves the file exactly as it found it (SPEC P1: bad input loses nothing
    /// and changes nothing).
    ///
    /// The slot is restored only for a pool that was closed cleanly and in which nothing
    /// has been written since it was opened (the engine refused before writing; engines
    /// write nothing while validating a cleanly closed pool). A pool that needed crash
    /// recovery stays marked as needing it (its recovery did not complete).
    pub fn abandon(self) {
        if !self.was_clean {
            // Recovery did not complete: the pool must stay marked as needing it (a drop
            // would mark it clean, and the next open would skip the recovery).
            self.poison();
        }
        let first_write = self.state.lock().seq == self.overwritten.lock().as_ref().map_or(0, |o| o.2.seq + 1);
        if self.was_clean && !self.read_only && !self.is_poisoned() && first_write {
            if let Some((at, bytes, before)) = self.overwritten.lock().take() {
                for (i, w) in bytes.chunks_exact(8).enumerate() {
                    let word = u64::from_ne_bytes(w.try_into().expect("8-byte chunk"));
                    // SAFETY: as in `write_state_locked`: the header page is mapped
                    // read-write, the word is aligned, header words are accessed
                    // atomically, and we own the pool (no other thread writes the header).
                    unsafe { AtomicU64::from_ptr(self.at::<u64>(at + 8 * i as u64)) }.store(word, Ordering::Relaxed);
                }
                self.persist_off(at, SLOT_LEN);
                *self.state.lock() = before;
                self.abandoned.store(true, Ordering::Release);
            }
        }
        drop(self);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if self.size() == 0 {
            // Construction failed before the pool was mapped (`map_file`/`from_image`
            // returned an error): the header is not accessible and nothing was changed.
            self.unmap_reservation();
            return;
        }
        if self.mode == Mode::Msync && !self.read_only {
            // SAFETY: whole mapped range of a live mapping.
            unsafe { libc::msync(self.base as *mut libc::c_void, self.size() as usize, libc::MS_SYNC) };
        }
        // The fault hook is for the engine's writes, not for this clean-flag write: a
        // panic here could not keep the flag from reaching the file (the slot is stored
        // before its flush), and would only leak the mapping.
        #[cfg(feature = "fault-injection")]
        self.clear_fault_hook();
        // A pool dropped while a panic unwinds, or poisoned by its engine, may hold a
        // half-done operation: leave it marked unclean so the next open recovers (R4).
        if !std::thread::panicking() && !self.is_poisoned() && !self.abandoned.load(Ordering::Acquire) {
            let seal = self.seal_at_close.lock().take();
            self.update_state(|s| {
                s.clean = true;
                if let Some(seal) = seal {
                    s.roots[crate::header::SEAL_ROOT] = seal;
                }
            });
        }
        if self.mode == Mode::Msync {
            msync_pending();
        }
        // This thread's unfenced flushes of this pool must not be taken for another
        // pool's that is mapped here later.
        self.forget_pending();
        if let Some(wal) = &self.wal {
            wal.stop();
            // Best effort, as the rest of a drop: if the checkpoint fails, the log keeps
            // every record and the next open replays it.
            let _ = wal.checkpoint();
        }
        self.unmap_reservation();
        // The flock is released when `file` closes.
    }
}
