//! Ordered scans: bounds, limits, directions, cursors, re-entrancy.

use crate::util::*;
use pmkv::{Direction, EngineFactory, KeyRange};
use std::ops::Bound;

fn bounds_over(points: &[Vec<u8>]) -> Vec<Bound<Vec<u8>>> {
    let mut v = vec![Bound::Unbounded];
    for p in points {
        v.push(Bound::Included(p.clone()));
        v.push(Bound::Excluded(p.clone()));
    }
    v
}

fn model_range(m: &Model, r: &KeyRange, dir: Direction, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let it = m.iter().filter(|(k, _)| r.contains(k)).map(|(k, v)| (k.clone(), v.clone()));
    match dir {
        Direction::Forward => it.take(limit).collect(),
        Direction::Reverse => it.rev().take(limit).collect(),
    }
}

/// Every combination of bound kinds at both ends (at present keys, absent keys, the
/// empty key, past the end), limits 0, 1, 2, 7 and none, both directions; through
/// `collect`, the cursor and the callback scan.
pub fn every_bound_kind_limit_and_direction(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, _) = fresh(f, &d);
    let mut m = Model::new();
    fill(&s, &mut m, edge_keys().into_iter().map(|k| (k.clone(), [&k[..], b"=v"].concat())));
    let points: Vec<Vec<u8>> = vec![
        vec![],
        vec![0],
        b"ab".to_vec(),
        b"abc\0".to_vec(),
        b"abcc".to_vec(),
        b"key00500".to_vec(),
        vec![0xff; 30],
    ];
    let mut checked = 0;
    for start in bounds_over(&points) {
        for end in bounds_over(&points) {
            let r = KeyRange { start: start.clone(), end: end.clone() };
            for dir in [Direction::Forward, Direction::Reverse] {
                for limit in [0usize, 1, 2, 7, usize::MAX] {
                    let want = model_range(&m, &r, dir, limit);
                    let got = s.collect(&r, dir, limit).unwrap();
                    assert_eq!(got, want, "collect {r:?} {dir:?} limit {limit}");
                    checked += 1;
                }
                let want = model_range(&m, &r, dir, usize::MAX);
                let got: Vec<_> = match dir {
                    Direction::Forward => s.range(&r).collect::<Result<_, _>>().unwrap(),
                    Direction::Reverse => s.range(&r).rev().collect::<Result<_, _>>().unwrap(),
                };
                assert_eq!(got, want, "cursor {r:?} {dir:?}");
                let mut via_cb = Vec::new();
                s.scan(&r, dir, |k, v| {
                    via_cb.push((k.to_vec(), v.to_vec()));
                    true
                })
                .unwrap();
                assert_eq!(via_cb, want, "callback scan {r:?} {dir:?}");
            }
        }
    }
    assert!(checked > 1000);
    // A callback that stops is obeyed exactly.
    let mut n = 0;
    s.scan(&KeyRange::all(), Direction::Reverse, |_, _| {
        n += 1;
        n < 5
    })
    .unwrap();
    assert_eq!(n, 5);
}

