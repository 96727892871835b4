//! The DRAM inner nodes (paper §3 "Selective Persistence"): volatile, rebuilt from the
//! leaves at every open (`recovery`), so that they cost no PM write and no flush.
//!
//! The paper's inner nodes are a classic B+-tree over the leaves' separator keys. Here
//! they are a DRAM B-tree keyed by each leaf's low fence (the smallest key the leaf may
//! hold; the first leaf's is the empty key), Rust's `BTreeMap`, whose nodes are sorted
//! arrays like the paper's inner nodes: a lookup is a descent through them to the last
//! fence at or below the key. Each entry holds the leaf's DRAM handle, [`LeafNode`], with
//! the leaf lock.
//!
//! **Concurrency.** The paper runs inner-node traversals and leaf locking inside Intel TSX
//! transactions (§3 "Selective Concurrency"), with a global lock as TSX's fallback path.
//! This CPU has no TSX, so pmkv takes that fallback always: the tree keeps the index
//! under one reader-writer lock, read-locked by every operation and write-locked by the
//! structural modifications (a leaf split, an empty leaf unlinked), and each leaf has its
//! own reader-writer lock, the paper's per-leaf lock.

use parking_lot::RwLock;
use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The DRAM handle of one PM leaf.
pub(crate) struct LeafNode {
    /// The leaf's pool offset. Never changes.
    pub(crate) off: u64,
    /// The leaf lock: shared to read the leaf, exclusive to write it.
    pub(crate) lock: RwLock<()>,
    /// Written since its seal was last computed (the seal is rewritten at clean close).
    pub(crate) dirty: AtomicBool,
}

impl LeafNode {
    pub(crate) fn new(off: u64, dirty: bool) -> Arc<LeafNode> {
        Arc::new(LeafNode { off, lock: RwLock::new(()), dirty: AtomicBool::new(dirty) })
    }
}

/// A leaf's low fence as the index keys it: the key's first 8 bytes, big-endian and
/// zero-padded, beside the key itself. Ordered by (`head`, key), which is the keys' byte
/// order (a zero-padded prefix orders as the keys do, and equal prefixes fall back to the
/// whole key), so that most comparisons of a descent are one integer comparison in the
/// node instead of a `memcmp` through a pointer (measured: the index descent was a third
/// of a lookup's time with bare byte-string keys).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Fence {
    head: u64,
    key: Box<[u8]>,
}

/// What the index compares: a [`Fence`], or a [`Probe`] for a lookup, which borrows its
/// key instead of copying it into a box.
trait FenceKey {
    fn head(&self) -> u64;
    fn bytes(&self) -> &[u8];
}

/// A lookup key, compared like a [`Fence`].
struct Probe<'k> {
    head: u64,
    key: &'k [u8],
}

fn head_of(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

impl<'k> Probe<'k> {
    fn of(key: &'k [u8]) -> Probe<'k> {
        Probe { head: head_of(key), key }
    }
}

impl FenceKey for Fence {
    fn head(&self) -> u64 {
        self.head
    }
    fn bytes(&self) -> &[u8] {
        &self.key
    }
}

impl FenceKey for Probe<'_> {
    fn head(&self) -> u64 {
        self.head
    }
    fn bytes(&self) -> &[u8] {
        self.key
    }
}

impl PartialEq for dyn FenceKey + '_ {
    fn eq(&self, o: &Self) -> bool {
        self.head() == o.head() && self.bytes() == o.bytes()
    }
}
impl Eq for dyn FenceKey + '_ {}
impl PartialOrd for dyn FenceKey + '_ {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for dyn FenceKey + '_ {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.head().cmp(&o.head()).then_with(|| self.bytes().cmp(o.bytes()))
    }
}

impl<'a> Borrow<dyn FenceKey + 'a> for Fence {
    fn borrow(&self) -> &(dyn FenceKey + 'a) {
        self
    }
}

/// Low fence → leaf, in key order (the leaves' list order).
#[derive(Default)]
pub(crate) struct Index {
    map: BTreeMap<Fence, Arc<LeafNode>>,
}

impl Index {
    /// An index of `leaves`, (low fence, leaf) in key order, the first fence empty.
    pub(crate) fn build(leaves: Vec<(Box<[u8]>, Arc<LeafNode>)>) -> Index {
        debug_assert!(leaves.first().is_some_and(|(k, _)| k.is_empty()));
        Index { map: leaves.into_iter().map(|(k, v)| (Fence { head: head_of(&k), key: k }, v)).collect() }
    }

