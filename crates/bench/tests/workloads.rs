//! SPEC W: key sets and operation mixes are what the papers define, and deterministic.

use pmkv_bench::workload::mix::{self, count_kinds, Mix, Op, OpKind};
use pmkv_bench::workload::strings::{ALPHABET, RANDOM_LEN, SEQUENTIAL_LEN};
use pmkv_bench::workload::{dictionary, KeyKind, KeySet};
use std::collections::HashSet;

fn all_mixes() -> Vec<Mix> {
    let mut v = vec![Mix::hart_read_intensive(), Mix::hart_read_modify_write(), Mix::hart_write_intensive()];
    v.extend("abcdef".chars().map(|c| Mix::ycsb(c, 0.99).unwrap()));
    v.extend([0.0, 0.3, 0.5, 1.0].iter().map(|&r| Mix::read_write(r, 0.99)));
    v
}

/// Each operation kind's share over 100,000 operations is within ±1 percentage point.
#[test]
fn w_mixes_hit_their_ratios() {
    for m in all_mixes() {
        m.validate().unwrap();
        for threads in [1, 4] {
            let s = mix::generate(&m, 10_000, 0, 100_000 / threads, threads, 7);
            let total = s.measured_ops() as f64;
            assert_eq!(total, 100_000.0);
            let counts = count_kinds(&s);
            for k in OpKind::ALL {
                let got = counts.get(&k).copied().unwrap_or(0) as f64 / total;
                assert!(
                    (got - m.share(k)).abs() <= 0.01,
                    "{}: {} share {got:.4}, expected {}",
                    m.name,
                    k.name(),
                    m.share(k)
                );
            }
        }
    }
}

#[test]
fn w_hart_mixes_are_the_papers() {
    let ri = Mix::hart_read_intensive();
    assert_eq!((ri.insert, ri.search, ri.update, ri.delete), (0.1, 0.7, 0.1, 0.1));
    let rmw = Mix::hart_read_modify_write();
    assert_eq!((rmw.search, rmw.update), (0.5, 0.5));
    let wi = Mix::hart_write_intensive();
    assert_eq!((wi.search, wi.insert, wi.update), (0.2, 0.4, 0.4));
    assert_eq!(Mix::by_name("ycsb-e", 0.99).unwrap().scan, 0.95);
    assert!(Mix::by_name("ycsb-g", 0.99).is_none());
}

/// Inserts use fresh keys above the loaded ones, disjoint across threads; deletes remove
/// keys that exist; reads stay within the loaded records.
#[test]
fn w_streams_use_keys_consistently() {
    let m = Mix::hart_read_intensive();
    let s = mix::generate(&m, 5_000, 100, 20_000, 3, 11);
    let mut inserted = HashSet::new();
    for t in 0..3 {
        for op in &s.per_thread[t] {
            match *op {
                Op::Insert(k) => {
                    assert!(k >= 5_000 && k < s.total_keys);
                    assert!(inserted.insert(k), "key {k} inserted twice");
                }
                Op::Search(k) | Op::Update(k) => assert!(k < 5_000),
                Op::Delete(k) => assert!(k < s.total_keys),
                _ => {}
            }
        }
    }
    assert_eq!(inserted.len() as u64, s.total_keys - 5_000);
}

/// Random strings: only [A-Za-z0-9], each length 5..=16 within ±5% (relative) of 1/12 of
/// 120,000 keys (expected 10,000 each, sd ≈ 96: ±5% is > 5 sd), every character used with
/// roughly equal frequency, all keys distinct.
#[test]
fn w_random_strings_alphabet_and_length_distribution() {
    let n = 120_000;
    let ks = KeySet::generate(KeyKind::Random, n, 3).unwrap();
    assert_eq!(ks.len(), n);
    let (lo, hi) = RANDOM_LEN;
    assert_eq!((lo, hi), (5, 16));
    let mut by_len = vec![0usize; hi + 1];
    let mut by_char = [0usize; 256];
    let mut distinct = HashSet::new();
    for k in ks.iter() {
        assert!((lo..=hi).contains(&k.len()), "length {}", k.len());
        by_len[k.len()] += 1;
        for &c in k {
            assert!(ALPHABET.contains(&c), "byte {c:#x} not in [A-Za-z0-9]");
            by_char[c as usize] += 1;
        }
        assert!(distinct.insert(k.to_vec()));
    }
    let expect = n as f64 / (hi - lo + 1) as f64;
    for (len, &count) in by_len.iter().enumerate().skip(lo) {
        let rel = (count as f64 - expect).abs() / expect;
        assert!(rel < 0.05, "length {len}: {count} keys, expected {expect:.0}");
    }
    let chars: usize = by_char.iter().sum();
    for &c in ALPHABET.iter() {
        let rel = (by_char[c as usize] as f64 - chars as f64 / 62.0).abs() / (chars as f64 / 62.0);
        assert!(rel < 0.03, "character {} used {} times", c as char, by_char[c as usize]);
    }
}

