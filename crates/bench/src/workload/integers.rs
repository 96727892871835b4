//! NBTree's integer keys: 8 bytes, big-endian so that byte order is numeric order.

use super::KeySet;
use crate::rng::Rng;
use std::collections::HashSet;

/// `n` distinct uniformly random 8-byte keys for `seed`; 0 is never used (NBTree marks
/// deleted entries with key 0).
pub fn uniform_keys(n: usize, seed: u64) -> KeySet {
    let mut rng = Rng::derive(seed, 0x696e_7473);
    let mut ks = KeySet::with_capacity(n, n * 8);
    let mut seen: HashSet<u64> = HashSet::with_capacity(n);
    while ks.len() < n {
        let k = rng.next_u64();
        if k != 0 && seen.insert(k) {
            ks.push(&k.to_be_bytes());
        }
    }
    ks
}

/// The keys 1..=`n` (8 bytes, big-endian) in an order shuffled by `seed`: the NBTree
/// authors' prototype's "dense" keys, which it loads in a shuffled order, so that the
/// basic operations (which go through a key set in its order) touch the tree at random.
pub fn dense_keys(n: usize, seed: u64) -> KeySet {
    let mut rng = Rng::derive(seed, 0x6465_6e73);
    let mut v: Vec<u64> = (1..=n as u64).collect();
    rng.shuffle(&mut v);
    let mut ks = KeySet::with_capacity(n, n * 8);
    for k in v {
        ks.push(&k.to_be_bytes());
    }
    ks
}

/// The integer a key of this workload encodes.
pub fn key_value(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.try_into().ok()?))
}
