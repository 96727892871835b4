//! Search (Algorithm 4).

use crate::error::Result;
use crate::hart::Hart;
use crate::hash_table::hash_key;
use crate::layout::*;
use crate::pm::{lookup, Lookup};

impl Hart {
    /// Search (Algorithm 4): call `f` with the value of `key`; returns whether the key
    /// was found. `f` runs while the ART's read lock is held: it must not call into this
    /// HART (a writer waiting for the lock would make it wait for itself).
    pub fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        if key.len() > MAX_KEY {
            return Ok(false);
        }
        let hk = hash_key(key, self.pm.kh);
        // The closure returns a `bool` and leaves an error beside it: `with` then returns
        // its result in a register. (Returning the whole `Result`, an enum holding a
        // `String`, went through the stack, and its copy out stalled on store forwarding:
        // `perf` put ~6 % of a cached search on that one load.)
        let mut err = None;
        let found = self.table.with(hk, |art| {
            // Algorithm 4 lines 9–10 check the leaf bit: under the per-ART lock a leaf in
            // the tree is always used (writers publish it before releasing the lock), so
            // the check is needed only in recovery and in `check`.
            let Some((leaf, matched)) = art.leaf_for(key) else { return false };
            // One visit of the leaf compares its key (lazy expansion) and reads an inline
            // value (`pm::lookup`). The value is verified (the leaf's value check, and a
            // value object's own check in `read_value`). The key check is not recomputed
            // here: every leaf's key was verified when the open put it in the tree, and
            // the key bytes have just been compared with the ones asked for, so the
            // record answers exactly that key. (Measured: recomputing it costs ~20 ns, a
            // sixth of a search.) `scan`, which returns stored keys, does verify them.
            // SAFETY: a used leaf of this ART, whose read lock we hold.
            match unsafe { lookup(&self.pm.pool, leaf, (!matched).then_some(key)) } {
                Lookup::Missing => false,
                Lookup::Value(v) => {
                    f(v);
                    true
                }
                // SAFETY: as above.
                Lookup::Elsewhere => match unsafe { self.pm.read_value(leaf, f) } {
                    Ok(()) => true,
                    Err(e) => {
                        err = Some(e);
                        false
                    }
                },
            }
        });
        match err {
            Some(e) => Err(e),
            None => Ok(found == Some(true)),
        }
    }
}
