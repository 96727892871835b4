//! The bytes FAST&FAIR keeps in PM (byte by byte in docs/format/fastfair.md).
//!
//! * **Superblock** (type [`SUPER`], 64 bytes, pool root [`SUPER_ROOT`]): magic, version,
//!   node size, the first leaf, a CRC-32C of those, the root node, and the seal (a CRC of
//!   every node, written by a clean close and verified by the open after it).
//! * **Node** (type [`NODE`], [`NODE_SIZE`] bytes; the paper's page): a 64-byte header
//!   (sibling, leftmost child, level, shift direction, a reserved word, the low key)
//!   and [`SLOTS`] 16-byte entries of a key word and a second word: an inner node's child
//!   pointer; a leaf's *value word*, either the value itself (an 8-byte key with an
//!   8-byte value, as the authors' btree.h keeps every entry) or a tagged record pointer
//!   ([`is_rec`]). An entry is live when its second word is non-zero and it does not
//!   *repeat* the live entry before it (inner nodes: `read::live`; leaves:
//!   `read::leaf_stale`).
//! * **Object** (types [`RECORD`], a key and its value, and [`KEY`], a separator key): a
//!   16-byte head (key length, value length, CRC-32C of the offset, lengths and bytes),
//!   then the key, then the value. Immutable once published.

use pmkv_substrate::epalloc::TypeId;

/// Pool root slot of the superblock (root 0 is EPallocator's).
pub(crate) const SUPER_ROOT: usize = 1;
/// Object types in EPallocator.
pub(crate) const SUPER: TypeId = TypeId(1);
pub(crate) const NODE: TypeId = TypeId(2);
pub(crate) const RECORD: TypeId = TypeId(3);
pub(crate) const KEY: TypeId = TypeId(4);

pub(crate) const SUPER_MAGIC: &[u8; 8] = b"FASTFAIR";
/// Format 3: leaf values inline where they fit (format 2: every value an out-of-line
/// record; format 1: 512-byte nodes with the lock word in the node header; both refused
/// with a version error).
pub(crate) const SUPER_VERSION: u32 = 3;
pub(crate) const SUPER_SIZE: usize = 64;
/// Superblock fields.
pub(crate) const SB_VERSION: u64 = 8;
pub(crate) const SB_NODE_SIZE: u64 = 12;
pub(crate) const SB_FIRST_LEAF: u64 = 16;
pub(crate) const SB_CRC: u64 = 24;
pub(crate) const SB_ROOT: u64 = 32;
pub(crate) const SB_SEAL: u64 = 40;
/// Bit set in a written seal word (a seal of 0 is "none").
pub(crate) const SEAL_PRESENT: u64 = 1 << 63;

/// A node: 1 KB, the page size of the authors' code (btree.h's `PAGESIZE`), which the
/// NBTree paper's comparison runs.
pub(crate) const NODE_SIZE: usize = 1024;
pub(crate) const H_SIBLING: u64 = 0;
pub(crate) const H_LEFTMOST: u64 = 8;
pub(crate) const H_LEVEL: u64 = 16;
/// The shift direction (the paper's `switch_counter`, reduced to its parity): formats 1
/// and 2 stored 1 here before a leaf's left shift; format 3 writes only [`RIGHT`] (inner
/// nodes only shift right, leaves need no direction) and reads nothing here.
pub(crate) const H_DIR: u64 = 24;
/// Reserved, zero (format 1's lock word: node locks now live in DRAM, `FastFair::locks`,
/// so taking one dirties no PM line).
#[allow(dead_code)]
pub(crate) const H_RESERVED: u64 = 32;
pub(crate) const H_LOW_KW: u64 = 40;
pub(crate) const H_LOW_PTR: u64 = 48;
pub(crate) const HEADER: u64 = 64;
pub(crate) const ENTRY: u64 = 16;
/// Entry slots of a node.
pub(crate) const SLOTS: usize = (NODE_SIZE - HEADER as usize) / ENTRY as usize;
/// Live entries a node holds: one slot stays a terminator (null pointer).
pub(crate) const CAP: usize = SLOTS - 1;

