//! PM latency emulation (SPEC P5), done the way the HART paper did it: after each flushed
//! line, busy-wait a configured number of nanoseconds on the time-stamp counter; for each
//! PM line an engine reports reading, busy-wait the read latency. A busy wait (rather than
//! `sleep`) is the only way to add a few hundred nanoseconds: the scheduler's granularity
//! is tens of microseconds.
//!
//! The TSC rate is calibrated once per process against the monotonic clock (~20 ms).
//!
//! **Where the write latency is charged.** The HART paper's model, the default
//! ([`Charge::Line`]), charges it per flushed line, as its `clflush` was synchronous. On
//! Optane with `clwb` the write-backs of one thread overlap, and it is the fence that
//! waits for them: a fence after one flushed line costs about what a fence after eight
//! does, and a design's cost follows its fences more than its lines. [`Charge::Fence`]
//! models that: a flush only counts its lines, and a fence with any flushed line pending
//! (on this thread) waits the write latency once. The Mangosteen paper's argument (a
//! batch commits with one fence where per-write persistence fences every store) is about
//! fences, which the per-line model does not see; it is measured under both
//! (`300/100/fence` in `--latency`). Neither is a model of bandwidth.
//!
//! **Which reads are charged.** The default, [`ReadModel::PerLine`], charges the read
//! latency for every line an engine reports, cached or not. [`ReadModel::Llc`] (`llc` in
//! the setting) is what the papers' emulations did: a per-thread model of the last-level
//! cache (`crate::llc`) decides which lines miss, and each run of contiguous missing
//! lines pays the PM read latency *less the DRAM latency* a real miss already paid here
//! ([`dram_ns`]) — so at 300/100 on a machine whose DRAM takes 100 ns or more nothing is
//! added, as the HART paper says of its 300/100 ("the read latency of PM is equal to that
//! of DRAM", §4).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where the write latency is charged (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Charge {
    /// Per flushed line (the HART paper's emulation; the default).
    #[default]
    Line,
    /// Once per fence that has a flushed line of this thread pending.
    Fence,
}

/// Which PM reads pay the read latency (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReadModel {
    /// Every line an engine reports reading pays `read_ns` (the model before the cache
    /// model; kept for comparison).
    #[default]
    PerLine,
    /// Lines that miss a per-thread LRU model of a last-level cache of `kib` KiB; each run
    /// of contiguous missing lines pays `read_ns` less the DRAM latency ([`dram_ns`]).
    Llc { kib: u32 },
}

impl ReadModel {
    /// The HART paper's L3: "a shared 20 MB L3 cache" per Xeon E5-2640 v3 (§4).
    pub const PAPER_LLC_KIB: u32 = 20 << 10;

    /// The cache model scaled to a data set of `records` where the paper's had
    /// `paper_records` (at least 64 KiB); [`ReadModel::PerLine`] is left as it is.
    pub fn scaled(self, records: usize, paper_records: usize) -> ReadModel {
        match self {
            ReadModel::PerLine => self,
            ReadModel::Llc { kib } => {
                let k = (kib as u128 * records as u128 / paper_records.max(1) as u128).clamp(64, u32::MAX as u128);
                ReadModel::Llc { kib: k as u32 }
            }
        }
    }
}

/// Extra latency per PM line, in nanoseconds. Zero means no emulation (the default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    /// Added per line flushed with a flush instruction, i.e. in `adr` mode only: in `eadr`
    /// no line is flushed, in `none` nothing is, and in `msync` the real medium's cost is
    /// paid by `msync` itself, so emulating PM on top of it would measure neither.
    pub write_ns: u32,
    /// Added per PM line read that an engine reports through `Pool::note_read`.
    pub read_ns: u32,
    /// Where `write_ns` is charged: per flushed line, or per fence.
    pub charge: Charge,
    /// Which reads pay `read_ns`: every line, or the lines a cache model misses.
    pub read_model: ReadModel,
}

impl Latency {
    /// No emulation.
    pub const NONE: Latency = Latency { write_ns: 0, read_ns: 0, charge: Charge::Line, read_model: ReadModel::PerLine };

