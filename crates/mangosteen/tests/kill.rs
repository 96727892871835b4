//! A real process killed at random moments (docs/requirements.md, M8): a client sends
//! read-write requests through RPC mode and records acknowledgements; the process is
//! SIGKILLed at random moments; after restart every acknowledged request's effect must be
//! present. The `mangosteen-kv` server is killed with SIGKILL 8 times while a client
//! sets keys as fast as it can; after each kill, the last one included, the server is
//! restarted and every acknowledged value is read back (the one request in flight at the
//! kill may have landed or not).

use pmkv_mangosteen::{read_frame, write_frame};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn start(pool: &std::path::Path) -> (Child, u16) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mangosteen-kv"))
        .arg(pool)
        .arg("0")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start mangosteen-kv");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port =
        line.trim().strip_prefix("listening ").unwrap_or_else(|| panic!("server said {line:?}")).parse().unwrap();
    (child, port)
}

fn call(s: &mut TcpStream, req: &[u8]) -> std::io::Result<Vec<u8>> {
    write_frame(s, req)?;
    read_frame(s)?.ok_or_else(|| std::io::ErrorKind::UnexpectedEof.into())
}

fn set(k: u64, v: u64) -> Vec<u8> {
    [&b"S"[..], &k.to_le_bytes(), &v.to_le_bytes()].concat()
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
fn check_all(s: &mut TcpStream, acked: &HashMap<u64, u64>, round: usize) {
    for (&k, &v) in acked {
        let r = call(s, &[&b"G"[..], &k.to_le_bytes()].concat()).unwrap();
        assert_eq!(
            r,
            [&[0u8][..], &v.to_le_bytes()].concat(),
            "after kill {round}: key {k} lost its acknowledged value {v}"
        );
    }
}

#[test]
fn m8_sigkill_never_loses_an_acknowledged_write() {
    let dir = pmkv_testutil::pool_dir();
    let pool = dir.path().join("kv.pool");
    let mut acked: HashMap<u64, u64> = HashMap::new();
    let mut next = 1u64;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut total_acked = 0u64;
    for round in 0..8 {
        let (child, port) = start(&pool);
        let mut child = KillOnDrop(child);
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        // Everything acknowledged before is there.
        for (&k, &v) in &acked {
            let r = call(&mut s, &[&b"G"[..], &k.to_le_bytes()].concat()).unwrap();
            assert_eq!(
                r,
                [&[0u8][..], &v.to_le_bytes()].concat(),
                "round {round}: key {k} lost its acknowledged value {v}"
            );
        }
        // Set keys as fast as possible; kill the server at a random moment.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let kill_after = Duration::from_millis(20 + seed % 120);
        let start_t = Instant::now();
        let mut killed = false;
        let in_flight = loop {
            if !killed && start_t.elapsed() >= kill_after {
                child.0.kill().unwrap(); // SIGKILL
                killed = true;
            }
            let (k, v) = (next % 700 + 1, next);
            next += 1;
            match call(&mut s, &set(k, v)) {
                Ok(r) if r == b"\0OK" => {
                    acked.insert(k, v);
                    total_acked += 1;
                }
                Ok(r) => panic!("unexpected response {r:?}"),
                Err(_) => break Some((k, v)), // the server is gone mid-request
            }
            assert!(start_t.elapsed() < Duration::from_secs(20), "the kill did not stop the server");
        };
        child.0.wait().unwrap();
        // The request in flight may have landed: then it is the key's value from now on.
        let Some((k, v)) = in_flight else { panic!("round {round}: the loop ends only at the kill") };
        {
            let (c, port) = start(&pool);
            // Killed when dropped, so that a failed check leaves no server behind.
            let mut c = KillOnDrop(c);
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let r = call(&mut s, &[&b"G"[..], &k.to_le_bytes()].concat()).unwrap();
            let want_old = acked.get(&k).map(|v| [&[0u8][..], &v.to_le_bytes()].concat()).unwrap_or(vec![0u8]);
            let want_new = [&[0u8][..], &v.to_le_bytes()].concat();
            assert!(r == want_old || r == want_new, "round {round}: the in-flight key {k} holds neither value");
            if r == want_new {
                acked.insert(k, v);
            }
            // After every kill, the last one included, every acknowledged write is there:
            // recovery dropping the last committed batch must not wait for a next round.
            check_all(&mut s, &acked, round);
            c.0.kill().unwrap();
            c.0.wait().unwrap();
        }
    }
    eprintln!("mangosteen-kv: 8 SIGKILLs, {total_acked} acknowledged writes, none lost");
    assert!(total_acked > 100);
}
