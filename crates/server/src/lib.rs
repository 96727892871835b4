//! `pmkv serve` (SPEC U2, U3): a Redis-protocol server over any pmkv engine, so that the
//! Redis tools and client libraries people already use drive pmkv unchanged.
//!
//! * [`resp`] — the protocol, bounded (bulk length, argument count, inline line).
//! * [`commands`] — what each command does to the store; read-modify-write commands are
//!   atomic under concurrent clients (key-striped locks).
//! * here — the listener, connections (one thread each, at most `max_clients`, an idle
//!   timeout, an output buffer that blocks a slow reader rather than growing), AUTH in
//!   constant time, loopback by default, and a clean shutdown on SIGINT, SIGTERM or
//!   SHUTDOWN: the store is closed and the pool marked clean.
//!
//! Durability: a write's reply is sent after the engine's put returned, i.e. once the write
//! is persistent in the pool's mode (`adr`/`eadr`: in PM; `msync`: on the file's device;
//! `none`: not durable). Replies of one connection are written after each request; a
//! pipeline's writes are each durable before their own reply.

pub mod commands;
pub mod resp;

use pmkv::Store;
use std::io::{BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
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
    stop: AtomicBool,
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
            stop: AtomicBool::new(false),
        });
        Ok(Server { listener, shared, cfg })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.shared.port
    }

    /// A handle that stops the server (as SHUTDOWN does).
    pub fn stopper(&self) -> impl Fn() + Send + Sync + 'static {
        let s = self.shared.clone();
        move || s.stop.store(true, Ordering::SeqCst)
    }

    /// Serve until SHUTDOWN, SIGINT/SIGTERM (with `signals`) or the stopper; then close the
    /// store (marking the pool clean) and return its result.
    pub fn run(self, signals: bool) -> pmkv::Result<()> {
        if signals {
            // SAFETY: installing a handler that only stores to an atomic.
            unsafe {
                libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
                libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
            }
        }
        let _ = self.listener.set_nonblocking(true);
        let mut next_id = 0u64;
        let stopping = |sh: &Shared| sh.stop.load(Ordering::SeqCst) || (signals && SIGNALLED.load(Ordering::SeqCst));
        while !stopping(&self.shared) {
            match self.listener.accept() {
                Ok((conn, _)) => {
                    next_id += 1;
                    let sh = self.shared.clone();
                    self.shared.connections.fetch_add(1, Ordering::Relaxed);
                    if sh.clients.load(Ordering::SeqCst) as usize >= sh.max_clients {
                        let mut w = conn;
                        let _ = w.write_all(b"-ERR max number of clients reached\r\n");
                        continue;
                    }
                    sh.clients.fetch_add(1, Ordering::SeqCst);
                    let cfg = self.cfg.clone();
                    std::thread::spawn(move || {
                        let _ = connection(&sh, conn, &cfg, next_id);
                        sh.clients.fetch_sub(1, Ordering::SeqCst);
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(5)),
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        self.shared.stop.store(true, Ordering::SeqCst);
        // Let connections see the stop (they poll it between requests and on timeouts).
        for _ in 0..200 {
            if self.shared.clients.load(Ordering::SeqCst) == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        match Arc::try_unwrap(self.shared) {
            Ok(sh) => sh.store.close(),
            Err(sh) => sh.store.sync(), // a connection is still mid-request: make it durable
        }
    }
}

fn connection(sh: &Shared, conn: TcpStream, cfg: &Config, id: u64) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    // Wake up periodically to notice a shutdown; idle connections close after the timeout.
    conn.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut r = BufReader::with_capacity(64 << 10, conn.try_clone()?);
    let mut w = BufWriter::with_capacity(64 << 10, conn);
    let mut c = commands::Conn { id, name: None, resp3: false, authed: sh.password.is_none(), cursors: Vec::new() };
    let mut idle = Duration::ZERO;
    loop {
        if sh.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        match resp::read_request(&mut r, &cfg.limits) {
            Ok(args) if args.is_empty() => continue,
            Ok(args) => {
                idle = Duration::ZERO;
                sh.commands.fetch_add(1, Ordering::Relaxed);
                let (reply, after) = commands::run(sh, &mut c, &args);
                if matches!(after, commands::After::Shutdown) {
                    // No reply (as Redis): the client sees the connection close.
                    sh.stop.store(true, Ordering::SeqCst);
                    return Ok(());
                }
                reply.write(&mut w, c.resp3)?;
                // Flush when no further request is already buffered (pipelines get one write).
                if r.buffer().is_empty() {
                    w.flush()?;
                }
                match after {
                    commands::After::Continue => {}
                    commands::After::Close => return w.flush(),
                    commands::After::Shutdown => {
                        w.flush()?;
                        sh.stop.store(true, Ordering::SeqCst);
                        return Ok(());
                    }
                }
            }
            Err(resp::ReadError::Io(e))
                if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
            {
                // A read timeout between requests. (A timeout inside a request loses what
                // was read of it: treated as a broken client, the connection closes.)
                if r.buffer().is_empty() {
                    idle += Duration::from_millis(200);
                    if !cfg.idle_timeout.is_zero() && idle >= cfg.idle_timeout {
                        return Ok(());
                    }
                    continue;
                }
                return Ok(());
            }
            Err(resp::ReadError::Eof) => return Ok(()),
            Err(resp::ReadError::Io(e)) => return Err(e),
            Err(resp::ReadError::Protocol(m)) => {
                let _ = resp::Reply::err(format!("ERR Protocol error: {m}")).write(&mut w, c.resp3);
                return w.flush();
            }
        }
    }
}
