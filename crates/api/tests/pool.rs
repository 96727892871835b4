//! `pmkv::pool`: what tools read of a pool below any engine (`pmkv info`, and `pmkv check`
//! on a pool no engine claims), without changing a byte, and errors instead of panics.

use pmkv::pool::{check_allocator, inspect, AllocatorCheckError};
use pmkv::{Options, Store};

#[test]
fn inspect_and_the_allocator_check_read_a_pool_without_changing_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.pool");
    let store = Store::open(&path, "hart", &Options::default().create(true)).unwrap();
    store.put(b"k", b"v").unwrap();
    store.close().unwrap();
    let before = std::fs::read(&path).unwrap();

    let info = inspect(&path).unwrap();
    assert_eq!(info.header.layout.to_string(), "hart");
    assert!(info.state.clean && !info.in_use);
    let c = check_allocator(&path).unwrap();
    assert_eq!(c.layout, "hart");
    assert!(c.repaired.is_empty(), "{:?}", c.repaired);
    assert!(!c.report.is_empty() && !c.stats.is_empty());
    assert!(std::fs::read(&path).unwrap() == before, "inspecting or checking changed the file");
}

#[test]
fn a_missing_or_foreign_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.pool");
    assert!(inspect(&missing).is_err());
    assert!(matches!(check_allocator(&missing), Err(AllocatorCheckError::Failed(_))));
    let foreign = dir.path().join("foreign.pool");
    std::fs::write(&foreign, vec![7u8; 1 << 16]).unwrap();
    assert!(inspect(&foreign).is_err());
    match check_allocator(&foreign) {
        Err(e @ AllocatorCheckError::Failed(_)) => assert!(!e.to_string().is_empty()),
        other => panic!("a foreign file: {other:?}"),
    }
    assert_eq!(std::fs::read(&foreign).unwrap(), vec![7u8; 1 << 16], "a refused file changed");
}
