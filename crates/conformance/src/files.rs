//! Pools on files: reopen, read-only opens, locking, bad files, panics (SPEC P1, R2, R4).

use crate::util::*;
use pmkv::{EngineFactory, ErrorKind, Options, Store};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn file_bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).expect("read pool file")
}

/// Everything written is there after close and reopen, and after a plain drop and
/// reopen; recovery reports a clean shutdown. A volatile engine keeps nothing.
pub fn reopen_keeps_everything(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, path) = fresh(f, &d);
    let mut m = Model::new();
    fill(&s, &mut m, edge_keys().into_iter().map(|k| (k.clone(), k.repeat(3))));
    fill(&s, &mut m, (0..3000u32).map(|i| (format!("r{i:05}").into_bytes(), tagged_value(b"r", i, i as usize % 300))));
    for i in (0..3000u32).step_by(3) {
        let k = format!("r{i:05}").into_bytes();
        assert!(s.delete(&k).unwrap());
        m.remove(&k);
    }
    s.close().unwrap();
    let s = Store::open_with(f, &path, &opts()).unwrap();
    if !f.info().persistent {
        assert!(s.is_empty().unwrap());
        return;
    }
    assert_eq!(contents(&s), m);
    assert_eq!(s.len().unwrap(), m.len() as u64);
    let r = s.recovery().unwrap();
    assert!(r.clean_shutdown && r.records == m.len() as u64, "{r}");
    assert!(s.check().unwrap().is_ok());
    s.put(b"after reopen", b"1").unwrap();
    m.insert(b"after reopen".to_vec(), b"1".to_vec());
    drop(s);
    let s = Store::open_existing(&path, &opts());
    // open_existing uses the builtin registry: only engines registered there can be found.
    let s = match s {
        Ok(s) => s,
        Err(e) if e.kind() == ErrorKind::UnknownEngine => Store::open_with(f, &path, &opts()).unwrap(),
        Err(e) => panic!("reopen by layout: {e}"),
    };
    assert!(s.recovery().unwrap().clean_shutdown, "a dropped store was not marked clean");
    assert_eq!(contents(&s), m);
}

/// Read-only opens read, refuse every write with `ReadOnly`, may be several at once,
/// keep a read-write open out, and leave the file byte for byte as it was.
pub fn read_only_open_changes_nothing(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, path) = fresh(f, &d);
    let mut m = Model::new();
    fill(&s, &mut m, (0..500u32).map(|i| (format!("o{i:03}").into_bytes(), vec![i as u8; 12])));
    s.close().unwrap();
    let ro = opts().read_only(true).create(false);
    let before = f.info().persistent.then(|| file_bytes(&path));
    let a = Store::open_with(f, &path, &ro).unwrap();
    let b = Store::open_with(f, &path, &ro).unwrap();
    if f.info().persistent {
        assert_eq!(contents(&a), m);
        assert_eq!(contents(&b), m);
        assert!(a.check().unwrap().is_ok());
        assert_kind(Store::open_with(f, &path, &opts()), ErrorKind::Locked);
    }
    assert_kind(a.put(b"o001", b"x"), ErrorKind::ReadOnly);
    assert_kind(a.put(b"new", b"x"), ErrorKind::ReadOnly);
    assert_kind(a.delete(b"o002"), ErrorKind::ReadOnly);
    let mut batch = pmkv::WriteBatch::new();
    batch.put("z", "1");
    assert_kind(a.write(&batch), ErrorKind::ReadOnly);
    assert!(!a.is_poisoned());
    a.close().unwrap();
    b.close().unwrap();
    if let Some(before) = before {
        assert!(file_bytes(&path) == before, "a read-only open changed the pool file");
        // A read-only open of a missing pool creates nothing.
        let missing = d.path().join("missing.pool");
        assert_kind(Store::open_with(f, &missing, &ro), ErrorKind::NotFound);
        assert!(!missing.exists());
    }
}

/// A second read-write open of a pool in use is refused with `Locked` (and works once
/// the first is closed).
pub fn second_open_is_refused(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, path) = fresh(f, &d);
    s.put(b"a", b"1").unwrap();
    if !f.info().persistent {
        // Nothing is shared between opens of a volatile engine.
        let t = Store::open_with(f, &path, &opts()).unwrap();
        assert_eq!(t.get(b"a").unwrap(), None);
        return;
    }
    assert_kind(Store::open_with(f, &path, &opts()), ErrorKind::Locked);
    assert_kind(Store::open_with(f, &path, &opts().read_only(true)), ErrorKind::Locked);
    s.close().unwrap();
    let t = Store::open_with(f, &path, &opts()).unwrap();
    assert_eq!(t.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
}

