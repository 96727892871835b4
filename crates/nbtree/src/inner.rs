//! Inner nodes (paper §4.3, SPEC N5): DRAM, sorted arrays of separator keys with child
//! pointers, searched without locks.
//!
//! **Why not FAST&FAIR's in-place shifts.** NBTree updates inner nodes in place inside
//! HTM transactions and makes its lock-free readers *shift-aware* (Figure 4) because a
//! reader may see a node mid-shift. This CPU has no HTM. pmkv instead never changes a
//! published inner node: the link phase of an SMO builds new copies of the nodes on the
//! path from the changed node to the root (read-copy-update) and publishes them with one
//! atomic store of the root pointer; the old copies are freed through crossbeam-epoch once
//! no reader can hold them. Readers therefore see either the whole old tree or the whole
//! new one: there is no shift to be aware of, no version to validate and no retry. Writers
//! (the link phases, one per ~32 inserts) serialise on one mutex, which is what the
//! paper's HTM transactions amount to when they conflict; an SMO's copy phase, the
//! expensive part, runs outside it. The cost is O(height × fanout) copying per SMO, about
//! 200 pointer copies for 4M keys. The B-link `high_key`/sibling protocol is kept where
//! it matters, at the leaves: a reader that reaches a leaf an SMO replaced follows its
//! `copy_ptr` (see `tree::locate`).

use crate::arena::Slab;
use crate::leaf::Leaf;
use std::cmp::Ordering;
use std::sync::Arc;

/// Where the inner nodes live (see `arena`): shared by the tree and the deferred frees of
/// replaced nodes.
pub(crate) type NodeArena = Slab<INode>;

/// Children per inner node at most.
pub(crate) const FANOUT: usize = 32;

/// A separator key: its first 8 bytes (big-endian, zero-padded) and length decide its
/// order against any key of at most 8 bytes (the common case, 8-byte integers among
/// them); longer separators keep their bytes too.
#[derive(Clone)]
pub(crate) struct Sep {
    prefix: u64,
    len: u32,
    long: Option<Arc<[u8]>>,
}

impl Sep {
    pub(crate) fn of(key: &[u8]) -> Sep {
        Sep { prefix: prefix(key), len: key.len() as u32, long: (key.len() > 8).then(|| Arc::from(key)) }
    }
}

/// One immutable inner node, one allocation: `children[i]` holds the keys in
/// `[sep[i-1], sep[i])`. Line-aligned, so that `route`'s prefetches cover it exactly.
#[repr(C, align(64))]
pub(crate) struct INode {
    /// 0: children are leaves; otherwise inner nodes.
    pub(crate) level: u32,
    /// Children in use.
    pub(crate) n: usize,
    prefixes: [u64; FANOUT],
    /// `*const Leaf` or `*const INode`, by `level`.
    pub(crate) children: [usize; FANOUT],
    /// At level 0, the pool offset of each child leaf's key-value block (the paper's
    /// `data_ptr`, which never changes for a leaf): a search learns where its PM line lies
    /// here, one dependent load before the leaf's metadata tells it which line, and starts
    /// that block's address translation meanwhile (see `NbTree::find_leaf`). Zero above
    /// level 0.
    pub(crate) blocks: [u64; FANOUT],
    /// The separators' lengths, after the arrays every search reads: a search reads one
    /// only when a separator's prefix equals the key's (see `cmp_sep`).
    lens: [u32; FANOUT],
    /// The bytes of separators longer than 8 bytes (empty if there are none).
    long: Vec<Option<Arc<[u8]>>>,
}

// `INode::prefetch` covers the header and every array a search reads: they must all end
// where `lens` begins.
const _: () = {
    use std::mem::{offset_of, size_of};
    let hot_end = offset_of!(INode, lens);
    assert!(offset_of!(INode, n) + size_of::<usize>() <= hot_end);
    assert!(offset_of!(INode, prefixes) + 8 * FANOUT <= hot_end);
    assert!(offset_of!(INode, children) + 8 * FANOUT <= hot_end);
    assert!(offset_of!(INode, blocks) + 8 * FANOUT <= hot_end);
};

