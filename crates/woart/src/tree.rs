//! [`Woart`] and its operations: insert with path-compression splits and node
//! growth, delete, lookup and ordered scans, each a sequence of persisted writes of new
//! objects followed by one 8-byte atomic store that publishes them.
//!
//! Concurrency: the paper's WOART is single-writer. pmkv puts one `RwLock` over the tree:
//! writers exclusive, readers shared.

use crate::error::Result;
use crate::layout::*;
use crate::node::{corrupt, Pm, Populations};
use parking_lot::RwLock;
use pmkv_core::{KeyRange, RecoveryReport, Visitor};
use pmkv_substrate::epalloc::EpAlloc;
use pmkv_substrate::{EngineClaim, Pool};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Typed options of WOART (none yet; kept for the common engine shape).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {}

/// A WOART tree in one pool.
pub struct Woart {
    pub(crate) pool: Arc<Pool>,
    pub(crate) alloc: EpAlloc,
    /// Which write paths the tree takes (fixed at format, named by the superblock's magic).
    pub(crate) variant: Variant,
    /// The superblock's offset.
    pub(crate) sb: u64,
    /// The root Node256's offset (never replaced).
    pub(crate) root: u64,
    pub(crate) lock: RwLock<()>,
    /// Child counts of the Node48s and Node256s (`Pm::population`), changed under the
    /// write lock.
    pub(crate) pops: Populations,
    pub(crate) count: AtomicU64,
    /// Wrapping sum of the leaves' hashes, sealed at a clean close.
    pub(crate) hash: AtomicU64,
    pub(crate) recovery: RecoveryReport,
    pub(crate) closed: bool,
    pub(crate) _claim: EngineClaim,
}

/// One node on the way down to a leaf: its kind, offset, the slot naming it (0 for the
/// root) and the byte of the edge taken from it.
pub(crate) struct Step {
    pub(crate) kind: Kind,
    pub(crate) n: u64,
    pub(crate) ps: u64,
    pub(crate) b: u8,
}

/// Where a key's leaf hangs: the node holding its slot (`at`: the child byte, `None` for
/// the terminal slot), the slot naming that node, and with `record` the nodes above.
pub(crate) struct Found {
    pub(crate) path: Vec<Step>,
    pub(crate) kind: Kind,
    pub(crate) n: u64,
    pub(crate) ps: u64,
    pub(crate) at: Option<u8>,
    pub(crate) leaf: u64,
}

/// What a put did.
enum Put {
    /// Linked a new leaf where the key was absent.
    Added,
    /// Linked a new leaf in place of the key's old leaf (returned, untagged).
    Replaced(u64),
    /// Stored the new value in the key's leaf (untagged), whose hash was `old_hash`.
    InPlace { leaf: u64, old_hash: u64 },
}

/// What an ordered scan has still to visit: a leaf, or a node met at depth `d` whose
/// parent's key prefix is `base` bytes long, reached by the edge byte `edge`.
enum Visit {
    Leaf(u64),
    Node { kind: Kind, n: u64, d: usize, base: usize, edge: Option<u8> },
}

