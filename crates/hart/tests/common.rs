//! Helpers shared by HART's integration tests.
#![allow(dead_code, unused_imports)]

use pmkv_hart::{Hart, HartOptions};
use pmkv_substrate::Pool;
use std::ops::Bound;
use std::sync::Arc;

pub use pmkv_testutil::{apply, pool_dir, sim_opts, words, Model, Op};

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
