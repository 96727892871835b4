//! `pmkv serve` (SPEC U2, U3): a Redis-protocol server over any pmkv engine, so that the
//! Redis tools and client libraries people already use drive pmkv unchanged.
//!
//! The modules, lowest layer first; a module imports only from layers below it (checked
//! by `scripts/module-graph`, which CI runs):
//!
//! 1. [`resp`] — the protocol, bounded (bulk length, argument count, inline line, and the
//!    input a client may have pending), parsed incrementally and without recursion;
//!    [`glob`] — KEYS/SCAN patterns, matched iteratively in O(|pattern| × |key|);
//!    `bitops`; `cluster::slot` — a key's hash slot.
//! 2. [`record`] — the records: meta records, element records, and what each type's
//!    records are ([`record::DataType`], one submodule per type).
//! 3. [`keyspace`] — Redis's typed keys and expiry times over the engine's byte map, and
//!    the `Tx` whose writes one command (or EXEC) applies as one atomic batch.
//! 4. [`command`] — what a command is: arity, key positions, group, handler.
//! 5. `data` — strings, hashes, expiry and key walks, each over a [`keyspace::Tx`], and
//!    the helpers the other types' commands share; [`rdb`] — Redis's RDB serialization
//!    (version 10) and `dump` — DUMP/RESTORE with it; `object` — OBJECT (a value's
//!    encoding as Redis 7.0 names it, its refcount).
//! 6. `types` — the commands of lists, sets and sorted sets, each type's list next to its
//!    handlers.
//!    `sort` — SORT/SORT_RO, over the types' own commands.
//! 7. [`table`] — every command, found by name: unknown commands and wrong argument
//!    counts are refused before anything runs.
//! 8. Connection-level modules: `conn` (a client's state), `blocking` (BLPOP and the
//!    other blocking commands: waiters' queues), `routing`, `range` (`PMKV.RANGE start
//!    end [count] [REV]`: a key range, half-open as in every pmkv front end, with
//!    ZRANGEBYLEX's `-`, `+`, `[key` and `(key`), `script` (EVAL/EVALSHA/SCRIPT on a
//!    sandboxed Lua 5.1), [`cluster`] (`--cluster`: Redis Cluster's slots, redirects,
//!    topology and migration), `stats`, `pubsub` (SUBSCRIBE/PUBLISH and friends:
//!    per-subscriber outboxes a publisher never waits on, bounded by Redis's pubsub
//!    output-buffer limit), `replica` (a replica's state and its durable record),
//!    `repl_stream` (a primary's replication stream: the backlog every applied write is
//!    appended to, in its deterministic form, under the locks that ordered it; WAIT),
//!    `select` (Redis's 16 databases: SELECT, SWAPDB's durable map, MOVE and COPY … DB),
//!    `log_sync` (mode `wal`: replies `await` the log, which an idle worker or a
//!    fallback thread makes safe).
//! 9. [`commands`] — dispatch, connection and server commands, MULTI/EXEC/WATCH;
//!    `replica_link` — REPLICAOF's link to a Redis primary, which runs what it streams
//!    through that dispatch; `primary` — serving a replica (SYNC/PSYNC: the full sync's
//!    snapshot and RDB, then the stream out and the acknowledgements in).
//! 10. here — the listener and connections: tokio tasks (at most `max_clients`, an idle
//!     timeout, replies written before more is read so a slow reader only slows itself),
//!     AUTH in constant time, loopback by default, and a clean shutdown on SIGINT,
//!     SIGTERM or SHUTDOWN: the store is closed and the pool marked clean.
//!
//! Two rules keep it so. A type's records (layer 2) are apart from its commands (layer 6),
//! because the keyspace needs the first and the commands need the keyspace. And what
//! waits on the keyspace is above it: a commit only marks keys in [`keyspace::Keyspace`]
//! (its `ready` set); the waiting clients are in `blocking`, which serves those keys
//! after the command.
//!
//! What one client can make the server hold is bounded, as Redis bounds it (the limits
//! table is in [`Config`]): its pending input by [`resp::Limits::max_query`] (a few KiB
//! before it has authenticated, when a password is set: [`resp::Limits::UNAUTHENTICATED`]),
//! its pending output by [`OutputLimits`] — replies are written out whenever
//! [`FLUSH_AT`] bytes of them are pending, so a pipeline of GETs from a client that never
//! reads holds one reply, not all of them, and a client whose pending output stays over
//! the soft limit too long, or whose one reply would pass the hard limit, is
//! disconnected. Commands that walk the store run off the worker (see
//! [`commands::may_take_long`]), so no request stalls the other connections.
//!
//! Durability: a write's reply is sent after the engine's put returned, i.e. once the write
//! is persistent in the pool's mode (`adr`/`eadr`: in PM; `msync`: on the file's device;
//! `none`: not durable). The replies to all the requests that arrived in one read go out
//! in one write. Group commit: plain SETs pipelined back to back are applied as one write
//! batch, in which the engine shares commit fences (HART: one per run of keys in one ART),
//! and all are acknowledged after the batch is durable.

mod bitops;
mod blocking;
pub mod cluster;
pub mod command;
pub mod commands;
mod conn;
mod data;
mod dump;
pub mod glob;
pub mod keyspace;
mod log_sync;
mod object;
mod primary;
mod pubsub;
mod range;
pub mod rdb;
pub mod record;
mod repl_stream;
mod replica;
mod replica_link;
pub mod resp;
mod routing;
pub mod script;
mod select;
mod sort;
mod stats;
pub mod table;
pub mod types;

