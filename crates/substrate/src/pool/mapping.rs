//! The address range of a pool: reserved whole at open, the file mapped over its start
//! with `MAP_FIXED`, grown in place (see the module docs of `pool`), unmapped at drop.

use super::*;

/// Huge-page size: the reservation starts on such a boundary.
const HUGE_PAGE: usize = 2 << 20;

/// Reserve `len` bytes of address space, inaccessible and without memory behind it,
/// starting on a 2 MiB boundary: a file whose pages are 2 MiB (a DAX mount of real PM, a
/// tmpfs mounted with `huge=`) can then be mapped with one page-table entry per 2 MiB,
/// since file offsets and addresses agree modulo 2 MiB. With 4 KiB pages every random
/// access to a large pool is a TLB miss, and under virtualisation a TLB miss walks two
/// page tables.
pub(crate) fn reserve(len: u64) -> Result<*mut u8> {
    let fail = || PoolError::io(format!("reserving {len} bytes of address space"), std::io::Error::last_os_error());
    let len = usize::try_from(len).map_err(|_| fail())?.next_multiple_of(PAGE as usize);
    let total = len.checked_add(HUGE_PAGE).ok_or_else(fail)?;
    // SAFETY: an anonymous PROT_NONE mapping has no preconditions.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            total,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(fail());
    }
    let start = p as usize;
    let aligned = start.next_multiple_of(HUGE_PAGE);
    let end = aligned + len;
    // Give back the slack before and after the aligned range (page multiples, inside the
    // mapping just made).
    // SAFETY: both ranges lie in the mapping made above, which nothing else uses.
    unsafe {
        if aligned > start {
            libc::munmap(p, aligned - start);
        }
        if start + total > end {
            libc::munmap(end as *mut libc::c_void, start + total - end);
        }
    }
    Ok(aligned as *mut u8)
}

/// Extend `file` to `to` bytes with real blocks, so that a full disk is an error now.
pub(super) fn allocate_file(file: &File, path: &Path, from: u64, to: u64) -> Result<()> {
    // SAFETY: `file` is an open file borrowed for the call, so its descriptor is valid;
    // posix_fallocate touches no memory of this process.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), from as i64, (to - from) as i64) };
    match rc {
        0 => Ok(()),
        libc::ENOSPC | libc::EFBIG => {
            // Leave the file as it was. Not `PoolError::Full`, which is about the pool's
            // own maximum size: here the file system (ENOSPC) or the process's file-size
            // limit, `ulimit -f` (EFBIG, with SIGXFSZ ignored), refused the space.
            let _ = file.set_len(from);
            let why = if rc == libc::ENOSPC { "the file system is full" } else { "the file-size limit (ulimit -f)" };
            Err(PoolError::io(
                format!("{}: growing the pool file to {to} bytes refused by {why}", path.display()),
                std::io::Error::from_raw_os_error(rc),
            ))
        }
        // File systems without fallocate: fall back to ftruncate (sparse).
        libc::EOPNOTSUPP | libc::EINVAL => {
            file.set_len(to).map_err(|e| PoolError::io(format!("{}: extending", path.display()), e))
        }
        e => Err(PoolError::io(format!("{}: extending", path.display()), std::io::Error::from_raw_os_error(e))),
    }
}

/// Whether `file` lives on a memory file system (tmpfs, ramfs, hugetlbfs): nothing behind
/// the page cache.
fn memory_fs(file: &File) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;
    // SAFETY: a zeroed plain C struct, filled by fstatfs for our valid descriptor.
    let st = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        if libc::fstatfs(file.as_raw_fd(), &mut st) != 0 {
            return false;
        }
        st
    };
    matches!(st.f_type as i64, TMPFS_MAGIC | RAMFS_MAGIC | HUGETLBFS_MAGIC)
}