    /// Write and read latency charged per line.
    pub const fn per_line(write_ns: u32, read_ns: u32) -> Latency {
        Latency { write_ns, read_ns, charge: Charge::Line, read_model: ReadModel::PerLine }
    }

    /// This setting with reads charged by `model`.
    pub const fn with_reads(self, model: ReadModel) -> Latency {
        Latency { read_model: model, ..self }
    }

    /// Parse `"W/R"` (write/read ns, as the HART paper writes its settings: 300/100,
    /// 300/300, 600/300) followed by options, each at most once: `fence` (the write latency
    /// charged per fence, see the module doc; `line` is the default spelled out) and `llc`
    /// or `llc=<size>` (reads charged by the cache model, of the paper's 20 MiB or `<size>`
    /// bytes with a K, M or G suffix; `perline` is the default spelled out). `"0"` or
    /// `"none"`: no emulation. Examples: `300/300/llc=2M`, `300/100/fence`.
    pub fn parse(s: &str) -> Option<Latency> {
        let s = s.trim();
        if s == "0" || s.eq_ignore_ascii_case("none") {
            return Some(Latency::NONE);
        }
        let mut parts = s.split('/').map(str::trim);
        let (w, r) = (parts.next()?, parts.next()?);
        let (mut charge, mut model) = (None, None);
        for p in parts {
            if let Some(c) = match p {
                "line" => Some(Charge::Line),
                "fence" => Some(Charge::Fence),
                _ => None,
            } {
                if charge.replace(c).is_some() {
                    return None;
                }
                continue;
            }
            let m = match p {
                "perline" => ReadModel::PerLine,
                "llc" => ReadModel::Llc { kib: ReadModel::PAPER_LLC_KIB },
                _ => ReadModel::Llc { kib: parse_kib(p.strip_prefix("llc=")?)? },
            };
            if model.replace(m).is_some() {
                return None;
            }
        }
        Some(Latency {
            write_ns: w.parse().ok()?,
            read_ns: r.parse().ok()?,
            charge: charge.unwrap_or_default(),
            read_model: model.unwrap_or_default(),
        })
    }

    /// Nanoseconds to wait after flushing `lines` lines in `adr`: all of them per line,
    /// none per fence (the fence pays).
    pub(crate) fn flush_wait_ns(self, lines: u64) -> u64 {
        match self.charge {
            Charge::Line => lines * self.write_ns as u64,
            Charge::Fence => 0,
        }
    }

    /// Nanoseconds to wait at a fence, given whether this thread flushed a line since its
    /// last fence: the write latency once per fence, if charged per fence.
    pub(crate) fn fence_wait_ns(self, writebacks: bool) -> u64 {
        match self.charge {
            Charge::Fence if writebacks => self.write_ns as u64,
            _ => 0,
        }
    }

    /// The setting as [`Latency::parse`] reads it: `none`, or `W/R` with `/fence` and
    /// `/llc=<size>` when they are not the defaults.
    pub fn name(self) -> String {
        if self == Latency::NONE {
            return "none".into();
        }
        let mut s = format!("{}/{}", self.write_ns, self.read_ns);
        if self.charge == Charge::Fence {
            s.push_str("/fence");
        }
        if let ReadModel::Llc { kib } = self.read_model {
            s.push_str("/llc=");
            s.push_str(&size_name(kib));
        }
        s
    }

    /// Nanoseconds a run of missing lines waits under the cache model: the PM read latency
    /// less the DRAM latency the miss already paid on this machine.
    pub(crate) fn miss_wait_ns(self) -> u64 {
        (self.read_ns as u64).saturating_sub(dram_ns())
    }

    /// The per-process default from `PMKV_LATENCY` (format of [`Latency::parse`]).
    pub fn from_env() -> Latency {
        std::env::var("PMKV_LATENCY").ok().and_then(|s| Latency::parse(&s)).unwrap_or_default()
    }
}

