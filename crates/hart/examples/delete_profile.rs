//! Profiling aid: load the Dictionary, then search, update and delete every word (eadr,
//! or adr with `PMKV_PROFILE_MODE=adr`),
//! printing ns/op per phase, with a 1 s pause before the phase named by the first argument
//! (`delete` by default). Run under `perf record -D <ms>` to see that phase alone. A second
//! argument repeats the focused phase that many times (for the read-only phases `search`
//! and `hot`, whose single pass is too short to sample).

use pmkv_hart::{Hart, Options};
use pmkv_substrate::{Mode, Pool, PoolOptions};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let focus = std::env::args().nth(1).unwrap_or_else(|| "delete".into());
    let reps: usize = std::env::args().nth(2).and_then(|r| r.parse().ok()).unwrap_or(1);
    let owned = pmkv_testutil::words();
    let words: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
    let path = format!("/dev/shm/pmkv-delprof-{}.pool", std::process::id());
    let _ = std::fs::remove_file(&path);
    // `PMKV_PROFILE_MODE=adr` profiles the flushing mode instead.
    let mode = match std::env::var("PMKV_PROFILE_MODE").as_deref() {
        Ok("adr") => Mode::Adr,
        _ => Mode::Eadr,
    };
    // A 1 GiB ceiling (not the default 64 GiB of address space) lets the example run
    // under valgrind: `valgrind --tool=callgrind --toggle-collect='pmkv_hart::insert::<impl
    // pmkv_hart::hart::Hart>::put'` counts the instructions of a phase exactly, where
    // timings on a shared machine move by tens of percent.
    let opts = PoolOptions::default().mode(mode).initial_size(256 << 20).max_size(1 << 30);
    let h = Hart::open(Arc::new(Pool::create(&path, "hart", &opts).unwrap()), Options::default()).unwrap();
    let phase = |name: &str, op: &mut dyn FnMut(&[u8])| {
        if name == focus {
            std::thread::sleep(std::time::Duration::from_millis(1000));
        }
        let reps = if name == focus { reps } else { 1 };
        let c0 = pmkv_substrate::counters::snapshot();
        let t = Instant::now();
        for _ in 0..reps {
            for w in &words {
                op(w);
            }
        }
        let ns = t.elapsed().as_nanos() as f64;
        // Persists per operation, so that a change's flushes and fences show beside its time.
        let c = pmkv_substrate::counters::snapshot().since(&c0);
        let n = (reps * words.len()) as f64;
        eprintln!(
            "{name} {:.1} ns/op, {:.3} lines, {:.3} flushes, {:.3} fences per op",
            ns / n,
            c.lines_written as f64 / n,
            c.flushes as f64 / n,
            c.fences as f64 / n
        );
        if name == focus {
            // Nothing after the focused phase (teardown included) reaches the profile.
            let _ = std::fs::remove_file(&path);
            std::process::exit(0);
        }
    };
    phase("insert", &mut |w| h.put(w, &[7u8; 8]).unwrap());
    let mut sink = 0usize;
    phase("search", &mut |w| {
        h.get_with(w, &mut |v| sink += v.len()).unwrap();
    });
    // Hot path: the same key over and over (no cache misses): the code's own cost.
    let w0 = words[words.len() / 2];
    phase("hot", &mut |_| {
        h.get_with(w0, &mut |v| sink += v.len()).unwrap();
    });
    sink -= 8 * words.len();
    phase("update", &mut |w| h.put(w, &[8u8; 8]).unwrap());
    phase("delete", &mut |w| {
        h.delete(w).unwrap();
    });
    assert_eq!(sink, 8 * words.len());
    // The volatile baseline of `pmkv bench` (a BTreeMap behind a lock), same keys and order.
    if focus == "none" {
        let m = parking_lot::RwLock::new(std::collections::BTreeMap::<Vec<u8>, Vec<u8>>::new());
        let vphase = |name: &str, op: &mut dyn FnMut(&[u8])| {
            let t = Instant::now();
            for w in &words {
                op(w);
            }
            eprintln!("v-{name} {:.1} ns/op", t.elapsed().as_nanos() as f64 / words.len() as f64);
        };
        vphase("insert", &mut |w| drop(m.write().insert(w.to_vec(), vec![7u8; 8])));
        vphase("search", &mut |w| sink += m.read().get(w).map_or(0, |v| v.len()));
        vphase("update", &mut |w| {
            if let Some(v) = m.write().get_mut(w) {
                v.clear();
                v.extend_from_slice(&[8u8; 8]);
            }
        });
        vphase("delete", &mut |w| drop(m.write().remove(w)));
    }
    drop(h);
    let _ = std::fs::remove_file(&path);
}
