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
//! **The model.** One cache per pool, shared by its threads behind a lock (a process's
//! threads share the real LLC, and a benchmark's phases run on fresh threads that must
//! find the cache as the phase before left it): set-associative with
//! [`WAYS`] ways and least-recently-used replacement, indexed by a hash of the line's
//! virtual address (Intel's LLC slices hash physical addresses too). Lines enter it when
//! read ([`Model::read`]) and when written without a flush (`eadr`: [`Model::insert`]); a
//! flush evicts them ([`Model::evict`]), as `clflush`/`clflushopt` do — the instructions the papers'
//! prototypes used; `clwb` on Cascade Lake invalidated as well. A read of several
//! contiguous lines that miss pays the latency once (the hardware overlaps them: adjacent
//! lines are fetched in parallel), so a read waits once per run of missing lines.
//!
//! **Size.** The reproduction scales it with its data: the paper's 20 MB L3 times the
//! reproduction's record count over the paper's, so that the fraction of a tree that fits
//! is about the paper's. `Latency::parse` takes it as `llc=<size>`.
//!
//! **Its own cost** (a lock, a hash and a search of 16 tags per line, ~10–30 ns) is
//! measured once per process and size on a synthetic stream ([`cost_ps_per_line`]) and
//! owed: the emulation spins that much less at the next charged miss
//! (`Pool::note_read_at`), so the time a benchmark reports is the operation's plus the
//! modelled stalls, not plus the model. With several threads the lock is contended and
//! costs more than measured: multi-threaded figures under the model carry that.

use crate::latency::{Latency, ReadModel};

/// Ways per set, as many as the papers' Xeon E5 v3/v4 L3 slices have (20).
pub const WAYS: usize = 16;

/// A set-associative LRU cache of line numbers.
pub(crate) struct Llc {
    sets: u64,
    /// `sets * WAYS` tags, each set's most recently used first; a tag is the line number
    /// plus one (0: an empty way).
    tags: Box<[u64]>,
}

