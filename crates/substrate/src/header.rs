//! The pool header: the first 4 KiB of every pool file. Byte layout in `docs/format/pool.md`.
//!
//! The header has two parts:
//!
//! * an **immutable part** (bytes 0..256) written once at creation — magic, format version,
//!   layout name, maximum size, creation time, pool id — protected by a CRC-32;
//! * a **mutable part**: two 128-byte slots (at 256 and 384) holding the fields that change
//!   while a pool is in use — size, heap top, clean-shutdown flag, eight root offsets —
//!   each slot with a sequence number and its own CRC-32. An update writes the slot *not*
//!   holding the newest state and persists it; a crash that tears that write leaves a slot
//!   whose CRC fails, and the other slot still holds the previous state. This is the
//!   "shadow header" of redb's god byte / LMDB's two meta pages, and it is why a header
//!   update is atomic although it is larger than the 8 bytes PM writes atomically.
//!
//! Magic, version and the CRC position are fixed forever so that every future version of
//! pmkv can tell "another version" from "corrupt".

use crate::error::{PoolError, Result};
use std::path::Path;

/// Size of the header; the heap starts right after it.
pub const HEADER_SIZE: u64 = 4096;
/// The 8 magic bytes at offset 0.
pub const MAGIC: [u8; 8] = *b"PMKVPOOL";
/// Format version written by this build.
pub const FORMAT_VERSION: u32 = 1;
/// Number of root words in the header: roots `0..SEAL_ROOT` are offsets (engines' roots),
/// root [`SEAL_ROOT`] is the allocator's integrity seal (not an offset).
pub const NUM_ROOTS: usize = 8;
/// The header word that holds EPallocator's seal of its chunk lists at clean shutdown
/// (see `epalloc::seal`): it lives in the crash-atomic, checksummed state slot so that
/// damage anywhere in the allocator's own metadata cannot also forge the seal.
pub const SEAL_ROOT: usize = NUM_ROOTS - 1;
/// Maximum length of a layout (engine) name.
pub const MAX_LAYOUT: usize = 31;

pub(crate) const IMM_CRC_AT: usize = 252;
pub(crate) const SLOT_AT: [usize; 2] = [256, 384];
pub(crate) const SLOT_LEN: usize = 128;
const SLOT_CRC_AT: usize = 120;

/// The immutable part of the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Immutable {
    pub version: u32,
    pub layout: String,
    pub max_size: u64,
    pub created_unix: u64,
    pub pool_id: u64,
}

/// The mutable part of the header (one slot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mutable {
    pub seq: u64,
    pub size: u64,
    pub heap_top: u64,
    pub clean: bool,
    pub roots: [u64; NUM_ROOTS],
}

fn rd64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}
fn rd32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

impl Immutable {
    /// Serialise into `b[0..256]`, CRC included.
    pub fn write(&self, b: &mut [u8]) {
        b[..256].fill(0);
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&(HEADER_SIZE as u32).to_le_bytes());
        b[16..16 + self.layout.len()].copy_from_slice(self.layout.as_bytes());
        b[48..56].copy_from_slice(&self.max_size.to_le_bytes());
        b[56..64].copy_from_slice(&self.created_unix.to_le_bytes());
        b[64..72].copy_from_slice(&self.pool_id.to_le_bytes());
        let crc = crc32fast::hash(&b[..IMM_CRC_AT]);
        b[IMM_CRC_AT..IMM_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    }

    /// Parse and validate: magic, then CRC, then version. `b` must hold at least 256 bytes.
    pub fn read(b: &[u8], path: &Path) -> Result<Immutable> {
        let p = || path.to_path_buf();
        if b.len() < 8 || b[0..8] != MAGIC {
            return Err(PoolError::NotAPool { path: p() });
        }
        if b.len() < 256 {
            return Err(PoolError::Truncated { path: p(), actual: b.len() as u64, expected: HEADER_SIZE });
        }
        let crc = crc32fast::hash(&b[..IMM_CRC_AT]);
        if crc != rd32(b, IMM_CRC_AT) {
            return Err(PoolError::CorruptHeader {
                path: p(),
                what: "checksum of the immutable header does not match".into(),
            });
        }
        let version = rd32(b, 8);
        if version != FORMAT_VERSION {
            return Err(PoolError::Version { path: p(), found: version, supported: FORMAT_VERSION });
        }
        if rd32(b, 12) as u64 != HEADER_SIZE {
            return Err(PoolError::CorruptHeader { path: p(), what: "header size field".into() });
        }
        let raw = &b[16..48];
        let len = raw.iter().position(|&c| c == 0).unwrap_or(32);
        let layout = std::str::from_utf8(&raw[..len])
            .map_err(|_| PoolError::CorruptHeader { path: p(), what: "layout name is not UTF-8".into() })?
            .to_string();
        Ok(Immutable { version, layout, max_size: rd64(b, 48), created_unix: rd64(b, 56), pool_id: rd64(b, 64) })
    }
}

