//! Write batches: all or nothing across a crash, through the substrate's batch redo log
//! (`pmkv_substrate::batch_log`; why and what it costs in docs/design/batch-log.md).
//!
//! An atomic batch of two or more operations is logged in one EPallocator object before
//! any of it is applied, then applied with the tree's normal lock-free puts and deletes,
//! and the log is retired. The open after a crash replays every log still in use, once
//! the tree is rebuilt. Before the first log of a pool, the superblock gets the
//! [`BATCH_LOGS`] flag, so that builds that know nothing of logs refuse the pool. An
//! independent batch, or one of a single operation, is applied without a log.

use crate::error::Result;
use crate::layout::*;
use crate::leaf::load;
use crate::tree::NbTree;
use pmkv_substrate::batch_log::{self, Op};
use std::sync::atomic::Ordering;

impl NbTree {
    /// Apply `ops` in order. If `atomic` and there are two or more, all or nothing across
    /// a crash (see the module doc); otherwise a crash keeps a prefix of them. Concurrent
    /// readers may see a batch partly applied either way.
    pub fn write_batch(&self, ops: &[Op<'_>], atomic: bool) -> Result<()> {
        if !batch_log::logged(atomic, ops.len()) {
            return self.apply_ops(ops);
        }
        pmkv_core::check_batch_sizes(ops, MAX_KEY, MAX_VALUE)?;
        self.pool.check_writable()?;
        self.batches.check_writes()?;
        self.mark_batch_logs();
        self.batches.run(&self.alloc, ops, |ops| self.apply_ops(ops))
    }

    /// Apply `ops` in order with the tree's normal writes. A crash keeps a prefix.
    fn apply_ops(&self, ops: &[Op<'_>]) -> Result<()> {
        pmkv_core::apply_in_order(ops, |k, v| self.put(k, v).map(drop), |k| self.delete(k))
    }

    /// Set the superblock's [`BATCH_LOGS`] flag, durably, unless it is set. One 8-byte
    /// store of the word that holds the version and the leaf capacity (the flag is not
    /// covered by the superblock's CRC): threads that race here store the same word.
    fn mark_batch_logs(&self) {
        if self.batch_logs.load(Ordering::Acquire) {
            return;
        }
        let word = load(&self.pool, self.sb + SB_VERSION);
        // SAFETY: the superblock's version-and-capacity word, 8-aligned inside the used
        // superblock; nothing else writes it after the pool is formatted.
        unsafe { self.pool.store_u64(self.sb + SB_VERSION, word | BATCH_LOGS as u64) };
        self.pool.persist_off(self.sb + SB_VERSION, 8);
        self.batch_logs.store(true, Ordering::Release);
    }

    /// At open, after recovery: finish every batch a crash interrupted after its log was
    /// published (`pending`, found and validated by recovery before it wrote anything):
    /// replayed in full, then the log freed. Returns how many.
    pub(crate) fn finish_batches(&self, pending: Vec<batch_log::Pending>) -> Result<u64> {
        batch_log::finish(&self.alloc, pending, |ops| self.apply_ops(ops))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use pmkv_substrate::{Eviction, Pool, PoolError};
    use std::sync::Arc;

    fn get(t: &NbTree, k: &[u8]) -> Option<Vec<u8>> {
        let mut v = None;
        t.get_with(k, &mut |b| v = Some(b.to_vec())).unwrap();
        v
    }

    fn version_word(t: &NbTree) -> u32 {
        load(&t.pool, t.sb + SB_VERSION) as u32
    }

    /// New pools carry the batch-log flag; a pool without it gets it from its first
    /// logged batch only (not from plain writes, nor from batches that need no log), and
    /// a version word with a bit this build does not know is refused.
    #[test]
    fn the_batch_log_flag_is_set_before_the_first_log_and_unknown_bits_are_refused() {
        let sim = pmkv_testutil::sim_opts(1 << 20);
        let t = NbTree::open(Arc::new(Pool::create_sim("nbtree", &sim).unwrap())).unwrap();
        assert_eq!(version_word(&t), SUPER_VERSION | BATCH_LOGS, "a new pool");
        // Clear the flag, as in a pool an older build made.
        // SAFETY: the superblock's version word; nothing else writes it.
        unsafe { t.pool.store_u64(t.sb + SB_VERSION, load(&t.pool, t.sb + SB_VERSION) & !(BATCH_LOGS as u64)) };
        t.pool.persist_off(t.sb + SB_VERSION, 8);
        let img = t.pool.sim().unwrap().image_now(&t.pool, Eviction::None);
        drop(t);
        let open = |img: &[u8]| NbTree::open(Arc::new(Pool::from_image(img, Some("nbtree"), &sim).unwrap()));
        let t = open(&img).unwrap();
        t.put(b"plain", b"1").unwrap();
        t.write_batch(&[Op::Put(b"one", b"1")], true).unwrap();
        t.write_batch(&[Op::Put(b"i1", b"1"), Op::Put(b"i2", b"2")], false).unwrap();
        assert_eq!(version_word(&t), SUPER_VERSION, "no log yet, no flag");
        t.write_batch(&[Op::Put(b"a1", b"1"), Op::Delete(b"i1")], true).unwrap();
        assert_eq!(version_word(&t), SUPER_VERSION | BATCH_LOGS, "flagged by the first log");
        t.check().unwrap();
        let mut img = t.pool.sim().unwrap().image_now(&t.pool, Eviction::None);
        let sb = t.sb as usize;
        drop(t);
        let t = open(&img).unwrap();
        assert_eq!(get(&t, b"a1").as_deref(), Some(&b"1"[..]));
        assert_eq!(get(&t, b"i1"), None);
        drop(t);
        img[sb + SB_VERSION as usize + 2] |= 2; // bit 17: unknown
        let r = open(&img);
        let word = format!("{:#x}", SUPER_VERSION | BATCH_LOGS | 1 << 17);
        assert!(matches!(&r, Err(Error::Version(m)) if m.contains(&word)), "{:?}", r.err());
    }

    /// A batch whose apply fails after its log was published: later writes are refused,
    /// the pool is poisoned, and the next open finishes the batch.
    #[test]
    fn a_batch_that_fails_half_way_refuses_writes_and_the_next_open_finishes_it() {
        let sim = pmkv_testutil::sim_opts(1 << 20);
        let t = NbTree::open(Arc::new(Pool::create_sim("nbtree", &sim).unwrap())).unwrap();
        t.put(b"a", b"1").unwrap();
        t.put(b"c", b"gone soon").unwrap();
        let ops = [Op::Put(b"a", b"2"), Op::Put(b"b", b"a value longer than one word"), Op::Delete(b"c")];
        let r = t.batches.run(&t.alloc, &ops, |ops| {
            t.apply_ops(&ops[..1])?;
            Err(Error::Corrupt("injected after the first operation".into()))
        });
        assert!(matches!(r, Err(Error::Corrupt(_))), "{r:?}");
        assert!(t.pool.is_poisoned());
        for r in [t.put(b"x", b"y").map(|_| ()), t.delete(b"a").map(|_| ()), t.write_batch(&ops, true)] {
            assert!(matches!(&r, Err(Error::Pool(PoolError::BatchUnfinished(_)))), "{r:?}");
        }
        assert_eq!(get(&t, b"a").as_deref(), Some(&b"2"[..]));
        let img = t.pool.sim().unwrap().image_now(&t.pool, Eviction::None);
        drop(t);
        let t = NbTree::open(Arc::new(Pool::from_image(&img, Some("nbtree"), &sim).unwrap())).unwrap();
        assert_eq!(t.recovery_report().detail_u64("batches_finished"), Some(1));
        assert_eq!(get(&t, b"b").as_deref(), Some(&b"a value longer than one word"[..]));
        assert_eq!(get(&t, b"c"), None);
        assert_eq!(t.len(), 2);
        t.check().unwrap();
    }
}
