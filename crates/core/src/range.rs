//! Key ranges and scan direction.

use std::ops::Bound;

/// Which way a scan walks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Direction {
    /// Ascending key order.
    #[default]
    Forward,
    /// Descending key order.
    Reverse,
}

/// A range of byte-string keys: each end included, excluded or open. Keys compare as
/// byte strings (memcmp order, a prefix before its extensions).
///
/// Two keys name a half-open range, `[start, end)` ([`KeyRange::new`]), in every front
/// end (CLI, Python, C, the server's `PMKV.RANGE`): an inclusive end is only ever asked
/// for by name (`Bound::Included`). An end before its start is an empty range, not an
/// error and not swapped. The edge cases every front end is tested on are listed in
/// docs/design/api.md, "Range edge cases".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange {
    /// The low end.
    pub start: Bound<Vec<u8>>,
    /// The high end.
    pub end: Bound<Vec<u8>>,
}

impl Default for KeyRange {
    fn default() -> Self {
        KeyRange::all()
    }
}

impl KeyRange {
    /// Every key.
    pub fn all() -> KeyRange {
        KeyRange { start: Bound::Unbounded, end: Bound::Unbounded }
    }
    /// Keys in `[start, end)`.
    pub fn new(start: impl Into<Vec<u8>>, end: impl Into<Vec<u8>>) -> KeyRange {
        KeyRange { start: Bound::Included(start.into()), end: Bound::Excluded(end.into()) }
    }
    /// Keys from `start` on, inclusive.
    pub fn from(start: impl Into<Vec<u8>>) -> KeyRange {
        KeyRange { start: Bound::Included(start.into()), end: Bound::Unbounded }
    }
    /// Keys that begin with `prefix`.
    pub fn prefix(prefix: impl Into<Vec<u8>>) -> KeyRange {
        let p = prefix.into();
        // The first string after every extension of `p`: drop trailing 0xff bytes and add
        // one to the last byte left; with none left, every key >= p has the prefix.
        let mut end = p.clone();
        while end.last() == Some(&0xff) {
            end.pop();
        }
        let end = match end.last_mut() {
            Some(b) => {
                *b += 1;
                Bound::Excluded(end)
            }
            None => Bound::Unbounded,
        };
        KeyRange { start: Bound::Included(p), end }
    }
    /// From any pair of bounds.
    pub fn bounds(start: Bound<&[u8]>, end: Bound<&[u8]>) -> KeyRange {
        KeyRange { start: start.map(<[u8]>::to_vec), end: end.map(<[u8]>::to_vec) }
    }
    /// The low end over a slice.
    pub fn start_bound(&self) -> Bound<&[u8]> {
        self.start.as_ref().map(Vec::as_slice)
    }
    /// The high end over a slice.
    pub fn end_bound(&self) -> Bound<&[u8]> {
        self.end.as_ref().map(Vec::as_slice)
    }
    /// Whether `key` is at or after the low end.
    pub fn after_start(&self, key: &[u8]) -> bool {
        match &self.start {
            Bound::Unbounded => true,
            Bound::Included(s) => key >= s.as_slice(),
            Bound::Excluded(s) => key > s.as_slice(),
        }
    }
    /// Whether `key` is at or before the high end.
    pub fn before_end(&self, key: &[u8]) -> bool {
        match &self.end {
            Bound::Unbounded => true,
            Bound::Included(e) => key <= e.as_slice(),
            Bound::Excluded(e) => key < e.as_slice(),
        }
    }
    /// Whether `key` lies in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.after_start(key) && self.before_end(key)
    }
    /// Whether no key can lie in the range (low end above high end, an empty interval, or
    /// an end before the empty key, which is the least key).
    pub fn is_empty(&self) -> bool {
        if matches!(&self.end, Bound::Excluded(e) if e.is_empty()) {
            return true;
        }
        match (&self.start, &self.end) {
            (Bound::Included(s), Bound::Included(e)) => s > e,
            (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e))
            | (Bound::Excluded(s), Bound::Included(e)) => s >= e,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_range_covers_exactly_the_extensions() {
        let r = KeyRange::prefix(b"ab".to_vec());
        for k in [&b"ab"[..], b"ab\0", b"ab\xff\xff", b"abz"] {
            assert!(r.contains(k), "{k:?}");
        }
        for k in [&b"a"[..], b"aa\xff", b"ac", b"b"] {
            assert!(!r.contains(k), "{k:?}");
        }
        let r = KeyRange::prefix(b"a\xff".to_vec());
        assert!(r.contains(b"a\xff\x01") && !r.contains(b"b") && r.contains(b"a\xff"));
        assert_eq!(KeyRange::prefix(b"\xff\xff".to_vec()).end, Bound::Unbounded);
    }

    /// docs/design/api.md, "Range edge cases" 2, 3, 4, 5, 7 and 10 at the level of one
    /// range (the conformance suite checks all of them through a store).
    #[test]
    fn empty_ranges() {
        assert!(KeyRange::new(b"b".to_vec(), b"a".to_vec()).is_empty()); // 3
        assert!(KeyRange::new(b"a".to_vec(), b"a".to_vec()).is_empty()); // 2
        assert!(!KeyRange::bounds(Bound::Included(b"a"), Bound::Included(b"a")).is_empty()); // 10
        assert!(KeyRange::bounds(Bound::Excluded(b"a"), Bound::Included(b"a")).is_empty());
        assert!(KeyRange::bounds(Bound::Unbounded, Bound::Excluded(b"")).is_empty()); // 7
        assert!(!KeyRange::bounds(Bound::Unbounded, Bound::Included(b"")).is_empty());
        assert!(!KeyRange::bounds(Bound::Excluded(b""), Bound::Unbounded).is_empty());
        assert!(!KeyRange::all().is_empty());
    }

    /// The half-open meaning of two keys (cases 4 and 5): start in, end out, absent keys
    /// bound as well as present ones.
    #[test]
    fn two_keys_are_half_open() {
        let r = KeyRange::new(b"a".to_vec(), b"ba".to_vec());
        assert!(r.contains(b"a") && r.contains(b"b") && !r.contains(b"ba") && !r.contains(b"b\xff"));
        let r = KeyRange::new(b"a0".to_vec(), b"bc".to_vec());
        assert!(!r.contains(b"a") && r.contains(b"b") && r.contains(b"bb") && !r.contains(b"b\xff"));
        assert!(KeyRange::from(b"".to_vec()).contains(b""));
    }
}
