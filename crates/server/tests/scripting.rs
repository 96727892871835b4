//! The scripting sandbox and script lifetimes, over the network as a client meets them:
//! every escape Redis closed is closed (bytecode, files, stdout, the environment,
//! writable globals), results that nest too deep or refer to themselves are an error and
//! the server lives on, a script stopped by SCRIPT KILL or by the time limit leaves none
//! of its writes, other clients get BUSY meanwhile, and the `#!lua` flags, EVAL_RO and the
//! `redis` helpers behave as in Redis 7.0. The replies that Redis and pmkv should share are
//! compared with a real `redis-server` (Debian's package, which `.ci/run` installs).

mod common;

use common::{Client, RealRedis};
use pmkv_server::Config;
use std::time::{Duration, Instant};

fn start() -> common::Running {
    common::start("hart", 16, Config { threads: 2, ..Config::default() })
}

fn eval(c: &mut Client, src: &str) -> String {
    c.cmd(&["EVAL", src, "0"])
}

#[test]
fn every_sandbox_escape_is_refused() {
    let srv = start();
    let mut c = srv.client();
    // Bytecode: string.dump works, loading its output does not (Redis's behaviour and
    // error, "attempt to call a nil value").
    let r = eval(&mut c, "return loadstring(string.dump(function() return 1 end))()");
    assert!(r.starts_with("-ERR") && r.contains("attempt to call a nil value"), "{r}");
    let r = eval(&mut c, "local f, e = loadstring(string.dump(function() return 1 end)) return e");
    assert!(r.contains("binary"), "{r}");
    assert_eq!(eval(&mut c, "return loadstring('return 7')()"), ":7", "source text still loads");
    // Files, stdout, environments.
    for f in ["dofile('/etc/passwd')", "loadfile('/etc/passwd')", "print('x')", "getfenv(0)", "setfenv(1, {})"] {
        let name = &f[..f.find('(').unwrap()];
        let r = eval(&mut c, f);
        assert!(r.contains(&format!("Script attempted to access nonexistent global variable '{name}'")), "{f}: {r}");
    }
    for lib in ["io", "os", "debug", "package", "require"] {
        let r = eval(&mut c, &format!("return {lib}"));
        assert!(r.contains("nonexistent global variable"), "{lib}: {r}");
    }
    // Globals and libraries are read-only.
    for src in [
        "a = 1",
        "_G = {}",
        "redis = function() return 1 end",
        "redis.call = function() return 1 end",
        "setmetatable(_G, {})",
        "local g = getmetatable(_G) g.__index = {}",
        "rawset(_G, 'x', 1)",
        "string.rep = nil",
        "loadstring('y = 2')()",
    ] {
        let r = eval(&mut c, src);
        assert!(r.contains("Attempt to modify a readonly table"), "{src}: {r}");
    }
    assert!(eval(&mut c, "return undeclared").contains("attempted to access nonexistent global variable"));
    assert_eq!(c.cmd(&["PING"]), "+PONG");
}

#[test]
fn deep_and_self_referencing_results_are_errors_not_crashes() {
    let srv = start();
    let mut c = srv.client();
    for src in [
        "local a = {} local b = {a} a[1] = b return a",
        "local t = {} local c = t for i = 1, 7000 do c[1] = {} c = c[1] end return t",
    ] {
        let r = eval(&mut c, src);
        assert!(r.ends_with("-ERR reached lua stack limit") || r.contains("-ERR reached lua stack limit]"), "{src}");
        assert!(r.starts_with("[[[["), "nested arrays down to the error, as Redis sends");
        assert_eq!(c.cmd(&["PING"]), "+PONG", "the connection and the server live on");
    }
    // Deep structures inside the script are fine; only the reply is bounded.
    assert_eq!(eval(&mut c, "local t = {} local c = t for i = 1, 7000 do c[1] = {} c = c[1] end return 1"), ":1");
}

