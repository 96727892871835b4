//! The DRAM hash table of HART (§III.A.1, Fig. 1): hash key (the first k_h bytes of a key)
//! → its ART, plus an ordered index of hash keys for range scans (SPEC H8).
//!
//! *Hash keys* are packed into a `u64`: up to 7 key bytes big-endian in the top 56 bits and
//! the byte count in the low 8. Comparing packed values compares byte strings
//! lexicographically ("a" < "a\0" < "ab"), so the ordered index yields ARTs in key order.
//!
//! *Concurrency* (SPEC H7, §IV.G): the table is split into 64 shards, each behind a
//! reader-writer lock. An operation holds its shard's read lock for its whole duration
//! and takes the ART's own reader-writer lock inside it — the paper's per-ART lock. Only
//! creating or freeing an ART takes a shard's write lock, which therefore also waits for
//! every operation inside that shard's ARTs: this is what makes freeing an empty ART
//! (SPEC H6) safe without reference counts.

use crate::art::arena::NodeArena;
use crate::art::Art;
use parking_lot::{RwLock, RwLockReadGuard};
use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

pub type HashKey = u64;
const SHARDS: usize = 64;

/// Pack the hash key of `key` (its first `kh` bytes, or all of it if shorter).
pub fn hash_key(key: &[u8], kh: usize) -> HashKey {
    let n = key.len().min(kh);
    let mut v = 0u64;
    for (i, &b) in key[..n].iter().enumerate() {
        v |= (b as u64) << (56 - 8 * i);
    }
    v | n as u64
}

/// The bytes of a packed hash key.
pub fn hash_key_bytes(hk: HashKey) -> Vec<u8> {
    let n = (hk & 0xff) as usize;
    (0..n).map(|i| (hk >> (56 - 8 * i)) as u8).collect()
}

/// A multiplicative hasher: hash keys are already well-mixed small integers.
#[derive(Default)]
pub struct MulHasher(u64);
impl Hasher for MulHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        let x = v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = x ^ (x >> 29);
    }
}

type Map = HashMap<HashKey, RwLock<Art>, BuildHasherDefault<MulHasher>>;

pub struct HashTable {
    shards: Vec<RwLock<Map>>,
    ordered: RwLock<BTreeSet<HashKey>>,
    /// Where every ART of the table allocates its nodes.
    arena: Arc<NodeArena>,
}

impl Default for HashTable {
    fn default() -> Self {
        HashTable {
            shards: (0..SHARDS).map(|_| RwLock::new(Map::default())).collect(),
            ordered: RwLock::new(BTreeSet::new()),
            arena: Arc::new(NodeArena::new()),
        }
    }
}

fn shard_of(hk: HashKey) -> usize {
    (hk.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % SHARDS
}

impl HashTable {
    /// Run `f` on the ART of `hk` under the shard read lock (None if there is no ART).
    pub fn with<R>(&self, hk: HashKey, f: impl FnOnce(&RwLock<Art>) -> R) -> Option<R> {
        let shard = self.shards[shard_of(hk)].read();
        shard.get(&hk).map(f)
    }

    /// Run `f` on the ART of `hk`, creating an empty one (starting at `depth`) if needed.
    pub fn with_or_create<R>(&self, hk: HashKey, depth: usize, f: impl FnOnce(&RwLock<Art>) -> R) -> R {
        {
            let shard = self.shards[shard_of(hk)].read();
            if let Some(a) = shard.get(&hk) {
                return f(a);
            }
        }
        let mut shard = self.shards[shard_of(hk)].write();
        if let std::collections::hash_map::Entry::Vacant(e) = shard.entry(hk) {
            e.insert(RwLock::new(Art::new(depth, self.arena.clone())));
            self.ordered.write().insert(hk);
        }
        let shard = parking_lot::RwLockWriteGuard::downgrade(shard);
        f(shard.get(&hk).unwrap())
    }

    /// Free the ART of `hk` if it is (still) empty (SPEC H6).
    pub fn remove_if_empty(&self, hk: HashKey) -> bool {
        let mut shard = self.shards[shard_of(hk)].write();
        if shard.get(&hk).is_some_and(|a| a.read().is_empty()) {
            shard.remove(&hk);
            self.ordered.write().remove(&hk);
            return true;
        }
        false
    }

    /// Smallest hash key `>= from` that has an ART.
    pub fn next_at_or_after(&self, from: HashKey) -> Option<HashKey> {
        self.ordered.read().range(from..).next().copied()
    }

    /// Largest hash key `<= from` that has an ART.
    pub fn prev_at_or_before(&self, from: HashKey) -> Option<HashKey> {
        self.ordered.read().range(..=from).next_back().copied()
    }

    /// Number of ARTs.
    pub fn arts(&self) -> usize {
        self.ordered.read().len()
    }

    /// Run `f` on a quiescent table: every shard is write-locked (in index order), so no
    /// operation is under way — each holds its shard's read lock for its whole duration,
    /// and takes ART locks only inside it — and none starts until `f` returns. `f` gets
    /// every ART with its hash key, in hash-key order. `f` must not call back into the
    /// table (it would wait for itself).
    pub fn quiesced<R>(&self, f: impl FnOnce(&[(HashKey, &Art)]) -> R) -> R {
        let mut shards: Vec<_> = self.shards.iter().map(|s| s.write()).collect();
        let mut arts: Vec<(HashKey, &Art)> =
            shards.iter_mut().flat_map(|g| g.iter_mut().map(|(k, a)| (*k, &*a.get_mut()))).collect();
        arts.sort_unstable_by_key(|(k, _)| *k);
        f(&arts)
    }

    /// Visit every ART (order unspecified) under read locks.
    pub fn for_each(&self, mut f: impl FnMut(HashKey, &RwLock<Art>)) {
        for s in &self.shards {
            let g: RwLockReadGuard<'_, Map> = s.read();
            for (k, a) in g.iter() {
                f(*k, a);
            }
        }
    }

    /// The node arena of the table's ARTs.
    pub fn arena(&self) -> &NodeArena {
        &self.arena
    }

    /// Approximate DRAM bytes of the table and the ordered index.
    pub fn dram_bytes(&self) -> (u64, u64) {
        let mut table = 0u64;
        for s in &self.shards {
            let g = s.read();
            table += (g.capacity() * (8 + std::mem::size_of::<RwLock<Art>>() + 1)) as u64;
        }
        let ordered = self.ordered.read().len() as u64 * 16;
        (table, ordered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_hash_keys_order_like_byte_strings() {
        let mut ks: Vec<&[u8]> = vec![b"", b"a", b"a\0", b"ab", b"b", b"\xff", b"\0", b"\0\0"];
        let mut packed: Vec<(u64, &[u8])> = ks.iter().map(|k| (hash_key(k, 2), *k)).collect();
        packed.sort();
        ks.sort();
        assert_eq!(packed.iter().map(|p| p.1).collect::<Vec<_>>(), ks);
        for k in ks {
            assert_eq!(hash_key_bytes(hash_key(k, 7)), k);
        }
    }
}
