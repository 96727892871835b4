//! The four node kinds of ART as WOART lays them out in PM, with the 8-byte
//! commit word of each: a child is written and persisted in a slot no reader looks at,
//! then one atomic 8-byte store makes it visible (Node4's sorted slot array with its
//! count, Node16's bitmap, Node48's index byte, Node256's pointer itself).
//!
//! Everything here runs under the tree's lock (writers exclusive), so a reader never
//! meets a half-made change; the commit-word order is what a *crash* can interrupt.

use crate::error::{Error, Result};
use crate::layout::*;
use parking_lot::Mutex;
use pmkv_substrate::epalloc::EpAlloc;
use pmkv_substrate::Pool;
use std::collections::HashMap;

/// The number of children of each Node48 and Node256 (DRAM only; see [`Pm::population`]).
pub(crate) type Populations = Mutex<HashMap<u64, u16>>;

/// PM access for the tree's code: loads, stores and persists of one pool.
pub(crate) struct Pm<'a> {
    pub(crate) pool: &'a Pool,
    pub(crate) alloc: &'a EpAlloc,
    /// The open tree's child counts of its Node48s and Node256s, kept by every change
    /// made through this `Pm`; `None` while the open's walk runs (it counts them itself).
    pub(crate) pops: Option<&'a Populations>,
}

pub(crate) fn corrupt(m: impl Into<String>) -> Error {
    Error::Corrupt(m.into())
}

