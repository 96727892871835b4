//! The per-ART reader-writer lock (SPEC H7, §IV.G of the HART paper) and the mutex of the
//! lanes and node arena shards, as `lock_api` raw locks whose *exclusive release is a
//! plain store*.
//!
//! Why not `parking_lot`'s locks, which pmkv used before: a parking lock must learn at
//! release whether a thread sleeps on it, so its exclusive unlock is a compare-and-swap,
//! and on x86 every locked instruction costs what a fence does (and, in `adr`, waits for
//! the `clwb`s before it). HART takes an ART's write lock for every insert, update and
//! delete, a lane's mutex for every one-persist insert and out-of-place update, and an
//! arena shard's for every node allocated or freed: two locked instructions each, where
//! the releases need none. These locks never park: a thread that finds one taken spins briefly, then yields,
//! then sleeps in short naps, so a holder has no one to wake and releases with one store
//! (`mov` on x86). The critical sections they guard are one HART operation (a fraction of
//! a microsecond to a few), so waits are short; the longest holder is `check`, which
//! quiesces every ART, and its waiters nap meanwhile. Measured: an uncontended exclusive
//! lock and unlock, 5.9 ns with `parking_lot` and 3.2 ns with these (a tight loop on this
//! machine; docs/BENCHMARKS.md, "Locks whose release is a store").
//!
//! Shared locking keeps two locked instructions (a compare-and-swap to enter, a
//! subtraction to leave), as `parking_lot` has.
//!
//! # The state word and its orderings
//!
//! [`RawArtLock`]'s `state` is `readers << 2 | WRITER_WAITING | WRITER`:
//! - a reader enters by a compare-and-swap adding one reader, only from a state with
//!   neither `WRITER` nor `WRITER_WAITING` set (so a waiting writer is not starved by a
//!   stream of overlapping readers), and leaves by subtracting one;
//! - a writer enters by a compare-and-swap from a state with no reader and no writer to
//!   exactly `WRITER` (clearing a waiting flag, its own or another writer's, which sets it
//!   again on its next try), and leaves by storing 0.
//!
//! The store is correct because while `WRITER` is set no other thread changes the word
//! except to set `WRITER_WAITING`, which the store may clear: that loses only the hint
//! (the waiting writer sets it again), never a reader (readers never enter while `WRITER`
//! is set) and never a writer. Entering is `Acquire` and leaving `Release`, so everything
//! a holder did happens-before what the next holder does, as with any lock.

use lock_api::{GuardSend, RawMutex, RawRwLock};
use std::sync::atomic::{AtomicU32, Ordering};

const WRITER: u32 = 1;
const WRITER_WAITING: u32 = 2;
const READER: u32 = 4;

/// A reader-writer lock whose exclusive release is a store (see the module doc).
pub(crate) struct RawArtLock {
    state: AtomicU32,
}

/// A reader-writer lock over `T` built on [`RawArtLock`].
pub(crate) type ArtLock<T> = lock_api::RwLock<RawArtLock, T>;

/// How a waiter waits, the longer the more it has waited: pause instructions (doubling
/// from 1 to 64), then yields of the processor, then 50 µs naps. The naps bound what a
/// thread waiting behind a long holder (`check`) or a descheduled one costs the others.
struct Backoff(u32);

impl Backoff {
    fn wait(&mut self) {
        match self.0 {
            0..=6 => (0..1u32 << self.0).for_each(|_| std::hint::spin_loop()),
            7..=63 => std::thread::yield_now(),
            _ => std::thread::sleep(std::time::Duration::from_micros(50)),
        }
        self.0 = self.0.saturating_add(1);
    }
}

impl RawArtLock {
    #[cold]
    fn lock_shared_slow(&self) {
        let mut b = Backoff(0);
        while !self.try_lock_shared() {
            b.wait();
        }
    }

    #[cold]
    fn lock_exclusive_slow(&self) {
        let mut b = Backoff(0);
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & !WRITER_WAITING == 0 {
                if self.state.compare_exchange_weak(s, WRITER, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                    return;
                }
                continue;
            }
            if s & WRITER_WAITING == 0 {
                // Hold back new readers until the ones inside have left.
                self.state.fetch_or(WRITER_WAITING, Ordering::Relaxed);
            }
            b.wait();
        }
    }
}

