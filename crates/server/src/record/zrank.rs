//! Sorted sets' rank indexes: a DRAM order-statistic tree per sorted set that was asked
//! for a rank, so that ZRANK, ZREVRANK, ZRANGE by rank and ZREMRANGEBYRANK cost
//! O(log n) instead of a walk of the score index records (the engines keep no subtree
//! counts). docs/design/server-types.md ("Ranks") says why and what it costs.
//!
//! An index is a *mirror* of one key's score index records (`… 0x01 enc(score) member`,
//! [`super::zset`]): it holds each record's suffix `enc(score) member`, whose byte order
//! is the records' order, so an element's position in the tree is its rank. It is built
//! from one scan of those records on the first rank query of the key, and every commit
//! afterwards ([`Ranks::committed`], called by the keyspace after each engine batch)
//! applies the batch's puts and deletes of that key's index records to it. Since it
//! follows the records written and not the commands that wrote them, every write path
//! (ZADD … ZRANGESTORE, DEL, RENAME, MOVE, RESTORE, lazy expiry, a replica's apply) keeps
//! it right without knowing of it; the few writes that bypass the keyspace's batches
//! (FLUSHDB's last sweep) are followed by [`Ranks::clear`]. A key whose records are all
//! deleted loses its index (its memory is freed).
//!
//! DRAM only: nothing of it is stored, it is rebuilt after a restart, so crash
//! consistency is the records' own. The tree is `indexset`'s two-level B-tree with a
//! Fenwick tree over its node sizes (rank and select in O(log n)).

use super::zset::INDEX;
use super::{split_elem, Kind};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// One sorted set's index: the suffixes `enc(score) member` of its score index records.
pub(crate) type Index = indexset::BTreeSet<Box<[u8]>>;

/// A key's entry: an index, or a build under way (its ticket).
enum Slot {
    Ready(Index),
    Building(u64),
}

/// The rank indexes of one database (held by its keyspace).
#[derive(Default)]
pub(crate) struct Ranks {
    /// User key → its index or build.
    map: Mutex<HashMap<Vec<u8>, Slot>>,
    /// Entries in `map` (read without its lock by every commit: zero, nothing to do).
    active: AtomicUsize,
    /// The last build ticket handed out.
    tickets: AtomicUsize,
}

/// The user key and index suffix of record key `rk`, when it is a score index record.
fn index_record(rk: &[u8]) -> Option<(&[u8], &[u8])> {
    match split_elem(rk)? {
        (kind, user, suffix) if kind == Kind::ZSET => {
            let (&sub, rest) = suffix.split_first()?;
            (sub == INDEX).then_some((user, rest))
        }
        _ => None,
    }
}

