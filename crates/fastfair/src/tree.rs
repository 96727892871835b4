//! [`FastFair`] and its operations: search (readers take no lock), insert and update,
//! delete, ordered scans both ways.

use crate::error::{corrupt, Result};
use crate::layout::*;
use crate::read::leaf_stale;
use parking_lot::Mutex;
use pmkv_core::{KeyRange, RecoveryReport, Visitor};
use pmkv_substrate::epalloc::EpAlloc;
use pmkv_substrate::Pool;
use std::cmp::Ordering as Cmp;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// FAST&FAIR's options: none yet (the node size is fixed by the format).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {}

/// An open FAST&FAIR tree over one pool.
pub struct FastFair {
    pub(crate) pool: Arc<Pool>,
    pub(crate) alloc: EpAlloc,
    /// Superblock offset.
    pub(crate) sb: u64,
    /// The leftmost leaf: the start of the leaf list, never replaced (nothing merges).
    pub(crate) first_leaf: u64,
    /// The pool's mode flushes (`adr`, `msync`): every store of a shift is persisted.
    pub(crate) flushes: bool,
    pub(crate) read_only: bool,
    /// Node lock words, in DRAM (see `FastFair::lock_word`): 2^[`LOCK_BITS`] stripes.
    pub(crate) locks: Box<[AtomicU64]>,
    /// Serialises growing the tree by a new root.
    pub(crate) root_lock: Mutex<()>,
    pub(crate) count: AtomicU64,
    pub(crate) recovery: RecoveryReport,
    /// `close` sealed the tree already.
    pub(crate) closed: bool,
    pub(crate) _claim: pmkv_substrate::EngineClaim,
}

/// Node lock stripes of a tree: 2^14 (128 KiB of DRAM), enough that writers to
/// different nodes rarely share one.
pub(crate) const LOCK_BITS: u32 = 14;

/// Where a descent goes: to the node whose range holds `key` (`strict`: holds the keys
/// just below `key`), or to the last node of a level.
#[derive(Clone, Copy)]
pub(crate) enum Target<'a> {
    Key { key: &'a [u8], kw: u64, strict: bool },
    Max,
}

/// Where one step of a descent goes: right to the node's sibling (B-link), or down to
/// `child` (the node is at `level`; a leaf's `child` means nothing).
pub(crate) enum Step {
    Right(u64),
    Down { level: u32, child: u64 },
}

/// A node's live slots read in place, in slot order, up to the first null pointer:
/// `(slot, pointer)` of each slot `read::live`'s rule keeps (inner nodes: a pointer
/// repeating the one before, the leftmost child for slot 0, is a duplicate; leaves:
/// `read::leaf_stale`). No copy of the node
/// is made: a caller stops where its search ends, and validates what it read by the
/// node's version.
pub(crate) struct InPlace<'a> {
    t: &'a FastFair,
    node: u64,
    leaf: bool,
    prev: u64,
    /// A leaf's last live entry.
    prev_entry: Option<(u64, u64)>,
    /// The next slot to read, and its pointer.
    i: usize,
    p: u64,
}

impl<'a> InPlace<'a> {
    pub(crate) fn new(t: &'a FastFair, node: u64, level: u32, leftmost: u64) -> Self {
        let left = FastFair::left_of(level, leftmost);
        InPlace { t, node, leaf: level == 0, prev: left, prev_entry: None, i: 0, p: t.load(ptr_at(node, 0)) }
    }

    /// Count the lines read so far: the header's and the slot lines up to the last slot read.
    pub(crate) fn note_read(&self) {
        self.t.pool.note_read_at(self.node, (HEADER + (self.i as u64 + 1) * ENTRY) as usize);
    }
}

impl Iterator for InPlace<'_> {
    type Item = (usize, u64);
    fn next(&mut self) -> Option<(usize, u64)> {
        while self.p != 0 && self.i < SLOTS {
            let (i, p) = (self.i, self.p);
            let next = if i + 1 < SLOTS { self.t.load(ptr_at(self.node, i + 1)) } else { 0 };
            let live = if self.leaf {
                let e = (self.t.load(key_at(self.node, i)), p);
                let live = !leaf_stale(self.prev_entry, e);
                if live {
                    self.prev_entry = Some(e);
                }
                live
            } else {
                p != self.prev
            };
            (self.prev, self.p, self.i) = (p, next, i + 1);
            if live {
                return Some((i, p));
            }
        }
        None
    }
}

/// A node lock, released when dropped.
pub(crate) struct Locked<'a> {
    t: &'a FastFair,
    pub(crate) node: u64,
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.t.unlock(self.node);
    }
}

