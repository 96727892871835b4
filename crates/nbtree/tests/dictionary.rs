//! The Dictionary workload (docs/requirements.md, W) on NBTree: all 466,551 words of
//! data/words.txt.gz (value = line number), searched, scanned in order and in reverse,
//! deleted in part, reopened (the scenario is `pmkv_testutil::harness::dictionary`).

mod common;
use common::*;

#[test]
fn dictionary_insert_search_scan_delete_reopen() {
    let (_dir, path) = pool_file("dict.pool");
    let opts = pool_opts(Mode::Eadr, 64 << 20, 1 << 30);
    harness::dictionary(|| Tree(create_tree(&path, &opts)), || Tree(reopen_tree(&path, &opts)));
}
