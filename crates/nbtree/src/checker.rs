//! `check` (SPEC N-invariants): every PM entry reachable from the leaf list, each key once
//! and in order, the metadata layer equal to what the blocks say, no leaked object, no
//! write batch log in use.
//! Run it while no other thread writes the tree (a check beside writers may report
//! transient differences, never undefined behaviour: everything it reads is atomic).

use crate::error::{Error, Result};
use crate::layout::*;
use crate::leaf::{self, load, Leaf, SLOTS_MASK};
use crate::tree::NbTree;
use std::collections::HashSet;
use std::sync::atomic::Ordering;

/// Bytes by structure name.
pub(crate) type ByStructure = Vec<(String, u64)>;

impl NbTree {
    /// Verify the tree; `Err(Corrupt)` lists the problems, `Ok` summarises.
    pub fn check(&self) -> Result<String> {
        self.batches.quiesced(|| self.check_quiesced())
    }

    fn check_quiesced(&self) -> Result<String> {
        let _g = crossbeam_epoch::pin();
        drop(_g);
        for _ in 0..4 {
            crossbeam_epoch::pin().flush();
            if !self.pool.is_read_only() {
                self.collect();
            }
        }
        let g = crossbeam_epoch::pin();
        let mut problems: Vec<String> = Vec::new();
        let mut keep: HashSet<u64> = HashSet::new();
        keep.insert(self.sb);
        // SAFETY: the sentinel lives as long as the tree.
        let head = unsafe { &*self.head };
        let mut leaves: Vec<&Leaf> = vec![head];
        // SAFETY: `leaves_quiesced` lists the leaves of the live list; they are freed only through
        // the epoch scheme after an SMO unlinks them, and this thread is pinned (`g`).
        leaves.extend(self.leaves_quiesced().into_iter().map(|l| unsafe { &*l }));
        // The PM list must be the DRAM list.
        let mut off = head.block;
        for (i, l) in leaves.iter().enumerate() {
            if off != l.block {
                problems.push(format!("leaf {i}: the PM list names block {off:#x}, the metadata layer {:#x}", l.block));
                break;
            }
            keep.insert(off);
            let word = load(&self.pool, off + BLK_NEXT);
            match next_of(word, off, self.fmt.checks) {
                Some(n) => off = n,
                None => {
                    problems.push(format!("leaf {i} (block {off:#x}): the next word {word:#x} fails its check"));
                    off = 0;
                    break;
                }
            }
        }
        if off != 0 && problems.is_empty() {
            problems.push(format!("the PM list continues past the last leaf, to {off:#x}"));
        }
        self.check_routing(&leaves[1..], &mut problems);
        let mut records = 0u64;
        let mut last: Option<Vec<u8>> = None;
        for (i, l) in leaves.iter().enumerate() {
            let b = l.bits(&self.pool);
            if i == 0 && b != 0 {
                problems.push("the sentinel has committed slots".into());
            }
            if b & ((1u64 << self.first_slot()) - 1) != 0 {
                problems.push(format!("leaf {i} (block {:#x}): the bitmap names a metadata slot", l.block));
            }
            if b & crate::leaf::SMO_BIT != 0 {
                problems.push(format!("leaf {i} (block {:#x}) is in an SMO", l.block));
            }
            let mut keys: Vec<Vec<u8>> = Vec::new();
            if self.fmt.checks && load(&self.pool, l.block + BLK_TRAILER) != trailer_word(l.block) {
                problems.push(format!("leaf {i} (block {:#x}): the trailer word fails its check", l.block));
            }
            for slot in self.first_slot()..self.fmt.cap() {
                let kw = load(&self.pool, l.key_at(slot));
                let p = load(&self.pool, l.payload_at(slot));
                let committed = b & SLOTS_MASK & (1 << slot) != 0;
                let ctx = || format!("leaf {i} (block {:#x}) slot {slot}", l.block);
                if kw == self.fmt.empty {
                    continue;
                }
                // Format 4 marks empty slots: a zero key word is a record whose key was
                // lost (recovery refuses the pool for it).
                if kw == 0 {
                    problems.push(format!("{}: the key word is zero (a record's key is lost)", ctx()));
                    continue;
                }
                if !committed {
                    problems.push(format!("{}: a key recovery would find is not in the bitmap", ctx()));
                    continue;
                }
                if p & (DEL | FROZEN) != 0 {
                    problems.push(format!("{}: payload {p:#x} is marked deleted or frozen", ctx()));
                    continue;
                }
                // SAFETY: `l` is a live leaf and this thread is pinned, so the key object the entry
                // names stays allocated while the slice is used (`entry_key`'s contract).
                let Some(k) = (unsafe { leaf::entry_key(&self.pool, l.key_at(slot), kw, p, true) }) else {
                    problems.push(format!("{}: the key is damaged", ctx()));
                    continue;
                };
                let k = k.as_slice().to_vec();
                let pair = (p & KIND_MASK) >> KIND_SHIFT == KIND_PAIR;
                if pair && !self.fmt.pairs {
                    problems.push(format!("{}: a two-word key in a format-1 pool", ctx()));
                }
                // Format 3: the fourth word of other keys is a second value slot.
                if !pair && !self.fmt.checks && load(&self.pool, l.key_at(slot) + E_KEY2) != 0 {
                    problems.push(format!("{}: a second key word for a key that has none", ctx()));
                }
                if l.fp(&self.pool, slot) != fingerprint(&k) {
                    problems.push(format!("{}: wrong fingerprint", ctx()));
                }
                if k.as_slice() < &l.low[..] {
                    problems.push(format!("{}: key {k:x?} below the leaf's fence", ctx()));
                }
                if self.fmt.checks {
                    let e = l.key_at(slot);
                    match verified(kw, p, load(&self.pool, e + E_VALUE), load(&self.pool, e + E_KEY2)) {
                        None => problems.push(format!("{}: the entry fails its check", ctx())),
                        Some((rest, _)) if rest != p => {
                            problems.push(format!("{}: payload {p:#x} is not at rest (an update in flight)", ctx()))
                        }
                        Some(_) => {}
                    }
                }
                let w = load(&self.pool, l.key_at(slot) + value_word_off(p));
                // SAFETY: pinned, as for `entry_key` above: the value object the payload names
                // stays allocated while `with_value` reads it.
                if !unsafe { leaf::with_value(&self.pool, p, w, self.fmt.checks, &mut |_| {}) } {
                    problems.push(format!("{}: the value of {k:x?} is damaged", ctx()));
                }
                if p & VAL_PTR != 0 {
                    keep.insert(val_off(p, self.fmt.checks));
                    self.check_object(val_off(p, self.fmt.checks), VALUE, &ctx, &mut problems);
                }
                if (p & KIND_MASK) >> KIND_SHIFT == KIND_OBJ {
                    keep.insert(kw);
                    self.check_object(kw, KEY, &ctx, &mut problems);
                }
                keys.push(k);
                records += 1;
            }
            keys.sort();
            for w in keys.windows(2) {
                if w[0] == w[1] {
                    problems.push(format!("leaf {i}: key {:x?} twice", w[0]));
                }
            }
            if let (Some(prev), Some(first)) = (&last, keys.first()) {
                if first <= prev {
                    problems.push(format!("leaf {i}: key {first:x?} not above the previous leaf's keys"));
                }
            }
            if let Some(k) = keys.last() {
                last = Some(k.clone());
            }
        }
        if records != self.len() {
            problems.push(format!("the tree counts {} records, the blocks hold {records}", self.len()));
        }
        // Leaks: used objects no live entry names, beyond those retired and waiting.
        let mut orphans = 0u64;
        for ty in [SUPER, BLOCK, KEY, VALUE] {
            self.alloc.for_each_used(ty, |o| {
                if !keep.contains(&o) {
                    orphans += 1;
                }
            });
        }
        let waiting = self.reclaim.pending();
        let unswept = load(&self.pool, self.sb + SB_SWEEP) != 0;
        if orphans > waiting && !unswept {
            problems.push(format!("{} leaked PM objects (used, named by no entry, not retired)", orphans - waiting));
        }
        problems.extend(pmkv_substrate::batch_log::problems(&self.alloc));
        match self.alloc.check() {
            Ok(r) => problems.extend(r.problems.iter().map(|p| format!("allocator: {p}"))),
            Err(e) => problems.push(format!("allocator: {e}")),
        }
        drop(g);
        if problems.is_empty() {
            Ok(format!(
                "{records} records in {} leaves; {orphans} objects awaiting reclamation{}",
                leaves.len() - 1,
                if unswept { " (the next read-write open sweeps)" } else { "" }
            ))
        } else {
            Err(Error::Corrupt(problems.join("\n")))
        }
    }

