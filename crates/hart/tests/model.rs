//! SPEC H1–H8 against a model: random operation sequences on HART and on `BTreeMap`,
//! including crashes (recovery from the crash simulator's image between operations) and
//! clean reopens, with k_h from 0 to 3 and 7, and keys of any bytes (0x00 included),
//! shorter than k_h, and longer than the inline 48 bytes.

mod common;
use common::*;
use pmkv_substrate::Eviction;
use proptest::prelude::*;
use std::ops::Bound;

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Del(Vec<u8>),
    Get(Vec<u8>),
    /// Two bound keys, a limit, the bound kinds (0 included, 1 excluded, 2 open; start
    /// and end) and the direction.
    Scan(Vec<u8>, Vec<u8>, usize, (u8, u8), bool),
    Crash,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(b'a'), Just(255u8)], 0..6),
        1 => proptest::collection::vec(any::<u8>(), 40..80),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (key(), proptest::collection::vec(any::<u8>(), 0..200)).prop_map(|(k, v)| Op::Put(k, v)),
        3 => key().prop_map(Op::Del),
        2 => key().prop_map(Op::Get),
        2 => (key(), key(), 0usize..20, (0u8..3, 0u8..3), any::<bool>()).prop_map(|(a, b, n, k, r)| Op::Scan(a, b, n, k, r)),
        1 => Just(Op::Crash),
    ]
}

fn run(ops: Vec<Op>, kh: usize) {
    let mut h = sim_hart(1 << 20, kh);
    let mut m = Model::new();
    for op in ops {
        match op {
            Op::Put(k, v) => {
                h.put(&k, &v).unwrap();
                m.insert(k, v);
            }
            Op::Del(k) => assert_eq!(h.delete(&k).unwrap(), m.remove(&k).is_some()),
            Op::Get(k) => assert_eq!(get(&h, &k), m.get(&k).cloned()),
            Op::Scan(a, b, n, (ks, ke), reverse) => {
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let bound = |k: u8, key: &[u8]| match k {
                    0 => Bound::Included(key.to_vec()),
                    1 => Bound::Excluded(key.to_vec()),
                    _ => Bound::Unbounded,
                };
                let (start, end) = (bound(ks, &lo), bound(ke, &hi));
                let in_range = |k: &Vec<u8>| {
                    (match &start {
                        Bound::Included(s) => k >= s,
                        Bound::Excluded(s) => k > s,
                        Bound::Unbounded => true,
                    }) && (match &end {
                        Bound::Included(e) => k <= e,
                        Bound::Excluded(e) => k < e,
                        Bound::Unbounded => true,
                    })
                };
                let all: Vec<_> = m.iter().filter(|(k, _)| in_range(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
                let want: Vec<_> = if reverse {
                    all.iter().rev().take(n).cloned().collect()
                } else {
                    all.iter().take(n).cloned().collect()
                };
                let mut got = Vec::new();
                h.scan(start.as_ref().map(Vec::as_slice), end.as_ref().map(Vec::as_slice), n, reverse, &mut |k, v| {
                    got.push((k.to_vec(), v.to_vec()));
                    true
                })
                .unwrap();
                assert_eq!(got, want, "scan {start:?}..{end:?} limit {n} reverse {reverse}");
                // The visitor stopping early (after `n / 2 + 1` records) is obeyed exactly.
                let stop_after = n / 2 + 1;
                let mut seen = Vec::new();
                h.scan(
                    start.as_ref().map(Vec::as_slice),
                    end.as_ref().map(Vec::as_slice),
                    usize::MAX,
                    reverse,
                    &mut |k, _| {
                        seen.push(k.to_vec());
                        seen.len() < stop_after
                    },
                )
                .unwrap();
                let want: Vec<_> = if reverse {
                    all.iter().rev().take(stop_after).map(|(k, _)| k.clone()).collect()
                } else {
                    all.iter().take(stop_after).map(|(k, _)| k.clone()).collect()
                };
                assert_eq!(seen, want);
            }
            Op::Crash => {
                // Crash between operations with every unflushed line lost or kept.
                let img = h.pool().sim().unwrap().image_now(h.pool(), Eviction::None);
                h = recover(&img).unwrap();
                assert!(!h.recovery_report().clean);
                assert_eq!(h.hash_key_len(), kh, "k_h is a property of the pool");
                h.check().unwrap();
            }
        }
        assert_eq!(h.len(), m.len() as u64);
    }
    assert_eq!(contents(&h), m);
    assert_eq!(h.min_max().unwrap(), m.keys().next().map(|a| (a.clone(), m.keys().next_back().unwrap().clone())));
    h.check().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn hart_matches_btreemap(ops in proptest::collection::vec(op(), 1..250), kh in prop_oneof![0usize..4, Just(7usize)]) {
        run(ops, kh);
    }
}

#[test]
fn reopen_file_pool_keeps_everything() {
    use pmkv_hart::{Hart, HartOptions};
    use pmkv_substrate::{Mode, Pool, PoolOptions};
    use std::sync::Arc;
    let dir = pool_dir();
    let path = dir.path().join("h.pool");
    let opts = PoolOptions::default().mode(Mode::Adr).initial_size(8 << 20);
    let mut m = Model::new();
    {
        let pool = Pool::create(&path, "hart", &opts).unwrap();
        let h = Hart::open(Arc::new(pool), HartOptions { hash_key_len: 3, ..HartOptions::default() }).unwrap();
        for i in 0..5000u32 {
            let k = format!("key{}", i * 7919 % 5000).into_bytes();
            let v = format!("v{i}").into_bytes();
            h.put(&k, &v).unwrap();
            m.insert(k, v);
        }
        for i in 0..1000u32 {
            let k = format!("key{i}").into_bytes();
            h.delete(&k).unwrap();
            m.remove(&k);
        }
    }
    let pool = Pool::open(&path, Some("hart"), &opts).unwrap();
    assert!(pool.was_clean());
    // k_h comes from the pool, not from the options.
    let h = Hart::open(Arc::new(pool), HartOptions { hash_key_len: 2, ..HartOptions::default() }).unwrap();
    assert_eq!(h.hash_key_len(), 3);
    assert!(h.recovery_report().clean);
    assert_eq!(contents(&h), m);
    h.check().unwrap();
}
