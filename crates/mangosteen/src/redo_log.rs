//! The batched redo log (paper §4.3, "Batched Redo Logging"; Fig. 3 lines 20–41).
//!
//! A ring of 64-byte slots in PM with a persistent head (first slot the backend has not
//! applied) and tail (one past the last COMMIT). The frontend appends a batch's records,
//! the last of them a COMMIT, each flushed as it is written but none fenced; then one
//! fence, the new tail, and one persist (Fig. 3 lines 27–31): the batch is durable, and
//! its requests may be answered, exactly when the tail that covers its COMMIT is. A crash
//! before that leaves records past the persistent tail, which recovery never reads: the
//! batch is lost whole, and it was never acknowledged.
//!
//! **Run records (format 3).** The paper logs one record per dirty block. Here a record
//! carries *runs*: the batch's blocks sorted by address, adjacent ones merged, each run a
//! descriptor (offset and length) and its bytes, all behind one 24-byte header and one
//! check, over as many slots as it needs. A batch of the batched log is one record (its
//! COMMIT); per-write logging writes one REDO record per captured write and an empty
//! COMMIT. Format 2 put each 32-byte block in a slot of its own with its own header and
//! CRC: a Dictionary insert (11.8 blocks in 6.4 runs) wrote 12.8 records, 12.8 lines and
//! 12.8 checks, where it now writes one record of about 7 lines and one check. The
//! blocks are still deduplicated first (§4.3): a run holds each dirty block once, with
//! its content at commit.
//!
//! Records carry their own index and a check of four CRC-32C lanes side by side
//! (`checksum::crc32c_lanes`, the SSE4.2 instruction where the CPU has it: a record's
//! check is on every commit's critical path), so damage, or a stale record
//! of an earlier lap of the ring, is an error instead of a write of garbage into the PM
//! copy. A pool of format 2 is read by the same code (its records become one-run records
//! as they are read) until its ring is empty, then moved to format 3 (see `runtime`).

use crate::abi::SPAN_MASK;
use crate::error::{Error, Result};
use crate::layout::*;
use pmkv_substrate::Pool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The longest run one descriptor names (its length field has 24 bits); longer runs are
/// split.
pub(crate) const MAX_RUN: u64 = 1 << 20;

/// Bytes of a record's header.
const HEADER: usize = 24;

/// A record read and verified; its runs are in the buffer [`RedoLog::read`] filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rec {
    /// The record ends its batch (a COMMIT).
    pub(crate) commit: bool,
    /// The index one past the record's last slot.
    pub(crate) next: u64,
    runs: usize,
}

impl Rec {
    /// The record's runs: region offset and bytes, from the buffer `read` filled.
    pub(crate) fn runs<'b>(&self, buf: &'b [u64]) -> impl Iterator<Item = (u64, &'b [u8])> + 'b {
        let desc = &buf[HEADER / 8..HEADER / 8 + self.runs];
        let mut at = HEADER + 8 * self.runs;
        let bytes = words_as_bytes(buf);
        desc.iter().map(move |&d| {
            let (addr, len) = (d & ((1 << 40) - 1), (d >> 40) as usize);
            let data = &bytes[at..at + len];
            at += len;
            (addr, data)
        })
    }
}

/// `words` as their bytes (little-endian, as they lie in PM).
fn words_as_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: any initialized u64 is 8 initialized bytes; u8 needs no alignment.
    unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, words.len() * 8) }
}

fn words_as_bytes_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: as `words_as_bytes`; every byte pattern is a valid u64.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, words.len() * 8) }
}

/// The check of a record at index `idx` whose words (check field zero) are `words`: four
/// CRC-32C lanes side by side (`crc32c_lanes`). A Dictionary insert's record is ~58
/// words; as one CRC chain its check was 7% of the insert (the `crc32` instruction's
/// latency, three cycles a word), and the lanes run at its throughput.
fn check(idx: u64, words: &[u64]) -> u32 {
    pmkv_substrate::checksum::crc32c_lanes(idx, words)
}

/// The bytes `[start, end)` of a block entry: a block's region offset, plus in the low
/// bits ([`SPAN_MASK`]) how many blocks of `block` bytes follow it (the hooks append one
/// entry per short write, `abi::Ctx::buf`; the set's blocks have those bits zero).
#[inline]
pub(crate) fn entry_span(entry: u64, block: u64) -> (u64, u64) {
    let start = entry & !SPAN_MASK;
    (start, start + ((entry & SPAN_MASK) + 1) * block)
}

