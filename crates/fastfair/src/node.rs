//! Nodes (the paper's pages) and objects in PM: reading a node as its live entries
//! (tolerating the duplicates a shift leaves, FAST), node locks, and the objects
//! that hold keys and values.

use crate::error::Result;
use crate::layout::*;
use crate::read::{live, Obj, Raw, Snap};
use crate::tree::{FastFair, LOCK_BITS};
use std::sync::atomic::{AtomicU64, Ordering};

impl FastFair {
    /// The PM word at `off` (an atomic load).
    #[inline]
    pub(crate) fn load(&self, off: u64) -> u64 {
        // SAFETY: PM words of nodes and the superblock are written only with atomic
        // stores (`pstore`, `store`) or before the object is published.
        unsafe { self.pool.load_u64(off) }
    }

    /// Store `v` at `off` and, in the flushing modes, persist it before any later store:
    /// each 8-byte store of a shift must reach PM in program order (see `read::live`).
    /// In eADR a visible store is persistent, and stores are seen in program order.
    #[inline]
    pub(crate) fn pstore(&self, off: u64, v: u64) {
        // SAFETY: the word belongs to a node this thread has locked, or to the
        // superblock under the root lock; readers read it with atomic loads.
        unsafe { self.pool.store_u64(off, v) };
        if self.flushes {
            self.pool.flush_off(off, 8);
            self.pool.fence();
        }
    }

    /// Store `v` at `off` and flush it (in the flushing modes) with no fence: the
    /// operation's last store, which its commit fence (`Pool::commit_fence`) makes durable.
    #[inline]
    pub(crate) fn store_flush(&self, off: u64, v: u64) {
        // SAFETY: as `pstore`'s.
        unsafe { self.pool.store_u64(off, v) };
        if self.flushes {
            self.pool.flush_off(off, 8);
        }
    }