impl Ranks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, Slot>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn recount(&self, map: &HashMap<Vec<u8>, Slot>) {
        self.active.store(map.len(), Ordering::SeqCst);
    }

    /// Run `f` on `k`'s index, if it has one.
    pub(crate) fn with<R>(&self, k: &[u8], f: impl FnOnce(&Index) -> R) -> Option<R> {
        match self.lock().get(k) {
            Some(Slot::Ready(ix)) => Some(f(ix)),
            _ => None,
        }
    }

    /// Start building `k`'s index: a ticket, or `None` if another build is under way or
    /// the index exists. Any commit to `k`'s index records from now until
    /// [`finish`](Self::finish) cancels the build.
    pub(crate) fn begin(&self, k: &[u8]) -> Option<u64> {
        let mut map = self.lock();
        if map.contains_key(k) {
            return None;
        }
        let t = self.tickets.fetch_add(1, Ordering::Relaxed) as u64 + 1;
        map.insert(k.to_vec(), Slot::Building(t));
        self.recount(&map);
        Some(t)
    }

    /// Install the index built under `ticket`, unless a commit cancelled the build (then
    /// it is dropped: it may have missed that commit). An empty index is not kept.
    pub(crate) fn finish(&self, k: &[u8], ticket: u64, ix: Index) {
        let mut map = self.lock();
        if matches!(map.get(k), Some(Slot::Building(t)) if *t == ticket) {
            if ix.is_empty() {
                map.remove(k);
            } else {
                map.insert(k.to_vec(), Slot::Ready(ix));
            }
            self.recount(&map);
        }
    }

    /// Forget `k`'s index or build (one that disagrees with the records: rebuilt when
    /// next asked for).
    pub(crate) fn drop_key(&self, k: &[u8]) {
        let mut map = self.lock();
        if map.remove(k).is_some() {
            self.recount(&map);
        }
    }

    /// Forget every index (FLUSHDB, FLUSHALL: after the records were deleted).
    pub(crate) fn clear(&self) {
        let mut map = self.lock();
        map.clear();
        self.recount(&map);
    }

    /// After an engine batch was applied: follow its writes, `(record key, put?)` (a
    /// record key `None`: not one of this database's), on the indexes. A build under
    /// way for a key written to is cancelled.
    pub(crate) fn committed<'a>(&self, writes: impl Iterator<Item = (Option<&'a [u8]>, bool)>) {
        if self.active.load(Ordering::SeqCst) == 0 {
            return;
        }
        // The lock only for a batch that writes score index records (not a string SET's).
        let mut writes = writes.filter_map(|(rk, put)| Some((index_record(rk?)?, put))).peekable();
        if writes.peek().is_none() {
            return;
        }
        let mut map = self.lock();
        for ((user, suffix), put) in writes {
            match map.get_mut(user) {
                Some(Slot::Ready(ix)) => {
                    if put {
                        ix.insert(suffix.into());
                    } else {
                        ix.remove(suffix);
                    }
                    if ix.is_empty() {
                        map.remove(user);
                    }
                }
                Some(Slot::Building(_)) => {
                    map.remove(user);
                }
                None => {}
            }
        }
        self.recount(&map);
    }

    /// Keys with an index or a build (tests, INFO-like checks).
    #[cfg(test)]
    pub(crate) fn keys(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::elem_prefix;
    use crate::record::zset::{enc, TAG};
    use pmkv_testutil::XorShift;
    use std::collections::BTreeSet;

    fn rk(k: &[u8], s: f64, m: &[u8]) -> Vec<u8> {
        [elem_prefix(TAG, k).as_slice(), &[INDEX], &enc(s), m].concat()
    }

    /// Random puts and deletes of index records of two keys (and member records, which
    /// the index ignores) keep each index equal to a model set of the records, ranks and
    /// selects included; an index emptied by deletes is freed; a build that a commit
    /// overlapped is not installed.
    #[test]
    fn indexes_follow_committed_records_like_a_model() {
        let ranks = Ranks::default();
        let mut model: [BTreeSet<Vec<u8>>; 2] = Default::default();
        let keys: [&[u8]; 2] = [b"a", b"bb"];
        for (i, k) in keys.iter().enumerate() {
            let t = ranks.begin(k).unwrap();
            assert!(ranks.begin(k).is_none(), "one build at a time");
            let mut ix = Index::new();
            for m in 0..5u8 {
                let suffix = rk(k, f64::from(m), &[m])[elem_prefix(TAG, k).len() + 1..].to_vec();
                ix.insert(suffix.clone().into());
                model[i].insert(suffix);
            }
            ranks.finish(k, t, ix);
        }
        let mut rng = XorShift::new(61);
        for round in 0..20_000 {
            let mut batch = Vec::new();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(2) as usize;
                let s = [f64::NEG_INFINITY, -1.5, 0.0, 1.0, 2.0, f64::INFINITY][rng.below(6) as usize];
                let m = [b'm', rng.below(40) as u8];
                let put = rng.below(2) == 0;
                let key = rk(keys[i], s, &m);
                let suffix = key[elem_prefix(TAG, keys[i]).len() + 1..].to_vec();
                if put {
                    model[i].insert(suffix);
                } else {
                    model[i].remove(&suffix);
                }
                batch.push((key, put));
                // A member record: not the index's business.
                batch.push(([elem_prefix(TAG, keys[i]).as_slice(), &[0], &m].concat(), true));
            }
            ranks.committed(batch.iter().map(|(k, p)| (Some(k.as_slice()), *p)));
            for (i, k) in keys.iter().enumerate() {
                let got = ranks.with(k, |ix| ix.iter().map(|e| e.to_vec()).collect::<Vec<_>>());
                match got {
                    Some(v) => assert_eq!(v, model[i].iter().cloned().collect::<Vec<_>>(), "round {round}"),
                    None => {
                        assert!(model[i].is_empty(), "an index dropped while records remain");
                        // Rebuild from the model, as a rank query would from the records.
                        let t = ranks.begin(k).unwrap();
                        ranks.finish(k, t, model[i].iter().map(|e| e.clone().into_boxed_slice()).collect());
                    }
                }
                if let Some(probe) = model[i].iter().nth(model[i].len() / 2) {
                    let r = ranks.with(k, |ix| (ix.rank(probe.as_slice()), ix.get_index(model[i].len() / 2).cloned()));
                    assert_eq!(r, Some((model[i].len() / 2, Some(probe.clone().into_boxed_slice()))));
                }
            }
        }
        // A commit during a build cancels it.
        ranks.clear();
        assert_eq!(ranks.keys(), 0);
        let t = ranks.begin(b"a").unwrap();
        ranks.committed(std::iter::once((Some(rk(b"a", 1.0, b"x").as_slice()), true)));
        ranks.finish(b"a", t, [b"stale".to_vec().into_boxed_slice()].into_iter().collect());
        assert!(ranks.with(b"a", |_| ()).is_none(), "a build a commit overlapped must not be installed");
        // Records of other types or keys outside the database change nothing.
        let t = ranks.begin(b"a").unwrap();
        ranks.committed([(None, true), (Some(b"plain".as_slice()), false)].into_iter());
        ranks.finish(b"a", t, [b"x".to_vec().into_boxed_slice()].into_iter().collect());
        assert_eq!(ranks.with(b"a", Index::len), Some(1));
    }
}
