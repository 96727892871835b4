//! `PMKV.RANGE start end [count] [REV]` over TCP: every case of docs/design/api.md ("Range
//! edge cases", 1–10), the ZRANGEBYLEX-style ends (`-`, `+`, `[key`, `(key`; a bare key is
//! `[start, end)` as in every front end), the optional count, REV, paging, refusals, and
//! the output-buffer limit for a range asked for without a count.

mod common;

use common::{Client, Running};
use pmkv_server::{Config, OutputLimits};

fn start(cfg: Config) -> Running {
    common::start("hart", 16, Config { threads: 1, ..cfg })
}

/// The edge-case list's keys (`b\xff` is the raw byte 0xff), each valued `v:KEY`.
const KEYS: [&[u8]; 7] = [b"", b"a", b"b", b"ba", b"bb", b"b\xff", b"c"];

/// The rendered reply for the records of `keys`, in the order given.
fn records(keys: &[&[u8]]) -> String {
    let items: Vec<String> = keys
        .iter()
        .flat_map(|k| {
            let k = String::from_utf8_lossy(k).into_owned();
            [k.clone(), format!("v:{k}")]
        })
        .collect();
    format!("[{}]", items.join(","))
}

fn range(c: &mut Client, args: &[&[u8]]) -> String {
    c.try_cmd(&[&[b"PMKV.RANGE".as_slice()][..], args].concat()).expect("a reply")
}

#[test]
fn u3_pmkv_range_checks_every_edge_case() {
    let srv = start(Config::default());
    let mut c = Client::new(srv.port);
    for k in KEYS {
        assert_eq!(c.try_cmd(&[b"SET", k, &[b"v:", k].concat()]).as_deref(), Some("+OK"));
    }
    let none = "[]";
    // 1: no key between the bounds.
    assert_eq!(range(&mut c, &[b"a\0", b"b"]), none);
    // 2: start == end, present and absent; inclusive at both ends is that one key.
    assert_eq!(range(&mut c, &[b"b", b"b"]), none);
    assert_eq!(range(&mut c, &[b"b0", b"b0"]), none);
    assert_eq!(range(&mut c, &[b"[b", b"(b"]), none);
    assert_eq!(range(&mut c, &[b"[b", b"[b"]), records(&[b"b"]));
    // 3: end before start: empty, no error, not swapped.
    assert_eq!(range(&mut c, &[b"c", b"a"]), none);
    assert_eq!(range(&mut c, &[b"[c", b"[a", b"REV"]), none);
    assert_eq!(range(&mut c, &[b"+", b"-"]), none);
    // 4, 5: bounds at present keys (start in, end out) and at absent ones.
    assert_eq!(range(&mut c, &[b"a", b"ba"]), records(&[b"a", b"b"]));
    assert_eq!(range(&mut c, &[b"a0", b"bc"]), records(&[b"b", b"ba", b"bb"]));
    // 6: open ends; `-` as an end and `+` as a start hold nothing.
    assert_eq!(range(&mut c, &[b"b", b"+"]), records(&[b"b", b"ba", b"bb", b"b\xff", b"c"]));
    assert_eq!(range(&mut c, &[b"-", b"b"]), records(&[b"", b"a"]));
    assert_eq!(range(&mut c, &[b"-", b"+"]), records(&KEYS));
    assert_eq!(range(&mut c, &[b"-", b"-"]), none);
    assert_eq!(range(&mut c, &[b"+", b"+"]), none);
    // 7: the empty key is a key.
    assert_eq!(range(&mut c, &[b"", b"+"]), records(&KEYS));
    assert_eq!(range(&mut c, &[b"-", b""]), none);
    assert_eq!(range(&mut c, &[b"-", b"["]), records(&[b""]));
    assert_eq!(range(&mut c, &[b"(", b"b"]), records(&[b"a"]));
    // 8: REV: the same records, highest first; a count keeps the highest.
    assert_eq!(range(&mut c, &[b"a", b"bb", b"REV"]), records(&[b"ba", b"b", b"a"]));
    assert_eq!(range(&mut c, &[b"a", b"bb", b"2", b"rev"]), records(&[b"ba", b"b"]));
    assert_eq!(range(&mut c, &[b"a", b"bb", b"2"]), records(&[b"a", b"b"]));
    // 9: a prefix is the half-open range up to its successor.
    assert_eq!(range(&mut c, &[b"b", b"c"]), records(&[b"b", b"ba", b"bb", b"b\xff"]));
    assert_eq!(range(&mut c, &[b"b\xff", b"c"]), records(&[b"b\xff"]));
    // 10: named inclusive end and exclusive start.
    assert_eq!(range(&mut c, &[b"[a", b"[ba"]), records(&[b"a", b"b", b"ba"]));
    assert_eq!(range(&mut c, &[b"(a", b"ba"]), records(&[b"b"]));
    assert_eq!(range(&mut c, &[b"(a", b"(ba"]), records(&[b"b"]));
    // Count: 0 is nothing, the old three-argument form still works.
    assert_eq!(range(&mut c, &[b"-", b"+", b"0"]), none);
    assert_eq!(range(&mut c, &[b"a", b"c", b"10"]), records(&[b"a", b"b", b"ba", b"bb", b"b\xff"]));
    // Paging: `(last key` and a count walk everything once, both ways.
    for rev in [false, true] {
        let (mut seen, mut from, mut to) = (Vec::new(), b"-".to_vec(), b"+".to_vec());
        loop {
            let mut args: Vec<&[u8]> = vec![&from, &to, b"3"];
            if rev {
                args.push(b"REV");
            }
            let page = c.try_cmd(&[&[b"PMKV.RANGE".as_slice()][..], &args].concat()).unwrap();
            if page == none {
                break;
            }
            let keys: Vec<String> = page[1..page.len() - 1].split(',').step_by(2).map(str::to_string).collect();
            let last = keys.last().unwrap().replace('\u{fffd}', "\u{ff}");
            let last: Vec<u8> = if last.contains('\u{ff}') { b"b\xff".to_vec() } else { last.into_bytes() };
            if rev {
                to = [b"(".as_slice(), &last].concat();
            } else {
                from = [b"(".as_slice(), &last].concat();
            }
            seen.extend(keys);
        }
        let mut want: Vec<String> = KEYS.iter().map(|k| String::from_utf8_lossy(k).into_owned()).collect();
        if rev {
            want.reverse();
        }
        assert_eq!(seen, want, "paging, rev {rev}");
    }
    // Keys that look like bound syntax are named with their bracket.
    for k in [&b"-"[..], b"+", b"[x", b"(y"] {
        assert_eq!(c.try_cmd(&[b"SET", k, &[b"v:", k].concat()]).as_deref(), Some("+OK"));
        let incl = [b"[".as_slice(), k].concat();
        assert_eq!(range(&mut c, &[&incl, &incl]), records(&[k]));
    }
    // Refusals, and the connection stays usable.
    assert!(range(&mut c, &[b"a", b"b", b"-1"]).starts_with("-ERR count must be a non-negative integer"));
    assert!(range(&mut c, &[b"a", b"b", b"many"]).starts_with("-ERR count must be"));
    assert!(range(&mut c, &[b"a", b"b", b"1", b"FWD"]).starts_with("-ERR syntax error"));
    assert!(range(&mut c, &[b"a", b"b", b"REV", b"1"]).starts_with("-ERR syntax error"));
    assert!(range(&mut c, &[b"a"]).starts_with("-ERR wrong number of arguments"));
    assert!(range(&mut c, &[b"a", b"b", b"1", b"REV", b"x"]).starts_with("-ERR wrong number of arguments"));
    assert_eq!(c.cmd(&["PING"]), "+PONG");
}

