//! Sorted sets: two element records per member, under the key's one element range
//! `P 'z' len(k) k` (docs/format/server.md):
//!
//! * the **member record** `… 0x00 member → score` (the score's 8-byte order encoding,
//!   [`enc`]): ZSCORE, ZADD's lookup, and member (lexicographic) order for BYLEX;
//! * the **score index** `… 0x01 enc(score) member → ""`: the members in (score, member)
//!   order, so a score range is one range scan and the lowest or highest member is the
//!   first record of a scan in either direction.
//!
//! The meta record counts element records (two per member, as every collection's meta
//! record counts its element records: the keyspace's deletes, copies and restores rely
//! on it), so ZCARD is half of it. Ranks come from a DRAM order-statistic index of the
//! score index records ([`crate::record::zrank`]), built on a set's first rank query
//! that would walk far and kept by every commit since: ZRANK, ZREVRANK, ZRANGE by rank
//! and ZREMRANGEBYRANK cost O(log n) then. docs/design/server-types.md has the costs.

use crate::command::{
    blocking, read, write, Command, Group::SortedSets, Keys, ALL_BUT_LAST, NUMKEYS, NUMKEYS_AT_2, ONE, TWO,
};
use crate::data::{cursor_start, float, int, random_u64, scan_opts, upper, Ctx, Page};
use crate::keyspace::{Meta, Tx, TxResult};
use crate::record::zrank::Index;
use crate::record::zset::{dec, enc, INDEX, MEMBER, TAG};
use crate::record::{elem_prefix, Kind};
use crate::resp::fmt_score;
use crate::resp::Reply;
use pmkv::{Direction, KeyRange};
use std::collections::BTreeMap;
use std::ops::Bound;

/// A STORE form: the destination, then keys counted by the argument after it. The
/// destination is locked with the sources (`first` = 1 and the counted keys from 3).
const DST_NUMKEYS: Keys = Keys { first: 1, last: 1, step: 1, numkeys: 2 };

/// The sorted-set commands, each next to its handler.
pub(crate) const COMMANDS: &[Command] = &[
    write("ZADD", -4, ONE, SortedSets, zadd),
    write("ZINCRBY", 4, ONE, SortedSets, zincrby),
    read("ZCARD", 2, ONE, SortedSets, zcard),
    read("ZSCORE", 3, ONE, SortedSets, zscore),
    read("ZMSCORE", -3, ONE, SortedSets, zscore),
    read("ZRANK", 3, ONE, SortedSets, zrank),
    read("ZREVRANK", 3, ONE, SortedSets, zrank),
    read("ZCOUNT", 4, ONE, SortedSets, zcount),
    read("ZLEXCOUNT", 4, ONE, SortedSets, zcount),
    write("ZREM", -3, ONE, SortedSets, zrem),
    write("ZREMRANGEBYRANK", 4, ONE, SortedSets, zremrange),
    write("ZREMRANGEBYSCORE", 4, ONE, SortedSets, zremrange),
    write("ZREMRANGEBYLEX", 4, ONE, SortedSets, zremrange),
    read("ZRANGE", -4, ONE, SortedSets, zrange),
    read("ZREVRANGE", -4, ONE, SortedSets, zrange),
    read("ZRANGEBYSCORE", -4, ONE, SortedSets, zrange),
    read("ZREVRANGEBYSCORE", -4, ONE, SortedSets, zrange),
    read("ZRANGEBYLEX", -4, ONE, SortedSets, zrange),
    read("ZREVRANGEBYLEX", -4, ONE, SortedSets, zrange),
    write("ZRANGESTORE", -5, TWO, SortedSets, zrange),
    write("ZPOPMIN", -2, ONE, SortedSets, zpop),
    write("ZPOPMAX", -2, ONE, SortedSets, zpop),
    write("ZMPOP", -4, NUMKEYS, SortedSets, zmpop),
    blocking("BZPOPMIN", -3, ALL_BUT_LAST, SortedSets, unblocked, attempt),
    blocking("BZPOPMAX", -3, ALL_BUT_LAST, SortedSets, unblocked, attempt),
    blocking("BZMPOP", -5, NUMKEYS_AT_2, SortedSets, unblocked, attempt),
    read("ZUNION", -3, NUMKEYS, SortedSets, algebra),
    read("ZINTER", -3, NUMKEYS, SortedSets, algebra),
    read("ZDIFF", -3, NUMKEYS, SortedSets, algebra),
    write("ZUNIONSTORE", -4, DST_NUMKEYS, SortedSets, algebra),
    write("ZINTERSTORE", -4, DST_NUMKEYS, SortedSets, algebra),
    write("ZDIFFSTORE", -4, DST_NUMKEYS, SortedSets, algebra),
    read("ZINTERCARD", -3, NUMKEYS, SortedSets, zintercard),
    read("ZRANDMEMBER", -2, ONE, SortedSets, zrandmember),
    read("ZSCAN", -3, ONE, SortedSets, zscan),
];

fn score_reply(s: f64) -> Reply {
    Reply::Double(s)
}

fn member_key(k: &[u8], m: &[u8]) -> Vec<u8> {
    [elem_prefix(TAG, k).as_slice(), &[MEMBER], m].concat()
}

fn index_key(k: &[u8], s: f64, m: &[u8]) -> Vec<u8> {
    [elem_prefix(TAG, k).as_slice(), &[INDEX], &enc(s), m].concat()
}

/// Sorted set `k`'s meta record (`None`: absent; WRONGTYPE: another type).
fn open(tx: &mut Tx, k: &[u8]) -> TxResult<Option<Meta>> {
    Ok(if tx.expect(k, Kind::ZSET)? { tx.meta(k) } else { None })
}

