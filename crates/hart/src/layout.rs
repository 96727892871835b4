//! HART's persistent objects, byte by byte (also in docs/DESIGN.md, "HART").
//!
//! **Leaf** (EPallocator type [`LEAF`], one 64-byte slot = one cache line, so writing a
//! leaf costs one line write-back):
//!
//! | bytes  | field     | meaning |
//! |--------|-----------|---------|
//! | 0..8   | p_value   | offset of the value object (HART's `p_value`) |
//! | 8..12  | key_len   | key length in bytes |
//! | 12..16 | flags     | bit 0: key stored out of line |
//! | 16..64 | key       | the key if `key_len <= 48`, else bytes 16..24 hold `p_key` |
//!
//! The paper's leaf holds the key inline (≤ 24 bytes, §IV); pmkv keeps up to 48 bytes
//! inline, and longer keys in a **key object** (type [`KEY`]) of exactly `key_len` bytes:
//! one more allocation, one more fence at insert, and one more PM line read per leaf
//! comparison.
//!
//! **Value object** (type [`VALUE`]): bytes 0..4 length, 4..8 zero, then the value. The
//! length lives with the value (not in the leaf) so that the out-of-place update swings
//! value and length together with the single 8-byte store of `p_value`.
//!
//! **Superblock** (pool root [`SUPER_ROOT`]): magic `HARTSB01`, version, k_h, number of
//! micro-logs, offset of the micro-log array.

use pmkv_substrate::epalloc::TypeId;

/// EPallocator object types of HART.
pub const LEAF: TypeId = TypeId(1);
pub const VALUE: TypeId = TypeId(2);
pub const KEY: TypeId = TypeId(3);
/// The superblock with the micro-log array (one object per pool).
pub const SUPER: TypeId = TypeId(4);

pub const LEAF_SIZE: usize = 64;
pub const INLINE_KEY: usize = 48;
pub const VALUE_HDR: usize = 8;
pub const MAX_KEY: usize = 64 * 1024;
pub const MAX_VALUE: usize = 16 * 1024 * 1024;

pub const LEAF_P_VALUE: u64 = 0;
pub const LEAF_KEY_LEN: u64 = 8;
pub const LEAF_FLAGS: u64 = 12;
pub const LEAF_KEY: u64 = 16;
pub const FLAG_KEY_OUT: u32 = 1;

/// Pool root slot of HART's superblock (EPallocator owns slot 0).
pub const SUPER_ROOT: usize = 1;
pub const SUPER_MAGIC: [u8; 8] = *b"HARTSB01";
pub const SUPER_VERSION: u32 = 1;
pub const SUPER_SIZE: u64 = 64;
/// Update micro-logs (one per concurrent writer; writers share them round-robin).
pub const NUM_LOGS: u32 = 64;
/// Each micro-log gets its own cache line so writers never share one.
pub const LOG_SIZE: u64 = 64;
