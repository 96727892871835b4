//! `pmkv serve --cluster` over TCP: which pools a node accepts, topology and SETSLOT
//! refusals and their durability, the redirects (MOVED, ASK, TRYAGAIN, CROSSSLOT,
//! CLUSTERDOWN) and ASKING's one-command reach, MIGRATE keeping keys it could not move,
//! and PMKV.RESTORE refusing records that do not make one key. The client-library view
//! (redis-py's RedisCluster) is in tests/py/test_cluster.py.

mod common;

use common::Client;
use pmkv::{Options, Store};
use pmkv_server::{Config, Server};
use std::path::Path;

fn open(path: &Path) -> Store {
    Store::open(path, "hart", &Options::default().initial_size(4 << 20)).unwrap()
}

type Running = std::thread::JoinHandle<pmkv::Result<()>>;

/// A node on `path` (created if missing): its port, a stopper, its thread.
fn node(path: &Path) -> Result<(u16, impl Fn(), Running), String> {
    let cfg = Config { port: 0, cluster: true, ..Config::default() };
    let srv = Server::bind(open(path), "adr", cfg).map_err(|e| e.to_string())?;
    let (port, stop) = (srv.port(), srv.stopper());
    Ok((port, stop, std::thread::spawn(move || srv.run(false))))
}

fn id_of(port: u16) -> String {
    Client::new(port).cmd(&["CLUSTER", "MYID"])
}

#[test]
fn a_pool_is_a_cluster_pool_or_a_plain_one() {
    let dir = pmkv_testutil::pool_dir();
    // A plain pool with records is refused by --cluster: its keys are not after a slot.
    let plain = dir.path().join("plain.pool");
    open(&plain).put(b"k", b"v").unwrap();
    let e = node(&plain).err().unwrap();
    assert!(e.contains("written without --cluster"), "{e}");
    // A cluster pool is refused by a plain server, and keeps its id across restarts.
    let p = dir.path().join("c.pool");
    let (port, stop, h) = node(&p).unwrap();
    let id = id_of(port);
    assert_eq!(id.len(), 40);
    assert_eq!(Client::new(port).cmd(&["DBSIZE"]), ":0");
    stop();
    h.join().unwrap().unwrap();
    let e = Server::bind(open(&p), "adr", Config { port: 0, ..Config::default() }).err().unwrap().to_string();
    assert!(e.contains("serve it with --cluster"), "{e}");
    let (port, stop, h) = node(&p).unwrap();
    assert_eq!(id_of(port), id);
    stop();
    h.join().unwrap().unwrap();
    // A damaged state record is refused with what is wrong.
    open(&p).put(b"\xffpmkv\x00C", b"pmkv-cluster-state 1\nmyid nope\ntopology\n").unwrap();
    let e = node(&p).err().unwrap();
    assert!(e.contains("cluster state record is damaged"), "{e}");
    // A plain server says so to cluster commands.
    let s = Server::bind(open(&dir.path().join("p2.pool")), "adr", Config { port: 0, ..Config::default() }).unwrap();
    let (port, stop) = (s.port(), s.stopper());
    let h = std::thread::spawn(move || s.run(false));
    let mut c = Client::new(port);
    assert!(c.cmd(&["CLUSTER", "SLOTS"]).contains("cluster support disabled"));
    assert!(c.cmd(&["ASKING"]).contains("cluster support disabled"));
    assert!(c.cmd(&["INFO"]).contains("cluster_enabled:0"));
    stop();
    h.join().unwrap().unwrap();
}

