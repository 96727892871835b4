//! HART's persistent objects, byte by byte (also in docs/DESIGN.md, "HART").
//!
//! **Leaf** (EPallocator type [`LEAF`], one 64-byte slot = one cache line, so writing a
//! leaf costs one line write-back):
//!
//! | bytes  | field     | meaning |
//! |--------|-----------|---------|
//! | 0..8   | p_value   | offset of the value object (HART's `p_value`), or the value itself if inline |
//! | 8..12  | key_len   | key length in bytes |
//! | 12..16 | flags     | bit 0: key stored out of line; bit 1: value inline; bits 8..12: inline value length (0..=8) |
//! | 16..64 | key       | the key if `key_len <= 48`, else bytes 16..24 hold `p_key` |
//!
//! The paper's leaf holds the key inline (≤ 24 bytes, §IV); pmkv keeps up to 48 bytes
//! inline, and longer keys in a **key object** (type [`KEY`]) of exactly `key_len` bytes:
//! one more allocation, one more fence at insert, and one more PM line read per leaf
//! comparison.
//!
//! **Inline values** (pmkv's extension; off with `HartOptions::paper_updates`): a value of
//! at most 8 bytes inserted with a new key is stored in the `p_value` word itself, so the
//! leaf is the only object of the record: one allocation fewer per insert, one PM line
//! fewer per search, one free fewer per delete. An update to the same length is one
//! atomic 8-byte store; any other update moves the value out of line for good (Algorithm
//! 3 with the micro-log, which logs the leaf's flags too).
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
/// Largest key, in bytes (longer keys are refused with `HartError::KeyTooLarge`).
pub const MAX_KEY: usize = 64 * 1024;
/// Largest value, in bytes (longer values are refused with `HartError::ValueTooLarge`).
pub const MAX_VALUE: usize = 16 * 1024 * 1024;

pub const LEAF_P_VALUE: u64 = 0;
pub const LEAF_KEY_LEN: u64 = 8;
pub const LEAF_FLAGS: u64 = 12;
pub const LEAF_KEY: u64 = 16;
pub const FLAG_KEY_OUT: u32 = 1;
pub const FLAG_VALUE_INLINE: u32 = 2;
/// Inline value length: `(flags >> INLINE_LEN_SHIFT) & 0xf`.
pub const INLINE_LEN_SHIFT: u32 = 8;
/// Flag bits describing an inline value (cleared when the value moves out of line).
pub const INLINE_MASK: u32 = FLAG_VALUE_INLINE | (0xf << INLINE_LEN_SHIFT);
/// Largest inline value.
pub const INLINE_VALUE: usize = 8;

/// Length of the inline value described by `flags`, if the value is inline.
#[inline]
pub fn inline_len(flags: u32) -> Option<usize> {
    (flags & FLAG_VALUE_INLINE != 0).then_some(((flags >> INLINE_LEN_SHIFT) & 0xf) as usize)
}

/// Pool root slot of HART's superblock (EPallocator owns slot 0).
pub const SUPER_ROOT: usize = 1;
pub const SUPER_MAGIC: [u8; 8] = *b"HARTSB01";
/// Version 2 added inline values; version 1 pools (which have none) are upgraded in place.
pub const SUPER_VERSION: u32 = 2;
pub const SUPER_SIZE: u64 = 64;
/// Update micro-logs (one per concurrent writer; writers share them round-robin).
pub const NUM_LOGS: u32 = 64;
/// Each micro-log gets its own cache line so writers never share one.
pub const LOG_SIZE: u64 = 64;
