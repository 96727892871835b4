//! String bit operations, LCS, SETRANGE, RENAME/COPY, HRANDFIELD and friends over the
//! wire, each command sent to `pmkv serve` and to a real `redis-server` (the control) in
//! the same order: every reply must be equal, errors word for word. Random picks
//! (RANDOMKEY, HRANDFIELD) are checked by what they must satisfy instead.

mod common;

use common::{start, Client, RealRedis, Running};
use pmkv_server::Config;
use pmkv_testutil::XorShift;

/// `pmkv serve` on `engine` and a control `redis-server`, a client on each.
struct Pair {
    s: Running,
    _redis: RealRedis,
    p: Client,
    r: Client,
}

fn pair(engine: &str) -> Pair {
    let s = start(engine, 16, Config { threads: 2, ..Config::default() });
    let redis = RealRedis::start();
    let (p, r) = (Client::new(s.port), Client::new(redis.port));
    Pair { s, _redis: redis, p, r }
}

/// Send `args` to both; the replies must agree. Returns pmkv's.
fn both(p: &mut Client, r: &mut Client, args: &[&[u8]]) -> String {
    let (a, b) = (p.try_cmd(args).expect("pmkv reply"), r.try_cmd(args).expect("redis reply"));
    let shown: Vec<String> = args.iter().map(|x| String::from_utf8_lossy(x).into_owned()).collect();
    assert_eq!(a, b, "pmkv and redis-server differ on {shown:?}");
    a
}

fn run(p: &mut Client, r: &mut Client, script: &[&[&str]]) {
    for cmd in script {
        let a: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
        both(p, r, &a);
    }
}

#[test]
fn string_bits_ranges_and_lcs_answer_as_redis() {
    let Pair { s: _s, _redis, mut p, mut r } = pair("hart");
    run(
        &mut p,
        &mut r,
        &[
            &["SET", "s", "Hello World"],
            &["SETRANGE", "s", "6", "Redis"],
            &["GET", "s"],
            &["SETRANGE", "new", "5", "x"],
            &["GET", "new"],
            &["SETRANGE", "missing", "3", ""],
            &["EXISTS", "missing"],
            &["SETRANGE", "s", "-1", "x"],
            &["SETRANGE", "s", "abc", "x"],
            &["SETRANGE", "s", "536870911", "xy"],
            &["SUBSTR", "s", "0", "4"],
            &["SETBIT", "b", "7", "1"],
            &["SETBIT", "b", "7", "0"],
            &["SETBIT", "b", "100", "1"],
            &["GETBIT", "b", "100"],
            &["GETBIT", "b", "99999"],
            &["GETBIT", "nob", "3"],
            &["SETBIT", "b", "-1", "1"],
            &["SETBIT", "b", "4294967296", "1"],
            &["SETBIT", "b", "1", "2"],
            &["SETBIT", "b", "1", "x"],
            &["STRLEN", "b"],
            &["SET", "foobar", "foobar"],
            &["BITCOUNT", "foobar"],
            &["BITCOUNT", "foobar", "0", "0"],
            &["BITCOUNT", "foobar", "1", "1"],
            &["BITCOUNT", "foobar", "1", "1", "BYTE"],
            &["BITCOUNT", "foobar", "5", "30", "BIT"],
            &["BITCOUNT", "foobar", "-3", "-1"],
            &["BITCOUNT", "foobar", "-1", "-3"],
            &["BITCOUNT", "foobar", "0", "-100"],
            &["BITCOUNT", "foobar", "1"],
            &["BITCOUNT", "foobar", "1", "2", "NOPE"],
            &["BITCOUNT", "nokey", "1"],
            &["BITCOUNT", "nokey"],
            &["SET", "mykey", "\u{ff}\u{f0}\u{00}"],
            &["SET", "ones", "\u{7f}"],
            &["BITPOS", "foobar", "1"],
            &["BITPOS", "foobar", "0"],
            &["BITPOS", "foobar", "1", "2"],
            &["BITPOS", "foobar", "1", "2", "-1", "BYTE"],
            &["BITPOS", "foobar", "1", "7", "15", "BIT"],
            &["BITPOS", "foobar", "0", "1", "1"],
            &["BITPOS", "foobar", "2"],
            &["BITPOS", "foobar", "x"],
            &["BITPOS", "nokey", "0"],
            &["BITPOS", "nokey", "1"],
            &["SET", "full", "\u{7f}"],
            &["BITPOS", "foobar", "1", "100"],
            &["SET", "k1", "foobar"],
            &["SET", "k2", "abcdef"],
            &["BITOP", "AND", "dest", "k1", "k2"],
            &["GET", "dest"],
            &["BITOP", "OR", "dest", "k1", "k2", "nokey"],
            &["GET", "dest"],
            &["BITOP", "XOR", "dest", "k1", "k2"],
            &["BITOP", "NOT", "dest", "k1"],
            &["GET", "dest"],
            &["BITOP", "NOT", "dest", "k1", "k2"],
            &["BITOP", "NAND", "dest", "k1"],
            &["BITOP", "AND", "dest", "nokey", "nokey2"],
            &["EXISTS", "dest"],
            &["SET", "key1", "ohmytext"],
            &["SET", "key2", "mynewtext"],
            &["LCS", "key1", "key2"],
            &["LCS", "key1", "key2", "LEN"],
            &["LCS", "key1", "key2", "IDX"],
            &["LCS", "key1", "key2", "IDX", "MINMATCHLEN", "4"],
            &["LCS", "key1", "key2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"],
            &["LCS", "key1", "key2", "LEN", "IDX"],
            &["LCS", "key1", "key2", "NOPE"],
            &["LCS", "key1", "nokey"],
            &["HSET", "h", "f", "v"],
            &["LCS", "key1", "h"],
            &["GETBIT", "h", "1"],
            &["SETBIT", "h", "1", "1"],
            &["SETRANGE", "h", "0", "x"],
            &["BITCOUNT", "h"],
            &["BITPOS", "h", "1"],
            &["BITOP", "AND", "dest", "k1", "h"],
        ],
    );
    // Random strings and ranges: BITCOUNT and BITPOS over every form.
    let mut rng = XorShift::new(0x5eed);
    for round in 0..200 {
        let v: Vec<u8> = (0..rng.below(9)).map(|_| rng.next_u64() as u8).collect();
        let k = format!("r{}", round % 7);
        both(&mut p, &mut r, &[b"SET", k.as_bytes(), &v]);
        let n = |rng: &mut XorShift| (rng.below(40) as i64 - 20).to_string();
        for _ in 0..8 {
            let (a, b, bit) = (n(&mut rng), n(&mut rng), rng.below(2).to_string());
            let unit = ["BIT", "BYTE"][rng.below(2) as usize];
            both(&mut p, &mut r, &[b"BITCOUNT", k.as_bytes(), a.as_bytes(), b.as_bytes(), unit.as_bytes()]);
            both(&mut p, &mut r, &[b"BITPOS", k.as_bytes(), bit.as_bytes(), a.as_bytes()]);
            both(
                &mut p,
                &mut r,
                &[b"BITPOS", k.as_bytes(), bit.as_bytes(), a.as_bytes(), b.as_bytes(), unit.as_bytes()],
            );
            both(&mut p, &mut r, &[b"GETRANGE", k.as_bytes(), a.as_bytes(), b.as_bytes()]);
        }
        let other = format!("r{}", (round + 3) % 7);
        both(&mut p, &mut r, &[b"LCS", k.as_bytes(), other.as_bytes(), b"IDX", b"WITHMATCHLEN"]);
        let op = ["AND", "OR", "XOR"][rng.below(3) as usize];
        both(&mut p, &mut r, &[b"BITOP", op.as_bytes(), b"d", k.as_bytes(), other.as_bytes()]);
        both(&mut p, &mut r, &[b"GET", b"d"]);
        let (off, val) = (rng.below(12).to_string(), "xyz".repeat(rng.below(3) as usize));
        both(&mut p, &mut r, &[b"SETRANGE", k.as_bytes(), off.as_bytes(), val.as_bytes()]);
        both(&mut p, &mut r, &[b"GET", k.as_bytes()]);
    }
}