#[test]
fn topologies_and_setslot_are_checked_and_durable() {
    let dir = pmkv_testutil::pool_dir();
    let (pa, pb) = (dir.path().join("a.pool"), dir.path().join("b.pool"));
    let (port_a, stop_a, ha) = node(&pa).unwrap();
    let (port_b, stop_b, hb) = node(&pb).unwrap();
    let (a, b) = (id_of(port_a), id_of(port_b));
    let text = format!("{a} 127.0.0.1:{port_a} 0-8191\n{b} 127.0.0.1:{port_b} 8192-16383\n");
    let mut c = Client::new(port_a);
    for bad in [
        format!("{a} 127.0.0.1:{port_a} 0-8191\n{b} 127.0.0.1:{port_b} 8191-16383\n"),
        format!("{a} 127.0.0.1:{port_a} 0-16384\n"),
        format!("{a} 127.0.0.1:{port_a} 0-1\n{a} 127.0.0.1:1 5\n"),
        format!("{a} nowhere 0-1\n"),
        "short 127.0.0.1:1 0-1\n".to_string(),
    ] {
        assert!(c.cmd(&["PMKV.TOPOLOGY", "SET", "1", &bad]).starts_with("-ERR topology line"), "{bad}");
    }
    assert_eq!(c.cmd(&["PMKV.TOPOLOGY", "SET", "x", &text]), "-ERR the epoch must be a non-negative integer");
    assert_eq!(c.cmd(&["PMKV.TOPOLOGY", "SET", "3", &text]), "+OK");
    assert_eq!(c.cmd(&["PMKV.TOPOLOGY", "SET", "3", &text]), "+OK", "the same again is accepted");
    let other = text.replace("0-8191", "0-8190");
    assert!(c.cmd(&["PMKV.TOPOLOGY", "SET", "3", &other]).contains("stale topology"));
    assert!(c.cmd(&["PMKV.TOPOLOGY", "SET", "2", &other]).contains("stale topology: epoch 2 is older"));
    assert_eq!(Client::new(port_b).cmd(&["PMKV.TOPOLOGY", "SET", "3", &text]), "+OK");
    // SETSLOT: only the owner migrates, only a non-owner imports, only known nodes.
    assert!(c.cmd(&["CLUSTER", "SETSLOT", "9000", "MIGRATING", &b]).contains("not the owner"));
    assert!(c.cmd(&["CLUSTER", "SETSLOT", "5", "IMPORTING", &b]).contains("already the owner"));
    assert!(c.cmd(&["CLUSTER", "SETSLOT", "5", "MIGRATING", &"f".repeat(40)]).contains("don't know"));
    assert!(c.cmd(&["CLUSTER", "SETSLOT", "16384", "STABLE"]).contains("Invalid"));
    assert_eq!(c.cmd(&["CLUSTER", "SETSLOT", "5", "MIGRATING", &b]), "+OK");
    assert_eq!(c.cmd(&["CLUSTER", "SETSLOT", "9000", "IMPORTING", &b]), "+OK");
    let nodes = c.cmd(&["CLUSTER", "NODES"]);
    assert!(nodes.contains(&format!("[5->-{b}]")) && nodes.contains(&format!("[9000-<-{b}]")), "{nodes}");
    // All of it survives a restart.
    stop_a();
    ha.join().unwrap().unwrap();
    let (port_a2, stop_a, ha) = node(&pa).unwrap();
    let mut c = Client::new(port_a2);
    let got = c.cmd(&["PMKV.TOPOLOGY", "GET"]);
    assert_eq!(got, format!("[:3,{text},[:5,{b}],[:9000,{b}]]"));
    // FLUSHDB empties the node's keys, not its cluster state.
    assert_eq!(c.cmd(&["SET", "bar", "1"]), "+OK");
    assert_eq!(c.cmd(&["HSET", "{bar}h", "f", "v"]), ":1");
    assert_eq!(c.cmd(&["DBSIZE"]), ":2");
    assert_eq!(c.cmd(&["FLUSHDB"]), "+OK");
    assert_eq!(c.cmd(&["DBSIZE"]), ":0");
    assert_eq!(c.cmd(&["PMKV.TOPOLOGY", "GET"]), got);
    stop_a();
    ha.join().unwrap().unwrap();
    stop_b();
    hb.join().unwrap().unwrap();
}

/// Slot of "foo" (12182) and "bar" (5061), as Redis computes them.
const FOO: &str = "12182";

