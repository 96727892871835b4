//! Write batches: all or nothing across a crash, through the substrate's batch redo log
//! (`pmkv_substrate::batch_log`; why and what it costs in docs/design/batch-log.md).
//!
//! An atomic batch of two or more operations is logged in one EPallocator object before
//! any of it is applied, then applied with HART's normal writes — [`Hart::put_many`] for
//! each run of puts (group commit: the puts of a run that fall in one ART share one
//! commit fence), [`Hart::delete`] for deletes — and the log is retired. The open after a
//! crash replays every log still in use, after Algorithm 7 has rebuilt the trees. An
//! independent batch (the server's pipelined `SET`s), or one of a single operation, is
//! applied the same way without a log, exactly as before batches were atomic.

use crate::error::Result;
use crate::hart::Hart;
use pmkv_substrate::batch_log::{self, Op};

impl Hart {
    /// Apply `ops` in order. If `atomic` and there are two or more, all or nothing across
    /// a crash (see the module doc); otherwise a crash keeps a prefix of them. Concurrent
    /// readers may see a batch partly applied either way.
    pub fn write_batch(&self, ops: &[Op<'_>], atomic: bool) -> Result<()> {
        if !batch_log::logged(atomic, ops.len()) {
            return self.apply_ops(ops);
        }
        for op in ops {
            if let Op::Put(k, v) = op {
                Self::check_sizes(k, v)?;
            }
        }
        self.pm.check_write()?;
        self.pm.batches.run(&self.pm.alloc, ops, |ops| self.apply_ops(ops))
    }

    /// Apply `ops` in order with HART's normal writes: runs of puts through
    /// [`Hart::put_many`], deletes one by one. A crash keeps a prefix.
    fn apply_ops(&self, ops: &[Op<'_>]) -> Result<()> {
        let mut i = 0;
        while i < ops.len() {
            match ops[i] {
                Op::Delete(k) => {
                    self.delete(k)?;
                    i += 1;
                }
                Op::Put(..) => {
                    let puts: Vec<(&[u8], &[u8])> = ops[i..]
                        .iter()
                        .map_while(|op| match *op {
                            Op::Put(k, v) => Some((k, v)),
                            Op::Delete(_) => None,
                        })
                        .collect();
                    i += puts.len();
                    self.put_many(&puts)?;
                }
            }
        }
        Ok(())
    }

    /// At open, after recovery: finish every batch a crash interrupted after its log was
    /// published (`pending`, found and validated by recovery before it wrote anything):
    /// replayed in full, then the log freed. Returns how many.
    pub(crate) fn finish_batches(&self, pending: Vec<batch_log::Pending>) -> Result<u64> {
        batch_log::finish(&self.pm.alloc, pending, |ops| self.apply_ops(ops))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::hart::Options;
    use pmkv_substrate::{Eviction, Pool, PoolError};
    use std::sync::Arc;

    fn get(h: &Hart, k: &[u8]) -> Option<Vec<u8>> {
        let mut out = None;
        h.get_with(k, &mut |v| out = Some(v.to_vec())).unwrap();
        out
    }

    /// A batch whose apply fails after its log was published: the error is returned, the
    /// pool is poisoned, later writes are refused (a replay at the next open would undo
    /// them), reads go on, `check` reports the log in use, and the next open finishes the
    /// batch: all of it, none of it lost.
    #[test]
    fn a_batch_that_fails_half_way_refuses_writes_and_the_next_open_finishes_it() {
        let sim = pmkv_testutil::sim_opts(1 << 20);
        let h = Hart::open(Arc::new(Pool::create_sim("hart", &sim).unwrap()), Options::default()).unwrap();
        h.put(b"a", b"1").unwrap();
        h.put(b"c", b"gone soon").unwrap();
        let ops = [Op::Put(b"a", b"2"), Op::Put(b"b", b"a value out of line"), Op::Delete(b"c")];
        let r = h.pm.batches.run(&h.pm.alloc, &ops, |ops| {
            h.apply_ops(&ops[..1])?;
            Err(Error::Corrupt("injected after the first operation".into()))
        });
        assert!(matches!(r, Err(Error::Corrupt(_))), "{r:?}");
        assert!(h.pool().is_poisoned());
        for r in [h.put(b"x", b"y"), h.delete(b"a").map(|_| ()), h.write_batch(&ops, true), h.write_batch(&ops, false)]
        {
            assert!(
                matches!(&r, Err(Error::Pool(PoolError::BatchUnfinished(m))) if m.contains("reopen") || m.contains("opened again")),
                "{r:?}"
            );
        }
        assert_eq!(get(&h, b"a").as_deref(), Some(&b"2"[..]), "reads see the part applied");
        let problems = format!("{:?}", h.check().err());
        assert!(problems.contains("write batch log"), "{problems}");
        let img = h.pool().sim().unwrap().image_now(h.pool(), Eviction::None);
        drop(h);
        let h = Hart::open(Arc::new(Pool::from_image(&img, Some("hart"), &sim).unwrap()), Options::default()).unwrap();
        assert_eq!(h.recovery_report().detail_u64("batches_finished"), Some(1));
        assert_eq!(get(&h, b"a").as_deref(), Some(&b"2"[..]));
        assert_eq!(get(&h, b"b").as_deref(), Some(&b"a value out of line"[..]));
        assert_eq!(get(&h, b"c"), None);
        assert_eq!(h.len(), 2);
        h.check().unwrap();
        h.put(b"x", b"y").unwrap();
    }

    /// Batches of 0 or 1 operations and independent ones write no log (no chunk of the
    /// log type is ever made); an atomic one of two does, and leaves none in use.
    #[test]
    fn only_atomic_batches_of_two_or_more_are_logged() {
        let sim = pmkv_testutil::sim_opts(1 << 20);
        let h = Hart::open(Arc::new(Pool::create_sim("hart", &sim).unwrap()), Options::default()).unwrap();
        let log_slots = |h: &Hart| {
            let mut n = 0;
            h.pm.alloc.for_each_slot(batch_log::LOG, |_, _| n += 1);
            n
        };
        let two = [Op::Put(b"k1", b"v"), Op::Put(b"k2", b"v")];
        h.write_batch(&two[..1], true).unwrap();
        h.write_batch(&[], true).unwrap();
        h.write_batch(&two, false).unwrap();
        h.write_batch(&[Op::Delete(b"k1"), Op::Put(b"k3", b"v")], false).unwrap();
        assert_eq!(log_slots(&h), 0, "no log for a single operation, an empty or an independent batch");
        h.write_batch(&[Op::Put(b"k4", b"v"), Op::Delete(b"k2")], true).unwrap();
        assert!(log_slots(&h) > 0, "an atomic batch of two is logged");
        assert!(batch_log::problems(&h.pm.alloc).is_empty(), "and its log retired");
        assert_eq!(get(&h, b"k3").as_deref(), Some(&b"v"[..]));
        assert_eq!(get(&h, b"k2"), None);
        assert_eq!(h.len(), 2);
        h.check().unwrap();
    }
}
