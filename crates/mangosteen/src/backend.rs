//! The backend (paper Fig. 4): applies committed records to the PM copy of the region and
//! advances the persistent head.
//!
//! For each record from the head: a REDO's block is copied to its place in the PM copy and
//! flushed (line 15–17). At a COMMIT the paper's backend fences, then moves the head past
//! the batch and persists it (lines 21–24); [`apply`] does so when asked for `durable`
//! (the background thread, recovery). The inline backend asks for no fence: a later
//! batch's commit fence makes the blocks durable and its tail's persist carries the head
//! with it (see `Mangosteen::end_tx`), so a batch costs one fence and one persist in all;
//! it applies a window of batches at once, each line once (`apply_from_dram` of the
//! lines in `DirtyLines`, see `APPLY_EVERY`).
//! A crash anywhere leaves the persistent head at or before the batch being applied;
//! recovery applies that batch again, which is harmless: a REDO record writes the same
//! bytes to the same place however often it is replayed. The backend never reads past the
//! persistent tail, so it only ever applies whole, durable batches.
//!
//! Line checks (damage is never silent): each 64-byte line of the PM copy has a CRC-32C
//! of its offset and its bytes in the checks object. Applying a block recomputes the check
//! of the line it lies in (the line was just written, so it is in the cache) and flushes it
//! with the block, so a line and its check become durable under the same fence; a crash
//! before that fence leaves the batch to be replayed, which recomputes them. An open
//! verifies every line after recovery: a damaged pool file is refused, not read.

use crate::error::{Error, Result};
use crate::redo_log::RedoLog;
use pmkv_substrate::Pool;

/// Bytes per line check.
pub const LINE: u64 = 64;

/// The PM copy of the region: its offset and size in the pool, and the offset of its line
/// checks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PmCopy {
    pub region: u64,
    pub size: u64,
    pub checks: u64,
}

/// The check of a line at region offset `off` holding `bytes`: its offset is hashed in,
/// so a line (with its check) copied to another place fails there.
pub(crate) fn line_check(off: u64, bytes: &[u8]) -> u32 {
    pmkv_substrate::checksum::crc32c_parts(off, &[bytes])
}

impl PmCopy {
    pub fn lines(&self) -> u64 {
        self.size.div_ceil(LINE)
    }

    /// Bytes of the checks object: 4 per line.
    pub fn checks_len(size: u64) -> u64 {
        size.div_ceil(LINE) * 4
    }

    /// The check of line `l` as it is in PM now.
    pub fn compute(&self, pool: &Pool, l: u64) -> u32 {
        let start = l * LINE;
        let len = LINE.min(self.size - start) as usize;
        // SAFETY: line `l` lies inside the region object (l < lines()); only the backend
        // or a lone recovery writes it, and not during this read.
        line_check(start, unsafe { std::slice::from_raw_parts(pool.at::<u8>(self.region + start), len) })
    }

    /// Recompute and flush line `l`'s check (durable at the caller's next fence).
    pub fn update(&self, pool: &Pool, l: u64) {
        let c = self.compute(pool, l);
        let at = self.checks + 4 * l;
        // SAFETY: the check word of line `l` inside the checks object; only the backend
        // (or a lone recovery, or `format`) writes it, and no reference to it exists.
        unsafe { pool.store_u32(at, c) };
        pool.flush_off(at, 4);
    }

    /// Every line against its check: the first line that fails, if any.
    pub fn verify(&self, pool: &Pool) -> Result<()> {
        self.verify_except(pool, &[])
    }

    /// Every line but those in `skip` (sorted) against its check. Recovery runs this
    /// before it replays anything, skipping the lines the pending records write (a crash
    /// may have left those between two states; the replay rewrites them and their
    /// checks), so that damage anywhere else refuses the open before a byte is written.
    pub fn verify_except(&self, pool: &Pool, skip: &[u64]) -> Result<()> {
        let mut skip = skip.iter().peekable();
        for l in 0..self.lines() {
            if skip.next_if(|&&s| s <= l).is_some_and(|&s| s == l) {
                continue;
            }
            // SAFETY: inside the checks object (validated at open); read-only here.
            let want = unsafe { pool.at::<u32>(self.checks + 4 * l).read() };
            if self.compute(pool, l) != want {
                return Err(Error::Corrupt(format!(
                    "line {l} of the region (bytes {}..{}) fails its check: the pool file is damaged",
                    l * LINE,
                    ((l + 1) * LINE).min(self.size)
                )));
            }
        }
        Ok(())
    }
}

