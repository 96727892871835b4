//! Self-checking allocator words (allocator format 3).
//!
//! Free space is implicit (whatever no list reaches), so a damaged word that a list walk
//! trusts does not fail: it silently turns live chunks into free space. Format 3 therefore
//! gives every such word its own check, *inside the same aligned 8-byte word*: PM writes
//! 8 aligned bytes atomically, so a word and its check are always written together by the
//! one store or CAS that was there before — no persist is added anywhere, and no crash can
//! leave a word that disagrees with its check.
//!
//! ```text
//! bits  0..56  data: a bitmap, a pool offset, a directory tag or a count
//! bits 56..64  check8(kind, data, own pool offset of the word)
//! ```
//!
//! The check is CRC-32C of (`data`, `at | kind << 56`) — the hardware `crc32` instruction
//! where present, two instructions — folded to 8 bits by XOR of its bytes. Because the
//! word's own offset is hashed, a word copied or written to the wrong place fails like a
//! flipped bit. `kind` separates the kinds of word, so a link never passes for a header.
//! A raw check of 0 is replaced by [`ZERO_CHECK`], so the check is never 0 and an all-zero
//! word (a zeroed line or page) is never valid — in particular a list's end is the
//! *encoding* of offset 0, not the word 0.
//!
//! Detection: CRC is affine, so flipping data bit `k` changes the raw check by a constant
//! `d(k)` that does not depend on the data; `d(k)` is non-zero for all 128 input bit
//! positions and [`ZERO_CHECK`] is none of them (`tests::single_bit_flips_are_always_
//! detected` proves both), so **every single-bit flip of a word is detected**, including
//! the remapped case. Other damage passes with odds of about 1/255 per damaged word.

/// Kinds of self-checked word (the top byte of the CRC's second input).
pub const KIND_HEADER: u64 = 1;
/// `PNext` of a chunk or extent, `PHead`, `PCurrent`, `PPrev`.
pub const KIND_LINK: u64 = 2;
pub const KIND_TAG: u64 = 3;
pub const KIND_COUNT: u64 = 4;
pub const KIND_EXTENT: u64 = 5;

/// Bits of a word that hold data; the top byte is the check.
pub const DATA_MASK: u64 = (1 << 56) - 1;

/// The check used when the folded CRC is 0. Chosen outside the set of differences a
/// single bit flip can cause (see the module doc), so the remapping never hides one.
pub const ZERO_CHECK: u64 = 0xa5;

/// Which encoding an allocator uses, from the root block's version at open. A field of
/// the allocator, so the choice is one predictable branch per word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Version 2: plain words (bitmap with next-free index and indicator, raw offsets).
    V2,
    /// Version 3: self-checked words (this module).
    V3,
}

impl Format {
    /// Whether words carry checks.
    #[inline]
    pub fn checked(self) -> bool {
        self == Format::V3
    }
    /// The root-block version of this format.
    pub fn version(self) -> u32 {
        match self {
            Format::V2 => 2,
            Format::V3 => 3,
        }
    }
}

/// CRC-32C of the 16 bytes `a, b` (little endian), the same value as `crc32c::crc32c`.
#[inline]
fn crc2(a: u64, b: u64) -> u32 {
    crate::checksum::crc32c_words([a, b])
}

/// The 8-bit check (1..=255) of `data` stored in the word at pool offset `at`.
#[inline]
pub fn check8(kind: u64, data: u64, at: u64) -> u64 {
    fold(crc2(data, (at & DATA_MASK) | kind << 56))
}

/// [`check8`] of two words of one kind, computed side by side (see
/// [`crate::checksum::crc32c_words_x2`]).
#[inline]
pub fn check8_x2(kind: u64, (d1, at1): (u64, u64), (d2, at2): (u64, u64)) -> (u64, u64) {
    let (c1, c2) =
        crate::checksum::crc32c_words_x2([d1, (at1 & DATA_MASK) | kind << 56], [d2, (at2 & DATA_MASK) | kind << 56]);
    (fold(c1), fold(c2))
}

/// The 8-bit check (1..=255) of a CRC: its four bytes xor-folded, 0 remapped.
#[inline]
fn fold(c: u32) -> u64 {
    let f = (c ^ c >> 8 ^ c >> 16 ^ c >> 24) as u64 & 0xff;
    if f == 0 {
        ZERO_CHECK
    } else {
        f
    }
}

/// The self-checked word holding `data` (< 2^56) at pool offset `at`.
///
/// # Panics
/// If `data` does not fit in 56 bits (offsets and sizes are bounded by the pool size,
/// far below 2^56; a wider value is a bug).
#[inline]
pub fn encode(kind: u64, at: u64, data: u64) -> u64 {
    assert!(data <= DATA_MASK, "allocator word data {data:#x} at {at:#x} does not fit in 56 bits");
    data | check8(kind, data, at) << 56
}