/// Whether `file` can be mapped with `MAP_SYNC` (a DAX file system). Probed with a
/// one-page mapping at an address of the kernel's choosing, so that a refusal cannot
/// disturb any existing mapping. `writable`: probe the writable mapping the pool will
/// use; else a read-only one, which works on a file opened read-only (`pmkv info`) and
/// gives the same answer: the kernel refuses `MAP_SYNC` for a file that is not DAX
/// whatever the protection.
pub(super) fn probe_map_sync(file: &File, writable: bool) -> bool {
    let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
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

/// The medium of `file`, knowing whether it maps with `MAP_SYNC`.
pub(super) fn medium_of(file: &File, map_sync: bool) -> Medium {
    if map_sync {
        Medium::Dax
    } else if memory_fs(file) {
        Medium::Memory
    } else {
        Medium::Disk
    }
}

impl Medium {
    /// What the open file `file` lives on: [`Medium::Dax`] if it maps with `MAP_SYNC`
    /// (probed with a read-only one-page mapping, so a file opened read-only will do),
    /// else [`Medium::Memory`] for tmpfs, ramfs and hugetlbfs (by `fstatfs`'s `f_type`),
    /// else [`Medium::Disk`]. A DAX file system that refuses `MAP_SYNC` counts as a disk:
    /// without it the file system's metadata is not durable with the data, and the
    /// report errs on the side of promising less.
    pub fn of_file(file: &File) -> Medium {
        medium_of(file, probe_map_sync(file, false))
    }
}

impl Pool {
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
    pub(super) fn grow_locked(&self, st: &mut Mutable, end: u64) -> Result<()> {
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
        if let Some(wal) = &self.wal {
            // The new size must be durable before a log record refers to its bytes.
            wal.files.grown(want)?;
        }
        self.map_extent(cur, want)?;
        self.populate(cur, want);
        #[cfg(feature = "crash-sim")]
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

    /// Map `[from, to)` of the file at the same offsets of the reserved range, with
    /// `MAP_SYNC` if the probe at open found the file system supports it.
    ///
    /// There is deliberately no "try `MAP_SYNC`, fall back to `MAP_SHARED`" here: a
    /// `MAP_FIXED` mmap that fails *after* the kernel detached the old range (on Linux 6.x,
    /// a non-DAX file system refusing `MAP_SYNC` in its mmap hook) leaves a hole in the
    /// reservation, and another thread's mmap (a malloc arena, a thread stack, another
    /// pool) may land in it before the fallback `MAP_FIXED` silently replaces it.
    pub(super) fn map_extent(&self, from: u64, to: u64) -> Result<()> {
        let Backing::File { file, path } = &self.backing else {
            return self.map_anon(from, to);
        };
        // SAFETY: `from` lies inside the reservation, so the address is in bounds.
        let addr = unsafe { self.base.add(from as usize) } as *mut libc::c_void;
        let len = (to - from) as usize;
        let prot = if self.read_only { libc::PROT_READ } else { libc::PROT_READ | libc::PROT_WRITE };
        let flags = if self.map_sync {
            MAP_SHARED_VALIDATE | MAP_SYNC
        } else if self.wal.is_some() {
            // Mode wal: the kernel must never write the mapping back (see `wal`).
            libc::MAP_PRIVATE
        } else {
            libc::MAP_SHARED
        };
        // SAFETY: the target range lies inside our own reservation, so MAP_FIXED replaces
        // only memory this pool owns.
        let p = unsafe { libc::mmap(addr, len, prot, flags | libc::MAP_FIXED, file.as_raw_fd(), from as i64) };
        if p == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            self.plug_hole(from, to);
            return Err(PoolError::io(format!("{}: mapping", path.display()), e));
        }
        // Ask for 2 MiB pages where the file system offers them on request (a tmpfs
        // mounted `huge=advise` or `within_size`); elsewhere a no-op, and a refusal costs
        // nothing but the 4 KiB pages.
        // SAFETY: advice on the range just mapped; it changes no contents.
        unsafe { libc::madvise(p, len, libc::MADV_HUGEPAGE) };
        Ok(())
    }

    /// Prefault `[from, to)` of a file pool that has [`PoolOptions::prefault`]: allocate
    /// and map its pages now, before any operation touches them. Best effort: a kernel
    /// without `MADV_POPULATE_WRITE` (before 5.14) refuses it, and the pages then fault in
    /// on first touch as they would without the option. The file's blocks were already
    /// allocated (`allocate_file`), so this never turns a full file system into an error.
    pub(super) fn populate(&self, from: u64, to: u64) {
        if !self.prefault || self.read_only || from >= to || !matches!(self.backing, Backing::File { .. }) {
            return;
        }
        let from = round_up(from, PAGE);
        if from >= to {
            return;
        }
        // SAFETY: `[from, to)` lies inside the mapped extent of this pool (the caller just
        // mapped it); populating changes no contents (a write fault maps the page, it does
        // not store to it).
        unsafe {
            libc::madvise(
                self.base.add(from as usize) as *mut libc::c_void,
                (to - from) as usize,
                libc::MADV_POPULATE_WRITE,
            )
        };
    }

    /// After a failed `MAP_FIXED` over `[from, to)`: re-reserve the range if the failure
    /// left a hole; if something else already lives there, remember that this pool must
    /// never unmap it.
    pub(super) fn plug_hole(&self, from: u64, to: u64) {
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
        // SAFETY: `[from, to)` lies inside the reservation this pool owns (callers pass
        // extents up to the pool's max size, the reservation's length); mprotect only
        // makes that range readable and writable.
        let rc = unsafe { libc::mprotect(addr, (to - from) as usize, libc::PROT_READ | libc::PROT_WRITE) };
        if rc != 0 {
            return Err(PoolError::io("mprotect", std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Unmap the reserved range, except parts recorded as no longer ours.
    pub(super) fn unmap_reservation(&self) {
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
