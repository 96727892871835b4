//! A connection's state as the commands see it. A module of its own because both the
//! dispatcher ([`crate::commands`]) and scripts ([`crate::script`], whose `redis.call`
//! runs commands on a connection of its own) use it; with it in `commands`, the two
//! modules imported each other.

use crate::Shared;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Per-connection state the commands see.
pub struct Conn {
    pub id: u64,
    pub name: Option<Vec<u8>>,
    pub resp3: bool,
    pub authed: bool,
    /// The logical database SELECT chose (0 at first).
    pub db: usize,
    /// SCAN/HSCAN cursors of this connection: cursor number → the key to resume after.
    pub cursors: Vec<Vec<u8>>,
    /// Bytes the next reply may take before the client's output-buffer hard limit is
    /// passed (set by the connection loop before each command): commands whose reply
    /// grows with the data (KEYS, SCAN, MGET, HGETALL, PMKV.RANGE) stop building it there.
    pub reply_budget: usize,
    /// Commands queued since MULTI (`None`: not in a transaction).
    pub multi: Option<Vec<Vec<Vec<u8>>>>,
    /// A command refused while queueing: EXEC will abort.
    pub multi_failed: bool,
    /// Set when a WATCHed key is written.
    pub dirty: Arc<AtomicBool>,
    /// The keys WATCHed.
    pub watched: Vec<Vec<u8>>,
    /// ASKING was the last command: the next one may use a slot this node imports.
    pub asking: bool,
    /// The slot of the keys queued since MULTI (a cluster node's transaction is on one slot).
    pub multi_slot: Option<u16>,
    /// The command [`crate::commands::run`] is running (for its counters), once the
    /// table knows it.
    pub(crate) current: Option<&'static crate::command::Command>,
    /// The client's socket, for a blocked command to notice the client left.
    pub(crate) fd: Option<std::os::fd::RawFd>,
    /// The arrival number of the blocking command being run ([`crate::blocking`]).
    pub(crate) arrival: Option<u64>,
    /// Pub/Sub subscriptions (`None`: never subscribed).
    pub(crate) subs: Option<crate::pubsub::Subs>,
    /// The primary's replication stream (a replica's writes come only from it).
    pub(crate) from_primary: bool,
    /// What a replica said of itself (REPLCONF ip-address / listening-port).
    pub(crate) repl_ip: Option<String>,
    pub(crate) repl_port: u16,
    /// The replication offset after this client's last command (WAIT waits for it).
    pub(crate) woff: u64,
}

impl Conn {
    /// A new connection's state: authenticated already when no password is set.
    pub fn new(id: u64, authed: bool) -> Conn {
        Conn {
            id,
            name: None,
            resp3: false,
            authed,
            db: 0,
            cursors: Vec::new(),
            reply_budget: usize::MAX,
            multi: None,
            multi_failed: false,
            dirty: Arc::new(AtomicBool::new(false)),
            watched: Vec::new(),
            asking: false,
            multi_slot: None,
            current: None,
            fd: None,
            arrival: None,
            subs: None,
            from_primary: false,
            repl_ip: None,
            repl_port: 0,
            woff: 0,
        }
    }

    /// Whether the client closed its end (a blocked command then stops waiting). Data
    /// it sent meanwhile (a pipeline after the blocking command) is left unread.
    pub fn peer_closed(&self) -> bool {
        let Some(fd) = self.fd else { return false };
        let mut b = [0u8; 1];
        // SAFETY: `fd` is this connection's socket, open while the connection is served
        // (the blocked command runs inside it); `b` is a valid 1-byte buffer. MSG_PEEK
        // leaves any data in the socket, MSG_DONTWAIT never blocks.
        let n = unsafe { libc::recv(fd, b.as_mut_ptr().cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
        n == 0
    }

    /// Forget the WATCHes (EXEC, DISCARD, UNWATCH, RESET, the connection's end).
    pub fn unwatch(&mut self, sh: &Shared) {
        if !self.watched.is_empty() {
            // In every database: the connection may have SELECTed another since WATCH.
            for ks in sh.all_dbs() {
                ks.unwatch(&self.watched, &self.dirty);
            }
            self.watched.clear();
        }
        self.dirty.store(false, Ordering::Release);
    }
}
