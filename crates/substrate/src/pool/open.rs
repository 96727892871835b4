//! Creating and opening pools: validation of every header field before anything is
//! mapped, locking, read-only opens, inspection without mapping, and crash-simulation pools.

use super::*;

pub(super) fn now_unix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

pub(super) fn random_id() -> u64 {
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
pub(super) fn new_header(
    layout: &str,
    size: u64,
    max: u64,
    clean: bool,
    buf_len: usize,
) -> (Immutable, Mutable, Vec<u8>) {
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

pub(super) fn check_layout(layout: &str) -> Result<()> {
    if layout.is_empty() || layout.len() > MAX_LAYOUT || layout.contains('\0') {
        return Err(PoolError::LayoutName(layout.to_string()));
    }
    Ok(())
}

/// A new pool file that no name reaches yet, in the directory `path` will be in.
///
/// Creation must be all or nothing: a process killed while it allocates the file or
/// writes the header must not leave a file at `path` that is not a pool (the next open
/// would refuse it as foreign, and `open_or_create` could never create it). So the file
/// is built without a name (`O_TMPFILE`) and linked at `path` only once its header is
/// on disk ([`publish`]). Where the file system has no `O_TMPFILE`, it is built under a
/// hidden scratch name (returned, and removed by the caller) that a kill can leave behind,
/// but `path` itself is still either absent or a whole pool.
fn unnamed_file(path: &Path) -> Result<(File, Option<PathBuf>)> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let creating = |e| PoolError::io(format!("{}: creating", path.display()), e);
    match OpenOptions::new().read(true).write(true).custom_flags(libc::O_TMPFILE).open(dir) {
        Ok(f) => return Ok((f, None)),
        // No O_TMPFILE on this file system (or kernel): use a scratch name.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::EISDIR) | Some(libc::EINVAL)) => {}
        Err(e) => return Err(creating(e)),
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let scratch = dir.join(format!(".{name}.{}-{:x}.pmkv-creating", std::process::id(), random_id()));
    let f = OpenOptions::new().read(true).write(true).create_new(true).open(&scratch).map_err(creating)?;
    Ok((f, Some(scratch)))
}

/// Give the finished pool file its name, atomically, failing if `path` exists by now
/// (`link` never replaces), and make the name durable (fsync of the directory).
fn publish(file: &File, scratch: Option<&Path>, path: &Path) -> Result<()> {
    let linked = match scratch {
        Some(s) => std::fs::hard_link(s, path),
        None => std::fs::hard_link(format!("/proc/self/fd/{}", file.as_raw_fd()), path).or_else(|e| {
            // Without /proc, AT_EMPTY_PATH links the descriptor itself (it may need
            // CAP_DAC_READ_SEARCH; the first error is the one worth reporting).
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| e.kind())?;
            // SAFETY: a valid descriptor, an empty C string and a NUL-terminated path.
            let rc = unsafe {
                libc::linkat(file.as_raw_fd(), c"".as_ptr(), libc::AT_FDCWD, c.as_ptr(), libc::AT_EMPTY_PATH)
            };
            let again = std::io::Error::last_os_error();
            match rc {
                0 => Ok(()),
                _ if again.kind() == std::io::ErrorKind::AlreadyExists => Err(again),
                _ => Err(e),
            }
        }),
    };
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(PoolError::AlreadyExists { path: path.into() })
        }
        Err(e) => return Err(PoolError::io(format!("{}: naming the new pool", path.display()), e)),
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

pub(super) fn lock_file(file: &File, path: &Path, exclusive: bool) -> Result<bool> {
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
///
/// Only a regular file is a pool. The open itself uses `O_NONBLOCK`, so a FIFO (or a
/// device) given as the path is refused at once instead of blocking until a writer
/// appears; the flag has no effect on regular files.
pub(super) fn open_existing_file(path: &Path, write: bool) -> Result<File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = match OpenOptions::new().read(true).write(write).custom_flags(libc::O_NONBLOCK).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(PoolError::NotFound { path: path.into() }),
        Err(e) => return Err(PoolError::io(format!("{}: opening", path.display()), e)),
    };
    let ty = file.metadata().map_err(|e| PoolError::io(format!("{}: stat", path.display()), e))?.file_type();
    if !ty.is_file() {
        let kind = if ty.is_dir() {
            "a directory"
        } else if ty.is_fifo() {
            "a FIFO"
        } else if ty.is_socket() {
            "a socket"
        } else if ty.is_char_device() || ty.is_block_device() {
            "a device"
        } else {
            "not a regular file"
        };
        return Err(PoolError::NotARegularFile { path: path.into(), kind });
    }
    Ok(file)
}

