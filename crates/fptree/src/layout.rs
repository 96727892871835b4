//! The on-PM format of FPTree (paper §3 and §4; byte by byte in
//! docs/format/fptree.md).
//!
//! Only the leaves, the key and value objects and the superblock with its micro-logs are
//! persistent. The inner nodes live in DRAM and are rebuilt from the leaves at open
//! (the paper's selective persistence, §3 "Selective Persistence").
//!
//! * **Superblock** (type [`SUPER`], [`SUPER_SIZE`] bytes, pool root [`SUPER_ROOT`]):
//!   line 0 is immutable (magic, version, leaf capacity, the head leaf, a CRC-32C of
//!   them); line 1 holds the two micro-logs (split and delete, §4), zero when idle.
//! * **Leaf** (type [`LEAF`], [`LEAF_SIZE`] bytes): line 0 is the validity bitmap
//!   (8 bytes) and the [`CAP`] one-byte fingerprints, so that a probe reads one line
//!   before it touches any entry (the paper's point of fingerprints, §3 "Fingerprinting");
//!   line 1 holds the `next` offset and the seal (a CRC-32C of the leaf written at clean
//!   close and verified at clean open); then [`CAP`] unsorted 32-byte entries.
//! * **Entry** (32 bytes, one half line): two key words, a value word, a meta word. A key
//!   of at most 16 bytes is kept in the key words, a longer one in a key object whose
//!   offset is the first key word (the paper's variable-size-key variant, §4, which
//!   stores key pointers). A value of at most 8 bytes is kept in the value word, a longer
//!   one in a value object. The meta word says which, and the lengths.
//! * **Key and value objects** (types [`KEY`], [`VALUE`]): 4-byte length, CRC-32C of the
//!   length and bytes, the bytes. Immutable once published.

use pmkv_substrate::epalloc::TypeId;

/// Pool root slot of the superblock (root 0 is EPallocator's).
pub(crate) const SUPER_ROOT: usize = 1;
/// Object types in EPallocator.
pub(crate) const SUPER: TypeId = TypeId(1);
pub(crate) const LEAF: TypeId = TypeId(2);
pub(crate) const KEY: TypeId = TypeId(3);
pub(crate) const VALUE: TypeId = TypeId(4);

pub(crate) const SUPER_MAGIC: &[u8; 8] = b"FPTREE01";
/// The format this build writes and reads.
pub(crate) const SUPER_VERSION: u32 = 1;
pub(crate) const SUPER_SIZE: usize = 128;
/// Superblock fields.
pub(crate) const SB_VERSION: u64 = 8;
pub(crate) const SB_CAP: u64 = 12;
pub(crate) const SB_HEAD: u64 = 16;
pub(crate) const SB_CRC: u64 = 24;
/// The split micro-log (§4, SplitLeaf): the leaf being split, then the new
/// leaf. The log is in use while [`SB_SPLIT_NEW`] is non-zero.
pub(crate) const SB_SPLIT_CUR: u64 = 64;
pub(crate) const SB_SPLIT_NEW: u64 = 72;
/// The delete micro-log (§4, the delete of an emptied leaf): the predecessor of the leaf being
/// unlinked, then that leaf. In use while [`SB_DEL_LEAF`] is non-zero.
pub(crate) const SB_DEL_PREV: u64 = 80;
pub(crate) const SB_DEL_LEAF: u64 = 88;

/// Entries per leaf: the bitmap and one fingerprint byte per entry fill line 0 exactly.
pub(crate) const CAP: usize = 56;
/// Bits of the bitmap that name slots.
pub(crate) const SLOTS_MASK: u64 = (1 << CAP) - 1;
pub(crate) const L_BITMAP: u64 = 0;
pub(crate) const L_FPS: u64 = 8;
pub(crate) const L_NEXT: u64 = 64;
pub(crate) const L_SEAL: u64 = 72;
pub(crate) const L_ENTRIES: u64 = 128;
pub(crate) const ENTRY: u64 = 32;
pub(crate) const LEAF_SIZE: usize = L_ENTRIES as usize + CAP * ENTRY as usize;

/// An entry's words, in order: key word 0, key word 1, the value word, the meta word.
/// Meta word: bits 0-15 the key's length, bit 16 the key is an object, bits 17-41 the
/// value's length, bit 42 the value is an object. The remaining bits are zero.
pub(crate) const M_KLEN: u64 = 0xffff;
pub(crate) const M_KOBJ: u64 = 1 << 16;
pub(crate) const M_VLEN_SHIFT: u32 = 17;
pub(crate) const M_VLEN: u64 = ((1 << 25) - 1) << M_VLEN_SHIFT;
pub(crate) const M_VOBJ: u64 = 1 << 42;
/// The bits that describe the key (kept by an update, which reuses the key words).
pub(crate) const M_KEY_BITS: u64 = M_KLEN | M_KOBJ;
/// Bits a valid meta word may have.
const M_ALL: u64 = M_KEY_BITS | M_VLEN | M_VOBJ;

/// Longest key kept in the entry itself.
pub(crate) const INLINE_KEY: usize = 16;
/// Longest value kept in the entry itself.
pub(crate) const INLINE_VALUE: usize = 8;
/// Key and value object header: length (4) and CRC-32C (4).
pub(crate) const OBJ_HEAD: usize = 8;

/// Longest key, as the other engines'.
pub(crate) const MAX_KEY: usize = 65_535;
/// Longest value.
pub(crate) const MAX_VALUE: usize = 16 * 1024 * 1024;