use pmkv::Store;
use std::net::{IpAddr, SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Replies pending for one client are written out once they reach this many bytes, even
/// in the middle of a pipeline: the output a client that does not read makes the server
/// hold is this plus one reply, whatever it sends.
pub const FLUSH_AT: usize = 64 << 10;

/// Plain SETs pipelined back to back are applied as one batch of at most this many bytes
/// (keys and values) ...
const SET_BATCH_BYTES: usize = 4 << 20;
/// ... and this many SETs.
const SET_BATCH_COUNT: usize = 4096;

/// The table's GET and SET, which the fast paths count (`INFO commandstats`).
static GET: std::sync::LazyLock<&'static command::Command> =
    std::sync::LazyLock::new(|| table::lookup(b"GET").expect("GET is a command"));
static SET: std::sync::LazyLock<&'static command::Command> =
    std::sync::LazyLock::new(|| table::lookup(b"SET").expect("SET is a command"));

/// Redis's `client-output-buffer-limit` for normal clients: what replies one client may
/// have pending (produced, not yet taken by its socket).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OutputLimits {
    /// A reply that would take the pending output past this many bytes is not built: the
    /// client gets an error and is disconnected.
    pub hard: usize,
    /// Pending output over this many bytes for longer than `soft_time` disconnects the
    /// client (0: no soft limit).
    pub soft: usize,
    pub soft_time: Duration,
}

impl Default for OutputLimits {
    /// Hard: four of the largest value (an MGET of four still answers); soft: two of them
    /// pending for a minute. Redis leaves normal clients unlimited; a client that never
    /// reads then grows without bound there.
    fn default() -> Self {
        OutputLimits {
            hard: 4 * resp::LARGEST_VALUE,
            soft: 2 * resp::LARGEST_VALUE,
            soft_time: Duration::from_secs(60),
        }
    }
}

/// Server settings. The defaults and what passing each limit does:
///
/// | setting | default | when passed | Redis |
/// |---|---|---|---|
/// | `max_clients` | 1000 | the new connection gets an error and is closed | `maxclients` |
/// | `limits.max_bulk` | 16 MiB (the largest value) | protocol error, close | `proto-max-bulk-len` |
/// | `limits.max_args` | 1 Mi | protocol error, close | (1 Mi, fixed) |
/// | `limits.max_query` | 64 MiB | error, close | `client-query-buffer-limit` |
/// | `output.hard` | 64 MiB | error, close | `client-output-buffer-limit` hard |
/// | `output.soft`/`soft_time` | 32 MiB for 60 s | close | `client-output-buffer-limit` soft |
/// | before AUTH | [`resp::Limits::UNAUTHENTICATED`] | protocol error, close | 10 elements, 16 KiB bulks |
#[derive(Clone, Debug)]
pub struct Config {
    /// An IP address or a host name (every address it resolves to is served).
    pub bind: String,
    pub port: u16,
    /// AUTH password; an empty one counts as none (it would protect nothing).
    pub password: Option<String>,
    pub max_clients: usize,
    /// Close a connection idle this long (0: never).
    pub idle_timeout: Duration,
    pub limits: resp::Limits,
    pub output: OutputLimits,
    /// Allow a non-loopback bind without a password.
    pub unprotected: bool,
    /// Worker threads that run connections (0: [`default_threads`]).
    pub threads: usize,
    /// Serve as a Redis Cluster node (docs/design/cluster.md).
    pub cluster: bool,
    /// What a subscriber's undelivered messages may take (`client-output-buffer-limit
    /// pubsub`, Redis's default 32 MiB hard, 8 MiB for 60 s soft): past it the subscriber
    /// is disconnected, so a slow one neither stalls publishers nor grows without bound.
    pub pubsub_output: OutputLimits,
}

/// The worker threads a server runs by default: half the cores this process may use, at
/// least one.
///
/// Why not one per core: the clients, the kernel's network stack (a loopback client's
/// sends and receives are system time on these same cores) and the engine's own
/// contention all share the machine. Measured on a 2-core VM with redis-benchmark on the
/// same host (50 clients, ×16 pipelining, HART in `adr`, docs/results/server.md): one worker
/// serves 1.3–1.5x the SETs of two, because the second worker takes CPU from the client
/// and wakes the first across cores for every task it steals, and writers of one ART then
/// meet on its lock. On a larger machine half the cores still leaves the other half to
/// clients and interrupts; `--threads` says otherwise.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1".into(),
            port: 6379,
            password: None,
            max_clients: 1000,
            idle_timeout: Duration::ZERO,
            limits: resp::Limits::default(),
            output: OutputLimits::default(),
            unprotected: false,
            threads: 0,
            cluster: false,
            pubsub_output: pubsub::PUBSUB_LIMITS,
        }
    }
}

const STRIPES: usize = 256;