/// Read and validate the header of an open file without changing anything.
pub(super) fn read_header(file: &File, path: &Path, expect_layout: Option<&str>) -> Result<(u64, Immutable, Mutable)> {
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

pub(super) fn validate_state(imm: &Immutable, st: &Mutable, len: u64, path: &Path) -> Result<()> {
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
    if st.roots[..SEAL_ROOT].iter().any(|&r| r != 0 && (r < HEADER_SIZE || r >= st.size)) {
        return bad("root offset outside the pool");
    }
    if len < st.size {
        return Err(PoolError::Truncated { path: path.into(), actual: len, expected: st.size });
    }
    Ok(())
}

impl Pool {
    /// Create a new pool file. Fails if `path` exists. All or nothing: the file gets its
    /// name only once its header is on disk (see `unnamed_file`), so a crash leaves no
    /// file or a whole pool.
    pub fn create(path: impl AsRef<Path>, layout: &str, opts: &PoolOptions) -> Result<Pool> {
        let path = path.as_ref();
        check_layout(layout)?;
        let (size, max) = Self::check_sizes(opts)?;
        // Fail early rather than after allocating the file; `publish` checks again,
        // atomically.
        if std::fs::symlink_metadata(path).is_ok() {
            return Err(PoolError::AlreadyExists { path: path.into() });
        }
        let (file, scratch) = unnamed_file(path)?;
        let made = (|| {
            if !lock_file(&file, path, true)? {
                return Err(PoolError::Locked { path: path.into(), holder: super::holder::describe(&file) });
            }
            allocate_file(&file, path, 0, size)?;
            let (imm, st, page) = new_header(layout, size, max, false, HEADER_SIZE as usize);
            file.write_all_at(&page, 0).map_err(|e| PoolError::io(format!("{}: writing header", path.display()), e))?;
            file.sync_all().map_err(|e| PoolError::io(format!("{}: sync", path.display()), e))?;
            publish(&file, scratch.as_deref(), path)?;
            Ok((imm, st))
        })();
        if let Some(s) = &scratch {
            let _ = std::fs::remove_file(s);
        }
        let (imm, st) = made?;
        let pool = Self::map_file(file, path.into(), imm, st, opts, false, false)?;
        pool.populate(HEADER_SIZE, st.size);
        Ok(pool)
    }

    /// Open an existing pool. `layout` is the engine it must hold (`None`: any).
    /// Nothing in the file changes unless every check passes.
    pub fn open(path: impl AsRef<Path>, layout: Option<&str>, opts: &PoolOptions) -> Result<Pool> {
        let path = path.as_ref();
        let file = open_existing_file(path, true)?;
        if !lock_file(&file, path, true)? {
            return Err(PoolError::Locked { path: path.into(), holder: super::holder::describe(&file) });
        }
        crate::wal::replay(&file, path, true)?;
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
            return Err(PoolError::Locked { path: path.into(), holder: super::holder::describe(&file) });
        }
        crate::wal::replay(&file, path, false)?;
        let (_, imm, st) = read_header(&file, path, layout)?;
        if !st.clean {
            return Err(PoolError::NeedsRecovery { path: path.into() });
        }
        Self::map_file(file, path.into(), imm, st, opts, true, true)
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
        let medium = Medium::of_file(&file);
        Ok(PoolInfo { path: path.into(), file_len, header, state, in_use, medium })
    }

    pub(super) fn check_sizes(opts: &PoolOptions) -> Result<(u64, u64)> {
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

    pub(super) fn map_file(
        file: File,
        path: PathBuf,
        imm: Immutable,
        st: Mutable,
        opts: &PoolOptions,
        was_clean: bool,
        read_only: bool,
    ) -> Result<Pool> {
        // A read-only pool never flushes, so it maps without MAP_SYNC; its medium is
        // still probed (read-only), to be reported.
        let mut opts = opts.clone();
        if let Some(m) = opts.disk_mode {
            if medium_of(&file, probe_map_sync(&file, false)) == Medium::Disk {
                opts.mode = m;
            }
        }
        let opts = &opts;
        // A `wal` pool is mapped privately (never MAP_SYNC): only its log and checkpoints
        // write the file.
        let wal = opts.mode == Mode::Wal && !read_only;
        let map_sync = !read_only && !wal && probe_map_sync(&file, true);
        let medium = medium_of(&file, map_sync || (read_only && probe_map_sync(&file, false)));
        let base = reserve(imm.max_size)?;
        let wal = if wal {
            match Wal::open(&file, &path, imm.pool_id, opts.sync, opts.checkpoint_bytes) {
                Ok(w) => Some(w),
                Err(e) => {
                    // SAFETY: the reservation just made, which nothing else uses.
                    unsafe { libc::munmap(base as *mut libc::c_void, imm.max_size as usize) };
                    return Err(e);
                }
            }
        } else {
            None
        };
        let pool = Pool {
            base,
            reserved: imm.max_size,
            mapped: AtomicU64::new(0),
            mode: opts.mode,
            latency: opts.latency,
            llc: crate::llc::Model::for_latency(opts.latency),
            map_sync,
            medium,
            prefault: opts.prefault
                && !matches!(opts.mode, Mode::Msync | Mode::Wal)
                && matches!(medium, Medium::Dax | Medium::Memory),
            lost: Mutex::new(Vec::new()),
            imm,
            state: Mutex::new(st),
            was_clean,
            read_only,
            backing: Backing::File { file, path },
            wal,
            #[cfg(feature = "crash-sim")]
            sim: None,
            // Fault injection fires at every flush, so it takes the full path.
            counts_only: matches!(opts.mode, Mode::Eadr | Mode::None) && !cfg!(feature = "fault-injection"),
            poisoned: AtomicBool::new(false),
            overwritten: Mutex::new(None),
            abandoned: AtomicBool::new(false),
            seal_at_close: Mutex::new(None),
            #[cfg(feature = "fault-injection")]
            fault: Default::default(),
        };
        pool.map_extent(0, st.size)?;
        pool.mapped.store(st.size, Ordering::Release);
        // Mark the pool in use: a crash from here on is seen as unclean by the next open.
        // (A read-only pool changes nothing: `update_state` does nothing.) The slot this
        // overwrites is kept, so that an open the engine refuses can put it back. A pool
        // that was not closed cleanly is already marked so, and is left untouched: its
        // header is not written until the engine's recovery succeeds and the pool is
        // closed, so an open the engine refuses (damage found by recovery) changes no
        // byte of the file (SPEC R2), crashed or not.
        if !was_clean {
            return Ok(pool);
        }
        if !read_only {
            let at = Mutable::slot_for(st.seq + 1) as u64;
            let mut old = [0u8; SLOT_LEN];
            // SAFETY: the header page is mapped; the bytes are copied out before any
            // write, while no other thread has the pool.
            old.copy_from_slice(unsafe { std::slice::from_raw_parts(pool.at::<u8>(at), SLOT_LEN) });
            *pool.overwritten.lock() = Some((at, old, st));
        }
        pool.update_state(|s| s.clean = false);
        Ok(pool)
    }

    /// Build a crash-simulation pool (no file) whose bytes are `image`; used to create a
    /// fresh simulated pool and to recover from a crash image. Validates like `open`.
    /// (`crash-sim` feature.)
    #[cfg(feature = "crash-sim")]
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
        // SAFETY: a fresh reservation of `max_size` bytes, handed to the simulator alone.
        let sim = unsafe { SimState::new(reserve(imm.max_size)?, imm.max_size, opts.mode) };
        let mut pool = Pool {
            base,
            reserved: imm.max_size,
            mapped: AtomicU64::new(0),
            mode: opts.mode,
            latency: opts.latency,
            llc: crate::llc::Model::for_latency(opts.latency),
            map_sync: false,
            medium: Medium::Anonymous,
            prefault: false,
            lost: Mutex::new(Vec::new()),
            imm,
            state: Mutex::new(st),
            was_clean: st.clean,
            read_only: false,
            backing: Backing::Sim,
            wal: None,
            sim: Some(Box::new(sim)),
            counts_only: false,
            poisoned: AtomicBool::new(false),
            overwritten: Mutex::new(None),
            abandoned: AtomicBool::new(false),
            seal_at_close: Mutex::new(None),
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

    /// A new, empty crash-simulation pool (`crash-sim` feature).
    #[cfg(feature = "crash-sim")]
    pub fn create_sim(layout: &str, opts: &PoolOptions) -> Result<Pool> {
        check_layout(layout)?;
        let (size, max) = Self::check_sizes(opts)?;
        let (_, _, image) = new_header(layout, size, max, true, size as usize);
        Self::from_image(&image, Some(layout), opts)
    }
}
