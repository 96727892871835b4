//! Salvage: every record of a damaged NBTree pool file that something still vouches for.
//!
//! Opening a damaged pool fails on purpose; `pmkv salvage` copies out what is provably
//! intact. Like HART's salvage this reads the file as plain bytes and trusts nothing but
//! checks: not the pool header, not the allocator, not the block list (any of them may be
//! what was damaged). Every offset is bounds-checked, so no byte pattern can fault.
//!
//! What vouches for what (format: docs/format/nbtree.md; the paper's key-value layer,
//! §3.1, is the only persistent state, which is why it is all that salvage needs):
//!
//! * a key or value **object** is vouched for by its own CRC-32C (objects are immutable
//!   once published, so the CRC holds after a crash too);
//! * an **inline** key or value (in the entry) is vouched for by the block's seal, written
//!   at clean close only (not by `sync`), or, in format 3, by the entry's own check
//!   ([`entry_check`]), which holds after a crash too. An entry with an inline value
//!   passes a 24-bit check; a [`VAL_PTR`] entry's 13-bit check vouches for its inline key
//!   only together with its value object's CRC. Inline bytes nothing vouches for (format 1
//!   and 2 outside sealed blocks) are lost.
//! * in format 4 an empty slot's key word is [`EMPTY_KEY`], so a zero key word in a block
//!   (found by its trailer word) with a payload is a record whose key is lost: counted as
//!   damaged.
//!
//! Sealed blocks are found at every 64-byte line whose seal verifies (2^-32 odds for
//! anything else). Outside sealed blocks every 32-byte slot is tried as an entry: one
//! that passes its entry check, or whose key and value are both objects that pass their
//! CRCs.
//!
//! Duplicates are settled as recovery settles them, where that is decidable: an entry an
//! SMO froze (Algorithm 2's copy phase; [`FROZEN`]) is older than its unfrozen copy, so the
//! copy wins; a frozen entry with no unfrozen copy may be a key deleted after the SMO, so
//! it is reported lost rather than resurrected. Entries being deleted ([`DEL`]) are skipped.
//! Two unfrozen copies with different values (e.g. a stale freed block next to the live
//! one) cannot be ordered: neither is emitted and the key is reported lost.

use crate::layout::*;
use pmkv_core::{Emit, Result, SalvageReport};
use std::collections::BTreeMap;

/// Lost keys listed in the report at most.
const MAX_LOST: usize = 100;

fn u64_at(image: &[u8], off: u64) -> Option<u64> {
    let o = usize::try_from(off).ok()?;
    Some(u64::from_le_bytes(image.get(o..o.checked_add(8)?)?.try_into().ok()?))
}

fn u32_at(image: &[u8], off: u64) -> Option<u32> {
    let o = usize::try_from(off).ok()?;
    Some(u32::from_le_bytes(image.get(o..o.checked_add(4)?)?.try_into().ok()?))
}

/// The bytes of the key or value object at `off` if its CRC verifies.
fn object(image: &[u8], off: u64, max: usize) -> Option<&[u8]> {
    if off == 0 || !off.is_multiple_of(8) {
        return None;
    }
    let len = u32_at(image, off)? as usize;
    if len > max {
        return None;
    }
    let crc = u32_at(image, off.checked_add(4)?)?;
    let start = usize::try_from(off.checked_add(OBJ_HEAD as u64)?).ok()?;
    let bytes = image.get(start..start.checked_add(len)?)?;
    (obj_crc(bytes) == crc).then_some(bytes)
}

/// The first entry slot that holds an entry: 0 in two-layer blocks, [`SL_FIRST`] in
/// NBTree-SL blocks (whose first entries' space holds leaf metadata), and the format.
/// Taken from an intact superblock; without one the layout is unknown and only slots
/// valid in both are read (format 0: unknown).
fn layout_of(image: &[u8]) -> (usize, u32) {
    for off in (0..image.len().saturating_sub(SUPER_SIZE - 1)).step_by(64) {
        let sb = &image[off..off + SUPER_SIZE];
        if &sb[..8] != SUPER_MAGIC || u32_at(sb, SB_CRC) != Some(super_crc(sb)) {
            continue;
        }
        let version = u32_at(sb, SB_VERSION).unwrap_or(0) & !BATCH_LOGS;
        match u32_at(sb, SB_CAP).map(|c| c as usize) {
            Some(CAP | CAP_CHECKED) => return (0, version),
            Some(c) if c == CAP_SL || c == CAP_CHECKED - SL_FIRST => return (SL_FIRST, version),
            _ => {}
        }
    }
    (SL_FIRST, 0)
}

/// Format 4: records whose key word was zeroed, in the blocks whose trailer word still
/// names them (a zero key word is never an empty slot there). Their keys are gone, so
/// they are counted as damaged without being listed. A slot whose payload is zero too was
/// never used (or the whole entry was zeroed) and is not counted.
fn zeroed_keys(image: &[u8], first: usize) -> u64 {
    let mut n = 0;
    let mut off = 0u64;
    while off + BLOCK_SIZE as u64 <= image.len() as u64 {
        if u64_at(image, off + BLK_TRAILER) != Some(trailer_word(off)) {
            off += 64;
            continue;
        }
        for slot in first..CAP_CHECKED {
            let e = entry_off(off, slot);
            let (kw, p) = (u64_at(image, e), u64_at(image, e + E_PAYLOAD));
            if kw == Some(0) && p.is_some_and(|p| p != 0 && p & DEL == 0) {
                n += 1;
            }
        }
        off += BLOCK_SIZE as u64;
    }
    n
}

