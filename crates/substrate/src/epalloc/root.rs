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
//!            +0  tag    format 3: object type << 8 | class code (0xff = extents)
//!                       | check8 << 56; format 2: valid bit 63 | type << 8 | class
//!            +8  PHead  the first chunk (0 = empty list)         \ format 3: self-
//!            +16 PCurrent \ the recycle micro-log of this list    | checked link words
//!            +24 PPrev    / (Algorithm 6): see recycle_log.rs    / (check.rs)
//!            +32 entry 0 only, format 3: entries in use (self-checked count)
//! ```
//!
//! One list per (object type, size class) as the paper has one per object type and value
//! size. Each list has its own recycle log so that lists recycle chunks independently
//! (the paper has a single log; with one log every recycle in the allocator would have
//! to be serialised). Each entry owns a whole cache line, so two threads working on two
//! lists never flush the same line. Entries are created on first use by one 8-byte store
//! of the tag (persisted), in index order, and never removed.
//!
//! **Format 3** makes every word a walk trusts self-checking (see `check.rs`): the tag,
//! `PHead`, `PCurrent`, `PPrev`. `format` writes the encoding of 0 into every entry's
//! link words, so an unused entry is (tag 0, three encoded zeros) and a zeroed entry line
//! is damage. Entries are used in index order, so a used entry after an unused one is
//! damage; and the count word in entry 0's padding says how many are used, so zeroing
//! the *last* used entry is damage too. Creating an entry stores and persists its tag,
//! then stores and flushes the new count without a fence (it is durable at the thread's
//! next fence, which the allocation that created the list soon issues): a crash in
//! between leaves more entries in use than the count says (one per thread that created
//! a list since its last fence; the count, written under the directory lock, only grows),
//! which `open` accepts after a crash (and rewrites the count in a writable open); fewer
//! entries than the count, or any extra after a clean shutdown, is damage.

use super::check::{self, Format, KIND_COUNT, KIND_TAG};
use super::chunk::{load_link, store_link, word};
use super::size_class::{EXTENT_CLASS, NUM_CLASSES};
use super::TypeId;
use crate::error::{PoolError, Result};
use crate::pool::Pool;
use std::sync::atomic::Ordering;

pub const ROOT_MAGIC: [u8; 8] = *b"EPALLOC1";
/// The version new pools get. 3: every allocator word a walk trusts carries its own check
/// (`check.rs`). 2: the header's seal word is written at every clean shutdown (see
/// `seal`); a version-1 pool has none, so a build that verifies seals must not take it for
/// a damaged one. Versions 2 and 3 are read and written (a format-2 pool stays format 2;
/// dump and load it to get the checks); version 1 is refused.
pub const ROOT_VERSION: u32 = 3;
/// The oldest version still opened.
pub const MIN_ROOT_VERSION: u32 = 2;
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
    pub(crate) fn head(self, pool: &Pool, fmt: Format) -> Result<u64> {
        load_link(pool, fmt, self.head_at())
    }
    /// Store and persist `PHead`.
    pub(crate) fn set_head(self, pool: &Pool, fmt: Format, to: u64) {
        store_link(pool, fmt, self.head_at(), to)
    }
    pub(crate) fn pcurrent(self, pool: &Pool, fmt: Format) -> Result<u64> {
        load_link(pool, fmt, self.pcurrent_at())
    }
    pub(crate) fn pprev(self, pool: &Pool, fmt: Format) -> Result<u64> {
        load_link(pool, fmt, self.pprev_at())
    }
    pub(crate) fn set_pcurrent(self, pool: &Pool, fmt: Format, to: u64) {
        store_link(pool, fmt, self.pcurrent_at(), to)
    }
    pub(crate) fn set_pprev(self, pool: &Pool, fmt: Format, to: u64) {
        store_link(pool, fmt, self.pprev_at(), to)
    }
    /// Whether the entry's three link words all name nothing (an unused entry, or a list
    /// that is empty with no recycle in flight). Damaged words count as "not empty".
    pub(crate) fn links_empty(self, pool: &Pool, fmt: Format) -> bool {
        [self.head(pool, fmt), self.pcurrent(pool, fmt), self.pprev(pool, fmt)].iter().all(|w| matches!(w, Ok(0)))
    }
    pub(crate) fn raw_tag(self, pool: &Pool) -> u64 {
        word(pool, self.tag_at()).load(Ordering::Acquire)
    }
}

/// Encode a format-2 directory tag.
pub fn tag(ty: TypeId, class: u8) -> u64 {
    VALID | (ty.0 as u64) << 8 | class as u64
}

/// The tag word of directory entry `e` for (`ty`, `class`) in format `fmt`: format 3 adds
/// a check of the tag bits and the entry's offset in the top byte.
pub fn tag_word(fmt: Format, e: Entry, ty: TypeId, class: u8) -> u64 {
    if fmt.checked() {
        check::encode(KIND_TAG, e.tag_at(), (ty.0 as u64) << 8 | class as u64)
    } else {
        tag(ty, class)
    }
}

