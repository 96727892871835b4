//! The on-PM format of NBTree (paper §3.1, Figure 1; byte by byte in docs/format/nbtree.md).
//!
//! Only the key-value layer is persistent. Everything else (leaf metadata, inner nodes)
//! is rebuilt from it at open (§3.2 "Crash Consistency", SPEC N6).
//!
//! * **Superblock** (type [`SUPER`], 64 bytes, pool root [`SUPER_ROOT`]): magic, version
//!   (with the [`BATCH_LOGS`] flag), leaf capacity, the head of the block list (a sentinel block that holds no key), a
//!   "sweep needed" word, and a CRC-32C of the immutable fields.
//! * **Key-value block** (type [`BLOCK`], [`BLOCK_SIZE`] bytes): the next block (8), a
//!   seal (CRC-32C of the block, written at clean close and verified at clean open) (4),
//!   20 reserved, then [`CAP`] unsorted 32-byte entries.
//! * **Entry** (32 bytes, aligned, so one PM line): an 8-byte key word, an 8-byte
//!   payload, an 8-byte inline value word, and a second key word that holds bytes 8..16
//!   of a key of 9 to 16 bytes ([`KIND_PAIR`], format 2; zero otherwise, and in format
//!   1, where such keys live in key objects). Key 0 is an empty or deleted slot
//!   (the paper's convention) up to format 3; format 4 marks such slots with
//!   [`EMPTY_KEY`] instead, so that a zeroed key word is damage, not an empty slot.
//!   The payload's top two bits are the paper's two concurrency bits, used here as [`FROZEN`] (the entry was copied by an SMO) and
//!   [`DEL`] (deleted; the key word is emptied next); see `smo` for why.
//!
//!   **Why 32 bytes, not the paper's 16.** The paper's payload is a 62-bit integer, so
//!   8-byte keys and values fit 16 bytes. pmkv's values are byte strings: an 8-byte value
//!   plus the concurrency bits, the key's kind and the value's length need more than 64
//!   bits, and with 16-byte entries every 8-byte value would live in a PM object of its
//!   own (an extra allocation, PM line written and PM line read per operation; measured
//!   at 0.6-0.8x the throughput). With a separate value word an 8-byte value stays in the
//!   entry, every operation still writes and reads one PM line (Table 1), and a block of
//!   2 KiB holds 63 entries, as many as the paper's 1 KiB node of 16-byte entries.
//! * **Key and value objects** (types [`KEY`], [`VALUE`]): 4-byte length, CRC-32C of
//!   length and bytes, the bytes. Immutable once published.

use pmkv_substrate::epalloc::TypeId;

/// Pool root slot of the superblock (root 0 is EPallocator's).
pub(crate) const SUPER_ROOT: usize = 1;
/// Object types in EPallocator.
pub(crate) const SUPER: TypeId = TypeId(1);
pub(crate) const BLOCK: TypeId = TypeId(2);
pub(crate) const KEY: TypeId = TypeId(3);
pub(crate) const VALUE: TypeId = TypeId(4);

