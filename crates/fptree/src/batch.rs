//! Write batches: all or nothing across a crash, through the substrate's batch redo log
//! (`pmkv_substrate::batch_log`; docs/design/batch-log.md). Not in the paper, which has
//! no batches: HART and NBTree have them in pmkv, so FPTree does too, for a like-for-like
//! comparison of the server's group commits.
//!
//! An atomic batch of two or more operations is logged in one EPallocator object (type
//! `batch_log::LOG`) before any of it is applied, then applied with the tree's normal
//! puts and deletes, and the log is freed. The open after a crash replays every log still
//! in use once the tree is rebuilt (blind writes: replaying twice gives the same state).
//! An independent batch, or one of a single operation, is applied without a log.

use crate::error::Result;
use crate::layout::{MAX_KEY, MAX_VALUE};
use crate::tree::FpTree;
use pmkv_substrate::batch_log::{self, Op};

impl FpTree {
    /// Apply `ops` in order. If `atomic` and there are two or more, all or nothing across
    /// a crash (see the module doc); otherwise a crash keeps a prefix of them. Concurrent
    /// readers may see a batch partly applied either way.
    pub fn write_batch(&self, ops: &[Op<'_>], atomic: bool) -> Result<()> {
        if !batch_log::logged(atomic, ops.len()) {
            return self.apply_ops(ops);
        }
        pmkv_core::check_batch_sizes(ops, MAX_KEY, MAX_VALUE)?;
        self.pool.check_writable()?;
        self.batches.run(&self.alloc, ops, |ops| self.apply_ops(ops))
    }

    /// Apply `ops` in order with the tree's normal writes. A crash keeps a prefix.
    fn apply_ops(&self, ops: &[Op<'_>]) -> Result<()> {
        pmkv_core::apply_in_order(ops, |k, v| self.put(k, v), |k| self.delete(k))
    }

    /// At open, after the rebuild: finish every batch a crash interrupted after its log
    /// was published (`pending`, validated before recovery wrote anything). Returns how
    /// many.
    pub(crate) fn finish_batches(&self, pending: Vec<batch_log::Pending>) -> Result<u64> {
        batch_log::finish(&self.alloc, pending, |ops| self.apply_ops(ops))
    }
}
