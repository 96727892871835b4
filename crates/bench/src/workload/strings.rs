//! HART's Sequential and Random string workloads: every character from the 62 of
//! `[A-Za-z0-9]`.

use super::KeySet;
use crate::rng::{hash_bytes, Rng};
use std::collections::HashSet;

/// The 62 characters, in byte order (so a counter written with them sorts numerically).
pub const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Width of Sequential keys: 62^8 ≈ 2.2·10^14 distinct values, enough for any run.
pub const SEQUENTIAL_LEN: usize = 8;

/// Shortest and longest Random key (uniform in between, both included).
pub const RANDOM_LEN: (usize, usize) = (5, 16);

/// Key `i` of the Sequential workload: `i` in base 62, zero-padded to [`SEQUENTIAL_LEN`].
pub fn sequential_key(mut i: u64, out: &mut [u8; SEQUENTIAL_LEN]) {
    for slot in out.iter_mut().rev() {
        *slot = ALPHABET[(i % 62) as usize];
        i /= 62;
    }
}

/// The first `n` Sequential keys (ascending in byte order).
pub fn sequential(n: usize) -> KeySet {
    let mut ks = KeySet::with_capacity(n, n * SEQUENTIAL_LEN);
    let mut k = [0u8; SEQUENTIAL_LEN];
    for i in 0..n as u64 {
        sequential_key(i, &mut k);
        ks.push(&k);
    }
    ks
}

/// `n` distinct Random keys for `seed`.
pub fn random(n: usize, seed: u64) -> KeySet {
    let mut rng = Rng::derive(seed, 0x7261_6e64);
    let (lo, hi) = RANDOM_LEN;
    let mut ks = KeySet::with_capacity(n, n * (lo + hi) / 2 + 16);
    // Distinctness by 64-bit hash: a hash collision between different keys only makes us
    // draw one more key, and the hash is deterministic, so the set stays a function of seed.
    let mut seen: HashSet<u64> = HashSet::with_capacity(n);
    let mut k = [0u8; 16];
    while ks.len() < n {
        let len = rng.range_inclusive(lo as u64, hi as u64) as usize;
        for c in k[..len].iter_mut() {
            *c = ALPHABET[rng.below(62) as usize];
        }
        if seen.insert(hash_bytes(&k[..len])) {
            ks.push(&k[..len]);
        }
    }
    ks
}
