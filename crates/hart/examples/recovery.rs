//! Build vs recovery time (SPEC H5): `cargo run --release -p pmkv-hart --example recovery -- N MODE`
//! builds a HART of N Random keys (SPEC W: [A-Za-z0-9], lengths 5..=16) on /dev/shm,
//! closes it, and times the reopen (Algorithm 7 from the leaf chunk list).

use pmkv_hart::{Hart, Options};
use pmkv_substrate::{Mode, Pool, PoolOptions};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let mode: Mode = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(Mode::Adr);
    let path = std::path::PathBuf::from(format!("/dev/shm/pmkv-recovery-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let keys: Vec<Vec<u8>> = (0..n)
        .map(|_| {
            let len = 5 + (next() % 12) as usize;
            (0..len).map(|_| alphabet[(next() % 62) as usize]).collect()
        })
        .collect();
    let opts = PoolOptions::default().mode(mode).initial_size(1 << 30);
    let t = Instant::now();
    {
        let h = Hart::open(Arc::new(Pool::create(&path, "hart", &opts).unwrap()), Options::default()).unwrap();
        for (i, k) in keys.iter().enumerate() {
            h.put(k, &(i as u64).to_le_bytes()).unwrap();
        }
    }
    let build = t.elapsed();
    let t = Instant::now();
    let h = Hart::open(Arc::new(Pool::open(&path, Some("hart"), &opts).unwrap()), Options::default()).unwrap();
    let rec = t.elapsed();
    println!(
        "{n} keys ({} distinct), mode {mode}: build {:.3} s, recovery {:.3} s, ratio {:.2}x",
        h.len(),
        build.as_secs_f64(),
        rec.as_secs_f64(),
        build.as_secs_f64() / rec.as_secs_f64()
    );
    drop(h);
    let _ = std::fs::remove_file(&path);
}