#[test]
fn w_sequential_keys_ascend_over_the_alphabet() {
    let ks = KeySet::generate(KeyKind::Sequential, 10_000, 0).unwrap();
    let v: Vec<&[u8]> = ks.iter().collect();
    assert!(v.iter().all(|k| k.len() == SEQUENTIAL_LEN && k.iter().all(|c| ALPHABET.contains(c))));
    assert!(v.windows(2).all(|w| w[0] < w[1]), "sequential keys must be strictly ascending");
    assert_eq!(v[0], b"00000000");
    assert_eq!(v[62], b"00000010");
}

#[test]
fn w_dictionary_is_the_whole_word_list() {
    let d = dictionary::all();
    assert_eq!(d.len(), dictionary::WORDS);
    assert_eq!(d.len(), 466_551);
    let set: HashSet<&[u8]> = d.iter().collect();
    assert_eq!(set.len(), d.len(), "words are distinct");
    assert!(d.iter().all(|w| !w.is_empty() && !w.contains(&b'\n')));
    assert!(KeySet::generate(KeyKind::Dictionary, 466_552, 0).is_err());
}

#[test]
fn w_int_keys_are_8_bytes_distinct_nonzero() {
    let ks = KeySet::generate(KeyKind::Int, 50_000, 5).unwrap();
    let mut seen = HashSet::new();
    for k in ks.iter() {
        assert_eq!(k.len(), 8);
        let v = u64::from_be_bytes(k.try_into().unwrap());
        assert_ne!(v, 0);
        assert!(seen.insert(v));
    }
}

#[test]
fn w_dense_keys_are_one_to_n_shuffled() {
    let ks = KeySet::generate(KeyKind::Dense, 50_000, 5).unwrap();
    let v: Vec<u64> = ks.iter().map(|k| u64::from_be_bytes(k.try_into().unwrap())).collect();
    let mut sorted = v.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=50_000).collect::<Vec<u64>>(), "exactly 1..=n");
    let in_place = v.iter().enumerate().filter(|&(i, &k)| k == i as u64 + 1).count();
    assert!(in_place < 100, "shuffled: {in_place} keys in ascending position");
    assert_eq!("dense".parse::<KeyKind>().unwrap(), KeyKind::Dense);
}

/// Same seed, same key sets and operation streams; another seed, different ones.
#[test]
fn w_same_seed_same_streams_different_seed_different() {
    for m in all_mixes() {
        let a = mix::generate(&m, 10_000, 500, 5_000, 2, 42);
        let b = mix::generate(&m, 10_000, 500, 5_000, 2, 42);
        let c = mix::generate(&m, 10_000, 500, 5_000, 2, 43);
        assert_eq!(a, b, "{}: same seed must give the same streams", m.name);
        assert_ne!(a, c, "{}: another seed must give other streams", m.name);
    }
    for kind in [KeyKind::Random, KeyKind::Int, KeyKind::Dense] {
        let a = KeySet::generate(kind, 10_000, 1).unwrap();
        assert_eq!(a, KeySet::generate(kind, 10_000, 1).unwrap());
        assert_ne!(a, KeySet::generate(kind, 10_000, 2).unwrap());
    }
}

/// `--zipf-order key`: the streams' ranks become the indices of the keys in key order, so
/// the smallest keys are the hottest (and neighbours), as in the NBTree prototype's YCSB.
#[test]
fn w_zipf_by_key_makes_the_smallest_keys_hottest() {
    let n = 10_000u64;
    let ks = KeySet::generate(KeyKind::Dense, n as usize, 3).unwrap();
    let mut m = Mix::ycsb('c', 0.99).unwrap();
    m.dist = mix::Dist::ZipfByKey(0.99);
    let mut st = mix::generate(&m, n, 0, 100_000, 1, 7);
    let mut by_key: Vec<u64> = (0..n).collect();
    by_key.sort_by(|&a, &b| ks.get(a as usize).cmp(ks.get(b as usize)));
    st.order_by_key(&by_key);
    let mut counts = std::collections::HashMap::new();
    for op in st.measured_part(0) {
        let k = u64::from_be_bytes(ks.get(op.key() as usize).try_into().unwrap());
        *counts.entry(k).or_insert(0u64) += 1;
    }
    let hottest = counts.iter().max_by_key(|(_, &c)| c).map(|(&k, _)| k).unwrap();
    assert_eq!(hottest, 1, "key 1 is the hottest");
    let top10: u64 = (1..=10).map(|k| counts.get(&k).copied().unwrap_or(0)).sum();
    assert!(top10 > 25_000, "keys 1..=10 take {top10} of 100,000 operations");
    // Scrambled, the same ranks land anywhere: keys 1..=10 are no hotter than others.
    m.dist = mix::Dist::Zipf(0.99);
    let st = mix::generate(&m, n, 0, 100_000, 1, 7);
    let low: u64 = st
        .measured_part(0)
        .iter()
        .filter(|op| u64::from_be_bytes(ks.get(op.key() as usize).try_into().unwrap()) <= 10)
        .count() as u64;
    assert!(low < 25_000, "scrambled: keys 1..=10 take {low}");
}