/// The inline backend's apply of the batch just committed, from the DRAM copy instead of
/// the ring: `runs` are the batch's dirty bytes and `dram` the DRAM copy, which
/// under the writer lock equals the PM copy with every batch up to this one applied (the
/// caller checks that every earlier batch is applied). The same bytes as the batch's REDO
/// records, without reading back and re-checking lines the commit just flushed (with
/// `clflushopt`-like flushes a line read after its flush misses the cache), and each
/// line's check computed from DRAM, where the line is cached. Flushes only: the caller
/// makes it durable (see `Mangosteen::end_tx`).
///
/// The runs (sorted, from `redo_log::runs_of`) are applied in address order: each line
/// of the PM copy is then flushed and checked once however many of its blocks the batch
/// wrote (two 32-byte blocks share a line), and each line of check words is flushed once
/// for the lines of a run it covers (sixteen lines share one). Block by block (a check and
/// two flushes per block), a Dictionary insert wrote 38.3 PM lines instead of 27.6.
pub(crate) fn apply_from_dram(pool: &Pool, pm: &PmCopy, dram: &[u8], runs: &[(u64, u64)]) {
    // Check words stored and not yet flushed, `[from, to)` in pool offsets: runs whose
    // check words share a line extend it, so that the line is flushed once, after its
    // last store.
    let mut pending: Option<(u64, u64)> = None;
    for &(start, end) in runs {
        let len = (end - start) as usize;
        let at = pm.region + start;
        // SAFETY: `[start, end)` lies inside the region (blocks of it, as logged), an
        // object of this pool that only the backend writes; no reference into it exists.
        unsafe { std::ptr::copy_nonoverlapping(dram[start as usize..].as_ptr(), pool.at::<u8>(at), len) };
        pool.flush_off(at, len);
        let (first, last) = (start / LINE, (end - 1) / LINE);
        let line = |l: u64| -> &[u8] {
            let from = (l * LINE) as usize;
            &dram[from..(from + LINE as usize).min(dram.len())]
        };
        let store = |l: u64, c: u32| {
            // SAFETY: the check word of line `l` inside the checks object; only the
            // backend writes it, and no reference to it exists.
            unsafe { pool.store_u32(pm.checks + 4 * l, c) }
        };
        // Four whole lines at a time, their checks side by side (`crc32c_lines`), then
        // the rest one by one (the region's last line may be short).
        let mut l = first;
        while l + 3 <= last && line(l + 3).len() == LINE as usize {
            let four: [&[u8; 64]; 4] = std::array::from_fn(|k| line(l + k as u64).try_into().expect("a whole line"));
            let offs = std::array::from_fn(|k| (l + k as u64) * LINE);
            for (k, c) in pmkv_substrate::checksum::crc32c_lines(offs, four).into_iter().enumerate() {
                store(l + k as u64, c);
            }
            l += 4;
        }
        for l in l..=last {
            store(l, line_check(l * LINE, line(l)));
        }
        let (from, to) = (pm.checks + 4 * first, pm.checks + 4 * last + 4);
        pending = match pending {
            Some((f, t)) if from / LINE <= (t - 1) / LINE => Some((f, to)),
            Some((f, t)) => {
                pool.flush_off(f, (t - f) as usize);
                Some((from, to))
            }
            None => Some((from, to)),
        };
    }
    if let Some((f, t)) = pending {
        pool.flush_off(f, (t - f) as usize);
    }
}

/// The lines of the PM copy that committed batches wrote and the inline backend has not
/// applied yet (its window, see `APPLY_EVERY` in the runtime): each line once, as a bit
/// (one per line of the region) and in a list of the lines set. A window's runs overlap
/// from batch to batch; sorting and merging them cost an insert ~100 ns (4.7% of a
/// Dictionary run), where the bit is a test and a set, and the list to sort holds each
/// line once.
pub(crate) struct DirtyLines {
    bits: Vec<u64>,
    lines: Vec<u64>,
}

