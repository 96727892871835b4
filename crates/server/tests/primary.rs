//! pmkv as a replication primary: a real `redis-server` 7.0 and another pmkv follow it
//! (REPLICAOF), through a full sync with writes going on and the command stream after;
//! contents converge in every database (each key, type, value and PEXPIRETIME), with
//! the commands whose effect depends on time or chance (relative TTLs, INCRBYFLOAT,
//! scripts, expiry) sent in their deterministic forms. A broken link resumes from the
//! backlog (`+CONTINUE`), one that fell out of it syncs in full; WAIT counts
//! acknowledgements; a failed command sends nothing.

mod common;

use common::{snapshot, start, Client, RealRedis, Running};
use pmkv_server::Config;
use pmkv_testutil::XorShift;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const DBS: [&str; 3] = ["0", "3", "9"];

/// A function library the primary has before the sync: the full sync's RDB carries it,
/// and FCALL of its writing function reaches replicas as the SET it ran.
const LIB: &str = "#!lua name=replib\nredis.register_function('setit', function(keys, args) \
                   return redis.call('SET', keys[1], args[1], 'PX', 900000) end)";

/// Check that `replica` has [`LIB`] (after a full sync).
fn has_lib(replica: &mut Client) {
    let list = replica.cmd(&["FUNCTION", "LIST"]);
    assert!(list.contains("replib") && list.contains("setit"), "{list}");
}

/// Every key of databases [`DBS`], each line prefixed with its database.
fn contents(c: &mut Client) -> Vec<String> {
    let mut out = Vec::new();
    for db in DBS {
        assert_eq!(c.cmd(&["SELECT", db]), "+OK");
        out.extend(snapshot(c).into_iter().map(|l| format!("{db}: {l}")));
    }
    assert_eq!(c.cmd(&["SELECT", "0"]), "+OK");
    out
}

/// Wait until `replica` holds what `primary` holds.
fn converge(primary: &mut Client, replica: &mut Client) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (want, got) = (contents(primary), contents(replica));
        if want == got {
            return want.len();
        }
        if Instant::now() > deadline {
            let missing: Vec<_> = want.iter().filter(|l| !got.contains(l)).take(5).collect();
            let extra: Vec<_> = got.iter().filter(|l| !want.contains(l)).take(5).collect();
            panic!("never converged: {} keys vs {}; missing {missing:?}, extra {extra:?}", want.len(), got.len());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn info_field(c: &mut Client, field: &str) -> String {
    let info = c.cmd(&["INFO", "replication"]);
    info.split(['\r', '\n'])
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(String::from))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
}

/// A mix of writes over several databases: strings, hashes, relative and absolute
/// TTLs, INCRBYFLOAT/HINCRBYFLOAT, scripts that write, MULTI/EXEC, and keys that expire
/// within milliseconds (deleted by the sweep or on access).
fn write_mix(p: &mut Client, rng: &mut XorShift, round: usize) {
    for i in 0..150 {
        let db = DBS[(i + round) % DBS.len()];
        p.cmd(&["SELECT", db]);
        let k = format!("k{}", rng.next_u64() % 120);
        let h = format!("h{}", rng.next_u64() % 20);
        match (i * 7 + round) % 13 {
            0 => p.cmd(&["SET", &k, &format!("v{round}-{i}")]),
            1 => p.cmd(&["SET", &k, &(rng.next_u64() % 1000).to_string(), "EX", "1000"]),
            2 => p.cmd(&["HSET", &h, &format!("f{}", rng.next_u64() % 30), &"x".repeat(i % 50)]),
            3 => p.cmd(&["DEL", &k]),
            4 => p.cmd(&["PEXPIRE", &h, "5000000"]),
            5 => p.cmd(&["INCRBYFLOAT", &format!("f{}", i % 5), "1.1"]),
            6 => p.cmd(&["HINCRBYFLOAT", &h, "float", "0.25"]),
            7 => p.cmd(&["EXPIRE", &k, "700"]),
            8 => p.cmd(&["SETEX", &format!("s{i}"), "900", "x"]),
            9 => p.cmd(&["SET", &format!("short{round}-{i}"), "x", "PX", "30"]),
            10 => p.cmd(&[
                "EVAL",
                "redis.call('SET', KEYS[1], ARGV[1]); redis.call('EXPIRE', KEYS[1], 600); \
                 return redis.call('INCRBYFLOAT', KEYS[2], '0.5')",
                "2",
                &k,
                &format!("e{}", i % 3),
                &format!("eval{round}"),
            ]),
            11 => {
                assert_eq!(p.cmd(&["MULTI"]), "+OK");
                p.cmd(&["SET", &k, "in-multi"]);
                p.cmd(&["PEXPIRE", &k, "800000"]);
                p.cmd(&["HSET", &h, "m", &i.to_string()]);
                p.cmd(&["EXEC"])
            }
            _ => p.cmd(&["GETEX", &k, "PX", "600000"]),
        };
    }
    p.cmd(&["SELECT", "0"]);
}

