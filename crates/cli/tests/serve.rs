//! `pmkv serve` as a process (SPEC U2, U3): every acknowledged SET survives SIGKILL (three
//! kills at random moments while a client writes as fast as it can, for every persistent
//! engine, each acknowledged value read back after every kill), the pool checks clean
//! after SHUTDOWN, and `redis-cli` (Debian redis-tools, installed by .ci/run) talks to it.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn serve(pool: &std::path::Path) -> (Child, u16) {
    serve_with(pool, &[])
}

fn serve_with(pool: &std::path::Path, extra: &[&str]) -> (Child, u16) {
    spawn_serve(pool, extra, Stdio::inherit())
}

fn call(s: &mut TcpStream, args: &[&str]) -> std::io::Result<String> {
    let mut b = format!("*{}\r\n", args.len());
    for a in args {
        b.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(b.as_bytes())?;
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        if s.read(&mut byte)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        out.push(byte[0]);
        if out.ends_with(b"\r\n")
            && (out[0] != b'$' || out.iter().filter(|&&c| c == b'\n').count() == 2 || out == b"$-1\r\n")
        {
            return Ok(String::from_utf8_lossy(&out).into_owned());
        }
    }
}

#[test]
fn u3_every_acknowledged_set_survives_sigkill() {
    every_acknowledged_set_survives_sigkill("hart", Where::Memory);
}

#[test]
fn u3_every_acknowledged_set_survives_sigkill_nbtree() {
    every_acknowledged_set_survives_sigkill("nbtree", Where::Memory);
}

#[test]
fn u3_every_acknowledged_set_survives_sigkill_mangosteen() {
    every_acknowledged_set_survives_sigkill("mangosteen", Where::Memory);
}

/// The same on a disk file in mode wal (the default there), with each sync policy: an
/// acknowledged SET was written to the log in the kernel, which a SIGKILL does not lose,
/// so not even `no` may lose one.
#[test]
fn u3_every_acknowledged_set_survives_sigkill_on_a_disk_in_mode_wal() {
    for engine in ["hart", "nbtree"] {
        for sync in ["always", "everysec", "no"] {
            every_acknowledged_set_survives_sigkill(engine, Where::Disk(sync));
        }
    }
}

/// The same for mangosteen, with more kills. It used to fail in about one run of three
/// (2 runs of 6 failed, and 1 of the 2 before them, in the 9 kills a run had
/// then): the restarted server refused the pool, "line 0 of the region (bytes 0..64)
/// fails its check, before and after the redo log's bytes are put in". The inline
/// backend left its applied bytes to the next batch's fence, which under the server's
/// worker threads often ran on another thread and so did not log them. A debug `pmkv`
/// now fails the first write that does so (the API's check of unfenced flushes), and
/// `crates/api/tests/power_loss.rs` catches it at every run without a process.
#[test]
fn u3_every_acknowledged_set_survives_sigkill_on_a_disk_in_mode_wal_mangosteen() {
    for sync in ["always", "everysec", "no"] {
        every_acknowledged_set_survives_sigkill_rounds("mangosteen", Where::Disk(sync), 5);
    }
}

