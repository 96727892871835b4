//! SPEC U1: the registry finds engines by name and by pool layout; the store contains an
//! engine's panics; errors carry stable kinds. (What every engine must do is the
//! conformance suite's: crates/conformance.)

use pmkv::{
    Direction, Engine, EngineFactory, EngineInfo, ErrorKind, KeyRange, MemoryUsage, Options, Registry, Result, Store,
};
use std::path::Path;

use pmkv_testutil::{pool_dir as dir, write_file};

#[test]
fn builtin_engines_are_found_by_name_and_layout() {
    let r = Registry::builtin();
    let names = r.names();
    assert!(names.contains(&"hart") && names.contains(&"volatile"), "{names:?}");
    assert_eq!(r.get("hart").unwrap().layout(), Some("hart"));
    let Err(e) = r.get("nosuch") else { panic!("an unknown engine was found") };
    assert_eq!(e.kind(), ErrorKind::UnknownEngine);
    assert!(e.to_string().contains("hart"), "the error lists what is available: {e}");
    assert_eq!(r.for_layout("hart").unwrap().info().name, "hart");
    assert!(r.for_layout("volatile").is_none(), "a volatile engine has no pool layout");
}

#[test]
fn open_existing_uses_the_layout_in_the_header() {
    let d = dir();
    let path = d.path().join("h.pool");
    let s = Store::open(&path, "hart", &Options::default()).unwrap();
    s.put(b"a", b"1").unwrap();
    s.close().unwrap();
    let s = Store::open_existing(&path, &Options::default()).unwrap();
    assert_eq!(s.info().name, "hart");
    assert_eq!(s.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    drop(s);
    // A pool whose layout no engine of this build reads.
    let other = d.path().join("other.pool");
    drop(pmkv_substrate::Pool::create(&other, "zz-future", &pmkv_substrate::PoolOptions::default()).unwrap());
    let e = Store::open_existing(&other, &Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnknownEngine);
    assert!(e.to_string().contains("zz-future"), "{e}");
    // Not a pool at all, and missing.
    let junk = write_file(d.path(), "junk", b"junk");
    assert_eq!(Store::open_existing(junk, &Options::default()).unwrap_err().kind(), ErrorKind::NotAPool);
    assert_eq!(
        Store::open_existing(d.path().join("none"), &Options::default()).unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

/// An engine that panics on the key `boom` and is otherwise the volatile map: the store
/// must turn the panic into an error and refuse further work.
struct Boom(Box<dyn Engine>, std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Engine for Boom {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("boom", "panics on the key 'boom'").persistent(false)
    }
    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        self.0.get_with(key, f)
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        assert!(key != b"boom", "the engine broke");
        self.0.put(key, value)
    }
    fn delete(&self, key: &[u8]) -> Result<bool> {
        self.0.delete(key)
    }
    fn scan(&self, r: &KeyRange, d: Direction, limit: usize, v: pmkv::Visitor<'_>) -> Result<()> {
        self.0.scan(r, d, limit, v)
    }
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn memory(&self) -> MemoryUsage {
        self.0.memory()
    }
    fn check(&self) -> Result<pmkv::CheckReport> {
        self.0.check()
    }
    fn sync(&self) -> Result<()> {
        Ok(())
    }
    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
    fn poison(&self) {
        self.1.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

struct BoomFactory(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl EngineFactory for BoomFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo::new("boom", "panics on the key 'boom'").persistent(false)
    }
    fn layout(&self) -> Option<&'static str> {
        None
    }
    fn open(&self, p: &Path, o: &Options) -> Result<Box<dyn Engine>> {
        Ok(Box::new(Boom(pmkv_volatile::FACTORY.open(p, o)?, self.0.clone())))
    }
}

#[test]
fn an_engine_panic_is_an_error_and_poisons_the_store() {
    let poisoned = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let factory: &'static BoomFactory = Box::leak(Box::new(BoomFactory(poisoned.clone())));
    let mut reg = Registry::new();
    reg.register(factory);
    assert_eq!(reg.names(), vec!["boom"]);
    let s = Store::open_with(reg.get("boom").unwrap(), "/nonexistent/ignored", &Options::default()).unwrap();
    s.put(b"ok", b"1").unwrap();
    let e = s.put(b"boom", b"1").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Internal);
    assert!(e.to_string().contains("the engine broke"), "{e}");
    assert!(poisoned.load(std::sync::atomic::Ordering::SeqCst), "the engine was told to leave its pool unclean");
    assert!(s.is_poisoned());
    assert_eq!(s.get(b"ok").unwrap_err().kind(), ErrorKind::Poisoned);
    assert_eq!(s.range(&KeyRange::all()).next().unwrap().unwrap_err().kind(), ErrorKind::Poisoned);
    assert_eq!(s.close().unwrap_err().kind(), ErrorKind::Poisoned);
}

/// Damage a call meets poisons the pool (left unclean), and `close` reports that damage
/// as `Corrupt` with its message, not a bare "poisoned" that hides the cause and claims
/// the next open mends it (it does not: the next open meets the same damage).
#[test]
fn close_reports_the_damage_that_poisoned_the_pool() {
    let d = dir();
    let path = d.path().join("d.pool");
    let s = Store::open(&path, "hart", &Options::default()).unwrap();
    for i in 0..50u32 {
        s.put(format!("key{i:03}").as_bytes(), format!("VALUE-{i:03}-").repeat(20).as_bytes()).unwrap();
    }
    s.close().unwrap();
    let mut image = std::fs::read(&path).unwrap();
    let at = image.windows(10).position(|w| w == b"VALUE-007-").expect("the value is in the file");
    image[at + 3] ^= 0xff;
    std::fs::write(&path, &image).unwrap();
    let s = Store::open_existing(&path, &Options::default()).unwrap();
    let met = s.get(b"key007").unwrap_err();
    assert_eq!(met.kind(), ErrorKind::Corrupt);
    assert_eq!(s.get(b"key008").unwrap().map(|v| v.len()), Some(200), "the rest stays readable");
    let closed = s.close().unwrap_err();
    assert_eq!(closed.kind(), ErrorKind::Corrupt, "{closed}");
    assert!(closed.to_string().starts_with(met.message()), "{closed} / {met}");
    assert!(closed.to_string().contains("does not repair"), "{closed}");
    // The next open still meets it.
    let s = Store::open_existing(&path, &Options::default()).unwrap();
    assert_eq!(s.get(b"key007").unwrap_err().kind(), ErrorKind::Corrupt);
    assert_eq!(s.close().unwrap_err().kind(), ErrorKind::Corrupt);
}

#[test]
fn error_kinds_have_stable_codes_and_names() {
    assert_eq!(ErrorKind::InvalidArgument.code(), 1);
    assert_eq!(ErrorKind::Corrupt.code(), 10);
    assert_eq!(ErrorKind::Locked.code(), 11);
    assert_eq!(ErrorKind::Internal.code(), 18);
    assert_eq!(ErrorKind::Full.name(), "full");
    for k in ErrorKind::ALL {
        assert_eq!(ErrorKind::from_code(k.code()), Some(k));
    }
}

/// HART registered as an engine that says it cannot run in mode `wal`
/// (`EngineInfo::mode_wal`).
struct NoWal;

impl EngineFactory for NoWal {
    fn info(&self) -> EngineInfo {
        pmkv::Registry::builtin().get("hart").unwrap().info().mode_wal(false)
    }
    fn layout(&self) -> Option<&'static str> {
        Some("hart")
    }
    fn open(&self, p: &Path, o: &Options) -> Result<Box<dyn Engine>> {
        pmkv::Registry::builtin().get("hart").unwrap().open(p, o)
    }
}

/// The store refuses mode `wal` to an engine whose registration says it cannot run in it,
/// creating nothing, and never gives it that mode by default on a disk; it goes by the
/// declared capability, not by the engine's name.
#[test]
fn the_store_refuses_mode_wal_to_an_engine_that_declares_it_cannot_and_never_picks_it() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("n.pool");
    let e = Store::open_with(&NoWal, &path, &Options::default().mode(pmkv::Mode::Wal)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("hart") && e.to_string().contains("use adr"), "{e}");
    assert!(!path.exists(), "a refused open creates nothing");
    let s = Store::open_with(&NoWal, &path, &Options::default().wal_on_disk(true)).unwrap();
    assert_ne!(s.durability().mode, pmkv::Mode::Wal);
    s.put(b"k", b"v").unwrap();
    s.close().unwrap();
    assert!(!d.path().join("n.pool.wal").exists());
    // Every builtin engine with a pool declares it can (Mangosteen too, now that it fences
    // its applied bytes on the thread that flushed them).
    for name in ["hart", "nbtree", "mangosteen"] {
        assert!(Registry::builtin().get(name).unwrap().info().mode_wal, "{name}");
    }
}
