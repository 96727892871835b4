//! What the cases share: fresh pools, opening through a factory, reading a whole store.

use pmkv::{EngineFactory, ErrorKind, KeyRange, Options, Result, Store};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The reference the stores are compared with.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A directory for pool files, removed on drop (on /dev/shm when there is one: fast).
pub fn pool_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm).expect("temp dir in /dev/shm")
    } else {
        tempfile::tempdir().expect("temp dir")
    }
}

/// Options for test pools: small, growing on demand.
pub fn opts() -> Options {
    Options::default().initial_size(4 << 20).max_size(1 << 30)
}

/// A fresh store of `f` in `dir`, with its path.
pub fn fresh(f: &dyn EngineFactory, dir: &tempfile::TempDir) -> (Store, PathBuf) {
    let path = dir.path().join(format!("{}.pool", f.info().name));
    let s = Store::open_with(f, &path, &opts()).expect("open a fresh store");
    (s, path)
}

/// Every record, read with a cursor, checked to come out strictly ascending.
pub fn contents(s: &Store) -> Model {
    let mut m = Model::new();
    let mut last: Option<Vec<u8>> = None;
    for r in s.range(&KeyRange::all()) {
        let (k, v) = r.expect("cursor step");
        if let Some(l) = &last {
            assert!(*l < k, "cursor out of order: {l:?} then {k:?}");
        }
        last = Some(k.clone());
        m.insert(k, v);
    }
    m
}

/// Fill `s` (and `m`) with `pairs`.
pub fn fill(s: &Store, m: &mut Model, pairs: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) {
    for (k, v) in pairs {
        s.put(&k, &v).expect("put");
        m.insert(k, v);
    }
}

/// `r` failed with `kind`.
#[track_caller]
pub fn assert_kind<T: std::fmt::Debug>(r: Result<T>, kind: ErrorKind) {
    match r {
        Err(e) => assert_eq!(e.kind(), kind, "wrong error kind for: {e}"),
        Ok(v) => panic!("expected a {kind} error, got Ok({v:?})"),
    }
}

/// Keys that break naive engines: empty, zero bytes, prefixes of each other, 0xff runs,
/// long shared prefixes, keys shorter and longer than typical hash-key lengths.
pub fn edge_keys() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = vec![
        vec![],
        vec![0],
        vec![0, 0],
        vec![0, 0, 0, 0, 0, 0, 0, 0, 0],
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
/// value from a real one.
pub fn tagged_value(key: &[u8], version: u32, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len.max(8));
    v.extend_from_slice(&version.to_le_bytes());
    v.extend_from_slice(&(crc(key)).to_le_bytes());
    while v.len() < len {
        v.push((v.len() as u8) ^ (version as u8));
    }
    v
}

/// Whether `v` is a [`tagged_value`] of `key` (any version); returns the version.
pub fn tag_of(key: &[u8], v: &[u8]) -> Option<u32> {
    if v.len() < 8 || v[4..8] != crc(key).to_le_bytes() {
        return None;
    }
    let version = u32::from_le_bytes(v[..4].try_into().ok()?);
    v[8..].iter().enumerate().all(|(i, &b)| b == ((i + 8) as u8) ^ (version as u8)).then_some(version)
}

fn crc(b: &[u8]) -> u32 {
    // FNV-1a: enough to tell keys apart in a test.
    b.iter().fold(0x811c_9dc5u32, |h, &x| (h ^ x as u32).wrapping_mul(0x0100_0193))
}
