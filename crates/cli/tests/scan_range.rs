//! `pmkv scan`'s ranges through the binary: every case of docs/design/api.md ("Range edge
//! cases", 1–10), `--from A --before B` being `[A, B)` as in every front end, the named
//! inclusive end (`--through`) and exclusive start (`--after`), and the old inclusive
//! `--to` refused rather than silently given the new meaning.

mod common;
use common::*;

/// A pool holding the edge-case list's keys `""`, `a`, `b`, `ba`, `bb`, `b\xff`, `c`
/// (each valued `v:KEY`), and its path.
fn edge_pool(dir: &std::path::Path) -> String {
    let keys = ["", "a", "b", "ba", "bb", "b\\xff", "c"];
    let tsv: String = keys.iter().map(|k| format!("{k}\tv:{k}\n")).collect();
    let file = write_file(dir, "edge.tsv", &tsv);
    let pool = dir.join("edge.pool");
    let o = pmkv(&["load", pool.to_str().unwrap(), file.to_str().unwrap(), "--tsv"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    pool.to_str().unwrap().to_string()
}

/// The keys `pmkv scan POOL ARGS` prints (escaped, as printed), checking that it succeeds
/// and prints each with its value.
#[track_caller]
fn scan(pool: &str, args: &[&str]) -> Vec<String> {
    let o = pmkv(&[&["scan", pool][..], args].concat());
    assert!(o.status.success(), "scan {args:?}: {}", text(&o.stderr));
    text(&o.stdout)
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('\t').expect("key<TAB>value");
            assert_eq!(v, format!("v:{k}"), "scan {args:?}");
            k.to_string()
        })
        .collect()
}

#[test]
fn u2_scan_ranges_are_half_open_on_every_edge_case() {
    let dir = pool_dir();
    let p = edge_pool(dir.path());
    let all = ["", "a", "b", "ba", "bb", "b\\xff", "c"];
    let none: [&str; 0] = [];
    // 1: no key between the bounds.
    assert_eq!(scan(&p, &["--from", "a\\x00", "--before", "b"]), none);
    // 2: start == end, at a present key and at an absent one.
    assert_eq!(scan(&p, &["--from", "b", "--before", "b"]), none);
    assert_eq!(scan(&p, &["--from", "b0", "--before", "b0"]), none);
    // 3: end before start: nothing, exit 0, not swapped.
    assert_eq!(scan(&p, &["--from", "c", "--before", "a"]), none);
    assert_eq!(scan(&p, &["--from", "c", "--through", "a", "--reverse"]), none);
    // 4: bounds at present keys: start in, end out.
    assert_eq!(scan(&p, &["--from", "a", "--before", "ba"]), ["a", "b"]);
    // 5: bounds at absent keys.
    assert_eq!(scan(&p, &["--from", "a0", "--before", "bc"]), ["b", "ba", "bb"]);
    // 6: open ends.
    assert_eq!(scan(&p, &["--from", "b"]), ["b", "ba", "bb", "b\\xff", "c"]);
    assert_eq!(scan(&p, &["--before", "b"]), ["", "a"]);
    assert_eq!(scan(&p, &[]), all);
    // 7: the empty key is a key, not an open end.
    assert_eq!(scan(&p, &["--from", ""]), all);
    assert_eq!(scan(&p, &["--before", ""]), none);
    assert_eq!(scan(&p, &["--through", ""]), [""]);
    // 8: reverse: the same records, highest first; a limit keeps the highest.
    assert_eq!(scan(&p, &["--from", "a", "--before", "bb", "--reverse"]), ["ba", "b", "a"]);
    assert_eq!(scan(&p, &["--from", "a", "--before", "bb", "--reverse", "--limit", "2"]), ["ba", "b"]);
    assert_eq!(scan(&p, &["--from", "a", "--before", "bb", "--limit", "2"]), ["a", "b"]);
    // 9: prefixes, and the half-open range a prefix is.
    assert_eq!(scan(&p, &["--prefix", "b"]), ["b", "ba", "bb", "b\\xff"]);
    assert_eq!(scan(&p, &["--from", "b", "--before", "c"]), ["b", "ba", "bb", "b\\xff"]);
    assert_eq!(scan(&p, &["--prefix", "b\\xff"]), ["b\\xff"]);
    assert_eq!(scan(&p, &["--prefix", ""]), all);
    assert_eq!(scan(&p, &["--prefix", "b", "--reverse", "--limit", "1"]), ["b\\xff"]);
    // 10: the named inclusive end and exclusive start.
    assert_eq!(scan(&p, &["--from", "a", "--through", "ba"]), ["a", "b", "ba"]);
    assert_eq!(scan(&p, &["--after", "a", "--before", "ba"]), ["b"]);
    assert_eq!(scan(&p, &["--after", "a", "--through", "ba", "--reverse"]), ["ba", "b"]);
    // --after the last key printed continues a limited scan.
    let mut pages = Vec::new();
    let mut last: Option<String> = None;
    loop {
        let page = match &last {
            None => scan(&p, &["--limit", "3"]),
            Some(k) => scan(&p, &["--after", k, "--limit", "3"]),
        };
        if page.is_empty() {
            break;
        }
        last = page.last().cloned();
        pages.extend(page);
    }
    assert_eq!(pages, all);
}

#[test]
fn u2_scan_to_is_refused_not_reinterpreted() {
    let dir = pool_dir();
    let p = edge_pool(dir.path());
    let before = std::fs::read(&p).unwrap();
    // What `--from a --to b` printed before (b included) is `--through b` now.
    let o = pmkv(&["scan", &p, "--from", "a", "--to", "b"]);
    assert_refused(&o);
    let err = text(&o.stderr);
    assert!(err.contains("--to") && err.contains("--through b") && err.contains("--before b"), "{err}");
    assert!(o.stdout.is_empty(), "a refused scan printed records");
    assert_eq!(scan(&p, &["--from", "a", "--through", "b"]), ["a", "b"]);
    // Refused before the pool is opened: a missing pool is not what it reports.
    let o = pmkv(&["scan", dir.path().join("none.pool").to_str().unwrap(), "--to", "b"]);
    assert_refused(&o);
    assert!(text(&o.stderr).contains("--through"), "{}", text(&o.stderr));
    // Two starts, two ends, or a prefix with a bound: a usage error, nothing printed.
    for args in [
        &["--from", "a", "--after", "a"][..],
        &["--before", "b", "--through", "b"],
        &["--prefix", "b", "--from", "a"],
        &["--prefix", "b", "--before", "c"],
    ] {
        let o = pmkv(&[&["scan", &p][..], args].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(o.stdout.is_empty() && text(&o.stderr).contains("cannot be used with"), "{args:?}");
    }
    assert!(std::fs::read(&p).unwrap() == before, "scan changed the pool");
}
