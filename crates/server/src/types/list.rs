//! Lists: one element record per element, keyed by a sequence number, so that a push or
//! pop at either end touches one element record and the meta record, and an element is
//! found by its position without walking the list (docs/design/server-types.md).
//!
//! Element `i` (0 the head) of list `k` is the record `P 'l' len(k) k seq`, `seq` the
//! 8-byte big-endian number `head + i`; the meta record counts the elements and carries
//! `head` as its type word. A new list starts at `head = 2^63`, so it can grow 2^63
//! elements either way. LPUSH writes `head - 1` and lowers `head`, RPUSH writes
//! `head + len`; LINDEX/LSET read or write one record; LRANGE is one range scan from
//! `head + start`. LINSERT moves the elements on the shorter side of the new one by one
//! (min(i, len − i) records), LREM rewrites the elements from the first removed one on;
//! both walk the list to find their element, as Redis does.

use crate::command::{blocking, read, write, Command, Group::Lists, ALL_BUT_LAST, NUMKEYS, NUMKEYS_AT_2, ONE, TWO};
use crate::data::{int, upper, Ctx};
use crate::keyspace::{store_reply, Meta, Tx, TxResult};
use crate::record::list::{MID, TAG};
use crate::record::{elem_prefix, escape, Kind};
use crate::resp::Reply;
use std::time::Duration;

/// The list commands, each next to its handler.
pub(crate) const COMMANDS: &[Command] = &[
    write("LPUSH", -3, ONE, Lists, push),
    write("RPUSH", -3, ONE, Lists, push),
    write("LPUSHX", -3, ONE, Lists, push),
    write("RPUSHX", -3, ONE, Lists, push),
    write("LPOP", -2, ONE, Lists, pop),
    write("RPOP", -2, ONE, Lists, pop),
    write("LMPOP", -4, NUMKEYS, Lists, lmpop),
    read("LLEN", 2, ONE, Lists, llen),
    read("LINDEX", 3, ONE, Lists, lindex),
    read("LRANGE", 4, ONE, Lists, lrange),
    read("LPOS", -3, ONE, Lists, lpos),
    write("LSET", 4, ONE, Lists, lset),
    write("LTRIM", 4, ONE, Lists, ltrim),
    write("LREM", 4, ONE, Lists, lrem),
    write("LINSERT", 5, ONE, Lists, linsert),
    write("LMOVE", 5, TWO, Lists, lmove),
    write("RPOPLPUSH", 3, TWO, Lists, lmove),
    blocking("BLPOP", -3, ALL_BUT_LAST, Lists, unblocked, attempt),
    blocking("BRPOP", -3, ALL_BUT_LAST, Lists, unblocked, attempt),
    blocking("BLMOVE", 6, TWO, Lists, unblocked, attempt),
    blocking("BRPOPLPUSH", 4, TWO, Lists, unblocked, attempt),
    blocking("BLMPOP", -5, NUMKEYS_AT_2, Lists, unblocked, attempt),
];

fn seq_key(k: &[u8], seq: u64) -> Vec<u8> {
    [elem_prefix(TAG, k).as_slice(), &seq.to_be_bytes()].concat()
}

fn not_int() -> Reply {
    Reply::err("ERR value is not an integer or out of range")
}

fn syntax() -> Reply {
    Reply::err("ERR syntax error")
}

fn arg_int(b: &[u8]) -> TxResult<i64> {
    int(b).ok_or_else(not_int)
}

/// A missing element record the meta record counts: damage, reported, never a panic.
fn lost(k: &[u8]) -> Reply {
    Reply::err(format!("ERR list {} is damaged: an element record is missing", escape(k)))
}

/// List `k`'s meta record (`None`: absent; WRONGTYPE: another type).
fn open(tx: &mut Tx, k: &[u8]) -> TxResult<Option<Meta>> {
    Ok(if tx.expect(k, Kind::LIST)? { tx.meta(k) } else { None })
}

