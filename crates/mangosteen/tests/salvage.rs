//! `EngineFactory::salvage` on mangosteen pools: whole or nothing. A clean pool and a copy
//! taken while the store was open (after its writes returned) salvage to exactly their
//! records; a pool with a damaged page of its map salvages nothing and says which check
//! failed; garbage never panics.

use pmkv_core::{EngineFactory, Options};
use pmkv_mangosteen::FACTORY;
use std::collections::BTreeMap;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn salvage(image: &[u8]) -> pmkv_core::Result<Model> {
    let mut out = Model::new();
    FACTORY.salvage(image, &mut |k, v| {
        assert!(out.insert(k.to_vec(), v.to_vec()).is_none(), "key emitted twice");
        Ok(())
    })?;
    Ok(out)
}

fn opts() -> Options {
    Options::default().initial_size(8 << 20).param("region_mib", "4").create(true)
}

#[test]
fn clean_and_open_copies_salvage_whole_damaged_ones_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.pool");
    let e = FACTORY.open(&path, &opts()).unwrap();
    let mut model = Model::new();
    for i in 0..500u32 {
        let (k, v) = (format!("key{i:05}").into_bytes(), format!("value-{i}").repeat(1 + i as usize % 5).into_bytes());
        e.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    e.delete(b"key00007").unwrap();
    model.remove(&b"key00007"[..]);
    e.sync().unwrap();
    // A copy taken while the store is open: every acknowledged write is in it.
    let open_copy = std::fs::read(&path).unwrap();
    e.close().unwrap();
    let clean = std::fs::read(&path).unwrap();
    assert_eq!(salvage(&clean).unwrap(), model);
    assert_eq!(salvage(&open_copy).unwrap(), model);

    // A damaged page: nothing, with the reason.
    let mut damaged_any = false;
    for page in (4096..clean.len()).step_by(clean.len() / 40 / 4096 * 4096 + 4096) {
        let mut b = clean.clone();
        b[page..page + 4096].iter_mut().for_each(|x| *x ^= 0xa5);
        match salvage(&b) {
            Ok(got) => assert_eq!(got, model, "page {page:#x}: a partial or wrong salvage"),
            Err(err) => {
                assert!(err.to_string().contains("nothing can be salvaged"), "{err}");
                damaged_any = true;
            }
        }
    }
    assert!(damaged_any, "no damaged page was noticed");
}

#[test]
fn garbage_never_panics() {
    let mut x = 0x1234_5678_9abc_def1u64;
    for len in [0usize, 1, 4096, 1 << 16] {
        let b: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert!(salvage(&b).is_err());
    }
}