#[test]
fn rename_copy_touch_and_error_texts_answer_as_redis() {
    let Pair { s, _redis, mut p, mut r } = pair("nbtree");
    run(
        &mut p,
        &mut r,
        &[
            &["SET", "a", "1", "EX", "1000"],
            &["HSET", "h", "f1", "v1", "f2", "v2"],
            &["RENAME", "a", "b"],
            &["EXISTS", "a", "b"],
            &["TTL", "b"],
            &["RENAME", "nokey", "x"],
            &["RENAME", "b", "b"],
            &["RENAMENX", "b", "b"],
            &["SET", "c", "3"],
            &["RENAMENX", "b", "c"],
            &["RENAME", "b", "c"],
            &["GET", "c"],
            &["TTL", "c"],
            &["RENAME", "h", "h2"],
            &["HGETALL", "h2"],
            &["HLEN", "h"],
            &["COPY", "h2", "h3"],
            &["HGETALL", "h3"],
            &["HSET", "h3", "f3", "v3"],
            &["HLEN", "h2"],
            &["COPY", "h2", "h3"],
            &["COPY", "h2", "h3", "REPLACE"],
            &["HLEN", "h3"],
            &["COPY", "c", "c"],
            &["COPY", "nokey", "z"],
            &["COPY", "c", "d", "DB", "0"],
            &["COPY", "c", "e", "NOPE"],
            &["TTL", "d"],
            &["GET", "d"],
            &["RENAME", "c", "h3"],
            &["TYPE", "h3"],
            &["DBSIZE"],
            &["TOUCH", "d", "h2", "nokey"],
            &["EXPIRE", "d", "100", "GT", "LT"],
            &["EXPIRE", "d", "100", "NX", "XX"],
            &["HSET", "n", "x", "abc", "i", "1"],
            &["HINCRBYFLOAT", "n", "x", "1"],
            &["HINCRBYFLOAT", "n", "i", "abc"],
            &["HINCRBYFLOAT", "n", "i", "inf"],
            &["HINCRBYFLOAT", "n", "i", "1.5"],
            &["SET", "f", "abc"],
            &["INCRBYFLOAT", "f", "xyz"],
            &["INCRBYFLOAT", "f", "1"],
            &["HRANDFIELD", "nokey"],
            &["HRANDFIELD", "nokey", "3"],
            &["HRANDFIELD", "f"],
            &["HRANDFIELD", "n", "0"],
            &["HRANDFIELD", "n", "1", "NOPE"],
            &["HRANDFIELD", "n", "1", "WITHVALUES", "x"],
            &["HRANDFIELD", "n", "-9223372036854775807", "WITHVALUES"],
            &["HRANDFIELD", "n", "abc"],
            &["HRANDFIELD", "n", "-9223372036854775808"],
            &["HRANDFIELD", "n", "-9223372036854775808", "WITHVALUES"],
            &["HRANDFIELD", "n", "-9223372036854770000", "WITHVALUES"],
            &["MULTI"],
            &["SET", "foo", "bar"],
            &["CONFIG", "SET", "maxmemory", "bla"],
            &["SHUTDOWN"],
            &["EXEC"],
            &["MULTI"],
            &["SAVE"],
            &["EXEC"],
            &["SAVE"],
            &["HDEL", "n", "x"],
            &["HRANDFIELD", "n", "-1", "WITHVALUES"],
            &["HRANDFIELD", "n", "1", "WITHVALUES"],
            &["FLUSHALL"],
            &["RANDOMKEY"],
        ],
    );
    // Random picks: what they must satisfy.
    let mut c = Client::new(s.port);
    for i in 0..20 {
        c.cmd(&["HSET", "big", &format!("f{i:02}"), &format!("v{i}")]);
    }
    let fields: Vec<String> = (0..20).map(|i| format!("f{i:02}")).collect();
    let list = |s: String| -> Vec<String> {
        s.trim_start_matches('[').trim_end_matches(']').split(',').filter(|x| !x.is_empty()).map(String::from).collect()
    };
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200 {
        let f = c.cmd(&["HRANDFIELD", "big"]);
        assert!(fields.contains(&f), "{f}");
        seen.insert(f);
    }
    assert!(seen.len() > 10, "HRANDFIELD picks vary: {} distinct of 200", seen.len());
    let five = list(c.cmd(&["HRANDFIELD", "big", "5"]));
    assert_eq!(five.len(), 5);
    assert_eq!(five.iter().collect::<std::collections::HashSet<_>>().len(), 5, "positive count: distinct");
    assert_eq!(list(c.cmd(&["HRANDFIELD", "big", "50"])).len(), 20, "more than the hash: all of it");
    let rep = list(c.cmd(&["HRANDFIELD", "big", "-50"]));
    assert_eq!(rep.len(), 50, "negative count: exactly that many, repeats allowed");
    let pairs = list(c.cmd(&["HRANDFIELD", "big", "3", "WITHVALUES"]));
    assert_eq!(pairs.len(), 6);
    for p in pairs.chunks(2) {
        assert_eq!(p[1], format!("v{}", p[0][1..].parse::<u32>().unwrap()), "a field with its own value");
    }
    let mut keys = std::collections::HashSet::new();
    for i in 0..30 {
        c.cmd(&["SET", &format!("k{i}"), "x"]);
    }
    for _ in 0..300 {
        let k = c.cmd(&["RANDOMKEY"]);
        assert!(k == "big" || k.starts_with('k'), "{k}");
        keys.insert(k);
    }
    assert!(keys.len() > 10, "RANDOMKEY picks vary: {} distinct of 300", keys.len());
}

#[test]
fn flushes_inside_and_around_transactions_answer_as_redis() {
    let Pair { s: _s, _redis, mut p, mut r } = pair("hart");
    run(
        &mut p,
        &mut r,
        &[
            // A flush fails the EXEC of a connection watching a key that existed...
            &["SET", "x", "30"],
            &["WATCH", "x"],
            &["FLUSHALL"],
            &["MULTI"],
            &["PING"],
            &["EXEC"],
            &["SET", "x", "30"],
            &["WATCH", "x"],
            &["FLUSHDB"],
            &["MULTI"],
            &["PING"],
            &["EXEC"],
            // ...but not of one watching an absent key.
            &["DEL", "x"],
            &["WATCH", "x"],
            &["FLUSHALL"],
            &["MULTI"],
            &["PING"],
            &["EXEC"],
            &["SET", "y", "1"],
            &["WATCH", "x"],
            &["FLUSHDB", "SYNC"],
            &["MULTI"],
            &["PING"],
            &["EXEC"],
            &["FLUSHDB", "NOPE"],
            &["FLUSHALL", "ASYNC", "SYNC"],
            // A flush inside MULTI is one of the transaction's commands.
            &["SET", "a", "1"],
            &["HSET", "h", "f", "v"],
            &["MULTI"],
            &["SET", "b", "2"],
            &["FLUSHALL"],
            &["SET", "c", "3"],
            &["EXEC"],
            &["EXISTS", "a", "b", "c", "h"],
            &["DBSIZE"],
            &["MULTI"],
            &["FLUSHDB"],
            &["EXEC"],
            &["DBSIZE"],
        ],
    );
}

