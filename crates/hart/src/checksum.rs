//! Checksums of HART's PM objects (not in the paper; SPEC H5 "damage is never silent").
//!
//! Every leaf carries a *key check* over its key (inline or in its key object) and a
//! *value check* over its value word; every value object carries a check over its bytes.
//! All three are CRC-32C (hardware `crc32` instructions on x86-64, a few nanoseconds for a
//! leaf) seeded with the leaf's pool offset, so that a line or object written at the
//! wrong place, or a `p_value` redirected to another record's value, fails its check just
//! like flipped bits do. The checks sit in the same cache line as what they cover (the
//! value object's in its first line), so they add no persist to any operation.
//!
//! Where they are verified: every used leaf at open (recovery reads each leaf anyway);
//! the leaf and its value object on every read (`get`, `scan`); everything in `check`; and
//! every 64-byte line of a pool file by `salvage`, which finds live leaves by their checks
//! alone. A leaf whose key check is 0 was erased by a delete.

use crate::layout::*;

/// CRC-32C of `leaf` (little-endian) followed by `parts`: the same value as
/// `crc32c::crc32c` of their concatenation. The inputs are short (a key, a few words), where
/// a library call's set-up costs more than the CRC itself, so on x86-64 with SSE 4.2 the
/// `crc32` instruction is used inline, 8 bytes at a time (about 1 ns per word).
#[inline]
fn crc(leaf: u64, parts: &[&[u8]]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above).
            return unsafe { crc_sse42(leaf, parts) };
        }
    }
    let mut c = crc32c::crc32c(&leaf.to_le_bytes());
    for p in parts {
        c = crc32c::crc32c_append(c, p);
    }
    c
}

/// [`crc`] with the SSE 4.2 `crc32` instruction.
///
/// # Safety
///
/// The CPU supports SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc_sse42(leaf: u64, parts: &[&[u8]]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u16, _mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};
    let mut c = _mm_crc32_u64(0xffff_ffff, leaf);
    for p in parts {
        let mut words = p.chunks_exact(8);
        for w in &mut words {
            c = _mm_crc32_u64(c, u64::from_le_bytes(w.try_into().expect("8-byte chunk")));
        }
        // The 0..7 bytes left: four, two and one at a time (at most three instructions
        // instead of seven; the same CRC, since each instruction takes its bytes in
        // little-endian order).
        let mut rest = words.remainder();
        if rest.len() >= 4 {
            c = _mm_crc32_u32(c as u32, u32::from_le_bytes(rest[..4].try_into().expect("4 bytes"))) as u64;
            rest = &rest[4..];
        }
        if rest.len() >= 2 {
            c = _mm_crc32_u16(c as u32, u16::from_le_bytes(rest[..2].try_into().expect("2 bytes"))) as u64;
            rest = &rest[2..];
        }
        if let Some(&b) = rest.first() {
            c = _mm_crc32_u8(c as u32, b) as u64;
        }
    }
    !(c as u32)
}

/// The key check of a leaf at `leaf` with this key and key-out-of-line bit; never 0.
#[inline]
pub(crate) fn key_check(leaf: u64, key: &[u8], key_out: bool) -> u32 {
    let head = (key.len() as u64) | (key_out as u64) << 32;
    crc(leaf, &[&head.to_le_bytes(), key]) | 1
}

/// The value check of a leaf at `leaf` whose value word is `word` and flags `flags`.
///
/// Three words, on every `get`, update and insert: a fixed sequence of three `crc32`
/// instructions rather than [`crc`]'s loop over byte slices (same value: the test below).
#[inline]
pub(crate) fn value_check(leaf: u64, word: u64, flags: u32) -> u32 {
    let tail = (flags & INLINE_MASK) as u64;
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above).
            return unsafe { crc3_sse42(leaf, word, tail) };
        }
    }
    crc(leaf, &[&word.to_le_bytes(), &tail.to_le_bytes()])
}

/// CRC-32C of three little-endian words.
///
/// # Safety
///
/// The CPU supports SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc3_sse42(a: u64, b: u64, c: u64) -> u32 {
    use std::arch::x86_64::_mm_crc32_u64;
    !(_mm_crc32_u64(_mm_crc32_u64(_mm_crc32_u64(0xffff_ffff, a), b), c) as u32)
}

/// The check stored in a value object owned by the leaf at `leaf`.
#[inline]
pub(crate) fn object_check(leaf: u64, value: &[u8]) -> u32 {
    crc(leaf, &[&(value.len() as u64).to_le_bytes(), value])
}

/// A leaf's meta word, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    pub key_len: usize,
    pub flags: u32,
    pub key_check: u32,
}

