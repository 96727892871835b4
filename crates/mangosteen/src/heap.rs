//! The persistent side of the split heap (SPEC M7): an allocator whose every byte of
//! metadata lives inside the durable region, so it is captured, logged and recovered with
//! the application's own writes, and a crash can never leave it disagreeing with the
//! objects it hands out. Allocations made while a read-write request runs come from here
//! (see [`crate::split_alloc`]); all others from the ordinary transient heap.
//!
//! Layout, from region offset 0 (all words little-endian `u64`):
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `MGHEAP01` |
//! | 8..16 | bump: offset of the first never-allocated byte |
//! | 16..24 | the region's size when the heap was formatted |
//! | 24..32 | root: offset of the application's root object (0: none) |
//! | 32..40 | bytes in use (block sizes, headers included) |
//! | 40..48 | head of the big-block free list (0: empty) |
//! | 64..576 | heads of the 64 size-class free lists (0: empty) |
//! | 1024.. | blocks |
//!
//! A block is a 16-byte header (word 0: `0xB10C` in bits 48..64, then the size class in
//! bits 0..8, or 255 and the block's size in bits 8..48 for a big block; word 1 unused)
//! followed by the payload, 16-byte aligned. A payload aligned to more than 16 bytes lies
//! inside an ordinary block, behind a header of its own (word 0: the tag and 254, word 1:
//! the region offset of the block's payload), by which `free` and `usable_size` find
//! the block. A free block's first payload word links to
//! the next free block of its list (a payload offset). Classes are 32..256 bytes in
//! 16-byte steps, then four steps per doubling up to 1.25 MiB; bigger blocks are rounded
//! to 64 KiB and kept on one first-fit list. Blocks are never split or merged: simple,
//! and every operation writes a handful of words.
//!
//! Used only by the thread running a batch (under the runtime's writer lock), so there is
//! no locking here.

const MAGIC: [u8; 8] = *b"MGHEAP01";
const BUMP_AT: usize = 8;
const SIZE_AT: usize = 16;
const ROOT_AT: usize = 24;
const USED_AT: usize = 32;
const BIG_AT: usize = 40;
const CLASSES_AT: usize = 64;
const NCLASS: usize = 64;
/// Where the first block starts.
pub const FIRST_BLOCK: usize = 1024;
const HDR: usize = 16;
/// The alignment every payload has (a larger one costs a block of `size + align + 16`).
pub const MAX_ALIGN: usize = 16;
const TAG: u64 = 0xB10C << 48;
const BIG: u64 = 255;
/// The header of a payload aligned to more than 16 bytes, inside its block.
const ALIGNED: u64 = 254;
const BIG_UNIT: usize = 64 << 10;

/// Bytes of a block (header included) of class `c`.
fn class_size(c: usize) -> usize {
    if c < 15 {
        32 + 16 * c
    } else {
        let k = c - 15;
        let base = 256usize << (k / 4);
        base + base / 4 * (k % 4 + 1)
    }
}

/// The smallest class holding `total` bytes, if any.
fn class_of(total: usize) -> Option<usize> {
    (0..NCLASS).find(|&c| class_size(c) >= total)
}

/// The persistent side of the split heap (SPEC M7): an allocator over a region's bytes at
/// `base` that keeps every byte of its metadata inside the region (a header at offset 0,
/// size-class free lists, 16-byte block headers), so that its state is captured, logged
/// and recovered with the application's own writes. A `Heap` is a plain view (copyable);
/// it is used only by the thread running a batch, under the runtime's writer lock.
#[derive(Clone, Copy, Debug)]
pub struct Heap {
    base: *mut u8,
    len: usize,
}

impl Heap {
    /// The heap in the `len` bytes at `base`.
    ///
    /// # Safety
    ///
    /// `base` is valid for reads (and, for the allocating calls, writes) of `len` bytes,
    /// 16-byte aligned, for as long as the `Heap` is used, and nothing else writes those
    /// bytes meanwhile.
    pub unsafe fn new(base: *mut u8, len: usize) -> Heap {
        Heap { base, len }
    }

    fn word(&self, off: usize) -> u64 {
        debug_assert!(off + 8 <= self.len && off.is_multiple_of(8));
        // SAFETY: `off` is an 8-aligned word inside the region (every caller passes a
        // header field or a block offset that `check`ed bounds produced); `new`'s contract.
        unsafe { (self.base.add(off) as *const u64).read() }
    }

    fn set(&self, off: usize, v: u64) {
        debug_assert!(off + 8 <= self.len && off.is_multiple_of(8));
        // SAFETY: as in `word`; writes are allowed by `new`'s contract.
        unsafe { (self.base.add(off) as *mut u64).write(v) };
        // SAFETY: `off + 8 <= len`, inside the region.
        crate::heap_written(unsafe { self.base.add(off) }, 8);
    }

