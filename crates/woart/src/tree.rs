//! [`Woart`] and its operations: insert with path-compression splits and node
//! growth, delete, lookup and ordered scans, each a sequence of persisted writes of new
//! objects followed by one 8-byte atomic store that publishes them.
//!
//! Concurrency: the paper's WOART is single-writer. pmkv puts one `RwLock` over the tree:
//! writers exclusive, readers shared.

use crate::error::{Error, Result};
use crate::layout::*;
use crate::node::{corrupt, Pm};
use parking_lot::RwLock;
use pmkv_core::RecoveryReport;
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
    /// The superblock's offset.
    pub(crate) sb: u64,
    /// The root Node256's offset (never replaced).
    pub(crate) root: u64,
    pub(crate) lock: RwLock<()>,
    pub(crate) count: AtomicU64,
    /// Wrapping sum of the leaves' hashes, sealed at a clean close.
    pub(crate) hash: AtomicU64,
    pub(crate) recovery: RecoveryReport,
    pub(crate) closed: bool,
    pub(crate) _claim: EngineClaim,
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

fn in_range(k: &[u8], lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    (match lo {
        Bound::Included(s) => k >= s,
        Bound::Excluded(s) => k > s,
        Bound::Unbounded => true,
    }) && match hi {
        Bound::Included(e) => k <= e,
        Bound::Excluded(e) => k < e,
        Bound::Unbounded => true,
    }
}

