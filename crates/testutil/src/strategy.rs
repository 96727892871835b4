//! Proptest strategies for keys, values and operation sequences.
//!
//! Tests with operations of their own (gets, scans, crashes, reopens) build their enums
//! from [`key`], [`value`] and [`op`].

use crate::model::Op;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

/// Bytes of the short keys: few, so keys collide, share prefixes and are prefixes of each
/// other; 0x00 and 0xff at the ends of the byte order, 0x01 next to 0x00.
const ALPHABET: [u8; 4] = [0x00, 0x01, b'a', 0xff];

/// Longest key [`op`] generates: past HART's 48 bytes of key inline in a leaf.
pub const LONG_KEY: usize = 80;

/// Largest value [`op`] generates: out of line in every engine.
pub const LARGE_VALUE: usize = 300;

/// Keys of at most `max_long` bytes (at least 16): mostly short keys over a four-byte
/// alphabet (the empty key, 0x00 bytes, shared prefixes and keys that are prefixes of
/// others are common), any short bytes, runs of 0x00 or 0xff (short, or long with a
/// short tail, so long keys share long prefixes), and long keys of any bytes (from half
/// of `max_long` up).
pub fn key(max_long: usize) -> impl Strategy<Value = Vec<u8>> {
    assert!(max_long >= 16, "long keys need room: max_long {max_long}");
    let run = (
        select(vec![0x00u8, 0xff]),
        prop_oneof![1..8usize, max_long / 2..=max_long - 2],
        vec(select(&ALPHABET[..]), 0..3),
    )
        .prop_map(|(b, n, tail)| [vec![b; n], tail].concat());
    prop_oneof![
        6 => vec(select(&ALPHABET[..]), 0..6),
        2 => vec(any::<u8>(), 0..10),
        1 => run,
        1 => vec(any::<u8>(), max_long / 2..=max_long),
    ]
}

/// Values of at most `max` bytes (more than 8): half of them empty to 8 bytes (inline in
/// a HART leaf), half larger.
pub fn value(max: usize) -> impl Strategy<Value = Vec<u8>> {
    assert!(max > 8, "larger values need room: max {max}");
    prop_oneof![vec(any::<u8>(), 0..=8), vec(any::<u8>(), 9..=max)]
}

/// One write: two puts for each delete, keys of up to [`LONG_KEY`] bytes, values of up to
/// [`LARGE_VALUE`].
pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (key(LONG_KEY), value(LARGE_VALUE)).prop_map(|(k, v)| Op::Put(k, v)),
        1 => key(LONG_KEY).prop_map(Op::Delete),
    ]
}

/// Sequences of [`op`]s with a length in `len`.
pub fn ops(len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Op>> {
    vec(op(), len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{apply, Model};
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    fn sample<T>(s: impl Strategy<Value = T>, n: usize) -> Vec<T> {
        let mut runner = TestRunner::deterministic();
        (0..n).map(|_| s.new_tree(&mut runner).expect("a value").current()).collect()
    }

    fn has_run(k: &[u8], b: u8, n: usize) -> bool {
        k.windows(n).any(|w| w.iter().all(|&x| x == b))
    }

    #[test]
    fn keys_hold_the_edge_cases() {
        let keys = sample(key(64), 2000);
        assert!(keys.iter().all(|k| k.len() <= 64), "longest {}", keys.iter().map(Vec::len).max().unwrap());
        assert!(keys.iter().any(|k| k.is_empty()), "the empty key");
        assert!(keys.iter().any(|k| k.contains(&0)), "0x00 bytes");
        assert!(keys.iter().any(|k| k.len() > 1 && k.iter().all(|&b| b == 0)), "keys of zeros only");
        assert!(keys.iter().any(|k| has_run(k, 0xff, 8)), "0xff runs");
        assert!(keys.iter().any(|k| has_run(k, 0x00, 32)), "long 0x00 runs");
        assert!(keys.iter().filter(|k| k.len() > 48).count() > 100, "long keys past HART's inline 48 bytes");
        let prefix_pair = |min: usize| {
            keys.iter().any(|a| a.len() >= min && keys.iter().any(|b| b.len() > a.len() && b.starts_with(a)))
        };
        assert!(prefix_pair(1), "a key that is a prefix of another");
        let long: Vec<&Vec<u8>> = keys.iter().filter(|k| k.len() > 40).collect();
        assert!(
            long.iter().any(|a| long.iter().any(|b| a != b && a[..32] == b[..32])),
            "distinct long keys that share a 32-byte prefix"
        );
        let distinct: std::collections::BTreeSet<_> = keys.iter().collect();
        assert!(distinct.len() < keys.len() * 3 / 4, "short keys collide often: {} distinct", distinct.len());
    }

    #[test]
    fn values_inline_and_out_of_line() {
        let values = sample(value(100), 500);
        assert!(values.iter().all(|v| v.len() <= 100));
        assert!(values.iter().any(|v| v.is_empty()), "empty");
        assert!(values.iter().any(|v| v.len() == 8), "exactly the inline limit");
        assert!(values.iter().filter(|v| v.len() <= 8).count() > 150, "inline");
        assert!(values.iter().filter(|v| v.len() > 8).count() > 150, "out of line");
    }

    #[test]
    fn op_sequences_put_and_delete_present_keys() {
        let seqs = sample(ops(50..100), 20);
        assert!(seqs.iter().all(|s| (50..100).contains(&s.len())));
        let all: Vec<&Op> = seqs.iter().flatten().collect();
        let deletes = all.iter().filter(|o| matches!(o, Op::Delete(_))).count();
        assert!(deletes > all.len() / 5 && deletes < all.len() / 2, "{deletes} deletes of {}", all.len());
        let mut hits = 0;
        for s in &seqs {
            let mut m = Model::new();
            for op in s {
                if apply(&mut m, op) && matches!(op, Op::Delete(_)) {
                    hits += 1;
                }
            }
        }
        assert!(hits > 20, "deletes that find their key: {hits}");
    }
}
