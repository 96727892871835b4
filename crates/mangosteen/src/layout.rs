//! Mangosteen's persistent objects, byte by byte (also in docs/format/mangosteen.md).
//!
//! **Superblock** (pool root [`SUPER_ROOT`], an EPallocator object of type [`SUPER`],
//! 192 bytes):
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `MANGOST1` |
//! | 8..12 | version 2 (1: page checks and CRC-32 records, refused) |
//! | 12..16 | block size (8, 16 or 32) |
//! | 16..24 | ring capacity, in records |
//! | 24..32 | region size, in bytes |
//! | 32..40 | offset of the ring (an object of type [`RING`]) |
//! | 40..48 | offset of the PM copy of the region (an object of type [`REGION`]) |
//! | 48..56 | address of the DRAM copy, fixed at creation (0: anywhere); see `heap` |
//! | 56..60 | offset of the line checks ÷ 64 (an object of type [`CHECKS`]: a CRC-32C of each 64-byte line's offset and bytes, 4 bytes a line) |
//! | 60..64 | CRC-32 (not C: a version-1 superblock stays readable enough to be refused by its version) of bytes 0..60 |
//! | 64..72 | `p_rb_head`: index of the first record not yet applied (its own line) |
//! | 128..136 | `p_rb_tail`: index one past the last COMMIT persisted (its own line) |
//!
//! Indices count records from the pool's creation and never wrap; record `i` lives in
//! ring slot `i % capacity`. The ring is empty when head = tail and full when
//! tail − head = capacity, so no slot is sacrificed to tell the two apart.
//!
//! **Record** (64 bytes, one cache line, so appending one costs one line write-back):
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | kind: 1 = REDO, 2 = COMMIT |
//! | 4..8 | block length (REDO) |
//! | 8..16 | REDO: region offset of the block; COMMIT: the batch number |
//! | 16..48 | REDO: the block's bytes |
//! | 48..56 | the record's index (so a stale record of an earlier lap never passes) |
//! | 60..64 | CRC-32C of bytes 0..60 |

use pmkv_substrate::epalloc::TypeId;

pub const SUPER: TypeId = TypeId(1);
pub const RING: TypeId = TypeId(2);
pub const REGION: TypeId = TypeId(3);
pub const CHECKS: TypeId = TypeId(4);
pub const SUPER_ROOT: usize = 1;
pub const SUPER_MAGIC: [u8; 8] = *b"MANGOST1";
pub const SUPER_VERSION: u32 = 2;
pub const SUPER_SIZE: usize = 192;
pub const HEAD_AT: u64 = 64;
pub const TAIL_AT: u64 = 128;
pub const RECORD: usize = 64;
/// Largest block a record carries.
pub const MAX_BLOCK: usize = 32;
pub const REDO: u32 = 1;
pub const COMMIT: u32 = 2;
