//! Does the pool's page size matter? Loads the same N 8-byte keys into one engine's pool
//! in each of two directories — /dev/shm (4 KiB pages) and the directory given, e.g. a
//! tmpfs mounted with `huge=always` (2 MiB pages, what a DAX mount of real PM gives) —
//! then times searches on each in 20 alternating slices, so that a noisy host slows both
//! alike. Prints ns per insert and per search for each.
//!
//! ```sh
//! sudo mkdir -p /mnt/huge && sudo mount -t tmpfs -o huge=always,size=8g tmpfs /mnt/huge
//! cargo run --release -p pmkv --example pages -- nbtree /mnt/huge 4000000
//! ```

use pmkv::{Mode, Options, Store};
use std::time::Instant;

fn main() -> pmkv::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let engine = args.get(1).cloned().unwrap_or_else(|| "nbtree".into());
    let other = args.get(2).cloned().unwrap_or_else(|| "/dev/shm".into());
    let n: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(4_000_000);
    let opts = Options::default().mode(Mode::Eadr).create(true).initial_size(64 << 20).max_size(8 << 30);
    let key = |i: u64| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1).to_be_bytes();
    let dirs = ["/dev/shm".to_string(), other];
    let mut stores = Vec::new();
    for d in &dirs {
        let path = std::path::Path::new(d).join(format!("pmkv-pages-{engine}.pool"));
        let _ = std::fs::remove_file(&path);
        let s = Store::open(&path, &engine, &opts)?;
        let t0 = Instant::now();
        for i in 0..n {
            s.put(&key(i), &i.to_le_bytes())?;
        }
        println!("{engine} on {d}: {:.0} ns per insert", t0.elapsed().as_nanos() as f64 / n as f64);
        stores.push((s, path));
    }
    let slice = 200_000u64;
    let mut ns = [0f64; 2];
    for round in 0..20u64 {
        for (j, (s, _)) in stores.iter().enumerate() {
            let t0 = Instant::now();
            for i in 0..slice {
                let k = (round * slice + i).wrapping_mul(0x2545_f491_4f6c_dd1d) % n;
                assert!(s.get(&key(k))?.is_some(), "key {k} lost");
            }
            ns[j] += t0.elapsed().as_nanos() as f64;
        }
    }
    for (j, d) in dirs.iter().enumerate() {
        println!("{engine} on {d}: {:.0} ns per search", ns[j] / (20 * slice) as f64);
    }
    for (s, path) in stores {
        s.close()?;
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}
