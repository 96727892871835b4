//! The volatile baseline: a `BTreeMap` behind a reader-writer lock. No persistence at all;
//! every benchmark measures it in the same run as the engines so that "faster than DRAM"
//! claims are ratios on the same machine, not numbers from elsewhere.

use crate::engine::{Engine, MemoryUsage, ScanRange};
use crate::error::Result;
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::ops::Bound;

#[derive(Default)]
pub struct Volatile {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl Volatile {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Engine for Volatile {
    fn name(&self) -> &'static str {
        "volatile"
    }
    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let m = self.map.read();
        match m.get(key) {
            Some(v) => {
                f(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut m = self.map.write();
        match m.get_mut(key) {
            Some(v) => {
                v.clear();
                v.extend_from_slice(value);
            }
            None => {
                m.insert(key.to_vec(), value.to_vec());
            }
        }
        Ok(())
    }
    fn delete(&self, key: &[u8]) -> Result<bool> {
        Ok(self.map.write().remove(key).is_some())
    }
    fn scan(&self, range: &ScanRange, f: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        let m = self.map.read();
        let lo = range.start_bound();
        for (n, (k, v)) in m.range::<[u8], _>((lo, Bound::Unbounded)).enumerate() {
            if n >= range.limit || !range.before_end(k) || !f(k, v) {
                break;
            }
        }
        Ok(())
    }
    fn len(&self) -> u64 {
        self.map.read().len() as u64
    }
    fn memory(&self) -> MemoryUsage {
        let m = self.map.read();
        let bytes: u64 = m.iter().map(|(k, v)| (k.capacity() + v.capacity() + 48) as u64).sum();
        MemoryUsage { dram: vec![("btree entries (estimate)".into(), bytes)], pm: vec![] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upsert_delete_scan() {
        let e = Volatile::new();
        e.put(b"b", b"2").unwrap();
        e.put(b"a", b"1").unwrap();
        e.put(b"a", b"11").unwrap();
        e.put(b"c", b"3").unwrap();
        assert_eq!(e.len(), 3);
        let mut got = Vec::new();
        let r = ScanRange { start: Bound::Excluded(b"a".to_vec()), end: Bound::Unbounded, limit: 5 };
        e.scan(&r, &mut |k, v| {
            got.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
        assert_eq!(got, vec![(b"b".to_vec(), b"2".to_vec()), (b"c".to_vec(), b"3".to_vec())]);
        assert!(e.delete(b"b").unwrap());
        assert!(!e.delete(b"b").unwrap());
        assert_eq!(e.min_max().unwrap(), Some((b"a".to_vec(), b"c".to_vec())));
    }
}
