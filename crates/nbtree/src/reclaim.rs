//! Deferred freeing of PM objects (SPEC N4: old leaves reclaimed only when no thread can
//! still see them).
//!
//! A block replaced by an SMO, or a value or key object released by an update or delete,
//! may still be read by threads that reached it before: it is *retired* into
//! crossbeam-epoch, which runs the deferred push onto `ready` only after every thread
//! pinned at retirement has unpinned; [`Reclaimer::collect`] frees what is ready.
//! Objects still waiting when the tree closes are not freed then (crossbeam keeps
//! deferred functions in per-thread bags, so a close cannot wait for them); the close
//! records that in the superblock and the next open sweeps them, as after a crash.

use crossbeam_epoch::Guard;
use crossbeam_queue::SegQueue;
use pmkv_substrate::epalloc::EpAlloc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// PM objects waiting for their grace period.
#[derive(Default)]
pub(crate) struct Reclaimer {
    ready: Arc<SegQueue<u64>>,
    /// Retired and not yet freed.
    pending: Arc<AtomicU64>,
}

impl Reclaimer {
    /// Free `off` once every thread pinned now has unpinned.
    pub(crate) fn retire(&self, off: u64, g: &Guard) {
        self.pending.fetch_add(1, Ordering::AcqRel);
        let q = self.ready.clone();
        g.defer(move || q.push(off));
    }

    /// Free every retired object whose grace period has passed.
    pub(crate) fn collect(&self, alloc: &EpAlloc) {
        while let Some(off) = self.ready.pop() {
            alloc.free(off);
            self.pending.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Objects ready to be freed.
    pub(crate) fn ready_len(&self) -> usize {
        self.ready.len()
    }

    /// Retired objects not freed yet.
    pub(crate) fn pending(&self) -> u64 {
        self.pending.load(Ordering::Acquire)
    }
}
