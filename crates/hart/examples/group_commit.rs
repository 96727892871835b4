//! What group commit (`Hart::put_many`, `Pool::group`) saves: redis-benchmark-like keys
//! (`key:` and 12 digits, 3-byte values), inserted and then updated one put at a time and
//! in runs of 16 (a ×16 pipeline), in each persistence mode; ns per put, fences per put.
//! Rounds alternate the two ways so drift hits both alike.
//!
//! `cargo run --release -p pmkv-hart --example group_commit [KEYS]`

use pmkv_hart::{Hart, Options};
use pmkv_substrate::{counters, Mode, Pool, PoolOptions};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let mut rng = pmkv_testutil::XorShift::new(7);
    let keys: Vec<Vec<u8>> = (0..n).map(|_| format!("key:{:012}", rng.next_u64() % 1_000_000).into_bytes()).collect();
    println!("{n} puts of redis-benchmark-like keys (3-byte values): ns/put and fences/put, best of 3 rounds");
    println!("| mode | phase | one by one | runs of 16 | ratio |");
    println!("|---|---|---:|---:|---:|");
    for mode in [Mode::Adr, Mode::Eadr, Mode::Msync] {
        let dir = if mode == Mode::Msync { "/var/tmp" } else { "/dev/shm" };
        let mut best = [[f64::MAX; 2]; 2];
        let mut fences = [[0f64; 2]; 2];
        for _round in 0..3 {
            for (w, grouped) in [false, true].into_iter().enumerate() {
                let path = format!("{dir}/pmkv-group-{}-{w}.pool", std::process::id());
                let _ = std::fs::remove_file(&path);
                let opts = PoolOptions::default().mode(mode).initial_size(256 << 20);
                let h = Hart::open(Arc::new(Pool::create(&path, "hart", &opts).unwrap()), Options::default()).unwrap();
                for (phase, value) in [(0, b"abc"), (1, b"xyz")] {
                    let f0 = counters::snapshot().fences;
                    let t = Instant::now();
                    if grouped {
                        for chunk in keys.chunks(16) {
                            let puts: Vec<(&[u8], &[u8])> = chunk.iter().map(|k| (&k[..], &value[..])).collect();
                            h.put_many(&puts).unwrap();
                        }
                    } else {
                        for k in &keys {
                            h.put(k, value).unwrap();
                        }
                    }
                    let ns = t.elapsed().as_nanos() as f64 / n as f64;
                    best[phase][w] = best[phase][w].min(ns);
                    fences[phase][w] = (counters::snapshot().fences - f0) as f64 / n as f64;
                }
                drop(h);
                let _ = std::fs::remove_file(&path);
            }
        }
        for (phase, name) in [(0, "insert (then upsert)"), (1, "same-length update")] {
            println!(
                "| {mode} | {name} | {:.0} ns, {:.2} fences | {:.0} ns, {:.2} fences | {:.2} |",
                best[phase][0],
                fences[phase][0],
                best[phase][1],
                fences[phase][1],
                best[phase][1] / best[phase][0]
            );
        }
    }
}
