//! Size classes and chunk geometry.
//!
//! The paper (§III.A point 5) has two value sizes, 8 and 16 bytes, and says more sizes
//! "can be easily" added as more chunk lists. pmkv has [`NUM_CLASSES`] classes from 8 bytes
//! to 4 KiB: every multiple of 8 up to 48, then 64 and a series with four steps per
//! doubling (×1.25, ×1.2, ×1.33, ×1.5), so that the space lost to rounding a request up to
//! its class is at most 25 % for objects above 24 bytes (and zero for the common sizes 8,
//! 16, 32, 48 and 64). Larger objects are extents (`extent.rs`).
//!
//! **Chunk head.** A chunk starts with the paper's 16-byte head (Fig. 2): the 8-byte header
//! word and the 8-byte `PNext` offset. For slot sizes that are multiples of 64 the head is
//! padded to 64 bytes and the chunk is placed on a cache-line boundary, so that every slot
//! starts on its own cache line: an object of 64·k bytes then spans exactly k lines, is
//! persisted with k flushes instead of k+1, and never shares a line with another object
//! or with the header word (no two threads flush the same line for different objects).
//! The price is 48 bytes per chunk, at most 1.4 % of a 64-byte-class chunk. Smaller classes
//! keep the 16-byte head and 16-byte alignment: 8- and 16-byte slots then never straddle a
//! line; padding them would cost 10 % of an 8-byte chunk for little gain.

/// Slots per chunk (the paper's 56: a 7-byte bitmap).
pub const SLOTS: usize = 56;

/// Slot sizes of the classes, ascending.
pub const CLASSES: [usize; 25] = [
    8, 16, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024, 1280, 1536, 2048, 2560, 3072,
    4096,
];

/// Number of size classes.
pub const NUM_CLASSES: usize = CLASSES.len();

/// Largest object served from a chunk; anything larger becomes an extent.
pub const MAX_CLASS_SIZE: usize = CLASSES[NUM_CLASSES - 1];

/// Class code used in the allocator directory for a type's extent list.
pub const EXTENT_CLASS: u8 = 0xff;

/// Index of the smallest class whose slots hold `size` bytes, or `None` if `size` needs
/// an extent. A request of 0 bytes gets the smallest class.
///
/// One table lookup (every class is a multiple of 8, so the class depends only on
/// `size` rounded up to 8): the binary search it replaces was a chain of dependent
/// conditional moves, a third of `alloc`'s own time in a HART insert.
#[inline]
pub fn class_of(size: usize) -> Option<usize> {
    CLASS_OF.get(size.div_ceil(8)).map(|&c| c as usize)
}

/// `CLASS_OF[n]`: the class of a request of `8·n` bytes (so of any size in `8n-7..=8n`).
static CLASS_OF: [u8; MAX_CLASS_SIZE / 8 + 1] = {
    let mut t = [0u8; MAX_CLASS_SIZE / 8 + 1];
    let (mut n, mut c) = (0, 0);
    while n < t.len() {
        while CLASSES[c] < n * 8 {
            c += 1;
        }
        t[n] = c as u8;
        n += 1;
    }
    t
};

/// Byte geometry of a chunk of one class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes per slot.
    pub slot: usize,
    /// Bytes before slot 0: the 16-byte head, padded to 64 for line-multiple slots.
    pub head: usize,
    /// Total bytes of a chunk: `head + 56 * slot`.
    pub chunk_len: usize,
    /// Alignment of the chunk's start.
    pub align: usize,
    /// `floor(2^40 / slot) + 1`: `slot_index` divides by multiplying with it (exact for
    /// every offset inside a chunk, see there), since a hardware divide is among the
    /// slowest steps of `free` and `publish`.
    pub recip: u64,
}

impl Geometry {
    /// Geometry of class `class` (an index into [`CLASSES`]).
    pub const fn of(class: usize) -> Geometry {
        let slot = CLASSES[class];
        let padded = slot.is_multiple_of(64);
        let head = if padded { 64 } else { 16 };
        Geometry {
            slot,
            head,
            chunk_len: head + SLOTS * slot,
            align: if padded { 64 } else { 16 },
            recip: (1u64 << 40) / slot as u64 + 1,
        }
    }

    /// Offset of slot `i` of the chunk at `chunk`.
    #[inline]
    pub fn slot_off(&self, chunk: u64, i: usize) -> u64 {
        chunk + (self.head + i * self.slot) as u64
    }