fn card(m: &Meta) -> u64 {
    m.count / 2
}

fn damaged() -> Reply {
    Reply::err("ERR sorted set is damaged: a member or index record is missing")
}

fn not_float() -> Reply {
    Reply::err("ERR value is not a valid float")
}

fn syntax() -> Reply {
    Reply::err("ERR syntax error")
}

fn not_int() -> Reply {
    Reply::err("ERR value is not an integer or out of range")
}

/// Member `m`'s score in sorted set `k`.
fn score_of(tx: &Tx, k: &[u8], m: &[u8]) -> TxResult<Option<f64>> {
    Ok(tx.raw_get(&member_key(k, m))?.filter(|v| v.len() == 8).map(|v| dec(&v)))
}

/// Give member `m` of `k` score `s` (`old`: its score now, if a member).
fn put(tx: &mut Tx, k: &[u8], meta: &mut Meta, m: &[u8], old: Option<f64>, s: f64) {
    match old {
        Some(o) if enc(o) == enc(s) => return,
        Some(o) => tx.raw_delete(index_key(k, o, m)),
        None => meta.count += 2,
    }
    tx.raw_put(member_key(k, m), enc(s).to_vec());
    tx.raw_put(index_key(k, s, m), Vec::new());
}

/// Remove member `m` (score `s`) from `k`.
fn take(tx: &mut Tx, k: &[u8], meta: &mut Meta, m: &[u8], s: f64) {
    tx.raw_delete(member_key(k, m));
    tx.raw_delete(index_key(k, s, m));
    meta.count -= 2;
}

/// Write `k`'s meta record after a change (the key goes with its last member).
fn finish(tx: &mut Tx, k: &[u8], meta: Meta) {
    tx.set_meta(k, (meta.count > 0).then_some(meta));
    tx.touch(k);
}

/// The engine-key range of `k`'s records starting with `sub` (`INDEX` or `MEMBER`), and
/// the engine-key prefix those records share.
fn sub_range(tx: &Tx, k: &[u8], sub: u8) -> (KeyRange, Vec<u8>) {
    let r = tx.prefix_range(&[elem_prefix(TAG, k).as_slice(), &[sub]].concat());
    let p = match &r.start {
        Bound::Included(p) | Bound::Excluded(p) => p.clone(),
        Bound::Unbounded => Vec::new(),
    };
    (r, p)
}

/// One end of a score range, as Redis parses it: a float, `(float` exclusive, `±inf`.
#[derive(Clone, Copy, Debug)]
struct ScoreBound {
    v: f64,
    open: bool,
}

fn score_bound(b: &[u8]) -> Option<ScoreBound> {
    let (open, rest) = match b.split_first() {
        Some((b'(', r)) => (true, r),
        _ => (false, b),
    };
    Some(ScoreBound { v: float(rest)?, open })
}

/// A score range's two ends, or Redis's error.
fn score_range(min: &[u8], max: &[u8]) -> TxResult<(ScoreBound, ScoreBound)> {
    match (score_bound(min), score_bound(max)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(Reply::err("ERR min or max is not a float")),
    }
}

/// The 8-byte integer after encoding `s`: the next representable score's encoding.
fn enc_next(s: f64) -> [u8; 8] {
    (u64::from_be_bytes(enc(s)).saturating_add(1)).to_be_bytes()
}

/// The engine-key range of the index records with a score in `lo..hi`.
fn index_range(tx: &Tx, k: &[u8], lo: ScoreBound, hi: ScoreBound) -> KeyRange {
    let (_, p) = sub_range(tx, k, INDEX);
    let at = |e: [u8; 8]| [p.as_slice(), &e].concat();
    KeyRange {
        start: Bound::Included(at(if lo.open { enc_next(lo.v) } else { enc(lo.v) })),
        end: Bound::Excluded(at(if hi.open { enc(hi.v) } else { enc_next(hi.v) })),
    }
}

/// One end of a lexicographic range: `-`, `+`, `[member` or `(member`.
#[derive(Clone, Debug)]
enum LexBound {
    Min,
    Max,
    At(Vec<u8>, bool),
}

fn lex_bound(b: &[u8]) -> Option<LexBound> {
    match b.split_first()? {
        (b'-', []) => Some(LexBound::Min),
        (b'+', []) => Some(LexBound::Max),
        (b'[', r) => Some(LexBound::At(r.to_vec(), false)),
        (b'(', r) => Some(LexBound::At(r.to_vec(), true)),
        _ => None,
    }
}

fn lex_range(min: &[u8], max: &[u8]) -> TxResult<(LexBound, LexBound)> {
    match (lex_bound(min), lex_bound(max)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(Reply::err("ERR min or max not valid string range item")),
    }
}

/// The engine-key range of the member records in lexicographic range `lo..hi`. Redis
/// orders BYLEX by its score order, which is member order when all scores are equal
/// (the only case where BYLEX is meaningful); member records are in member order always.
fn member_range(tx: &Tx, k: &[u8], lo: &LexBound, hi: &LexBound) -> Option<KeyRange> {
    let (all, p) = sub_range(tx, k, MEMBER);
    let at = |m: &[u8]| [p.as_slice(), m].concat();
    let start = match lo {
        LexBound::Min => all.start.clone(),
        LexBound::Max => return None,
        LexBound::At(m, false) => Bound::Included(at(m)),
        LexBound::At(m, true) => Bound::Excluded(at(m)),
    };
    let end = match hi {
        LexBound::Max => all.end.clone(),
        LexBound::Min => return None,
        LexBound::At(m, false) => Bound::Included(at(m)),
        LexBound::At(m, true) => Bound::Excluded(at(m)),
    };
    // An empty or inverted range: the engines' scans want start ≤ end.
    let key = |b: &Bound<Vec<u8>>| match b {
        Bound::Included(x) | Bound::Excluded(x) => Some(x.clone()),
        Bound::Unbounded => None,
    };
    if let (Some(s), Some(e)) = (key(&start), key(&end)) {
        if s > e || (s == e && !(matches!(start, Bound::Included(_)) && matches!(end, Bound::Included(_)))) {
            return None;
        }
    }
    Some(KeyRange { start, end })
}

