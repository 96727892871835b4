//! `check`: the invariants of every layer, and memory accounting.
//!
//! * the micro-logs are idle;
//! * the PM leaf list, from the superblock's head, is the DRAM index's leaves in order
//!   (an empty leaf a read-only open left out of the index excepted);
//! * every valid entry has a sane meta word, a fingerprint equal to its key's, a key
//!   inside its leaf's fences and a value that reads back (objects: used, of their type,
//!   CRC right); keys ascend strictly across the tree; the count is the tree's `len`;
//! * no leaked object: every used leaf is on the list, every used key and value object
//!   is named by a valid entry, the only used superblock is the tree's;
//! * EPallocator's own check.
//!
//! It write-locks the index, so it runs alone.

use crate::error::{Error, Result};
use crate::fingerprint;
use crate::layout::*;
use crate::leaf::Leaf;
use crate::tree::FpTree;
use std::collections::HashSet;

/// Bytes by structure name.
pub(crate) type ByStructure = Vec<(String, u64)>;

impl FpTree {
    /// Verify the tree; `Err(Corrupt)` lists the problems, `Ok` summarises.
    pub fn check(&self) -> Result<String> {
        self.batches.quiesced(|| self.check_quiesced())
    }

    fn check_quiesced(&self) -> Result<String> {
        let idx = self.index.write();
        let mut problems: Vec<String> = pmkv_substrate::batch_log::problems(&self.alloc);
        if !self.logs().idle() {
            problems.push("a micro-log is in use".into());
        }
        let nodes: Vec<(&[u8], u64)> = idx.iter().map(|(k, n)| (k, n.off)).collect();
        let mut used_leaves = HashSet::new();
        self.alloc.for_each_used(LEAF, |o| {
            used_leaves.insert(o);
        });
        let mut referenced: HashSet<u64> = HashSet::new();
        let mut records = 0u64;
        let mut last: Option<Vec<u8>> = None;
        let mut at = 0usize;
        let mut off = self.head;
        let mut hops = 0usize;
        while off != 0 {
            hops += 1;
            if !used_leaves.remove(&off) {
                problems.push(format!("the leaf list names {off:#x}, which is not a used leaf, or twice"));
                break;
            }
            let leaf = Leaf::new(&self.pool, off);
            let bm = leaf.bitmap();
            let indexed = nodes.get(at).is_some_and(|&(_, o)| o == off);
            if !indexed {
                if bm & SLOTS_MASK != 0 || !self.pool.is_read_only() {
                    problems.push(format!("leaf {off:#x} (list position {hops}) is not the index's next leaf"));
                }
                off = leaf.next();
                continue;
            }
            let low = nodes[at].0;
            let high = nodes.get(at + 1).map(|&(k, _)| k);
            at += 1;
            if bm & !SLOTS_MASK != 0 {
                problems.push(format!("leaf {off:#x}: bitmap {bm:#x} names slots past {CAP}"));
            }
            if bm & SLOTS_MASK == 0 && off != self.head {
                problems.push(format!("leaf {off:#x} is empty and not the first leaf"));
            }
            let fps = leaf.fps();
            let mut keys: Vec<Vec<u8>> = Vec::new();
            let mut m = bm & SLOTS_MASK;
            while m != 0 {
                let slot = m.trailing_zeros() as usize;
                m &= m - 1;
                let e = leaf.entry(slot);
                let at_slot = format!("leaf {off:#x} slot {slot}");
                if !meta_is_sane(e.meta) {
                    problems.push(format!("{at_slot}: meta word {:#x}", e.meta));
                    continue;
                }
                for (o, ty) in [(e.key_obj(), KEY), (e.value_obj(), VALUE)] {
                    if let Some(o) = o {
                        if self.alloc.type_of(o) != Some(ty) || !self.alloc.is_used(o) {
                            problems.push(format!("{at_slot} names {o:#x}, not a used object of type {ty:?}"));
                        }
                        referenced.insert(o);
                    }
                }
                let key = match leaf.key(&e, true) {
                    Ok(k) => k.as_slice().to_vec(),
                    Err(err) => {
                        problems.push(format!("{at_slot}: {err}"));
                        continue;
                    }
                };
                if let Err(err) = leaf.value(&e) {
                    problems.push(format!("{at_slot}: {err}"));
                }
                if fps[slot] != fingerprint::of(&key) {
                    problems.push(format!("{at_slot}: fingerprint {:#x} is not its key's", fps[slot]));
                }
                if key.as_slice() < low || high.is_some_and(|h| key.as_slice() >= h) {
                    problems.push(format!("{at_slot}: key {key:x?} lies outside the leaf's fences"));
                }
                keys.push(key);
            }
            keys.sort_unstable();
            for k in keys {
                if last.as_ref().is_some_and(|l| &k <= l) {
                    problems.push(format!("leaf {off:#x}: key {k:x?} is not above the keys before it"));
                }
                last = Some(k);
                records += 1;
            }
            off = leaf.next();
        }
        if at != nodes.len() {
            problems.push(format!("the index has {} leaves, the list reaches {at} of them", nodes.len()));
        }
        if records != self.len() {
            problems.push(format!("{records} records in the leaves, the count says {}", self.len()));
        }
        for o in used_leaves {
            problems.push(format!("leaf {o:#x} is used but not on the list (leaked)"));
        }
        for ty in [KEY, VALUE, SUPER] {
            self.alloc.for_each_used(ty, |o| {
                if !(referenced.contains(&o) || ty == SUPER && o == self.sb) {
                    problems.push(format!("object {o:#x} of type {ty:?} is used but named by no entry (leaked)"));
                }
            });
        }
        match self.alloc.check() {
            Ok(r) => problems.extend(r.problems.iter().map(|p| format!("allocator: {p}"))),
            Err(e) => problems.push(format!("allocator: {e}")),
        }
        let leaves = nodes.len();
        drop(nodes);
        drop(idx);
        if problems.is_empty() {
            Ok(format!("{records} records in {leaves} leaves"))
        } else {
            Err(Error::Corrupt(problems.join("\n")))
        }
    }

    /// DRAM and PM bytes in use, by structure.
    pub(crate) fn memory(&self) -> (ByStructure, ByStructure) {
        let idx = self.index.read();
        let dram = vec![("inner nodes (index)".to_string(), idx.dram_bytes())];
        let leaves = idx.len() as u64;
        drop(idx);
        let st = self.alloc.stats();
        let pm = vec![
            ("leaves".to_string(), st.of_type(LEAF).1.max(leaves * LEAF_SIZE as u64)),
            ("key objects".to_string(), st.of_type(KEY).1),
            ("value objects".to_string(), st.of_type(VALUE).1),
            ("superblock".to_string(), st.of_type(SUPER).1),
        ];
        (dram, pm)
    }
}
