//! A model of the last-level cache for read-latency emulation: which PM lines a read
//! would find cached, so that only the others pay the read latency.
//!
//! **Why.** The papers' emulations stall on misses only: the HART paper adds, off line,
//! the stall cycles its loads spent on the remote node times the PM/DRAM latency ratio
//! (§4, after Quartz), so a line still in the cache costs nothing extra. Charging every
//! line an engine reports (the per-line model, [`crate::latency::ReadModel::PerLine`])
//! charges a tree's root and upper levels, which stay cached, on every descent, and
//! inflates the engines that keep more of themselves on PM (WOART's inner nodes) by far
//! more than the papers measured.
//!
//! **The model.** One cache per thread (the benchmarks' single-thread figures are what the
//! papers compare; a shared model would need a lock per line): set-associative with
//! [`WAYS`] ways and least-recently-used replacement, indexed by a hash of the line's
//! virtual address (Intel's LLC slices hash physical addresses too). Lines enter it when
//! read ([`read`]) and when written without a flush (`eadr`: [`insert`]); a flush
//! evicts them ([`evict`]), as `clflush`/`clflushopt` do — the instructions the papers'
//! prototypes used; `clwb` on Cascade Lake invalidated as well. A read of several
//! contiguous lines that miss pays the latency once (the hardware overlaps them: adjacent
//! lines are fetched in parallel), so [`read`] returns the runs of missing lines.
//!
//! **Size.** The reproduction scales it with its data: the paper's 20 MB L3 times the
//! reproduction's record count over the paper's, so that the fraction of a tree that fits
//! is about the paper's. `Latency::parse` takes it as `llc=<size>`.
//!
//! **Its own cost** (a hash and a search of 16 tags per line, ~10–30 ns) is measured once
//! per thread on a synthetic stream ([`cost_ps_per_line`]) and owed: the emulation spins
//! that much less at the next charged miss (`Pool::note_read_at`), so the time a benchmark
//! reports is the operation's plus the modelled stalls, not plus the model.

use std::cell::RefCell;

/// Ways per set, as many as the papers' Xeon E5 v3/v4 L3 slices have (20).
pub const WAYS: usize = 16;

/// A set-associative LRU cache of line numbers.
pub(crate) struct Llc {
    /// Its size in bytes, as configured.
    bytes: u64,
    sets: u64,
    /// `sets * WAYS` tags, each set's most recently used first; a tag is the line number
    /// plus one (0: an empty way).
    tags: Box<[u64]>,
}

impl Llc {
    pub(crate) fn new(bytes: u64) -> Llc {
        let sets = (bytes / 64 / WAYS as u64).max(1);
        Llc { bytes, sets, tags: vec![0; (sets as usize) * WAYS].into_boxed_slice() }
    }

    /// The ways of the set `line` maps to.
    #[inline]
    fn set(&mut self, line: u64) -> &mut [u64] {
        // A multiplicative hash of the line, reduced to `sets` without a division.
        let h = line.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let i = ((h as u128 * self.sets as u128) >> 64) as usize;
        &mut self.tags[i * WAYS..(i + 1) * WAYS]
    }

    /// Look `line` up and make it the most recently used of its set: whether it was there.
    #[inline]
    pub(crate) fn touch(&mut self, line: u64) -> bool {
        let tag = line + 1;
        let set = self.set(line);
        match set.iter().position(|&t| t == tag) {
            Some(i) => {
                set[..=i].rotate_right(1);
                true
            }
            None => {
                // The least recently used way (the last) leaves.
                set.rotate_right(1);
                set[0] = tag;
                false
            }
        }
    }

    /// Drop `line` if it is cached.
    #[inline]
    pub(crate) fn drop_line(&mut self, line: u64) {
        let tag = line + 1;
        let set = self.set(line);
        if let Some(i) = set.iter().position(|&t| t == tag) {
            set[i..].rotate_left(1);
            set[WAYS - 1] = 0;
        }
    }

    /// Read lines `first..=last`: (lines that missed, runs of contiguous missing lines).
    pub(crate) fn read(&mut self, first: u64, last: u64) -> (u64, u64) {
        let (mut missed, mut runs, mut in_run) = (0, 0, false);
        for line in first..=last {
            if self.touch(line) {
                in_run = false;
            } else {
                missed += 1;
                runs += u64::from(!in_run);
                in_run = true;
            }
        }
        (missed, runs)
    }
}

thread_local! {
    /// This thread's cache, made at its first charged read with the size asked then (and
    /// made anew if a pool with another size is read).
    static CACHE: RefCell<Option<Llc>> = const { RefCell::new(None) };
}

fn lines(addr: usize, len: usize) -> (u64, u64) {
    let first = (addr / crate::LINE) as u64;
    (first, ((addr + len.max(1) - 1) / crate::LINE) as u64)
}

fn with<R>(bytes: u64, f: impl FnOnce(&mut Llc) -> R) -> R {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.as_ref().is_none_or(|l| l.bytes != bytes) {
            *c = Some(Llc::new(bytes));
        }
        f(c.as_mut().expect("made above"))
    })
}