/// Walk the index records of `range` (in `dir`), `f(member, score)` until it says stop.
fn walk_index(
    tx: &Tx,
    range: &KeyRange,
    p_len: usize,
    dir: Direction,
    mut f: impl FnMut(&[u8], f64) -> bool,
) -> TxResult<()> {
    let empty = match (&range.start, &range.end) {
        (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => s > e,
        _ => false,
    };
    if empty {
        return Ok(());
    }
    tx.raw_scan_dir(range, dir, |rk, _| {
        let r = &rk[p_len..];
        r.len() < 8 || f(&r[8..], dec(&r[..8]))
    })
}

/// Walk the member records of `range` (in `dir`), `f(member, score)` until it says stop.
fn walk_members(
    tx: &Tx,
    range: &KeyRange,
    p_len: usize,
    dir: Direction,
    mut f: impl FnMut(&[u8], f64) -> bool,
) -> TxResult<()> {
    tx.raw_scan_dir(range, dir, |rk, v| v.len() != 8 || f(&rk[p_len..], dec(v)))
}

/// Everything in `k` (which exists) in score order.
fn all(tx: &Tx, k: &[u8]) -> TxResult<Vec<(Vec<u8>, f64)>> {
    let (r, p) = sub_range(tx, k, INDEX);
    let mut out = Vec::new();
    walk_index(tx, &r, p.len(), Direction::Forward, |m, s| {
        out.push((m.to_vec(), s));
        true
    })?;
    Ok(out)
}

/// Every member of `k` with its score, in score order (empty when absent): what DUMP
/// serializes.
pub(crate) fn members(tx: &mut Tx, k: &[u8]) -> TxResult<Vec<(Vec<u8>, f64)>> {
    Ok(if open(tx, k)?.is_some() { all(tx, k)? } else { Vec::new() })
}

/// Give each member of `items` its score in `k` (creating it), as ZADD without flags
/// does: RESTORE's and a full sync's write of a sorted set. Scores must not be NaN
/// (the RDB decoder refuses one).
pub(crate) fn add_all(tx: &mut Tx, k: &[u8], items: &[(Vec<u8>, f64)]) -> TxResult<()> {
    for (m, _) in items {
        tx.check_elem_key("sorted set key and member", k.len() + m.len() + 9)?;
    }
    let mut meta = open(tx, k)?.unwrap_or(Meta::new(Kind::ZSET));
    for (m, s) in items {
        let cur = if meta.count == 0 { None } else { score_of(tx, k, m)? };
        put(tx, k, &mut meta, m, cur, *s);
    }
    if !items.is_empty() {
        finish(tx, k, meta);
    }
    Ok(())
}

/// A walk of at most this many index records costs less than building a rank index: a
/// set this small, or a rank range this near an end, is walked and gets no index (a
/// leaderboard's top 10 costs 10 records, and many small sets no DRAM).
const WALK: u64 = 128;

/// `f` applied to `k`'s rank index ([`crate::record::zrank`]; `n` members), built from one
/// scan of the score index records if `k` has none. `None` — the caller walks the records
/// instead — when this Tx has uncommitted writes to `k` (the index mirrors committed
/// records only), another build of it is under way, or the records disagree with the
/// meta record's count (the index is dropped rather than trusted).
fn with_ranks<R>(tx: &Tx, k: &[u8], n: u64, f: impl FnOnce(&Index) -> R) -> TxResult<Option<R>> {
    if tx.writes_in(&tx.prefix_range(&elem_prefix(TAG, k))) {
        return Ok(None);
    }
    let ranks = &tx.keyspace().ranks;
    match ranks.with(k, |ix| ix.len() as u64 == n) {
        Some(true) => return Ok(ranks.with(k, f)),
        Some(false) => {
            ranks.drop_key(k);
            return Ok(None);
        }
        None => {}
    }
    let Some(ticket) = ranks.begin(k) else { return Ok(None) };
    let (r, p) = sub_range(tx, k, INDEX);
    let mut items: Vec<Box<[u8]>> = Vec::with_capacity(n.min(1 << 20) as usize);
    let scanned = tx.raw_scan(&r, |rk, _| {
        items.push(rk[p.len()..].into());
        true
    });
    let ix: Index = if scanned.is_ok() { items.into_iter().collect() } else { Index::new() };
    let out = (ix.len() as u64 == n).then(|| f(&ix));
    ranks.finish(k, ticket, if out.is_some() { ix } else { Index::new() });
    scanned?;
    Ok(out)
}

/// Ranks `from..=to` (0 the lowest score; both inside `0..n`) of `k`, lowest first: from
/// the rank index when one exists or the walk would be long, else walking from the
/// nearer end of the index records.
fn by_rank(tx: &Tx, k: &[u8], n: u64, from: u64, to: u64) -> TxResult<Vec<(Vec<u8>, f64)>> {
    let near = from.min(n - 1 - to);
    if near > WALK || tx.keyspace().ranks.with(k, |_| ()).is_some() {
        let got = with_ranks(tx, k, n, |ix| {
            ix.range_idx(from as usize..=to as usize).map(|e| (e[8..].to_vec(), dec(e))).collect::<Vec<_>>()
        })?;
        if let Some(got) = got {
            return Ok(got);
        }
    }
    let (r, p) = sub_range(tx, k, INDEX);
    let want = (to - from + 1) as usize;
    let mut out = Vec::with_capacity(want.min(1 << 16));
    let (mut skip, dir) =
        if from <= n - 1 - to { (from, Direction::Forward) } else { (n - 1 - to, Direction::Reverse) };
    walk_index(tx, &r, p.len(), dir, |m, s| {
        if skip > 0 {
            skip -= 1;
            return true;
        }
        out.push((m.to_vec(), s));
        out.len() < want
    })?;
    if dir == Direction::Reverse {
        out.reverse();
    }
    Ok(out)
}

/// Members and scores as a reply: with scores, flat `[m, s, m, s …]` in RESP2 and
/// `[[m, s], …]` in RESP3 (as Redis 7.0); else the members.
fn listing(items: Vec<(Vec<u8>, f64)>, scores: bool, resp3: bool) -> Reply {
    let mut out = Vec::with_capacity(items.len() * if scores && !resp3 { 2 } else { 1 });
    for (m, s) in items {
        match (scores, resp3) {
            (false, _) => out.push(Reply::Bulk(m)),
            (true, false) => out.extend([Reply::Bulk(m), score_reply(s)]),
            (true, true) => out.push(Reply::Array(vec![Reply::Bulk(m), score_reply(s)])),
        }
    }
    Reply::Array(out)
}

fn cost(items: &[(Vec<u8>, f64)]) -> usize {
    items.iter().map(|(m, _)| crate::data::bulk_cost(m.len()) + 40).sum()
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member …]
fn zadd(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let k = &a[0];
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) = (false, false, false, false, false, false);
    let mut i = 1;
    while i < a.len() {
        match upper(&a[i]).as_str() {
            "NX" => nx = true,
            "XX" => xx = true,
            "GT" => gt = true,
            "LT" => lt = true,
            "CH" => ch = true,
            "INCR" => incr = true,
            _ => break,
        }
        i += 1;
    }
    let pairs = &a[i..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(syntax());
    }
    if nx && xx {
        return Err(Reply::err("ERR XX and NX options at the same time are not compatible"));
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return Err(Reply::err("ERR GT, LT, and/or NX options at the same time are not compatible"));
    }
    if incr && pairs.len() > 2 {
        return Err(Reply::err("ERR INCR option supports a single increment-element pair"));
    }
    let mut scored = Vec::with_capacity(pairs.len() / 2);
    for pr in pairs.chunks(2) {
        scored.push((float(&pr[0]).ok_or_else(not_float)?, &pr[1]));
    }
    for (_, m) in &scored {
        tx.check_elem_key("sorted set key and member", k.len() + m.len() + 9)?;
    }
    let meta = open(tx, k)?;
    if meta.is_none() && xx {
        return Ok(if incr { Reply::Nil } else { Reply::Int(0) });
    }
    let mut meta = meta.unwrap_or(Meta::new(Kind::ZSET));
    let (mut added, mut changed) = (0i64, 0i64);
    let mut incr_reply = Reply::Nil;
    for (s, m) in scored {
        let cur = if meta.count == 0 { None } else { score_of(tx, k, m)? };
        match cur {
            Some(c) => {
                if nx {
                    continue;
                }
                let new = if incr { c + s } else { s };
                if new.is_nan() {
                    return Err(Reply::err("ERR resulting score is not a number (NaN)"));
                }
                if (gt && new <= c) || (lt && new >= c) {
                    continue;
                }
                if new != c {
                    put(tx, k, &mut meta, m, Some(c), new);
                    changed += 1;
                }
                incr_reply = score_reply(new);
            }
            None => {
                if xx {
                    continue;
                }
                put(tx, k, &mut meta, m, None, s);
                added += 1;
                incr_reply = score_reply(s);
            }
        }
    }
    if added + changed > 0 {
        finish(tx, k, meta);
    }
    Ok(if incr { incr_reply } else { Reply::Int(if ch { added + changed } else { added }) })
}