fn common(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Whether every key with prefix `p` lies outside `(lo, hi)`.
fn pruned(p: &[u8], lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    let below = match lo {
        Bound::Included(s) | Bound::Excluded(s) => p < s && !s.starts_with(p),
        Bound::Unbounded => false,
    };
    let above = match hi {
        Bound::Included(e) | Bound::Excluded(e) => p > e,
        Bound::Unbounded => false,
    };
    below || above
}

impl Woart {
    pub(crate) fn pm(&self) -> Pm<'_> {
        Pm { pool: &self.pool, alloc: &self.alloc, pops: Some(&self.pops) }
    }

    /// The pool under the tree.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// What the open's recovery did.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn check_sizes(key: &[u8], value: &[u8]) -> Result<()> {
        pmkv_core::check_sizes(key, Some(value), MAX_KEY, MAX_VALUE)
    }

    /// Where the leaf of `key` hangs, if present (lock held by the caller). Prefixes are
    /// skipped optimistically and the whole key compared at the leaf. With `record`, the
    /// nodes above the leaf's node are listed (a delete's way back up).
    fn find_leaf(&self, pm: &Pm<'_>, key: &[u8], record: bool) -> Result<Option<Found>> {
        let (mut kind, mut n, mut ps, mut d) = (Kind::N256, self.root, 0u64, 0usize);
        let mut path = Vec::new();
        loop {
            d += pm.eff_plen(n, d)?;
            if key.len() < d {
                return Ok(None);
            }
            let (at, s) = if key.len() == d {
                (None, n + TERM)
            } else {
                match pm.find_child(kind, n, key[d]) {
                    Some(s) => (Some(key[d]), s),
                    None => return Ok(None),
                }
            };
            match (untag(pm.load(s)), at) {
                (Some((Kind::Leaf, l)), _) => {
                    return Ok((pm.leaf_key(l) == key).then_some(Found { path, kind, n, ps, at, leaf: l }));
                }
                (Some((k, c)), Some(b)) => {
                    if record {
                        path.push(Step { kind, n, ps, b });
                    }
                    (kind, n, ps, d) = (k, c, s, d + 1);
                }
                _ => return Ok(None),
            }
        }
    }

    /// Call `f` with the value of `key`, if present.
    pub fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        if key.len() > MAX_KEY {
            return Ok(false);
        }
        let _g = self.lock.read();
        let pm = self.pm();
        match self.find_leaf(&pm, key, false)? {
            Some(found) => {
                f(pm.leaf(found.leaf).1);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Insert or replace. A value of at most 8 bytes replacing one of the same length is
    /// stored in place in its leaf's value word (one 8-byte store, as woart.c's update);
    /// otherwise a new leaf is written, published and linked by one store.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Self::check_sizes(key, value)?;
        self.pool.check_writable()?;
        let _g = self.lock.write();
        let pm = self.pm();
        let mut made = None;
        match self.insert(&pm, key, value, &mut made) {
            Ok(Put::InPlace { leaf, old_hash }) => {
                self.hash.fetch_sub(old_hash, Ordering::Relaxed);
                self.hash.fetch_add(pm.leaf_hash_of(leaf), Ordering::Relaxed);
                Ok(())
            }
            Ok(done) => {
                // `insert` links a leaf it made for every outcome but in place.
                let Some(leaf) = made else { return Err(corrupt("a put linked no leaf")) };
                if let Put::Replaced(old) = done {
                    self.hash.fetch_sub(pm.leaf_hash_of(old), Ordering::Relaxed);
                    // Unfenced: a crash that loses the reset leaves a used, unlinked
                    // leaf, which the unclean open's sweep frees; the next fence of
                    // this thread (or the close's) makes it durable.
                    self.alloc.free_unfenced(old);
                } else {
                    self.count.fetch_add(1, Ordering::Relaxed);
                }
                self.hash.fetch_add(pm.leaf_hash_of(leaf & !7), Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                // Never linked: give it back (a crash before this is the open's sweep's).
                if let Some(leaf) = made {
                    let _ = self.alloc.try_free(leaf & !7);
                }
                Err(e)
            }
        }
    }

    /// The new leaf of `key` and `value` (tagged), written and published at its first use.
    fn leaf_of(pm: &Pm<'_>, key: &[u8], value: &[u8], made: &mut Option<u64>) -> Result<u64> {
        if let Some(l) = *made {
            return Ok(l);
        }
        let l = pm.new_leaf(key, value)?;
        *made = Some(l);
        Ok(l)
    }

    /// Replace the value of `key`'s leaf `old` (untagged) in place if it can be, else link
    /// a new leaf at `slot` with one store.
    fn replace_value(
        pm: &Pm<'_>,
        slot: u64,
        old: u64,
        key: &[u8],
        value: &[u8],
        made: &mut Option<u64>,
    ) -> Result<Put> {
        let old_hash = pm.leaf_hash_of(old);
        if pm.update_in_place(old, value) {
            return Ok(Put::InPlace { leaf: old, old_hash });
        }
        pm.store_persist(slot, Self::leaf_of(pm, key, value, made)?);
        Ok(Put::Replaced(old))
    }

    /// Link `key` with `value` (its leaf written at first use into `made`, tagged), or
    /// replace the value in place.
    fn insert(&self, pm: &Pm<'_>, key: &[u8], value: &[u8], made: &mut Option<u64>) -> Result<Put> {
        let (mut kind, mut n, mut d) = (Kind::N256, self.root, 0usize);
        let mut ps = 0u64; // the slot that points to `n` (none for the root)
        loop {
            let p = pm.eff_plen(n, d)?;
            if p > 0 {
                let pre = pm.prefix(kind, n, d)?.ok_or_else(|| corrupt(format!("node {n:#x} is empty")))?;
                let m = common(&pre, &key[d.min(key.len())..]);
                if m < p {
                    // Path-compression split: a new Node4 over the common part, linked
                    // by one store. WOART then rewrites the old node's header in place,
                    // one more store: a crash between the two leaves it stale, which
                    // every reader recognises by its depth and the open repairs. ART+CoW
                    // puts a copy with the new header under the Node4 instead and frees
                    // the old node, so nothing is ever stale.
                    if ps == 0 {
                        return Err(corrupt("the root has a prefix"));
                    }
                    let leaf = Self::leaf_of(pm, key, value, made)?;
                    let below = Header::new(d + m + 1, &pre[m + 1..]).encode();
                    let cow = self.variant == Variant::ArtCow;
                    let old = if cow { pm.copy_node(kind, n, below, None, None)? } else { tagged(kind, n) };
                    let mut entries = vec![(pre[m], old)];
                    let term = if key.len() == d + m {
                        leaf
                    } else {
                        entries.push((key[d + m], leaf));
                        0
                    };
                    entries.sort_unstable_by_key(|e| e.0);
                    let nn = pm.new_node(Kind::N4, Header::new(d, &pre[..m]).encode(), term, &entries);
                    let nn = nn.inspect_err(|_| {
                        if cow {
                            pm.forget(old & !7);
                            let _ = self.alloc.try_free(old & !7);
                        }
                    })?;
                    pm.store_persist(ps, tagged(Kind::N4, nn));
                    if cow {
                        pm.forget(n);
                        self.alloc.free_unfenced(n);
                    } else {
                        pm.store_persist(n + HDR, below);
                    }
                    return Ok(Put::Added);
                }
                d += p;
            }
            if key.len() == d {
                // The prefixes above were compared: a terminal leaf here holds `key`.
                return match untag(pm.load(n + TERM)) {
                    Some((Kind::Leaf, old)) => Self::replace_value(pm, n + TERM, old, key, value, made),
                    _ => {
                        pm.store_persist(n + TERM, Self::leaf_of(pm, key, value, made)?);
                        Ok(Put::Added)
                    }
                };
            }
            let b = key[d];
            let Some(slot) = pm.find_child(kind, n, b) else {
                // WOART adds in place through the node's commit word; ART+CoW only where
                // that is one pointer store (Node256). Otherwise a copy with the child,
                // of the next larger kind if the node is full, replaces the node.
                let leaf = Self::leaf_of(pm, key, value, made)?;
                let in_place = self.variant == Variant::Woart || kind == Kind::N256;
                if !(in_place && pm.add_child(kind, n, b, leaf)) {
                    let copy = pm.copy_node(kind, n, pm.load(n + HDR), Some((b, leaf)), None)?;
                    self.replace(pm, n, ps, copy)?;
                }
                return Ok(Put::Added);
            };
            let w = pm.load(slot);
            match untag(w) {
                Some((Kind::Leaf, l)) => {
                    let ok = pm.leaf_key(l);
                    if ok == key {
                        return Self::replace_value(pm, slot, l, key, value, made);
                    }
                    let leaf = Self::leaf_of(pm, key, value, made)?;
                    // Two keys under one byte: a new Node4 below, its prefix their
                    // common part, linked by one store.
                    let d1 = d + 1;
                    let j = common(&ok[d1.min(ok.len())..], &key[d1..]);
                    let mut entries = Vec::new();
                    let mut term = 0;
                    for (k, w) in [(ok, w), (key, leaf)] {
                        if k.len() == d1 + j {
                            term = w;
                        } else {
                            entries.push((k[d1 + j], w));
                        }
                    }
                    entries.sort_unstable_by_key(|e| e.0);
                    let nn = pm.new_node(Kind::N4, Header::new(d1, &key[d1..d1 + j]).encode(), term, &entries)?;
                    pm.store_persist(slot, tagged(Kind::N4, nn));
                    return Ok(Put::Added);
                }
                Some((k, c)) => {
                    (kind, n, ps, d) = (k, c, slot, d + 1);
                }
                None => return Err(corrupt(format!("node {n:#x}: bad child word {w:#x}"))),
            }
        }
    }

    /// Swing the slot `ps` that names node `n` to `copy` (a published copy of `n`) with one
    /// store, then free `n`. A crash after the swing leaves `n` used but unreachable: the
    /// open's sweep frees it.
    pub(crate) fn replace(&self, pm: &Pm<'_>, n: u64, ps: u64, copy: u64) -> Result<()> {
        if ps == 0 {
            pm.forget(copy & !7);
            let _ = self.alloc.try_free(copy & !7);
            return Err(corrupt("the root node cannot be replaced"));
        }
        pm.store_persist(ps, copy);
        pm.forget(n);
        self.alloc.free_unfenced(n);
        Ok(())
    }

    /// Remove `key`; whether it was present. The leaf is unlinked (WOART: `unlink`,
    /// ART+CoW: `cow_unlink`), then freed; nodes are not shrunk to a smaller kind.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        if key.len() > MAX_KEY {
            return Ok(false);
        }
        self.pool.check_writable()?;
        let _g = self.lock.write();
        let pm = self.pm();
        let Some(found) = self.find_leaf(&pm, key, true)? else { return Ok(false) };
        let leaf = found.leaf;
        match self.variant {
            Variant::Woart => self.unlink(&pm, found),
            Variant::ArtCow => self.cow_unlink(&pm, found)?,
        }
        self.hash.fetch_sub(pm.leaf_hash_of(leaf), Ordering::Relaxed);
        self.count.fetch_sub(1, Ordering::Relaxed);
        self.alloc.free_unfenced(leaf);
        Ok(true)
    }

    /// WOART's delete: one commit-word store removes the leaf; a node left empty is then
    /// unlinked from its parent (one store each) and freed, bottom up.
    fn unlink(&self, pm: &Pm<'_>, f: Found) {
        match f.at {
            None => pm.store_persist(f.n + TERM, 0),
            Some(b) => pm.remove_child(f.kind, f.n, b),
        }
        let (mut kind, mut n, mut path) = (f.kind, f.n, f.path);
        while n != self.root && pm.is_empty(kind, n) {
            let Some(up) = path.pop() else { break };
            pm.remove_child(up.kind, up.n, up.b);
            pm.forget(n);
            self.alloc.free_unfenced(n);
            (kind, n) = (up.kind, up.n);
        }
    }

    /// ART+CoW's delete: the highest node that the removal would leave empty goes with
    /// the leaf, so the whole change is one store: a cleared terminal slot or Node256
    /// pointer, or the parent's pointer swung to a copy of the node without the child.
    /// The nodes cut off and the replaced node are freed afterwards (a crash first leaves
    /// them to the open's sweep).
    fn cow_unlink(&self, pm: &Pm<'_>, f: Found) -> Result<()> {
        let Found { mut path, mut kind, mut n, mut ps, mut at, .. } = f;
        let mut cut = Vec::new();
        while n != self.root && pm.population(kind, n) == 1 {
            let Some(up) = path.pop() else { break };
            cut.push(n);
            (kind, n, ps, at) = (up.kind, up.n, up.ps, Some(up.b));
        }
        match at {
            None => pm.store_persist(n + TERM, 0),
            Some(b) if kind == Kind::N256 => pm.remove_child(kind, n, b),
            Some(b) => {
                let copy = pm.copy_node(kind, n, pm.load(n + HDR), None, Some(b))?;
                self.replace(pm, n, ps, copy)?;
            }
        }
        for c in cut {
            pm.forget(c);
            self.alloc.free_unfenced(c);
        }
        Ok(())
    }

    /// Visit the records of `range` in order (`rev`: descending), at most `limit`.
    pub fn scan(&self, range: &KeyRange, limit: usize, rev: bool, visit: Visitor<'_>) -> Result<()> {
        if limit == 0 {
            return Ok(());
        }
        let (lo, hi) = (range.start_bound(), range.end_bound());
        let _g = self.lock.read();
        let pm = self.pm();
        let mut left = limit;
        let mut path = Vec::new();
        let mut stack = vec![Visit::Node { kind: Kind::N256, n: self.root, d: 0, base: 0, edge: None }];
        while let Some(v) = stack.pop() {
            match v {
                Visit::Leaf(l) => {
                    let (k, v) = pm.leaf(l);
                    if range.contains(k) {
                        left -= 1;
                        if !visit(k, v) || left == 0 {
                            return Ok(());
                        }
                    }
                }
                Visit::Node { kind, n, d, base, edge } => {
                    path.truncate(base);
                    path.extend(edge);
                    if pruned(&path, lo, hi) {
                        continue;
                    }
                    let Some(pre) = pm.prefix(kind, n, d)? else { continue };
                    path.extend_from_slice(&pre);
                    if pruned(&path, lo, hi) {
                        continue;
                    }
                    let (d, base) = (d + pre.len() + 1, path.len());
                    let mut items: Vec<Visit> = Vec::new();
                    if let Some((Kind::Leaf, t)) = untag(pm.load(n + TERM)) {
                        items.push(Visit::Leaf(t));
                    }
                    for (b, _, w) in pm.children(kind, n) {
                        match untag(w) {
                            Some((Kind::Leaf, l)) => items.push(Visit::Leaf(l)),
                            Some((kind, n)) => items.push(Visit::Node { kind, n, d, base, edge: Some(b) }),
                            None => {}
                        }
                    }
                    // The stack pops last first: push the visiting order reversed.
                    if rev {
                        stack.extend(items);
                    } else {
                        stack.extend(items.into_iter().rev());
                    }
                }
            }
        }
        Ok(())
    }

    /// Write the seal (record count and hash) so that the next clean open can verify
    /// the tree. Run with no writer in the tree.
    pub(crate) fn seal(&self) {
        if self.pool.is_read_only() || self.pool.is_poisoned() {
            return;
        }
        let pm = self.pm();
        let (c, h) = (self.count.load(Ordering::Relaxed), self.hash.load(Ordering::Relaxed));
        pm.store(self.sb + SB_SEAL_COUNT, c);
        pm.store(self.sb + SB_SEAL_HASH, h);
        pm.store(self.sb + SB_SEAL_CHECK, seal_check(self.variant.magic(), c, h));
        self.pool.persist_off(self.sb + SB_SEAL_COUNT, 24);
    }

    /// Seal, close the pool and mark it clean.
    pub fn close(mut self) -> Result<()> {
        self.seal();
        self.closed = true;
        pmkv_core::close_after(self.pool.clone(), || drop(self))
    }

    /// `msync` or fence, as the pool's mode needs.
    pub fn sync(&self) -> Result<()> {
        Ok(self.pool.sync()?)
    }
}

impl Drop for Woart {
    fn drop(&mut self) {
        if !self.closed && !std::thread::panicking() {
            self.seal();
        }
    }
}
