//! The update micro-log (HART Algorithm 3, lines 1–3, 6 and 11): `PLeaf`, `POldV`, `PNewV`.
//!
//! The paper persists the three pointers one by one (three fences) and a fourth time when
//! it reclaims the log. pmkv writes all three at once into one cache line together with a
//! `check` word = hash(PLeaf, POldV, PNewV, CRC-32 of the new value) | 1, and persists
//! them with the new value in ONE fence. Recovery accepts a log only if `check` matches;
//! since it covers the new value's bytes too, a log whose value did not fully reach PM is
//! rejected just like a torn log. An invalid log means the crash came before the fence,
//! when nothing of the update was visible yet: the old value is intact and the new slot's
//! bit is clear, so rolling back is free. This replaces the paper's "only PLeaf valid" and
//! "PNewV invalid" cases; the "all three valid" case resumes from Algorithm 3 line 7.
//!
//! pmkv also logs the leaf's flags as they were before the update, so that an update that
//! moves an inline value out of line (which changes `p_value` *and* the flags) rolls back
//! or forward as a whole; `POldV` is then the inline value word, which is never freed.
//!
//! Layout of one log (64 bytes): 0 PLeaf, 8 POldV, 16 PNewV, 24 check, 28 old leaf flags,
//! 32..48 the insert log's lane words (`insert_log`), 48..64 zero.

use crate::layout::{MAX_VALUE, VALUE_HDR};
use crate::pm::{bytes, read_u32, read_u64, write_u32, write_u64};
use pmkv_substrate::Pool;

/// A decoded, valid micro-log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UpdateLog {
    pub leaf: u64,
    pub old_value: u64,
    pub new_value: u64,
    pub old_flags: u32,
}

fn mix(log: &UpdateLog, crc: u32) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&log.leaf.to_le_bytes());
    h.update(&log.old_value.to_le_bytes());
    h.update(&log.new_value.to_le_bytes());
    h.update(&log.old_flags.to_le_bytes());
    h.update(&crc.to_le_bytes());
    h.finalize() | 1
}

/// CRC-32 of a value object's used bytes (header + data); None if `value` is misaligned,
/// its length out of range, or the object not inside the pool.
///
/// # Safety
///
/// Nothing writes the object at `value` meanwhile: the caller made it and has not
/// published it yet, or runs alone (recovery, a quiesced `check`).
pub(crate) unsafe fn value_crc(pool: &Pool, value: u64) -> Option<u32> {
    // A torn log may name any offset: check it before reading the length word.
    if !value.is_multiple_of(8) || !pool.contains(value, VALUE_HDR as u64) {
        return None;
    }
    let len = read_u32(pool, value) as usize;
    if len > MAX_VALUE || !pool.contains(value, (VALUE_HDR + len) as u64) {
        return None;
    }
    // SAFETY: inside the pool (checked); not written meanwhile (the contract).
    Some(crc32fast::hash(unsafe { bytes(pool, value, VALUE_HDR + len) }))
}

/// Write log `at` (flushed, not fenced: the caller's fence covers it with the value).
///
/// # Safety
///
/// `at` is one of the pool's micro-logs (see `layout`), whose lock the caller holds (or
/// the caller runs alone).
pub(crate) unsafe fn write(pool: &Pool, at: u64, log: UpdateLog, crc: u32) {
    let check = mix(&log, crc);
    // SAFETY: the log's words, which nothing else references or writes (the contract).
    unsafe {
        write_u64(pool, at, log.leaf);
        write_u64(pool, at + 8, log.old_value);
        write_u64(pool, at + 16, log.new_value);
        write_u32(pool, at + 24, check);
        write_u32(pool, at + 28, log.old_flags);
    }
    pool.flush_off(at, 32);
}

/// Reclaim the log (Algorithm 3 line 11): zero the check word and persist.
///
/// # Safety
///
/// As [`write()`].
pub(crate) unsafe fn clear(pool: &Pool, at: u64) {
    // SAFETY: `at` is a micro-log whose lock the caller holds (or it runs alone): the
    // contract `clear_unfenced` asks for, passed on unchanged.
    unsafe { clear_unfenced(pool, at) };
    pool.fence();
}

/// Zero the check word and flush it; the caller's next fence makes it durable.
///
/// # Safety
///
/// As [`write()`].
pub(crate) unsafe fn clear_unfenced(pool: &Pool, at: u64) {
    // SAFETY: the log's check word, ours (the contract).
    unsafe { write_u32(pool, at + 24, 0) };
    pool.flush_off(at + 24, 4);
}

/// Read log `at`: `Some` only if its check word matches its pointers and the new value.
///
/// # Safety
///
/// Nothing writes the log or the value object it names meanwhile: the caller holds the
/// log's lock, or runs alone (recovery, a quiesced `check`).
pub(crate) unsafe fn read(pool: &Pool, at: u64) -> Option<UpdateLog> {
    let log = UpdateLog {
        leaf: read_u64(pool, at),
        old_value: read_u64(pool, at + 8),
        new_value: read_u64(pool, at + 16),
        old_flags: read_u32(pool, at + 28),
    };
    let check = read_u32(pool, at + 24);
    if check == 0 {
        return None;
    }
    // SAFETY: the logged value is not written meanwhile (the contract).
    let crc = unsafe { value_crc(pool, log.new_value) }?;
    (mix(&log, crc) == check).then_some(log)
}
