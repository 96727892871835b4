//! Blocking list pops (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP), as Redis serves them.
//!
//! A client whose lists are all empty is registered as a *waiter* in a FIFO queue per key
//! it waits on, and its connection waits (off the async workers: the connection loop runs
//! these commands with `block_in_place`). Every commit that touches a key while anyone
//! waits marks the key *ready* ([`crate::keyspace::Ready::signal`]);
//! the command that made the commit then serves the ready keys before its own reply is
//! sent ([`serve`]): for each, the waiters in the order they blocked, each by running its
//! command's non-blocking form in a transaction of its own (one atomic batch, like any
//! command), until the list is empty again. So a push is taken by the longest waiting
//! client, and the pusher's next command already sees the element gone, as in Redis.
//!
//! Registration happens under the stripe locks of the waiter's keys, right after it found
//! them empty: a push to one of them commits either before (and the waiter's try sees it)
//! or after (and sees the waiter). A waiter leaves its queues itself at its timeout or
//! when its client disconnects, under the same lock the server takes to serve it, so an
//! element is never popped for a client that is gone. Inside MULTI/EXEC the commands run
//! their non-blocking form (nil when empty); scripts refuse them, as Redis does.
//! Waiters are connection state: not stored, gone at a restart.

use crate::command::Command;
use crate::conn::Conn;
use crate::keyspace::{Ready, Tx};
use crate::resp::Reply;
use crate::Shared;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The waiters and their arrival order (held by the server, [`crate::Shared`]; the count
/// of waiters and the keys committed to since are the keyspace's [`Ready`]).
#[derive(Default)]
pub struct Blocked {
    st: Mutex<State>,
    /// The next arrival number (see [`Blocked::arrive`]); a waiter's id is its number.
    seq: AtomicU64,
    /// Blocking commands read from their socket but not yet registered or answered:
    /// serving waits for the earlier ones (a leaf lock), so that waiters queue in
    /// arrival order, not in the order their threads got to run.
    pending: Mutex<BTreeSet<u64>>,
    /// Signalled when a pending command leaves `pending`.
    departed: Condvar,
}

#[derive(Default)]
struct State {
    /// (Physical database, key) → the waiters on it, first blocked first: a push in one
    /// database wakes only that database's waiters.
    queues: HashMap<(usize, Vec<u8>), VecDeque<u64>>,
    waiters: HashMap<u64, Waiter>,
}

struct Waiter {
    cmd: &'static Command,
    /// The physical database it waits in.
    db: usize,
    /// The command's arguments after its name.
    args: Vec<Vec<u8>>,
    /// The keys it pops from: its queues.
    keys: Vec<Vec<u8>>,
    /// Every key of the command (a move's destination too): the stripes it is served under.
    locks: Vec<Vec<u8>>,
    reply: mpsc::Sender<Reply>,
}

impl Blocked {
    /// Number blocking command `args` (its name first) as it arrives, in the connection
    /// loop right after it is parsed and before anything that may let another thread run
    /// ahead of it (`block_in_place`, the gate, stripe locks); `None` for any other
    /// command. The number orders its waiter among the others, and until
    /// [`Blocked::depart`] it holds back the serving of waiters that arrived after it.
    pub fn arrive(&self, args: &[Vec<u8>]) -> Option<u64> {
        let cmd = crate::table::lookup(args.first()?)?;
        cmd.attempt?;
        let id = self.seq.fetch_add(1, Ordering::AcqRel);
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).insert(id);
        Some(id)
    }

    /// Arrival `id` is registered as a waiter or answered (idempotent).
    pub fn depart(&self, id: u64) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if p.remove(&id) {
            self.departed.notify_all();
        }
    }

    /// Wait (at most [`ARRIVAL_WAIT`]) while a blocking command that arrived before `id`
    /// is still on its way to register; whether one was waited for and has departed.
    fn await_earlier(&self, id: u64) -> bool {
        let until = Instant::now() + ARRIVAL_WAIT;
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if p.first().is_none_or(|&f| f >= id) {
            return false;
        }
        while p.first().is_some_and(|&f| f < id) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            p = self.departed.wait_timeout(p, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        true
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take waiter `id` out of every queue; whether it was still there.
    fn leave(&self, ready: &Ready, st: &mut State, id: u64) -> bool {
        let Some(w) = st.waiters.remove(&id) else { return false };
        for k in w.keys {
            let qk = (w.db, k);
            if let Some(q) = st.queues.get_mut(&qk) {
                q.retain(|&x| x != id);
                if q.is_empty() {
                    st.queues.remove(&qk);
                }
            }
        }
        ready.waiting.fetch_sub(1, Ordering::AcqRel);
        true
    }
}

/// The longest the serving of a waiter waits for an earlier-arrived blocking command to
/// register (it is running, on its way to its stripe locks: microseconds, unless a
/// script or EXEC holds the gate).
const ARRIVAL_WAIT: Duration = Duration::from_secs(1);

/// Calls [`Blocked::depart`] when dropped: on every way out of registering.
struct Departs<'a>(&'a Blocked, u64);