/// Element `i` of the list `m` describes.
fn at(tx: &Tx, k: &[u8], m: &Meta, i: u64) -> TxResult<Vec<u8>> {
    tx.raw_get(&seq_key(k, m.aux + i))?.ok_or_else(|| lost(k))
}

/// Elements `from..=to` (positions, in range), by one range scan.
fn span(tx: &Tx, k: &[u8], m: &Meta, from: u64, to: u64) -> TxResult<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity((to - from + 1) as usize);
    let range = tx.record_range(&seq_key(k, m.aux + from), &seq_key(k, m.aux + to));
    tx.raw_scan(&range, |_, v| {
        out.push(v.to_vec());
        true
    })?;
    if out.len() as u64 != to - from + 1 {
        return Err(lost(k));
    }
    Ok(out)
}

fn check_elem(tx: &Tx, k: &[u8], v: &[u8]) -> TxResult<()> {
    tx.check_elem_key("list key and sequence number", k.len() + 8)?;
    tx.store().info().check_sizes(b"", Some(v)).map_err(store_reply)
}

/// Push `vals` one by one at the head (`left`) or tail of list `k`, creating it from
/// `m` (`None`: a new list). Each push is one element record; the meta record once.
fn push_all(tx: &mut Tx, k: &[u8], m: Option<Meta>, vals: &[Vec<u8>], left: bool) -> TxResult<u64> {
    for v in vals {
        check_elem(tx, k, v)?;
    }
    let mut m = m.unwrap_or(Meta { aux: MID, ..Meta::new(Kind::LIST) });
    for v in vals {
        let seq = if left { m.aux.checked_sub(1) } else { m.aux.checked_add(m.count) };
        let seq =
            seq.filter(|s| s.checked_add(1).is_some()).ok_or_else(|| Reply::err("ERR list is full at this end"))?;
        tx.raw_put(seq_key(k, seq), v.clone());
        if left {
            m.aux = seq;
        }
        m.count += 1;
    }
    tx.set_meta(k, Some(m));
    tx.touch(k);
    Ok(m.count)
}

/// Pop up to `n` elements from the head (`left`) or tail of list `m` (which exists).
fn pop_n(tx: &mut Tx, k: &[u8], m: Meta, n: u64, left: bool) -> TxResult<Vec<Vec<u8>>> {
    let n = n.min(m.count);
    if n == 0 {
        return Ok(Vec::new());
    }
    let (from, to) = if left { (0, n - 1) } else { (m.count - n, m.count - 1) };
    let mut got = span(tx, k, &m, from, to)?;
    for i in from..=to {
        tx.raw_delete(seq_key(k, m.aux + i));
    }
    let rest = m.count - n;
    let head = if left { m.aux + n } else { m.aux };
    tx.set_meta(k, (rest > 0).then_some(Meta { count: rest, aux: head, ..m }));
    tx.touch(k);
    if !left {
        got.reverse();
    }
    Ok(got)
}

/// Make positions `from..` of list `m` hold `tail` (shorter or longer than before),
/// rewriting those records only.
fn rewrite_from(tx: &mut Tx, k: &[u8], m: Meta, from: u64, tail: Vec<Vec<u8>>) -> TxResult<()> {
    let len = from + tail.len() as u64;
    for (i, v) in tail.into_iter().enumerate() {
        tx.raw_put(seq_key(k, m.aux + from + i as u64), v);
    }
    for i in len..m.count {
        tx.raw_delete(seq_key(k, m.aux + i));
    }
    tx.set_meta(k, (len > 0).then_some(Meta { count: len, ..m }));
    tx.touch(k);
    Ok(())
}

fn bulks(v: Vec<Vec<u8>>) -> Reply {
    Reply::Array(v.into_iter().map(Reply::Bulk).collect())
}

/// LPUSH, RPUSH, LPUSHX, RPUSHX key element [element ...]
fn push(tx: &mut Tx, _: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let m = open(tx, &a[0])?;
    if m.is_none() && cmd.ends_with('X') {
        return Ok(Reply::Int(0));
    }
    Ok(Reply::Int(push_all(tx, &a[0], m, &a[1..], cmd.starts_with('L'))? as i64))
}