/// ZINCRBY key increment member
fn zincrby(tx: &mut Tx, cx: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let args = [a[0].clone(), b"INCR".to_vec(), a[1].clone(), a[2].clone()];
    zadd(tx, cx, "ZADD", &args)
}

fn zcard(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    Ok(Reply::Int(open(tx, &a[0])?.map_or(0, |m| card(&m) as i64)))
}

/// ZSCORE key member, ZMSCORE key member [member …]
fn zscore(tx: &mut Tx, _: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let exists = open(tx, &a[0])?.is_some();
    let mut out = Vec::new();
    for m in &a[1..] {
        let s = if exists { score_of(tx, &a[0], m)? } else { None };
        out.push(s.map_or(Reply::Nil, score_reply));
    }
    Ok(if cmd == "ZSCORE" { out.pop().unwrap_or(Reply::Nil) } else { Reply::Array(out) })
}

/// ZRANK/ZREVRANK key member: the member's position in the rank index, O(log n); a walk
/// from the matching end to the member in a set of at most [`WALK`] members (or when
/// the index cannot be used: [`with_ranks`]).
fn zrank(tx: &mut Tx, _: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let (k, m) = (&a[0], &a[1]);
    let Some(meta) = open(tx, k)? else { return Ok(Reply::Nil) };
    let Some(s) = score_of(tx, k, m)? else { return Ok(Reply::Nil) };
    let rev = cmd == "ZREVRANK";
    let n = card(&meta);
    if n > WALK || tx.keyspace().ranks.with(k, |_| ()).is_some() {
        let me = [enc(s).as_slice(), m].concat();
        let found = with_ranks(tx, k, n, |ix| ix.contains(me.as_slice()).then(|| (ix.rank(me.as_slice()), ix.len())))?;
        match found {
            Some(Some((r, len))) => return Ok(Reply::Int(if rev { len - 1 - r } else { r } as i64)),
            // The member record without its index entry in the index: not trusted.
            Some(None) => tx.keyspace().ranks.drop_key(k),
            None => {}
        }
    }
    let (r, p) = sub_range(tx, k, INDEX);
    let me = enc(s);
    let mut rank = 0i64;
    let mut found = false;
    walk_index(tx, &r, p.len(), if rev { Direction::Reverse } else { Direction::Forward }, |x, xs| {
        if enc(xs) == me && x == m.as_slice() {
            found = true;
            return false;
        }
        rank += 1;
        true
    })?;
    if !found {
        return Err(damaged());
    }
    Ok(Reply::Int(rank))
}

