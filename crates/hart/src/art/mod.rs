//! One adaptive radix tree (SPEC H2), entirely in DRAM. Leaves are references (PM offsets)
//! to HART's persistent leaves; the tree never stores keys of its own except the
//! compressed paths. Lazy expansion (Leis et al. §III-E): a subtree holding a single key
//! is just a leaf reference, and a key's remaining bytes are checked against the full key
//! in the PM leaf, read through [`KeySource`].
//!
//! Keys are compared as whole keys; a tree starts at a `depth` (HART's k_h: the hash key
//! bytes every key of the tree shares).

pub(crate) mod arena;
pub(crate) mod node;

use arena::NodeArena;
use node::{NodeType, Ref, Slot};
use pmkv_substrate::epalloc::ReservedRun;
use std::sync::Arc;

/// Reads the full key of a leaf (from PM in HART; from a Vec in unit tests).
pub(crate) trait KeySource {
    /// Call `f` with the complete key of `leaf`.
    fn with_key<R>(&self, leaf: u64, f: impl FnOnce(&[u8]) -> R) -> R;
}

/// `a == b` for the short byte strings of a lookup (compressed paths, word-like keys):
/// up to 16 bytes in two overlapping 8-byte words each, without a `memcmp` call, which
/// cost a third of a cache-hot search.
#[inline]
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    #[inline]
    fn word(s: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"))
    }
    #[inline]
    fn half(s: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(s[at..at + 4].try_into().expect("4 bytes"))
    }
    #[inline]
    fn pair(s: &[u8], at: usize) -> u16 {
        u16::from_le_bytes(s[at..at + 2].try_into().expect("2 bytes"))
    }
    // Short lengths compare two overlapping loads (first and last bytes), as for 8..=16:
    // two loads per side instead of one per byte.
    match n {
        0 => true,
        1 => a[0] == b[0],
        2..=3 => pair(a, 0) == pair(b, 0) && pair(a, n - 2) == pair(b, n - 2),
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

/// Length of the common prefix of `a[from..]` and `b[from..]`.
fn common(a: &[u8], b: &[u8], from: usize) -> usize {
    a.iter().skip(from).zip(b.iter().skip(from)).take_while(|(x, y)| x == y).count()
}

/// Where an inner node's prefix and a key part ways: `prefix.len()` if the key matches the
/// whole prefix (and continues at least to its end).
#[inline]
fn prefix_mismatch(prefix: &[u8], key: &[u8], depth: usize) -> usize {
    let rest = key.get(depth..).unwrap_or(&[]);
    prefix.iter().zip(rest.iter()).take_while(|(a, b)| a == b).count()
}

/// An adaptive radix tree over keys that share their first `depth` bytes. Owns its nodes,
/// and is the safe face of [`node`]'s raw handles.
///
/// Invariant (what every `unsafe` block of this module rests on): every node reachable
/// from `root` is live, was allocated from `arena`, and is named by exactly one slot of
/// this tree; nodes are only read through `&self` methods (the nodes' *read* contract) and
/// only changed through `&mut self` methods (their *write* contract), and a node is freed
/// only once it is unlinked. HART's per-ART reader-writer lock hands out exactly these
/// borrows.
pub(crate) struct Art {
    root: Slot,
    depth: usize,
    len: u64,
    arena: Arc<NodeArena>,
    /// The key of the leaf this ART's last insert made (see [`HotLeaf`]).
    pub(crate) hot: HotLeaf,
    /// Leaf slots reserved ahead for this ART's next inserts (see `Hart::make_leaf`):
    /// handed out under the ART's write lock with no locked instruction. Given back when
    /// the ART is freed; dropped with the HART otherwise (reservations are DRAM state).
    pub(crate) leaves: ReservedRun,
}

/// A DRAM copy of one leaf's key (at most [`HotLeaf::CAP`] bytes): the leaf of its ART's
/// last insert. In the flushing modes that leaf's line was just written back, and on
/// this CPU `clwb` evicts the line, while the next insert in key order (the Dictionary's
/// file order, any sorted load) ends its descent at that very leaf and compares its
/// key: a DRAM miss per insert, saved by this copy. It lives in the ART, under the ART's
/// lock; the leaf's key never changes while the leaf is in the tree, and removing the
/// leaf from the tree clears the copy ([`HotLeaf::forget`]).
#[derive(Clone, Copy)]
pub(crate) struct HotLeaf {
    /// The leaf's offset; 0 = none.
    pub(crate) leaf: u64,
    len: u8,
    key: [u8; HotLeaf::CAP],
}

impl Default for HotLeaf {
    fn default() -> HotLeaf {
        HotLeaf { leaf: 0, len: 0, key: [0; HotLeaf::CAP] }
    }
}

impl HotLeaf {
    /// Longest key kept (HART's inline keys).
    pub(crate) const CAP: usize = crate::layout::INLINE_KEY;

    /// Remember `key` as `leaf`'s, or nothing if it is too long.
    #[inline]
    pub(crate) fn remember(&mut self, leaf: u64, key: &[u8]) {
        if key.len() > Self::CAP {
            self.leaf = 0;
            return;
        }
        self.leaf = leaf;
        self.len = key.len() as u8;
        crate::layout::put_short(&mut self.key, key);
    }

    /// Forget the key if it is `leaf`'s (the leaf left the tree).
    #[inline]
    pub(crate) fn forget(&mut self, leaf: u64) {
        if self.leaf == leaf {
            self.leaf = 0;
        }
    }

    /// The key, if this is `leaf`'s copy.
    #[inline]
    pub(crate) fn key_of(&self, leaf: u64) -> Option<&[u8]> {
        (self.leaf == leaf && leaf != 0).then(|| &self.key[..self.len as usize])
    }
}

impl Drop for Art {
    fn drop(&mut self) {
        // SAFETY: the tree's nodes come from `self.arena` and `root` is their only owner
        // (the invariant); the root is taken out, so nothing names them afterwards.
        unsafe { node::free_tree(&self.arena, std::mem::take(&mut self.root)) };
    }
}

/// Per-node-type counts and bytes (SPEC H9).
#[derive(Clone, Debug, Default)]
pub(crate) struct ArtStats {
    pub nodes: [u64; 4],
    pub bytes: [u64; 4],
    pub leaves: u64,
}

impl Art {
    /// An empty tree whose nodes come from `arena` (shared by all ARTs of a HART).
    pub(crate) fn new(depth: usize, arena: Arc<NodeArena>) -> Art {
        Art { root: Slot::EMPTY, depth, len: 0, arena, hot: HotLeaf::default(), leaves: ReservedRun::default() }
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The leaf holding `key`.
    pub(crate) fn get(&self, key: &[u8], ks: &impl KeySource) -> Option<u64> {
        let (leaf, matched) = self.leaf_for(key)?;
        (matched || ks.with_key(leaf, |k| same(k, key))).then_some(leaf)
    }

    /// The only leaf that can hold `key`, and whether the descent has already matched the
    /// whole key (`true` for a node's `term`); `false` means lazy expansion left the
    /// rest of the key unread, and the caller must compare the leaf's stored key with
    /// `key` ([`same`]). The search compares it itself, in one visit of the leaf with its
    /// value read (`pm::lookup`), instead of going through [`KeySource`] and reading the
    /// leaf a second time.
    #[inline]
    pub(crate) fn leaf_for(&self, key: &[u8]) -> Option<(u64, bool)> {
        let mut cur = self.root;
        let mut depth = self.depth;
        loop {
            match cur.get()? {
                Ref::Leaf(l) => return Some((l, false)),
                Ref::Node(n) => {
                    if let Some(&b) = key.get(depth) {
                        cur.prefetch_lookup(b);
                    }
                    // SAFETY: a node of this tree, read under `&self` (the invariant).
                    unsafe {
                        let p = n.prefix();
                        if !key.get(depth..depth + p.len()).is_some_and(|part| same(part, p)) {
                            return None;
                        }
                        depth += p.len();
                        if key.len() == depth {
                            return n.term().map(|l| (l, true));
                        }
                        cur = n.find(key[depth]);
                    }
                    depth += 1;
                }
            }
        }
    }

    /// Insert `leaf` for `key`. If the key is present, nothing changes and its leaf is
    /// returned as `Err` (the caller updates it).
    pub(crate) fn insert(&mut self, key: &[u8], leaf: u64, ks: &impl KeySource) -> Result<(), u64> {
        match self.upsert(key, |_| Ok::<u64, std::convert::Infallible>(leaf), ks) {
            Ok(r) => r,
            Err(never) => match never {},
        }
    }

    /// One traversal for HART's put: if `key` is present return `Ok(Err(its leaf))`;
    /// otherwise call `make` for the new leaf only once the insertion point is known, link
    /// it, and return `Ok(Ok(()))`. An error of `make` leaves the tree unchanged. `make`
    /// gets the ART's leaf slots reserved ahead ([`Art::leaves`]) to take its slot from.
    pub(crate) fn upsert<E>(
        &mut self,
        key: &[u8],
        make: impl FnOnce(&mut ReservedRun) -> Result<u64, E>,
        ks: &impl KeySource,
    ) -> Result<Result<(), u64>, E> {
        let leaves = &mut self.leaves;
        // SAFETY: the tree's own root and arena, borrowed exclusively by `&mut self`.
        let r = unsafe { Self::insert_at(&self.arena, &mut self.root, key, self.depth, || make(leaves), ks)? };
        if r.is_ok() {
            self.len += 1;
        }
        Ok(r)
    }

    /// [`Art::upsert`] below `slot`, whose keys share their first `depth` bytes.
    ///
    /// # Safety
    ///
    /// `slot` belongs to a tree with [`Art`]'s invariant whose nodes come from `arena`,
    /// and the caller borrows that tree exclusively (the write contract for every node
    /// under `slot`).
    unsafe fn insert_at<E>(
        arena: &NodeArena,
        mut slot: &mut Slot,
        key: &[u8],
        mut depth: usize,
        make: impl FnOnce() -> Result<u64, E>,
        ks: &impl KeySource,
    ) -> Result<Result<(), u64>, E> {
        loop {
            match slot.get() {
                None => {
                    *slot = Slot::leaf(make()?);
                    return Ok(Ok(()));
                }
                Some(Ref::Leaf(old)) => {
                    // Lazy expansion: split the single-key subtree at the first differing byte.
                    // (The common prefix is measured only for a new key: an update, which
                    // finds its own key here, skips the byte-by-byte walk.)
                    let (equal, p) =
                        ks.with_key(old, |ok| if same(ok, key) { (true, 0) } else { (false, common(ok, key, depth)) });
                    if equal {
                        return Ok(Err(old));
                    }
                    let leaf = make()?;
                    let (mut s, n) = node::new4(arena, &key[depth..depth + p]);
                    let d = depth + p;
                    // SAFETY: a fresh Node4 from `arena`, owned by `s` alone and not yet
                    // linked. It gets two children at most, so it does not grow and `n`
                    // stays valid.
                    unsafe {
                        ks.with_key(old, |ok| {
                            if ok.len() == d {
                                n.set_term(Some(old));
                            } else {
                                node::add(arena, &mut s, ok[d], Slot::leaf(old));
                            }
                        });
                        if key.len() == d {
                            n.set_term(Some(leaf));
                        } else {
                            node::add(arena, &mut s, key[d], Slot::leaf(leaf));
                        }
                    }
                    *slot = s;
                    return Ok(Ok(()));
                }
                Some(Ref::Node(n)) => {
                    if let Some(&b) = key.get(depth) {
                        slot.prefetch_lookup(b);
                    }
                    // SAFETY: `n` is the node in `*slot`, under the write contract (ours).
                    // Prefix borrows end before `set_prefix` replaces the prefix. `ps` is a
                    // fresh Node4 from `arena` that takes over `*slot`'s node; `parent` is
                    // used before `ps` gets children, hence before it can grow. A child
                    // slot borrowed by `find_mut` is only changed below, never through `n`
                    // or a rebuild of `n`.
                    unsafe {
                        // The common case, the whole compressed path matching, by the
                        // word compare of a lookup; the byte walk only where it parts.
                        let p = n.prefix();
                        let whole = key.get(depth..depth + p.len()).is_some_and(|part| same(part, p));
                        let m = if whole { p.len() } else { prefix_mismatch(p, key, depth) };
                        if m < p.len() {
                            // Split the compressed path at the mismatch.
                            let leaf = make()?;
                            let (mut ps, parent) = node::new4(arena, &n.prefix()[..m]);
                            let old_byte = n.prefix()[m];
                            n.set_prefix(&[&n.prefix()[m + 1..]]);
                            let d = depth + m;
                            if key.len() == d {
                                parent.set_term(Some(leaf));
                            } else {
                                node::add(arena, &mut ps, key[d], Slot::leaf(leaf));
                            }
                            node::add(arena, &mut ps, old_byte, *slot);
                            *slot = ps;
                            return Ok(Ok(()));
                        }
                        depth += m;
                        if key.len() == depth {
                            if let Some(t) = n.term() {
                                return Ok(Err(t));
                            }
                            n.set_term(Some(make()?));
                            return Ok(Ok(()));
                        }
                        let b = key[depth];
                        depth += 1;
                        match n.find_mut(b) {
                            Some(child) => slot = child,
                            None => {
                                node::add(arena, slot, b, Slot::leaf(make()?));
                                return Ok(Ok(()));
                            }
                        }
                    }
                }
            }
        }
    }

    /// Remove `key`; returns its leaf.
    pub(crate) fn remove(&mut self, key: &[u8], ks: &impl KeySource) -> Option<u64> {
        // SAFETY: the tree's own root and arena, borrowed exclusively by `&mut self`.
        let r = unsafe { Self::remove_at(&self.arena, &mut self.root, key, self.depth, ks) };
        if let Some(leaf) = r {
            self.len -= 1;
            self.hot.forget(leaf);
        }
        r
    }

    /// [`Art::remove`] below `root`, whose keys share their first `depth` bytes.
    ///
    /// One descent, as [`Art::get`]'s, then a repair at one place: a removal can only
    /// change the node it leaves with no key below, which the descent already knows. A
    /// node keeps a key after the removal unless its subtree held just the removed one,
    /// that is, unless it has one child (the way down) and no key ending at it; under path
    /// compression no such node exists, but the repair does not depend on that. The
    /// descent remembers the deepest node that keeps a key (`keep`) and the slot under it
    /// on the way (`below`): everything under `below` held only the removed key and is
    /// freed, the entry of `below` is taken out of `keep`'s node, and that node alone is
    /// repaired (collapsed into a leaf or into its only child). Measured against the
    /// recursive removal it replaces, which repaired every node on the way back up: see
    /// docs/design/hart.md, "Tried and measured".
    ///
    /// # Safety
    ///
    /// As [`Art::insert_at`] (`root` for its `slot`).
    unsafe fn remove_at(
        arena: &NodeArena,
        root: &mut Slot,
        key: &[u8],
        mut depth: usize,
        ks: &impl KeySource,
    ) -> Option<u64> {
        let mut slot: *mut Slot = root;
        let mut keep: Option<(*mut Slot, u8)> = None;
        let mut below: *mut Slot = slot;
        // SAFETY: every slot pointer is to the root or to a child slot of a node reached
        // from it, all under the write contract (ours). Nothing changes until the key is
        // found, and after that only `below`'s subtree (freed whole), then `keep`'s node:
        // the slots of both lie outside that subtree, and `keep`'s own slot outside its
        // node, so no pointer used is into a node already freed or rebuilt.
        unsafe {
            let removed = loop {
                match (*slot).get()? {
                    Ref::Leaf(l) => {
                        if !ks.with_key(l, |k| same(k, key)) {
                            return None;
                        }
                        *slot = Slot::EMPTY;
                        break l;
                    }
                    Ref::Node(n) => {
                        if let Some(&b) = key.get(depth) {
                            (*slot).prefetch_lookup(b);
                        }
                        let p = n.prefix();
                        if !key.get(depth..depth + p.len()).is_some_and(|part| same(part, p)) {
                            return None;
                        }
                        depth += p.len();
                        if key.len() == depth {
                            let t = n.term()?;
                            n.set_term(None);
                            if n.count() > 0 {
                                // The node keeps its children: only it may need collapsing.
                                Self::collapse(arena, &mut *slot);
                                return Some(t);
                            }
                            break t;
                        }
                        let b = key[depth];
                        let child: *mut Slot = n.find_mut(b)?;
                        if n.count() > 1 || n.term().is_some() {
                            keep = Some((slot, b));
                            below = child;
                        }
                        slot = child;
                        depth += 1;
                    }
                }
            };
            // Nothing under `below` holds a key any more: free its nodes (none if the
            // removed leaf hung right there).
            node::free_tree(arena, std::mem::take(&mut *below));
            if let Some((s, b)) = keep {
                node::remove(arena, &mut *s, b); // may shrink the node: `collapse` re-reads `*s`
                Self::collapse(arena, &mut *s);
            }
            Some(removed)
        }
    }

    /// Restore path compression and lazy expansion at the node in `*slot` after it lost a
    /// child or its own key: a node with no child becomes its key's leaf (or nothing), a
    /// node with one child and no key of its own moves that child up, its path joined to
    /// the child's.
    ///
    /// # Safety
    ///
    /// `*slot` names a node of a tree under [`Art`]'s invariant, allocated from `arena`,
    /// under the write contract; handles into that node are not used afterwards.
    unsafe fn collapse(arena: &NodeArena, slot: &mut Slot) {
        let Some(Ref::Node(n)) = slot.get() else { return };
        // SAFETY: `n` is the node in `*slot`, under the write contract. Where it is freed,
        // `*slot` is overwritten right after and nothing uses `n` again; a surviving only
        // child moves up into `*slot`, keeping exactly one owner, and its new prefix is
        // built before `n` (whose prefix it borrows) is freed.
        unsafe {
            match (n.count(), n.term()) {
                (0, None) => {
                    node::free_node(arena, n);
                    *slot = Slot::EMPTY;
                }
                (0, Some(t)) => {
                    node::free_node(arena, n);
                    *slot = Slot::leaf(t);
                }
                (1, None) => {
                    let (b, only) = n.first_child().expect("one child");
                    if let Some(Ref::Node(c)) = only.get() {
                        c.set_prefix(&[n.prefix(), &[b], c.prefix()]);
                    }
                    node::free_node(arena, n);
                    *slot = only;
                }
                _ => {}
            }
        }
    }

    /// Visit leaves in ascending key order whose keys are `>= start` (if given), stopping
    /// when `f` returns false. `shared` holds the bytes shared by every key of the tree.
    /// Subtrees entirely below `start` are skipped by their path, without reading leaves;
    /// leaves of keys below `start` may still be visited (the caller filters them).
    pub(crate) fn scan(&self, shared: &[u8], start: Option<&[u8]>, f: &mut dyn FnMut(u64) -> bool) -> bool {
        self.walk(shared, start, false, f)
    }

    /// [`Art::scan`] (`reverse` false, `bound` the start) or [`Art::scan_rev`] (`reverse`
    /// true, `bound` the end), from the root.
    fn walk(&self, shared: &[u8], bound: Option<&[u8]>, reverse: bool, f: &mut dyn FnMut(u64) -> bool) -> bool {
        if self.root.is_empty() {
            return true;
        }
        let mut path = shared[..self.depth.min(shared.len())].to_vec();
        // SAFETY: the tree's root, read under `&self`.
        unsafe { Self::walk_at(self.root, &mut path, bound, reverse, f) }
    }

    fn below_start(path: &[u8], start: Option<&[u8]>) -> bool {
        // Every key under `path` is < start iff path < start[..path.len()] strictly.
        match start {
            None => false,
            Some(s) => {
                let n = path.len().min(s.len());
                path[..n] < s[..n]
            }
        }
    }

    /// Visit leaves in descending key order whose keys are `<= end` (if given), stopping
    /// when `f` returns false: [`Art::scan`] mirrored. A node's own leaf (`term`, the key
    /// that ends at the node) sorts before its children, so it comes after them here.
    /// Subtrees entirely above `end` are skipped by their path; leaves of keys above `end`
    /// may still be visited (the caller filters them).
    pub(crate) fn scan_rev(&self, shared: &[u8], end: Option<&[u8]>, f: &mut dyn FnMut(u64) -> bool) -> bool {
        self.walk(shared, end, true, f)
    }

    fn above_end(path: &[u8], end: Option<&[u8]>) -> bool {
        // Every key under `path` is > end iff path > end on their common length, or path
        // extends end (every key under it is then longer than end, hence greater).
        match end {
            None => false,
            Some(e) => {
                let n = path.len().min(e.len());
                path[..n] > e[..n] || (path[..n] == e[..n] && path.len() > e.len())
            }
        }
    }

    /// Every key under `path` lies outside the bound: below `start` (forward) or above
    /// `end` (reverse), so the subtree can be skipped without reading its leaves.
    fn outside(path: &[u8], bound: Option<&[u8]>, reverse: bool) -> bool {
        if reverse {
            Self::above_end(path, bound)
        } else {
            Self::below_start(path, bound)
        }
    }

    /// [`Art::scan`] (or, with `reverse`, [`Art::scan_rev`]) below `c`, whose keys begin
    /// with `path`. A node's own leaf (`term`) sorts before its children: it is visited
    /// first going forward and last going backward (and then only if not above `end`).
    ///
    /// # Safety
    ///
    /// `c` is a slot of a tree with [`Art`]'s invariant that the caller borrows (shared)
    /// for the whole call: the read contract for every node under `c`.
    unsafe fn walk_at(
        c: Slot,
        path: &mut Vec<u8>,
        bound: Option<&[u8]>,
        reverse: bool,
        f: &mut dyn FnMut(u64) -> bool,
    ) -> bool {
        match c.get() {
            None => true,
            Some(Ref::Leaf(l)) => f(l),
            Some(Ref::Node(n)) => {
                let mark = path.len();
                // SAFETY: `n` and its children are nodes of the borrowed tree (the
                // contract); `f` cannot change them (it has no access to the tree).
                let go = unsafe {
                    path.extend_from_slice(n.prefix());
                    let mut go = true;
                    if !Self::outside(path, bound, reverse) {
                        if !reverse {
                            if let Some(t) = n.term() {
                                go = f(t);
                            }
                        }
                        if go {
                            let mut child = |b: u8, child: Slot| {
                                path.push(b);
                                let r = Self::outside(path, bound, reverse)
                                    || Self::walk_at(child, path, bound, reverse, f);
                                path.pop();
                                r
                            };
                            go = if reverse { n.for_each_rev(&mut child) } else { n.for_each(&mut child) };
                        }
                        if go && reverse && bound.is_none_or(|e| path.as_slice() <= e) {
                            if let Some(t) = n.term() {
                                go = f(t);
                            }
                        }
                    }
                    go
                };
                path.truncate(mark);
                go
            }
        }
    }

    /// Leaf of the smallest key (tests: checks the tree's order against a model).
    #[cfg(test)]
    pub(crate) fn min(&self) -> Option<u64> {
        let mut c = self.root;
        loop {
            match c.get()? {
                Ref::Leaf(l) => return Some(l),
                Ref::Node(n) => {
                    // SAFETY: a node of this tree, read under `&self`.
                    unsafe {
                        if let Some(t) = n.term() {
                            return Some(t);
                        }
                        c = n.first_child()?.1;
                    }
                }
            }
        }
    }

    /// Leaf of the largest key (tests).
    #[cfg(test)]
    pub(crate) fn max(&self) -> Option<u64> {
        let mut c = self.root;
        loop {
            match c.get()? {
                Ref::Leaf(l) => return Some(l),
                Ref::Node(n) => {
                    let mut last = None;
                    // SAFETY: a node of this tree, read under `&self`.
                    unsafe {
                        n.for_each_rev(|_, ch| {
                            last = Some(ch);
                            false
                        });
                    }
                    match last {
                        Some(ch) => c = ch,
                        // SAFETY: `n` is a node of this tree, read under `&self`: live and
                        // unchanged meanwhile (the read contract `term` asks for).
                        None => return unsafe { n.term() },
                    }
                }
            }
        }
    }

    /// Node counts and bytes by type, and leaf count.
    pub(crate) fn stats(&self, s: &mut ArtStats) {
        /// # Safety
        ///
        /// As [`Art::scan_at`].
        unsafe fn walk(c: Slot, s: &mut ArtStats) {
            match c.get() {
                None => {}
                Some(Ref::Leaf(_)) => s.leaves += 1,
                // SAFETY: a node of the borrowed tree (the contract), and its children.
                Some(Ref::Node(n)) => unsafe {
                    let i = NodeType::ALL.iter().position(|t| *t == n.node_type()).expect("a node type");
                    s.nodes[i] += 1;
                    s.bytes[i] += n.dram_bytes() as u64;
                    if n.term().is_some() {
                        s.leaves += 1;
                    }
                    n.for_each(|_, ch| {
                        walk(ch, s);
                        true
                    });
                },
            }
        }
        // SAFETY: the tree's root, read under `&self`.
        unsafe { walk(self.root, s) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    struct Keys(Vec<Vec<u8>>);
    impl KeySource for Keys {
        fn with_key<R>(&self, leaf: u64, f: impl FnOnce(&[u8]) -> R) -> R {
            f(&self.0[leaf as usize])
        }
    }

    /// The number of nodes in `art`, after checking that each has a child and holds at
    /// least two keys (children and its own): the shape path compression and lazy
    /// expansion promise after any sequence of inserts and removals.
    fn shape(art: &Art) -> i64 {
        fn walk(s: Slot) -> i64 {
            let Some(Ref::Node(n)) = s.get() else { return 0 };
            // SAFETY: a node of a tree the caller borrows, read only.
            unsafe {
                assert_eq!(s.tagged_kind(), Some(n.node_type()), "the slot word names the node's kind");
                let own = n.term().is_some() as usize;
                assert!(n.count() >= 1 && n.count() + own >= 2, "a node with {} children and {own} key", n.count());
                let (mut nodes, mut children) = (1, 0);
                n.for_each(|_, c| {
                    assert!(!c.is_empty(), "an empty child slot left in a node");
                    children += 1;
                    nodes += walk(c);
                    true
                });
                assert_eq!(children, n.count(), "a node's count is its children's");
                nodes
            }
        }
        walk(art.root)
    }

    fn check_against_model(ops: Vec<(bool, Vec<u8>)>, depth: usize) {
        let mut keys = Keys(Vec::new());
        let mut art = Art::new(depth, Arc::new(NodeArena::new()));
        let mut model: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        let prefix = vec![7u8; depth];
        for (ins, k) in ops {
            let mut key = prefix.clone();
            key.extend_from_slice(&k);
            if ins {
                let id = keys.0.len() as u64;
                keys.0.push(key.clone());
                match art.insert(&key, id, &keys) {
                    Ok(()) => assert!(model.insert(key.clone(), id).is_none()),
                    Err(old) => assert_eq!(model.get(&key), Some(&old)),
                }
            } else {
                assert_eq!(art.remove(&key, &keys), model.remove(&key));
            }
            assert_eq!(art.len(), model.len() as u64);
            assert_eq!(art.arena.live(), shape(&art), "every node allocated is in the tree");
        }
        for (k, v) in &model {
            assert_eq!(art.get(k, &keys), Some(*v));
        }
        let key_of = |l: u64| keys.0[l as usize].clone();
        let mut seen = Vec::new();
        art.scan(&prefix, None, &mut |l| {
            seen.push(key_of(l));
            true
        });
        assert_eq!(seen, model.keys().cloned().collect::<Vec<_>>());
        let mut seen_rev = Vec::new();
        art.scan_rev(&prefix, None, &mut |l| {
            seen_rev.push(key_of(l));
            true
        });
        assert_eq!(seen_rev, model.keys().rev().cloned().collect::<Vec<_>>());
        assert_eq!(art.min().map(key_of), model.keys().next().cloned());
        assert_eq!(art.max().map(key_of), model.keys().next_back().cloned());
        // Scans from (and, in reverse, down from) model keys and keys that are not in the
        // tree: prefixes of keys, keys extended by a byte, keys with a last byte changed.
        let mut bounds: Vec<Vec<u8>> = model.keys().take(12).cloned().collect();
        for k in model.keys().take(6) {
            bounds.push(k[..k.len() / 2].to_vec());
            bounds.push([k.as_slice(), &[0]].concat());
            bounds.push([k.as_slice(), &[2]].concat());
            if let Some((last, rest)) = k.split_last() {
                bounds.push([rest, &[last.wrapping_add(1)]].concat());
                bounds.push([rest, &[last.wrapping_sub(1)]].concat());
            }
        }
        for b in &bounds {
            // The tree may yield keys beyond the bound from a subtree it does not skip
            // (the caller filters them); what it yields within the bound is exact.
            let mut got = Vec::new();
            art.scan(&prefix, Some(b), &mut |l| {
                let k = key_of(l);
                if k.as_slice() >= b.as_slice() {
                    got.push(k);
                }
                true
            });
            let want: Vec<_> = model.range(b.clone()..).map(|(k, _)| k.clone()).collect();
            assert_eq!(got, want, "scan from {b:?}");
            let mut got = Vec::new();
            art.scan_rev(&prefix, Some(b), &mut |l| {
                let k = key_of(l);
                if k.as_slice() <= b.as_slice() {
                    got.push(k);
                }
                true
            });
            let want: Vec<_> = model.range(..=b.clone()).rev().map(|(k, _)| k.clone()).collect();
            assert_eq!(got, want, "reverse scan down from {b:?}");
            // Stopping: the visitor's `false` ends the walk at once, both ways.
            for rev in [false, true] {
                let mut n = 0;
                let mut stop = |_| {
                    n += 1;
                    false
                };
                let finished =
                    if rev { art.scan_rev(&prefix, Some(b), &mut stop) } else { art.scan(&prefix, Some(b), &mut stop) };
                assert_eq!((finished, n <= 1), (n == 0, true));
            }
        }
    }

    proptest! {
        // `same` agrees with slice equality for equal strings, strings differing in one
        // byte anywhere (including inside the overlap of its two words), and different
        // lengths.
        #[test]
        fn same_is_slice_equality(a in proptest::collection::vec(any::<u8>(), 0..40), at in any::<usize>(), flip in 1u8..=255, cut in 0usize..3) {
            prop_assert!(same(&a, &a.clone()));
            if !a.is_empty() {
                let mut b = a.clone();
                b[at % a.len()] ^= flip;
                prop_assert!(!same(&a, &b));
                prop_assert!(!same(&b, &a));
                let short = &a[..a.len().saturating_sub(cut)];
                prop_assert_eq!(same(&a, short), cut == 0);
            }
        }

        // SPEC H2: the ART agrees with BTreeMap on small alphabets (deep sharing, prefix
        // keys, zero bytes) for any sequence of inserts and removes.
        #[test]
        fn art_matches_btreemap(ops in proptest::collection::vec((any::<bool>(), proptest::collection::vec(0u8..4, 0..6)), 1..300), depth in 0usize..3) {
            check_against_model(ops, depth);
        }
    }

    #[test]
    fn grows_and_shrinks_through_all_node_types() {
        let ops: Vec<(bool, Vec<u8>)> = (0..=255u8)
            .map(|b| (true, vec![1, b]))
            .chain((0..=255u8).map(|b| (false, vec![1, b])))
            .chain((0..=255u8).rev().map(|b| (true, vec![b, 2, 3])))
            .collect();
        check_against_model(ops, 0);
    }
}