/// The range edge cases of docs/design/api.md ("Range edge cases", cases 1-10), each
/// spelled out over the list's keys, through `collect`, the cursor (both directions) and
/// the callback scan: the one meaning every front end's tests check too.
pub fn range_edge_cases(f: &'static dyn EngineFactory) {
    use Bound::{Excluded as Ex, Included as In, Unbounded as Open};
    let d = pool_dir();
    let (s, _) = fresh(f, &d);
    let mut m = Model::new();
    let keys: [&[u8]; 7] = [b"", b"a", b"b", b"ba", b"bb", b"b\xff", b"c"];
    fill(&s, &mut m, keys.iter().map(|k| (k.to_vec(), [b"v:", *k].concat())));
    let r = |start: Bound<&[u8]>, end: Bound<&[u8]>| KeyRange::bounds(start, end);
    let all: Vec<&[u8]> = keys.to_vec();
    let cases: Vec<(&str, KeyRange, Vec<&[u8]>)> = vec![
        ("1 empty range", KeyRange::new(&b"a\0"[..], &b"b"[..]), vec![]),
        ("2 start == end, present", KeyRange::new(&b"b"[..], &b"b"[..]), vec![]),
        ("2 start == end, absent", KeyRange::new(&b"b0"[..], &b"b0"[..]), vec![]),
        ("3 end before start", KeyRange::new(&b"c"[..], &b"a"[..]), vec![]),
        ("4 bounds at present keys", KeyRange::new(&b"a"[..], &b"ba"[..]), vec![b"a", b"b"]),
        ("5 bounds at absent keys", KeyRange::new(&b"a0"[..], &b"bc"[..]), vec![b"b", b"ba", b"bb"]),
        ("6 open end", KeyRange::from(&b"b"[..]), vec![b"b", b"ba", b"bb", b"b\xff", b"c"]),
        ("6 open start", r(Open, Ex(b"b")), vec![b"", b"a"]),
        ("6 both open", KeyRange::all(), all.clone()),
        ("7 start at the empty key", KeyRange::from(&b""[..]), all.clone()),
        ("7 end at the empty key", r(Open, Ex(b"")), vec![]),
        ("9 prefix", KeyRange::prefix(&b"b"[..]), vec![b"b", b"ba", b"bb", b"b\xff"]),
        ("9 prefix as a range", KeyRange::new(&b"b"[..], &b"c"[..]), vec![b"b", b"ba", b"bb", b"b\xff"]),
        ("9 prefix ending in 0xff", KeyRange::prefix(&b"b\xff"[..]), vec![b"b\xff"]),
        ("9 empty prefix", KeyRange::prefix(&b""[..]), all.clone()),
        ("10 inclusive end", r(In(b"a"), In(b"ba")), vec![b"a", b"b", b"ba"]),
        ("10 exclusive start", r(Ex(b"a"), Ex(b"ba")), vec![b"b"]),
    ];
    for (name, range, want) in &cases {
        let want: Vec<(Vec<u8>, Vec<u8>)> = want.iter().map(|k| (k.to_vec(), [b"v:", *k].concat())).collect();
        let mut back = want.clone();
        back.reverse();
        // `is_empty` knows the bounds, not the store: case 1 is empty only for these keys.
        if !name.starts_with('1') {
            assert_eq!(range.is_empty(), want.is_empty(), "{name}: is_empty");
        }
        assert_eq!(s.collect(range, Direction::Forward, usize::MAX).unwrap(), want, "{name}: collect");
        assert_eq!(s.collect(range, Direction::Reverse, usize::MAX).unwrap(), back, "{name}: collect, reverse (8)");
        let fwd: Vec<_> = s.range(range).collect::<Result<_, _>>().unwrap();
        assert_eq!(fwd, want, "{name}: cursor");
        let rev: Vec<_> = s.range(range).rev().collect::<Result<_, _>>().unwrap();
        assert_eq!(rev, back, "{name}: cursor, reverse (8)");
        let mut via_cb = Vec::new();
        s.scan(range, Direction::Forward, |k, v| {
            via_cb.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
        assert_eq!(via_cb, want, "{name}: callback scan");
    }
    // 8: a limit on a reverse walk keeps the highest records.
    let got = s.collect(&KeyRange::new(&b"a"[..], &b"bb"[..]), Direction::Reverse, 2).unwrap();
    let got: Vec<_> = got.into_iter().map(|(k, _)| k).collect();
    assert_eq!(got, vec![b"ba".to_vec(), b"b".to_vec()], "8 reverse with a limit");
}

/// A cursor stepped alternately from both ends yields every record exactly once; long
/// ranges cross several refills (chunks of 16 and more).
pub fn cursor_from_both_ends(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, _) = fresh(f, &d);
    let mut m = Model::new();
    fill(&s, &mut m, (0..2500u32).map(|i| (format!("c{i:05}").into_bytes(), i.to_le_bytes().to_vec())));
    for pattern in [1usize, 2, 3, 17, 1000] {
        let mut c = s.range(&KeyRange::all());
        let (mut front, mut back) = (Vec::new(), Vec::new());
        let mut step = 0usize;
        loop {
            let from_front = (step / pattern).is_multiple_of(2);
            step += 1;
            let r = if from_front { c.next() } else { c.next_back() };
            match r {
                None => break,
                Some(r) => {
                    let (k, _) = r.unwrap();
                    if from_front {
                        front.push(k)
                    } else {
                        back.push(k)
                    }
                }
            }
        }
        // Both ends are exhausted.
        assert!(c.next().is_none() && c.next_back().is_none());
        back.reverse();
        front.extend(back);
        let want: Vec<_> = m.keys().cloned().collect();
        assert_eq!(front.len(), want.len(), "pattern {pattern}");
        assert_eq!(front, want, "pattern {pattern}");
    }
    // Sub-ranges too.
    let r = KeyRange::new(b"c00100".to_vec(), b"c00200".to_vec());
    let got: Vec<_> = s.range(&r).rev().map(|x| x.unwrap().0).collect();
    let want: Vec<_> = m.keys().filter(|k| r.contains(k)).rev().cloned().collect();
    assert_eq!(got, want);
}

/// Writing while a cursor is open (same thread) neither deadlocks nor breaks the cursor:
/// keys come out strictly ordered, each at most once, and every key that was in the range
/// throughout and never written is seen.
pub fn cursor_holds_no_lock(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, _) = fresh(f, &d);
    let mut m = Model::new();
    fill(&s, &mut m, (0..600u32).map(|i| (format!("w{i:04}").into_bytes(), vec![1])));
    for dir in [Direction::Forward, Direction::Reverse] {
        let mut c = s.range(&KeyRange::all());
        let mut seen: Vec<Vec<u8>> = Vec::new();
        let mut i = 0u32;
        loop {
            let next = match dir {
                Direction::Forward => c.next(),
                Direction::Reverse => c.next_back(),
            };
            let Some(r) = next else { break };
            let (k, _) = r.unwrap();
            // Write ahead of and behind the cursor, delete odd keys ahead, re-insert.
            s.put(format!("w{:04}x", (i * 7) % 600).as_bytes(), b"new").unwrap();
            if i % 2 == 1 {
                s.delete(format!("w{:04}", (i * 13 + 301) % 600).as_bytes()).unwrap();
            }
            let _ = s.get(&k).unwrap();
            seen.push(k);
            i += 1;
        }
        let mut sorted = seen.clone();
        if dir == Direction::Reverse {
            sorted.reverse();
        }
        assert!(sorted.windows(2).all(|w| w[0] < w[1]), "{dir:?}: not strictly ordered or repeated");
        // Keys never deleted and never re-written were all seen.
        for j in 0..600u32 {
            let deleted = (0..600u32).any(|i| i % 2 == 1 && (i * 13 + 301) % 600 == j);
            let k = format!("w{j:04}").into_bytes();
            if !deleted && m.contains_key(&k) {
                assert!(seen.contains(&k), "{dir:?}: untouched key {j} not seen");
            }
        }
        // Restore for the other direction.
        for j in 0..600u32 {
            s.put(format!("w{j:04}").as_bytes(), &[1]).unwrap();
        }
    }
}

