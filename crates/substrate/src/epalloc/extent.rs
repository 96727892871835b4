//! Extents: objects larger than the largest size class (4 KiB).
//!
//! An extent is a page-aligned run of whole pages holding one object:
//!
//! ```text
//! 0..8    magic "EPEXTENT"
//! 8..16   PNext: next extent of the same type (the same list code as chunks)
//! 16..24  length of the extent in bytes (a multiple of 4096, header included)
//! 24..64  zero
//! 64..    the object (cache-line aligned); capacity = length - 64
//! ```
//!
//! Each object type has one extent list in the directory (class code 0xff). An extent is
//! like a chunk with a single slot whose "bit" is its membership in the list: reserving
//! an extent takes its pages from the DRAM free-space map only (nothing in PM refers to
//! it, so a crash before publishing frees it implicitly), publishing writes its header
//! and links it at the list head with one persisted 8-byte store — the extent's content
//! must be persistent before, exactly as for a slot — and freeing unlinks it with the
//! recycle micro-log of Algorithm 6 (`recycle_log.rs`). Freed extent pages return to the
//! free-space map and are reused for chunks or other extents like any other space.

use super::chunk::word;
use crate::pool::Pool;
use std::sync::atomic::Ordering;

pub const EXT_MAGIC: u64 = u64::from_le_bytes(*b"EPEXTENT");
/// Bytes before the object.
pub const EXT_HEAD: u64 = 64;
pub const PAGE: u64 = 4096;

/// DRAM state of an extent item (its `reserved` word): reserved, not yet published.
pub(crate) const EXT_RESERVED: u64 = 1;
/// Published: on its list.
pub(crate) const EXT_USED: u64 = 2;

/// Bytes of the extent that holds an object of `size` bytes (`None` on overflow).
pub fn extent_len(size: usize) -> Option<u64> {
    let need = (size as u64).checked_add(EXT_HEAD)?;
    need.checked_next_multiple_of(PAGE)
}

/// Write and persist the header of the extent at `off` before it is linked.
pub(crate) fn write_header(pool: &Pool, off: u64, len: u64, next: u64) {
    word(pool, off).store(EXT_MAGIC, Ordering::Relaxed);
    word(pool, off + 8).store(next, Ordering::Relaxed);
    word(pool, off + 16).store(len, Ordering::Relaxed);
    pool.persist_off(off, 24);
}

/// The length recorded in the extent header at `off`, if the header is well formed and
/// the extent ends at or below `limit`.
pub(crate) fn read_len(pool: &Pool, off: u64, limit: u64) -> Option<u64> {
    if word(pool, off).load(Ordering::Acquire) != EXT_MAGIC {
        return None;
    }
    let len = word(pool, off + 16).load(Ordering::Acquire);
    (len >= PAGE && len.is_multiple_of(PAGE) && off.checked_add(len).is_some_and(|e| e <= limit)).then_some(len)
}