#[test]
fn a_script_stopped_at_the_time_limit_leaves_nothing() {
    let srv = start();
    let mut c = srv.client();
    assert_eq!(c.cmd(&["CONFIG", "SET", "pmkv-script-time-limit", "300"]), "+OK");
    assert_eq!(c.cmd(&["CONFIG", "GET", "pmkv-script-time-limit"]), "[pmkv-script-time-limit,300]");
    let t = Instant::now();
    let r = c.cmd(&["EVAL", "redis.call('SET', KEYS[1], 'partial') while true do end", "1", "x"]);
    assert!(r.contains("pmkv-script-time-limit") && r.contains("none of its writes"), "{r}");
    assert!(t.elapsed() < Duration::from_secs(20));
    assert_eq!(c.cmd(&["GET", "x"]), "(nil)", "no half of a stopped script");
    // Even when the script catches errors with pcall.
    let r = c.cmd(&[
        "EVAL",
        "redis.call('SET', KEYS[1], 'p') while true do pcall(function() while true do end end) end",
        "1",
        "x",
    ]);
    assert!(r.contains("pmkv-script-time-limit"), "{r}");
    assert_eq!(c.cmd(&["GET", "x"]), "(nil)");
    // Or loops inside a coroutine (created by the script, not by the server).
    for src in [
        "redis.call('SET', KEYS[1], 'p') coroutine.wrap(function() while true do end end)()",
        "redis.call('SET', KEYS[1], 'p') local co = coroutine.create(function() while true do end end) \
         while true do coroutine.resume(co) end",
    ] {
        let r = c.cmd(&["EVAL", src, "1", "x"]);
        assert!(r.contains("pmkv-script-time-limit"), "{src}: {r}");
        assert_eq!(c.cmd(&["GET", "x"]), "(nil)");
    }
    // Recursion ends in Lua's own errors, never the server's stack.
    assert!(c.cmd(&["EVAL", "local function f() f() end f()", "0"]).contains("stack overflow"));
    let r = c.cmd(&[
        "EVAL",
        "local t = setmetatable({}, {}) getmetatable(t).__index = function(t, k) return t[k] end return t.x",
        "0",
    ]);
    assert!(r.starts_with("-ERR") && r.contains("stack overflow"), "{r}");
    assert_eq!(c.cmd(&["PING"]), "+PONG");
    // A script that ends in an ordinary error keeps its earlier writes, as in Redis.
    assert!(c.cmd(&["EVAL", "redis.call('SET', KEYS[1], 'kept') error('boom')", "1", "x"]).starts_with("-ERR"));
    assert_eq!(c.cmd(&["GET", "x"]), "kept");
}