    /// Node `node`'s lock word: a version, odd while a writer holds the node. Kept in
    /// DRAM as the authors' code keeps its per-node lock out of the persistent page's
    /// lines: a stripe of [`FastFair::locks`] chosen by the node's offset (nodes that share
    /// a stripe only make each other's readers retry: no thread holds two node locks or
    /// waits for a version while it holds one).
    fn lock_word(&self, node: u64) -> &AtomicU64 {
        let h = (node >> 6).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - LOCK_BITS);
        &self.locks[h as usize]
    }

    /// Take node `node`'s lock (its version becomes odd).
    pub(crate) fn lock(&self, node: u64) {
        let w = self.lock_word(node);
        let mut spins = 0u32;
        loop {
            let v = w.load(Ordering::Acquire);
            if v & 1 == 0 && w.compare_exchange_weak(v, v + 1, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                return;
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Release `node`'s lock (its version becomes even and new).
    pub(crate) fn unlock(&self, node: u64) {
        self.lock_word(node).fetch_add(1, Ordering::Release);
    }

    /// The version to validate a read against: waits while a writer holds the node
    /// (never in a read-only pool, which has no writers and may hold a crash's odd word).
    pub(crate) fn read_version(&self, node: u64) -> u64 {
        let w = self.lock_word(node);
        let mut spins = 0u32;
        loop {
            let v = w.load(Ordering::Acquire);
            if v & 1 == 0 || self.read_only {
                return v;
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Whether `node`'s version is still `version` (a read of it was consistent).
    pub(crate) fn unchanged(&self, node: u64, version: u64) -> bool {
        std::sync::atomic::fence(Ordering::Acquire);
        self.read_only || self.lock_word(node).load(Ordering::Acquire) == version
    }

    /// Whether `node` may be a node: inside the pool and aligned as nodes are (a cheap
    /// test for the hot paths, so that a damaged pointer is an error, never a wild read).
    pub(crate) fn valid_node(&self, node: u64) -> bool {
        node != 0 && node.is_multiple_of(64) && self.pool.contains(node, NODE_SIZE as u64)
    }

    /// `valid_node`, and a used node object of the allocator (for the walks of open and
    /// check, which must not trust a pointer into freed space).
    pub(crate) fn node_obj(&self, node: u64) -> bool {
        self.valid_node(node) && self.alloc.type_of(node) == Some(NODE) && self.alloc.is_used(node)
    }

    /// The raw slots of `node`.
    pub(crate) fn raw(&self, node: u64) -> Raw {
        let mut r = Raw { kw: [0; SLOTS], ptr: [0; SLOTS], n: 0 };
        while r.n < SLOTS {
            let p = self.load(ptr_at(node, r.n));
            if p == 0 {
                break;
            }
            r.ptr[r.n] = p;
            r.kw[r.n] = self.load(key_at(node, r.n));
            r.n += 1;
        }
        r
    }

    /// What slot -1's pointer is in a node of `level` with leftmost child `leftmost`.
    pub(crate) fn left_of(level: u32, leftmost: u64) -> u64 {
        if level == 0 {
            LEAF_LEFT
        } else {
            leftmost
        }
    }

    /// One consistent read of `node` (retried while a writer changes it).
    pub(crate) fn snap(&self, node: u64) -> Snap {
        loop {
            let version = self.read_version(node);
            let sibling = self.load(node + H_SIBLING);
            let leftmost = self.load(node + H_LEFTMOST);
            let level = self.load(node + H_LEVEL) as u32;
            let low_kw = self.load(node + H_LOW_KW);
            let low_ptr = self.load(node + H_LOW_PTR);
            let raw = self.raw(node);
            let mut s = Snap {
                sibling,
                leftmost,
                level,
                low_kw,
                low_ptr,
                kw: [0; SLOTS],
                ptr: [0; SLOTS],
                n: 0,
                phys: raw.n,
                version,
            };
            for i in live(&raw, level, Self::left_of(level, leftmost)) {
                s.kw[s.n] = raw.kw[i];
                s.ptr[s.n] = raw.ptr[i];
                s.n += 1;
            }
            if self.unchanged(node, version) {
                // The header's line and the lines of the slots in use (P4, P5).
                self.pool.note_read_at(node, (HEADER + (raw.n as u64 + 1) * ENTRY) as usize);
                return s;
            }
        }
    }

    /// Read the object at `off` whole and verify it; `Err` says why it does not verify
    /// (damage, or a read that raced with the object's reuse: callers that read it
    /// without holding its node's lock validate the node first).
    pub(crate) fn read_obj(&self, off: u64) -> std::result::Result<Obj, String> {
        if off == 0 || !off.is_multiple_of(8) || !self.pool.contains(off, OBJ_HEAD as u64) {
            return Err(format!("{off:#x} is not an object offset"));
        }
        let head = self.load(off);
        let (klen, vlen) = ((head & 0xffff_ffff) as usize, (head >> 32) as usize);
        if klen > MAX_KEY || vlen > MAX_VALUE {
            return Err(format!("object {off:#x}: lengths {klen}/{vlen} out of range"));
        }
        let len = OBJ_HEAD + klen + vlen;
        let words = len.div_ceil(8);
        if !self.pool.contains(off, 8 * words as u64) {
            return Err(format!("object {off:#x} of {len} bytes runs past the pool"));
        }
        let mut buf = vec![0u8; 8 * words];
        for (i, chunk) in buf.chunks_exact_mut(8).enumerate() {
            chunk.copy_from_slice(&self.load(off + 8 * i as u64).to_le_bytes());
        }
        buf.truncate(len);
        self.pool.note_read_at(off, len);
        let crc = u32::from_le_bytes(buf[8..12].try_into().expect("4 bytes"));
        if crc != obj_crc(off, klen, vlen, &buf[OBJ_HEAD..]) {
            return Err(format!("object {off:#x} fails its checksum"));
        }
        Ok(Obj { buf, klen })
    }

    /// Write, persist and publish a new object of type `ty` holding `key` and `value`.
    pub(crate) fn new_obj(&self, ty: pmkv_substrate::epalloc::TypeId, key: &[u8], value: &[u8]) -> Result<u64> {
        let len = OBJ_HEAD + key.len() + value.len();
        let off = self.alloc.alloc(ty, len)?;
        let mut img = Vec::with_capacity(len);
        img.extend_from_slice(&(key.len() as u32).to_le_bytes());
        img.extend_from_slice(&(value.len() as u32).to_le_bytes());
        img.extend_from_slice(&[0; 8]);
        img.extend_from_slice(key);
        img.extend_from_slice(value);
        let crc = obj_crc(off, key.len(), value.len(), &img[OBJ_HEAD..]);
        img[8..12].copy_from_slice(&crc.to_le_bytes());
        // SAFETY: a reserved, unpublished object of at least `len` bytes: no other
        // thread can reach it.
        unsafe { std::ptr::copy_nonoverlapping(img.as_ptr(), self.pool.at::<u8>(off), len) };
        self.pool.persist_off(off, len);
        if let Err(e) = self.alloc.try_publish(off) {
            self.alloc.unreserve(off);
            return Err(e.into());
        }
        Ok(off)
    }

    /// Write, persist and publish a new node from its image.
    pub(crate) fn new_node(&self, img: &[u8; NODE_SIZE]) -> Result<u64> {
        let off = self.alloc.alloc(NODE, NODE_SIZE)?;
        // SAFETY: as in `new_obj`.
        unsafe { std::ptr::copy_nonoverlapping(img.as_ptr(), self.pool.at::<u8>(off), NODE_SIZE) };
        self.pool.persist_off(off, NODE_SIZE);
        if let Err(e) = self.alloc.try_publish(off) {
            self.alloc.unreserve(off);
            return Err(e.into());
        }
        Ok(off)
    }
}

/// A node image under construction.
pub(crate) struct NodeImg(pub(crate) [u8; NODE_SIZE]);

impl NodeImg {
    pub(crate) fn new(level: u32, leftmost: u64, sibling: u64, low_kw: u64, low_ptr: u64) -> NodeImg {
        let mut n = NodeImg([0; NODE_SIZE]);
        n.set(H_SIBLING, sibling);
        n.set(H_LEFTMOST, leftmost);
        n.set(H_LEVEL, level as u64);
        n.set(H_DIR, RIGHT);
        n.set(H_LOW_KW, low_kw);
        n.set(H_LOW_PTR, low_ptr);
        n
    }
    pub(crate) fn set(&mut self, at: u64, v: u64) {
        self.0[at as usize..at as usize + 8].copy_from_slice(&v.to_le_bytes());
    }
    /// Set slot `i`.
    pub(crate) fn entry(&mut self, i: usize, kw: u64, ptr: u64) {
        self.set(HEADER + ENTRY * i as u64, kw);
        self.set(HEADER + ENTRY * i as u64 + 8, ptr);
    }
}