pub(crate) const SUPER_MAGIC: &[u8; 8] = b"NBTREE01";
/// Format 2 added [`KIND_PAIR`] keys; format 3 added entry checks ([`entry_check`]) and
/// checked `next` words ([`next_word`]), so that damage is caught after a crash too, when
/// the blocks' seals are stale. An older pool is read and written in its own format (a
/// format-1 pool's 9-to-16-byte keys keep going to key objects, a format-1 or -2 pool's
/// entries get no checks), so that the binaries that wrote it can still read it; new
/// pools are format 3, which those binaries refuse.
pub(crate) const SUPER_VERSION: u32 = 4;
/// The first format with entry checks and checked `next` words.
pub(crate) const CHECKS_VERSION: u32 = 3;
/// Format 4: an empty slot's key word is [`EMPTY_KEY`], not 0, so that a zeroed key word
/// (the commonest damage a bad page or a torn write leaves) is damage, never "empty"
/// (docs/design/integrity.md, "Empty slots").
pub(crate) const MARKS_VERSION: u32 = 4;
/// Format 4: the key word of an empty slot (never written, deleted, or an insert that was
/// abandoned or cut short before its key word was stored). No inline key word is equal to
/// it or one bit away from it ([`key_word`] sends those keys to key objects), a key
/// object's offset (8-aligned, below 2^46) is at least two bits away, and a short key's
/// word (low byte 1..=8) too; so neither a zeroed nor a one-bit-flipped key word of a
/// record reads as an empty slot. Its bytes are "NBEMPTY" and 0xa5, big-endian.
pub(crate) const EMPTY_KEY: u64 = 0x4e42_454d_5054_59a5;
/// Bit 16 of the superblock's version word: the pool may hold write-batch logs
/// (EPallocator objects of type `pmkv_substrate::batch_log::LOG`, see `batch`). It is
/// orthogonal to the format (1 to 3) in the low bits, so that a pool of any format can
/// carry batch logs without being converted; builds that do not know it read the word as
/// a format they do not support and refuse the pool, instead of opening it with a batch
/// half applied. New pools have it; an older pool gets it from the first atomic batch
/// that needs a log, so a pool that never sees one stays readable by the binaries that
/// wrote it. It is left out of the superblock's CRC ([`super_crc`]) so that setting it is
/// one 8-byte store: a flag lost to damage can only let an older build open the pool,
/// this build finds batch logs by their type whatever the flag says.
pub(crate) const BATCH_LOGS: u32 = 1 << 16;
/// The oldest format this build opens.
pub(crate) const SUPER_VERSION_MIN: u32 = 1;
pub(crate) const SUPER_SIZE: usize = 64;
/// Superblock field offsets.
pub(crate) const SB_VERSION: u64 = 8;
pub(crate) const SB_CAP: u64 = 12;
pub(crate) const SB_HEAD: u64 = 16;
pub(crate) const SB_CRC: u64 = 24;
/// 1 when the last close left retired objects unfreed: the next open sweeps.
pub(crate) const SB_SWEEP: u64 = 32;

/// Key-value block: 2 KiB, 63 entries (the paper's 1 KiB node holds 64 of 16 bytes).
pub(crate) const BLOCK_SIZE: usize = 2048;
pub(crate) const BLK_NEXT: u64 = 0;
pub(crate) const BLK_SEAL: u64 = 8;
pub(crate) const BLK_ENTRIES: u64 = 32;
/// Entries per block: (2048 - 32) / 32. Bit 63 of the DRAM bitmap is the SMO bit.
pub(crate) const CAP: usize = 63;
pub(crate) const ENTRY: u64 = 32;
/// Format 3: the last entry's 32 bytes are the block's trailer ([`trailer_word`] in its
/// last 8 bytes, zeros before it), so a block holds one entry fewer (62, NBTree-SL 59).
pub(crate) const CAP_CHECKED: usize = CAP - 1;
/// Format 3: where the trailer word is.
pub(crate) const BLK_TRAILER: u64 = BLOCK_SIZE as u64 - 8;

/// NBTree-SL (the paper's single-layer ablation, Fig. 6): the leaf's bitmap, `num` and
/// fingerprints live in the PM block itself, in the space of its first [`SL_FIRST`]
/// entries (96 bytes right after the header), so a block holds [`CAP`] - [`SL_FIRST`] =
/// 60 entries. The superblock's capacity field says which kind a pool has
/// ([`CAP`] or [`CAP_SL`]).
pub(crate) const SL_FIRST: usize = 3;
/// Entries of a single-layer block.
pub(crate) const CAP_SL: usize = CAP - SL_FIRST;
/// Offsets in a single-layer block: the bitmap (with the SMO bit), `num`, and the 64
/// fingerprint bytes (slot `i` at byte `i`; bytes 0-2 unused).
pub(crate) const M_BITMAP: u64 = BLK_ENTRIES;
pub(crate) const M_NUM: u64 = BLK_ENTRIES + 8;
pub(crate) const M_FPS: u64 = BLK_ENTRIES + 16;
/// Offsets in an entry.
pub(crate) const E_PAYLOAD: u64 = 8;
pub(crate) const E_VALUE: u64 = 16;
/// The second key word of a [`KIND_PAIR`] key (zero otherwise).
pub(crate) const E_KEY2: u64 = 24;

