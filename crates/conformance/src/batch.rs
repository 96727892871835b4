//! Write batches.

use crate::util::*;
use pmkv::{EngineFactory, ErrorKind, WriteBatch};

/// A batch applies its operations in order: a later write of a key wins, deletes of
/// missing keys are no-ops, the result equals the model.
pub fn batch_applies_in_order(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, _) = fresh(f, &d);
    let mut m = Model::new();
    fill(&s, &mut m, (0..50u32).map(|i| (format!("b{i:02}").into_bytes(), vec![0; 3])));
    let mut b = WriteBatch::new();
    b.put("b01", "one").delete("b02").put("b02", "two again").put("new", "x").delete("new").delete("missing");
    b.put("b03", vec![9u8; 500]).put("b03", "short").put("", "empty key");
    s.write(&b).unwrap();
    m.insert(b"b01".to_vec(), b"one".to_vec());
    m.insert(b"b02".to_vec(), b"two again".to_vec());
    m.insert(b"b03".to_vec(), b"short".to_vec());
    m.insert(b"".to_vec(), b"empty key".to_vec());
    assert_eq!(contents(&s), m);
    s.write(&WriteBatch::new()).unwrap();
    assert_eq!(contents(&s), m);
    assert!(s.check().unwrap().is_ok());
}

/// A batch with one oversized key or value is refused before anything is applied.
pub fn batch_checks_sizes_first(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, _) = fresh(f, &d);
    let info = s.info().clone();
    s.put(b"keep", b"1").unwrap();
    let before = contents(&s);
    if info.max_value_len < usize::MAX / 2 {
        let mut b = WriteBatch::new();
        b.put("a", "1").delete("keep").put("c", vec![0u8; info.max_value_len + 1]);
        assert_kind(s.write(&b), ErrorKind::ValueTooLarge);
        assert_eq!(contents(&s), before);
    }
    if info.max_key_len < usize::MAX / 2 {
        let mut b = WriteBatch::new();
        b.put("a", "1").delete(vec![b'k'; info.max_key_len + 1]);
        assert_kind(s.write(&b), ErrorKind::KeyTooLarge);
        assert_eq!(contents(&s), before);
    }
}
