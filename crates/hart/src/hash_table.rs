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

/// A hasher for packed hash keys: murmur3's 64-bit finaliser, which lets every input bit
/// reach the low bits the table indexes with. (A plain multiply does not: a packed hash key
/// has its varying bytes at the top and constant low bits, and the low bits of a product
/// depend only on the low bits of its factors, so every hash key of a given length fell in
/// one bucket: 65,536 two-byte hash keys of random integer keys probed in one chain, 1.2 µs
/// per search instead of 0.3.)
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
        self.0 = fmix64(self.0);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = fmix64(v);
    }
}

#[inline]
fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
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
    /// Inlined into its callers (every put): ~2 ns off an update (6 alternating rounds of
    /// `examples/delete_profile`), whose HART result then need not go through memory.
    /// (Inlining `with` as well made cached searches 2 ns slower.)
    #[inline(always)]
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
mod hasher_tests {
    use super::*;
    use std::hash::Hash;

    /// Packed hash keys that differ only in their top bytes spread over the low bits.
    #[test]
    fn packed_hash_keys_spread_over_the_low_bits() {
        for kh in 1..=4usize {
            let mut buckets = std::collections::HashSet::new();
            for i in 0..4096u64 {
                let key = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_be_bytes();
                let mut h = MulHasher::default();
                hash_key(&key, kh).hash(&mut h);
                buckets.insert(h.finish() & 1023);
            }
            let distinct = 256usize.pow(kh.min(2) as u32).min(4096).min(1024);
            assert!(buckets.len() * 2 > distinct, "k_h {kh}: {} of 1024 buckets used", buckets.len());
        }
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
