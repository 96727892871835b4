//! pmkv as a replica of a Redis primary: the state REPLICAOF sets and ROLE, INFO and the
//! READONLY check read. The link itself (handshake, full sync, command stream) is in
//! [`crate::replica_link`], above the dispatcher it feeds; this module is below it, so
//! the dispatcher can ask it without a module cycle.

use crate::command::{Command, Group};
use crate::keyspace::{Keyspace, REPLICA_KEY};
use crate::resp::Reply;
use pmkv::Store;
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
    /// Whether the keyspace is a partial copy: a full sync began (its flag is set in the
    /// pool's replication record) and has not finished. Clients' reads and writes are
    /// refused meanwhile (see [`refuse`]).
    partial: AtomicBool,
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
        self.set_locked(&mut g, to)
    }

    fn set_locked(&self, g: &mut Option<Primary>, to: Option<(String, u16)>) -> u64 {
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

    /// Whether the keyspace is a partial copy (a full sync has not finished).
    pub fn is_partial(&self) -> bool {
        self.partial.load(Ordering::SeqCst)
    }

    /// Mark the keyspace partial or whole (after the record saying so is durable).
    pub fn set_partial(&self, partial: bool) {
        self.partial.store(partial, Ordering::SeqCst);
    }

    /// A full sync of generation `gen` starts loading: mark the keyspace partial, unless
    /// a REPLICAOF replaced the link (false). Under the lock [`State::stop`] takes, so a
    /// REPLICAOF NO ONE is either before (and the load does not start) or refused.
    pub fn begin_sync(&self, gen: u64) -> bool {
        let _g = self.guard();
        let go = self.current(gen);
        if go {
            self.partial.store(true, Ordering::SeqCst);
        }
        go
    }

    /// REPLICAOF NO ONE: delete the pool's record and stop replicating — refused while
    /// the keyspace is a partial copy (the error names the ways out).
    pub fn stop(&self, s: &Store, ks: &Keyspace) -> Result<(), Reply> {
        let mut g = self.guard();
        if self.is_partial() {
            let from = g.as_ref().map_or_else(String::new, |p| format!(" from {}:{}", p.host, p.port));
            return Err(Reply::err(format!(
                "ERR this replica holds a partial copy: a full sync{from} has not finished, and promoting it \
                 would serve part of the primary's data as if it were all. Let the sync finish \
                 (INFO replication: master_sync_in_progress:0), or FLUSHALL to drop the partial copy, then \
                 REPLICAOF NO ONE"
            )));
        }
        if g.is_some() {
            save(s, ks, None).map_err(|e| Reply::err(format!("ERR deleting the replication record: {e}")))?;
        }
        self.set_locked(&mut g, None);
        Ok(())
    }

    /// REPLICAOF host port: record it in the pool (before the link starts, so a restart
    /// re-attaches, as Redis's CONFIG REWRITE keeps `replicaof`; an unfinished sync's flag
    /// is kept), then replicate it. The new generation, for the link to run under.
    pub fn start(&self, s: &Store, ks: &Keyspace, host: String, port: u16) -> pmkv::Result<u64> {
        let mut g = self.guard();
        let rec = Record { host: host.clone(), port, replid: String::new(), offset: 0, syncing: self.is_partial() };
        save(s, ks, Some(&rec))?;
        Ok(self.set_locked(&mut g, Some((host, port))))
    }

    /// Save `offset` in the record (the link of generation `gen`, between commands), unless
    /// REPLICAOF replaced or stopped the link or the keyspace is partial: under the lock
    /// [`State::stop`] takes, so a deleted record is never written again.
    pub fn save_offset(&self, gen: u64, s: &Store, ks: &Keyspace, offset: u64) -> pmkv::Result<()> {
        let g = self.guard();
        let Some(p) = g.as_ref().filter(|_| self.current(gen) && !self.is_partial()) else { return Ok(()) };
        let rec = Record { host: p.host.clone(), port: p.port, replid: p.replid.clone(), offset, syncing: false };
        save(s, ks, Some(&rec))
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
            // Also while a partial copy waits for a link (after a restart, say).
            (p.state == LinkState::Sync || self.is_partial()) as u8,
            if p.replid.is_empty() { own_replid } else { &p.replid },
        ))
    }
}

/// Redis's answer to a data command on a replica whose data is not to be served
/// (`replica-serve-stale-data no`); pmkv answers it while its keyspace is a partial copy.
pub const MASTERDOWN: &str = "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// The refusal of a client's command on a replica (`from_primary`: the command came from
/// the primary's stream, which must apply). While the keyspace is a partial copy, every
/// command on data (reads too, transactions and scripts) gets [`MASTERDOWN`], but
/// FLUSHALL/FLUSHDB, which drop the partial copy (the way to promote a replica whose sync
/// cannot finish). Otherwise writes get READONLY: scripts that may write (EVAL, EVALSHA,
/// FCALL) are refused whole; their read-only forms run.
pub fn refuse(st: &State, cmd: &Command, from_primary: bool) -> Option<Reply> {
    if !from_primary && st.is_partial() {
        let data = matches!(
            cmd.group,
            Group::Strings | Group::Hashes | Group::Keys | Group::Expiry | Group::Transactions | Group::Scripting
        );
        if matches!(cmd.name, "FLUSHALL" | "FLUSHDB") {
            return None;
        }
        if data {
            return Some(Reply::err(MASTERDOWN));
        }
    }
    let writes = cmd.writes() || matches!(cmd.name, "EVAL" | "EVALSHA" | "FCALL");
    (!from_primary && st.is_replica() && writes)
        .then(|| Reply::err("READONLY You can't write against a read only replica."))
}

