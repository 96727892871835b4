//! Flat combining (paper §4.1, Fig. 2; SPEC M2): read-write requests from many threads run
//! as one batch, so that they share one fence and one persist.
//!
//! A writer publishes its request (a closure) in the publication list and then either
//! becomes the *combiner* — the one thread holding the combiner lock — or waits. The
//! combiner takes every published request, runs them one after another under the region's
//! writer lock (readers wait: a batch is never seen half applied, nor before it is
//! durable), commits the batch with one `end_tx`, and marks each request done with its
//! result. A waiting writer whose request is done returns; one whose request is still
//! queued when the combiner lock frees tries to become the next combiner, so no request is
//! ever left behind (the paper's `readySet` scan, with a lock-protected list instead of
//! per-thread slots: the list is touched twice per request, the batch's work dominates).
//!
//! Requests borrow from their writers' stacks (the closure and its result slot); the
//! combiner runs them on its own thread. That is sound because a writer never returns —
//! nor unwinds — before its request is marked done, which the combiner does only after it
//! last touched the request. A panic inside a request is caught by the combiner and
//! re-raised in the writer that made it; the batch's other requests are unaffected.

use std::panic::{catch_unwind, AssertUnwindSafe};
// The real primitives, or Shuttle's when the crate is built for the schedule-exploring
// test (`RUSTFLAGS="--cfg shuttle"`, see `tests` below and scripts/test).
#[cfg(shuttle)]
use shuttle::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(shuttle))]
use std::sync::{Condvar, Mutex, MutexGuard};

/// Lock, ignoring poison: every critical section here leaves its data consistent (a
/// panicking request is caught before it can poison anything).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A published request: run it on the batch's transaction.
type Job = dyn FnMut(&mut crate::Tx<'_>) + Send;
/// The same, borrowing from its writer's stack.
type Borrowed<'a> = dyn FnMut(&mut crate::Tx<'_>) + Send + 'a;

/// One request in the publication list.
pub(crate) struct Request {
    /// The writer's closure, with its lifetime erased (see the module doc).
    job: *mut Job,
    /// Where the combiner reports the request's end.
    done: *const Done,
}

// SAFETY: the closure is `Send` (it runs on the combiner's thread); `Done` is `Sync`; both
// outlive the request (the writer waits for `done` before returning).
unsafe impl Send for Request {}

/// A request's completion: set once by the combiner, then the writer may return.
#[derive(Default)]
pub(crate) struct Done {
    state: Mutex<Option<Outcome>>,
}

/// How a request ended.
pub(crate) enum Outcome {
    /// It ran and its batch is durable.
    Ok,
    /// Its batch could not be committed.
    Failed(String),
    /// The commit of its batch panicked (on the combiner's thread): not durable.
    CommitPanicked,
    /// It panicked; the payload is re-raised in the writer.
    Panicked(Box<dyn std::any::Any + Send>),
}

/// The publication list and the combiner lock.
#[derive(Default)]
pub(crate) struct Combining {
    published: Mutex<Vec<Request>>,
    /// The combiner lock; it holds the list a batch's requests are moved into (empty
    /// between batches, its capacity kept: swapped with `published`, so that neither
    /// list is allocated again for each batch).
    combiner: Mutex<Vec<Request>>,
    /// Signalled when a combiner finishes a batch and someone waits for it.
    finished: Condvar,
    finished_lock: Mutex<Finished>,
}

/// Batches finished, and writers blocked on [`Combining::finished`]: a combiner notifies
/// only when `waiting` is non-zero, so a batch nobody waits for costs no futex wake.
#[derive(Default)]
struct Finished {
    count: u64,
    waiting: u32,
}