// SAFETY: the state word admits either one writer or any number of readers, never both
// (module doc: readers enter only from a state without `WRITER`, a writer only from one
// without readers or writer, each by one compare-and-swap); entering is `Acquire` and
// leaving `Release`, so a holder sees everything the holders before it did.
unsafe impl RawRwLock for RawArtLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawArtLock = RawArtLock { state: AtomicU32::new(0) };
    type GuardMarker = GuardSend;

    #[inline]
    fn lock_shared(&self) {
        if !self.try_lock_shared() {
            self.lock_shared_slow();
        }
    }

    #[inline]
    fn try_lock_shared(&self) -> bool {
        let s = self.state.load(Ordering::Relaxed);
        // (2^30 readers at once would overflow the count: a limit no machine reaches.)
        s & (WRITER | WRITER_WAITING) == 0
            && self.state.compare_exchange_weak(s, s + READER, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    #[inline]
    unsafe fn unlock_shared(&self) {
        self.state.fetch_sub(READER, Ordering::Release);
    }

    #[inline]
    fn lock_exclusive(&self) {
        if self.state.compare_exchange_weak(0, WRITER, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_exclusive_slow();
        }
    }

    #[inline]
    fn try_lock_exclusive(&self) -> bool {
        self.state.compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    #[inline]
    unsafe fn unlock_exclusive(&self) {
        // A store, not a read-modify-write: see the module doc for why nothing is lost.
        self.state.store(0, Ordering::Release);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) & !WRITER_WAITING != 0
    }

    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        self.state.load(Ordering::Relaxed) & WRITER != 0
    }
}

/// A mutex whose release is a store, for short critical sections that one thread takes
/// at a time in the common case: a lane's (`insert_log`; threads take lanes round-robin)
/// and a node arena shard's (`art::arena`; one shard per thread).
pub(crate) struct RawShortLock {
    locked: AtomicU32,
}

/// A mutex over `T` built on [`RawShortLock`].
pub(crate) type ShortLock<T> = lock_api::Mutex<RawShortLock, T>;

impl RawShortLock {
    #[cold]
    fn lock_slow(&self) {
        let mut b = Backoff(0);
        // Wait reading, so that waiters do not take the line from the holder.
        while self.locked.load(Ordering::Relaxed) != 0 || !self.try_lock() {
            b.wait();
        }
    }
}

// SAFETY: one compare-and-swap from 0 to 1 admits one holder at a time (`Acquire`); only
// the holder stores 0 (`Release`), so each holder sees what the one before it did.
unsafe impl RawMutex for RawShortLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawShortLock = RawShortLock { locked: AtomicU32::new(0) };
    type GuardMarker = GuardSend;

    #[inline]
    fn lock(&self) {
        if !self.try_lock() {
            self.lock_slow();
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.locked.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    #[inline]
    unsafe fn unlock(&self) {
        self.locked.store(0, Ordering::Release);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// Two counters that writers keep equal, changing them one after the other with a
    /// yield between: a reader that ever sees them differ, or a final count short of the
    /// writes made, means the lock let two holders in together.
    #[test]
    fn writers_exclude_each_other_and_readers() {
        let lock = Arc::new(ArtLock::new((0u64, 0u64)));
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (lock, stop) = (lock.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut seen = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let g = lock.read();
                        assert_eq!(g.0, g.1, "a reader saw a writer's half-done change");
                        seen += 1;
                    }
                    seen
                })
            })
            .collect();
        let writers: Vec<_> = (0..3)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for i in 0..3_000 {
                        let mut g = lock.write();
                        g.0 += 1;
                        if i % 64 == 0 {
                            std::thread::yield_now();
                        }
                        g.1 += 1;
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
        assert!(reads > 0);
        assert_eq!(*lock.read(), (9_000, 9_000), "every write counted once");
        assert!(!lock.is_locked());
    }

    #[test]
    fn a_waiting_writer_holds_back_new_readers() {
        let lock = Arc::new(ArtLock::new(0u32));
        let r1 = lock.read();
        let w = {
            let lock = lock.clone();
            std::thread::spawn(move || *lock.write() += 1)
        };
        // Once the writer has flagged itself waiting, a new reader is refused.
        // SAFETY: only reads the state word; the lock is not unlocked through it.
        while unsafe { lock.raw() }.state.load(Ordering::Relaxed) & WRITER_WAITING == 0 {
            std::thread::yield_now();
        }
        assert!(lock.try_read().is_none(), "a reader entered past a waiting writer");
        drop(r1);
        w.join().unwrap();
        assert_eq!(*lock.read(), 1);
    }

    #[test]
    fn the_short_lock_excludes() {
        let lock = Arc::new(ShortLock::new((0u64, 0u64)));
        let ts: Vec<_> = (0..4)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for i in 0..3_000 {
                        let mut g = lock.lock();
                        g.0 += 1;
                        if i % 64 == 0 {
                            std::thread::yield_now();
                        }
                        assert_eq!(g.0, g.1 + 1);
                        g.1 += 1;
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(*lock.lock(), (12_000, 12_000));
        assert!(lock.try_lock().is_some());
    }
}
