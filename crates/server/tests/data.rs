//! Redis's data model over the server: expiry, hashes, transactions (MULTI/EXEC/WATCH),
//! Lua scripts and the reserved prefix, each checked reply by reply against what Redis
//! answers; expiry times and hashes across a restart; and EXEC isolation under
//! concurrent clients.

mod common;

use common::Client;
use pmkv::{Options, Store};
use pmkv_server::{Config, Server};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

struct Running {
    port: u16,
    stop: Box<dyn Fn()>,
    h: Option<JoinHandle<pmkv::Result<()>>>,
}

impl Running {
    fn client(&self) -> Client {
        Client::new(self.port)
    }
    fn stop(mut self) {
        (self.stop)();
        self.h.take().unwrap().join().unwrap().unwrap();
    }
}

fn serve(path: &Path, engine: &str) -> Running {
    let store = Store::open(path, engine, &Options::default().initial_size(16 << 20)).unwrap();
    let srv = Server::bind(store, "adr", Config { port: 0, threads: 2, ..Config::default() }).unwrap();
    let (port, stop) = (srv.port(), srv.stopper());
    let h = std::thread::spawn(move || srv.run(false));
    Running { port, stop: Box::new(stop), h: Some(h) }
}

fn all_engines() -> Vec<&'static str> {
    // Mangosteen needs its allocator as the program's global one: the pmkv binary has
    // it (crates/cli/tests drive the server there); this test binary does not.
    vec!["hart", "nbtree", "volatile"]
}