/// ZCOUNT key min max, ZLEXCOUNT key min max
fn zcount(tx: &mut Tx, _: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let k = &a[0];
    let mut n = 0i64;
    if cmd == "ZCOUNT" {
        let (lo, hi) = score_range(&a[1], &a[2])?;
        if open(tx, k)?.is_none() {
            return Ok(Reply::Int(0));
        }
        let (_, p) = sub_range(tx, k, INDEX);
        walk_index(tx, &index_range(tx, k, lo, hi), p.len(), Direction::Forward, |_, _| {
            n += 1;
            true
        })?;
    } else {
        let (lo, hi) = lex_range(&a[1], &a[2])?;
        if open(tx, k)?.is_none() {
            return Ok(Reply::Int(0));
        }
        let (_, p) = sub_range(tx, k, MEMBER);
        if let Some(r) = member_range(tx, k, &lo, &hi) {
            walk_members(tx, &r, p.len(), Direction::Forward, |_, _| {
                n += 1;
                true
            })?;
        }
    }
    Ok(Reply::Int(n))
}

/// Remove `items` (members with their scores) from `k`; how many.
fn remove_items(tx: &mut Tx, k: &[u8], mut meta: Meta, items: &[(Vec<u8>, f64)]) -> i64 {
    for (m, s) in items {
        take(tx, k, &mut meta, m, *s);
    }
    if !items.is_empty() {
        finish(tx, k, meta);
    }
    items.len() as i64
}

fn zrem(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let k = &a[0];
    let Some(mut meta) = open(tx, k)? else { return Ok(Reply::Int(0)) };
    let mut n = 0;
    for m in &a[1..] {
        if let Some(s) = score_of(tx, k, m)? {
            take(tx, k, &mut meta, m, s);
            n += 1;
        }
    }
    if n > 0 {
        finish(tx, k, meta);
    }
    Ok(Reply::Int(n))
}

/// ZREMRANGEBYRANK/BYSCORE/BYLEX key min max
fn zremrange(tx: &mut Tx, _: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let k = &a[0];
    let sel = match cmd {
        "ZREMRANGEBYRANK" => Select::Rank(int(&a[1]).ok_or_else(not_int)?, int(&a[2]).ok_or_else(not_int)?),
        "ZREMRANGEBYSCORE" => {
            let (lo, hi) = score_range(&a[1], &a[2])?;
            Select::Score(lo, hi)
        }
        _ => {
            let (lo, hi) = lex_range(&a[1], &a[2])?;
            Select::Lex(lo, hi)
        }
    };
    let Some(meta) = open(tx, k)? else { return Ok(Reply::Int(0)) };
    let items = select(tx, k, &meta, &sel, false, None)?;
    Ok(Reply::Int(remove_items(tx, k, meta, &items)))
}

