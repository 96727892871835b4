//! Helpers shared by HART's integration tests: HARTs on simulated and file pools, and
//! reading them whole, built on pmkv-testutil (which every test file also gets from here).
#![allow(dead_code, unused_imports)]

use pmkv_hart::{Hart, Options};
use pmkv_substrate::{Pool, PoolOptions};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

pub use pmkv_testutil::*;

/// A fresh HART with hash keys of `kh` bytes on a crash-simulation pool of `size` bytes.
pub fn sim_hart(size: u64, kh: usize) -> Hart {
    sim_hart_with(size, Options { hash_key_len: kh, ..Options::default() })
}

/// A fresh HART with options `opts` on a crash-simulation pool of `size` bytes.
pub fn sim_hart_with(size: u64, opts: Options) -> Hart {
    Hart::open(sim_pool(size), opts).expect("format")
}

/// A fresh crash-simulation pool of `size` bytes with HART's layout, not formatted yet.
pub fn sim_pool(size: u64) -> Arc<Pool> {
    Arc::new(Pool::create_sim("hart", &sim_opts(size)).expect("sim pool"))
}

/// Recover a HART from a crash image.
pub fn recover(image: &[u8]) -> Result<Hart, String> {
    let pool = Pool::from_image(image, Some("hart"), &sim_opts(1 << 20)).map_err(|e| e.to_string())?;
    Hart::open(Arc::new(pool), Options::default()).map_err(|e| e.to_string())
}

/// A HART with default options on a new pool file at `path`.
pub fn create_hart(path: &Path, opts: &PoolOptions) -> Hart {
    Hart::open(Arc::new(Pool::create(path, "hart", opts).expect("create pool")), Options::default()).expect("format")
}

/// The HART of the pool file at `path`, opened read-write with default options.
pub fn reopen_hart(path: &Path, opts: &PoolOptions) -> Hart {
    Hart::open(Arc::new(Pool::open(path, Some("hart"), opts).expect("open pool")), Options::default()).expect("open")
}

/// What `h.scan` visits from `start` to `end`, at most `limit` records, in its order.
pub fn scan(h: &Hart, start: Bound<&[u8]>, end: Bound<&[u8]>, limit: usize, reverse: bool) -> Records {
    let mut out = Vec::new();
    h.scan(&pmkv_core::KeyRange::bounds(start, end), limit, reverse, &mut |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        true
    })
    .expect("scan");
    out
}

/// Every record, checked to come in ascending order.
pub fn contents(h: &Hart) -> Model {
    model_of_scan(scan(h, Bound::Unbounded, Bound::Unbounded, usize::MAX, false))
}

/// The value of `k`, if any.
pub fn get(h: &Hart, k: &[u8]) -> Option<Vec<u8>> {
    let mut out = None;
    h.get_with(k, &mut |v| out = Some(v.to_vec())).expect("get");
    out
}

pmkv_testutil::kv_wrapper!(
    /// A HART as the shared scenarios of `pmkv_testutil::harness` drive it.
    H,
    Hart
);