    /// The inner nodes lead to the leaves of the list, in order, and each level-0 node
    /// names its leaves' blocks (which searches prefetch from there). Recovery indexes
    /// no leaf left empty (its keys' range routes to the leaf before it), so the list may
    /// hold leaves the inner nodes skip, all without a committed entry.
    fn check_routing(&self, leaves: &[&Leaf], problems: &mut Vec<String>) {
        // SAFETY: pinned by the caller; inner nodes are immutable.
        let nodes = unsafe { crate::inner::nodes(self.root.load(Ordering::Acquire)) };
        // `nodes` lists each level left to right, so the level-0 nodes' children, in that
        // order, are the indexed leaves in key order.
        let mut j = 0;
        for &n in &nodes {
            // SAFETY: `n` came from `inner::nodes` of the root loaded while the caller is pinned;
            // inner nodes are immutable once published and freed only after the epoch ends.
            let n = unsafe { &*n };
            if n.level != 0 {
                continue;
            }
            for (&c, &b) in n.children[..n.n].iter().zip(&n.blocks[..n.n]) {
                while leaves.get(j).is_some_and(|l| !std::ptr::eq(c as *const Leaf, *l)) {
                    if leaves[j].bits(&self.pool) & SLOTS_MASK != 0 {
                        problems.push(format!("leaf {}: holds entries but no inner node leads to it", j + 1));
                    }
                    j += 1;
                }
                let Some(l) = leaves.get(j) else {
                    problems.push("the inner nodes lead to a leaf not in the list, or out of order".into());
                    return;
                };
                if b != l.block {
                    problems.push(format!(
                        "leaf {}: its inner node names block {b:#x}, the leaf {:#x}",
                        j + 1,
                        l.block
                    ));
                }
                j += 1;
            }
        }
        for (k, l) in leaves.iter().enumerate().skip(j) {
            if l.bits(&self.pool) & SLOTS_MASK != 0 {
                problems.push(format!("leaf {}: holds entries but no inner node leads to it", k + 1));
            }
        }
    }

