//! What an FPTree scan reads: each valid entry of a leaf it visits once (the leaves are
//! unsorted, so a scan sorts a leaf's entries; the authors' scan reads each entry once,
//! and pmkv's first scan read every entry twice: once to sort the keys and once more to
//! visit it). Counted by the substrate's PM read counter, which the read-latency
//! emulation charges, so a second read would double the emulated cost of a scan.

use pmkv_core::KeyRange;
use pmkv_fptree::FpTree;
use pmkv_substrate::{counters, Mode, Pool};
use pmkv_testutil::sim_opts;
use std::sync::Arc;

const N: u64 = 20_000;

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn loaded() -> FpTree {
    let pool = Arc::new(Pool::create_sim("fptree", &sim_opts(64 << 20).mode(Mode::Eadr)).expect("sim pool"));
    let t = FpTree::open(pool).expect("format");
    // A scattered insert order, so the leaves are split and unsorted as in use.
    for i in 0..N {
        let k = i.wrapping_mul(7919) % N;
        t.put(&key(k), &k.to_le_bytes()).unwrap();
    }
    t
}

/// PM lines read per record visited by a scan of `range` (and the records, in order).
fn reads_per_record(t: &FpTree, range: &KeyRange, reverse: bool) -> (f64, Vec<u64>) {
    let mut got = Vec::new();
    let before = counters::snapshot();
    t.scan(range, usize::MAX, reverse, &mut |k, v| {
        let k = u64::from_be_bytes(k.try_into().unwrap());
        assert_eq!(v, k.to_le_bytes(), "the value of key {k}");
        got.push(k);
        true
    })
    .unwrap();
    let d = counters::snapshot().since(&before);
    (d.lines_read as f64 / got.len() as f64, got)
}

#[test]
fn a_scan_reads_each_entry_once() {
    let t = loaded();
    let (per, got) = reads_per_record(&t, &KeyRange::all(), false);
    assert_eq!(got, (0..N).collect::<Vec<_>>());
    eprintln!("fptree full scan: {per:.3} PM lines read per record");
    // One read per entry plus a leaf's line 0 per leaf (at least 28 records a leaf):
    // reading each entry twice would be over 2.
    assert!(per <= 1.05, "{per:.3} lines read per record scanned");
    let (per, got) = reads_per_record(&t, &KeyRange::all(), true);
    assert_eq!(got, (0..N).rev().collect::<Vec<_>>());
    assert!(per <= 1.05, "{per:.3} lines read per record scanned backwards");
}

#[test]
fn a_range_scan_visits_exactly_its_range_in_order() {
    let t = loaded();
    for (lo, hi) in [(0, 1), (100, 5_000), (N - 10, N + 10), (12_345, 12_345)] {
        let range = KeyRange::new(key(lo).to_vec(), key(hi).to_vec());
        let want: Vec<u64> = (lo..hi.min(N)).collect();
        assert_eq!(reads_per_record(&t, &range, false).1, want, "[{lo}, {hi})");
        let rev: Vec<u64> = want.iter().rev().copied().collect();
        assert_eq!(reads_per_record(&t, &range, true).1, rev, "[{lo}, {hi}) backwards");
    }
}
