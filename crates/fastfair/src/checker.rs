//! `check`: the tree's invariants and exact space accounting. Run it while no other
//! thread writes the tree.
//!
//! Every level is a sibling list of used nodes one level below the one above; each
//! node's live entries are sorted, hold no duplicate, and lie in its range (at or above
//! its low key, below its sibling's); every inner entry names a node of the level below
//! whose low key it carries; every record verifies; and the used objects of each type
//! are exactly the ones the tree reaches (no leak).

use crate::error::{corrupt, Result};
use crate::layout::*;
use crate::tree::FastFair;
use std::collections::HashSet;

impl FastFair {
    /// Verify the tree; `Err(Corrupt)` lists the problems, `Ok` summarises.
    pub fn check(&self) -> Result<String> {
        let mut problems: Vec<String> = Vec::new();
        let levels = self.levels()?;
        let mut nodes = HashSet::new();
        let mut keys = HashSet::new();
        let mut records = HashSet::new();
        let mut count = 0u64;
        for level in &levels {
            for (i, &n) in level.iter().enumerate() {
                nodes.insert(n);
                let s = self.snap(n);
                if s.phys != s.n {
                    problems.push(format!("node {n:#x}: {} duplicate slot(s)", s.phys - s.n));
                }
                if s.low_ptr != 0 {
                    keys.insert(s.low_ptr);
                }
                if (i == 0) != (s.low_ptr == 0) {
                    problems.push(format!("node {n:#x}: a low key only the first node of a level lacks"));
                }
                let low = if s.low_ptr == 0 {
                    None
                } else {
                    match self.read_obj(s.low_ptr) {
                        Ok(o) if key_word(o.key()) == s.low_kw => Some(o.key().to_vec()),
                        Ok(_) => {
                            problems.push(format!("node {n:#x}: low key word differs from its key"));
                            None
                        }
                        Err(e) => {
                            problems.push(format!("node {n:#x}: low key: {e}"));
                            None
                        }
                    }
                };
                let high = if s.sibling == 0 { None } else { Some(self.entry_key(1, 0, s.sibling).map_err(corrupt)?) };
                let mut prev: Option<Vec<u8>> = low.clone();
                for j in 0..s.n {
                    let k = if s.level == 0 {
                        let (kw, v) = (s.kw[j], s.ptr[j]);
                        if j > 0 && s.kw[j - 1] == kw && !(is_rec(v) && is_rec(s.ptr[j - 1])) {
                            problems.push(format!("leaf {n:#x} entry {j}: an inline entry shares its key word"));
                        }
                        if is_rec(v) {
                            records.insert(rec_off(v));
                        }
                        match self.leaf_entry(kw, v) {
                            Ok((k, _)) => {
                                count += 1;
                                k
                            }
                            Err(e) => {
                                problems.push(format!("leaf {n:#x} entry {j}: {e}"));
                                continue;
                            }
                        }
                    } else {
                        let c = s.ptr[j];
                        if !self.node_obj(c) || self.load(c + H_LEVEL) != s.level as u64 - 1 {
                            problems
                                .push(format!("node {n:#x} entry {j}: child {c:#x} is not a node of the level below"));
                            continue;
                        }
                        if self.load(c + H_LOW_KW) != s.kw[j] {
                            problems.push(format!("node {n:#x} entry {j}: key word differs from its child's low key"));
                        }
                        match self.entry_key(s.level, s.kw[j], c) {
                            Ok(k) => k,
                            Err(e) => {
                                problems.push(format!("node {n:#x} entry {j}: {e}"));
                                continue;
                            }
                        }
                    };
                    if key_word(&k) != s.kw[j] {
                        problems.push(format!("node {n:#x} entry {j}: key word differs from the key"));
                    }
                    let in_order = match &prev {
                        None => true,
                        Some(p) if j == 0 && s.low_ptr != 0 && s.level == 0 => k >= *p,
                        Some(p) => k > *p,
                    };
                    if !in_order {
                        problems.push(format!("node {n:#x} entry {j}: out of order or below the node's low key"));
                    }
                    if high.as_ref().is_some_and(|h| k >= *h) {
                        problems.push(format!("node {n:#x} entry {j}: at or above the sibling's low key"));
                    }
                    prev = Some(k);
                }
                if s.level > 0 && !self.node_obj(s.leftmost) {
                    problems.push(format!("node {n:#x}: leftmost child {:#x} is not a node", s.leftmost));
                }
            }
        }
        if count != self.len() {
            problems.push(format!("{count} records in the leaves, {} counted", self.len()));
        }
        let mut leaked = 0u64;
        for (ty, keep) in [(NODE, &nodes), (KEY, &keys), (RECORD, &records)] {
            self.alloc.for_each_used(ty, |o| {
                if !keep.contains(&o) {
                    leaked += 1;
                }
            });
        }
        self.alloc.for_each_used(SUPER, |o| {
            if o != self.sb {
                leaked += 1;
            }
        });
        if leaked > 0 {
            problems.push(format!("{leaked} leaked PM objects (used, reached by nothing)"));
        }
        match self.alloc.check() {
            Ok(r) => problems.extend(r.problems.iter().map(|p| format!("allocator: {p}"))),
            Err(e) => problems.push(format!("allocator: {e}")),
        }
        if problems.is_empty() {
            Ok(format!(
                "{count} records in {} leaves, {} levels, {} nodes",
                levels.last().map_or(0, Vec::len),
                levels.len(),
                nodes.len()
            ))
        } else {
            Err(corrupt(problems.join("\n")))
        }
    }

    /// PM bytes in use by structure.
    pub fn memory(&self) -> Vec<(String, u64)> {
        let st = self.alloc.stats();
        [("nodes", NODE), ("records", RECORD), ("separator keys", KEY), ("superblock", SUPER)]
            .iter()
            .map(|&(name, ty)| (name.to_string(), st.of_type(ty).0))
            .collect()
    }
}
