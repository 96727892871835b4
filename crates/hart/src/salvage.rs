//! Salvage: every intact record of a damaged HART pool file, found by the leaves' checks.
//!
//! Opening a damaged pool fails on purpose (a pool that is known to be damaged must not be
//! served or written). What is left intact can still be copied out: every leaf carries a
//! key check seeded with its own offset (see `checksum`), so a 64-byte line at offset `o`
//! whose meta word and key pass the key check for `o` is a live leaf, with odds of 2^-32
//! for a line of anything else. Salvage therefore trusts nothing but the checks: not the
//! header, not the allocator's lists or bitmaps (either may be what was damaged), and
//! reads the image as plain bytes, so a damaged offset can never fault.
//!
//! A deleted leaf is erased (its meta word becomes the erase mark) before its slot is
//! freed, so deleted records do not come back; a crash between the erase and the leaf's
//! bit can leave a stale copy of a
//! deleted key only if the key was never inserted again, and then it is that key's last
//! value. Keys found twice are reported and the first copy kept.

use crate::checksum::{self, Meta};
use crate::layout::*;
use crate::pm::has_slot_b;
use pmkv_core::{Emit, Result, SalvageReport};
use std::collections::HashSet;

/// The pool header's size: leaves lie above it.
const HEADER: usize = 4096;

fn u64_at(image: &[u8], off: u64) -> Option<u64> {
    let o = usize::try_from(off).ok()?;
    Some(u64::from_le_bytes(image.get(o..o.checked_add(8)?)?.try_into().ok()?))
}

fn slice(image: &[u8], off: u64, len: usize) -> Option<&[u8]> {
    let o = usize::try_from(off).ok()?;
    image.get(o..o.checked_add(len)?)
}

/// The value of the leaf at `leaf` if it verifies.
fn value(image: &[u8], leaf: u64, m: Meta) -> Option<&[u8]> {
    let a = u64_at(image, leaf + LEAF_P_VALUE)?;
    let b = if has_slot_b(m) { Some(u64_at(image, leaf + LEAF_SLOT_B)?) } else { None };
    let ca = checksum::value_check(leaf, a, m.flags);
    let (word, slot, _) = checksum::value_word(leaf, u64_at(image, leaf + LEAF_VCHECK)?, a, ca, b, m.flags)?;
    if let Some(n) = inline_len(m.flags) {
        return slice(image, leaf + slot, n.min(INLINE_VALUE));
    }
    let head = u64_at(image, word)?;
    let len = (head & 0xffff_ffff) as usize;
    let v = slice(image, word.checked_add(VALUE_HDR as u64)?, len.min(MAX_VALUE))?;
    (v.len() == len && checksum::object_check(leaf, v) == (head >> 32) as u32).then_some(v)
}

/// Scan `image` (a HART pool file's bytes) for intact records; see the module doc.
pub(crate) fn salvage(image: &[u8], emit: Emit<'_>) -> Result<SalvageReport> {
    let mut rep = SalvageReport::default();
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let end = image.len() / LEAF_SIZE * LEAF_SIZE;
    for leaf in (HEADER..end).step_by(LEAF_SIZE) {
        let leaf = leaf as u64;
        let Some(w) = u64_at(image, leaf + LEAF_META) else { continue };
        let m = Meta::decode(w);
        if is_erased(leaf, w) || m.key_check == 0 || !m.flags_valid() {
            continue;
        }
        let key = if m.key_out() {
            match u64_at(image, leaf + LEAF_KEY).and_then(|k| slice(image, k, m.key_len)) {
                Some(k) => k,
                None => continue,
            }
        } else {
            match slice(image, leaf + LEAF_KEY, m.key_len) {
                Some(k) => k,
                None => continue,
            }
        };
        if checksum::key_check(leaf, key, m.key_out()) != m.key_check {
            continue;
        }
        if seen.contains(key) {
            rep.duplicates += 1;
            continue;
        }
        seen.insert(key.to_vec());
        match value(image, leaf, m) {
            Some(v) => {
                emit(key, v)?;
                rep.records += 1;
            }
            None => {
                rep.damaged += 1;
                if rep.lost_keys.len() < 100 {
                    rep.lost_keys.push(key.to_vec());
                }
            }
        }
    }
    Ok(rep)
}
