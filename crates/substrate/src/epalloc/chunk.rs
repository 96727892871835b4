//! The memory chunk of HART Fig. 2: a 16-byte head followed by 56 fixed-size slots.
//!
//! ```text
//! byte 0..8   header word (little endian u64)
//!             bits  0..56  slot bitmap: bit i set = slot i is *used*
//!             format 3: bits 56..64  check8(bitmap, the chunk's own offset) (check.rs)
//!             format 2: bits 56..62  index of the next free slot (lowest clear bit; 56 when full)
//!                       bits 62..64  full indicator: 00 = has a free slot, 01 = full
//! byte 8..16  PNext: the next chunk of the same list (format 3: a self-checked link
//!             word, whose end is the encoding of 0; format 2: the raw offset, 0 at the end)
//! [padding to 64 bytes for line-multiple slot sizes, see size_class.rs]
//! slots
//! ```
//!
//! The whole header lives in one aligned 8-byte word, so every change to it is a single
//! 8-byte store that PM writes atomically, followed by a persist: a crash leaves either
//! the old or the new word, never a bitmap that disagrees with the rest of the word.
//! `PNext` is an offset, never a pointer (SPEC P2).
//!
//! **Why format 3 changed the paper's layout.** The next-free index and the full indicator
//! are functions of the bitmap (`trailing_ones`, `== MASK`): they add no information, and
//! the allocator reserves slots from its DRAM reservation word anyway. As a check, the
//! same byte makes every header self-verifying: free space is implicit, so a flipped or
//! zeroed bitmap would otherwise turn live objects into free slots silently. Format-2
//! pools keep the paper's layout (the allocator selects the encoding by the root block's
//! version at open).
//!
//! Only the persistent *used* state is kept here. Which free slots are currently handed
//! out to a thread (reserved, not yet published) is DRAM state of the allocator, so that
//! reserving costs no PM write and a crash simply forgets reservations.

use super::check::{self, Format, KIND_HEADER};
use crate::error::{PoolError, Result};
use crate::header::HEADER_SIZE;
use crate::pool::Pool;
use std::sync::atomic::{AtomicU64, Ordering};

use super::size_class::SLOTS;

/// Mask of the 56 bitmap bits.
pub const BITMAP_MASK: u64 = (1 << SLOTS) - 1;
const NEXT_SHIFT: u32 = 56;
const FULL_SHIFT: u32 = 62;
/// Full indicator values (format 2).
pub const IND_HAS_FREE: u64 = 0b00;
pub const IND_FULL: u64 = 0b01;

/// Offset of `PNext` within a chunk (and within an extent header: the same list code
/// serves both).
pub const NEXT_AT: u64 = 8;

/// A decoded chunk header word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderWord(pub u64);

impl HeaderWord {
    /// The format-2 header word for `bitmap`: next-free index and full indicator derived
    /// from it.
    #[inline]
    pub fn from_bitmap(bitmap: u64) -> HeaderWord {
        let bitmap = bitmap & BITMAP_MASK;
        let next = bitmap.trailing_ones() as u64; // 56 when every slot is used
        let ind = if bitmap == BITMAP_MASK { IND_FULL } else { IND_HAS_FREE };
        HeaderWord(bitmap | next << NEXT_SHIFT | ind << FULL_SHIFT)
    }
    /// The header word for `bitmap` of the chunk at `chunk` in format `fmt`.
    #[inline]
    pub fn encode(fmt: Format, chunk: u64, bitmap: u64) -> HeaderWord {
        if fmt.checked() {
            HeaderWord(check::encode(KIND_HEADER, chunk, bitmap & BITMAP_MASK))
        } else {
            HeaderWord::from_bitmap(bitmap)
        }
    }
    /// Whether this is a valid header word of the chunk at `chunk`: format 3, its check
    /// holds; format 2, index and indicator agree with the bitmap.
    #[inline]
    pub fn is_valid(self, fmt: Format, chunk: u64) -> bool {
        self == HeaderWord::encode(fmt, chunk, self.bitmap())
    }
    #[inline]
    pub fn bitmap(self) -> u64 {
        self.0 & BITMAP_MASK
    }
    /// Index of the lowest free slot (56 when full), derived from the bitmap in both
    /// formats.
    #[inline]
    pub fn next_free(self) -> u32 {
        self.bitmap().trailing_ones()
    }
    #[inline]
    pub fn is_full(self) -> bool {
        self.bitmap() == BITMAP_MASK
    }
    /// The raw format-2 indicator bits (meaningless in format 3).
    #[inline]
    pub fn indicator(self) -> u64 {
        self.0 >> FULL_SHIFT
    }
    /// Whether index and indicator agree with the bitmap (the format-2 consistency rule).
    #[inline]
    pub fn is_consistent(self) -> bool {
        self == HeaderWord::from_bitmap(self.bitmap())
    }
    #[inline]
    pub fn is_used(self, slot: usize) -> bool {
        self.0 & (1 << slot) != 0
    }
    #[inline]
    pub fn used_count(self) -> u32 {
        self.bitmap().count_ones()
    }
}