/// Payload bits.
pub(crate) const FROZEN: u64 = 1 << 63;
pub(crate) const DEL: u64 = 1 << 62;
pub(crate) const KIND_SHIFT: u32 = 60;
pub(crate) const KIND_MASK: u64 = 3 << KIND_SHIFT;
/// The key word is the key itself: exactly 8 bytes, big-endian, not all zero.
pub(crate) const KIND_INLINE8: u64 = 0;
/// The key word holds up to 7 bytes, left-aligned, and `len + 1` in its low byte.
pub(crate) const KIND_SHORT: u64 = 1;
/// The key word is the offset of a key object.
pub(crate) const KIND_OBJ: u64 = 2;
/// A key of 9 to 16 bytes (format 2): its first 8 bytes big-endian in the key word (not
/// all zero), the rest left-aligned and zero-padded in the entry's second key word
/// ([`E_KEY2`]), and its length − 9 in the payload's [`KLEN_MASK`] bits. Such keys used
/// to need a key object: an allocation, its own PM line written and flushed on insert,
/// and one more line read on every search that found them.
pub(crate) const KIND_PAIR: u64 = 3;
/// Payload bits 56–58: a [`KIND_PAIR`] key's length − 9.
pub(crate) const KLEN_SHIFT: u32 = 56;
pub(crate) const KLEN_MASK: u64 = 7 << KLEN_SHIFT;
/// The payload bits that say what the key is (its kind, and a pair key's length): every
/// change of a payload keeps them.
pub(crate) const KEY_BITS: u64 = KIND_MASK | KLEN_MASK;
/// The value is a value object whose offset is in the low 52 bits; otherwise it is the
/// first `len` bytes of the entry's value word.
pub(crate) const VAL_PTR: u64 = 1 << 59;
pub(crate) const VLEN_SHIFT: u32 = 52;
pub(crate) const VLEN_MASK: u64 = 0xf << VLEN_SHIFT;
pub(crate) const DATA_MASK: u64 = (1 << 52) - 1;
/// Format 3, inline value (no [`VAL_PTR`]): payload bits 0–23 hold the entry check
/// ([`entry_check`]), bits 24–47 the *previous* check (equal to it at rest; during an
/// in-place update, the check of the value being replaced, so that whichever of the
/// update's 8-byte words a crash keeps, one value verifies: HART's answer to the same
/// problem, docs/design/integrity.md "NBTree").
pub(crate) const CHK: u64 = 0xff_ffff;
pub(crate) const CHK_PREV_SHIFT: u32 = 24;
/// Format 3, inline value: the value is in the entry's second value slot (bytes 24..32,
/// [`E_KEY2`]), not in bytes 16..24. Only keys that leave that word free (every kind but
/// [`KIND_PAIR`]) have a second slot: an update writes the slot not in use and then
/// swaps the payload, one persist (see [`two_slots`]).
pub(crate) const SLOT_B: u64 = 1 << 48;
/// Format 3, inline value: an in-place update holds the entry (set by CAS; another writer
/// of the same entry then swaps the payload to a value object instead of writing a value
/// word, so the value words have one writer at a time). Recovery clears it.
pub(crate) const BUSY: u64 = 1 << 49;
/// Both checks of an inline payload.
const CHECKS_INLINE: u64 = CHK | CHK << CHK_PREV_SHIFT;
/// Format 3: the entry check of a [`VAL_PTR`] entry, 13 bits in the payload bits that a
/// value object's offset leaves free (bits 0–2: objects are 8-aligned; bits 46–55: pools
/// are at most 2^46 bytes, and the inline length is unused). It is in the payload, not in
/// the unused value word, so that an update, which swaps the payload by one CAS, changes
/// the entry and its check in one 8-byte word: a crash, or a reader, never sees one
/// without the other (see [`entry_check`]).
pub(crate) const CHECK_PTR: u64 = 0x7 | 0x3ff << 46;
/// Longest value kept in the entry itself.
pub(crate) const INLINE_VALUE: usize = 8;

/// Key and value object header: length (4) and CRC-32C (4).
pub(crate) const OBJ_HEAD: usize = 8;

/// Longest key, as HART's (and the library's common limit).
pub(crate) const MAX_KEY: usize = 65_535;
/// Longest value.
pub(crate) const MAX_VALUE: usize = 16 * 1024 * 1024;

/// Offset of entry `slot` of the block at `block`.
#[inline]
pub(crate) fn entry_off(block: u64, slot: usize) -> u64 {
    block + BLK_ENTRIES + slot as u64 * ENTRY
}

/// The value object offset of a [`VAL_PTR`] payload; `checks`: the pool's format has
/// entry checks (whose bits share the word).
#[inline]
pub(crate) fn val_off(p: u64, checks: bool) -> u64 {
    if checks {
        p & DATA_MASK & !CHECK_PTR
    } else {
        p & DATA_MASK
    }
}

/// Whether an entry of payload `p` has a second value slot: its fourth word is not a
/// key word (every key kind but [`KIND_PAIR`]).
#[inline]
pub(crate) fn two_slots(p: u64) -> bool {
    (p & KIND_MASK) >> KIND_SHIFT != KIND_PAIR
}