/// FUNCTION LOAD/LIST/DELETE/FLUSH/STATS and FCALL/FCALL_RO, and encoding thresholds
/// accepted and reported.
#[test]
fn functions_and_encoding_parameters_answer_as_redis() {
    let Pair { s: _s, _redis, mut p, mut r } = pair("hart");
    let lib = "#!lua name=mylib\n\
        redis.register_function('setget', function(keys, args) redis.call('SET', keys[1], args[1]) return redis.call('GET', keys[1]) end)\n\
        redis.register_function{function_name='ro', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}\n\
        redis.register_function{function_name='bad_ro', callback=function(keys) return redis.call('SET', keys[1], 'x') end, flags={'no-writes'}}";
    run(
        &mut p,
        &mut r,
        &[
            &["FUNCTION", "FLUSH"],
            &["FUNCTION", "FLUSH", "ASYNC"],
            &["FUNCTION", "FLUSH", "NOPE"],
            &["FUNCTION", "LIST"],
            &["FUNCTION", "DELETE", "nolib"],
            &["FUNCTION", "STATS"],
            &["FUNCTION", "KILL"],
            &["FCALL", "nofunc", "0"],
            &["FCALL_RO", "nofunc", "0"],
            &["FUNCTION", "LOAD", lib],
            &["FUNCTION", "LOAD", lib],
            &["FUNCTION", "LOAD", "REPLACE", lib],
            &["FCALL", "setget", "1", "k", "v1"],
            &["FCALL", "setget", "2", "k"],
            &["FCALL", "setget", "-1", "k"],
            &["FCALL_RO", "setget", "1", "k", "v2"],
            &["FCALL_RO", "ro", "1", "k"],
            &["FCALL", "ro", "1", "k"],
            &["FCALL", "bad_ro", "1", "k"],
            &["GET", "k"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "x*"],
            &["FUNCTION", "STATS"],
            &["EVAL_RO", "return redis.call('set','a','b')", "1", "a"],
            &["EVAL", "local x = 1\nreturn redis.call('nosuch')", "0"],
            &["EVAL", "return redis.pcall('nosuch')", "0"],
            &["FUNCTION", "LOAD", "#!lua name=other\nredis.register_function('ro', function() return 1 end)"],
            &["FUNCTION", "LOAD", "return 1"],
            &["FUNCTION", "LOAD", "#!lua name=x\nreturn 1"],
            &["FUNCTION", "LOAD", "#!lua name=bad-name\nreturn 1"],
            &["FUNCTION", "LOAD", "#!nope name=x\nreturn 1"],
            &["FUNCTION", "DELETE", "mylib"],
            &["FCALL", "setget", "1", "k", "v"],
            // One function per library: Redis lists a library's functions in hash order.
            &["FUNCTION", "LOAD", "#!lua name=one\nredis.register_function{function_name='f', callback=function() return 1 end, flags={'no-writes', 'allow-oom'}, description='d'}"],
            &["FUNCTION", "LIST"],
            &["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "on*"],
            &["FCALL", "f", "0"],
            &["CONFIG", "SET", "save", ""],
            &["CONFIG", "SET", "hash-max-ziplist-entries", "16"],
            &["CONFIG", "GET", "hash-max-ziplist-entries"],
            &["CONFIG", "GET", "hash-max-listpack-entries"],
            &["CONFIG", "SET", "hash-max-listpack-value", "abc"],
            &["CONFIG", "SET", "list-max-ziplist-size", "-1", "set-max-intset-entries", "8"],
            &["CONFIG", "GET", "set-max-intset-entries"],
            &["CONFIG", "GET", "list-max-listpack-size"],
        ],
    );
    // Errors inside a function and at LOAD begin as Redis's do (texts after that point
    // name Lua's chunk, which differs).
    for (cmd, prefix) in [
        (vec!["FUNCTION", "LOAD", "#!lua name=z\nredis.call('set', 'a', 'b')"], "-ERR Error registering functions"),
        (vec!["FUNCTION", "LOAD", "#!lua name=z\nredis.register_function('f', 3)"], "-ERR Error registering functions"),
    ] {
        let (a, b) = (p.cmd(&cmd), r.cmd(&cmd));
        assert!(a.starts_with(prefix) && b.starts_with(prefix), "{cmd:?}: pmkv {a} redis {b}");
    }
    // MEMORY USAGE: an estimate (the bytes of the key's records), nil for no key.
    run(&mut p, &mut r, &[&["MEMORY", "USAGE", "nokey"], &["MEMORY", "USAGE", "nokey", "SAMPLES", "5"]]);
    p.cmd(&["HSET", "mh", "f", "0123456789"]);
    let n: i64 = p.cmd(&["MEMORY", "USAGE", "mh"]).trim_start_matches(':').parse().unwrap();
    assert!((10..200).contains(&n), "{n}");
    assert!(p.cmd(&["MEMORY", "USAGE", "mh", "SAMPLES", "x"]).starts_with("-ERR syntax error"));
}

/// Inline commands (what telnet and `redis-cli` without RESP send) with quotes and
/// escapes: the same raw bytes to both, the same raw bytes back, up to the error that
/// closes the connection on unbalanced quotes.
#[test]
fn inline_commands_with_quotes_answer_as_redis() {
    use std::io::{Read, Write};
    let s = start("hart", 16, Config { threads: 2, ..Config::default() });
    let redis = RealRedis::start();
    let input: &[u8] = b"set \"a b\" 'c d'\r\nget \"a b\"\r\nset k \"\\x41\\n\\t\\\"q\\\\\"\r\nget k\r\n\
        set j 'it\\'s'\r\nget j\r\n  exists   k   j  \r\nset \"\" ''\r\nget \"\"\r\nget \"k\"x\r\nget k\r\n";
    let talk = |port: u16| -> Vec<u8> {
        let mut t = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        t.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        t.write_all(input).unwrap();
        let mut out = Vec::new();
        let _ = t.read_to_end(&mut out);
        out
    };
    let (a, b) = (talk(s.port), talk(redis.port));
    assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
    assert!(a.ends_with(b"-ERR Protocol error: unbalanced quotes in request\r\n"));
}

/// INFO's sections as Redis's info-command unit asks for them, and the counters of
/// `commandstats` (calls, rejected before running, failed while running).
#[test]
fn info_sections_and_command_stats() {
    let s = start("hart", 16, Config { threads: 2, ..Config::default() });
    let mut c = Client::new(s.port).abbreviating(usize::MAX);
    for arg in ["", "all", "default", "everything"] {
        let info = if arg.is_empty() { c.cmd(&["INFO"]) } else { c.cmd(&["INFO", arg]) };
        for want in ["redis_version", "used_cpu_user", "used_memory", "master_repl_offset"] {
            assert!(info.contains(want), "INFO {arg}: no {want}");
        }
        assert_eq!(info.contains("rejected_calls"), matches!(arg, "all" | "everything"), "INFO {arg}");
    }
    let cpu = c.cmd(&["INFO", "cpu"]);
    assert!(cpu.contains("used_cpu_user") && !cpu.contains("used_memory"));
    let two = c.cmd(&["INFO", "cpu", "all"]);
    assert_eq!(two.matches("used_cpu_user_children").count(), 1, "a section once");
    assert!(c.cmd(&["INFO", "commandSTATS"]).contains("rejected_calls"));
    // Counters: a call, a failure, a refusal (wrong arity), and queued-then-run.
    let stat = |c: &mut Client, name: &str| -> String {
        let t = c.cmd(&["INFO", "commandstats"]);
        t.split("\r\n").find(|l| l.starts_with(&format!("cmdstat_{name}:"))).unwrap_or_default().to_string()
    };
    c.cmd(&["SET", "s", "v"]);
    c.cmd(&["HSET", "s", "f", "v"]);
    c.cmd(&["HSET", "s"]);
    let h = stat(&mut c, "hset");
    assert!(h.starts_with("cmdstat_hset:calls=1,") && h.ends_with("rejected_calls=1,failed_calls=1"), "{h}");
    c.cmd(&["MULTI"]);
    c.cmd(&["INCR", "n"]);
    c.cmd(&["INCR", "n"]);
    c.cmd(&["EXEC"]);
    assert!(stat(&mut c, "incr").starts_with("cmdstat_incr:calls=2,"), "queued INCRs count when EXEC runs them");
    let get0 = stat(&mut c, "get");
    c.cmd(&["GET", "s"]);
    let get1 = stat(&mut c, "get");
    assert_ne!(get0, get1, "the fast path counts GETs");
}

/// The list commands, their errors and wrong-type checks, then random rounds of every
/// list command over a few keys (pushes and pops at both ends, inserts, removals, trims,
/// moves between and within lists, and reads by position): every reply equal to Redis's.
#[test]
fn lists_answer_as_redis() {
    let Pair { s: _s, _redis, mut p, mut r } = pair("hart");
    run(
        &mut p,
        &mut r,
        &[
            &["RPUSH", "l", "a", "b", "c"],
            &["LPUSH", "l", "z", "y"],
            &["LRANGE", "l", "0", "-1"],
            &["LRANGE", "l", "-100", "100"],
            &["LRANGE", "l", "3", "1"],
            &["LRANGE", "l", "a", "1"],
            &["LLEN", "l"],
            &["LLEN", "nolist"],
            &["LINDEX", "l", "-1"],
            &["LINDEX", "l", "5"],
            &["LINDEX", "l", "x"],
            &["LPOP", "l"],
            &["RPOP", "l", "2"],
            &["LPOP", "l", "0"],
            &["LPOP", "nolist", "0"],
            &["LPOP", "nolist"],
            &["RPOP", "nolist", "3"],
            &["LPOP", "l", "-1"],
            &["LPOP", "l", "1", "2"],
            &["LPUSHX", "nolist", "a"],
            &["RPUSHX", "l", "x", "y"],
            &["EXISTS", "nolist"],
            &["LSET", "l", "0", "first"],
            &["LSET", "l", "10", "x"],
            &["LSET", "nolist", "0", "x"],
            &["LINSERT", "l", "BEFORE", "x", "bx"],
            &["LINSERT", "l", "AFTER", "y", "ay"],
            &["LINSERT", "l", "AFTER", "none", "v"],
            &["LINSERT", "l", "MIDDLE", "x", "v"],
            &["LINSERT", "nolist", "BEFORE", "x", "v"],
            &["LRANGE", "l", "0", "-1"],
            &["RPUSH", "d", "x", "a", "x", "b", "x", "c", "x"],
            &["LREM", "d", "2", "x"],
            &["LREM", "d", "-1", "x"],
            &["LREM", "d", "0", "nope"],
            &["LRANGE", "d", "0", "-1"],
            &["LPOS", "d", "x"],
            &["LPOS", "d", "x", "RANK", "-1"],
            &["LPOS", "d", "x", "COUNT", "0"],
            &["LPOS", "d", "x", "RANK", "0"],
            &["LPOS", "d", "x", "COUNT", "-1"],
            &["LPOS", "d", "x", "MAXLEN", "-1"],
            &["LPOS", "d", "x", "MAXLEN", "1"],
            &["LPOS", "d", "x", "NOPE", "1"],
            &["LPOS", "d", "x", "RANK"],
            &["LPOS", "nolist", "x"],
            &["LPOS", "nolist", "x", "COUNT", "1"],
            &["LTRIM", "l", "1", "-2"],
            &["LRANGE", "l", "0", "-1"],
            &["LTRIM", "l", "5", "1"],
            &["EXISTS", "l"],
            &["RPUSH", "src", "1", "2", "3"],
            &["LMOVE", "src", "dst", "LEFT", "RIGHT"],
            &["LMOVE", "src", "src", "RIGHT", "LEFT"],
            &["LMOVE", "src", "dst", "UP", "LEFT"],
            &["RPOPLPUSH", "src", "dst"],
            &["RPOPLPUSH", "nolist", "dst"],
            &["LRANGE", "src", "0", "-1"],
            &["LRANGE", "dst", "0", "-1"],
            &["LMPOP", "2", "nolist", "dst", "RIGHT", "COUNT", "5"],
            &["LMPOP", "1", "nolist", "LEFT"],
            &["LMPOP", "0", "dst", "LEFT"],
            &["LMPOP", "1", "src", "UP"],
            &["LMPOP", "1", "src", "LEFT", "COUNT", "0"],
            &["LMPOP", "1", "src", "LEFT", "COUNT"],
            &["LMPOP", "5", "src", "LEFT"],
            &["SET", "str", "v"],
            &["LPUSH", "str", "x"],
            &["LRANGE", "str", "0", "1"],
            &["LPOP", "str", "0"],
            &["LMOVE", "src", "str", "LEFT", "LEFT"],
            &["LRANGE", "src", "0", "-1"],
            &["HSET", "h", "f", "v"],
            &["LLEN", "h"],
            &["GET", "src"],
            &["HGET", "src", "f"],
            &["TYPE", "src"],
            &["RPUSH", "t", "a"],
            &["EXPIRE", "t", "100"],
            &["TTL", "t"],
            &["RENAME", "t", "t2"],
            &["TTL", "t2"],
            &["LRANGE", "t2", "0", "-1"],
            &["COPY", "t2", "t3"],
            &["RPUSH", "t3", "b"],
            &["LRANGE", "t2", "0", "-1"],
            &["LRANGE", "t3", "0", "-1"],
            &["SET", "t2", "now a string"],
            &["TYPE", "t2"],
            &["DEL", "t3"],
            &["EXISTS", "t3"],
            &["MULTI"],
            &["RPUSH", "m", "1"],
            &["LPOP", "str"],
            &["RPUSH", "m", "2"],
            &["EXEC"],
            &["LRANGE", "m", "0", "-1"],
            &["EVAL", "redis.call('RPUSH', KEYS[1], 'a', 'b'); return redis.call('LPOP', KEYS[1], 5)", "1", "e"],
            &["EXISTS", "e"],
        ],
    );
    // SCAN TYPE and DBSIZE see lists.
    let (mine, theirs) = (scan_type(&mut p, "list"), scan_type(&mut r, "list"));
    assert!(mine.contains(&"src".to_string()) && !mine.contains(&"str".to_string()), "{mine:?}");
    assert_eq!(mine, theirs);
    both(&mut p, &mut r, &[b"DBSIZE"]);
    let mut rng = XorShift::new(0x115e);
    let n = |rng: &mut XorShift, span: u64| (rng.below(2 * span + 1) as i64 - span as i64).to_string();
    for round in 0..3000 {
        let k = format!("r{}", rng.below(3));
        let k2 = format!("r{}", rng.below(3));
        let v = format!("v{}", rng.below(6));
        let (kb, vb) = (k.as_bytes(), v.as_bytes());
        let side = |rng: &mut XorShift| ["LEFT", "RIGHT"][rng.below(2) as usize];
        let (a, b) = (n(&mut rng, 8), n(&mut rng, 8));
        let cmd: Vec<&[u8]> = match rng.below(16) {
            0 | 1 => vec![b"LPUSH", kb, vb, b"w"],
            2 | 3 => vec![b"RPUSH", kb, vb],
            4 => vec![b"LPOP", kb],
            5 => vec![b"RPOP", kb, a.as_bytes()],
            6 => vec![b"LINDEX", kb, a.as_bytes()],
            7 => vec![b"LRANGE", kb, a.as_bytes(), b.as_bytes()],
            8 => vec![b"LINSERT", kb, [&b"BEFORE"[..], b"AFTER"][rng.below(2) as usize], vb, b"ins"],
            9 => vec![b"LREM", kb, a.as_bytes(), vb],
            10 => vec![b"LTRIM", kb, a.as_bytes(), b.as_bytes()],
            11 => vec![b"LSET", kb, a.as_bytes(), b"set"],
            12 => vec![b"LMOVE", kb, k2.as_bytes(), side(&mut rng).as_bytes(), side(&mut rng).as_bytes()],
            13 => vec![b"LPOS", kb, vb, b"RANK", if a == "0" { b"1" } else { a.as_bytes() }, b"COUNT", b"0"],
            14 => vec![b"LMPOP", b"2", kb, k2.as_bytes(), side(&mut rng).as_bytes(), b"COUNT", b"2"],
            _ => vec![b"RPUSHX", kb, vb],
        };
        both(&mut p, &mut r, &cmd);
        if round % 50 == 0 {
            for k in ["r0", "r1", "r2"] {
                both(&mut p, &mut r, &[b"LRANGE", k.as_bytes(), b"0", b"-1"]);
            }
        }
    }
}

/// Blocking pops, the same scenario against both servers, every reply compared: waiters
/// served first blocked first, on the push that makes the list non-empty (the pusher's
/// next command sees the elements taken); BLMOVE feeding a client blocked on its
/// destination; BLMPOP; timeouts; a push inside EXEC served after it; the non-blocking
/// form inside MULTI; scripts refusing them; a client that disconnects while blocked
/// takes nothing; argument errors and wrong types.
#[test]
fn blocking_pops_answer_as_redis() {
    fn scenario(port: u16) -> Vec<String> {
        let settle = || std::thread::sleep(std::time::Duration::from_millis(150));
        let (mut a, mut b, mut c) = (Client::new(port), Client::new(port), Client::new(port));
        let mut out = Vec::new();
        a.send(&[b"BLPOP", b"l", b"other", b"0"]);
        settle();
        b.send(&[b"BRPOP", b"l", b"0"]);
        settle();
        out.push(c.cmd(&["RPUSH", "l", "x", "y", "z"]));
        out.push(c.cmd(&["LRANGE", "l", "0", "-1"]));
        out.push(a.reply());
        out.push(b.reply());
        a.send(&[b"BLMOVE", b"src", b"dst", b"LEFT", b"RIGHT", b"0"]);
        settle();
        b.send(&[b"BLPOP", b"dst", b"0"]);
        settle();
        out.push(c.cmd(&["RPUSH", "src", "v"]));
        out.push(c.cmd(&["EXISTS", "src", "dst"]));
        out.push(a.reply());
        out.push(b.reply());
        a.send(&[b"BLMPOP", b"0", b"2", b"m1", b"m2", b"RIGHT", b"COUNT", b"2"]);
        settle();
        out.push(c.cmd(&["RPUSH", "m2", "1", "2", "3"]));
        out.push(a.reply());
        out.push(c.cmd(&["LRANGE", "m2", "0", "-1"]));
        a.send(&[b"BLPOP", b"ml", b"0"]);
        settle();
        for cmd in [&["MULTI"][..], &["RPUSH", "ml", "p"], &["RPUSH", "ml", "q"], &["LLEN", "ml"], &["EXEC"]] {
            out.push(c.cmd(cmd));
        }
        out.push(a.reply());
        out.push(c.cmd(&["LRANGE", "ml", "0", "-1"]));
        // Served in blocking order even when the later one waits on more keys.
        a.send(&[b"BRPOPLPUSH", b"f", b"g", b"0"]);
        settle();
        b.send(&[b"BLPOP", b"h", b"f", b"0"]);
        settle();
        out.push(c.cmd(&["LPUSH", "f", "1", "2"]));
        out.push(a.reply());
        out.push(b.reply());
        out.push(c.cmd(&["LRANGE", "g", "0", "-1"]));
        {
            let mut d = Client::new(port);
            d.send(&[b"BLPOP", b"gone", b"0"]);
            settle();
        }
        std::thread::sleep(std::time::Duration::from_millis(400));
        // A move whose destination is of another type: the waiter gets WRONGTYPE when a
        // push arrives, and the element stays.
        out.push(c.cmd(&["SET", "notalist", "v"]));
        a.send(&[b"BRPOPLPUSH", b"wsrc", b"notalist", b"0"]);
        settle();
        out.push(c.cmd(&["RPUSH", "wsrc", "a", "b"]));
        out.push(a.reply());
        out.push(c.cmd(&["LRANGE", "wsrc", "0", "-1"]));
        out.push(c.cmd(&["RPUSH", "gone", "kept"]));
        out.push(c.cmd(&["LRANGE", "gone", "0", "-1"]));
        for cmd in [
            &["BLPOP", "none", "0.1"][..],
            &["BRPOP", "none", "none2", "0.05"],
            &["BLMOVE", "none", "x", "LEFT", "LEFT", "0.1"],
            &["BRPOPLPUSH", "none", "x", "0.1"],
            &["BLMPOP", "0.1", "1", "none", "LEFT"],
            &["BLPOP", "none", "-1"],
            &["BLPOP", "none", "abc"],
            &["BLMOVE", "none", "x", "UP", "LEFT", "0"],
            &["BLMPOP", "0", "0", "none", "LEFT"],
            &["BLMPOP", "0", "1", "none", "LEFT", "COUNT", "0"],
            &["SET", "s", "v"],
            &["BLPOP", "s", "0"],
            &["BLPOP", "none", "s", "0"],
            &["RPUSH", "full", "e"],
            &["BLMOVE", "full", "s", "LEFT", "LEFT", "0"],
            &["MULTI"],
            &["BLPOP", "none", "0"],
            &["BLMOVE", "none", "x", "LEFT", "LEFT", "0"],
            &["BLPOP", "full", "0"],
            &["EXEC"],
            &["EVAL", "return redis.pcall('blpop','x',0)", "0"],
            &["EVAL", "return redis.pcall('blmove','a','b','LEFT','LEFT',0)", "0"],
        ] {
            out.push(c.cmd(cmd));
        }
        out
    }
    let Pair { s, _redis, .. } = pair("hart");
    let redis_port = _redis.port;
    let (mine, theirs) = (scenario(s.port), scenario(redis_port));
    for (i, (m, t)) in mine.iter().zip(&theirs).enumerate() {
        assert_eq!(m, t, "reply {i} differs");
    }
    assert_eq!(mine.len(), theirs.len());
}

/// Blocking commands of different clients sent back to back, with no pause for them to
/// block, then a push from a third: they take effect in the order they were sent, as
/// under Redis's single thread (Redis's suite, "BRPOPLPUSH with multiple blocked
/// clients", hung when the second registered first). Many rounds, since the order of
/// threads that makes a round go wrong is a matter of chance.
///
/// Ignored: about 1 round in 50-150 still goes wrong when the later client's socket is
/// read before the earlier one's (docs/design/server-types.md, "Arrival order"); run it
/// with `--ignored` to measure.
#[test]
#[ignore = "residual race: arrival is taken at read time, not from the kernel"]
fn blocking_commands_sent_back_to_back_take_effect_in_order() {
    fn scenario(port: u16, rounds: usize) -> Vec<String> {
        let (mut a, mut b, mut c) = (Client::new(port), Client::new(port), Client::new(port));
        let mut out = Vec::new();
        out.push(c.cmd(&["SET", "target1", "nolist"]));
        for _ in 0..rounds {
            out.push(c.cmd(&["DEL", "blist", "target2", "q"]));
            a.send(&[b"BRPOPLPUSH", b"blist", b"target1", b"0"]);
            b.send(&[b"BRPOPLPUSH", b"blist", b"target2", b"0"]);
            out.push(c.cmd(&["LPUSH", "blist", "foo"]));
            out.push(a.reply());
            out.push(b.reply());
            out.push(c.cmd(&["LRANGE", "target2", "0", "-1"]));
            a.send(&[b"BLPOP", b"q", b"0"]);
            b.send(&[b"BLPOP", b"q", b"0"]);
            out.push(c.cmd(&["RPUSH", "q", "first", "second"]));
            out.push(a.reply());
            out.push(b.reply());
        }
        out
    }
    let Pair { s, _redis, .. } = pair("hart");
    let (mine, theirs) = (scenario(s.port, 200), scenario(_redis.port, 200));
    for (i, (m, t)) in mine.iter().zip(&theirs).enumerate() {
        assert_eq!(m, t, "reply {i} differs");
    }
    assert_eq!(mine.len(), theirs.len());
}

/// The keys of type `t` by one SCAN, sorted (a server's SCAN order is its own).
fn scan_type(c: &mut Client, t: &str) -> Vec<String> {
    let all = c.cmd(&["SCAN", "0", "TYPE", t, "COUNT", "1000"]);
    let mut v: Vec<String> =
        all.trim_start_matches("[0,[").trim_end_matches("]]").split(',').map(String::from).collect();
    v.sort();
    v
}

/// Send `args` to both; the replies, an array's elements sorted (a set's order is the
/// server's own), must agree.
fn both_sorted(p: &mut Client, r: &mut Client, args: &[&[u8]]) -> String {
    let (a, b) = (p.try_cmd(args).expect("pmkv reply"), r.try_cmd(args).expect("redis reply"));
    let sorted = |s: &str| -> String {
        match s.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
            Some(inner) => {
                let mut v: Vec<&str> = inner.split(',').collect();
                v.sort_unstable();
                format!("[{}]", v.join(","))
            }
            None => s.to_string(),
        }
    };
    let shown: Vec<String> = args.iter().map(|x| String::from_utf8_lossy(x).into_owned()).collect();
    assert_eq!(sorted(&a), sorted(&b), "pmkv and redis-server differ on {shown:?}");
    a
}

