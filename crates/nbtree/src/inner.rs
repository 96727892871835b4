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

use crate::leaf::Leaf;
use std::sync::Arc;

/// Children per inner node at most.
pub(crate) const FANOUT: usize = 64;

/// One immutable inner node: `children[i]` holds the keys in `[keys[i-1], keys[i])`.
pub(crate) struct INode {
    /// 0: children are leaves; otherwise inner nodes.
    pub level: u32,
    /// The first 8 bytes of each separator, big-endian (zero-padded): most comparisons
    /// stop here without touching the separator's heap bytes.
    pub prefixes: Vec<u64>,
    pub keys: Vec<Arc<[u8]>>,
    /// `*const Leaf` or `*const INode`, by `level`.
    pub children: Vec<usize>,
}

#[inline]
pub(crate) fn prefix(k: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = k.len().min(8);
    b[..n].copy_from_slice(&k[..n]);
    u64::from_be_bytes(b)
}

impl INode {
    /// The number of separators `<= key` (`upper`) or `< key` (`!upper`): the index of the
    /// child for `key`, or for the keys just below it.
    #[inline]
    pub(crate) fn route(&self, key: &[u8], kp: u64, upper: bool) -> usize {
        let (mut lo, mut hi) = (0, self.keys.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let p = self.prefixes[mid];
            let le = if p != kp {
                p < kp
            } else if upper {
                *self.keys[mid] <= *key
            } else {
                *self.keys[mid] < *key
            };
            if le {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    fn leaf_node(children: Vec<usize>, keys: Vec<Arc<[u8]>>, level: u32) -> INode {
        INode { level, prefixes: keys.iter().map(|k| prefix(k)).collect(), keys, children }
    }
}

/// Build a tree bottom-up over `leaves` (in key order, each with its lower fence; the
/// first fence is ignored). Returns the root.
pub(crate) fn build(leaves: &[(Arc<[u8]>, *const Leaf)]) -> *mut INode {
    assert!(!leaves.is_empty(), "a tree has at least one leaf");
    // Nodes filled to 3/4, leaving room for splits.
    let per = FANOUT * 3 / 4;
    let mut level: Vec<(Arc<[u8]>, usize)> = leaves.iter().map(|(k, l)| (k.clone(), *l as usize)).collect();
    let mut lv = 0;
    loop {
        let mut up = Vec::with_capacity(level.len() / per + 1);
        for group in level.chunks(per) {
            let keys = group[1..].iter().map(|x| x.0.clone()).collect();
            let node = INode::leaf_node(group.iter().map(|x| x.1).collect(), keys, lv);
            up.push((group[0].0.clone(), Box::into_raw(Box::new(node)) as usize));
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
/// holds the writers' mutex), and every node reachable from it is alive.
pub(crate) unsafe fn replace(
    root: *const INode,
    old: *const Leaf,
    low: &[u8],
    left: *const Leaf,
    right: Option<(Arc<[u8]>, *const Leaf)>,
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
    // Bottom-up: (new node, optional (separator, new right sibling)) to install above.
    let mut carry_child = left as usize;
    let mut carry_split = right.map(|(k, r)| (k, r as usize));
    for &(n, i) in path.iter().rev() {
        // SAFETY: as above.
        let node = unsafe { &*n };
        let mut keys = node.keys.clone();
        let mut children = node.children.clone();
        children[i] = carry_child;
        if let Some((k, r)) = carry_split.take() {
            keys.insert(i, k);
            children.insert(i + 1, r);
        }
        if children.len() > FANOUT {
            let mid = children.len() / 2;
            let rchildren = children.split_off(mid);
            let mut rkeys = keys.split_off(mid - 1);
            let sep = rkeys.remove(0);
            let l = Box::into_raw(Box::new(INode::leaf_node(children, keys, node.level)));
            let r = Box::into_raw(Box::new(INode::leaf_node(rchildren, rkeys, node.level)));
            carry_child = l as usize;
            carry_split = Some((sep, r as usize));
        } else {
            carry_child = Box::into_raw(Box::new(INode::leaf_node(children, keys, node.level))) as usize;
        }
    }
    // SAFETY: as above.
    let top_level = unsafe { &*root }.level;
    let new_root = match carry_split {
        None => carry_child as *mut INode,
        Some((k, r)) => Box::into_raw(Box::new(INode::leaf_node(vec![carry_child, r], vec![k], top_level + 1))),
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
        // SAFETY: the caller's contract.
        let n = unsafe { &*out[i] };
        if n.level > 0 {
            out.extend(n.children.iter().map(|&c| c as *const INode));
        }
        i += 1;
    }
    out
}