/// A pop's COUNT: a non-negative integer.
fn count_arg(b: &[u8]) -> TxResult<u64> {
    int(b)
        .filter(|&n| n >= 0)
        .map(|n| n as u64)
        .ok_or_else(|| Reply::err("ERR value is out of range, must be positive"))
}

/// LPOP, RPOP key [count]
fn pop(tx: &mut Tx, _: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let count = match a.len() {
        1 => None,
        2 => Some(count_arg(&a[1])?),
        _ => return Err(Reply::err(crate::command::wrong_args(cmd))),
    };
    let Some(m) = open(tx, &a[0])? else {
        return Ok(if count.is_some() { Reply::NilArray } else { Reply::Nil });
    };
    let left = cmd == "LPOP";
    Ok(match count {
        None => pop_n(tx, &a[0], m, 1, left)?.pop().map_or(Reply::Nil, Reply::Bulk),
        Some(n) => bulks(pop_n(tx, &a[0], m, n, left)?),
    })
}

/// A LEFT/RIGHT argument: whether LEFT.
fn side(b: &[u8]) -> TxResult<bool> {
    match upper(b).as_str() {
        "LEFT" => Ok(true),
        "RIGHT" => Ok(false),
        _ => Err(syntax()),
    }
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]: pop from the first non-empty list.
fn lmpop(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    lmpop_in(tx, a)
}

/// The arguments of LMPOP and ZMPOP (BLMPOP's and BZMPOP's too), from numkeys on: the
/// keys, the word after them (LEFT/RIGHT, MIN/MAX) as `word` reads it, and the COUNT (1
/// when absent). The word is read before the count, so errors come in Redis's order.
pub(crate) fn mpop_args<T>(a: &[Vec<u8>], word: impl Fn(&[u8]) -> TxResult<T>) -> TxResult<(&[Vec<u8>], T, u64)> {
    let n = int(&a[0]).filter(|&n| n > 0).ok_or_else(|| Reply::err("ERR numkeys should be greater than 0"))? as usize;
    let rest = a.get(1 + n..).filter(|r| !r.is_empty()).ok_or_else(syntax)?;
    let w = word(&rest[0])?;
    let count = match &rest[1..] {
        [] => 1,
        [c, v] if upper(c) == "COUNT" => {
            int(v).filter(|&c| c > 0).ok_or_else(|| Reply::err("ERR count should be greater than 0"))? as u64
        }
        _ => return Err(syntax()),
    };
    Ok((&a[1..=n], w, count))
}

/// LMPOP's work (`a` from numkeys on; BLMPOP's too): the null array when all are empty.
fn lmpop_in(tx: &mut Tx, a: &[Vec<u8>]) -> TxResult<Reply> {
    let (keys, left, count) = mpop_args(a, side)?;
    for k in keys {
        if let Some(m) = open(tx, k)? {
            let got = pop_n(tx, k, m, count, left)?;
            return Ok(Reply::Array(vec![Reply::bulk(k.as_slice()), bulks(got)]));
        }
    }
    Ok(Reply::NilArray)
}

fn llen(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    Ok(Reply::Int(open(tx, &a[0])?.map_or(0, |m| m.count as i64)))
}

/// Position `i` (negative: from the tail) in a list of `len`, if inside it.
fn index(i: i64, len: u64) -> Option<u64> {
    let i = if i < 0 { len as i128 + i as i128 } else { i as i128 };
    (0..len as i128).contains(&i).then_some(i as u64)
}

fn lindex(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let i = arg_int(&a[1])?;
    let Some(m) = open(tx, &a[0])? else { return Ok(Reply::Nil) };
    Ok(match index(i, m.count) {
        Some(i) => Reply::Bulk(at(tx, &a[0], &m, i)?),
        None => Reply::Nil,
    })
}

