//! `PMKV.RANGE start end [count] [REV]`: the records of a key range, as a flat array
//! `key1 value1 key2 value2 ...`.
//!
//! The ends are written as Redis's ZRANGEBYLEX writes them, with one addition: a bare key
//! is the half-open meaning every pmkv front end gives two keys (docs/design/api.md, "A
//! range is half-open"), so `PMKV.RANGE a b` is `[a, b)`, as `pmkv scan --from a --before
//! b`, Python's `scan(b"a", b"b")` and C's cursor.
//!
//! | end       | as start             | as end              |
//! |-----------|----------------------|---------------------|
//! | `-`       | open (every key)     | before every key: empty |
//! | `+`       | after every key: empty | open (every key)  |
//! | `[key`    | key included         | key included        |
//! | `(key`    | key excluded         | key excluded        |
//! | `key`     | key included         | key excluded        |
//!
//! A key that is `-` or `+`, or begins with `[` or `(`, is written with its bracket:
//! `[-`, `[[x`. `count` (a non-negative integer) caps the records; without it the whole
//! range is returned, up to the client's output-buffer hard limit (a reply that would pass
//! it closes the connection, as a KEYS would): page with `(last-key-returned` and a count.
//! `REV` walks the same range from its high end (the ends are still written low, high:
//! unlike ZREVRANGEBYLEX, REV changes the order, not what the arguments mean).

use crate::data::bulk_cost;
use crate::keyspace::{allowed, Keyspace};
use crate::resp::Reply;
use pmkv::{Direction, KeyRange, Store};
use std::ops::Bound;

/// One end of the range; `None`: the range is empty whatever the other end (`-` as its
/// end, `+` as its start).
fn parse_end(arg: &[u8], is_start: bool) -> Option<Bound<Vec<u8>>> {
    match arg {
        b"-" if is_start => Some(Bound::Unbounded),
        b"+" if !is_start => Some(Bound::Unbounded),
        b"-" | b"+" => None,
        [b'[', key @ ..] => Some(Bound::Included(key.to_vec())),
        [b'(', key @ ..] => Some(Bound::Excluded(key.to_vec())),
        key if is_start => Some(Bound::Included(key.to_vec())),
        key => Some(Bound::Excluded(key.to_vec())),
    }
}

/// Run `PMKV.RANGE` with its arguments `a` (the command name removed; two to four of
/// them), building no more than `budget` bytes of reply. `None`: the reply would pass the
/// budget, and the caller closes the connection as for any over-limit reply. The walk
/// lists string records: hashes (the server's own records) and strings past their expiry
/// time are left out.
/// On a cluster node `slot` is the slot of the ends (the caller checked they share it),
/// and the walk covers that slot's records only.
pub(crate) fn pmkv_range(s: &Store, ks: &Keyspace, a: &[Vec<u8>], budget: usize, slot: Option<u16>) -> Option<Reply> {
    if !(2..=4).contains(&a.len()) {
        return Some(Reply::err("ERR wrong number of arguments for 'pmkv.range' command"));
    }
    let (mut limit, mut dir) = (usize::MAX, Direction::Forward);
    let mut rest = &a[2..];
    if let Some(first) = rest.first() {
        if !first.eq_ignore_ascii_case(b"REV") {
            match std::str::from_utf8(first).ok().and_then(|t| t.parse::<u64>().ok()) {
                Some(n) => limit = usize::try_from(n).unwrap_or(usize::MAX),
                None => return Some(Reply::err("ERR count must be a non-negative integer")),
            }
            rest = &rest[1..];
        }
    }
    match rest {
        [] => {}
        [rev] if rev.eq_ignore_ascii_case(b"REV") => dir = Direction::Reverse,
        _ => return Some(Reply::err("ERR syntax error: PMKV.RANGE start end [count] [REV]")),
    }
    let (Some(start), Some(end)) = (parse_end(&a[0], true), parse_end(&a[1], false)) else {
        return Some(Reply::Array(Vec::new()));
    };
    let (mut items, mut size, mut over) = (Vec::new(), 0usize, false);
    let mut left = limit;
    if left > 0 {
        let now = crate::keyspace::now_ms();
        let range = match slot.filter(|_| ks.slotted()) {
            None => KeyRange { start, end },
            Some(slot) => {
                let p = slot.to_be_bytes();
                let on = |b: Bound<Vec<u8>>, unbounded: Bound<Vec<u8>>| match b {
                    Bound::Included(k) => Bound::Included([&p[..], &k].concat()),
                    Bound::Excluded(k) => Bound::Excluded([&p[..], &k].concat()),
                    Bound::Unbounded => unbounded,
                };
                let whole = KeyRange::prefix(p.to_vec());
                KeyRange { start: on(start, whole.start), end: on(end, whole.end) }
            }
        };
        let walked = s.scan(&range, dir, |pk, v| {
            let Some(k) = ks.logical(pk) else { return true };
            // String records only: not the server's own, not a string past its expiry.
            if !allowed(k) || ks.expired(k, now) {
                return true;
            }
            size += bulk_cost(k.len()) + bulk_cost(v.len());
            if size > budget {
                over = true;
                return false;
            }
            items.push(Reply::Bulk(k.to_vec()));
            items.push(Reply::Bulk(v.to_vec()));
            left -= 1;
            left > 0
        });
        if let Err(e) = walked {
            return Some(Reply::err(format!("ERR {} ({})", e, e.kind().name())));
        }
    }
    (!over).then_some(Reply::Array(items))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_parse_as_documented() {
        assert_eq!(parse_end(b"-", true), Some(Bound::Unbounded));
        assert_eq!(parse_end(b"-", false), None);
        assert_eq!(parse_end(b"+", true), None);
        assert_eq!(parse_end(b"+", false), Some(Bound::Unbounded));
        assert_eq!(parse_end(b"[a", false), Some(Bound::Included(b"a".to_vec())));
        assert_eq!(parse_end(b"(a", true), Some(Bound::Excluded(b"a".to_vec())));
        assert_eq!(parse_end(b"a", true), Some(Bound::Included(b"a".to_vec())));
        assert_eq!(parse_end(b"a", false), Some(Bound::Excluded(b"a".to_vec())));
        assert_eq!(parse_end(b"", false), Some(Bound::Excluded(Vec::new())));
        assert_eq!(parse_end(b"[", true), Some(Bound::Included(Vec::new())));
        assert_eq!(parse_end(b"[-", true), Some(Bound::Included(b"-".to_vec())));
        assert_eq!(parse_end(b"[[x", false), Some(Bound::Included(b"[x".to_vec())));
    }
}