/// Decode the tag word `t` of directory entry `e`: `Ok(None)` for an unused entry, an
/// error naming the entry's offset for garbage.
pub fn decode_tag(fmt: Format, e: Entry, t: u64) -> std::result::Result<Option<(TypeId, u8)>, String> {
    if t == 0 {
        return Ok(None);
    }
    let bits =
        if fmt.checked() { check::decode(KIND_TAG, e.tag_at(), t) } else { (t & VALID != 0).then_some(t & !VALID) };
    let Some(t) = bits.filter(|b| b & !0xff_ffff == 0) else {
        return Err(format!("directory tag {t:#x} at {:#x} is not a valid list tag", e.tag_at()));
    };
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
    /// The encoding of its words, from the block's version.
    pub fmt: Format,
}

impl Root {
    pub fn entry(&self, i: usize) -> Entry {
        Entry(self.at + DIR_AT + i as u64 * ENTRY_LEN)
    }

    /// Offset of the format-3 count of directory entries in use (entry 0's padding).
    pub fn count_at(&self) -> u64 {
        self.at + DIR_AT + 32
    }

    /// The format-3 count of entries in use, or `Corrupt` naming the word.
    pub(crate) fn count(&self, pool: &Pool) -> Result<u64> {
        let at = self.count_at();
        let w = word(pool, at).load(Ordering::Acquire);
        check::decode(KIND_COUNT, at, w).ok_or_else(|| {
            PoolError::CorruptAllocator(format!("directory count word at {at:#x} is damaged ({w:#x} fails its check)"))
        })
    }

    /// Store the format-3 count and flush it; `fence` makes it durable now, otherwise at
    /// the calling thread's next fence (see the module doc for why that is enough).
    pub(crate) fn set_count(&self, pool: &Pool, n: u64, fence: bool) {
        let at = self.count_at();
        pool.note_store();
        word(pool, at).store(check::encode(KIND_COUNT, at, n), Ordering::Release);
        if fence {
            pool.persist_off(at, 8);
        } else {
            pool.flush_off(at, 8);
        }
    }

    /// Format a root block at `at` (mapped, above the heap top, so nothing refers to it
    /// yet) and persist it.
    pub(crate) fn format(pool: &Pool, at: u64, fmt: Format) -> Root {
        let heap_start = at + ROOT_SIZE;
        assert!(pool.contains(at, ROOT_SIZE), "allocator root block at {at:#x} outside the pool");
        // SAFETY: `[at, at + ROOT_SIZE)` is mapped (checked above; `EpAlloc::create`
        // grows the pool first) and lies above the heap top, where nothing refers to it
        // yet, so this is the only reference to those bytes until `set_root` publishes
        // the block.
        let b = unsafe { std::slice::from_raw_parts_mut(pool.at::<u8>(at), ROOT_SIZE as usize) };
        b.fill(0);
        b[0..8].copy_from_slice(&ROOT_MAGIC);
        b[8..12].copy_from_slice(&fmt.version().to_le_bytes());
        b[12..16].copy_from_slice(&(DIR_CAP as u32).to_le_bytes());
        b[16..24].copy_from_slice(&heap_start.to_le_bytes());
        b[24..32].copy_from_slice(&ROOT_SIZE.to_le_bytes());
        let crc = crc32fast::hash(&b[..CRC_AT]);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        let root = Root { at, heap_start, fmt };
        if fmt.checked() {
            // Unused entries hold encoded zeros (a zeroed entry is then damage), and the
            // count of entries in use is 0.
            let mut put = |off: u64, w: u64| {
                let i = (off - at) as usize;
                b[i..i + 8].copy_from_slice(&w.to_le_bytes());
            };
            for i in 0..DIR_CAP {
                let e = root.entry(i);
                for w in [e.head_at(), e.pcurrent_at(), e.pprev_at()] {
                    put(w, check::link_word(fmt, w, 0));
                }
            }
            put(root.count_at(), check::encode(KIND_COUNT, root.count_at(), 0));
        }
        pool.persist_off(at, ROOT_SIZE as usize);
        root
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
        let fmt = match version {
            2 => Format::V2,
            3 => Format::V3,
            _ => {
                return Err(PoolError::AllocatorVersion {
                    oldest: MIN_ROOT_VERSION,
                    found: version,
                    supported: ROOT_VERSION,
                    hint: if version < MIN_ROOT_VERSION {
                        " (it was written by an older pmkv, before list seals and object checksums; dump it with that \
                         build and load the dump with this one)"
                    } else {
                        ""
                    },
                })
            }
        };
        let cap = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
        let heap_start = u64::from_le_bytes(b[16..24].try_into().unwrap());
        let size = u64::from_le_bytes(b[24..32].try_into().unwrap());
        if cap != DIR_CAP || size != ROOT_SIZE || heap_start != at + ROOT_SIZE {
            return bad("allocator root block geometry fields are inconsistent".into());
        }
        if fmt.checked() && pool.max_size() > check::DATA_MASK {
            return bad(format!(
                "pool maximum size {:#x} does not fit the 56-bit offsets of format 3",
                pool.max_size()
            ));
        }
        Ok(Root { at, heap_start, fmt })
    }
}