/// The callback of `Store::scan` may read, write and delete in the same store (what a
/// Python or C caller does) without deadlock, and the scan stays ordered.
pub fn callbacks_may_reenter(f: &'static dyn EngineFactory) {
    let d = pool_dir();
    let (s, _) = fresh(f, &d);
    let mut m = Model::new();
    fill(&s, &mut m, (0..300u32).map(|i| (format!("r{i:03}").into_bytes(), vec![0])));
    for dir in [Direction::Forward, Direction::Reverse] {
        let mut last: Option<Vec<u8>> = None;
        let mut n = 0;
        s.scan(&KeyRange::prefix(b"r".to_vec()), dir, |k, v| {
            if let Some(l) = &last {
                assert!(if dir == Direction::Forward { l.as_slice() < k } else { l.as_slice() > k });
            }
            last = Some(k.to_vec());
            assert_eq!(s.get(k).unwrap().as_deref(), Some(v));
            s.put(&[b"copy-", k].concat(), v).unwrap();
            s.put(k, &[v[0] + 1]).unwrap();
            n += 1;
            true
        })
        .unwrap();
        assert_eq!(n, 300, "{dir:?}");
    }
    assert_eq!(s.get(b"r007").unwrap().as_deref(), Some(&[2u8][..]));
    assert_eq!(s.len().unwrap(), 600);
    // A nested cursor inside a callback.
    let mut pairs = 0;
    s.scan(&KeyRange::new(b"r000".to_vec(), b"r003".to_vec()), Direction::Forward, |_, _| {
        pairs += s.range(&KeyRange::prefix(b"copy-".to_vec())).count();
        true
    })
    .unwrap();
    assert_eq!(pairs, 900);
}