    /// Whether the region holds a formatted heap.
    pub fn is_formatted(&self) -> bool {
        // SAFETY: the first 8 bytes of the region (`new`'s contract; regions are larger).
        self.len >= FIRST_BLOCK && unsafe { std::slice::from_raw_parts(self.base, 8) } == MAGIC
    }

    /// Write an empty heap's header (the region's bytes are assumed zero past it).
    pub fn format(&self) {
        assert!(self.len > FIRST_BLOCK, "a region of {} bytes is too small for a heap", self.len);
        // SAFETY: `new`'s contract; the header's first 8 bytes.
        unsafe { std::ptr::copy_nonoverlapping(MAGIC.as_ptr(), self.base, 8) };
        crate::heap_written(self.base, 8);
        self.set(BUMP_AT, FIRST_BLOCK as u64);
        self.set(SIZE_AT, self.len as u64);
        self.set(ROOT_AT, 0);
        self.set(USED_AT, 0);
        self.set(BIG_AT, 0);
        for c in 0..NCLASS {
            self.set(CLASSES_AT + 8 * c, 0);
        }
    }

    /// The application's root object (a region offset, 0: none).
    pub fn root(&self) -> u64 {
        self.word(ROOT_AT)
    }

    /// Name the application's root object.
    pub fn set_root(&self, off: u64) {
        self.set(ROOT_AT, off)
    }

    /// Bytes in blocks handed out (headers included).
    pub fn used(&self) -> u64 {
        self.word(USED_AT)
    }

    /// Bytes never handed out yet (free-list blocks come on top).
    pub fn untouched(&self) -> u64 {
        (self.len as u64).saturating_sub(self.word(BUMP_AT))
    }

    /// A payload of `size` bytes aligned to `align` (a power of two), or null if the heap
    /// is full (or `align` is not a power of two).
    pub fn alloc(&self, size: usize, align: usize) -> *mut u8 {
        if align > MAX_ALIGN {
            return self.alloc_aligned(size, align);
        }
        let Some(total) = size.checked_add(HDR).map(|t| t.next_multiple_of(16).max(32)) else {
            return std::ptr::null_mut();
        };
        let block = match class_of(total) {
            Some(c) => {
                let head = self.word(CLASSES_AT + 8 * c) as usize;
                let b = if head != 0 {
                    self.set(CLASSES_AT + 8 * c, self.word(head));
                    head - HDR
                } else {
                    match self.bump(class_size(c)) {
                        Some(b) => b,
                        None => return std::ptr::null_mut(),
                    }
                };
                self.set(b, TAG | c as u64);
                b
            }
            None => {
                let want = total.next_multiple_of(BIG_UNIT);
                match self.take_big(want) {
                    Some(b) => b, // keeps its header, and its (possibly larger) size
                    None => match self.bump(want) {
                        Some(b) => {
                            self.set(b, TAG | ((want as u64) << 8) | BIG);
                            b
                        }
                        None => return std::ptr::null_mut(),
                    },
                }
            }
        };
        let sz = self.block_size(block).unwrap_or(0) as u64;
        self.set(USED_AT, self.word(USED_AT) + sz);
        // SAFETY: the payload lies inside the region (the block was bounds-checked when
        // it was carved out by `bump`).
        unsafe { self.base.add(block + HDR) }
    }

    /// A payload aligned to `align` (> 16) inside a block with room for it and a header
    /// of its own in front (see the module doc): C's `aligned_alloc` and `posix_memalign`,
    /// C++'s aligned `new`, Rust's over-aligned layouts.
    fn alloc_aligned(&self, size: usize, align: usize) -> *mut u8 {
        if !align.is_power_of_two() {
            return std::ptr::null_mut();
        }
        let Some(n) = size.checked_add(align).and_then(|n| n.checked_add(HDR)) else {
            return std::ptr::null_mut();
        };
        let inner = self.alloc(n, MAX_ALIGN);
        if inner.is_null() {
            return inner;
        }
        // The first aligned address with room for the header before it, still in the block.
        let p = (inner as usize + HDR).next_multiple_of(align);
        let off = p - self.base as usize;
        self.set(off - HDR, TAG | ALIGNED);
        self.set(off - HDR + 8, (inner as usize - self.base as usize) as u64);
        // SAFETY: `off` lies inside the block just allocated, which is inside the region.
        unsafe { self.base.add(off) }
    }