/// The runs of a batch: its `blocks` (block entries, see [`entry_span`]; sorted,
/// duplicates allowed), and its `ranges` (sorted by start; block-aligned `[start, end)`,
/// see `DedupSet::drain_into`), overlapping and adjacent ones merged, clipped to the
/// region's `size`, at most [`MAX_RUN`] bytes each, as `(start, end)` region offsets,
/// into `out` (cleared first). Sorted entries are sorted by start, which is all the merge
/// needs.
pub(crate) fn runs_of(blocks: &[u64], ranges: &[(u64, u64)], block: u64, size: u64, out: &mut Vec<(u64, u64)>) {
    out.clear();
    let push = |out: &mut Vec<(u64, u64)>, (s, e): (u64, u64)| {
        let e = e.min(size);
        let mut a = s;
        while a < e {
            let b = (a + MAX_RUN).min(e);
            out.push((a, b));
            a = b;
        }
    };
    if ranges.is_empty() {
        // Blocks alone (every batch of short writes): one pass, no merge of two lists.
        let Some((&first, rest)) = blocks.split_first() else { return };
        let (mut s, mut e) = entry_span(first, block);
        for &b in rest {
            let (bs, be) = entry_span(b, block);
            if bs <= e {
                e = e.max(be);
            } else {
                push(out, (s, e));
                (s, e) = (bs, be);
            }
        }
        push(out, (s, e));
        return;
    }
    let (mut i, mut j) = (0, 0);
    let mut cur: Option<(u64, u64)> = None;
    loop {
        let next = match (blocks.get(i), ranges.get(j)) {
            (Some(&b), Some(&(r, _))) if b & !SPAN_MASK <= r => {
                i += 1;
                entry_span(b, block)
            }
            (_, Some(&r)) => {
                j += 1;
                r
            }
            (Some(&b), None) => {
                i += 1;
                entry_span(b, block)
            }
            (None, None) => break,
        };
        cur = match cur {
            Some((s, e)) if next.0 <= e => Some((s, e.max(next.1))),
            Some(c) => {
                push(out, c);
                Some(next)
            }
            None => Some(next),
        };
    }
    if let Some(c) = cur {
        push(out, c);
    }
}

/// Slots a record of `runs` takes.
pub(crate) fn slots_for(runs: &[(u64, u64)]) -> u64 {
    let data: u64 = runs.iter().map(|(s, e)| e - s).sum();
    (HEADER as u64 + 8 * runs.len() as u64 + data).div_ceil(RECORD as u64)
}

/// A format-2 record's check: CRC-32C of its first 60 bytes.
fn v2_check(w: &[u64; RECORD / 8]) -> u32 {
    let seven: [u64; 7] = w[..7].try_into().expect("7 words");
    pmkv_substrate::checksum::crc32c_words_then(seven, w[7] as u32)
}

/// The ring and its persistent head and tail.
pub struct RedoLog {
    pub(crate) pool: Arc<Pool>,
    /// Offset of the ring's first slot.
    ring: u64,
    /// Capacity in slots.
    pub(crate) cap: u64,
    /// Offsets of the persistent head and tail words.
    head_at: u64,
    tail_at: u64,
    /// The records' format: 2 (one block per slot) or 3 (run records).
    version: u32,
}

impl RedoLog {
    pub(crate) fn new(pool: Arc<Pool>, ring: u64, cap: u64, sb: u64, version: u32) -> RedoLog {
        RedoLog { pool, ring, cap, head_at: sb + HEAD_AT, tail_at: sb + TAIL_AT, version }
    }

    fn word(&self, off: u64) -> &AtomicU64 {
        assert!(off.is_multiple_of(8) && self.pool.contains(off, 8), "redo log word {off:#x} outside the pool");
        // SAFETY: aligned and inside the mapping (checked), which lives as long as `pool`;
        // the head and tail words are only ever accessed atomically.
        unsafe { AtomicU64::from_ptr(self.pool.at::<u64>(off)) }
    }

    /// `p_rb_head`. Acquire: the backend's stores to the PM copy and its release of ring
    /// slots happen before a frontend that reads the new head reuses them.
    pub fn p_head(&self) -> u64 {
        self.word(self.head_at).load(Ordering::Acquire)
    }

    /// `p_rb_tail`. Acquire: the records below it were written before it was published.
    pub fn p_tail(&self) -> u64 {
        self.word(self.tail_at).load(Ordering::Acquire)
    }