/// What a range command picks.
enum Select {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

/// The members `sel` picks in `k` (which exists), in reply order (`rev`: highest
/// first), after LIMIT `limit` (offset, count; a negative count: all).
fn select(
    tx: &Tx,
    k: &[u8],
    meta: &Meta,
    sel: &Select,
    rev: bool,
    limit: Option<(i64, i64)>,
) -> TxResult<Vec<(Vec<u8>, f64)>> {
    let dir = if rev { Direction::Reverse } else { Direction::Forward };
    let (mut skip, mut left) = match limit {
        None => (0u64, u64::MAX),
        Some((o, _)) if o < 0 => return Ok(Vec::new()),
        Some((o, c)) => (o as u64, if c < 0 { u64::MAX } else { c as u64 }),
    };
    if left == 0 {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut take = |m: &[u8], s: f64| {
        if skip > 0 {
            skip -= 1;
            return true;
        }
        out.push((m.to_vec(), s));
        left -= 1;
        left > 0
    };
    match sel {
        Select::Rank(start, stop) => {
            let n = card(meta);
            // Redis clamps a rank range as it clamps LRANGE's.
            let Some((a, b)) = super::list::clamp(*start, *stop, n) else { return Ok(Vec::new()) };
            // ZREVRANGE's ranks count from the highest score.
            let (from, to) = if rev { (n - 1 - b, n - 1 - a) } else { (a, b) };
            let mut got = by_rank(tx, k, n, from, to)?;
            if rev {
                got.reverse();
            }
            return Ok(got);
        }
        Select::Score(lo, hi) => {
            let (_, p) = sub_range(tx, k, INDEX);
            walk_index(tx, &index_range(tx, k, *lo, *hi), p.len(), dir, &mut take)?;
        }
        Select::Lex(lo, hi) => {
            let (_, p) = sub_range(tx, k, MEMBER);
            if let Some(r) = member_range(tx, k, lo, hi) {
                walk_members(tx, &r, p.len(), dir, &mut take)?;
            }
        }
    }
    Ok(out)
}

/// ZRANGE and its older forms (ZREVRANGE, Z[REV]RANGEBYSCORE, Z[REV]RANGEBYLEX) and
/// ZRANGESTORE, with Redis 7.0's argument rules and errors.
fn zrange(tx: &mut Tx, cx: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let store = cmd == "ZRANGESTORE";
    let (dst, a) = if store { (Some(&a[0]), &a[1..]) } else { (None, a) };
    #[derive(PartialEq, Clone, Copy)]
    enum By {
        Auto,
        Rank,
        Score,
        Lex,
    }
    let (mut by, mut rev) = match cmd {
        "ZREVRANGE" => (By::Rank, Some(true)),
        "ZRANGEBYSCORE" => (By::Score, Some(false)),
        "ZREVRANGEBYSCORE" => (By::Score, Some(true)),
        "ZRANGEBYLEX" => (By::Lex, Some(false)),
        "ZREVRANGEBYLEX" => (By::Lex, Some(true)),
        _ => (By::Auto, None),
    };
    let (mut scores, mut limit) = (false, None);
    let mut j = 3;
    while j < a.len() {
        let left = a.len() - j - 1;
        match upper(&a[j]).as_str() {
            "WITHSCORES" if !store => scores = true,
            "LIMIT" if left >= 2 => {
                limit = Some((int(&a[j + 1]).ok_or_else(not_int)?, int(&a[j + 2]).ok_or_else(not_int)?));
                j += 2;
            }
            "REV" if rev.is_none() => rev = Some(true),
            "BYLEX" if by == By::Auto => by = By::Lex,
            "BYSCORE" if by == By::Auto => by = By::Score,
            _ => return Err(syntax()),
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    if by == By::Auto {
        by = By::Rank;
    }
    if limit.is_some() && by == By::Rank {
        return Err(Reply::err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if scores && by == By::Lex {
        return Err(Reply::err("ERR syntax error, WITHSCORES not supported in combination with BYLEX"));
    }
    let (mut min, mut max) = (&a[1], &a[2]);
    if rev && by != By::Rank {
        std::mem::swap(&mut min, &mut max);
    }
    let sel = match by {
        By::Score => {
            let (lo, hi) = score_range(min, max)?;
            Select::Score(lo, hi)
        }
        By::Lex => {
            let (lo, hi) = lex_range(min, max)?;
            Select::Lex(lo, hi)
        }
        _ => Select::Rank(int(min).ok_or_else(not_int)?, int(max).ok_or_else(not_int)?),
    };
    let src = &a[0];
    let items = match open(tx, src)? {
        Some(meta) => select(tx, src, &meta, &sel, rev, limit)?,
        None => Vec::new(),
    };
    answer(tx, cx, dst, items, scores)
}

/// A range's or the algebra's result: stored in `dst` (its size the reply), or listed.
fn answer(tx: &mut Tx, cx: &Ctx, dst: Option<&Vec<u8>>, items: Vec<(Vec<u8>, f64)>, scores: bool) -> TxResult<Reply> {
    if let Some(dst) = dst {
        let n = items.len() as i64;
        replace(tx, dst, items);
        return Ok(Reply::Int(n));
    }
    if cost(&items) > cx.budget {
        return Ok(crate::data::over());
    }
    Ok(listing(items, scores, cx.resp3))
}

/// Make `dst` the sorted set of `items` (whatever `dst` was; absent when empty).
fn replace(tx: &mut Tx, dst: &[u8], items: Vec<(Vec<u8>, f64)>) {
    let _ = tx.del(dst);
    let mut meta = Meta::new(Kind::ZSET);
    for (m, s) in &items {
        put(tx, dst, &mut meta, m, None, *s);
    }
    finish(tx, dst, meta);
}

/// Pop up to `count` lowest (`max`: highest) members of `k` (which exists).
fn pop(tx: &mut Tx, k: &[u8], meta: Meta, count: u64, max: bool) -> TxResult<Vec<(Vec<u8>, f64)>> {
    let (r, p) = sub_range(tx, k, INDEX);
    let mut out = Vec::new();
    let want = count.min(card(&meta)) as usize;
    if want == 0 {
        return Ok(out);
    }
    walk_index(tx, &r, p.len(), if max { Direction::Reverse } else { Direction::Forward }, |m, s| {
        out.push((m.to_vec(), s));
        out.len() < want
    })?;
    remove_items(tx, k, meta, &out);
    Ok(out)
}

/// ZPOPMIN/ZPOPMAX key [count]
fn zpop(tx: &mut Tx, cx: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let count = match a.len() {
        // Without a count the reply is flat `[m, s]` in RESP3 too, as in Redis.
        1 => {
            let Some(meta) = open(tx, &a[0])? else { return Ok(Reply::Array(Vec::new())) };
            return Ok(listing(pop(tx, &a[0], meta, 1, cmd.ends_with("MAX"))?, true, false));
        }
        2 => int(&a[1]).filter(|&n| n >= 0).ok_or_else(|| Reply::err("ERR value is out of range, must be positive"))?
            as u64,
        _ => return Err(syntax()),
    };
    let Some(meta) = open(tx, &a[0])? else { return Ok(Reply::Array(Vec::new())) };
    Ok(listing(pop(tx, &a[0], meta, count, cmd.ends_with("MAX"))?, true, cx.resp3))
}

/// ZMPOP's work (`a` from numkeys on; BZMPOP's too): the null array when all are empty.
fn zmpop_in(tx: &mut Tx, a: &[Vec<u8>]) -> TxResult<Reply> {
    let (keys, max, count) = super::list::mpop_args(a, |w| match upper(w).as_str() {
        "MIN" => Ok(false),
        "MAX" => Ok(true),
        _ => Err(syntax()),
    })?;
    for k in keys {
        if let Some(meta) = open(tx, k)? {
            let got = pop(tx, k, meta, count, max)?;
            let pairs = got.into_iter().map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), score_reply(s)])).collect();
            return Ok(Reply::Array(vec![Reply::bulk(k.as_slice()), Reply::Array(pairs)]));
        }
    }
    Ok(Reply::NilArray)
}

fn zmpop(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    zmpop_in(tx, a)
}

/// A blocking pop's form in MULTI/EXEC: never blocks, the null array when empty.
fn unblocked(tx: &mut Tx, _: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    Ok(attempt(tx, cmd, a)?.unwrap_or(Reply::NilArray))
}

/// BZPOPMIN/BZPOPMAX key [key …] timeout, BZMPOP timeout numkeys key … MIN|MAX [COUNT
/// n]: the reply when one of the sets has a member, `None` when it would block.
fn attempt(tx: &mut Tx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Option<Reply>> {
    if cmd == "BZMPOP" {
        super::list::timeout(&a[0])?;
        return Ok(match zmpop_in(tx, &a[1..])? {
            Reply::NilArray => None,
            r => Some(r),
        });
    }
    super::list::timeout(&a[a.len() - 1])?;
    for k in &a[..a.len() - 1] {
        if let Some(meta) = open(tx, k)? {
            let (m, s) = pop(tx, k, meta, 1, cmd == "BZPOPMAX")?.pop().ok_or_else(damaged)?;
            return Ok(Some(Reply::Array(vec![Reply::bulk(k.as_slice()), Reply::Bulk(m), score_reply(s)])));
        }
    }
    Ok(None)
}

/// How ZUNION/ZINTER combine a member's weighted scores.
#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            // inf + -inf: Redis makes it 0.
            Aggregate::Sum => {
                let s = a + b;
                if s.is_nan() {
                    0.0
                } else {
                    s
                }
            }
            Aggregate::Min => a.min(b),
            Aggregate::Max => a.max(b),
        }
    }
}

