//! Where does an insert's time go? Loads `keys` 8-byte random keys (default 4M) into an
//! empty tree and prints ns/op; run it under `perf record -e cpu-clock` to profile the
//! insert path, SMOs included.
//!
//! `cargo run --release -p pmkv-nbtree --example insert_profile [keys]`

use pmkv_nbtree::NbTree;
use pmkv_substrate::{Mode, Pool, PoolOptions};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(4_000_000);
    let path = std::path::Path::new("/dev/shm/pmkv-insert-profile.pool");
    let _ = std::fs::remove_file(path);
    // Prefaulted and large enough, as `pmkv bench` does: the pool's growth is not timed.
    let opts = PoolOptions::default().mode(Mode::Eadr).initial_size(1 << 30).max_size(8 << 30).prefault(true);
    let t = NbTree::open(Arc::new(Pool::create(path, "nbtree", &opts).unwrap())).unwrap();
    let key = |i: u64| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1).to_be_bytes();
    let t0 = Instant::now();
    for i in 0..n {
        t.put(&key(i), &i.to_le_bytes()).unwrap();
    }
    println!("insert: {:.0} ns/op", t0.elapsed().as_nanos() as f64 / n as f64);
    drop(t);
    let _ = std::fs::remove_file(path);
}
