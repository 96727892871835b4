//! Redis's 16 databases over the wire, where there is no control to compare with:
//! keys and SWAPDB survive a restart in their database, a pool written before databases
//! existed opens with its keys in DB 0, a push wakes only its own database's waiters, a
//! WATCH sees writes of its own database only (and every SWAPDB of it), the expiry
//! sweep runs in every database, and a cluster node has DB 0 only.

mod common;

use common::{serve, Client};
use pmkv::{Options, Store};
use pmkv_server::Config;
use std::time::Duration;

/// A server over a fresh pool, stopped when dropped (declared first in a test, so that
/// its clients are dropped before it).
fn running(cluster: bool) -> common::Running {
    common::start("hart", 16, Config { threads: 4, cluster, ..Config::default() })
}

#[test]
fn keys_and_swapdb_survive_a_restart_in_their_database() {
    let dir = pmkv_testutil::pool_dir();
    // A pool as `pmkv put` (or pmkv before databases) wrote it: its keys are DB 0's.
    {
        let s = Store::open(dir.path().join("s.pool"), "hart", &Options::default().initial_size(16 << 20)).unwrap();
        s.put(b"old", b"kept").unwrap();
        s.close().unwrap();
    }
    let (port, stop, h) = serve(dir.path(), false);
    let mut c = Client::new(port);
    assert_eq!(c.cmd(&["GET", "old"]), "kept");
    assert_eq!(c.cmd(&["SELECT", "1"]), "+OK");
    assert_eq!(c.cmd(&["GET", "old"]), "(nil)");
    assert_eq!(c.cmd(&["SET", "one", "1"]), "+OK");
    assert_eq!(c.cmd(&["HSET", "h1", "f", "v"]), ":1");
    assert_eq!(c.cmd(&["SET", "t1", "x", "EX", "1000"]), "+OK");
    assert_eq!(c.cmd(&["SELECT", "2"]), "+OK");
    assert_eq!(c.cmd(&["RPUSH", "l2", "a", "b"]), ":2");
    assert_eq!(c.cmd(&["SWAPDB", "2", "3"]), "+OK");
    assert_eq!(c.cmd(&["DBSIZE"]), ":0");
    assert_eq!(c.cmd(&["SELECT", "0"]), "+OK");
    assert_eq!(c.cmd(&["DBSIZE"]), ":1");
    assert_eq!(c.cmd(&["KEYS", "*"]), "[old]");
    drop(c);
    stop();
    h.join().unwrap().unwrap();
    // Every other front end still sees DB 0's string as a plain record.
    {
        let s = Store::open(dir.path().join("s.pool"), "hart", &Options::default()).unwrap();
        assert_eq!(s.get(b"old").unwrap().as_deref(), Some(&b"kept"[..]));
        assert_eq!(s.get(b"one").unwrap(), None);
        s.close().unwrap();
    }
    let (port, stop, h) = serve(dir.path(), false);
    let mut c = Client::new(port);
    assert_eq!(c.cmd(&["DBSIZE"]), ":1");
    assert_eq!(c.cmd(&["SELECT", "1"]), "+OK");
    assert_eq!(c.cmd(&["DBSIZE"]), ":3");
    assert_eq!(c.cmd(&["GET", "one"]), "1");
    assert_eq!(c.cmd(&["HGET", "h1", "f"]), "v");
    let ttl = c.cmd(&["TTL", "t1"]);
    assert!(ttl.starts_with(":99") || ttl == ":1000", "{ttl}");
    assert_eq!(c.cmd(&["SELECT", "3"]), "+OK");
    assert_eq!(c.cmd(&["LRANGE", "l2", "0", "-1"]), "[a,b]");
    assert_eq!(c.cmd(&["SELECT", "2"]), "+OK");
    assert_eq!(c.cmd(&["EXISTS", "l2"]), ":0");
    let info = c.cmd(&["INFO", "keyspace"]);
    assert!(info.contains("db0:keys=1,expires=0"), "{info}");
    assert!(info.contains("db1:keys=3,expires=1"), "{info}");
    assert!(info.contains("db3:keys=1,expires=0"), "{info}");
    assert!(!info.contains("db2:"), "{info}");
    // Swapping back to the identity removes the map; the data follows.
    assert_eq!(c.cmd(&["SWAPDB", "3", "2"]), "+OK");
    assert_eq!(c.cmd(&["LRANGE", "l2", "0", "-1"]), "[a,b]");
    assert_eq!(c.cmd(&["FLUSHALL"]), "+OK");
    assert_eq!(c.cmd(&["DBSIZE"]), ":0");
    drop(c);
    stop();
    h.join().unwrap().unwrap();
    let s = Store::open(dir.path().join("s.pool"), "hart", &Options::default()).unwrap();
    assert_eq!(s.len().unwrap(), 0, "FLUSHALL leaves no record of any database");
    s.close().unwrap();
}

#[test]
fn a_push_wakes_only_its_own_databases_waiters() {
    let srv = running(false);
    let port = srv.port;
    let mut waiter = Client::new(port);
    assert_eq!(waiter.cmd(&["SELECT", "3"]), "+OK");
    waiter.send(&[b"BLPOP", b"q", b"5"]);
    std::thread::sleep(Duration::from_millis(200));
    let mut c = Client::new(port);
    // A push to q in DB 0 is not DB 3's q.
    assert_eq!(c.cmd(&["RPUSH", "q", "db0"]), ":1");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(c.cmd(&["LLEN", "q"]), ":1", "the DB 3 waiter took DB 0's element");
    assert_eq!(c.cmd(&["SELECT", "3"]), "+OK");
    assert_eq!(c.cmd(&["RPUSH", "q", "db3"]), ":1");
    assert_eq!(waiter.reply(), "[q,db3]");
}

