//! HART's persistent objects, byte by byte (also in docs/format/hart.md).
//!
//! **Leaf** (EPallocator type [`LEAF`], one 64-byte slot = one cache line, so writing a
//! leaf costs one line write-back):
//!
//! | bytes  | field     | meaning |
//! |--------|-----------|---------|
//! | 0..8   | p_value   | offset of the value object (HART's `p_value`), or the value itself if inline |
//! | 8..10  | key_len   | key length in bytes (≤ 65,535) |
//! | 10..12 | flags     | bit 0: key stored out of line; bit 1: value inline; bits 8..12: inline value length (0..=8); bits 12..16: generation (version 8) |
//! | 12..16 | key check | CRC-32C of (leaf offset, key_len, bit 0 of flags, the key bytes) \| 1; 0 = erased by a delete |
//! | 16..20 | value check | CRC-32C of (leaf offset, p_value word, the inline and generation bits of flags) |
//! | 20..24 | previous value check | the value check before the last update |
//! | 24..64 | key       | the key if `key_len <= 40`, else bytes 24..32 hold `p_key` |
//! | 56..64 | slot B    | with an inline value and `key_len <= 32`: the second inline value slot |
//!
//! The checks travel in the leaf's own cache line, so they cost no extra persist, and they
//! are seeded with the leaf's offset, so a line copied or shifted elsewhere does not pass
//! (see `checksum`). The previous value check lets an in-place update store the new check
//! before the new value word: a crash between the two leaves the old value, which the
//! previous check still proves.
//!
//! The paper's leaf holds the key inline (≤ 24 bytes, §IV); pmkv keeps up to 40 bytes
//! inline (all but one word of the Dictionary), and longer keys in a **key object** (type
//! [`KEY`]) of exactly `key_len` bytes, covered by the leaf's key check: one more
//! allocation, one more fence at insert, and one more PM line read per leaf comparison.
//!
//! **Inline values** (pmkv's extension; off with `Options::paper_updates`): a value of
//! at most 8 bytes inserted with a new key is stored in the `p_value` word itself, so the
//! leaf is the only object of the record: one allocation fewer per insert, one PM line
//! fewer per search, one free fewer per delete. An update to the same length is two
//! stores in the leaf's line (value check, then value word); any other update moves the
//! value out of line for good (Algorithm 3 with the micro-log, which logs the leaf's flags
//! too).
//!
//! **Slot B** (version 4): in `adr`, a same-length inline update of a leaf whose key has at
//! most 32 bytes writes the new value into whichever of the two slots (bytes 0..8, 56..64)
//! does *not* hold the current value, then the check word (new check, current check),
//! and persists the line once. Any torn subset of those two words leaves either the new
//! value proved by the new check or the old value proved by the previous one, so one
//! flush and one fence suffice where the single-slot update needs two persists. The value
//! lives in the slot whose word the current check proves (`checksum::value_word`); the
//! value check does not name the slot, so a reader may compute two checks.
//!
//! **Value object** (type [`VALUE`]): bytes 0..4 length, 4..8 CRC-32C of (owning leaf's
//! offset, length, value bytes), then the value. The length lives with the value (not in
//! the leaf) so that the out-of-place update swings value and length together with the
//! single 8-byte store of `p_value`; value objects are never written after they are
//! published (every update of an out-of-line value is out of place).
//!
//! **Superblock** (pool root [`SUPER_ROOT`]): magic `HARTSB01`, version, k_h, number of
//! micro-logs, offset of the micro-log array. Each micro-log line holds the update log in
//! bytes 0..32 (`micro_log`) and a writer lane's two insert-log words in 32..48
//! (`insert_log`, version 5).

use pmkv_substrate::epalloc::TypeId;

/// EPallocator object types of HART.
pub(crate) const LEAF: TypeId = TypeId(1);
pub(crate) const VALUE: TypeId = TypeId(2);
pub(crate) const KEY: TypeId = TypeId(3);
/// The superblock with the micro-log array (one object per pool).
pub(crate) const SUPER: TypeId = TypeId(4);

pub(crate) const LEAF_SIZE: usize = 64;
pub(crate) const INLINE_KEY: usize = 40;
pub(crate) const VALUE_HDR: usize = 8;
/// Largest key, in bytes (longer keys are refused with `Error::KeyTooLarge`); the
/// leaf records key lengths in 16 bits.
pub const MAX_KEY: usize = 65_535;
/// Largest value, in bytes (longer values are refused with `Error::ValueTooLarge`).
pub const MAX_VALUE: usize = 16 * 1024 * 1024;

