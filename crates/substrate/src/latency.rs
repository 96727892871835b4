//! PM latency emulation (SPEC P5), done the way the HART paper did it: after each flushed
//! line, busy-wait a configured number of nanoseconds on the time-stamp counter; for each
//! PM line an engine reports reading, busy-wait the read latency. A busy wait (rather than
//! `sleep`) is the only way to add a few hundred nanoseconds: the scheduler's granularity
//! is tens of microseconds.
//!
//! The TSC rate is calibrated once per process against the monotonic clock (~20 ms).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Extra latency per PM line, in nanoseconds. Zero means no emulation (the default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    /// Added per line flushed with a flush instruction, i.e. in `adr` mode only: in `eadr`
    /// no line is flushed, in `none` nothing is, and in `msync` the real medium's cost is
    /// paid by `msync` itself, so emulating PM on top of it would measure neither.
    pub write_ns: u32,
    /// Added per PM line read that an engine reports through `Pool::note_read`.
    pub read_ns: u32,
}

impl Latency {
    /// No emulation.
    pub const NONE: Latency = Latency { write_ns: 0, read_ns: 0 };

    /// Parse `"W/R"` (write/read ns, as the HART paper writes its settings: 300/100,
    /// 300/300, 600/300) or `"0"`/`"none"`.
    pub fn parse(s: &str) -> Option<Latency> {
        let s = s.trim();
        if s == "0" || s.eq_ignore_ascii_case("none") {
            return Some(Latency::NONE);
        }
        let (w, r) = s.split_once('/')?;
        Some(Latency { write_ns: w.trim().parse().ok()?, read_ns: r.trim().parse().ok()? })
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
        assert_eq!(Latency::parse("300/100"), Some(Latency { write_ns: 300, read_ns: 100 }));
        assert_eq!(Latency::parse("none"), Some(Latency::NONE));
        assert_eq!(Latency::parse("300"), None);
        assert_eq!(Latency::parse("a/b"), None);
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