impl Llc {
    pub(crate) fn new(bytes: u64) -> Llc {
        let sets = (bytes / 64 / WAYS as u64).max(1);
        Llc { sets, tags: vec![0; (sets as usize) * WAYS].into_boxed_slice() }
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

/// A pool's cache model: the cache behind a lock (the threads of a process share their
/// last-level cache, and a benchmark's phases run on fresh threads that must find it as
/// the phase before left it), what a lookup costs and what a run of misses waits.
pub(crate) struct Model {
    cache: parking_lot::Mutex<Llc>,
    /// The model's own time per line looked up, lock included, in picoseconds.
    cost_ps: u64,
    /// What a run of missing lines waits: the read latency less DRAM's.
    wait_ns: u64,
}

impl Model {
    /// The model `l` asks for, if any: none with the per-line model, and none when a
    /// miss would wait nothing (PM reads no slower than DRAM's), where running it would
    /// only add its own time. Measures DRAM's latency (once per process) and the model's
    /// cost (once per size) now, at the pool's open, not inside a timed operation.
    pub(crate) fn for_latency(l: Latency) -> Option<Box<Model>> {
        let ReadModel::Llc { kib } = l.read_model else { return None };
        if l.read_ns == 0 {
            return None;
        }
        let wait_ns = l.miss_wait_ns();
        if wait_ns == 0 {
            return None;
        }
        let bytes = u64::from(kib) << 10;
        Some(Box::new(Model {
            cache: parking_lot::Mutex::new(Llc::new(bytes)),
            cost_ps: cost_ps_per_line(bytes),
            wait_ns,
        }))
    }

    /// A read of `[addr, addr+len)` (virtual addresses, `len > 0`): (lines that missed,
    /// nanoseconds to wait before the model's own time is taken off).
    pub(crate) fn read(&self, addr: usize, len: usize) -> (u64, u64) {
        let (first, last) = lines(addr, len);
        let (missed, runs) = self.cache.lock().read(first, last);
        (missed, runs * self.wait_ns)
    }

    /// What looking up `[addr, addr+len)` cost the model, in picoseconds.
    pub(crate) fn cost_ps(&self, addr: usize, len: usize) -> u64 {
        let (first, last) = lines(addr, len);
        (last - first + 1) * self.cost_ps
    }

    /// `[addr, addr+len)` was written and stays cached (no flush in this mode).
    pub(crate) fn insert(&self, addr: usize, len: usize) {
        let (first, last) = lines(addr, len);
        let mut c = self.cache.lock();
        for line in first..=last {
            c.touch(line);
        }
    }

    /// `[addr, addr+len)` was flushed: its lines leave the cache (`clflush` semantics).
    pub(crate) fn evict(&self, addr: usize, len: usize) {
        let (first, last) = lines(addr, len);
        let mut c = self.cache.lock();
        for line in first..=last {
            c.drop_line(line);
        }
    }
}

fn lines(addr: usize, len: usize) -> (u64, u64) {
    let first = (addr / crate::LINE) as u64;
    (first, ((addr + len.max(1) - 1) / crate::LINE) as u64)
}

/// What the model costs per line looked up, lock included, in picoseconds: measured once
/// per process and size on a stream of 2^16 lines (a quarter of them repeats) through a
/// cache of its own.
pub(crate) fn cost_ps_per_line(bytes: u64) -> u64 {
    static COSTS: parking_lot::Mutex<Vec<(u64, u64)>> = parking_lot::Mutex::new(Vec::new());
    let mut costs = COSTS.lock();
    if let Some(&(_, ps)) = costs.iter().find(|(b, _)| *b == bytes) {
        return ps;
    }
    crate::latency::calibrate();
    let l = parking_lot::Mutex::new(Llc::new(bytes));
    let n: u64 = 1 << 16;
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut hits = 0u64;
    let t0 = crate::latency::rdtsc();
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // A quarter repeat a recent line; the rest are spread over 4x the cache.
        let line = if i % 4 == 0 { i / 2 } else { x % (4 * bytes / 64 + 1) };
        hits += u64::from(l.lock().touch(line));
    }
    let ticks = crate::latency::rdtsc().wrapping_sub(t0);
    std::hint::black_box(hits);
    let ps = crate::latency::ticks_to_ps(ticks) / n;
    costs.push((bytes, ps));
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
        let lat = Latency::per_line(0, 1_000_000).with_reads(ReadModel::Llc { kib: 1024 });
        let m = Model::for_latency(lat).expect("a model");
        let base = 0x7f00_0000_0000usize;
        let wait = 1_000_000 - crate::latency::dram_ns();
        assert_eq!(m.read(base, 64), (1, wait));
        assert_eq!(m.read(base, 64), (0, 0));
        m.evict(base, 64);
        assert_eq!(m.read(base, 64), (1, wait), "clflush semantics: gone after a flush");
        m.insert(base + 4096, 128);
        assert_eq!(m.read(base + 4096, 128), (0, 0), "written lines are cached");
        assert_eq!(m.read(base + 8192, 64 * 8), (8, wait), "eight contiguous misses wait once");
        assert_eq!(m.cost_ps(base, 64 * 8), 8 * m.cost_ps);
    }

    #[test]
    fn no_model_where_it_would_charge_nothing() {
        assert!(Model::for_latency(Latency::per_line(300, 300)).is_none(), "per-line model");
        let llc = ReadModel::Llc { kib: 1024 };
        assert!(Model::for_latency(Latency::per_line(300, 0).with_reads(llc)).is_none());
        assert!(Model::for_latency(Latency::per_line(300, 1).with_reads(llc)).is_none(), "PM reads as fast as DRAM's");
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
        assert_eq!(cost_ps_per_line(1 << 20), ps, "once per size");
        assert!(ps > 0 && ps < 2_000_000, "{ps} ps per line");
    }
}
