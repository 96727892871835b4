//! `EngineFactory::salvage` on NBTree pool files: a clean pool salvages to exactly its
//! records; damaged copies salvage to a subset of the true records, never a wrong or
//! invented one; a copy taken while the store was open (after a sync) salvages every
//! record whose key and value are objects (their CRCs vouch for them; inline bytes need
//! the seal a clean close writes); garbage never panics.

mod common;
use common::*;
use pmkv_core::EngineFactory;
use std::sync::Arc;

fn salvage(image: &[u8]) -> (Model, pmkv_core::SalvageReport) {
    let mut out = Model::new();
    let rep = pmkv_nbtree::FACTORY
        .salvage(image, &mut |k, v| {
            assert!(out.insert(k.to_vec(), v.to_vec()).is_none(), "key {k:?} emitted twice");
            Ok(())
        })
        .expect("salvage");
    (out, rep)
}

/// Every kind of key (short, 8-byte, pair, object) and value (inline, object).
fn record(i: u64) -> (Vec<u8>, Vec<u8>) {
    let key = match i % 4 {
        0 => format!("k{i}").into_bytes(),
        1 => format!("{i:08}").into_bytes(),
        2 => format!("pair-{i:08}").into_bytes(),
        _ => format!("a-long-key-in-an-object-{i:08}").into_bytes(),
    };
    let value =
        if i.is_multiple_of(3) { format!("v{i}").into_bytes() } else { format!("value-in-an-object-{i}").into_bytes() };
    (key, value)
}

fn is_object_record(k: &[u8], v: &[u8]) -> bool {
    k.len() > 16 && v.len() > 8
}

/// A closed pool of 3000 records (after updates and deletes, so SMOs left freed blocks).
fn build(path: &std::path::Path, single_layer: bool) -> Model {
    let opts = pool_opts(Mode::Eadr, 8 << 20, 64 << 20);
    let pool = Arc::new(pmkv_substrate::Pool::create(path, "nbtree", &opts).unwrap());
    let t = NbTree::open_with(pool, pmkv_nbtree::Options { single_layer, ..Default::default() }).unwrap();
    let mut m = Model::new();
    for i in 0..3000 {
        let (k, v) = record(i);
        t.put(&k, &v).unwrap();
        m.insert(k, v);
    }
    for i in (0..3000).step_by(7) {
        let (k, _) = record(i);
        t.delete(&k).unwrap();
        m.remove(&k);
    }
    for i in (1..3000).step_by(11) {
        let (k, _) = record(i);
        if m.contains_key(&k) {
            let v = format!("updated-{i}").into_bytes();
            t.put(&k, &v).unwrap();
            m.insert(k, v);
        }
    }
    t.close().unwrap();
    m
}

fn assert_subset(got: &Model, model: &Model, ctx: &str) {
    for (k, v) in got {
        assert_eq!(model.get(k), Some(v), "{ctx}: salvaged {k:?} = {v:?}, not the model's");
    }
}

#[test]
fn a_clean_pool_salvages_to_exactly_its_records() {
    for sl in [false, true] {
        let (_d, path) = pool_file("clean.pool");
        let model = build(&path, sl);
        let (got, rep) = salvage(&std::fs::read(&path).unwrap());
        assert_eq!(got, model, "single_layer={sl}");
        assert_eq!(rep.records, model.len() as u64);
    }
}

#[test]
fn a_damaged_pool_salvages_a_subset_never_a_wrong_record() {
    let (_d, path) = pool_file("dmg.pool");
    let model = build(&path, false);
    let good = std::fs::read(&path).unwrap();
    let mut rng = XorShift::new(0x5a1_7a9e);
    let mut total_lost = 0;
    for c in 0..60 {
        let mut b = good.clone();
        let used = b.len() as u64;
        let what = match c % 3 {
            0 => {
                let page = rng.below(used / 4096) as usize * 4096;
                b[page..page + 4096].fill(0);
                format!("zeroed page {page:#x}")
            }
            1 => {
                let mut offs = Vec::new();
                for _ in 0..8 {
                    let o = rng.below(used) as usize;
                    b[o] ^= 1 << rng.below(8);
                    offs.push(o);
                }
                format!("flipped bits at {offs:x?}")
            }
            _ => {
                let o = rng.below(used - 64) as usize / 32 * 32;
                for x in &mut b[o..o + 32] {
                    *x = rng.next_u64() as u8;
                }
                format!("random entry-sized run at {o:#x}")
            }
        };
        let (got, _) = salvage(&b);
        assert_subset(&got, &model, &what);
        total_lost += model.len() - got.len();
    }
    assert!(total_lost > 0, "the damage never lost a record: the test damages nothing");
}

#[test]
fn a_copy_taken_while_open_salvages_its_acknowledged_object_records() {
    let (d, path) = pool_file("open.pool");
    let mut model = build(&path, false);
    let opts = pool_opts(Mode::Eadr, 8 << 20, 64 << 20);
    let t = reopen_tree(&path, &opts);
    for i in 3000..4000 {
        let (k, v) = record(i);
        t.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    t.sync().unwrap();
    let copy = d.path().join("copy.pool");
    std::fs::copy(&path, &copy).unwrap();
    drop(t);
    let (got, rep) = salvage(&std::fs::read(&copy).unwrap());
    assert_subset(&got, &model, "crashed copy");
    // Format 3: inline records too, vouched for by their entry checks though no block of
    // the copy is sealed.
    for (k, v) in model.iter() {
        assert_eq!(got.get(k), Some(v), "acknowledged record {k:?} lost ({rep:?})");
    }
    assert!(model.iter().any(|(k, v)| !is_object_record(k, v)), "the model has inline records");
}

#[test]
fn garbage_never_panics() {
    let mut rng = XorShift::new(7);
    for len in [0usize, 1, 31, 64, 2047, 2048, 4096, 1 << 16] {
        let b: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let (got, _) = salvage(&b);
        assert!(got.is_empty(), "records from random bytes: {got:?}");
        let z = vec![0u8; len];
        assert!(salvage(&z).0.is_empty());
        let ff = vec![0xffu8; len];
        assert!(salvage(&ff).0.is_empty());
    }
}