    /// Store and persist `p_rb_head` (the backend, Fig. 4 lines 22–24).
    pub(crate) fn set_p_head(&self, h: u64) {
        self.word(self.head_at).store(h, Ordering::Release);
        self.pool.persist_off(self.head_at, 8);
    }

    /// Store and flush `p_rb_head`, no fence: the inline backend's head, made durable by
    /// the tail's persist that follows it (see `Mangosteen::end_tx`).
    pub(crate) fn store_p_head(&self, h: u64) {
        self.word(self.head_at).store(h, Ordering::Release);
        self.pool.flush_off(self.head_at, 8);
    }

    /// Store and persist `p_rb_tail` (the frontend, Fig. 3 lines 29–31).
    pub(crate) fn set_p_tail(&self, t: u64) {
        self.word(self.tail_at).store(t, Ordering::Release);
        self.pool.persist_off(self.tail_at, 8);
    }

    /// The eight words of the slot at index `idx`, checked once (not per word: a record
    /// write is on every commit's path), and the slot's pool offset.
    fn slot(&self, idx: u64) -> (&[AtomicU64; RECORD / 8], u64) {
        self.slot_at(idx % self.cap)
    }

    /// [`slot`](RedoLog::slot) by slot number (`idx % cap`).
    fn slot_at(&self, n: u64) -> (&[AtomicU64; RECORD / 8], u64) {
        let (words, at) = self.slots_at(n, 1);
        (words.try_into().expect("one slot is RECORD / 8 words"), at)
    }

    /// The words of `k` slots from slot number `n` (not past the ring's end), checked
    /// once, and their pool offset.
    fn slots_at(&self, n: u64, k: u64) -> (&[AtomicU64], u64) {
        let at = self.ring + n * RECORD as u64;
        let bytes = k * RECORD as u64;
        assert!(
            n + k <= self.cap && at.is_multiple_of(8) && self.pool.contains(at, bytes),
            "ring slots {n}+{k} (at {at:#x}) outside the ring or the pool"
        );
        // SAFETY: aligned and inside the mapping (checked), which lives as long as `pool`;
        // ring slots are only ever accessed through these atomics.
        (unsafe { std::slice::from_raw_parts(self.pool.at::<u64>(at) as *const AtomicU64, bytes as usize / 8) }, at)
    }

    /// Build the record of `runs` (region offsets, their bytes taken from `src`, the DRAM
    /// copy) at index `idx` in `buf`, write it into its slots and flush them (no fence:
    /// Fig. 3 line 37's pwb); returns the slots it took ([`slots_for`]). The caller owns
    /// the slots: `idx` is at or past the persistent tail and `idx + slots` at most the
    /// head plus the capacity, so neither the backend nor recovery reads them before the
    /// tail that covers them is published.
    ///
    /// The record is built as words, not bytes, and its check computed there, before any
    /// store to PM: the check then reads cached, store-forwardable words (built in a byte
    /// array with stores of 4 and 8 bytes, a format-2 record's 8-byte loads for the check
    /// could not be forwarded from those stores: a tenth of a `mangosteen` insert).
    pub(crate) fn write(&self, idx: u64, commit: bool, runs: &[(u64, u64)], src: &[u8], buf: &mut Vec<u64>) -> u64 {
        debug_assert_eq!(self.version, SUPER_VERSION, "only the current format is written");
        let slots = slots_for(runs);
        buf.clear();
        buf.resize(slots as usize * RECORD / 8, 0);
        let data: u64 = runs.iter().map(|(s, e)| e - s).sum();
        let len = HEADER as u64 + 8 * runs.len() as u64 + data;
        buf[0] = if commit { COMMIT3 } else { REDO3 } as u64 | (runs.len() as u64) << 32;
        buf[1] = idx;
        buf[2] = len;
        let mut at = HEADER + 8 * runs.len();
        for (i, &(s, e)) in runs.iter().enumerate() {
            buf[HEADER / 8 + i] = s | (e - s) << 40;
            let n = (e - s) as usize;
            words_as_bytes_mut(buf)[at..at + n].copy_from_slice(&src[s as usize..e as usize]);
            at += n;
        }
        let c = check(idx, &buf[..(len as usize).div_ceil(8)]);
        buf[2] |= (c as u64) << 32;
        // The record's slots: one stretch, or two when it wraps past the ring's end, each
        // checked once (per slot, the check was a tenth of this function). Each slot is
        // still flushed on its own: a flush is a crash-simulator point, and the crash
        // tests count on a record torn between its slots.
        let first = idx % self.cap;
        let before_end = slots.min(self.cap - first);
        let mut words = &buf[..];
        for (n, k) in [(first, before_end), (0, slots - before_end)] {
            if k == 0 {
                continue;
            }
            let (ring, mut off) = self.slots_at(n, k);
            let (now, rest) = words.split_at(ring.len());
            for (slot, src) in ring.chunks_exact(RECORD / 8).zip(now.chunks_exact(RECORD / 8)) {
                for (word, &w) in slot.iter().zip(src) {
                    // Word stores through atomics: the simulator and a backend thread may
                    // read the line concurrently (they only trust it below the published
                    // tail).
                    word.store(w, Ordering::Relaxed);
                }
                self.pool.flush_off(off, RECORD);
                off += RECORD as u64;
            }
            words = rest;
        }
        slots
    }

