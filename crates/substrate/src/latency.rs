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
}

impl Latency {
    /// No emulation.
    pub const NONE: Latency = Latency { write_ns: 0, read_ns: 0, charge: Charge::Line };

    /// Write and read latency charged per line (the HART paper's model).
    pub const fn per_line(write_ns: u32, read_ns: u32) -> Latency {
        Latency { write_ns, read_ns, charge: Charge::Line }
    }

    /// Parse `"W/R"` (write/read ns, as the HART paper writes its settings: 300/100,
    /// 300/300, 600/300), `"W/R/fence"` (the write latency charged per fence, see the
    /// module doc; `"W/R/line"` is the default spelled out) or `"0"`/`"none"`.
    pub fn parse(s: &str) -> Option<Latency> {
        let s = s.trim();
        if s == "0" || s.eq_ignore_ascii_case("none") {
            return Some(Latency::NONE);
        }
        let mut parts = s.split('/').map(str::trim);
        let (w, r) = (parts.next()?, parts.next()?);
        let charge = match parts.next() {
            None | Some("line") => Charge::Line,
            Some("fence") => Charge::Fence,
            Some(_) => return None,
        };
        if parts.next().is_some() {
            return None;
        }
        Some(Latency { write_ns: w.parse().ok()?, read_ns: r.parse().ok()?, charge })
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

    /// The setting as [`Latency::parse`] reads it: `none`, `W/R` or `W/R/fence`.
    pub fn name(self) -> String {
        match (self == Latency::NONE, self.charge) {
            (true, _) => "none".into(),
            (false, Charge::Line) => format!("{}/{}", self.write_ns, self.read_ns),
            (false, Charge::Fence) => format!("{}/{}/fence", self.write_ns, self.read_ns),
        }
    }

    /// The per-process default from `PMKV_LATENCY` (format of [`Latency::parse`]).
    pub fn from_env() -> Latency {
        std::env::var("PMKV_LATENCY").ok().and_then(|s| Latency::parse(&s)).unwrap_or_default()
    }
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
        for l in [Latency::NONE, Latency::per_line(600, 300), fence] {
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
