//! Helpers shared by HART's integration tests.
#![allow(dead_code)]

use pmkv_hart::{Hart, HartOptions};
use pmkv_substrate::{Mode, Pool, PoolOptions};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

pub fn sim_opts(size: u64) -> PoolOptions {
    PoolOptions::default().mode(Mode::Adr).initial_size(size).max_size(64 << 20)
}

/// A fresh HART on a crash-simulation pool.
pub fn sim_hart(size: u64, kh: usize) -> Hart {
    sim_hart_with(size, HartOptions { hash_key_len: kh, ..HartOptions::default() })
}

pub fn sim_hart_with(size: u64, opts: HartOptions) -> Hart {
    let pool = Pool::create_sim("hart", &sim_opts(size)).expect("sim pool");
    Hart::open(Arc::new(pool), opts).expect("format")
}

/// Recover a HART from a crash image.
pub fn recover(image: &[u8]) -> Result<Hart, String> {
    let pool = Pool::from_image(image, Some("hart"), &sim_opts(1 << 20)).map_err(|e| e.to_string())?;
    Hart::open(Arc::new(pool), HartOptions::default()).map_err(|e| e.to_string())
}

/// Every record, in scan order.
pub fn contents(h: &Hart) -> Model {
    let mut m = Model::new();
    let mut last: Option<Vec<u8>> = None;
    h.scan(Bound::Unbounded, Bound::Unbounded, usize::MAX, false, &mut |k, v| {
        if let Some(l) = &last {
            assert!(l.as_slice() < k, "scan out of order: {l:?} then {k:?}");
        }
        last = Some(k.to_vec());
        m.insert(k.to_vec(), v.to_vec());
        true
    })
    .unwrap();
    m
}

pub fn get(h: &Hart, k: &[u8]) -> Option<Vec<u8>> {
    let mut out = None;
    h.get_with(k, &mut |v| out = Some(v.to_vec())).unwrap();
    out
}

/// Directory for file pools: /dev/shm when present.
pub fn pool_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

/// The Dictionary workload (SPEC W): 466,551 words.
pub fn words() -> Vec<Vec<u8>> {
    use std::io::Read;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/words.txt.gz");
    let f = std::fs::File::open(path).expect("data/words.txt.gz");
    let mut s = Vec::new();
    flate2::read::GzDecoder::new(f).read_to_end(&mut s).unwrap();
    s.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| l.to_vec()).collect()
}