/// The set commands, their errors and wrong-type checks, the algebra and its STORE
/// forms, then random rounds: every reply equal to Redis's (members compared as sets).
/// SPOP/SRANDMEMBER are random: checked by what they must satisfy.
#[test]
fn sets_answer_as_redis() {
    let Pair { s: _s, _redis, mut p, mut r } = pair("nbtree");
    let script: &[&[&str]] = &[
        &["SADD", "s", "a", "b", "c", "a"],
        &["SADD", "s", "d"],
        &["SCARD", "s"],
        &["SCARD", "none"],
        &["SISMEMBER", "s", "a"],
        &["SISMEMBER", "s", "zz"],
        &["SISMEMBER", "none", "a"],
        &["SMISMEMBER", "s", "a", "zz", "d"],
        &["SMISMEMBER", "none", "a"],
        &["SMEMBERS", "s"],
        &["SMEMBERS", "none"],
        &["SREM", "s", "a", "zz"],
        &["SREM", "none", "a"],
        &["SADD", "t", "c", "d", "e"],
        &["SINTER", "s", "t"],
        &["SUNION", "s", "t", "none"],
        &["SDIFF", "s", "t"],
        &["SDIFF", "t", "s", "none"],
        &["SINTER", "s", "none"],
        &["SINTERSTORE", "i", "s", "t"],
        &["SMEMBERS", "i"],
        &["SUNIONSTORE", "u", "s", "t"],
        &["SDIFFSTORE", "d", "s", "t"],
        &["SMEMBERS", "d"],
        &["SINTERSTORE", "i", "s", "none"],
        &["EXISTS", "i"],
        &["SINTERSTORE", "s", "s", "t"],
        &["SMEMBERS", "s"],
        &["SINTERCARD", "2", "u", "t"],
        &["SINTERCARD", "2", "u", "t", "LIMIT", "1"],
        &["SINTERCARD", "0", "u"],
        &["SINTERCARD", "3", "u", "t"],
        &["SINTERCARD", "1", "u", "LIMIT", "-1"],
        &["SINTERCARD", "1", "u", "LIMIT", "x"],
        &["SINTERCARD", "1", "u", "NOPE", "1"],
        &["SMOVE", "u", "t", "b"],
        &["SMOVE", "u", "t", "zz"],
        &["SMOVE", "u", "u", "c"],
        &["SMOVE", "none", "t", "a"],
        &["SMEMBERS", "t"],
        &["SET", "str", "v"],
        &["SADD", "str", "a"],
        &["SMEMBERS", "str"],
        &["SINTER", "t", "str"],
        &["SINTER", "none", "str"],
        &["SMOVE", "t", "str", "c"],
        &["SMOVE", "none", "str", "c"],
        &["SMOVE", "str", "t", "c"],
        &["SUNIONSTORE", "str", "t"],
        &["TYPE", "str"],
        &["SPOP", "none"],
        &["SPOP", "none", "3"],
        &["SPOP", "t", "-1"],
        &["SPOP", "t", "0"],
        &["SPOP", "t", "1", "2"],
        &["SRANDMEMBER", "none"],
        &["SRANDMEMBER", "none", "-3"],
        &["SRANDMEMBER", "t", "x"],
        &["SRANDMEMBER", "t", "-9223372036854775808"],
        &["SRANDMEMBER", "t", "0"],
        &["SADD", "one", "only"],
        &["SPOP", "one"],
        &["EXISTS", "one"],
        &["SADD", "one", "only"],
        &["SRANDMEMBER", "one"],
        &["SRANDMEMBER", "one", "-3"],
        &["SRANDMEMBER", "one", "5"],
        &["SPOP", "one", "5"],
        &["EXISTS", "one"],
        &["SADD", "x", "1"],
        &["EXPIRE", "x", "100"],
        &["RENAME", "x", "y"],
        &["TTL", "y"],
        &["COPY", "y", "z"],
        &["SMEMBERS", "z"],
        &["LPUSH", "y", "a"],
        &["MULTI"],
        &["SADD", "m", "1"],
        &["SADD", "str", "1"],
        &["SADD", "m", "2"],
        &["EXEC"],
        &["SMEMBERS", "m"],
        &["EVAL", "redis.call('SADD', KEYS[1], 'a', 'b'); return redis.call('SCARD', KEYS[1])", "1", "e"],
        &["SSCAN", "m", "0"],
        &["SSCAN", "none", "0"],
    ];
    for cmd in script {
        let a: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
        both_sorted(&mut p, &mut r, &a);
    }
    // SCAN TYPE set: the same keys (in each server's own order).
    let (mine, theirs) = (scan_type(&mut p, "set"), scan_type(&mut r, "set"));
    assert!(mine.contains(&"m".to_string()) && mine.len() > 5, "{mine:?}");
    assert_eq!(mine, theirs);
    both(&mut p, &mut r, &[b"DBSIZE"]);
    // SPOP/SRANDMEMBER: members of the set, distinct for a positive count; SPOP removes.
    p.cmd(&["SADD", "rnd", "a", "b", "c", "d", "e"]);
    let picked = p.cmd(&["SRANDMEMBER", "rnd", "3"]);
    let v: Vec<&str> = picked.trim_matches(|c| c == '[' || c == ']').split(',').collect();
    assert_eq!(v.len(), 3);
    assert!(v.iter().all(|m| ["a", "b", "c", "d", "e"].contains(m)) && v[0] != v[1] && v[1] != v[2] && v[0] != v[2]);
    // A single pick reaches every member (a small set: uniform).
    let seen: std::collections::BTreeSet<String> = (0..200).map(|_| p.cmd(&["SRANDMEMBER", "rnd"])).collect();
    assert_eq!(seen.len(), 5, "{seen:?}");
    let popped = p.cmd(&["SPOP", "rnd"]);
    assert_eq!(p.cmd(&["SISMEMBER", "rnd", &popped]), ":0");
    assert_eq!(p.cmd(&["SCARD", "rnd"]), ":4");
    assert_eq!(p.cmd(&["SPOP", "rnd", "10"]).split(',').count(), 4);
    assert_eq!(p.cmd(&["EXISTS", "rnd"]), ":0");
    let mut rng = XorShift::new(0x5e75);
    for _ in 0..3000 {
        let k = format!("r{}", rng.below(3));
        let k2 = format!("r{}", rng.below(3));
        let m = format!("m{}", rng.below(8));
        let (kb, mb, k2b) = (k.as_bytes(), m.as_bytes(), k2.as_bytes());
        let cmd: Vec<&[u8]> = match rng.below(12) {
            0..=2 => vec![b"SADD", kb, mb, b"m0"],
            3 | 4 => vec![b"SREM", kb, mb],
            5 => vec![b"SISMEMBER", kb, mb],
            6 => vec![b"SMOVE", kb, k2b, mb],
            7 => vec![b"SINTERSTORE", b"r2", kb, k2b],
            8 => vec![b"SUNION", kb, k2b],
            9 => vec![b"SDIFFSTORE", kb, k2b, b"r1"],
            10 => vec![b"SINTERCARD", b"2", kb, k2b],
            _ => vec![b"SCARD", kb],
        };
        both_sorted(&mut p, &mut r, &cmd);
        both_sorted(&mut p, &mut r, &[b"SMEMBERS", kb]);
    }
}