impl Woart {
    pub(crate) fn pm(&self) -> Pm<'_> {
        Pm { pool: &self.pool, alloc: &self.alloc }
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
        if key.len() > MAX_KEY {
            return Err(Error::KeyTooLarge(key.len()));
        }
        if value.len() > MAX_VALUE {
            return Err(Error::ValueTooLarge(value.len()));
        }
        Ok(())
    }

    /// The leaf of `key`, if present (lock held by the caller). Prefixes are skipped
    /// optimistically and the whole key compared at the leaf.
    fn lookup(&self, pm: &Pm<'_>, key: &[u8]) -> Result<Option<u64>> {
        let (mut kind, mut n, mut d) = (Kind::N256, self.root, 0usize);
        loop {
            d += pm.eff_plen(n, d)?;
            if key.len() < d {
                return Ok(None);
            }
            let w = if key.len() == d {
                pm.load(n + TERM)
            } else {
                match pm.find_child(kind, n, key[d]) {
                    Some(s) => pm.load(s),
                    None => return Ok(None),
                }
            };
            match untag(w) {
                Some((Kind::Leaf, l)) => return Ok((pm.leaf_key(l) == key).then_some(l)),
                Some((k, c)) if key.len() > d => {
                    (kind, n, d) = (k, c, d + 1);
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
        match self.lookup(&pm, key)? {
            Some(l) => {
                f(pm.leaf(l).1);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Insert or replace.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Self::check_sizes(key, value)?;
        self.pool.check_writable()?;
        let _g = self.lock.write();
        let pm = self.pm();
        let leaf = pm.new_leaf(key, value)?;
        let lh = pm.leaf_hash_of(leaf & !7);
        match self.insert(&pm, key, leaf) {
            Ok(old) => {
                if let Some(old) = old {
                    self.hash.fetch_sub(pm.leaf_hash_of(old), Ordering::Relaxed);
                    // Unfenced: a crash that loses the reset leaves a used, unlinked
                    // leaf, which the unclean open's sweep frees; the next fence of
                    // this thread (or the close's) makes it durable.
                    self.alloc.free_unfenced(old);
                } else {
                    self.count.fetch_add(1, Ordering::Relaxed);
                }
                self.hash.fetch_add(lh, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                // Never linked: give it back (a crash before this is the open's sweep's).
                let _ = self.alloc.try_free(leaf & !7);
                Err(e)
            }
        }
    }

    /// Link the published leaf `leaf` (tagged) under `key`; the replaced leaf, if any.
    fn insert(&self, pm: &Pm<'_>, key: &[u8], leaf: u64) -> Result<Option<u64>> {
        let (mut kind, mut n, mut d) = (Kind::N256, self.root, 0usize);
        let mut ps = 0u64; // the slot that points to `n` (none for the root)
        loop {
            let p = pm.eff_plen(n, d)?;
            if p > 0 {
                let pre = pm.prefix(kind, n, d)?.ok_or_else(|| corrupt(format!("node {n:#x} is empty")))?;
                let m = common(&pre, &key[d.min(key.len())..]);
                if m < p {
                    // Path-compression split: a new Node4 over the common part,
                    // linked by one store; then the old node's header, one more store.
                    // A crash between the two leaves the old header stale, which every
                    // reader recognises by its depth and the open repairs.
                    let mut entries = vec![(pre[m], tagged(kind, n))];
                    let term = if key.len() == d + m {
                        leaf
                    } else {
                        entries.push((key[d + m], leaf));
                        0
                    };
                    entries.sort_unstable_by_key(|e| e.0);
                    let nn = pm.new_node(Kind::N4, Header::new(d, &pre[..m]).encode(), term, &entries)?;
                    if ps == 0 {
                        return Err(corrupt("the root has a prefix"));
                    }
                    pm.store_persist(ps, tagged(Kind::N4, nn));
                    pm.store_persist(n + HDR, Header::new(d + m + 1, &pre[m + 1..]).encode());
                    return Ok(None);
                }
                d += p;
            }
            if key.len() == d {
                let old = pm.load(n + TERM);
                pm.store_persist(n + TERM, leaf);
                return Ok(untag(old).map(|(_, o)| o));
            }
            let b = key[d];
            let Some(slot) = pm.find_child(kind, n, b) else {
                if !pm.add_child(kind, n, b, leaf) {
                    self.grow(pm, kind, n, ps, b, leaf)?;
                }
                return Ok(None);
            };
            let w = pm.load(slot);
            match untag(w) {
                Some((Kind::Leaf, l)) => {
                    let ok = pm.leaf_key(l);
                    if ok == key {
                        pm.store_persist(slot, leaf);
                        return Ok(Some(l));
                    }
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
                    return Ok(None);
                }
                Some((k, c)) => {
                    (kind, n, ps, d) = (k, c, slot, d + 1);
                }
                None => return Err(corrupt(format!("node {n:#x}: bad child word {w:#x}"))),
            }
        }
    }

    /// Node growth: copy `n` and the new child into a larger node, persist and publish
    /// it, swing the parent's slot to it with one store, then free `n`. A crash after the
    /// swing leaves `n` used but unreachable: the open's sweep frees it.
    fn grow(&self, pm: &Pm<'_>, kind: Kind, n: u64, ps: u64, b: u8, leaf: u64) -> Result<()> {
        let mut entries: Vec<(u8, u64)> = pm.children(kind, n).into_iter().map(|(b, _, w)| (b, w)).collect();
        entries.push((b, leaf));
        entries.sort_unstable_by_key(|e| e.0);
        let big = kind.grown();
        let nn = pm.new_node(big, pm.load(n + HDR), pm.load(n + TERM), &entries)?;
        if ps == 0 {
            return Err(corrupt("the root node is full"));
        }
        pm.store_persist(ps, tagged(big, nn));
        self.alloc.free_unfenced(n);
        Ok(())
    }

    /// Remove `key`; whether it was present. The leaf's pointer is removed with one
    /// atomic store, then the leaf is freed; nodes left empty are unlinked and freed
    /// bottom up (nodes are not shrunk to a smaller kind).
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        if key.len() > MAX_KEY {
            return Ok(false);
        }
        self.pool.check_writable()?;
        let _g = self.lock.write();
        let pm = self.pm();
        let (mut kind, mut n, mut d) = (Kind::N256, self.root, 0usize);
        let mut path: Vec<(Kind, u64, u8)> = Vec::new();
        let leaf = loop {
            d += pm.eff_plen(n, d)?;
            if key.len() < d {
                return Ok(false);
            }
            if key.len() == d {
                match untag(pm.load(n + TERM)) {
                    Some((Kind::Leaf, l)) if pm.leaf_key(l) == key => {
                        pm.store_persist(n + TERM, 0);
                        break l;
                    }
                    _ => return Ok(false),
                }
            }
            let b = key[d];
            let Some(s) = pm.find_child(kind, n, b) else { return Ok(false) };
            match untag(pm.load(s)) {
                Some((Kind::Leaf, l)) => {
                    if pm.leaf_key(l) != key {
                        return Ok(false);
                    }
                    pm.remove_child(kind, n, b);
                    break l;
                }
                Some((k, c)) => {
                    path.push((kind, n, b));
                    (kind, n, d) = (k, c, d + 1);
                }
                None => return Ok(false),
            }
        };
        self.hash.fetch_sub(pm.leaf_hash_of(leaf), Ordering::Relaxed);
        self.count.fetch_sub(1, Ordering::Relaxed);
        self.alloc.free_unfenced(leaf);
        while n != self.root && pm.is_empty(kind, n) {
            let Some((pk, pn, pb)) = path.pop() else { break };
            pm.remove_child(pk, pn, pb);
            self.alloc.free_unfenced(n);
            (kind, n) = (pk, pn);
        }
        Ok(true)
    }

    /// Visit the records in `[lo, hi]` in order (`rev`: descending), at most `limit`.
    pub fn scan(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        limit: usize,
        rev: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        if limit == 0 {
            return Ok(());
        }
        let _g = self.lock.read();
        let pm = self.pm();
        let mut left = limit;
        let mut path = Vec::new();
        self.scan_node(&pm, Kind::N256, self.root, 0, &mut path, (lo, hi), rev, &mut left, visit)?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn scan_node(
        &self,
        pm: &Pm<'_>,
        kind: Kind,
        n: u64,
        d: usize,
        path: &mut Vec<u8>,
        (lo, hi): (Bound<&[u8]>, Bound<&[u8]>),
        rev: bool,
        left: &mut usize,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<bool> {
        let Some(pre) = pm.prefix(kind, n, d)? else { return Ok(true) };
        let len0 = path.len();
        path.extend_from_slice(&pre);
        if pruned(path, lo, hi) {
            path.truncate(len0);
            return Ok(true);
        }
        let d2 = d + pre.len();
        let mut items: Vec<(Option<u8>, u64)> = vec![(None, pm.load(n + TERM))];
        items.extend(pm.children(kind, n).into_iter().map(|(b, _, w)| (Some(b), w)));
        if rev {
            items.reverse();
        }
        for (b, w) in items {
            let cont = match untag(w) {
                Some((Kind::Leaf, l)) => {
                    let (k, v) = pm.leaf_noted(l);
                    if in_range(k, lo, hi) {
                        *left -= 1;
                        visit(k, v) && *left > 0
                    } else {
                        true
                    }
                }
                Some((k, c)) => match b {
                    Some(b) => {
                        path.push(b);
                        let r = if pruned(path, lo, hi) {
                            true
                        } else {
                            self.scan_node(pm, k, c, d2 + 1, path, (lo, hi), rev, left, visit)?
                        };
                        path.pop();
                        r
                    }
                    None => true,
                },
                None => true,
            };
            if !cont {
                path.truncate(len0);
                return Ok(false);
            }
        }
        path.truncate(len0);
        Ok(true)
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
        pm.store(self.sb + SB_SEAL_CHECK, seal_check(c, h));
        self.pool.persist_off(self.sb + SB_SEAL_COUNT, 24);
    }

    /// Seal, close the pool and mark it clean.
    pub fn close(mut self) -> Result<()> {
        self.seal();
        self.closed = true;
        let pool = self.pool.clone();
        drop(self);
        match Arc::try_unwrap(pool) {
            Ok(pool) => Ok(pool.close()?),
            Err(_) => Ok(()),
        }
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
