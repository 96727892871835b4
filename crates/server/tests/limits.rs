//! The server under clients that try to crash it, stall it or make it hold memory:
//! pathological KEYS/SCAN patterns, a KEYS over a large store beside PINGs on
//! other connections, a client that never reads its replies, an unfinished request,
//! input before AUTH, an empty password, a host name to bind.
//!
//! The server runs in this test process, so its memory is this process's: the peak
//! resident set (VmHWM, reset through /proc/self/clear_refs before each attack) is
//! compared with what the attack would have made an unbounded server hold, by an order
//! of magnitude, never by a tight margin. The tests take one lock so that no other test
//! of this file allocates while one measures. Time bounds are seconds (a loaded 2-core
//! host), and the work they bound took minutes or forever before.

mod common;

use common::{request, Client, Running};
use pmkv::{Options, Store};
use pmkv_server::{resp::Limits, Config, OutputLimits, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn start(cfg: Config) -> Running {
    let threads = if cfg.threads == 0 { 1 } else { cfg.threads };
    common::start("hart", 64, Config { threads, ..cfg })
}

/// PING on a new connection, and how long the answer took.
fn ping(port: u16) -> Duration {
    let t = Instant::now();
    let mut c = Client::new(port).abbreviating(4096);
    assert_eq!(c.try_cmd(&[b"PING"]).as_deref(), Some("+PONG"));
    t.elapsed()
}

fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let l = s.lines().find(|l| l.starts_with(field)).unwrap();
    l.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Start measuring the peak resident set from now: VmHWM reset to the current VmRSS
/// where the kernel allows it (clear_refs 5), else the peak so far.
fn peak_from_now() -> u64 {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    status_kib("VmRSS:")
}

/// How far the resident set rose above `base` at its peak, in MiB.
fn peak_growth_mib(base: u64) -> u64 {
    status_kib("VmHWM:").saturating_sub(base) / 1024
}

fn info_field(c: &mut Client, field: &str) -> u64 {
    let info = c.try_cmd(&[b"INFO"]).unwrap();
    let at = info.find(&format!("{field}:")).unwrap_or_else(|| panic!("{field} in {info}"));
    info[at + field.len() + 1..].split(['\r', '\n']).next().unwrap().parse().unwrap()
}

/// The reproducers of a crash and of a stall: KEYS with 100,000 `*`, SCAN MATCH with
/// 200,000, and `a*a*…a*b` (25 characters) over 300 keys of 30–80 `a`s each answer in
/// seconds (before: a worker's stack overflowed and the process aborted; the last took
/// more than a minute), and PING on new connections is answered meanwhile.
#[test]
fn pathological_patterns_answer_at_once() {
    let _l = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let srv = start(Config::default());
    let mut c = Client::new(srv.port).abbreviating(4096);
    for i in 0..300 {
        let k = vec![b'a'; 30 + i % 51];
        c.w.write_all(&request(&[b"SET", &k, b"v"])).unwrap();
        c.w.write_all(&request(&[b"SET", format!("other{i}").as_bytes(), b"v"])).unwrap();
    }
    for _ in 0..600 {
        assert_eq!(c.try_reply().as_deref(), Some("+OK"));
    }
    let port = srv.port;
    let attacker = std::thread::spawn(move || {
        let mut c = Client::new(port).abbreviating(4096);
        let mut took = Vec::new();
        let stars = vec![b'*'; 100_000];
        let t = Instant::now();
        let keys = c.try_cmd(&[b"KEYS", &stars]).unwrap();
        took.push(t.elapsed());
        assert_eq!(keys.matches(',').count() + 1, 351, "every distinct key: {}", &keys[..100]);
        let t = Instant::now();
        let scan = c.try_cmd(&[b"SCAN", b"0", b"MATCH", &vec![b'*'; 200_000], b"COUNT", b"1000"]).unwrap();
        took.push(t.elapsed());
        assert!(scan.starts_with("[0,[") && scan.contains("other299"), "{}", &scan[..100]);
        let mut p = b"a*".repeat(12);
        p.push(b'b');
        assert_eq!(p.len(), 25);
        for _ in 0..3 {
            let t = Instant::now();
            assert_eq!(c.try_cmd(&[b"KEYS", &p]).as_deref(), Some("[]"));
            assert_eq!(c.try_cmd(&[b"SCAN", b"0", b"MATCH", &p, b"COUNT", b"1000"]).as_deref(), Some("[0,[]]"));
            took.push(t.elapsed());
        }
        // Classes and escapes, as Redis reads them.
        assert_eq!(c.try_cmd(&[b"KEYS", b"other29[0-9]"]).unwrap().matches(',').count() + 1, 10);
        assert_eq!(c.try_cmd(&[b"KEYS", b"other2[^0-8]\\9"]).as_deref(), Some("[other299]"));
        took
    });
    let mut slowest_ping = Duration::ZERO;
    while !attacker.is_finished() {
        slowest_ping = slowest_ping.max(ping(port));
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = attacker.join().unwrap();
    eprintln!("pathological patterns took {took:?}; slowest PING {slowest_ping:?}");
    for t in &took {
        assert!(*t < Duration::from_secs(2), "a pathological pattern took {t:?} ({took:?})");
    }
    assert!(slowest_ping < Duration::from_secs(2), "PING took {slowest_ping:?} during the patterns");
    assert!(ping(port) < Duration::from_secs(2));
}

/// A KEYS, a SCAN and a FLUSHDB over a large store keep the one worker thread no longer
/// than it takes to hand its other connections to another thread: PING on a new
/// connection is answered within a second while they run back to back.
#[test]
fn a_walk_over_a_large_store_does_not_stall_other_clients() {
    let _l = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let srv = start(Config::default());
    let port = srv.port;
    let mut c = Client::new(port).abbreviating(4096);
    for round in 0..10 {
        let mut b = Vec::new();
        for i in round * 5000..(round + 1) * 5000 {
            b.extend_from_slice(&request(&[b"SET", format!("key:{i:08}:{}", "x".repeat(40)).as_bytes(), b"value"]));
        }
        c.w.write_all(&b).unwrap();
        for _ in 0..5000 {
            assert_eq!(c.try_reply().as_deref(), Some("+OK"));
        }
    }
    let walker = std::thread::spawn(move || {
        let mut c = Client::new(port).abbreviating(4096);
        let t = Instant::now();
        let mut rounds = 0;
        // Each KEYS walks 50,000 keys with a pattern that backtracks on every one; each
        // round pipelines 60 of them and 10 SCANs of the whole store, which one
        // connection runs back to back (seconds in all on this host).
        let mut batch = Vec::new();
        for _ in 0..60 {
            batch.extend_from_slice(&request(&[b"KEYS", b"*:*x*x*x*x*x*x*x*x*x*x*x*x*x*y"]));
        }
        for _ in 0..10 {
            batch.extend_from_slice(&request(&[b"SCAN", b"0", b"MATCH", b"key:0004999?:*", b"COUNT", b"100000"]));
        }
        while t.elapsed() < Duration::from_secs(3) || rounds < 2 {
            c.w.write_all(&batch).unwrap();
            for _ in 0..60 {
                assert_eq!(c.try_reply().as_deref(), Some("[]"));
            }
            for _ in 0..10 {
                let scan = c.try_reply().unwrap();
                assert_eq!(scan.matches(',').count(), 10, "{}", &scan[..200.min(scan.len())]);
            }
            rounds += 1;
        }
        assert_eq!(c.try_cmd(&[b"FLUSHDB"]).as_deref(), Some("+OK"));
        assert_eq!(c.try_cmd(&[b"DBSIZE"]).as_deref(), Some(":0"));
        rounds
    });
    let mut pings = Vec::new();
    while !walker.is_finished() {
        pings.push(ping(port));
        std::thread::sleep(Duration::from_millis(10));
    }
    let rounds = walker.join().unwrap();
    let slowest = pings.iter().max().copied().unwrap_or_default();
    eprintln!("{rounds} rounds of KEYS+SCAN over 50,000 keys: {} PINGs, slowest {slowest:?}", pings.len());
    assert!(pings.len() >= 10, "only {} PINGs answered in {rounds} rounds of walks", pings.len());
    assert!(slowest < Duration::from_secs(1), "PING took {slowest:?} while KEYS ran ({} PINGs)", pings.len());
}

/// A client that sends GETs of an 8 MiB value and never reads the replies: with the
/// default limits the server holds about one reply for it (the first reply is written
/// before the next GET runs), not one per GET — before, 300 of them rose the resident set
/// by gigabytes and PING took seconds. With a 1 MiB soft limit for 1 s it is disconnected
/// (INFO counts it) and nothing it sent is held.
#[test]
fn a_client_that_never_reads_is_bounded_then_disconnected() {
    let _l = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let value = vec![b'v'; 8 << 20];
    let gets: Vec<u8> = (0..300).flat_map(|_| request(&[b"GET", b"big"])).collect();
    for soft_limited in [false, true] {
        let output = if soft_limited {
            OutputLimits { soft: 1 << 20, soft_time: Duration::from_secs(1), ..OutputLimits::default() }
        } else {
            OutputLimits::default()
        };
        let srv = start(Config { output, ..Config::default() });
        let mut c = Client::new(srv.port).abbreviating(4096);
        assert_eq!(c.try_cmd(&[b"SET", b"big", &value]).as_deref(), Some("+OK"));
        let base = peak_from_now();
        let mut sink = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        sink.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = sink.write_all(&gets); // 300 GETs in 6 KiB: the kernel takes them all
        let t = Instant::now();
        let mut slowest_ping = Duration::ZERO;
        while t.elapsed() < Duration::from_secs(4) {
            slowest_ping = slowest_ping.max(ping(srv.port));
            std::thread::sleep(Duration::from_millis(100));
        }
        let grew = peak_growth_mib(base);
        eprintln!(
            "never-reading client (soft limited: {soft_limited}): peak RSS +{grew} MiB, slowest PING {slowest_ping:?}"
        );
        assert!(grew < 160, "the resident set rose {grew} MiB for a client that never reads (300 x 8 MiB unbounded)");
        assert!(slowest_ping < Duration::from_secs(2), "PING took {slowest_ping:?}");
        let closes = info_field(&mut c, "client_output_buffer_limit_disconnections");
        if soft_limited {
            assert_eq!(closes, 1, "over the soft limit for 1 s: disconnected");
            // What the client now reads ends: the server closed it, having sent far less
            // than 300 replies.
            sink.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut got = 0usize;
            let mut chunk = vec![0u8; 1 << 20];
            while let Ok(n) = sink.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                got += n;
            }
            assert!(got < 64 << 20, "read {got} bytes after the disconnection");
        } else {
            assert_eq!(closes, 0, "under the default limits the slow client stays");
        }
    }
}

/// A reply that would pass the hard limit (KEYS and MGET over more than it) is not built:
/// the client gets an error and is disconnected, and the server answers others.
#[test]
fn a_reply_over_the_hard_limit_closes_the_client() {
    let _l = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let output = OutputLimits { hard: 256 << 10, ..OutputLimits::default() };
    let srv = start(Config { output, ..Config::default() });
    let mut c = Client::new(srv.port).abbreviating(4096);
    let v = vec![b'x'; 100 << 10];
    for k in [b"a", b"b", b"c"] {
        assert_eq!(c.try_cmd(&[b"SET", k, &v]).as_deref(), Some("+OK"));
    }
    assert_eq!(c.try_cmd(&[b"MGET", b"a", b"b"]).as_deref(), Some("[$102400,$102400]"));
    let over = c.try_cmd(&[b"MGET", b"a", b"b", b"c"]).unwrap();
    assert!(over.starts_with("-ERR reply exceeds client-output-buffer-limit"), "{over}");
    assert_eq!(c.try_reply(), None, "closed after the error");
    let mut c = Client::new(srv.port).abbreviating(4096);
    for i in 0..3000 {
        c.w.write_all(&request(&[b"SET", format!("key{i:0100}").as_bytes(), b"1"])).unwrap();
    }
    for _ in 0..3000 {
        assert_eq!(c.try_reply().as_deref(), Some("+OK"));
    }
    assert!(c.try_cmd(&[b"KEYS", b"key*"]).unwrap().starts_with("-ERR reply exceeds"));
    assert_eq!(c.try_reply(), None);
    let mut c = Client::new(srv.port).abbreviating(4096);
    assert_eq!(info_field(&mut c, "client_output_buffer_limit_disconnections"), 2);
    assert!(c.try_cmd(&[b"SCAN", b"0", b"COUNT", b"100"]).unwrap().starts_with("[1,["));
}

/// An unfinished MSET of 10 MiB bulks: the client is disconnected once its pending input
/// passes client-query-buffer-limit (64 MiB), and the resident set rises by about that,
/// not by the 600 MiB sent (before: 100 of them took 3 GiB).
#[test]
fn an_unfinished_request_is_cut_at_the_query_buffer_limit() {
    let _l = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let srv = start(Config::default());
    let bulk = vec![b'm'; 10 << 20];
    let base = peak_from_now();
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut sent = 0usize;
    let mut closed = false;
    let mut head = b"*201\r\n$4\r\nMSET\r\n".to_vec();
    for i in 0..60 {
        head.extend_from_slice(format!("$3\r\nk{i:02}\r\n$10485760\r\n").as_bytes());
        let ok = s.write_all(&head).and_then(|_| s.write_all(&bulk)).and_then(|_| s.write_all(b"\r\n"));
        head.clear();
        if ok.is_err() {
            closed = true;
            break;
        }
        sent += bulk.len();
    }
    assert!(closed, "the server took all {} MiB of an unfinished request", sent >> 20);
    assert!(sent <= 128 << 20, "{} MiB taken before the disconnection", sent >> 20);
    let grew = peak_growth_mib(base);
    eprintln!("unfinished MSET: {} MiB taken, peak RSS +{grew} MiB", sent >> 20);
    assert!(grew < 300, "the resident set rose {grew} MiB for a 64 MiB query limit");
    let mut c = Client::new(srv.port).abbreviating(4096);
    assert_eq!(info_field(&mut c, "client_query_buffer_limit_disconnections"), 1);
    assert_eq!(c.try_cmd(&[b"DBSIZE"]).as_deref(), Some(":0"), "nothing of the MSET applied");
    // A request of many tiny elements arriving byte by byte is parsed once, not once per
    // read: 100,000 elements in 1,000 writes answer in seconds.
    let mut big = request(&[b"DEL"]);
    big.splice(0..2, b"*100001".iter().copied());
    for i in 0..100_000 {
        big.extend_from_slice(format!("$6\r\n{i:06}\r\n").as_bytes());
    }
    let t = Instant::now();
    for chunk in big.chunks(big.len() / 1000 + 1) {
        c.w.write_all(chunk).unwrap();
    }
    assert_eq!(c.try_reply().as_deref(), Some(":0"));
    eprintln!("DEL of 100,000 keys in 1,000 writes: {:?}", t.elapsed());
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

/// Before AUTH, when a password is set, a connection may send a few KiB: a 10 MiB bulk,
/// an endless inline line, ten 4 KiB elements, or an eleven-element request are refused
/// at once and the connection closed; forty such connections sending 10 MiB each raise
/// the resident set by a few MiB at most (before: 590 MiB). The password still works,
/// and after AUTH the usual limits apply.
#[test]
fn before_auth_a_connection_gets_a_few_kib() {
    let _l = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let srv = start(Config { password: Some("s3cret".into()), ..Config::default() });
    let base = peak_from_now();
    let attacks: Vec<Vec<u8>> = vec![
        b"*2\r\n$4\r\nAUTH\r\n$10485760\r\n".to_vec(),
        b"AUTH ".to_vec(),
        [
            b"*10\r\n$4\r\nPING\r\n".to_vec(),
            (0..9).flat_map(|_| format!("$4000\r\n{}\r\n", "p".repeat(4000)).into_bytes()).collect(),
        ]
        .concat(),
        b"*11\r\n".to_vec(),
    ];
    let filler = vec![b'z'; 10 << 20];
    let mut refused = 0;
    for i in 0..40 {
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.write_all(&attacks[i % attacks.len()]);
        let _ = s.write_all(&filler); // fails once the server closed the connection
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let out = String::from_utf8_lossy(&out);
        if out.starts_with("-ERR Protocol error") {
            refused += 1;
        }
    }
    assert_eq!(refused, 40);
    let grew = peak_growth_mib(base);
    eprintln!("40 unauthenticated connections: peak RSS +{grew} MiB");
    assert!(grew < 48, "40 unauthenticated connections sending 10 MiB each raised the resident set {grew} MiB");
    let mut c = Client::new(srv.port).abbreviating(4096);
    assert!(c.try_cmd(&[b"GET", b"k"]).unwrap().starts_with("-NOAUTH"));
    assert_eq!(c.try_cmd(&[b"AUTH", b"s3cret"]).as_deref(), Some("+OK"));
    assert_eq!(c.try_cmd(&[b"SET", b"k", &vec![b'v'; 1 << 20]]).as_deref(), Some("+OK"));
    assert!(info_field(&mut c, "client_query_buffer_limit_disconnections") >= 10);
}

/// An empty password is no password: a non-loopback address is refused as without one,
/// and on loopback AUTH "" is not a way in (there is nothing to authenticate against).
#[test]
fn an_empty_password_is_refused_like_none() {
    let _l = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = pmkv_testutil::pool_dir();
    let store = Store::open(dir.path().join("e.pool"), "hart", &Options::default()).unwrap();
    let cfg = Config { bind: "0.0.0.0".into(), port: 0, password: Some(String::new()), ..Config::default() };
    let e = Server::bind(store, "adr", cfg).err().expect("refused");
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
    assert!(e.to_string().contains("without a password (the password given is empty)"), "{e}");
    let srv = start(Config { password: Some(String::new()), ..Config::default() });
    let mut c = Client::new(srv.port).abbreviating(4096);
    assert!(c.try_cmd(&[b"AUTH", b""]).unwrap().starts_with("-ERR AUTH <password> called without any password"));
    assert_eq!(c.try_cmd(&[b"CONFIG", b"GET", b"requirepass"]).as_deref(), Some("[requirepass,]"));
}

/// `bind` takes a host name: `localhost` serves on its loopback address(es), one port;
/// a name that does not resolve is an error that says so.
#[test]
fn bind_takes_host_names() {
    let _l = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = pmkv_testutil::pool_dir();
    let store = Store::open(dir.path().join("h.pool"), "hart", &Options::default()).unwrap();
    let srv = Server::bind(store, "adr", Config { bind: "localhost".into(), port: 0, ..Config::default() }).unwrap();
    let addrs = srv.addrs();
    assert!(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback() && a.port() == srv.port()), "{addrs:?}");
    let (port, stop) = (srv.port(), srv.stopper());
    let h = std::thread::spawn(move || srv.run(false));
    for a in &addrs {
        let mut c = Client::to(a);
        assert_eq!(c.try_cmd(&[b"PING"]).as_deref(), Some("+PONG"), "{a}");
    }
    assert!(ping(port) < Duration::from_secs(5));
    stop();
    h.join().unwrap().unwrap();
    let dir = pmkv_testutil::pool_dir();
    let store = Store::open(dir.path().join("n.pool"), "hart", &Options::default()).unwrap();
    let e = Server::bind(store, "adr", Config { bind: "no-such-host.invalid".into(), port: 0, ..Config::default() });
    assert!(e.err().expect("unresolvable").to_string().contains("cannot resolve no-such-host.invalid"));
}

/// CONFIG GET shows the limits in force under Redis's names; maxclients is enforced.
#[test]
fn config_get_shows_the_limits_and_maxclients_holds() {
    let _l = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let limits = Limits { max_bulk: 1 << 20, max_query: 2 << 20, ..Limits::default() };
    let srv = start(Config { limits, max_clients: 2, ..Config::default() });
    let mut c = Client::new(srv.port).abbreviating(4096);
    let _second = Client::new(srv.port).abbreviating(4096);
    std::thread::sleep(Duration::from_millis(200));
    let mut third = Client::new(srv.port).abbreviating(4096);
    assert_eq!(third.try_reply().as_deref(), Some("-ERR max number of clients reached"));
    assert_eq!(c.try_cmd(&[b"CONFIG", b"GET", b"proto-max-bulk-len"]).as_deref(), Some("[proto-max-bulk-len,1048576]"));
    assert_eq!(
        c.try_cmd(&[b"CONFIG", b"GET", b"client-*-limit"]).as_deref(),
        Some("[client-query-buffer-limit,2097152,client-output-buffer-limit,normal 67108864 33554432 60]")
    );
    assert_eq!(c.try_cmd(&[b"CONFIG", b"GET", b"maxclients"]).as_deref(), Some("[maxclients,2]"));
    // The server answers with the error and closes; a client still sending may see the
    // reset before the reply (the kernel drops unread input on close), so either is right,
    // but the connection must be gone.
    let over = c.try_cmd(&[b"SET", b"k", &vec![b'v'; (1 << 20) + 1]]);
    assert!(over.as_deref().is_none_or(|r| r.starts_with("-ERR Protocol error: invalid bulk length")), "{over:?}");
    assert_eq!(c.try_cmd(&[b"PING"]), None, "the connection outlived a bulk over proto-max-bulk-len");
}
