//! The bytes on PM (docs/format/woart.md): superblock, the four node kinds of ART with
//! WOART's 8-byte commit words, the node header of the paper's path compression and the leaf objects.
//!
//! Every pointer word is an offset tagged in its low 3 bits with what it points to
//! (objects are 8-byte aligned), so a reader knows a child's kind without touching it.

use pmkv_substrate::epalloc::TypeId;

/// Pool root slot of the superblock (root 0 is EPallocator's).
pub(crate) const SUPER_ROOT: usize = 1;

pub(crate) const SUPER: TypeId = TypeId(1);
pub(crate) const N4: TypeId = TypeId(2);
pub(crate) const N16: TypeId = TypeId(3);
pub(crate) const N48: TypeId = TypeId(4);
pub(crate) const N256: TypeId = TypeId(5);
pub(crate) const LEAF: TypeId = TypeId(6);
/// Every object type WOART allocates.
pub(crate) const TYPES: [TypeId; 6] = [SUPER, N4, N16, N48, N256, LEAF];

/// Longest key: node headers keep depths and prefix lengths in 16 bits.
pub(crate) const MAX_KEY: usize = u16::MAX as usize;
/// Longest value, as the other engines'.
pub(crate) const MAX_VALUE: usize = 16 << 20;

/// Which of the paper's two adaptive trees a pool holds: the same node kinds and leaves,
/// different write paths (WOART's commit words in place, ART+CoW's copies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    Woart,
    ArtCow,
}

impl Variant {
    /// The engine's name, which is also the pool's layout name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Variant::Woart => "woart",
            Variant::ArtCow => "artcow",
        }
    }
    pub(crate) fn magic(self) -> u64 {
        match self {
            Variant::Woart => u64::from_le_bytes(*b"WOART\0\0\0"),
            Variant::ArtCow => u64::from_le_bytes(*b"ARTCOW\0\0"),
        }
    }
    /// Whether a crash can leave lazy repairs (stale headers, linked empty nodes) behind:
    /// only WOART's multi-store split and delete can; ART+CoW's every change is one store.
    pub(crate) fn lazy_repairs(self) -> bool {
        self == Variant::Woart
    }
}

/// Format 2 keeps a value of at most 8 bytes in the leaf's value word, updated in place
/// (format 1 kept every value after the key, so an update wrote a new leaf); format 1
/// pools are refused with a version error.
pub(crate) const VERSION: u32 = 2;
pub(crate) const SUPER_SIZE: usize = 64;
/// Superblock fields: magic, version, root node, then the clean close's seal.
pub(crate) const SB_VERSION: u64 = 8;
pub(crate) const SB_ROOT: u64 = 16;
pub(crate) const SB_SEAL_COUNT: u64 = 24;
pub(crate) const SB_SEAL_HASH: u64 = 32;
pub(crate) const SB_SEAL_CHECK: u64 = 40;

/// Node offsets shared by every kind: the header word and the terminal slot, the
/// leaf of the key that ends at this node (ART has no room for a key that is a prefix of
/// another; the slot is pmkv's addition, one more 8-byte pointer).
pub(crate) const HDR: u64 = 0;
pub(crate) const TERM: u64 = 8;
/// Node4: commit word (4 sorted slot indices, then the count), keys, children.
pub(crate) const N4_META: u64 = 16;
pub(crate) const N4_KEYS: u64 = 24;
pub(crate) const N4_CHILD: u64 = 32;
pub(crate) const N4_SIZE: usize = 64;
/// Node16: commit word (bitmap of valid slots), keys, children.
pub(crate) const N16_BITMAP: u64 = 16;
pub(crate) const N16_KEYS: u64 = 24;
pub(crate) const N16_CHILD: u64 = 40;
pub(crate) const N16_SIZE: usize = 168;
/// Node48: the 256-byte child index (slot + 1, 0 = none), children.
pub(crate) const N48_INDEX: u64 = 16;
pub(crate) const N48_CHILD: u64 = 272;
pub(crate) const N48_SIZE: usize = 656;
/// Node256: 256 children.
pub(crate) const N256_CHILD: u64 = 16;
pub(crate) const N256_SIZE: usize = 2064;

/// Leaf: key length, value length, CRC-32C (of the lengths, the key and an out-of-line
/// value), 4 zero bytes, the value word; then the key, then a value longer than 8 bytes.
pub(crate) const LEAF_HEAD: usize = 24;
/// The leaf's value word: a value of at most [`INLINE_VALUE`] bytes, zero-padded (woart.c's
/// leaf keeps its value pointer in one word and an update swaps it: one 8-byte store).
pub(crate) const LEAF_VALUE: u64 = 16;
/// Longest value kept in the value word.
pub(crate) const INLINE_VALUE: usize = 8;

/// Whether a value of `len` bytes lives in the leaf's value word.
pub(crate) fn inline_value(len: usize) -> bool {
    len <= INLINE_VALUE
}

/// The value word holding `v` (at most 8 bytes), zero-padded.
pub(crate) fn value_word(v: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..v.len()].copy_from_slice(v);
    u64::from_le_bytes(b)
}

/// Tags of a pointer word's low 3 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Leaf,
    N4,
    N16,
    N48,
    N256,
}

