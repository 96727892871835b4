//! The lines-written counter against an independent record of the lines an operation
//! dirtied (a counter that missed the stores a mode does not flush made `eadr`
//! figures too small, and claims were judged on them).
//!
//! The record does not come from the counter's bookkeeping: the pool is a crash-simulation
//! pool whose every flush, fence and store through the pool's store functions is a point,
//! and at each point (and after the operation) its working memory is compared with the copy
//! taken at the previous one. A line whose bytes changed between two points was dirtied. A
//! line written and restored between two points (no point between the two stores) escapes
//! the record, as does a store of the value already there; both would make the counter
//! larger than the record, and the case fails then too, naming the operation.
//!
//! Runs in `adr` and `eadr`, on random inserts, updates and deletes of 8-byte keys (the
//! papers' workloads) and of longer string keys, 8-byte values.

use crate::util::opts;
use pmkv::{EngineFactory, Mode, Store};
use pmkv_substrate::counters;
use pmkv_substrate::{Eviction, Pool, LINE};
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// The working memory last seen and the lines that changed since the operation began.
#[derive(Default)]
struct Record {
    prev: Vec<u8>,
    dirtied: BTreeSet<usize>,
}

impl Record {
    /// Note the lines of `now` that differ from the previous copy (bytes past the end of
    /// a shorter copy, after a growth, compare with zero), and keep `now`.
    fn see(&mut self, now: Vec<u8>) {
        let lines = now.len().max(self.prev.len()).div_ceil(LINE);
        for l in 0..lines {
            let part = |v: &[u8]| -> [u8; LINE] {
                let mut b = [0u8; LINE];
                let (s, e) = ((l * LINE).min(v.len()), ((l + 1) * LINE).min(v.len()));
                b[..e - s].copy_from_slice(&v[s..e]);
                b
            };
            if part(&now) != part(&self.prev) {
                self.dirtied.insert(l);
            }
        }
        self.prev = now;
    }
}

/// Lines beyond which an update is taken to restructure rather than write its record:
/// every engine's plain update dirties a few lines.
pub const SMALL: u64 = 16;

/// The counter never counts fewer lines than the record saw dirtied, for any operation:
/// the blind spot this case exists for. An update (in place or not) counts exactly the
/// lines it dirtied, unless it restructures (dirties more than [`SMALL`] lines: Mangosteen
/// checkpointing its log inside an update, say), where it is held to the rule of inserts. Inserts and deletes may count more: a line they flush or store to
/// whose bytes do not change (a flushed range wider than the bytes written, a word
/// rewritten with its value) is counted, as the write-back it costs is real. An operation
/// dirtying more than [`counters::DIRTY_CAP`] lines may count a line twice, never miss one.
pub fn lines_written_are_the_lines_dirtied(f: &'static dyn EngineFactory) {
    if !f.info().persistent {
        return;
    }
    // The exact count is opt-in (it costs instructions on every store); this thread's
    // operations are the ones checked.
    let was = counters::set_exact(true);
    for mode in [Mode::Adr, Mode::Eadr] {
        if mode == Mode::Eadr && crate::crash::eadr_unsupported(f).is_some() {
            continue;
        }
        let layout = f.layout().expect("persistent engines name their layout");
        let o = opts().initial_size(1 << 20).max_size(64 << 20).mode(mode);
        let pool = Arc::new(Pool::create_sim(layout, &o.pool_options()).expect("sim pool"));
        let s = Store::from_engine(f.open_pool(pool.clone(), &o).expect("open on sim pool"));
        let sim = pool.sim().expect("sim pool");
        let rec = Arc::new(Mutex::new(Record::default()));
        let r = rec.clone();
        sim.set_hook_with(true, true, move |pt| r.lock().unwrap().see(pt.image(Eviction::All)));
        let mut rng = rand::rngs::StdRng::seed_from_u64(59);
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let (mut misses, mut mismatches) = (Vec::new(), Vec::new());
        let mut checked = 0;
        for i in 0..400usize {
            // Mostly 8-byte keys; every fifth a longer string key.
            let fresh = |rng: &mut rand::rngs::StdRng| -> Vec<u8> {
                if rng.gen_ratio(1, 5) {
                    format!("user-key-{:016x}", rng.gen::<u64>()).into_bytes()
                } else {
                    rng.gen::<u64>().to_be_bytes().to_vec()
                }
            };
            let value = rng.gen::<u64>().to_le_bytes();
            let (what, key) = match (i < 150, rng.gen_range(0..3)) {
                (true, _) | (false, 0) => ("insert", fresh(&mut rng)),
                (false, 1) => ("update", keys[rng.gen_range(0..keys.len())].clone()),
                _ => ("delete", keys[rng.gen_range(0..keys.len())].clone()),
            };
            {
                let mut g = rec.lock().unwrap();
                g.prev = sim.image_now(&pool, Eviction::All);
                g.dirtied.clear();
            }
            let c0 = counters::snapshot();
            if what == "delete" {
                assert!(s.delete(&key).expect("delete"));
                keys.retain(|k| *k != key);
            } else {
                s.put(&key, &value).expect("put");
                if what == "insert" {
                    keys.push(key.clone());
                }
            }
            let counted = counters::snapshot().since(&c0).lines_written;
            let dirtied = {
                let mut g = rec.lock().unwrap();
                g.see(sim.image_now(&pool, Eviction::All));
                g.dirtied.len() as u64
            };
            checked += 1;
            if counted < dirtied {
                misses.push(format!("op {i} {what} key {key:02x?}: counted {counted}, dirtied {dirtied}"));
            } else if what == "update" && counted != dirtied && dirtied <= SMALL {
                mismatches.push(format!("op {i} update key {key:02x?}: counted {counted}, dirtied {dirtied}"));
            }
        }
        sim.clear_hook();
        let name = f.info().name;
        let list = |v: &[String]| v.iter().take(20).cloned().collect::<Vec<_>>().join("\n");
        assert!(
            misses.is_empty(),
            "{name} in {mode}: {} of {checked} operations counted fewer lines than they dirtied:\n{}",
            misses.len(),
            list(&misses)
        );
        assert!(
            mismatches.is_empty(),
            "{name} in {mode}: {} updates counted other than the lines they dirtied:\n{}",
            mismatches.len(),
            list(&mismatches)
        );
    }
    counters::set_exact(was);
}
