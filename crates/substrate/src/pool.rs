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

use crate::counters;
use crate::crash_sim::SimState;
use crate::error::{PoolError, Result};
use crate::header::{Immutable, Mutable, FORMAT_VERSION, HEADER_SIZE, MAX_LAYOUT, NUM_ROOTS, SLOT_LEN};
use crate::latency::{spin_ns, Latency};
use crate::persist::{self, lines_in, Mode};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Smallest pool: the header and one page of heap.
pub const MIN_POOL_SIZE: u64 = HEADER_SIZE + 4096;
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
    /// Size of a new pool file (rounded up to a page).
    pub initial_size: u64,
    /// Largest size the pool may grow to; fixed at creation.
    pub max_size: u64,
    /// Latency emulation (P5); defaults to `PMKV_LATENCY` or none.
    pub latency: Latency,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions { mode: Mode::Adr, initial_size: 16 << 20, max_size: 64 << 30, latency: Latency::from_env() }
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
}

/// Where the pool's bytes live.
enum Backing {
    File {
        file: File,
        path: PathBuf,
    },
    /// Crash-simulation pool: no file; `SimState` holds the persisted image.
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
    map_sync: bool,
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
    pub(crate) sim: Option<Box<SimState>>,
    /// The engine above may have left PM mid-operation (it panicked): never mark clean.
    poisoned: AtomicBool,
    /// Test-only fault injection at every flush and fence (`fault-injection` feature).
    #[cfg(feature = "fault-injection")]
    fault: crate::fault::FaultSlot,
}

// SAFETY: `base` points to a mapping owned by the pool for its whole life; all mutable
// shared state is behind atomics or mutexes. Concurrent access to the pool's bytes is the
// engines' responsibility, as with any shared memory.
unsafe impl Send for Pool {}
// SAFETY: as for Send: `&Pool` methods synchronise through atomics and mutexes.
unsafe impl Sync for Pool {}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

fn now_unix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn random_id() -> u64 {
    let mut x = now_unix() ^ (std::process::id() as u64) << 32;
    let t = std::time::Instant::now();
    x ^= (&t as *const _ as u64).rotate_left(17);
    x ^= std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0)
        << 7;
    x.max(1)
}

/// The header of a new pool in a zeroed buffer of `buf_len` bytes: immutable part and the
/// first state slot (sequence 1, empty heap, no roots).
fn new_header(layout: &str, size: u64, max: u64, clean: bool, buf_len: usize) -> (Immutable, Mutable, Vec<u8>) {
    let imm = Immutable {
        version: FORMAT_VERSION,
        layout: layout.into(),
        max_size: max,
        created_unix: now_unix(),
        pool_id: random_id(),
    };
    let st = Mutable { seq: 1, size, heap_top: HEADER_SIZE, clean, roots: [0; NUM_ROOTS] };
    let mut buf = vec![0u8; buf_len];
    imm.write(&mut buf);
    let at = Mutable::slot_for(st.seq);
    st.write(&mut buf[at..at + SLOT_LEN]);
    (imm, st, buf)
}

fn check_layout(layout: &str) -> Result<()> {
    if layout.is_empty() || layout.len() > MAX_LAYOUT || layout.contains('\0') {
        return Err(PoolError::LayoutName(layout.to_string()));
    }
    Ok(())
}

/// Reserve `len` bytes of address space, inaccessible and without memory behind it.
pub(crate) fn reserve(len: u64) -> Result<*mut u8> {
    // SAFETY: an anonymous PROT_NONE mapping has no preconditions.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len as usize,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(PoolError::io(format!("reserving {len} bytes of address space"), std::io::Error::last_os_error()));
    }
    Ok(p as *mut u8)
}

fn lock_file(file: &File, path: &Path, exclusive: bool) -> Result<bool> {
    let op = if exclusive { libc::LOCK_EX } else { libc::LOCK_SH } | libc::LOCK_NB;
    // SAFETY: flock on a valid descriptor.
    if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Ok(false);
    }
    Err(PoolError::io(format!("{}: locking", path.display()), e))
}