/// A read of `[addr, addr+len)` (virtual addresses) through this thread's cache of
/// `bytes`: (lines that missed, runs of contiguous missing lines).
pub(crate) fn read(bytes: u64, addr: usize, len: usize) -> (u64, u64) {
    let (first, last) = lines(addr, len);
    with(bytes, |l| l.read(first, last))
}

/// `[addr, addr+len)` was written and stays cached (no flush in this mode).
pub(crate) fn insert(bytes: u64, addr: usize, len: usize) {
    let (first, last) = lines(addr, len);
    with(bytes, |l| {
        for line in first..=last {
            l.touch(line);
        }
    })
}

/// `[addr, addr+len)` was flushed: the lines leave the cache (`clflush` semantics).
pub(crate) fn evict(bytes: u64, addr: usize, len: usize) {
    let (first, last) = lines(addr, len);
    CACHE.with(|c| {
        if let Some(l) = c.borrow_mut().as_mut().filter(|l| l.bytes == bytes) {
            for line in first..=last {
                l.drop_line(line);
            }
        }
    })
}

/// What the model costs per line looked up, in picoseconds: measured once per thread and
/// size on a stream of 2^18 lines, a quarter of them repeats, through a cache of `bytes`
/// of its own (so the measurement leaves the thread's cache alone).
pub(crate) fn cost_ps_per_line(bytes: u64) -> u64 {
    thread_local! {
        static COST: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
    }
    let (b, ps) = COST.get();
    if b == bytes {
        return ps;
    }
    crate::latency::calibrate();
    let mut l = Llc::new(bytes);
    let n: u64 = 1 << 18;
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let t0 = crate::latency::rdtsc();
    let mut hits = 0u64;
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // A quarter of the lookups repeat a recent line; the rest are spread over 4x the cache.
        let line = if i % 4 == 0 { i / 2 } else { x % (4 * bytes / 64 + 1) };
        hits += u64::from(l.touch(line));
    }
    let ticks = crate::latency::rdtsc().wrapping_sub(t0);
    std::hint::black_box(hits);
    let ps = crate::latency::ticks_to_ps(ticks) / n;
    COST.set((bytes, ps));
    ps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_read_twice_hits_the_second_time() {
        let mut l = Llc::new(64 * WAYS as u64 * 4);
        assert_eq!(l.read(10, 10), (1, 1));
        assert_eq!(l.read(10, 10), (0, 0));
        // Three new contiguous lines around a cached one: two runs of misses.
        assert_eq!(l.read(8, 12), (4, 2));
        assert_eq!(l.read(8, 12), (0, 0));
    }

    #[test]
    fn the_least_recently_used_way_leaves_first() {
        // One set: every line maps to it.
        let mut l = Llc::new(64 * WAYS as u64);
        for line in 0..WAYS as u64 {
            assert!(!l.touch(line));
        }
        // Line 0 is used again, so line 1 is now the least recently used.
        assert!(l.touch(0));
        assert!(!l.touch(100), "a new line misses");
        assert!(l.touch(0), "recently used: kept");
        assert!(!l.touch(1), "the least recently used line was evicted");
        assert!(!l.touch(2), "the next least recently used went when 1 came back");
    }

    #[test]
    fn a_flushed_line_misses_and_a_written_line_hits() {
        let bytes = 1 << 20;
        let base = 0x7f00_0000_0000usize;
        assert_eq!(read(bytes, base, 64), (1, 1));
        assert_eq!(read(bytes, base, 64), (0, 0));
        evict(bytes, base, 64);
        assert_eq!(read(bytes, base, 64), (1, 1), "clflush semantics: gone after a flush");
        insert(bytes, base + 4096, 128);
        assert_eq!(read(bytes, base + 4096, 128), (0, 0), "written lines are cached");
        // A cache of another size starts empty.
        assert_eq!(read(bytes * 2, base, 64), (1, 1));
    }

    #[test]
    fn a_working_set_larger_than_the_cache_misses_and_a_smaller_one_hits() {
        let mut l = Llc::new(1 << 20); // 16,384 lines
        let small = 8_000u64;
        let big = 200_000u64;
        for _ in 0..2 {
            for line in 0..small {
                l.touch(line);
            }
        }
        let (missed, _) = (0..small).fold((0, 0), |(m, r), line| {
            let (a, b) = l.read(line, line);
            (m + a, r + b)
        });
        assert!(missed < small / 50, "a set a half of the cache's size stays: {missed} misses");
        for line in 0..big {
            l.touch(line * 7919);
        }
        let (missed, _) = (0..big).step_by(97).fold((0, 0), |(m, r), i| {
            let (a, b) = l.read(i * 7919, i * 7919);
            (m + a, r + b)
        });
        let looked = big.div_ceil(97);
        assert!(missed > looked * 8 / 10, "a set 12x the cache mostly misses: {missed} of {looked}");
    }

    #[test]
    fn the_model_s_cost_is_measured() {
        let ps = cost_ps_per_line(1 << 20);
        assert!(ps > 0 && ps < 2_000_000, "{ps} ps per line");
    }
}
