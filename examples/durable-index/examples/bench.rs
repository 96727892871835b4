//! The example's index three ways: plain (in memory, no durability), durable with
//! compiler capture (`DurableIndex`, the captured module's writes) and durable with page
//! capture (`Durable<Index>`, closures over the same code). `N` adds (word, document)
//! and `N` lookups per round, the three alternating in each of ROUNDS rounds, a fresh
//! pool in /dev/shm each, `eadr` (or MODE). Prints each round and the medians of ns per
//! operation and their ratios to plain.
//!
//! `cargo run --release -p pmkv-example-durable-index --example bench [-- N [ROUNDS [MODE]]]`

use pmkv_example_durable_index::index::Index;
use pmkv_example_durable_index::DurableIndex;
use pmkv_mangosteen::{Durable, Options, SplitAlloc};
use pmkv_substrate::{Latency, Mode, Pool, PoolOptions};
use pmkv_testutil::median;
use std::sync::Arc;
use std::time::Instant;

/// Page capture's `Durable` needs it; the other two ways allocate as before through it.
#[global_allocator]
static A: SplitAlloc = SplitAlloc;

/// The words of the adds (with their documents, increasing) and of the lookups.
fn workload(n: u32) -> (Vec<(String, u32)>, Vec<String>) {
    let mut rng = pmkv_testutil::XorShift::new(0x243F_6A88_85A3_08D3);
    let words = u64::from(n / 8 + 1);
    let mut word = move || format!("word{}", rng.below(words));
    let adds = (0..n).map(|d| (word(), d)).collect();
    (adds, (0..n).map(|_| word()).collect())
}

fn pool(mode: Mode) -> (tempfile::TempDir, Arc<Pool>) {
    let dir = pmkv_testutil::pool_dir();
    let po = PoolOptions::default().mode(mode).latency(Latency::NONE);
    let pool = Arc::new(Pool::create(dir.path().join("d.pool"), "mangosteen", &po).unwrap());
    (dir, pool)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(6);
    let mode: Mode = args.next().and_then(|a| a.parse().ok()).unwrap_or(Mode::Eadr);
    let (adds, probes) = workload(n);
    let per = |t: Instant, k: usize| t.elapsed().as_nanos() as f64 / k as f64;
    let opts = || Options { region_size: 64 << 20, ..Options::default() };
    let mut got: [Vec<(f64, f64)>; 3] = Default::default();
    for round in 1..=rounds {
        let mut idx = Index::default();
        let t = Instant::now();
        for (w, d) in &adds {
            idx.add(w, *d);
        }
        let add = per(t, adds.len());
        let t = Instant::now();
        let found: usize = probes.iter().map(|w| std::hint::black_box(&idx).get(w).len()).sum();
        let get = per(t, probes.len());
        println!("plain    {round} add {add:8.1} get {get:8.1} ns ({found})");
        got[0].push((add, get));

        let (_dir, p) = pool(mode);
        let d = DurableIndex::open(p, opts()).unwrap();
        let t = Instant::now();
        for (w, doc) in &adds {
            d.add(w, *doc).unwrap();
        }
        let add = per(t, adds.len());
        let t = Instant::now();
        let found: usize = probes.iter().map(|w| d.read(|i| i.get(w).len())).sum();
        let get = per(t, probes.len());
        println!("compiler {round} add {add:8.1} get {get:8.1} ns ({found})");
        got[1].push((add, get));
        drop(d);

        let (_dir, p) = pool(mode);
        let d = Durable::<Index>::open(p, opts()).unwrap();
        let t = Instant::now();
        for (w, doc) in &adds {
            let (w, doc) = (w.as_str(), *doc);
            d.write(move |i| {
                i.add(w, doc);
            })
            .unwrap();
        }
        let add = per(t, adds.len());
        let t = Instant::now();
        let found: usize = probes.iter().map(|w| d.read(|i| i.get(w).len())).sum();
        let get = per(t, probes.len());
        println!("pages    {round} add {add:8.1} get {get:8.1} ns ({found})");
        got[2].push((add, get));
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "medians of {rounds}, n={n}, {mode:?}, load {}",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    let m = |k: usize, f: fn(&(f64, f64)) -> f64| median(got[k].iter().map(f).collect());
    for (k, name) in [(0, "plain"), (1, "compiler"), (2, "pages")] {
        let (add, get) = (m(k, |p| p.0), m(k, |p| p.1));
        println!(
            "{name:8} add {add:8.1} ns ({:6.2}x plain)  get {get:8.1} ns ({:5.2}x plain)",
            add / m(0, |p| p.0),
            get / m(0, |p| p.1)
        );
    }
}