#[test]
fn expiry_as_redis_keeps_it() {
    let dir = pmkv_testutil::pool_dir();
    let srv = serve(&dir.path().join("e.pool"), "hart");
    let mut c = srv.client();
    assert_eq!(c.cmd(&["SET", "k", "v", "EX", "100"]), "+OK");
    assert_eq!(c.cmd(&["TTL", "k"]), ":100");
    let pttl: i64 = c.cmd(&["PTTL", "k"])[1..].parse().unwrap();
    assert!((99_000..=100_000).contains(&pttl), "{pttl}");
    assert_eq!(c.cmd(&["SET", "k", "w", "KEEPTTL"]), "+OK");
    assert_eq!(c.cmd(&["TTL", "k"]), ":100");
    assert_eq!(c.cmd(&["SET", "k", "x"]), "+OK");
    assert_eq!(c.cmd(&["TTL", "k"]), ":-1", "a plain SET clears the expiry time");
    assert_eq!(c.cmd(&["TTL", "nope"]), ":-2");
    assert_eq!(c.cmd(&["EXPIRE", "k", "50", "XX"]), ":0");
    assert_eq!(c.cmd(&["EXPIRE", "k", "50", "NX"]), ":1");
    assert_eq!(c.cmd(&["EXPIRE", "k", "40", "GT"]), ":0");
    assert_eq!(c.cmd(&["EXPIRE", "k", "60", "GT"]), ":1");
    assert_eq!(c.cmd(&["EXPIRE", "k", "70", "LT"]), ":0");
    assert_eq!(c.cmd(&["PERSIST", "k"]), ":1");
    assert_eq!(c.cmd(&["PERSIST", "k"]), ":0");
    assert_eq!(c.cmd(&["SETEX", "s", "30", "v"]), "+OK");
    assert_eq!(c.cmd(&["TTL", "s"]), ":30");
    assert_eq!(c.cmd(&["GETEX", "s", "PERSIST"]), "v");
    assert_eq!(c.cmd(&["TTL", "s"]), ":-1");
    assert_eq!(c.cmd(&["GETEX", "s", "EX", "20"]), "v");
    assert_eq!(c.cmd(&["TTL", "s"]), ":20");
    assert!(c.cmd(&["SET", "x", "v", "EX", "0"]).starts_with("-ERR invalid expire time in 'set'"));
    assert!(c.cmd(&["SET", "x", "v", "EX", "1", "PX", "1"]).starts_with("-ERR syntax error"));
    assert!(c.cmd(&["SETEX", "x", "-1", "v"]).starts_with("-ERR invalid expire time"));
    assert_eq!(c.cmd(&["EXISTS", "x"]), ":0", "a refused SET applies nothing");
    // A time in the past deletes the key; EXPIRETIME answers the absolute time.
    assert_eq!(c.cmd(&["EXPIREAT", "s", "1"]), ":1");
    assert_eq!(c.cmd(&["EXISTS", "s"]), ":0");
    assert_eq!(c.cmd(&["PEXPIREAT", "k", "4102444800000"]), ":1");
    assert_eq!(c.cmd(&["EXPIRETIME", "k"]), ":4102444800");
    assert_eq!(c.cmd(&["PEXPIRETIME", "k"]), ":4102444800000");
    // Lazy expiry: gone for every command once due, and from KEYS, SCAN, DBSIZE.
    assert_eq!(c.cmd(&["SET", "short", "v", "PX", "100"]), "+OK");
    assert_eq!(c.cmd(&["HSET", "hshort", "f", "v"]), ":1");
    assert_eq!(c.cmd(&["PEXPIRE", "hshort", "100"]), ":1");
    assert_eq!(c.cmd(&["DBSIZE"]), ":3");
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(c.cmd(&["KEYS", "*"]), "[k]");
    assert_eq!(c.cmd(&["SCAN", "0"]), "[0,[k]]");
    assert_eq!(c.cmd(&["GET", "short"]), "(nil)");
    assert_eq!(c.cmd(&["HGET", "hshort", "f"]), "(nil)");
    assert_eq!(c.cmd(&["DBSIZE"]), ":1");
    // Active expiry: a key no one reads is deleted too (DBSIZE counts records).
    assert_eq!(c.cmd(&["SET", "unread", "v", "PX", "50"]), "+OK");
    assert_eq!(c.cmd(&["DBSIZE"]), ":2");
    let t = std::time::Instant::now();
    while c.cmd(&["DBSIZE"]) != ":1" {
        assert!(t.elapsed() < Duration::from_secs(5), "the sweep never deleted an expired key");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(c.cmd(&["INFO"]).contains("db0:keys=1,expires=1"));
    srv.stop();
}

#[test]
fn hashes_as_redis_keeps_them() {
    for engine in all_engines() {
        let dir = pmkv_testutil::pool_dir();
        let srv = serve(&dir.path().join("h.pool"), engine);
        let mut c = srv.client();
        assert_eq!(c.cmd(&["HSET", "h", "a", "1", "b", "2"]), ":2", "{engine}");
        assert_eq!(c.cmd(&["HSET", "h", "b", "3", "c", "4"]), ":1");
        assert_eq!(c.cmd(&["HGET", "h", "b"]), "3");
        assert_eq!(c.cmd(&["HGET", "h", "zz"]), "(nil)");
        assert_eq!(c.cmd(&["HMGET", "h", "a", "zz", "c"]), "[1,(nil),4]");
        assert_eq!(c.cmd(&["HLEN", "h"]), ":3");
        assert_eq!(c.cmd(&["HGETALL", "h"]), "[a,1,b,3,c,4]");
        assert_eq!(c.cmd(&["HKEYS", "h"]), "[a,b,c]");
        assert_eq!(c.cmd(&["HVALS", "h"]), "[1,3,4]");
        assert_eq!(c.cmd(&["HEXISTS", "h", "a"]), ":1");
        assert_eq!(c.cmd(&["HSTRLEN", "h", "a"]), ":1");
        assert_eq!(c.cmd(&["HSETNX", "h", "a", "9"]), ":0");
        assert_eq!(c.cmd(&["HSETNX", "h", "d", "9"]), ":1");
        assert_eq!(c.cmd(&["HINCRBY", "h", "a", "10"]), ":11");
        assert_eq!(c.cmd(&["HINCRBYFLOAT", "h", "n", "1.5"]), "1.5");
        assert!(c.cmd(&["HINCRBY", "h", "n", "1"]).starts_with("-ERR hash value is not an integer"));
        assert_eq!(c.cmd(&["HSCAN", "h", "0", "COUNT", "2"]), "[1,[a,11,b,3]]");
        assert_eq!(c.cmd(&["HSCAN", "h", "1", "COUNT", "2"]), "[2,[c,4,d,9]]");
        assert_eq!(c.cmd(&["HSCAN", "h", "2", "COUNT", "2"]), "[0,[n,1.5]]");
        assert_eq!(c.cmd(&["HSCAN", "h", "0", "MATCH", "[bc]"]), "[0,[b,3,c,4]]");
        assert_eq!(c.cmd(&["TYPE", "h"]), "+hash");
        // WRONGTYPE both ways; MGET answers nil for a hash, as Redis does.
        assert!(c.cmd(&["GET", "h"]).starts_with("-WRONGTYPE"));
        assert!(c.cmd(&["INCR", "h"]).starts_with("-WRONGTYPE"));
        assert_eq!(c.cmd(&["SET", "s", "v"]), "+OK");
        assert!(c.cmd(&["HSET", "s", "f", "v"]).starts_with("-WRONGTYPE"));
        assert!(c.cmd(&["HGET", "s", "f"]).starts_with("-WRONGTYPE"));
        assert_eq!(c.cmd(&["MGET", "h", "s"]), "[(nil),v]");
        // A hash is one key: KEYS, SCAN TYPE, EXISTS, DBSIZE count it once.
        assert_eq!(c.cmd(&["KEYS", "*"]), "[s,h]");
        assert_eq!(c.cmd(&["SCAN", "0", "TYPE", "hash"]), "[0,[h]]");
        assert_eq!(c.cmd(&["EXISTS", "h", "s"]), ":2");
        assert_eq!(c.cmd(&["DBSIZE"]), ":2");
        // The last field's HDEL deletes the hash; SET over a hash replaces it; DEL.
        assert_eq!(c.cmd(&["HSET", "one", "f", "v"]), ":1");
        assert_eq!(c.cmd(&["HDEL", "one", "f", "g"]), ":1");
        assert_eq!(c.cmd(&["EXISTS", "one"]), ":0");
        assert_eq!(c.cmd(&["SET", "h", "now-a-string"]), "+OK");
        assert_eq!(c.cmd(&["TYPE", "h"]), "+string");
        assert_eq!(c.cmd(&["HSET", "h2", "f", "v", "g", "w"]), ":2");
        assert_eq!(c.cmd(&["DEL", "h2", "s"]), ":2");
        assert_eq!(c.cmd(&["DBSIZE"]), ":1");
        assert!(c.cmd(&["HSET", "h", "f"]).starts_with("-ERR wrong number of arguments for 'hset'"));
        // Keys of similar names keep their own fields.
        assert_eq!(c.cmd(&["HSET", "a", "bc", "1"]), ":1");
        assert_eq!(c.cmd(&["HSET", "ab", "c", "2"]), ":1");
        assert_eq!(c.cmd(&["HGETALL", "a"]), "[bc,1]");
        assert_eq!(c.cmd(&["HGETALL", "ab"]), "[c,2]");
        assert_eq!(c.cmd(&["FLUSHDB"]), "+OK");
        assert_eq!(c.cmd(&["DBSIZE"]), ":0");
        assert_eq!(c.cmd(&["HLEN", "a"]), ":0");
        srv.stop();
    }
}

#[test]
fn transactions_as_redis_runs_them() {
    let dir = pmkv_testutil::pool_dir();
    let srv = serve(&dir.path().join("t.pool"), "hart");
    let mut c = srv.client();
    let mut other = srv.client();
    // Queued, then run as one unit; replies in order; reads see the transaction's writes.
    assert_eq!(c.cmd(&["MULTI"]), "+OK");
    assert_eq!(c.cmd(&["SET", "a", "1"]), "+QUEUED");
    assert_eq!(c.cmd(&["INCR", "a"]), "+QUEUED");
    assert_eq!(c.cmd(&["HSET", "h", "f", "v"]), "+QUEUED");
    assert_eq!(c.cmd(&["GET", "a"]), "+QUEUED");
    assert_eq!(other.cmd(&["GET", "a"]), "(nil)", "nothing applied before EXEC");
    assert_eq!(c.cmd(&["EXEC"]), "[+OK,:2,:1,2]");
    assert_eq!(other.cmd(&["GET", "a"]), "2");
    // A command refused while queueing fails the whole EXEC; nothing is applied.
    assert_eq!(c.cmd(&["MULTI"]), "+OK");
    assert_eq!(c.cmd(&["SET", "b", "1"]), "+QUEUED");
    assert!(c.cmd(&["NOSUCH", "b"]).starts_with("-ERR unknown command"));
    assert!(c.cmd(&["GET"]).starts_with("-ERR wrong number"));
    assert!(c.cmd(&["EXEC"]).starts_with("-EXECABORT"));
    assert_eq!(c.cmd(&["EXISTS", "b"]), ":0");
    // A runtime error is that command's reply; the others apply.
    assert_eq!(c.cmd(&["MULTI"]), "+OK");
    assert_eq!(c.cmd(&["SET", "c", "x"]), "+QUEUED");
    assert_eq!(c.cmd(&["INCR", "c"]), "+QUEUED");
    assert_eq!(c.cmd(&["SET", "d", "y"]), "+QUEUED");
    let r = c.cmd(&["EXEC"]);
    assert!(r.starts_with("[+OK,-ERR value is not an integer") && r.ends_with(",+OK]"), "{r}");
    assert_eq!(c.cmd(&["MGET", "c", "d"]), "[x,y]");
    // DISCARD; the misuse errors Redis gives.
    assert_eq!(c.cmd(&["MULTI"]), "+OK");
    assert_eq!(c.cmd(&["SET", "e", "1"]), "+QUEUED");
    assert!(c.cmd(&["MULTI"]).starts_with("-ERR MULTI calls can not be nested"));
    assert!(c.cmd(&["WATCH", "a"]).starts_with("-ERR WATCH inside MULTI"));
    assert_eq!(c.cmd(&["DISCARD"]), "+OK");
    assert_eq!(c.cmd(&["EXISTS", "e"]), ":0");
    assert!(c.cmd(&["EXEC"]).starts_with("-ERR EXEC without MULTI"));
    assert!(c.cmd(&["DISCARD"]).starts_with("-ERR DISCARD without MULTI"));
    // WATCH: another client's write to a watched key aborts EXEC with a null reply...
    assert_eq!(c.cmd(&["WATCH", "a", "h"]), "+OK");
    assert_eq!(other.cmd(&["HSET", "h", "g", "w"]), ":1");
    assert_eq!(c.cmd(&["MULTI"]), "+OK");
    assert_eq!(c.cmd(&["SET", "a", "100"]), "+QUEUED");
    assert_eq!(c.cmd(&["EXEC"]), "(nil)");
    assert_eq!(c.cmd(&["GET", "a"]), "2");
    // ... an unwatched key's write does not, and EXEC forgets the watches.
    assert_eq!(c.cmd(&["WATCH", "a"]), "+OK");
    assert_eq!(other.cmd(&["SET", "unrelated", "1"]), "+OK");
    assert_eq!(c.cmd(&["MULTI"]), "+OK");
    assert_eq!(c.cmd(&["SET", "a", "100"]), "+QUEUED");
    assert_eq!(c.cmd(&["EXEC"]), "[+OK]");
    assert_eq!(other.cmd(&["SET", "a", "5"]), "+OK");
    assert_eq!(c.cmd(&["MULTI"]), "+OK");
    assert_eq!(c.cmd(&["INCR", "a"]), "+QUEUED");
    assert_eq!(c.cmd(&["EXEC"]), "[:6]");
    // The watching client's own write counts too, as in Redis.
    assert_eq!(c.cmd(&["WATCH", "a"]), "+OK");
    assert_eq!(c.cmd(&["SET", "a", "6"]), "+OK");
    assert_eq!(c.cmd(&["MULTI"]), "+OK");
    assert_eq!(c.cmd(&["SET", "a", "0"]), "+QUEUED");
    assert_eq!(c.cmd(&["EXEC"]), "(nil)");
    // Expiry of a watched key counts as a write; UNWATCH forgets.
    assert_eq!(c.cmd(&["WATCH", "a"]), "+OK");
    assert_eq!(other.cmd(&["PEXPIRE", "a", "100000"]), ":1");
    assert_eq!(c.cmd(&["UNWATCH"]), "+OK");
    assert_eq!(c.cmd(&["MULTI"]), "+OK");
    assert_eq!(c.cmd(&["GET", "a"]), "+QUEUED");
    assert_eq!(c.cmd(&["EXEC"]), "[6]");
    // Commands that change the connection are refused inside MULTI.
    assert_eq!(c.cmd(&["MULTI"]), "+OK");
    assert!(c.cmd(&["SHUTDOWN"]).starts_with("-ERR Command not allowed inside a transaction"));
    assert!(c.cmd(&["EXEC"]).starts_with("-EXECABORT"));
    assert_eq!(other.cmd(&["PING"]), "+PONG");
    srv.stop();
}

#[test]
fn exec_is_isolated_from_concurrent_clients() {
    // Two counters moved together inside EXEC by one client while another reads both in
    // its own EXEC, and a third reads them with plain GETs: every reader sees them equal.
    let dir = pmkv_testutil::pool_dir();
    let srv = serve(&dir.path().join("i.pool"), "nbtree");
    let port = srv.port;
    let writer = std::thread::spawn(move || {
        let mut c = Client::new(port);
        for _ in 0..500 {
            assert_eq!(c.cmd(&["MULTI"]), "+OK");
            c.cmd(&["INCR", "x"]);
            c.cmd(&["HINCRBY", "h", "y", "1"]);
            let r = c.cmd(&["EXEC"]);
            assert!(r.starts_with("[:"), "{r}");
        }
    });
    let reader = std::thread::spawn(move || {
        let mut c = Client::new(port);
        let mut seen = 0;
        while seen < 300 {
            assert_eq!(c.cmd(&["MULTI"]), "+OK");
            c.cmd(&["GET", "x"]);
            c.cmd(&["HGET", "h", "y"]);
            let r = c.cmd(&["EXEC"]);
            let parts: Vec<&str> = r.trim_matches(['[', ']']).split(',').collect();
            let norm = |s: &str| if s == "(nil)" { "0".to_string() } else { s.to_string() };
            assert_eq!(norm(parts[0]), norm(parts[1]), "a reader saw an EXEC half applied: {r}");
            seen += 1;
        }
    });
    writer.join().unwrap();
    reader.join().unwrap();
    let mut c = srv.client();
    assert_eq!(c.cmd(&["GET", "x"]), "500");
    assert_eq!(c.cmd(&["HGET", "h", "y"]), "500");
    srv.stop();
}

#[test]
fn scripts_as_redis_runs_them() {
    let dir = pmkv_testutil::pool_dir();
    let srv = serve(&dir.path().join("l.pool"), "hart");
    let mut c = srv.client();
    assert_eq!(c.cmd(&["EVAL", "return 1", "0"]), ":1");
    assert_eq!(c.cmd(&["EVAL", "return {1, 'two', false, {ok='fine'}}", "0"]), "[:1,two,(nil),+fine]");
    assert_eq!(
        c.cmd(&["EVAL", "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])", "1", "k", "v"]),
        "v"
    );
    // Compare-and-delete, as lock libraries do it.
    let cad = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
    assert_eq!(c.cmd(&["EVAL", cad, "1", "k", "other"]), ":0");
    assert_eq!(c.cmd(&["EVAL", cad, "1", "k", "v"]), ":1");
    assert_eq!(c.cmd(&["EXISTS", "k"]), ":0");
    let sha = c.cmd(&["SCRIPT", "LOAD", "return ARGV[1] .. '!'"]);
    assert_eq!(sha.len(), 40);
    assert_eq!(c.cmd(&["EVALSHA", &sha, "0", "hi"]), "hi!");
    assert_eq!(c.cmd(&["SCRIPT", "EXISTS", &sha, "0000000000000000000000000000000000000000"]), "[:1,:0]");
    assert!(c.cmd(&["EVALSHA", "0000000000000000000000000000000000000000", "0"]).starts_with("-NOSCRIPT"));
    // Errors: a command's error keeps its code; pcall hands it to the script; Lua errors.
    assert_eq!(c.cmd(&["HSET", "h", "f", "v"]), ":1");
    assert!(c.cmd(&["EVAL", "return redis.call('GET', 'h')", "0"]).starts_with("-WRONGTYPE"));
    assert_eq!(c.cmd(&["EVAL", "local r = redis.pcall('GET', 'h'); return r['err'] ~= nil", "0"]), ":1");
    assert!(c.cmd(&["EVAL", "return nosuch()", "0"]).starts_with("-ERR Error running script"));
    assert!(c.cmd(&["EVAL", "return redis.call('MULTI')", "0"]).starts_with("-ERR This Redis command is not allowed"));
    assert!(c.cmd(&["EVAL", "return os.exit()", "0"]).starts_with("-ERR Error running script"), "no os library");
    assert!(c.cmd(&["EVAL", "return 1", "2", "a"]).starts_with("-ERR Number of keys"));
    // Writes before a script's error stay, as in Redis.
    assert!(c.cmd(&["EVAL", "redis.call('SET', 'before', '1'); error('boom')", "0"]).starts_with("-ERR"));
    assert_eq!(c.cmd(&["GET", "before"]), "1");
    srv.stop();
}

#[test]
fn reserved_keys_are_refused_and_hidden() {
    let dir = pmkv_testutil::pool_dir();
    let srv = serve(&dir.path().join("r.pool"), "hart");
    let mut c = srv.client();
    let reserved = "\u{ff}pmkv\u{0}mx";
    // (The test client sends the UTF-8 of U+00FF; build the raw bytes instead.)
    let raw: Vec<u8> = [&b"\xffpmkv\x00"[..], b"mx"].concat();
    let _ = reserved;
    for cmd in [&b"GET"[..], b"DEL", b"EXISTS", b"TYPE", b"HLEN", b"TTL", b"WATCH"] {
        c.send(&[cmd, &raw]);
        let r = c.reply();
        assert!(r.starts_with("-ERR keys beginning with"), "{}: {r}", String::from_utf8_lossy(cmd));
    }
    c.send(&[b"SET", &raw, b"v"]);
    assert!(c.reply().starts_with("-ERR keys beginning with"));
    assert_eq!(c.cmd(&["HSET", "h", "f", "v"]), ":1");
    assert_eq!(c.cmd(&["SET", "k", "v", "EX", "100"]), "+OK");
    assert_eq!(c.cmd(&["KEYS", "*"]), "[k,h]");
    assert_eq!(c.cmd(&["DBSIZE"]), ":2");
    assert_eq!(c.cmd(&["PMKV.RANGE", "-", "+", "10"]), "[k,v]");
    srv.stop();
}

#[test]
fn expiry_times_and_hashes_survive_a_restart() {
    for engine in ["hart", "nbtree"] {
        let dir = pmkv_testutil::pool_dir();
        let path = dir.path().join("p.pool");
        let srv = serve(&path, engine);
        let mut c = srv.client();
        assert_eq!(c.cmd(&["SET", "soon", "v", "PX", "1500"]), "+OK");
        assert_eq!(c.cmd(&["SET", "later", "v", "EX", "1000"]), "+OK");
        assert_eq!(c.cmd(&["HSET", "h", "a", "1", "b", "2"]), ":2");
        assert_eq!(c.cmd(&["EXPIRE", "h", "1000"]), ":1");
        drop(c);
        srv.stop();
        let srv = serve(&path, engine);
        let mut c = srv.client();
        let pttl: i64 = c.cmd(&["PTTL", "soon"])[1..].parse().unwrap();
        assert!(pttl > 0 && pttl <= 1500, "{engine}: {pttl}");
        assert_eq!(c.cmd(&["TTL", "later"]), ":1000");
        assert_eq!(c.cmd(&["TTL", "h"]), ":1000");
        assert_eq!(c.cmd(&["HLEN", "h"]), ":2");
        assert_eq!(c.cmd(&["DBSIZE"]), ":3");
        std::thread::sleep(Duration::from_millis(pttl as u64 + 50));
        assert_eq!(c.cmd(&["GET", "soon"]), "(nil)", "{engine}: expired after the restart");
        assert_eq!(c.cmd(&["DBSIZE"]), ":2");
        srv.stop();
    }
}
