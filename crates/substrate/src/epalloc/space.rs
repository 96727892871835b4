//! Free space between chunks and extents (DRAM only).
//!
//! The heap the allocator manages is `[heap_start, heap_top)` of the pool. Every byte of it
//! is, at every instant that a crash can observe, either part of a chunk or extent that a
//! persistent list reaches, or free. There is no persistent free-space list: at open, free
//! space is computed as the complement of what the lists reach (`recovery.rs`), and at run
//! time this map tracks it. This is what makes the allocator leak-proof across *every*
//! crash point of space management, not only those the paper's logs cover:
//!
//! * taking space for a new chunk is a DRAM operation; the chunk becomes allocated in PM
//!   only by the single persisted store that links it into its list (Algorithm 2 line 10).
//!   A crash before that store leaves the space unreachable, i.e. free;
//! * growing the heap raises the pool's persistent heap top *before* the new space is
//!   linked; a crash in between leaves space below the heap top that no list reaches,
//!   i.e. free;
//! * a recycled chunk (Algorithm 6) is free in PM the moment it is unlinked.
//!
//! The map keeps blocks coalesced, indexed by start and by length (best fit: the smallest
//! block that fits, so large blocks stay large).

use std::collections::{BTreeMap, BTreeSet};

#[derive(Default, Debug)]
pub(crate) struct FreeSpace {
    /// start -> end of each free block; blocks never touch (they are coalesced).
    by_start: BTreeMap<u64, u64>,
    /// (length, start) of each block.
    by_len: BTreeSet<(u64, u64)>,
    bytes: u64,
}

fn round_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

impl FreeSpace {
    fn remove_block(&mut self, start: u64, end: u64) {
        self.by_start.remove(&start);
        self.by_len.remove(&(end - start, start));
        self.bytes -= end - start;
    }

    fn add_block(&mut self, start: u64, end: u64) {
        if end > start {
            self.by_start.insert(start, end);
            self.by_len.insert((end - start, start));
            self.bytes += end - start;
        }
    }

    /// Return `[start, end)` to the free space, merging with neighbours.
    pub fn insert(&mut self, mut start: u64, mut end: u64) {
        if end <= start {
            return;
        }
        if let Some((&s, &e)) = self.by_start.range(..start).next_back() {
            debug_assert!(e <= start, "free block [{s:#x},{e:#x}) overlaps [{start:#x},{end:#x})");
            if e == start {
                self.remove_block(s, e);
                start = s;
            }
        }
        if let Some(&e) = self.by_start.get(&end) {
            self.remove_block(end, e);
            end = e;
        }
        debug_assert!(self.by_start.range(start..end).next().is_none(), "double free of [{start:#x},{end:#x})");
        self.add_block(start, end);
    }

    /// Take `len` bytes aligned to `align` from the smallest block that holds them.
    pub fn take(&mut self, len: u64, align: u64) -> Option<u64> {
        let mut found = None;
        for &(blen, bstart) in self.by_len.range((len, 0)..) {
            let s = round_up(bstart, align);
            if s + len <= bstart + blen {
                found = Some((bstart, bstart + blen, s));
                break;
            }
        }
        let (bstart, bend, s) = found?;
        self.remove_block(bstart, bend);
        self.add_block(bstart, s);
        self.add_block(s + len, bend);
        Some(s)
    }

    /// The block ending exactly at `end`, if any (used to grow the heap from the last
    /// free block instead of leaving it behind).
    pub fn block_ending_at(&self, end: u64) -> Option<u64> {
        self.by_start.range(..end).next_back().filter(|(_, &e)| e == end).map(|(&s, _)| s)
    }

    /// Remove `[start, end)`, which must be exactly one whole free block.
    pub fn remove_exact(&mut self, start: u64, end: u64) {
        debug_assert_eq!(self.by_start.get(&start), Some(&end));
        self.remove_block(start, end);
    }

    /// Free bytes in total.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Number of free blocks.
    pub fn blocks(&self) -> usize {
        self.by_start.len()
    }

    /// The blocks in address order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.by_start.iter().map(|(&s, &e)| (s, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesces_and_best_fits() {
        let mut f = FreeSpace::default();
        f.insert(1000, 2000);
        f.insert(3000, 3100);
        f.insert(2000, 3000);
        assert_eq!(f.iter().collect::<Vec<_>>(), [(1000, 3100)]);
        assert_eq!(f.bytes(), 2100);
        f.insert(5000, 5200);
        // Best fit: the 200-byte block, aligned inside it.
        assert_eq!(f.take(100, 64), Some(5056));
        assert_eq!(f.iter().collect::<Vec<_>>(), [(1000, 3100), (5000, 5056), (5156, 5200)]);
        assert_eq!(f.take(4000, 16), None);
        assert_eq!(f.block_ending_at(3100), Some(1000));
        assert_eq!(f.block_ending_at(3000), None);
        f.remove_exact(1000, 3100);
        assert_eq!(f.bytes(), 56 + 44);
        assert_eq!(f.blocks(), 2);
    }
}