/// The offset in its entry of the value word payload `p` selects ([`SLOT_B`]).
#[inline]
pub(crate) fn value_word_off(p: u64) -> u64 {
    if p & (VAL_PTR | SLOT_B) == SLOT_B {
        E_KEY2
    } else {
        E_VALUE
    }
}

/// CRC-32C of an entry's key word `kw`, second key word `w4` (only for a [`KIND_PAIR`]
/// key: for the others that word is a value slot, covered as `w`), payload `p` without
/// its FROZEN, BUSY and check bits, and value word `w` (zero for a [`VAL_PTR`] or [`DEL`]
/// entry, whose value words are unused and may hold a stale or half-written value).
fn entry_crc(kw: u64, w4: u64, p: u64, w: u64) -> u32 {
    let ptr = p & VAL_PTR != 0;
    let mut b = [0u64; 4];
    b[0] = kw.to_le();
    b[1] = if two_slots(p) { 0 } else { w4.to_le() };
    b[2] = (p & !(FROZEN | if ptr { CHECK_PTR } else { CHECKS_INLINE | BUSY })).to_le();
    b[3] = if ptr || p & DEL != 0 { 0 } else { w.to_le() };
    // SAFETY: four initialised words viewed as their 32 bytes.
    crc32c::crc32c(unsafe { std::slice::from_raw_parts(b.as_ptr() as *const u8, 32) })
}

/// Format 3: the check of an entry with key word `kw`, fourth word `w4`, payload `p` and
/// value word `w` (the one `p` selects): 24 bits for an inline value, 13 for a
/// [`VAL_PTR`] entry, never zero, so that a zeroed payload fails it.
#[inline]
pub(crate) fn check_of(kw: u64, w4: u64, p: u64, w: u64) -> u64 {
    let c = u64::from(entry_crc(kw, w4, p, w));
    if p & VAL_PTR == 0 {
        c % CHK + 1
    } else {
        c % 8191 + 1
    }
}

/// Format 3: payload `p` at rest for the words `kw`, `w4` and `w` (the value word `p`
/// selects): its check set (an inline value's previous check equal to it) and [`BUSY`]
/// clear. The check covers every word a read or recovery trusts, [`DEL`] too, and
/// nothing that depends on where the entry is (an SMO rewrites every entry it copies at
/// rest in slot A anyway). FROZEN is left out: an SMO's freeze sets it by CAS without
/// the check, and recovery clears it (a flip of it changes nothing).
#[inline]
pub(crate) fn entry_check(kw: u64, w4: u64, p: u64, w: u64) -> u64 {
    let c = check_of(kw, w4, p, w);
    if p & VAL_PTR == 0 {
        (p & !(CHECKS_INLINE | BUSY)) | c | c << CHK_PREV_SHIFT
    } else {
        (p & !CHECK_PTR) | (c & 7) | (c >> 3) << 46
    }
}

/// Format 3: what an entry (key word `kw`, payload `p`, value words `wa` at bytes 16..24
/// and `w4` at 24..32) holds if it verifies: the payload at rest that names the value,
/// and the value word (`(p, 0)` for a [`VAL_PTR`] or [`DEL`] entry). An inline value
/// verifies in the slot `p` selects against the check, or else (an in-place update a
/// crash cut short: only the payload reached PM) in the slot it replaced against the
/// previous check; that is the value then, and recovery rewrites the payload. `None`:
/// the entry is damaged.
pub(crate) fn verified(kw: u64, p: u64, wa: u64, w4: u64) -> Option<(u64, u64)> {
    if p & VAL_PTR != 0 {
        return (check_of(kw, w4, p, 0) == (p & 7) | (p >> 46 & 0x3ff) << 3).then_some((p, 0));
    }
    if p & DEL != 0 {
        return (check_of(kw, w4, p, 0) == p & CHK).then_some((p, 0));
    }
    let word = |b: bool| if b { w4 } else { wa };
    let s = p & SLOT_B != 0;
    if check_of(kw, w4, p, word(s)) == p & CHK {
        return Some((entry_check(kw, w4, p, word(s)) | (p & FROZEN), word(s)));
    }
    let alt = if two_slots(p) { !s } else { s };
    let pa = if alt { p | SLOT_B } else { p & !SLOT_B };
    (check_of(kw, w4, pa, word(alt)) == (p >> CHK_PREV_SHIFT) & CHK)
        .then(|| (entry_check(kw, w4, pa, word(alt)) | (p & FROZEN), word(alt)))
}

