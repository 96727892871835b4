//! # pmkv-testutil — what pmkv's tests share
//!
//! It sits just above the substrate and below every engine and the API, so that engine
//! tests, API tests and the conformance suite use one copy of each helper:
//! temporary pool directories ([`pool_dir`]), the reference model ([`Model`], [`Op`],
//! [`apply`]), operation generators (proptest strategies in [`strategy`] and a seeded
//! stream for threaded tests, [`op_stream`]), values a reader can verify ([`tagged_value`],
//! [`tag_of`]), keys that break naive engines ([`edge_keys`]), crash-simulation pool
//! options ([`sim_opts`]) and the Dictionary workload ([`words`]).

#![forbid(unsafe_code)]

use pmkv_substrate::{Mode, PoolOptions};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

/// A directory for pool files, removed on drop: on /dev/shm when there is one (memory,
/// the closest thing to PM here, and fast), else the system temp directory.
pub fn pool_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm).expect("temp dir in /dev/shm")
    } else {
        tempfile::tempdir().expect("temp dir")
    }
}

/// The reference every store is compared with: ordered, byte-string keys.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One write, as tests generate and replay them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Insert or replace.
    Put(Vec<u8>, Vec<u8>),
    /// Remove, if present.
    Delete(Vec<u8>),
}

impl Op {
    /// The key the operation writes.
    pub fn key(&self) -> &[u8] {
        match self {
            Op::Put(k, _) | Op::Delete(k) => k,
        }
    }
}

/// Apply `op` to the model; returns whether the key was present before.
pub fn apply(m: &mut Model, op: &Op) -> bool {
    match op {
        Op::Put(k, v) => m.insert(k.clone(), v.clone()).is_some(),
        Op::Delete(k) => m.remove(k).is_some(),
    }
}

/// Options of a crash-simulation pool of `size` bytes (growing to 64 MiB), `adr` mode: the
/// mode in which unflushed lines can be lost, so the simulator has the most to explore.
pub fn sim_opts(size: u64) -> PoolOptions {
    PoolOptions::default().mode(Mode::Adr).initial_size(size).max_size(64 << 20)
}

/// Keys that break naive engines: empty, zero bytes, prefixes of each other, 0xff runs,
/// long shared prefixes, keys shorter and longer than typical hash-key lengths; sorted.
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
/// derived from the version, `len` bytes in all (at least 8).
pub fn tagged_value(key: &[u8], version: u32, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len.max(8));
    v.extend_from_slice(&version.to_le_bytes());
    v.extend_from_slice(&key_hash(key).to_le_bytes());
    while v.len() < len {
        v.push((v.len() as u8) ^ (version as u8));
    }
    v
}

/// The version of `v` if it is a well-formed [`tagged_value`] of `key`.
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

/// A seeded stream of `n` operations over `keys` distinct keys (named `{prefix}{i}`), 60%
/// puts of [`tagged_value`]s with the operation's index as version, 40% deletes: the same
/// for a seed on every run, for threaded tests that replay a model per thread.
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

/// The Dictionary workload (SPEC W): the 466,551 words of `data/words.txt.gz`.
pub fn words() -> Vec<Vec<u8>> {
    use std::io::Read;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/words.txt.gz");
    let f = std::fs::File::open(path).expect("data/words.txt.gz");
    let mut s = Vec::new();
    flate2::read::GzDecoder::new(f).read_to_end(&mut s).expect("gzip of data/words.txt.gz");
    s.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| l.to_vec()).collect()
}

/// Proptest strategies for keys, values and operation sequences.
pub mod strategy {
    use super::Op;
    use proptest::prelude::*;

    /// Keys: mostly short strings over {0x00, 'a', 'b', 0xff} (empty keys, zero bytes,
    /// prefixes of each other and shared prefixes are common), sometimes any bytes up to
    /// `max_long` long.
    pub fn key(max_long: usize) -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            3 => proptest::collection::vec(prop_oneof![Just(0u8), Just(b'a'), Just(b'b'), Just(0xff)], 0..6),
            1 => proptest::collection::vec(any::<u8>(), 0..max_long.max(1)),
        ]
    }

    /// Values: empty to 8 bytes (inline in HART), or larger up to `max` bytes.
    pub fn value(max: usize) -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..9),
            proptest::collection::vec(any::<u8>(), 9..max.max(10)),
        ]
    }

    /// One write: two puts for each delete.
    pub fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            2 => (key(80), value(300)).prop_map(|(k, v)| Op::Put(k, v)),
            1 => key(80).prop_map(Op::Delete),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::{Strategy, ValueTree};

    #[test]
    fn apply_follows_the_model() {
        let mut m = Model::new();
        assert!(!apply(&mut m, &Op::Put(b"a".to_vec(), b"1".to_vec())));
        assert!(apply(&mut m, &Op::Put(b"a".to_vec(), b"2".to_vec())));
        assert_eq!(m.get(&b"a"[..]).map(Vec::as_slice), Some(&b"2"[..]));
        assert!(apply(&mut m, &Op::Delete(b"a".to_vec())));
        assert!(!apply(&mut m, &Op::Delete(b"a".to_vec())));
        assert!(m.is_empty());
    }

    #[test]
    fn edge_keys_hold_the_hard_cases() {
        let k = edge_keys();
        assert!(k.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
        assert!(k.contains(&vec![]) && k.contains(&vec![0]) && k.contains(&vec![0xff; 20]));
        assert!(k.iter().any(|a| k.iter().any(|b| a != b && b.starts_with(a) && !a.is_empty())));
    }

    #[test]
    fn tagged_values_verify_and_detect_damage() {
        let v = tagged_value(b"key", 7, 40);
        assert_eq!(v.len(), 40);
        assert_eq!(tag_of(b"key", &v), Some(7));
        assert_eq!(tag_of(b"other", &v), None);
        let mut torn = v.clone();
        torn[20] ^= 1;
        assert_eq!(tag_of(b"key", &torn), None);
        assert_eq!(tag_of(b"key", &v[..5]), None);
    }

    #[test]
    fn op_streams_repeat_per_seed() {
        assert_eq!(op_stream(1, "k", 10, 100), op_stream(1, "k", 10, 100));
        assert_ne!(op_stream(1, "k", 10, 100), op_stream(2, "k", 10, 100));
        let s = op_stream(3, "k", 10, 1000);
        assert!(s.iter().any(|o| matches!(o, Op::Delete(_))) && s.iter().any(|o| matches!(o, Op::Put(..))));
    }

    #[test]
    fn key_strategy_yields_empty_and_zero_keys() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let keys: Vec<Vec<u8>> =
            (0..500).map(|_| strategy::key(40).new_tree(&mut runner).expect("key").current()).collect();
        assert!(keys.iter().any(|k| k.is_empty()));
        assert!(keys.iter().any(|k| k.contains(&0)));
        assert!(keys.iter().any(|k| k.len() > 6));
    }

    #[test]
    fn the_dictionary_is_there() {
        let w = words();
        assert_eq!(w.len(), 466_551);
    }
}
