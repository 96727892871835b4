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
//! the releases need none. These locks never park: a thread that finds one taken spins
//! briefly, then yields the processor until its turn, so a holder has no one to wake and
//! releases an exclusive hold with one store (`mov` on x86). The critical sections they
//! guard are one HART operation (a fraction of a microsecond to a few), so waits are
//! short; the longest holder is `check`, which quiesces every ART, and its waiters yield
//! meanwhile. Measured: an uncontended exclusive lock and unlock, 5.9 ns with
//! `parking_lot` and 3.2 ns with these (a tight loop on this machine;
//! docs/design/hart.md, "Tried and measured").
//!
//! Shared locking keeps two locked instructions (one to enter, one to leave), as
//! `parking_lot` has.
//!
//! # The per-ART lock: a reader-writer ticket lock
//!
//! [`RawArtLock`] is the reader-writer ticket lock of Mellor-Crummey and Scott ("Scalable
//! reader-writer synchronization for shared-memory multiprocessors", PPoPP 1991, the
//! centralized fair lock), so it is *fair*: threads enter in the order they asked, and a
//! thread that releases and asks again at once (a writer in a loop, `check` quiescing
//! every ART in a loop) waits behind those already waiting. (A first version let any
//! thread take the lock the moment it was free; under more threads than cores a thread
//! that yielded while waiting could lose that race for seconds: the concurrency tests
//! took 1–70 s instead of 2–3.) The price of fairness without parking: with more threads
//! than cores, a waiter whose turn has come may be descheduled, and those behind it wait
//! for it (they yield meanwhile). That concurrency test (6 threads on 2 cores, one of them
//! quiescing every ART in a loop) takes ~7 s with this lock against 2–3 s with
//! `parking_lot`'s; with at most one thread per core, as the harness and the server run,
//! waits are a critical section long.
//!
//! - `tickets` counts the requests made, writers in the low 32 bits and readers in the
//!   high 32, each wrapping within its half: a reader adds one to the high half (one
//!   locked addition, whose carry out of the top is dropped), a writer increments the
//!   low half by compare-and-swap (an addition could carry into the readers' half). A
//!   thread's request is its snapshot of both counts, taken as it increments them.
//! - `readers_done` and `writers_done` count the releases.
//! - A reader may enter once every writer that asked before it has left
//!   (`writers_done` = its writer count); a writer once every reader and writer that
//!   asked before it has left (both counts equal its snapshot). Readers that asked
//!   between two writers hold the lock together.
//! - A reader leaves by adding one to `readers_done` (readers leave concurrently); a
//!   writer by *storing* `writers_done + 1`: only the writer holding the lock ever writes
//!   that word, so a store loses nothing.
//!
//! Entering ends with an `Acquire` load of the release counts that admit the thread and
//! leaving is a `Release` store or addition to them, so everything a holder did
//! happens-before what every later holder does. Counts wrap; equality is all that is
//! compared, which holds while fewer than 2^32 threads wait on one lock.

use crossbeam_utils::Backoff;
use lock_api::{GuardSend, RawMutex, RawRwLock};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// One reader's request in `tickets` (readers count in the high half).
const ONE_READER: u64 = 1 << 32;

/// The writer requests of ticket counts `t` (the low half).
#[inline]
fn writers(t: u64) -> u32 {
    t as u32
}

/// The reader requests of ticket counts `t` (the high half).
#[inline]
fn readers(t: u64) -> u32 {
    (t >> 32) as u32
}

/// A fair reader-writer lock whose exclusive release is a store (see the module doc).
pub(crate) struct RawArtLock {
    tickets: AtomicU64,
    readers_done: AtomicU32,
    writers_done: AtomicU32,
}

/// A reader-writer lock over `T` built on [`RawArtLock`].
pub(crate) type ArtLock<T> = lock_api::RwLock<RawArtLock, T>;

/// The ticket counts `t` with one more writer, wrapping within the low half.
#[inline]
fn bump_writer(t: u64) -> u64 {
    (t & !(u32::MAX as u64)) | writers(t).wrapping_add(1) as u64
}

