//! A primary's replication stream (docs/design/replication.md, "pmkv as a primary"): the
//! one in-memory backlog every applied write is appended to, the replicas reading from
//! it, their acknowledgements (WAIT), and the rewrites that make a command's effect the
//! same on a replica as here (relative times made absolute, a random pop made the SREM
//! of what it popped, a float increment made the SET of its result).
//!
//! Below the dispatcher: commands append here while they still hold their key locks (or
//! the gate), after their batch committed, so the stream's order is an order in which
//! the writes could have been applied one at a time. The sender tasks (`primary`) only
//! copy out of the backlog.
//!
//! With no replica ever attached the write paths look at one relaxed atomic ([`Repl::on`])
//! and do nothing else. `on` is set under the gate held exclusively (the full sync's
//! snapshot): a write that saw it unset held the gate shared, so it is in the snapshot;
//! every write after the snapshot sees it set and is streamed.

use crate::command::Command;
use crate::keyspace::Tx;
use crate::resp::Reply;
use crate::OutputLimits;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Redis's `repl-backlog-size` default: 1 MiB.
pub const BACKLOG_DEFAULT: usize = 1 << 20;

/// Redis's `client-output-buffer-limit replica 256mb 64mb 60`: how far (bytes of the
/// stream not yet sent) a replica may fall behind before it is disconnected.
pub const REPLICA_LIMITS: OutputLimits =
    OutputLimits { hard: 256 << 20, soft: 64 << 20, soft_time: Duration::from_secs(60) };

/// One command as the stream carries it: its arguments, name first.
pub type Cmd = Vec<Vec<u8>>;

/// A replica attached to this primary.
struct Peer {
    id: u64,
    ip: String,
    port: u16,
    /// The offset of the last stream byte handed to its sender.
    sent: u64,
    /// The offset it last acknowledged (REPLCONF ACK).
    ack: u64,
    ack_at: Instant,
    /// Its RDB has been sent: it is streamed (`state=online`).
    online: bool,
    /// Since when it has been more than the soft limit behind.
    over_soft: Option<Instant>,
    /// Cut off (too far behind, or REPLICAOF): its sender ends the link.
    dropped: Option<&'static str>,
}

struct St {
    /// The last `buf.len()` bytes of the stream, the last of them at offset `end`.
    buf: VecDeque<u8>,
    end: u64,
    /// The database the stream's last command ran in (`None`: the next one SELECTs).
    db: Option<usize>,
    backlog: usize,
    limits: OutputLimits,
    replid: String,
    replid2: String,
    second: i64,
    peers: Vec<Peer>,
    next_id: u64,
    full_syncs: u64,
    partial_ok: u64,
    partial_err: u64,
}

/// The replication stream of this server as a primary.
pub(crate) struct Repl {
    on: AtomicBool,
    end: AtomicU64,
    st: Mutex<St>,
    /// Signalled when a replica acknowledges (WAIT waits on it).
    acked: Condvar,
    /// The stream's end, for the senders to wait on.
    tick: tokio::sync::watch::Sender<u64>,
}

/// A fresh replication ID: 40 hex characters from the process's random hash keys.
pub(crate) fn new_replid() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut id = String::new();
    for i in 0..3u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i);
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        id.push_str(&format!("{:016x}", h.finish()));
    }
    id.truncate(40);
    id
}