/// Bits 0–45 of a format-3 `next` word: the offset (pools are at most 2^46 bytes; bits
/// 46–55 are zero).
const NEXT_OFF: u64 = (1 << 46) - 1;

/// Format 3: the `next` word of the block at `own` naming the block at `next` (0: the end
/// of the list): the offset with an 8-bit check of it and of `own` in bits 56–63, never
/// zero, so that a zeroed word (which would cut the list, and the blocks after the cut
/// would be freed as leaks) or a word moved to another block fails. Older formats store
/// the bare offset.
#[inline]
pub(crate) fn next_word(next: u64, own: u64, checks: bool) -> u64 {
    if !checks {
        return next;
    }
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&next.to_le_bytes());
    b[8..].copy_from_slice(&own.to_le_bytes());
    next | u64::from(crc32c::crc32c(&b) % 255 + 1) << 56
}

/// The offset a `next` word of the block at `own` names; `None` if it fails its check.
#[inline]
pub(crate) fn next_of(word: u64, own: u64, checks: bool) -> Option<u64> {
    if !checks {
        return Some(word);
    }
    let next = word & NEXT_OFF;
    (next_word(next, own, true) == word).then_some(next)
}

/// Format 3: the trailer word of the block at `own`: a CRC of its offset and a constant
/// tag, never zero. A 4 KiB page that is zeroed covers the start of any 2 KiB block it
/// touches, or its end: the checked `next` word catches the first, this word the second
/// (a zeroed tail would otherwise read as slots never used, the records in it silently
/// gone). Written with the block, which is written whole, so it costs no extra persist.
#[inline]
pub(crate) fn trailer_word(own: u64) -> u64 {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&own.to_le_bytes());
    b[8..].copy_from_slice(b"NBTRAILR");
    u64::from(crc32c::crc32c(&b)) << 32 | 0x4e42_5452
}

/// CRC-32C of an object's length and bytes.
pub(crate) fn obj_crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&(bytes.len() as u32).to_le_bytes()), bytes)
}

/// The seal of a block image: CRC-32C of everything but the seal word.
pub(crate) fn block_seal(block: &[u8]) -> u32 {
    let c = crc32c::crc32c(&block[..BLK_SEAL as usize]);
    let c = crc32c::crc32c_append(c, &block[BLK_SEAL as usize + 4..BLK_ENTRIES as usize]);
    crc32c::crc32c_append(c, &block[BLK_ENTRIES as usize..BLOCK_SIZE])
}

/// CRC-32C of the superblock's immutable fields, the version word's [`BATCH_LOGS`] flag
/// left out (it is set later, by one store).
pub(crate) fn super_crc(sb: &[u8]) -> u32 {
    let mut head = [0u8; SB_CRC as usize];
    head.copy_from_slice(&sb[..SB_CRC as usize]);
    let at = SB_VERSION as usize;
    let v = u32::from_le_bytes(head[at..at + 4].try_into().expect("4 bytes")) & !BATCH_LOGS;
    head[at..at + 4].copy_from_slice(&v.to_le_bytes());
    crc32c::crc32c(&head)
}

/// A key as the leaf stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyWord {
    /// The key lives in the entry: its key word, its second key word (0 unless
    /// [`KIND_PAIR`]) and its payload bits ([`KEY_BITS`]).
    Inline { word: u64, word2: u64, bits: u64 },
    /// The key needs an object.
    Object,
}

/// Whether the inline key word `w` must not be used in a pool whose empty slots hold
/// `empty` (0, or [`EMPTY_KEY`] in format 4): `w` is 0 (empty before format 4, damage
/// from then on), the empty word, or (format 4) one bit away from it, so that a single
/// flipped bit cannot turn a record into an empty slot.
#[inline]
fn reserved_word(w: u64, empty: u64) -> bool {
    let x = w ^ empty;
    // Another bit than the lowest set in `x` (`x & (x - 1)` clears the lowest): at least
    // two bits from the empty word.
    w == 0 || x == 0 || (empty != 0 && x & x.wrapping_sub(1) == 0)
}