#[test]
fn watch_sees_its_own_database_and_swapdb() {
    let srv = running(false);
    let port = srv.port;
    let (mut w, mut o) = (Client::new(port), Client::new(port));
    assert_eq!(w.cmd(&["SELECT", "4"]), "+OK");
    assert_eq!(w.cmd(&["WATCH", "k"]), "+OK");
    // The same name in another database is another key.
    assert_eq!(o.cmd(&["SET", "k", "0"]), "+OK");
    assert_eq!(w.cmd(&["MULTI"]), "+OK");
    assert_eq!(w.cmd(&["SET", "k", "4"]), "+QUEUED");
    assert_eq!(w.cmd(&["EXEC"]), "[+OK]");
    assert_eq!(w.cmd(&["WATCH", "k"]), "+OK");
    assert_eq!(o.cmd(&["SELECT", "4"]), "+OK");
    assert_eq!(o.cmd(&["SET", "k", "again"]), "+OK");
    assert_eq!(w.cmd(&["MULTI"]), "+OK");
    assert_eq!(w.cmd(&["SET", "k", "4"]), "+QUEUED");
    assert_eq!(w.cmd(&["EXEC"]), "(nil)");
    assert_eq!(w.cmd(&["WATCH", "k"]), "+OK");
    assert_eq!(o.cmd(&["SWAPDB", "4", "5"]), "+OK");
    assert_eq!(w.cmd(&["MULTI"]), "+OK");
    assert_eq!(w.cmd(&["GET", "k"]), "+QUEUED");
    assert_eq!(w.cmd(&["EXEC"]), "(nil)");
}

#[test]
fn the_expiry_sweep_runs_in_every_database() {
    let srv = running(false);
    let port = srv.port;
    let mut c = Client::new(port);
    assert_eq!(c.cmd(&["SELECT", "11"]), "+OK");
    for i in 0..20 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v", "PX", "50"]), "+OK");
    }
    assert_eq!(c.cmd(&["SET", "stays", "v"]), "+OK");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    // DBSIZE counts a key until it is deleted: the sweep, not a read, must delete them.
    while c.cmd(&["DBSIZE"]) != ":1" {
        assert!(std::time::Instant::now() < deadline, "the sweep did not expire DB 11's keys");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_cluster_node_has_database_0_only() {
    let srv = running(true);
    let port = srv.port;
    let mut c = Client::new(port);
    assert_eq!(c.cmd(&["SELECT", "0"]), "+OK");
    assert_eq!(c.cmd(&["SELECT", "1"]), "-ERR SELECT is not allowed in cluster mode");
    assert_eq!(c.cmd(&["SWAPDB", "0", "1"]), "-ERR SWAPDB is not allowed in cluster mode");
    // The node serves every slot, so MOVE is routed here, then refused.
    let id = c.cmd(&["CLUSTER", "MYID"]);
    let id = id.trim_start_matches('+');
    assert_eq!(c.cmd(&["PMKV.TOPOLOGY", "SET", "1", &format!("{id} 127.0.0.1:{port} 0-16383\n")]), "+OK");
    assert_eq!(c.cmd(&["SET", "k", "v"]), "+OK");
    assert_eq!(c.cmd(&["MOVE", "k", "1"]), "-ERR MOVE is not allowed in cluster mode");
    assert_eq!(c.cmd(&["COPY", "{k}a", "{k}b", "DB", "1"]), "-ERR DB index is out of range");
}

#[test]
fn walks_stay_in_their_database() {
    let srv = running(false);
    let port = srv.port;
    let mut c = Client::new(port);
    // Keys on both sides of the other databases' records in DB 0's engine order.
    for k in [&b"a"[..], b"\x7fz", b"\xffzz"] {
        assert_eq!(c.try_cmd(&[b"SET", k, b"0"]).unwrap(), "+OK");
    }
    assert_eq!(c.cmd(&["SELECT", "5"]), "+OK");
    for i in 0..40 {
        assert_eq!(c.cmd(&["SET", &format!("five{i}"), "5"]), "+OK");
    }
    for _ in 0..20 {
        assert!(c.cmd(&["RANDOMKEY"]).starts_with("five"));
    }
    let scan = |c: &mut Client| {
        let mut seen = Vec::new();
        let mut cursor = "0".to_string();
        loop {
            let r = c.cmd(&["SCAN", &cursor, "COUNT", "3"]);
            let inner = r.trim_start_matches('[').trim_end_matches(']');
            let (cur, keys) = inner.split_once(',').unwrap();
            seen.extend(
                keys.trim_start_matches('[')
                    .split(',')
                    .filter(|k| !k.is_empty())
                    .map(|k| k.trim_end_matches(']').to_string()),
            );
            cursor = cur.to_string();
            if cursor == "0" {
                break;
            }
        }
        seen.sort();
        seen
    };
    assert_eq!(scan(&mut c).len(), 40);
    assert_eq!(c.cmd(&["SELECT", "0"]), "+OK");
    let keys = scan(&mut c);
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert!(keys.contains(&"a".to_string()) && keys.contains(&"\u{7f}z".to_string()), "{keys:?}");
    for _ in 0..20 {
        assert!(!c.cmd(&["RANDOMKEY"]).starts_with("five"));
    }
    assert_eq!(c.cmd(&["DBSIZE"]), ":3");
}