/// Without a count the whole range is returned, within the client's output-buffer hard
/// limit: a range whose reply would pass it closes the connection as KEYS does, and the
/// same range paged with a count is served.
#[test]
fn u3_pmkv_range_without_a_count_is_bounded_by_the_output_limit() {
    let output = OutputLimits { hard: 64 << 10, ..OutputLimits::default() };
    let srv = start(Config { output, ..Config::default() });
    let mut c = Client::new(srv.port).abbreviating(64);
    let v = vec![b'x'; 1000];
    for i in 0..100 {
        assert_eq!(c.try_cmd(&[b"SET", format!("k{i:03}").as_bytes(), &v]).as_deref(), Some("+OK"));
    }
    // 40 records fit (about 41 KiB), all 100 do not.
    let some = c.try_cmd(&[b"PMKV.RANGE", b"k000", b"k040"]).unwrap();
    assert_eq!(some.matches("$1000").count(), 40, "{some}");
    let over = c.try_cmd(&[b"PMKV.RANGE", b"-", b"+"]).unwrap();
    assert!(over.starts_with("-ERR reply exceeds client-output-buffer-limit"), "{over}");
    assert_eq!(c.try_reply(), None, "closed after the error");
    let mut c = Client::new(srv.port).abbreviating(64);
    let page = c.try_cmd(&[b"PMKV.RANGE", b"-", b"+", b"50"]).unwrap();
    assert_eq!(page.matches("$1000").count(), 50);
}
