//! pmkv as a replica of a Redis primary: the state REPLICAOF sets and ROLE, INFO and the
//! READONLY check read. The link itself (handshake, full sync, command stream) is in
//! [`crate::replica_link`], above the dispatcher it feeds; this module is below it, so
//! the dispatcher can ask it without a module cycle.

use crate::resp::Reply;
use crate::table::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// The link's state, as ROLE names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    Connect,
    Connecting,
    Sync,
    Connected,
}

impl LinkState {
    fn name(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Sync => "sync",
            LinkState::Connected => "connected",
        }
    }
}

/// Whom this server replicates, if anyone.
#[derive(Clone, Debug)]
pub struct Primary {
    pub host: String,
    pub port: u16,
    pub state: LinkState,
    /// The primary's replication ID (from FULLRESYNC).
    pub replid: String,
    /// When the link last read from the primary.
    pub last_io: std::time::Instant,
}

#[derive(Default)]
pub struct State {
    primary: Mutex<Option<Primary>>,
    /// Bumped by every REPLICAOF: a link whose generation is past stops.
    generation: AtomicU64,
    /// The replication offset: bytes of the primary's stream applied.
    pub offset: AtomicU64,
    /// Whether `primary` is set, for the SET fast path's lock-free look.
    active: AtomicBool,
}

impl State {
    fn guard(&self) -> std::sync::MutexGuard<'_, Option<Primary>> {
        self.primary.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The primary, if this server is a replica.
    pub fn primary(&self) -> Option<Primary> {
        self.guard().clone()
    }

    /// Replicate `host:port` (`None`: stop, REPLICAOF NO ONE); the new generation, which
    /// the link started for it runs under.
    pub fn set(&self, to: Option<(String, u16)>) -> u64 {
        let mut g = self.guard();
        self.active.store(to.is_some(), Ordering::SeqCst);
        *g = to.map(|(host, port)| Primary {
            host,
            port,
            state: LinkState::Connect,
            replid: String::new(),
            last_io: std::time::Instant::now(),
        });
        self.generation.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Whether this server is a replica.
    pub fn is_replica(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Whether a link of generation `gen` is still wanted.
    pub fn current(&self, gen: u64) -> bool {
        self.generation.load(Ordering::SeqCst) == gen
    }

    /// Update the primary's link (only if generation `gen` is current).
    pub fn update(&self, gen: u64, f: impl FnOnce(&mut Primary)) {
        let mut g = self.guard();
        if self.current(gen) {
            if let Some(p) = g.as_mut() {
                f(p);
            }
        }
    }

    /// ROLE, as Redis answers it on a replica (`None`: a primary).
    pub fn role(&self) -> Option<Reply> {
        let p = self.primary()?;
        let offset = self.offset.load(Ordering::Relaxed) as i64;
        Some(Reply::Array(vec![
            Reply::bulk(&b"slave"[..]),
            Reply::bulk(p.host.into_bytes()),
            Reply::Int(p.port as i64),
            Reply::bulk(p.state.name().as_bytes()),
            Reply::Int(if p.state == LinkState::Connected { offset } else { -1 }),
        ]))
    }

    /// INFO's replication section for a replica, Redis's fields (`None`: a primary).
    pub fn info(&self, own_replid: &str) -> Option<String> {
        let p = self.primary()?;
        let up = p.state == LinkState::Connected;
        let offset = self.offset.load(Ordering::Relaxed);
        Some(format!(
            "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\n\
             master_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{offset}\r\n\
             slave_repl_offset:{offset}\r\nslave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\n\
             connected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_replid:{}\r\n\
             master_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:{offset}\r\n\
             second_repl_offset:-1\r\nrepl_backlog_active:0\r\n",
            p.host,
            p.port,
            if up { "up" } else { "down" },
            if up { p.last_io.elapsed().as_secs() as i64 } else { -1 },
            (p.state == LinkState::Sync) as u8,
            if p.replid.is_empty() { own_replid } else { &p.replid },
        ))
    }
}

/// The READONLY refusal when this server is a replica and `cmd` writes (`from_primary`:
/// the command came from the primary's stream, which must apply). Scripts that may write
/// (EVAL, EVALSHA, FCALL) are refused whole; their read-only forms run.
pub fn refuse(st: &State, cmd: &Command, from_primary: bool) -> Option<Reply> {
    let writes = cmd.writes() || matches!(cmd.name, "EVAL" | "EVALSHA" | "FCALL");
    (!from_primary && st.is_replica() && writes)
        .then(|| Reply::err("READONLY You can't write against a read only replica."))
}
