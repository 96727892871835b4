//! Reading and writing HART's PM objects: word accessors, leaf keys for the ART (lazy
//! expansion compares whole keys at leaves), a leaf's value, and new value objects.

use crate::art::KeySource;
use crate::error::{HartError, Result};
use crate::hart::Hart;
use crate::layout::*;
use pmkv_substrate::{Pool, LINE};

#[inline]
pub(crate) fn read_u64(pool: &Pool, off: u64) -> u64 {
    // SAFETY: callers pass offsets of live objects inside the pool.
    unsafe { pool.at::<u64>(off).read() }
}
#[inline]
pub(crate) fn read_u32(pool: &Pool, off: u64) -> u32 {
    // SAFETY: as above.
    unsafe { pool.at::<u32>(off).read() }
}
#[inline]
pub(crate) fn write_u64(pool: &Pool, off: u64, v: u64) {
    // SAFETY: callers own the object (reserved slot, or leaf under the ART write lock).
    unsafe { pool.at::<u64>(off).write(v) }
}

pub(crate) fn lines(len: usize) -> u64 {
    len.div_ceil(LINE) as u64
}

/// Reads leaf keys from PM for the ART (lazy expansion compares whole keys at leaves).
pub(crate) struct PmKeys<'a>(pub &'a Pool);

impl KeySource for PmKeys<'_> {
    #[inline]
    fn with_key<R>(&self, leaf: u64, f: impl FnOnce(&[u8]) -> R) -> R {
        let pool = self.0;
        let len = read_u32(pool, leaf + LEAF_KEY_LEN) as usize;
        let flags = read_u32(pool, leaf + LEAF_FLAGS);
        pool.note_read(1);
        let at = if flags & FLAG_KEY_OUT != 0 {
            let k = read_u64(pool, leaf + LEAF_KEY);
            pool.note_read(lines(len));
            k
        } else {
            leaf + LEAF_KEY
        };
        // SAFETY: a used leaf's key (inline or key object) is `len` bytes inside the pool.
        f(unsafe { std::slice::from_raw_parts(pool.at::<u8>(at), len.min(MAX_KEY)) })
    }
}

impl PmKeys<'_> {
    /// The first 8 key bytes, big-endian, zero-padded: a sort key for recovery.
    pub(crate) fn with_key_prefix(&self, leaf: u64) -> u64 {
        self.with_key(leaf, |k| {
            let mut b = [0u8; 8];
            let n = k.len().min(8);
            b[..n].copy_from_slice(&k[..n]);
            u64::from_be_bytes(b)
        })
    }
}

impl Hart {
    /// Call `f` with the value of a used leaf. Recovery checked that `p_value` lies in the
    /// pool; the length is checked here against the pool's bounds, so a corrupt pool gives
    /// an error instead of a read outside the mapping.
    pub(crate) fn read_value(&self, leaf: u64, f: &mut dyn FnMut(&[u8])) -> Result<()> {
        if let Some(len) = inline_len(read_u32(&self.pool, leaf + LEAF_FLAGS)) {
            // SAFETY: a used leaf's first 8 bytes; recovery checked len <= 8.
            f(unsafe { std::slice::from_raw_parts(self.pool.at::<u8>(leaf + LEAF_P_VALUE), len.min(INLINE_VALUE)) });
            return Ok(());
        }
        let v = read_u64(&self.pool, leaf + LEAF_P_VALUE);
        let len = read_u32(&self.pool, v) as usize;
        if len > MAX_VALUE || !self.pool.contains(v, (VALUE_HDR + len) as u64) {
            return Err(HartError::Corrupt(format!("value {v:#x} of leaf {leaf:#x} claims {len} bytes")));
        }
        self.pool.note_read(lines(VALUE_HDR + len));
        // SAFETY: bounds checked above; a used leaf's value object is not written while a
        // reader holds the ART lock.
        f(unsafe { std::slice::from_raw_parts(self.pool.at::<u8>(v + VALUE_HDR as u64), len) });
        Ok(())
    }

    /// Allocate and write a value object; flushed, not fenced, not published.
    pub(crate) fn new_value(&self, value: &[u8]) -> Result<u64> {
        let v = self.alloc.alloc(VALUE, VALUE_HDR + value.len())?;
        // SAFETY: `v` is a reserved slot of at least VALUE_HDR + len bytes.
        unsafe {
            self.pool.at::<u64>(v).write(value.len() as u64);
            std::ptr::copy_nonoverlapping(value.as_ptr(), self.pool.at::<u8>(v + VALUE_HDR as u64), value.len());
        }
        self.pool.flush_off(v, VALUE_HDR + value.len());
        Ok(v)
    }
}