    fn check_object(
        &self,
        off: u64,
        ty: pmkv_substrate::epalloc::TypeId,
        ctx: &dyn Fn() -> String,
        problems: &mut Vec<String>,
    ) {
        if self.alloc.type_of(off) != Some(ty) || !self.alloc.is_used(off) {
            problems.push(format!("{}: object {off:#x} is not a used object of its type", ctx()));
        }
    }

    /// DRAM and PM bytes by structure.
    pub(crate) fn memory(&self) -> (ByStructure, ByStructure) {
        let _g = crossbeam_epoch::pin();
        let leaves = self.leaves_quiesced().len() as u64 + 1;
        // SAFETY: pinned: nodes reachable from the root stay alive, and they are immutable.
        let nodes = unsafe { crate::inner::nodes(self.root.load(Ordering::Acquire)) };
        let inner: u64 = nodes
            .iter()
            .map(|&n| {
                // SAFETY: `n` is listed by `inner::nodes` from the root loaded under `_g`; nodes
                // are immutable and freed only after every pinned thread has unpinned.
                let n = unsafe { &*n };
                n.bytes() as u64
            })
            .sum();
        let meta = leaves * std::mem::size_of::<Leaf>() as u64;
        let dram = vec![
            ("leaf metadata".to_string(), meta),
            ("leaf arena, not in use".to_string(), self.arena.reserved().saturating_sub(meta)),
            ("inner nodes".to_string(), inner),
            (
                "inner-node slab, not in use".to_string(),
                self.nodes
                    .reserved()
                    .saturating_sub(nodes.len() as u64 * std::mem::size_of::<crate::inner::INode>() as u64),
            ),
        ];
        let st = self.alloc.stats();
        let pm = vec![
            ("key-value blocks".to_string(), st.of_type(BLOCK).1),
            ("key objects".to_string(), st.of_type(KEY).1),
            ("value objects".to_string(), st.of_type(VALUE).1),
            ("superblock".to_string(), st.of_type(SUPER).1),
        ];
        (dram, pm)
    }
}

#[cfg(test)]
mod tests {
    use crate::tree::NbTree;
    use pmkv_substrate::{Mode, Pool, PoolOptions};
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    /// `check` proves the routing layer too: a level-0 node naming the wrong block (which
    /// searches would prefetch instead of their own) and a node leading to the wrong leaf
    /// are both reported.
    #[test]
    fn check_catches_a_wrong_block_and_a_wrong_leaf_in_the_inner_nodes() {
        let opts = PoolOptions::default().mode(Mode::Eadr).initial_size(16 << 20);
        let t = NbTree::open(Arc::new(Pool::create_sim("nbtree", &opts).unwrap())).unwrap();
        for i in 0..2_000u64 {
            t.put(&(i * 7 + 1).to_be_bytes(), &i.to_le_bytes()).unwrap();
        }
        t.check().unwrap();
        let _g = crossbeam_epoch::pin();
        // SAFETY: pinned; no other thread uses the tree.
        let nodes = unsafe { crate::inner::nodes(t.root.load(Ordering::Acquire)) };
        let n = nodes
            .iter()
            .copied()
            .find(|&n| {
                // SAFETY: `n` is from `inner::nodes` under the pin `_g`, and no other thread uses
                // the tree, so the node is alive and nothing writes it.
                let n = unsafe { &*n };
                n.level == 0 && n.n >= 2
            })
            .unwrap();
        let n = n as *mut crate::inner::INode;
        // SAFETY: this thread alone reads the tree; the fields are restored below.
        unsafe {
            (*n).blocks[1] ^= 64;
            let e = t.check().unwrap_err().to_string();
            assert!(e.contains("its inner node names block"), "{e}");
            (*n).blocks[1] ^= 64;
            t.check().unwrap();
            (*n).children.swap(0, 1);
            let e = t.check().unwrap_err().to_string();
            assert!(e.contains("no inner node leads to it") || e.contains("not in the list"), "{e}");
            (*n).children.swap(0, 1);
        }
        t.check().unwrap();
    }
}
