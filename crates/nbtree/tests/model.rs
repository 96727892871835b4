//! SPEC N1–N8 against a model: random operation sequences on NBTree and on `BTreeMap`,
//! with crashes (recovery from the crash simulator's image between operations, in `adr`
//! with unflushed lines lost and in `eadr`), keys of any bytes (0x00 included, the
//! all-zero 8-byte key, long keys in objects) and values inline and in objects. Small
//! leaves fill fast, so sequences run through many SMOs.

mod common;
use common::*;
use proptest::prelude::*;
use std::ops::Bound;
use std::sync::Arc;

#[derive(Clone, Debug)]
enum Step {
    Write(Op),
    Get(Vec<u8>),
    Scan(Vec<u8>, Vec<u8>, usize, (usize, usize), bool),
    Crash,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => strategy::key(strategy::LONG_KEY),
        // 9 to 16 bytes: held in the entry's two key words.
        1 => proptest::collection::vec(any::<u8>(), 9..=16),
        // 8-byte integer keys, the all-zero one included.
        2 => (0u64..200).prop_map(|i| (i * 0x0101_0101).to_be_bytes().to_vec()),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        7 => (key(), strategy::value(strategy::LARGE_VALUE)).prop_map(|(k, v)| Step::Write(Op::Put(k, v))),
        3 => key().prop_map(|k| Step::Write(Op::Delete(k))),
        2 => key().prop_map(Step::Get),
        2 => (key(), key(), 0usize..40, (0usize..3, 0usize..3), any::<bool>())
            .prop_map(|(a, b, n, k, r)| Step::Scan(a, b, n, k, r)),
        1 => Just(Step::Crash),
    ]
}

fn run(steps: Vec<Step>, mode: Mode, single_layer: bool) {
    let mut t = sim_tree_with(2 << 20, mode, pmkv_nbtree::Options { single_layer, ..Default::default() });
    let mut m = Model::new();
    for step in steps {
        match step {
            Step::Write(op) => {
                let present = apply(&mut m, &op);
                match op {
                    Op::Put(k, v) => {
                        t.put(&k, &v).unwrap();
                    }
                    Op::Delete(k) => assert_eq!(t.delete(&k).unwrap(), present),
                }
            }
            Step::Get(k) => assert_eq!(get(&t, &k), m.get(&k).cloned()),
            Step::Scan(a, b, n, (ks, ke), reverse) => {
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let (start, end) = (bound_kinds(&lo)[ks], bound_kinds(&hi)[ke]);
                assert_eq!(
                    scan(&t, start, end, n, reverse),
                    model_range(&m, start, end, n, reverse),
                    "scan {start:?}..{end:?} limit {n} reverse {reverse}"
                );
            }
            Step::Crash => {
                let img = t.pool().sim().unwrap().image_now(t.pool(), Eviction::None);
                t = recover(&img, mode).unwrap();
                assert!(!t.recovery_report().clean_shutdown);
                assert_eq!(t.single_layer(), single_layer, "the pool keeps its kind of leaf");
                t.check().unwrap();
            }
        }
        assert_eq!(t.len(), m.len() as u64);
    }
    assert_eq!(contents(&t), m);
    assert_eq!(
        scan(&t, Bound::Unbounded, Bound::Unbounded, usize::MAX, true),
        m.iter().rev().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>()
    );
    t.check().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn nbtree_matches_btreemap(steps in proptest::collection::vec(step(), 1..400), eadr in any::<bool>()) {
        run(steps, if eadr { Mode::Eadr } else { Mode::Adr }, false);
    }

    /// NBTree-SL: the same model, leaf metadata in the PM blocks.
    #[test]
    fn single_layer_nbtree_matches_btreemap(steps in proptest::collection::vec(step(), 1..400), eadr in any::<bool>()) {
        run(steps, if eadr { Mode::Eadr } else { Mode::Adr }, true);
    }
}

