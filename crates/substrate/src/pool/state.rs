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
    pub(super) fn write_state_locked(&self, st: &mut Mutable, mut next: Mutable) {
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
}