impl FastFair {
    /// The full key of entry `(kw, ptr)` of a node of `level`: a leaf entry's key (an
    /// inline entry's key word, or its record's key), an inner entry's child's low key.
    pub(crate) fn entry_key(&self, level: u32, kw: u64, ptr: u64) -> std::result::Result<Vec<u8>, String> {
        if level == 0 {
            return Ok(self.leaf_entry(kw, ptr)?.0);
        }
        if !self.valid_node(ptr) {
            return Err(format!("inner entry names {ptr:#x}, which is not a node"));
        }
        Ok(self.read_obj(self.load(ptr + H_LOW_PTR))?.key().to_vec())
    }

    /// Leaf entry `(kw, v)` as its key and value: an inline entry's key word and value
    /// word, or its record's (verified).
    pub(crate) fn leaf_entry(&self, kw: u64, v: u64) -> std::result::Result<(Vec<u8>, Vec<u8>), String> {
        if is_rec(v) {
            let o = self.read_obj(rec_off(v))?;
            Ok((o.key().to_vec(), o.value().to_vec()))
        } else {
            Ok((kw.to_be_bytes().to_vec(), v.to_le_bytes().to_vec()))
        }
    }

    /// The low key of node `n` (its immutable separator).
    fn low_key(&self, n: u64) -> Result<Vec<u8>> {
        let p = self.load(n + H_LOW_PTR);
        Ok(self.read_obj(p).map_err(corrupt)?.key().to_vec())
    }

    /// Whether a descent to `t` goes right of a separator with key word `skw`, whose full
    /// key `full` gives.
    fn right_of(
        t: Target<'_>,
        skw: u64,
        full: impl FnOnce() -> std::result::Result<Vec<u8>, String>,
    ) -> std::result::Result<bool, String> {
        match t {
            Target::Max => Ok(true),
            Target::Key { key, kw, strict } => {
                let c = match skw.cmp(&kw) {
                    Cmp::Equal => full()?.as_slice().cmp(key),
                    c => c,
                };
                Ok(if strict { c == Cmp::Less } else { c != Cmp::Greater })
            }
        }
    }

