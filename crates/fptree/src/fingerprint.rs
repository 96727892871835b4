//! Fingerprints (paper §3 "Fingerprinting"): a one-byte hash of each key kept in the
//! leaf's first cache line, so that a lookup compares the full key only of the entries
//! whose fingerprint matches (about one in 256 of the others) instead of all of them.

use crate::layout::CAP;

/// The fingerprint of `key`: the top byte of a multiplicative hash over its 8-byte words
/// and its length.
#[inline]
pub(crate) fn of(key: &[u8]) -> u8 {
    const M: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h: u64 = 0x243f_6a88_85a3_08d3 ^ key.len() as u64;
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        h = (h ^ u64::from_le_bytes(w.try_into().expect("8 bytes"))).wrapping_mul(M);
        h ^= h >> 29;
    }
    let mut last = [0u8; 8];
    last[..words.remainder().len()].copy_from_slice(words.remainder());
    h = (h ^ u64::from_le_bytes(last)).wrapping_mul(M);
    h ^= h >> 32;
    (h.wrapping_mul(M) >> 56) as u8
}

/// The slots among `valid` whose fingerprint in `fps` is `fp`, as a bit mask: each
/// 8-byte word of fingerprints is compared at once (a byte of `word ^ fp` is zero exactly
/// where they match).
#[inline]
pub(crate) fn matching(fps: &[u8; CAP], fp: u8, valid: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let spread = u64::from(fp) * 0x0101_0101_0101_0101;
    let mut out = 0u64;
    for (w, chunk) in fps.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes(chunk.try_into().expect("8 bytes")) ^ spread;
        // High bit of each byte set exactly where that byte of `x` is zero.
        let zero = !(((x & LOW7) + LOW7) | x | LOW7);
        let mut z = zero;
        while z != 0 {
            let byte = z.trailing_zeros() / 8;
            out |= 1 << (w as u32 * 8 + byte);
            z &= z - 1;
        }
    }
    out & valid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_finds_exactly_the_equal_bytes() {
        let mut fps = [0u8; CAP];
        for (i, f) in fps.iter_mut().enumerate() {
            *f = (i * 37 % 256) as u8;
        }
        fps[5] = 0x80;
        fps[40] = 0x80;
        fps[55] = 0x80;
        fps[6] = 0x00;
        fps[7] = 0x81;
        assert_eq!(matching(&fps, 0x80, u64::MAX), 1 << 5 | 1 << 40 | 1 << 55);
        assert_eq!(matching(&fps, 0x80, 1 << 40), 1 << 40);
        for fp in 0..=255u8 {
            let want = (0..CAP).filter(|&i| fps[i] == fp).fold(0u64, |m, i| m | 1 << i);
            assert_eq!(matching(&fps, fp, u64::MAX), want, "fingerprint {fp:#x}");
        }
    }

    #[test]
    fn fingerprints_spread_similar_keys() {
        let mut seen = [0u32; 256];
        for i in 0..25_600u32 {
            seen[of(format!("key{i:08}").as_bytes()) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 40 && n < 200), "{seen:?}");
        assert_ne!(of(b""), of(b"\0"), "the length counts");
    }
}
