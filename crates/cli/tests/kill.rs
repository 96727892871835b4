//! SPEC H5 with a real process: `pmkv load` killed with SIGKILL at a random moment; the
//! reopened pool passes `pmkv check` and holds exactly a prefix of the input (each record
//! with its line number as value).

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

fn pmkv() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pmkv"))
}

#[test]
fn sigkill_during_load_leaves_a_prefix() {
    let dir =
        tempfile::tempdir_in(if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" }).unwrap();
    let input = dir.path().join("keys.txt");
    let mut f = std::fs::File::create(&input).unwrap();
    let n = 300_000u32;
    for i in 0..n {
        // Distinct keys in no particular order.
        writeln!(f, "key-{:08x}", i.wrapping_mul(2_654_435_761)).unwrap();
    }
    drop(f);
    let lines: Vec<String> = std::fs::read_to_string(&input).unwrap().lines().map(String::from).collect();
    // Several kills at random moments (seed printed for reproduction), each on a fresh pool.
    let seed = std::env::var("PMKV_KILL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() as u64
    });
    eprintln!("PMKV_KILL_SEED={seed}");
    let mut x = seed | 1;
    let delays: Vec<u64> = (0..4)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            20 + x % 500
        })
        .collect();
    for (round, delay_ms) in delays.into_iter().enumerate() {
        let pool = dir.path().join(format!("p{round}.pool"));
        let mut child = pmkv()
            .args(["load", pool.to_str().unwrap(), input.to_str().unwrap(), "--engine", "hart"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        if !pool.exists() {
            continue; // killed before the pool was created
        }
        let check = pmkv().args(["check", pool.to_str().unwrap()]).output().unwrap();
        assert!(check.status.success(), "check failed: {}", String::from_utf8_lossy(&check.stderr));
        let dump = pmkv().args(["dump", pool.to_str().unwrap()]).output().unwrap();
        assert!(dump.status.success(), "dump failed: {}", String::from_utf8_lossy(&dump.stderr));
        let got: HashMap<String, String> = String::from_utf8(dump.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let (k, v) = l.split_once('\t').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect();
        let m = got.len();
        for (i, key) in lines.iter().take(m).enumerate() {
            assert_eq!(got.get(key), Some(&(i + 1).to_string()), "record {} of the prefix", i + 1);
        }
        eprintln!("kill after {delay_ms} ms: {m} of {n} records, a prefix");
    }
}
