//! SORT and SORT_RO as Redis 7.0 runs them: the elements of a list, set or sorted set,
//! sorted numerically (each as a double) or with ALPHA by bytes, optionally by the
//! values of other keys (`BY pattern`, `*` replaced by the element, `key->field` for a
//! hash field; a pattern without `*` leaves the elements in the key's own order), cut
//! by `LIMIT offset count`, answered as the elements or what `GET pattern`s name (`#`:
//! the element itself), or stored as a list under `STORE destination` (deleted when the
//! result is empty), the reply then being its length.
//!
//! The elements are read, and a stored result written, through the list, set and
//! sorted-set commands' own handlers (LRANGE, SMEMBERS, ZRANGE, RPUSH), inside the one
//! [`Tx`] of the command: a STORE replaces the destination all or nothing, as every
//! other write does. The keys a pattern names are not known before the command runs,
//! so the dispatcher runs SORT with the server's gate held exclusively, as EVAL.
//!
//! Where pmkv differs: ALPHA compares bytes (Redis compares with the C library's
//! `strcoll`, which is byte order in the C locale it runs in by default).

use crate::command::{Command, Ctx};
use crate::data::{int, upper};
use crate::keyspace::{wrongtype, Tx, TxResult};
use crate::record::Kind;
use crate::resp::Reply;
use std::cmp::Ordering;

fn syntax() -> Reply {
    Reply::err("ERR syntax error")
}

/// Run the list, set or sorted-set command `name` on `args` (after the name) in `tx`:
/// SORT reads and writes those types only through their commands.
fn call(tx: &mut Tx, cx: &mut Ctx, name: &str, args: &[&[u8]]) -> TxResult<Reply> {
    let lists: [&[Command]; 3] =
        [crate::types::list::COMMANDS, crate::types::set::COMMANDS, crate::types::zset::COMMANDS];
    let run = lists
        .iter()
        .flat_map(|l| l.iter())
        .find(|c| c.name == name)
        .and_then(|c| c.run)
        .expect("SORT calls commands of the list, set and sorted-set tables");
    let a: Vec<Vec<u8>> = args.iter().map(|x| x.to_vec()).collect();
    let mut whole = Ctx { budget: usize::MAX, resp3: false, cursors: &mut *cx.cursors, encodings: cx.encodings };
    run(tx, &mut whole, name, &a)
}

/// The elements of `k` in its own order (a list's, a set's byte order, a sorted set's
/// score order); empty when it does not exist, WRONGTYPE for a string or hash.
fn elements(tx: &mut Tx, cx: &mut Ctx, k: &[u8]) -> TxResult<Vec<Vec<u8>>> {
    let reply = match tx.kind(k)? {
        None => return Ok(Vec::new()),
        Some(kind) if kind == Kind::LIST => call(tx, cx, "LRANGE", &[k, b"0", b"-1"])?,
        Some(kind) if kind == Kind::SET => call(tx, cx, "SMEMBERS", &[k])?,
        Some(kind) if kind == Kind::ZSET => call(tx, cx, "ZRANGE", &[k, b"0", b"-1"])?,
        Some(_) => return Err(wrongtype()),
    };
    match reply {
        Reply::Array(items) => Ok(items
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(b) => b,
                _ => Vec::new(),
            })
            .collect()),
        Reply::Error(e) => Err(Reply::Error(e)),
        _ => Ok(Vec::new()),
    }
}

/// What `pattern` names for element `elem` (Redis's `lookupKeyByPattern`): `#` is the
/// element; otherwise the first `*` is replaced by it, and a `->field` after the `*`
/// reads that field of a hash. `None`: no `*`, no such key, or a key of another type.
fn lookup(tx: &mut Tx, pattern: &[u8], elem: &[u8]) -> TxResult<Option<Vec<u8>>> {
    if pattern == b"#" {
        return Ok(Some(elem.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&b| b == b'*') else { return Ok(None) };
    let arrow = pattern[star + 1..].windows(2).position(|w| w == b"->").map(|i| star + 1 + i);
    let (key_pat, field) = match arrow {
        Some(f) if f + 2 < pattern.len() => (&pattern[..f], Some(&pattern[f + 2..])),
        _ => (pattern, None),
    };
    let key = [&key_pat[..star], elem, &key_pat[star + 1..]].concat();
    if !crate::keyspace::allowed(&key) {
        return Ok(None);
    }
    Ok(match (tx.kind(&key)?, field) {
        (Some(k), None) if k == Kind::STRING => tx.get(&key)?,
        (Some(k), Some(f)) if k == Kind::HASH => tx.hget(&key, f)?,
        _ => None,
    })
}

/// A sort weight as Redis reads one (`strtod` over the whole value: leading spaces
/// allowed, nothing after the number, NaN refused; the empty string is 0).
fn weight(v: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(v).ok()?.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    if s.is_empty() {
        return Some(0.0);
    }
    // Rust reads "inf" and "infinity" (any case) as strtod does, and "nan": refused.
    let f: f64 = s.parse().ok()?;
    (!f.is_nan()).then_some(f)
}

/// The options after SORT's key.
struct Opts<'a> {
    by: Option<&'a [u8]>,
    limit: Option<(i64, i64)>,
    gets: Vec<&'a [u8]>,
    desc: bool,
    alpha: bool,
    store: Option<&'a [u8]>,
}

fn options<'a>(a: &'a [Vec<u8>], read_only: bool) -> Result<Opts<'a>, Reply> {
    let mut o = Opts { by: None, limit: None, gets: Vec::new(), desc: false, alpha: false, store: None };
    let mut i = 1;
    while i < a.len() {
        let left = a.len() - i - 1;
        match upper(&a[i]).as_str() {
            "ASC" => o.desc = false,
            "DESC" => o.desc = true,
            "ALPHA" => o.alpha = true,
            "LIMIT" if left >= 2 => {
                let n = |b: &[u8]| int(b).ok_or_else(|| Reply::err("ERR value is not an integer or out of range"));
                o.limit = Some((n(&a[i + 1])?, n(&a[i + 2])?));
                i += 2;
            }
            "STORE" if left >= 1 && !read_only => {
                o.store = Some(&a[i + 1]);
                i += 1;
            }
            "BY" if left >= 1 => {
                o.by = Some(&a[i + 1]);
                i += 1;
            }
            "GET" if left >= 1 => {
                o.gets.push(&a[i + 1]);
                i += 1;
            }
            _ => return Err(syntax()),
        }
        i += 1;
    }
    Ok(o)
}

