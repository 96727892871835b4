//! Delete (Algorithm 5), and freeing an ART that became empty (SPEC H6).

use crate::checksum::Meta;
use crate::error::Result;
use crate::hart::Hart;
use crate::hash_table::hash_key;
use crate::layout::*;
use crate::pm::{leaf_word, leaf_words, write_u64, FreeingKeys, PmKeys};

impl Hart {
    /// Delete (Algorithm 5). Returns whether the key was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        if key.len() > MAX_KEY {
            return Ok(false);
        }
        self.pm.check_write()?;
        let hk = hash_key(key, self.pm.kh);
        let pool = &*self.pm.pool;
        let (found, now_empty) = self
            .table
            .with_mut(hk, |art| {
                // SAFETY: given only leaves of this ART, under its write lock.
                let ks = FreeingKeys { keys: unsafe { PmKeys::new(pool) }, alloc: &self.pm.alloc };
                // Line 9: out of the DRAM tree first.
                let Some(leaf) = art.remove(key, &ks) else { return (false, false) };
                // The leaf's bounds checked once for its three words (`leaf_words`).
                let w = leaf_words(pool, leaf);
                let m = Meta::decode(leaf_word(w, LEAF_META));
                let v = if inline_len(m.flags).is_some() { 0 } else { leaf_word(w, LEAF_P_VALUE) };
                let kobj = if m.key_out() { leaf_word(w, LEAF_KEY) } else { 0 };
                // Their frees follow the leaf's: start loading their chunks' metadata now.
                for obj in [v, kobj] {
                    if obj != 0 {
                        self.pm.alloc.prefetch_meta(obj);
                    }
                }
                // Erase the leaf (its meta word becomes the erase mark, with the leaf's
                // generation) and reset its bit, both persisted under one fence (lines
                // 11–12), before the slot can be reserved again. Both, because from
                // format 8 recovery takes a free slot whose leaf passes its checks for an
                // insert whose bit a crash lost (`insert`): a reset bit that reached PM
                // without the erase mark would bring the record back. A crash before
                // the fence leaves the erase mark alone (recovery finishes the delete),
                // the reset bit alone (the record is still there) or neither. (Up to
                // format 7 the erase was a plain store, for `salvage`'s sake only, and
                // the delete persisted one line; now it persists two, under the same
                // fence.)
                let gen = (m.flags & GEN_MASK) >> GEN_SHIFT;
                // SAFETY: the leaf's meta word, ours under the ART write lock; the leaf
                // is out of the tree, so no reader can reach it any more.
                unsafe { write_u64(pool, leaf + LEAF_META, erased_word(leaf, gen)) };
                let _ = self.pm.alloc.free_with(leaf, || pool.flush_off(leaf + LEAF_META, 8));
                // Lines 13–14: the value bit — flushed but not fenced: until this thread's
                // next fence a crash may leave the value used and named by no leaf, an
                // orphan recovery's sweep frees (the paper fences it: 2 fences). The
                // other order could resurrect the key with a value slot that another
                // writer has reused meanwhile.
                if v != 0 {
                    self.pm.alloc.free_unfenced(v);
                }
                if kobj != 0 {
                    self.pm.alloc.free_unfenced(kobj);
                }
                let empty = art.is_empty();
                if empty {
                    // The ART is about to be freed: its leaf slots reserved ahead go back.
                    self.pm.alloc.unreserve_run(&mut art.leaves);
                }
                (true, empty)
            })
            .unwrap_or((false, false));
        // Lines 15–16: free the ART if it became empty (SPEC H6).
        if now_empty {
            self.table.remove_if_empty(hk);
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use crate::hart::{Hart, Options};
    use pmkv_substrate::Pool;
    use std::sync::Arc;

    /// An ART reserves leaf slots ahead once it has a few leaves (`Hart::make_leaf`), and
    /// gives them back when its last key is deleted and it is freed: nothing stays
    /// reserved, so the emptied chunks can be recycled.
    #[test]
    fn a_freed_art_gives_back_its_leaf_slots_reserved_ahead() {
        let sim = pmkv_testutil::sim_opts(4 << 20);
        let h = Hart::open(Arc::new(Pool::create_sim("hart", &sim).unwrap()), Options::default()).unwrap();
        // One ART (hash key "ab"), grown past the size at which it reserves runs.
        let keys: Vec<Vec<u8>> = (0..300u32).map(|i| format!("ab{i:05}").into_bytes()).collect();
        for k in &keys {
            h.put(k, b"v").unwrap();
        }
        let held = h.pm.alloc.check().unwrap().reserved_slots;
        assert!(held > 1, "a 300-leaf ART holds a run of slots ahead ({held})");
        for k in &keys[..299] {
            assert!(h.delete(k).unwrap());
        }
        assert!(h.pm.alloc.check().unwrap().reserved_slots > 0, "still held while the ART lives");
        assert!(h.delete(&keys[299]).unwrap());
        assert_eq!(h.pm.alloc.check().unwrap().reserved_slots, 0, "given back with the ART");
        h.check().unwrap();
        // Inserts after that start a new ART and reserve again.
        h.put(b"ab", b"w").unwrap();
        h.check().unwrap();
    }
}