impl Combining {
    /// Publish `job` and return once it ran in a committed batch. `run_batch` is called by
    /// whichever thread combines, with every request published so far; it must call each
    /// request's job (through [`Batch::run`]) and commit, returning the commit's outcome.
    pub(crate) fn submit(
        &self,
        job: &mut Borrowed<'_>,
        run_batch: &dyn Fn(&mut Batch) -> std::result::Result<(), String>,
    ) -> Outcome {
        let done = Done::default();
        let job: *mut Borrowed<'_> = job;
        // SAFETY: lifetime erasure; the pointer is used only by a combiner while this
        // thread waits below, and this function returns only after `done` is set, which
        // the combiner does after its last use of the pointer.
        let job = unsafe { std::mem::transmute::<*mut Borrowed<'_>, *mut Job>(job) };
        let request = Request { job, done: &done };
        // A writer that finds the combiner lock free combines at once: its request joins
        // whatever was published and the batch runs, without waiting for the list to be
        // seen. Alone (the common case with one writer), that spares the publication's
        // round trip through `published` and the batch count.
        if let Ok(mut g) = self.combiner.try_lock() {
            {
                let mut published = lock(&self.published);
                published.push(request);
                std::mem::swap(&mut *published, &mut *g);
            }
            let mine = self.combine(&mut g, run_batch, &done);
            drop(g);
            self.finished_one();
            if let Some(o) = mine {
                return o;
            }
        } else {
            lock(&self.published).push(request);
        }
        loop {
            if let Some(o) = lock(&done.state).take() {
                return o;
            }
            // Batches finished so far: read before trying the combiner lock, so that a
            // combiner that holds it now is seen finishing (the count moves) below.
            let seen = lock(&self.finished_lock).count;
            let combined = match self.combiner.try_lock() {
                Ok(mut g) => {
                    std::mem::swap(&mut *lock(&self.published), &mut *g);
                    let mine = self.combine(&mut g, run_batch, &done);
                    drop(g);
                    Some(mine)
                }
                Err(_) => None,
            };
            if let Some(mine) = combined {
                self.finished_one();
                if let Some(o) = mine {
                    return o;
                }
                continue;
            }
            // Someone else combines: wait until a batch finishes, then look again. The
            // count is checked under the same lock the combiner increments it with, and
            // the wait releases that lock atomically: no notification is missed. (The
            // timeout is a second line of defence, not part of the argument.)
            let mut f = lock(&self.finished_lock);
            if f.count != seen || lock(&done.state).is_some() {
                continue;
            }
            f.waiting += 1;
            let (mut f, _) =
                self.finished.wait_timeout(f, std::time::Duration::from_millis(1)).unwrap_or_else(|e| e.into_inner());
            f.waiting -= 1;
        }
    }
}

impl Combining {
    /// Run the requests in `taken` (the combiner lock's list, the combiner lock held) as
    /// one batch, hand each its outcome, and leave the list empty with its capacity. The
    /// outcome of the combiner's own request (`own`, its `Done`), if the batch holds it,
    /// is returned instead of stored: its writer is this thread, which need not lock
    /// `own` to learn it (two lock round trips fewer per write for a lone writer).
    fn combine(
        &self,
        taken: &mut Vec<Request>,
        run_batch: &dyn Fn(&mut Batch) -> std::result::Result<(), String>,
        own: &Done,
    ) -> Option<Outcome> {
        if taken.is_empty() {
            return None;
        }
        let mut batch = Batch { requests: std::mem::take(taken), panics: Vec::new() };
        // A panic outside the requests (in the commit) must still release every writer
        // of the batch: it becomes the batch's failure.
        let r = catch_unwind(AssertUnwindSafe(|| run_batch(&mut batch)));
        let mine = batch.finish(r.map_err(|_| ()), own);
        *taken = batch.requests;
        mine
    }