/// Redis's range normalisation (LRANGE, LTRIM): `start..=stop` inside a list of `len`,
/// or `None` when empty.
pub(crate) fn clamp(start: i64, stop: i64, len: u64) -> Option<(u64, u64)> {
    let len = len as i128;
    let (mut s, mut e) = (start as i128, stop as i128);
    if s < 0 {
        s += len;
    }
    if e < 0 {
        e += len;
    }
    s = s.max(0);
    if s > e || s >= len {
        return None;
    }
    Some((s as u64, e.min(len - 1) as u64))
}

fn lrange(tx: &mut Tx, cx: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let (s, e) = (arg_int(&a[1])?, arg_int(&a[2])?);
    let Some(m) = open(tx, &a[0])? else { return Ok(Reply::Array(Vec::new())) };
    let Some((s, e)) = clamp(s, e, m.count) else { return Ok(Reply::Array(Vec::new())) };
    // Each element costs at least a bulk header: refuse a reply past the limit unbuilt.
    if (e - s + 1).saturating_mul(crate::data::bulk_cost(0) as u64) > cx.budget as u64 {
        return Ok(crate::data::over());
    }
    let got = span(tx, &a[0], &m, s, e)?;
    if got.iter().map(|v| crate::data::bulk_cost(v.len())).sum::<usize>() > cx.budget {
        return Ok(crate::data::over());
    }
    Ok(bulks(got))
}

fn lset(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let i = arg_int(&a[1])?;
    let Some(m) = open(tx, &a[0])? else { return Err(Reply::err("ERR no such key")) };
    let i = index(i, m.count).ok_or_else(|| Reply::err("ERR index out of range"))?;
    check_elem(tx, &a[0], &a[2])?;
    tx.raw_put(seq_key(&a[0], m.aux + i), a[2].clone());
    tx.touch(&a[0]);
    Ok(Reply::ok())
}

fn ltrim(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let (s, e) = (arg_int(&a[1])?, arg_int(&a[2])?);
    let k = &a[0];
    let Some(m) = open(tx, k)? else { return Ok(Reply::ok()) };
    // Keep positions s..=e (none when the range is empty); delete the others.
    let (s, keep) = match clamp(s, e, m.count) {
        Some((s, e)) => (s, e - s + 1),
        None => (0, 0),
    };
    for i in (0..s).chain(s + keep..m.count) {
        tx.raw_delete(seq_key(k, m.aux + i));
    }
    if keep != m.count {
        tx.set_meta(k, (keep > 0).then_some(Meta { count: keep, aux: m.aux + s, ..m }));
        tx.touch(k);
    }
    Ok(Reply::ok())
}

/// Every element of list `m`, by one range scan.
fn all(tx: &Tx, k: &[u8], m: &Meta) -> TxResult<Vec<Vec<u8>>> {
    span(tx, k, m, 0, m.count - 1)
}

/// Every element of list `k`, head first (empty when absent): what DUMP serializes.
pub(crate) fn elements(tx: &mut Tx, k: &[u8]) -> TxResult<Vec<Vec<u8>>> {
    match open(tx, k)? {
        Some(m) => all(tx, k, &m),
        None => Ok(Vec::new()),
    }
}

/// Append `vals` at the tail of list `k` (creating it), as RPUSH does: RESTORE's and a
/// full sync's write of a list.
pub(crate) fn append(tx: &mut Tx, k: &[u8], vals: &[Vec<u8>]) -> TxResult<()> {
    if vals.is_empty() {
        return Ok(());
    }
    let m = open(tx, k)?;
    push_all(tx, k, m, vals, false).map(drop)
}

