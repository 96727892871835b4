//! The commit path alone: batches of `N` explicit `Tx::write`s of one block each,
//! no application, no page capture, the backend inline (the engine's default), `adr` (or MODE), no
//! emulated latency, a pool in /dev/shm. Prints, for 1 and 8 blocks per batch, the median
//! over the rounds of the ns per batch, in wall-clock time and in this thread's CPU time
//! (on a loaded machine the wall clock also counts the time the thread was not running),
//! and the flushes and fences per batch (this thread's substrate counters: the inline
//! backend's are counted too).
//!
//! `cargo run --release -p pmkv-mangosteen --example commit [-- ROUNDS [MODE]]` (MODE: `adr`,
//! the default, or `eadr`)

use pmkv_mangosteen::{Mangosteen, Options};
use pmkv_substrate::{counters, Latency, Mode, Pool, PoolOptions};
use pmkv_testutil::XorShift;
use std::sync::Arc;
use std::time::Instant;

const REGION: u64 = 1 << 20;
const BATCHES: u64 = 50_000;

/// This thread's CPU time, in ns.
fn cpu_ns() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer for clock_gettime.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let mode: Mode = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(Mode::Adr);
    let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
    let po = PoolOptions::default().mode(mode).latency(Latency::NONE).initial_size(16 << 20);
    let pool = Arc::new(Pool::create(dir.path().join("c.pool"), "mangosteen", &po).unwrap());
    let m = Mangosteen::open(pool, Options { region_size: REGION, ..Options::default() }).unwrap();
    let blocks = REGION / 32;
    let mut rng = XorShift::new(1);
    println!("| blocks per batch | ns per batch (median of {rounds}) | CPU ns per batch | flushes per batch | fences per batch |");
    println!("|---:|---:|---:|---:|---:|");
    for n in [1usize, 8] {
        let (mut times, mut cpu) = (Vec::new(), Vec::new());
        let (mut flushes, mut fences) = (0.0, 0.0);
        for round in 0..=rounds {
            // Offsets drawn before the clock starts; round 0 warms up.
            let offs: Vec<u64> = (0..BATCHES as usize * n).map(|_| (rng.next_u64() % blocks) * 32).collect();
            let c0 = counters::snapshot();
            let (t0, u0) = (Instant::now(), cpu_ns());
            for (i, chunk) in offs.chunks(n).enumerate() {
                let mut v = [0u8; 32];
                v[..8].copy_from_slice(&(i as u64).to_le_bytes());
                m.batch(|tx| {
                    for &o in chunk {
                        tx.write(o, &v).unwrap();
                    }
                })
                .unwrap();
            }
            let ns = t0.elapsed().as_nanos() as f64 / BATCHES as f64;
            let cpu_per = (cpu_ns() - u0) / BATCHES as f64;
            let c = counters::snapshot().since(&c0);
            if round > 0 {
                times.push(ns);
                cpu.push(cpu_per);
                flushes = c.flushes as f64 / BATCHES as f64;
                fences = c.fences as f64 / BATCHES as f64;
            }
        }
        times.sort_by(f64::total_cmp);
        cpu.sort_by(f64::total_cmp);
        println!("| {n} | {:.0} | {:.0} | {flushes:.2} | {fences:.2} |", times[times.len() / 2], cpu[cpu.len() / 2]);
    }
}