/// The replication record (docs/format/server.md, "Replication record"): whom this pool's
/// server replicates and how far, kept in the pool so that a restarted replica re-attaches
/// and never serves a partial copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub host: String,
    pub port: u16,
    /// The primary's replication ID (40 characters), empty before the first FULLRESYNC.
    pub replid: String,
    /// The primary's stream offset applied, as last saved (see [`OFFSET_SAVE_EVERY`]).
    pub offset: u64,
    /// A full sync began and has not finished: the keyspace is a partial copy.
    pub syncing: bool,
}

/// How often the stream's offset is saved into the record while commands apply: with the
/// once-a-second acknowledgement. Not in each command's batch, so it may lag the data by
/// up to a second of commands; that is why a restarted replica does not resume from it
/// (it asks for a full sync) — the offset is shown, never trusted for a partial resync.
pub const OFFSET_SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

const RECORD_VERSION: u8 = 1;
/// Version, flags, port, offset, replication ID, host length.
const RECORD_HEAD: usize = 1 + 1 + 2 + 8 + 40 + 2;

impl Record {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(RECORD_HEAD + self.host.len());
        b.push(RECORD_VERSION);
        b.push(self.syncing as u8);
        b.extend_from_slice(&self.port.to_le_bytes());
        b.extend_from_slice(&self.offset.to_le_bytes());
        let mut id = [0u8; 40];
        let n = self.replid.len().min(40);
        id[..n].copy_from_slice(&self.replid.as_bytes()[..n]);
        b.extend_from_slice(&id);
        b.extend_from_slice(&(self.host.len() as u16).to_le_bytes());
        b.extend_from_slice(self.host.as_bytes());
        b
    }

    /// The record in `b`, or what is wrong with it.
    pub fn decode(b: &[u8]) -> Result<Record, String> {
        if b.len() < RECORD_HEAD {
            return Err(format!("{} bytes, fewer than {RECORD_HEAD}", b.len()));
        }
        if b[0] != RECORD_VERSION {
            return Err(format!("version {}, this pmkv reads {RECORD_VERSION}", b[0]));
        }
        if b[1] > 1 {
            return Err(format!("unknown flags {:#04x}", b[1]));
        }
        let port = u16::from_le_bytes([b[2], b[3]]);
        let offset = u64::from_le_bytes(b[4..12].try_into().expect("8 bytes"));
        let id = &b[12..52];
        let id_len = id.iter().position(|&c| c == 0).unwrap_or(40);
        if id[id_len..].iter().any(|&c| c != 0) || !id[..id_len].iter().all(u8::is_ascii_hexdigit) {
            return Err("a malformed replication ID".into());
        }
        let host_len = u16::from_le_bytes([b[52], b[53]]) as usize;
        if b.len() != RECORD_HEAD + host_len {
            return Err(format!("{} bytes, the host needs {}", b.len(), RECORD_HEAD + host_len));
        }
        let host = std::str::from_utf8(&b[RECORD_HEAD..]).map_err(|_| "a host that is not UTF-8".to_string())?;
        if host.is_empty() {
            return Err("an empty host".into());
        }
        Ok(Record {
            host: host.to_string(),
            port,
            replid: String::from_utf8_lossy(&id[..id_len]).into_owned(),
            offset,
            syncing: b[1] == 1,
        })
    }
}

/// The pool's replication record, if it has one.
pub fn load(s: &Store) -> Result<Option<Record>, String> {
    match s.get(REPLICA_KEY).map_err(|e| e.to_string())? {
        None => Ok(None),
        Some(b) => Record::decode(&b).map(Some).map_err(|e| format!("the pool's replication record is damaged: {e}")),
    }
}

/// Write (`Some`) or delete the record, durably, on its own (one engine write); `ks`
/// learns whether the pool holds it, so DBSIZE does not count it.
pub fn save(s: &Store, ks: &Keyspace, rec: Option<&Record>) -> pmkv::Result<()> {
    match rec {
        Some(r) => s.put(REPLICA_KEY, &r.encode())?,
        None => {
            s.delete(REPLICA_KEY)?;
        }
    }
    ks.set_replica_record(rec.is_some());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_and_refuses_damage() {
        let r = Record {
            host: "redis.example".into(),
            port: 6379,
            replid: "0123456789abcdef0123456789abcdef01234567".into(),
            offset: 123_456_789,
            syncing: true,
        };
        let b = r.encode();
        assert_eq!(b.len(), RECORD_HEAD + 13);
        assert_eq!(Record::decode(&b), Ok(r.clone()));
        let none = Record { replid: String::new(), syncing: false, offset: 0, ..r.clone() };
        assert_eq!(Record::decode(&none.encode()), Ok(none));
        for (i, bad) in [
            (0usize, 2u8), // version
            (1, 2),        // flags
            (20, b'z'),    // not hex
            (52, 14),      // host length past the end
        ] {
            let mut d = b.clone();
            d[i] = bad;
            assert!(Record::decode(&d).is_err(), "byte {i} = {bad} accepted");
        }
        assert!(Record::decode(&b[..b.len() - 1]).is_err());
        assert!(Record::decode(&b[..10]).is_err());
        let empty_host = Record { host: String::new(), ..r };
        assert!(Record::decode(&empty_host.encode()).is_err());
    }
}
