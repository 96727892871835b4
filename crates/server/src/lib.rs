//! `pmkv serve` (SPEC U2, U3): a Redis-protocol server over any pmkv engine, so that the
//! Redis tools and client libraries people already use drive pmkv unchanged.
//!
//! * [`resp`] — the protocol, bounded (bulk length, argument count, inline line).
//! * [`commands`] — what each command does to the store; read-modify-write commands are
//!   atomic under concurrent clients (key-striped locks).
//! * here — the listener and connections: tokio tasks (at most `max_clients`, an idle
//!   timeout, replies written before more is read so a slow reader only slows itself),
//!   AUTH in constant time, loopback by default, and a clean shutdown on SIGINT, SIGTERM
//!   or SHUTDOWN: the store is closed and the pool marked clean.
//!
//! Durability: a write's reply is sent after the engine's put returned, i.e. once the write
//! is persistent in the pool's mode (`adr`/`eadr`: in PM; `msync`: on the file's device;
//! `none`: not durable). The replies to all the requests that arrived in one read go out
//! in one write. Group commit: plain SETs pipelined back to back are applied as one write
//! batch, in which the engine shares commit fences (HART: one per run of keys in one ART),
//! and all are acknowledged after the batch is durable.

pub mod commands;
pub mod resp;

use pmkv::Store;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Server settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub bind: String,
    pub port: u16,
    pub password: Option<String>,
    pub max_clients: usize,
    /// Close a connection idle this long (0: never).
    pub idle_timeout: Duration,
    pub limits: resp::Limits,
    /// Allow a non-loopback bind without a password.
    pub unprotected: bool,
    /// Worker threads that run connections (0: [`default_threads`]).
    pub threads: usize,
}

/// The worker threads a server runs by default: half the cores this process may use, at
/// least one.
///
/// Why not one per core: the clients, the kernel's network stack (a loopback client's
/// sends and receives are system time on these same cores) and the engine's own
/// contention all share the machine. Measured on a 2-core VM with redis-benchmark on the
/// same host (50 clients, ×16 pipelining, HART in `adr`, README "Server"): one worker
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
            unprotected: false,
            threads: 0,
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
    pub clients: AtomicU64,
    pub connections: AtomicU64,
    pub commands: AtomicU64,
    stripes: Vec<Mutex<()>>,
    /// Set by SHUTDOWN or a [`Server::stopper`]; its own `Arc` so that a stopper does not
    /// keep the store alive (the store must be closed, and the pool marked clean, when
    /// the server returns).
    stop: Arc<AtomicBool>,
}

impl Shared {
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
    listener: TcpListener,
    shared: Arc<Shared>,
    cfg: Config,
}

