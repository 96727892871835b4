//! The allocator root block: where pool root slot 0 points.
//!
//! ```text
//! 0..8     magic "EPALLOC1"
//! 8..12    format version (u32)
//! 12..16   directory capacity (u32, entries)
//! 16..24   heap start: first byte the allocator manages (= end of this block)
//! 24..32   size of this block in bytes
//! 60..64   CRC-32 of bytes 0..60 (the block's immutable part)
//! 64..     directory: one 64-byte entry per chunk list
//!            +0  tag    valid bit 63 | object type << 8 | class code (0xff = extents)
//!            +8  PHead  offset of the first chunk (0 = empty list)
//!            +16 PCurrent \ the recycle micro-log of this list (Algorithm 6):
//!            +24 PPrev    / see recycle_log.rs
//! ```
//!
//! One list per (object type, size class) as the paper has one per object type and value
//! size. Each list has its own recycle log so that lists recycle chunks independently
//! (the paper has a single log; with one log every recycle in the allocator would have
//! to be serialised). Each entry owns a whole cache line, so two threads working on two
//! lists never flush the same line. Entries are created on first use by one 8-byte store
//! of the tag (persisted), and never removed; an entry's other words are zero until then.

use super::chunk::word;
use super::size_class::{EXTENT_CLASS, NUM_CLASSES};
use super::TypeId;
use crate::error::{PoolError, Result};
use crate::pool::Pool;
use std::sync::atomic::Ordering;

pub const ROOT_MAGIC: [u8; 8] = *b"EPALLOC1";
/// 2: the header's seal word is written at every clean shutdown (see `seal`); a version-1
/// pool has none, so a build that verifies seals must not take it for a damaged one.
pub const ROOT_VERSION: u32 = 2;
/// Directory entries (chunk lists) per pool: 9 object types that use all 25 classes and
/// extents, or many more types that use a few classes each.
pub const DIR_CAP: usize = 255;
pub const DIR_AT: u64 = 64;
pub const ENTRY_LEN: u64 = 64;
/// Bytes of the root block (a multiple of the page size).
pub const ROOT_SIZE: u64 = DIR_AT + DIR_CAP as u64 * ENTRY_LEN;
const CRC_AT: usize = 60;
const VALID: u64 = 1 << 63;

/// Offsets of one directory entry's words. Public for the offsets only (tests and tools
/// that patch pool files); reading and writing the words is crate-private, like every
/// access to allocator metadata (see `chunk::word`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry(pub u64);

impl Entry {
    pub fn tag_at(self) -> u64 {
        self.0
    }
    pub fn head_at(self) -> u64 {
        self.0 + 8
    }
    pub fn pcurrent_at(self) -> u64 {
        self.0 + 16
    }
    pub fn pprev_at(self) -> u64 {
        self.0 + 24
    }
    pub(crate) fn head(self, pool: &Pool) -> u64 {
        word(pool, self.head_at()).load(Ordering::Acquire)
    }
    /// Store and persist `PHead`.
    pub(crate) fn set_head(self, pool: &Pool, to: u64) {
        pool.note_store();
        word(pool, self.head_at()).store(to, Ordering::Release);
        pool.persist_off(self.head_at(), 8);
    }
    pub(crate) fn pcurrent(self, pool: &Pool) -> u64 {
        word(pool, self.pcurrent_at()).load(Ordering::Acquire)
    }
    pub(crate) fn pprev(self, pool: &Pool) -> u64 {
        word(pool, self.pprev_at()).load(Ordering::Acquire)
    }
    pub(crate) fn set_pcurrent(self, pool: &Pool, to: u64) {
        pool.note_store();
        word(pool, self.pcurrent_at()).store(to, Ordering::Release);
        pool.persist_off(self.pcurrent_at(), 8);
    }
    pub(crate) fn set_pprev(self, pool: &Pool, to: u64) {
        pool.note_store();
        word(pool, self.pprev_at()).store(to, Ordering::Release);
        pool.persist_off(self.pprev_at(), 8);
    }
    pub(crate) fn raw_tag(self, pool: &Pool) -> u64 {
        word(pool, self.tag_at()).load(Ordering::Acquire)
    }
}

/// Encode a directory tag.
pub fn tag(ty: TypeId, class: u8) -> u64 {
    VALID | (ty.0 as u64) << 8 | class as u64
}

