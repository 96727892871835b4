//! Extents: objects larger than the largest size class (4 KiB).
//!
//! An extent is a page-aligned run of whole pages holding one object:
//!
//! ```text
//! 0..8    magic "EPEXTENT"
//! 8..16   PNext: next extent of the same type (the same list code and link encoding
//!         as chunks)
//! 16..24  length of the extent in bytes (a multiple of 4096, header included)
//! 24..32  format 3: check of the length and the extent's own offset
//!         (`check::extent_check`, never 0); format 2: zero
//! 32..64  zero
//! 64..    the object (cache-line aligned); capacity = length - 64
//! ```
//!
//! The header is written once, before the extent is linked, and persisted with one
//! persist, so the check costs nothing: a damaged length would otherwise make the walk
//! take live pages after the extent for free space (or the extent's tail for another).
//!
//! Each object type has one extent list in the directory (class code 0xff). An extent is
//! like a chunk with a single slot whose "bit" is its membership in the list: reserving
//! an extent takes its pages from the DRAM free-space map only (nothing in PM refers to
//! it, so a crash before publishing frees it implicitly), publishing writes its header
//! and links it at the list head with one persisted 8-byte store — the extent's content
//! must be persistent before, exactly as for a slot — and freeing unlinks it with the
//! recycle micro-log of Algorithm 6 (`recycle_log.rs`). Freed extent pages return to the
//! free-space map and are reused for chunks or other extents like any other space.

use super::check::{self, Format};
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
pub(crate) fn write_header(pool: &Pool, fmt: Format, off: u64, len: u64, next: u64) {
    word(pool, off).store(EXT_MAGIC, Ordering::Relaxed);
    word(pool, off + 8).store(check::link_word(fmt, off + 8, next), Ordering::Relaxed);
    word(pool, off + 16).store(len, Ordering::Relaxed);
    if fmt.checked() {
        word(pool, off + 24).store(check::extent_check(off, len), Ordering::Relaxed);
        pool.persist_off(off, 32);
    } else {
        pool.persist_off(off, 24);
    }
}

/// The length recorded in the extent header at `off`, if the header is well formed and
/// the extent ends at or below `limit`.
/// Format 3: the length must also pass its check.
pub(crate) fn read_len(pool: &Pool, fmt: Format, off: u64, limit: u64) -> Option<u64> {
    if word(pool, off).load(Ordering::Acquire) != EXT_MAGIC {
        return None;
    }
    let len = word(pool, off + 16).load(Ordering::Acquire);
    if fmt.checked() && word(pool, off + 24).load(Ordering::Acquire) != check::extent_check(off, len) {
        return None;
    }
    (len >= PAGE && len.is_multiple_of(PAGE) && off.checked_add(len).is_some_and(|e| e <= limit)).then_some(len)
}

// Extent allocation, publication and freeing by the allocator (objects above 4 KiB).
use super::*;

impl EpAlloc {
    /// Reserve an extent: pages from the free-space map, nothing in PM.
    pub(super) fn alloc_extent(&self, ty: TypeId, size: usize) -> Result<u64> {
        let len = extent::extent_len(size).filter(|&l| l <= self.pool.max_size()).ok_or(PoolError::Full {
            requested: size as u64,
            available: 0,
            max: self.pool.max_size(),
        })?;
        let list = self.list_for(ty, EXTENT_CLASS)?;
        let off = self.take_space(len, PAGE)?;
        let id = self.index.alloc_id();
        let it = self.index.item(id).expect("fresh id");
        self.init_item(it, list, off, len);
        it.reserved.store(EXT_RESERVED, Ordering::Release);
        self.index.register(id, off, off + len, false);
        Ok(off + EXT_HEAD)
    }

    /// Publish an extent: header persisted, then linked at the head (one persisted store).
    pub(super) fn publish_extent(&self, loc: &Loc<'_>) -> Result<()> {
        let mut inner = loc.list.inner.lock();
        if loc.it.reserved.compare_exchange(EXT_RESERVED, EXT_USED, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(misuse("publish", loc.base + EXT_HEAD, "the extent is not reserved"));
        }
        let len = loc.it.len.load(Ordering::Acquire);
        let fmt = self.root.fmt;
        let head = match loc.list.entry.head(&self.pool, fmt) {
            Ok(h) => h,
            Err(e) => {
                loc.it.reserved.store(EXT_RESERVED, Ordering::Release);
                return Err(e);
            }
        };
        extent::write_header(&self.pool, fmt, loc.base, len, head);
        loc.list.entry.set_head(&self.pool, fmt, loc.base);
        // DRAM mirror: the item already exists (and is registered); link it at the head.
        loc.it.prev.store(0, Ordering::Release);
        loc.it.next.store(inner.head, Ordering::Release);
        if let Some(h) = self.index.item(inner.head) {
            h.prev.store(loc.id, Ordering::Release);
        }
        inner.head = loc.id;
        inner.count += 1;
        Ok(())
    }

    pub(super) fn unreserve_extent(&self, loc: &Loc<'_>) -> Result<()> {
        let _g = loc.list.inner.lock();
        if loc.it.reserved.compare_exchange(EXT_RESERVED, LOCKED, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(misuse("unreserve", loc.base + EXT_HEAD, "the extent is not reserved"));
        }
        self.retire(loc.id, loc.it, false);
        Ok(())
    }

    /// Free an extent: unlink it with the recycle micro-log (Algorithm 6), then return its
    /// pages.
    pub(super) fn free_extent(&self, loc: &Loc<'_>) -> Result<()> {
        let mut inner = loc.list.inner.lock();
        if loc.it.reserved.compare_exchange(EXT_USED, LOCKED, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(misuse("free", loc.base + EXT_HEAD, "the extent is not used"));
        }
        if let Err(e) = self.unlink_locked(loc.list, &mut inner, loc.it) {
            loc.it.reserved.store(EXT_USED, Ordering::Release);
            return Err(e);
        }
        self.retire(loc.id, loc.it, false);
        Ok(())
    }
}
