//! Helpers shared by NBTree's integration tests.
#![allow(dead_code)]

pub use pmkv_nbtree::NbTree;
#[allow(unused_imports)]
pub use pmkv_substrate::{Eviction, Mode, Pool};
pub use pmkv_testutil::*;
use std::ops::Bound;
use std::sync::Arc;

/// An NBTree on a fresh crash-simulation pool of `size` bytes in `mode`.
pub fn sim_tree(size: u64, mode: Mode) -> NbTree {
    sim_tree_with(size, mode, pmkv_nbtree::Options::default())
}

/// [`sim_tree`] with options (NBTree-SL, NBTree-W).
pub fn sim_tree_with(size: u64, mode: Mode, o: pmkv_nbtree::Options) -> NbTree {
    let pool = Arc::new(Pool::create_sim("nbtree", &sim_opts(size).mode(mode)).expect("sim pool"));
    NbTree::open_with(pool, o).expect("format")
}

/// Recover an NBTree from a crash image.
pub fn recover(img: &[u8], mode: Mode) -> Result<NbTree, String> {
    let pool = Pool::from_image(img, Some("nbtree"), &sim_opts(1 << 20).mode(mode)).map_err(|e| e.to_string())?;
    NbTree::open(Arc::new(pool)).map_err(|e| e.to_string())
}

/// `scan` collected.
pub fn scan(t: &NbTree, start: Bound<&[u8]>, end: Bound<&[u8]>, limit: usize, reverse: bool) -> Records {
    let mut out = Vec::new();
    t.scan(&pmkv_core::KeyRange::bounds(start, end), limit, reverse, &mut |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        true
    })
    .expect("scan");
    out
}

/// Everything in the tree.
pub fn contents(t: &NbTree) -> Model {
    model_of_scan(scan(t, Bound::Unbounded, Bound::Unbounded, usize::MAX, false))
}

/// The value of `k`, if any.
pub fn get(t: &NbTree, k: &[u8]) -> Option<Vec<u8>> {
    let mut out = None;
    t.get_with(k, &mut |v| out = Some(v.to_vec())).expect("get");
    out
}

/// A tree on a new pool file.
pub fn create_tree(path: &std::path::Path, opts: &pmkv_substrate::PoolOptions) -> NbTree {
    NbTree::open(Arc::new(Pool::create(path, "nbtree", opts).expect("create pool"))).expect("format")
}

/// The tree of an existing pool file.
pub fn reopen_tree(path: &std::path::Path, opts: &pmkv_substrate::PoolOptions) -> NbTree {
    NbTree::open(Arc::new(Pool::open(path, Some("nbtree"), opts).expect("open pool"))).expect("open")
}

pmkv_testutil::kv_wrapper!(
    /// A NBTree as the shared scenarios of `pmkv_testutil::harness` drive it.
    Tree,
    NbTree
);