/// The data of the self-checked word `word` at `at`, if its check holds.
#[inline]
pub fn decode(kind: u64, at: u64, word: u64) -> Option<u64> {
    let data = word & DATA_MASK;
    (word >> 56 == check8(kind, data, at)).then_some(data)
}

/// A link word (`PNext`, `PHead`, `PCurrent`, `PPrev`) naming `off` (0 = none), at `at`.
#[inline]
pub fn link_word(fmt: Format, at: u64, off: u64) -> u64 {
    if fmt.checked() {
        encode(KIND_LINK, at, off)
    } else {
        off
    }
}

/// The offset a link word names, if the word is valid.
#[inline]
pub fn link_value(fmt: Format, at: u64, word: u64) -> Option<u64> {
    if fmt.checked() {
        decode(KIND_LINK, at, word)
    } else {
        Some(word)
    }
}

/// Marker in the high half of an extent's check word (format 3), so that word is never 0.
const EXT_CHECK_MARK: u64 = 0x4b43_4558 << 32; // "XECK"

/// An extent's check word (bytes 24..32 of its header, format 3): a full CRC-32C of its
/// length and own offset, written once when the extent is published.
#[inline]
pub fn extent_check(at: u64, len: u64) -> u64 {
    EXT_CHECK_MARK | crc2(len, (at & DATA_MASK) | KIND_EXTENT << 56) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The raw (unmapped) folded check, to measure the effect of a flip.
    fn raw(data: u64, b: u64) -> u64 {
        let c = crc2(data, b);
        (c ^ c >> 8 ^ c >> 16 ^ c >> 24) as u64 & 0xff
    }

    #[test]
    fn crc2_is_crc32c() {
        for (a, b) in [(0u64, 0u64), (1, 2), (u64::MAX, 0x1234_5678_9abc_def0)] {
            let mut bytes = a.to_le_bytes().to_vec();
            bytes.extend_from_slice(&b.to_le_bytes());
            assert_eq!(crc2(a, b), crc32c::crc32c(&bytes));
        }
    }

    #[test]
    fn single_bit_flips_are_always_detected() {
        // Affine: the difference a flip makes is the same for every input. None is 0
        // (the check always changes) and none is ZERO_CHECK (the remap never hides one).
        for k in 0..128 {
            let (a, b) = if k < 64 { (1u64 << k, 0) } else { (0, 1u64 << (k - 64)) };
            let d = raw(a, b) ^ raw(0, 0);
            assert_ne!(d, 0, "bit {k}");
            assert_ne!(d, ZERO_CHECK, "bit {k}");
            // Affinity, spot-checked on other bases.
            for base in [0x1234u64, 0xdead_beef_0042, DATA_MASK] {
                assert_eq!(raw(base ^ a, 77 ^ b) ^ raw(base, 77), d, "bit {k}");
            }
        }
    }

    #[test]
    fn every_kind_round_trips_rejects_zero_and_every_flip() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for kind in [KIND_HEADER, KIND_LINK, KIND_TAG, KIND_COUNT] {
            for i in 0..200 {
                let at = (next() % (1 << 40)) & !7;
                let data = if i == 0 { 0 } else { next() & DATA_MASK };
                let w = encode(kind, at, data);
                assert_eq!(decode(kind, at, w), Some(data));
                assert_ne!(w >> 56, 0, "the check is never 0");
                assert_eq!(decode(kind, at, 0), None, "a zero word is never valid");
                for bit in 0..64 {
                    assert_eq!(decode(kind, at, w ^ 1 << bit), None, "kind {kind} bit {bit} of {w:#x}");
                }
            }
        }
        // The word depends on where it is and what it is: moved to another word or read
        // as another kind, it passes only by chance (about 1 in 255).
        let w = encode(KIND_LINK, 4096, 8192);
        let moved = (1..1000u64).filter(|i| decode(KIND_LINK, 4096 + 8 * i, w).is_some()).count();
        let other_kind = [KIND_HEADER, KIND_TAG, KIND_COUNT].iter().filter(|&&k| decode(k, 4096, w).is_some()).count();
        assert!(moved < 20 && other_kind < 2, "{moved} {other_kind}");
        assert_eq!(link_value(Format::V3, 64, link_word(Format::V3, 64, 0)), Some(0));
        assert_eq!(link_value(Format::V3, 64, 0), None, "a zeroed link is not an end");
        assert_eq!(link_value(Format::V2, 64, 0), Some(0));
        assert_eq!(link_word(Format::V2, 64, 4096), 4096);
    }

    #[test]
    fn extent_check_rejects_zero_and_flips() {
        let c = extent_check(1 << 20, 3 * 4096);
        assert_ne!(c, 0);
        for bit in 0..64 {
            assert_ne!(extent_check(1 << 20, (3 * 4096) ^ 1 << bit), c, "length bit {bit}");
        }
        assert_ne!(extent_check(2 << 20, 3 * 4096), c);
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn data_must_fit_in_56_bits() {
        encode(KIND_LINK, 0, 1 << 56);
    }
}
