//! Measurement: wall-clock time per phase, ns/op and Mops/s, latency percentiles from an
//! HDR histogram, and the substrate's persistence counters per operation.
//!
//! How a phase is measured:
//! * every worker thread is started first and waits on a barrier, so thread creation is
//!   never timed; each worker takes [`pmkv_substrate::counters::snapshot`] (per thread)
//!   and the time right before its first and after its last operation; counters are
//!   summed over workers;
//! * **Mops/s** = all operations / (latest end − earliest start);
//! * **ns/op** = summed per-thread busy time / operations (= 1000 / Mops/s on one thread);
//! * **latency percentiles** come from one operation in `sample_every` (default 8), timed
//!   with the time-stamp counter (≈10 ns per read here, vs ≈25 ns for `Instant::now`), so
//!   timing costs ≈2.5 ns per operation on average; `--sample-every 1` times every one.
//! * **lines written** are counted exactly (distinct lines each operation dirtied,
//!   `counters::set_exact`) on one operation in [`COUNT_EVERY`] per thread, the second of
//!   each group, never one whose latency is sampled (unless `--sample-every 1`, or the
//!   phase has one operation: that sample then includes the counting); the
//!   phase's figure is their mean scaled to all operations. The other counters count every
//!   operation. Exact counting costs up to ~17 % of an operation's instructions, so the
//!   timed loop pays it on 1 operation in 16 (≤ ~1 % of the phase's time, in proportion to
//!   the lines each engine stores to) instead of on all of them.

use hdrhistogram::Histogram;
use pmkv_substrate::counters::{self, Counters};
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

/// Result of one operation: found / done (`true`), not found (`false`), or an error.
pub type OpResult = pmkv::Result<bool>;

#[inline]
fn ticks() -> u64 {
    pmkv_substrate::latency::rdtsc()
}

/// Nanoseconds per time-stamp-counter tick, calibrated once per process (~20 ms).
fn ns_per_tick() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(|| {
        let (t0, c0) = (Instant::now(), ticks());
        while t0.elapsed() < Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        let (ns, c1) = (t0.elapsed().as_nanos() as f64, ticks());
        let d = c1.wrapping_sub(c0).max(1) as f64;
        ns / d
    })
}

/// Do the calibrations (ours and the substrate's latency emulation) before measuring.
pub fn calibrate() {
    let _ = ns_per_tick();
    pmkv_substrate::latency::calibrate();
}

/// A fresh latency histogram: 1 ns … ~18 min, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 1 << 40, 3).expect("valid histogram bounds")
}

/// Hits, misses and errors of a phase.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    pub found: u64,
    pub missed: u64,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl Tally {
    /// On the timed path of every operation: inlined, with the rare error kept out of line.
    #[inline]
    fn note(&mut self, r: OpResult) {
        match r {
            Ok(true) => self.found += 1,
            Ok(false) => self.missed += 1,
            Err(e) => self.note_error(e),
        }
    }

    #[cold]
    #[inline(never)]
    fn note_error(&mut self, e: pmkv::Error) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(e.to_string());
        }
    }

    fn merge(&mut self, o: Tally) {
        self.found += o.found;
        self.missed += o.missed;
        self.errors += o.errors;
        if self.first_error.is_none() {
            self.first_error = o.first_error;
        }
    }
}

/// What one measured phase produced.
#[derive(Clone, Debug)]
pub struct PhaseStats {
    pub threads: usize,
    pub ops: u64,
    pub wall: Duration,
    /// Summed per-thread time from first to last operation.
    pub busy: Duration,
    pub hist: Histogram<u64>,
    pub counters: Counters,
    pub tally: Tally,
}

impl PhaseStats {
    pub fn ns_per_op(&self) -> f64 {
        if self.ops == 0 {
            return 0.0;
        }
        self.busy.as_nanos() as f64 / self.ops as f64
    }

    pub fn mops(&self) -> f64 {
        let s = self.wall.as_secs_f64();
        if s == 0.0 {
            return 0.0;
        }
        self.ops as f64 / s / 1e6
    }