    /// How many of the first `n` entries (`kw`, `ptr`) of a node of `level` a descent
    /// to `t` goes right of (they are sorted).
    pub(crate) fn rank(
        &self,
        level: u32,
        kw: &[u64],
        ptr: &[u64],
        t: Target<'_>,
    ) -> std::result::Result<usize, String> {
        let (mut lo, mut hi) = (0, kw.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if Self::right_of(t, kw[mid], || self.entry_key(level, kw[mid], ptr[mid]))? {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// Whether `t` lies at or right of node `sib`'s low key: the B-link step of a
    /// descent that meets a node split after its parent was read (FAIR).
    pub(crate) fn past(&self, sib: u64, t: Target<'_>) -> Result<bool> {
        if !self.valid_node(sib) {
            return Err(corrupt(format!("a sibling pointer names {sib:#x}, which is not a node")));
        }
        let skw = self.load(sib + H_LOW_KW);
        Self::right_of(t, skw, || self.low_key(sib).map_err(|e| e.to_string())).map_err(corrupt)
    }

    /// One consistent step of a descent at `node` (the paper's linear search, §4.3): the
    /// live entries are read in place, in slot order, skipping duplicates (`read::live`'s
    /// rule), until the first one `t` does not go right of, with no copy of the node. If
    /// `t` goes right of every live entry, the node's sibling may hold it (a split the
    /// parent does not know yet): the B-link step. Validated by the node's version and
    /// retried while a writer changes it. At level `want` (or below) only the key words
    /// are compared, for the B-link test alone: the caller searches that node itself.
    fn step(&self, node: u64, t: Target<'_>, want: u32) -> Result<Step> {
        loop {
            let version = self.read_version(node);
            let level = self.load(node + H_LEVEL) as u32;
            let sibling = self.load(node + H_SIBLING);
            let leftmost = self.load(node + H_LEFTMOST);
            let mut child = leftmost;
            let mut stopped = false;
            let mut err = None;
            let mut slots = InPlace::new(self, node, level, leftmost);
            for (i, p) in slots.by_ref() {
                if level <= want {
                    // Below a live key word, so below the sibling's low key.
                    if matches!(t, Target::Key { kw, .. } if self.load(key_at(node, i)) > kw) {
                        stopped = true;
                        break;
                    }
                    continue;
                }
                let k = self.load(key_at(node, i));
                match Self::right_of(t, k, || self.entry_key(level, k, p)) {
                    Ok(true) => child = p,
                    Ok(false) => {
                        stopped = true;
                        break;
                    }
                    Err(e) => {
                        err = Some(e);
                        break;
                    }
                }
            }
            if !self.unchanged(node, version) {
                continue;
            }
            slots.note_read();
            if let Some(e) = err {
                return Err(corrupt(e));
            }
            return Ok(if !stopped && sibling != 0 && self.past(sibling, t)? {
                Step::Right(sibling)
            } else {
                Step::Down { level, child }
            });
        }
    }

    /// Descend from the root to the node of `level` whose range holds `t`, taking no lock.
    pub(crate) fn descend(&self, t: Target<'_>, level: u32) -> Result<u64> {
        let mut node = self.load(self.sb + SB_ROOT);
        for _ in 0..(1u64 << 24) {
            if !self.valid_node(node) {
                return Err(corrupt(format!("the tree names {node:#x}, which is not a node")));
            }
            match self.step(node, t, level)? {
                Step::Right(sib) => node = sib,
                Step::Down { level: l, .. } if l < level => {
                    return Err(corrupt(format!("node {node:#x} is at level {l}, below {level}")));
                }
                Step::Down { level: l, .. } if l == level => return Ok(node),
                Step::Down { child, .. } => node = child,
            }
        }
        Err(corrupt("a descent did not end: the tree has a cycle"))
    }

    /// Lock the node of `level` whose range holds `t`, moving right past splits.
    pub(crate) fn lock_for(&self, t: Target<'_>, level: u32) -> Result<Locked<'_>> {
        let node = self.descend(t, level)?;
        self.lock(node);
        let mut g = Locked { t: self, node };
        for _ in 0..(1u64 << 24) {
            let sib = self.load(g.node + H_SIBLING);
            if sib == 0 || !self.past(sib, t)? {
                return Ok(g);
            }
            drop(g);
            self.lock(sib);
            g = Locked { t: self, node: sib };
        }
        Err(corrupt("a sibling chain did not end: the tree has a cycle"))
    }

    /// The index of `key`'s entry in a leaf's entries, or `None`.
    fn find_in(&self, kw: &[u64], ptr: &[u64], key: &[u8], k: u64) -> std::result::Result<Option<usize>, String> {
        let i = self.rank(0, kw, ptr, Target::Key { key, kw: k, strict: true })?;
        if i < kw.len() && kw[i] == k && self.entry_key(0, kw[i], ptr[i])? == key {
            return Ok(Some(i));
        }
        Ok(None)
    }

    /// Call `f` with the value of `key`, if present: a linear search of the leaf's live
    /// entries in place for the key word, then the inline value word or the record
    /// (validated by the leaf's version: a record read while a writer changed the leaf
    /// may have been freed and reused meanwhile).
    pub fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        enum Found {
            Inline(u64),
            Record(crate::read::Obj),
        }
        let kw = key_word(key);
        let t = Target::Key { key, kw, strict: false };
        let mut leaf = self.descend(t, 0)?;
        loop {
            let version = self.read_version(leaf);
            let sibling = self.load(leaf + H_SIBLING);
            let mut found: std::result::Result<Option<Found>, String> = Ok(None);
            let mut beyond = false;
            let mut slots = InPlace::new(self, leaf, 0, 0);
            for (i, p) in slots.by_ref() {
                let k = self.load(key_at(leaf, i));
                if k > kw {
                    beyond = true;
                    break;
                }
                if k != kw {
                    continue;
                }
                if !is_rec(p) {
                    if key.len() == 8 {
                        found = Ok(Some(Found::Inline(p)));
                        break;
                    }
                    continue;
                }
                match self.read_obj(rec_off(p)) {
                    Ok(o) if o.key() == key => {
                        found = Ok(Some(Found::Record(o)));
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        found = Err(e);
                        break;
                    }
                }
            }
            if !self.unchanged(leaf, version) {
                continue;
            }
            slots.note_read();
            match found {
                Ok(Some(Found::Inline(w))) => {
                    f(&w.to_le_bytes());
                    return Ok(true);
                }
                Ok(Some(Found::Record(obj))) => {
                    f(obj.value());
                    return Ok(true);
                }
                Err(e) => return Err(corrupt(e)),
                Ok(None) => {}
            }
            // Past every live key: a split may have moved the key right (B-link).
            if !beyond && sibling != 0 && self.past(sibling, t)? {
                leaf = sibling;
                continue;
            }
            return Ok(false);
        }
    }

    fn check_sizes(key: &[u8], value: Option<&[u8]>) -> Result<()> {
        pmkv_core::check_sizes(key, value, MAX_KEY, MAX_VALUE)
    }

    /// Insert or replace. An 8-byte key with an 8-byte value goes inline in its leaf
    /// entry (`layout::inline_word`); anything else, or a key whose key word another
    /// entry of the leaf shares, in a record written and published first. An insert links
    /// the entry with a FAST shift (splitting the leaf with FAIR when full); an update
    /// swaps the entry's value word with one 8-byte store (and frees the old record, if
    /// there was one).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Self::check_sizes(key, Some(value))?;
        self.pool.check_writable()?;
        let r = self.link(key, value);
        self.pool.commit_fence();
        r
    }

    /// A new record of `(key, value)`, as its tagged value word.
    fn new_record(&self, key: &[u8], value: &[u8]) -> Result<u64> {
        let off = self.new_obj(RECORD, key, value)?;
        if off >= REC_LIMIT {
            let _ = self.alloc.try_free(off);
            return Err(crate::error::Error::Invalid(format!(
                "a record at offset {off:#x}: FAST&FAIR names records below 2^48 bytes"
            )));
        }
        Ok(rec_word(off))
    }

    fn link(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let kw = key_word(key);
        let t = Target::Key { key, kw, strict: false };
        let g = self.lock_for(t, 0)?;
        let mut raw = self.raw(g.node);
        let n = raw.n;
        let inline = inline_word(key, value);
        let found = self.find_in(&raw.kw[..n], &raw.ptr[..n], key, kw).map_err(corrupt)?;
        if let Some(i) = found {
            // An inline entry shares its key word with no other entry of the leaf.
            let tie = (i > 0 && raw.kw[i - 1] == kw) || (i + 1 < n && raw.kw[i + 1] == kw);
            let word = match inline {
                Some(w) if !tie => w,
                _ => self.new_record(key, value)?,
            };
            let old = raw.ptr[i];
            // One 8-byte store and its flush; `put`'s commit fence makes it durable,
            // unless an old record is freed, which must follow the swap.
            self.store_flush(ptr_at(g.node, i), word);
            drop(g);
            if is_rec(old) {
                self.pool.fence();
                self.alloc.try_free(rec_off(old))?;
            }
            return Ok(());
        }
        let pos = self.rank(0, &raw.kw[..n], &raw.ptr[..n], Target::Key { key, kw, strict: true }).map_err(corrupt)?;
        // Neighbours with the same key word: the new entry is a record, and so becomes an
        // inline neighbour first (one 8-byte store of its value word, an update).
        let ties: Vec<usize> =
            [pos.checked_sub(1), (pos < n).then_some(pos)].into_iter().flatten().filter(|&j| raw.kw[j] == kw).collect();
        for &j in &ties {
            if !is_rec(raw.ptr[j]) {
                let w = self.new_record(&raw.kw[j].to_be_bytes(), &raw.ptr[j].to_le_bytes())?;
                self.pstore(ptr_at(g.node, j), w);
                raw.ptr[j] = w;
            }
        }
        let word = match inline {
            Some(w) if ties.is_empty() => w,
            _ => self.new_record(key, value)?,
        };
        if n < CAP {
            self.fast_insert(g.node, &raw, pos, kw, word, true);
            drop(g);
            self.count.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let (skw, sobj, right) = match self.split(&g, &raw, pos, kw, word, Some(key)) {
            Ok(s) => s,
            Err(e) => {
                if is_rec(word) {
                    let _ = self.alloc.try_free(rec_off(word));
                }
                return Err(e);
            }
        };
        drop(g);
        self.count.fetch_add(1, Ordering::Relaxed);
        // The entry is in the tree now: a parent entry that cannot be added (a full
        // pool) leaves the new node reachable through its left sibling (B-link), which
        // searches follow, and recovery rebuilds the inner nodes.
        let _ = self.insert_parent(1, skw, sobj, right);
        Ok(())
    }

    /// Remove `key`; whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        Self::check_sizes(key, None)?;
        self.pool.check_writable()?;
        let kw = key_word(key);
        let g = self.lock_for(Target::Key { key, kw, strict: false }, 0)?;
        let raw = self.raw(g.node);
        let Some(i) = self.find_in(&raw.kw[..raw.n], &raw.ptr[..raw.n], key, kw).map_err(corrupt)? else {
            return Ok(false);
        };
        let old = raw.ptr[i];
        // An inline entry's delete ends with the shift; a record's is freed after it.
        self.fast_delete(g.node, &raw, i, !is_rec(old));
        drop(g);
        self.count.fetch_sub(1, Ordering::Relaxed);
        if is_rec(old) {
            self.alloc.try_free(rec_off(old))?;
        }
        self.pool.commit_fence();
        Ok(true)
    }

    /// A leaf's entries, read consistently: (keys and values, sibling, low key pointer).
    #[allow(clippy::type_complexity)]
    fn leaf_records(&self, leaf: u64) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, u64, u64)> {
        loop {
            let s = self.snap(leaf);
            if s.level != 0 {
                return Err(corrupt(format!("the leaf list names {leaf:#x}, which is at level {}", s.level)));
            }
            let r: std::result::Result<Vec<_>, String> = (0..s.n).map(|j| self.leaf_entry(s.kw[j], s.ptr[j])).collect();
            if !self.unchanged(leaf, s.version) {
                continue;
            }
            return Ok((r.map_err(corrupt)?, s.sibling, s.low_ptr));
        }
    }

    /// Visit the records of `range` in order (`reverse`: descending) until
    /// `visit` returns false or `limit` were visited.
    pub fn scan(&self, range: &KeyRange, limit: usize, reverse: bool, visit: Visitor<'_>) -> Result<()> {
        if limit == 0 {
            return Ok(());
        }
        let (start, end) = (range.start_bound(), range.end_bound());
        let above_start = |k: &[u8]| range.after_start(k);
        let below_end = |k: &[u8]| range.before_end(k);
        let mut left = limit;
        if !reverse {
            let mut node = match start {
                Bound::Unbounded => self.first_leaf,
                Bound::Included(k) | Bound::Excluded(k) => {
                    self.descend(Target::Key { key: k, kw: key_word(k), strict: false }, 0)?
                }
            };
            // Keys only grow: a key not above the last one visited is a copy a split
            // (or its crash) left in the node before (FAIR).
            let mut last: Option<Vec<u8>> = None;
            for _ in 0..(1u64 << 40) {
                let (recs, sibling, _) = self.leaf_records(node)?;
                for (k, v) in &recs {
                    let k = k.as_slice();
                    if last.as_deref().is_some_and(|l| k <= l) || !above_start(k) {
                        continue;
                    }
                    if !below_end(k) || !visit(k, v) {
                        return Ok(());
                    }
                    left -= 1;
                    if left == 0 {
                        return Ok(());
                    }
                    last = Some(k.to_vec());
                }
                if sibling == 0 {
                    return Ok(());
                }
                if !self.valid_node(sibling) {
                    return Err(corrupt(format!("a leaf's sibling is {sibling:#x}, not a node")));
                }
                node = sibling;
            }
            return Err(corrupt("the leaf list does not end"));
        }
        // Reverse: leaves link only rightwards, so each step descends again to the leaf
        // holding the keys just below the lowest one seen (or below the leaf's low key).
        let mut upper: Bound<Vec<u8>> = end.map(<[u8]>::to_vec);
        for _ in 0..(1u64 << 40) {
            let t = match &upper {
                Bound::Unbounded => Target::Max,
                Bound::Included(k) => Target::Key { key: k, kw: key_word(k), strict: false },
                Bound::Excluded(k) => Target::Key { key: k, kw: key_word(k), strict: true },
            };
            let leaf = self.descend(t, 0)?;
            let (recs, _, low_ptr) = self.leaf_records(leaf)?;
            for (k, v) in recs.iter().rev() {
                let k = k.as_slice();
                let below = match &upper {
                    Bound::Unbounded => true,
                    Bound::Included(u) => k <= u.as_slice(),
                    Bound::Excluded(u) => k < u.as_slice(),
                };
                if !below {
                    continue;
                }
                if !above_start(k) || !visit(k, v) {
                    return Ok(());
                }
                left -= 1;
                if left == 0 {
                    return Ok(());
                }
                upper = Bound::Excluded(k.to_vec());
            }
            if low_ptr == 0 {
                return Ok(());
            }
            let low = self.read_obj(low_ptr).map_err(corrupt)?.key().to_vec();
            if !above_start(&low) || matches!(start, Bound::Included(s) if s == low.as_slice()) {
                return Ok(());
            }
            upper = Bound::Excluded(low);
        }
        Err(corrupt("a reverse scan did not end"))
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pool under the tree.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// What the open's recovery did.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// `msync` or fence, as the pool's mode needs.
    pub fn sync(&self) -> Result<()> {
        Ok(self.pool.sync()?)
    }
}