/// Open an existing pool file, for writing too if `write` (a missing file is `NotFound`).
fn open_existing_file(path: &Path, write: bool) -> Result<File> {
    match OpenOptions::new().read(true).write(write).open(path) {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(PoolError::NotFound { path: path.into() }),
        Err(e) => Err(PoolError::io(format!("{}: opening", path.display()), e)),
    }
}

/// Read and validate the header of an open file without changing anything.
fn read_header(file: &File, path: &Path, expect_layout: Option<&str>) -> Result<(u64, Immutable, Mutable)> {
    let len = file.metadata().map_err(|e| PoolError::io(format!("{}: stat", path.display()), e))?.len();
    let mut page = vec![0u8; HEADER_SIZE.min(len) as usize];
    file.read_exact_at(&mut page, 0).map_err(|e| PoolError::io(format!("{}: reading header", path.display()), e))?;
    let imm = Immutable::read(&page, path)?;
    if len < HEADER_SIZE {
        return Err(PoolError::Truncated { path: path.into(), actual: len, expected: HEADER_SIZE });
    }
    if let Some(want) = expect_layout {
        if imm.layout != want {
            return Err(PoolError::WrongLayout { path: path.into(), found: imm.layout, expected: want.into() });
        }
    }
    let st = Mutable::read(&page, path)?;
    validate_state(&imm, &st, len, path)?;
    Ok((len, imm, st))
}

fn validate_state(imm: &Immutable, st: &Mutable, len: u64, path: &Path) -> Result<()> {
    let bad = |what: &str| Err(PoolError::CorruptHeader { path: path.into(), what: what.into() });
    // (PAGE is a power of two: `x & (PAGE - 1)` is `x % PAGE`.) No pool this code creates
    // exceeds 64 TiB; a larger maximum could only come from a forged header.
    if imm.max_size < MIN_POOL_SIZE || imm.max_size > 1 << 46 || imm.max_size & (PAGE - 1) != 0 {
        return bad("maximum size");
    }
    if st.size < MIN_POOL_SIZE || st.size > imm.max_size || st.size & (PAGE - 1) != 0 {
        return bad("pool size");
    }
    if st.heap_top < HEADER_SIZE || st.heap_top > st.size {
        return bad("heap top");
    }
    if st.roots.iter().any(|&r| r != 0 && (r < HEADER_SIZE || r >= st.size)) {
        return bad("root offset outside the pool");
    }
    if len < st.size {
        return Err(PoolError::Truncated { path: path.into(), actual: len, expected: st.size });
    }
    Ok(())
}

