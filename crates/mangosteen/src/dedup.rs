//! Intra-batch write deduplication (paper §4.3, Fig. 3 lines 4–12).
//!
//! Every write of a batch is reduced to the aligned blocks it touches; each block address
//! is recorded once, in a hash set of 64-bit entries with open addressing and linear
//! probing, sized to stay in the CPU cache and never resized. Past 60% load the new
//! addresses go to an overflow buffer instead, in order and not deduplicated (the paper's
//! choice: probing a nearly full table costs more than logging a block twice). At the end
//! of the batch every recorded block is logged once, with its final content, however many
//! times the batch wrote it.
//!
//! A write of many blocks at once (a `memcpy` of a large value, which compiler capture
//! sees as one call: the paper's memcpy interception, §3.2) is kept as one range instead
//! of one table entry per block: a 100 KB copy was 3,125 inserts, and its blocks only
//! need to be logged, not looked up again. Ranges and table entries may overlap; the
//! batch's runs merge them ([`DedupSet::drain_into`]).
//!
//! Compiler capture sends the set only what its hooks do not append to the batch's own
//! buffer (writes of 8 blocks or more, and whatever comes once the buffer is full): the
//! appended blocks are deduplicated by the sort and merge that build the batch's runs
//! (docs/design/mangosteen.md, "Deduplication").

/// The set of dirty blocks of one batch.
pub struct DedupSet {
    /// Block address + 1 (0 = empty), so that block 0 can be recorded.
    table: Vec<u64>,
    used: usize,
    /// Entries the table takes before new blocks go to the overflow (60% of its slots).
    limit: usize,
    /// Indices of the filled entries, in insertion order. The paper's `end_tx` scans the
    /// whole table (Fig. 3 line 22); keeping the filled indices makes draining cost the
    /// batch's size rather than the table's (measured: with 32-update batches and a
    /// 4,096-entry table the scan made deduplication cost more than it saved).
    filled: Vec<u32>,
    overflow: Vec<u64>,
    /// Writes of [`RANGE_BLOCKS`] blocks or more, block-aligned `[start, end)`.
    ranges: Vec<(u64, u64)>,
    block: u64,
    /// log2 of `block`: the hash takes the block index with a shift, where `a / block`
    /// was a 64-bit `div` (the block size is not a constant) on every captured write,
    /// ~10% of a Dictionary insert.
    shift: u32,
    enabled: bool,
}

/// Writes of at least this many blocks are kept as a range (the constant the capture
/// hooks share: shorter writes reach the runtime through their append buffer).
pub const RANGE_BLOCKS: u64 = crate::abi::RANGE_BLOCKS as u64;

impl DedupSet {
    /// A set for `block`-byte blocks (a power of two) with `slots` entries (a power of
    /// two); `enabled = false` logs every write's blocks without deduplication (the
    /// paper's ablation, Fig. 7).
    pub fn new(block: usize, slots: usize, enabled: bool) -> DedupSet {
        assert!(block.is_power_of_two() && slots.is_power_of_two());
        DedupSet {
            table: vec![0; slots],
            used: 0,
            limit: (slots * 6).div_ceil(10),
            // Never grows: the table takes at most 60% of its slots (then the overflow).
            filled: Vec::with_capacity(slots * 6 / 10 + 1),
            overflow: Vec::new(),
            ranges: Vec::new(),
            block: block as u64,
            shift: block.trailing_zeros(),
            enabled,
        }
    }

    /// [`record`](DedupSet::record) for a write inside one block that goes to the table
    /// (the common case), which allocates nothing; false, recording nothing, otherwise.
    /// The compiler-capture hook calls it before paying for `SplitAlloc::outside`.
    #[inline]
    pub fn try_record(&mut self, addr: u64, len: usize) -> bool {
        let first = addr & !(self.block - 1);
        if len == 0 || (addr + len as u64 - 1) & !(self.block - 1) != first || !self.enabled || self.used >= self.limit
        {
            return false;
        }
        self.insert(first);
        true
    }

    /// Record a write of `len` bytes at `addr` (lines 6–12): every block it touches.
    pub fn record(&mut self, addr: u64, len: usize) {
        if len == 0 {
            return;
        }
        let first = addr & !(self.block - 1);
        let last = (addr + len as u64 - 1) & !(self.block - 1);
        if self.enabled && last - first >= (RANGE_BLOCKS - 1) * self.block {
            self.ranges.push((first, last + self.block));
            return;
        }
        let mut a = first;
        while a <= last {
            self.insert(a);
            a += self.block;
        }
    }