    /// Latency at quantile `q` in ns (0 if nothing was sampled).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.value_at_quantile(q)
        }
    }

    /// Counter per operation.
    pub fn per_op(&self, c: u64) -> f64 {
        if self.ops == 0 {
            0.0
        } else {
            c as f64 / self.ops as f64
        }
    }

    /// Points of the latency CDF: (latency ns, fraction of operations at or below), up to
    /// the 99.99th percentile.
    pub fn cdf(&self) -> Vec<(u64, f64)> {
        if self.hist.is_empty() {
            return vec![];
        }
        let mut qs: Vec<f64> = (0..=90).map(|i| i as f64 / 100.0).collect();
        qs.extend([0.92, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99, 0.995, 0.999, 0.9995, 0.9999]);
        let mut out: Vec<(u64, f64)> = qs.into_iter().map(|q| (self.hist.value_at_quantile(q), q)).collect();
        out.dedup_by_key(|p| p.0);
        out
    }
}

/// Per-thread scratch space for operations: a value buffer and a sink that keeps reads
/// from being optimised away.
#[derive(Default)]
pub struct Scratch {
    pub value: Vec<u8>,
    pub sink: u64,
}

/// One operation in this many has its lines written counted exactly (see the module doc).
pub const COUNT_EVERY: usize = 16;

/// Run `op` on `item` with exact counting of lines written on; returns its result and the
/// distinct lines it dirtied. Out of line: the timed loop's other operations stay as tight
/// as they were.
#[inline(never)]
fn counted<T, F>(op: &F, item: &T, scratch: &mut Scratch) -> (OpResult, u64)
where
    F: Fn(&T, &mut Scratch) -> OpResult,
{
    counters::set_exact(true);
    let w0 = counters::snapshot().lines_written;
    let r = op(item, scratch);
    let w = counters::snapshot().lines_written.wrapping_sub(w0);
    counters::set_exact(false);
    (r, w)
}