/// How `key` is stored; `pairs`: the pool's format has [`KIND_PAIR`] keys; `empty`: the
/// key word of an empty slot (0, or [`EMPTY_KEY`] in format 4), which, with the words one
/// bit away from it, no inline key may have.
pub(crate) fn key_word(key: &[u8], pairs: bool, empty: u64) -> KeyWord {
    let inline = |word: u64, word2: u64, kind: u64, klen: u64| KeyWord::Inline {
        word,
        word2,
        bits: kind << KIND_SHIFT | klen << KLEN_SHIFT,
    };
    let be = |b: &[u8]| {
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        u64::from_be_bytes(w)
    };
    match key.len() {
        0..=7 => {
            let mut b = [0u8; 8];
            b[..key.len()].copy_from_slice(key);
            b[7] = key.len() as u8 + 1;
            inline(u64::from_be_bytes(b), 0, KIND_SHORT, 0)
        }
        8 if !reserved_word(be(key), empty) => inline(be(key), 0, KIND_INLINE8, 0),
        9..=16 if pairs && !reserved_word(be(&key[..8]), empty) => {
            inline(be(&key[..8]), be(&key[8..]), KIND_PAIR, key.len() as u64 - 9)
        }
        _ => KeyWord::Object,
    }
}

/// The bytes of an inline key: key word `word`, second key word `word2` and payload `p`;
/// `None` if they are not a valid inline key (or the key is in an object).
pub(crate) fn inline_key(word: u64, word2: u64, p: u64) -> Option<([u8; 16], usize)> {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&word.to_be_bytes());
    match (p & KIND_MASK) >> KIND_SHIFT {
        KIND_INLINE8 if word != 0 => Some((b, 8)),
        KIND_SHORT => {
            let len = (b[7] as usize).checked_sub(1)?;
            (len <= 7 && b[len..7].iter().all(|&x| x == 0)).then_some((b, len))
        }
        KIND_PAIR if word != 0 => {
            let len = 9 + ((p & KLEN_MASK) >> KLEN_SHIFT) as usize;
            b[8..].copy_from_slice(&word2.to_be_bytes());
            b[len..].iter().all(|&x| x == 0).then_some((b, len))
        }
        _ => None,
    }
}

/// The payload bits and value word of an inline value (at most [`INLINE_VALUE`] bytes).
pub(crate) fn inline_value(v: &[u8]) -> (u64, u64) {
    debug_assert!(v.len() <= INLINE_VALUE);
    let mut b = [0u8; 8];
    b[..v.len()].copy_from_slice(v);
    ((v.len() as u64) << VLEN_SHIFT, u64::from_le_bytes(b))
}

/// The bytes of an inline value: payload `p`, value word `w`; `None` if the length is
/// not a valid one (damage).
pub(crate) fn inline_value_bytes(p: u64, w: u64) -> Option<([u8; 8], usize)> {
    let len = ((p & VLEN_MASK) >> VLEN_SHIFT) as usize;
    (len <= INLINE_VALUE).then_some((w.to_le_bytes(), len))
}

