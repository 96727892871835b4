//! The deduplication ablation of the Mangosteen paper's Fig. 7, on the runtime alone:
//! batches of 8-byte counter updates to a durable region (the shape of a key-value
//! store's value updates), Zipfian (θ = 0.99) and uniform over the region's slots, with
//! and without deduplication, in `adr` and `eadr`, on a pool in /dev/shm. Prints ops/s and
//! the redo log's 64-byte slots written per update. Also: flat combining with 1, 2 and 4 writer threads
//! (batch size B and throughput).
//!
//! `cargo run --release -p pmkv-mangosteen --example ablation`

use pmkv_mangosteen::{Mangosteen, Options};
use pmkv_substrate::{Latency, Mode, Pool, PoolOptions};
use pmkv_testutil::XorShift;
use std::sync::Arc;
use std::time::Instant;

const SLOTS: u64 = 1 << 16; // 8-byte counters: a 512 KiB region
const OPS: u64 = 400_000;

/// Zipf(θ) over 0..n (Gray et al.'s method, as YCSB), as a pre-generated stream.
fn zipf_stream(n: u64, theta: f64, len: u64, seed: u64) -> Vec<u64> {
    let zeta = |k: u64| (1..=k).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
    let (zn, z2) = (zeta(n), zeta(2));
    let alpha = 1.0 / (1.0 - theta);
    let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - z2 / zn);
    let mut r = XorShift::new(seed);
    (0..len)
        .map(|_| {
            let u = r.unit();
            let uz = u * zn;
            if uz < 1.0 {
                0
            } else if uz < 1.0 + 0.5f64.powf(theta) {
                1
            } else {
                ((n as f64) * (eta * u - eta + 1.0).powf(alpha)) as u64 % n
            }
        })
        // Scatter the hot ranks over the region, as keys hash.
        .map(|k| k.wrapping_mul(0x9e37_79b9_7f4a_7c15) % n)
        .collect()
}

fn open(mode: Mode, dedup: bool) -> (tempfile::TempDir, Mangosteen) {
    let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
    let po = PoolOptions::default().mode(mode).latency(Latency::NONE).initial_size(16 << 20);
    let pool = Arc::new(Pool::create(dir.path().join("m.pool"), "mangosteen", &po).unwrap());
    let o = Options { region_size: SLOTS * 8, dedup, background: true, ..Options::default() };
    (dir, Mangosteen::open(pool, o).unwrap())
}

fn run(m: &Mangosteen, stream: &[u64], per_batch: usize) -> (f64, f64) {
    let (_, t0) = m.log_indices();
    let start = Instant::now();
    for chunk in stream.chunks(per_batch) {
        m.batch(|tx| {
            for &k in chunk {
                let at = (k * 8) as usize;
                let v = u64::from_le_bytes(tx.region()[at..at + 8].try_into().unwrap()) + 1;
                tx.write(k * 8, &v.to_le_bytes()).unwrap();
            }
        })
        .unwrap();
    }
    m.quiesce().unwrap();
    let secs = start.elapsed().as_secs_f64();
    let (_, t1) = m.log_indices();
    (stream.len() as f64 / secs, (t1 - t0) as f64 / stream.len() as f64)
}

fn main() {
    let zipf = zipf_stream(SLOTS, 0.99, OPS, 42);
    let mut r = XorShift::new(7);
    let uniform: Vec<u64> = (0..OPS).map(|_| r.next_u64() % SLOTS).collect();
    println!("Mangosteen runtime, {OPS} counter updates over {SLOTS} slots");
    println!("| mode | keys | updates per batch | dedup | Mops/s | redo log slots (64 B) per update |");
    println!("|---|---|---:|---|---:|---:|");
    for mode in [Mode::Eadr, Mode::Adr] {
        for (name, stream) in [("zipf 0.99", &zipf), ("uniform", &uniform)] {
            for per_batch in [32, 256] {
                for dedup in [true, false] {
                    let (_d, m) = open(mode, dedup);
                    let (ops, recs) = run(&m, stream, per_batch);
                    let on = if dedup { "on" } else { "off" };
                    println!("| {} | {name} | {per_batch} | {on} | {:.2} | {:.3} |", mode.name(), ops / 1e6, recs);
                }
            }
        }
    }
    println!();
    println!("Flat combining: each thread's updates are single-update requests (adr, zipf)");
    println!("| threads | Mops/s | requests per batch (B) |");
    println!("|---:|---:|---:|");
    for threads in [1usize, 2, 4] {
        let (_d, m) = open(Mode::Adr, true);
        let m = Arc::new(m);
        let per = (OPS / 4) as usize / threads;
        let start = Instant::now();
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (m, s) = (m.clone(), zipf[t * per..(t + 1) * per].to_vec());
                std::thread::spawn(move || {
                    for k in s {
                        m.batch(|tx| {
                            let at = (k * 8) as usize;
                            let v = u64::from_le_bytes(tx.region()[at..at + 8].try_into().unwrap()) + 1;
                            tx.write(k * 8, &v.to_le_bytes()).unwrap();
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        m.quiesce().unwrap();
        let secs = start.elapsed().as_secs_f64();
        let (b, req) = m.batch_stats();
        println!("| {threads} | {:.2} | {:.2} |", (per * threads) as f64 / secs / 1e6, req as f64 / b as f64);
    }
}