#[inline]
pub(crate) fn prefix(k: &[u8]) -> u64 {
    // Keys of 8 bytes and more (the common case): one load, where the copy of a variable
    // length below is a `memcpy` call.
    if let Some(b) = k.first_chunk::<8>() {
        return u64::from_be_bytes(*b);
    }
    let mut b = [0u8; 8];
    let n = k.len().min(8);
    b[..n].copy_from_slice(&k[..n]);
    u64::from_be_bytes(b)
}

impl INode {
    /// A node over `children` with separators `seps`; at level 0, `blocks[i]` is the key-value
    /// block of leaf `children[i]` (ignored above level 0, where it may be empty). The
    /// blocks are passed in rather than read from the leaves: an SMO's copy of a level-0 node
    /// takes them from the node it replaces, where reading each child leaf's metadata was up
    /// to 31 DRAM misses per SMO.
    fn new(level: u32, seps: &[Sep], children: &[usize], blocks: &[u64]) -> INode {
        debug_assert!(children.len() <= FANOUT && seps.len() + 1 == children.len());
        debug_assert!(level > 0 || blocks.len() == children.len());
        let mut n = INode {
            level,
            n: children.len(),
            prefixes: [0; FANOUT],
            lens: [0; FANOUT],
            children: [0; FANOUT],
            blocks: [0; FANOUT],
            long: Vec::new(),
        };
        n.children[..children.len()].copy_from_slice(children);
        if level == 0 {
            n.blocks[..blocks.len()].copy_from_slice(blocks);
        }
        for (i, s) in seps.iter().enumerate() {
            n.prefixes[i] = s.prefix;
            n.lens[i] = s.len;
        }
        if seps.iter().any(|s| s.long.is_some()) {
            n.long = seps.iter().map(|s| s.long.clone()).collect();
        }
        n
    }

    fn sep(&self, i: usize) -> Sep {
        Sep { prefix: self.prefixes[i], len: self.lens[i], long: self.long.get(i).cloned().flatten() }
    }

    /// Separator `i` against `key` (whose prefix is `kp`).
    #[inline]
    fn cmp_sep(&self, i: usize, key: &[u8], kp: u64) -> Ordering {
        let p = self.prefixes[i];
        if p != kp {
            return p.cmp(&kp);
        }
        let len = self.lens[i] as usize;
        if len <= 8 && key.len() <= 8 {
            // Equal padded prefixes: the shorter is a prefix of the longer.
            return len.cmp(&key.len());
        }
        match self.long.get(i).and_then(|l| l.as_deref()) {
            Some(l) => l.cmp(key),
            None => p.to_be_bytes()[..len].cmp(key),
        }
    }

