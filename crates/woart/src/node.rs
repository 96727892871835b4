//! The four node kinds of ART as WOART lays them out in PM, with the 8-byte
//! commit word of each: a child is written and persisted in a slot no reader looks at,
//! then one atomic 8-byte store makes it visible (Node4's sorted slot array with its
//! count, Node16's bitmap, Node48's index byte, Node256's pointer itself).
//!
//! Everything here runs under the tree's lock (writers exclusive), so a reader never
//! meets a half-made change; the commit-word order is what a *crash* can interrupt.

use crate::error::{Error, Result};
use crate::layout::*;
use pmkv_substrate::epalloc::EpAlloc;
use pmkv_substrate::Pool;

/// PM access for the tree's code: loads, stores and persists of one pool.
pub(crate) struct Pm<'a> {
    pub(crate) pool: &'a Pool,
    pub(crate) alloc: &'a EpAlloc,
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

    /// A leaf's key and value.
    pub(crate) fn leaf(&self, off: u64) -> (&[u8], &[u8]) {
        let h = self.load(off);
        let (kl, vl) = (h as u32 as usize, (h >> 32) as usize);
        let b = self.bytes(off + LEAF_HEAD as u64, kl + vl);
        b.split_at(kl)
    }
    /// The leaf's key; the leaf's lines count as read (the substrate's counters and its
    /// emulated PM read latency), as every engine reports the PM lines it reads.
    pub(crate) fn leaf_key(&self, off: u64) -> &[u8] {
        self.leaf_noted(off).0
    }
    /// [`Pm::leaf`], its lines reported read.
    pub(crate) fn leaf_noted(&self, off: u64) -> (&[u8], &[u8]) {
        let (k, v) = self.leaf(off);
        self.pool.note_read(pmkv_substrate::persist::lines_in(off as usize, LEAF_HEAD + k.len() + v.len()));
        (k, v)
    }
    /// Report the distinct PM lines of the words at `offs` read (one node's visit).
    fn note_lines(&self, offs: &[u64]) {
        let mut l: Vec<u64> = offs.iter().map(|o| o / 64).collect();
        l.sort_unstable();
        l.dedup();
        self.pool.note_read(l.len() as u64);
    }
    /// The leaf's contribution to the seal's hash.
    pub(crate) fn leaf_hash_of(&self, off: u64) -> u64 {
        let h = self.load(off);
        leaf_hash(self.load(off + 8) as u32, h as u32 as usize, (h >> 32) as usize)
    }

    /// Write a new leaf (key + value) and publish it; not linked yet.
    pub(crate) fn new_leaf(&self, key: &[u8], value: &[u8]) -> Result<u64> {
        let off = self.alloc.alloc(LEAF, LEAF_HEAD + key.len() + value.len())?;
        let mut head = [0u8; LEAF_HEAD];
        head[..4].copy_from_slice(&(key.len() as u32).to_le_bytes());
        head[4..8].copy_from_slice(&(value.len() as u32).to_le_bytes());
        head[8..12].copy_from_slice(&leaf_crc(key, value).to_le_bytes());
        let p = self.pool.at::<u8>(off);
        // SAFETY: a reserved object of at least this size that no one else can reach.
        unsafe {
            std::ptr::copy_nonoverlapping(head.as_ptr(), p, LEAF_HEAD);
            std::ptr::copy_nonoverlapping(key.as_ptr(), p.add(LEAF_HEAD), key.len());
            std::ptr::copy_nonoverlapping(value.as_ptr(), p.add(LEAF_HEAD + key.len()), value.len());
        }
        // Flushed, not fenced: `publish`'s fence orders the content before the bit. A
        // crash that keeps the bit and loses content leaves a used leaf nothing links,
        // which the unclean open's sweep frees.
        self.pool.flush_off(off, LEAF_HEAD + key.len() + value.len());
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
        Ok(off)
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

    /// The slot of the child at byte `b`, if there is one. The node's lines this reads (its
    /// header, the key or index array, the slot) count as PM lines read.
    pub(crate) fn find_child(&self, kind: Kind, n: u64, b: u8) -> Option<u64> {
        let s = self.find_slot(kind, n, b);
        let meta = match kind {
            Kind::N4 => n + N4_META,
            Kind::N16 => n + N16_BITMAP,
            Kind::N48 => n + N48_INDEX + u64::from(b),
            _ => n + HDR,
        };
        self.note_lines(&[n + HDR, meta, s.unwrap_or(meta)]);
        s
    }

    fn find_slot(&self, kind: Kind, n: u64, b: u8) -> Option<u64> {
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
            }
            Kind::N256 => self.store_persist(n + N256_CHILD + 8 * u64::from(b), w),
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
            }
            Kind::N256 => self.store_persist(n + N256_CHILD + 8 * u64::from(b), 0),
            Kind::Leaf => {}
        }
    }

    /// Whether the node holds nothing (no terminal leaf, no child).
    pub(crate) fn is_empty(&self, kind: Kind, n: u64) -> bool {
        self.load(n + TERM) == 0 && self.children(kind, n).is_empty()
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

    /// The smallest leaf under `(kind, n)`, if any.
    pub(crate) fn min_leaf(&self, kind: Kind, n: u64) -> Option<u64> {
        if let Some((Kind::Leaf, l)) = untag(self.load(n + TERM)) {
            return Some(l);
        }
        for (_, _, w) in self.children(kind, n) {
            match untag(w) {
                Some((Kind::Leaf, l)) => return Some(l),
                Some((k, c)) => {
                    if let Some(l) = self.min_leaf(k, c) {
                        return Some(l);
                    }
                }
                None => {}
            }
        }
        None
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
        let Some(l) = self.min_leaf(kind, n) else { return Ok(None) };
        let k = self.leaf_key(l);
        if k.len() < d + p {
            return Err(corrupt(format!("node {n:#x}: leaf {l:#x} is shorter than the node's prefix")));
        }
        Ok(Some(k[d..d + p].to_vec()))
    }
}