/// `20M`, `512K`, `1G` or a plain byte count, in KiB (at least 1).
fn parse_kib(s: &str) -> Option<u32> {
    let (num, unit) = match s.char_indices().last()? {
        (i, 'K' | 'k') => (&s[..i], 1u64),
        (i, 'M' | 'm') => (&s[..i], 1 << 10),
        (i, 'G' | 'g') => (&s[..i], 1 << 20),
        _ => return u32::try_from(s.parse::<u64>().ok()? >> 10).ok().filter(|&k| k > 0),
    };
    u32::try_from(num.parse::<u64>().ok()?.checked_mul(unit)?).ok().filter(|&k| k > 0)
}

/// A size in KiB as [`parse_kib`] reads it, in the largest unit that divides it.
fn size_name(kib: u32) -> String {
    match kib {
        k if k % (1 << 20) == 0 => format!("{}G", k >> 20),
        k if k % (1 << 10) == 0 => format!("{}M", k >> 10),
        k => format!("{k}K"),
    }
}

/// The latency of a dependent load from DRAM on this machine, in nanoseconds:
/// `PMKV_DRAM_NS` if set, else measured once per process by a pointer chase through
/// 256 MiB in a random cycle (~0.3 s, at the first charged miss).
pub fn dram_ns() -> u64 {
    static NS: OnceLock<u64> = OnceLock::new();
    *NS.get_or_init(|| {
        if let Some(ns) = std::env::var("PMKV_DRAM_NS").ok().and_then(|s| s.trim().parse().ok()) {
            return ns;
        }
        measure_dram_ns()
    })
}

fn measure_dram_ns() -> u64 {
    // One word per 64-byte line over 256 MiB (far beyond any LLC), linked in one random
    // cycle (Sattolo's shuffle) so that each load depends on the one before.
    const LINES: usize = 256 << 20 >> 6;
    const STRIDE: usize = 8;
    let mut order: Vec<u32> = (0..LINES as u32).collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in (1..LINES).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % i as u64) as usize);
    }
    let mut next = vec![0u32; LINES * STRIDE];
    for w in 0..LINES {
        next[order[w] as usize * STRIDE] = order[(w + 1) % LINES] * STRIDE as u32;
    }
    drop(order);
    let steps = 1 << 20;
    let mut at = 0usize;
    for _ in 0..steps / 4 {
        at = next[at] as usize; // warm the TLB and the walk
    }
    let t = Instant::now();
    for _ in 0..steps {
        at = next[at] as usize;
    }
    let ns = t.elapsed().as_nanos() as u64 / steps as u64;
    std::hint::black_box(at);
    ns.max(1)
}

/// Ticks of the time-stamp counter per nanosecond, scaled by 2^16.
fn ticks_per_ns_q16() -> u64 {
    static RATE: OnceLock<u64> = OnceLock::new();
    *RATE.get_or_init(|| {
        let t0 = Instant::now();
        let c0 = rdtsc();
        while t0.elapsed() < Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        let c1 = rdtsc();
        let ns = t0.elapsed().as_nanos().max(1) as u64;
        (((c1.wrapping_sub(c0)) as u128) << 16).checked_div(ns as u128).unwrap_or(1 << 16).max(1) as u64
    })
}

/// The time-stamp counter (a monotonic nanosecond clock on other architectures). Shared
/// with the benchmark harness, which times operations with it.
#[inline]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc has no memory effects and exists on every x86_64 CPU.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Busy-wait `ns` nanoseconds on the TSC.
#[inline]
pub fn spin_ns(ns: u64) {
    if ns == 0 {
        return;
    }
    let ticks = (ns * ticks_per_ns_q16()) >> 16;
    let start = rdtsc();
    while rdtsc().wrapping_sub(start) < ticks {
        std::hint::spin_loop();
    }
}

/// Picoseconds in `ticks` of the time-stamp counter.
pub(crate) fn ticks_to_ps(ticks: u64) -> u64 {
    (((ticks as u128 * 1000) << 16) / ticks_per_ns_q16() as u128) as u64
}