impl RawArtLock {
    /// Take a writer's ticket: the counts of requests before this one.
    #[inline]
    fn writer_ticket(&self) -> u64 {
        let mut t = self.tickets.load(Ordering::Relaxed);
        loop {
            match self.tickets.compare_exchange_weak(t, bump_writer(t), Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return t,
                Err(now) => t = now,
            }
        }
    }

    /// Whether a reader holding ticket `t` may enter.
    #[inline]
    fn reader_may_enter(&self, t: u64) -> bool {
        self.writers_done.load(Ordering::Acquire) == writers(t)
    }

    /// Whether a writer holding ticket `t` may enter.
    #[inline]
    fn writer_may_enter(&self, t: u64) -> bool {
        self.writers_done.load(Ordering::Acquire) == writers(t)
            && self.readers_done.load(Ordering::Acquire) == readers(t)
    }

    /// Wait until `may_enter(self, t)`: the thread holding ticket `t` has its turn.
    #[cold]
    fn wait(&self, t: u64, may_enter: fn(&Self, u64) -> bool) {
        // Pause instructions doubling from 1 to 64, then yields of the processor (so that,
        // with more threads than cores, the threads ahead of it in line get to run).
        let b = Backoff::new();
        while !may_enter(self, t) {
            b.snooze();
        }
    }

    /// Take the ticket after counts `t` (`next(t)`) only if its holder may enter at once.
    #[inline]
    fn try_take(&self, may_enter: fn(&Self, u64) -> bool, next: fn(u64) -> u64) -> bool {
        let t = self.tickets.load(Ordering::Relaxed);
        may_enter(self, t) && self.tickets.compare_exchange(t, next(t), Ordering::Acquire, Ordering::Relaxed).is_ok()
    }
}