#[test]
fn reopen_file_pool_keeps_everything() {
    let (_dir, path) = pool_file("n.pool");
    let opts = pool_opts(Mode::Adr, 8 << 20, 64 << 20);
    let (t, m) = harness::reopen_keeps_everything(
        || Tree(create_tree(&path, &opts)),
        || Tree(reopen_tree(&path, &opts)),
        20_000,
        5000,
    );
    assert!(t.recovery_report().clean_shutdown);
    // A drop without close seals too, so the next open verifies the seals and passes.
    drop(t);
    let t = reopen_tree(&path, &opts);
    assert!(t.recovery_report().clean_shutdown);
    assert_eq!(contents(&t), m);
}

/// Key objects are checked at every open, after a crash too (the blocks' seals are stale
/// then, but a key object's CRC is not): a damaged one is refused, never read back.
#[test]
fn damaged_key_object_is_refused_after_a_crash() {
    let t = sim_tree(1 << 20, Mode::Eadr);
    let key = b"a key long enough to live in a key object".to_vec();
    t.put(&key, b"v").unwrap();
    let good = t.pool().sim().unwrap().image_now(t.pool(), Eviction::None);
    let r = recover(&good, Mode::Eadr).expect("the undamaged image recovers");
    assert_eq!(get(&r, &key).as_deref(), Some(&b"v"[..]));
    drop(r);
    let mut img = good.clone();
    let at = img.windows(key.len()).position(|w| w == key.as_slice()).expect("the key's bytes are in the image");
    img[at + 3] ^= 0x20;
    assert!(recover(&img, Mode::Eadr).is_err(), "a damaged key object must be refused");
}

/// NBTree-SL on a file pool: the kind is stored in the pool (a plain reopen keeps it), a
/// clean reopen verifies the blocks' seals over the metadata words the inserts wrote, a
/// read-only open reads the same records, and asking for single-layer leaves on a
/// two-layer pool is refused without touching it.
#[test]
fn single_layer_is_kept_by_the_pool_and_refused_on_a_two_layer_one() {
    use pmkv_nbtree::Options;
    let (_dir, path) = pool_file("sl.pool");
    let opts = pool_opts(Mode::Adr, 8 << 20, 64 << 20);
    let sl = Options { single_layer: true, ..Options::default() };
    let mut m = Model::new();
    {
        let pool = Arc::new(Pool::create(&path, "nbtree", &opts).unwrap());
        let t = NbTree::open_with(pool, sl).unwrap();
        assert!(t.single_layer());
        for i in 0..5000u32 {
            let k = format!("key{}", i * 7919 % 5000).into_bytes();
            t.put(&k, &i.to_le_bytes()).unwrap();
            m.insert(k, i.to_le_bytes().to_vec());
        }
        t.close().unwrap();
    }
    let t = reopen_tree(&path, &opts);
    assert!(t.single_layer() && t.recovery_report().clean_shutdown);
    assert_eq!(contents(&t), m);
    t.check().unwrap();
    t.close().unwrap();
    let ro = NbTree::open(Arc::new(Pool::open_read_only(&path, Some("nbtree"), &opts).unwrap())).unwrap();
    assert_eq!(contents(&ro), m);
    ro.check().unwrap();
    drop(ro);

    let (_dir2, two) = pool_file("two.pool");
    let t = create_tree(&two, &opts);
    t.put(b"k", b"v").unwrap();
    t.close().unwrap();
    let pool = Arc::new(Pool::open(&two, Some("nbtree"), &opts).unwrap());
    let e = NbTree::open_with(pool, sl).err().expect("single_layer on a two-layer pool must be refused");
    assert!(e.to_string().contains("two-layer"), "{e}");
    let t = reopen_tree(&two, &opts);
    assert!(!t.single_layer());
    assert_eq!(get(&t, b"k").as_deref(), Some(&b"v"[..]));
    t.check().unwrap();
}