impl Drop for Departs<'_> {
    fn drop(&mut self) {
        self.0.depart(self.1);
    }
}

/// Run blocking command `cmd` (`args` with its name) for connection `c` outside MULTI:
/// at once when one of its lists has an element, else wait for one (or the timeout).
/// `attempt` is the command's non-blocking form: `None` when it would block.
pub(crate) fn block(sh: &Shared, c: &mut Conn, cmd: &'static Command, args: &[Vec<u8>]) -> Reply {
    let a = &args[1..];
    let Some(attempt) = cmd.attempt else { return Reply::err("ERR not a blocking command") };
    let db = sh.phys_db(c.db);
    let ks = &sh.all_dbs()[db];
    let (b, ready) = (&sh.blocked, &ks.ready);
    let id = c.arrival.take().unwrap_or_else(|| b.seq.fetch_add(1, Ordering::AcqRel));
    let wait = {
        // Declared first, dropped last: after the registration below.
        let _departs = Departs(b, id);
        // Blocking commands that arrived before this one take effect first (they may
        // take the element this one would find), as under Redis's single thread.
        while b.await_earlier(id) {}
        let _gate = match sh.gate_read() {
            Ok(g) => g,
            Err(r) => return r,
        };
        let keys = cmd.keys(args);
        let _locks = sh.lock(&keys);
        let mut tx = Tx::new(&sh.store, ks);
        let limit = match attempt(&mut tx, cmd.name, a) {
            Err(r) => return r,
            Ok(Some(r)) => return commit_popped(sh, c.db, tx, cmd.name, args, r),
            Ok(None) => crate::types::list::timeout_of(cmd.name, a).unwrap_or(None),
        };
        // Nothing to take: wait, registered before the stripe locks are released.
        let (send, recv) = mpsc::channel();
        let mut st = b.state();
        let locks: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        // A move waits on its source only.
        let keys: Vec<Vec<u8>> =
            if cmd.keys.numkeys == 0 && cmd.keys.last > 0 { locks[..1].to_vec() } else { locks.clone() };
        // In arrival order: behind the waiters that arrived before it (ids are arrival
        // numbers), ahead of any that arrived later but registered first.
        for k in &keys {
            let q = st.queues.entry((db, k.clone())).or_default();
            if !q.contains(&id) {
                let at = q.iter().position(|&x| x > id).unwrap_or(q.len());
                q.insert(at, id);
            }
        }
        st.waiters.insert(id, Waiter { cmd, db, args: a.to_vec(), keys, locks, reply: send });
        ready.waiting.fetch_add(1, Ordering::AcqRel);
        (id, recv, limit.map(|d| Instant::now() + d))
    };
    let (id, recv, deadline) = wait;
    loop {
        let slice = Duration::from_millis(100);
        let step = deadline.map_or(slice, |d| d.saturating_duration_since(Instant::now()).min(slice));
        match recv.recv_timeout(step) {
            Ok(r) => return r,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let over = deadline.is_some_and(|d| Instant::now() >= d);
                if !over && !c.peer_closed() {
                    continue;
                }
                let mut st = b.state();
                if b.leave(ready, &mut st, id) {
                    return if cmd.name.contains("MOVE") || cmd.name == "BRPOPLPUSH" {
                        Reply::Nil
                    } else {
                        Reply::NilArray
                    };
                }
                // Being served right now: the reply is on its way.
                drop(st);
                return recv.recv().unwrap_or(Reply::Nil);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return Reply::Nil,
        }
    }
}