    /// Read and verify the record at index `idx` (below `tail`, the persistent tail) into
    /// `buf`; its runs are then [`Rec::runs`] of `buf`.
    pub(crate) fn read(&self, idx: u64, tail: u64, buf: &mut Vec<u64>) -> Result<Rec> {
        let bad = |what: String| Err(Error::Corrupt(format!("redo record {idx} (slot {}): {what}", idx % self.cap)));
        let load = |idx: u64, buf: &mut Vec<u64>| {
            for w in self.slot(idx).0 {
                buf.push(w.load(Ordering::Relaxed));
            }
        };
        buf.clear();
        load(idx, buf);
        if self.version == 2 {
            return self.read_v2(idx, buf);
        }
        let (kind, runs) = (buf[0] as u32, (buf[0] >> 32) as usize);
        let len = buf[2] as u32 as u64;
        let slots = len.div_ceil(RECORD as u64);
        if kind != REDO3 && kind != COMMIT3 {
            return bad(format!("unknown kind {kind}"));
        }
        if buf[1] != idx {
            return bad(format!("it names index {}: a record of another lap of the ring, or damage", buf[1]));
        }
        if len < (HEADER + 8 * runs) as u64 || slots > tail - idx {
            return bad(format!("a length of {len} bytes for {runs} runs does not fit before the tail"));
        }
        for i in 1..slots {
            load(idx + i, buf);
        }
        let want = (buf[2] >> 32) as u32;
        buf[2] &= u32::MAX as u64;
        let words = (len as usize).div_ceil(8);
        if check(idx, &buf[..words]) != want {
            return bad("checksum does not match".into());
        }
        let data: u64 = buf[HEADER / 8..HEADER / 8 + runs].iter().map(|d| d >> 40).sum();
        if HEADER as u64 + 8 * runs as u64 + data != len {
            return bad("its runs do not add up to its length".into());
        }
        Ok(Rec { commit: kind == COMMIT3, next: idx + slots, runs })
    }

