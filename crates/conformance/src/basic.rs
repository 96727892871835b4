//! Point operations, sizes, parameters, sync and close.

use crate::util::*;
use pmkv::{EngineFactory, ErrorKind, Options, Store};

/// get/put/delete/contains/len on a fresh store, with overwrites of every size change.
pub fn crud_and_len(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, _) = fresh(f, &d);
    assert!(s.is_empty().unwrap());
    assert_eq!(s.get(b"missing").unwrap(), None);
    assert!(!s.delete(b"missing").unwrap());
    let mut m = Model::new();
    for i in (0..300u32).rev() {
        let k = format!("k{i:04}").into_bytes();
        let v = tagged_value(&k, 0, (i as usize * 13) % 200);
        s.put(&k, &v).unwrap();
        m.insert(k, v);
    }
    assert_eq!(s.len().unwrap(), 300);
    // Overwrites: same size, smaller, larger, to empty and back.
    for (i, len) in [8usize, 3, 150, 0, 9, 1000].into_iter().enumerate() {
        let k = b"k0007".to_vec();
        let v = vec![i as u8 + 1; len];
        s.put(&k, &v).unwrap();
        assert_eq!(s.get(&k).unwrap().as_deref(), Some(&v[..]), "overwrite to {len} bytes");
        m.insert(k, v);
    }
    assert!(s.contains(b"k0007").unwrap());
    assert!(s.delete(b"k0010").unwrap());
    assert!(!s.delete(b"k0010").unwrap());
    assert!(!s.contains(b"k0010").unwrap());
    m.remove(&b"k0010"[..]);
    assert_eq!(s.len().unwrap(), m.len() as u64);
    assert_eq!(contents(&s), m);
    let mut buf = Some(b"stale".to_vec());
    assert!(s.get_into(b"k0001", &mut buf).unwrap());
    assert_eq!(buf.as_deref(), m.get(&b"k0001"[..]).map(|v| &v[..]));
    assert!(!s.get_into(b"nope", &mut buf).unwrap());
    assert_eq!(buf, None);
    let report = s.check().unwrap();
    assert!(report.is_ok(), "{report}");
    assert!(s.memory().unwrap().dram_total() > 0);
}

/// Empty keys, 0x00 and 0xff bytes, keys that are prefixes of others, empty values.
pub fn edge_keys_and_values(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, _) = fresh(f, &d);
    let mut m = Model::new();
    for (i, k) in edge_keys().into_iter().enumerate() {
        let v = if i % 3 == 0 { vec![] } else { vec![i as u8; i % 17] };
        s.put(&k, &v).unwrap();
        m.insert(k, v);
    }
    for (k, v) in &m {
        assert_eq!(s.get(k).unwrap().as_ref(), Some(v), "key {k:?}");
    }
    assert_eq!(contents(&s), m);
    // Delete every other key, including the empty one.
    let keys: Vec<_> = m.keys().cloned().collect();
    for k in keys.iter().step_by(2) {
        assert!(s.delete(k).unwrap(), "delete {k:?}");
        m.remove(k);
    }
    assert_eq!(s.get(b"").unwrap(), None);
    assert_eq!(contents(&s), m);
    assert_eq!(s.len().unwrap(), m.len() as u64);
}

/// The largest key and value are accepted; one byte more is refused with its kind and
/// changes nothing.
pub fn size_limits_change_nothing(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, _) = fresh(f, &d);
    let info = s.info().clone();
    let max_k = info.max_key_len.min(1 << 16);
    let max_v = info.max_value_len.min(1 << 20);
    let big_k = vec![b'k'; max_k];
    let big_v: Vec<u8> = (0..max_v).map(|i| (i * 7) as u8).collect();
    s.put(&big_k, &big_v).unwrap();
    assert_eq!(s.get(&big_k).unwrap().as_deref(), Some(&big_v[..]));
    s.put(b"small", b"1").unwrap();
    let before = contents(&s);
    if info.max_key_len < usize::MAX / 2 {
        let too_long = vec![b'k'; info.max_key_len + 1];
        assert_kind(s.put(&too_long, b"v"), ErrorKind::KeyTooLarge);
        assert_eq!(s.get(&too_long).unwrap(), None);
        assert!(!s.delete(&too_long).unwrap());
    }
    if info.max_value_len < usize::MAX / 2 {
        assert_kind(s.put(b"small", &vec![0; info.max_value_len + 1]), ErrorKind::ValueTooLarge);
    }
    assert_eq!(contents(&s), before, "a refused write changed the store");
    assert!(s.check().unwrap().is_ok());
}

/// first/last on empty and filled stores.
pub fn first_last(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, _) = fresh(f, &d);
    assert_eq!(s.first().unwrap(), None);
    assert_eq!(s.last().unwrap(), None);
    let mut m = Model::new();
    fill(&s, &mut m, edge_keys().into_iter().map(|k| (k.clone(), k)));
    let lo = m.iter().next().map(|(k, v)| (k.clone(), v.clone()));
    let hi = m.iter().next_back().map(|(k, v)| (k.clone(), v.clone()));
    assert_eq!(s.first().unwrap(), lo);
    assert_eq!(s.last().unwrap(), hi);
}

/// A parameter the engine does not declare is refused by name; declared ones with bad
/// values are refused too.
pub fn unknown_params_refused(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let path = d.path().join("p.pool");
    let o = opts().param("no_such_parameter", "1");
    let e = Store::open_with(f, &path, &o).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("no_such_parameter"), "{e}");
    for p in f.params() {
        let o = opts().param(p.name, "\u{1F980} not a value");
        let e = Store::open_with(f, d.path().join(format!("{}.pool", p.name)), &o).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{}: {e}", p.name);
    }
    // Typed options of a type the engine does not know are ignored.
    #[derive(Clone, Debug)]
    struct Foreign;
    let s = Store::open_with(f, &path, &Options::default().with_engine_options(Foreign)).unwrap();
    s.put(b"k", b"v").unwrap();
}

/// sync succeeds; close reports success; a closed store's pool opens again.
pub fn sync_and_close(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, path) = fresh(f, &d);
    s.put(b"k", b"v").unwrap();
    s.sync().unwrap();
    assert!(!s.is_poisoned());
    s.close().unwrap();
    let s = Store::open_with(f, &path, &opts()).unwrap();
    if f.info().persistent {
        assert_eq!(s.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        let r = s.recovery().expect("a persistent engine reports its recovery");
        assert!(r.clean_shutdown, "{r}");
        assert_eq!(r.records, 1, "{r}");
    } else {
        assert!(s.is_empty().unwrap(), "a volatile engine kept data across close");
    }
    s.close().unwrap();
}