/// Commit a blocking command's pop (`reply`, in `tx`, in logical database `db`), and
/// send replicas the non-blocking command it amounted to (the caller holds the keys'
/// locks).
fn commit_popped(sh: &Shared, db: usize, mut tx: Tx, name: &str, args: &[Vec<u8>], reply: Reply) -> Reply {
    let mut fx = Vec::new();
    if sh.repl.on() {
        crate::repl_stream::expired(&mut tx, &mut fx);
        fx.extend(crate::repl_stream::popped(name, args, &reply));
    }
    match tx.commit() {
        Ok(()) => {
            sh.repl.feed(fx.into_iter().map(|x| (db, x)).collect(), false);
            reply
        }
        Err(e) => crate::keyspace::store_reply(e),
    }
}

/// Serve the waiters of the keys committed to since the last call (see the module
/// doc). Called by the command dispatcher after each command, outside its locks.
pub(crate) fn serve(sh: &Shared) {
    for (db, ks) in sh.all_dbs().iter().enumerate() {
        serve_db(sh, db, ks);
    }
}

/// [`serve`] in physical database `db`.
fn serve_db(sh: &Shared, db: usize, ks: &crate::keyspace::Keyspace) {
    let r = &ks.ready;
    loop {
        if r.waiting.load(Ordering::Acquire) == 0 {
            r.keys.lock().unwrap_or_else(|e| e.into_inner()).clear();
            return;
        }
        let ready = std::mem::take(&mut *r.keys.lock().unwrap_or_else(|e| e.into_inner()));
        if ready.is_empty() {
            return;
        }
        let mut seen = std::collections::HashSet::new();
        for k in ready {
            if seen.insert(k.clone()) {
                serve_key(sh, db, ks, &k);
            }
        }
    }
}

/// Serve the waiters on `k`, first blocked first, while its list has elements.
fn serve_key(sh: &Shared, db: usize, ks: &crate::keyspace::Keyspace, k: &[u8]) {
    let (b, ready) = (&sh.blocked, &ks.ready);
    let qk = (db, k.to_vec());
    loop {
        // The first waiter's keys, to lock (stripes before the waiters' lock, always).
        let (id, keys) = {
            let st = b.state();
            let Some(&id) = st.queues.get(&qk).and_then(|q| q.front()) else { return };
            (id, st.waiters[&id].locks.clone())
        };
        // A blocking command that arrived before this waiter may still be on its way to
        // its queue: it goes first, as under Redis's single thread.
        if b.await_earlier(id) {
            continue;
        }
        let Ok(_gate) = sh.gate_read() else { return };
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let _locks = sh.lock(&refs);
        let mut st = b.state();
        if st.queues.get(&qk).and_then(|q| q.front()) != Some(&id) {
            continue; // it left (timeout, disconnect) meanwhile: the next one
        }
        let w = &st.waiters[&id];
        let Some(attempt) = w.cmd.attempt else { return };
        let mut tx = Tx::new(&sh.store, ks);
        let reply = match attempt(&mut tx, w.cmd.name, &w.args) {
            // The list is empty again: the rest keep waiting.
            Ok(None) => return,
            Ok(Some(r)) => {
                let mut args = vec![w.cmd.name.as_bytes().to_vec()];
                args.extend(w.args.iter().cloned());
                commit_popped(sh, sh.logical_db(db), tx, w.cmd.name, &args, r)
            }
            Err(r) => {
                // `k` is no longer of the type the waiter pops: its waiters keep waiting,
                // as in Redis. Else the error is the waiter's (a move to a key of another
                // type): it gets it, nothing is taken, and the next waiter is served.
                drop(tx);
                let mut probe = Tx::new(&sh.store, ks);
                let want = if w.cmd.group == crate::command::Group::SortedSets {
                    crate::record::Kind::ZSET
                } else {
                    crate::record::Kind::LIST
                };
                if probe.kind(k).ok().flatten() != Some(want) {
                    return;
                }
                r
            }
        };
        let send = w.reply.clone();
        b.leave(ready, &mut st, id);
        drop(st);
        // The waiter is gone from the queues; it takes the reply (a send to a client
        // that left after this point fails, as a reply to a closed socket would).
        let _ = send.send(reply);
    }
}
