//! Fixed keys and values with known properties, and seeded operation streams.

use crate::model::Op;
use rand::{Rng, SeedableRng};

/// Keys that break naive engines: empty, zero bytes, prefixes of each other, 0xff runs,
/// long shared prefixes, keys shorter and longer than typical hash-key lengths; sorted
/// and distinct.
pub fn edge_keys() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = vec![
        vec![],
        vec![0],
        vec![0, 0],
        vec![0; 9],
        vec![0, 1],
        vec![1],
        vec![0xff],
        vec![0xff, 0xff],
        vec![0xff; 20],
        b"a".to_vec(),
        b"ab".to_vec(),
        b"abc".to_vec(),
        b"abd".to_vec(),
        b"abc\0".to_vec(),
        b"abc\0\0".to_vec(),
        b"b".to_vec(),
        vec![b'p'; 100],
        [vec![b'p'; 100], vec![0]].concat(),
    ];
    for i in 0..40u32 {
        v.push(format!("key{:05}", i * 37 % 1000).into_bytes());
    }
    v.sort();
    v.dedup();
    v
}

/// A value that names its key and a version, so a reader can tell a torn or misplaced
/// value from a real one: version (4 bytes), a hash of the key (4 bytes), then filler
/// derived from the version, `len` bytes in all (at least 8; exactly 8 fits inline in a
/// HART leaf).
pub fn tagged_value(key: &[u8], version: u32, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len.max(8));
    v.extend_from_slice(&version.to_le_bytes());
    v.extend_from_slice(&key_hash(key).to_le_bytes());
    while v.len() < len {
        v.push((v.len() as u8) ^ (version as u8));
    }
    v
}

/// The version of `v` if it is a well-formed [`tagged_value`] of `key` (of any length).
pub fn tag_of(key: &[u8], v: &[u8]) -> Option<u32> {
    if v.len() < 8 || v[4..8] != key_hash(key).to_le_bytes() {
        return None;
    }
    let version = u32::from_le_bytes(v[..4].try_into().ok()?);
    v[8..].iter().enumerate().all(|(i, &b)| b == ((i + 8) as u8) ^ (version as u8)).then_some(version)
}

fn key_hash(b: &[u8]) -> u32 {
    // FNV-1a: enough to tell keys apart in a test.
    b.iter().fold(0x811c_9dc5u32, |h, &x| (h ^ x as u32).wrapping_mul(0x0100_0193))
}

/// A seeded stream of `n` operations over `keys` distinct keys (named `{prefix}{i:05}`),
/// 60% puts of [`tagged_value`]s (0 to 63 bytes; the operation's index is the version),
/// 40% deletes: the same for a seed on every run, for threaded tests that replay a model
/// per thread.
pub fn op_stream(seed: u64, prefix: &str, keys: u32, n: u32) -> Vec<Op> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let k = format!("{prefix}{:05}", rng.gen_range(0..keys)).into_bytes();
            if rng.gen_bool(0.6) {
                let len = rng.gen_range(0..64);
                let v = tagged_value(&k, i, len);
                Op::Put(k, v)
            } else {
                Op::Delete(k)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{apply, Model};

    #[test]
    fn edge_keys_hold_the_hard_cases() {
        let k = edge_keys();
        assert!(k.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
        for want in [vec![], vec![0], vec![0; 9], vec![0xff; 20], [vec![b'p'; 100], vec![0]].concat()] {
            assert!(k.contains(&want), "{want:?}");
        }
        assert!(k.iter().any(|a| !a.is_empty() && k.iter().any(|b| a != b && b.starts_with(a))), "prefix keys");
    }

    #[test]
    fn tagged_values_verify_and_detect_damage() {
        let v = tagged_value(b"key", 7, 40);
        assert_eq!(v.len(), 40);
        assert_eq!(tag_of(b"key", &v), Some(7));
        assert_eq!(tag_of(b"other", &v), None, "another key's value");
        let mut torn = v.clone();
        torn[20] ^= 1;
        assert_eq!(tag_of(b"key", &torn), None, "a torn filler byte");
        assert_eq!(tag_of(b"key", &v[..5]), None, "cut short");
        assert_eq!(tagged_value(b"key", 3, 0).len(), 8, "never shorter than the tag");
        assert_eq!(tag_of(b"", &tagged_value(b"", u32::MAX, 8)), Some(u32::MAX));
        assert_ne!(tagged_value(b"key", 1, 8), tagged_value(b"key", 2, 8), "versions differ at 8 bytes");
    }

    #[test]
    fn op_streams_repeat_per_seed_and_replay_on_a_model() {
        assert_eq!(op_stream(1, "k", 10, 100), op_stream(1, "k", 10, 100));
        assert_ne!(op_stream(1, "k", 10, 100), op_stream(2, "k", 10, 100));
        let s = op_stream(3, "w1-", 10, 1000);
        assert!(s.iter().all(|o| o.key().starts_with(b"w1-") && o.key().len() == 8));
        let keys: std::collections::BTreeSet<_> = s.iter().map(Op::key).collect();
        assert_eq!(keys.len(), 10);
        let mut m = Model::new();
        let (mut hits, mut misses) = (0, 0);
        for op in &s {
            let present = apply(&mut m, op);
            match op {
                Op::Put(k, v) => assert!(tag_of(k, v).is_some()),
                Op::Delete(_) if present => hits += 1,
                Op::Delete(_) => misses += 1,
            }
        }
        assert!(hits > 50 && misses > 50, "deletes of present and absent keys: {hits} / {misses}");
    }
}
