//! Random operation sequences against a `BTreeMap` model, with reopens (proptest).

use crate::util::*;
use pmkv::{Direction, EngineFactory, KeyRange, Store, WriteBatch};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Get(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    Scan(Vec<u8>, bool, usize),
    Reopen,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => proptest::collection::vec(prop_oneof![Just(0u8), Just(b'a'), Just(b'b'), Just(0xff)], 0..5),
        1 => proptest::collection::vec(any::<u8>(), 0..40),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![proptest::collection::vec(any::<u8>(), 0..9), proptest::collection::vec(any::<u8>(), 9..300),]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (key(), value()).prop_map(|(k, v)| Op::Put(k, v)),
        3 => key().prop_map(Op::Delete),
        2 => key().prop_map(Op::Get),
        1 => proptest::collection::vec((key(), proptest::option::of(value())), 0..6).prop_map(Op::Batch),
        2 => (key(), any::<bool>(), 0usize..20).prop_map(|(k, r, n)| Op::Scan(k, r, n)),
        1 => Just(Op::Reopen),
    ]
}

/// Sequences of puts, deletes, gets, batches, bounded scans both ways and reopens give
/// the model's answers; at the end the whole store equals the model and checks clean.
pub fn random_operations_match_a_model(f: &'static dyn EngineFactory) {
    let mut runner = TestRunner::new(Config { cases: 24, failure_persistence: None, ..Config::default() });
    runner
        .run(&proptest::collection::vec(op(), 1..120), |ops| {
            let d = pool_dir();
            let path = d.path().join("model.pool");
            let mut s = Some(Store::open_with(f, &path, &opts()).unwrap());
            let mut m = Model::new();
            for op in ops {
                let st = s.as_ref().unwrap();
                match op {
                    Op::Put(k, v) => {
                        st.put(&k, &v).unwrap();
                        m.insert(k, v);
                    }
                    Op::Delete(k) => prop_assert_eq!(st.delete(&k).unwrap(), m.remove(&k).is_some()),
                    Op::Get(k) => prop_assert_eq!(st.get(&k).unwrap(), m.get(&k).cloned()),
                    Op::Batch(w) => {
                        let mut b = WriteBatch::new();
                        for (k, v) in w {
                            match v {
                                Some(v) => {
                                    b.put(k.clone(), v.clone());
                                    m.insert(k, v);
                                }
                                None => {
                                    b.delete(k.clone());
                                    m.remove(&k);
                                }
                            }
                        }
                        st.write(&b).unwrap();
                    }
                    Op::Scan(k, rev, n) => {
                        let (r, dir) = if rev {
                            (
                                KeyRange { start: std::ops::Bound::Unbounded, end: std::ops::Bound::Included(k) },
                                Direction::Reverse,
                            )
                        } else {
                            (KeyRange::from(k), Direction::Forward)
                        };
                        let got = st.collect(&r, dir, n).unwrap();
                        let it = m.iter().filter(|(k, _)| r.contains(k)).map(|(k, v)| (k.clone(), v.clone()));
                        let want: Vec<_> = if rev { it.rev().take(n).collect() } else { it.take(n).collect() };
                        prop_assert_eq!(got, want);
                    }
                    Op::Reopen => {
                        s.take().unwrap().close().unwrap();
                        s = Some(Store::open_with(f, &path, &opts()).unwrap());
                        if !f.info().persistent {
                            m.clear();
                        }
                    }
                }
            }
            let st = s.take().unwrap();
            prop_assert_eq!(contents(&st), m.clone());
            prop_assert_eq!(st.len().unwrap(), m.len() as u64);
            prop_assert!(st.check().unwrap().is_ok());
            st.close().unwrap();
            Ok(())
        })
        .unwrap();
}