impl Pm<'_> {
    pub(crate) fn load(&self, off: u64) -> u64 {
        // SAFETY: words are only written through `store`, under the tree's write lock;
        // `load_u64` checks alignment and bounds.
        unsafe { self.pool.load_u64(off) }
    }
    pub(crate) fn byte(&self, off: u64) -> u8 {
        (self.load(off & !7) >> ((off & 7) * 8)) as u8
    }
    /// One 8-byte atomic store and its persist.
    pub(crate) fn store_persist(&self, off: u64, v: u64) {
        // SAFETY: the word belongs to a node or leaf of this tree, written only by the
        // holder of the write lock (the caller).
        unsafe { self.pool.store_u64(off, v) };
        self.pool.persist_off(off, 8);
    }
    /// Store without the persist (the caller flushes and fences).
    pub(crate) fn store(&self, off: u64, v: u64) {
        // SAFETY: as `store_persist`.
        unsafe { self.pool.store_u64(off, v) };
    }
    /// Replace one byte by rewriting its aligned word (single writer).
    pub(crate) fn store_byte(&self, off: u64, b: u8) {
        let w = off & !7;
        let sh = (off & 7) * 8;
        let old = self.load(w);
        self.store(w, (old & !(0xff << sh)) | u64::from(b) << sh);
    }
    pub(crate) fn bytes(&self, off: u64, len: usize) -> &[u8] {
        // SAFETY: callers pass ranges of validated objects (the open's walk checked every
        // reachable object against the allocator); leaves are immutable once published.
        unsafe { std::slice::from_raw_parts(self.pool.at::<u8>(off), len) }
    }

    /// Report the PM lines of `[off, off + len)` as read, so that the counters and the
    /// read-latency emulation see the tree's reads as they see the other engines'.
    pub(crate) fn note(&self, off: u64, len: usize) {
        self.pool.note_read_at(off, len);
    }

    /// A leaf's key and value, and the bytes its value adds after the key (0 for a value
    /// in the value word).
    fn leaf_parts(&self, off: u64) -> (&[u8], &[u8], usize) {
        let h = self.load(off);
        let (kl, vl) = (h as u32 as usize, (h >> 32) as usize);
        let key = self.bytes(off + LEAF_HEAD as u64, kl);
        if inline_value(vl) {
            (key, self.bytes(off + LEAF_VALUE, vl), 0)
        } else {
            (key, self.bytes(off + (LEAF_HEAD + kl) as u64, vl), vl)
        }
    }

    /// A leaf's key and value.
    pub(crate) fn leaf(&self, off: u64) -> (&[u8], &[u8]) {
        let (k, v, after) = self.leaf_parts(off);
        self.note(off, LEAF_HEAD + k.len() + after);
        (k, v)
    }
    /// A leaf's key (only its lines are reported read).
    pub(crate) fn leaf_key(&self, off: u64) -> &[u8] {
        let k = self.leaf_parts(off).0;
        self.note(off, LEAF_HEAD + k.len());
        k
    }
    /// The leaf's contribution to the seal's hash.
    pub(crate) fn leaf_hash_of(&self, off: u64) -> u64 {
        let h = self.load(off);
        leaf_hash(self.load(off + 8) as u32, h as u32 as usize, (h >> 32) as usize, self.load(off + LEAF_VALUE))
    }

    /// Replace the value of leaf `off` (the caller's, under the write lock) in place when
    /// both the old and the new value live in the value word and have the same length:
    /// one 8-byte store and its persist, as woart.c swaps a leaf's value pointer. Whether
    /// it did; otherwise the caller writes a new leaf.
    pub(crate) fn update_in_place(&self, off: u64, value: &[u8]) -> bool {
        let vl = (self.load(off) >> 32) as usize;
        if vl != value.len() || !inline_value(vl) {
            return false;
        }
        self.store_persist(off + LEAF_VALUE, value_word(value));
        true
    }

    /// Write a new leaf (key + value) and publish it; not linked yet.
    pub(crate) fn new_leaf(&self, key: &[u8], value: &[u8]) -> Result<u64> {
        let after = if inline_value(value.len()) { 0 } else { value.len() };
        let size = LEAF_HEAD + key.len() + after;
        let off = self.alloc.alloc(LEAF, size)?;
        let mut head = [0u8; LEAF_HEAD];
        head[..4].copy_from_slice(&(key.len() as u32).to_le_bytes());
        head[4..8].copy_from_slice(&(value.len() as u32).to_le_bytes());
        head[8..12].copy_from_slice(&leaf_crc(key, value).to_le_bytes());
        if after == 0 {
            head[LEAF_VALUE as usize..].copy_from_slice(&value_word(value).to_le_bytes());
        }
        let p = self.pool.at::<u8>(off);
        // SAFETY: a reserved object of at least this size that no one else can reach.
        unsafe {
            std::ptr::copy_nonoverlapping(head.as_ptr(), p, LEAF_HEAD);
            std::ptr::copy_nonoverlapping(key.as_ptr(), p.add(LEAF_HEAD), key.len());
            if after != 0 {
                std::ptr::copy_nonoverlapping(value.as_ptr(), p.add(LEAF_HEAD + key.len()), value.len());
            }
        }
        // Flushed, not fenced: `publish`'s fence orders the content before the bit. A
        // crash that keeps the bit and loses content leaves a used leaf nothing links,
        // which the unclean open's sweep frees.
        self.pool.flush_off(off, size);
        self.alloc.try_publish(off)?;
        Ok(tagged(Kind::Leaf, off))
    }

    /// Write a new node of `kind` with header word `hdr`, terminal slot `term` and
    /// `entries` (sorted by byte), persist and publish it; not linked yet.
    pub(crate) fn new_node(&self, kind: Kind, hdr: u64, term: u64, entries: &[(u8, u64)]) -> Result<u64> {
        debug_assert!(entries.len() <= kind.cap());
        let mut img = vec![0u8; kind.size()];
        let put = |img: &mut [u8], at: u64, v: u64| img[at as usize..at as usize + 8].copy_from_slice(&v.to_le_bytes());
        put(&mut img, HDR, hdr);
        put(&mut img, TERM, term);
        match kind {
            Kind::N4 => {
                let mut meta = (entries.len() as u64) << 32;
                for (i, &(b, w)) in entries.iter().enumerate() {
                    meta |= (i as u64) << (8 * i);
                    img[N4_KEYS as usize + i] = b;
                    put(&mut img, N4_CHILD + 8 * i as u64, w);
                }
                put(&mut img, N4_META, meta);
            }
            Kind::N16 => {
                let mut bm = 0u64;
                for (i, &(b, w)) in entries.iter().enumerate() {
                    bm |= 1 << i;
                    img[N16_KEYS as usize + i] = b;
                    put(&mut img, N16_CHILD + 8 * i as u64, w);
                }
                put(&mut img, N16_BITMAP, bm);
            }
            Kind::N48 => {
                for (i, &(b, w)) in entries.iter().enumerate() {
                    img[N48_INDEX as usize + b as usize] = i as u8 + 1;
                    put(&mut img, N48_CHILD + 8 * i as u64, w);
                }
            }
            Kind::N256 => {
                for &(b, w) in entries {
                    put(&mut img, N256_CHILD + 8 * u64::from(b), w);
                }
            }
            Kind::Leaf => unreachable!("leaves are made by new_leaf"),
        }
        let off = self.alloc.alloc(kind.type_id(), img.len())?;
        // SAFETY: a reserved object of at least `img.len()` bytes no one else can reach.
        unsafe { std::ptr::copy_nonoverlapping(img.as_ptr(), self.pool.at::<u8>(off), img.len()) };
        // Flushed; `publish`'s fence orders it (see `new_leaf`).
        self.pool.flush_off(off, img.len());
        if let Err(e) = self.alloc.try_publish(off) {
            self.alloc.unreserve(off);
            return Err(e.into());
        }
        if matches!(kind, Kind::N48 | Kind::N256) {
            if let Some(p) = self.pops {
                p.lock().insert(off, entries.len() as u16);
            }
        }
        Ok(off)
    }

    /// Add `delta` to the child count of Node48/Node256 `n`.
    fn count_children(&self, n: u64, delta: i32) {
        if let Some(p) = self.pops {
            let mut p = p.lock();
            let c = p.entry(n).or_insert(0);
            *c = (i32::from(*c) + delta).clamp(0, 256) as u16;
        }
    }

    /// Forget the child count of node `n`, about to be freed.
    pub(crate) fn forget(&self, n: u64) {
        if let Some(p) = self.pops {
            p.lock().remove(&n);
        }
    }

    /// How many slots of node `n` are in use (its children and its terminal leaf), from
    /// metadata rather than by reading every slot: a Node4's commit word holds its count
    /// and a Node16's bitmap its positions (both in the header's line); a Node48's or
    /// Node256's count is kept in DRAM (ART keeps `num_children` in its node header; in
    /// PM that would be one more store and line per insert and delete into those nodes,
    /// and the open's walk counts them anyway). A delete decides emptiness by this:
    /// counting a Node256's children by reading them read 38 lines per delete (6 now).
    pub(crate) fn population(&self, kind: Kind, n: u64) -> usize {
        self.note(n, 24);
        let term = usize::from(self.load(n + TERM) != 0);
        let kids = match kind {
            Kind::N4 => self.n4_meta(n).0.min(4),
            Kind::N16 => (self.load(n + N16_BITMAP) & 0xffff).count_ones() as usize,
            Kind::N48 | Kind::N256 => match self.pops.and_then(|p| p.lock().get(&n).copied()) {
                Some(c) => usize::from(c),
                None => self.children(kind, n).len(),
            },
            Kind::Leaf => 0,
        };
        debug_assert_eq!(kids, self.children_unnoted(kind, n).len(), "node {n:#x}'s kept child count");
        kids + term
    }

    pub(crate) fn header(&self, n: u64) -> Header {
        Header::decode(self.load(n + HDR))
    }

    fn n4_meta(&self, n: u64) -> (usize, [u8; 4]) {
        let m = self.load(n + N4_META);
        (((m >> 32) & 0xff) as usize, (m as u32).to_le_bytes())
    }

    /// The children of node `n`, sorted by byte: (byte, slot offset, pointer word).
    pub(crate) fn children(&self, kind: Kind, n: u64) -> Vec<(u8, u64, u64)> {
        self.note(n, kind.size());
        self.children_unnoted(kind, n)
    }

    /// [`Pm::children`] without reporting the reads (a debug check's).
    fn children_unnoted(&self, kind: Kind, n: u64) -> Vec<(u8, u64, u64)> {
        let mut out = Vec::new();
        match kind {
            Kind::N4 => {
                let (cnt, idx) = self.n4_meta(n);
                for &pos in idx.iter().take(cnt.min(4)) {
                    let pos = u64::from(pos & 3);
                    let s = n + N4_CHILD + 8 * pos;
                    out.push((self.byte(n + N4_KEYS + pos), s, self.load(s)));
                }
            }
            Kind::N16 => {
                let bm = self.load(n + N16_BITMAP);
                for pos in (0..16u64).filter(|p| bm & (1 << p) != 0) {
                    let s = n + N16_CHILD + 8 * pos;
                    out.push((self.byte(n + N16_KEYS + pos), s, self.load(s)));
                }
                out.sort_unstable_by_key(|e| e.0);
            }
            Kind::N48 => {
                for b in 0..256u64 {
                    let i = self.byte(n + N48_INDEX + b);
                    if i != 0 && i <= 48 {
                        let s = n + N48_CHILD + 8 * u64::from(i - 1);
                        out.push((b as u8, s, self.load(s)));
                    }
                }
            }
            Kind::N256 => {
                for b in 0..256u64 {
                    let s = n + N256_CHILD + 8 * b;
                    let w = self.load(s);
                    if w != 0 {
                        out.push((b as u8, s, w));
                    }
                }
            }
            Kind::Leaf => {}
        }
        out
    }

    /// The slot of the child at byte `b`, if there is one.
    pub(crate) fn find_child(&self, kind: Kind, n: u64, b: u8) -> Option<u64> {
        let s = match kind {
            Kind::N4 => {
                let (cnt, idx) = self.n4_meta(n);
                let pos = idx
                    .iter()
                    .take(cnt.min(4))
                    .map(|&p| u64::from(p & 3))
                    .find(|&p| self.byte(n + N4_KEYS + p) == b)?;
                n + N4_CHILD + 8 * pos
            }
            Kind::N16 => {
                let bm = self.load(n + N16_BITMAP);
                let pos = (0..16u64).find(|&p| bm & (1 << p) != 0 && self.byte(n + N16_KEYS + p) == b)?;
                n + N16_CHILD + 8 * pos
            }
            Kind::N48 => match self.byte(n + N48_INDEX + u64::from(b)) {
                0 => return None,
                i => n + N48_CHILD + 8 * u64::from((i - 1) % 48),
            },
            Kind::N256 => n + N256_CHILD + 8 * u64::from(b),
            Kind::Leaf => return None,
        };
        self.note(n, 16);
        if s / 64 != n / 64 {
            self.note(s, 8);
        }
        (self.load(s) != 0).then_some(s)
    }

    /// Add child `w` at byte `b` (absent) if the node has room: the child is written and
    /// persisted first, then the commit word. `false` if the node is full.
    pub(crate) fn add_child(&self, kind: Kind, n: u64, b: u8, w: u64) -> bool {
        match kind {
            Kind::N4 => {
                let (cnt, idx) = self.n4_meta(n);
                if cnt >= 4 {
                    return false;
                }
                let used = &idx[..cnt];
                let pos = (0..4u8).find(|p| !used.contains(p)).expect("a free position");
                self.store_byte(n + N4_KEYS + u64::from(pos), b);
                self.store(n + N4_CHILD + 8 * u64::from(pos), w);
                self.pool.flush_off(n + N4_KEYS, 8);
                self.pool.persist_off(n + N4_CHILD + 8 * u64::from(pos), 8);
                // The new sorted slot array with the count: one atomic store.
                let at = used.iter().position(|&p| self.byte(n + N4_KEYS + u64::from(p)) > b).unwrap_or(cnt);
                let mut order: Vec<u8> = used.to_vec();
                order.insert(at, pos);
                let mut meta = ((cnt + 1) as u64) << 32;
                for (i, p) in order.iter().enumerate() {
                    meta |= u64::from(*p) << (8 * i);
                }
                self.store_persist(n + N4_META, meta);
            }
            Kind::N16 => {
                let bm = self.load(n + N16_BITMAP);
                let Some(pos) = (0..16u64).find(|p| bm & (1 << p) == 0) else { return false };
                self.store_byte(n + N16_KEYS + pos, b);
                self.store(n + N16_CHILD + 8 * pos, w);
                self.pool.flush_off(n + N16_KEYS + pos, 1);
                self.pool.persist_off(n + N16_CHILD + 8 * pos, 8);
                self.store_persist(n + N16_BITMAP, bm | 1 << pos);
            }
            Kind::N48 => {
                let mut taken = [false; 48];
                for c in 0..256u64 {
                    let i = self.byte(n + N48_INDEX + c);
                    if i != 0 {
                        taken[usize::from((i - 1) % 48)] = true;
                    }
                }
                let Some(slot) = taken.iter().position(|t| !t) else { return false };
                self.store_persist(n + N48_CHILD + 8 * slot as u64, w);
                self.store_byte(n + N48_INDEX + u64::from(b), slot as u8 + 1);
                self.pool.persist_off(n + N48_INDEX + u64::from(b), 1);
                self.count_children(n, 1);
            }
            Kind::N256 => {
                self.store_persist(n + N256_CHILD + 8 * u64::from(b), w);
                self.count_children(n, 1);
            }
            Kind::Leaf => return false,
        }
        true
    }

    /// Remove the child at byte `b` with one atomic store of the commit word.
    pub(crate) fn remove_child(&self, kind: Kind, n: u64, b: u8) {
        match kind {
            Kind::N4 => {
                let (cnt, idx) = self.n4_meta(n);
                let order: Vec<u8> = idx[..cnt.min(4)]
                    .iter()
                    .copied()
                    .filter(|&p| self.byte(n + N4_KEYS + u64::from(p & 3)) != b)
                    .collect();
                let mut meta = (order.len() as u64) << 32;
                for (i, p) in order.iter().enumerate() {
                    meta |= u64::from(*p) << (8 * i);
                }
                self.store_persist(n + N4_META, meta);
            }
            Kind::N16 => {
                let bm = self.load(n + N16_BITMAP);
                let gone = (0..16u64).filter(|&p| bm & (1 << p) != 0 && self.byte(n + N16_KEYS + p) == b);
                let mask = gone.fold(0u64, |m, p| m | 1 << p);
                self.store_persist(n + N16_BITMAP, bm & !mask);
            }
            Kind::N48 => {
                self.store_byte(n + N48_INDEX + u64::from(b), 0);
                self.pool.persist_off(n + N48_INDEX + u64::from(b), 1);
                self.count_children(n, -1);
            }
            Kind::N256 => {
                self.store_persist(n + N256_CHILD + 8 * u64::from(b), 0);
                self.count_children(n, -1);
            }
            Kind::Leaf => {}
        }
    }

    /// Whether the node holds nothing (no terminal leaf, no child).
    pub(crate) fn is_empty(&self, kind: Kind, n: u64) -> bool {
        self.population(kind, n) == 0
    }

    /// The effective prefix length of node `n` met at depth `d`. A header whose depth is
    /// below `d` was left stale by a crash inside a path-compression split: the
    /// split's new parent took `d - depth` of its bytes, so they are skipped.
    pub(crate) fn eff_plen(&self, n: u64, d: usize) -> Result<usize> {
        let h = self.header(n);
        let sd = usize::from(h.depth);
        if sd > d || d - sd > usize::from(h.plen) {
            return Err(corrupt(format!("node {n:#x}: header depth {sd} (prefix {}) met at depth {d}", h.plen)));
        }
        Ok(usize::from(h.plen) - (d - sd))
    }

    /// The smallest leaf under `(kind, n)`, if any, found with an explicit stack (a path
    /// may be as long as a key, too deep for recursion). With `check` (the open's walk)
    /// every node on the way has its words verified and every pointer its object, and a
    /// descent longer than any key (a cycle in a damaged pool) is refused.
    pub(crate) fn first_leaf(&self, kind: Kind, n: u64, check: bool) -> Result<Option<u64>> {
        let mut stack = vec![(tagged(kind, n), 0usize)];
        while let Some((w, depth)) = stack.pop() {
            match untag(w) {
                Some((Kind::Leaf, l)) => {
                    if check {
                        self.check_leaf(l)?;
                    }
                    return Ok(Some(l));
                }
                Some((k, c)) => {
                    if check {
                        if depth > MAX_KEY + 1 || !self.valid(k, c) {
                            return Err(corrupt(format!("pointer {w:#x} names no node, or a path is too long")));
                        }
                        self.check_node_words(k, c)?;
                    }
                    stack.extend(self.children(k, c).into_iter().rev().map(|(_, _, cw)| (cw, depth + 1)));
                    let t = self.load(c + TERM);
                    if t != 0 {
                        stack.push((t, depth + 1));
                    }
                }
                None if check => return Err(corrupt(format!("bad child word {w:#x}"))),
                None => {}
            }
        }
        Ok(None)
    }

    /// Copy-on-write of node `n` of `kind`: a new node with header word `hdr` and `n`'s
    /// terminal slot and children, less the child at byte `remove` and plus `add`, of
    /// `kind` or, when that overflows it, of the next larger kind (node growth); persisted
    /// and published, not linked. Its tagged pointer.
    pub(crate) fn copy_node(
        &self,
        kind: Kind,
        n: u64,
        hdr: u64,
        add: Option<(u8, u64)>,
        remove: Option<u8>,
    ) -> Result<u64> {
        let mut entries: Vec<(u8, u64)> =
            self.children(kind, n).into_iter().filter(|e| Some(e.0) != remove).map(|(b, _, w)| (b, w)).collect();
        if let Some(e) = add {
            let at = entries.partition_point(|x| x.0 < e.0);
            entries.insert(at, e);
        }
        let to = if entries.len() > kind.cap() { kind.grown() } else { kind };
        Ok(tagged(to, self.new_node(to, hdr, self.load(n + TERM), &entries)?))
    }

    /// The effective prefix bytes of node `n` met at depth `d`: from the header when it
    /// is fresh and holds them all, else from a leaf below (the paper's optimistic
    /// prefix, which also recovers a stale header's). `None` for an empty node.
    pub(crate) fn prefix(&self, kind: Kind, n: u64, d: usize) -> Result<Option<Vec<u8>>> {
        let p = self.eff_plen(n, d)?;
        let h = self.header(n);
        if p == 0 {
            return Ok(Some(Vec::new()));
        }
        if usize::from(h.depth) == d && p <= PARTIAL {
            return Ok(Some(h.partial[..p].to_vec()));
        }
        let Some(l) = self.first_leaf(kind, n, false)? else { return Ok(None) };
        let k = self.leaf_key(l);
        if k.len() < d + p {
            return Err(corrupt(format!("node {n:#x}: leaf {l:#x} is shorter than the node's prefix")));
        }
        Ok(Some(k[d..d + p].to_vec()))
    }
}
