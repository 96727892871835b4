//! A `pmkv serve` replica of a real `redis-server` 7.0, SIGKILLed at random moments during
//! full syncs of a large dataset (durable replication state). After every
//! restart, with the primary paused (SIGSTOP) so that nothing moves while we look:
//! the replica remembers it is one (ROLE), and it serves either the whole dataset or
//! nothing — a partial copy answers MASTERDOWN to reads and refuses REPLICAOF NO ONE.
//! Resumed, the primary's sync completes and the replica converges; at the end it
//! follows the primary's stream again. One partial copy is dropped with FLUSHALL and
//! promoted, the documented way out when a sync cannot finish.

mod common;
use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server process, SIGKILLed when dropped (a failed assertion unwinds through it).
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // A paused primary must not outlive the test paused.
        let _ = Command::new("kill").args(["-CONT", &self.0.id().to_string()]).stderr(Stdio::null()).status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn signal(c: &Child, sig: &str) {
    assert!(Command::new("kill").args([sig, &c.id().to_string()]).status().unwrap().success());
}

/// A RESP connection that answers each command as one line of text (arrays flattened).
struct Conn {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Conn {
    fn new(port: u16) -> Conn {
        let w = TcpStream::connect(("127.0.0.1", port)).unwrap();
        w.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        Conn { r: BufReader::new(w.try_clone().unwrap()), w }
    }

    fn send(&mut self, args: &[&str]) {
        let mut b = format!("*{}\r\n", args.len());
        for a in args {
            b.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        self.w.write_all(b.as_bytes()).unwrap();
    }

    fn reply(&mut self) -> String {
        let mut line = String::new();
        self.r.read_line(&mut line).unwrap();
        let line = line.trim_end().to_string();
        match line.as_bytes().first() {
            Some(b'*') => {
                let n: i64 = line[1..].parse().unwrap();
                let items: Vec<String> = (0..n.max(0)).map(|_| self.reply()).collect();
                format!("[{}]", items.join(","))
            }
            Some(b'$') if line != "$-1" => {
                let mut b = vec![0u8; line[1..].parse::<usize>().unwrap() + 2];
                self.r.read_exact(&mut b).unwrap();
                String::from_utf8_lossy(&b[..b.len() - 2]).into_owned()
            }
            _ => line,
        }
    }

    fn cmd(&mut self, args: &[&str]) -> String {
        self.send(args);
        self.reply()
    }
}

/// Keys the primary holds: strings, a few with a TTL, and hashes.
const STRINGS: usize = 200_000;
const HASHES: usize = 200;
const MASTERDOWN: &str = "-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// A `redis-server` working in `dir` (never saving), and its port.
fn redis(dir: &std::path::Path) -> (KillOnDrop, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
        // The sync at once, not after Redis's 5 s wait for more replicas.
        .args(["--repl-diskless-sync-delay", "0"])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server (Debian package redis-server) must be installed: it is the test's primary");
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (KillOnDrop(child), port)
}

/// Fill the primary, pipelined.
fn populate(r: &mut Conn) {
    let value = "v".repeat(40);
    for chunk in (0..STRINGS).collect::<Vec<_>>().chunks(5000) {
        for &i in chunk {
            let k = format!("key:{i}");
            if i % 50 == 0 {
                r.send(&["SET", &k, &format!("{value}{i}"), "EX", "100000"]);
            } else {
                r.send(&["SET", &k, &format!("{value}{i}")]);
            }
        }
        for _ in chunk {
            assert_eq!(r.reply(), "+OK");
        }
    }
    for h in 0..HASHES {
        for f in 0..20 {
            r.send(&["HSET", &format!("hash:{h}"), &format!("f{f}"), &format!("{h}.{f}")]);
        }
        for _ in 0..20 {
            assert_eq!(r.reply(), ":1");
        }
    }
}

/// Wait until the replica holds `want` keys and spot-checks agree with the primary.
fn converge(p: &mut Conn, r: &mut Conn, want: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let got = p.cmd(&["DBSIZE"]);
        if got == want && p.cmd(&["ROLE"]).contains(",connected,") {
            break;
        }
        assert!(Instant::now() < deadline, "{what}: never converged: DBSIZE {got}, want {want}");
        std::thread::sleep(Duration::from_millis(50));
    }
    for i in (0..STRINGS).step_by(9973) {
        let k = format!("key:{i}");
        assert_eq!(p.cmd(&["GET", &k]), r.cmd(&["GET", &k]), "{what}: {k}");
        let ttl = p.cmd(&["PEXPIRETIME", &k]);
        assert_eq!(ttl, r.cmd(&["PEXPIRETIME", &k]), "{what}: {k}'s expiry time");
    }
    for h in (0..HASHES).step_by(37) {
        let k = format!("hash:{h}");
        // Field order is each server's own: compare field=value pairs sorted.
        let pairs = |c: &mut Conn| {
            let all = c.cmd(&["HGETALL", &k]);
            let items: Vec<&str> = all.trim_matches(['[', ']']).split(',').collect();
            let mut v: Vec<String> = items.chunks(2).map(|p| p.join("=")).collect();
            v.sort();
            v
        };
        assert_eq!(pairs(p), pairs(r), "{what}: {k}");
    }
}

/// Poll until the replica's load has begun (DBSIZE answers MASTERDOWN); when it was seen.
fn wait_for_load(p: &mut Conn) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(120);
    while p.cmd(&["DBSIZE"]) != MASTERDOWN {
        assert!(Instant::now() < deadline, "the load never began");
        std::thread::sleep(Duration::from_millis(2));
    }
    Instant::now()
}