/// Where a SIGKILL test's pool is: /dev/shm in mode adr, or a disk file in mode wal with
/// a sync policy.
#[derive(Clone, Copy)]
enum Where {
    Memory,
    Disk(&'static str),
}

/// A server process, SIGKILLed when dropped (a failed assertion unwinds through it).
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every key of `acked` holds its acknowledged value.
fn check_all(s: &mut TcpStream, acked: &std::collections::HashMap<String, String>, when: &str) {
    for (k, v) in acked {
        let got = call(s, &["GET", k]).unwrap();
        assert_eq!(got, format!("${}\r\n{v}\r\n", v.len()), "{when}: {k} lost its acknowledged value");
    }
}

/// Three SIGKILLs of `pmkv serve` on a pool of `engine` while a client SETs as fast as it
/// can; after each kill (the last one included) a restarted server holds every
/// acknowledged value.
fn every_acknowledged_set_survives_sigkill(engine: &str, at: Where) {
    every_acknowledged_set_survives_sigkill_rounds(engine, at, 3)
}

/// [`every_acknowledged_set_survives_sigkill`] with `rounds` kills, the n-th after
/// 30 + 40 n ms.
fn every_acknowledged_set_survives_sigkill_rounds(engine: &str, at: Where, rounds: u64) {
    let (dir, mode) = match at {
        Where::Memory => (pool_dir(), vec!["--mode", "adr"]),
        Where::Disk(sync) => match disk_dir(std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))) {
            Some(d) => (d, vec!["--mode", "wal", "--sync", sync]),
            None => {
                eprintln!("no disk file system to write to here: not checked");
                return;
            }
        },
    };
    let serve_with =
        |p: &std::path::Path, extra: &[&str]| spawn_serve_with(p, &[&mode[..], extra].concat(), Stdio::inherit());
    let pool = dir.path().join("srv.pool");
    let engine_arg = ["--engine", engine];
    let mut acked: std::collections::HashMap<String, String> = Default::default();
    let mut n = 0u64;
    for round in 0..rounds {
        let (child, port) = serve_with(&pool, &engine_arg);
        let mut child = KillOnDrop(child);
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        for (k, v) in &acked {
            let got = call(&mut s, &["GET", k]).unwrap();
            assert_eq!(got, format!("${}\r\n{v}\r\n", v.len()), "round {round}: {k} lost its acknowledged value");
        }
        let kill_at = Duration::from_millis(30 + 40 * round);
        let t0 = Instant::now();
        let mut killed = false;
        loop {
            if !killed && t0.elapsed() >= kill_at {
                child.0.kill().unwrap();
                killed = true;
            }
            n += 1;
            let (k, v) = (format!("k{}", n % 300), n.to_string());
            match call(&mut s, &["SET", &k, &v]) {
                Ok(r) if r == "+OK\r\n" => {
                    acked.insert(k, v);
                }
                Ok(r) => panic!("{r}"),
                Err(_) => break,
            }
            assert!(t0.elapsed() < Duration::from_secs(20));
        }
        child.0.wait().unwrap();
        // The write in flight at the kill may have landed: accept it from now on.
        let (k, v) = (format!("k{}", n % 300), n.to_string());
        let (c, port) = serve_with(&pool, &engine_arg);
        let mut c = KillOnDrop(c);
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let got = call(&mut s, &["GET", &k]).unwrap();
        if got == format!("${}\r\n{v}\r\n", v.len()) {
            acked.insert(k, v);
        }
        check_all(&mut s, &acked, &format!("{engine}, after kill {round}"));
        assert!(call(&mut s, &["SHUTDOWN"]).is_err(), "SHUTDOWN closes the connection without a reply");
        assert!(c.0.wait().unwrap().success(), "a clean shutdown exits 0");
    }
    let check = pmkv(&["check", pool.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
    assert!(acked.len() > 10);
}

#[test]
fn no_exec_is_half_applied_after_sigkill() {
    for engine in ["hart", "nbtree", "mangosteen"] {
        no_exec_is_half_applied_after_sigkill_on(engine);
    }
}

/// SIGKILLs of `pmkv serve` while a client runs EXECs that each write one number to 64
/// strings and 64 fields of one hash: after every restart all 128 hold the same number,
/// the last acknowledged EXEC's or the one in flight at the kill, never a mix.
fn no_exec_is_half_applied_after_sigkill_on(engine: &str) {
    const N: usize = 64;
    let dir = pool_dir();
    let pool = dir.path().join("exec.pool");
    let engine_arg = ["--engine", engine];
    let mut acked = 0u64;
    let mut n = 0u64;
    let read_all = |port: u16| -> Vec<String> {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut r = std::io::BufReader::new(s.try_clone().unwrap());
        let mut got = Vec::new();
        for j in 0..N {
            s.write_all(format!("*2\r\n$3\r\nGET\r\n${}\r\nx{j:02}\r\n", 3).as_bytes()).unwrap();
            got.push(read_reply(&mut r).unwrap());
        }
        for j in 0..N {
            s.write_all(format!("*3\r\n$4\r\nHGET\r\n$1\r\nh\r\n${}\r\nf{j:02}\r\n", 3).as_bytes()).unwrap();
            got.push(read_reply(&mut r).unwrap());
        }
        got
    };
    for round in 0..4u64 {
        let (child, port) = serve_with(&pool, &engine_arg);
        let mut child = KillOnDrop(child);
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut r = std::io::BufReader::new(s.try_clone().unwrap());
        // The kill comes from another thread, at a moment unrelated to the client's
        // requests, so that it can land while an EXEC is being applied.
        let kill_at = Duration::from_millis(40 + 50 * round);
        let pid = child.0.id().to_string();
        let killer = std::thread::spawn(move || {
            std::thread::sleep(kill_at);
            std::process::Command::new("kill").args(["-KILL", &pid]).status().unwrap();
        });
        let t0 = Instant::now();
        loop {
            n += 1;
            let v = n.to_string();
            let mut req = String::from("*1\r\n$5\r\nMULTI\r\n");
            for j in 0..N {
                req.push_str(&format!("*3\r\n$3\r\nSET\r\n$3\r\nx{j:02}\r\n${}\r\n{v}\r\n", v.len()));
                req.push_str(&format!("*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$3\r\nf{j:02}\r\n${}\r\n{v}\r\n", v.len()));
            }
            req.push_str("*1\r\n$4\r\nEXEC\r\n");
            if s.write_all(req.as_bytes()).is_err() {
                break;
            }
            let replies: std::io::Result<Vec<String>> = (0..2 * N + 2).map(|_| read_reply(&mut r)).collect();
            match replies {
                Ok(rs) => {
                    assert!(rs.last().unwrap().starts_with('['), "{engine}: EXEC answered {:?}", rs.last());
                    acked = n;
                }
                Err(_) => break,
            }
            assert!(t0.elapsed() < Duration::from_secs(30));
        }
        killer.join().unwrap();
        child.0.wait().unwrap();
        let (c, port) = serve_with(&pool, &engine_arg);
        let mut c = KillOnDrop(c);
        let got = read_all(port);
        let first = got[0].clone();
        assert!(got.iter().all(|g| *g == first), "{engine}, kill {round}: an EXEC half applied: {got:?}");
        let v: u64 = first.parse().unwrap_or(0);
        assert!(v == acked || v == acked + 1, "{engine}, kill {round}: {v} after EXEC {acked} was acknowledged");
        acked = v;
        n = v;
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        assert!(call(&mut s, &["SHUTDOWN"]).is_err());
        assert!(c.0.wait().unwrap().success());
    }
    assert!(acked > 4, "{engine}: only {acked} EXECs acknowledged in four rounds");
    let check = pmkv(&["check", pool.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
}

/// redis-cli runs here; a test that needs it fails where it is missing (never skips),
/// naming the package, as `scripts/preflight` does before the test run.
fn redis_cli_here() -> bool {
    let out = std::process::Command::new("redis-cli").arg("--version").output();
    out.expect(
        "redis-cli is not installed here: install Debian's redis-tools (scripts/preflight lists every prerequisite)",
    )
    .status
    .success()
}

#[test]
fn u3_redis_cli_drives_it() {
    assert!(redis_cli_here());
    let dir = pool_dir();
    let pool = dir.path().join("cli.pool");
    let (mut child, port) = serve(&pool);
    let cli = |args: &[&str]| {
        let o = std::process::Command::new("redis-cli").arg("-p").arg(port.to_string()).args(args).output().unwrap();
        text(&o.stdout).trim().to_string()
    };
    assert_eq!(cli(&["PING"]), "PONG");
    assert_eq!(cli(&["SET", "greeting", "hello world"]), "OK");
    assert_eq!(cli(&["GET", "greeting"]), "hello world");
    assert_eq!(cli(&["INCRBY", "n", "5"]), "5");
    assert_eq!(cli(&["DBSIZE"]), "2");
    assert_eq!(cli(&["-3", "GET", "nope"]), "");
    cli(&["SHUTDOWN"]);
    assert!(child.wait().unwrap().success());
}

/// `PMKV.RANGE` through redis-cli on `pmkv serve`: every case of docs/design/api.md
/// ("Range edge cases", 1–10) over its keys (`b\xff` the raw byte), as `redis-cli` users
/// write them: bare keys `[start, end)`, `-`/`+` open ends, `[key`/`(key`, a count, REV.
#[test]
fn u3_redis_cli_pmkv_range_edge_cases() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let help = text(&pmkv(&["serve", "--help"]).stdout);
    assert!(help.contains("PMKV.RANGE start end [count] [REV]") && help.contains("[a, b)"), "{help}");
    assert!(redis_cli_here());
    let dir = pool_dir();
    let (child, port) = serve(&dir.path().join("range.pool"));
    let mut child = KillOnDrop(child);
    // Raw bytes in, raw lines out (redis-cli prints one element per line to a pipe).
    let cli = |args: &[&[u8]]| -> Vec<Vec<u8>> {
        let o = std::process::Command::new("redis-cli")
            .arg("-p")
            .arg(port.to_string())
            .args(args.iter().map(|a| OsStr::from_bytes(a)))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        let mut lines: Vec<Vec<u8>> = o.stdout.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        lines.pop(); // after the last newline
        lines
    };
    let keys: [&[u8]; 7] = [b"", b"a", b"b", b"ba", b"bb", b"b\xff", b"c"];
    for k in keys {
        assert_eq!(cli(&[b"SET", k, &[b"v:", k].concat()]), [b"OK"]);
    }
    let records =
        |ks: &[&[u8]]| -> Vec<Vec<u8>> { ks.iter().flat_map(|k| [k.to_vec(), [b"v:", *k].concat()]).collect() };
    let range = |args: &[&[u8]]| cli(&[&[b"PMKV.RANGE".as_slice()][..], args].concat());
    // An empty array is printed as one empty line.
    let none: Vec<Vec<u8>> = vec![Vec::new()];
    assert_eq!(range(&[b"a\x01", b"b"]), none); // 1
    assert_eq!(range(&[b"b", b"b"]), none); // 2
    assert_eq!(range(&[b"b0", b"b0"]), none);
    assert_eq!(range(&[b"c", b"a"]), none); // 3
    assert_eq!(range(&[b"a", b"ba"]), records(&[b"a", b"b"])); // 4
    assert_eq!(range(&[b"a0", b"bc"]), records(&[b"b", b"ba", b"bb"])); // 5
    assert_eq!(range(&[b"b", b"+"]), records(&[b"b", b"ba", b"bb", b"b\xff", b"c"])); // 6
    assert_eq!(range(&[b"-", b"b"]), records(&[b"", b"a"]));
    assert_eq!(range(&[b"-", b"+"]), records(&keys));
    assert_eq!(range(&[b"", b"+"]), records(&keys)); // 7
    assert_eq!(range(&[b"-", b""]), none);
    assert_eq!(range(&[b"a", b"bb", b"REV"]), records(&[b"ba", b"b", b"a"])); // 8
    assert_eq!(range(&[b"a", b"bb", b"2", b"REV"]), records(&[b"ba", b"b"]));
    assert_eq!(range(&[b"b", b"c"]), records(&[b"b", b"ba", b"bb", b"b\xff"])); // 9
    assert_eq!(range(&[b"b\xff", b"c"]), records(&[b"b\xff"]));
    assert_eq!(range(&[b"[a", b"[ba"]), records(&[b"a", b"b", b"ba"])); // 10
    assert_eq!(range(&[b"(a", b"ba"]), records(&[b"b"]));
    let err = range(&[b"a", b"b", b"-1"]);
    assert!(err.concat().starts_with(b"ERR count must be"), "{}", text(&err.concat()));
    cli(&[b"SHUTDOWN"]);
    assert!(child.0.wait().unwrap().success());
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Protocol fuzz against the process (issue: "the server still answers PING to a new client
/// and its memory stays bounded"): huge announced lengths and counts, truncated frames,
/// garbage, each on its own connection; then redis-benchmark's own traffic.
#[test]
fn u3_fuzzed_server_answers_and_its_memory_stays_bounded() {
    let dir = pool_dir();
    let (mut child, port) = serve(&dir.path().join("fz.pool"));
    let mut ok = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(call(&mut ok, &["PING"]).unwrap(), "+PONG\r\n");
    let before = rss_kib(child.id());
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..300 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut b: Vec<u8> = match i % 4 {
            0 => b"*2147483647\r\n$2147483647\r\n".to_vec(),
            1 => b"*1\r\n$67108864\r\nabc".to_vec(), // announces 64 MiB, sends 3 bytes
            2 => vec![b'A'; 100_000],
            _ => Vec::new(),
        };
        for _ in 0..300 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b.push(x as u8);
        }
        let _ = s.write_all(&b);
    }
    let mut fresh = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(call(&mut fresh, &["PING"]).unwrap(), "+PONG\r\n");
    let after = rss_kib(child.id());
    assert!(after < before + 256 * 1024, "RSS grew from {before} KiB to {after} KiB");
    if let Ok(o) = std::process::Command::new("redis-benchmark")
        .args(["-p", &port.to_string(), "-q", "-n", "2000", "-c", "8", "-t", "set,get,incr,mset"])
        .output()
    {
        assert!(o.status.success(), "redis-benchmark: {}", text(&o.stderr));
        assert!(text(&o.stdout).contains("SET:"), "{}", text(&o.stdout));
    } else {
        assert!(std::env::var_os("CI").is_none(), "CI must have redis-benchmark");
    }
    assert_eq!(call(&mut fresh, &["PING"]).unwrap(), "+PONG\r\n");
    let _ = call(&mut fresh, &["SHUTDOWN"]);
    assert!(child.wait().unwrap().success());
}

/// Threads of process `pid` whose name starts with `prefix`.
fn threads_named(pid: u32, prefix: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .filter(|c| c.starts_with(prefix))
                .count()
        })
        .unwrap_or(0)
}

