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

/// CRC-32C of `leaf` (little-endian), the word `head`, then `bytes` (inline `crc32`
/// instructions: see `pmkv_substrate::checksum`).
#[inline]
fn crc(leaf: u64, head: u64, bytes: &[u8]) -> u32 {
    pmkv_substrate::checksum::crc32c_word_bytes(leaf, head, bytes)
}

/// The key check of a leaf at `leaf` with this key and key-out-of-line bit; never 0.
#[inline]
pub(crate) fn key_check(leaf: u64, key: &[u8], key_out: bool) -> u32 {
    let head = (key.len() as u64) | (key_out as u64) << 32;
    crc(leaf, head, key) | 1
}

/// The value check of a leaf at `leaf` whose value word is `word` and flags `flags`.
///
/// Three words, on every `get`, update and insert: a fixed sequence of three `crc32`
/// instructions rather than [`crc`]'s loop over byte slices (same value: the test below).
#[inline]
pub(crate) fn value_check(leaf: u64, word: u64, flags: u32) -> u32 {
    let tail = (flags & (INLINE_MASK | GEN_MASK)) as u64;
    pmkv_substrate::checksum::crc32c_words([leaf, word, tail])
}

/// The check stored in a value object owned by the leaf at `leaf`.
#[inline]
pub(crate) fn object_check(leaf: u64, value: &[u8]) -> u32 {
    crc(leaf, value.len() as u64, value)
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
        self.flags & !(FLAG_KEY_OUT | INLINE_MASK | GEN_MASK) == 0
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

/// The value word that the value-check word `vw` proves, the offset in the leaf of the
/// slot holding it (`LEAF_P_VALUE` or `LEAF_SLOT_B`) and its check; `None` if no check
/// proves a slot.
///
/// `a` is the `p_value` word and `ca` its value check (callers have computed it already:
/// the common case stops there); `b` is the second inline slot (bytes 56..64) when the leaf
/// may use it (an inline value and a key of at most [`SLOT_B_KEY`] bytes, see
/// `layout`), else `None`. The current check is tried on both slots first; the previous
/// check only if neither verifies, which happens only after a crash tore an update
/// (`update`), and then proves the value before it.
#[inline]
pub(crate) fn value_word(leaf: u64, vw: u64, a: u64, ca: u32, b: Option<u64>, flags: u32) -> Option<(u64, u64, u32)> {
    let (cur, prev) = (vw as u32, (vw >> 32) as u32);
    if ca == cur {
        return Some((a, LEAF_P_VALUE, ca));
    }
    let cb = b.map(|b| (b, value_check(leaf, b, flags)));
    match cb {
        Some((b, c)) if c == cur => Some((b, LEAF_SLOT_B, c)),
        _ if ca == prev => Some((a, LEAF_P_VALUE, ca)),
        Some((b, c)) if c == prev => Some((b, LEAF_SLOT_B, c)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`value_word`] without the check (the tests name the word and slot).
    fn slot_of(leaf: u64, vw: u64, a: u64, b: Option<u64>, flags: u32) -> Option<(u64, u64)> {
        value_word(leaf, vw, a, value_check(leaf, a, flags), b, flags).map(|(w, s, _)| (w, s))
    }

    /// The three-word value check is the CRC-32C of the leaf offset, the value word and
    /// the inline and generation bits of the flags, as the layout defines it.
    #[test]
    fn value_check_is_crc32c_of_its_words() {
        for (leaf, word, flags) in
            [(0u64, 0u64, 0u32), (64, u64::MAX, u32::MAX), (0xdead_beef_0040, 0x0123_4567_89ab_cdef, 0x0800)]
        {
            let mut bytes = leaf.to_le_bytes().to_vec();
            bytes.extend_from_slice(&word.to_le_bytes());
            bytes.extend_from_slice(&((flags & (INLINE_MASK | GEN_MASK)) as u64).to_le_bytes());
            assert_eq!(value_check(leaf, word, flags), crc32c::crc32c(&bytes));
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
        assert_eq!(slot_of(64, vw, 1, None, 0), Some((1, LEAF_P_VALUE)));
        assert_eq!(slot_of(64, vw, 2, None, 0), Some((2, LEAF_P_VALUE)));
        assert_eq!(slot_of(64, vw, 3, None, 0), None);
    }

    /// The second slot: the current check wins over the previous one whichever slot holds
    /// it, the previous check proves its value only when no slot matches the current one,
    /// and a slot the leaf may not use (`b == None`) is never read.
    #[test]
    fn value_word_prefers_the_current_check_in_either_slot() {
        let f = FLAG_VALUE_INLINE | (8 << INLINE_LEN_SHIFT);
        let c = |w| value_check(64, w, f);
        // Completed update into slot B: (new, old) with old in A.
        let vw = vcheck_word(c(2), c(1));
        assert_eq!(slot_of(64, vw, 1, Some(2), f), Some((2, LEAF_SLOT_B)));
        // The same word with the slot not usable: the previous check proves A.
        assert_eq!(slot_of(64, vw, 1, None, f), Some((1, LEAF_P_VALUE)));
        // Torn: the check word reached PM, slot B did not (it holds a stale 9).
        assert_eq!(slot_of(64, vw, 1, Some(9), f), Some((1, LEAF_P_VALUE)));
        // Torn the other way round: old check word, B written: A still current.
        assert_eq!(slot_of(64, vcheck_word(c(1), c(1)), 1, Some(2), f), Some((1, LEAF_P_VALUE)));
        // Previous check on slot B (an update back into A torn).
        assert_eq!(slot_of(64, vcheck_word(c(3), c(2)), 7, Some(2), f), Some((2, LEAF_SLOT_B)));
        // After the previous check is cleared, damage in the current slot is not hidden.
        assert_eq!(slot_of(64, vcheck_word(c(2), c(2)), 1, Some(2 ^ 4), f), None);
    }
}