/// What every connection shares.
pub struct Shared {
    pub store: Store,
    pub password: Option<String>,
    pub port: u16,
    pub mode: String,
    pub max_clients: usize,
    pub idle_timeout: Duration,
    pub limits: resp::Limits,
    pub output: OutputLimits,
    pub clients: AtomicU64,
    pub connections: AtomicU64,
    pub commands: AtomicU64,
    /// Connections refused at `max_clients`.
    pub rejected: AtomicU64,
    /// Clients disconnected at the query-buffer limit.
    pub query_limit_closes: AtomicU64,
    /// Clients disconnected at the output-buffer limits.
    pub output_limit_closes: AtomicU64,
    stripes: Vec<Mutex<()>>,
    /// Meta records (types, expiry times) in DRAM, and WATCHes: one keyspace per
    /// physical database (one only in a cluster pool), reached through [`Shared::ks`].
    dbs: Vec<keyspace::Keyspace>,
    /// SWAPDB's map: byte `i` is the physical database of logical DB `i` (changed only
    /// under the gate held exclusively; durable in [`keyspace::DB_MAP_KEY`]).
    db_map: [std::sync::atomic::AtomicU8; keyspace::DATABASES],
    /// Clients waiting in blocking commands, in queues per key.
    pub(crate) blocked: blocking::Blocked,
    /// Data commands hold it shared; EXEC, EVAL and FLUSHDB exclusively (isolation).
    /// Taken through [`Shared::gate_read`] and [`Shared::gate_write`].
    gate: parking_lot::RwLock<()>,
    /// A cluster node's slots, topology and migrations (`None`: a plain server).
    pub cluster: Option<cluster::Cluster>,
    /// Lua scripts loaded (SCRIPT LOAD, EVAL), by SHA-1.
    pub scripts: Mutex<std::collections::HashMap<String, String>>,
    /// The script running now (BUSY replies, SCRIPT KILL, the time limits).
    pub script: Arc<script::State>,
    /// Function libraries (FUNCTION LOAD), in memory as scripts are.
    pub functions: Mutex<script::Libraries>,
    /// Per-command calls, time, rejections and failures (`INFO commandstats`).
    pub stats: stats::CommandStats,
    /// When the server started (`INFO`'s uptime).
    pub started: Instant,
    /// The replication stream this server serves its replicas from (as a primary).
    pub(crate) repl: repl_stream::Repl,
    /// Redis's encoding thresholds as last set (see [`commands::ENCODING_PARAMS`]).
    pub encodings: Mutex<std::collections::BTreeMap<&'static str, String>>,
    /// Subscriptions (Pub/Sub).
    pub(crate) pubsub: pubsub::Hub,
    /// Whom this server replicates (REPLICAOF), and its offset.
    pub(crate) replica: replica::State,
    /// Starts a replication link (`replica_link::spawn`; held here because the
    /// dispatcher that runs REPLICAOF is below the link, which feeds it).
    pub(crate) start_link: fn(&Shared, u64),
    /// Mode `wal`: where replies wait for the log, off the workers (`log_sync`).
    pub(crate) log_sync: Arc<log_sync::LogSync>,
    /// This server, weakly (a replication link must not keep a stopping server alive).
    me: std::sync::Weak<Shared>,
    /// Set by SHUTDOWN or a [`Server::stopper`]; its own `Arc` so that a stopper does not
    /// keep the store alive (the store must be closed, and the pool marked clean, when
    /// the server returns).
    stop: Arc<AtomicBool>,
}

/// How long a command waits for the gate before it looks again whether a script has
/// made the server busy.
const GATE_LOOK: Duration = Duration::from_millis(10);