impl Pool {
    /// Create a new pool file. Fails if `path` exists.
    pub fn create(path: impl AsRef<Path>, layout: &str, opts: &PoolOptions) -> Result<Pool> {
        let path = path.as_ref();
        check_layout(layout)?;
        let (size, max) = Self::check_sizes(opts)?;
        let file = match OpenOptions::new().read(true).write(true).create_new(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(PoolError::AlreadyExists { path: path.into() })
            }
            Err(e) => return Err(PoolError::io(format!("{}: creating", path.display()), e)),
        };
        let made = (|| {
            if !lock_file(&file, path, true)? {
                return Err(PoolError::Locked { path: path.into() });
            }
            allocate_file(&file, path, 0, size)?;
            let (imm, st, page) = new_header(layout, size, max, false, HEADER_SIZE as usize);
            file.write_all_at(&page, 0).map_err(|e| PoolError::io(format!("{}: writing header", path.display()), e))?;
            file.sync_all().map_err(|e| PoolError::io(format!("{}: sync", path.display()), e))?;
            Self::map_file(file, path.into(), imm, st, opts, false, false)
        })();
        if made.is_err() {
            let _ = std::fs::remove_file(path);
        }
        made
    }

    /// Open an existing pool. `layout` is the engine it must hold (`None`: any).
    /// Nothing in the file changes unless every check passes.
    pub fn open(path: impl AsRef<Path>, layout: Option<&str>, opts: &PoolOptions) -> Result<Pool> {
        let path = path.as_ref();
        let file = open_existing_file(path, true)?;
        if !lock_file(&file, path, true)? {
            return Err(PoolError::Locked { path: path.into() });
        }
        let (_, imm, st) = read_header(&file, path, layout)?;
        let clean = st.clean;
        Self::map_file(file, path.into(), imm, st, opts, clean, false)
    }

    /// Open an existing pool for reading only: the file is opened read-only and mapped
    /// without write permission, shares its lock with other readers (a writer holding
    /// the pool still makes this [`PoolError::Locked`]), and nothing in it changes — not
    /// even the clean-shutdown flag. Works on files the user may not write.
    ///
    /// A pool that was not closed cleanly is refused with [`PoolError::NeedsRecovery`]:
    /// its engine's recovery must write (finish or roll back interrupted operations), so
    /// open it read-write once. Engines refuse writes to a read-only pool
    /// ([`PoolError::ReadOnly`]); the pool itself refuses to grow or change its header.
    pub fn open_read_only(path: impl AsRef<Path>, layout: Option<&str>, opts: &PoolOptions) -> Result<Pool> {
        let path = path.as_ref();
        let file = open_existing_file(path, false)?;
        if !lock_file(&file, path, false)? {
            return Err(PoolError::Locked { path: path.into() });
        }
        let (_, imm, st) = read_header(&file, path, layout)?;
        if !st.clean {
            return Err(PoolError::NeedsRecovery { path: path.into() });
        }
        Self::map_file(file, path.into(), imm, st, opts, true, true)
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

    /// Open `path` if it exists, else create it.
    pub fn open_or_create(path: impl AsRef<Path>, layout: &str, opts: &PoolOptions) -> Result<Pool> {
        match Self::open(path.as_ref(), Some(layout), opts) {
            Err(PoolError::NotFound { .. }) => Self::create(path, layout, opts),
            r => r,
        }
    }

    /// Read a pool's header without mapping or changing it (for `pmkv info`).
    pub fn inspect(path: impl AsRef<Path>) -> Result<PoolInfo> {
        let path = path.as_ref();
        let file = open_existing_file(path, false)?;
        let (file_len, header, state) = read_header(&file, path, None)?;
        let in_use = !lock_file(&file, path, false)?;
        Ok(PoolInfo { path: path.into(), file_len, header, state, in_use })
    }

    fn check_sizes(opts: &PoolOptions) -> Result<(u64, u64)> {
        if opts.initial_size < MIN_POOL_SIZE {
            return Err(PoolError::TooSmall { size: opts.initial_size, min: MIN_POOL_SIZE });
        }
        let size = round_up(opts.initial_size, PAGE);
        let max = round_up(opts.max_size.max(size), PAGE);
        if max > 1 << 46 {
            return Err(PoolError::InvalidOption(format!("maximum size {max} exceeds 64 TiB")));
        }
        Ok((size, max))
    }

    fn map_file(
        file: File,
        path: PathBuf,
        imm: Immutable,
        st: Mutable,
        opts: &PoolOptions,
        was_clean: bool,
        read_only: bool,
    ) -> Result<Pool> {
        // The MAP_SYNC probe needs a writable shared mapping; a read-only pool never
        // flushes, so it does not need one.
        let map_sync = !read_only && probe_map_sync(&file);
        let base = reserve(imm.max_size)?;
        let pool = Pool {
            base,
            reserved: imm.max_size,
            mapped: AtomicU64::new(0),
            mode: opts.mode,
            latency: opts.latency,
            map_sync,
            lost: Mutex::new(Vec::new()),
            imm,
            state: Mutex::new(st),
            was_clean,
            read_only,
            backing: Backing::File { file, path },
            sim: None,
            poisoned: AtomicBool::new(false),
            #[cfg(feature = "fault-injection")]
            fault: Default::default(),
        };
        pool.map_extent(0, st.size)?;
        pool.mapped.store(st.size, Ordering::Release);
        // Mark the pool in use: a crash from here on is seen as unclean by the next open.
        // (A read-only pool changes nothing: `update_state` does nothing.)
        pool.update_state(|s| s.clean = false);
        Ok(pool)
    }

    /// Map `[from, to)` of the file at the same offsets of the reserved range, with
    /// `MAP_SYNC` if the probe at open found the file system supports it.
    ///
    /// There is deliberately no "try `MAP_SYNC`, fall back to `MAP_SHARED`" here: a
    /// `MAP_FIXED` mmap that fails *after* the kernel detached the old range (on Linux 6.x,
    /// a non-DAX file system refusing `MAP_SYNC` in its mmap hook) leaves a hole in the
    /// reservation, and another thread's mmap (a malloc arena, a thread stack, another
    /// pool) may land in it before the fallback `MAP_FIXED` silently replaces it.
    fn map_extent(&self, from: u64, to: u64) -> Result<()> {
        let Backing::File { file, path } = &self.backing else {
            return self.map_anon(from, to);
        };
        // SAFETY: `from` lies inside the reservation, so the address is in bounds.
        let addr = unsafe { self.base.add(from as usize) } as *mut libc::c_void;
        let len = (to - from) as usize;
        let prot = if self.read_only { libc::PROT_READ } else { libc::PROT_READ | libc::PROT_WRITE };
        let flags = if self.map_sync { MAP_SHARED_VALIDATE | MAP_SYNC } else { libc::MAP_SHARED };
        // SAFETY: the target range lies inside our own reservation, so MAP_FIXED replaces
        // only memory this pool owns.
        let p = unsafe { libc::mmap(addr, len, prot, flags | libc::MAP_FIXED, file.as_raw_fd(), from as i64) };
        if p == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            self.plug_hole(from, to);
            return Err(PoolError::io(format!("{}: mapping", path.display()), e));
        }
        Ok(())
    }

    /// After a failed `MAP_FIXED` over `[from, to)`: re-reserve the range if the failure
    /// left a hole; if something else already lives there, remember that this pool must
    /// never unmap it.
    fn plug_hole(&self, from: u64, to: u64) {
        // SAFETY: `from` lies inside the reservation, so the address is in bounds.
        let addr = unsafe { self.base.add(from as usize) } as *mut libc::c_void;
        let len = (to - from) as usize;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | MAP_FIXED_NOREPLACE;
        // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping.
        let p = unsafe { libc::mmap(addr, len, libc::PROT_NONE, flags, -1, 0) };
        if p == addr {
            return; // there was a hole, and it is ours again
        }
        if p != libc::MAP_FAILED {
            // A kernel without MAP_FIXED_NOREPLACE took the address as a hint.
            // SAFETY: the mapping just made, nobody else knows it.
            unsafe { libc::munmap(p, len) };
        }
        // Usually EEXIST because our reservation is intact, but a foreign mapping that took
        // the hole looks the same: never unmap this range (it costs only address space).
        self.lost.lock().push((from, to));
    }

    pub(crate) fn map_anon(&self, from: u64, to: u64) -> Result<()> {
        // SAFETY: `from` lies inside the reservation, so the address is in bounds.
        let addr = unsafe { self.base.add(from as usize) } as *mut libc::c_void;
        // SAFETY: inside our reservation.
        let rc = unsafe { libc::mprotect(addr, (to - from) as usize, libc::PROT_READ | libc::PROT_WRITE) };
        if rc != 0 {
            return Err(PoolError::io("mprotect", std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Build a crash-simulation pool (no file) whose bytes are `image`; used to create a
    /// fresh simulated pool and to recover from a crash image. Validates like `open`.
    pub fn from_image(image: &[u8], layout: Option<&str>, opts: &PoolOptions) -> Result<Pool> {
        let path = Path::new("<image>");
        if image.len() < 8 || image[..8] != crate::header::MAGIC {
            return Err(PoolError::NotAPool { path: path.into() });
        }
        let imm = Immutable::read(&image[..image.len().min(HEADER_SIZE as usize)], path)?;
        if (image.len() as u64) < HEADER_SIZE {
            // The state slots lie beyond the immutable part: never index past the image.
            return Err(PoolError::Truncated { path: path.into(), actual: image.len() as u64, expected: HEADER_SIZE });
        }
        if let Some(want) = layout {
            if imm.layout != want {
                return Err(PoolError::WrongLayout { path: path.into(), found: imm.layout, expected: want.into() });
            }
        }
        let st = Mutable::read(image, path)?;
        validate_state(&imm, &st, image.len() as u64, path)?;
        let base = reserve(imm.max_size)?;
        let sim = SimState::new(imm.max_size, opts.mode)?;
        let mut pool = Pool {
            base,
            reserved: imm.max_size,
            mapped: AtomicU64::new(0),
            mode: opts.mode,
            latency: opts.latency,
            map_sync: false,
            lost: Mutex::new(Vec::new()),
            imm,
            state: Mutex::new(st),
            was_clean: st.clean,
            read_only: false,
            backing: Backing::Sim,
            sim: Some(Box::new(sim)),
            poisoned: AtomicBool::new(false),
            #[cfg(feature = "fault-injection")]
            fault: Default::default(),
        };
        pool.map_anon(0, st.size)?;
        pool.sim.as_mut().unwrap().grow(st.size)?;
        // SAFETY: both ranges are mapped and at least `st.size` long.
        unsafe {
            std::ptr::copy_nonoverlapping(image.as_ptr(), pool.base, st.size as usize);
            pool.sim.as_ref().unwrap().load_persisted(&image[..st.size as usize]);
        }
        pool.mapped.store(st.size, Ordering::Release);
        pool.update_state(|s| s.clean = false);
        Ok(pool)
    }

    /// A new, empty crash-simulation pool.
    pub fn create_sim(layout: &str, opts: &PoolOptions) -> Result<Pool> {
        check_layout(layout)?;
        let (size, max) = Self::check_sizes(opts)?;
        let (_, _, image) = new_header(layout, size, max, true, size as usize);
        Self::from_image(&image, Some(layout), opts)
    }

    // ----- geometry ---------------------------------------------------------------------

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
    /// Pointer to the byte at `off`. The caller keeps `off` below [`Pool::size`].
    #[inline]
    pub fn at<T>(&self, off: u64) -> *mut T {
        debug_assert!(off < self.reserved);
        // SAFETY: inside the reservation; dereferencing is the caller's business.
        unsafe { self.base.add(off as usize) as *mut T }
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
    pub fn is_sim(&self) -> bool {
        self.sim.is_some()
    }

    // ----- mutable header -----------------------------------------------------------------

    /// Atomically update the mutable header (see `header`): write the other slot, persist.
    fn update_state(&self, f: impl FnOnce(&mut Mutable)) -> Mutable {
        let mut st = self.state.lock();
        if self.read_only {
            return *st; // never written (engines refuse writes before reaching here)
        }
        let mut next = *st;
        f(&mut next);
        self.write_state_locked(&mut st, next);
        next
    }

    /// Write `next` (with the following sequence number) to the slot not holding the
    /// current state, persist it, and make it current. The caller holds the state lock.
    fn write_state_locked(&self, st: &mut Mutable, mut next: Mutable) {
        next.seq = st.seq + 1;
        let at = Mutable::slot_for(next.seq);
        // SAFETY: the header page is always mapped; the state lock serialises writers.
        let slot = unsafe { std::slice::from_raw_parts_mut(self.base.add(at), SLOT_LEN) };
        next.write(slot);
        self.persist(slot.as_ptr(), SLOT_LEN);
        *st = next;
    }

    /// Root offset `i` (0 if unset).
    pub fn root(&self, i: usize) -> u64 {
        self.state.lock().roots[i]
    }
    /// Set root `i`; durable when this returns.
    pub fn set_root(&self, i: usize, off: u64) {
        self.update_state(|s| s.roots[i] = off);
    }
    /// The pool's bump pointer: every byte at or above it is unused.
    pub fn heap_top(&self) -> u64 {
        self.state.lock().heap_top
    }
    /// Bytes of the pool in use (header included), as seen by the bump allocator.
    pub fn used(&self) -> u64 {
        self.heap_top()
    }

    /// Take `len` bytes (aligned to `align`, a power of two) from the top of the heap,
    /// growing the pool if needed; durable when it returns. The bytes are zero unless a
    /// crash left earlier content there: callers must initialise what they take. Callers
    /// that must not leak space on a crash record the extent (e.g. in a chunk list)
    /// before calling [`Pool::commit_heap_top`]-style protocols of their own; the
    /// allocator (`epalloc`) is the only intended caller.
    pub fn take_heap(&self, len: u64, align: u64) -> Result<u64> {
        debug_assert!(align.is_power_of_two());
        // One critical section from reading the top to recording the new one, so that
        // concurrent callers never receive overlapping extents.
        self.check_writable()?;
        let mut st = self.state.lock();
        let off = round_up(st.heap_top, align);
        let end =
            off.checked_add(len).ok_or(PoolError::Full { requested: len, available: 0, max: self.imm.max_size })?;
        self.grow_locked(&mut st, end)?;
        let mut next = *st;
        next.heap_top = next.heap_top.max(end);
        self.write_state_locked(&mut st, next);
        Ok(off)
    }

    /// Set the heap top (only upwards); used by allocator recovery.
    pub fn raise_heap_top(&self, to: u64) -> Result<()> {
        self.check_writable()?;
        let mut st = self.state.lock();
        self.grow_locked(&mut st, to)?;
        if to > st.heap_top {
            let mut next = *st;
            next.heap_top = to;
            self.write_state_locked(&mut st, next);
        }
        Ok(())
    }

    /// Grow the pool so that at least `end` bytes are mapped. Growth doubles the size
    /// (capped at +1 GiB per step and at `max_size`) so that it is rare.
    pub fn ensure_size(&self, end: u64) -> Result<()> {
        if end <= self.size() {
            return Ok(());
        }
        let mut st = self.state.lock();
        self.grow_locked(&mut st, end)
    }

    /// The body of [`Pool::ensure_size`]; the caller holds the state lock (`st`).
    fn grow_locked(&self, st: &mut Mutable, end: u64) -> Result<()> {
        let cur = self.size();
        if end <= cur {
            return Ok(());
        }
        self.check_writable()?;
        let max = self.imm.max_size;
        if end > max {
            return Err(PoolError::Full { requested: end - cur, available: max - cur, max });
        }
        let want = round_up(end.max(cur + cur.min(1 << 30)), PAGE).min(max);
        if let Backing::File { file, path } = &self.backing {
            allocate_file(file, path, cur, want)?;
        }
        self.map_extent(cur, want)?;
        if let Some(sim) = &self.sim {
            sim.grow(want)?;
        }
        // Record the new size (file extended and mapped first, so a crash after this
        // never finds a header larger than its file), then publish it.
        let mut next = *st;
        next.size = want;
        self.write_state_locked(st, next);
        self.mapped.store(want, Ordering::Release);
        Ok(())
    }

    // ----- persistence (P3, P4, P5, P6) -----------------------------------------------------

    /// Write back the cache lines of `[p, p+len)` (no ordering until [`Pool::fence`]).
    /// Crate-private: a pointer is not checked against the mapping (flushing an unmapped
    /// address faults); engines use [`Pool::flush_off`], which is.
    #[inline]
    pub(crate) fn flush<T>(&self, p: *const T, len: usize) {
        let addr = p as usize;
        match self.mode {
            Mode::Adr => {
                // SAFETY: engines only flush memory inside the mapped pool.
                let n = unsafe { persist::flush_lines(addr, len) };
                counters::add_flushes(n);
                counters::add_lines_written(n);
                if self.latency.write_ns != 0 {
                    spin_ns(n * self.latency.write_ns as u64);
                }
            }
            Mode::Msync => {
                let n = lines_in(addr, len);
                counters::add_flushes(n);
                counters::add_lines_written(n);
                MSYNC_PENDING.with(|v| v.borrow_mut().push((addr, len)));
            }
            Mode::Eadr | Mode::None => counters::add_lines_written(lines_in(addr, len)),
        }
        if let Some(sim) = &self.sim {
            sim.on_flush(self, addr - self.base as usize, len);
        }
        #[cfg(feature = "fault-injection")]
        self.fault.fire(crate::crash_sim::PointKind::Flush);
    }

    /// Hint that the line at `off` will be read soon (a software prefetch; no effect on
    /// contents or durability, and harmless for any offset inside the reservation).
    /// Recovery uses it to overlap the PM reads of leaves it visits in key order, which
    /// lie in allocation order in the pool.
    #[inline]
    pub fn prefetch(&self, off: u64) {
        if off >= self.reserved {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetch never faults and has no architectural effect.
        unsafe {
            std::arch::x86_64::_mm_prefetch(self.at::<i8>(off) as *const i8, std::arch::x86_64::_MM_HINT_T0)
        };
    }

    /// Write back the cache lines of `[off, off+len)` of the pool (no ordering until
    /// [`Pool::fence`]).
    ///
    /// # Panics
    /// If the range is not inside the mapped pool: that is a bug of the caller (an engine
    /// flushing past its object), and flushing an unmapped address would fault. The `pmkv`
    /// API turns the panic into an error and leaves the pool marked unclean.
    #[inline]
    pub fn flush_off(&self, off: u64, len: usize) {
        self.check_range(off, len);
        self.flush(self.at::<u8>(off), len)
    }

    #[inline]
    fn check_range(&self, off: u64, len: usize) {
        let in_pool = off.checked_add(len as u64).is_some_and(|e| e <= self.size());
        assert!(in_pool, "flush of [{off:#x}, +{len}) outside the pool's {} mapped bytes", self.size());
    }

    /// Order all earlier flushes before any later store (the durability point).
    #[inline]
    pub fn fence(&self) {
        match self.mode {
            Mode::Adr | Mode::Eadr => {
                persist::sfence();
                counters::add_fence();
            }
            Mode::Msync => {
                counters::add_fence();
                msync_pending();
            }
            Mode::None => {}
        }
        if let Some(sim) = &self.sim {
            sim.on_fence(self);
        }
        #[cfg(feature = "fault-injection")]
        self.fault.fire(crate::crash_sim::PointKind::Fence);
    }

    /// Flush then fence: `[p, p+len)` is durable when this returns (crate-private, as
    /// [`Pool::flush`]).
    #[inline]
    pub(crate) fn persist<T>(&self, p: *const T, len: usize) {
        self.flush(p, len);
        self.fence();
    }

    /// Flush then fence `[off, off+len)`: durable when this returns.
    ///
    /// # Panics
    /// As [`Pool::flush_off`], if the range is not inside the mapped pool.
    #[inline]
    pub fn persist_off(&self, off: u64, len: usize) {
        self.flush_off(off, len);
        self.fence();
    }

    /// Engines report each PM line they read (P4) so counters and read-latency
    /// emulation (P5) see it.
    #[inline]
    pub fn note_read(&self, lines: u64) {
        counters::add_lines_read(lines);
        if self.latency.read_ns != 0 {
            spin_ns(lines * self.latency.read_ns as u64);
        }
    }

    #[cfg(feature = "fault-injection")]
    pub(crate) fn fault_slot(&self) -> &crate::fault::FaultSlot {
        &self.fault
    }

    /// The crash simulator of this pool (only for pools made by `create_sim`/`from_image`).
    pub fn sim(&self) -> Option<&SimState> {
        self.sim.as_deref()
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

    /// Make everything written and flushed so far durable: `msync` of the whole mapping
    /// in `msync` mode, a fence in `adr`/`eadr` (whose persists are durable already),
    /// nothing in `none`.
    pub fn sync(&self) -> Result<()> {
        match self.mode {
            Mode::Msync if !self.read_only && !self.is_sim() => self.msync_all(),
            Mode::Adr | Mode::Eadr => {
                self.fence();
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn msync_all(&self) -> Result<()> {
        msync_pending();
        // SAFETY: the whole mapped range of a live mapping.
        let rc = unsafe { libc::msync(self.base as *mut libc::c_void, self.size() as usize, libc::MS_SYNC) };
        if rc != 0 {
            let path = self.path().map(|p| p.display().to_string()).unwrap_or_default();
            return Err(PoolError::io(format!("{path}: msync"), std::io::Error::last_os_error()));
        }
        Ok(())
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

thread_local! {
    static MSYNC_PENDING: RefCell<Vec<(usize, usize)>> = const { RefCell::new(Vec::new()) };
}

/// `msync(MS_SYNC)` the pages this thread flushed since its last fence.
fn msync_pending() {
    MSYNC_PENDING.with(|v| {
        let mut v = v.borrow_mut();
        if v.is_empty() {
            return;
        }
        let mut pages: Vec<(usize, usize)> =
            v.drain(..).map(|(a, l)| (a & !(PAGE as usize - 1), round_up((a + l) as u64, PAGE) as usize)).collect();
        pages.sort_unstable();
        let mut i = 0;
        while i < pages.len() {
            let (start, mut end) = pages[i];
            let mut j = i + 1;
            while j < pages.len() && pages[j].0 <= end {
                end = end.max(pages[j].1);
                j += 1;
            }
            // SAFETY: page-aligned range of a live shared mapping.
            unsafe { libc::msync(start as *mut libc::c_void, end - start, libc::MS_SYNC) };
            i = j;
        }
    });
}

/// Extend `file` to `to` bytes with real blocks, so that a full disk is an error now.
fn allocate_file(file: &File, path: &Path, from: u64, to: u64) -> Result<()> {
    // SAFETY: valid descriptor.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), from as i64, (to - from) as i64) };
    match rc {
        0 => Ok(()),
        libc::ENOSPC | libc::EFBIG => {
            // Leave the file as it was.
            let _ = file.set_len(from);
            Err(PoolError::Full { requested: to - from, available: 0, max: to })
        }
        // File systems without fallocate: fall back to ftruncate (sparse).
        libc::EOPNOTSUPP | libc::EINVAL => {
            file.set_len(to).map_err(|e| PoolError::io(format!("{}: extending", path.display()), e))
        }
        e => Err(PoolError::io(format!("{}: extending", path.display()), std::io::Error::from_raw_os_error(e))),
    }
}

impl Pool {
    /// Unmap the reserved range, except parts recorded as no longer ours.
    fn unmap_reservation(&self) {
        let mut lost = std::mem::take(&mut *self.lost.lock());
        lost.sort_unstable();
        let mut at = 0;
        for (from, to) in lost.into_iter().chain([(self.reserved, self.reserved)]) {
            if from > at {
                // SAFETY: `[at, from)` is part of our reservation and owned by this pool;
                // nothing may use `base` after drop.
                unsafe { libc::munmap(self.base.add(at as usize) as *mut libc::c_void, (from - at) as usize) };
            }
            at = at.max(to);
        }
    }
}

/// Whether `file` can be mapped with `MAP_SYNC` (a DAX file system). Probed with a
/// one-page mapping at an address of the kernel's choosing, so that a refusal cannot
/// disturb any existing mapping.
fn probe_map_sync(file: &File) -> bool {
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: a fresh shared mapping of our own file, unmapped at once.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), PAGE as usize, prot, MAP_SHARED_VALIDATE | MAP_SYNC, file.as_raw_fd(), 0)
    };
    if p == libc::MAP_FAILED {
        // Not a DAX file system (EOPNOTSUPP) or an old kernel (EINVAL): plain MAP_SHARED.
        return false;
    }
    // SAFETY: the probe mapping made above.
    unsafe { libc::munmap(p, PAGE as usize) };
    true
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
        // A pool dropped while a panic unwinds, or poisoned by its engine, may hold a
        // half-done operation: leave it marked unclean so the next open recovers (R4).
        if !std::thread::panicking() && !self.is_poisoned() {
            self.update_state(|s| s.clean = true);
        }
        if self.mode == Mode::Msync {
            msync_pending();
        }
        self.unmap_reservation();
        // The flock is released when `file` closes.
    }
}
