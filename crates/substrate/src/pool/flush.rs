//! Persistence (SPEC P3–P6): flush and fence dispatched by mode, with the counters (P4),
//! latency emulation (P5) and crash-simulator and fault hooks (P6) on the way; `msync`
//! mode batches the pages a thread flushed until its next fence.

use super::*;

thread_local! {
    static MSYNC_PENDING: RefCell<Vec<(usize, usize)>> = const { RefCell::new(Vec::new()) };
    /// Group commit ([`Pool::group`]): how many groups this thread is inside, and whether
    /// a [`Pool::commit_fence`] was deferred to the outermost group's end.
    static GROUP: std::cell::Cell<(u32, bool)> = const { std::cell::Cell::new((0, false)) };
    /// Latency emulation charged per fence: whether this thread flushed a line since its
    /// last fence (see `latency`, "Where the write latency is charged").
    static WRITEBACKS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Mode `wal`: the base of the pool this thread last appended a log record to, and
    /// that record's LSN (what [`Pool::commit_wait`] waits for).
    static LAST_LSN: std::cell::Cell<(usize, u64)> = const { std::cell::Cell::new((0, 0)) };
    /// Flushes this thread made since its last fence that the engine leaves unfenced on
    /// purpose, their loss at a crash repaired by its recovery ([`Pool::flush_tolerated`]):
    /// not counted by [`Pool::unfenced_flushes`].
    static TOLERATED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// `msync(MS_SYNC)` the pages this thread flushed since its last fence.
pub(super) fn msync_pending() {
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

impl Pool {
    /// Write back the cache lines of `[off, off+len)` of the pool (no ordering until
    /// [`Pool::fence`]).
    ///
    /// Flushes are only offered by offset, and the offset is checked: a flush of an
    /// address outside the mapping would fault (or, in the crash simulator, read outside
    /// it), so a safe flush by pointer could not exist.
    ///
    /// # Panics
    /// If the range is not inside the mapped pool: that is a bug of the caller (an engine
    /// flushing past its object). The `pmkv` API turns the panic into an error and leaves
    /// the pool marked unclean.
    #[inline]
    pub fn flush_off(&self, off: u64, len: usize) {
        if off.checked_add(len as u64).is_none_or(|e| e > self.size()) {
            self.flush_outside(off, len);
        }
        // `eadr` and `none` issue no instruction and only count: inlined into the
        // engines' write paths (as a call it cost a HART insert or update ~2 %).
        if self.counts_only {
            counters::note_flushed(self.at::<u8>(off) as usize, len);
            if self.latency.read_ns != 0 {
                self.llc_written(self.at::<u8>(off) as usize, len);
            }
            return;
        }
        self.flush_in_pool(off, len)
    }

    #[cold]
    #[inline(never)]
    fn flush_outside(&self, off: u64, len: usize) -> ! {
        panic!("flush of [{off:#x}, +{len}) outside the pool's {} mapped bytes", self.size())
    }

    /// The body of [`Pool::flush_off`], for a range known to lie in the mapped pool.
    #[inline(never)]
    fn flush_in_pool(&self, off: u64, len: usize) {
        let addr = self.at::<u8>(off) as usize;
        match self.mode {
            Mode::Adr => {
                // SAFETY: `[off, off+len)` lies in the mapped pool (checked by the caller,
                // `flush_off`), and the mapping lives as long as `self`.
                let n = unsafe { persist::flush_lines(addr, len) };
                counters::add_flushes(n);
                counters::note_flushed(addr, len);
                if self.latency.read_ns != 0 {
                    self.llc_flushed(addr, len);
                }
                if self.latency.write_ns != 0 {
                    spin_ns(self.latency.flush_wait_ns(n));
                    if self.latency.charge == crate::latency::Charge::Fence {
                        WRITEBACKS.set(true);
                    }
                }
            }
            Mode::Msync | Mode::Wal => {
                let n = lines_in(addr, len);
                counters::add_flushes(n);
                counters::note_flushed(addr, len);
                MSYNC_PENDING.with(|v| v.borrow_mut().push((addr, len)));
            }
            Mode::Eadr | Mode::None => {
                counters::note_flushed(addr, len);
                if self.latency.read_ns != 0 {
                    self.llc_written(addr, len);
                }
            }
        }
        #[cfg(feature = "crash-sim")]
        if let Some(sim) = &self.sim {
            // SAFETY: `sim` is this pool's own simulator, `base` this pool's memory, and
            // the flushed range lies in the mapped pool (checked by `flush_off`).
            unsafe { sim.on_flush(self.base(), off as usize, len) };
        }
        #[cfg(feature = "fault-injection")]
        self.fault.fire(crate::crash_sim::PointKind::Flush);
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

    /// A store to PM is about to be made: a crash point in a crash-simulation pool whose
    /// hook asks for store points (the eADR model); nothing otherwise.
    #[inline]
    pub(crate) fn note_store(&self) {
        #[cfg(feature = "crash-sim")]
        if let Some(sim) = self.sim.as_deref() {
            // SAFETY: `sim` is this pool's own simulator and `base` this pool's memory.
            unsafe { sim.on_store(self.base()) };
        }
    }

    /// Store `v` to the 8-byte PM word at `off` (atomically, relaxed: a plain move on
    /// x86-64), after the crash point this store is in the eADR model. Engines that make
    /// their PM stores through this (and [`Pool::store_u32`]) get every store checked by
    /// the crash simulator's store points.
    ///
    /// # Panics
    ///
    /// If the word is misaligned or outside the pool.
    ///
    /// # Safety
    ///
    /// No reference to these bytes is alive (PM bytes handed out as slices must not
    /// change under them): the caller owns the word by its own protocol.
    #[inline]
    pub unsafe fn store_u64(&self, off: u64, v: u64) {
        assert!(off.is_multiple_of(8) && self.contains(off, 8), "PM word {off:#x} misaligned or outside the pool");
        #[cfg(feature = "crash-sim")]
        if let Some(sim) = self.sim.as_deref() {
            // SAFETY: `sim` is this pool's own simulator and `base` this pool's memory.
            unsafe { sim.on_store_word(self.base(), off as usize, v) };
        }
        counters::note_dirty(self.at::<u8>(off) as usize, 8);
        // SAFETY: aligned and inside the mapping (checked); no reference overlaps the
        // word (the caller's contract); an atomic store keeps concurrent readers defined.
        unsafe { std::sync::atomic::AtomicU64::from_ptr(self.at::<u64>(off)) }
            .store(v, std::sync::atomic::Ordering::Relaxed);
    }

    /// Compare-and-swap the 8-byte PM word at `off` from `current` to `new` (AcqRel), after
    /// the crash point this store is in the eADR model (taken whether or not the swap
    /// succeeds: a crash point is where a store *may* happen). Returns the word found, as
    /// `compare_exchange` does. For lock-free engines (NBTree), whose PM words are shared
    /// by threads that write them with atomics only.
    ///
    /// # Panics
    ///
    /// If the word is misaligned or outside the pool.
    ///
    /// # Safety
    ///
    /// As [`Pool::store_u64`].
    #[inline]
    pub unsafe fn cas_u64(&self, off: u64, current: u64, new: u64) -> std::result::Result<u64, u64> {
        assert!(off.is_multiple_of(8) && self.contains(off, 8), "PM word {off:#x} misaligned or outside the pool");
        self.note_store();
        // SAFETY: the word is 8-aligned and inside the mapping (asserted above); no
        // reference overlaps it (the caller's contract, as for `store_u64`); an atomic
        // RMW keeps concurrent readers and writers defined.
        let r = unsafe { std::sync::atomic::AtomicU64::from_ptr(self.at::<u64>(off)) }.compare_exchange(
            current,
            new,
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
        );
        // A failed swap leaves the line as it was: only a success dirties it.
        if r.is_ok() {
            counters::note_dirty(self.at::<u8>(off) as usize, 8);
        }
        r
    }

    /// Load the 8-byte PM word at `off` (Acquire): the read that pairs with
    /// [`Pool::store_u64`] and [`Pool::cas_u64`] of other threads.
    ///
    /// # Panics
    ///
    /// If the word is misaligned or outside the pool.
    ///
    /// # Safety
    ///
    /// No thread writes the word with a plain (non-atomic) store meanwhile.
    #[inline]
    pub unsafe fn load_u64(&self, off: u64) -> u64 {
        assert!(off.is_multiple_of(8) && self.contains(off, 8), "PM word {off:#x} misaligned or outside the pool");
        // SAFETY: aligned and inside the mapping (checked); no plain store races with
        // this load (the caller's contract).
        unsafe { std::sync::atomic::AtomicU64::from_ptr(self.at::<u64>(off)) }
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// [`Pool::store_u64`] for a 4-byte word.
    ///
    /// # Panics
    ///
    /// If the word is misaligned or outside the pool.
    ///
    /// # Safety
    ///
    /// As [`Pool::store_u64`].
    #[inline]
    pub unsafe fn store_u32(&self, off: u64, v: u32) {
        assert!(off.is_multiple_of(4) && self.contains(off, 4), "PM word {off:#x} misaligned or outside the pool");
        self.note_store();
        counters::note_dirty(self.at::<u8>(off) as usize, 4);
        // SAFETY: the word is 4-aligned and inside the mapping (asserted above); no
        // reference overlaps it (the caller's contract); an atomic store keeps concurrent
        // readers defined.
        unsafe { std::sync::atomic::AtomicU32::from_ptr(self.at::<u32>(off)) }
            .store(v, std::sync::atomic::Ordering::Relaxed);
    }

    /// Order all earlier flushes before any later store (the durability point).
    #[inline]
    pub fn fence(&self) {
        match self.mode {
            Mode::Adr | Mode::Eadr => {
                persist::sfence();
                counters::add_fence();
                if self.latency.charge == crate::latency::Charge::Fence {
                    spin_ns(self.latency.fence_wait_ns(WRITEBACKS.replace(false)));
                }
            }
            Mode::Msync => {
                counters::add_fence();
                msync_pending();
                TOLERATED.set(0);
            }
            Mode::Wal => {
                counters::add_fence();
                self.wal_fence();
                TOLERATED.set(0);
            }
            Mode::None => {}
        }
        self.fence_point();
    }

    /// Take this thread's flushed ranges of this pool (leaving other pools'), as
    /// 64-byte-aligned offset ranges, sorted and merged.
    fn take_pending(&self) -> Vec<(u64, u64)> {
        let lo = self.base as usize;
        let hi = lo + self.reserved as usize;
        let mut out = Vec::new();
        MSYNC_PENDING.with(|v| {
            v.borrow_mut().retain(|&(a, l)| {
                if a >= lo && a < hi {
                    let start = (a - lo) as u64 & !(persist::LINE as u64 - 1);
                    out.push((start, round_up((a - lo + l) as u64, persist::LINE as u64)));
                    false
                } else {
                    true
                }
            })
        });
        out.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(out.len());
        for (s, e) in out {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        merged.into_iter().map(|(s, e)| (s, e - s)).collect()
    }

    /// Report that the engine wrote `[off, off+len)` of the pool through its own pointers
    /// (a bulk copy, a node initialised in place) and will not flush it in this mode (in
    /// `eadr`): with exact counting on ([`counters::set_exact`]) the lines count as written by the
    /// current operation, as the stores of [`crate::Pool::store_u64`] and flushes do; off,
    /// nothing happens (the default count sees flushes only). Only counts.
    #[inline]
    pub fn note_write(&self, off: u64, len: usize) {
        counters::note_dirty((self.base() as usize).wrapping_add(off as usize), len);
    }

    /// How many flushes of this pool this thread has made since its last fence, where
    /// that is tracked: modes `msync` and `wal` (which act on them at the fence) and
    /// every crash-simulated pool; 0 elsewhere.
    ///
    /// An operation must not return with any: a fence orders only its own thread's
    /// flushes, and the next operation may run on another thread (a server's workers take
    /// turns), so a flush left for "the next operation's fence" is ordered by no fence
    /// until this thread happens to fence again. In mode `wal` its lines reach the log
    /// only then, after records that depend on them (Mangosteen's inline
    /// backend left its applied bytes so, the next batch moved the head past them on
    /// another thread, and a SIGKILL left region lines failing their checks). The `pmkv`
    /// API asserts this is 0 after every engine call in debug builds.
    pub fn unfenced_flushes(&self) -> usize {
        let lo = self.base as usize;
        let hi = lo + self.reserved as usize;
        let listed = MSYNC_PENDING.with(|v| v.borrow().iter().filter(|&&(a, _)| a >= lo && a < hi).count());
        #[cfg(feature = "crash-sim")]
        let listed = match &self.sim {
            Some(sim) => listed.max(sim.unfenced_of_this_thread()),
            None => listed,
        };
        listed.saturating_sub(TOLERATED.get())
    }

    /// Say that this thread's last flush (of one line) is left unfenced on purpose: the
    /// engine's recovery repairs its loss (EPallocator's `free_unfenced`, whose lost reset
    /// bit leaves an orphan that HART's and WOART's sweeps free), so
    /// [`Pool::unfenced_flushes`] does not count it.
    pub fn flush_tolerated(&self) {
        // Only where flushes are tracked (and fences reset the count).
        if matches!(self.mode, Mode::Msync | Mode::Wal) || self.is_sim() {
            TOLERATED.set(TOLERATED.get() + 1);
        }
    }

    /// Forget this thread's unfenced flushes of this pool (at drop).
    pub(super) fn forget_pending(&self) {
        let _ = self.take_pending();
    }

    /// The fence of mode `wal`: one log record with the current contents of the lines
    /// this thread flushed since its last fence (see `wal`, "Capture mirrors ADR").
    fn wal_fence(&self) {
        let extents = self.take_pending();
        if extents.is_empty() {
            return;
        }
        // A simulated pool in mode wal has no log: the crash simulator stands for it.
        let Some(wal) = &self.wal else { return };
        // SAFETY: every extent lies in the mapped pool: flushes are checked against the
        // size when made, the pool never shrinks, and lines round within a page.
        let lsn = unsafe { wal.append(self.base, &extents) };
        LAST_LSN.set((self.base as usize, lsn));
    }

    /// The sync policy of a `wal` pool opened for writing (`None` in other modes).
    pub fn sync_policy(&self) -> Option<SyncPolicy> {
        self.wal.as_ref().map(|w| w.policy())
    }

    /// Acknowledgement point of mode `wal`: return once this thread's writes to this pool
    /// are as safe as the sync policy promises (see [`SyncPolicy`]); at once in other
    /// modes, where a write is durable when its operation returns. Call it after the
    /// operation, *outside* any lock the engine holds, so that writers of many threads
    /// queue here together and share one `fdatasync` (group commit).
    pub fn commit_wait(&self) -> Result<()> {
        let Some(wal) = &self.wal else { return Ok(()) };
        let (base, lsn) = LAST_LSN.get();
        // A thread whose last record was for another pool waits for everything appended.
        let lsn = if base == self.base as usize { lsn } else { wal.appended() };
        wal.wait(lsn)
    }

    /// The LSN of the last log record appended by any thread (0 outside mode `wal`): what
    /// a reader that must not see a value a power loss could take back waits for
    /// ([`Pool::wait_lsn`]).
    pub fn appended_lsn(&self) -> u64 {
        self.wal.as_ref().map_or(0, |w| w.appended())
    }

    /// The LSN up to which the log is on the device (0 outside mode `wal`).
    pub fn durable_lsn(&self) -> u64 {
        self.wal.as_ref().map_or(0, |w| w.durable())
    }

    /// The LSN up to which the log is as safe as the sync policy promises (on the device
    /// under `always`, written to the kernel under `everysec` and `no`; 0 outside mode
    /// `wal`): a record at or below it needs no [`Pool::wait_lsn`].
    pub fn acknowledged_lsn(&self) -> u64 {
        self.wal.as_ref().map_or(0, |w| w.acknowledged())
    }

    /// [`Pool::commit_wait`] for a given LSN (from [`Pool::appended_lsn`]).
    pub fn wait_lsn(&self, lsn: u64) -> Result<()> {
        self.wal.as_ref().map_or(Ok(()), |w| w.wait(lsn))
    }

    /// Make every write so far durable on the device whatever the sync policy (mode
    /// `wal`; nothing in other modes).
    pub fn sync_log(&self) -> Result<()> {
        self.wal.as_ref().map_or(Ok(()), |w| w.sync_all())
    }

    /// Checkpoints a `wal` pool has made since it was opened (0 in other modes).
    pub fn checkpoints(&self) -> u64 {
        self.wal.as_ref().map_or(0, |w| w.checkpoints())
    }

    /// Start recording this `wal` pool's file I/O for the power-loss simulation
    /// (`crash-sim` feature; `None` if the pool has no log). Call it when the pool file
    /// and the log are synced (after [`Pool::sync_log`]), and copy both files then: they
    /// are what [`crate::PowerLog::crash_files`] starts from.
    #[cfg(feature = "crash-sim")]
    pub fn record_power(&self) -> Option<Arc<crate::power::PowerLog>> {
        let wal = self.wal.as_ref()?;
        let r = Arc::new(crate::power::PowerLog::default());
        *wal.files.recorder.lock() = Some(Arc::clone(&r) as Arc<dyn crate::wal::Recorder>);
        Some(r)
    }

    /// What every fence is besides its instruction: a crash-simulator point and a fault
    /// injection point.
    #[inline]
    fn fence_point(&self) {
        #[cfg(feature = "crash-sim")]
        if let Some(sim) = &self.sim {
            // SAFETY: `sim` is this pool's own simulator and `base` this pool's memory.
            unsafe { sim.on_fence(self.base()) };
            TOLERATED.set(0);
        }
        #[cfg(feature = "fault-injection")]
        self.fault.fire(crate::crash_sim::PointKind::Fence);
    }

    /// [`Pool::fence`] right after a locked read-modify-write of PM (a compare-and-swap)
    /// and the flush of its line. On x86 a locked instruction is itself a full barrier:
    /// every store before it, and the RMW's own, is globally visible before any later
    /// store or load. In `eadr`, where visible is durable and there is no flush to wait
    /// for, that is all the fence would order, so no `sfence` is issued; the fence is
    /// still counted (the RMW is the ordering point) and is a crash-simulator point as
    /// every fence is. In the other modes, where the flush follows the RMW, it is a fence.
    /// Measured: ~1 ns of every EPallocator publish and free in `eadr` (docs/design/hart.md,
    /// "Tried and measured").
    #[inline]
    pub fn fence_after_rmw(&self) {
        if self.mode == Mode::Eadr && cfg!(target_arch = "x86_64") {
            counters::add_fence();
            self.fence_point();
            return;
        }
        self.fence()
    }

    /// The fence that ends a write operation: the operation's last stores were flushed and
    /// this makes them durable before the operation returns. It orders nothing *inside*
    /// the operation (those fences are [`Pool::fence`]), so a group commit may defer it:
    /// outside [`Pool::group`] it is a fence; inside, it is issued once, when the
    /// outermost group ends (or sooner by any fence of this thread).
    #[inline]
    pub fn commit_fence(&self) {
        let deferred = GROUP.with(|g| {
            let (depth, _) = g.get();
            if depth > 0 {
                g.set((depth, true));
            }
            depth > 0
        });
        if !deferred {
            self.fence();
        }
    }

    /// Group commit: run `f`, whose write operations share their commit fences
    /// ([`Pool::commit_fence`]): one fence when `f` returns (or unwinds) instead of one
    /// per operation. In `adr` this saves a fence per write; in `msync` an `msync` per
    /// write, the difference between one disk flush per key and one per batch.
    ///
    /// A crash inside the group keeps a prefix of its operations (each later operation's
    /// first ordering fence makes every earlier one durable), and nothing of the group is
    /// durable for certain until `group` returns. So the caller must keep everyone else
    /// from observing, or building on, the group's writes until then (HART holds the
    /// ART's write lock across the group), and must acknowledge none of them before.
    pub fn group<R>(&self, f: impl FnOnce() -> R) -> R {
        struct End<'a>(&'a Pool);
        impl Drop for End<'_> {
            fn drop(&mut self) {
                let pending = GROUP.with(|g| {
                    let (depth, pending) = g.get();
                    if depth == 1 {
                        g.set((0, false));
                        pending
                    } else {
                        g.set((depth - 1, pending));
                        false
                    }
                });
                if pending {
                    self.0.fence();
                }
            }
        }
        GROUP.with(|g| {
            let (depth, pending) = g.get();
            g.set((depth + 1, pending));
        });
        let _end = End(self);
        f()
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

    /// Hint that the line at `off` will be written soon: fetch it for ownership
    /// (`prefetchw`; on a CPU without it the instruction is a no-op), so that the store's
    /// read-for-ownership miss overlaps the work before it instead of stalling the store
    /// and every locked instruction after it. Harmless for any offset inside the
    /// reservation, like [`Pool::prefetch`].
    #[inline]
    pub fn prefetch_write(&self, off: u64) {
        if off >= self.reserved {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults, reads or writes nothing architecturally and
        // leaves the flags alone.
        unsafe {
            std::arch::asm!("prefetchw [{0}]", in(reg) self.at::<u8>(off), options(nostack, preserves_flags, readonly))
        };
    }

    /// Engines report the PM bytes `[off, off+len)` they read (P4), so that the counters and
    /// the read-latency emulation (P5) see them: every line counts as read; with a read
    /// latency set, the lines pay it — each one ([`ReadModel::PerLine`]), or only the
    /// runs of lines the last-level cache model misses ([`ReadModel::Llc`], `crate::llc`).
    /// An engine reports each PM structure as it reads it, by where it is, so that the
    /// cache model sees the same addresses again when a tree's upper levels are revisited.
    #[inline]
    pub fn note_read_at(&self, off: u64, len: usize) {
        if len == 0 {
            return;
        }
        let addr = (self.base() as usize).wrapping_add(off as usize);
        counters::add_lines_read(lines_in(addr, len));
        if self.latency.read_ns != 0 {
            self.charge_read(addr, len);
        }
    }

    /// [`Pool::note_read_at`]'s emulation, out of line (it runs only with a read latency).
    #[inline(never)]
    fn charge_read(&self, addr: usize, len: usize) {
        match (self.latency.read_model, &self.llc) {
            (ReadModel::PerLine, _) => spin_ns(lines_in(addr, len) * self.latency.read_ns as u64),
            (ReadModel::Llc { .. }, Some(m)) => {
                let (missed, wait) = m.read(addr, len);
                counters::add_lines_missed(missed);
                spin_ns(owe(m.cost_ps(addr, len), wait));
            }
            // PM reads no slower than DRAM's: nothing to charge, and no model is run.
            (ReadModel::Llc { .. }, None) => {}
        }
    }

    /// In `eadr` and `none`, where a flush request issues nothing: the lines written stay
    /// in the cache model (out of line: only with a read latency).
    #[inline(never)]
    fn llc_written(&self, addr: usize, len: usize) {
        if let Some(m) = &self.llc {
            m.insert(addr, len);
        }
    }

    /// In `adr`: flushed lines leave the cache model, as `clflush` evicts them.
    #[inline(never)]
    fn llc_flushed(&self, addr: usize, len: usize) {
        if let Some(m) = &self.llc {
            m.evict(addr, len);
        }
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

    pub(super) fn msync_all(&self) -> Result<()> {
        msync_pending();
        // SAFETY: the whole mapped range of a live mapping.
        let rc = unsafe { libc::msync(self.base as *mut libc::c_void, self.size() as usize, libc::MS_SYNC) };
        if rc != 0 {
            let path = self.path().map(|p| p.display().to_string()).unwrap_or_default();
            return Err(PoolError::io(format!("{path}: msync"), std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

thread_local! {
    /// Picoseconds of the cache model's own time not yet taken off a charged wait.
    static OWED_PS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Add `cost_ps` of model time to what this thread owes and return `charge_ns` less what
/// it owes, taking that off the debt: over a run, the waits add the charged stalls less the
/// model's time (as long as the stalls are longer).
fn owe(cost_ps: u64, charge_ns: u64) -> u64 {
    OWED_PS.with(|o| {
        let owed = o.get().saturating_add(cost_ps);
        let charge_ps = charge_ns.saturating_mul(1000);
        let paid = owed.min(charge_ps);
        o.set(owed - paid);
        (charge_ps - paid) / 1000
    })
}