/// Decode a directory tag: `Ok(None)` for an unused entry, an error for garbage.
pub fn decode_tag(t: u64) -> std::result::Result<Option<(TypeId, u8)>, String> {
    if t == 0 {
        return Ok(None);
    }
    if t & VALID == 0 || t & !(VALID | 0xff_ffff) != 0 {
        return Err(format!("directory tag {t:#x} is not a valid list tag"));
    }
    let class = (t & 0xff) as u8;
    if class as usize >= NUM_CLASSES && class != EXTENT_CLASS {
        return Err(format!("directory tag {t:#x} names size class {class}, which does not exist"));
    }
    Ok(Some((TypeId((t >> 8) as u16), class)))
}

/// The root block at `at`.
#[derive(Clone, Copy, Debug)]
pub struct Root {
    pub at: u64,
    pub heap_start: u64,
}

impl Root {
    pub fn entry(&self, i: usize) -> Entry {
        Entry(self.at + DIR_AT + i as u64 * ENTRY_LEN)
    }

    /// Format a root block at `at` (mapped, above the heap top, so nothing refers to it
    /// yet) and persist it.
    pub(crate) fn format(pool: &Pool, at: u64) -> Root {
        let heap_start = at + ROOT_SIZE;
        assert!(pool.contains(at, ROOT_SIZE), "allocator root block at {at:#x} outside the pool");
        // SAFETY: `[at, at + ROOT_SIZE)` is mapped (checked above; `EpAlloc::create`
        // grows the pool first) and lies above the heap top, where nothing refers to it
        // yet, so this is the only reference to those bytes until `set_root` publishes
        // the block.
        let b = unsafe { std::slice::from_raw_parts_mut(pool.at::<u8>(at), ROOT_SIZE as usize) };
        b.fill(0);
        b[0..8].copy_from_slice(&ROOT_MAGIC);
        b[8..12].copy_from_slice(&ROOT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(DIR_CAP as u32).to_le_bytes());
        b[16..24].copy_from_slice(&heap_start.to_le_bytes());
        b[24..32].copy_from_slice(&ROOT_SIZE.to_le_bytes());
        let crc = crc32fast::hash(&b[..CRC_AT]);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        pool.persist_off(at, ROOT_SIZE as usize);
        Root { at, heap_start }
    }

    /// Validate the root block that pool root 0 names. It reads the block's first 64
    /// bytes as a plain slice, sound because nothing writes them after `format`; it is
    /// crate-private because a public form could be pointed at any page of the pool and
    /// race with an engine's stores there.
    pub(crate) fn read(pool: &Pool, at: u64) -> Result<Root> {
        let bad = |what: String| Err(PoolError::CorruptAllocator(what));
        if at == 0 {
            return Err(PoolError::Allocator("the pool has no EPallocator (root slot 0 is unset)".into()));
        }
        if !at.is_multiple_of(4096) || !pool.contains(at, ROOT_SIZE) {
            return bad(format!("allocator root offset {at:#x} is misaligned or outside the pool"));
        }
        // SAFETY: `[at, at + ROOT_SIZE)` lies in the mapped pool (checked above) and the
        // slice lives only in this call; the block's first 64 bytes are written once, by
        // `format` before root 0 names them, and never again, so nothing writes them
        // while this shared slice exists.
        let b = unsafe { std::slice::from_raw_parts(pool.at::<u8>(at), DIR_AT as usize) };
        if b[0..8] != ROOT_MAGIC {
            return bad(format!("no allocator root block at {at:#x} (bad magic)"));
        }
        let crc = u32::from_le_bytes(b[CRC_AT..CRC_AT + 4].try_into().unwrap());
        if crc != crc32fast::hash(&b[..CRC_AT]) {
            return bad("allocator root block checksum does not match".into());
        }
        let version = u32::from_le_bytes(b[8..12].try_into().unwrap());
        if version != ROOT_VERSION {
            let hint = if version < ROOT_VERSION {
                " (it was written by an older pmkv, before list seals and object checksums; dump it with that \
                 build and load the dump with this one)"
            } else {
                ""
            };
            return Err(PoolError::AllocatorVersion { found: version, supported: ROOT_VERSION, hint });
        }
        let cap = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
        let heap_start = u64::from_le_bytes(b[16..24].try_into().unwrap());
        let size = u64::from_le_bytes(b[24..32].try_into().unwrap());
        if cap != DIR_CAP || size != ROOT_SIZE || heap_start != at + ROOT_SIZE {
            return bad("allocator root block geometry fields are inconsistent".into());
        }
        Ok(Root { at, heap_start })
    }
}