impl Shared {
    /// The gate, shared; or the BUSY reply when a script has run past `lua-time-limit`
    /// (it holds the gate: waiting would stall this client, and a worker, until the
    /// script ends).
    pub fn gate_read(&self) -> Result<parking_lot::RwLockReadGuard<'_, ()>, resp::Reply> {
        match self.gate.try_read() {
            Some(g) => Ok(g),
            None => self.gate_or_busy(|| self.gate.try_read_for(GATE_LOOK)),
        }
    }

    /// The gate, exclusively; or the BUSY reply (see [`Shared::gate_read`]).
    pub fn gate_write(&self) -> Result<parking_lot::RwLockWriteGuard<'_, ()>, resp::Reply> {
        match self.gate.try_write() {
            Some(g) => Ok(g),
            None => self.gate_or_busy(|| self.gate.try_write_for(GATE_LOOK)),
        }
    }

    /// Wait for the gate (`take`: a wait of up to [`GATE_LOOK`]) until it is had, or a
    /// script is busy. Out of line: the uncontended gate is one compare-and-swap.
    #[cold]
    #[inline(never)]
    fn gate_or_busy<G>(&self, take: impl Fn() -> Option<G>) -> Result<G, resp::Reply> {
        loop {
            if let Some(g) = take() {
                return Ok(g);
            }
            if self.script.busy() {
                return Err(self.script.busy_reply());
            }
        }
    }

    /// Whether the server is stopping (SHUTDOWN, a stopper or a signal).
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || SIGNALLED.load(Ordering::SeqCst)
    }

    /// The keyspace of logical database `db` (SELECT's number; 0 in a cluster pool).
    pub fn ks(&self, db: usize) -> &keyspace::Keyspace {
        &self.dbs[self.phys_db(db)]
    }

    /// The physical database (an index of [`all_dbs`](Self::all_dbs)) of logical `db`,
    /// which the caller has checked against [`databases`](Self::databases) (SELECT,
    /// MOVE, COPY … DB and a replica's RDB refuse a database this server lacks).
    ///
    /// The map is checked to be a permutation when it is loaded and SWAPDB only swaps
    /// two of its entries, so an index outside the databases is a bug: it stops here
    /// (a panic, which ends the one connection that hit it) instead of quietly reading
    /// or writing another database.
    pub fn phys_db(&self, db: usize) -> usize {
        assert!(
            db < self.dbs.len(),
            "logical database {db} of a server with {} (unchecked by the caller)",
            self.dbs.len()
        );
        let phys = self.db_map[db].load(Ordering::Acquire) as usize;
        assert!(
            phys < self.dbs.len(),
            "logical database {db} maps to {phys}, outside the {} databases",
            self.dbs.len()
        );
        phys
    }

    /// The logical database (SELECT's number) that physical database `phys` is now.
    pub(crate) fn logical_db(&self, phys: usize) -> usize {
        (0..self.dbs.len()).find(|&i| self.db_map[i].load(Ordering::Acquire) as usize == phys).unwrap_or(phys)
    }

    /// The physical database of each logical one now.
    pub(crate) fn db_map_now(&self) -> [u8; keyspace::DATABASES] {
        std::array::from_fn(|i| self.db_map[i].load(Ordering::Acquire))
    }

    /// Install SWAPDB's new map (under the gate held exclusively, after it is durable).
    pub(crate) fn set_db_map(&self, next: [u8; keyspace::DATABASES]) {
        for (m, p) in self.db_map.iter().zip(next) {
            m.store(p, Ordering::Release);
        }
    }

    /// Every physical database's keyspace (FLUSHALL, INFO, the expiry sweep).
    pub fn all_dbs(&self) -> &[keyspace::Keyspace] {
        &self.dbs
    }

    /// How many databases SELECT may choose from (1 in a cluster pool).
    pub fn databases(&self) -> usize {
        self.dbs.len()
    }

    /// DBSIZE of logical database `db`: its user keys.
    pub fn db_size(&self, db: usize) -> pmkv::Result<u64> {
        let ks = self.ks(db);
        if !ks.is_db0() {
            return Ok(ks.user_keys(0));
        }
        let others: u64 = self.dbs[1..].iter().map(keyspace::Keyspace::records).sum();
        let map = u64::from(self.dbs.len() > 1 && self.store.contains(keyspace::DB_MAP_KEY)?);
        let functions = u64::from(self.store.contains(record::FUNCTIONS_KEY)?);
        Ok(ks.user_keys(self.store.len()?.saturating_sub(others + map + functions)))
    }

    /// The stripe locks of `keys`, taken in index order (no deadlock between commands).
    pub fn lock(&self, keys: &[&[u8]]) -> Vec<MutexGuard<'_, ()>> {
        let mut idx: Vec<usize> = keys.iter().map(|k| stripe(k)).collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter().map(|i| self.stripes[i].lock().unwrap_or_else(|e| e.into_inner())).collect()
    }
}

fn stripe(k: &[u8]) -> usize {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in k {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    (h >> 32) as usize % STRIPES
}

/// Compare in time independent of where the inputs differ (AUTH must not leak the
/// password's prefix through timing).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut d = (a.len() ^ b.len()) as u64;
    for i in 0..a.len().max(b.len()) {
        d |= (a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0)) as u64;
    }
    std::hint::black_box(d) == 0
}

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::SeqCst);
}

/// A bound server, ready to run.
pub struct Server {
    listeners: Vec<TcpListener>,
    shared: Arc<Shared>,
    cfg: Config,
}

fn err(kind: std::io::ErrorKind, msg: String) -> std::io::Error {
    std::io::Error::new(kind, msg)
}

/// The addresses `bind` names: an IP address (`::1` or `[::1]` too), or a host name
/// resolved by the system's resolver (`localhost`: 127.0.0.1, and ::1 where the hosts
/// file says so), without duplicates, in the resolver's order.
pub fn resolve(bind: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    let host = bind.strip_prefix('[').and_then(|b| b.strip_suffix(']')).unwrap_or(bind);
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    if host.is_empty() {
        return Err(err(std::io::ErrorKind::InvalidInput, "empty bind address".into()));
    }
    let mut addrs: Vec<SocketAddr> = Vec::new();
    let found = (host, port)
        .to_socket_addrs()
        .map_err(|e| err(std::io::ErrorKind::InvalidInput, format!("cannot resolve {host}: {e}")))?;
    for a in found {
        if !addrs.contains(&a) {
            addrs.push(a);
        }
    }
    if addrs.is_empty() {
        return Err(err(std::io::ErrorKind::InvalidInput, format!("{host} resolves to no address")));
    }
    Ok(addrs)
}