#[test]
fn redirects_follow_redis_rules() {
    let dir = pmkv_testutil::pool_dir();
    let (port_a, stop_a, ha) = node(&dir.path().join("a.pool")).unwrap();
    let (port_b, stop_b, hb) = node(&dir.path().join("b.pool")).unwrap();
    let (a, b) = (id_of(port_a), id_of(port_b));
    // a owns 0-8191 (bar), b 8192-16382 (foo); 16383 nobody.
    let text = format!("{a} 127.0.0.1:{port_a} 0-8191\n{b} 127.0.0.1:{port_b} 8192-16382\n");
    let (mut ca, mut cb) = (Client::new(port_a), Client::new(port_b));
    assert_eq!(ca.cmd(&["PMKV.TOPOLOGY", "SET", "1", &text]), "+OK");
    assert_eq!(cb.cmd(&["PMKV.TOPOLOGY", "SET", "1", &text]), "+OK");
    assert_eq!(ca.cmd(&["CLUSTER", "KEYSLOT", "foo"]), format!(":{FOO}"));
    assert_eq!(ca.cmd(&["GET", "foo"]), format!("-MOVED {FOO} 127.0.0.1:{port_b}"));
    assert_eq!(ca.cmd(&["SET", "foo", "x"]), format!("-MOVED {FOO} 127.0.0.1:{port_b}"));
    assert_eq!(ca.cmd(&["MGET", "foo", "bar"]), "-CROSSSLOT Keys in request don't hash to the same slot");
    assert_eq!(ca.cmd(&["SET", "bar", "1"]), "+OK");
    assert_eq!(cb.cmd(&["SET", "foo", "1"]), "+OK");
    assert_eq!(cb.cmd(&["SET", "{foo}2", "2"]), "+OK");
    assert_eq!(cb.cmd(&["SET", "{foo}t", "t", "EX", "1000"]), "+OK");
    let nobody = (0..).map(|i| format!("k{i}")).find(|k| ca.cmd(&["CLUSTER", "KEYSLOT", k]) == ":16383").unwrap();
    assert_eq!(ca.cmd(&["GET", &nobody]), "-CLUSTERDOWN Hash slot not served");
    assert!(ca.cmd(&["CLUSTER", "INFO"]).contains("cluster_state:fail"));
    // A transaction: a command of another slot fails the EXEC.
    assert_eq!(ca.cmd(&["MULTI"]), "+OK");
    assert_eq!(ca.cmd(&["SET", "bar", "2"]), "+QUEUED");
    assert!(ca.cmd(&["GET", "foo"]).starts_with("-MOVED"));
    assert!(ca.cmd(&["EXEC"]).starts_with("-EXECABORT"));
    assert_eq!(ca.cmd(&["GET", "bar"]), "1");
    // foo's slot moves from b to a: ASK for absent keys, TRYAGAIN for a mix.
    assert_eq!(ca.cmd(&["CLUSTER", "SETSLOT", FOO, "IMPORTING", &b]), "+OK");
    assert_eq!(cb.cmd(&["CLUSTER", "SETSLOT", FOO, "MIGRATING", &a]), "+OK");
    assert_eq!(cb.cmd(&["GET", "foo"]), "1", "a key still here is served here");
    assert_eq!(cb.cmd(&["GET", "{foo}new"]), format!("-ASK {FOO} 127.0.0.1:{port_a}"));
    assert_eq!(cb.cmd(&["MIGRATE", "127.0.0.1", &port_a.to_string(), "foo", "0", "5000"]), "+OK");
    assert_eq!(cb.cmd(&["MGET", "foo", "{foo}2"]), "-TRYAGAIN Multiple keys request during rehashing of slot");
    assert_eq!(cb.cmd(&["GET", "foo"]), format!("-ASK {FOO} 127.0.0.1:{port_a}"));
    // The target serves the slot only right after ASKING.
    assert_eq!(ca.cmd(&["GET", "foo"]), format!("-MOVED {FOO} 127.0.0.1:{port_b}"));
    assert_eq!(ca.cmd(&["ASKING"]), "+OK");
    assert_eq!(ca.cmd(&["GET", "foo"]), "1");
    assert!(ca.cmd(&["GET", "foo"]).starts_with("-MOVED"), "ASKING covers one command");
    // MIGRATE without REPLACE refuses a key the target has; nothing is lost.
    assert_eq!(cb.cmd(&["SET", "{foo}2", "again"]), "+OK");
    assert_eq!(ca.cmd(&["ASKING"]), "+OK");
    assert_eq!(ca.cmd(&["SET", "{foo}2", "there"]), "+OK");
    let r = cb.cmd(&["MIGRATE", "127.0.0.1", &port_a.to_string(), "", "0", "5000", "KEYS", "{foo}2"]);
    assert!(r.contains("BUSYKEY"), "{r}");
    assert_eq!(cb.cmd(&["GET", "{foo}2"]), "again");
    let r = cb.cmd(&["MIGRATE", "127.0.0.1", &port_a.to_string(), "", "0", "5000", "REPLACE", "KEYS", "{foo}2", "zz"]);
    assert_eq!(r, "+OK");
    assert_eq!(cb.cmd(&["MIGRATE", "127.0.0.1", &port_a.to_string(), "", "0", "5000", "KEYS", "{foo}2"]), "+NOKEY");
    // A key with an expiry time arrives with it.
    assert_eq!(cb.cmd(&["MIGRATE", "127.0.0.1", &port_a.to_string(), "{foo}t", "0", "5000"]), "+OK");
    assert_eq!(ca.cmd(&["ASKING"]), "+OK");
    let ttl: i64 = ca.cmd(&["TTL", "{foo}t"])[1..].parse().unwrap();
    assert!((990..=1000).contains(&ttl), "{ttl}");
    assert_eq!(ca.cmd(&["CLUSTER", "COUNTKEYSINSLOT", FOO]), ":3");
    assert_eq!(cb.cmd(&["CLUSTER", "COUNTKEYSINSLOT", FOO]), ":0");
    stop_a();
    ha.join().unwrap().unwrap();
    stop_b();
    hb.join().unwrap().unwrap();
}