/// `SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
/// [STORE destination]`, and SORT_RO (no STORE): the handler.
pub(crate) fn sort(tx: &mut Tx, cx: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let o = options(a, cmd == "SORT_RO")?;
    let mut elems = elements(tx, cx, &a[0])?;
    // A pattern without `*` (Redis's "nosort"): the key's own order.
    let sorting = o.by.is_none_or(|p| p.contains(&b'*'));
    if sorting {
        // Each element with its weight: the element or what BY names for it.
        let mut keyed = Vec::with_capacity(elems.len());
        for e in elems {
            let by = match o.by {
                Some(p) => lookup(tx, p, &e)?,
                None => Some(e.clone()),
            };
            let score = if o.alpha {
                0.0
            } else {
                match &by {
                    Some(v) => {
                        weight(v).ok_or_else(|| Reply::err("ERR One or more scores can't be converted into double"))?
                    }
                    None => 0.0,
                }
            };
            keyed.push((e, by, score));
        }
        keyed.sort_by(|x, y| {
            let c = if !o.alpha {
                // Equal weights: by the elements, so the order is defined (as Redis).
                x.2.partial_cmp(&y.2).unwrap_or(Ordering::Equal).then_with(|| x.0.cmp(&y.0))
            } else if o.by.is_some() {
                // A missing BY value sorts first.
                x.1.cmp(&y.1)
            } else {
                x.0.cmp(&y.0)
            };
            if o.desc {
                c.reverse()
            } else {
                c
            }
        });
        elems = keyed.into_iter().map(|(e, _, _)| e).collect();
    } else if o.desc {
        // Redis reverses a sorted set read without sorting; a list or set keeps its order.
        if tx.kind(&a[0])? == Some(Kind::ZSET) {
            elems.reverse();
        }
    }
    if let Some((off, count)) = o.limit {
        let start = usize::try_from(off.max(0)).unwrap_or(usize::MAX).min(elems.len());
        let n = if count < 0 { elems.len() } else { usize::try_from(count).unwrap_or(usize::MAX) };
        elems = elems.into_iter().skip(start).take(n).collect();
    }
    // The result: the elements, or per element what each GET names (nil when nothing).
    let mut out: Vec<Option<Vec<u8>>> = Vec::with_capacity(elems.len() * o.gets.len().max(1));
    for e in elems {
        if o.gets.is_empty() {
            out.push(Some(e));
        } else {
            for g in &o.gets {
                out.push(lookup(tx, g, &e)?);
            }
        }
    }
    let Some(dst) = o.store else {
        let size: usize = out.iter().map(|v| crate::data::bulk_cost(v.as_ref().map_or(0, Vec::len))).sum();
        if size > cx.budget {
            return Ok(crate::data::over());
        }
        return Ok(Reply::Array(out.into_iter().map(|v| v.map_or(Reply::Nil, Reply::Bulk)).collect()));
    };
    // STORE: the destination becomes the list of the result (whatever it was before),
    // or is deleted when the result is empty (a WATCH of it then fails, if it existed).
    let n = out.len();
    tx.del(dst)?;
    if n > 0 {
        let mut args: Vec<&[u8]> = Vec::with_capacity(n + 1);
        args.push(dst);
        args.extend(out.iter().map(|v| v.as_deref().unwrap_or_default()));
        if let Reply::Error(e) = call(tx, cx, "RPUSH", &args)? {
            return Err(Reply::Error(e));
        }
    }
    Ok(Reply::Int(n as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_read_as_strtod_reads_them() {
        assert_eq!(weight(b"1.5"), Some(1.5));
        assert_eq!(weight(b"  -3"), Some(-3.0));
        assert_eq!(weight(b""), Some(0.0));
        assert_eq!(weight(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(weight(b"1e3"), Some(1000.0));
        for bad in [&b"nan"[..], b"1x", b"abc", b"1 "] {
            assert_eq!(weight(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn options_parse_as_redis_and_sort_ro_refuses_store() {
        let a = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        let args =
            a(&["k", "BY", "w_*", "LIMIT", "1", "2", "GET", "#", "GET", "h_*->f", "DESC", "ALPHA", "STORE", "d"]);
        let o = options(&args, false).unwrap_or_else(|_| panic!("valid options"));
        assert_eq!(o.by, Some(&b"w_*"[..]));
        assert_eq!(o.limit, Some((1, 2)));
        assert_eq!(o.gets, vec![&b"#"[..], b"h_*->f"]);
        assert!(o.desc && o.alpha);
        assert_eq!(o.store, Some(&b"d"[..]));
        assert!(options(&args, true).is_err(), "SORT_RO has no STORE");
        assert!(options(&a(&["k", "LIMIT", "1"]), false).is_err());
        assert!(options(&a(&["k", "BOGUS"]), false).is_err());
    }
}
