//! The `mangosteen` engine: a standard `BTreeMap` made durable. A model property test
//! against a `BTreeMap` with closes and reopens (the map survives at its fixed address),
//! many threads writing at once (flat combining), a full region, and the refusals.

use pmkv_core::{Direction, EngineFactory, ErrorKind, KeyRange, Options, WriteBatch};
use pmkv_mangosteen::FACTORY;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

fn opts() -> Options {
    Options::default().initial_size(8 << 20).param("region_mib", "4")
}

fn contents(e: &dyn pmkv_core::Engine) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v = Vec::new();
    e.scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |k, val| {
        v.push((k.to_vec(), val.to_vec()));
        true
    })
    .unwrap();
    v
}

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    Reopen,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![proptest::collection::vec(any::<u8>(), 0..4), proptest::collection::vec(any::<u8>(), 0..40)]
}

fn op() -> impl Strategy<Value = Op> {
    let val = proptest::collection::vec(any::<u8>(), 0..300);
    prop_oneof![
        6 => (key(), val.clone()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => key().prop_map(Op::Delete),
        1 => proptest::collection::vec((key(), proptest::option::of(val)), 0..6).prop_map(Op::Batch),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// SPEC U1 against a model, with restarts: after every step the store holds what a
    /// `BTreeMap` given the same operations holds, also after closing and reopening.
    #[test]
    fn matches_a_btreemap_across_restarts(ops in proptest::collection::vec(op(), 1..60)) {
        let dir = pmkv_testutil::pool_dir();
        let path = dir.path().join("m.pool");
        let o = opts();
        let mut e = FACTORY.open(&path, &o).unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    e.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                Op::Delete(k) => prop_assert_eq!(e.delete(&k).unwrap(), model.remove(&k).is_some()),
                Op::Batch(items) => {
                    let mut b = WriteBatch::new();
                    for (k, v) in items {
                        match v {
                            Some(v) => {
                                b.put(k.clone(), v.clone());
                                model.insert(k, v);
                            }
                            None => {
                                b.delete(k.clone());
                                model.remove(&k);
                            }
                        }
                    }
                    e.write_batch(&b).unwrap();
                }
                Op::Reopen => {
                    e.close().unwrap();
                    e = FACTORY.open(&path, &o).unwrap();
                    prop_assert!(e.check().unwrap().is_ok());
                }
            }
            prop_assert_eq!(e.len(), model.len() as u64);
        }
        let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
        prop_assert_eq!(contents(&*e), want.clone());
        e.close().unwrap();
        let e = FACTORY.open(&path, &o).unwrap();
        prop_assert_eq!(contents(&*e), want);
        prop_assert!(e.check().unwrap().is_ok());
        e.close().unwrap();
    }
}

