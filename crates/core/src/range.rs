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
    /// Whether no key can lie in the range (low end above high end, or an empty interval).
    pub fn is_empty(&self) -> bool {
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

    #[test]
    fn empty_ranges() {
        assert!(KeyRange::new(b"b".to_vec(), b"a".to_vec()).is_empty());
        assert!(KeyRange::new(b"a".to_vec(), b"a".to_vec()).is_empty());
        assert!(!KeyRange::bounds(Bound::Included(b"a"), Bound::Included(b"a")).is_empty());
        assert!(!KeyRange::all().is_empty());
    }
}
