//! Bytes of a pool read and written at an offset, for tests that build or damage
//! persistent structures by hand. Nothing here flushes: persist with
//! [`Pool::persist_off`] where the test needs it.
//!
//! The one place outside the engines where tests touch a mapping directly: every access
//! is checked against the pool's size (and a write against a read-only mapping, which
//! would fault), so a wrong offset fails the test instead of corrupting memory. What is
//! left to the caller is what no check can see: no other thread may write the same bytes
//! at the same time (tests that share a pool between threads give each thread its own
//! objects).

#![allow(unsafe_code)]

use pmkv_substrate::Pool;

#[track_caller]
fn check_range(pool: &Pool, off: u64, len: usize) {
    let end = off.checked_add(len as u64);
    assert!(end.is_some_and(|e| e <= pool.size()), "bytes {off:#x}+{len} outside the pool of {} bytes", pool.size());
}

/// Copy `bytes` into the pool at `off` (not persisted).
#[track_caller]
pub fn write_bytes(pool: &Pool, off: u64, bytes: &[u8]) {
    check_range(pool, off, bytes.len());
    assert!(!pool.is_read_only(), "write into a read-only pool");
    // SAFETY: [off, off + len) lies inside the mapped, backed and writable pool (checked
    // above), which outlives the call; `copy` allows `bytes` to overlap the destination.
    unsafe { std::ptr::copy(bytes.as_ptr(), pool.at::<u8>(off), bytes.len()) };
}

/// The `len` bytes of the pool at `off`.
#[track_caller]
pub fn read_bytes(pool: &Pool, off: u64, len: usize) -> Vec<u8> {
    check_range(pool, off, len);
    let mut v = vec![0u8; len];
    // SAFETY: [off, off + len) lies inside the mapped pool (checked above), which
    // outlives the call; `v` is a fresh buffer of `len` bytes.
    unsafe { std::ptr::copy_nonoverlapping(pool.at::<u8>(off), v.as_mut_ptr(), len) };
    v
}

/// Write `v` at `off` (not persisted): any alignment, native byte order, as the engines
/// store their words.
#[track_caller]
pub fn write_u64(pool: &Pool, off: u64, v: u64) {
    write_bytes(pool, off, &v.to_ne_bytes());
}

/// The `u64` at `off`: any alignment, native byte order (what [`write_u64`] wrote).
#[track_caller]
pub fn read_u64(pool: &Pool, off: u64) -> u64 {
    u64::from_ne_bytes(read_bytes(pool, off, 8).try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_words_round_trip_at_any_alignment() {
        let (pool, off) = crate::test_pool(4096);
        write_bytes(&pool, off + 3, b"hello");
        assert_eq!(read_bytes(&pool, off + 2, 7), b"\0hello\0");
        write_u64(&pool, off + 13, 0x0102_0304_0506_0708);
        assert_eq!(read_u64(&pool, off + 13), 0x0102_0304_0506_0708);
        assert_eq!(read_bytes(&pool, off + 13, 8), 0x0102_0304_0506_0708u64.to_ne_bytes(), "native order");
        assert_eq!(read_bytes(&pool, pool.size() - 4, 4).len(), 4, "up to the last byte");
        assert!(read_bytes(&pool, off, 0).is_empty());
    }

    #[test]
    fn outside_the_pool_is_a_test_failure() {
        let (pool, _) = crate::test_pool(64);
        let end = pool.size();
        let caught = |f: &dyn Fn()| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err();
        assert!(caught(&|| drop(read_bytes(&pool, end - 4, 5))));
        assert!(caught(&|| write_bytes(&pool, end, b"x")));
        assert!(caught(&|| {
            read_u64(&pool, u64::MAX - 2);
        }));
    }

    #[test]
    fn no_write_into_a_read_only_pool() {
        let d = crate::pool_dir();
        let path = d.path().join("ro.pool");
        let opts = crate::pool_opts(pmkv_substrate::Mode::Adr, 1 << 20, 1 << 20);
        let pool = Pool::create(&path, "t", &opts).unwrap();
        let off = pool.take_heap(64, 64).unwrap();
        write_bytes(&pool, off, b"kept");
        pool.persist_off(off, 4);
        drop(pool);
        let ro = Pool::open_read_only(&path, Some("t"), &opts).unwrap();
        assert_eq!(read_bytes(&ro, off, 4), b"kept");
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| write_bytes(&ro, off, b"lost")));
        assert!(r.is_err());
        assert_eq!(read_bytes(&ro, off, 4), b"kept");
    }
}