/// Writers on many threads are combined into batches; every write is there afterwards,
/// and after a reopen.
#[test]
fn concurrent_writers_are_combined_and_durable() {
    let dir = pmkv_testutil::pool_dir();
    let path = dir.path().join("c.pool");
    let e: Arc<Box<dyn pmkv_core::Engine>> = Arc::new(FACTORY.open(&path, &opts()).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let e = e.clone();
            std::thread::spawn(move || {
                for i in 0..300u32 {
                    e.put(format!("t{t}-{i:04}").as_bytes(), &i.to_le_bytes()).unwrap();
                    if i % 3 == 0 {
                        assert!(e.get_with(format!("t{t}-{i:04}").as_bytes(), &mut |_| {}).unwrap());
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(e.len(), 1200);
    let e = Arc::into_inner(e).expect("threads are done");
    e.close().unwrap();
    let e = FACTORY.open(&path, &opts()).unwrap();
    assert_eq!(e.len(), 1200);
    let mut got = Vec::new();
    e.get_with(b"t3-0299", &mut |v| got = v.to_vec()).unwrap();
    assert_eq!(got, 299u32.to_le_bytes());
    e.close().unwrap();
}

/// A full region is a clear error that changes nothing; the store keeps working after
/// deletes; a second open of the pool is refused; a read-only open refuses writes.
#[test]
fn full_region_locked_and_read_only() {
    let dir = pmkv_testutil::pool_dir();
    let path = dir.path().join("f.pool");
    let o = Options::default().initial_size(4 << 20).param("region_mib", "1");
    let e = FACTORY.open(&path, &o).unwrap();
    let big = vec![7u8; 20_000];
    let mut n = 0u32;
    let err = loop {
        match e.put(&n.to_be_bytes(), &big) {
            Ok(()) => n += 1,
            Err(err) => break err,
        }
    };
    assert_eq!(err.kind(), ErrorKind::Full, "{err}");
    assert!(n > 20, "{n} puts of 20 kB fit a 1 MiB region");
    assert_eq!(e.len(), n as u64);
    assert!(e.check().unwrap().is_ok());
    // Deletes always work on a full region.
    assert!(e.delete(&0u32.to_be_bytes()).unwrap());
    assert_eq!(e.len(), n as u64 - 1);
    let second = FACTORY.open(&path, &o).err().expect("a second open is refused");
    assert_eq!(second.kind(), ErrorKind::Locked);
    e.close().unwrap();
    let ro = FACTORY.open(&path, &o.clone().read_only(true)).unwrap();
    assert_eq!(ro.len(), n as u64 - 1);
    assert_eq!(ro.put(b"x", b"y").unwrap_err().kind(), ErrorKind::ReadOnly);
    ro.close().unwrap();
}

/// `log=perwrite`, the per-write baseline: the same map, every captured store logged and
/// fenced as it is made (verify mode, on in debug builds, checks none was missed); it
/// survives a reopen, and page capture, which finds writes only at a batch's end, is
/// refused with it.
#[test]
fn per_write_logging_keeps_the_map_and_refuses_page_capture() {
    let dir = pmkv_testutil::pool_dir();
    let path = dir.path().join("w.pool");
    let o = opts().param("log", "perwrite");
    let e = FACTORY.open(&path, &o).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..400u32 {
        let k = (i.wrapping_mul(2_654_435_761) % 1000).to_be_bytes().to_vec();
        if i % 5 == 4 {
            assert_eq!(e.delete(&k).unwrap(), model.remove(&k).is_some());
        } else {
            let v = vec![i as u8; 1 + (i % 300) as usize];
            e.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
    let want: Vec<_> = model.into_iter().collect();
    assert_eq!(contents(&*e), want);
    e.close().unwrap();
    let e = FACTORY.open(&path, &o).unwrap();
    assert_eq!(contents(&*e), want);
    e.close().unwrap();
    let bad = FACTORY.open(&dir.path().join("p.pool"), &opts().param("log", "perwrite").param("capture", "pages"));
    let err = bad.err().expect("page capture with per-write logging is refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("per-write"), "{err}");
    let bad = FACTORY.open(&dir.path().join("q.pool"), &opts().param("log", "undo")).err().expect("refused");
    assert_eq!(bad.kind(), ErrorKind::InvalidArgument, "{bad}");
}

/// Large values, captured as one `memcpy` (the default) and as the copy's 8-byte stores
/// one by one (`memcpy=false`, the paper's nomemcpy ablation): verify mode finds no byte
/// missed either way, and a reopen reads every value back.
#[test]
fn large_values_are_captured_whole_with_and_without_memcpy_capture() {
    for memcpy in ["true", "false"] {
        let dir = pmkv_testutil::pool_dir();
        let path = dir.path().join("m.pool");
        let o = opts().param("memcpy", memcpy).param("verify_capture", "true");
        let e = FACTORY.open(&path, &o).unwrap();
        let mut model = BTreeMap::new();
        for i in 0..24u32 {
            let k = format!("key{}", i % 17).into_bytes();
            let v: Vec<u8> = (0..1 + (i as usize * 4_219) % 100_000).map(|j| (j as u32 ^ i) as u8).collect();
            e.put(&k, &v).unwrap_or_else(|err| panic!("memcpy={memcpy}: put {i}: {err}"));
            model.insert(k, v);
        }
        assert!(e.delete(b"key3").unwrap());
        model.remove(&b"key3"[..]);
        let want: Vec<_> = model.into_iter().collect();
        assert_eq!(contents(&*e), want, "memcpy={memcpy}");
        e.close().unwrap();
        let e = FACTORY.open(&path, &o).unwrap();
        assert_eq!(contents(&*e), want, "memcpy={memcpy}: after a reopen");
        e.close().unwrap();
    }
}
