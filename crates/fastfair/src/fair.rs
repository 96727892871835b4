//! FAIR, failure-atomic in-place rebalancing (the paper's FAIR): a full node splits by making
//! its new right sibling first (written, persisted and published before anything names
//! it), then linking it (one 8-byte store of the sibling pointer), then truncating the
//! node (one 8-byte store: the null pointer that ends its entries at the split point).
//! Every state between reads right: before the link, the sibling is an unreachable
//! object (freed by recovery's sweep); between link and truncation, the node's upper
//! half is also in the sibling, and a search for a key at or above the sibling's low key
//! moves right (the B-link step, `FastFair::past`), so the copies are never both used.
//! The separator then goes into the parent level as an ordinary insert; until it is
//! there, the new node is reached through its left sibling.

use crate::error::{corrupt, Result};
use crate::layout::*;
use crate::node::NodeImg;
use crate::read::Raw;
use crate::tree::{FastFair, Locked, Target};

impl FastFair {
    /// Split the full node `g` (slots `raw`) while inserting `(kw, ptr)` at `pos`; for a
    /// leaf `key` is the new record's key. Returns the separator for the parent: its key
    /// word, its key object and the new right node.
    pub(crate) fn split(
        &self,
        g: &Locked<'_>,
        raw: &Raw,
        pos: usize,
        kw: u64,
        ptr: u64,
        key: Option<&[u8]>,
    ) -> Result<(u64, u64, u64)> {
        let node = g.node;
        let level = self.load(node + H_LEVEL) as u32;
        let mut merged: Vec<(u64, u64)> = (0..raw.n).map(|i| (raw.kw[i], raw.ptr[i])).collect();
        merged.insert(pos, (kw, ptr));
        let m = merged.len() / 2;
        let sibling = self.load(node + H_SIBLING);
        let (skw, sobj, img) = if level == 0 {
            // A leaf's separator is a copy of its right half's first key, in an object of
            // its own (the entry may be deleted, the separator stays).
            let sep = match key {
                Some(k) if pos == m => k.to_vec(),
                _ => self.entry_key(0, merged[m].0, merged[m].1).map_err(corrupt)?,
            };
            let sobj = self.new_obj(KEY, &sep, &[])?;
            let mut img = NodeImg::new(0, 0, sibling, merged[m].0, sobj);
            for (i, &(k, p)) in merged[m..].iter().enumerate() {
                img.entry(i, k, p);
            }
            (merged[m].0, sobj, img)
        } else {
            // An inner node's middle entry moves up: its child becomes the new node's
            // leftmost, and its key (that child's low key) the new node's low key.
            let (k, child) = merged[m];
            let sobj = self.load(child + H_LOW_PTR);
            let mut img = NodeImg::new(level, child, sibling, k, sobj);
            for (i, &(k, p)) in merged[m + 1..].iter().enumerate() {
                img.entry(i, k, p);
            }
            (k, sobj, img)
        };
        let right = match self.new_node(&img.0) {
            Ok(r) => r,
            Err(e) => {
                if level == 0 {
                    let _ = self.alloc.try_free(sobj);
                }
                return Err(e);
            }
        };
        self.pstore(node + H_SIBLING, right);
        let keep = if pos < m { m - 1 } else { m };
        self.pstore(ptr_at(node, keep), 0);
        if pos < m {
            let mut left = Raw { kw: raw.kw, ptr: raw.ptr, n: keep };
            left.ptr[keep..].fill(0);
            self.fast_insert(node, &left, pos, kw, ptr, false);
        }
        Ok((skw, sobj, right))
    }

    /// Add the separator `(skw, sobj)` of new node `right` to `level`, splitting upwards
    /// and growing a new root as needed.
    pub(crate) fn insert_parent(&self, mut level: u32, mut skw: u64, mut sobj: u64, mut right: u64) -> Result<()> {
        loop {
            let root = self.load(self.sb + SB_ROOT);
            if (self.load(root + H_LEVEL) as u32) < level {
                // The split node was at the top: a new root over the top level's first
                // node (the root) and the new one. Nodes of that level whose separator is
                // not in yet are found through their left siblings, and added when their
                // writer gets the root lock.
                let _g = self.root_lock.lock();
                if self.load(self.sb + SB_ROOT) != root {
                    continue;
                }
                let mut img = NodeImg::new(level, root, 0, 0, 0);
                img.entry(0, skw, right);
                let new_root = self.new_node(&img.0)?;
                self.pstore(self.sb + SB_ROOT, new_root);
                return Ok(());
            }
            let sep = self.read_obj(sobj).map_err(corrupt)?.key().to_vec();
            let t = Target::Key { key: &sep, kw: skw, strict: false };
            let g = self.lock_for(t, level)?;
            let raw = self.raw(g.node);
            let pos = self
                .rank(level, &raw.kw[..raw.n], &raw.ptr[..raw.n], Target::Key { key: &sep, kw: skw, strict: true })
                .map_err(corrupt)?;
            if raw.n < CAP {
                self.fast_insert(g.node, &raw, pos, skw, right, false);
                return Ok(());
            }
            (skw, sobj, right) = self.split(&g, &raw, pos, skw, right, None)?;
            drop(g);
            level += 1;
        }
    }
}