#[test]
fn a_sigkilled_replica_never_serves_a_partial_copy() {
    let rdir = pool_dir();
    let (primary, rport) = redis(rdir.path());
    let mut r = Conn::new(rport);
    populate(&mut r);
    let full = r.cmd(&["DBSIZE"]);
    assert_eq!(full, format!(":{}", STRINGS + HASHES));
    let dir = pool_dir();
    let pool = dir.path().join("replica.pool");
    let serve = || {
        let (c, port) = spawn_serve(&pool, &["--engine", "hart"], Stdio::null());
        (KillOnDrop(c), port)
    };
    // The first sync, timed, then killed after it: the replica must come back attached.
    let (mut child, port) = serve();
    let mut p = Conn::new(port);
    let t0 = Instant::now();
    assert_eq!(p.cmd(&["REPLICAOF", "127.0.0.1", &rport.to_string()]), "+OK");
    // The load is when a client's DBSIZE answers MASTERDOWN (the keyspace is partial).
    let load_start = wait_for_load(&mut p);
    converge(&mut p, &mut r, &full, "first sync");
    let (sync_time, load_time) = (t0.elapsed(), load_start.elapsed());
    eprintln!("replica_kill: a full sync of {full} keys took {sync_time:?}, its load {load_time:?}");
    let mut rng = XorShift::new(std::process::id() as u64 ^ 0x5eed);
    let (mut partial_seen, mut whole_seen, mut flushed) = (0, 0, false);
    // What a restart may find besides the whole dataset: the data from before the sync
    // that was killed (after the FLUSHALL and promotion: the one key written then).
    let mut before = full.clone();
    const KILLS: usize = 6;
    for round in 0..=KILLS {
        if round > 0 {
            // A random moment in the full sync the restart began (when the primary
            // resumed): in odd rounds from the handshake to past the last batch; in even
            // ones within the load (flush and batches), once it is seen to begin.
            let mut span = |d: Duration| Duration::from_micros(rng.next_u64() % (d.as_micros() as u64 + 1));
            if round % 2 == 0 {
                wait_for_load(&mut p);
                let at = span(load_time);
                std::thread::sleep(at);
                eprintln!("replica_kill: round {round}: SIGKILL {at:?} into the load");
            } else {
                let at = span(sync_time * 6 / 5);
                std::thread::sleep(at);
                eprintln!("replica_kill: round {round}: SIGKILL {at:?} into the sync");
            }
        }
        signal(&child.0, "-KILL");
        child.0.wait().unwrap();
        // Nothing moves while we look at the restarted replica.
        signal(&primary.0, "-STOP");
        let (c, port) = serve();
        child = c;
        p = Conn::new(port);
        let role = p.cmd(&["ROLE"]);
        assert!(
            role.starts_with(&format!("[slave,127.0.0.1,:{rport},")),
            "round {round}: forgot it replicates: {role}"
        );
        let size = p.cmd(&["DBSIZE"]);
        if size == MASTERDOWN {
            partial_seen += 1;
            assert_eq!(p.cmd(&["GET", "key:1"]), MASTERDOWN, "round {round}");
            assert_eq!(p.cmd(&["HGETALL", "hash:1"]), MASTERDOWN, "round {round}");
            assert_eq!(p.cmd(&["MULTI"]), MASTERDOWN, "round {round}");
            let info = p.cmd(&["INFO", "replication"]);
            assert!(info.contains("master_sync_in_progress:1\r\n"), "round {round}: {info}");
            let no_one = p.cmd(&["REPLICAOF", "NO", "ONE"]);
            assert!(no_one.starts_with("-ERR this replica holds a partial copy"), "round {round}: {no_one}");
            assert!(no_one.contains("FLUSHALL"), "{no_one}");
            assert_eq!(p.cmd(&["SET", "x", "1"]), MASTERDOWN, "round {round}");
            if !flushed {
                // The way out when the primary is gone for good: drop the partial copy,
                // then promote. Then follow the primary again.
                flushed = true;
                assert_eq!(p.cmd(&["FLUSHALL"]), "+OK");
                assert_eq!(p.cmd(&["DBSIZE"]), ":0");
                assert_eq!(p.cmd(&["REPLICAOF", "NO", "ONE"]), "+OK");
                assert_eq!(p.cmd(&["SET", "x", "1"]), "+OK");
                assert_eq!(p.cmd(&["ROLE"]), "[master,:0,[]]");
                assert_eq!(p.cmd(&["REPLICAOF", "127.0.0.1", &rport.to_string()]), "+OK");
                before = ":1".into();
            }
        } else {
            whole_seen += 1;
            assert!(size == full || size == before, "round {round}: a partial copy served: DBSIZE {size}");
            if size == full {
                assert_eq!(p.cmd(&["GET", "key:1"]), format!("{}1", "v".repeat(40)), "round {round}");
                before = full.clone();
            } else {
                assert_eq!(p.cmd(&["GET", "x"]), "1", "round {round}");
            }
        }
        signal(&primary.0, "-CONT");
    }
    converge(&mut p, &mut r, &full, "after the last kill");
    // The stream flows after the re-attach.
    assert_eq!(r.cmd(&["SET", "after", "kills"]), "+OK");
    assert_eq!(r.cmd(&["HSET", "hash:1", "new", "field"]), ":1");
    let want = format!(":{}", STRINGS + HASHES + 1);
    converge(&mut p, &mut r, &want, "the stream after the kills");
    assert_eq!(p.cmd(&["GET", "after"]), "kills");
    eprintln!("replica_kill: {KILLS} kills: {partial_seen} restarts found a partial copy, {whole_seen} a whole one");
    assert!(partial_seen > 0, "no kill landed during a load: the test did not test it");
    drop(p);
    drop(child);
    drop(primary);
}