impl Server {
    /// Bind to `cfg.bind:cfg.port` (port 0: any free port). `cfg.bind` may be a host
    /// name: every address it resolves to is bound, on one port (an address this host
    /// cannot bind, such as ::1 with IPv6 off, is skipped if another one binds; see
    /// [`Server::addrs`]). Refuses a non-loopback address without a password unless
    /// `cfg.unprotected`; an empty password is no password.
    pub fn bind(store: Store, mode: &str, mut cfg: Config) -> std::io::Result<Server> {
        let empty_password = cfg.password.as_deref() == Some("");
        if empty_password {
            cfg.password = None;
        }
        if let Some(p) = &cfg.password {
            let most = resp::Limits::UNAUTHENTICATED.max_bulk;
            if p.len() > most {
                return Err(err(
                    std::io::ErrorKind::InvalidInput,
                    format!("the password is {} bytes; at most {most} (what a client may send before AUTH)", p.len()),
                ));
            }
        }
        let addrs = resolve(&cfg.bind, cfg.port)?;
        if let Some(a) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            if cfg.password.is_none() && !cfg.unprotected {
                let why = if empty_password { " (the password given is empty)" } else { "" };
                return Err(err(
                    std::io::ErrorKind::PermissionDenied,
                    format!(
                        "refusing to serve {} without a password{why}: use --requirepass, or --unprotected to force it",
                        a.ip()
                    ),
                ));
            }
        }
        let mut listeners: Vec<TcpListener> = Vec::new();
        let mut first_err = None;
        for a in &addrs {
            // Every address on the port the first one got (port 0 picks it).
            let port = listeners.first().and_then(|l| l.local_addr().ok()).map_or(cfg.port, |l| l.port());
            match TcpListener::bind(SocketAddr::new(a.ip(), port)) {
                Ok(l) => listeners.push(l),
                // An address family or address this host lacks (::1 with IPv6 off).
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::AddrNotAvailable | std::io::ErrorKind::Unsupported)
                        || e.raw_os_error() == Some(libc::EAFNOSUPPORT) =>
                {
                    first_err.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        if listeners.is_empty() {
            return Err(first_err.unwrap_or_else(|| err(std::io::ErrorKind::InvalidInput, "no address".into())));
        }
        let port = listeners[0].local_addr()?.port();
        let cluster = if cfg.cluster {
            Some(cluster::Cluster::open(&store).map_err(|e| err(std::io::ErrorKind::InvalidData, e))?)
        } else {
            let is_node = store
                .contains(cluster::STATE_KEY)
                .map_err(|e| err(std::io::ErrorKind::InvalidData, format!("reading the server's records: {e}")))?;
            if is_node {
                return Err(err(
                    std::io::ErrorKind::InvalidData,
                    "the pool is a cluster node's (its keys are stored after their slot): serve it with --cluster"
                        .into(),
                ));
            }
            None
        };
        let dbs = (0..if cfg.cluster { 1 } else { keyspace::DATABASES })
            .map(|n| keyspace::Keyspace::load_db(&store, cfg.cluster, n))
            .collect::<pmkv::Result<Vec<_>>>()
            .map_err(|e| err(std::io::ErrorKind::InvalidData, format!("reading the server's records: {e}")))?;
        let db_map = select::load_map(&store, cfg.cluster).map_err(|e| err(std::io::ErrorKind::InvalidData, e))?;
        // A replica's pool: re-attach to its primary (as Redis with `replicaof` in its
        // config), and refuse to serve the keyspace while the record says a full sync did
        // not finish (docs/design/replication.md).
        let replica_record = if cfg.cluster {
            None
        } else {
            replica::load(&store).map_err(|e| err(std::io::ErrorKind::InvalidData, e))?
        };
        let functions = script::load_kept_functions(&store).map_err(|e| err(std::io::ErrorKind::InvalidData, e))?;
        let shared = Arc::new_cyclic(|me| Shared {
            store,
            password: cfg.password.clone(),
            port,
            mode: mode.to_string(),
            max_clients: cfg.max_clients,
            idle_timeout: cfg.idle_timeout,
            limits: cfg.limits,
            output: cfg.output,
            clients: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            commands: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            query_limit_closes: AtomicU64::new(0),
            output_limit_closes: AtomicU64::new(0),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            dbs,
            db_map,
            blocked: blocking::Blocked::default(),
            gate: parking_lot::RwLock::new(()),
            cluster,
            scripts: Mutex::new(Default::default()),
            script: Arc::default(),
            functions: Mutex::new(functions),
            stats: stats::CommandStats::default(),
            started: Instant::now(),
            repl: repl_stream::Repl::default(),
            encodings: Mutex::new(commands::ENCODING_PARAMS.iter().map(|&(n, v)| (n, v.to_string())).collect()),
            pubsub: pubsub::Hub::new(cfg.pubsub_output),
            replica: replica::State::default(),
            start_link: replica_link::spawn,
            log_sync: Arc::default(),
            me: me.clone(),
            stop: Arc::new(AtomicBool::new(false)),
        });
        if let Some(rec) = replica_record {
            shared.replica.set_partial(rec.syncing);
            let generation = shared.replica.set(Some((rec.host, rec.port)));
            (shared.start_link)(&shared, generation);
        }
        Ok(Server { listeners, shared, cfg })
    }

    /// The addresses it listens on (a host name's: those that could be bound).
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.listeners.iter().filter_map(|l| l.local_addr().ok()).collect()
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.shared.port
    }

