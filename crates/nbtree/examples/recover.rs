//! Recovery time (SPEC N6) against building the same tree from the base data: loads N
//! 8-byte keys (default 4M), closes, reopens (clean: seals verified), then simulates a
//! crash (the pool is reopened without a clean close) and reopens again, each five times;
//! prints the medians and the phases.
//!
//! `cargo run --release -p pmkv-nbtree --example recover [keys]`

use pmkv_nbtree::NbTree;
use pmkv_substrate::{Mode, Pool, PoolOptions};
use std::sync::Arc;
use std::time::Instant;

/// The microseconds of the open's four phases (allocator, list, seals+decode, build), from
/// the report's details.
fn phases(r: &pmkv_core::RecoveryReport) -> [u64; 4] {
    ["allocator_us", "list_us", "decode_us", "build_us"].map(|k| r.detail_u64(k).unwrap_or(0))
}

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(4_000_000);
    let path = std::path::Path::new("/dev/shm/pmkv-recover.pool");
    let _ = std::fs::remove_file(path);
    let opts = PoolOptions::default().mode(Mode::Eadr).initial_size(64 << 20).max_size(8 << 30);
    let key = |i: u64| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1).to_be_bytes();
    let t = NbTree::open(Arc::new(Pool::create(path, "nbtree", &opts).unwrap())).unwrap();
    let t0 = Instant::now();
    for i in 0..n {
        t.put(&key(i), &i.to_le_bytes()).unwrap();
    }
    let build = t0.elapsed();
    t.close().unwrap();
    // Each kind of open five times (this host's timings move by tens of percent from one
    // run to the next): the median is reported, the build being the yardstick.
    let open = || {
        let t0 = Instant::now();
        let t = NbTree::open(Arc::new(Pool::open(path, Some("nbtree"), &opts).unwrap())).unwrap();
        (t0.elapsed(), t)
    };
    let median = |mut v: Vec<std::time::Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let mut clean = Vec::new();
    let mut r = None;
    for _ in 0..5 {
        let (d, t) = open();
        clean.push(d);
        r = Some(t.recovery_report().clone());
        t.close().unwrap();
    }
    let clean = median(clean);
    let r = r.unwrap();
    println!(
        "build {:.3} s; clean open {:.3} s (median of 5; {:.1}x faster), phases (alloc, list, seals+decode, build) {:?} us, {} threads",
        build.as_secs_f64(),
        clean.as_secs_f64(),
        build.as_secs_f64() / clean.as_secs_f64(),
        phases(&r),
        r.detail_u64("threads").unwrap_or(0)
    );
    // A crash: poison the pool so it is not marked clean, then reopen (the recovery
    // repairs and sweeps, and the close marks the pool clean again).
    let mut crash = Vec::new();
    let mut r = None;
    for _ in 0..5 {
        let (_, t) = open();
        t.pool().poison();
        drop(t);
        let (d, t) = open();
        crash.push(d);
        r = Some(t.recovery_report().clone());
        t.close().unwrap();
    }
    let crash = median(crash);
    let r = r.unwrap();
    println!(
        "crash recovery {:.3} s (median of 5; {:.1}x faster than the build), phases {:?} us, orphans freed {}",
        crash.as_secs_f64(),
        build.as_secs_f64() / crash.as_secs_f64(),
        phases(&r),
        r.orphans_freed
    );
    let _ = std::fs::remove_file(path);
}