/// Foreign, truncated, empty and other-engine files are refused with their kind and are
/// not changed; a missing pool with `create` off is `NotFound` and not created.
pub fn foreign_and_damaged_files_are_refused(f: &'static dyn EngineFactory) {
    let Some(layout) = f.layout() else {
        assert!(!f.info().persistent, "a persistent engine must name its pool layout");
        return;
    };
    let d = pool_dir();
    let o = opts().create(false);
    let cases: Vec<(&str, Vec<u8>, &[ErrorKind])> = vec![
        (
            "random.pool",
            (0..1_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect(),
            &[ErrorKind::NotAPool],
        ),
        ("empty.pool", vec![], &[ErrorKind::NotAPool, ErrorKind::Corrupt]),
        ("text.pool", b"hello, I am a text file\n".repeat(100), &[ErrorKind::NotAPool]),
    ];
    for (name, bytes, kinds) in cases {
        let p = d.path().join(name);
        std::fs::write(&p, &bytes).unwrap();
        for o in [o.clone(), o.clone().read_only(true), opts()] {
            let e = Store::open_with(f, &p, &o).unwrap_err();
            assert!(kinds.contains(&e.kind()), "{name}: {e} ({})", e.kind());
            assert!(file_bytes(&p) == bytes, "{name}: refused open changed the file");
        }
    }
    // A real pool, cut short.
    let (s, path) = fresh(f, &d);
    for i in 0..2000u32 {
        s.put(format!("t{i}").as_bytes(), &[7; 100]).unwrap();
    }
    s.close().unwrap();
    let full = file_bytes(&path);
    let cut = d.path().join("cut.pool");
    std::fs::write(&cut, &full[..full.len() / 2]).unwrap();
    let e = Store::open_with(f, &cut, &o).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(file_bytes(&cut) == full[..full.len() / 2]);
    // A pool of another engine.
    let other = d.path().join("other.pool");
    let other_layout = if layout == "zz-other" { "zz-another" } else { "zz-other" };
    drop(pmkv_substrate::Pool::create(&other, other_layout, &opts().pool_options()).unwrap());
    let other_bytes = file_bytes(&other);
    assert_kind(Store::open_with(f, &other, &opts()), ErrorKind::WrongEngine);
    assert_kind(Store::open_with(f, &other, &opts().read_only(true)), ErrorKind::WrongEngine);
    assert!(file_bytes(&other) == other_bytes);
    // Missing, create off.
    let missing = d.path().join("missing.pool");
    assert_kind(Store::open_with(f, &missing, &o), ErrorKind::NotFound);
    assert!(!missing.exists());
}

/// A panic inside a write (injected at the n-th fence of a put on a file pool) becomes an
/// `Internal` error, poisons the store (later calls: `Poisoned`; close: `Poisoned`), and
/// leaves the pool marked unclean: the next open runs recovery, which yields the state
/// before or after the put, and `check` is clean.
pub fn panic_in_write_leaves_pool_unclean(f: &'static dyn EngineFactory) {
    if !f.info().persistent {
        return;
    }
    let d = pool_dir();
    for nth in 1..=3u64 {
        let path = d.path().join(format!("panic{nth}.pool"));
        let s = Store::open_with(f, &path, &opts()).unwrap();
        let mut m = Model::new();
        fill(&s, &mut m, (0..100u32).map(|i| (format!("p{i:03}").into_bytes(), vec![i as u8; 20])));
        let pool = s.engine().pool().expect("a persistent engine has a pool").clone();
        // The fences an update of this key issues, counted on an update of the same shape
        // as the faulted one below (same value size: a size change may take more fences,
        // as ART+CoW's does): an engine whose put has fewer than 3 (Mangosteen's has 2:
        // one fence and one persist) is tried at each of its own.
        s.put(b"p050", &[0xdd; 40]).unwrap();
        let probe = Arc::new(AtomicU64::new(0));
        let pc = probe.clone();
        pool.set_fault_hook(Box::new(move |pt| {
            if pt.kind == pmkv_substrate::PointKind::Fence {
                pc.fetch_add(1, Ordering::SeqCst);
            }
        }));
        s.put(b"p050", &[0xcc; 40]).unwrap();
        pool.clear_fault_hook();
        m.insert(b"p050".to_vec(), vec![0xcc; 40]);
        if nth > probe.load(Ordering::SeqCst) {
            assert!(nth > 1, "a put issued no fence");
            s.close().unwrap();
            break;
        }
        let before = m.clone();
        let mut after = m.clone();
        after.insert(b"p050".to_vec(), vec![0xee; 40]);
        let fences = Arc::new(AtomicU64::new(0));
        let fc = fences.clone();
        pool.set_fault_hook(Box::new(move |pt| {
            if pt.kind == pmkv_substrate::PointKind::Fence && fc.fetch_add(1, Ordering::SeqCst) + 1 == nth {
                panic!("injected fault at fence {nth}");
            }
        }));
        let e = s.put(b"p050", &[0xee; 40]).unwrap_err();
        pool.clear_fault_hook();
        if fences.load(Ordering::SeqCst) < nth {
            // The put issued fewer fences than `nth`: it completed.
            panic!("put completed with {} fences before fence {nth}: {e}", fences.load(Ordering::SeqCst));
        }
        assert_eq!(e.kind(), ErrorKind::Internal, "{e}");
        assert!(s.is_poisoned());
        assert_kind(s.get(b"p001"), ErrorKind::Poisoned);
        assert_kind(s.put(b"x", b"y"), ErrorKind::Poisoned);
        drop(pool);
        assert_kind(s.close(), ErrorKind::Poisoned);
        let s = Store::open_with(f, &path, &opts()).unwrap();
        let r = s.recovery().unwrap();
        assert!(!r.clean_shutdown, "fence {nth}: the pool was marked clean after a panic: {r}");
        let got = contents(&s);
        assert!(got == before || got == after, "fence {nth}: recovered state is neither before nor after");
        let c = s.check().unwrap();
        assert!(c.is_ok(), "fence {nth}: {c}");
        s.close().unwrap();
        let s = Store::open_with(f, &path, &Options::default().create(false)).unwrap();
        assert!(s.recovery().unwrap().clean_shutdown);
    }
}
