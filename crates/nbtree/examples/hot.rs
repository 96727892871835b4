//! NBTree's own cost, with the data cached: load `keys` 8-byte keys (shuffled), then get and
//! update the first `hot` of them over and over, in 400 slices of 50,000 operations each,
//! and print the fastest, the first-quartile and the median slice in ns per operation.
//! With a few hot keys nothing misses the caches, so what is left is the code's own work
//! (the descent through the inner nodes, the fingerprint match, the entry's key compare,
//! the epoch pin); the slices' minimum and first quartile are what to compare between
//! builds on a noisy host, run alternately.
//!
//! `cargo run --release -p pmkv-nbtree --example hot [keys] [hot] [dense]`
//! (default 4,000,000 keys, 10 hot; `dense`: the keys 1..=keys, whose hot keys share a
//! leaf, otherwise scattered 64-bit keys, each hot key in a leaf of its own).

use pmkv_nbtree::NbTree;
use pmkv_substrate::{Mode, Pool, PoolOptions};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let arg = |i: usize| std::env::args().nth(i);
    let n: u64 = arg(1).and_then(|s| s.parse().ok()).unwrap_or(4_000_000);
    let hot: u64 = arg(2).and_then(|s| s.parse().ok()).unwrap_or(10).clamp(1, n.max(1));
    let dense = arg(3).is_some_and(|a| a == "dense");
    let path = std::path::PathBuf::from(format!("/dev/shm/pmkv-hot-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let opts = PoolOptions::default().mode(Mode::Eadr).initial_size(1 << 30).max_size(8 << 30).prefault(true);
    let t = NbTree::open(Arc::new(Pool::create(&path, "nbtree", &opts).unwrap())).unwrap();
    let key = |i: u64| {
        if dense {
            (i + 1).to_be_bytes()
        } else {
            (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1).to_be_bytes()
        }
    };
    // Inserted in a shuffled order (xorshift), as the benchmarks load.
    let mut order: Vec<u64> = (0..n).collect();
    let mut x = 0x1234_5678_9abc_def1u64;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    for &i in &order {
        t.put(&key(i), &i.to_le_bytes()).unwrap();
    }
    let slice = 50_000u64;
    let (mut gets, mut updates) = (Vec::new(), Vec::new());
    let mut sink = 0u64;
    for s in 0..400u64 {
        let t0 = Instant::now();
        for i in 0..slice {
            let found = t.get_with(&key((i * 7 + s) % hot), &mut |v| sink += v[0] as u64).unwrap();
            assert!(found);
        }
        gets.push(t0.elapsed().as_nanos() as f64 / slice as f64);
        let t0 = Instant::now();
        for i in 0..slice {
            t.put(&key((i * 7 + s) % hot), &i.to_le_bytes()).unwrap();
        }
        updates.push(t0.elapsed().as_nanos() as f64 / slice as f64);
    }
    std::hint::black_box(sink);
    for (name, v) in [("get", &mut gets), ("update", &mut updates)] {
        v.sort_by(f64::total_cmp);
        let q = |f: f64| v[((v.len() - 1) as f64 * f) as usize];
        println!(
            "{name}: fastest slice {:.1} ns/op, first quartile {:.1}, median {:.1} ({n} keys, {hot} hot, {})",
            q(0.0),
            q(0.25),
            q(0.5),
            if dense { "dense" } else { "scattered" }
        );
    }
    drop(t);
    let _ = std::fs::remove_file(&path);
}
