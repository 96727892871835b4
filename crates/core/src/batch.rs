//! Write batches: several puts and deletes in one call.
//!
//! **What an atomic batch promises** (the default; see [`WriteBatch::independent`] for
//! the other kind) depends on the engine, which says it in
//! [`EngineInfo::atomic_batches`](crate::EngineInfo):
//!
//! * `atomic_batches = true` — **all or nothing across a crash**: after a crash (or a
//!   kill, or a panic inside the engine) the next open holds either none of the batch's
//!   writes or all of them, never a part. Once `write` has returned `Ok`, all of them are
//!   durable. This is *not* isolation from concurrent readers and writers unless the
//!   engine says so below: HART and NBTree log the batch and then apply it in place, one
//!   operation after the other, so a reader running meanwhile can see some of its writes
//!   and not others, and a concurrent write of one of its keys can be overwritten by it
//!   (also by the replay that finishes it after a crash: an unfinished batch counts as
//!   applied after every write that raced with it). Front ends that need isolation (the
//!   server's `MULTI`/`EXEC`) lock the keys themselves. Mangosteen (one combiner applies
//!   the whole batch) and the volatile engine (one lock over its map) are atomic for
//!   readers too.
//! * `atomic_batches = false` — the operations are applied in order, each durable before
//!   the next, so a crash leaves a prefix of the batch.
//!
//! Either way, the store checks every key and value size before the first operation, so
//! a batch is never refused half-way for its sizes; and a batch is applied in order (a
//! later write of a key wins).

/// One operation of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchOp {
    /// Insert or replace.
    Put(Vec<u8>, Vec<u8>),
    /// Remove, if present.
    Delete(Vec<u8>),
}

impl BatchOp {
    /// The key the operation writes.
    pub fn key(&self) -> &[u8] {
        match self {
            BatchOp::Put(k, _) | BatchOp::Delete(k) => k,
        }
    }
}

/// An ordered list of writes, applied in order (a later write of a key wins). Atomic
/// unless made with [`WriteBatch::independent`] (see the module doc).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<BatchOp>,
    /// The operations are independent writes grouped only to share their persists.
    independent: bool,
}

impl WriteBatch {
    /// An empty atomic batch: all or nothing across a crash on an engine that declares
    /// `atomic_batches`.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }
    /// An empty batch of *independent* writes: grouped to share their persists (group
    /// commit), with no promise that they stand or fall together. A crash may keep any
    /// prefix of it on every engine, and an engine need not pay for atomicity: HART and
    /// NBTree skip their batch log, so such a batch costs what the same writes cost
    /// alone, less the fences they share. For writes that are separate requests anyway,
    /// such as the server's pipelined `SET`s.
    pub fn independent() -> WriteBatch {
        WriteBatch { ops: Vec::new(), independent: true }
    }
    /// Whether the batch asks to be all or nothing (made with [`WriteBatch::new`] or
    /// collected from an iterator), as opposed to [`WriteBatch::independent`].
    pub fn is_atomic(&self) -> bool {
        !self.independent
    }
    /// Add an insert-or-replace.
    pub fn put(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> &mut Self {
        self.ops.push(BatchOp::Put(key.into(), value.into()));
        self
    }
    /// Add a delete.
    pub fn delete(&mut self, key: impl Into<Vec<u8>>) -> &mut Self {
        self.ops.push(BatchOp::Delete(key.into()));
        self
    }
    /// The operations, in order.
    pub fn ops(&self) -> &[BatchOp] {
        &self.ops
    }

    /// The operations as the substrate's batch log takes them (borrowed, in order): what
    /// an engine's `write_batch` hands its own batch code.
    pub fn log_ops(&self) -> Vec<pmkv_substrate::batch_log::Op<'_>> {
        use pmkv_substrate::batch_log::Op;
        self.ops
            .iter()
            .map(|op| match op {
                BatchOp::Put(k, v) => Op::Put(k, v),
                BatchOp::Delete(k) => Op::Delete(k),
            })
            .collect()
    }
    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }
    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
    /// Remove every operation, keeping the allocation (and the kind of batch).
    pub fn clear(&mut self) {
        self.ops.clear();
    }
}

/// Collects an atomic batch.
impl FromIterator<BatchOp> for WriteBatch {
    fn from_iter<I: IntoIterator<Item = BatchOp>>(iter: I) -> Self {
        WriteBatch { ops: iter.into_iter().collect(), independent: false }
    }
}

/// Apply `ops` in order with `put` and `delete`, stopping at the first error: a batch
/// without a log (a crash keeps a prefix), and what a batch log replays.
pub fn apply_in_order<E>(
    ops: &[pmkv_substrate::batch_log::Op<'_>],
    mut put: impl FnMut(&[u8], &[u8]) -> std::result::Result<(), E>,
    mut delete: impl FnMut(&[u8]) -> std::result::Result<bool, E>,
) -> std::result::Result<(), E> {
    ops.iter().try_for_each(|op| match *op {
        pmkv_substrate::batch_log::Op::Put(k, v) => put(k, v),
        pmkv_substrate::batch_log::Op::Delete(k) => delete(k).map(drop),
    })
}