/// Make sure the calibration is done before a measurement starts.
pub fn calibrate() {
    let _ = ticks_per_ns_q16();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_settings() {
        assert_eq!(Latency::parse("300/100"), Some(Latency::per_line(300, 100)));
        assert_eq!(Latency::parse("300/100/line"), Some(Latency::per_line(300, 100)));
        let fence = Latency { charge: Charge::Fence, ..Latency::per_line(300, 100) };
        assert_eq!(Latency::parse(" 300/100/fence "), Some(fence));
        assert_eq!(Latency::parse("none"), Some(Latency::NONE));
        assert_eq!(Latency::parse("300"), None);
        assert_eq!(Latency::parse("a/b"), None);
        assert_eq!(Latency::parse("300/100/flush"), None);
        assert_eq!(Latency::parse("300/100/fence/x"), None);
        assert_eq!(Latency::parse("300/100/fence/line"), None, "two write charges");
        let llc = Latency::per_line(300, 300).with_reads(ReadModel::Llc { kib: 20 << 10 });
        assert_eq!(Latency::parse("300/300/llc"), Some(llc));
        assert_eq!(Latency::parse("300/300/llc=20M"), Some(llc));
        assert_eq!(Latency::parse("300/300/perline"), Some(Latency::per_line(300, 300)));
        assert_eq!(
            Latency::parse("300/300/llc=512K/fence"),
            Some(Latency { charge: Charge::Fence, ..llc.with_reads(ReadModel::Llc { kib: 512 }) })
        );
        assert_eq!(Latency::parse("300/300/llc/perline"), None, "two read models");
        assert_eq!(Latency::parse("300/300/llc=0"), None);
        assert_eq!(Latency::parse("300/300/llc=2X"), None);
        let odd = llc.with_reads(ReadModel::Llc { kib: 1536 });
        for l in [Latency::NONE, Latency::per_line(600, 300), fence, llc, odd, Latency { charge: Charge::Fence, ..odd }]
        {
            assert_eq!(Latency::parse(&l.name()), Some(l), "{}", l.name());
        }
    }

    #[test]
    fn charges_per_line_or_per_fence() {
        let line = Latency::per_line(300, 100);
        let fence = Latency { charge: Charge::Fence, ..line };
        assert_eq!((line.flush_wait_ns(4), line.fence_wait_ns(true)), (1200, 0));
        assert_eq!((fence.flush_wait_ns(4), fence.fence_wait_ns(true)), (0, 300));
        assert_eq!(fence.fence_wait_ns(false), 0, "a fence with nothing flushed waits for nothing");
        assert_eq!((Latency::NONE.flush_wait_ns(8), Latency::NONE.fence_wait_ns(true)), (0, 0));
    }

    #[test]
    fn the_cache_scales_with_the_data_and_never_below_64_kib() {
        let m = ReadModel::Llc { kib: ReadModel::PAPER_LLC_KIB };
        assert_eq!(m.scaled(100_000, 1_000_000), ReadModel::Llc { kib: 2048 });
        assert_eq!(m.scaled(466_544, 466_544), m);
        assert_eq!(m.scaled(10, 1_000_000), ReadModel::Llc { kib: 64 });
        assert_eq!(ReadModel::PerLine.scaled(1, 2), ReadModel::PerLine);
    }

    #[test]
    fn a_miss_waits_the_pm_latency_less_dram_s() {
        let d = dram_ns();
        assert!((20..5_000).contains(&d), "DRAM latency {d} ns");
        assert_eq!(Latency::per_line(300, 0).miss_wait_ns(), 0);
        assert_eq!(Latency::per_line(300, 10_000).miss_wait_ns(), 10_000 - d);
    }

    #[test]
    fn spin_waits_at_least_roughly_the_time() {
        calibrate();
        let t = Instant::now();
        for _ in 0..100 {
            spin_ns(10_000);
        }
        // 1 ms requested; the lower bound is what emulation must guarantee. (No upper
        // bound: a shared machine may deschedule us.)
        assert!(t.elapsed() >= Duration::from_micros(800), "{:?}", t.elapsed());
    }
}