/// Append `args` as a RESP array.
pub(crate) fn encode(out: &mut Vec<u8>, args: &[Vec<u8>]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

fn cmd(parts: &[&[u8]]) -> Cmd {
    parts.iter().map(|p| p.to_vec()).collect()
}

impl Default for Repl {
    fn default() -> Self {
        Repl {
            on: AtomicBool::new(false),
            end: AtomicU64::new(0),
            st: Mutex::new(St {
                buf: VecDeque::new(),
                end: 0,
                db: None,
                backlog: BACKLOG_DEFAULT,
                limits: REPLICA_LIMITS,
                replid: new_replid(),
                replid2: "0".repeat(40),
                second: -1,
                peers: Vec::new(),
                next_id: 0,
                full_syncs: 0,
                partial_ok: 0,
                partial_err: 0,
            }),
            acked: Condvar::new(),
            tick: tokio::sync::watch::channel(0).0,
        }
    }
}

impl Repl {
    /// Whether writes are streamed (a replica attached since the start or the last
    /// REPLICAOF). The write paths' only cost without replicas.
    #[inline]
    pub(crate) fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The stream's offset now (`master_repl_offset`).
    pub(crate) fn end(&self) -> u64 {
        self.end.load(Ordering::Acquire)
    }

    fn st(&self) -> MutexGuard<'_, St> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn replid(&self) -> String {
        self.st().replid.clone()
    }

    /// Append `items` (each command with the logical database it ran in), wrapped in
    /// MULTI/EXEC when `multi`. A SELECT goes before a command whose database is not the
    /// stream's, as Redis emits it. Nothing when not [`on`](Self::on) or no item.
    pub(crate) fn feed(&self, items: Vec<(usize, Cmd)>, multi: bool) {
        if items.is_empty() || !self.on() {
            return;
        }
        let mut st = self.st();
        let mut out = Vec::new();
        let select = |out: &mut Vec<u8>, st: &mut St, db: usize| {
            if st.db != Some(db) {
                encode(out, &cmd(&[b"SELECT", db.to_string().as_bytes()]));
                st.db = Some(db);
            }
        };
        if multi {
            select(&mut out, &mut st, items[0].0);
            encode(&mut out, &cmd(&[b"MULTI"]));
        }
        for (db, c) in &items {
            select(&mut out, &mut st, *db);
            encode(&mut out, c);
        }
        if multi {
            encode(&mut out, &cmd(&[b"EXEC"]));
        }
        self.append(st, &out);
    }

    /// Append raw stream bytes that run in no database (PING, REPLCONF GETACK).
    fn feed_raw(&self, c: &[&[u8]]) {
        let st = self.st();
        let mut out = Vec::new();
        encode(&mut out, &cmd(c));
        self.append(st, &out);
    }

    /// Append `bytes`, trim the backlog, and cut off the replicas too far behind.
    fn append(&self, mut st: MutexGuard<'_, St>, bytes: &[u8]) {
        st.buf.extend(bytes);
        st.end += bytes.len() as u64;
        let (end, lim, now) = (st.end, st.limits, Instant::now());
        // Kept: the backlog, and what an attached replica has not been sent yet, up to
        // its output-buffer limit (one buffer shared by both, as in Redis 7).
        let mut keep = st.backlog as u64;
        for p in st.peers.iter_mut().filter(|p| p.dropped.is_none()) {
            let lag = end - p.sent;
            if lag > lim.hard as u64 {
                p.dropped = Some("its output passed client-output-buffer-limit replica (hard)");
                continue;
            }
            if lim.soft > 0 && lag > lim.soft as u64 {
                let since = *p.over_soft.get_or_insert(now);
                if now.duration_since(since) > lim.soft_time {
                    p.dropped = Some("its output stayed over client-output-buffer-limit replica (soft)");
                    continue;
                }
            } else {
                p.over_soft = None;
            }
            keep = keep.max(lag);
        }
        let len = st.buf.len() as u64;
        if len > keep {
            st.buf.drain(..(len - keep) as usize);
        }
        self.end.store(end, Ordering::Release);
        drop(st);
        self.tick.send_replace(end);
    }

    /// A sender's wait for more stream.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.tick.subscribe()
    }

    /// Register a replica about to be fully synced from a snapshot taken now: the caller
    /// holds the gate exclusively, so no write is half applied and the replica's stream
    /// starts exactly after the snapshot. Its id, the replication ID and the offset.
    pub(crate) fn attach_full(&self, ip: String, port: u16) -> (u64, String, u64) {
        let mut st = self.st();
        self.on.store(true, Ordering::Relaxed);
        // The replica loads every database and starts in 0: the next command SELECTs.
        st.db = None;
        st.full_syncs += 1;
        let id = st.next_id;
        st.next_id += 1;
        let end = st.end;
        st.peers.push(Peer {
            id,
            ip,
            port,
            sent: end,
            ack: 0,
            ack_at: Instant::now(),
            online: false,
            over_soft: None,
            dropped: None,
        });
        (id, st.replid.clone(), end)
    }

    /// PSYNC `replid` `offset` answered `+CONTINUE` when the backlog holds the stream
    /// from `offset` (the first byte the replica lacks) on, under this ID (or the one
    /// before a promotion, up to where it ended): the replica's id and the ID to send.
    pub(crate) fn attach_partial(&self, replid: &str, offset: i64, ip: String, port: u16) -> Option<(u64, String)> {
        let mut st = self.st();
        let first = st.end + 1 - st.buf.len() as u64;
        let ours = replid == st.replid || (replid == st.replid2 && offset <= st.second);
        let held = offset >= first as i64 && offset <= st.end as i64 + 1;
        if !(self.on() && ours && held) {
            if replid != "?" {
                st.partial_err += 1;
            }
            return None;
        }
        st.partial_ok += 1;
        let id = st.next_id;
        st.next_id += 1;
        st.peers.push(Peer {
            id,
            ip,
            port,
            sent: offset as u64 - 1,
            ack: offset as u64 - 1,
            ack_at: Instant::now(),
            online: true,
            over_soft: None,
            dropped: None,
        });
        Some((id, st.replid.clone()))
    }

    /// The RDB has reached replica `id`: it is online.
    pub(crate) fn online(&self, id: u64) {
        if let Some(p) = self.st().peers.iter_mut().find(|p| p.id == id) {
            p.online = true;
            p.ack_at = Instant::now();
        }
    }

    /// Up to `max` bytes of the stream replica `id` has not been sent (empty: none yet),
    /// or why it must be disconnected.
    pub(crate) fn take(&self, id: u64, max: usize) -> Result<Vec<u8>, String> {
        let mut st = self.st();
        let (end, len) = (st.end, st.buf.len() as u64);
        let Some(p) = st.peers.iter_mut().find(|p| p.id == id) else {
            return Err("it was detached".into());
        };
        if let Some(why) = p.dropped {
            return Err(why.into());
        }
        if p.sent < end - len {
            return Err("it fell out of the backlog".into());
        }
        let from = (p.sent - (end - len)) as usize;
        let n = ((end - p.sent) as usize).min(max);
        p.sent += n as u64;
        Ok(st.buf.range(from..from + n).copied().collect())
    }

    /// REPLCONF ACK `offset` from replica `id`.
    pub(crate) fn ack(&self, id: u64, offset: u64) {
        let mut st = self.st();
        if let Some(p) = st.peers.iter_mut().find(|p| p.id == id) {
            p.ack = p.ack.max(offset);
            p.ack_at = Instant::now();
        }
        drop(st);
        self.acked.notify_all();
    }

    /// Replica `id`'s link ended.
    pub(crate) fn detach(&self, id: u64) {
        self.st().peers.retain(|p| p.id != id);
        self.acked.notify_all();
    }

    /// How many replicas are attached.
    pub(crate) fn replicas(&self) -> usize {
        self.st().peers.iter().filter(|p| p.dropped.is_none()).count()
    }

    /// The keep-alive a primary sends every 10 s (`repl-ping-replica-period`), so that
    /// an idle link is not taken for a dead one (`repl-timeout`).
    pub(crate) fn ping(&self) {
        if self.on() && self.replicas() > 0 {
            self.feed_raw(&[b"PING"]);
        }
    }

    /// WAIT: the replicas that acknowledged `offset`, waiting until `n` have or
    /// `timeout` (`None`: forever) passed or `gone()` says the client left. Asks the
    /// replicas for an acknowledgement first (`REPLCONF GETACK *`), as Redis does.
    pub(crate) fn wait(&self, offset: u64, n: usize, timeout: Option<Duration>, gone: impl Fn() -> bool) -> usize {
        let count = |st: &St| st.peers.iter().filter(|p| p.dropped.is_none() && p.online && p.ack >= offset).count();
        if count(&self.st()) >= n {
            return count(&self.st());
        }
        if self.replicas() > 0 {
            self.feed_raw(&[b"REPLCONF", b"GETACK", b"*"]);
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut st = self.st();
        loop {
            let got = count(&st);
            if got >= n {
                return got;
            }
            let slice = Duration::from_millis(100);
            let step = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return got;
                    }
                    left.min(slice)
                }
                None => slice,
            };
            st = self.acked.wait_timeout(st, step).unwrap_or_else(|e| e.into_inner()).0;
            if gone() {
                return count(&st);
            }
        }
    }

    /// This server stops being a primary (REPLICAOF host port): its replicas are cut
    /// off, as Redis disconnects them, and writes are no longer streamed.
    pub(crate) fn detach_all(&self) {
        let mut st = self.st();
        self.on.store(false, Ordering::Relaxed);
        for p in &mut st.peers {
            p.dropped = Some("this server became a replica");
        }
        drop(st);
        self.tick.send_replace(self.end());
    }

    /// A replica promoted (REPLICAOF NO ONE): a new replication ID; the primary's
    /// (`old`, up to `offset`) is kept as the second one, so replicas of the old primary
    /// at that offset may continue with this server, as in Redis (PSYNC2).
    pub(crate) fn promote(&self, old: &str, offset: u64) {
        let mut st = self.st();
        st.replid2 = if old.len() == 40 { old.to_string() } else { std::mem::take(&mut st.replid) };
        st.second = offset as i64 + 1;
        st.replid = new_replid();
        st.end = offset;
        st.buf.clear();
        st.db = None;
        self.end.store(offset, Ordering::Release);
    }

    /// `repl-backlog-size`.
    pub(crate) fn backlog_size(&self) -> usize {
        self.st().backlog
    }

    pub(crate) fn set_backlog_size(&self, n: usize) {
        self.st().backlog = n.max(16 << 10);
    }

    /// ROLE on a primary: `[master, offset, [[ip, port, ack offset], ...]]`.
    pub(crate) fn role(&self) -> Reply {
        let st = self.st();
        let peers = st
            .peers
            .iter()
            .filter(|p| p.online && p.dropped.is_none())
            .map(|p| {
                Reply::Array(vec![
                    Reply::bulk(p.ip.clone().into_bytes()),
                    Reply::bulk(p.port.to_string().into_bytes()),
                    Reply::bulk(p.ack.to_string().into_bytes()),
                ])
            })
            .collect();
        Reply::Array(vec![Reply::bulk(&b"master"[..]), Reply::Int(st.end as i64), Reply::Array(peers)])
    }

    /// INFO's replication section on a primary, Redis's fields.
    pub(crate) fn info(&self) -> String {
        let st = self.st();
        let live: Vec<&Peer> = st.peers.iter().filter(|p| p.dropped.is_none()).collect();
        let mut s = format!("role:master\r\nconnected_slaves:{}\r\n", live.len());
        for (i, p) in live.iter().enumerate() {
            s.push_str(&format!(
                "slave{i}:ip={},port={},state={},offset={},lag={}\r\n",
                p.ip,
                p.port,
                if p.online { "online" } else { "send_bulk" },
                p.ack,
                p.ack_at.elapsed().as_secs()
            ));
        }
        let first = st.end + 1 - st.buf.len() as u64;
        s.push_str(&format!(
            "master_failover_state:no-failover\r\nmaster_replid:{}\r\nmaster_replid2:{}\r\n\
             master_repl_offset:{}\r\nsecond_repl_offset:{}\r\nrepl_backlog_active:{}\r\nrepl_backlog_size:{}\r\n\
             repl_backlog_first_byte_offset:{}\r\nrepl_backlog_histlen:{}\r\nsync_full:{}\r\n\
             sync_partial_ok:{}\r\nsync_partial_err:{}\r\n",
            st.replid,
            st.replid2,
            st.end,
            st.second,
            u8::from(self.on()),
            st.backlog,
            if self.on() { first } else { 0 },
            st.buf.len(),
            st.full_syncs,
            st.partial_ok,
            st.partial_err
        ));
        s
    }
}

