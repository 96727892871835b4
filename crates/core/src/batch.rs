//! Write batches: several puts and deletes in one call.
//!
//! Whether a batch is atomic (all or nothing, for readers and across a crash) is the
//! engine's to say ([`EngineInfo::atomic_batches`](crate::EngineInfo)): an engine that
//! holds one lock over its whole map can make it so cheaply; a persistent index without a
//! multi-operation log applies the operations in order, each durable before the next, so
//! a crash leaves a prefix of the batch. Either way, the store checks every key and value
//! size before the first operation, so a batch is never refused half-way for its sizes.

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

/// An ordered list of writes, applied in order (a later write of a key wins).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<BatchOp>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
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
    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }
    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
    /// Remove every operation, keeping the allocation.
    pub fn clear(&mut self) {
        self.ops.clear();
    }
}

impl FromIterator<BatchOp> for WriteBatch {
    fn from_iter<I: IntoIterator<Item = BatchOp>>(iter: I) -> Self {
        WriteBatch { ops: iter.into_iter().collect() }
    }
}
