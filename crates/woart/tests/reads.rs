//! What a WOART delete reads to decide whether a node it emptied must go: the node's
//! metadata (a Node4's commit word, a Node16's bitmap, a Node48's or Node256's child count
//! kept in DRAM), not every slot. Counting a Node256's 256 child words cost 38 PM lines a
//! delete (6.2 now); the read counter (which the read-latency emulation charges) sees it. Checked
//! for both variants, with the tree reopened halfway so that the counts rebuilt by the
//! open's walk are the ones used.

use pmkv_core::NativeFactory;
use pmkv_substrate::{counters, Mode, Pool, PoolOptions};
use pmkv_woart::{WoartFactory, ARTCOW_FACTORY, FACTORY};
use std::sync::Arc;

/// 8-byte keys whose first two bytes take every value: Node256s at the top levels.
fn key(i: u64) -> [u8; 8] {
    (i.wrapping_mul(0x0101_0000_0000_0000) ^ (i << 16)).to_be_bytes()
}

const N: u64 = 20_000;

fn pool() -> Arc<Pool> {
    let o = PoolOptions::default().mode(Mode::Adr).initial_size(16 << 20).max_size(256 << 20);
    Arc::new(Pool::create_sim("woart-reads", &o).expect("sim pool"))
}

/// Lines read per delete of keys `range`, each present.
fn reads_per_delete(del: impl Fn(&[u8]) -> bool, range: std::ops::Range<u64>) -> f64 {
    let before = counters::snapshot();
    for i in range.clone() {
        assert!(del(&key(i)), "key {i} was present");
    }
    let d = counters::snapshot().since(&before);
    d.lines_read as f64 / (range.end - range.start) as f64
}

/// Deletes every key of a tree of `f` (WOART's or ART+CoW's), reopening it halfway;
/// fails if a delete reads as many lines as counting a Node256's slots would.
fn deletes_read_metadata(f: &WoartFactory) {
    let name = f.info().name;
    let open = |p: &Arc<Pool>| f.open_native(p.clone(), (), &pmkv_core::Options::default()).expect("open");
    let p = pool();
    let t = open(&p);
    for i in 0..N {
        t.put(&key(i), &i.to_le_bytes()).unwrap();
    }
    let first = reads_per_delete(|k| t.delete(k).unwrap(), 0..N / 2);
    t.close().unwrap();
    let t = open(&p);
    let second = reads_per_delete(|k| t.delete(k).unwrap(), N / 2..N);
    assert!(t.is_empty());
    t.check().unwrap();
    eprintln!("{name}: {first:.2} and, after a reopen, {second:.2} PM lines read per delete");
    for r in [first, second] {
        assert!(r < 16.0, "{name}: {r:.2} lines read per delete");
    }
}

#[test]
fn a_delete_reads_node_metadata_not_every_slot() {
    deletes_read_metadata(&FACTORY);
}

#[test]
fn an_artcow_delete_reads_node_metadata_not_every_slot() {
    deletes_read_metadata(&ARTCOW_FACTORY);
}