/// 1-byte fingerprint of a key (the paper's `fps`): a multiplicative hash over 8-byte
/// words, top byte.
#[inline]
pub(crate) fn fingerprint(key: &[u8]) -> u8 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ key.len() as u64;
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        h = (h ^ u64::from_le_bytes(c.try_into().expect("8 bytes"))).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    let mut last = [0u8; 8];
    last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = (h ^ u64::from_le_bytes(last)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> 56) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_round_trip() {
        let keys: [&[u8]; 11] = [
            b"",
            b"a",
            b"abcdefg",
            b"\0\0\0",
            b"\0",
            b"12345678",
            b"abcdefghi",
            b"abcdefgh\0",
            b"abcdefghijklmnop",
            b"\0\0\0\0\0\0\0\x01\0\0",
            b"abcdefghijklmno\0",
        ];
        for key in keys {
            let KeyWord::Inline { word, word2, bits } = key_word(key, true, 0) else {
                panic!("{key:?} should be inline")
            };
            assert_ne!(word, 0);
            assert_eq!(bits & !KEY_BITS, 0);
            let (b, len) = inline_key(word, word2, bits).unwrap();
            assert_eq!(&b[..len], key);
        }
        // Format 1 has no pair keys; a key whose first 8 bytes are zero, or longer than
        // 16 bytes, needs an object.
        assert_eq!(key_word(b"abcdefghi", false, 0), KeyWord::Object);
        assert_eq!(key_word(&[0; 8], true, 0), KeyWord::Object);
        assert_eq!(key_word(&[0; 12], true, 0), KeyWord::Object);
        assert_eq!(key_word(b"abcdefghijklmnopq", true, 0), KeyWord::Object);
        // Pair keys of different lengths that pad to the same words stay different.
        let a = key_word(b"abcdefghi", true, 0);
        let b = key_word(b"abcdefghi\0", true, 0);
        assert_ne!(a, b);
        // A damaged second word (bytes past the length) is not a key.
        let KeyWord::Inline { word, word2, bits } = key_word(b"abcdefghi", true, 0) else { panic!() };
        assert!(inline_key(word, word2 | 1, bits).is_none());
        for v in [&b""[..], b"x", b"1234567", b"12345678", b"\0\xff"] {
            let (p, w) = inline_value(v);
            assert_eq!(p & (FROZEN | DEL | KIND_MASK | VAL_PTR | DATA_MASK), 0);
            let (b, len) = inline_value_bytes(p, w).unwrap();
            assert_eq!(&b[..len], v);
        }
    }

    /// The entry's words at rest: (key word, payload, value word A, fourth word).
    fn at_rest(key: &[u8], value: &[u8]) -> (u64, u64, u64, u64) {
        let KeyWord::Inline { word, word2, bits } = key_word(key, true, 0) else { panic!() };
        let (vbits, w) = inline_value(value);
        (word, entry_check(word, word2, bits | vbits, w), w, word2)
    }

    #[test]
    fn entry_checks_catch_every_bit_that_names_the_record() {
        // A two-word key (one value slot), a short key (two slots), and a value object.
        let pair = at_rest(b"abcdefghijk", b"ABCDEFGH");
        let short = at_rest(b"abc", b"ABCDEFGH");
        let (kw, _, _, kw2) = pair;
        let ptr = (kw, entry_check(kw, kw2, (pair.1 & KEY_BITS) | VAL_PTR | 0x1234_5678, 0), 0xdead, kw2);
        assert_eq!(val_off(ptr.1, true), 0x1234_5678);
        for (kw, p, wa, w4) in [pair, short, ptr] {
            assert_eq!(verified(kw, p, wa, w4), Some((p, if p & VAL_PTR != 0 { 0 } else { wa })));
            // FROZEN is not covered (recovery clears it); BUSY only makes the entry need
            // rewriting at rest. At rest an inline entry's two checks are equal: a flip in
            // either, or in the slot selector (the previous check then proves the slot
            // in use), is refused or leaves the same value proved, never another one.
            let benign = FROZEN | if p & VAL_PTR == 0 { BUSY | SLOT_B | CHK | CHK << CHK_PREV_SHIFT } else { 0 };
            for bit in 0..64 {
                assert_eq!(verified(kw ^ 1 << bit, p, wa, w4), None, "key word bit {bit}");
                if 1 << bit & benign == 0 {
                    assert_eq!(verified(kw, p ^ 1 << bit, wa, w4), None, "payload bit {bit} of {p:#x}");
                } else {
                    let r = verified(kw, p ^ 1 << bit, wa, w4).map(|r| r.1);
                    assert!(r.is_none() || r == verified(kw, p, wa, w4).map(|r| r.1), "payload bit {bit}");
                }
                if p & VAL_PTR == 0 {
                    assert_eq!(verified(kw, p, wa ^ 1 << bit, w4), None, "value word bit {bit}");
                }
                if !two_slots(p) {
                    assert_eq!(verified(kw, p, wa, w4 ^ 1 << bit), None, "second key word bit {bit}");
                }
            }
            assert_eq!(verified(kw, 0, wa, w4), None, "a zeroed payload");
            // DEL is covered: set by damage on a live entry, or cleared on a deleted one.
            let del = entry_check(kw, w4, p | DEL, 0);
            assert!(verified(kw, del, wa, w4).is_some());
            assert_eq!(verified(kw, p | DEL, wa, w4), None);
            assert_eq!(verified(kw, del & !DEL, wa, w4), None);
        }
        // The unused words: a value object's entry, the slot a two-slot entry does not use.
        assert!(verified(ptr.0, ptr.1, 0x1111, ptr.3).is_some());
        assert!(verified(short.0, short.1, short.2, 0x2222).is_some());
    }

    /// Every state an in-place update passes through (`NbTree::update_checked`), and every
    /// torn pair of its words, verifies and names the old or the new value.
    #[test]
    fn an_in_place_update_verifies_at_every_step() {
        let (_, new) = inline_value(b"NEWVALUE");
        for (kw, p, old, w4) in [at_rest(b"abc", b"OLDVALUE"), at_rest(b"abcdefghijk", b"OLDVALUE")] {
            let prev = (p & CHK) << CHK_PREV_SHIFT;
            let ok = |p: u64, wa: u64, w4: u64| verified(kw, p, wa, w4).map(|r| r.1);
            if two_slots(p) {
                let np = p ^ SLOT_B;
                let commit = (np & !(CHK | CHK << CHK_PREV_SHIFT)) | BUSY | check_of(kw, 0, np, new) | prev;
                let rest = (commit & !(BUSY | CHK << CHK_PREV_SHIFT)) | (commit & CHK) << CHK_PREV_SHIFT;
                for (q, b, want) in [
                    (p | BUSY, 0, old),
                    (p | BUSY, new, old),
                    (commit, new, new),
                    (commit, 0, old), // the payload reached PM, slot B did not
                    (rest, new, new),
                ] {
                    assert_eq!(ok(q, old, b), Some(want), "payload {q:#x}, slot B {b:#x}");
                }
                assert_eq!(verified(kw, rest, old, new), Some((rest, new)), "at rest");
                // Dropping the previous check: damage to the new slot no longer falls back.
                assert_eq!(ok(rest, old, new ^ 1), None);
            } else {
                let claim = (p & !(CHK | CHK << CHK_PREV_SHIFT)) | BUSY | check_of(kw, w4, p, new) | prev;
                let rest = (claim & !(BUSY | CHK << CHK_PREV_SHIFT)) | (claim & CHK) << CHK_PREV_SHIFT;
                for (q, a, want) in [(claim, old, old), (claim, new, new), (rest, new, new)] {
                    assert_eq!(ok(q, a, w4), Some(want), "payload {q:#x}, value {a:#x}");
                }
                assert_eq!(ok(rest, old, w4), None, "released: the old value is no longer proved");
            }
        }
    }

    /// Format 4's empty key word cannot be reached from a record's key word by zeroing it
    /// or by flipping one bit: inline keys equal to it or one bit away go to key objects,
    /// and no short key's word or key object's offset is within one bit of it.
    #[test]
    fn no_key_word_is_within_one_bit_of_the_empty_word() {
        let e = EMPTY_KEY;
        for bit in 0..65 {
            let w = if bit == 64 { e } else { e ^ 1 << bit };
            let (k8, k12) = (w.to_be_bytes(), [&w.to_be_bytes()[..], b"abcd"].concat());
            assert_eq!(key_word(&k8, true, e), KeyWord::Object, "8-byte key {w:#x}");
            assert_eq!(key_word(&k12, true, e), KeyWord::Object, "12-byte key starting {w:#x}");
            // Older formats (no marks): such keys stay inline, as they always were.
            assert!(matches!(key_word(&k8, true, 0), KeyWord::Inline { .. }));
            // A short key's word has its length + 1 (1..=8) in the low byte.
            assert!(!(1..=8).contains(&(w & 0xff)) || inline_key(w, 0, KIND_SHORT << KIND_SHIFT).is_none());
            // A key object's offset is 8-aligned and below 2^46.
            assert!(w & 7 != 0 || w >> 46 != 0, "{w:#x} could be an offset");
        }
        for len in 0..=7 {
            let KeyWord::Inline { word, .. } = key_word(&vec![0xa5; len], true, e) else { panic!() };
            assert!((word ^ e).count_ones() >= 2, "short key of {len} bytes");
        }
        // The zero key word is damage in format 4 and empty before: never an inline key.
        assert_eq!(key_word(&[0; 8], true, e), KeyWord::Object);
        assert_eq!(key_word(&[0; 8], true, 0), KeyWord::Object);
        // Other keys are unaffected.
        assert_eq!(key_word(b"aberrant", true, e), key_word(b"aberrant", true, 0));
    }

    #[test]
    fn next_words_check_their_offset_and_block() {
        for (next, own) in [(0u64, 0x4000u64), (0x8000, 0x4000), ((1 << 46) - 2048, 2048)] {
            let w = next_word(next, own, true);
            assert_ne!(w, 0, "the end of the list is not a zero word");
            assert_eq!(next_of(w, own, true), Some(next));
            assert_eq!(next_of(w, own + 2048, true), None, "moved to another block");
            assert_eq!(next_of(0, own, true), None, "zeroed");
            // An 8-bit check: a flip of an offset bit passes it with odds about 1/255 (the
            // reserved bits 46-55 and the check's own bits are always caught).
            let missed = (0..64).filter(|&bit| next_of(w ^ 1 << bit, own, true).is_some()).count();
            assert!(missed <= 2, "{missed} single-bit flips missed");
            for bit in 46..64 {
                assert_eq!(next_of(w ^ 1 << bit, own, true), None, "bit {bit}");
            }
            assert_eq!(next_word(next, own, false), next, "older formats: the bare offset");
        }
    }
}