    /// Request every line of this node up to the end of `blocks`: the lines are
    /// independent, so their misses overlap, one memory latency for the whole node.
    /// (The layout keeps every array a search reads before `lens`: checked at compile
    /// time, after the struct.)
    #[inline]
    fn prefetch(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            const LINES: usize = std::mem::offset_of!(INode, lens).div_ceil(64);
            let base = self as *const INode as *const i8;
            for l in 0..LINES {
                // SAFETY: addresses inside this node; prefetches never fault anyway.
                unsafe { std::arch::x86_64::_mm_prefetch(base.add(l * 64), std::arch::x86_64::_MM_HINT_T0) };
            }
        }
    }

    /// The number of separators `<= key` (`upper`) or `< key` (`!upper`): the index of the
    /// child for `key`, or for the keys just below it.
    #[inline]
    pub(crate) fn route(&self, key: &[u8], kp: u64, upper: bool) -> usize {
        // Every line the search and the step after it can read is requested at once, before
        // the first load: the binary search's probes are dependent loads, and the lines
        // must not wait for the header either (a loop bounded by `n` waited for the
        // header's miss before it could request the rest, two memory latencies per node
        // that misses, and `blocks[i]`, requested only once `i` was known, a third).
        self.prefetch();
        let (mut lo, mut hi) = (0, self.n - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let le = match self.cmp_sep(mid, key, kp) {
                Ordering::Less => true,
                Ordering::Equal => upper,
                Ordering::Greater => false,
            };
            if le {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// DRAM bytes of this node.
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of::<INode>()
            + self.long.capacity() * 16
            + self.long.iter().flatten().map(|k| 16 + k.len()).sum::<usize>()
    }
}

/// Build a tree bottom-up over `leaves` (in key order, each with its lower fence; the
/// first fence is ignored). Returns the root.
///
/// # Safety
/// Every leaf is alive.
pub(crate) unsafe fn build(leaves: Vec<(Sep, *const Leaf)>, slab: &NodeArena) -> *mut INode {
    assert!(!leaves.is_empty(), "a tree has at least one leaf");
    // Nodes filled to 3/4, leaving room for splits.
    let per = FANOUT * 3 / 4;
    let mut level: Vec<(Sep, usize)> = leaves.into_iter().map(|(k, l)| (k, l as usize)).collect();
    let mut lv = 0;
    loop {
        let mut up = Vec::with_capacity(level.len() / per + 1);
        for group in level.chunks(per) {
            let seps: Vec<Sep> = group[1..].iter().map(|x| x.0.clone()).collect();
            let children: Vec<usize> = group.iter().map(|x| x.1).collect();
            let blocks: Vec<u64> = if lv == 0 {
                // SAFETY: at level 0 the children are the caller's live leaves.
                children.iter().map(|&c| unsafe { &*(c as *const Leaf) }.block).collect()
            } else {
                Vec::new()
            };
            up.push((group[0].0.clone(), slab.alloc(INode::new(lv, &seps, &children, &blocks)) as usize));
        }
        if up.len() == 1 {
            return up[0].1 as *mut INode;
        }
        level = up;
        lv += 1;
    }
}

/// The copy-on-write replacement of leaf `old` (whose lower fence is `low`) by `left`
/// and, if not null, `right` starting at `split`. Returns the new root and the nodes it
/// replaced (to be freed once no reader holds them), or `None` if `old` is not in the
/// tree.
///
/// # Safety
/// `root` is the current root, no other thread changes the tree meanwhile (the caller
/// holds the writers' mutex), every node reachable from it is alive, and so are `left`
/// and `right`'s leaf.
pub(crate) unsafe fn replace(
    root: *const INode,
    old: *const Leaf,
    low: &[u8],
    left: *const Leaf,
    right: Option<(Arc<[u8]>, *const Leaf)>,
    slab: &NodeArena,
) -> Option<(*mut INode, Vec<*mut INode>)> {
    // The path from the root, with the child index taken at each node.
    let mut path: Vec<(*const INode, usize)> = Vec::new();
    let kp = prefix(low);
    let mut n = root;
    loop {
        // SAFETY: reachable from the current root (the caller's contract).
        let node = unsafe { &*n };
        let i = node.route(low, kp, true);
        path.push((n, i));
        if node.level == 0 {
            if node.children[i] != old as usize {
                return None;
            }
            break;
        }
        n = node.children[i] as *const INode;
    }
    let replaced: Vec<*mut INode> = path.iter().map(|p| p.0 as *mut INode).collect();
    // SAFETY: the new leaves are alive (the caller's contract); their blocks never change.
    let block_of = |l: *const Leaf| unsafe { &*l }.block;
    // Bottom-up: the new node, and a (separator, new right sibling) to install above. At
    // level 0 each child comes with its block (`INode::blocks`), copied from the old node
    // for the children that stay.
    let mut carry_child = (left as usize, block_of(left));
    let mut carry_split = right.map(|(k, r)| (Sep::of(&k), (r as usize, block_of(r))));
    for &(n, i) in path.iter().rev() {
        // SAFETY: `n` is on the path just walked from the current root; the caller holds the
        // writers' mutex, so no node on it is replaced or freed meanwhile.
        let node = unsafe { &*n };
        let mut seps: Vec<Sep> = (0..node.n - 1).map(|j| node.sep(j)).collect();
        let mut children: Vec<usize> = node.children[..node.n].to_vec();
        let mut blocks: Vec<u64> = if node.level == 0 { node.blocks[..node.n].to_vec() } else { Vec::new() };
        children[i] = carry_child.0;
        if node.level == 0 {
            blocks[i] = carry_child.1;
        }
        if let Some((k, (r, rb))) = carry_split.take() {
            seps.insert(i, k);
            children.insert(i + 1, r);
            if node.level == 0 {
                blocks.insert(i + 1, rb);
            }
        }
        if children.len() > FANOUT {
            let mid = children.len() / 2;
            let rchildren = children.split_off(mid);
            let rblocks = if node.level == 0 { blocks.split_off(mid) } else { Vec::new() };
            let mut rseps = seps.split_off(mid - 1);
            let sep = rseps.remove(0);
            let l = slab.alloc(INode::new(node.level, &seps, &children, &blocks));
            let r = slab.alloc(INode::new(node.level, &rseps, &rchildren, &rblocks));
            carry_child = (l as usize, 0);
            carry_split = Some((sep, (r as usize, 0)));
        } else {
            carry_child = (slab.alloc(INode::new(node.level, &seps, &children, &blocks)) as usize, 0);
        }
    }
    // SAFETY: `root` is the current root (the caller's contract) and cannot be freed while the
    // caller holds the writers' mutex.
    let top_level = unsafe { &*root }.level;
    let new_root = match carry_split {
        None => carry_child.0 as *mut INode,
        Some((k, (r, _))) => slab.alloc(INode::new(top_level + 1, &[k], &[carry_child.0, r], &[])),
    };
    Some((new_root, replaced))
}

/// Every node of the tree under `root` (for freeing at close and for memory accounting).
///
/// # Safety
/// Every node reachable from `root` is alive and not changed meanwhile.
pub(crate) unsafe fn nodes(root: *const INode) -> Vec<*const INode> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        // SAFETY: every pointer in `out` is the root or a child of a listed node, all alive and
        // unchanged by the caller's contract.
        let n = unsafe { &*out[i] };
        if n.level > 0 {
            out.extend(n.children[..n.n].iter().map(|&c| c as *const INode));
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Short separators (the (prefix, length) comparison, no separator bytes on the heap)
    /// route keys of any length to exactly the child that a byte-string comparison picks,
    /// in nodes of every size.
    #[test]
    fn short_keys_route_like_byte_strings() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Few byte values and every length up to 8, so equal prefixes of unequal lengths
        // (and zero bytes) are common.
        let key = |r: u64| -> Vec<u8> {
            (0..r % 9).map(|i| [0u8, 1, 0x80, 0xff][((r >> (8 + 2 * i)) & 3) as usize]).collect()
        };
        for round in 0..400 {
            let n = 1 + round % FANOUT;
            let mut seps: Vec<Vec<u8>> = (0..n - 1).map(|_| key(next())).collect();
            seps.sort();
            seps.dedup();
            let children: Vec<usize> = (0..=seps.len()).collect();
            let sv: Vec<Sep> = seps.iter().map(|k| Sep::of(k)).collect();
            let node = INode::new(1, &sv, &children, &[]);
            assert!(node.long.is_empty());
            for q in 0..50 {
                // Queried keys longer than any separator too (up to 12 bytes).
                let r = next();
                let mut k = key(r);
                if q % 3 == 0 {
                    // A separator's bytes padded to 8, then more: equal prefixes.
                    if !seps.is_empty() {
                        k = seps[(r % seps.len() as u64) as usize].clone();
                    }
                    k.resize(8, 0);
                    k.extend((0..1 + r % 4).map(|i| (r >> (40 + 4 * i)) as u8 & 0x81));
                }
                let le = seps.iter().filter(|s| s.as_slice() <= k.as_slice()).count();
                let lt = seps.iter().filter(|s| s.as_slice() < k.as_slice()).count();
                assert_eq!(node.route(&k, prefix(&k), true), le, "upper {k:?} in {seps:?}");
                assert_eq!(node.route(&k, prefix(&k), false), lt, "lower {k:?} in {seps:?}");
            }
        }
    }

    #[test]
    fn separators_order_like_byte_strings() {
        let keys: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![0, 0],
            b"a".to_vec(),
            b"a\0".to_vec(),
            b"ab".to_vec(),
            b"abcdefgh".to_vec(),
            b"abcdefgh\0".to_vec(),
            b"abcdefghi".to_vec(),
            b"abcdefghij".to_vec(),
            b"abd".to_vec(),
            vec![0xff; 8],
            vec![0xff; 9],
        ];
        let seps: Vec<Sep> = keys[1..].iter().map(|k| Sep::of(k)).collect();
        let children: Vec<usize> = (0..keys.len()).collect();
        let node = INode::new(1, &seps, &children, &[]);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(node.route(k, prefix(k), true), i, "upper {k:?}");
            assert_eq!(node.route(k, prefix(k), false), i.saturating_sub(1).min(i), "lower {k:?}");
            for j in 0..seps.len() {
                assert_eq!(node.cmp_sep(j, k, prefix(k)), keys[j + 1].as_slice().cmp(k), "{j} vs {k:?}");
            }
        }
    }
}