impl Server {
    /// Bind to `cfg.bind:cfg.port` (port 0: any free port). Refuses a non-loopback address
    /// without a password unless `cfg.unprotected`.
    pub fn bind(store: Store, mode: &str, cfg: Config) -> std::io::Result<Server> {
        let addr: std::net::IpAddr = cfg
            .bind
            .parse()
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("bad address {}", cfg.bind)))?;
        if !addr.is_loopback() && cfg.password.is_none() && !cfg.unprotected {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("refusing to serve {addr} without a password: use --requirepass, or --unprotected to force it"),
            ));
        }
        let listener = TcpListener::bind(SocketAddr::new(addr, cfg.port))?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            store,
            password: cfg.password.clone(),
            port,
            mode: mode.to_string(),
            max_clients: cfg.max_clients,
            clients: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            commands: AtomicU64::new(0),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            stop: Arc::new(AtomicBool::new(false)),
        });
        Ok(Server { listener, shared, cfg })
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
            .enable_all()
            .build()
            .map_err(io_err)?;
        let Server { listener, shared, cfg } = self;
        let sh = shared.clone();
        rt.block_on(async move {
            listener.set_nonblocking(true)?;
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let mut next_id = 0u64;
            let stopping =
                |sh: &Shared| sh.stop.load(Ordering::SeqCst) || (signals && SIGNALLED.load(Ordering::SeqCst));
            while !stopping(&sh) {
                let accepted = tokio::time::timeout(Duration::from_millis(50), listener.accept()).await;
                let Ok(Ok((sock, _))) = accepted else { continue };
                next_id += 1;
                sh.connections.fetch_add(1, Ordering::Relaxed);
                if sh.clients.load(Ordering::SeqCst) as usize >= sh.max_clients {
                    use tokio::io::AsyncWriteExt;
                    let mut sock = sock;
                    let _ = sock.write_all(b"-ERR max number of clients reached\r\n").await;
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
        match Arc::try_unwrap(shared) {
            Ok(sh) => sh.store.close(),
            Err(sh) => sh.store.sync(), // cannot happen once the runtime is gone; be safe
        }
    }
}

async fn connection(sh: &Shared, mut sock: tokio::net::TcpStream, cfg: &Config, id: u64) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    sock.set_nodelay(true)?;
    let mut c = commands::Conn { id, name: None, resp3: false, authed: sh.password.is_none(), cursors: Vec::new() };
    let mut buf: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut out: Vec<u8> = Vec::with_capacity(16 << 10);
    // The value of the last plain GET: its allocation is reused by the next one.
    let mut value: Option<Vec<u8>> = None;
    loop {
        // Every complete request in the buffer, replies gathered: a pipeline's replies go
        // out in one write, after each of its writes was made durable in turn.
        // Plain SETs pipelined back to back are held in `sets` and applied together
        // (group commit, `commands::set_many`) before the next other command runs and
        // before any reply is sent.
        let mut used = 0;
        let mut sets: Vec<Vec<Vec<u8>>> = Vec::new();
        let flush_sets = |sets: &mut Vec<Vec<Vec<u8>>>, out: &mut Vec<u8>, resp3: bool| -> std::io::Result<()> {
            if !sets.is_empty() {
                let n = sets.len();
                let reply = commands::set_many(sh, std::mem::take(sets));
                for _ in 0..n {
                    reply.write(out, resp3)?;
                }
            }
            Ok(())
        };
        loop {
            match resp::parse_request(&buf[used..], &cfg.limits) {
                Ok(Some((args, n))) => {
                    used += n;
                    if args.is_empty() {
                        continue;
                    }
                    sh.commands.fetch_add(1, Ordering::Relaxed);
                    if commands::is_plain_set(sh, &c, &args) {
                        sets.push(args);
                        continue;
                    }
                    flush_sets(&mut sets, &mut out, c.resp3)?;
                    if commands::is_plain_get(&c, &args) {
                        // The commonest request, answered straight into the output: no
                        // reply value, no copy of the value beyond the reused buffer.
                        commands::get_into(sh, &args[1], &mut value, &mut out, c.resp3)?;
                        continue;
                    }
                    let (reply, after) = commands::run(sh, &mut c, &args);
                    match after {
                        commands::After::Shutdown => {
                            // No reply (as Redis): the client sees the connection close.
                            sock.write_all(&out).await?;
                            sh.stop.store(true, Ordering::SeqCst);
                            return Ok(());
                        }
                        commands::After::Close => {
                            reply.write(&mut out, c.resp3)?;
                            return sock.write_all(&out).await;
                        }
                        commands::After::Continue => reply.write(&mut out, c.resp3)?,
                    }
                }
                Ok(None) => break,
                Err(m) => {
                    flush_sets(&mut sets, &mut out, c.resp3)?;
                    resp::Reply::err(format!("ERR Protocol error: {m}")).write(&mut out, c.resp3)?;
                    return sock.write_all(&out).await;
                }
            }
        }
        flush_sets(&mut sets, &mut out, c.resp3)?;
        buf.drain(..used);
        if !out.is_empty() {
            sock.write_all(&out).await?; // a slow reader blocks this client only
            out.clear();
        }
        if sh.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let read = sock.read_buf(&mut buf);
        let n = if cfg.idle_timeout.is_zero() {
            read.await?
        } else {
            match tokio::time::timeout(cfg.idle_timeout, read).await {
                Ok(r) => r?,
                Err(_) => return Ok(()), // idle too long
            }
        };
        if n == 0 {
            return Ok(());
        }
    }
}