    /// The leaves whose fences lie between `lo` and `hi`, in key order.
    fn range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> impl DoubleEndedIterator<Item = (&[u8], &Arc<LeafNode>)> {
        let (lo, hi) = (lo.map(Probe::of), hi.map(Probe::of));
        self.map
            .range::<dyn FenceKey, _>((
                lo.as_ref().map(|p| p as &dyn FenceKey),
                hi.as_ref().map(|p| p as &dyn FenceKey),
            ))
            .map(|(k, v)| (&*k.key, v))
    }

    /// The leaf whose range holds `key`, with its low fence.
    #[inline]
    pub(crate) fn find(&self, key: &[u8]) -> (&[u8], &Arc<LeafNode>) {
        self.range(Bound::Unbounded, Bound::Included(key))
            .next_back()
            .expect("the first leaf's fence is the empty key, at or below every key")
    }

    /// The leaf whose low fence is `low`.
    pub(crate) fn get(&self, low: &[u8]) -> Option<&Arc<LeafNode>> {
        self.map.get(&Probe::of(low) as &dyn FenceKey)
    }

    /// The leaf before the one whose low fence is `low`.
    pub(crate) fn prev(&self, low: &[u8]) -> Option<&Arc<LeafNode>> {
        self.range(Bound::Unbounded, Bound::Excluded(low)).next_back().map(|(_, v)| v)
    }

    /// Add a leaf (after a split).
    pub(crate) fn insert(&mut self, low: Box<[u8]>, leaf: Arc<LeafNode>) {
        self.map.insert(Fence { head: head_of(&low), key: low }, leaf);
    }

    /// Remove a leaf (unlinked).
    pub(crate) fn remove(&mut self, low: &[u8]) -> Option<Arc<LeafNode>> {
        self.map.remove(&Probe::of(low) as &dyn FenceKey)
    }

    /// The leaves from the one holding `key` onwards (from the first if `None`).
    pub(crate) fn from(&self, key: Option<&[u8]>) -> impl Iterator<Item = (&[u8], &Arc<LeafNode>)> {
        let start: &[u8] = match key {
            Some(k) => self.find(k).0,
            None => &[],
        };
        self.range(Bound::Included(start), Bound::Unbounded)
    }

    /// The leaves from the one holding `key` backwards (from the last if `None`).
    pub(crate) fn back_from(&self, key: Option<&[u8]>) -> impl Iterator<Item = (&[u8], &Arc<LeafNode>)> {
        let end = match key {
            Some(k) => Bound::Included(self.find(k).0),
            None => Bound::Unbounded,
        };
        self.range(Bound::Unbounded, end).rev()
    }

    /// Every leaf in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &Arc<LeafNode>)> {
        self.map.iter().map(|(k, v)| (&*k.key, v))
    }

    /// Number of leaves.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// DRAM bytes the index uses (an estimate: entries, fences, handles).
    pub(crate) fn dram_bytes(&self) -> u64 {
        self.map.keys().map(|k| (k.key.len() + 32 + 16 + std::mem::size_of::<LeafNode>() + 16) as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_order_as_their_bytes() {
        let keys: [&[u8]; 10] =
            [b"", b"\0", b"\0\0", b"a", b"a\0", b"ab", b"abcdefgh", b"abcdefgh\0", b"abcdefghi", b"\xff"];
        for a in keys {
            for b in keys {
                let (fa, fb) = (Fence { head: head_of(a), key: a.into() }, Fence { head: head_of(b), key: b.into() });
                assert_eq!(fa.cmp(&fb), a.cmp(b), "{a:?} vs {b:?}");
                let (pa, pb) = (Probe::of(a), Probe::of(b));
                assert_eq!((&pa as &dyn FenceKey).cmp(&pb as &dyn FenceKey), a.cmp(b));
            }
        }
    }

    #[test]
    fn keys_route_to_the_last_fence_at_or_below_them() {
        let leaves = vec![
            (Box::from(&b""[..]), LeafNode::new(1, false)),
            (Box::from(&b"m"[..]), LeafNode::new(2, false)),
            (Box::from(&b"t"[..]), LeafNode::new(3, false)),
        ];
        let ix = Index::build(leaves);
        assert_eq!(ix.find(b"").1.off, 1);
        assert_eq!(ix.find(b"l\xff").1.off, 1);
        assert_eq!(ix.find(b"m").1.off, 2);
        assert_eq!(ix.find(b"zz").1.off, 3);
        assert_eq!(ix.prev(b"t").unwrap().off, 2);
        assert!(ix.prev(b"").is_none());
        let fwd: Vec<u64> = ix.from(Some(b"n")).map(|(_, l)| l.off).collect();
        assert_eq!(fwd, [2, 3]);
        let back: Vec<u64> = ix.back_from(Some(b"n")).map(|(_, l)| l.off).collect();
        assert_eq!(back, [2, 1]);
        assert_eq!(ix.back_from(None).count(), 3);
    }
}