impl Meta {
    #[inline]
    pub(crate) fn decode(w: u64) -> Meta {
        Meta { key_len: (w & 0xffff) as usize, flags: ((w >> 16) & 0xffff) as u32, key_check: (w >> 32) as u32 }
    }

    #[inline]
    pub(crate) fn encode(self) -> u64 {
        debug_assert!(self.key_len <= MAX_KEY && self.flags <= 0xffff);
        self.key_len as u64 | (self.flags as u64) << 16 | (self.key_check as u64) << 32
    }

    /// Whether the key lives in a key object.
    #[inline]
    pub(crate) fn key_out(self) -> bool {
        self.flags & FLAG_KEY_OUT != 0
    }

    /// Flags this build never writes: a leaf with any of them is damaged.
    #[inline]
    pub(crate) fn flags_valid(self) -> bool {
        self.flags & !(FLAG_KEY_OUT | INLINE_MASK) == 0
            && inline_len(self.flags).is_none_or(|n| n <= INLINE_VALUE)
            && (self.key_out() || self.key_len <= INLINE_KEY)
            && (!self.key_out() || self.key_len > INLINE_KEY)
    }
}

/// The value-check word: `check` now, `prev` before the last update.
#[inline]
pub(crate) fn vcheck_word(check: u32, prev: u32) -> u64 {
    check as u64 | (prev as u64) << 32
}

/// Whether the value-check word `vw` proves a value word `word` with `flags`.
#[inline]
pub(crate) fn value_ok(leaf: u64, vw: u64, word: u64, flags: u32) -> bool {
    let c = value_check(leaf, word, flags);
    c == vw as u32 || c == (vw >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The three-word value check is the CRC-32C of the leaf offset, the value word and
    /// the inline bits of the flags, as the layout defines it.
    #[test]
    fn value_check_is_crc32c_of_its_words() {
        for (leaf, word, flags) in
            [(0u64, 0u64, 0u32), (64, u64::MAX, u32::MAX), (0xdead_beef_0040, 0x0123_4567_89ab_cdef, 0x0800)]
        {
            let mut bytes = leaf.to_le_bytes().to_vec();
            bytes.extend_from_slice(&word.to_le_bytes());
            bytes.extend_from_slice(&((flags & INLINE_MASK) as u64).to_le_bytes());
            assert_eq!(value_check(leaf, word, flags), crc32c::crc32c(&bytes));
        }
    }

    #[test]
    fn the_inline_crc_is_crc32c() {
        let data: Vec<u8> = (0..200u32).map(|i| (i.wrapping_mul(2654435761) >> 7) as u8).collect();
        for leaf in [0u64, 64, 0xdead_beef_0040] {
            for (a, b) in [(0, 0), (0, 1), (3, 11), (8, 16), (5, 200), (0, 200)] {
                let (x, y) = data.split_at(b);
                let x = &x[a..];
                let mut cat = leaf.to_le_bytes().to_vec();
                cat.extend_from_slice(x);
                cat.extend_from_slice(y);
                assert_eq!(crc(leaf, &[x, y]), crc32c::crc32c(&cat), "leaf {leaf} parts {a}..{b}");
            }
            // Every tail length (the 4-, 2- and 1-byte steps after the 8-byte words).
            for n in 0..=24 {
                let mut cat = leaf.to_le_bytes().to_vec();
                cat.extend_from_slice(&data[..n]);
                assert_eq!(crc(leaf, &[&data[..n]]), crc32c::crc32c(&cat), "leaf {leaf} {n} bytes");
            }
        }
    }

    #[test]
    fn checks_depend_on_place_and_content() {
        assert_ne!(key_check(64, b"abc", false), key_check(128, b"abc", false));
        assert_ne!(key_check(64, b"abc", false), key_check(64, b"abd", false));
        assert_ne!(key_check(64, b"abc", false), key_check(64, b"abc", true));
        assert_ne!(key_check(64, b"", false), 0);
        assert_ne!(value_check(64, 7, 0), value_check(64, 7, FLAG_VALUE_INLINE));
        assert_ne!(object_check(64, b"v"), object_check(128, b"v"));
        let m = Meta { key_len: 65_535, flags: FLAG_KEY_OUT, key_check: 0xdead_beef };
        assert_eq!(Meta::decode(m.encode()), m);
        let vw = vcheck_word(value_check(64, 1, 0), value_check(64, 2, 0));
        assert!(value_ok(64, vw, 1, 0) && value_ok(64, vw, 2, 0) && !value_ok(64, vw, 3, 0));
    }
}
