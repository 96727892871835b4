//! The server driven over TCP on loopback: commands and their replies, RESP3, AUTH,
//! atomic read-modify-writes under concurrent clients, 10,000 pipelined commands, and
//! adversarial input (after which a new client still gets PONG).

mod common;

use common::Client;
use pmkv::{Options, Store};
use pmkv_server::{Config, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn start(password: Option<&str>) -> (u16, impl Fn(), std::thread::JoinHandle<pmkv::Result<()>>, tempfile::TempDir) {
    let dir = pmkv_testutil::pool_dir();
    let store = Store::open(dir.path().join("s.pool"), "hart", &Options::default().initial_size(16 << 20)).unwrap();
    // Four workers whatever the machine (the default is half the cores, one here): the
    // concurrency tests must run connections on several threads at once.
    let cfg = Config { port: 0, password: password.map(str::to_string), threads: 4, ..Config::default() };
    let srv = Server::bind(store, "adr", cfg).unwrap();
    let (port, stop) = (srv.port(), srv.stopper());
    let h = std::thread::spawn(move || srv.run(false));
    (port, stop, h, dir)
}

#[test]
fn u3_commands_reply_as_redis_does() {
    let (port, stop, h, _d) = start(None);
    let mut c = Client::new(port);
    assert_eq!(c.cmd(&["PING"]), "+PONG");
    assert_eq!(c.cmd(&["ECHO", "hi"]), "hi");
    assert_eq!(c.cmd(&["SET", "k", "v"]), "+OK");
    assert_eq!(c.cmd(&["GET", "k"]), "v");
    assert_eq!(c.cmd(&["GET", "nope"]), "(nil)");
    assert_eq!(c.cmd(&["SET", "k", "w", "NX"]), "(nil)");
    assert_eq!(c.cmd(&["SET", "k", "w", "XX", "GET"]), "v");
    assert_eq!(c.cmd(&["SET", "n", "1", "XX"]), "(nil)");
    assert_eq!(c.cmd(&["SET", "k", "v", "EX", "10"]), "+OK");
    assert_eq!(c.cmd(&["TTL", "k"]), ":10");
    assert_eq!(c.cmd(&["PERSIST", "k"]), ":1");
    assert_eq!(c.cmd(&["TTL", "k"]), ":-1");
    assert_eq!(c.cmd(&["SETNX", "k", "x"]), ":0");
    assert_eq!(c.cmd(&["SETNX", "k2", "x"]), ":1");
    assert_eq!(c.cmd(&["GETSET", "k2", "y"]), "x");
    assert_eq!(c.cmd(&["GETDEL", "k2"]), "y");
    assert_eq!(c.cmd(&["EXISTS", "k", "k2", "k"]), ":2");
    assert_eq!(c.cmd(&["MSET", "a", "1", "b", "2"]), "+OK");
    assert_eq!(c.cmd(&["MGET", "a", "nope", "b"]), "[1,(nil),2]");
    assert_eq!(c.cmd(&["INCR", "a"]), ":2");
    assert_eq!(c.cmd(&["INCRBY", "a", "10"]), ":12");
    assert_eq!(c.cmd(&["DECRBY", "a", "5"]), ":7");
    assert_eq!(c.cmd(&["DECR", "new"]), ":-1");
    assert!(c.cmd(&["INCR", "k"]).starts_with("-ERR value is not an integer"));
    assert_eq!(c.cmd(&["APPEND", "k", "xyz"]), ":4");
    assert_eq!(c.cmd(&["STRLEN", "k"]), ":4");
    assert_eq!(c.cmd(&["TYPE", "k"]), "+string");
    assert_eq!(c.cmd(&["TYPE", "nope"]), "+none");
    assert_eq!(c.cmd(&["DBSIZE"]), ":4");
    assert_eq!(c.cmd(&["KEYS", "*"]), "[a,b,k,new]");
    assert_eq!(c.cmd(&["KEYS", "?"]), "[a,b,k]");
    assert_eq!(c.cmd(&["PMKV.RANGE", "a", "k", "10"]), "[a,7,b,2]");
    assert_eq!(c.cmd(&["SCAN", "0", "COUNT", "2"]), "[1,[a,b]]");
    assert_eq!(c.cmd(&["SCAN", "1", "COUNT", "2"]), "[2,[k,new]]");
    assert_eq!(c.cmd(&["SCAN", "2", "COUNT", "2"]), "[0,[]]");
    assert_eq!(c.cmd(&["SCAN", "0", "MATCH", "n*"]), "[0,[new]]");
    assert_eq!(c.cmd(&["DEL", "a", "b", "nope"]), ":2");
    assert_eq!(c.cmd(&["SELECT", "0"]), "+OK");
    assert_eq!(c.cmd(&["SELECT", "16"]), "-ERR DB index is out of range");
    assert_eq!(c.cmd(&["SELECT", "1"]), "+OK");
    assert_eq!(c.cmd(&["DBSIZE"]), ":0");
    assert_eq!(c.cmd(&["SELECT", "0"]), "+OK");
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "me"]), "+OK");
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), "me");
    assert!(c.cmd(&["INFO"]).contains("pmkv_engine:hart"));
    assert!(c.cmd(&["CONFIG", "GET", "save"]).starts_with("[save,"));
    assert_eq!(c.cmd(&["COMMAND", "DOCS"]), "[]");
    assert!(c.cmd(&["NOSUCH", "x"]).starts_with("-ERR unknown command 'NOSUCH'"));
    assert!(c.cmd(&["GET"]).starts_with("-ERR wrong number of arguments"));
    // RESP3.
    let hello = c.cmd(&["HELLO", "3"]);
    assert!(hello.starts_with("[server,pmkv,") && hello.contains("proto,:3"), "{hello}");
    assert_eq!(c.cmd(&["GET", "nope"]), "(nil)");
    assert_eq!(c.cmd(&["FLUSHDB"]), "+OK");
    assert_eq!(c.cmd(&["DBSIZE"]), ":0");
    assert_eq!(c.cmd(&["QUIT"]), "+OK");
    stop();
    h.join().unwrap().unwrap();
}

