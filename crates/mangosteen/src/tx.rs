//! [`Tx`]: a batch in progress, as each request of it sees it. A module of its own because
//! flat combining hands it to the requests it runs and the runtime makes it; with it in
//! `runtime`, `runtime` and `flat_combining` imported each other.

use crate::dedup::DedupSet;
use crate::error::{Error, Result};
use std::ptr::NonNull;

/// Per-write logging ([`crate::Log::PerWrite`]): the runtime's log state for one batch,
/// which logs each write as it is made. A trait so that this module need not name the
/// runtime.
pub(crate) trait EagerLog {
    /// Log the write of `len` bytes at `off` as the DRAM copy holds it now.
    fn log(&mut self, off: u64, len: usize);
    /// Log the write the hooks reported last (its store has been made by now).
    fn settle(&mut self);
}

/// A batch in progress: writes go to the DRAM copy and are captured for the log.
pub struct Tx<'a> {
    dram: &'a mut [u8],
    /// The batch's set. A raw pointer because compiler capture's hooks record into the
    /// same set while the batch runs (on this thread, never during a `Tx` call): each
    /// side makes a short-lived `&mut` from it ([`Tx::dedup`], `compiler_capture`).
    dedup: *mut DedupSet,
    /// Per-write logging: the batch's log state (`None` when batched). Set by the runtime.
    pub(crate) eager: Option<NonNull<dyn EagerLog>>,
    /// A request of the batch called [`Tx::abort`]: the batch is rolled back.
    pub(crate) aborted: bool,
    _set: std::marker::PhantomData<&'a mut DedupSet>,
}

impl<'a> Tx<'a> {
    /// Write `bytes` at region offset `off` (captured).
    pub fn write(&mut self, off: u64, bytes: &[u8]) -> Result<()> {
        let r = range(off, bytes.len(), self.dram.len() as u64)?;
        self.dram[r].copy_from_slice(bytes);
        self.captured(off, bytes.len());
        Ok(())
    }

    /// The region, for reading and for writing in place; every byte written this way must
    /// be [`record`](Tx::record)ed (the explicit capture API that part 2's compiler
    /// instrumentation will call).
    pub fn region(&mut self) -> &mut [u8] {
        self.dram
    }

    /// Capture a write of `len` bytes at `off` made through [`Tx::region`].
    pub fn record(&mut self, off: u64, len: usize) -> Result<()> {
        range(off, len, self.dram.len() as u64)?;
        self.captured(off, len);
        Ok(())
    }

    /// Give up the request: every write of the batch it is in is undone (the region is
    /// put back as the last committed batch left it) and nothing of the batch is logged.
    /// [`Mangosteen::batch`] then returns [`Error::Aborted`] to this request, and
    /// [`Error::RolledBack`] to the other requests flat combining put in the same batch,
    /// none of whose writes was applied either (run them again: [`Frontend`] does). For a
    /// request that cannot finish (the region's heap is full, a C++ exception) and must
    /// not leave half its writes behind. Writes the capture did not see cannot be undone,
    /// except in verify mode (the region is restored whole from its shadow).
    ///
    /// [`Frontend`]: crate::Frontend
    pub fn abort(&mut self) {
        self.aborted = true;
    }

    /// Whether a request of this batch called [`Tx::abort`].
    pub fn is_aborted(&self) -> bool {
        self.aborted
    }

    /// A write made: into the batch's set, or (per-write logging) into the log at once.
    fn captured(&mut self, off: u64, len: usize) {
        // What recording allocates is the runtime's, not the application's, inside a
        // split-heap request too (see `SplitAlloc::outside`).
        crate::SplitAlloc::outside(|| {
            if let Some(mut e) = self.eager {
                // SAFETY: `eager` is the batch's, alive for 'a; the hooks, its only other
                // user, run on this thread and never inside this call.
                let e = unsafe { e.as_mut() };
                e.settle();
                e.log(off, len);
            } else {
                self.dedup().record(off, len);
            }
        })
    }

    fn dedup(&mut self) -> &mut DedupSet {
        // SAFETY: the set outlives 'a (`_set`); the hooks, its only other user, run on
        // this thread and never inside this borrow (it ends before the call returns).
        unsafe { &mut *self.dedup }
    }

    pub(crate) fn new(dram: &'a mut [u8], dedup: *mut DedupSet) -> Tx<'a> {
        Tx { dram, dedup, eager: None, aborted: false, _set: std::marker::PhantomData }
    }
}

#[cfg(all(test, shuttle))]
impl<'a> Tx<'a> {
    /// A transaction over plain buffers, for the combining model test.
    pub(crate) fn scratch(dram: &'a mut [u8], dedup: &'a mut DedupSet) -> Tx<'a> {
        Tx::new(dram, dedup)
    }
}

fn range(off: u64, len: usize, size: u64) -> Result<std::ops::Range<usize>> {
    match off.checked_add(len as u64) {
        Some(end) if end <= size => Ok(off as usize..end as usize),
        _ => Err(Error::OutOfRegion { off, len, size }),
    }
}
