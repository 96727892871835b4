//! The `null` engine: every engine list a run uses includes it,
//! so every table shows the harness's own cost, and it runs every basic operation without
//! an error. (What it costs is a figure the benchmarks print, not a unit test's business on
//! a shared machine: see the README.)

use pmkv::{Latency, Mode};
use pmkv_bench::engines::{self, NULL};
use pmkv_bench::experiment::{basic_ops, Settings, Target};
use pmkv_bench::workload::strings;

#[test]
fn every_engine_list_includes_null() {
    assert!(engines::all().contains(&NULL));
    for list in [vec![], vec!["volatile".to_string()], vec!["hart,volatile".to_string()], vec!["null".to_string()]] {
        let l = engines::parse_list(&list).unwrap();
        assert_eq!(l.iter().filter(|e| e.is_null()).count(), 1, "{list:?}");
    }
    assert!(!NULL.uses_pool());
}

#[test]
fn null_runs_every_basic_operation() {
    let dir = tempfile::tempdir().unwrap();
    let s = Settings::new(dir.path(), 42);
    let keys = strings::sequential(20_000);
    let null = basic_ops(&s, &Target::new(NULL, Mode::Eadr, Latency::NONE), "t", "seq", &keys, 1);
    let ops: Vec<&str> = null.iter().map(|r| r.op.as_str()).collect();
    assert_eq!(ops, ["insert", "search", "update", "delete"]);
    for n in &null {
        assert!(n.error.is_none(), "{}: {:?}", n.op, n.error);
        assert_eq!(n.engine, "null");
    }
}

/// `--op-order shuffled`: the search, update and delete phases still visit every inserted
/// key exactly once (every search and delete finds its key), in the other order too.
#[test]
fn shuffled_op_order_visits_every_key_once() {
    use pmkv_bench::experiment::OpOrder;
    let dir = tempfile::tempdir().unwrap();
    let keys = strings::sequential(20_000);
    for order in [OpOrder::Insert, OpOrder::Shuffled] {
        let mut s = Settings::new(dir.path(), 42);
        s.op_order = order;
        let list = engines::parse_list(&["volatile".to_string()]).unwrap();
        let volatile = *list.iter().find(|e| !e.is_null()).unwrap();
        let t = Target::new(volatile, Mode::None, Latency::NONE);
        let recs = basic_ops(&s, &t, "t", "seq", &keys, 2);
        assert_eq!(recs.len(), 4, "{order:?}");
        for r in &recs {
            assert_eq!(r.engine, "volatile");
            assert_eq!(r.errors, 0, "{order:?} {}", r.op);
            assert_eq!(r.ops, keys.len() as u64, "{order:?} {}", r.op);
            if r.op == "search" || r.op == "delete" {
                assert_eq!((r.found, r.missed), (keys.len() as u64, 0), "{order:?} {}", r.op);
            }
        }
    }
}