/// The 8-byte PM word at `off` as an atomic: every PM access of the allocator goes
/// through here (except the root block's immutable part, read once at open).
///
/// Crate-private, as is everything that reads or writes PM by offset: a public form
/// would let safe code touch any word of the pool, racing with the engines' own
/// non-atomic stores to their objects. Inside the crate the offsets are allocator
/// metadata (chunk and extent heads, directory entries), which are only ever accessed
/// atomically, through this function.
///
/// # Panics
/// If `off` is not 8-aligned, lies in the pool header, or is not inside the mapped pool
/// (a corrupt link or a bug): a reference to memory outside the mapping would be
/// undefined behaviour, so this is checked in release builds too. The `pmkv` API turns
/// the panic into an error.
#[inline]
pub(crate) fn word(pool: &Pool, off: u64) -> &AtomicU64 {
    assert!(
        off.is_multiple_of(8) && off >= HEADER_SIZE && off.checked_add(8).is_some_and(|e| e <= pool.size()),
        "allocator word at {off:#x} is misaligned or outside the pool's heap [{HEADER_SIZE:#x}, {:#x})",
        pool.size()
    );
    // SAFETY: `[off, off+8)` lies in the mapping (checked above), which lives as long as
    // `pool` and so as long as the returned reference; the address is 8-aligned (the
    // base is page-aligned, `off` checked); allocator words are only ever accessed
    // atomically (the header, accessed otherwise, is excluded above), so no non-atomic
    // access races with this one.
    unsafe { AtomicU64::from_ptr(pool.at::<u64>(off)) }
}

/// Read the header word of the chunk at `chunk`.
#[inline]
pub(crate) fn header(pool: &Pool, chunk: u64) -> HeaderWord {
    HeaderWord(word(pool, chunk).load(Ordering::Acquire))
}

/// Read the link word at `at` (`PNext`, `PHead`, `PCurrent`, `PPrev`): the offset it
/// names (0 = none), or `Corrupt` naming the word if its check fails (format 3).
#[inline]
pub(crate) fn load_link(pool: &Pool, fmt: Format, at: u64) -> Result<u64> {
    let w = word(pool, at).load(Ordering::Acquire);
    check::link_value(fmt, at, w).ok_or_else(|| {
        PoolError::CorruptAllocator(format!("allocator link word at {at:#x} is damaged ({w:#x} fails its check)"))
    })
}

/// Store and persist the link word at `at`, naming `off`.
#[inline]
pub(crate) fn store_link(pool: &Pool, fmt: Format, at: u64, off: u64) {
    pool.note_store();
    word(pool, at).store(check::link_word(fmt, at, off), Ordering::Release);
    pool.persist_off(at, 8);
}

/// Read a chunk's (or extent's) `PNext`.
#[inline]
pub(crate) fn next(pool: &Pool, fmt: Format, chunk: u64) -> Result<u64> {
    load_link(pool, fmt, chunk + NEXT_AT)
}

/// Store and persist `PNext` of `chunk`.
pub(crate) fn set_next(pool: &Pool, fmt: Format, chunk: u64, to: u64) {
    store_link(pool, fmt, chunk + NEXT_AT, to)
}

/// Write the head of a fresh chunk (empty bitmap, `PNext = next`) and persist it; the
/// chunk is not on any list yet, so a crash before it is linked loses nothing.
pub(crate) fn init(pool: &Pool, fmt: Format, chunk: u64, next: u64) {
    word(pool, chunk).store(HeaderWord::encode(fmt, chunk, 0).0, Ordering::Relaxed);
    word(pool, chunk + NEXT_AT).store(check::link_word(fmt, chunk + NEXT_AT, next), Ordering::Relaxed);
    pool.persist_off(chunk, 16);
}

/// Why [`set_bit_ordered`] wrote nothing.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BitError {
    /// The bit already had the requested value.
    Same,
    /// The header word fails its check (format 3): damage, not to be built upon.
    Damaged(u64),
}

