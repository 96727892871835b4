//! Mangosteen's persistent objects, byte by byte (also in docs/format/mangosteen.md).
//!
//! **Superblock** (pool root [`SUPER_ROOT`], an EPallocator object of type [`SUPER`],
//! 192 bytes):
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `MANGOST1` |
//! | 8..12 | version 3 (2: one block per record, read and moved to 3; 1: page checks and CRC-32 records, refused) |
//! | 12..16 | block size (8, 16 or 32) |
//! | 16..24 | ring capacity, in 64-byte slots |
//! | 24..32 | region size, in bytes |
//! | 32..40 | offset of the ring (an object of type [`RING`]) |
//! | 40..48 | offset of the PM copy of the region (an object of type [`REGION`]) |
//! | 48..56 | address of the DRAM copy, fixed at creation (0: anywhere); see `heap` |
//! | 56..60 | offset of the line checks ÷ 64 (an object of type [`CHECKS`]: a CRC-32C of each 64-byte line's offset and bytes, 4 bytes a line) |
//! | 60..64 | CRC-32 (not C: a version-1 superblock stays readable enough to be refused by its version) of bytes 0..60 |
//! | 64..72 | `p_rb_head`: index of the first slot not yet applied (its own line) |
//! | 128..136 | `p_rb_tail`: index one past the last COMMIT persisted (its own line) |
//!
//! Indices count slots from the pool's creation and never wrap; index `i` is ring slot
//! `i % capacity`. The ring is empty when head = tail and full when tail − head =
//! capacity, so no slot is sacrificed to tell the two apart.
//!
//! **Record** (format 3): from the start of a slot, over as many slots as it needs (the
//! last one wrapping to slot 0 if it must), zero-padded to a slot's end:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | kind: 3 = REDO (more records of its batch follow), 4 = COMMIT (its batch's last) |
//! | 4..8 | number of runs *r* |
//! | 8..16 | the index of the record's first slot (a stale record of an earlier lap never passes) |
//! | 16..20 | the record's length *L* in bytes: 24 + 8*r* + the runs' bytes |
//! | 20..24 | check: four CRC-32C lanes over the record's ⌈*L*/8⌉ words, these 4 bytes taken as zero (see `pmkv_substrate::checksum::crc32c_lanes`, seeded with the index) |
//! | 24..24+8*r* | one descriptor per run: region offset in bits 0..40, length in bits 40..64 |
//! | then | the runs' bytes, one after another |
//!
//! **Record** (format 2, read only): one slot, one block: bytes 0..4 kind (1 = REDO,
//! 2 = COMMIT), 4..8 block length, 8..16 region offset (REDO) or batch number (COMMIT),
//! 16..48 the block, 48..56 the index, 60..64 CRC-32C of bytes 0..60.

use pmkv_substrate::epalloc::TypeId;

pub const SUPER: TypeId = TypeId(1);
pub const RING: TypeId = TypeId(2);
pub const REGION: TypeId = TypeId(3);
pub const CHECKS: TypeId = TypeId(4);
pub const SUPER_ROOT: usize = 1;
pub const SUPER_MAGIC: [u8; 8] = *b"MANGOST1";
pub const SUPER_VERSION: u32 = 3;
/// The previous format, read (and moved to the current one at a writable open).
pub const SUPER_VERSION_2: u32 = 2;
pub const SUPER_SIZE: usize = 192;
pub const HEAD_AT: u64 = 64;
pub const TAIL_AT: u64 = 128;
pub const RECORD: usize = 64;
/// Largest block a format-2 record carries.
pub const MAX_BLOCK: usize = 32;
/// Format 2's kinds.
pub const REDO: u32 = 1;
pub const COMMIT: u32 = 2;
/// Format 3's kinds (distinct from format 2's, so that a build of format 2 reading one
/// says "unknown kind" rather than misreading it).
pub const REDO3: u32 = 3;
pub const COMMIT3: u32 = 4;