/// The lazily expired keys `tx` deleted since the last call, as the DELs that tell a
/// replica (Redis propagates an expiry as a DEL of the key).
pub(crate) fn expired(tx: &mut Tx, out: &mut Vec<Cmd>) {
    for k in std::mem::take(&mut tx.expired) {
        out.push(vec![b"DEL".to_vec(), k]);
    }
}

/// What command `cmd` (`args` with its name), which replied `reply` and whose writes are
/// in `tx` (not committed yet), sends to replicas: itself, or its deterministic form.
/// Expired keys it found go first, as DELs. The caller has checked it did not fail.
pub(crate) fn effects(tx: &mut Tx, cmd: &Command, args: &[Vec<u8>], reply: &Reply, out: &mut Vec<Cmd>) {
    expired(tx, out);
    if !cmd.writes() {
        return;
    }
    let key = || args[1].as_slice();
    match cmd.name {
        // A relative time is made absolute: the key's state after the command.
        "SET" if args.len() > 3 => string_state(tx, key(), out),
        "SETEX" | "PSETEX" | "INCRBYFLOAT" => string_state(tx, key(), out),
        "EXPIRE" | "PEXPIRE" | "EXPIREAT" | "PEXPIREAT" if matches!(reply, Reply::Int(0)) => {}
        "EXPIRE" | "PEXPIRE" | "EXPIREAT" | "PEXPIREAT" => ttl_state(tx, key(), out),
        "GETEX" if args.len() > 2 => ttl_state(tx, key(), out),
        "GETEX" => {}
        "HINCRBYFLOAT" => {
            if let Ok(Some(v)) = tx.hget(key(), &args[2]) {
                out.push(vec![b"HSET".to_vec(), args[1].clone(), args[2].clone(), v]);
            }
        }
        "SPOP" => {
            let members: Vec<Vec<u8>> = match reply {
                Reply::Bulk(m) => vec![m.clone()],
                Reply::Array(ms) => {
                    ms.iter().filter_map(|m| if let Reply::Bulk(b) = m { Some(b.clone()) } else { None }).collect()
                }
                _ => Vec::new(),
            };
            if !members.is_empty() {
                let mut c = vec![b"SREM".to_vec(), args[1].clone()];
                c.extend(members);
                out.push(c);
            }
        }
        "RESTORE" => match tx.expire_time(key()) {
            Ok(Some(at)) => out.push(vec![
                b"RESTORE".to_vec(),
                args[1].clone(),
                at.to_string().into_bytes(),
                args[3].clone(),
                b"REPLACE".to_vec(),
                b"ABSTTL".to_vec(),
            ]),
            _ => out.push(vec![b"DEL".to_vec(), args[1].clone()]),
        },
        _ if cmd.attempt.is_some() => out.extend(popped(cmd.name, args, reply)),
        _ => out.push(args.to_vec()),
    }
}