    /// Count a finished batch (the combiner lock released before, so a writer that failed
    /// to take the lock while we held it sees the count move after its `seen`). The
    /// waiters are read under the same lock as the count moves: a writer counted there is
    /// already inside `wait` (it registers and waits under this lock, which the wait
    /// releases atomically) and is woken; one not yet counted will see the new count
    /// before it waits. So skipping the wake when nobody is counted loses none.
    fn finished_one(&self) {
        let waiting = {
            let mut f = lock(&self.finished_lock);
            f.count += 1;
            f.waiting
        };
        if waiting > 0 {
            self.finished.notify_all();
        }
    }
}

/// The requests one combiner runs as one batch.
pub(crate) struct Batch {
    requests: Vec<Request>,
    panics: Vec<(usize, Box<dyn std::any::Any + Send>)>,
}

impl Batch {
    /// Run every request's job on `tx`, in publication order, catching panics.
    pub(crate) fn run(&mut self, tx: &mut crate::Tx<'_>) {
        for (i, r) in self.requests.iter().enumerate() {
            // SAFETY: the writer that published `r` is waiting for it (see `submit`), so
            // its closure is alive, and only this combiner uses it.
            let job = unsafe { &mut *r.job };
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| job(tx))) {
                self.panics.push((i, p));
            }
        }
    }

    /// Requests in the batch.
    pub(crate) fn len(&self) -> usize {
        self.requests.len()
    }

    /// Hand each request its outcome: the commit's result (`Err(())`: the commit panicked),
    /// unless the request itself panicked. The request whose `Done` is `own` (the
    /// combiner's) gets it as the return value instead.
    fn finish(
        &mut self,
        commit: std::result::Result<std::result::Result<(), String>, ()>,
        own: &Done,
    ) -> Option<Outcome> {
        let mut mine = None;
        let mut panics = self.panics.drain(..).peekable();
        for (i, r) in self.requests.drain(..).enumerate() {
            let outcome = match panics.next_if(|(j, _)| *j == i) {
                Some((_, p)) => Outcome::Panicked(p),
                None => match &commit {
                    Ok(Ok(())) => Outcome::Ok,
                    Ok(Err(e)) => Outcome::Failed(e.clone()),
                    Err(()) => Outcome::CommitPanicked,
                },
            };
            if std::ptr::eq(r.done, own) {
                mine = Some(outcome);
                continue;
            }
            // SAFETY: the writer waits for this very store before it returns, so `done`
            // is alive; after it, this combiner never touches the request again.
            *lock(&unsafe { &*r.done }.state) = Some(outcome);
        }
        mine
    }
}

/// Flat combining under Shuttle's randomized scheduler (SPEC M2: "check it with loom or
/// shuttle"): the code above, on Shuttle's mutexes and condition variable, explored over
/// thousands of random interleavings of three writers. Checked in every schedule: only
/// one combiner at a time (mutual exclusion), every request runs exactly once and its
/// writer gets `Ok` (no lost request: a lost one would leave its writer blocked, which
/// Shuttle reports as a deadlock), and a batch's requests run back to back inside one
/// combiner (a reader under the same lock never sees a batch half applied).
/// Run with `RUSTFLAGS="--cfg shuttle" cargo test -p pmkv-mangosteen --lib shuttle`.
#[cfg(all(test, shuttle))]
mod shuttle_tests {
    use super::*;
    use crate::dedup::DedupSet;
    use shuttle::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use shuttle::sync::Arc;

    #[test]
    fn combiner_is_exclusive_and_loses_no_request() {
        shuttle::check_random(
            || {
                let c = Arc::new(Combining::default());
                let inside = Arc::new(AtomicBool::new(false));
                let runs = Arc::new(AtomicUsize::new(0));
                let threads: Vec<_> = (0..3)
                    .map(|_| {
                        let (c, inside, runs) = (c.clone(), inside.clone(), runs.clone());
                        shuttle::thread::spawn(move || {
                            for _ in 0..2 {
                                let mut ran = 0;
                                let mut job = |_: &mut crate::Tx<'_>| ran += 1;
                                let o = c.submit(&mut job, &|b: &mut Batch| {
                                    assert!(!inside.swap(true, Ordering::SeqCst), "two combiners at once");
                                    let mut buf = [0u8; 8];
                                    let mut d = DedupSet::new(8, 16, true);
                                    b.run(&mut crate::Tx::scratch(&mut buf, &mut d));
                                    runs.fetch_add(b.len(), Ordering::SeqCst);
                                    inside.store(false, Ordering::SeqCst);
                                    Ok(())
                                });
                                assert!(matches!(o, Outcome::Ok));
                                assert_eq!(ran, 1, "a request ran {ran} times");
                            }
                        })
                    })
                    .collect();
                for t in threads {
                    t.join().unwrap();
                }
                assert_eq!(runs.load(Ordering::SeqCst), 6);
            },
            3000,
        );
    }
}