fn lrem(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let (k, count, el) = (&a[0], arg_int(&a[1])?, &a[2]);
    let Some(m) = open(tx, k)? else { return Ok(Reply::Int(0)) };
    let items = all(tx, k, &m)?;
    let limit = if count == 0 { u64::MAX } else { count.unsigned_abs() };
    let mut drop = vec![false; items.len()];
    let mut removed = 0u64;
    let order: Box<dyn Iterator<Item = usize>> =
        if count < 0 { Box::new((0..items.len()).rev()) } else { Box::new(0..items.len()) };
    for i in order {
        if removed == limit {
            break;
        }
        if items[i] == *el {
            drop[i] = true;
            removed += 1;
        }
    }
    if removed == 0 {
        return Ok(Reply::Int(0));
    }
    let first = drop.iter().position(|&d| d).expect("one was removed");
    let tail: Vec<Vec<u8>> = items.into_iter().zip(drop).skip(first).filter(|(_, d)| !d).map(|(v, _)| v).collect();
    rewrite_from(tx, k, m, first as u64, tail)?;
    Ok(Reply::Int(removed as i64))
}

fn linsert(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let k = &a[0];
    let after = match upper(&a[1]).as_str() {
        "BEFORE" => false,
        "AFTER" => true,
        _ => return Err(syntax()),
    };
    let Some(m) = open(tx, k)? else { return Ok(Reply::Int(0)) };
    check_elem(tx, k, &a[3])?;
    let items = all(tx, k, &m)?;
    let Some(pivot) = items.iter().position(|v| *v == a[2]) else { return Ok(Reply::Int(-1)) };
    let p = pivot as u64 + u64::from(after);
    if p <= m.count / 2 && m.aux > 0 {
        // Move the p elements before the new one one place towards the head.
        for i in 0..p {
            tx.raw_put(seq_key(k, m.aux - 1 + i), items[i as usize].clone());
        }
        tx.raw_put(seq_key(k, m.aux - 1 + p), a[3].clone());
        tx.set_meta(k, Some(Meta { count: m.count + 1, aux: m.aux - 1, ..m }));
        tx.touch(k);
    } else {
        if m.aux.checked_add(m.count + 1).is_none() {
            return Err(Reply::err("ERR list is full at this end"));
        }
        let tail: Vec<Vec<u8>> = std::iter::once(a[3].clone()).chain(items[p as usize..].iter().cloned()).collect();
        rewrite_from(tx, k, Meta { count: m.count + 1, ..m }, p, tail)?;
    }
    Ok(Reply::Int(m.count as i64 + 1))
}

fn lpos(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let (k, el) = (&a[0], &a[1]);
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0u64);
    let mut i = 2;
    while i < a.len() {
        let (o, v) = (upper(&a[i]), a.get(i + 1).ok_or_else(syntax)?);
        match o.as_str() {
            "RANK" => {
                rank = arg_int(v)?;
                if rank == 0 {
                    return Err(Reply::err(
                        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                    ));
                }
            }
            "COUNT" => {
                let n = arg_int(v)?;
                if n < 0 {
                    return Err(Reply::err("ERR COUNT can't be negative"));
                }
                count = Some(n as u64);
            }
            "MAXLEN" => {
                let n = arg_int(v)?;
                if n < 0 {
                    return Err(Reply::err("ERR MAXLEN can't be negative"));
                }
                maxlen = n as u64;
            }
            _ => return Err(syntax()),
        }
        i += 2;
    }
    let none = || if count.is_some() { Reply::Array(Vec::new()) } else { Reply::Nil };
    let Some(m) = open(tx, k)? else { return Ok(none()) };
    let items = all(tx, k, &m)?;
    let want = match count {
        Some(0) => u64::MAX,
        Some(n) => n,
        None => 1,
    };
    let limit = if maxlen == 0 { u64::MAX } else { maxlen };
    let mut skip = rank.unsigned_abs() - 1;
    let mut found = Vec::new();
    let order: Box<dyn Iterator<Item = usize>> =
        if rank < 0 { Box::new((0..items.len()).rev()) } else { Box::new(0..items.len()) };
    for (looked, i) in order.enumerate() {
        if looked as u64 >= limit || found.len() as u64 >= want {
            break;
        }
        if items[i] == *el {
            if skip > 0 {
                skip -= 1;
            } else {
                found.push(Reply::Int(i as i64));
            }
        }
    }
    Ok(match count {
        Some(_) => Reply::Array(found),
        None => found.pop().unwrap_or(Reply::Nil),
    })
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT, RPOPLPUSH source destination.
fn lmove(tx: &mut Tx, _: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let (src, dst) = (&a[0], &a[1]);
    let (from_left, to_left) = if cmd == "RPOPLPUSH" { (false, true) } else { (side(&a[2])?, side(&a[3])?) };
    Ok(move_one(tx, src, dst, from_left, to_left)?.unwrap_or(Reply::Nil))
}