/// A string key as it is now: `SET key value [PXAT t]`, or `DEL key` when it is gone.
fn string_state(tx: &mut Tx, k: &[u8], out: &mut Vec<Cmd>) {
    let at = tx.expire_time(k).ok().flatten();
    match (at, tx.get(k)) {
        (Some(at), Ok(Some(v))) => {
            let mut c = vec![b"SET".to_vec(), k.to_vec(), v];
            if at != 0 {
                c.extend([b"PXAT".to_vec(), at.to_string().into_bytes()]);
            }
            out.push(c);
        }
        _ => out.push(vec![b"DEL".to_vec(), k.to_vec()]),
    }
}

/// A key's expiry as it is now: PEXPIREAT, PERSIST, or DEL when the key is gone.
fn ttl_state(tx: &mut Tx, k: &[u8], out: &mut Vec<Cmd>) {
    out.push(match tx.expire_time(k) {
        Ok(Some(0)) => vec![b"PERSIST".to_vec(), k.to_vec()],
        Ok(Some(at)) => vec![b"PEXPIREAT".to_vec(), k.to_vec(), at.to_string().into_bytes()],
        _ => vec![b"DEL".to_vec(), k.to_vec()],
    });
}

/// The non-blocking command a blocking pop amounted to, from its reply (nothing when it
/// took nothing).
pub(crate) fn popped(name: &str, args: &[Vec<u8>], reply: &Reply) -> Option<Cmd> {
    let items = match reply {
        Reply::Array(v) => v.as_slice(),
        Reply::Bulk(_) => &[],
        _ => return None,
    };
    let bulk = |r: &Reply| if let Reply::Bulk(b) = r { Some(b.clone()) } else { None };
    let count = |r: Option<&Reply>| match r {
        Some(Reply::Array(v)) => v.len().to_string().into_bytes(),
        _ => b"1".to_vec(),
    };
    Some(match name {
        "BLPOP" => vec![b"LPOP".to_vec(), bulk(items.first()?)?],
        "BRPOP" => vec![b"RPOP".to_vec(), bulk(items.first()?)?],
        "BZPOPMIN" => vec![b"ZPOPMIN".to_vec(), bulk(items.first()?)?],
        "BZPOPMAX" => vec![b"ZPOPMAX".to_vec(), bulk(items.first()?)?],
        "BRPOPLPUSH" => vec![b"RPOPLPUSH".to_vec(), args[1].clone(), args[2].clone()],
        "BLMOVE" => {
            vec![b"LMOVE".to_vec(), args[1].clone(), args[2].clone(), args[3].clone(), args[4].clone()]
        }
        "BLMPOP" | "BZMPOP" => {
            // timeout numkeys key... LEFT|RIGHT|MIN|MAX [COUNT n]
            let numkeys: usize = std::str::from_utf8(&args[2]).ok()?.parse().ok()?;
            let dir = args.get(3 + numkeys)?.clone();
            let name = if name == "BLMPOP" { b"LMPOP".to_vec() } else { b"ZMPOP".to_vec() };
            vec![name, b"1".to_vec(), bulk(items.first()?)?, dir, b"COUNT".to_vec(), count(items.get(1))]
        }
        _ => return None,
    })
}
