//! Quick Dictionary run of HART against a BTreeMap behind a lock (the volatile baseline),
//! one thread: `cargo run --release -p pmkv-hart --example dictionary -- MODE`.
//! The full harness is `pmkv bench`; this is the engine developer's inner loop.
//! `EXACT=1` counts lines written exactly (distinct lines each operation dirtied; the
//! timings then include that counting), else the default count of flushed lines.

use parking_lot::RwLock;
use pmkv_hart::{Hart, Options};
use pmkv_substrate::{counters, Mode, Pool, PoolOptions};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let mode: Mode = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(Mode::Eadr);
    counters::set_exact(std::env::var("EXACT").is_ok_and(|v| v == "1"));
    let owned = pmkv_testutil::words();
    let words: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
    let n = words.len() as f64;
    let path = format!("/dev/shm/pmkv-dict-{}.pool", std::process::id());
    let _ = std::fs::remove_file(&path);
    let h = Hart::open(
        Arc::new(Pool::create(&path, "hart", &PoolOptions::default().mode(mode).initial_size(256 << 20)).unwrap()),
        Options::default(),
    )
    .unwrap();
    let b: RwLock<BTreeMap<Vec<u8>, Vec<u8>>> = RwLock::new(BTreeMap::new());
    let val = 12345678u64.to_le_bytes();
    let val2 = 87654321u64.to_le_bytes();
    let row = |name: &str, hart: &mut dyn FnMut(&[u8]), base: &mut dyn FnMut(&[u8])| {
        let c0 = counters::snapshot();
        let t = Instant::now();
        for w in &words {
            // One operation per word for the exact lines-written count.
            counters::begin_op();
            hart(w);
        }
        let th = t.elapsed().as_nanos() as f64 / n;
        let c = counters::snapshot().since(&c0);
        let t = Instant::now();
        for w in &words {
            base(w);
        }
        let tb = t.elapsed().as_nanos() as f64 / n;
        println!(
            "{name:<7} hart {th:>7.1} ns/op   btree {tb:>7.1} ns/op   ratio {:.2}   fences {:.2} flushes {:.2} lines r/w {:.2}/{:.2}",
            tb / th,
            c.fences as f64 / n,
            c.flushes as f64 / n,
            c.lines_read as f64 / n,
            c.lines_written as f64 / n
        );
    };
    println!("Dictionary ({} words), mode {mode}", words.len());
    row("insert", &mut |w| h.put(w, &val).unwrap(), &mut |w| {
        b.write().insert(w.to_vec(), val.to_vec());
    });
    let mut sink = 0usize;
    let mut sink2 = 0usize;
    row(
        "search",
        &mut |w| {
            h.get_with(w, &mut |v| sink += v.len()).unwrap();
        },
        &mut |w| {
            if let Some(v) = b.read().get(w) {
                sink2 += v.len()
            }
        },
    );
    row("update", &mut |w| h.put(w, &val2).unwrap(), &mut |w| {
        if let Some(v) = b.write().get_mut(w) {
            v.clear();
            v.extend_from_slice(&val2);
        }
    });
    row(
        "delete",
        &mut |w| {
            h.delete(w).unwrap();
        },
        &mut |w| {
            b.write().remove(w);
        },
    );
    assert!(sink > 0 && sink == sink2);
    drop(h);
    let _ = std::fs::remove_file(&path);
}
