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
    pub(crate) current: Option<&'static crate::table::Command>,
    /// Pub/Sub subscriptions (`None`: never subscribed).
    pub(crate) subs: Option<crate::pubsub::Subs>,
    /// The primary's replication stream (a replica's writes come only from it).
    pub(crate) from_primary: bool,
}

impl Conn {
    /// A new connection's state: authenticated already when no password is set.
    pub fn new(id: u64, authed: bool) -> Conn {
        Conn {
            id,
            name: None,
            resp3: false,
            authed,
            cursors: Vec::new(),
            reply_budget: usize::MAX,
            multi: None,
            multi_failed: false,
            dirty: Arc::new(AtomicBool::new(false)),
            watched: Vec::new(),
            asking: false,
            multi_slot: None,
            current: None,
            subs: None,
            from_primary: false,
        }
    }

    /// Forget the WATCHes (EXEC, DISCARD, UNWATCH, RESET, the connection's end).
    pub fn unwatch(&mut self, sh: &Shared) {
        if !self.watched.is_empty() {
            sh.ks.unwatch(&self.watched, &self.dirty);
            self.watched.clear();
        }
        self.dirty.store(false, Ordering::Release);
    }
}
