//! The memory chunk of HART Fig. 2: a 16-byte head followed by 56 fixed-size slots.
//!
//! ```text
//! byte 0..8   header word (little endian u64)
//!             bits  0..56  slot bitmap: bit i set = slot i is *used*
//!             bits 56..62  index of the next free slot (lowest clear bit; 56 when full)
//!             bits 62..64  full indicator: 00 = has a free slot, 01 = full (10, 11 reserved)
//! byte 8..16  PNext: pool offset of the next chunk of the same list, 0 at the end
//! [padding to 64 bytes for line-multiple slot sizes, see size_class.rs]
//! slots
//! ```
//!
//! The paper gives the fields in byte order ("the first 7 bytes ... the last byte split
//! into 6 bits and 2 bits"); with a little-endian word that is exactly the bit layout
//! above. The whole header lives in one aligned 8-byte word, so every change to it is a
//! single 8-byte store that PM writes atomically, followed by a persist: a crash leaves
//! either the old or the new word, never a bitmap that disagrees with its index or
//! indicator. `PNext` is an offset, never a pointer (SPEC P2).
//!
//! Only the persistent *used* state is kept here. Which free slots are currently handed
//! out to a thread (reserved, not yet published) is DRAM state of the allocator, so that
//! reserving costs no PM write and a crash simply forgets reservations.

use crate::header::HEADER_SIZE;
use crate::pool::Pool;
use std::sync::atomic::{AtomicU64, Ordering};

use super::size_class::SLOTS;

/// Mask of the 56 bitmap bits.
pub const BITMAP_MASK: u64 = (1 << SLOTS) - 1;
const NEXT_SHIFT: u32 = 56;
const NEXT_MASK: u64 = 0x3f;
const FULL_SHIFT: u32 = 62;
/// Full indicator values.
pub const IND_HAS_FREE: u64 = 0b00;
pub const IND_FULL: u64 = 0b01;

/// Offset of `PNext` within a chunk (and within an extent header: the same list code
/// serves both).
pub const NEXT_AT: u64 = 8;

/// A decoded chunk header word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderWord(pub u64);

impl HeaderWord {
    /// The one consistent header word for `bitmap`: next-free index and full indicator
    /// derived from it.
    #[inline]
    pub fn from_bitmap(bitmap: u64) -> HeaderWord {
        let bitmap = bitmap & BITMAP_MASK;
        let next = bitmap.trailing_ones() as u64; // 56 when every slot is used
        let ind = if bitmap == BITMAP_MASK { IND_FULL } else { IND_HAS_FREE };
        HeaderWord(bitmap | next << NEXT_SHIFT | ind << FULL_SHIFT)
    }
    #[inline]
    pub fn bitmap(self) -> u64 {
        self.0 & BITMAP_MASK
    }
    #[inline]
    pub fn next_free(self) -> u64 {
        (self.0 >> NEXT_SHIFT) & NEXT_MASK
    }
    #[inline]
    pub fn indicator(self) -> u64 {
        self.0 >> FULL_SHIFT
    }
    /// Whether index and indicator agree with the bitmap (what the checker verifies).
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

/// Read a chunk's (or extent's) `PNext`.
#[inline]
pub(crate) fn next(pool: &Pool, chunk: u64) -> u64 {
    word(pool, chunk + NEXT_AT).load(Ordering::Acquire)
}

/// Store and persist `PNext` of `chunk`.
pub(crate) fn set_next(pool: &Pool, chunk: u64, to: u64) {
    pool.note_store();
    word(pool, chunk + NEXT_AT).store(to, Ordering::Release);
    pool.persist_off(chunk + NEXT_AT, 8);
}

/// Write the head of a fresh chunk (empty bitmap, `PNext = next`) and persist it; the
/// chunk is not on any list yet, so a crash before it is linked loses nothing.
pub(crate) fn init(pool: &Pool, chunk: u64, next: u64) {
    word(pool, chunk).store(HeaderWord::from_bitmap(0).0, Ordering::Relaxed);
    word(pool, chunk + NEXT_AT).store(next, Ordering::Relaxed);
    pool.persist_off(chunk, 16);
}

/// Set (`used = true`) or reset bit `slot` of the chunk's header with one 8-byte
/// compare-and-swap (other threads may update other bits of the same word at the same
/// time), then flush the word, and fence it when `fence` (else it becomes durable at the
/// calling thread's next fence). Returns the previous header, or `None` if the bit
/// already had the requested value (nothing was written).
pub(crate) fn set_bit_ordered(pool: &Pool, chunk: u64, slot: usize, used: bool, fence: bool) -> Option<HeaderWord> {
    let w = word(pool, chunk);
    let bit = 1u64 << slot;
    pool.note_store();
    let mut cur = w.load(Ordering::Acquire);
    loop {
        let old = HeaderWord(cur);
        if old.is_used(slot) == used {
            return None;
        }
        let bitmap = if used { old.bitmap() | bit } else { old.bitmap() & !bit };
        let new = HeaderWord::from_bitmap(bitmap);
        match w.compare_exchange_weak(cur, new.0, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                pool.flush_off(chunk, 8);
                if fence {
                    pool.fence_after_rmw();
                }
                return Some(old);
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
        assert_eq!(h.indicator(), IND_HAS_FREE);
        assert_eq!(h.0.to_le_bytes()[7] & 0x3f, 2, "the last byte holds the index in its low 6 bits");
        let full = HeaderWord::from_bitmap(BITMAP_MASK);
        assert_eq!(full.next_free(), 56);
        assert_eq!(full.indicator(), IND_FULL);
        assert_eq!(full.0.to_le_bytes()[..7], [0xff; 7], "the first 7 bytes are the bitmap");
        assert!(full.is_consistent());
        assert!(!HeaderWord(0b1).is_consistent());
        assert!(!HeaderWord(BITMAP_MASK).is_consistent());
    }
}