#[test]
fn a_long_script_makes_others_busy_until_script_kill() {
    let srv = start();
    let mut a = srv.client();
    let mut b = srv.client();
    assert_eq!(b.cmd(&["SCRIPT", "KILL"]), "-NOTBUSY No scripts in execution right now.");
    assert_eq!(b.cmd(&["CONFIG", "SET", "lua-time-limit", "10"]), "+OK");
    assert_eq!(b.cmd(&["CONFIG", "GET", "busy-reply-threshold"]), "[busy-reply-threshold,10]");
    // A script that wrote and then loops: Redis could not kill it (UNKILLABLE); pmkv
    // drops its writes and kills it.
    a.send(&[b"EVAL", b"redis.call('SET', KEYS[1], 'y') while true do end", b"1", b"x"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = b.cmd(&["PING"]);
        if r.starts_with("-BUSY") {
            break;
        }
        assert!(Instant::now() < deadline, "never BUSY: {r}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(b.cmd(&["GET", "x"]).starts_with("-BUSY"), "data commands too");
    assert!(b.cmd(&["SET", "z", "1"]).starts_with("-BUSY"));
    assert_eq!(b.cmd(&["SCRIPT", "KILL"]), "+OK");
    let r = a.reply();
    assert!(r.contains("killed by user") && r.contains("none of its writes"), "{r}");
    assert_eq!(b.cmd(&["PING"]), "+PONG");
    assert_eq!(b.cmd(&["GET", "x"]), "(nil)", "the killed script's write is gone");
    assert_eq!(b.cmd(&["GET", "z"]), "(nil)", "the refused SET never ran");
    assert_eq!(a.cmd(&["PING"]), "+PONG", "the script's connection is usable");
}

/// A transaction that meets a busy script runs whole or not at all: MULTI is accepted,
/// a refused command inside fails the EXEC (EXECABORT), a refused EXEC discards the
/// transaction; after SCRIPT KILL the connection is out of MULTI (Redis's multi unit,
/// "MULTI and script timeout", "EXEC and script timeout").
#[test]
fn a_transaction_that_meets_a_busy_script_runs_whole_or_not_at_all() {
    let srv = start();
    let (mut a, mut b, mut k) = (srv.client(), srv.client(), srv.client());
    assert_eq!(k.cmd(&["CONFIG", "SET", "lua-time-limit", "10"]), "+OK");
    let busy = |k: &mut Client| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !k.cmd(&["PING"]).starts_with("-BUSY") {
            assert!(Instant::now() < deadline, "never BUSY");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // MULTI arrives while busy.
    assert_eq!(k.cmd(&["SET", "xx", "1"]), "+OK");
    a.send(&[b"EVAL", b"while true do end", b"0"]);
    busy(&mut k);
    assert_eq!(b.cmd(&["MULTI"]), "+OK");
    assert!(b.cmd(&["INCR", "xx"]).starts_with("-BUSY"));
    assert_eq!(k.cmd(&["SCRIPT", "KILL"]), "+OK");
    a.reply();
    assert_eq!(b.cmd(&["INCR", "xx"]), "+QUEUED");
    assert!(b.cmd(&["EXEC"]).starts_with("-EXECABORT Transaction discarded because of previous errors"));
    assert_eq!(k.cmd(&["GET", "xx"]), "1");
    assert_eq!(b.cmd(&["PING", "asdf"]), "asdf", "out of MULTI");
    // EXEC arrives while busy.
    assert_eq!(b.cmd(&["MULTI"]), "+OK");
    assert_eq!(b.cmd(&["INCR", "xx"]), "+QUEUED");
    a.send(&[b"EVAL", b"while true do end", b"0"]);
    busy(&mut k);
    assert!(b.cmd(&["INCR", "xx"]).starts_with("-BUSY"));
    let r = b.cmd(&["EXEC"]);
    assert!(r.starts_with("-EXECABORT Transaction discarded because of: BUSY"), "{r}");
    assert_eq!(k.cmd(&["SCRIPT", "KILL"]), "+OK");
    a.reply();
    assert_eq!(k.cmd(&["GET", "xx"]), "1");
    assert_eq!(b.cmd(&["PING", "asdf"]), "asdf", "out of MULTI");
}

#[test]
fn shebang_flags_and_read_only_scripts() {
    let srv = start();
    let mut c = srv.client();
    assert_eq!(c.cmd(&["EVAL", "#!lua\nreturn 1", "0"]), ":1");
    assert!(c.cmd(&["EVAL", "#!not-lua\nreturn 1", "0"]).contains("Unexpected engine in script shebang"));
    assert!(c.cmd(&["EVAL", "#!lua badger=data\nreturn 1", "0"]).contains("Unknown lua shebang option"));
    assert!(c
        .cmd(&["EVAL", "#!lua flags=allow-oom,what?\nreturn 1", "0"])
        .contains("Unexpected flag in script shebang"));
    let w = "redis.call('set', KEYS[1], 1) return 1";
    assert!(c
        .cmd(&["EVAL", &format!("#!lua flags=no-writes\n{w}"), "1", "x"])
        .starts_with("-ERR Write commands are not allowed from read-only scripts"));
    assert!(c.cmd(&["EVAL_RO", w, "1", "x"]).starts_with("-ERR Write commands are not allowed from read-only scripts"));
    assert_eq!(c.cmd(&["GET", "x"]), "(nil)");
    assert_eq!(c.cmd(&["SET", "x", "v"]), "+OK");
    assert_eq!(c.cmd(&["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "x"]), "v");
    let sha = c.cmd(&["SCRIPT", "LOAD", "return redis.call('get', KEYS[1])"]);
    assert_eq!(c.cmd(&["EVALSHA_RO", &sha, "1", "x"]), "v");
    // Line numbers survive the shebang.
    assert!(c.cmd(&["EVAL", "#!lua\n\nerror('here')", "0"]).contains("user_script:3:"));
}

#[test]
fn redis_helpers() {
    let srv = start();
    let mut c = srv.client();
    assert_eq!(eval(&mut c, "return redis.sha1hex('')"), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    assert_eq!(eval(&mut c, "return redis.sha1hex('Pizza & Mandolino')"), "74822d82031af7493c20eefa13bd07ec4fada82f");
    assert_eq!(eval(&mut c, "return redis.breakpoint()"), "(nil)");
    assert_eq!(eval(&mut c, "redis.debug('x') redis.log(redis.LOG_DEBUG, 'quiet') return 1"), ":1");
    assert!(eval(&mut c, "redis.log(9, 'x')").contains("Invalid debug level"));
    assert_eq!(eval(&mut c, "redis.set_repl(redis.REPL_ALL) return redis.replicate_commands()"), ":1");
    assert!(eval(&mut c, "redis.set_repl(12345)").contains("Invalid replication flags"));
    assert!(eval(&mut c, "redis.setresp(4)").contains("RESP version must be 2 or 3"));
    assert_eq!(c.cmd(&["HSET", "h", "f", "v"]), ":1");
    assert_eq!(c.cmd(&["EVAL", "return redis.call('hgetall', KEYS[1])", "1", "h"]), "[f,v]");
    assert_eq!(
        c.cmd(&["EVAL", "redis.setresp(3) local m = redis.call('hgetall', KEYS[1]) return m.map.f", "1", "h"]),
        "v"
    );
    // Nil in RESP3 is nil to Lua, in RESP2 false.
    assert_eq!(eval(&mut c, "return redis.call('get', 'nope') == false"), ":1");
    assert_eq!(eval(&mut c, "redis.setresp(3) return redis.call('get', 'nope') == nil"), ":1");
}

/// The same sandbox probes against a real `redis-server` (Debian's 7.0): the error class
/// of each must match pmkv's, and plain results must be equal.
#[test]
fn sandbox_answers_as_real_redis_does() {
    let redis = RealRedis::start();
    let srv = start();
    let mut p = srv.client();
    let mut r = Client::new(redis.port);
    let class = |s: &str| -> &'static str {
        for k in ["attempt to call a nil value", "nonexistent global variable", "Attempt to modify a readonly table"] {
            if s.contains(k) {
                return k;
            }
        }
        if s.starts_with('-') {
            "other error"
        } else {
            "no error"
        }
    };
    for src in [
        "return loadstring(string.dump(function() return 1 end))()",
        "dofile('/etc/passwd')",
        "loadfile('/etc/passwd')",
        "print('x')",
        "a = 1",
        "redis.call = nil",
        "setmetatable(_G, {})",
        "local g = getmetatable(_G) g.__index = {}",
        "return nosuch",
        // (Not the self-referencing result: Redis nests it ~8,000 deep, past what this
        // test's recursive reply reader holds on its stack; pmkv stops at 1,000.)
        "return redis.sha1hex('abc')",
        "return {1, 2, {3, 'x'}}",
    ] {
        let (rp, rr) = (eval(&mut p, src), eval(&mut r, src));
        assert_eq!(class(&rp), class(&rr), "{src}\n  pmkv:  {rp}\n  redis: {rr}");
        if !rr.starts_with('-') {
            assert_eq!(rp, rr, "{src}");
        }
    }
}