#[test]
fn u3_auth_is_required_when_configured() {
    let (port, stop, h, _d) = start(Some("s3cret"));
    let mut c = Client::new(port);
    assert!(c.cmd(&["GET", "k"]).starts_with("-NOAUTH"));
    assert!(c.cmd(&["AUTH", "wrong"]).starts_with("-WRONGPASS"));
    assert_eq!(c.cmd(&["AUTH", "s3cret"]), "+OK");
    assert_eq!(c.cmd(&["SET", "k", "v"]), "+OK");
    stop();
    h.join().unwrap().unwrap();
    // A non-loopback address without a password is refused.
    let dir = pmkv_testutil::pool_dir();
    let store = Store::open(dir.path().join("x.pool"), "hart", &Options::default()).unwrap();
    let cfg = Config { bind: "0.0.0.0".into(), port: 0, ..Config::default() };
    assert!(Server::bind(store, "adr", cfg).is_err());
}

#[test]
fn u3_read_modify_writes_are_atomic_under_concurrent_clients() {
    let (port, stop, h, _d) = start(None);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = Client::new(port);
                for i in 0..300 {
                    c.cmd(&["INCR", "counter"]);
                    c.cmd(&["APPEND", "log", "x"]);
                    assert_eq!(c.cmd(&["SETNX", &format!("once-{i}"), &t.to_string()]).len(), 2);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = Client::new(port);
    assert_eq!(c.cmd(&["GET", "counter"]), "1200");
    assert_eq!(c.cmd(&["STRLEN", "log"]), ":1200");
    assert_eq!(c.cmd(&["DBSIZE"]), ":302");
    stop();
    h.join().unwrap().unwrap();
}

#[test]
fn u3_pipelines_and_bad_input_leave_the_server_serving() {
    let (port, stop, h, _d) = start(None);
    // 10,000 pipelined commands in one write.
    let mut c = Client::new(port);
    let mut b = Vec::new();
    for i in 0..10_000 {
        let (k, v) = (format!("p{i}"), i.to_string());
        b.extend_from_slice(format!("*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n", k.len(), v.len()).as_bytes());
    }
    c.w.write_all(&b).unwrap();
    for _ in 0..10_000 {
        assert_eq!(c.reply(), "+OK");
    }
    assert_eq!(c.cmd(&["DBSIZE"]), ":10000");
    // Adversarial input: each on its own connection, which gets an error and is closed.
    let bad: Vec<&[u8]> = vec![
        b"*-1\r\n*1000000000\r\n",
        b"*1\r\n$999999999999\r\n",
        b"*1\r\n$-7\r\n",
        b"*2\r\n$3\r\nGET\r\n:5\r\n",
        b"*1\r\n$3\r\nGETXXXXX",
        b"\x00\x01\x02\xff\xfe garbage \r\n*x\r\n",
        &[b'A'; 70_000],
    ];
    for input in bad {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(input);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
    }
    // Truncated frames left open, and random bytes.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..50 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut b = Vec::new();
        for _ in 0..200 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let alphabet = b"*$:+-\r\n0123456789SETGET";
            b.push(alphabet[(x % alphabet.len() as u64) as usize]);
        }
        let _ = s.write_all(&b);
    }
    let mut fresh = Client::new(port);
    assert_eq!(fresh.cmd(&["PING"]), "+PONG");
    assert_eq!(fresh.cmd(&["GET", "p9999"]), "9999");
    stop();
    h.join().unwrap().unwrap();
}