    /// A handle that stops the server (as SHUTDOWN does).
    pub fn stopper(&self) -> impl Fn() + Send + Sync + 'static {
        let s = self.shared.stop.clone();
        move || s.store(true, Ordering::SeqCst)
    }

    /// Serve until SHUTDOWN, SIGINT/SIGTERM (with `signals`) or the stopper; then close the
    /// store (marking the pool clean) and return its result.
    ///
    /// Connections are tasks on a tokio runtime with `threads` workers (see
    /// [`default_threads`]): an idle client costs a few KiB and no thread. Engine calls run
    /// inline on the worker (they take microseconds and never wait for the network).
    pub fn run(self, signals: bool) -> pmkv::Result<()> {
        if signals {
            // SAFETY: installing a handler that only stores to an atomic.
            unsafe {
                libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
                libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
            }
        }
        let io_err = |e: std::io::Error| pmkv::Error::new(pmkv::ErrorKind::Io, format!("server: {e}"));
        let threads = if self.cfg.threads == 0 { default_threads() } else { self.cfg.threads };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("pmkv-worker")
            .on_thread_park({
                let (ls, me) = (self.shared.log_sync.clone(), Arc::downgrade(&self.shared));
                move || ls.parked(&me)
            })
            .enable_all()
            .build()
            .map_err(io_err)?;
        let Server { listeners, shared, cfg } = self;
        let syncer = match shared.store.sync_policy() {
            Some(_) => {
                Some(log_sync::LogSync::spawn(shared.log_sync.clone(), Arc::downgrade(&shared)).map_err(io_err)?)
            }
            None => None,
        };
        let sh = shared.clone();
        rt.block_on(async move {
            let mut ls = Vec::new();
            for l in listeners {
                l.set_nonblocking(true)?;
                ls.push(tokio::net::TcpListener::from_std(l)?);
            }
            // The next connection on any of the listeners.
            let accept = || {
                std::future::poll_fn(|cx| {
                    for l in &ls {
                        if let std::task::Poll::Ready(r) = l.poll_accept(cx) {
                            return std::task::Poll::Ready(r);
                        }
                    }
                    std::task::Poll::Pending
                })
            };
            // Active expiry: keys whose time has passed are deleted within about
            // SWEEP_EVERY even if no one reads them. A look at the first expiry time when
            // some key has one; nothing at all when none has.
            // The same task pings the replicas every 10 s (Redis's
            // `repl-ping-replica-period`), so that an idle link stays alive.
            let sweeper = sh.clone();
            tokio::spawn(async move {
                let mut ticks = 0u32;
                loop {
                    tokio::time::sleep(SWEEP_EVERY).await;
                    if sweeper.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    sweep(&sweeper);
                    ticks += 1;
                    if ticks.is_multiple_of(100) {
                        sweeper.repl.ping();
                    }
                }
            });
            let mut next_id = 0u64;
            let stopping =
                |sh: &Shared| sh.stop.load(Ordering::SeqCst) || (signals && SIGNALLED.load(Ordering::SeqCst));
            while !stopping(&sh) {
                let accepted = tokio::time::timeout(Duration::from_millis(50), accept()).await;
                let Ok(Ok((sock, _))) = accepted else { continue };
                next_id += 1;
                sh.connections.fetch_add(1, Ordering::Relaxed);
                if sh.clients.load(Ordering::SeqCst) as usize >= sh.max_clients {
                    sh.rejected.fetch_add(1, Ordering::Relaxed);
                    // Never waits on the client: a fresh socket takes 40 bytes at once.
                    let _ = sock.try_write(b"-ERR max number of clients reached\r\n");
                    continue;
                }
                sh.clients.fetch_add(1, Ordering::SeqCst);
                let (sh2, cfg2, id) = (sh.clone(), cfg.clone(), next_id);
                tokio::spawn(async move {
                    let _ = connection(&sh2, sock, &cfg2, id).await;
                    sh2.clients.fetch_sub(1, Ordering::SeqCst);
                });
            }
            sh.stop.store(true, Ordering::SeqCst);
            Ok::<(), std::io::Error>(())
        })
        .map_err(io_err)?;
        // Connections notice the stop at their next request or read; the rest are dropped.
        rt.shutdown_timeout(Duration::from_secs(1));
        shared.log_sync.stop();
        if let Some(t) = syncer {
            let _ = t.join();
        }
        match Arc::try_unwrap(shared) {
            Ok(sh) => sh.store.close(),
            Err(sh) => sh.store.sync(), // cannot happen once the runtime is gone; be safe
        }
    }
}

/// How often the active expiry sweep runs.
const SWEEP_EVERY: Duration = Duration::from_millis(100);

/// Delete up to 256 keys whose expiry time has passed, each as its own command would
/// (its stripe lock, the gate shared; the lazy expiry of [`keyspace::Tx::kind`] does the
/// deleting, so a key written since it was found due is left alone).
/// Replicas get each deletion as a DEL in the key's logical database, under its lock.
fn sweep(sh: &Shared) {
    for (phys, ks) in sh.dbs.iter().enumerate() {
        if ks.expiring() == 0 {
            continue;
        }
        for k in ks.due(keyspace::now_ms(), 256) {
            // A busy script holds the gate: sweep again later.
            let Ok(_gate) = sh.gate_read() else { return };
            let _lock = sh.lock(&[&k]);
            let mut tx = keyspace::Tx::new(&sh.store, ks);
            if tx.kind(&k).is_ok() {
                let mut fx = Vec::new();
                repl_stream::expired(&mut tx, &mut fx);
                if tx.commit().is_ok() {
                    let db = sh.logical_db(phys);
                    sh.repl.feed(fx.into_iter().map(|x| (db, x)).collect(), false);
                }
            }
        }
    }
}

/// A connection closed for passing a limit (counted in INFO, not an I/O failure).
fn limit_closed(what: &str) -> std::io::Error {
    err(std::io::ErrorKind::Other, format!("{what} limit passed"))
}

