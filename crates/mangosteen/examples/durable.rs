//! `Durable<T>` against the same value without durability: a map of vectors (word →
//! documents) and a deque of recent operations, `N` adds and `N` counts per round,
//! alternating plain and durable rounds (a fresh pool in /dev/shm each), `eadr` (or MODE).
//! Prints each round and the medians of ns per operation and their ratios. Durable's
//! writes are found by page capture (Rust code is not compiled with capture).
//!
//! `cargo run --release -p pmkv-mangosteen --example durable [-- N [ROUNDS [MODE]]]`

use pmkv_mangosteen::{Durable, Options, SplitAlloc};
use pmkv_substrate::{Latency, Mode, Pool, PoolOptions};
use pmkv_testutil::median;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

#[global_allocator]
static A: SplitAlloc = SplitAlloc;

/// The program's structure, as it would be written with no thought of durability.
#[derive(Default)]
struct Index {
    postings: HashMap<u32, Vec<u32>>,
    recent: VecDeque<(u32, u32)>,
}

impl Index {
    fn add(&mut self, word: u32, doc: u32) {
        self.postings.entry(word).or_default().push(doc);
        self.recent.push_back((word, doc));
        if self.recent.len() > 64 {
            self.recent.pop_front();
        }
    }
    fn count(&self, word: u32) -> usize {
        self.postings.get(&word).map_or(0, Vec::len)
    }
}

/// The pairs a round adds and the words it counts.
fn workload(n: u32) -> (Vec<(u32, u32)>, Vec<u32>) {
    let mut x = 0x243F_6A88_85A3_08D3u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as u32
    };
    let words = n / 8 + 1;
    ((0..n).map(|d| (next() % words, d)).collect(), (0..n).map(|_| next() % words).collect())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(6);
    let mode: Mode = args.next().and_then(|a| a.parse().ok()).unwrap_or(Mode::Eadr);
    let (pairs, probes) = workload(n);
    let per = |t: Instant, k: usize| t.elapsed().as_nanos() as f64 / k as f64;
    let (mut plain, mut durable) = (vec![], vec![]);
    for round in 1..=rounds {
        let mut idx = Index::default();
        let t = Instant::now();
        for &(w, d) in &pairs {
            idx.add(w, d);
        }
        let add = per(t, pairs.len());
        let t = Instant::now();
        let found: usize = probes.iter().map(|&w| std::hint::black_box(&idx).count(w)).sum();
        let count = per(t, probes.len());
        println!("plain   {round} add {add:8.1} count {count:8.1} ns ({found})");
        plain.push((add, count));

        let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
        let po = PoolOptions::default().mode(mode).latency(Latency::NONE);
        let pool = Arc::new(Pool::create(dir.path().join("d.pool"), "mangosteen", &po).unwrap());
        let d = Durable::<Index>::open(pool, Options { region_size: 64 << 20, ..Options::default() }).unwrap();
        let t = Instant::now();
        for &(w, doc) in &pairs {
            d.write(move |i| i.add(w, doc)).unwrap();
        }
        let add = per(t, pairs.len());
        let t = Instant::now();
        let found: usize = probes.iter().map(|&w| d.read(|i| i.count(w))).sum();
        let count = per(t, probes.len());
        println!("durable {round} add {add:8.1} count {count:8.1} ns ({found})");
        durable.push((add, count));
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let (pa, pc) = (median(plain.iter().map(|p| p.0).collect()), median(plain.iter().map(|p| p.1).collect()));
    let (da, dc) = (median(durable.iter().map(|p| p.0).collect()), median(durable.iter().map(|p| p.1).collect()));
    println!(
        "medians of {rounds}, n={n}, {mode:?}, load {}",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!("add   plain {pa:8.1} ns  durable {da:8.1} ns  {:.2}x", da / pa);
    println!("count plain {pc:8.1} ns  durable {dc:8.1} ns  {:.2}x", dc / pc);
}