impl Mutable {
    /// Serialise into a 128-byte slot, CRC included.
    pub fn write(&self, s: &mut [u8]) {
        s[..SLOT_LEN].fill(0);
        s[0..8].copy_from_slice(&self.seq.to_le_bytes());
        s[8..16].copy_from_slice(&self.size.to_le_bytes());
        s[16..24].copy_from_slice(&self.heap_top.to_le_bytes());
        s[24..32].copy_from_slice(&(self.clean as u64).to_le_bytes());
        for (i, r) in self.roots.iter().enumerate() {
            s[32 + 8 * i..40 + 8 * i].copy_from_slice(&r.to_le_bytes());
        }
        let crc = crc32fast::hash(&s[..SLOT_CRC_AT]);
        s[SLOT_CRC_AT..SLOT_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    }

    fn read_slot(s: &[u8]) -> Option<Mutable> {
        let seq = rd64(s, 0);
        if seq == 0 || crc32fast::hash(&s[..SLOT_CRC_AT]) != rd32(s, SLOT_CRC_AT) {
            return None;
        }
        let clean = match rd64(s, 24) {
            0 => false,
            1 => true,
            _ => return None,
        };
        let mut roots = [0; NUM_ROOTS];
        for (i, r) in roots.iter_mut().enumerate() {
            *r = rd64(s, 32 + 8 * i);
        }
        Some(Mutable { seq, size: rd64(s, 8), heap_top: rd64(s, 16), clean, roots })
    }

    /// The newest valid slot of a header page, or an error if neither slot is valid.
    pub fn read(b: &[u8], path: &Path) -> Result<Mutable> {
        let a = Self::read_slot(&b[SLOT_AT[0]..SLOT_AT[0] + SLOT_LEN]);
        let c = Self::read_slot(&b[SLOT_AT[1]..SLOT_AT[1] + SLOT_LEN]);
        match (a, c) {
            (Some(x), Some(y)) => Ok(if x.seq > y.seq { x } else { y }),
            (Some(x), None) | (None, Some(x)) => Ok(x),
            (None, None) => Err(PoolError::CorruptHeader {
                path: path.to_path_buf(),
                what: "no valid state slot (both checksums fail)".into(),
            }),
        }
    }

    /// Byte offset of the slot that the state with sequence number `seq` is written to.
    pub fn slot_for(seq: u64) -> usize {
        SLOT_AT[(seq & 1) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_torn_slot() {
        let mut page = vec![0u8; HEADER_SIZE as usize];
        let imm = Immutable {
            version: FORMAT_VERSION,
            layout: "hart".into(),
            max_size: 1 << 30,
            created_unix: 5,
            pool_id: 9,
        };
        imm.write(&mut page);
        let p = Path::new("x");
        assert_eq!(Immutable::read(&page, p).unwrap(), imm);
        let m1 = Mutable { seq: 1, size: 8192, heap_top: 4096, clean: false, roots: [1; 8] };
        let at = Mutable::slot_for(1);
        m1.write(&mut page[at..at + SLOT_LEN]);
        assert_eq!(Mutable::read(&page, p).unwrap(), m1);
        let m2 = Mutable { seq: 2, roots: [2; 8], ..m1 };
        let at2 = Mutable::slot_for(2);
        m2.write(&mut page[at2..at2 + SLOT_LEN]);
        assert_eq!(Mutable::read(&page, p).unwrap(), m2);
        // Tear the newest slot: the previous state is what a reader sees.
        page[at2 + 40] ^= 0xff;
        assert_eq!(Mutable::read(&page, p).unwrap(), m1);
        page[at + 40] ^= 0xff;
        assert!(matches!(Mutable::read(&page, p), Err(PoolError::CorruptHeader { .. })));
        page[100] = 1;
        assert!(matches!(Immutable::read(&page, p), Err(PoolError::CorruptHeader { .. })));
    }
}
