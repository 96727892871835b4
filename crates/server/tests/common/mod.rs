//! A RESP client for the server's tests: requests as RESP arrays, replies rendered
//! compactly (+OK, -ERR..., :1, a bulk as text, (nil), [a,b], a map as [k,v,...]).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// `args` as one RESP request.
pub fn request(args: &[&[u8]]) -> Vec<u8> {
    let mut b = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        b.extend_from_slice(a);
        b.extend_from_slice(b"\r\n");
    }
    b
}

pub struct Client {
    pub r: BufReader<TcpStream>,
    pub w: TcpStream,
    /// Bulks longer than this are rendered `$<len>` (tests of huge values need not hold
    /// them as text twice).
    abbreviate_over: usize,
}

impl Client {
    /// A connection to the server on `port` of 127.0.0.1.
    pub fn new(port: u16) -> Client {
        Client::to(("127.0.0.1", port))
    }
    /// A connection to `addr`; a reply not there in 30 s fails the read.
    pub fn to(addr: impl std::net::ToSocketAddrs) -> Client {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Client { r: BufReader::new(s.try_clone().unwrap()), w: s, abbreviate_over: usize::MAX }
    }
    /// Render bulks longer than `n` bytes as `$<len>`.
    pub fn abbreviating(self, n: usize) -> Client {
        Client { abbreviate_over: n, ..self }
    }
    pub fn send(&mut self, args: &[&[u8]]) {
        self.w.write_all(&request(args)).unwrap();
    }
    /// One reply; `None` when the connection closed (or a read failed).
    pub fn try_reply(&mut self) -> Option<String> {
        let mut line = String::new();
        if self.r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end().to_string();
        let (t, rest) = line.split_at(1);
        Some(match t {
            "+" | "-" | ":" => line,
            "_" => "(nil)".into(),
            "$" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return Some("(nil)".into());
                }
                let mut b = vec![0u8; n as usize + 2];
                self.r.read_exact(&mut b).ok()?;
                if n as usize > self.abbreviate_over {
                    format!("${n}")
                } else {
                    String::from_utf8_lossy(&b[..n as usize]).into_owned()
                }
            }
            "*" if rest == "-1" => "(nil)".into(),
            "*" | "%" => {
                let n: usize = rest.parse().unwrap();
                let n = if t == "%" { 2 * n } else { n };
                let items: Option<Vec<String>> = (0..n).map(|_| self.try_reply()).collect();
                format!("[{}]", items?.join(","))
            }
            ">" => {
                // A RESP3 push (Pub/Sub): shown apart from an array.
                let n: usize = rest.parse().unwrap();
                let items: Option<Vec<String>> = (0..n).map(|_| self.try_reply()).collect();
                format!(">[{}]", items?.join(","))
            }
            _ => panic!("unexpected reply line {line:?}"),
        })
    }
    /// Send `args`, read a bulk reply as raw bytes (DUMP's payload; `None`: nil).
    #[allow(dead_code)]
    pub fn bulk(&mut self, args: &[&[u8]]) -> Option<Vec<u8>> {
        self.send(args);
        let mut line = String::new();
        self.r.read_line(&mut line).unwrap();
        let n: i64 =
            line.trim_end().strip_prefix('$').unwrap_or_else(|| panic!("not a bulk reply: {line}")).parse().unwrap();
        if n < 0 {
            return None;
        }
        let mut b = vec![0u8; n as usize + 2];
        self.r.read_exact(&mut b).unwrap();
        b.truncate(n as usize);
        Some(b)
    }
    /// One reply; the connection must not have closed.
    pub fn reply(&mut self) -> String {
        self.try_reply().expect("a reply, not a closed connection")
    }
    /// Send `args`, read the reply; `None` if the connection closed.
    pub fn try_cmd(&mut self, args: &[&[u8]]) -> Option<String> {
        self.w.write_all(&request(args)).ok()?;
        self.try_reply()
    }
    /// Send `args`, read the reply.
    pub fn cmd(&mut self, args: &[&str]) -> String {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.try_cmd(&a).expect("a reply, not a closed connection")
    }
}

