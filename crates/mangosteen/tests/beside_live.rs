//! A crash image of a mangosteen pool handled in a process where a store is open at the
//! same fixed address (the image is a copy of it, so it names that address): salvage
//! recovers it whole in a child process, while the live store goes on undisturbed; a
//! plain open of the copy is refused with an error that says so and names the way out.

use pmkv_core::{EngineFactory, ErrorKind, Options};
use pmkv_mangosteen::FACTORY;
use std::collections::BTreeMap;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn opts() -> Options {
    Options::default().initial_size(8 << 20).param("region_mib", "4").create(true)
}

#[test]
fn a_copy_of_an_open_store_is_salvaged_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.pool");
    let live = FACTORY.open(&path, &opts()).unwrap();
    let mut model = Model::new();
    for i in 0..400u32 {
        let (k, v) = (format!("key{i:05}").into_bytes(), format!("value-{i}").repeat(1 + i as usize % 7).into_bytes());
        live.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    live.delete(b"key00011").unwrap();
    model.remove(&b"key00011"[..]);
    live.sync().unwrap();
    // A crash image: the file as it is while the store is open (acknowledged writes in
    // it, the header not closed cleanly).
    let image = std::fs::read(&path).unwrap();
    let copy = dir.path().join("copy.pool");
    std::fs::write(&copy, &image).unwrap();

    // Opening the copy beside the live store cannot map its region: refused, not mixed up
    // with the live one, and the message says what to do.
    let Err(err) = FACTORY.open(&copy, &Options::default()) else { panic!("the copy opened at a taken address") };
    assert_eq!(err.kind(), ErrorKind::Locked, "{err}");
    assert!(err.to_string().contains("salvage"), "{err}");

    // Salvage recovers it whole, here, while the live store is open.
    let mut got = Model::new();
    let rep = FACTORY
        .salvage(&image, &mut |k, v| {
            assert!(got.insert(k.to_vec(), v.to_vec()).is_none(), "key emitted twice");
            Ok(())
        })
        .unwrap();
    assert_eq!(got, model);
    assert_eq!(rep.records, model.len() as u64);

    // The live store was not touched: its map is intact and takes writes.
    let mut seen = Model::new();
    live.scan(&pmkv_core::KeyRange::all(), pmkv_core::Direction::Forward, usize::MAX, &mut |k, v| {
        seen.insert(k.to_vec(), v.to_vec());
        true
    })
    .unwrap();
    assert_eq!(seen, model);
    live.put(b"after", b"salvage").unwrap();
    let mut v = Vec::new();
    assert!(live.get_with(b"after", &mut |x| v = x.to_vec()).unwrap());
    assert_eq!(v, b"salvage");
    live.close().unwrap();

    // With the live store closed, the copy opens in-process as before.
    let e = FACTORY.open(&copy, &Options::default()).unwrap();
    assert_eq!(e.len(), model.len() as u64);
    e.close().unwrap();
}

#[test]
fn salvage_beside_live_reports_a_damaged_copy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.pool");
    let live = FACTORY.open(&path, &opts()).unwrap();
    for i in 0..200u32 {
        live.put(format!("k{i}").as_bytes(), &[i as u8; 40]).unwrap();
    }
    live.sync().unwrap();
    let mut image = std::fs::read(&path).unwrap();
    // Damage every page of the durable region's second half: some line check fails.
    let n = image.len();
    for b in &mut image[n / 2..n / 2 + (64 << 10)] {
        *b ^= 0x5a;
    }
    let Err(err) = FACTORY.salvage(&image, &mut |_, _| Ok(())) else { panic!("a damaged copy salvaged") };
    assert!(err.to_string().contains("nothing can be salvaged"), "{err}");
    live.put(b"still", b"fine").unwrap();
    live.close().unwrap();
}
