//! Replies that wait for the log (mode `wal`), without taking a worker from the other
//! connections.
//!
//! In mode `wal` no reply leaves before the log holds everything appended when it was
//! produced (see `flush` in lib.rs). A connection used to wait for that on its worker
//! thread with `block_in_place`: tokio then hands the worker's other connections to a
//! fresh thread, and on this project's 2-core machine that hand-over, not the device,
//! set the pace — 9.5 k durable SETs per second where Redis `appendfsync always` in the
//! same directory did 36–50 k.
//!
//! Here connections post the log sequence number (LSN) they need and `await` a watch
//! channel; whoever syncs has the store make everything appended so far that safe
//! ([`pmkv::Store::wait_lsn`]: one `write` and, under `always`, one `fdatasync`) and
//! publishes what is now acknowledged, waking every connection it covers.
//!
//! **Who syncs, and when.** When a thread of its own synced the moment a connection
//! posted, 40,000 SETs from 50 clients took 3,000 `fdatasync`s (13 SETs each; Redis: 1,450
//! of 28), and every group paid hand-overs between threads (post → syncer, syncer →
//! sleeping worker), each tens of microseconds on a VM: 30 k SETs per second where Redis
//! did 42 k. Handing the sync to that thread only once the worker went idle still lost at
//! P1 (28–31 k against the inline sync's 35–52 k, 4 alternating rounds, same run; it won
//! at P16 in 3 of 4). So the sync runs where Redis runs it, at the end of an
//! event-loop pass: a worker that goes idle (the runtime's park hook, [`LogSync::parked`])
//! has run every request it could read, their records are in the log, and it has nothing
//! else to do; it makes the log safe there and wakes the waiting connections, which it
//! runs itself next. A worker that never goes idle (a replication stream, thousands of
//! busy clients) must not hold replies back for ever, so a fallback thread syncs when a
//! post has waited [`FALLBACK`]. Either way this decides only *when* the log is synced,
//! never what a reply waits for.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The longest a posted LSN waits for an idle worker before the fallback thread syncs.
const FALLBACK: Duration = Duration::from_millis(1);

/// What the syncer last published: the acknowledged LSN, or why the log could not be
/// made safe (the store is poisoned then; every waiter gets the error).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Published {
    Acknowledged(u64),
    Failed(Arc<str>),
}

/// The fallback thread's view of the posts.
#[derive(Default)]
struct Pending {
    /// When the oldest post not yet acknowledged came (`None`: nothing outstanding).
    since: Option<Instant>,
    /// The fallback thread sleeps with no deadline: a post must wake it.
    idle: bool,
    /// The server stops.
    stop: bool,
}

/// The rendezvous between connections, idle workers and the fallback thread.
pub(crate) struct LogSync {
    /// The highest LSN any connection waits for.
    wanted: AtomicU64,
    /// The highest LSN published as acknowledged.
    acked: AtomicU64,
    pending: Mutex<Pending>,
    posted: Condvar,
    done: tokio::sync::watch::Sender<Published>,
}

impl Default for LogSync {
    fn default() -> Self {
        LogSync {
            wanted: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            pending: Mutex::new(Pending::default()),
            posted: Condvar::new(),
            done: tokio::sync::watch::channel(Published::Acknowledged(0)).0,
        }
    }
}

impl LogSync {
    /// Wait until log record `lsn` is as safe as the store's sync policy promises.
    pub(crate) async fn wait(&self, lsn: u64) -> Result<(), String> {
        // Subscribe before posting, so a publication between the two is not missed.
        let mut rx = self.done.subscribe();
        {
            let mut p = self.pending.lock();
            if p.stop {
                return Err("the server is stopping".into());
            }
            self.wanted.fetch_max(lsn, Ordering::SeqCst);
            if p.since.is_none() {
                p.since = Some(Instant::now());
                if p.idle {
                    self.posted.notify_one();
                }
            }
        }
        let seen = rx
            .wait_for(|p| match p {
                Published::Acknowledged(a) => *a >= lsn,
                Published::Failed(_) => true,
            })
            .await
            .map_err(|_| "the log syncer stopped".to_string())?;
        match &*seen {
            Published::Acknowledged(_) => Ok(()),
            Published::Failed(e) => Err(e.to_string()),
        }
    }