    /// A format-2 record (in `buf`, its one slot) as a record of at most one run.
    fn read_v2(&self, idx: u64, buf: &mut Vec<u64>) -> Result<Rec> {
        let bad = |what: &str| Err(Error::Corrupt(format!("redo record {idx} (slot {}): {what}", idx % self.cap)));
        let w: [u64; RECORD / 8] = buf[..].try_into().expect("one slot");
        if (w[7] >> 32) as u32 != v2_check(&w) {
            return bad("checksum does not match");
        }
        if w[6] != idx {
            return bad("it is a record of another lap of the ring");
        }
        match w[0] as u32 {
            REDO => {
                let len = (w[0] >> 32) as usize;
                if len > MAX_BLOCK {
                    return bad("block longer than a record holds");
                }
                // Header, one descriptor, the block's bytes (words 2..6 of the slot).
                buf.clear();
                buf.extend_from_slice(&[0, 0, 0, w[1] | (len as u64) << 40]);
                buf.extend_from_slice(&w[2..6]);
                Ok(Rec { commit: false, next: idx + 1, runs: 1 })
            }
            COMMIT => Ok(Rec { commit: true, next: idx + 1, runs: 0 }),
            _ => bad("unknown kind"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Records of three slots in a ring of eight: every third one wraps past the ring's
    /// end (slots 6, 7, 0), and each reads back whole, check and bytes.
    #[test]
    fn a_record_that_wraps_past_the_ring_end_reads_back() {
        let pool = Arc::new(Pool::create_sim("mangosteen", &pmkv_testutil::sim_opts(8 << 20)).unwrap());
        let (sb, ring, cap) = (1 << 20, (1 << 20) + 4096, 8);
        let log = RedoLog::new(pool, ring, cap, sb, crate::layout::SUPER_VERSION);
        let src: Vec<u8> = (0..4096u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let runs = [(64, 96), (256, 320)];
        assert_eq!(slots_for(&runs), 3);
        let mut buf = Vec::new();
        for idx in (0..24).step_by(3) {
            assert_eq!(log.write(idx, idx % 2 == 0, &runs, &src, &mut buf), 3);
            let rec = log.read(idx, idx + 3, &mut buf).unwrap_or_else(|e| panic!("record {idx}: {e}"));
            assert_eq!((rec.commit, rec.next), (idx % 2 == 0, idx + 3));
            let got: Vec<(u64, Vec<u8>)> = rec.runs(&buf).map(|(a, d)| (a, d.to_vec())).collect();
            let want: Vec<(u64, Vec<u8>)> =
                runs.iter().map(|&(s, e)| (s, src[s as usize..e as usize].to_vec())).collect();
            assert_eq!(got, want, "record {idx}");
        }
    }

    proptest! {
        /// The blocks-only path of `runs_of` gives the runs the general merge gives for the
        /// same entries (a block and 1 to 7 blocks from it, overlapping or not) with the
        /// first one passed as a range instead, and both cover exactly the entries' blocks
        /// (clipped to the region).
        #[test]
        fn runs_of_blocks_alone_match_the_merge(
            mut v in proptest::collection::vec((0u64..200, 0u64..=SPAN_MASK), 1..40)
        ) {
            let size = 150 * 32 + 7;
            v.sort_unstable();
            let e: Vec<u64> = v.iter().map(|&(b, extra)| (b * 32) | extra).collect();
            let (mut alone, mut merged) = (Vec::new(), Vec::new());
            runs_of(&e, &[], 32, size, &mut alone);
            runs_of(&e[1..], &[entry_span(e[0], 32)], 32, size, &mut merged);
            prop_assert_eq!(&alone, &merged);
            let mut want: Vec<u64> =
                v.iter().flat_map(|&(b, extra)| (b..=b + extra).map(|k| k * 32)).filter(|&a| a < size).collect();
            want.dedup();
            want.sort_unstable();
            want.dedup();
            let got: Vec<u64> = alone.iter().flat_map(|&(s, t)| (s..t).step_by(32)).collect();
            prop_assert_eq!(got, want);
            prop_assert!(alone.windows(2).all(|w| w[0].1 < w[1].0), "runs disjoint, not adjacent: {:?}", alone);
        }
    }

    #[test]
    fn runs_merge_adjacent_and_duplicate_blocks_and_split_long_ones() {
        let mut out = Vec::new();
        runs_of(&[0, 32, 32, 64, 128, 160], &[], 32, 1 << 30, &mut out);
        assert_eq!(out, [(0, 96), (128, 192)]);
        runs_of(&[992], &[], 32, 1000, &mut out);
        assert_eq!(out, [(992, 1000)], "the last block is clipped to the region");
        let long: Vec<u64> = (0..(3 * MAX_RUN / 32)).map(|b| b * 32).collect();
        runs_of(&long, &[], 32, 1 << 30, &mut out);
        assert_eq!(out, [(0, MAX_RUN), (MAX_RUN, 2 * MAX_RUN), (2 * MAX_RUN, 3 * MAX_RUN)]);
        // Ranges merge with blocks inside, beside and apart from them, and split too.
        runs_of(&[0, 320, 640, 1024], &[(64, 320), (352, 512), (2048, 2048 + 2 * MAX_RUN)], 32, 1 << 30, &mut out);
        assert_eq!(
            out,
            [
                (0, 32),
                (64, 512),
                (640, 672),
                (1024, 1056),
                (2048, 2048 + MAX_RUN),
                (2048 + MAX_RUN, 2048 + 2 * MAX_RUN)
            ]
        );
        runs_of(&[], &[(0, 256)], 32, 100, &mut out);
        assert_eq!(out, [(0, 100)]);
        assert_eq!(slots_for(&[(0, 32)]), 1, "header, descriptor and one block share a slot");
        assert_eq!(slots_for(&[(0, 64)]), 2);
        assert_eq!(slots_for(&[]), 1, "an empty COMMIT");
    }
}