/// One copy of a record: its value and whether an SMO froze it.
struct Copy<'a> {
    value: &'a [u8],
    frozen: bool,
}

/// A key found: owned (inline keys are decoded from words), with its verified copies.
type Found<'a> = BTreeMap<Vec<u8>, Vec<Copy<'a>>>;

/// Decode the entry at `e`; `sealed`: the block's seal vouches for its inline bytes.
/// Returns `None` if the slot holds no entry that can be named.
fn entry<'a>(image: &'a [u8], e: u64, sealed: bool, found: &mut Found<'a>, rep: &mut SalvageReport) -> Option<()> {
    let kw = u64_at(image, e)?;
    let p = u64_at(image, e + E_PAYLOAD)?;
    // Format 4's empty slots hold `EMPTY_KEY` (never a record's key word there; in an
    // older pool it is a possible 8-byte key, skipped here: lost, never invented).
    if kw == 0 || kw == EMPTY_KEY || p & DEL != 0 {
        return None;
    }
    // A format-3 entry check (any pool's format may be in the file; an older entry passes
    // it with odds 2^-24, or 2^-13 for a [`VAL_PTR`] one, which still needs its object).
    // It also says which value word holds an inline value (an in-place update a crash cut
    // short may have left the previous one in force).
    let checked = verified(kw, p, u64_at(image, e + E_VALUE)?, u64_at(image, e + E_KEY2)?).map(|(rest, _)| rest);
    let p = checked.unwrap_or(p);
    let sealed = sealed || checked.is_some();
    let key: Vec<u8> = if (p & KIND_MASK) >> KIND_SHIFT == KIND_OBJ {
        object(image, kw, MAX_KEY)?.to_vec()
    } else if sealed {
        let (b, n) = inline_key(kw, u64_at(image, e + E_KEY2)?, p)?;
        b[..n].to_vec()
    } else {
        return None; // nothing vouches for an inline key outside a sealed block
    };
    let value = if p & VAL_PTR != 0 {
        object(image, if checked.is_some() { val_off(p, true) } else { p & DATA_MASK }, MAX_VALUE)
    } else if sealed {
        let len = ((p & VLEN_MASK) >> VLEN_SHIFT) as usize;
        let o = usize::try_from(e + value_word_off(p)).ok()?;
        (len <= INLINE_VALUE).then(|| image.get(o..o + len)).flatten()
    } else {
        None
    };
    match value {
        Some(value) => found.entry(key).or_default().push(Copy { value, frozen: p & FROZEN != 0 }),
        None => lose(rep, key),
    }
    Some(())
}

fn lose(rep: &mut SalvageReport, key: Vec<u8>) {
    rep.damaged += 1;
    if rep.lost_keys.len() < MAX_LOST {
        rep.lost_keys.push(key);
    }
}

/// Scan `image` (an NBTree pool file's bytes) for vouched-for records; see the module doc.
/// Records are emitted in key order.
pub(crate) fn salvage(image: &[u8], emit: Emit<'_>) -> Result<SalvageReport> {
    let mut rep = SalvageReport::default();
    let (first, version) = layout_of(image);
    if version >= MARKS_VERSION {
        rep.damaged += zeroed_keys(image, first);
    }
    let mut found: Found<'_> = BTreeMap::new();
    // Sealed blocks: a header whose reserved bytes are zero and whose seal verifies.
    let mut sealed = vec![false; image.len() / ENTRY as usize + 1];
    let mut off = 0usize;
    while off + BLOCK_SIZE <= image.len() {
        let b = &image[off..off + BLOCK_SIZE];
        let reserved_zero = b[BLK_SEAL as usize + 4..BLK_ENTRIES as usize].iter().all(|&x| x == 0);
        if !reserved_zero || u32_at(b, BLK_SEAL) != Some(block_seal(b)) {
            off += 64;
            continue;
        }
        for slot in first..CAP {
            let _ = entry(image, entry_off(off as u64, slot), true, &mut found, &mut rep);
        }
        for s in &mut sealed[off / ENTRY as usize..(off + BLOCK_SIZE) / ENTRY as usize] {
            *s = true;
        }
        off += BLOCK_SIZE;
    }
    // Everywhere else: entries whose key and value are both objects that verify.
    let mut e = 0usize;
    while e + ENTRY as usize <= image.len() {
        if !sealed[e / ENTRY as usize] {
            let _ = entry(image, e as u64, false, &mut found, &mut rep);
        }
        e += ENTRY as usize;
    }
    for (key, copies) in found {
        let live: Vec<&Copy<'_>> = copies.iter().filter(|c| !c.frozen).collect();
        rep.duplicates += copies.len() as u64 - 1;
        match live.first() {
            Some(c) if live.iter().all(|o| o.value == c.value) => {
                emit(&key, c.value)?;
                rep.records += 1;
            }
            // Frozen copies only (maybe deleted since), or live copies that disagree.
            _ => lose(&mut rep, key),
        }
    }
    Ok(rep)
}
