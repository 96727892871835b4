//! The papers' workloads (SPEC W), all deterministic given a seed.
//!
//! * key sets — [`dictionary`] (HART's Dictionary), [`strings`] (HART's Sequential and
//!   Random), [`integers`] (NBTree's 8-byte keys, random and dense);
//! * operation mixes and streams — [`mix`] (HART's Read-Intensive / Read-Modified-Write /
//!   Write-Intensive, YCSB A–F, read:write and skew sweeps), with uniform, Zipfian and
//!   latest request distributions.

pub mod dictionary;
pub mod integers;
pub mod mix;
pub mod strings;

use crate::rng::mix64;

/// Which kind of keys a key set holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// `data/words.txt.gz`: 466,551 English words, in file order.
    Dictionary,
    /// Fixed-width base-62 counters over `[0-9A-Za-z]`, ascending.
    Sequential,
    /// Random strings over `[A-Za-z0-9]`, lengths uniform in 5..=16, distinct.
    Random,
    /// Distinct random 8-byte integers, big-endian (byte order = numeric order), never 0.
    Int,
    /// The 8-byte integers 1..=n, big-endian, in a seeded shuffled order (the NBTree
    /// prototype's dense keys).
    Dense,
}

impl KeyKind {
    pub const ALL: [KeyKind; 5] =
        [KeyKind::Dictionary, KeyKind::Sequential, KeyKind::Random, KeyKind::Int, KeyKind::Dense];

    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Dictionary => "dictionary",
            KeyKind::Sequential => "sequential",
            KeyKind::Random => "random",
            KeyKind::Int => "int",
            KeyKind::Dense => "dense",
        }
    }

    /// Number of keys used when the user gives none.
    pub fn default_count(self) -> usize {
        match self {
            KeyKind::Dictionary => dictionary::WORDS,
            _ => 1_000_000,
        }
    }

    /// The largest key set this kind can produce.
    pub fn max_count(self) -> usize {
        match self {
            KeyKind::Dictionary => dictionary::WORDS,
            _ => u32::MAX as usize,
        }
    }
}

impl std::str::FromStr for KeyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<KeyKind, String> {
        KeyKind::ALL
            .into_iter()
            .find(|k| k.name() == s.to_ascii_lowercase())
            .ok_or_else(|| format!("unknown key kind '{s}' (dictionary, sequential, random, int, dense)"))
    }
}

/// `n` distinct keys stored back to back (one allocation, cache-friendly to iterate).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeySet {
    data: Vec<u8>,
    ends: Vec<u64>,
}

impl KeySet {
    pub fn with_capacity(keys: usize, bytes: usize) -> KeySet {
        KeySet { data: Vec::with_capacity(bytes), ends: Vec::with_capacity(keys) }
    }

    /// `n` keys of `kind` for `seed` (Dictionary and Sequential ignore the seed: they are
    /// fixed sequences). Errors if `n` exceeds what the kind has.
    pub fn generate(kind: KeyKind, n: usize, seed: u64) -> Result<KeySet, String> {
        if n > kind.max_count() {
            return Err(format!("the {} workload has at most {} keys, {n} requested", kind.name(), kind.max_count()));
        }
        Ok(match kind {
            KeyKind::Dictionary => dictionary::words(n),
            KeyKind::Sequential => strings::sequential(n),
            KeyKind::Random => strings::random(n, seed),
            KeyKind::Int => integers::uniform_keys(n, seed),
            KeyKind::Dense => integers::dense_keys(n, seed),
        })
    }

    pub fn push(&mut self, key: &[u8]) {
        self.data.extend_from_slice(key);
        self.ends.push(self.data.len() as u64);
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Key `i`.
    #[inline]
    pub fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.data[start..self.ends[i] as usize]
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.len()).map(move |i| self.get(i))
    }

    /// Total key bytes.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// The same keys in a random order of `seed` (a copy: the timed loop then reads them
    /// one after the other, with no lookup in a permutation table).
    pub fn shuffled(&self, seed: u64) -> KeySet {
        let mut order: Vec<usize> = (0..self.len()).collect();
        crate::rng::Rng::derive(seed, 0x006f_7264_6572).shuffle(&mut order);
        let mut ks = KeySet::with_capacity(self.len(), self.bytes());
        for i in order {
            ks.push(self.get(i));
        }
        ks
    }

    /// The first `n` keys.
    pub fn prefix(&self, n: usize) -> KeySet {
        let n = n.min(self.len());
        let end = if n == 0 { 0 } else { self.ends[n - 1] as usize };
        KeySet { data: self.data[..end].to_vec(), ends: self.ends[..n].to_vec() }
    }
}

/// Fill `buf` with the `size`-byte value of key `idx` at `version` (deterministic, so a
/// reader can tell which write it sees; different versions differ in every 8-byte word).
#[inline]
pub fn fill_value(buf: &mut Vec<u8>, idx: u64, version: u64, size: usize) {
    // On the timed path of every put: overwrite in place (no clear-and-extend), one mix per
    // 8 bytes (`fill_value_matches_its_definition` checks the bytes).
    if buf.len() != size {
        buf.resize(size, 0);
    }
    // The first word is one multiply (it is all of an 8-byte value, the common case);
    // longer values continue with the full mix.
    let mut w = (idx ^ version.rotate_left(40)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    if let Ok(word) = <&mut [u8; 8]>::try_from(buf.as_mut_slice()) {
        *word = w.to_le_bytes();
        return;
    }
    for chunk in buf.chunks_mut(8) {
        chunk.copy_from_slice(&w.to_le_bytes()[..chunk.len()]);
        w = mix64(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shuffled key set holds the same keys, each once, in another order, and the same
    /// seed gives the same order.
    #[test]
    fn shuffled_keeps_every_key_once() {
        let ks = KeySet::generate(KeyKind::Random, 5000, 7).unwrap();
        let sh = ks.shuffled(7);
        assert_eq!(sh.len(), ks.len());
        assert_eq!(sh.bytes(), ks.bytes());
        let mut a: Vec<&[u8]> = ks.iter().collect();
        let mut b: Vec<&[u8]> = sh.iter().collect();
        let moved = a.iter().zip(&b).filter(|(x, y)| x != y).count();
        assert!(moved > 4900, "only {moved} of 5000 keys moved");
        a.sort();
        b.sort();
        assert_eq!(a, b);
        assert!(ks.shuffled(7).iter().eq(sh.iter()));
    }

    /// The in-place fill gives the bytes of the definition: 8-byte chunks of a mix chain
    /// started from a multiplicative hash of the index and version, the last chunk cut to
    /// the size.
    #[test]
    fn fill_value_matches_its_definition() {
        let mut buf = Vec::new();
        for size in [0usize, 1, 7, 8, 9, 16, 100] {
            for (idx, version) in [(0u64, 0u64), (5, 1), (u64::MAX, 2)] {
                let mut want = Vec::new();
                let mut w = (idx ^ version.rotate_left(40)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                while want.len() < size {
                    let take = (size - want.len()).min(8);
                    want.extend_from_slice(&w.to_le_bytes()[..take]);
                    w = mix64(w);
                }
                fill_value(&mut buf, idx, version, size);
                assert_eq!(buf, want, "size {size}");
            }
        }
    }
}
