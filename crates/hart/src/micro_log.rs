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
//! 32..64 zero.

use pmkv_substrate::Pool;

/// A decoded, valid micro-log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpdateLog {
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

/// CRC-32 of a value object's used bytes (header + data).
pub fn value_crc(pool: &Pool, value: u64) -> Option<u32> {
    let len = crate::pm::read_u32(pool, value) as usize;
    if len > crate::layout::MAX_VALUE || !pool.contains(value, (crate::layout::VALUE_HDR + len) as u64) {
        return None;
    }
    // SAFETY: bounds checked above.
    let bytes = unsafe { std::slice::from_raw_parts(pool.at::<u8>(value), crate::layout::VALUE_HDR + len) };
    Some(crc32fast::hash(bytes))
}

/// Write log `at` (flushed, not fenced: the caller's fence covers it with the value).
pub fn write(pool: &Pool, at: u64, log: UpdateLog, crc: u32) {
    let check = mix(&log, crc);
    // SAFETY: the log array lies inside the pool; each log is owned by one writer at a time.
    unsafe {
        let p = pool.at::<u64>(at);
        p.write(log.leaf);
        p.add(1).write(log.old_value);
        p.add(2).write(log.new_value);
        (p.add(3) as *mut u32).write(check);
        (p.add(3) as *mut u32).add(1).write(log.old_flags);
    }
    pool.flush_off(at, 32);
}

/// Reclaim the log (Algorithm 3 line 11): zero the check word and persist.
pub fn clear(pool: &Pool, at: u64) {
    clear_unfenced(pool, at);
    pool.fence();
}

/// Zero the check word and flush it; the caller's next fence makes it durable.
pub fn clear_unfenced(pool: &Pool, at: u64) {
    // SAFETY: as in `write`.
    unsafe { (pool.at::<u32>(at + 24)).write(0) };
    pool.flush_off(at + 24, 4);
}

/// Read log `at`: `Some` only if its check word matches its pointers and the new value.
pub fn read(pool: &Pool, at: u64) -> Option<UpdateLog> {
    // SAFETY: the log array lies inside the pool.
    let (log, check) = unsafe {
        let p = pool.at::<u64>(at);
        let log = UpdateLog {
            leaf: p.read(),
            old_value: p.add(1).read(),
            new_value: p.add(2).read(),
            old_flags: (p.add(3) as *const u32).add(1).read(),
        };
        (log, (p.add(3) as *const u32).read())
    };
    if check == 0 {
        return None;
    }
    let crc = value_crc(pool, log.new_value)?;
    (mix(&log, crc) == check).then_some(log)
}