/// Write all of `out` to the client, under the output limits: while more than the soft
/// limit is pending, the client has until `soft_since + soft_time` to take enough of it
/// (`soft_since` is when the pending output last went over the soft limit, kept across
/// calls as Redis keeps it); under it, a write waits as long as the idle timeout allows.
async fn flush(
    sh: &Shared,
    sock: &mut tokio::net::TcpStream,
    out: &mut Vec<u8>,
    soft_since: &mut Option<Instant>,
) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    // Mode wal: no reply leaves before the log holds everything appended when it was
    // produced (as Redis sends even read replies after the fsync of its event-loop pass),
    // so no client sees a write a power loss can take back. Connections waiting at once
    // share one fdatasync (the log's group commit); the worker is handed over meanwhile.
    let lsn = sh.store.appended_lsn();
    // Compared with what the policy promises (not with the durable LSN, which `everysec`
    // and `no` move once a second or never): under those a reply after a write does not
    // wait at all once the record is written.
    if !out.is_empty() && lsn > sh.store.acknowledged_lsn() {
        sh.log_sync.wait(lsn).await.map_err(|e| err(std::io::ErrorKind::Other, e))?;
    }
    let o = &sh.output;
    let mut pos = 0;
    while pos < out.len() {
        let pending = out.len() - pos;
        if pending > o.hard {
            sh.output_limit_closes.fetch_add(1, Ordering::Relaxed);
            return Err(limit_closed("output hard"));
        }
        let write = sock.write(&out[pos..]);
        let n = if o.soft > 0 && pending > o.soft {
            let since = *soft_since.get_or_insert_with(Instant::now);
            match tokio::time::timeout_at((since + o.soft_time).into(), write).await {
                Ok(r) => r?,
                Err(_) => {
                    sh.output_limit_closes.fetch_add(1, Ordering::Relaxed);
                    return Err(limit_closed("output soft"));
                }
            }
        } else {
            *soft_since = None;
            if sh.idle_timeout.is_zero() {
                write.await?
            } else {
                match tokio::time::timeout(sh.idle_timeout, write).await {
                    Ok(r) => r?,
                    Err(_) => return Err(err(std::io::ErrorKind::TimedOut, "write timed out".into())),
                }
            }
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        pos += n;
    }
    *soft_since = None;
    out.clear();
    Ok(())
}

/// Give back a buffer's memory once a large request or reply has passed, so that an
/// idle connection holds a few KiB whatever it sent or read before.
fn shrink(v: &mut Vec<u8>) {
    if v.capacity() > (1 << 20) && v.len() < (16 << 10) {
        v.shrink_to(16 << 10);
    }
}

async fn connection(sh: &Shared, sock: tokio::net::TcpStream, cfg: &Config, id: u64) -> std::io::Result<()> {
    let mut c = commands::Conn::new(id, sh.password.is_none());
    c.fd = Some(std::os::fd::AsRawFd::as_raw_fd(&sock));
    let r = serve_connection(sh, sock, cfg, &mut c).await;
    c.unwatch(sh);
    pubsub::leave(sh, &mut c.subs);
    r
}

