//! Per-thread persistence counters (SPEC P4).
//!
//! Benchmarks explain performance in the units of NBTree's Table 1: flushes, fences and PM
//! cache lines written and read per operation. Counting is thread-local (plain `Cell`s, no
//! atomics) so that it costs a few instructions on the hot path and never causes
//! cache-line ping-pong between threads. A benchmark worker takes a snapshot before and
//! after its measured loop and reports the difference.

use std::cell::Cell;

/// A snapshot of one thread's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Cache-line flush instructions issued (clwb/clflushopt/clflush); 0 in `eadr` and `none`.
    pub flushes: u64,
    /// Store fences issued (0 in `none`).
    pub fences: u64,
    /// PM cache lines an engine asked to make durable, in every mode. In `eadr` this is the
    /// number of lines written to PM even though no flush instruction is needed.
    pub lines_written: u64,
    /// PM cache lines an engine reported reading (engines call [`crate::Pool::note_read`]).
    pub lines_read: u64,
}

impl Counters {
    /// Counters accumulated since `earlier`.
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            flushes: self.flushes - earlier.flushes,
            fences: self.fences - earlier.fences,
            lines_written: self.lines_written - earlier.lines_written,
            lines_read: self.lines_read - earlier.lines_read,
        }
    }

    /// Sum of two snapshots (used to aggregate the workers of a benchmark).
    pub fn add(&self, other: &Counters) -> Counters {
        Counters {
            flushes: self.flushes + other.flushes,
            fences: self.fences + other.fences,
            lines_written: self.lines_written + other.lines_written,
            lines_read: self.lines_read + other.lines_read,
        }
    }
}

thread_local! {
    static FLUSHES: Cell<u64> = const { Cell::new(0) };
    static FENCES: Cell<u64> = const { Cell::new(0) };
    static LINES_WRITTEN: Cell<u64> = const { Cell::new(0) };
    static LINES_READ: Cell<u64> = const { Cell::new(0) };
}

#[inline]
fn bump(c: &'static std::thread::LocalKey<Cell<u64>>, n: u64) {
    c.with(|v| v.set(v.get().wrapping_add(n)));
}

#[inline]
pub(crate) fn add_flushes(n: u64) {
    bump(&FLUSHES, n);
}
#[inline]
pub(crate) fn add_fence() {
    bump(&FENCES, 1);
}
#[inline]
pub(crate) fn add_lines_written(n: u64) {
    bump(&LINES_WRITTEN, n);
}
#[inline]
pub(crate) fn add_lines_read(n: u64) {
    bump(&LINES_READ, n);
}

/// The calling thread's counters since it started.
pub fn snapshot() -> Counters {
    Counters {
        flushes: FLUSHES.with(Cell::get),
        fences: FENCES.with(Cell::get),
        lines_written: LINES_WRITTEN.with(Cell::get),
        lines_read: LINES_READ.with(Cell::get),
    }
}
