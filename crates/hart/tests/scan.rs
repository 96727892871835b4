//! SPEC H8, both directions: for random key sets (the empty key, 0x00 and 0xff bytes, keys
//! shorter than k_h, keys that are prefixes of others, keys long enough for a key object)
//! and k_h 0..=3 and 7, every combination of bound kinds (included, excluded, unbounded;
//! both ends) and several limits, the reverse scan equals the forward scan reversed, and
//! both equal a `BTreeMap` model. `min_max` agrees with the model too.

mod common;
use common::*;
use proptest::prelude::*;

fn check(kh: usize, keys: Vec<Vec<u8>>, deletes: Vec<prop::sample::Index>, extra: Vec<Vec<u8>>) {
    let h = sim_hart(1 << 20, kh);
    let mut m = Model::new();
    for (i, k) in keys.iter().enumerate() {
        // Inline (at most 8 bytes) and out-of-line values.
        let v = if i % 3 == 0 { vec![i as u8; 20] } else { (i as u32).to_le_bytes().to_vec() };
        h.put(k, &v).unwrap();
        m.insert(k.clone(), v);
    }
    // Deletes empty some ARTs, which HART frees (the hash-key index changes too).
    for d in &deletes {
        if !keys.is_empty() {
            let k = &keys[d.index(keys.len())];
            assert_eq!(h.delete(k).unwrap(), m.remove(k).is_some());
        }
    }
    let ends = m.keys().next().cloned().zip(m.keys().next_back().cloned());
    assert_eq!(h.min_max().unwrap(), ends);

    // Bounds: present keys, deleted keys, their prefixes and extensions, random keys.
    let mut cands: Vec<Vec<u8>> = extra;
    for k in keys.iter().take(8) {
        cands.push(k.clone());
        cands.push(k[..k.len() / 2].to_vec());
        cands.push([k.as_slice(), &[0]].concat());
    }
    cands.push(Vec::new());
    let n = cands.len();
    let pairs: Vec<(&[u8], &[u8])> = (0..n)
        .flat_map(|i| {
            [(cands[i].as_slice(), cands[i].as_slice()), (cands[i].as_slice(), cands[(i * 7 + 3) % n].as_slice())]
        })
        .collect();
    for (a, b) in pairs {
        for (start, end) in bound_kinds(a).into_iter().flat_map(|s| bound_kinds(b).map(move |e| (s, e))) {
            let want = model_range(&m, start, end, usize::MAX, false);
            let fwd = scan(&h, start, end, usize::MAX, false);
            let rev = scan(&h, start, end, usize::MAX, true);
            assert_eq!(fwd, want, "forward {start:?}..{end:?} k_h {kh}");
            let mut fwd_reversed = fwd.clone();
            fwd_reversed.reverse();
            assert_eq!(rev, fwd_reversed, "reverse {start:?}..{end:?} k_h {kh}");
            for limit in [0, 1, 2, 5] {
                let take = limit.min(want.len());
                assert_eq!(scan(&h, start, end, limit, false), want[..take], "forward limit {limit}");
                assert_eq!(scan(&h, start, end, limit, true), fwd_reversed[..take], "reverse limit {limit}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn reverse_scans_mirror_forward_scans_and_the_model(
        kh in prop_oneof![0usize..=3, Just(7usize)],
        keys in proptest::collection::vec(strategy::key(64), 0..50),
        deletes in proptest::collection::vec(any::<prop::sample::Index>(), 0..10),
        extra in proptest::collection::vec(strategy::key(64), 0..4),
    ) {
        check(kh, keys, deletes, extra);
    }
}

/// The edge cases by name, for k_h 0 and 7 (no hashing and the widest hash key): the
/// empty key, keys that are prefixes of each other and of the hash key, 0x00 bytes.
#[test]
fn prefix_keys_and_the_empty_key_at_the_extreme_hash_key_lengths() {
    let keys: Vec<Vec<u8>> = [
        &b""[..],
        b"\0",
        b"\0\0",
        b"a",
        b"a\0",
        b"ab",
        b"abcdefg",
        b"abcdefg\0",
        b"abcdefgh",
        b"abcdefghij",
        b"\xff",
        b"\xff\xff\xff\xff\xff\xff\xff\xff",
    ]
    .iter()
    .map(|k| k.to_vec())
    .collect();
    for kh in [0, 1, 2, 3, 7] {
        check(kh, keys.clone(), Vec::new(), vec![b"abc".to_vec(), b"b".to_vec(), b"abcdefg\x01".to_vec()]);
    }
}

/// `min_max` is one step each way: a few PM lines, not a scan of the HART (nor a window of
/// prefetched leaves).
#[test]
fn min_max_reads_two_leaves() {
    use pmkv_substrate::counters;
    for kh in [0, 2, 7] {
        let h = sim_hart(8 << 20, kh);
        assert_eq!(h.min_max().unwrap(), None);
        for i in 0..20_000u32 {
            h.put(format!("k{:05}", i * 7 % 20_000).as_bytes(), b"v").unwrap();
        }
        let before = counters::snapshot();
        let ends = h.min_max().unwrap();
        let read = counters::snapshot().since(&before).lines_read;
        assert_eq!(ends, Some((b"k00000".to_vec(), b"k19999".to_vec())));
        assert!(read <= 4, "k_h {kh}: min_max read {read} PM lines");
    }
}