/// Input `k` of the algebra as (member → score): a sorted set, or a set (every score 1),
/// as in Redis; an absent key is empty.
fn input(tx: &mut Tx, k: &[u8]) -> TxResult<BTreeMap<Vec<u8>, f64>> {
    match tx.kind(k)? {
        None => Ok(BTreeMap::new()),
        Some(kind) if kind == Kind::ZSET => Ok(all(tx, k)?.into_iter().collect()),
        Some(kind) if kind == Kind::SET => {
            let mut out = BTreeMap::new();
            tx.scan_elems(Kind::SET, k, None, |m, _| {
                out.insert(m.to_vec(), 1.0);
                true
            })?;
            Ok(out)
        }
        Some(_) => Err(crate::keyspace::wrongtype()),
    }
}

/// The algebra's key count (ZUNION … ZINTERCARD), with Redis's errors.
fn numkeys(cmd: &str, b: &[u8]) -> TxResult<usize> {
    match int(b).ok_or_else(not_int)? {
        n if n < 1 => {
            Err(Reply::err(format!("ERR at least 1 input key is needed for '{}' command", cmd.to_ascii_lowercase())))
        }
        n => Ok(n as usize),
    }
}

/// ZUNION/ZINTER/ZDIFF numkeys key … [WEIGHTS w …] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
/// and the STORE forms (destination first, no WITHSCORES).
fn algebra(tx: &mut Tx, cx: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let op = cmd.trim_end_matches("STORE");
    let store = op.len() != cmd.len();
    let (dst, a) = if store { (Some(&a[0]), &a[1..]) } else { (None, a) };
    let n = numkeys(cmd, &a[0])?;
    let keys = a.get(1..1 + n).ok_or_else(syntax)?;
    let mut weights = vec![1.0; n];
    let (mut agg, mut scores) = (Aggregate::Sum, false);
    let mut j = 1 + n;
    while j < a.len() {
        let left = a.len() - j - 1;
        match upper(&a[j]).as_str() {
            "WEIGHTS" if op != "ZDIFF" && left >= n => {
                for (w, arg) in weights.iter_mut().zip(&a[j + 1..j + 1 + n]) {
                    *w = float(arg).ok_or_else(|| Reply::err("ERR weight value is not a float"))?;
                }
                j += n;
            }
            "AGGREGATE" if op != "ZDIFF" && left >= 1 => {
                agg = match upper(&a[j + 1]).as_str() {
                    "SUM" => Aggregate::Sum,
                    "MIN" => Aggregate::Min,
                    "MAX" => Aggregate::Max,
                    _ => return Err(syntax()),
                };
                j += 1;
            }
            "WITHSCORES" if !store => scores = true,
            _ => return Err(syntax()),
        }
        j += 1;
    }
    let mut sets = Vec::with_capacity(n);
    for k in keys {
        sets.push(input(tx, k)?);
    }
    let weigh = |s: f64, w: f64| {
        let x = s * w;
        if x.is_nan() {
            0.0
        } else {
            x
        }
    };
    let mut out: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
    match op {
        "ZUNION" => {
            for (set, &w) in sets.iter().zip(&weights) {
                for (m, &s) in set {
                    let x = weigh(s, w);
                    out.entry(m.clone()).and_modify(|t| *t = agg.apply(*t, x)).or_insert(x);
                }
            }
        }
        "ZINTER" => {
            // Smallest input first: the others are looked up.
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by_key(|&i| sets[i].len());
            'm: for (m, &s) in &sets[order[0]] {
                let mut t = weigh(s, weights[order[0]]);
                for &i in &order[1..] {
                    match sets[i].get(m) {
                        Some(&x) => t = agg.apply(t, weigh(x, weights[i])),
                        None => continue 'm,
                    }
                }
                out.insert(m.clone(), t);
            }
        }
        _ => {
            for (m, &s) in &sets[0] {
                if !sets[1..].iter().any(|o| o.contains_key(m)) {
                    out.insert(m.clone(), s);
                }
            }
        }
    }
    let mut items: Vec<(Vec<u8>, f64)> = out.into_iter().collect();
    items.sort_by(|x, y| enc(x.1).cmp(&enc(y.1)).then_with(|| x.0.cmp(&y.0)));
    answer(tx, cx, dst, items, scores)
}