/// Group commit keeps a pipeline's meaning: plain SETs that arrive together are applied as
/// one batch, but every other command in between sees the SETs before it and none after;
/// a SET the engine refuses (a key too long) gets its own error and its neighbours
/// succeed; everything acknowledged is in the pool after a restart.
#[test]
fn u3_group_commit_keeps_pipeline_order() {
    let (port, stop, h, dir) = start(None);
    let mut c = Client::new(port);
    let long_key = "k".repeat(70_000);
    let script: Vec<Vec<String>> = vec![
        vec!["SET".into(), "g".into(), "1".into()],
        vec!["SET".into(), "g".into(), "2".into()],
        vec!["GET".into(), "g".into()],
        vec!["SET".into(), "g".into(), "10".into()],
        vec!["INCR".into(), "g".into()],
        vec!["SET".into(), "h".into(), "x".into()],
        vec!["SET".into(), long_key.clone(), "x".into()],
        vec!["SET".into(), "i".into(), "y".into()],
        vec!["SET".into(), "h".into(), "z".into(), "NX".into()],
        vec!["DEL".into(), "i".into()],
        vec!["SET".into(), "i".into(), "again".into()],
        vec!["MGET".into(), "g".into(), "h".into(), "i".into()],
    ];
    let mut b = Vec::new();
    for cmd in &script {
        b.extend_from_slice(format!("*{}\r\n", cmd.len()).as_bytes());
        for a in cmd {
            b.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    c.w.write_all(&b).unwrap();
    let replies: Vec<String> = script.iter().map(|_| c.reply()).collect();
    assert_eq!(replies[..6], ["+OK", "+OK", "2", "+OK", ":11", "+OK"]);
    assert!(replies[6].starts_with("-ERR"), "{}", replies[6]);
    assert_eq!(replies[7..], ["+OK", "(nil)", ":1", "+OK", "[11,x,again]"]);
    drop(c);
    stop();
    h.join().unwrap().unwrap();
    let store = Store::open(dir.path().join("s.pool"), "hart", &Options::default()).unwrap();
    assert_eq!(store.get(b"g").unwrap().as_deref(), Some(&b"11"[..]));
    assert_eq!(store.get(b"i").unwrap().as_deref(), Some(&b"again"[..]));
    assert_eq!(store.len().unwrap(), 3);
    store.close().unwrap();
}

/// GET, the commonest request, is answered by its own path (`commands::get_into`): the
/// exact bytes of a hit (a binary value with CR and LF in it), of a miss in RESP2 and
/// RESP3, in any letter case, and in order after pipelined SETs.
#[test]
fn u3_get_replies_exact_bytes() {
    let (port, stop, h, _d) = start(None);
    let mut c = Client::new(port);
    let raw = |c: &mut Client, n: usize| {
        let mut b = vec![0u8; n];
        c.r.read_exact(&mut b).unwrap();
        b
    };
    c.send(&[b"SET", b"bin", b"a\r\nb\0"]);
    assert_eq!(raw(&mut c, 5), b"+OK\r\n");
    c.send(&[b"get", b"bin"]);
    assert_eq!(raw(&mut c, 11), b"$5\r\na\r\nb\0\r\n");
    c.send(&[b"GET", b"nope"]);
    assert_eq!(raw(&mut c, 5), b"$-1\r\n");
    // A pipeline: SETs (applied as one batch) then GETs of what they wrote, in order.
    let mut p = Vec::new();
    for (cmd, k, v) in [("SET", "p1", Some("x")), ("SET", "p2", Some("yy")), ("GET", "p2", None), ("GET", "p1", None)] {
        let args: Vec<&[u8]> =
            [Some(cmd.as_bytes()), Some(k.as_bytes()), v.map(str::as_bytes)].into_iter().flatten().collect();
        p.extend(format!("*{}\r\n", args.len()).into_bytes());
        for a in args {
            p.extend(format!("${}\r\n", a.len()).into_bytes());
            p.extend_from_slice(a);
            p.extend_from_slice(b"\r\n");
        }
    }
    c.w.write_all(&p).unwrap();
    let want = b"+OK\r\n+OK\r\n$2\r\nyy\r\n$1\r\nx\r\n";
    assert_eq!(raw(&mut c, want.len()), want);
    assert!(c.cmd(&["HELLO", "3"]).contains("proto,:3"));
    c.send(&[b"GET", b"nope"]);
    assert_eq!(raw(&mut c, 3), b"_\r\n");
    stop();
    h.join().unwrap().unwrap();
}
