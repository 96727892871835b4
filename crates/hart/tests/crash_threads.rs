//! SPEC H7 + P6: several writers under the crash simulator at once. At **every** flush and
//! fence point of every writer, crash images (a random half of the dirty lines, a random
//! half of the dirty 8-byte words, seeded from the run's seed and the point) are recovered;
//! the recovered HART must pass `check` (no leak, every leaf reachable once) and hold, for
//! each writer's keys, **exactly** the contents after some prefix of that writer's
//! operations that includes every operation it had completed when the crash came.
//!
//! The seed is printed; `PMKV_CRASH_SEED=N` replays a run's eviction samples.

mod common;
use common::*;
use pmkv_substrate::Eviction;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const WRITERS: [&str; 3] = ["aa", "zz", "mm"];

/// One writer's operations, in order: (key, Some(value) for a put, None for a delete).
type Plan = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// Writer `p`'s operations.
fn ops(p: &str) -> Plan {
    let mut v = Vec::new();
    for round in 0..3u32 {
        for i in 0..24u32 {
            let k = format!("{p}{i:03}").into_bytes();
            // 8-byte values (inline, updated in place), 48-byte ones (Algorithm 3, out of
            // line), and 3-byte ones (moves between inline lengths).
            let len = [8, 48, 3][round as usize];
            v.push((k.clone(), Some(tagged_value(&k, round, len))));
        }
        for i in (0..24u32).filter(|i| i % 3 == round % 3) {
            v.push((format!("{p}{i:03}").into_bytes(), None));
        }
    }
    v
}

/// The writer's keys after its first `n` operations.
fn after(ops: &[(Vec<u8>, Option<Vec<u8>>)], n: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for (k, v) in &ops[..n.min(ops.len())] {
        match v {
            Some(v) => m.insert(k.clone(), v.clone()),
            None => m.remove(k),
        };
    }
    m
}

#[test]
fn concurrent_writers_crash_anywhere() {
    let seed: u64 = std::env::var("PMKV_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0xc0ffee);
    eprintln!("concurrent writers: eviction seed {seed} (PMKV_CRASH_SEED={seed} replays it)");
    let h = Arc::new(sim_hart(2 << 20, 2));
    let plans: Arc<Vec<Plan>> = Arc::new(WRITERS.iter().map(|p| ops(p)).collect());
    // Operations each writer has completed (stored after the operation returned).
    let done: Arc<Vec<AtomicUsize>> = Arc::new(WRITERS.iter().map(|_| AtomicUsize::new(0)).collect());
    let found = CrashFindings::new();
    let f = found.clone();
    let (pl, dn) = (plans.clone(), done.clone());
    h.pool().sim().unwrap().set_hook(true, move |pt| {
        // Read the completed counts before the image is taken: every operation counted
        // here issued its last fence before, so its effects are in the image. A writer
        // is inside at most one operation at a time, and can finish at most one more while
        // the image is taken (its next fence waits for this hook).
        let floor: Vec<usize> = dn.iter().map(|d| d.load(Ordering::Acquire)).collect();
        let s = seed ^ pt.index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        f.check_images(pt, [Eviction::Lines(s), Eviction::Words(s ^ 1), Eviction::Words(s ^ 2)], "", |img| {
            let r = recover(img)?;
            r.check().map_err(|e| e.to_string())?;
            let all = contents(&r);
            for (w, p) in WRITERS.iter().enumerate() {
                let mine: BTreeMap<_, _> = all
                    .iter()
                    .filter(|(k, _)| k.starts_with(p.as_bytes()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let ok = (floor[w]..=floor[w] + 2).any(|n| after(&pl[w], n) == mine);
                if !ok {
                    return Err(format!(
                        "writer {p}: the recovered keys are no prefix of its operations from {} on",
                        floor[w]
                    ));
                }
            }
            Ok(())
        });
    });
    let writers: Vec<_> = (0..WRITERS.len())
        .map(|w| {
            let (h, plans, done) = (h.clone(), plans.clone(), done.clone());
            std::thread::spawn(move || {
                for (i, (k, v)) in plans[w].iter().enumerate() {
                    match v {
                        Some(v) => h.put(k, v).unwrap(),
                        None => assert!(h.delete(k).unwrap()),
                    }
                    done[w].store(i + 1, Ordering::Release);
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    h.pool().sim().unwrap().clear_hook();
    found.assert_none("crash consistency violated with concurrent writers");
    eprintln!("concurrent writers: {} crash images checked (every flush and fence point)", found.images());
    assert!(found.images() > 1000);
    h.check().unwrap();
    for (w, p) in WRITERS.iter().enumerate() {
        let mine: BTreeMap<_, _> = contents(&h).into_iter().filter(|(k, _)| k.starts_with(p.as_bytes())).collect();
        assert_eq!(mine, after(&plans[w], plans[w].len()));
    }
}