    /// For the payload at region offset `off` (16-aligned, past the first block): the
    /// region offset of its block's own payload if it is an aligned one, else `off`.
    fn unaligned(&self, off: usize) -> usize {
        if self.word(off - HDR) == TAG | ALIGNED {
            let inner = self.word(off - HDR + 8) as usize;
            if inner >= FIRST_BLOCK + HDR && inner < off && inner.is_multiple_of(16) {
                return inner;
            }
        }
        off
    }

    /// Carve `n` bytes from the untouched end.
    fn bump(&self, n: usize) -> Option<usize> {
        let b = self.word(BUMP_AT) as usize;
        let end = b.checked_add(n)?;
        if end > self.len {
            return None;
        }
        self.set(BUMP_AT, end as u64);
        Some(b)
    }

    /// First fit on the big list.
    fn take_big(&self, want: usize) -> Option<usize> {
        let mut prev = BIG_AT;
        let mut cur = self.word(BIG_AT) as usize;
        while cur != 0 {
            let b = cur - HDR;
            if self.block_size(b)? >= want {
                self.set(prev, self.word(cur));
                return Some(b);
            }
            prev = cur;
            cur = self.word(cur) as usize;
        }
        None
    }

    /// The size of the block at `b` from its header, if the header is valid.
    fn block_size(&self, b: usize) -> Option<usize> {
        let h = self.word(b);
        if h >> 48 != TAG >> 48 {
            return None;
        }
        match h & 0xff {
            BIG => Some(((h >> 8) & ((1 << 40) - 1)) as usize),
            c if (c as usize) < NCLASS => Some(class_size(c as usize)),
            _ => None,
        }
    }

    /// The payload bytes of the live block at `p` (at least what was asked for), or
    /// `None` if `p` is no block payload of this heap.
    pub fn usable_size(&self, p: *const u8) -> Option<usize> {
        if !self.contains(p) {
            return None;
        }
        let at = p as usize - self.base as usize;
        if at < FIRST_BLOCK + HDR || !at.is_multiple_of(16) {
            return None;
        }
        let off = self.unaligned(at);
        self.block_size(off - HDR).map(|s| s - HDR - (at - off))
    }

    /// Whether `p` points into this heap's region.
    pub fn contains(&self, p: *const u8) -> bool {
        let (a, b) = (p as usize, self.base as usize);
        a >= b && a < b + self.len
    }

    /// Give back the payload at `p` (from [`Heap::alloc`] of this heap). A pointer that
    /// is not a live block's payload is ignored (and counted by `check` as a leak rather
    /// than corrupting a list).
    pub fn free(&self, p: *mut u8) {
        if !self.contains(p) {
            return;
        }
        let at = p as usize - self.base as usize;
        if at < FIRST_BLOCK + HDR || !at.is_multiple_of(16) {
            return;
        }
        let off = self.unaligned(at);
        if off != at {
            // The aligned payload's header goes: a second free of `p` is then ignored.
            self.set(at - HDR, 0);
        }
        let b = off - HDR;
        let Some(sz) = self.block_size(b) else { return };
        let list = match self.word(b) & 0xff {
            BIG => BIG_AT,
            c => CLASSES_AT + 8 * c as usize,
        };
        self.set(off, self.word(list));
        self.set(list, off as u64);
        self.set(USED_AT, self.word(USED_AT).saturating_sub(sz as u64));
    }

