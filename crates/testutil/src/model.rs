//! The reference model every store is compared with, the writes tests replay on it, and
//! what an ordered scan of it returns.

use std::collections::BTreeMap;
use std::ops::Bound;

/// The reference every store is compared with: ordered, byte-string keys.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Records as a scan returns them: (key, value) in scan order.
pub type Records = Vec<(Vec<u8>, Vec<u8>)>;

/// One write, as tests generate and replay them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Insert or replace.
    Put(Vec<u8>, Vec<u8>),
    /// Remove, if present.
    Delete(Vec<u8>),
}

impl Op {
    /// The key the operation writes.
    pub fn key(&self) -> &[u8] {
        match self {
            Op::Put(k, _) | Op::Delete(k) => k,
        }
    }
}

/// Apply `op` to the model; returns whether the key was present before (what a store's
/// `delete` answers).
pub fn apply(m: &mut Model, op: &Op) -> bool {
    match op {
        Op::Put(k, v) => m.insert(k.clone(), v.clone()).is_some(),
        Op::Delete(k) => m.remove(k).is_some(),
    }
}

/// The model a full forward scan returned, checking on the way that the records come
/// strictly ascending (a scan out of order, or one that repeats a key, fails the test).
#[track_caller]
pub fn model_of_scan(records: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) -> Model {
    let mut m = Model::new();
    for (k, v) in records {
        if let Some((last, _)) = m.last_key_value() {
            assert!(*last < k, "scan out of order: {last:?} then {k:?}");
        }
        m.insert(k, v);
    }
    m
}

/// Whether `key` lies between `start` and `end` (either may be any bound kind; a range
/// whose start lies past its end holds nothing).
pub fn in_bounds(key: &[u8], start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    (match start {
        Bound::Included(s) => key >= s,
        Bound::Excluded(s) => key > s,
        Bound::Unbounded => true,
    }) && (match end {
        Bound::Included(e) => key <= e,
        Bound::Excluded(e) => key < e,
        Bound::Unbounded => true,
    })
}

/// The three bound kinds at `key`: included, excluded, unbounded — for tests that try
/// every kind at both ends, or pick one by index.
pub fn bound_kinds(key: &[u8]) -> [Bound<&[u8]>; 3] {
    [Bound::Included(key), Bound::Excluded(key), Bound::Unbounded]
}

/// What a scan of the model from `start` to `end` returns: at most `limit` records,
/// ascending or, with `reverse`, descending from the end.
pub fn model_range(m: &Model, start: Bound<&[u8]>, end: Bound<&[u8]>, limit: usize, reverse: bool) -> Records {
    let it = m.iter().filter(|(k, _)| in_bounds(k, start, end)).map(|(k, v)| (k.clone(), v.clone()));
    if reverse {
        it.rev().take(limit).collect()
    } else {
        it.take(limit).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Bound::{Excluded, Included, Unbounded};

    fn put(k: &str, v: &str) -> Op {
        Op::Put(k.as_bytes().to_vec(), v.as_bytes().to_vec())
    }

    #[test]
    fn apply_follows_the_model() {
        let mut m = Model::new();
        assert!(!apply(&mut m, &put("a", "1")), "a new key was not present");
        assert!(apply(&mut m, &put("a", "2")), "an update replaces");
        assert_eq!(m.get(&b"a"[..]).map(Vec::as_slice), Some(&b"2"[..]));
        assert!(!apply(&mut m, &Op::Delete(b"b".to_vec())), "deleting an absent key");
        assert_eq!(m.len(), 1);
        assert!(apply(&mut m, &Op::Delete(b"a".to_vec())));
        assert!(!apply(&mut m, &Op::Delete(b"a".to_vec())));
        assert!(m.is_empty());
        assert!(!apply(&mut m, &Op::Put(vec![], vec![])), "the empty key and value are ordinary");
        assert_eq!(m.get(&[][..]), Some(&vec![]));
        assert_eq!(put("k", "v").key(), b"k");
        assert_eq!(Op::Delete(b"d".to_vec()).key(), b"d");
    }

    #[test]
    fn a_scan_must_come_ascending() {
        let m = model_of_scan([(b"a".to_vec(), b"1".to_vec()), (b"ab".to_vec(), b"2".to_vec())]);
        assert_eq!(m.len(), 2);
        let unordered = std::panic::catch_unwind(|| model_of_scan([(b"b".to_vec(), vec![]), (b"a".to_vec(), vec![])]));
        assert!(unordered.is_err(), "out of order");
        let repeated = std::panic::catch_unwind(|| model_of_scan([(b"a".to_vec(), vec![]), (b"a".to_vec(), vec![])]));
        assert!(repeated.is_err(), "a key twice");
    }

    #[test]
    fn bounds_of_every_kind() {
        let (a, b, c) = (&b"a"[..], &b"b"[..], &b"c"[..]);
        assert!(in_bounds(b, Included(b), Included(b)));
        assert!(!in_bounds(b, Excluded(b), Unbounded));
        assert!(!in_bounds(b, Unbounded, Excluded(b)));
        assert!(in_bounds(b, Excluded(a), Excluded(c)));
        assert!(!in_bounds(b, Included(c), Included(a)), "start past the end holds nothing");
        assert!(in_bounds(b"", Unbounded, Unbounded) && in_bounds(b"", Included(b""), Excluded(a)));
        assert!(!in_bounds(b"a\0", Unbounded, Included(a)), "a longer key sorts after its prefix");
        assert_eq!(bound_kinds(a), [Included(a), Excluded(a), Unbounded]);
    }

    #[test]
    fn model_ranges_with_limits_both_ways() {
        let m: Model = ["a", "b", "c", "d"].iter().map(|k| (k.as_bytes().to_vec(), k.as_bytes().to_vec())).collect();
        let keys = |r: Records| r.into_iter().map(|(k, _)| String::from_utf8(k).unwrap()).collect::<Vec<_>>();
        assert_eq!(keys(model_range(&m, Excluded(b"a"), Included(b"c"), usize::MAX, false)), ["b", "c"]);
        assert_eq!(keys(model_range(&m, Excluded(b"a"), Included(b"c"), usize::MAX, true)), ["c", "b"]);
        assert_eq!(keys(model_range(&m, Unbounded, Unbounded, 3, true)), ["d", "c", "b"]);
        assert_eq!(keys(model_range(&m, Included(b"b"), Unbounded, 0, false)), Vec::<String>::new());
        assert_eq!(keys(model_range(&m, Included(b"d"), Included(b"a"), 9, false)), Vec::<String>::new());
        assert_eq!(model_range(&m, Included(b"b"), Excluded(b"c"), 9, false), vec![(b"b".to_vec(), b"b".to_vec())]);
    }
}
