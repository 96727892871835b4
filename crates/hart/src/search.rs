//! Search (Algorithm 4).

use crate::error::{Error, Result};
use crate::hart::Hart;
use crate::hash_table::{hash_key, HashKey};
use crate::layout::*;
use crate::pm::{lookup, Lookup, PmKeys};

/// What a search's pass under the ART's read lock found (see [`Hart::get_with`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Found {
    Missing,
    Value,
    /// A check failed before `f` was called.
    Damage,
}

impl Hart {
    /// Search (Algorithm 4): call `f` with the value of `key`; returns whether the key
    /// was found. `f` runs while the ART's read lock is held: it must not call into this
    /// HART (a writer waiting for the lock would make it wait for itself).
    pub fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        if key.len() > MAX_KEY {
            return Ok(false);
        }
        let hk = hash_key(key, self.pm.kh);
        // The closure returns a small `Copy` state, which `with` returns in a register,
        // and carries no error: a failed check is rare (damage), and since it is met
        // before `f` is called, the search is run again out of line to build the error
        // (`damaged`). (Returning the whole `Result`, an enum holding a `String`, went
        // through the stack, and its copy out stalled on store forwarding: `perf` put ~6 %
        // of a cached search on that one load; an `Option<Error>` beside the state cost
        // ~13 instructions per search, callgrind.)
        let found = self.table.with(hk, |art| {
            // Algorithm 4 lines 9–10 check the leaf bit: under the per-ART lock a leaf in
            // the tree is always used (writers publish it before releasing the lock), so
            // the check is needed only in recovery and in `check`.
            let Some((leaf, matched)) = art.leaf_for(key) else { return Found::Missing };
            // One visit of the leaf compares its key (lazy expansion) and reads an inline
            // value (`pm::lookup`). The value is verified (the leaf's value check, and a
            // value object's own check in `value_of`). The key check is not recomputed
            // here: every leaf's key was verified when the open put it in the tree, and
            // the key bytes have just been compared with the ones asked for, so the
            // record answers exactly that key. (Measured: recomputing it costs ~20 ns, a
            // sixth of a search.) `scan`, which returns stored keys, does verify them.
            // SAFETY: a used leaf of this ART, whose read lock we hold.
            match unsafe { lookup(&self.pm.pool, leaf, (!matched).then_some(key)) } {
                Lookup::Missing => Found::Missing,
                Lookup::Value(v) => {
                    f(v);
                    Found::Value
                }
                // SAFETY: as above.
                Lookup::Elsewhere => match unsafe { self.pm.value_of(leaf) } {
                    Ok(v) => {
                        f(v);
                        Found::Value
                    }
                    Err(_) => Found::Damage,
                },
            }
        });
        match found {
            Some(Found::Value) => Ok(true),
            Some(Found::Damage) => Err(self.damaged(hk, key)),
            _ => Ok(false),
        }
    }

    /// The error of a search that met damage: the search again, to the failed check,
    /// which is noted (writes are refused from then on, see `Pm::check_write`). Damage in
    /// PM stays, so the same check fails again; if a writer replaced the record meanwhile,
    /// the error still stands for the search as first run.
    #[cold]
    #[inline(never)]
    fn damaged(&self, hk: HashKey, key: &[u8]) -> Error {
        let again = self.table.with(hk, |art| {
            // SAFETY: given only leaves of this ART, under its read lock.
            let ks = unsafe { PmKeys::new(&self.pm.pool) };
            // SAFETY: a used leaf of this ART, whose read lock we hold.
            art.get(key, &ks).and_then(|leaf| unsafe { self.pm.value_of(leaf) }.err())
        });
        let e = again.flatten().unwrap_or_else(|| {
            Error::Corrupt(format!("a search of a {}-byte key met damage that a second read did not", key.len()))
        });
        self.pm.note_damage(&e);
        e
    }
}

#[cfg(test)]
mod tests {
    use crate::error::Error;
    use crate::hart::{Hart, Options};
    use crate::hash_table::hash_key;
    use crate::layout::*;
    use crate::pm::{read_u64, write_u64, PmKeys};
    use pmkv_substrate::Pool;
    use std::sync::Arc;

    fn leaf_of(h: &Hart, key: &[u8]) -> u64 {
        // SAFETY: leaves of this ART, under its read lock.
        let ks = unsafe { PmKeys::new(&h.pm.pool) };
        h.table.with(hash_key(key, h.pm.kh), |art| art.get(key, &ks)).flatten().expect("the key is stored")
    }

    /// Flip the low bit of the PM word at `off`.
    fn flip(h: &Hart, off: u64) {
        // SAFETY: no slice of PM is alive; the test runs alone.
        unsafe { write_u64(&h.pm.pool, off, read_u64(&h.pm.pool, off) ^ 1) };
    }

    /// The search's fast pass reads an inline value without an error beside it and
    /// rebuilds the error of a failed check out of line (`Hart::damaged`): a damaged
    /// inline value word and a damaged value object are each reported as damage, the
    /// caller's closure is not called, the other records still read, and writes are
    /// refused afterwards, as before the search was split.
    #[test]
    fn a_search_that_meets_damage_reports_it_and_lends_nothing() {
        let sim = pmkv_testutil::sim_opts(4 << 20);
        let h = Hart::open(Arc::new(Pool::create_sim("hart", &sim).unwrap()), Options::default()).unwrap();
        let long = [5u8; 100];
        h.put(b"abinline", b"12345678").unwrap();
        h.put(b"abobject", &long).unwrap();
        h.put(b"abintact", b"x").unwrap();
        let get = |k: &[u8]| {
            let mut got = None;
            h.get_with(k, &mut |v| got = Some(v.to_vec())).map(|found| (found, got))
        };
        assert_eq!(get(b"abobject").unwrap(), (true, Some(long.to_vec())));
        assert_eq!(get(b"abmissing").unwrap(), (false, None));

        flip(&h, leaf_of(&h, b"abinline") + LEAF_P_VALUE);
        assert!(matches!(get(b"abinline"), Err(Error::Corrupt(_))), "a damaged inline value is reported");
        let v = read_u64(&h.pm.pool, leaf_of(&h, b"abobject") + LEAF_P_VALUE);
        flip(&h, v + VALUE_HDR as u64);
        assert!(matches!(get(b"abobject"), Err(Error::Corrupt(_))), "a damaged value object is reported");
        assert_eq!(get(b"abintact").unwrap(), (true, Some(b"x".to_vec())), "intact records still read");
        assert!(matches!(h.put(b"abnew", b"v"), Err(Error::Corrupt(_))), "writes are refused after damage");
    }
}