/// The only direction format 3 writes (right shifts, inserts).
pub(crate) const RIGHT: u64 = 0;
/// What slot -1's pointer is in a leaf (an inner node's is its leftmost child): never an
/// object offset (those are 8-aligned), never null (null ends the entries).
pub(crate) const LEAF_LEFT: u64 = 1;

/// The tag of a leaf value word that names a record: its top 16 bits set and its low 3
/// bits clear (record offsets are 8-aligned and below 2^48). Every other non-zero word is
/// an inline value.
pub(crate) const REC_TAG: u64 = 0xffff << 48;
const REC_MASK: u64 = REC_TAG | 7;
/// The value word of a leaf slot that holds no entry (a record-shaped word naming offset
/// 0, which is never an object): an insert opens its slot with it, a delete closes the
/// gap by moving it to the end (`fast`).
pub(crate) const HOLE: u64 = REC_TAG;
/// Records must lie below this offset to be named by a tagged word.
pub(crate) const REC_LIMIT: u64 = 1 << 48;

/// Whether leaf value word `v` names a record (or is the [`HOLE`]).
pub(crate) fn is_rec(v: u64) -> bool {
    v & REC_MASK == REC_TAG
}

/// The value word naming the record at `off` (`off < REC_LIMIT`, 8-aligned).
pub(crate) fn rec_word(off: u64) -> u64 {
    debug_assert!(off < REC_LIMIT && off.is_multiple_of(8));
    REC_TAG | off
}

/// The record offset a tagged value word names.
pub(crate) fn rec_off(v: u64) -> u64 {
    v & !REC_TAG
}

/// The inline value word of `(key, value)`, if the pair can live in the leaf entry: an
/// 8-byte key (the key word is then the whole key) and an 8-byte value whose word is
/// neither 0 (the terminator) nor record-shaped (2^-19 of random words).
pub(crate) fn inline_word(key: &[u8], value: &[u8]) -> Option<u64> {
    let v: [u8; 8] = value.try_into().ok()?;
    let w = u64::from_le_bytes(v);
    (key.len() == 8 && w != 0 && !is_rec(w)).then_some(w)
}

/// Offset of slot `i`'s key word / pointer word in node `n`.
pub(crate) fn key_at(n: u64, i: usize) -> u64 {
    n + HEADER + ENTRY * i as u64
}
pub(crate) fn ptr_at(n: u64, i: usize) -> u64 {
    n + HEADER + ENTRY * i as u64 + 8
}

/// Longest key (as the other engines') and value.
pub(crate) const MAX_KEY: usize = (64 << 10) - 1;
pub(crate) const MAX_VALUE: usize = 16 << 20;
/// Object head: key length (4), value length (4), CRC (4), zero (4).
pub(crate) const OBJ_HEAD: usize = 16;

/// The key word: the key's first 8 bytes, big-endian, zero-padded. Ordering key words
/// orders keys, except that keys with the same first 8 bytes (or a short key and itself
/// followed by zeros) tie and are told apart by their objects.
pub(crate) fn key_word(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

/// The CRC of an object at `off` with these bytes (key then value).
pub(crate) fn obj_crc(off: u64, klen: usize, vlen: usize, bytes: &[u8]) -> u32 {
    let mut c = crc32c::crc32c(&off.to_le_bytes());
    c = crc32c::crc32c_append(c, &(klen as u32).to_le_bytes());
    c = crc32c::crc32c_append(c, &(vlen as u32).to_le_bytes());
    crc32c::crc32c_append(c, bytes)
}

/// The CRC of the superblock's immutable fields (bytes 0..24).
pub(crate) fn super_crc(b: &[u8]) -> u32 {
    crc32c::crc32c(&b[..SB_CRC as usize])
}