/// ZINTERCARD numkeys key [key …] [LIMIT limit]
fn zintercard(tx: &mut Tx, _: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let n = numkeys(cmd, &a[0])?;
    let keys = a.get(1..1 + n).ok_or_else(syntax)?;
    let limit = match &a[1 + n..] {
        [] => 0,
        [o, v] if upper(o) == "LIMIT" => {
            int(v).filter(|&l| l >= 0).ok_or_else(|| Reply::err("ERR LIMIT can't be negative"))? as usize
        }
        _ => return Err(syntax()),
    };
    let mut sets = Vec::with_capacity(n);
    for k in keys {
        sets.push(input(tx, k)?);
    }
    let card = sets[0].keys().filter(|m| sets[1..].iter().all(|s| s.contains_key(*m))).count();
    Ok(Reply::Int(if limit > 0 { card.min(limit) } else { card } as i64))
}

/// ZRANDMEMBER key [count [WITHSCORES]], as Redis 7.0 answers it.
fn zrandmember(tx: &mut Tx, cx: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let k = &a[0];
    let (count, scores) = match &a[1..] {
        [] => (None, false),
        [c] => (Some(int(c).ok_or_else(not_int)?), false),
        [c, w] if upper(w) == "WITHSCORES" => (Some(int(c).ok_or_else(not_int)?), true),
        _ => return Err(syntax()),
    };
    if let Some(c) = count {
        // Redis's bound on a negative count (so that the reply fits a long).
        if c < -(i64::MAX / 2) || (scores && c == i64::MIN) {
            return Err(Reply::err("ERR value is out of range"));
        }
    }
    let Some(meta) = open(tx, k)? else {
        return Ok(if count.is_some() { Reply::Array(Vec::new()) } else { Reply::Nil });
    };
    let n = card(&meta);
    let Some(count) = count else {
        let r = random_u64() % n;
        let (m, _) = by_rank(tx, k, n, r, r)?.pop().ok_or_else(damaged)?;
        return Ok(Reply::Bulk(m));
    };
    if count < 0 {
        let want = count.unsigned_abs();
        if want.saturating_mul(crate::data::bulk_cost(0) as u64) > cx.budget as u64 {
            return Ok(crate::data::over());
        }
        let everything = all(tx, k)?;
        let picks = (0..want).map(|_| everything[(random_u64() % everything.len() as u64) as usize].clone());
        return Ok(listing(picks.collect(), scores, cx.resp3));
    }
    let want = (count as u64).min(n) as usize;
    let mut everything = all(tx, k)?;
    for i in 0..want {
        let j = i + (random_u64() % (everything.len() - i) as u64) as usize;
        everything.swap(i, j);
    }
    everything.truncate(want);
    Ok(listing(everything, scores, cx.resp3))
}

/// ZSCAN key cursor [MATCH pattern] [COUNT n]: member records in member order.
fn zscan(tx: &mut Tx, cx: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let k = &a[0];
    let after = cursor_start(cx.cursors, &a[1])?;
    let o = scan_opts(&a[2..], tx.store().info().max_key_len, false)?;
    let mut page = Page::new(o.count, cx.budget);
    if open(tx, k)?.is_none() {
        return Ok(page.reply(cx.cursors));
    }
    let (mut r, p) = sub_range(tx, k, MEMBER);
    if let Some(after) = after {
        r.start = Bound::Excluded([p.as_slice(), &after].concat());
    }
    walk_members(tx, &r, p.len(), Direction::Forward, |m, s| {
        let shown = o.pattern.as_ref().is_none_or(|pat| pat.matches(m));
        let score = fmt_score(s).into_bytes();
        let pair = [m, score.as_slice()];
        page.step(m, if shown { &pair[..] } else { &[] })
    })?;
    Ok(page.reply(cx.cursors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_score_encoding_keeps_numeric_order() {
        let xs = [
            f64::NEG_INFINITY,
            -1e308,
            -2.5,
            -1.0,
            -f64::MIN_POSITIVE,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            1.0000000000000002,
            3e10,
            f64::MAX,
            f64::INFINITY,
        ];
        for w in xs.windows(2) {
            assert!(enc(w[0]) < enc(w[1]), "{} !< {}", w[0], w[1]);
            assert!(enc_next(w[0]) <= enc(w[1]));
        }
        for x in xs {
            assert_eq!(dec(&enc(x)), x);
        }
        assert_eq!(enc(-0.0), enc(0.0));
    }

    #[test]
    fn scores_print_as_redis_7_0_prints_them() {
        for (v, s) in [
            (1.0, "1"),
            (-3.0, "-3"),
            (1.5, "1.5"),
            (0.1, "0.10000000000000001"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (1e20, "1e+20"),
            (1.5e-7, "1.4999999999999999e-07"),
            (123456.789, "123456.789"),
            (4503599627370496.0, "4503599627370496"),
            (1e17, "1e+17"),
        ] {
            assert_eq!(fmt_score(v), s, "{v}");
        }
    }
}