    /// The slot index of object offset `off` in the chunk at `chunk`, if `off` is exactly
    /// the start of one of its slots.
    #[inline]
    pub fn slot_index(&self, chunk: u64, off: u64) -> Option<usize> {
        let rel = off.checked_sub(chunk + self.head as u64)?;
        if rel >= (SLOTS * self.slot) as u64 {
            return None;
        }
        // rel / slot by multiplication: with recip = 2^40/slot + e (0 < e <= 1), the
        // product is 2^40 (rel/slot + rel·e/2^40), and rel·e/2^40 < 2^18/2^40 is smaller
        // than the gap 1/slot >= 2^-12 between rel/slot and the next integer, so the
        // floor is exact. (rel < 56 · 4096 < 2^18.)
        let q = (rel * self.recip) >> 40;
        (q * self.slot as u64 == rel).then_some(q as usize)
    }

    /// Bytes of a full chunk that are not slots (the allocator's per-chunk overhead).
    pub const fn overhead(&self) -> usize {
        self.head
    }
}

/// Geometry of every class, precomputed.
pub const GEOMETRY: [Geometry; NUM_CLASSES] = {
    let mut g = [Geometry { slot: 0, head: 0, chunk_len: 0, align: 0, recip: 0 }; NUM_CLASSES];
    let mut i = 0;
    while i < NUM_CLASSES {
        g[i] = Geometry::of(i);
        i += 1;
    }
    g
};

/// Smallest chunk of any class (8-byte slots: 16 + 448 bytes). The offset index relies on
/// every chunk being larger than its granule.
pub const MIN_CHUNK_LEN: usize = GEOMETRY[0].chunk_len;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_index_by_reciprocal_matches_division() {
        let chunk = 1u64 << 20;
        for g in GEOMETRY {
            for rel in 0..(SLOTS * g.slot) as u64 + 2 * g.slot as u64 {
                let off = chunk + g.head as u64 + rel;
                let want = (rel < (SLOTS * g.slot) as u64 && rel % g.slot as u64 == 0)
                    .then_some((rel / g.slot as u64) as usize);
                assert_eq!(g.slot_index(chunk, off), want, "slot {} rel {rel}", g.slot);
            }
            assert_eq!(g.slot_index(chunk, chunk), None);
        }
    }

    #[test]
    fn classes_cover_the_required_sizes() {
        for need in [8, 16, 32, 48, 64, 4096] {
            assert!(CLASSES.contains(&need), "class {need} missing");
        }
        assert!(CLASSES.windows(2).all(|w| w[0] < w[1]));
        assert!(CLASSES.iter().all(|c| c % 8 == 0));
        // Rounding loss is at most 25 % above 24 bytes.
        for w in CLASSES.windows(2) {
            if w[0] >= 24 {
                assert!((w[1] - w[0] - 1) as f64 / w[1] as f64 <= 0.25, "{w:?}");
            }
        }
    }

    #[test]
    fn class_of_picks_the_smallest_fit() {
        assert_eq!(class_of(0), Some(0));
        assert_eq!(class_of(1), Some(0));
        assert_eq!(class_of(8), Some(0));
        assert_eq!(class_of(9), Some(1));
        assert_eq!(CLASSES[class_of(65).unwrap()], 80);
        assert_eq!(CLASSES[class_of(4096).unwrap()], 4096);
        assert_eq!(class_of(4097), None);
        assert_eq!(class_of(usize::MAX), None);
        // The table against the definition, for every size a chunk serves and beyond.
        for size in 0..=MAX_CLASS_SIZE + 100 {
            let want = (size <= MAX_CLASS_SIZE).then(|| CLASSES.iter().position(|&c| c >= size).unwrap());
            assert_eq!(class_of(size), want, "size {size}");
        }
    }

    #[test]
    fn geometry_pads_line_multiples() {
        let g8 = Geometry::of(0);
        assert_eq!((g8.head, g8.chunk_len, g8.align), (16, 464, 16));
        let g64 = GEOMETRY[class_of(64).unwrap()];
        assert_eq!((g64.head, g64.chunk_len, g64.align), (64, 64 + 56 * 64, 64));
        for g in GEOMETRY {
            assert_eq!(g.chunk_len % 16, 0);
            if g.slot % 64 == 0 {
                assert_eq!(g.chunk_len % 64, 0, "padded chunks end on a line boundary");
            }
            assert!(g.chunk_len >= MIN_CHUNK_LEN);
        }
        assert_eq!(g64.slot_index(4096, 4096 + 64 + 64 * 3), Some(3));
        assert_eq!(g64.slot_index(4096, 4096 + 64 + 64 * 56), None);
        assert_eq!(g64.slot_index(4096, 4096 + 65), None);
        assert_eq!(g64.slot_index(4096, 4000), None);
    }
}
