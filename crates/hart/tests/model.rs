//! SPEC H1–H8 against a model: random operation sequences on HART and on `BTreeMap`,
//! including crashes (recovery from the crash simulator's image between operations) and
//! clean reopens, with k_h from 0 to 3 and 7, and keys of any bytes (0x00 included),
//! shorter than k_h, and longer than the inline 48 bytes.

mod common;
use common::*;
use pmkv_substrate::Eviction;
use proptest::prelude::*;

/// A step of a run: a write (put or delete, replayed on the model), or a read or crash.
#[derive(Clone, Debug)]
enum Step {
    Write(Op),
    Get(Vec<u8>),
    /// Two bound keys, a limit, the bound kinds (indexes into `bound_kinds`; start and
    /// end) and the direction.
    Scan(Vec<u8>, Vec<u8>, usize, (usize, usize), bool),
    Crash,
}

fn step() -> impl Strategy<Value = Step> {
    let key = || strategy::key(strategy::LONG_KEY);
    prop_oneof![
        9 => strategy::op().prop_map(Step::Write),
        2 => key().prop_map(Step::Get),
        2 => (key(), key(), 0usize..20, (0usize..3, 0usize..3), any::<bool>())
            .prop_map(|(a, b, n, k, r)| Step::Scan(a, b, n, k, r)),
        1 => Just(Step::Crash),
    ]
}

fn run(steps: Vec<Step>, kh: usize) {
    let mut h = sim_hart(1 << 20, kh);
    let mut m = Model::new();
    for step in steps {
        match step {
            Step::Write(op) => {
                let present = apply(&mut m, &op);
                match op {
                    Op::Put(k, v) => h.put(&k, &v).unwrap(),
                    Op::Delete(k) => assert_eq!(h.delete(&k).unwrap(), present),
                }
            }
            Step::Get(k) => assert_eq!(get(&h, &k), m.get(&k).cloned()),
            Step::Scan(a, b, n, (ks, ke), reverse) => {
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let (start, end) = (bound_kinds(&lo)[ks], bound_kinds(&hi)[ke]);
                let got = scan(&h, start, end, n, reverse);
                assert_eq!(
                    got,
                    model_range(&m, start, end, n, reverse),
                    "scan {start:?}..{end:?} limit {n} reverse {reverse}"
                );
                // The visitor stopping early (after `n / 2 + 1` records) is obeyed exactly.
                let stop_after = n / 2 + 1;
                let mut seen = Vec::new();
                h.scan(&pmkv_core::KeyRange::bounds(start, end), usize::MAX, reverse, &mut |k, _| {
                    seen.push(k.to_vec());
                    seen.len() < stop_after
                })
                .unwrap();
                let want: Vec<_> =
                    model_range(&m, start, end, stop_after, reverse).into_iter().map(|(k, _)| k).collect();
                assert_eq!(seen, want);
            }
            Step::Crash => {
                // Crash between operations with every unflushed line lost or kept.
                let img = h.pool().sim().unwrap().image_now(h.pool(), Eviction::None);
                h = recover(&img).unwrap();
                assert!(!h.recovery_report().clean_shutdown);
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
    fn hart_matches_btreemap(steps in proptest::collection::vec(step(), 1..250), kh in prop_oneof![0usize..4, Just(7usize)]) {
        run(steps, kh);
    }
}

#[test]
fn reopen_file_pool_keeps_everything() {
    use pmkv_hart::{Hart, Options};
    use pmkv_substrate::{Mode, Pool};
    use std::sync::Arc;
    let (_dir, path) = pool_file("h.pool");
    let opts = pool_opts(Mode::Adr, 8 << 20, 64 << 20);
    let mut m = Model::new();
    {
        let pool = Pool::create(&path, "hart", &opts).unwrap();
        let h = Hart::open(Arc::new(pool), Options { hash_key_len: 3, ..Options::default() }).unwrap();
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
    let h = Hart::open(Arc::new(pool), Options { hash_key_len: 2, ..Options::default() }).unwrap();
    assert_eq!(h.hash_key_len(), 3);
    assert!(h.recovery_report().clean_shutdown);
    assert_eq!(contents(&h), m);
    h.check().unwrap();
}
