//! Fault injection for tests (cargo feature `fault-injection`, off by default).
//!
//! The crash simulator (`crash_sim`) explores crash *images* of simulated pools. Some
//! properties need a real file pool and a real failure instead: that a panic inside an
//! engine's write leaves the pool marked unclean, that the next open of the *file* runs
//! recovery. [`Pool::set_fault_hook`](crate::Pool::set_fault_hook) installs a function called at every flush and
//! every fence of one pool (after the simulator's own hook, if any), which may panic.
//!
//! A typical test installs a hook that panics at point `k`, runs one engine write under
//! `catch_unwind` with the engine (and so the pool) dropped inside the closure, reopens
//! the file and checks that it was not marked clean and that recovery restores a state
//! from before or after the write; then repeats with `k + 1` until a write passes
//! without reaching point `k`. `tests/fault_injection.rs` does this for EPallocator's
//! chunk recycling.
//!
//! The hook is not called for the clean-flag write of a pool's drop (or `close`): the
//! drop removes it first. Without the feature none of this is compiled: no field in
//! [`Pool`](crate::Pool), no call in the flush and fence paths.

use crate::crash_sim::PointKind;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where a fault hook is being called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultPoint {
    /// A flush or a fence.
    pub kind: PointKind,
    /// Running number of the points of this pool since the hook was installed (from 1).
    pub index: u64,
}

/// A fault hook.
pub type FaultHook = Box<dyn Fn(FaultPoint) + Send + Sync>;

/// The hook slot of one pool.
#[derive(Default)]
pub(crate) struct FaultSlot {
    hook: RwLock<Option<FaultHook>>,
    points: AtomicU64,
}

impl FaultSlot {
    #[inline]
    pub(crate) fn fire(&self, kind: PointKind) {
        let g = self.hook.read();
        if let Some(h) = g.as_ref() {
            let index = self.points.fetch_add(1, Ordering::Relaxed) + 1;
            h(FaultPoint { kind, index });
        }
    }

    /// Install `hook` and count points from 1 again (`Pool::set_fault_hook`).
    pub(crate) fn set(&self, hook: FaultHook) {
        self.points.store(0, Ordering::Relaxed);
        *self.hook.write() = Some(hook);
    }

    /// Remove the hook (`Pool::clear_fault_hook`).
    pub(crate) fn clear(&self) {
        *self.hook.write() = None;
    }
}
