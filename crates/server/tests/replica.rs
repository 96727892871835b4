//! pmkv as a replica of a real `redis-server` 7.0: REPLICAOF, the handshake and full sync,
//! then the command stream while writes go on; contents converge (every key, its type,
//! value and expiry time), clients' writes are refused with Redis's READONLY text, ROLE
//! and INFO replication say so, and REPLICAOF NO ONE makes it writable again.

mod common;

use common::{snapshot, start, Client, RealRedis};
use pmkv_server::Config;
use pmkv_testutil::XorShift;
use std::time::{Duration, Instant};

fn write_some(r: &mut Client, rng: &mut XorShift, round: usize) {
    for i in 0..200 {
        let k = format!("k{}", rng.next_u64() % 300);
        let h = format!("h{}", rng.next_u64() % 40);
        match (i + round) % 8 {
            0 => r.cmd(&["SET", &k, &format!("v{round}-{i}")]),
            1 => r.cmd(&["SET", &k, &(rng.next_u64() % 1000).to_string(), "EX", "1000"]),
            2 => r.cmd(&["HSET", &h, &format!("f{}", rng.next_u64() % 50), &"x".repeat(i % 90)]),
            3 => r.cmd(&["DEL", &k]),
            4 => r.cmd(&["PEXPIRE", &h, "5000000"]),
            5 => r.cmd(&["INCRBY", &format!("n{}", i % 7), "3"]),
            6 if i % 4 == 0 => r.cmd(&["RPUSH", &format!("l{}", i % 5), &format!("e{round}-{i}")]),
            6 if i % 4 == 1 => r.cmd(&["SADD", &format!("s{}", i % 5), &(rng.next_u64() % 900).to_string()]),
            6 if i % 4 == 2 => {
                r.cmd(&["ZADD", &format!("z{}", i % 5), &format!("{}.5", rng.next_u64() % 90), &format!("m{i}")])
            }
            6 => r.cmd(&["HDEL", &h, &format!("f{}", rng.next_u64() % 50)]),
            _ => r.cmd(&["APPEND", &k, "+"]),
        };
    }
}