// SAFETY: a reader enters only once every writer that asked before it has left, and a
// writer only once every reader and writer that asked before it has left; tickets are
// handed out one at a time (each an atomic read-modify-write of one word), so of any
// reader and writer one asked first and the other waits for it to leave: never a writer
// together with anyone. The release counts are published with `Release` and read with `Acquire` (module doc).
unsafe impl RawRwLock for RawArtLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawArtLock =
        RawArtLock { tickets: AtomicU64::new(0), readers_done: AtomicU32::new(0), writers_done: AtomicU32::new(0) };
    type GuardMarker = GuardSend;

    #[inline]
    fn lock_shared(&self) {
        // One addition: the readers' count is the high half, so its wrap falls off the
        // top of the word and never carries into the writers' half.
        let t = self.tickets.fetch_add(ONE_READER, Ordering::Relaxed);
        if !self.reader_may_enter(t) {
            self.wait(t, Self::reader_may_enter);
        }
    }

    #[inline]
    fn try_lock_shared(&self) -> bool {
        self.try_take(Self::reader_may_enter, |t| t.wrapping_add(ONE_READER))
    }

    #[inline]
    unsafe fn unlock_shared(&self) {
        self.readers_done.fetch_add(1, Ordering::Release);
    }

    #[inline]
    fn lock_exclusive(&self) {
        let t = self.writer_ticket();
        if !self.writer_may_enter(t) {
            self.wait(t, Self::writer_may_enter);
        }
    }

    #[inline]
    fn try_lock_exclusive(&self) -> bool {
        self.try_take(Self::writer_may_enter, bump_writer)
    }

    #[inline]
    unsafe fn unlock_exclusive(&self) {
        // A store, not a read-modify-write: only the holder writes this word.
        let w = self.writers_done.load(Ordering::Relaxed);
        self.writers_done.store(w.wrapping_add(1), Ordering::Release);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        let t = self.tickets.load(Ordering::Relaxed);
        !(self.writers_done.load(Ordering::Relaxed) == writers(t)
            && self.readers_done.load(Ordering::Relaxed) == readers(t))
    }

    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        let t = self.tickets.load(Ordering::Relaxed);
        self.writers_done.load(Ordering::Relaxed) != writers(t)
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
        let b = Backoff::new();
        // Wait reading, so that waiters do not take the line from the holder.
        while self.locked.load(Ordering::Relaxed) != 0 || !self.try_lock() {
            b.snooze();
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

    /// Increment both counters of a pair, yielding between them now and then, so that
    /// another holder let in meanwhile would see (or make) them differ.
    fn bump_pair(g: &mut (u64, u64), i: u32) {
        assert_eq!(g.0, g.1, "a holder found a pair another left half-changed");
        g.0 += 1;
        if i.is_multiple_of(64) {
            std::thread::yield_now();
        }
        g.1 += 1;
    }

    /// Run `threads` threads that each call `f(lock, i)` for `i` in 0..3000; wait for them.
    fn hammer<L: Send + Sync + 'static>(lock: &Arc<L>, threads: usize, f: fn(&L, u32)) {
        let ts: Vec<_> = (0..threads)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || (0..3_000).for_each(|i| f(&lock, i)))
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
    }

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
        hammer(&lock, 3, |l, i| bump_pair(&mut l.write(), i));
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
        // Once the writer has taken its ticket, a new reader is refused.
        // SAFETY: only reads the ticket counts; the lock is not unlocked through it.
        while writers(unsafe { lock.raw() }.tickets.load(Ordering::Relaxed)) == 0 {
            std::thread::yield_now();
        }
        assert!(lock.try_read().is_none(), "a reader entered past a waiting writer");
        drop(r1);
        w.join().unwrap();
        assert_eq!(*lock.read(), 1);
    }

    /// Threads enter in the order they asked: writers queued behind a held lock get it
    /// one after the other, in ticket order, and a reader queued behind them enters last.
    #[test]
    fn waiters_enter_in_the_order_they_asked() {
        let lock = Arc::new(ArtLock::new(Vec::new()));
        let held = lock.write();
        // SAFETY: only reads the ticket counts.
        let tickets = |l: &ArtLock<Vec<u32>>| unsafe { l.raw() }.tickets.load(Ordering::Relaxed);
        let mut ts = Vec::new();
        for who in 0..4u32 {
            let l = lock.clone();
            ts.push(std::thread::spawn(move || {
                if who == 3 {
                    let g = l.read();
                    assert_eq!(*g, vec![0, 1, 2], "the reader entered before writers that asked first");
                } else {
                    l.write().push(who);
                }
            }));
            // Wait until this thread holds its ticket before starting the next.
            let want = if who == 3 { ONE_READER + 4 } else { who as u64 + 2 };
            while tickets(&lock) != want {
                std::thread::yield_now();
            }
        }
        drop(held);
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(*lock.read(), vec![0, 1, 2]);
    }

    /// The counts wrap within their halves: a lock whose counts are about to wrap keeps
    /// excluding (a reader count that carried into the writers' half would make the
    /// next writer wait for a writer that never comes).
    #[test]
    fn counts_wrap_without_carrying() {
        let near = u32::MAX - 3;
        let lock = Arc::new(ArtLock::const_new(
            RawArtLock {
                tickets: AtomicU64::new((near as u64) << 32 | near as u64),
                readers_done: AtomicU32::new(near),
                writers_done: AtomicU32::new(near),
            },
            (0u64, 0u64),
        ));
        let ts: Vec<_> = (0..2)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let mut g = lock.write();
                        g.0 += 1;
                        g.1 += 1;
                        drop(g);
                        let g = lock.read();
                        assert_eq!(g.0, g.1);
                    }
                })
            })
            .collect();
        // A count that carried would wedge the lock: fail then, rather than hang the run.
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(ts.into_iter().all(|t| t.join().is_ok())));
        let ok = finished.recv_timeout(std::time::Duration::from_secs(60));
        assert_eq!(ok, Ok(true), "the threads panicked or the lock wedged across the wrap");
        assert_eq!(*lock.read(), (100, 100));
        assert!(!lock.is_locked());
        assert!(lock.try_write().is_some());
    }

    #[test]
    fn the_short_lock_excludes() {
        let lock = Arc::new(ShortLock::new((0u64, 0u64)));
        hammer(&lock, 4, |l, i| bump_pair(&mut l.lock(), i));
        assert_eq!(*lock.lock(), (12_000, 12_000));
        assert!(lock.try_lock().is_some());
    }
}