/// `--threads N` runs N workers (the runtime's threads are named `pmkv-worker`), and 0 is
/// refused before anything is opened or created.
#[test]
fn u3_threads_sets_the_workers() {
    let dir = pool_dir();
    let refused = pmkv(&["serve", dir.path().join("t0.pool").to_str().unwrap(), "--port", "0", "--threads", "0"]);
    assert_refused(&refused);
    assert!(text(&refused.stderr).contains("--threads"), "{}", text(&refused.stderr));
    assert!(!dir.path().join("t0.pool").exists(), "a refused serve created its pool");
    for n in [1usize, 3] {
        let (mut child, port) = serve_with(&dir.path().join(format!("t{n}.pool")), &["--threads", &n.to_string()]);
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        assert_eq!(call(&mut s, &["SET", "k", "v"]).unwrap(), "+OK\r\n");
        assert_eq!(call(&mut s, &["GET", "k"]).unwrap(), "$1\r\nv\r\n");
        // A thread names itself once it runs: under load the last worker may not have yet.
        let t0 = std::time::Instant::now();
        while threads_named(child.id(), "pmkv-worker") < n && t0.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(threads_named(child.id(), "pmkv-worker"), n, "--threads {n}");
        let _ = call(&mut s, &["SHUTDOWN"]);
        assert!(child.wait().unwrap().success());
    }
}
