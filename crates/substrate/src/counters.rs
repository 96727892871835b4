//! Per-thread persistence counters (SPEC P4).
//!
//! Benchmarks explain performance in the units of NBTree's Table 1: flushes, fences and PM
//! cache lines written and read per operation. Counting is thread-local (plain `Cell`s, no
//! atomics) so that it costs a few instructions on the hot path and never causes
//! cache-line ping-pong between threads. A benchmark worker takes a snapshot before and
//! after its measured loop and reports the difference.
//!
//! ## Lines written: cheap by default, exact on request
//!
//! By default `lines_written` counts the lines in every flushed range (what an engine asks
//! to make durable, in every mode): a thread-local add per flush, nothing per store. That
//! misses the lines an engine stores to but does not flush in its mode (in `eadr`
//! FAST&FAIR's in-place swap and shifts) and counts a line flushed twice by one operation
//! twice.
//!
//! *Exact* counting, switched on per thread with [`set_exact`] (the benchmark harness's
//! counting samples and the conformance counter test do), counts instead the distinct
//! 64-byte lines an *operation* dirtied, whether or not the mode flushes them. A line is
//! noted when it is stored through [`crate::Pool::store_u64`], [`crate::Pool::cas_u64`] or
//! [`crate::Pool::store_u32`] (and the allocator's chunk-header swaps), when an engine
//! reports a bulk write with [`crate::Pool::note_write`], and when it is flushed (a flush
//! names a line the engine wrote: this is what sees the writes of engines that store
//! through raw pointers and flush in every mode). The operation boundary is [`begin_op`]:
//! whoever runs operations one at a time (the `pmkv` API, the benchmark loops) calls it
//! before each; without it the window runs on, and a window that fills [`DIRTY_CAP`] lines
//! starts afresh (a large operation, a split, may then count a line again: an over-count,
//! never a miss).
//!
//! It is opt-in because it is not free: a hash-set lookup per line stored to cost up to
//! +17 % instructions on an NBTree update, on every user's hot path. Switched off, each
//! store and `begin_op` pay one thread-local flag test (docs/design/substrate.md gives the
//! measured figures both ways).
//!
//! The dedup is a per-thread hash set of the window's lines, emptied by bumping a
//! generation, and looked up only when a store moves to a different line than the
//! previous one: a run of stores into one line (a shift, a record) costs a thread-local
//! load and a compare per store.

use std::cell::Cell;

/// A snapshot of one thread's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Cache-line flush instructions issued (clwb/clflushopt/clflush); 0 in `eadr` and `none`.
    pub flushes: u64,
    /// Store fences issued (0 in `none`).
    pub fences: u64,
    /// PM cache lines written, in every mode. By default the lines of every flushed range
    /// (in `eadr` the lines an engine asks to make durable though no flush is issued);
    /// with [`set_exact`] on, the distinct lines each operation dirtied, stored to or
    /// flushed (see the module doc).
    pub lines_written: u64,
    /// PM cache lines an engine reported reading (engines call [`crate::Pool::note_read_at`]).
    pub lines_read: u64,
    /// Of those, the lines the last-level cache model missed, when reads are charged by it
    /// ([`crate::ReadModel::Llc`] with a read latency above DRAM's); 0 otherwise.
    pub lines_missed: u64,
}

impl Counters {
    /// Counters accumulated since `earlier`.
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            flushes: self.flushes - earlier.flushes,
            fences: self.fences - earlier.fences,
            lines_written: self.lines_written - earlier.lines_written,
            lines_read: self.lines_read - earlier.lines_read,
            lines_missed: self.lines_missed - earlier.lines_missed,
        }
    }

    /// Sum of two snapshots (used to aggregate the workers of a benchmark).
    pub fn add(&self, other: &Counters) -> Counters {
        Counters {
            flushes: self.flushes + other.flushes,
            fences: self.fences + other.fences,
            lines_written: self.lines_written + other.lines_written,
            lines_read: self.lines_read + other.lines_read,
            lines_missed: self.lines_missed + other.lines_missed,
        }
    }
}