/// Move one element from `src` to `dst`: its reply, `None` when `src` is empty.
fn move_one(tx: &mut Tx, src: &[u8], dst: &[u8], from_left: bool, to_left: bool) -> TxResult<Option<Reply>> {
    let Some(m) = open(tx, src)? else { return Ok(None) };
    // The destination's type is checked before anything moves, as Redis does.
    open(tx, dst)?;
    let v = pop_n(tx, src, m, 1, from_left)?.pop().ok_or_else(|| lost(src))?;
    let dm = open(tx, dst)?;
    push_all(tx, dst, dm, std::slice::from_ref(&v), to_left)?;
    Ok(Some(Reply::Bulk(v)))
}

/// A blocking command's timeout argument, as Redis reads it (seconds, a float; 0:
/// forever); `None` for forever.
pub(crate) fn timeout(b: &[u8]) -> TxResult<Option<Duration>> {
    let bad = || Reply::err("ERR timeout is not a float or out of range");
    let s = std::str::from_utf8(b).map_err(|_| bad())?;
    let t: f64 = s.parse().map_err(|_| bad())?;
    if !t.is_finite() || s.trim() != s {
        return Err(bad());
    }
    if t < 0.0 {
        return Err(Reply::err("ERR timeout is negative"));
    }
    Ok((t > 0.0).then(|| Duration::from_secs_f64(t.min(1e12))))
}

/// The timeout argument of blocking command `cmd` (`a`: its arguments after the name).
pub(crate) fn timeout_of(cmd: &str, a: &[Vec<u8>]) -> TxResult<Option<Duration>> {
    let at = match cmd {
        "BLMPOP" | "BZMPOP" => 0,
        "BLMOVE" => 4,
        "BRPOPLPUSH" => 2,
        _ => a.len() - 1,
    };
    timeout(&a[at])
}

/// A blocking command's form in MULTI/EXEC: it never blocks, nil when there is nothing
/// to take, as in Redis.
fn unblocked(tx: &mut Tx, _: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    Ok(match attempt(tx, cmd, a)? {
        Some(r) => r,
        None if cmd.contains("MOVE") || cmd == "BRPOPLPUSH" => Reply::Nil,
        None => Reply::NilArray,
    })
}

/// A blocking command's try (its arguments checked first, the timeout too): its reply
/// when one of its lists has an element, `None` when it would block.
fn attempt(tx: &mut Tx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Option<Reply>> {
    match cmd {
        "BLPOP" | "BRPOP" => {
            timeout_of(cmd, a)?;
            for k in &a[..a.len() - 1] {
                if let Some(m) = open(tx, k)? {
                    let v = pop_n(tx, k, m, 1, cmd == "BLPOP")?.pop().ok_or_else(|| lost(k))?;
                    return Ok(Some(Reply::Array(vec![Reply::bulk(k.as_slice()), Reply::Bulk(v)])));
                }
            }
            Ok(None)
        }
        "BLMOVE" | "BRPOPLPUSH" => {
            let (from_left, to_left) = if cmd == "BRPOPLPUSH" { (false, true) } else { (side(&a[2])?, side(&a[3])?) };
            timeout_of(cmd, a)?;
            move_one(tx, &a[0], &a[1], from_left, to_left)
        }
        _ => {
            timeout_of(cmd, a)?;
            match lmpop_in(tx, &a[1..])? {
                Reply::NilArray => Ok(None),
                r => Ok(Some(r)),
            }
        }
    }
}
