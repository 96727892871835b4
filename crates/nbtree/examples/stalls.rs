//! Where do long operations come from? Loads 4M 8-byte keys, then searches them all in
//! random order, timing each operation, and prints the latency distribution and the
//! slowest operations' share of the total time. With `insert` after the key count it stops
//! after the inserts: run it so under `perf record -e cpu-clock` to profile the insert
//! path, SMOs included.
//!
//! `cargo run --release -p pmkv-nbtree --example stalls [keys] [insert]`

use pmkv_nbtree::NbTree;
use pmkv_substrate::{Mode, Pool, PoolOptions};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(4_000_000);
    let path = std::path::Path::new("/dev/shm/pmkv-stalls.pool");
    let _ = std::fs::remove_file(path);
    let insert_only = std::env::args().nth(2).is_some_and(|a| a == "insert");
    // Prefaulted and large enough, as `pmkv bench` does: the pool's growth is not timed.
    let opts = PoolOptions::default().mode(Mode::Eadr).initial_size(1 << 30).max_size(8 << 30).prefault(true);
    let t = NbTree::open(Arc::new(Pool::create(path, "nbtree", &opts).unwrap())).unwrap();
    let key = |i: u64| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1).to_be_bytes();
    let t0 = Instant::now();
    for i in 0..n {
        t.put(&key(i), &i.to_le_bytes()).unwrap();
    }
    println!("insert: {:.0} ns/op", t0.elapsed().as_nanos() as f64 / n as f64);
    if insert_only {
        drop(t);
        let _ = std::fs::remove_file(path);
        return;
    }
    for round in 0..2 {
        let mut lat = Vec::with_capacity(n as usize);
        let t0 = Instant::now();
        for i in 0..n {
            let j = (i.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ round) % n;
            let s = Instant::now();
            let mut found = false;
            t.get_with(&key(j), &mut |_| found = true).unwrap();
            lat.push(s.elapsed().as_nanos() as u64);
            assert!(found);
        }
        let total = t0.elapsed().as_nanos() as f64;
        lat.sort_unstable();
        let sum: u64 = lat.iter().sum();
        let slow: u64 = lat.iter().filter(|&&x| x > 10_000).sum();
        let p = |q: f64| lat[((lat.len() as f64 - 1.0) * q) as usize];
        println!(
            "search round {round}: {:.0} ns/op wall, {:.0} ns/op timed; p50 {} p99 {} p99.9 {} p99.99 {} max {}; ops > 10 us: {} taking {:.1}% of the time",
            total / n as f64,
            sum as f64 / n as f64,
            p(0.5),
            p(0.99),
            p(0.999),
            p(0.9999),
            lat[lat.len() - 1],
            lat.iter().filter(|&&x| x > 10_000).count(),
            slow as f64 * 100.0 / sum as f64
        );
    }
    t.close().unwrap();
    let _ = std::fs::remove_file(path);
}