pub(crate) const LEAF_P_VALUE: u64 = 0;
/// The meta word: key_len (bits 0..16), flags (16..32), key check (32..64).
pub(crate) const LEAF_META: u64 = 8;

/// Version 6: what a delete stores in the leaf's meta word before freeing it (the erase
/// mark): a multiplicative hash of the leaf's offset and a tag, odd so never 0, and a
/// valid meta word for this leaf only with odds about 2^-28 (its key check would have to
/// match). A hash, not a CRC: it is computed on every delete (a CRC cost ~15% of an
/// `eadr` delete, measured). Up to version 5 the erase stored 0, so after
/// a crash a used leaf whose meta word was zeroed by damage (a zeroed page of leaves)
/// looked like a delete to finish: its record was silently dropped. Now a zero meta word
/// in a used leaf is damage, unless a lane names the leaf (an insert cut short).
///
/// Version 8: the mark also carries the erased leaf's generation (meta bits 28..32, the
/// flag bits [`GEN_MASK`]), xored into those bits, so that the next insert into the slot
/// picks a different one (`insert`); a version-6 or 7 mark reads as generation 0.
#[inline]
pub(crate) fn erased_word(leaf: u64, gen: u32) -> u64 {
    erase_base(leaf) ^ ((gen as u64 & 0xf) << META_GEN_SHIFT)
}
#[inline]
fn erase_base(leaf: u64) -> u64 {
    (leaf ^ 0x4841_5254_4552_4153).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1
}
/// Where a leaf's generation lies in its meta word (flags bits 12..16).
const META_GEN_SHIFT: u32 = 16 + GEN_SHIFT;
/// Whether the meta word `raw` of the leaf at `leaf` is an erase mark (any generation).
#[inline]
pub(crate) fn is_erased(leaf: u64, raw: u64) -> bool {
    (raw ^ erase_base(leaf)) & !(0xf << META_GEN_SHIFT) == 0
}
/// The generation a leaf's meta word `raw` carries, whether it is a meta word or an
/// erase mark (for anything else, some number below 16).
#[inline]
pub(crate) fn gen_of(leaf: u64, raw: u64) -> u32 {
    let w = if is_erased(leaf, raw) { raw ^ erase_base(leaf) } else { raw };
    ((w >> META_GEN_SHIFT) & 0xf) as u32
}
/// The value-check word: value check (bits 0..32), previous value check (32..64).
pub(crate) const LEAF_VCHECK: u64 = 16;
pub(crate) const LEAF_KEY: u64 = 24;
/// The second inline value slot: the last 8 bytes of the key area, free when the key has
/// at most [`SLOT_B_KEY`] bytes (see the module doc, "Inline values").
pub(crate) const LEAF_SLOT_B: u64 = 56;
/// Longest key whose leaf has the second inline value slot.
pub(crate) const SLOT_B_KEY: usize = 32;
pub(crate) const FLAG_KEY_OUT: u32 = 1;
pub(crate) const FLAG_VALUE_INLINE: u32 = 2;
/// Inline value length: `(flags >> INLINE_LEN_SHIFT) & 0xf`.
pub(crate) const INLINE_LEN_SHIFT: u32 = 8;
/// Flag bits describing an inline value (cleared when the value moves out of line).
pub(crate) const INLINE_MASK: u32 = FLAG_VALUE_INLINE | (0xf << INLINE_LEN_SHIFT);
/// Largest inline value.
pub(crate) const INLINE_VALUE: usize = 8;
/// Version 8: the leaf's generation, `(flags & GEN_MASK) >> GEN_SHIFT`, covered by its
/// value check. An insert gives its leaf a generation under which the slot's previous
/// value word and value check do not verify, so that an insert torn by a crash can never
/// pass its checks with the new key and the previous occupant's value (`insert`).
pub(crate) const GEN_SHIFT: u32 = 12;
pub(crate) const GEN_MASK: u32 = 0xf << GEN_SHIFT;