/// The sorted-set commands, their argument rules, errors and wrong-type checks, then
/// random rounds of writes and reads over three small sorted sets whose scores collide
/// (ties ordered by member) and include ±inf and fractions: every reply equal to
/// Redis's, scores as Redis 7.0 prints them. Then the blocking pops, served by a ZADD.
/// ZRANDMEMBER is random: checked by what it must satisfy.
#[test]
fn zsets_answer_as_redis() {
    let Pair { s, _redis, mut p, mut r } = pair("hart");
    let script: &[&[&str]] = &[
        &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
        &["ZADD", "z", "1.5", "a", "0.1", "d", "-inf", "lo", "+inf", "hi"],
        &["ZADD", "z", "NX", "9", "a", "9", "e"],
        &["ZADD", "z", "XX", "CH", "10", "a", "10", "f"],
        &["ZADD", "z", "GT", "CH", "5", "a", "50", "b"],
        &["ZADD", "z", "LT", "CH", "5", "a", "1", "c"],
        &["ZADD", "z", "INCR", "2.5", "c"],
        &["ZADD", "z", "GT", "INCR", "-1", "c"],
        &["ZADD", "z", "NX", "INCR", "1", "c"],
        &["ZADD", "z", "XX", "INCR", "1", "new"],
        &["ZADD", "z", "NX", "XX", "1", "a"],
        &["ZADD", "z", "GT", "LT", "1", "a"],
        &["ZADD", "z", "NX", "GT", "1", "a"],
        &["ZADD", "z", "INCR", "1", "a", "2", "b"],
        &["ZADD", "z", "1", "a", "2"],
        &["ZADD", "z", "x", "a"],
        &["ZADD", "z", "nan", "a"],
        &["ZADD", "z", "INCR", "-inf", "hi"],
        &["ZADD", "none", "XX", "1", "a"],
        &["EXISTS", "none"],
        &["ZINCRBY", "z", "0.25", "d"],
        &["ZINCRBY", "z", "x", "d"],
        &["ZINCRBY", "fresh", "-3", "m"],
        &["ZCARD", "z"],
        &["ZCARD", "none"],
        &["ZSCORE", "z", "d"],
        &["ZSCORE", "z", "zz"],
        &["ZSCORE", "none", "a"],
        &["ZMSCORE", "z", "a", "zz", "lo", "hi"],
        &["ZMSCORE", "none", "a", "b"],
        &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        &["ZRANGE", "z", "2", "4"],
        &["ZRANGE", "z", "-3", "-1", "REV", "WITHSCORES"],
        &["ZRANGE", "z", "5", "2"],
        &["ZRANGE", "z", "100", "200"],
        &["ZRANGE", "z", "(1", "5", "BYSCORE", "WITHSCORES"],
        &["ZRANGE", "z", "5", "(1", "BYSCORE", "REV"],
        &["ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "2"],
        &["ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "-1"],
        &["ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "-1", "2"],
        &["ZRANGE", "z", "0", "-1", "LIMIT", "1", "2"],
        &["ZRANGE", "z", "0", "-1", "BYSCORE", "BYLEX"],
        &["ZRANGE", "z", "a", "b", "BYSCORE"],
        &["ZRANGE", "z", "x", "1"],
        &["ZRANGE", "z", "0", "1", "WITHSCORES", "EXTRA"],
        &["ZRANGEBYSCORE", "z", "1", "(10", "WITHSCORES", "LIMIT", "0", "3"],
        &["ZREVRANGEBYSCORE", "z", "+inf", "-inf"],
        &["ZREVRANGE", "z", "0", "2", "WITHSCORES"],
        &["ZRANGEBYSCORE", "z", "1", "2", "REV"],
        &["ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e"],
        &["ZRANGE", "lex", "[b", "(e", "BYLEX"],
        &["ZRANGE", "lex", "+", "-", "BYLEX", "REV", "LIMIT", "1", "2"],
        &["ZRANGEBYLEX", "lex", "-", "[c"],
        &["ZREVRANGEBYLEX", "lex", "(d", "-"],
        &["ZRANGEBYLEX", "lex", "b", "c"],
        &["ZRANGE", "lex", "-", "+", "BYLEX", "WITHSCORES"],
        &["ZRANGE", "lex", "[c", "[a", "BYLEX"],
        &["ZLEXCOUNT", "lex", "(a", "+"],
        &["ZLEXCOUNT", "lex", "x", "+"],
        &["ZCOUNT", "z", "(1", "+inf"],
        &["ZCOUNT", "z", "-inf", "(-inf"],
        &["ZCOUNT", "z", "x", "1"],
        &["ZRANK", "z", "b"],
        &["ZREVRANK", "z", "b"],
        &["ZRANK", "z", "zz"],
        &["ZRANK", "none", "a"],
        &["ZRANGESTORE", "dst", "z", "1", "3"],
        &["ZRANGE", "dst", "0", "-1", "WITHSCORES"],
        &["ZRANGESTORE", "dst", "z", "(100", "+inf", "BYSCORE"],
        &["ZRANGESTORE", "dst", "z", "0", "-1", "WITHSCORES"],
        &["ZRANGESTORE", "dst", "none", "0", "-1"],
        &["EXISTS", "dst"],
        &["ZREM", "z", "lo", "zz"],
        &["ZREM", "none", "a"],
        &["ZREMRANGEBYRANK", "lex", "0", "0"],
        &["ZREMRANGEBYLEX", "lex", "[c", "[d"],
        &["ZRANGE", "lex", "0", "-1"],
        &["ZREMRANGEBYSCORE", "z", "(10", "+inf"],
        &["ZREMRANGEBYSCORE", "z", "a", "1"],
        &["ZREMRANGEBYRANK", "z", "x", "1"],
        &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        &["ZPOPMIN", "z"],
        &["ZPOPMAX", "z", "2"],
        &["ZPOPMIN", "z", "-1"],
        &["ZPOPMIN", "z", "0"],
        &["ZPOPMIN", "none"],
        &["ZPOPMAX", "none", "3"],
        &["ZADD", "u1", "1", "a", "2", "b", "3", "c"],
        &["ZADD", "u2", "10", "b", "20", "c", "30", "d"],
        &["SADD", "plain", "a", "d", "x"],
        &["ZUNION", "2", "u1", "u2", "WITHSCORES"],
        &["ZUNION", "3", "u1", "u2", "plain", "WEIGHTS", "1", "2", "0.5", "AGGREGATE", "MAX", "WITHSCORES"],
        &["ZINTER", "2", "u1", "u2", "AGGREGATE", "MIN", "WITHSCORES"],
        &["ZINTER", "2", "u1", "plain", "WITHSCORES"],
        &["ZDIFF", "2", "u2", "u1", "WITHSCORES"],
        &["ZDIFF", "2", "u1", "u2", "WEIGHTS", "1", "2"],
        &["ZUNION", "0", "u1"],
        &["ZUNION", "3", "u1", "u2"],
        &["ZUNION", "2", "u1", "u2", "WEIGHTS", "1", "x"],
        &["ZUNION", "2", "u1", "u2", "AGGREGATE", "AVG"],
        &["ZUNIONSTORE", "out", "2", "u1", "u2", "WEIGHTS", "2", "3"],
        &["ZRANGE", "out", "0", "-1", "WITHSCORES"],
        &["ZINTERSTORE", "out", "2", "u1", "u2"],
        &["ZRANGE", "out", "0", "-1", "WITHSCORES"],
        &["ZDIFFSTORE", "out", "2", "u1", "u1"],
        &["EXISTS", "out"],
        &["ZUNIONSTORE", "out", "1", "u1", "WITHSCORES"],
        &["ZADD", "infs", "inf", "a", "-inf", "b"],
        &["ZUNION", "2", "infs", "infs", "WEIGHTS", "1", "-1", "WITHSCORES"],
        &["ZUNION", "1", "infs", "WEIGHTS", "0", "WITHSCORES"],
        &["ZINTERCARD", "2", "u1", "u2"],
        &["ZINTERCARD", "2", "u1", "u2", "LIMIT", "1"],
        &["ZINTERCARD", "0", "u1"],
        &["ZINTERCARD", "2", "u1", "plain"],
        &["ZMPOP", "2", "none", "u1", "MIN", "COUNT", "2"],
        &["ZMPOP", "1", "u2", "MAX"],
        &["ZMPOP", "1", "none", "MAX"],
        &["ZMPOP", "0", "u2", "MAX"],
        &["ZMPOP", "1", "u2", "UP"],
        &["ZMPOP", "1", "u2", "MIN", "COUNT", "0"],
        &["SET", "str", "v"],
        &["ZADD", "str", "1", "a"],
        &["ZRANGE", "str", "0", "-1"],
        &["ZSCORE", "str", "a"],
        &["ZUNION", "2", "u2", "str"],
        &["ZUNIONSTORE", "str", "1", "u2"],
        &["TYPE", "str"],
        &["ZADD", "fmt", "0.1", "a", "1e20", "b", "-1.5e-7", "c", "123456.789", "d", "4503599627370497", "e"],
        &["ZRANGE", "fmt", "0", "-1", "WITHSCORES"],
        &["ZRANDMEMBER", "none"],
        &["ZRANDMEMBER", "none", "3"],
        &["ZRANDMEMBER", "fmt", "x"],
        &["ZRANDMEMBER", "fmt", "0"],
        &["MULTI"],
        &["ZADD", "m", "1", "a"],
        &["ZINCRBY", "m", "2", "a"],
        &["ZPOPMIN", "m"],
        &["EXEC"],
        &[
            "EVAL",
            "redis.call('ZADD', KEYS[1], 1, 'a', 2, 'b'); return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')",
            "1",
            "e",
        ],
        &["ZADD", "x", "1", "a"],
        &["RENAME", "x", "y"],
        &["COPY", "y", "w"],
        &["ZRANGE", "w", "0", "-1", "WITHSCORES"],
    ];
    run(&mut p, &mut r, script);
    // ZSCAN: one page each (small sets), the same (member, score) pairs in each server's
    // own order (pmkv's is member order; Redis's small sets give score order).
    for args in [&["ZSCAN", "fmt", "0"][..], &["ZSCAN", "fmt", "0", "MATCH", "[ab]"], &["ZSCAN", "none", "0"]] {
        let pairs = |c: &mut Client| {
            let reply = c.cmd(args);
            let inner = reply.strip_prefix("[0,[").and_then(|x| x.strip_suffix("]]")).unwrap_or("").to_string();
            let v: Vec<String> = inner.split(',').map(str::to_string).collect();
            let mut pairs: Vec<(String, String)> =
                v.chunks(2).map(|c| (c[0].clone(), c.get(1).cloned().unwrap_or_default())).collect();
            pairs.sort();
            (reply.starts_with("[0,["), pairs)
        };
        assert_eq!(pairs(&mut p), pairs(&mut r), "{args:?}");
    }
    let (mine, theirs) = (scan_type(&mut p, "zset"), scan_type(&mut r, "zset"));
    assert!(mine.len() > 5, "{mine:?}");
    assert_eq!(mine, theirs);
    both(&mut p, &mut r, &[b"DBSIZE"]);
    // ZRANDMEMBER: members of the set, distinct for a positive count, scores paired.
    let picked = p.cmd(&["ZRANDMEMBER", "fmt", "3", "WITHSCORES"]);
    let v: Vec<&str> = picked.trim_matches(|c| c == '[' || c == ']').split(',').collect();
    assert_eq!(v.len(), 6, "{picked}");
    for pair in v.chunks(2) {
        assert_eq!(p.cmd(&["ZSCORE", "fmt", pair[0]]), pair[1]);
    }
    assert!(v[0] != v[2] && v[2] != v[4] && v[0] != v[4]);
    let seen: std::collections::BTreeSet<String> = (0..200).map(|_| p.cmd(&["ZRANDMEMBER", "fmt"])).collect();
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert_eq!(p.cmd(&["ZRANDMEMBER", "fmt", "-7"]).split(',').count(), 7);
    // Random rounds: writes and reads over three sorted sets with colliding scores.
    let mut rng = XorShift::new(0x25e7);
    let scores = ["0", "1", "1", "2.5", "-3", "inf", "-inf", "7", "0.1", "(1"];
    for _ in 0..3000 {
        let k = format!("r{}", rng.below(3));
        let k2 = format!("r{}", rng.below(3));
        let m = format!("m{}", rng.below(10));
        let sc = scores[rng.below(scores.len() as u64) as usize].trim_start_matches('(');
        let lo = scores[rng.below(scores.len() as u64) as usize];
        let hi = scores[rng.below(scores.len() as u64) as usize];
        let (i, j) = (format!("{}", rng.below(12) as i64 - 6), format!("{}", rng.below(12) as i64 - 6));
        let flag = ["NX", "XX", "GT", "LT", "CH", "CH"][rng.below(6) as usize];
        let (kb, mb, k2b, sb) = (k.as_bytes(), m.as_bytes(), k2.as_bytes(), sc.as_bytes());
        let (lob, hib, ib, jb) = (lo.as_bytes(), hi.as_bytes(), i.as_bytes(), j.as_bytes());
        let cmd: Vec<&[u8]> = match rng.below(22) {
            0..=3 => vec![b"ZADD", kb, sb, mb, b"1", b"m0"],
            4 => vec![b"ZADD", kb, flag.as_bytes(), sb, mb],
            5 => vec![b"ZADD", kb, flag.as_bytes(), b"INCR", sb, mb],
            6 => vec![b"ZINCRBY", kb, sb, mb],
            7 => vec![b"ZREM", kb, mb],
            8 => vec![b"ZRANGE", kb, ib, jb, b"WITHSCORES"],
            9 => vec![b"ZRANGE", kb, lob, hib, b"BYSCORE", b"LIMIT", b"1", b"3"],
            10 => vec![b"ZRANGE", kb, hib, lob, b"BYSCORE", b"REV", b"WITHSCORES"],
            11 => vec![b"ZRANK", kb, mb],
            12 => vec![b"ZREVRANK", kb, mb],
            13 => vec![b"ZCOUNT", kb, lob, hib],
            14 => vec![b"ZREMRANGEBYSCORE", kb, lob, hib],
            15 => vec![b"ZREMRANGEBYRANK", kb, ib, jb],
            16 => vec![b"ZPOPMIN", kb, b"2"],
            17 => vec![b"ZPOPMAX", kb],
            18 => vec![b"ZUNIONSTORE", b"r2", b"2", kb, k2b, b"WEIGHTS", b"2", b"1"],
            19 => vec![b"ZINTER", b"2", kb, k2b, b"AGGREGATE", b"MAX", b"WITHSCORES"],
            20 => vec![b"ZRANGESTORE", k2b, kb, ib, jb, b"REV"],
            _ => vec![b"ZMSCORE", kb, mb, b"m0"],
        };
        both(&mut p, &mut r, &cmd);
    }
    for k in ["r0", "r1", "r2"] {
        both(&mut p, &mut r, &[b"ZRANGE", k.as_bytes(), b"0", b"-1", b"WITHSCORES"]);
    }
    // Blocking pops, served by a ZADD, in blocking order, on both servers.
    fn blocking(port: u16) -> Vec<String> {
        let settle = || std::thread::sleep(std::time::Duration::from_millis(150));
        let (mut a, mut b, mut c) = (Client::new(port), Client::new(port), Client::new(port));
        let mut out = Vec::new();
        a.send(&[b"BZPOPMIN", b"bz", b"other", b"0"]);
        settle();
        b.send(&[b"BZMPOP", b"0", b"1", b"bz", b"MAX", b"COUNT", b"5"]);
        settle();
        out.push(c.cmd(&["ZADD", "bz", "1", "a", "2", "b", "3", "c"]));
        out.push(a.reply());
        out.push(b.reply());
        out.push(c.cmd(&["EXISTS", "bz"]));
        for cmd in [
            &["BZPOPMAX", "none", "0.05"][..],
            &["BZMPOP", "0.05", "1", "none", "MIN"],
            &["BZPOPMIN", "none", "-1"],
            &["SET", "s", "v"],
            &["BZPOPMIN", "s", "0"],
            &["ZADD", "full", "1", "x"],
            &["BZPOPMAX", "none", "full", "0"],
            &["MULTI"],
            &["BZPOPMIN", "none", "0"],
            &["EXEC"],
        ] {
            out.push(c.cmd(cmd));
        }
        out
    }
    let (mine, theirs) = (blocking(s.port), blocking(_redis.port));
    assert_eq!(mine, theirs);
}

/// Redis's 16 databases: SELECT and its errors, each database its own keyspace (KEYS,
/// DBSIZE, EXISTS, types and TTLs), MOVE and COPY … DB between them, SWAPDB, FLUSHDB of
/// one and FLUSHALL of all, MULTI/EXEC that SELECTs, and INFO keyspace's lines.
#[test]
fn databases_answer_as_redis() {
    let Pair { s: _s, _redis, mut p, mut r } = pair("hart");
    run(
        &mut p,
        &mut r,
        &[
            &["SELECT", "16"],
            &["SELECT", "-1"],
            &["SELECT", "x"],
            &["SELECT", "15"],
            &["SET", "k", "in15"],
            &["SELECT", "0"],
            &["GET", "k"],
            &["SET", "k", "in0"],
            &["HSET", "h", "f", "v"],
            &["DBSIZE"],
            &["SELECT", "9"],
            &["DBSIZE"],
            &["EXISTS", "k", "h"],
            &["SET", "a", "1", "EX", "1000"],
            &["RPUSH", "l", "x", "y"],
            &["ZADD", "z", "1", "m"],
            &["SADD", "s", "m"],
            &["HSET", "h", "g", "w"],
            &["DBSIZE"],
            &["TTL", "a"],
            &["TYPE", "l"],
            &["HGETALL", "h"],
            &["SELECT", "0"],
            &["HGETALL", "h"],
            &["EXISTS", "a", "l", "z", "s"],
            // MOVE: to an empty place, onto an existing key, errors.
            &["MOVE", "k", "15"],
            &["MOVE", "k", "3"],
            &["EXISTS", "k"],
            &["MOVE", "nokey", "3"],
            &["MOVE", "h", "0"],
            &["MOVE", "h", "16"],
            &["MOVE", "h", "x"],
            &["MOVE", "h", "9"],
            &["SELECT", "3"],
            &["GET", "k"],
            &["MOVE", "k", "9"],
            &["SELECT", "9"],
            &["GET", "k"],
            &["TTL", "a"],
            &["MOVE", "a", "4"],
            &["SELECT", "4"],
            &["GET", "a"],
            &["PERSIST", "a"],
            // COPY … DB.
            &["COPY", "a", "b", "DB", "5"],
            &["COPY", "a", "b", "DB", "5"],
            &["COPY", "a", "b", "DB", "5", "REPLACE"],
            &["COPY", "a", "a", "DB", "4"],
            &["COPY", "a", "c", "DB", "4"],
            &["COPY", "a", "c", "DB", "99"],
            &["SELECT", "5"],
            &["GET", "b"],
            &["SELECT", "9"],
            &["COPY", "l", "l2", "DB", "6"],
            &["SELECT", "6"],
            &["LRANGE", "l2", "0", "-1"],
            // SWAPDB.
            &["SWAPDB", "6", "7"],
            &["EXISTS", "l2"],
            &["SELECT", "7"],
            &["LRANGE", "l2", "0", "-1"],
            &["SWAPDB", "0", "16"],
            &["SWAPDB", "x", "1"],
            &["SWAPDB", "1", "y"],
            &["SWAPDB", "7", "7"],
            &["SWAPDB", "0", "9"],
            &["SELECT", "0"],
            &["DBSIZE"],
            &["SMEMBERS", "s"],
            &["SELECT", "9"],
            &["DBSIZE"],
            &["GET", "k"],
            &["SWAPDB", "9", "0"],
            // A transaction that SELECTs runs each command in its database.
            &["MULTI"],
            &["SET", "t", "0"],
            &["SELECT", "2"],
            &["SET", "t", "2"],
            &["MOVE", "t", "12"],
            &["SELECT", "12"],
            &["GET", "t"],
            &["EXEC"],
            &["GET", "t"],
            &["SELECT", "2"],
            &["EXISTS", "t"],
            &["SELECT", "0"],
            &["GET", "t"],
            &["SELECT", "12"],
            &["FLUSHDB"],
            &["DBSIZE"],
            &["SELECT", "0"],
            &["DBSIZE"],
        ],
    );
    let info = |c: &mut common::Client| {
        let s = c.cmd(&["INFO", "keyspace"]);
        s.lines()
            .filter(|l| l.starts_with("db"))
            .map(|l| l.split(",avg_ttl").next().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(info(&mut p), info(&mut r));
    assert!(info(&mut p).len() >= 5, "{:?}", info(&mut p));
    run(&mut p, &mut r, &[&["FLUSHALL"], &["DBSIZE"], &["SELECT", "7"], &["DBSIZE"], &["KEYS", "*"]]);
    assert_eq!(info(&mut p), Vec::<String>::new());
    // A script's SELECT changes the script's database only.
    run(
        &mut p,
        &mut r,
        &[
            &["SELECT", "1"],
            &["SET", "k", "in1"],
            &[
                "EVAL",
                "redis.call('SELECT', 3); redis.call('SET', KEYS[1], 'in3'); return redis.call('GET', KEYS[1])",
                "1",
                "k",
            ],
            &["GET", "k"],
            &["EVAL", "redis.call('SELECT', 3); redis.call('SELECT', 1); return redis.call('GET', KEYS[1])", "1", "k"],
            &["EVAL", "return redis.pcall('SELECT', 99)", "0"],
            &["EVAL", "return redis.pcall('SELECT', 'x')", "0"],
            &["SELECT", "3"],
            &["GET", "k"],
            &["DBSIZE"],
        ],
    );
}

/// Ranks of sorted sets large enough to get a rank index (over 128 members), asked after
/// writes of every kind that can change a sorted set's records — the zset commands, DEL,
/// UNLINK, EXPIRE, RENAME, MOVE, COPY, SWAPDB, FLUSHDB, DUMP/RESTORE, MULTI/EXEC
/// with ranks read between its writes — answer as Redis does: the index is kept by each
/// write or dropped, never stale.
#[test]
fn ranks_after_every_kind_of_write_answer_as_redis() {
    let Pair { s: _s, _redis, mut p, mut r } = pair("hart");
    let mut rng = XorShift::new(0x61_61);
    let keys = ["big", "big2"];
    let fill = |p: &mut Client, r: &mut Client, k: &str, n: usize, rng: &mut XorShift| {
        let mut cmd: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), k.as_bytes().to_vec()];
        for i in 0..n {
            cmd.push(format!("{}", rng.below(50) as f64 / 2.0).into_bytes());
            cmd.push(format!("m{i}").into_bytes());
        }
        let a: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
        both(p, r, &a);
    };
    for k in keys {
        fill(&mut p, &mut r, k, 400, &mut rng);
    }
    let mut kinds = std::collections::BTreeSet::new();
    for round in 0..1500 {
        let k = keys[rng.below(2) as usize];
        let k2 = keys[rng.below(2) as usize];
        let m = format!("m{}", rng.below(450));
        let sc = format!("{}", rng.below(60) as f64 / 2.0 - 5.0);
        let (i, j) = (format!("{}", rng.below(400)), format!("{}", rng.below(30) as i64 - 30));
        let kind = rng.below(24);
        kinds.insert(kind);
        let cmds: Vec<Vec<&str>> = match kind {
            0..=3 => vec![vec!["ZADD", k, &sc, &m, "3", "m1"]],
            4 => vec![vec!["ZINCRBY", k, &sc, &m]],
            5 => vec![vec!["ZREM", k, &m, "m2"]],
            6 => vec![vec!["ZPOPMIN", k, "3"]],
            7 => vec![vec!["ZPOPMAX", k]],
            8 => vec![vec!["ZREMRANGEBYRANK", k, &i, &j]],
            9 => vec![vec!["ZREMRANGEBYSCORE", k, &sc, "+inf"]],
            10 => vec![vec!["ZRANGESTORE", k2, k, "0", &i]],
            11 => vec![vec!["ZUNIONSTORE", k2, "2", k, k2, "WEIGHTS", "2", "1"]],
            12 => vec![vec![["DEL", "UNLINK"][rng.below(2) as usize], k]],
            13 => vec![vec!["RENAME", k, k2]],
            14 => vec![
                vec!["MOVE", k, "1"],
                vec!["SELECT", "1"],
                vec!["RENAME", k, k2],
                vec!["MOVE", k2, "0"],
                vec!["SELECT", "0"],
            ],
            15 => vec![vec!["COPY", k, k2, "REPLACE"]],
            16 => vec![vec!["COPY", k, k2, "DB", "1"], vec!["SWAPDB", "0", "1"]],
            17 => vec![vec!["PEXPIRE", k, "1"], vec!["DEBUG", "SLEEP", "0.01"]],
            // pmkv's DUMP has no zset form yet: RESTORE a string over the sorted set.
            18 => vec![vec!["SET", "str", &sc], vec!["RESTORE", k, "str"]],
            19 => vec![
                vec!["MULTI"],
                vec!["ZADD", k, &sc, &m],
                vec!["ZRANK", k, &m],
                vec!["ZREM", k, "m5"],
                vec!["ZREVRANK", k, "m7"],
                vec!["ZRANGE", k, &i, &j],
                vec!["EXEC"],
            ],
            20 => vec![vec!["FLUSHDB"]],
            21 => vec![vec!["SET", k, "v"]],
            _ => vec![vec!["ZADD", k, "GT", "CH", &sc, &m, &sc, "m3"]],
        };
        for c in &cmds {
            // DEBUG SLEEP: only a pause (its reply is the same, pmkv may not have it).
            if c[0] == "DEBUG" {
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
            // RESTORE dst src: each server restores its own DUMP of src (their payloads differ).
            if c[0] == "RESTORE" {
                let (dp, dr) = (p.bulk(&[b"DUMP", c[2].as_bytes()]), r.bulk(&[b"DUMP", c[2].as_bytes()]));
                assert_eq!(dp.is_some(), dr.is_some());
                if let (Some(dp), Some(dr)) = (dp, dr) {
                    let (a, b) = (
                        p.try_cmd(&[b"RESTORE", c[1].as_bytes(), b"0", &dp, b"REPLACE"]),
                        r.try_cmd(&[b"RESTORE", c[1].as_bytes(), b"0", &dr, b"REPLACE"]),
                    );
                    assert_eq!(a, b);
                }
                continue;
            }
            let a: Vec<&[u8]> = c.iter().map(|s| s.as_bytes()).collect();
            both(&mut p, &mut r, &a);
        }
        for k in keys {
            // Refill what was emptied, so that the sets stay large.
            let card: i64 = p.cmd(&["ZCARD", k]).trim_start_matches(':').parse().unwrap_or(0);
            if card < 200 {
                both(&mut p, &mut r, &[b"DEL", k.as_bytes()]);
                fill(&mut p, &mut r, k, 300 + rng.below(200) as usize, &mut rng);
            }
            let probe = format!("m{}", rng.below(450));
            let from = format!("{}", 150 + rng.below(50));
            let to = format!("{}", 170 + rng.below(50));
            for q in [
                vec!["ZRANK", k, &probe],
                vec!["ZREVRANK", k, &probe],
                vec!["ZRANGE", k, &from, &to, "WITHSCORES"],
                vec!["ZRANGE", k, &from, &to, "REV"],
            ] {
                let a: Vec<&[u8]> = q.iter().map(|s| s.as_bytes()).collect();
                let got = both(&mut p, &mut r, &a);
                assert!(!got.starts_with('-'), "round {round}: {q:?} failed: {got}");
            }
        }
    }
    assert_eq!(kinds.len(), 24, "every kind of write ran");
}

#[test]
fn object_sort_and_config_answer_as_redis() {
    let Pair { s: _s, _redis, mut p, mut r } = pair("hart");
    let long = "x".repeat(65);
    run(
        &mut p,
        &mut r,
        &[
            // OBJECT: Redis 7.0's encoding names, shared integers, its errors.
            &["SET", "a", "123"],
            &["SET", "n", "-5"],
            &["SET", "b", "hello"],
            &["SET", "big", &long],
            &["SET", "z0", "007"],
            &["SET", "huge", "12345678901234567890"],
            &["OBJECT", "ENCODING", "a"],
            &["OBJECT", "ENCODING", "n"],
            &["OBJECT", "ENCODING", "b"],
            &["OBJECT", "ENCODING", "big"],
            &["OBJECT", "ENCODING", "z0"],
            &["OBJECT", "ENCODING", "huge"],
            &["OBJECT", "REFCOUNT", "a"],
            &["OBJECT", "REFCOUNT", "n"],
            &["OBJECT", "REFCOUNT", "b"],
            &["OBJECT", "ENCODING", "nokey"],
            &["OBJECT", "REFCOUNT", "nokey"],
            &["OBJECT", "FREQ", "nokey"],
            &["OBJECT", "FREQ", "a"],
            &["OBJECT", "FOO", "a"],
            &["OBJECT"],
            &["OBJECT", "ENCODING"],
            &["OBJECT", "ENCODING", "a", "b"],
            &["OBJECT", "HELP"],
            &["OBJECT", "HELP", "x"],
            &["RPUSH", "l", "3", "1", "2", "10"],
            &["SADD", "si", "1", "2"],
            &["SADD", "st", "b", "a", "c"],
            &["ZADD", "z", "3", "a", "1", "b", "2", "c"],
            &["HSET", "h", "f", "v"],
            &["HSET", "hbig", "f", &long],
            &["OBJECT", "ENCODING", "l"],
            &["OBJECT", "ENCODING", "si"],
            &["OBJECT", "ENCODING", "st"],
            &["OBJECT", "ENCODING", "z"],
            &["OBJECT", "ENCODING", "h"],
            &["OBJECT", "ENCODING", "hbig"],
            &["OBJECT", "REFCOUNT", "l"],
            // SORT and SORT_RO: numeric, ALPHA, DESC, LIMIT, BY/GET patterns, nosort.
            &["SORT", "l"],
            &["SORT", "l", "DESC", "LIMIT", "1", "2"],
            &["SORT", "l", "ALPHA"],
            &["SORT", "l", "LIMIT", "-5", "-1"],
            &["SET", "w_1", "30"],
            &["SET", "w_2", "20"],
            &["HSET", "h_3", "f", "x"],
            &["SORT", "l", "BY", "w_*", "GET", "#", "GET", "h_*->f", "GET", "w_*"],
            &["SORT", "l", "BY", "h_*->f", "ALPHA"],
            &["SORT", "l", "BY", "nosort"],
            &["SORT", "st", "ALPHA"],
            &["SORT", "st"],
            &["SORT", "z", "BY", "nosort", "DESC"],
            &["SORT", "z", "BY", "nosort", "LIMIT", "0", "2"],
            &["SORT_RO", "l", "DESC"],
            &["SORT", "b"],
            &["SORT", "nokey"],
            &["SORT", "l", "BOGUS"],
            &["SORT", "l", "LIMIT", "x", "1"],
            &["SORT_RO", "l", "STORE", "x"],
            &["SORT"],
            // STORE: a list (over another type), or the destination deleted.
            &["SORT", "l", "STORE", "h"],
            &["TYPE", "h"],
            &["LRANGE", "h", "0", "-1"],
            &["SORT", "st", "ALPHA", "GET", "#", "GET", "nope_*", "STORE", "d"],
            &["LRANGE", "d", "0", "-1"],
            &["SORT", "nokey", "STORE", "d"],
            &["EXISTS", "d"],
            &["EVAL", "return redis.call('SORT', KEYS[1], 'DESC')", "1", "si"],
            // CONFIG's refusals.
            &["CONFIG", "GET_XX"],
            &["CONFIG", "GET"],
            &["CONFIG", "SET", "a"],
            &["CONFIG", "RESETSTAT", "x"],
            &["CONFIG", "RESETSTAT"],
        ],
    );
    // A SORT … STORE that empties an existing key fails the WATCH on it.
    run(
        &mut p,
        &mut r,
        &[&["LPUSH", "foo", "bar"], &["WATCH", "foo"], &["SORT", "emptylist", "STORE", "foo"], &["MULTI"], &["PING"]],
    );
    assert_eq!(both(&mut p, &mut r, &[b"EXEC"]), "(nil)");
}

#[test]
fn function_and_script_error_texts_answer_as_redis() {
    let Pair { s: _s, _redis, mut p, mut r } = pair("hart");
    let reg = "#!lua name=test\nredis.register_function('test', function() return 'hello' end)";
    run(
        &mut p,
        &mut r,
        &[
            &["FUNCTION", "LOAD", "x", "y", "z"],
            &["FUNCTION", "LOAD", "REPLACE", "x", "#!lua name=a"],
            &["FUNCTION", "FLUSH", "x", "y"],
            &["FUNCTION", "LOAD", "#! name=test\nredis.register_function('f', function() end)"],
            &["FUNCTION", "LOAD", "#!lua name=foo name=bar\nredis.register_function('f', function() end)"],
            &["FUNCTION", "LOAD", "redis.register_function('f', function() end)"],
            &["FUNCTION", "LOAD", "#!lua x=1\nredis.register_function('f', function() end)"],
            &["FUNCTION", "LOAD", "#!lua name=\"foo\"\nredis.register_function('f', function() end)"],
            &["FUNCTION", "LOAD", "#!lua name=t1\nlocal a = 1 script"],
            &["FUNCTION", "LOAD", reg],
            &["FCALL", "TEST", "0"],
            &["FCALL", "test", "bad_arg"],
            &["FCALL", "test", "-1"],
            &["FCALL", "test", "5", "a"],
            &["FUNCTION", "KILL"],
            &["SCRIPT", "KILL"],
            &["EVAL", "return 1", "bad_arg"],
            &["EVAL", "return redis.error_reply('')", "0"],
            &["EVAL", "return redis.error_reply('x')", "0"],
            &["EVAL", "return redis.error_reply('MY_CODE custom msg')", "0"],
            &["EVAL", "return redis.call('ping', 'asdf')", "0"],
            &[
                "FUNCTION",
                "LOAD",
                "REPLACE",
                "#!lua name=v\nredis.log(redis.LOG_WARNING, 'x')\nlocal v = redis.REDIS_VERSION_NUM\n\
                 redis.register_function('v', function() return 1 end)",
            ],
        ],
    );
    // redis.register_function's argument errors: pmkv words the wrapper around them
    // its own way ("Error registering functions: ..."); the reason is Redis's.
    for (body, why) in [
        ("redis.register_function('f', 1)", "second argument to redis.register_function must be a function"),
        ("redis.register_function('f')", "calling redis.register_function with a single argument is only applicable"),
        ("redis.register_function(nil, function() end)", "first argument to redis.register_function must be a string"),
        ("redis.register_function('a-b', function() end)", "Library names can only contain letters"),
        (
            "redis.register_function{function_name={}, callback=function() end}",
            "function_name argument given to redis.register_function must be a string",
        ),
        (
            "redis.register_function{function_name='f', callback=1}",
            "callback argument given to redis.register_function",
        ),
        (
            "redis.register_function{function_name='f', callback=function() end, description={}}",
            "description argument given to redis.register_function must be a string",
        ),
        ("redis.register_function{function_name='f', callback=function() end, flags='x'}", "flags argument to"),
        ("redis.register_function{function_name='f', callback=function() end, flags={1}}", "unknown flag given"),
        // What a loading library sees: `redis` with register_function and logging only.
        ("local x = math.pi", "Script attempted to access nonexistent global variable 'math'"),
        ("local x = redis.sha1hex", "Script attempted to access nonexistent global variable 'sha1hex'"),
        ("redis.set_repl(redis.REPL_ALL)", "Script attempted to access nonexistent global variable 'set_repl'"),
        ("redis.call('ping')", "Script attempted to access nonexistent global variable 'call'"),
        ("getmetatable('')", "Script attempted to access nonexistent global variable 'getmetatable'"),
    ] {
        let code = format!("#!lua name=t3\n{body}");
        let (a, b) = (p.cmd(&["FUNCTION", "LOAD", &code]), r.cmd(&["FUNCTION", "LOAD", &code]));
        assert!(a.contains(why) && b.contains(why), "{body}: pmkv {a:?}, redis-server {b:?}");
    }
}