thread_local! {
    static FLUSHES: Cell<u64> = const { Cell::new(0) };
    static FENCES: Cell<u64> = const { Cell::new(0) };
    static LINES_WRITTEN: Cell<u64> = const { Cell::new(0) };
    static LINES_READ: Cell<u64> = const { Cell::new(0) };
    static LINES_MISSED: Cell<u64> = const { Cell::new(0) };
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
/// Lines one operation's dedup window holds before it starts afresh: more than any
/// individual operation of the engines dirties outside a structural modification (a
/// FAST&FAIR shift of a whole 1 KiB node dirties 16, an NBTree split two 2 KiB blocks
/// and more).
pub const DIRTY_CAP: usize = 192;

/// Slots of the window's hash set: a power of two, a third of them left empty so that
/// a probe ends quickly.
const SLOTS: usize = 256;

/// Bits of a slot that hold the line number; the bits above hold the operation's
/// generation. x86-64 user addresses have 47 bits, so line numbers have 41.
const LINE_BITS: u32 = 42;
const LINE_MASK: u64 = (1 << LINE_BITS) - 1;

/// The current operation's dirtied lines: an open-addressing hash set whose slots carry
/// the generation of the operation that filled them, so that [`begin_op`] empties it by
/// bumping the generation (two stores, whatever the set held).
struct Dirty {
    /// The line last noted: a run of stores into one line skips the set.
    last: Cell<u64>,
    /// The current generation (in the slots' high bits), never 0 (slot value 0: never used).
    generation: Cell<u64>,
    /// How many lines the set holds in this generation.
    len: Cell<usize>,
    slots: [Cell<u64>; SLOTS],
}

thread_local! {
    static DIRTY: Dirty = const {
        Dirty {
            last: Cell::new(u64::MAX),
            generation: Cell::new(1 << LINE_BITS),
            len: Cell::new(0),
            slots: [const { Cell::new(0) }; SLOTS],
        }
    };
}

thread_local! {
    /// Whether this thread counts `lines_written` exactly (see the module doc).
    static EXACT: Cell<bool> = const { Cell::new(false) };
}

/// Switch exact counting of lines written on or off for the calling thread; returns the
/// previous setting. Switching on starts a new operation ([`begin_op`]).
pub fn set_exact(on: bool) -> bool {
    let was = EXACT.replace(on);
    if on {
        begin_op();
    }
    was
}

/// Whether the calling thread counts lines written exactly ([`set_exact`]).
#[inline]
pub fn exact() -> bool {
    EXACT.get()
}

/// Start a new operation: with exact counting on, lines it dirties count again even if
/// the previous operation dirtied them too. Cheap (a flag test when off, a few
/// thread-local stores when on); call it before every operation whose counters are read.
#[inline]
pub fn begin_op() {
    if EXACT.get() {
        new_window();
    }
}

/// [`begin_op`]'s work with exact counting on: empty the window. Out of line, as is
/// [`dirty`]: inlined, the exact path's code grew the engines' inlined read and write
/// paths enough to change the compiler's inlining there (+35 instructions on a HART
/// search with counting off).
#[inline(never)]
fn new_window() {
    DIRTY.with(|d| {
        d.last.set(u64::MAX);
        d.len.set(0);
        let g = d.generation.get().wrapping_add(1 << LINE_BITS);
        if g == 0 {
            restart(d);
        } else {
            d.generation.set(g);
        }
    });
}

/// After the generations wrapped (every 2^22 operations): clear every slot, so that no
/// slot of an old operation looks current.
#[cold]
fn restart(d: &Dirty) {
    for s in &d.slots {
        s.set(0);
    }
    d.generation.set(1 << LINE_BITS);
}

/// Note that `[addr, addr+len)` (virtual addresses of PM) was flushed (or, in `eadr` and
/// `none`, would have been): by default its lines count, with exact counting on those
/// the current operation has not dirtied yet.
#[inline]
pub(crate) fn note_flushed(addr: usize, len: usize) {
    if EXACT.get() {
        dirty(addr, len);
    } else {
        bump(&LINES_WRITTEN, crate::persist::lines_in(addr, len));
    }
}

/// Note that `[addr, addr+len)` (virtual addresses of PM) was stored to: counted only with
/// exact counting on, as the lines the current operation has not dirtied yet.
#[inline]
pub(crate) fn note_dirty(addr: usize, len: usize) {
    if EXACT.get() {
        dirty(addr, len);
    }
}

/// The exact count of [`note_dirty`] and [`note_flushed`] (out of line: see
/// [`new_window`]).
#[inline(never)]
fn dirty(addr: usize, len: usize) {
    if len == 0 {
        return;
    }
    let first = (addr / crate::LINE) as u64;
    let last = ((addr + len - 1) / crate::LINE) as u64;
    DIRTY.with(|d| {
        if first == last && d.last.get() == first {
            return;
        }
        note_lines(d, first, last);
    });
}

/// The slow path of [`note_dirty`]: look each line of `first..=last` up in the set.
#[inline(never)]
fn note_lines(d: &Dirty, first: u64, last: u64) {
    let mut new = 0u64;
    for line in first..=last {
        let mut want = d.generation.get() | (line & LINE_MASK);
        let home = (line.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as usize;
        let mut i = home;
        loop {
            let v = d.slots[i].get();
            if v == want {
                break;
            }
            if v & !LINE_MASK != d.generation.get() {
                // Empty in this generation: the line is new.
                if d.len.get() == DIRTY_CAP {
                    // The window is full: start afresh (from here on an operation may
                    // count a line twice, never miss one), the line at its home slot.
                    new_window();
                    want = d.generation.get() | (line & LINE_MASK);
                    i = home;
                }
                d.slots[i].set(want);
                d.len.set(d.len.get() + 1);
                new += 1;
                break;
            }
            i = (i + 1) % SLOTS;
        }
    }
    d.last.set(last);
    bump(&LINES_WRITTEN, new);
}

#[inline]
pub(crate) fn add_lines_read(n: u64) {
    bump(&LINES_READ, n);
}

pub(crate) fn add_lines_missed(n: u64) {
    bump(&LINES_MISSED, n);
}

/// The calling thread's counters since it started.
pub fn snapshot() -> Counters {
    Counters {
        flushes: FLUSHES.with(Cell::get),
        fences: FENCES.with(Cell::get),
        lines_written: LINES_WRITTEN.with(Cell::get),
        lines_read: LINES_READ.with(Cell::get),
        lines_missed: LINES_MISSED.with(Cell::get),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written() -> u64 {
        snapshot().lines_written
    }

    #[test]
    fn a_window_counts_each_line_once_and_restarts_when_full() {
        set_exact(true);
        let w0 = written();
        // A run of stores into one line, then a range over it and the next two lines.
        for i in 0..8 {
            note_dirty(64 * 10 + 8 * i, 8);
        }
        note_dirty(64 * 10 + 60, 130);
        assert_eq!(written() - w0, 3);
        // Back to a line of the window after other lines: not counted again.
        note_dirty(64 * 11, 8);
        assert_eq!(written() - w0, 3);
        // Fill the window; the next new line starts it afresh, so line 10 counts again.
        for l in 0..DIRTY_CAP - 3 {
            note_dirty(64 * (1000 + l), 8);
        }
        assert_eq!(written() - w0, DIRTY_CAP as u64);
        note_dirty(64 * 5000, 8);
        note_dirty(64 * 10, 8);
        assert_eq!(written() - w0, DIRTY_CAP as u64 + 2);
        // A new operation counts a line of the previous one again; empty ranges nothing.
        begin_op();
        note_dirty(64 * 10, 8);
        note_dirty(64 * 10, 0);
        assert_eq!(written() - w0, DIRTY_CAP as u64 + 3);
    }

    /// Off (the default): flushed ranges count every line they overlap, each time, and
    /// stores count nothing; the old, cheap count.
    #[test]
    fn off_counts_flushed_lines_only() {
        set_exact(false);
        begin_op();
        let w0 = written();
        note_dirty(64 * 10, 8);
        note_flushed(64 * 10 + 40, 100);
        note_flushed(64 * 10, 8);
        assert_eq!(written() - w0, 4);
        // Switched on, the same sequence counts the two distinct lines.
        assert!(!set_exact(true));
        let w0 = written();
        note_dirty(64 * 10, 8);
        note_flushed(64 * 10 + 40, 100);
        note_flushed(64 * 10, 8);
        assert_eq!(written() - w0, 3);
        assert!(set_exact(false));
    }

    /// Against a plain set, on random operations of random ranges clustered like an
    /// engine's (a few nodes, runs of stores into one line), none above the window's size.
    #[test]
    fn counts_what_a_plain_set_counts() {
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let base = 0x7f00_0000_0000usize;
        set_exact(true);
        for _ in 0..2000 {
            begin_op();
            let w0 = written();
            let mut set = std::collections::HashSet::new();
            for _ in 0..(next() % 40) {
                let node = (next() % 8) as usize * 4096;
                let at = base + node + (next() % 2048) as usize;
                let len = [8, 8, 8, 64, 200, 1024][(next() % 6) as usize];
                note_dirty(at, len);
                for l in at / 64..=(at + len - 1) / 64 {
                    set.insert(l);
                }
                if set.len() > DIRTY_CAP {
                    break;
                }
            }
            let got = written() - w0;
            if set.len() <= DIRTY_CAP {
                assert_eq!(got, set.len() as u64);
            } else {
                assert!(got >= set.len() as u64);
            }
        }
    }
}
