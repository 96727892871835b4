//! A mix's measured operations use the keys of their own records (they are staged in
//! operation order before the clock starts): every search and read-modify-write of a
//! mix without deletes finds its key, on one thread and on two, scrambled or by key order.

use pmkv::{Latency, Mode};
use pmkv_bench::engines;
use pmkv_bench::experiment::{mix_run, Settings, Target};
use pmkv_bench::workload::mix::{Dist, Mix};
use pmkv_bench::workload::{KeyKind, KeySet};

#[test]
fn mix_operations_find_the_loaded_keys() {
    let dir = tempfile::tempdir().unwrap();
    let s = Settings::new(dir.path(), 42);
    let spec = engines::parse_list(&["volatile".to_string()]).unwrap().into_iter().find(|e| !e.is_null()).unwrap();
    let t = Target::new(spec, Mode::Eadr, Latency::NONE);
    let keys = KeySet::generate(KeyKind::Random, 20_000, 7).unwrap();
    for letter in ['a', 'b', 'c', 'f'] {
        for by_key in [false, true] {
            let mut m = Mix::ycsb(letter, 0.99).unwrap();
            if by_key {
                m.dist = Dist::ZipfByKey(0.99);
            }
            for threads in [1, 2] {
                let r = mix_run(&s, &t, "t", "ycsb", &keys, &m, 20_000, 10_000, threads);
                assert_eq!(r.len(), 1);
                let r = &r[0];
                assert!(r.error.is_none(), "{letter} {by_key} {threads}: {:?}", r.error);
                assert_eq!(r.missed, 0, "ycsb-{letter}, by key {by_key}, {threads} threads: a key not found");
                assert_eq!(r.found, r.ops, "ycsb-{letter}, by key {by_key}, {threads} threads");
            }
        }
    }
}
