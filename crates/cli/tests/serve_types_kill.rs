//! `pmkv serve` SIGKILLed while a client pipelines list and sorted-set writes: after each
//! restart every acknowledged RPUSH/LPUSH element is in its list, in push order, and
//! every acknowledged ZADD member is in its sorted set with its score. Writes sent but not
//! acknowledged at the kill may have landed or not, but only whole and in order: a list
//! is the first m pushed elements (m at least the acknowledged ones), a sorted set holds
//! only members that were sent, each with the score it was sent with.
//!
//! And `pmkv dump` of such a pool: its lines load back whole (`load --tsv`), it says on
//! stderr how many records are the server's own, and `--describe` names each in words
//! instead of showing its internal key.

mod common;
use common::*;
use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A server process, SIGKILLed when dropped (a failed assertion unwinds through it).
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn request(args: &[&str]) -> Vec<u8> {
    let mut b = format!("*{}\r\n", args.len());
    for a in args {
        b.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    b.into_bytes()
}

fn call(c: &mut (TcpStream, BufReader<TcpStream>), args: &[&str]) -> String {
    c.0.write_all(&request(args)).unwrap();
    read_reply(&mut c.1).unwrap()
}

fn connect(port: u16) -> (TcpStream, BufReader<TcpStream>) {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    (s.try_clone().unwrap(), BufReader::new(s))
}

/// What the client wrote: the elements RPUSHed to `r` and LPUSHed to `l` in the order
/// sent, the members ZADDed to `z` with their scores, and how many of each the server
/// acknowledged (or, after a restart, holds).
#[derive(Default)]
struct Sent {
    rpush: Vec<String>,
    lpush: Vec<String>,
    zadd: Vec<(String, String)>,
    acked: [usize; 3],
}

/// The write number `n` of the cycle RPUSH, LPUSH, ZADD.
fn write_of(n: u64) -> (usize, Vec<String>) {
    let v = format!("e{n}");
    match n % 3 {
        0 => (0, vec!["RPUSH".into(), "r".into(), v]),
        1 => (1, vec!["LPUSH".into(), "l".into(), v]),
        // Scores with a fraction and a sign, so a lost or wrong score shows.
        _ => (2, vec!["ZADD".into(), "z".into(), format!("{}.25", n as i64 - 5000), v]),
    }
}

/// A restarted server holds what [`Sent`] allows; returns how many of each it holds (the
/// new acknowledged counts: what it holds now is acknowledged by having been read).
fn check(c: &mut (TcpStream, BufReader<TcpStream>), sent: &Sent, when: &str) -> [usize; 3] {
    let list = |c: &mut (TcpStream, BufReader<TcpStream>), k: &str| {
        let got = call(c, &["LRANGE", k, "0", "-1"]);
        let inner = got.trim_start_matches('[').trim_end_matches(']');
        if inner.is_empty() {
            Vec::new()
        } else {
            inner.split(',').map(str::to_string).collect::<Vec<_>>()
        }
    };
    let r = list(c, "r");
    assert!(r.len() >= sent.acked[0], "{when}: RPUSH list lost acknowledged elements: {} < {}", r.len(), sent.acked[0]);
    assert_eq!(r[..], sent.rpush[..r.len()], "{when}: the RPUSH list is not the pushed elements in order");
    let mut l = list(c, "l");
    assert!(l.len() >= sent.acked[1], "{when}: LPUSH list lost acknowledged elements");
    l.reverse();
    assert_eq!(l[..], sent.lpush[..l.len()], "{when}: the LPUSH list is not the pushed elements in order");
    let card: usize = call(c, &["ZCARD", "z"]).trim_start_matches(':').parse().unwrap();
    for (m, s) in &sent.zadd[..sent.acked[2]] {
        assert_eq!(&call(c, &["ZSCORE", "z", m]), s, "{when}: acknowledged member {m} lost or its score changed");
    }
    // Members sent after the acknowledged ones: present only as a prefix (one writer),
    // each with its score.
    let mut held = sent.acked[2];
    while held < sent.zadd.len() {
        let (m, s) = &sent.zadd[held];
        match call(c, &["ZSCORE", "z", m]).as_str() {
            "$-1" => break,
            got => assert_eq!(got, s, "{when}: unacknowledged member {m} has a wrong score"),
        }
        held += 1;
    }
    assert_eq!(card, held, "{when}: the sorted set holds members that were never sent, or not a prefix");
    [r.len(), l.len(), held]
}

/// Kills of a server on an `engine` pool in mode adr while one client pipelines RPUSH,
/// LPUSH and ZADD 16 deep; the k-th kill after 40 + 35 k ms.
fn acknowledged_list_and_zset_writes_survive_sigkill(engine: &str) {
    let dir = pool_dir();
    let pool = dir.path().join("types.pool");
    let args = ["--mode", "adr", "--engine", engine];
    let mut sent = Sent::default();
    let mut n = 0u64;
    for round in 0..5u64 {
        let (child, port) = spawn_serve_with(&pool, &args, Stdio::inherit());
        let mut child = KillOnDrop(child);
        let mut c = connect(port);
        if round > 0 {
            check(&mut c, &sent, &format!("{engine}, start of round {round}"));
        }
        let pid = child.0.id().to_string();
        let kill_at = Duration::from_millis(40 + 35 * round);
        let killer = std::thread::spawn(move || {
            std::thread::sleep(kill_at);
            std::process::Command::new("kill").args(["-KILL", &pid]).status().unwrap();
        });
        let t0 = Instant::now();
        'pipe: loop {
            let mut batch = Vec::new();
            let mut kinds = Vec::new();
            for _ in 0..16 {
                let (kind, w) = write_of(n);
                n += 1;
                match kind {
                    0 => sent.rpush.push(w[2].clone()),
                    1 => sent.lpush.push(w[2].clone()),
                    _ => sent.zadd.push((w[3].clone(), w[2].clone())),
                }
                let a: Vec<&str> = w.iter().map(String::as_str).collect();
                batch.extend(request(&a));
                kinds.push(kind);
            }
            if c.0.write_all(&batch).is_err() {
                break;
            }
            for kind in kinds {
                match read_reply(&mut c.1) {
                    Ok(r) if r.starts_with(':') => sent.acked[kind] += 1,
                    Ok(r) => panic!("{engine}: unexpected reply {r}"),
                    Err(_) => break 'pipe,
                }
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "the server was not killed");
        }
        killer.join().unwrap();
        child.0.wait().unwrap();
        let (c2, port) = spawn_serve_with(&pool, &args, Stdio::inherit());
        let mut c2 = KillOnDrop(c2);
        let mut s = connect(port);
        sent.acked = check(&mut s, &sent, &format!("{engine}, after kill {round}"));
        // What is not held was lost before acknowledgement: never sent, as far as the
        // next rounds are concerned.
        sent.rpush.truncate(sent.acked[0]);
        sent.lpush.truncate(sent.acked[1]);
        sent.zadd.truncate(sent.acked[2]);
        s.0.write_all(&request(&["SHUTDOWN"])).unwrap();
        assert!(c2.0.wait().unwrap().success(), "a clean shutdown exits 0");
    }
    assert!(sent.acked.iter().all(|&a| a > 50), "too few writes acknowledged to show anything: {:?}", sent.acked);
    let check = pmkv(&["check", pool.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
}

#[test]
fn acknowledged_list_and_zset_writes_survive_sigkill_hart() {
    acknowledged_list_and_zset_writes_survive_sigkill("hart");
}

#[test]
fn acknowledged_list_and_zset_writes_survive_sigkill_nbtree() {
    acknowledged_list_and_zset_writes_survive_sigkill("nbtree");
}

/// `pmkv dump` of a server pool with a list, a set, a sorted set, a hash and a string with
/// a TTL: the plain dump loads back into a pool the server serves the same keys from, and
/// says on stderr which records are the server's; `--describe` shows no internal key.
#[test]
fn dump_of_a_server_pool_says_which_records_are_the_servers() {
    let dir = pool_dir();
    let pool = dir.path().join("d.pool");
    let (child, port) = spawn_serve_with(&pool, &["--mode", "adr"], Stdio::inherit());
    let mut child = KillOnDrop(child);
    let mut c = connect(port);
    for cmd in [
        &["RPUSH", "q", "a", "b", "c"][..],
        &["SADD", "s", "x", "y"],
        &["ZADD", "z", "1.5", "m1", "-2", "m2"],
        &["HSET", "h", "f", "v"],
        &["SET", "t", "v", "EX", "1000"],
        &["SET", "plain", "p"],
    ] {
        assert!(!call(&mut c, cmd).starts_with('-'), "{cmd:?}");
    }
    c.0.write_all(&request(&["SHUTDOWN"])).unwrap();
    assert!(child.0.wait().unwrap().success());
    let p = pool.to_str().unwrap();
    let plain = pmkv(&["dump", p]);
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    let out = text(&plain.stdout);
    let internal = out.lines().filter(|l| l.starts_with("\\xffpmkv")).count();
    assert!(internal >= 12, "the plain dump keeps every record, the server's included:\n{out}");
    assert!(
        text(&plain.stderr).contains(&format!("{internal} record(s) are pmkv serve's own")),
        "stderr: {}",
        text(&plain.stderr)
    );
    let described = pmkv(&["dump", "--describe", p]);
    assert!(described.status.success());
    let d = text(&described.stdout);
    assert!(!d.contains("xffpmkv"), "an internal key shown:\n{d}");
    for want in ["pmkv serve list", "pmkv serve set member x of key s", "pmkv serve meta record of key q", "of key z"] {
        assert!(d.contains(want), "no {want:?} in\n{d}");
    }
    assert!(d.lines().any(|l| l == "plain\tp"), "user strings are shown as they are:\n{d}");
    assert!(text(&described.stderr).is_empty());
    // The plain dump loads back into a pool that serves the same data.
    let tsv = dir.path().join("d.tsv");
    std::fs::write(&tsv, &plain.stdout).unwrap();
    let copy = dir.path().join("copy.pool");
    assert!(pmkv(&["load", copy.to_str().unwrap(), tsv.to_str().unwrap(), "--tsv"]).status.success());
    let (child, port) = spawn_serve_with(&copy, &["--mode", "adr"], Stdio::inherit());
    let _child = KillOnDrop(child);
    let mut c = connect(port);
    assert_eq!(call(&mut c, &["LRANGE", "q", "0", "-1"]), "[a,b,c]");
    assert_eq!(call(&mut c, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]), "[m2,-2,m1,1.5]");
    assert_eq!(call(&mut c, &["SCARD", "s"]), ":2");
    assert_eq!(call(&mut c, &["DBSIZE"]), ":6");
}