/// Offset of entry `slot` of the leaf at `leaf`.
#[inline]
pub(crate) fn entry_off(leaf: u64, slot: usize) -> u64 {
    leaf + L_ENTRIES + slot as u64 * ENTRY
}

/// How an entry names its key: the two key words and the key bits of the meta word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KeyWords {
    pub(crate) k0: u64,
    pub(crate) k1: u64,
    pub(crate) meta: u64,
}

/// The key words of an inline key (at most [`INLINE_KEY`] bytes).
pub(crate) fn inline_key(key: &[u8]) -> KeyWords {
    debug_assert!(key.len() <= INLINE_KEY);
    let mut b = [0u8; 16];
    b[..key.len()].copy_from_slice(key);
    KeyWords {
        k0: u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
        k1: u64::from_le_bytes(b[8..].try_into().expect("8 bytes")),
        meta: key.len() as u64,
    }
}

/// The key words of a key kept in the object at `obj`.
pub(crate) fn object_key(obj: u64, len: usize) -> KeyWords {
    KeyWords { k0: obj, k1: 0, meta: len as u64 | M_KOBJ }
}

/// The value word and meta bits of an inline value (at most [`INLINE_VALUE`] bytes).
pub(crate) fn inline_value(v: &[u8]) -> (u64, u64) {
    debug_assert!(v.len() <= INLINE_VALUE);
    let mut b = [0u8; 8];
    b[..v.len()].copy_from_slice(v);
    (u64::from_le_bytes(b), (v.len() as u64) << M_VLEN_SHIFT)
}

/// The value word and meta bits of a value kept in the object at `obj`.
pub(crate) fn object_value(obj: u64, len: usize) -> (u64, u64) {
    (obj, (len as u64) << M_VLEN_SHIFT | M_VOBJ)
}

/// Whether `meta` is a meta word this format can hold (no unknown bit, an inline key or
/// value no longer than its words, lengths within the limits).
pub(crate) fn meta_is_sane(meta: u64) -> bool {
    let klen = (meta & M_KLEN) as usize;
    let vlen = ((meta & M_VLEN) >> M_VLEN_SHIFT) as usize;
    meta & !M_ALL == 0
        && (meta & M_KOBJ != 0 || klen <= INLINE_KEY)
        && (meta & M_KOBJ == 0 || klen > INLINE_KEY)
        && (meta & M_VOBJ != 0 || vlen <= INLINE_VALUE)
        && (meta & M_VOBJ == 0 || vlen > INLINE_VALUE)
        && vlen <= MAX_VALUE
}

/// Length of the key of an entry with meta word `meta`.
#[inline]
pub(crate) fn key_len(meta: u64) -> usize {
    (meta & M_KLEN) as usize
}

/// Length of the value of an entry with meta word `meta`.
#[inline]
pub(crate) fn value_len(meta: u64) -> usize {
    ((meta & M_VLEN) >> M_VLEN_SHIFT) as usize
}

/// CRC-32C of an object's length and bytes.
pub(crate) fn obj_crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&(bytes.len() as u32).to_le_bytes()), bytes)
}

/// The seal of the leaf at `own` whose bytes are `img`: CRC-32C of its offset and every
/// byte but the seal word, so that a damaged leaf, or a leaf's bytes found at another
/// offset, fails it.
pub(crate) fn leaf_seal(own: u64, img: &[u8]) -> u32 {
    let c = crc32c::crc32c(&own.to_le_bytes());
    let c = crc32c::crc32c_append(c, &img[..L_SEAL as usize]);
    crc32c::crc32c_append(c, &img[L_SEAL as usize + 4..LEAF_SIZE])
}

/// CRC-32C of the superblock's immutable fields.
pub(crate) fn super_crc(sb: &[u8]) -> u32 {
    crc32c::crc32c(&sb[..SB_CRC as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bitmap_and_fingerprints_fill_line_zero() {
        assert_eq!(L_FPS as usize + CAP, 64);
        assert_eq!(LEAF_SIZE % 64, 0);
        assert_eq!(entry_off(0, CAP - 1) + ENTRY, LEAF_SIZE as u64);
    }

    #[test]
    fn meta_words_round_trip_and_refuse_nonsense() {
        let k = inline_key(b"0123456789abcdef");
        let (_, vm) = inline_value(b"12345678");
        assert!(meta_is_sane(k.meta | vm));
        assert_eq!(key_len(k.meta | vm), 16);
        assert_eq!(value_len(k.meta | vm), 8);
        let k = object_key(0x1000, 17);
        let (w, vm) = object_value(0x2000, MAX_VALUE);
        assert_eq!(w, 0x2000);
        assert!(meta_is_sane(k.meta | vm));
        assert_eq!(value_len(k.meta | vm), MAX_VALUE);
        assert!(!meta_is_sane(17), "a 17-byte key inline");
        assert!(!meta_is_sane(M_KOBJ | 3), "a 3-byte key in an object");
        assert!(!meta_is_sane(9 << M_VLEN_SHIFT), "a 9-byte value inline");
        assert!(!meta_is_sane(1 << 50), "an unknown bit");
    }

    #[test]
    fn seals_name_their_leaf() {
        let mut img = vec![0u8; LEAF_SIZE];
        img[200] = 7;
        let s = leaf_seal(0x4000, &img);
        assert_ne!(s, leaf_seal(0x4800, &img));
        img[L_SEAL as usize] = 1;
        assert_eq!(s, leaf_seal(0x4000, &img), "the seal word is not covered");
        img[201] = 1;
        assert_ne!(s, leaf_seal(0x4000, &img));
    }
}
