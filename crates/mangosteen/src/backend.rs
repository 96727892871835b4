//! The backend (paper Fig. 4): applies committed records to the PM copy of the region and
//! advances the persistent head.
//!
//! For each record from the head: a REDO's block is copied to its place in the PM copy and
//! flushed (line 15–17). At a COMMIT the paper's backend fences, then moves the head past
//! the batch and persists it (lines 21–24); [`apply`] always fences what it wrote, and
//! moves and persists the head when asked for `durable` (the background thread,
//! recovery). The inline backend moves the head later: a later batch's commit stores it
//! before its tail, whose persist carries it (see `Mangosteen::end_tx`); it applies a
//! window of batches at once, each line once (`apply_from_dram` of the lines in
//! `DirtyLines`, see `APPLY_EVERY`), and fences the window's bytes itself, on its own
//! thread: a fence orders only its own thread's flushes, and the next batch often runs on
//! another thread (see `pmkv_substrate::Pool::unfenced_flushes`).
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

    /// The check of line `l` as stored in the checks object.
    pub fn stored(&self, pool: &Pool, l: u64) -> u32 {
        // SAFETY: inside the checks object (validated at open, l < lines()); read-only.
        unsafe { pool.at::<u32>(self.checks + 4 * l).read() }
    }

    /// A copy of line `l`'s bytes as they are in PM now (the region's last line may be
    /// short).
    pub fn read_line(&self, pool: &Pool, l: u64) -> Vec<u8> {
        let start = l * LINE;
        let len = LINE.min(self.size - start) as usize;
        // SAFETY: as in `compute`.
        unsafe { std::slice::from_raw_parts(pool.at::<u8>(self.region + start), len) }.to_vec()
    }

    /// Every line against its check: the first line that fails, if any.
    pub fn verify(&self, pool: &Pool) -> Result<()> {
        self.verify_except(pool, &[])
    }

    /// Every line but those in `skip` (sorted) against its check. Recovery runs this
    /// before it replays anything, skipping the lines the pending records write (a crash
    /// may have left those between two states: `recovery::verify_touched` checks them),
    /// so that damage anywhere else refuses the open before a byte is written.
    pub fn verify_except(&self, pool: &Pool, skip: &[u64]) -> Result<()> {
        let mut skip = skip.iter().peekable();
        for l in 0..self.lines() {
            if skip.next_if(|&&s| s <= l).is_some_and(|&s| s == l) {
                continue;
            }
            let want = self.stored(pool, l);
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
///
/// Ends with a fence: the bytes are durable when it returns. Leaving them to the next
/// batch's commit fence saved that fence once per window, but that batch may run on
/// another thread, whose fence does not order these flushes: in mode `wal` they reached
/// the log only at this thread's next fence, after the next batch had moved the head
/// past them, and a SIGKILL in between left lines with their new checks and old bytes
/// that no replay reaches.
pub(crate) fn apply_from_dram(pool: &Pool, pm: &PmCopy, dram: &[u8], runs: &[(u64, u64)]) {
    // Check words stored and not yet flushed, `[from, to)` in pool offsets: runs whose
    // check words share a line extend it, so that the line is flushed once, after its
    // last store.
    if runs.is_empty() {
        return;
    }
    let mut pending: Option<(u64, u64)> = None;
    for &(start, end) in runs {
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
    // The checks are durable before any byte they cover changes (see `write_checked`).
    pool.fence();
    for &(start, end) in runs {
        let len = (end - start) as usize;
        let at = pm.region + start;
        // SAFETY: `[start, end)` lies inside the region (blocks of it, as logged), an
        // object of this pool that only the backend writes; no reference into it exists.
        unsafe { std::ptr::copy_nonoverlapping(dram[start as usize..].as_ptr(), pool.at::<u8>(at), len) };
        pool.flush_off(at, len);
    }
    pool.fence(); // the bytes, on this thread (see above)
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

/// The committed records of `[from, to)` read, verified and merged: every byte they write
/// once, with the content of the last record that wrote it.
pub(crate) struct Pending {
    /// The merged runs `[start, end)` of every record up to `end`, sorted, disjoint.
    pub spans: Vec<(u64, u64)>,
    /// Where span `i`'s bytes start in `bytes`.
    at: Vec<usize>,
    bytes: Vec<u8>,
    /// The index past the last COMMIT read (`from` if none).
    pub end: u64,
}

impl Pending {
    /// Read and verify the records of `[from, to)` (`to` at most the persistent tail),
    /// check that each run lies in the region, and gather the whole batches' bytes. A
    /// record after the last COMMIT (none, as the tail moves only past a COMMIT) is left
    /// out.
    pub fn read(log: &RedoLog, pm: &PmCopy, from: u64, to: u64) -> Result<Pending> {
        let mut spans = Vec::new();
        let (mut committed, mut end) = (0, from);
        let (mut idx, mut buf) = (from, Vec::new());
        while idx < to {
            let rec = log.read(idx, to, &mut buf)?;
            for (addr, data) in rec.runs(&buf) {
                let len = data.len() as u64;
                if addr.checked_add(len).is_none_or(|e| e > pm.size) {
                    return Err(Error::Corrupt(format!(
                        "redo record {idx} writes {len} bytes at {addr}, outside the {}-byte region",
                        pm.size
                    )));
                }
                if len > 0 {
                    spans.push((addr, addr + len));
                }
            }
            idx = rec.next;
            if rec.commit {
                (committed, end) = (spans.len(), idx);
            }
        }
        spans.truncate(committed);
        merge_runs(&mut spans);
        let mut at = Vec::with_capacity(spans.len());
        let mut total = 0usize;
        for &(s, e) in &spans {
            at.push(total);
            total += (e - s) as usize;
        }
        let mut bytes = vec![0u8; total];
        let mut idx = from;
        while idx < end {
            let rec = log.read(idx, end, &mut buf)?;
            for (addr, data) in rec.runs(&buf) {
                if data.is_empty() {
                    continue;
                }
                // The span holding this run: the last one starting at or before it (spans
                // are disjoint and cover every run of `[from, end)`, read the same way).
                let i = spans.partition_point(|&(s, _)| s <= addr).wrapping_sub(1);
                let Some(&(s, _)) = spans.get(i).filter(|&&(_, e)| addr + data.len() as u64 <= e) else {
                    return Err(Error::Corrupt(format!("redo record {idx} changed while it was read")));
                };
                let from = at[i] + (addr - s) as usize;
                bytes[from..from + data.len()].copy_from_slice(data);
            }
            idx = rec.next;
        }
        Ok(Pending { spans, at, bytes, end })
    }

    /// The lines the records write, sorted, each once.
    pub fn lines(&self) -> Vec<u64> {
        let mut touched: Vec<u64> = self.spans.iter().flat_map(|&(s, e)| s / LINE..=(e - 1) / LINE).collect();
        touched.dedup();
        touched
    }

    /// Line `l` as it will be once the records are applied: its bytes in PM now, with
    /// the records' bytes put in.
    pub fn line_after(&self, pool: &Pool, pm: &PmCopy, l: u64) -> Vec<u8> {
        let start = l * LINE;
        let end = (start + LINE).min(pm.size);
        let mut line = pm.read_line(pool, l);
        let mut j = self.spans.partition_point(|&(_, e)| e <= start);
        while let Some(&(s, e)) = self.spans.get(j).filter(|&&(s, _)| s < end) {
            let (from, to) = (s.max(start), e.min(end));
            let src = self.at[j] + (from - s) as usize;
            line[(from - start) as usize..(to - start) as usize]
                .copy_from_slice(&self.bytes[src..src + (to - from) as usize]);
            j += 1;
        }
        line
    }

    /// Write the records' bytes to the PM copy, **checks first**: each line's new check
    /// (of `line_after`) is stored and flushed, one fence, and only then are the bytes
    /// written and flushed (durable at the caller's next fence). A crash therefore never
    /// leaves a line's new bytes with its old check, in `adr` either: every line the
    /// records write is, after any crash, either as before with its old check, or
    /// matches its check once the records are put in. Recovery relies on it to verify
    /// those lines too (`recovery::verify_touched`); were new bytes allowed beside an old
    /// check, a line matching neither would be a torn apply as well as damage, and the
    /// check recomputed by the replay would bless damage to the bytes no record writes.
    pub fn write_checked(&self, pool: &Pool, pm: &PmCopy) {
        let lines = self.lines();
        for &l in &lines {
            let c = line_check(l * LINE, &self.line_after(pool, pm, l));
            // SAFETY: the check word of line `l` inside the checks object; only the
            // backend (or a lone recovery) writes it, and no reference to it exists.
            unsafe { pool.store_u32(pm.checks + 4 * l, c) };
            pool.flush_off(pm.checks + 4 * l, 4);
        }
        if lines.is_empty() {
            return;
        }
        pool.fence(); // the checks before the bytes they cover
        for (&(s, e), &from) in self.spans.iter().zip(&self.at) {
            let len = (e - s) as usize;
            // SAFETY: `[s, e)` lies inside the region (checked by `read`), an object of
            // this pool that only the backend (or a lone recovery) writes; no reference
            // into it exists.
            unsafe { std::ptr::copy_nonoverlapping(self.bytes[from..].as_ptr(), pool.at::<u8>(pm.region + s), len) };
            pool.flush_off(pm.region + s, len);
        }
    }
}

/// Sort `runs` and merge those that overlap or touch, in place: the runs of several
/// records, each byte once, in address order.
pub(crate) fn merge_runs(runs: &mut Vec<(u64, u64)>) {
    runs.sort_unstable();
    let mut w = 0;
    for i in 0..runs.len() {
        let (s, e) = runs[i];
        if w > 0 && s <= runs[w - 1].1 {
            runs[w - 1].1 = runs[w - 1].1.max(e);
        } else {
            runs[w] = (s, e);
            w += 1;
        }
    }
    runs.truncate(w);
}

/// Apply the committed records in `[from, to)` to the PM copy (checks first, see
/// `Pending::write_checked`), each byte once, and fence them on this thread (see
/// [`apply_from_dram`] for why never later); returns the index past the last COMMIT
/// applied. `to` must not exceed the persistent tail. With `durable`, the persistent head
/// is then moved past them and persisted (Fig. 4 lines 21–24, for all the batches at
/// once); without, the caller moves the head itself.
pub(crate) fn apply(log: &RedoLog, pm: &PmCopy, from: u64, to: u64, durable: bool) -> Result<u64> {
    let pending = Pending::read(log, pm, from, to)?;
    pending.write_checked(&log.pool, pm);
    if pending.end > from {
        log.pool.fence(); // line 21: the batches' bytes are durable (their checks already are)
        if durable {
            log.set_p_head(pending.end); // lines 22–24
        }
    }
    Ok(pending.end)
}

#[cfg(test)]
mod tests {
    use super::DirtyLines;

    #[test]
    fn runs_of_several_batches_merge_into_sorted_disjoint_runs() {
        let mut runs = vec![(64, 96), (0, 32), (32, 64), (128, 160), (64, 128), (200, 232), (224, 256), (300, 301)];
        super::merge_runs(&mut runs);
        assert_eq!(runs, vec![(0, 160), (200, 256), (300, 301)]);
        let mut none: Vec<(u64, u64)> = Vec::new();
        super::merge_runs(&mut none);
        assert!(none.is_empty());
        // Every byte of the input is covered once, nothing else.
        let mut apart = vec![(96, 128), (0, 32)];
        super::merge_runs(&mut apart);
        assert_eq!(apart, vec![(0, 32), (96, 128)]);
    }

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
