//! Quick Dictionary run of the `mangosteen` engine beside the same `BTreeMap` without
//! durability, one thread, `eadr` (or the mode given): the engine developer's inner loop
//! (`pmkv bench run -w dictionary` is the full harness).
//!
//! `cargo run --release -p pmkv-mangosteen --example dictionary [-- MODE [OPS]]`
//! OPS: which phases to time, any of `isud` (insert, search, update, delete; default all;
//! the phases after the last one named do not run, so that a profile holds only those);
//! `-` runs the engine alone, without the baseline (for a profiler). `PARAMS=k=v,...`
//! adds engine parameters (`PARAMS=background=true`). `EXACT=1` counts lines written
//! exactly (distinct lines each operation dirtied; the timings then include that
//! counting), else the default count of flushed lines.

use pmkv_core::{EngineFactory, Options};
use pmkv_mangosteen::MangosteenFactory;
use pmkv_substrate::{counters, Mode};
use std::collections::BTreeMap;
use std::time::Instant;

fn main() {
    let mode: Mode = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(Mode::Eadr);
    counters::set_exact(std::env::var("EXACT").is_ok_and(|v| v == "1"));
    let ops = std::env::args().nth(2).unwrap_or_else(|| "isud".into());
    // `-` in OPS: the engine alone, without the baseline (for a profiler).
    let alone = ops.contains('-');
    // Phases after the last one timed are skipped (each one needs those before it).
    let last = "isud".rfind(|c| ops.contains(c)).unwrap_or(0);
    let phase = std::cell::Cell::new(0);
    let owned = pmkv_testutil::words();
    let words: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
    let n = words.len() as f64;
    let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
    let mut o = Options::default();
    o.mode = mode;
    o.initial_size = 256 << 20;
    // A 1 GiB ceiling instead of 64 GiB of address space, so that the example also runs
    // under valgrind (callgrind counts a phase's instructions exactly), with the region
    // the default ceiling gives (the engine sizes it from the ceiling: 1/64, at most 256
    // MiB).
    o.max_size = 1 << 30;
    o = o.param("region_mib", "256");
    // Engine parameters for an A/B, e.g. `PARAMS=background=true,dedup=false`.
    for kv in std::env::var("PARAMS").unwrap_or_default().split(',').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').expect("PARAMS: key=value,...");
        o = o.param(k, v);
    }
    let e = MangosteenFactory.open(&dir.path().join("d.pool"), &o).unwrap();
    let mut b: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let val = 12345678u64.to_le_bytes();
    let val2 = 87654321u64.to_le_bytes();
    let row = |name: &str, timed: bool, mg: &mut dyn FnMut(&[u8]), base: &mut dyn FnMut(&[u8])| {
        phase.set(phase.get() + 1);
        if phase.get() > last + 1 {
            return;
        }
        let c0 = counters::snapshot();
        let t = Instant::now();
        for w in &words {
            // One operation per word for the exact lines-written count.
            counters::begin_op();
            mg(w);
        }
        let tm = t.elapsed().as_nanos() as f64 / n;
        let c = counters::snapshot().since(&c0);
        let t = Instant::now();
        if !alone {
            for w in &words {
                base(w);
            }
        }
        let tb = t.elapsed().as_nanos() as f64 / n;
        if timed {
            println!(
                "{name:<7} mangosteen {tm:>7.1} ns/op   btree {tb:>7.1} ns/op   fences {:.2} lines w {:.2}",
                c.fences as f64 / n,
                c.lines_written as f64 / n
            );
        }
    };
    println!("Dictionary ({} words), mode {mode}", words.len());
    let bm = std::cell::RefCell::new(&mut b);
    row("insert", ops.contains('i'), &mut |w| e.put(w, &val).unwrap(), &mut |w| {
        bm.borrow_mut().insert(w.to_vec(), val.to_vec());
    });
    let (mut sink, mut sink2) = (0usize, 0usize);
    row(
        "search",
        ops.contains('s'),
        &mut |w| {
            e.get_with(w, &mut |v| sink += v.len()).unwrap();
        },
        &mut |w| sink2 += bm.borrow().get(w).map_or(0, Vec::len),
    );
    row("update", ops.contains('u'), &mut |w| e.put(w, &val2).unwrap(), &mut |w| {
        bm.borrow_mut().insert(w.to_vec(), val2.to_vec());
    });
    row(
        "delete",
        ops.contains('d'),
        &mut |w| {
            e.delete(w).unwrap();
        },
        &mut |w| {
            bm.borrow_mut().remove(w);
        },
    );
    std::hint::black_box((sink, sink2));
}