    /// Walk every free list: each entry a valid block inside the carved part, no list
    /// longer than the heap could hold; and the used count no larger than what was carved.
    pub fn check(&self) -> Result<(), String> {
        if !self.is_formatted() {
            return Err("no heap header".into());
        }
        let bump = self.word(BUMP_AT) as usize;
        if bump < FIRST_BLOCK || bump > self.len {
            return Err(format!("bump offset {bump} outside the region"));
        }
        let mut free = 0u64;
        for list in std::iter::once(BIG_AT).chain((0..NCLASS).map(|c| CLASSES_AT + 8 * c)) {
            let mut cur = self.word(list) as usize;
            let mut n = 0usize;
            while cur != 0 {
                if cur < FIRST_BLOCK + HDR || cur >= bump || !cur.is_multiple_of(16) {
                    return Err(format!("free list at {list}: entry {cur} outside the carved blocks"));
                }
                let sz = self.block_size(cur - HDR).ok_or_else(|| format!("free block {cur}: bad header"))?;
                free += sz as u64;
                n += 1;
                if n > bump / 32 {
                    return Err(format!("free list at {list} has a cycle"));
                }
                cur = self.word(cur) as usize;
            }
        }
        let carved = (bump - FIRST_BLOCK) as u64;
        if self.used() + free > carved {
            return Err(format!("{} bytes used and {free} free, but only {carved} carved", self.used()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn region(len: usize) -> Vec<u128> {
        vec![0u128; len / 16]
    }

    #[test]
    fn classes_grow_and_cover_their_sizes() {
        for c in 1..NCLASS {
            assert!(class_size(c) > class_size(c - 1));
            assert!(class_size(c).is_multiple_of(16));
        }
        assert_eq!(class_of(32), Some(0));
        assert_eq!(class_of(33), Some(1));
        assert_eq!(class_of(class_size(NCLASS - 1) + 1), None);
    }

    proptest! {
        /// Random allocs and frees against a model: payloads never overlap, stay inside
        /// the region, keep their bytes, and freed space is reused; the lists check.
        #[test]
        fn allocations_never_overlap(ops in proptest::collection::vec((0usize..3000, any::<bool>()), 1..300)) {
            let mut mem = region(1 << 20);
            // SAFETY: a 16-aligned buffer of 1 MiB, only used through `h`.
            let h = unsafe { Heap::new(mem.as_mut_ptr() as *mut u8, 1 << 20) };
            h.format();
            let mut live: Vec<(usize, usize, u8)> = Vec::new();
            for (i, (size, free)) in ops.into_iter().enumerate() {
                if free && !live.is_empty() {
                    let (p, n, fill) = live.swap_remove(i % live.len());
                    // SAFETY: a live payload of `n` bytes.
                    let s = unsafe { std::slice::from_raw_parts(p as *const u8, n) };
                    prop_assert!(s.iter().all(|&b| b == fill));
                    h.free(p as *mut u8);
                    continue;
                }
                let p = h.alloc(size, 8);
                if p.is_null() {
                    continue;
                }
                prop_assert!(h.contains(p) && (p as usize).is_multiple_of(16));
                for &(q, m, _) in &live {
                    prop_assert!(p as usize + size <= q || q + m <= p as usize, "overlap");
                }
                let fill = i as u8;
                // SAFETY: a fresh payload of `size` bytes.
                unsafe { std::ptr::write_bytes(p, fill, size) };
                live.push((p as usize, size, fill));
            }
            h.check().map_err(TestCaseError::fail)?;
        }
    }

    /// Alignments above 16 bytes (up to a page) are honoured, inside ordinary blocks:
    /// the payload is aligned and writable over its usable size without touching another
    /// block, freeing it gives its block back (reused by the next allocation of the same
    /// shape), and a second free of it is ignored.
    #[test]
    fn aligned_payloads_are_aligned_usable_and_freed() {
        let mut mem = region(1 << 20);
        // SAFETY: a 16-aligned buffer of 1 MiB, only used through `h`, alive for the test.
        let h = unsafe { Heap::new(mem.as_mut_ptr() as *mut u8, 1 << 20) };
        h.format();
        let mut live = Vec::new();
        for (i, align) in [32usize, 64, 128, 4096, 64, 32].into_iter().enumerate() {
            let size = 24 + 40 * i;
            let p = h.alloc(size, align);
            assert!(!p.is_null() && (p as usize).is_multiple_of(align), "{align}");
            let usable = h.usable_size(p).unwrap();
            assert!(usable >= size, "{usable} < {size}");
            // SAFETY: `usable` bytes of a live payload.
            unsafe { std::ptr::write_bytes(p, 0xA0 + i as u8, usable) };
            live.push((p, usable, 0xA0 + i as u8));
        }
        h.check().unwrap();
        for &(p, n, fill) in &live {
            // SAFETY: as written above; no other payload overlapped it.
            assert!(unsafe { std::slice::from_raw_parts(p, n) }.iter().all(|&b| b == fill));
        }
        let (p, _, _) = live[1];
        let used = h.used();
        h.free(p);
        assert!(h.used() < used, "the block went back");
        h.free(p);
        h.check().unwrap();
        assert_eq!(h.alloc(64, 64), p, "the freed block serves the same shape again");
        assert!(h.alloc(8, 48).is_null(), "an alignment that is no power of two is refused");
    }

    #[test]
    fn full_heap_returns_null_and_frees_are_reused() {
        let mut mem = region(64 << 10);
        // SAFETY: a 16-aligned buffer of 64 KiB, only used through `h`, alive for the test.
        let h = unsafe { Heap::new(mem.as_mut_ptr() as *mut u8, 64 << 10) };
        h.format();
        let mut n = 0;
        let mut last = std::ptr::null_mut();
        loop {
            let p = h.alloc(100, 8);
            if p.is_null() {
                break;
            }
            last = p;
            n += 1;
        }
        assert!(n > 400, "{n}");
        assert!(h.alloc(1 << 20, 8).is_null());
        h.free(last);
        assert_eq!(h.alloc(97, 8), last, "a freed block of the class is reused");
        h.check().unwrap();
        // A stray pointer is ignored, not linked.
        h.free(last.wrapping_add(8));
        h.check().unwrap();
    }
}