    /// A worker thread of `server` goes idle (the runtime's `on_thread_park` hook): the
    /// requests it could read have run and their records are in the log, so this is the
    /// moment to sync, on this thread, which has nothing else to do. Two atomic loads
    /// when no one waits.
    pub(crate) fn parked(&self, server: &Weak<crate::Shared>) {
        if self.wanted.load(Ordering::SeqCst) > self.acked.load(Ordering::SeqCst) {
            if let Some(sh) = server.upgrade() {
                self.sync(&sh.store);
            }
        }
    }

    /// Make everything appended so far as safe as the policy promises (one write and,
    /// under `always`, one `fdatasync`: [`pmkv::Store::wait_lsn`] is the log's group
    /// commit, safe from any thread) and publish it.
    fn sync(&self, store: &pmkv::Store) {
        let target = self.wanted.load(Ordering::SeqCst);
        if target <= self.acked.load(Ordering::SeqCst) {
            return;
        }
        // The records of connections that have not posted yet ride along.
        let upto = target.max(store.appended_lsn());
        match store.wait_lsn(upto) {
            Ok(()) => {
                self.acked.fetch_max(upto, Ordering::SeqCst);
                {
                    let mut p = self.pending.lock();
                    if self.wanted.load(Ordering::SeqCst) <= upto {
                        p.since = None;
                    }
                }
                self.done.send_if_modified(|p| match p {
                    Published::Acknowledged(a) if *a < upto => {
                        *a = upto;
                        true
                    }
                    _ => false,
                });
            }
            Err(e) => {
                // Every waiter, now and later, gets the error; no one syncs again.
                let msg: Arc<str> = format!("the log could not be made durable: {e}").into();
                self.acked.store(u64::MAX, Ordering::SeqCst);
                self.pending.lock().since = None;
                self.done.send_replace(Published::Failed(msg));
            }
        }
    }

    /// Start the fallback thread of `server` (call once, for a store in mode `wal`). It
    /// holds the server only weakly, so it never keeps a stopping server's store open;
    /// [`LogSync::stop`] ends it.
    pub(crate) fn spawn(me: Arc<LogSync>, server: Weak<crate::Shared>) -> std::io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new().name("pmkv-log-sync".into()).spawn(move || me.fallback(&server))
    }

    /// Sync whenever a post has waited [`FALLBACK`] for an idle worker. Sleeps with no
    /// deadline while nothing is outstanding; under load it wakes at most once per
    /// [`FALLBACK`] (a post does not wake it while it sleeps to a deadline).
    fn fallback(&self, server: &Weak<crate::Shared>) {
        loop {
            {
                let mut p = self.pending.lock();
                loop {
                    if p.stop {
                        drop(p);
                        self.done.send_replace(Published::Failed("the server is stopping".into()));
                        return;
                    }
                    match p.since {
                        None => {
                            p.idle = true;
                            self.posted.wait(&mut p);
                            p.idle = false;
                        }
                        Some(t) if t.elapsed() >= FALLBACK => break,
                        Some(t) => {
                            self.posted.wait_until(&mut p, t + FALLBACK);
                        }
                    }
                }
            }
            match server.upgrade() {
                Some(sh) => self.sync(&sh.store),
                None => return,
            }
        }
    }

    /// Make the fallback thread return (waiters from now on get an error).
    pub(crate) fn stop(&self) {
        self.pending.lock().stop = true;
        self.posted.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_reaches_every_waiter_and_an_acknowledgement_only_those_it_covers() {
        let s = LogSync::default();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        // Published by hand here (no store): acknowledged 5 covers 3, not 9.
        s.done.send_replace(Published::Acknowledged(5));
        assert_eq!(rt.block_on(s.wait(3)), Ok(()));
        let r = rt.block_on(async { tokio::time::timeout(Duration::from_millis(50), s.wait(9)).await });
        assert!(r.is_err(), "a wait for LSN 9 returned on an acknowledgement of 5");
        assert_eq!(s.wanted.load(Ordering::SeqCst), 9, "the wait did not post its LSN");
        assert!(s.pending.lock().since.is_some(), "the post is not outstanding for the fallback thread");
        s.done.send_replace(Published::Failed("disk gone".into()));
        assert_eq!(rt.block_on(s.wait(9)), Err("disk gone".to_string()));
        s.stop();
        assert!(rt.block_on(s.wait(10)).is_err());
    }
}