async fn serve_connection(
    sh: &Shared,
    mut sock: tokio::net::TcpStream,
    cfg: &Config,
    c: &mut commands::Conn,
) -> std::io::Result<()> {
    use tokio::io::AsyncReadExt;
    sock.set_nodelay(true)?;
    let mut parser = resp::Parser::default();
    let mut buf: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut out: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut soft_since: Option<Instant> = None;
    // The value of the last plain GET: its allocation is reused by the next one.
    let mut value: Option<Vec<u8>> = None;
    let limits = |c: &commands::Conn| if c.authed { cfg.limits } else { resp::Limits::UNAUTHENTICATED };
    loop {
        // Every complete request in the buffer, replies gathered: a pipeline's replies go
        // out in one write (or one per FLUSH_AT bytes of them), after each of its writes
        // was made durable in turn. Plain SETs pipelined back to back are held in `sets`
        // and applied together (group commit, `commands::set_many`) before the next other
        // command runs and before any reply is sent.
        let mut used = 0;
        let mut sets: Vec<Vec<Vec<u8>>> = Vec::new();
        let mut sets_bytes = 0usize;
        let flush_sets =
            |sets: &mut Vec<Vec<Vec<u8>>>, out: &mut Vec<u8>, c: &mut commands::Conn| -> std::io::Result<()> {
                if !sets.is_empty() {
                    let n = sets.len();
                    match commands::set_many(sh, std::mem::take(sets)) {
                        Ok(reply) => {
                            sh.stats.ran_fast(&SET, n as u64);
                            if sh.repl.on() {
                                c.woff = sh.repl.end();
                            }
                            for _ in 0..n {
                                reply.write(out, c.resp3)?;
                            }
                        }
                        // A slot moved meanwhile (a cluster node): each SET is routed on its own.
                        Err(sets) => {
                            for args in sets {
                                commands::run(sh, c, &args).0.write(out, c.resp3)?;
                            }
                        }
                    }
                }
                Ok(())
            };
        loop {
            match parser.parse(&buf[used..], &limits(c)) {
                Ok((Some(args), n)) => {
                    used += n;
                    if args.is_empty() {
                        continue;
                    }
                    sh.commands.fetch_add(1, Ordering::Relaxed);
                    if commands::is_plain_set(sh, c, &args) {
                        sets_bytes += args[1].len() + args[2].len();
                        sets.push(args);
                        if sets.len() >= SET_BATCH_COUNT || sets_bytes >= SET_BATCH_BYTES {
                            flush_sets(&mut sets, &mut out, c)?;
                            sets_bytes = 0;
                        }
                        continue;
                    }
                    flush_sets(&mut sets, &mut out, c)?;
                    sets_bytes = 0;
                    if commands::is_plain_get(sh, c, &args) {
                        // The commonest request, answered straight into the output: no
                        // reply value, no copy of the value beyond the reused buffer.
                        if commands::get_into(sh, &args[1], &mut value, &mut out, c.resp3)? {
                            sh.stats.ran_fast(&GET, 1);
                        } else {
                            commands::run(sh, c, &args).0.write(&mut out, c.resp3)?;
                        }
                    } else {
                        c.reply_budget = sh.output.hard.saturating_sub(out.len());
                        let (reply, after) = if commands::may_take_long(&args) {
                            // A blocking command is numbered here, before another thread
                            // can run ahead of it: waiters queue in arrival order.
                            c.arrival = sh.blocked.arrive(&args);
                            let r = tokio::task::block_in_place(|| commands::run(sh, c, &args));
                            if let Some(id) = c.arrival.take() {
                                sh.blocked.depart(id);
                            }
                            r
                        } else {
                            commands::run(sh, c, &args)
                        };
                        // Messages published meanwhile to this client precede the
                        // reply, as in Redis (a PUBLISH to its own channel, in RESP3).
                        if let Some(ob) = pubsub::outbox(&c.subs) {
                            if let Err(e) = ob.drain_into(&mut out) {
                                sh.output_limit_closes.fetch_add(1, Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                        match after {
                            commands::After::Shutdown => {
                                // No reply (as Redis): the client sees the connection close.
                                flush(sh, &mut sock, &mut out, &mut soft_since).await?;
                                sh.stop.store(true, Ordering::SeqCst);
                                return Ok(());
                            }
                            commands::After::Close => {
                                reply.write(&mut out, c.resp3)?;
                                return flush(sh, &mut sock, &mut out, &mut soft_since).await;
                            }
                            commands::After::Continue => reply.write(&mut out, c.resp3)?,
                            commands::After::Replicate => {
                                // The connection is a replica's link from here on.
                                flush(sh, &mut sock, &mut out, &mut soft_since).await?;
                                let rest = buf[used..].to_vec();
                                return primary::serve(sh, sock, c, &args, rest).await;
                            }
                        }
                    }
                    if out.len() > sh.output.hard {
                        // One value larger than the hard limit (a limit set below the
                        // largest value): not sent, the client is disconnected.
                        sh.output_limit_closes.fetch_add(1, Ordering::Relaxed);
                        return Err(limit_closed("output hard"));
                    }
                    if out.len() >= FLUSH_AT {
                        flush(sh, &mut sock, &mut out, &mut soft_since).await?;
                        shrink(&mut out);
                    }
                }
                Ok((None, n)) => {
                    used += n;
                    break;
                }
                Err(m) => {
                    flush_sets(&mut sets, &mut out, c)?;
                    resp::Reply::err(format!("ERR Protocol error: {m}")).write(&mut out, c.resp3)?;
                    let _ = flush(sh, &mut sock, &mut out, &mut soft_since).await;
                    return Ok(());
                }
            }
        }
        flush_sets(&mut sets, &mut out, c)?;
        buf.drain(..used);
        // What is left is a request still arriving: with what the parser holds of it, the
        // client's query buffer.
        let lim = limits(c);
        if buf.len() + parser.held() > lim.max_query {
            sh.query_limit_closes.fetch_add(1, Ordering::Relaxed);
            let what = if c.authed { "client-query-buffer-limit" } else { "the limit before AUTH" };
            resp::Reply::err(format!("ERR Protocol error: a request over {what} ({} bytes)", lim.max_query))
                .write(&mut out, c.resp3)?;
            let _ = flush(sh, &mut sock, &mut out, &mut soft_since).await;
            return Ok(());
        }
        if !out.is_empty() {
            // A slow reader blocks this client only; a subscriber dropped at the pubsub
            // limit meanwhile stops waiting for it.
            let write = flush(sh, &mut sock, &mut out, &mut soft_since);
            match pubsub::outbox(&c.subs) {
                None => write.await?,
                Some(ob) => tokio::select! {
                    r = write => r?,
                    () = ob.dropped() => {
                        sh.output_limit_closes.fetch_add(1, Ordering::Relaxed);
                        return Err(limit_closed("pubsub output"));
                    }
                },
            }
        }
        shrink(&mut out);
        shrink(&mut buf);
        if value.as_ref().is_some_and(|v| v.capacity() > 1 << 20) {
            value = None;
        }
        if sh.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        // Room for the bulk being read, all at once (a 16 MiB value arriving in 64 KiB
        // reads is not copied 256 times); never more than the limit lets the client send.
        let allowed = lim.max_query.saturating_sub(buf.len() + parser.held()) + 1;
        buf.reserve(parser.want().max(16 << 10).min(allowed));
        let read = async {
            let read = sock.read_buf(&mut buf);
            if cfg.idle_timeout.is_zero() {
                Some(read.await)
            } else {
                tokio::time::timeout(cfg.idle_timeout, read).await.ok()
            }
        };
        // A subscriber also wakes for messages published to it (read_buf is cancel safe:
        // nothing read is lost when a message wins).
        let got = match pubsub::outbox(&c.subs) {
            None => read.await,
            Some(ob) => tokio::select! {
                r = read => r,
                () = ob.ready() => {
                    if let Err(e) = ob.drain_into(&mut out) {
                        sh.output_limit_closes.fetch_add(1, Ordering::Relaxed);
                        return Err(e);
                    }
                    continue;
                }
            },
        };
        let n = match got {
            Some(r) => r?,
            None => return Ok(()), // idle too long
        };
        if n == 0 {
            return Ok(());
        }
    }
}
