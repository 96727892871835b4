//! The Dictionary workload (docs/requirements.md, W) on HART: all 466,551 words of
//! data/words.txt.gz (value = line number), searched, scanned in order and in reverse,
//! deleted in part, reopened (the scenario is `pmkv_testutil::harness::dictionary`).

mod common;
use common::*;
use pmkv_substrate::Mode;

#[test]
fn dictionary_insert_search_scan_delete_reopen() {
    let (_dir, path) = pool_file("dict.pool");
    let opts = pool_opts(Mode::Eadr, 64 << 20, 1 << 30);
    harness::dictionary(|| H(create_hart(&path, &opts)), || H(reopen_hart(&path, &opts)));
}