#[test]
fn pmkv_replicates_a_real_redis_and_converges() {
    let redis = RealRedis::start();
    let s = start("hart", 64, Config { threads: 2, ..Config::default() });
    let (mut r, mut p) = (Client::new(redis.port), Client::new(s.port));
    let mut rng = XorShift::new(7);
    // Before the sync: a big hash, long and integer strings, TTLs.
    write_some(&mut r, &mut rng, 0);
    for j in 0..300 {
        r.cmd(&["HSET", "big", &format!("field{j}"), &j.to_string()]);
    }
    r.cmd(&["SET", "long", &"abc".repeat(5000)]);
    r.cmd(&["SET", "gone-soon", "x", "PX", "1"]);
    // Lists, sets and sorted sets in each of Redis's encodings (small: listpack or
    // intset; big: quicklist, hashtable, skiplist), some with expiry times.
    for j in 0..400 {
        r.cmd(&["RPUSH", "biglist", &format!("element-{j}-{}", "x".repeat(j % 70))]);
        r.cmd(&["SADD", "bigset", &format!("member{j}")]);
        r.cmd(&["SADD", "bigints", &(j * 7919).to_string()]);
        r.cmd(&["ZADD", "bigzset", &format!("{}", j as f64 / 3.0 - 50.0), &format!("player{j}")]);
    }
    r.cmd(&["SADD", "bigints", "-1", "9999999999"]);
    r.cmd(&["RPUSH", "smalllist", "a", "-7", "b", "300000"]);
    r.cmd(&["SADD", "intset", "1", "2", "-3"]);
    r.cmd(&["SADD", "smallset", "x", "y"]);
    r.cmd(&["ZADD", "smallzset", "-inf", "lo", "2.5", "mid", "+inf", "hi"]);
    for k in ["biglist", "intset", "bigzset", "smallset"] {
        r.cmd(&["PEXPIRE", k, "50000000"]);
    }
    r.cmd(&["RPUSH", "list-gone-soon", "x"]);
    r.cmd(&["PEXPIRE", "list-gone-soon", "1"]);
    p.cmd(&["SET", "only-in-pmkv", "dropped by the full sync"]);
    // Other databases: the full sync's RDB carries DB 5's key (SELECTDB), and drops the
    // replica's own DB 5 key.
    for c in [&mut r, &mut p] {
        assert_eq!(c.cmd(&["SELECT", "5"]), "+OK");
    }
    r.cmd(&["SET", "in5", "synced"]);
    p.cmd(&["SET", "stale5", "dropped by the full sync"]);
    for c in [&mut r, &mut p] {
        assert_eq!(c.cmd(&["SELECT", "0"]), "+OK");
    }
    assert_eq!(p.cmd(&["ROLE"]), "[master,:0,[]]");
    assert_eq!(p.cmd(&["REPLICAOF", "127.0.0.1", &redis.port.to_string()]), "+OK");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !p.cmd(&["ROLE"]).contains(",connected,") {
        assert!(Instant::now() < deadline, "never connected: {}", p.cmd(&["ROLE"]));
        std::thread::sleep(Duration::from_millis(50));
    }
    // Writes go on at the primary while the replica follows.
    for round in 1..4 {
        write_some(&mut r, &mut rng, round);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (want, got) = (snapshot(&mut r), snapshot(&mut p));
        if want == got {
            assert!(want.len() > 150, "{} keys", want.len());
            break;
        }
        assert!(Instant::now() < deadline, "never converged: {} keys vs {}", want.len(), got.len());
        std::thread::sleep(Duration::from_millis(100));
    }
    // The stream's SELECT: a write in DB 6 lands in the replica's DB 6.
    r.cmd(&["SELECT", "6"]);
    r.cmd(&["SET", "in6", "streamed"]);
    r.cmd(&["SELECT", "0"]);
    assert_eq!(p.cmd(&["SELECT", "6"]), "+OK");
    let deadline = Instant::now() + Duration::from_secs(30);
    while p.cmd(&["GET", "in6"]) != "streamed" {
        assert!(Instant::now() < deadline, "DB 6's write never arrived");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(p.cmd(&["DBSIZE"]), ":1");
    assert_eq!(p.cmd(&["SELECT", "5"]), "+OK");
    assert_eq!(p.cmd(&["GET", "in5"]), "synced");
    assert_eq!(p.cmd(&["EXISTS", "stale5"]), ":0");
    assert_eq!(p.cmd(&["SELECT", "0"]), "+OK");
    assert_eq!(p.cmd(&["EXISTS", "in5", "in6"]), ":0");
    // Clients cannot write to a replica; reads work.
    assert_eq!(p.cmd(&["SET", "x", "y"]), "-READONLY You can't write against a read only replica.");
    assert_eq!(p.cmd(&["HSET", "big", "f", "v"]), "-READONLY You can't write against a read only replica.");
    assert_eq!(p.cmd(&["HGET", "big", "field7"]), "7");
    assert_eq!(p.cmd(&["RESTORE", "new", "0", "x"]), "-READONLY You can't write against a read only replica.");
    assert!(p.cmd(&["DUMP", "long"]).len() > 10, "DUMP is a read");
    assert_eq!(p.cmd(&["EVAL", "return 1", "0"]), "-READONLY You can't write against a read only replica.");
    assert_eq!(p.cmd(&["EVAL_RO", "return 1", "0"]), ":1");
    // Inside MULTI the refusal fails the transaction, as in Redis.
    assert_eq!(p.cmd(&["MULTI"]), "+OK");
    assert_eq!(p.cmd(&["GET", "long"]), "+QUEUED");
    assert_eq!(p.cmd(&["DEL", "long"]), "-READONLY You can't write against a read only replica.");
    assert_eq!(p.cmd(&["EXEC"]), "-EXECABORT Transaction discarded because of previous errors.");
    let info = p.cmd(&["INFO", "replication"]);
    assert!(info.contains("role:slave\r\n"), "{info}");
    assert!(info.contains(&format!("master_port:{}\r\n", redis.port)), "{info}");
    assert!(info.contains("master_link_status:up\r\n"), "{info}");
    // The offset the replica reports is the primary's, once it has applied everything.
    let primary_offset = |r: &mut Client| {
        let i = r.cmd(&["INFO", "replication"]);
        i.split("\r\n").find_map(|l| l.strip_prefix("master_repl_offset:").map(|v| v.to_string())).unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let want = primary_offset(&mut r);
        let role = p.cmd(&["ROLE"]);
        if role.ends_with(&format!(",:{want}]")) {
            break;
        }
        assert!(Instant::now() < deadline, "offset never caught up: {role} vs {want}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // WAIT at the primary counts the replica's acknowledgement (REPLCONF GETACK/ACK).
    r.cmd(&["SET", "acked", "1"]);
    assert_eq!(r.cmd(&["WAIT", "1", "5000"]), ":1");
    // NO ONE: a primary again, writable, keeping the data.
    assert_eq!(p.cmd(&["REPLICAOF", "NO", "ONE"]), "+OK");
    assert_eq!(p.cmd(&["SET", "x", "y"]), "+OK");
    assert_eq!(p.cmd(&["GET", "acked"]), "1");
    // The stream's offset goes on from where the replica was (as Redis keeps it, so
    // that replicas of the old primary may continue with this one).
    let role = p.cmd(&["ROLE"]);
    let off: u64 = role.strip_prefix("[master,:").and_then(|r| r.strip_suffix(",[]]")).unwrap().parse().unwrap();
    assert!(off > 0, "{role}");
}
