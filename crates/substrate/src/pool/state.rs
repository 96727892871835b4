//! The header's mutable state (see `header`): two checksummed slots written alternately,
//! so every update (clean flag, roots, heap top, size) is crash-atomic.

use super::*;

impl Pool {
    /// Atomically update the mutable header (see `header`): write the other slot, persist.
    pub(super) fn update_state(&self, f: impl FnOnce(&mut Mutable)) -> Mutable {
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
    ///
    /// The slot is stored as sixteen 8-byte atomic words (the same bytes as a plain copy):
    /// the crash simulator reads the working memory word by word with atomic loads while
    /// other threads run, and a plain store racing with those would be a data race. The
    /// two-slot scheme, not the stores, is what makes the update crash-atomic.
    pub(super) fn write_state_locked(&self, st: &mut Mutable, mut next: Mutable) {
        next.seq = st.seq + 1;
        let at = Mutable::slot_for(next.seq) as u64;
        let mut buf = [0u8; SLOT_LEN];
        next.write(&mut buf);
        for (i, w) in buf.chunks_exact(8).enumerate() {
            let word = u64::from_ne_bytes(w.try_into().expect("8-byte chunk"));
            // SAFETY: the header page is mapped (read-write: read-only pools never get
            // here) for as long as `self` lives; `at + 8 * i` is 8-aligned (the base is
            // page-aligned, slots start at 256 and 384); header words are only ever
            // accessed atomically while the pool is open, and the state lock serialises
            // writers.
            unsafe { AtomicU64::from_ptr(self.at::<u64>(at + 8 * i as u64)) }.store(word, Ordering::Relaxed);
        }
        self.persist_off(at, SLOT_LEN);
        *st = next;
    }

    /// Root offset `i` (0 if unset).
    pub fn root(&self, i: usize) -> u64 {
        self.state.lock().roots[i]
    }

    /// Set root `i`; durable when this returns.
    ///
    /// # Panics
    /// If `i` is not below [`SEAL_ROOT`], or `off` is neither 0 nor inside the heap
    /// (`[4096, size)`): a header recording such a root is refused as corrupt by the next
    /// open, so writing it would make the pool unopenable. It is an engine bug; the `pmkv`
    /// API turns the panic into an error and leaves the pool marked unclean.
    pub fn set_root(&self, i: usize, off: u64) {
        assert!(i < SEAL_ROOT, "root index {i} out of range (0..{SEAL_ROOT})");
        assert!(
            off == 0 || (off >= HEADER_SIZE && off < self.size()),
            "root {i} = {off:#x} lies outside the pool's heap [{HEADER_SIZE:#x}, {:#x})",
            self.size()
        );
        self.update_state(|s| s.roots[i] = off);
    }

    /// The allocator's seal word (header root [`SEAL_ROOT`]); 0 if none was written. A
    /// seal set for the next clean shutdown counts as written.
    pub(crate) fn seal(&self) -> u64 {
        self.seal_at_close.lock().unwrap_or_else(|| self.state.lock().roots[SEAL_ROOT])
    }

    /// Record the allocator's seal for the next clean shutdown: the pool's drop writes it
    /// into the header in the same slot update that marks the pool clean (one atomic
    /// header update instead of two), and never writes it if the pool is left unclean
    /// (poisoned, abandoned after a refused open, or dropped while a panic unwinds).
    pub(crate) fn set_seal(&self, seal: u64) {
        *self.seal_at_close.lock() = Some(seal);
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
    /// crash left earlier content there: callers must initialise what they take. Space
    /// taken here and not yet recorded anywhere leaks on a crash, so callers that must not
    /// leak need a protocol of their own that records it (EPallocator's chunk lists); the
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
}