    fn insert(&mut self, a: u64) {
        if !self.enabled || self.used >= self.limit {
            self.overflow.push(a);
            return;
        }
        let mask = self.table.len() - 1;
        // The block index, multiplicatively hashed (line 9 takes it modulo the length;
        // hashing spreads the strided addresses a struct array produces).
        let mut i = ((a >> self.shift).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20) as usize & mask;
        loop {
            match self.table[i] {
                0 => {
                    self.table[i] = a + 1;
                    self.used += 1;
                    self.filled.push(i as u32);
                    return;
                }
                x if x == a + 1 => return,
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Whether writes are deduplicated (false: the paper's ablation, every write's blocks
    /// kept as they came).
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Whether the block at `a` (block-aligned) was recorded (verify mode).
    pub fn contains(&self, a: u64) -> bool {
        self.table.iter().any(|&e| e == a + 1)
            || self.overflow.contains(&a)
            || self.ranges.iter().any(|&(s, e)| (s..e).contains(&a))
    }

    /// Blocks recorded (table, overflow, ranges), each table entry once.
    pub fn len(&self) -> usize {
        self.used
            + self.overflow.len()
            + self.ranges.iter().map(|(s, e)| ((e - s) / self.block) as usize).sum::<usize>()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hand every recorded block to `f` (lines 22–26), in the order first recorded (the
    /// ranges' blocks last), and empty the set (tests: the runtime takes runs with
    /// [`DedupSet::drain_into`]).
    #[cfg(test)]
    pub fn drain(&mut self, mut f: impl FnMut(u64)) {
        for i in self.filled.drain(..) {
            let e = &mut self.table[i as usize];
            f(*e - 1);
            *e = 0;
        }
        self.used = 0;
        for a in self.overflow.drain(..) {
            f(a);
        }
        for (s, e) in self.ranges.drain(..) {
            (s..e).step_by(self.block as usize).for_each(&mut f);
        }
    }

    /// Empty the set into `blocks` (the table's and overflow's blocks) and `ranges`
    /// (both cleared first, unsorted): the batch's runs are made from the two
    /// (`redo_log::runs_of`), without a block at a time for a large write.
    pub fn drain_into(&mut self, blocks: &mut Vec<u64>, ranges: &mut Vec<(u64, u64)>) {
        blocks.clear();
        ranges.clear();
        for i in self.filled.drain(..) {
            let e = &mut self.table[i as usize];
            blocks.push(*e - 1);
            *e = 0;
        }
        self.used = 0;
        blocks.append(&mut self.overflow);
        ranges.append(&mut self.ranges);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_recorded_once_and_spill_past_60_percent() {
        let mut d = DedupSet::new(32, 16, true);
        d.record(0, 1);
        d.record(31, 1);
        d.record(30, 4); // blocks 0 and 32
        d.record(32, 32);
        assert_eq!(d.len(), 2);
        for i in 0..20u64 {
            d.record(1024 + i * 32, 1);
        }
        // 60% of 16 slots = 10 in the table, the rest in the overflow.
        let mut got = Vec::new();
        d.drain(|a| got.push(a));
        assert_eq!(got.len(), 22);
        let table: std::collections::HashSet<u64> = got.iter().copied().collect();
        assert_eq!(table.len(), 22, "distinct blocks stay distinct");
        assert!(got.contains(&0) && got.contains(&32));
        assert!(d.is_empty());
        // A write of 8 blocks or more is one range; its blocks still come out.
        d.record(4096, 8 * 32);
        d.record(4096 + 32, 1);
        assert!(d.contains(4096 + 7 * 32) && !d.contains(4096 + 8 * 32));
        let (mut blocks, mut ranges) = (Vec::new(), Vec::new());
        d.drain_into(&mut blocks, &mut ranges);
        assert_eq!((blocks, ranges), (vec![4096 + 32], vec![(4096, 4096 + 256)]));
        // Disabled: every write's blocks, duplicates included.
        let mut d = DedupSet::new(32, 16, false);
        d.record(0, 8);
        d.record(0, 8);
        assert_eq!(d.len(), 2);
    }
}