/// Run `op` over each thread's items (`work[t]` on thread `t`), all threads released at
/// once. `sample_every` must be a power of two (1 = time every operation).
pub fn execute<T, F>(work: &[&[T]], sample_every: usize, op: F) -> PhaseStats
where
    T: Sync,
    F: Fn(&T, &mut Scratch) -> OpResult + Sync,
{
    let threads = work.len().max(1);
    let mask = sample_every.max(1).next_power_of_two() - 1;
    let npt = ns_per_tick();
    let barrier = Barrier::new(threads);
    let results: Vec<(Instant, Instant, Histogram<u64>, Counters, Tally, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = work
            .iter()
            .map(|items| {
                let (barrier, op) = (&barrier, &op);
                s.spawn(move || {
                    let mut hist = new_histogram();
                    let mut tally = Tally::default();
                    let mut scratch = Scratch::default();
                    barrier.wait();
                    // The counted operations: the second of each group of COUNT_EVERY
                    // (an odd index, never latency-sampled when sample_every > 1), or
                    // the only one.
                    let at = usize::from(items.len() > 1);
                    let (mut exact_lines, mut n_counted) = (0u64, 0u64);
                    let c0 = counters::snapshot();
                    let t0 = Instant::now();
                    for (i, item) in items.iter().enumerate() {
                        let r = if i & (COUNT_EVERY - 1) == at {
                            // Timed too only when every operation is (or the only one).
                            let s = if i & mask == 0 { Some(ticks()) } else { None };
                            let (r, w) = counted(op, item, &mut scratch);
                            if let Some(s) = s {
                                let d = ticks().wrapping_sub(s);
                                hist.saturating_record(((d as f64 * npt) as u64).max(1));
                            }
                            exact_lines += w;
                            n_counted += 1;
                            r
                        } else if i & mask == 0 {
                            let s = ticks();
                            let r = op(item, &mut scratch);
                            let d = ticks().wrapping_sub(s);
                            hist.saturating_record(((d as f64 * npt) as u64).max(1));
                            r
                        } else {
                            op(item, &mut scratch)
                        };
                        tally.note(r);
                    }
                    let t1 = Instant::now();
                    let mut c = counters::snapshot().since(&c0);
                    c.lines_written = if n_counted == 0 {
                        0
                    } else {
                        (exact_lines as f64 * items.len() as f64 / n_counted as f64).round() as u64
                    };
                    (t0, t1, hist, c, tally, scratch.sink)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    let mut hist = new_histogram();
    let mut c = Counters::default();
    let mut tally = Tally::default();
    let mut busy = Duration::ZERO;
    let start = results.iter().map(|r| r.0).min();
    let end = results.iter().map(|r| r.1).max();
    for (t0, t1, h, cc, t, sink) in results {
        let _ = hist.add(&h);
        c = c.add(&cc);
        tally.merge(t);
        busy += t1 - t0;
        std::hint::black_box(sink);
    }
    let wall = match (start, end) {
        (Some(s), Some(e)) => e - s,
        _ => Duration::ZERO,
    };
    let ops = work.iter().map(|w| w.len() as u64).sum();
    PhaseStats { threads, ops, wall, busy, hist, counters: c, tally }
}

/// Split `items` into `threads` contiguous chunks (the first ones one longer if needed).
pub fn split<T>(items: &[T], threads: usize) -> Vec<&[T]> {
    let threads = threads.max(1);
    let n = items.len();
    (0..threads).map(|t| &items[n * t / threads..n * (t + 1) / threads]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execute_counts_and_times() {
        let items: Vec<u64> = (0..10_000).collect();
        let work = split(&items, 2);
        let st = execute(&work, 1, |&x, s| {
            s.sink = s.sink.wrapping_add(x);
            Ok(x % 2 == 0)
        });
        assert_eq!(st.ops, 10_000);
        assert_eq!(st.tally.found, 5_000);
        assert_eq!(st.tally.missed, 5_000);
        assert_eq!(st.hist.len(), 10_000);
        assert!(st.mops() > 0.0 && st.ns_per_op() > 0.0);
        assert!(!st.cdf().is_empty());
    }

    /// Lines written are the exact count of the sampled operations, scaled to all: an
    /// operation storing to two lines and flushing one counts 2 per operation (the
    /// default count would say 1), on 1 thread or 3, whatever the phase's length.
    #[test]
    fn execute_counts_lines_written_exactly() {
        use pmkv_substrate::{Mode, Pool, PoolOptions};
        let dir = tempfile::tempdir().unwrap();
        let o = PoolOptions::default().mode(Mode::Eadr).initial_size(1 << 20);
        let pool = Pool::create(dir.path().join("p.pool"), "measure-test", &o).unwrap();
        let area = pool.take_heap(64 * 1024, 64).unwrap();
        for (n, threads) in [(1000u64, 1), (1000, 3), (1, 1), (5, 1)] {
            let items: Vec<u64> = (0..n).collect();
            let st = execute(&split(&items, threads), 8, |&x, _| {
                let off = area + (x % 400) * 128;
                // SAFETY: two words in the heap area taken above, each item its own pair
                // of lines; nothing else references them.
                unsafe {
                    pool.store_u64(off, x);
                    pool.store_u64(off + 64, x);
                }
                pool.flush_off(off, 8);
                Ok(true)
            });
            assert_eq!(st.counters.lines_written, 2 * n, "{n} ops on {threads} threads");
            assert_eq!(st.counters.fences, 0);
        }
        assert!(!counters::exact(), "the loop leaves exact counting off");
    }

    /// Errors are counted and the first one's message kept (the out-of-line path).
    #[test]
    fn execute_tallies_errors() {
        let items: Vec<u64> = (0..100).collect();
        let st = execute(&[&items[..]], 1, |&x, _| match x % 3 {
            0 => Err(pmkv::Error::invalid(format!("bad {x}"))),
            1 => Ok(true),
            _ => Ok(false),
        });
        assert_eq!((st.tally.errors, st.tally.found, st.tally.missed), (34, 33, 33));
        assert_eq!(st.tally.first_error.as_deref(), Some("bad 0"));
    }

    #[test]
    fn split_covers_everything() {
        let v: Vec<u32> = (0..10).collect();
        let parts = split(&v, 3);
        assert_eq!(parts.iter().map(|p| p.len()).sum::<usize>(), 10);
        assert_eq!(parts.concat(), v);
    }
}