/// Set (`used = true`) or reset bit `slot` of the chunk's header with one 8-byte
/// compare-and-swap (other threads may update other bits of the same word at the same
/// time), then flush the word, and fence it when `fence` (else it becomes durable at the
/// calling thread's next fence). The new word's check (format 3) is computed inside the
/// loop from the new bitmap, so word and check are one store. Returns the previous
/// header; a damaged previous word is refused rather than re-checked, which would bless it.
pub(crate) fn set_bit_ordered(
    pool: &Pool,
    fmt: Format,
    chunk: u64,
    slot: usize,
    used: bool,
    fence: bool,
) -> std::result::Result<HeaderWord, BitError> {
    let old = set_bit_lazy(pool, fmt, chunk, slot, used)?;
    pool.flush_off(chunk, 8);
    if fence {
        pool.fence_after_rmw();
    }
    Ok(old)
}

/// [`set_bit_ordered`] with no flush and no fence: the new word stays in the cache until
/// it is written back or persisted with a later change of the same word (see
/// `EpAlloc::publish_reserved_lazy`).
#[inline]
pub(crate) fn set_bit_lazy(
    pool: &Pool,
    fmt: Format,
    chunk: u64,
    slot: usize,
    used: bool,
) -> std::result::Result<HeaderWord, BitError> {
    let w = word(pool, chunk);
    let bit = 1u64 << slot;
    pool.note_store();
    let mut cur = w.load(Ordering::Acquire);
    loop {
        let old = HeaderWord(cur);
        let bitmap = if used { old.bitmap() | bit } else { old.bitmap() & !bit };
        // Format 3: the old word's check and the new one's, side by side.
        let (valid, new) = if fmt.checked() {
            let (c_old, c_new) = check::check8_x2(KIND_HEADER, (old.bitmap(), chunk), (bitmap, chunk));
            (cur == old.bitmap() | c_old << 56, HeaderWord(bitmap | c_new << 56))
        } else {
            (true, HeaderWord::encode(fmt, chunk, bitmap))
        };
        if !valid {
            return Err(BitError::Damaged(cur));
        }
        if old.is_used(slot) == used {
            return Err(BitError::Same);
        }
        match w.compare_exchange_weak(cur, new.0, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                // The header line is dirtied whether or not it is flushed (the lazy
                // publish leaves it in the cache): exact line counting must see it.
                pool.note_write(chunk, 8);
                return Ok(old);
            }
            Err(now) => cur = now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_word_layout_matches_fig2() {
        let h = HeaderWord::from_bitmap(0);
        assert_eq!(h.0, 0, "empty chunk: bitmap 0, next free 0, indicator 00");
        let h = HeaderWord::from_bitmap(0b1011);
        assert_eq!(h.next_free(), 2);
        assert_eq!(h.0 >> NEXT_SHIFT & 0x3f, 2);
        assert_eq!(h.indicator(), IND_HAS_FREE);
        assert_eq!(h.0.to_le_bytes()[7] & 0x3f, 2, "the last byte holds the index in its low 6 bits");
        let full = HeaderWord::from_bitmap(BITMAP_MASK);
        assert_eq!(full.next_free(), 56);
        assert_eq!(full.0 >> NEXT_SHIFT & 0x3f, 56);
        assert_eq!(full.indicator(), IND_FULL);
        assert_eq!(full.0.to_le_bytes()[..7], [0xff; 7], "the first 7 bytes are the bitmap");
        assert!(full.is_consistent());
        assert!(!HeaderWord(0b1).is_consistent());
        assert!(!HeaderWord(BITMAP_MASK).is_consistent());
    }

    #[test]
    fn format3_header_is_bitmap_and_check() {
        let chunk = 0x12340;
        for bitmap in [0, 1, 0b1011, BITMAP_MASK >> 1, BITMAP_MASK] {
            let h = HeaderWord::encode(Format::V3, chunk, bitmap);
            assert_eq!(h.bitmap(), bitmap);
            assert!(h.is_valid(Format::V3, chunk));
            assert_eq!(h.next_free(), bitmap.trailing_ones());
            assert_eq!(h.is_full(), bitmap == BITMAP_MASK);
            for bit in 0..64 {
                assert!(!HeaderWord(h.0 ^ 1 << bit).is_valid(Format::V3, chunk), "bit {bit} of {bitmap:#x}");
            }
        }
        assert!(!HeaderWord(0).is_valid(Format::V3, chunk), "a zeroed header is damage");
        assert!(HeaderWord(0).is_valid(Format::V2, chunk), "format 2: the empty header is 0");
    }
}