/// Make `replica` (a Redis or a pmkv) follow the server on `port`, and wait for its link.
fn follow(replica: &mut Client, port: u16) {
    assert_eq!(replica.cmd(&["REPLICAOF", "127.0.0.1", &port.to_string()]), "+OK");
    wait_link_up(replica);
}

/// Wait until `replica`'s INFO says its link to the primary is up.
fn wait_link_up(redis: &mut Client) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(redis, "master_link_status") != "up" {
        assert!(Instant::now() < deadline, "the replica never synced: {}", redis.cmd(&["INFO", "replication"]));
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_real_redis_replicates_pmkv_through_a_full_sync_and_the_stream() {
    let s = start("hart", 64, Config { threads: 2, ..Config::default() });
    let redis = RealRedis::start();
    let (mut p, mut r) = (Client::new(s.port), Client::new(redis.port));
    let mut rng = XorShift::new(63);
    write_mix(&mut p, &mut rng, 0);
    for j in 0..200 {
        p.cmd(&["HSET", "big", &format!("field{j}"), &j.to_string()]);
    }
    p.cmd(&["SET", "long", &"abc".repeat(5000)]);
    assert_eq!(p.cmd(&["FUNCTION", "LOAD", LIB]), "replib");
    // Writes go on, from another client, while the full sync runs.
    let busy = Arc::new(AtomicBool::new(true));
    let writer = {
        let (busy, port) = (busy.clone(), s.port);
        std::thread::spawn(move || {
            let mut w = Client::new(port);
            let mut rng = XorShift::new(64);
            let mut round = 100;
            while busy.load(Ordering::Relaxed) {
                write_mix(&mut w, &mut rng, round);
                round += 1;
            }
        })
    };
    follow(&mut r, s.port);
    std::thread::sleep(Duration::from_millis(300));
    busy.store(false, Ordering::Relaxed);
    writer.join().unwrap();
    // And after it, the stream alone: FLUSHDB of one database among the writes.
    write_mix(&mut p, &mut rng, 1);
    p.cmd(&["SELECT", "3"]);
    assert_eq!(p.cmd(&["FLUSHDB"]), "+OK");
    p.cmd(&["SET", "after-flush", "1"]);
    p.cmd(&["SELECT", "0"]);
    write_mix(&mut p, &mut rng, 2);
    assert_eq!(p.cmd(&["FCALL", "setit", "1", "by-fcall", "v"]), "+OK");
    let n = converge(&mut p, &mut r);
    assert!(n > 200, "{n} keys");
    has_lib(&mut r);
    // Keys that expire: gone on both (the sweep's DELs reached the replica, which keeps
    // a logically expired key until its primary deletes it).
    p.cmd(&["SET", "ttl-short", "x", "PX", "50"]);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(r.cmd(&["DBSIZE"]), p.cmd(&["DBSIZE"]));
    assert_eq!(r.cmd(&["EXISTS", "ttl-short"]), ":0");
    converge(&mut p, &mut r);
    // ROLE and INFO on the primary describe the replica.
    let role = p.cmd(&["ROLE"]);
    assert!(role.starts_with("[master,:") && role.contains("127.0.0.1"), "{role}");
    assert_eq!(info_field(&mut p, "connected_slaves"), "1");
    let slave0 = info_field(&mut p, "slave0");
    assert!(slave0.starts_with("ip=127.0.0.1,port=") && slave0.contains("state=online"), "{slave0}");
    assert_eq!(info_field(&mut p, "master_replid"), info_field(&mut r, "master_replid"));
    assert_eq!(info_field(&mut p, "repl_backlog_active"), "1");
}

#[test]
fn a_failed_command_is_not_streamed() {
    let s = start("hart", 16, Config::default());
    let redis = RealRedis::start();
    let (mut p, mut r) = (Client::new(s.port), Client::new(redis.port));
    p.cmd(&["HSET", "h", "f", "1"]);
    p.cmd(&["SET", "s", "x"]);
    follow(&mut r, s.port);
    p.cmd(&["SET", "ok", "1"]);
    let before = info_field(&mut p, "master_repl_offset");
    assert!(p.cmd(&["INCR", "h"]).starts_with("-WRONGTYPE"));
    assert!(p.cmd(&["HSET", "s", "f", "v"]).starts_with("-WRONGTYPE"));
    assert!(p.cmd(&["INCRBYFLOAT", "s", "1"]).starts_with("-ERR"));
    assert!(p.cmd(&["EXPIRE", "s", "notanumber"]).starts_with("-ERR"));
    // A read and a write that changed nothing send nothing either.
    assert_eq!(p.cmd(&["GET", "s"]), "x");
    assert_eq!(p.cmd(&["DEL", "missing"]), ":0");
    assert_eq!(info_field(&mut p, "master_repl_offset"), before);
    // A transaction whose command fails sends the rest only.
    assert_eq!(p.cmd(&["MULTI"]), "+OK");
    p.cmd(&["INCR", "h"]);
    p.cmd(&["SET", "in-exec", "1"]);
    assert!(p.cmd(&["EXEC"]).starts_with("[-WRONGTYPE"));
    converge(&mut p, &mut r);
    assert_eq!(r.cmd(&["GET", "in-exec"]), "1");
    assert_eq!(r.cmd(&["HGET", "h", "f"]), "1");
}

#[test]
fn wait_counts_the_replicas_that_acknowledged() {
    let s = start("hart", 16, Config::default());
    let mut p = Client::new(s.port);
    // No replica: WAIT 1 100 answers 0 after its timeout.
    let t = Instant::now();
    assert_eq!(p.cmd(&["WAIT", "1", "100"]), ":0");
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(95) && took < Duration::from_secs(2), "{took:?}");
    let redis = RealRedis::start();
    let mut r = Client::new(redis.port);
    follow(&mut r, s.port);
    for i in 0..50 {
        p.cmd(&["SET", &format!("w{i}"), "v"]);
    }
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), ":1");
    assert_eq!(r.cmd(&["GET", "w49"]), "v");
    // More replicas than there are: the timeout, and the one that acknowledged.
    assert_eq!(p.cmd(&["WAIT", "2", "200"]), ":1");
    // The replica's acknowledged offset is in ROLE.
    let off = info_field(&mut p, "master_repl_offset");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !p.cmd(&["ROLE"]).contains(&format!(",{off}]")) {
        assert!(Instant::now() < deadline, "{}", p.cmd(&["ROLE"]));
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_redis_replica_whose_link_broke_continues_from_the_backlog() {
    let s = start("hart", 16, Config::default());
    let redis = RealRedis::start();
    let (mut p, mut r) = (Client::new(s.port), Client::new(redis.port));
    let mut rng = XorShift::new(5);
    write_mix(&mut p, &mut rng, 0);
    follow(&mut r, s.port);
    write_mix(&mut p, &mut rng, 1);
    converge(&mut p, &mut r);
    assert_eq!(info_field(&mut p, "sync_full"), "1");
    // The replica drops its link; it asks to continue, and gets the backlog's tail.
    assert_eq!(r.cmd(&["CLIENT", "KILL", "TYPE", "master"]), ":1");
    write_mix(&mut p, &mut rng, 2);
    wait_link_up(&mut r);
    converge(&mut p, &mut r);
    assert_eq!(info_field(&mut p, "sync_partial_ok"), "1");
    assert_eq!(info_field(&mut p, "sync_full"), "1");
}

/// A TCP relay between a replica and its primary whose links the test can cut, and
/// refuse while it is paused.
struct Relay {
    port: u16,
    cut: Arc<Mutex<Vec<TcpStream>>>,
    paused: Arc<AtomicBool>,
}

impl Relay {
    fn to(upstream: u16) -> Relay {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let cut: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let paused = Arc::new(AtomicBool::new(false));
        let (c2, p2) = (cut.clone(), paused.clone());
        std::thread::spawn(move || {
            for down in l.incoming() {
                let Ok(down) = down else { return };
                if p2.load(Ordering::SeqCst) {
                    continue; // dropped: the replica retries
                }
                let Ok(up) = TcpStream::connect(("127.0.0.1", upstream)) else { continue };
                c2.lock().unwrap().extend([down.try_clone().unwrap(), up.try_clone().unwrap()]);
                for (mut from, mut to) in [(down.try_clone().unwrap(), up.try_clone().unwrap()), (up, down)] {
                    std::thread::spawn(move || {
                        let mut b = [0u8; 16 << 10];
                        while let Ok(n) = from.read(&mut b) {
                            if n == 0 || to.write_all(&b[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Relay { port, cut, paused }
    }

    fn cut(&self) {
        for s in self.cut.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

#[test]
fn pmkv_replicates_pmkv_continues_after_a_cut_and_resyncs_past_the_backlog() {
    let s: Running = start("hart", 64, Config::default());
    let t: Running = start("hart", 64, Config::default());
    let relay = Relay::to(s.port);
    let (mut p, mut r) = (Client::new(s.port), Client::new(t.port));
    let mut rng = XorShift::new(11);
    write_mix(&mut p, &mut rng, 0);
    assert_eq!(p.cmd(&["FUNCTION", "LOAD", LIB]), "replib");
    follow(&mut r, relay.port);
    write_mix(&mut p, &mut rng, 1);
    assert_eq!(p.cmd(&["FCALL", "setit", "1", "by-fcall", "v"]), "+OK");
    converge(&mut p, &mut r);
    has_lib(&mut r);
    assert_eq!(info_field(&mut p, "sync_full"), "1");
    // The link breaks; writes go on; the replica comes back and continues.
    relay.cut();
    write_mix(&mut p, &mut rng, 2);
    converge(&mut p, &mut r);
    assert_eq!(info_field(&mut p, "sync_partial_ok"), "1");
    assert_eq!(info_field(&mut p, "sync_full"), "1");
    // Broken again, and kept away while more than the backlog is written: a full sync.
    assert_eq!(p.cmd(&["CONFIG", "SET", "repl-backlog-size", "16384"]), "+OK");
    relay.paused.store(true, Ordering::SeqCst);
    relay.cut();
    for i in 0..200 {
        p.cmd(&["SET", &format!("fill{i}"), &"y".repeat(200)]);
    }
    relay.paused.store(false, Ordering::SeqCst);
    converge(&mut p, &mut r);
    assert_eq!(info_field(&mut p, "sync_full"), "2");
    // Writes still refused on the replica; the primary's CONFIG shows the backlog size.
    assert!(r.cmd(&["SET", "x", "y"]).starts_with("-READONLY"));
    assert_eq!(p.cmd(&["CONFIG", "GET", "repl-backlog-size"]), "[repl-backlog-size,16384]");
}

#[test]
fn lists_sets_and_sorted_sets_go_through_the_full_sync() {
    let s = start("hart", 16, Config::default());
    let redis = RealRedis::start();
    let (mut p, mut r) = (Client::new(s.port), Client::new(redis.port));
    p.cmd(&["RPUSH", "l", "a", "b", "c"]);
    p.cmd(&["PEXPIRE", "l", "900000"]);
    p.cmd(&["SADD", "s", "x", "y", "z"]);
    p.cmd(&["ZADD", "z", "1", "a", "2.5", "b"]);
    p.cmd(&["SELECT", "9"]);
    p.cmd(&["RPUSH", "l9", "only"]);
    p.cmd(&["SELECT", "0"]);
    // Every key type dump::value reads is in the RDB: none is skipped.
    follow(&mut r, s.port);
    assert_eq!(converge(&mut p, &mut r), 4);
    assert_eq!(r.cmd(&["LRANGE", "l", "0", "-1"]), "[a,b,c]");
}

#[test]
fn a_replica_refuses_to_serve_replicas_and_promotion_keeps_the_old_id_as_second() {
    let s = start("hart", 16, Config::default());
    let t = start("hart", 16, Config::default());
    let (mut p, mut r) = (Client::new(s.port), Client::new(t.port));
    p.cmd(&["SET", "a", "1"]);
    follow(&mut r, s.port);
    let mut raw = Client::new(t.port);
    let reply = raw.cmd(&["PSYNC", "?", "-1"]);
    assert!(reply.starts_with("-ERR pmkv does not serve replicas while it is itself a replica"), "{reply}");
    let primary_id = info_field(&mut p, "master_replid");
    assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), "+OK");
    assert_eq!(info_field(&mut r, "master_replid2"), primary_id);
    assert_ne!(info_field(&mut r, "master_replid"), primary_id);
    assert_eq!(r.cmd(&["GET", "a"]), "1");
}

/// `c`'s members of set `k`, sorted.
fn members(c: &mut Client, k: &str) -> Vec<String> {
    let all = c.cmd(&["SMEMBERS", k]);
    let mut m: Vec<String> =
        all.trim_matches(['[', ']']).split(',').filter(|x| !x.is_empty()).map(String::from).collect();
    m.sort();
    m
}

#[test]
fn random_and_blocking_pops_reach_a_redis_replica_as_what_they_took() {
    let s = start("hart", 16, Config { threads: 2, ..Config::default() });
    let redis = RealRedis::start();
    let (mut p, mut r) = (Client::new(s.port), Client::new(redis.port));
    follow(&mut r, s.port);
    // SPOP takes members at random: the replica must lose the same ones.
    let many: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
    let mut sadd = vec!["SADD", "set"];
    sadd.extend(many.iter().map(String::as_str));
    p.cmd(&sadd);
    p.cmd(&["SPOP", "set"]);
    p.cmd(&["SPOP", "set", "7"]);
    p.cmd(&["SADD", "tiny", "only"]);
    p.cmd(&["SPOP", "tiny"]);
    // A blocking pop served at once, and one served later to a waiter.
    p.cmd(&["RPUSH", "list", "a", "b", "c"]);
    assert_eq!(p.cmd(&["BLPOP", "list", "0"]), "[list,a]");
    let waiter = {
        let port = s.port;
        std::thread::spawn(move || Client::new(port).cmd(&["BLMOVE", "empty", "dst", "LEFT", "RIGHT", "0"]))
    };
    std::thread::sleep(Duration::from_millis(200));
    p.cmd(&["RPUSH", "empty", "x", "y"]);
    assert_eq!(waiter.join().unwrap(), "x");
    p.cmd(&["SET", "last", "1"]);
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), ":1");
    assert_eq!(members(&mut r, "set"), members(&mut p, "set"));
    assert_eq!(members(&mut p, "set").len(), 32);
    assert_eq!(r.cmd(&["EXISTS", "tiny"]), ":0");
    for k in ["list", "empty", "dst"] {
        assert_eq!(r.cmd(&["LRANGE", k, "0", "-1"]), p.cmd(&["LRANGE", k, "0", "-1"]), "{k}");
    }
    assert_eq!(r.cmd(&["LRANGE", "dst", "0", "-1"]), "[x]");
}