/// A server running on its own thread over a fresh pool, stopped (and its pool removed)
/// when dropped.
pub struct Running {
    pub port: u16,
    stop: Box<dyn Fn()>,
    h: Option<std::thread::JoinHandle<pmkv::Result<()>>>,
    _dir: tempfile::TempDir,
}

impl Running {
    pub fn client(&self) -> Client {
        Client::new(self.port)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        (self.stop)();
        if let Some(h) = self.h.take() {
            let _ = h.join();
        }
    }
}

/// `pmkv serve` with `cfg` (port 0: any free one) over a fresh `engine` pool of
/// `initial_mib` MiB, in `adr` mode.
pub fn start(engine: &str, initial_mib: u64, cfg: pmkv_server::Config) -> Running {
    let dir = pmkv_testutil::pool_dir();
    let opts = pmkv::Options::default().initial_size(initial_mib << 20);
    let store = pmkv::Store::open(dir.path().join("s.pool"), engine, &opts).unwrap();
    let srv = pmkv_server::Server::bind(store, "adr", pmkv_server::Config { port: 0, ..cfg }).unwrap();
    let (port, stop) = (srv.port(), srv.stopper());
    let h = std::thread::spawn(move || srv.run(false));
    Running { port, stop: Box::new(stop), h: Some(h), _dir: dir }
}

/// A real `redis-server` (Debian's package, which `.ci/run` installs: the control the
/// server's replies are compared with) on a free loopback port, without persistence,
/// killed when dropped. Panics, naming the package, where it is not installed: a
/// comparison must not pass by skipping.
pub struct RealRedis {
    pub port: u16,
    child: std::process::Child,
    /// Its working directory: a SAVE writes its dump.rdb here, never where the next
    /// control would load it at start.
    _dir: tempfile::TempDir,
}

impl RealRedis {
    pub fn start() -> RealRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("redis-server (Debian package redis-server) must be installed: it is the tests' control");
        let r = RealRedis { port, child, _dir: dir };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        r
    }
}

impl Drop for RealRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server over the pool `s.pool` in `dir` (a HART pool, created when absent), to stop
/// and start again over the same pool: its port, its stopper, its thread.
pub fn serve(dir: &std::path::Path, cluster: bool) -> (u16, impl Fn(), std::thread::JoinHandle<pmkv::Result<()>>) {
    let opts = pmkv::Options::default().initial_size(16 << 20);
    let store = pmkv::Store::open(dir.join("s.pool"), "hart", &opts).unwrap();
    let cfg = pmkv_server::Config { port: 0, threads: 4, cluster, ..pmkv_server::Config::default() };
    let srv = pmkv_server::Server::bind(store, "adr", cfg).unwrap();
    let (port, stop) = (srv.port(), srv.stopper());
    (port, stop, std::thread::spawn(move || srv.run(false)))
}

/// Every key of `c` with its type, contents (a hash's fields and a set's members sorted,
/// a list in order, a sorted set with its scores in order) and expiry time.
pub fn snapshot(c: &mut Client) -> Vec<String> {
    let keys = c.cmd(&["KEYS", "*"]);
    let keys: Vec<String> =
        keys.trim_matches(['[', ']']).split(',').filter(|k| !k.is_empty()).map(String::from).collect();
    let mut out = Vec::new();
    for k in keys {
        let t = c.cmd(&["TYPE", &k]);
        let v = match t.as_str() {
            "+string" => c.cmd(&["GET", &k]),
            "+hash" => {
                let all = c.cmd(&["HGETALL", &k]);
                let items: Vec<&str> = all.trim_matches(['[', ']']).split(',').collect();
                let mut pairs: Vec<String> = items.chunks(2).map(|p| p.join("=")).collect();
                pairs.sort();
                pairs.join(",")
            }
            "+list" => c.cmd(&["LRANGE", &k, "0", "-1"]),
            "+zset" => c.cmd(&["ZRANGE", &k, "0", "-1", "WITHSCORES"]),
            "+set" => {
                let all = c.cmd(&["SMEMBERS", &k]);
                let mut items: Vec<&str> = all.trim_matches(['[', ']']).split(',').collect();
                items.sort();
                items.join(",")
            }
            _ => String::new(),
        };
        out.push(format!("{k} {t} {v} {}", c.cmd(&["PEXPIRETIME", &k])));
    }
    out.sort();
    out
}