/// Copy `src` (at most 40 bytes) to the start of `dst` with fixed-size, possibly
/// overlapping moves (its first and last 4, 8, 16 or 32 bytes), which compile to a few
/// register moves, where a copy of variable length is a `memcpy` call (a leaf's inline
/// key on every insert, and the ART's DRAM copy of it).
#[inline]
pub(crate) fn put_short(dst: &mut [u8; INLINE_KEY], src: &[u8]) {
    fn two<const W: usize>(dst: &mut [u8; INLINE_KEY], src: &[u8]) {
        let n = src.len();
        let (a, b): ([u8; W], [u8; W]) = (src[..W].try_into().expect("W"), src[n - W..].try_into().expect("W"));
        dst[..W].copy_from_slice(&a);
        dst[n - W..n].copy_from_slice(&b);
    }
    match src.len() {
        0 => {}
        1..=3 => {
            for (d, s) in dst.iter_mut().zip(src) {
                *d = *s;
            }
        }
        4..=7 => two::<4>(dst, src),
        8..=15 => two::<8>(dst, src),
        16..=31 => two::<16>(dst, src),
        _ => two::<32>(dst, src),
    }
}

/// The `p_value` word of an inline value (at most [`INLINE_VALUE`] bytes, little-endian,
/// zero above its length), built with fixed-size loads: a copy of variable length into a
/// word buffer compiles to a `memcpy` call on every insert and in-place update.
#[inline]
pub(crate) fn inline_word(value: &[u8]) -> u64 {
    let n = value.len();
    debug_assert!(n <= INLINE_VALUE);
    let u32_at = |at: usize| u32::from_le_bytes(value[at..at + 4].try_into().expect("4 bytes")) as u64;
    match n {
        0 => 0,
        1..=3 => value.iter().rev().fold(0, |w, &b| w << 8 | b as u64),
        // The first and the last four bytes: they overlap for n < 8, where they agree.
        4..=7 => u32_at(0) | u32_at(n - 4) << (8 * (n - 4)),
        _ => u64::from_le_bytes(value[..8].try_into().expect("8 bytes")),
    }
}

/// Length of the inline value described by `flags`, if the value is inline.
#[inline]
pub(crate) fn inline_len(flags: u32) -> Option<usize> {
    (flags & FLAG_VALUE_INLINE != 0).then_some(((flags >> INLINE_LEN_SHIFT) & 0xf) as usize)
}

/// Pool root slot of HART's superblock (EPallocator owns slot 0).
pub(crate) const SUPER_ROOT: usize = 1;
pub(crate) const SUPER_MAGIC: [u8; 8] = *b"HARTSB01";
/// Version 3 added the leaf and value checksums (and moved the key to byte 24); version
/// 2 added inline values. Pools of versions 1 and 2 are refused with a clear error: their
/// leaves have no checks to verify, and inventing them in place would bless whatever
/// damage those pools already hold.
pub(crate) const SUPER_VERSION: u32 = 8;
/// Oldest version this build opens. Version 4 added the second inline value slot, version
/// 5 the insert log's lane words (bytes 32..48 of each micro-log line, see `insert_log`),
/// version 6 the erase mark ([`erased_word`]), version 7 write-batch logs (EPallocator
/// objects of type `pmkv_substrate::batch_log::LOG`, see `batch`). Older pools use none
/// of them, so their leaves and logs are valid version-7 ones, and a writable open marks
/// the pool version 7 before its first write (builds that read only version 3 would take
/// a value in the second slot for damage; builds that read only 4 would take a torn
/// one-persist insert for damage after a crash; builds that read only 5 would take an
/// erased leaf for damage after a crash; builds that read only 6 would ignore a batch log
/// a crash left in use, and open the pool with the batch half applied).
pub(crate) const SUPER_VERSION_MIN: u32 = 3;
pub(crate) const SUPER_SIZE: u64 = 64;
/// Update micro-logs (one per concurrent writer; writers share them round-robin).
pub(crate) const NUM_LOGS: u32 = 64;
/// Each micro-log gets its own cache line so writers never share one.
pub(crate) const LOG_SIZE: u64 = 64;

#[cfg(test)]
mod tests {
    #[test]
    fn put_short_copies_every_length() {
        for n in 0..=super::INLINE_KEY {
            let src: Vec<u8> = (1..=n as u8).collect();
            let mut dst = [0u8; super::INLINE_KEY];
            super::put_short(&mut dst, &src);
            assert_eq!(&dst[..n], &src[..], "length {n}");
            assert!(dst[n..].iter().all(|&b| b == 0), "length {n}: bytes past the key stay zero");
        }
    }

    #[test]
    fn inline_word_is_the_zero_padded_little_endian_value() {
        for n in 0..=super::INLINE_VALUE {
            let v: Vec<u8> = (0..n as u8).map(|i| 0xa0 ^ i.wrapping_mul(37)).collect();
            let mut w = [0u8; 8];
            w[..n].copy_from_slice(&v);
            assert_eq!(super::inline_word(&v), u64::from_le_bytes(w), "{n} bytes");
        }
    }
}