impl DirtyLines {
    /// For a region of `size` bytes.
    pub fn new(size: u64) -> DirtyLines {
        DirtyLines { bits: vec![0; size.div_ceil(LINE).div_ceil(64) as usize], lines: Vec::new() }
    }

    /// Add the lines `runs` (region offsets `[start, end)`, inside the region) write.
    pub fn add(&mut self, runs: &[(u64, u64)]) {
        for &(s, e) in runs {
            if e <= s {
                continue;
            }
            for l in s / LINE..=(e - 1) / LINE {
                let (w, bit) = ((l / 64) as usize, 1u64 << (l % 64));
                if self.bits[w] & bit == 0 {
                    self.bits[w] |= bit;
                    self.lines.push(l);
                }
            }
        }
    }

    /// Lines marked.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Forget every line (they were applied another way).
    pub fn clear(&mut self) {
        for l in self.lines.drain(..) {
            self.bits[(l / 64) as usize] = 0;
        }
    }

    /// The lines as sorted runs of whole lines (the region's last one cut at `size`) into
    /// `out`, and forget them.
    pub fn drain_runs(&mut self, size: u64, out: &mut Vec<(u64, u64)>) {
        out.clear();
        self.lines.sort_unstable();
        for &l in &self.lines {
            let (s, e) = (l * LINE, ((l + 1) * LINE).min(size));
            match out.last_mut() {
                Some(last) if last.1 == s => last.1 = e,
                _ => out.push((s, e)),
            }
        }
        self.clear();
    }
}

/// Apply every record in `[from, to)` to the PM copy; returns the index past the last
/// COMMIT applied. `to` must not exceed the persistent tail. With `durable`, each COMMIT
/// is fenced and the persistent head moved past it and persisted (Fig. 4 lines 21–24);
/// without, the caller makes the applied blocks durable and moves the head itself.
pub(crate) fn apply(log: &RedoLog, pm: &PmCopy, from: u64, to: u64, durable: bool) -> Result<u64> {
    let pool = &log.pool;
    let (region, size) = (pm.region, pm.size);
    let mut head = from;
    let mut idx = from;
    let mut buf = Vec::new();
    while idx < to {
        let rec = log.read(idx, to, &mut buf)?;
        for (addr, data) in rec.runs(&buf) {
            let len = data.len();
            if addr.checked_add(len as u64).is_none_or(|e| e > size) {
                return Err(Error::Corrupt(format!(
                    "redo record {idx} writes {len} bytes at {addr}, outside the {size}-byte region"
                )));
            }
            let at = region + addr;
            // SAFETY: inside the region (checked), an object of this pool that only the
            // backend (or recovery, which runs alone) writes; the DRAM copy and `buf` are
            // separate buffers, so no reference into these bytes exists.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), pool.at::<u8>(at), len) };
            pool.flush_off(at, len);
            for l in addr / LINE..=(addr + len.max(1) as u64 - 1) / LINE {
                pm.update(pool, l);
            }
        }
        idx = rec.next;
        if rec.commit {
            head = idx;
            if durable {
                pool.fence(); // line 21: the batch's blocks (and their lines' checks) are durable
                log.set_p_head(head); // lines 22–24
            }
        }
    }
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::DirtyLines;

    #[test]
    fn dirty_lines_come_out_once_sorted_as_runs_of_whole_lines() {
        // A region of 1,000 bytes: 16 lines, the last one 40 bytes.
        let mut d = DirtyLines::new(1000);
        d.add(&[(960, 992), (64, 96)]);
        d.add(&[(100, 140), (0, 32), (70, 80), (200, 330)]);
        let mut out = Vec::new();
        d.drain_runs(1000, &mut out);
        // Lines 0–5 and 15, each once, adjacent ones joined.
        assert_eq!(out, vec![(0, 384), (960, 1000)]);
        // Drained: nothing left, and a line added again comes out again.
        d.drain_runs(1000, &mut out);
        assert!(out.is_empty());
        d.add(&[(64, 65)]);
        d.clear();
        d.add(&[(128, 129)]);
        d.drain_runs(1000, &mut out);
        assert_eq!(out, vec![(128, 192)]);
    }
}