impl Kind {
    pub(crate) fn tag(self) -> u64 {
        match self {
            Kind::Leaf => 1,
            Kind::N4 => 2,
            Kind::N16 => 3,
            Kind::N48 => 4,
            Kind::N256 => 5,
        }
    }
    pub(crate) fn type_id(self) -> TypeId {
        match self {
            Kind::Leaf => LEAF,
            Kind::N4 => N4,
            Kind::N16 => N16,
            Kind::N48 => N48,
            Kind::N256 => N256,
        }
    }
    pub(crate) fn size(self) -> usize {
        match self {
            Kind::Leaf => LEAF_HEAD,
            Kind::N4 => N4_SIZE,
            Kind::N16 => N16_SIZE,
            Kind::N48 => N48_SIZE,
            Kind::N256 => N256_SIZE,
        }
    }
    /// Children a node of this kind holds.
    pub(crate) fn cap(self) -> usize {
        match self {
            Kind::Leaf => 0,
            Kind::N4 => 4,
            Kind::N16 => 16,
            Kind::N48 => 48,
            Kind::N256 => 256,
        }
    }
    /// The next larger kind (node growth).
    pub(crate) fn grown(self) -> Kind {
        match self {
            Kind::N4 => Kind::N16,
            Kind::N16 => Kind::N48,
            _ => Kind::N256,
        }
    }
}

/// A decoded pointer word: kind and offset. `None` for 0 or an unknown tag.
pub(crate) fn untag(w: u64) -> Option<(Kind, u64)> {
    let k = match w & 7 {
        1 => Kind::Leaf,
        2 => Kind::N4,
        3 => Kind::N16,
        4 => Kind::N48,
        5 => Kind::N256,
        _ => return None,
    };
    Some((k, w & !7))
}

pub(crate) fn tagged(k: Kind, off: u64) -> u64 {
    off | k.tag()
}

/// The node header of the paper's path compression in one 8-byte word, so that a path-compression change is one
/// atomic store: depth (16 bits), prefix length (16 bits), first 4 prefix bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) depth: u16,
    pub(crate) plen: u16,
    pub(crate) partial: [u8; 4],
}

/// Prefix bytes the header keeps; longer prefixes are read from a leaf (the paper's
/// optimistic comparison).
pub(crate) const PARTIAL: usize = 4;

impl Header {
    pub(crate) fn new(depth: usize, prefix: &[u8]) -> Header {
        let mut partial = [0; 4];
        let n = prefix.len().min(PARTIAL);
        partial[..n].copy_from_slice(&prefix[..n]);
        Header { depth: depth as u16, plen: prefix.len() as u16, partial }
    }
    pub(crate) fn encode(self) -> u64 {
        u64::from(self.depth) | u64::from(self.plen) << 16 | u64::from(u32::from_le_bytes(self.partial)) << 32
    }
    pub(crate) fn decode(w: u64) -> Header {
        Header { depth: w as u16, plen: (w >> 16) as u16, partial: ((w >> 32) as u32).to_le_bytes() }
    }
}

/// The check of a leaf: CRC-32C of its lengths, key and, if it is out of line, value. A
/// value in the value word is left out: it changes by one store, which the CRC could not
/// follow atomically; the seal's hash covers it (below).
pub(crate) fn leaf_crc(key: &[u8], value: &[u8]) -> u32 {
    let mut lens = [0u8; 8];
    lens[..4].copy_from_slice(&(key.len() as u32).to_le_bytes());
    lens[4..].copy_from_slice(&(value.len() as u32).to_le_bytes());
    let out_of_line: &[u8] = if inline_value(value.len()) { &[] } else { value };
    crc32c::crc32c_append(crc32c::crc32c_append(crc32c::crc32c(&lens), key), out_of_line)
}

/// What a leaf adds to the seal's hash: its check mixed with its lengths and its value
/// word (a wrapping sum over leaves, so inserts, updates and deletes update it in O(1)).
pub(crate) fn leaf_hash(crc: u32, klen: usize, vlen: usize, vword: u64) -> u64 {
    let mut x = (u64::from(crc) | (klen as u64) << 32 ^ (vlen as u64) << 48) ^ vword.rotate_left(17);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ x >> 33
}

/// The check word of a seal.
pub(crate) fn seal_check(magic: u64, count: u64, hash: u64) -> u64 {
    let mut b = [0u8; 24];
    b[..8].copy_from_slice(&magic.to_le_bytes());
    b[8..16].copy_from_slice(&count.to_le_bytes());
    b[16..].copy_from_slice(&hash.to_le_bytes());
    u64::from(crc32c::crc32c(&b)) | 0x5345_414c << 32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let h = Header::new(300, b"abcdefg");
        let d = Header::decode(h.encode());
        assert_eq!(d, h);
        assert_eq!(d.plen, 7);
        assert_eq!(&d.partial, b"abcd");
    }

    #[test]
    fn tags_round_trip() {
        for k in [Kind::Leaf, Kind::N4, Kind::N16, Kind::N48, Kind::N256] {
            assert_eq!(untag(tagged(k, 0x1238)), Some((k, 0x1238)));
        }
        assert_eq!(untag(0), None);
        assert_eq!(untag(0x1236), None);
    }
}