#[test]
fn migrate_keeps_what_it_could_not_move_and_restore_checks_records() {
    let dir = pmkv_testutil::pool_dir();
    let (port, stop, h) = node(&dir.path().join("a.pool")).unwrap();
    let a = id_of(port);
    let mut c = Client::new(port);
    assert_eq!(c.cmd(&["PMKV.TOPOLOGY", "SET", "1", &format!("{a} 127.0.0.1:{port} 0-16383\n")]), "+OK");
    assert_eq!(c.cmd(&["HSET", "h", "f", "v"]), ":1");
    // Nothing listens on the target: the key stays.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let r = c.cmd(&["MIGRATE", "127.0.0.1", &dead.to_string(), "h", "0", "500"]);
    assert!(r.starts_with("-IOERR"), "{r}");
    assert_eq!(c.cmd(&["HGET", "h", "f"]), "v");
    assert!(c.cmd(&["MIGRATE", "127.0.0.1", "1", "h", "3", "500"]).contains("database 0 only"));
    assert!(c.cmd(&["MIGRATE", "127.0.0.1", "1", "h", "0", "500", "KEYS", "x"]).contains("empty string"));
    // PMKV.RESTORE: the records must make one key of one type, that key.
    let meta_hash = |fields: u64| {
        let mut m = vec![1u8, 1, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(&0u64.to_le_bytes());
        m.extend_from_slice(&fields.to_le_bytes());
        m
    };
    let field = |k: &[u8], f: &[u8]| [&b"\xffpmkv\x00h"[..], &(k.len() as u32).to_be_bytes(), k, f].concat();
    let meta = |k: &[u8]| [&b"\xffpmkv\x00m"[..], k].concat();
    let mut restore = |args: &[&[u8]]| {
        let mut all: Vec<&[u8]> = vec![b"PMKV.RESTORE"];
        all.extend_from_slice(args);
        c.send(&all);
        c.reply()
    };
    assert!(restore(&[b"x", b"REPLACE", b"y", b"v"]).contains("another key"));
    assert!(restore(&[b"x", b"REPLACE", &field(b"x", b"f"), b"v"]).contains("one key of one type"));
    assert!(restore(&[b"x", b"REPLACE", &field(b"x", b"f"), b"v", &meta(b"x"), &meta_hash(2)])
        .contains("one key of one type"));
    assert!(restore(&[b"x", b"REPLACE", &meta(b"x"), b"junk"]).contains("malformed"));
    assert!(restore(&[b"x", b"MAYBE", b"x", b"v"]).contains("REPLACE|NOREPLACE"));
    assert_eq!(restore(&[b"x", b"NOREPLACE", &field(b"x", b"f"), b"1", &meta(b"x"), &meta_hash(1)]), "+OK");
    assert!(restore(&[b"x", b"NOREPLACE", b"x", b"v"]).contains("BUSYKEY"));
    assert_eq!(restore(&[b"x", b"REPLACE", b"x", b"v"]), "+OK");
    assert_eq!(c.cmd(&["TYPE", "x"]), "+string");
    assert_eq!(c.cmd(&["DBSIZE"]), ":2");
    // COMMAND as cluster clients read it.
    assert_eq!(c.cmd(&["COMMAND", "INFO", "mset"]), "[[mset,:-3,[],:1,:-1,:2,[]]]");
    assert_eq!(c.cmd(&["COMMAND", "GETKEYS", "EVAL", "return 1", "2", "a", "b", "c"]), "[a,b]");
    assert_eq!(c.cmd(&["COMMAND", "GETKEYS", "PMKV.RANGE", "[a", "+"]), "[a]");
    stop();
    h.join().unwrap().unwrap();
}

#[test]
fn scripts_stay_in_their_slot() {
    let dir = pmkv_testutil::pool_dir();
    let (port_a, stop_a, ha) = node(&dir.path().join("a.pool")).unwrap();
    let (port_b, stop_b, hb) = node(&dir.path().join("b.pool")).unwrap();
    let (a, b) = (id_of(port_a), id_of(port_b));
    let text = format!("{a} 127.0.0.1:{port_a} 0-8191\n{b} 127.0.0.1:{port_b} 8192-16383\n");
    let mut c = Client::new(port_a);
    assert_eq!(c.cmd(&["PMKV.TOPOLOGY", "SET", "1", &text]), "+OK");
    assert_eq!(Client::new(port_b).cmd(&["PMKV.TOPOLOGY", "SET", "1", &text]), "+OK");
    let set = "return redis.call('SET', KEYS[1], ARGV[1])";
    assert_eq!(c.cmd(&["EVAL", set, "1", "bar", "1"]), "+OK");
    assert_eq!(c.cmd(&["EVAL", set, "1", "foo", "1"]), format!("-MOVED {FOO} 127.0.0.1:{port_b}"));
    let r = c.cmd(&["EVAL", "return redis.call('GET', 'foo')", "1", "bar"]);
    assert!(r.contains("another slot"), "{r}");
    let r = c.cmd(&["EVAL", "return redis.call('GET', 'foo')", "0"]);
    assert!(r.contains("non local key"), "{r}");
    assert_eq!(c.cmd(&["EVAL", "return redis.call('GET', 'bar')", "0"]), "1");
    assert!(c.cmd(&["EVAL", "return redis.call('CLUSTER', 'MYID')", "0"]).contains("not allowed from script"));
    stop_a();
    ha.join().unwrap().unwrap();
    stop_b();
    hb.join().unwrap().unwrap();
}

/// Every command of the table: one with keys is redirected by a node that does not own
/// them, before its arguments are even parsed; one without is never redirected.
#[test]
fn every_keyed_command_is_routed() {
    let dir = pmkv_testutil::pool_dir();
    let (port_a, stop_a, ha) = node(&dir.path().join("a.pool")).unwrap();
    let (port_b, stop_b, hb) = node(&dir.path().join("b.pool")).unwrap();
    let (a, b) = (id_of(port_a), id_of(port_b));
    let text = format!("{a} 127.0.0.1:{port_a} 0-8191\n{b} 127.0.0.1:{port_b} 8192-16383\n");
    assert_eq!(Client::new(port_a).cmd(&["PMKV.TOPOLOGY", "SET", "1", &text]), "+OK");
    assert_eq!(Client::new(port_b).cmd(&["PMKV.TOPOLOGY", "SET", "1", &text]), "+OK");
    let mut routed = 0;
    for cmd in pmkv_server::table::commands() {
        if matches!(cmd.name, "SHUTDOWN" | "QUIT" | "FLUSHDB" | "FLUSHALL" | "MIGRATE" | "MULTI" | "RESET") {
            continue;
        }
        // The fewest arguments the arity allows, every one "foo" (slot 12182, b's), but
        // EVAL's key count.
        let n = cmd.arity.unsigned_abs() as usize;
        let mut args: Vec<&str> = vec![cmd.name];
        args.extend(std::iter::repeat_n("foo", n - 1));
        if cmd.name.starts_with("EVAL") {
            args = vec![cmd.name, "return 1", "1", "foo"];
        }
        if cmd.keys.numkeys > 0 {
            // The key count at its position (BLMPOP's timeout before it, or a STORE
            // form's destination, a key too), one key, a side.
            args = vec![cmd.name];
            let k = cmd.keys;
            let dst = |i: usize| k.first < k.numkeys && (k.first..=k.last as usize).contains(&i);
            args.extend((1..k.numkeys).map(|i| if dst(i) { "foo" } else { "0" }));
            args.extend(["1", "foo", "LEFT"]);
        }
        // A key position past the fewest arguments (MEMORY's USAGE key) holds no key.
        let keyed = (cmd.keys.first > 0 && args.len() > cmd.keys.first)
            || cmd.name.starts_with("EVAL")
            || cmd.name == "PMKV.RANGE";
        let mut c = Client::new(port_a);
        let r = c.cmd(&args);
        if keyed {
            assert_eq!(r, format!("-MOVED {FOO} 127.0.0.1:{port_b}"), "{args:?}");
            routed += 1;
        } else {
            assert!(!r.starts_with("-MOVED") && !r.starts_with("-ASK"), "{args:?}: {r}");
        }
        let r = Client::new(port_b).cmd(&args);
        assert!(!r.starts_with("-MOVED") && !r.starts_with("-CROSSSLOT"), "{args:?} on its owner: {r}");
    }
    assert!(routed > 40, "{routed} keyed commands");
    stop_a();
    ha.join().unwrap().unwrap();
    stop_b();
    hb.join().unwrap().unwrap();
}
