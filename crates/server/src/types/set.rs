//! Sets: one element record per member, `P 's' len(k) k member → ""`, in member order;
//! the meta record counts the members. SADD/SREM/SISMEMBER touch one record per member,
//! SCARD reads the meta record (DRAM); SMEMBERS, the algebra (SINTER …) and SSCAN are
//! range scans. A single SPOP/SRANDMEMBER seeks a random point of the member range (one
//! lookup, not uniform over members, as RANDOMKEY); with a count they read the set.
//! Replies list members in byte order (Redis's order is its hash table's: clients must
//! not rely on either).

use crate::command::{read, write, Command, Group::Sets, ALL_ARGS, NUMKEYS, ONE, TWO};
use crate::data::{cursor_start, int, random_u64, scan_opts, upper, Ctx, Page};
use crate::keyspace::{Meta, Tx, TxResult};
use crate::record::set::TAG;
use crate::record::{elem_prefix, Kind};
use crate::resp::Reply;
use std::collections::BTreeSet;

/// The set commands, each next to its handler.
pub(crate) const COMMANDS: &[Command] = &[
    write("SADD", -3, ONE, Sets, sadd),
    write("SREM", -3, ONE, Sets, srem),
    read("SCARD", 2, ONE, Sets, scard),
    read("SISMEMBER", 3, ONE, Sets, sismember),
    read("SMISMEMBER", -3, ONE, Sets, sismember),
    read("SMEMBERS", 2, ONE, Sets, smembers),
    write("SPOP", -2, ONE, Sets, spop),
    read("SRANDMEMBER", -2, ONE, Sets, spop),
    write("SMOVE", 4, TWO, Sets, smove),
    read("SINTER", -2, ALL_ARGS, Sets, algebra),
    read("SUNION", -2, ALL_ARGS, Sets, algebra),
    read("SDIFF", -2, ALL_ARGS, Sets, algebra),
    write("SINTERSTORE", -3, ALL_ARGS, Sets, algebra),
    write("SUNIONSTORE", -3, ALL_ARGS, Sets, algebra),
    write("SDIFFSTORE", -3, ALL_ARGS, Sets, algebra),
    read("SINTERCARD", -3, NUMKEYS, Sets, sintercard),
    read("SSCAN", -3, ONE, Sets, sscan),
];

fn member_key(k: &[u8], m: &[u8]) -> Vec<u8> {
    [elem_prefix(TAG, k).as_slice(), m].concat()
}

fn check_member(tx: &Tx, k: &[u8], m: &[u8]) -> TxResult<()> {
    tx.check_elem_key("set key and member", k.len() + m.len())
}

/// Set `k`'s meta record (`None`: absent; WRONGTYPE: another type).
fn open(tx: &mut Tx, k: &[u8]) -> TxResult<Option<Meta>> {
    Ok(if tx.expect(k, Kind::SET)? { tx.meta(k) } else { None })
}

/// Every member of set `k` (empty when absent), in byte order: also what DUMP serializes.
pub(crate) fn members(tx: &mut Tx, k: &[u8]) -> TxResult<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    tx.scan_elems(Kind::SET, k, None, |m, _| {
        out.push(m.to_vec());
        true
    })?;
    Ok(out)
}

/// Add `ms` to set `k` (creating it); how many were new. SADD's, RESTORE's and a full
/// sync's write of a set.
pub(crate) fn add(tx: &mut Tx, k: &[u8], ms: &[Vec<u8>]) -> TxResult<u64> {
    for m in ms {
        check_member(tx, k, m)?;
    }
    let mut meta = open(tx, k)?.unwrap_or(Meta::new(Kind::SET));
    let mut added = 0;
    for m in ms {
        let mk = member_key(k, m);
        if meta.count == 0 || !tx.raw_contains(&mk)? {
            tx.raw_put(mk, Vec::new());
            meta.count += 1;
            added += 1;
        }
    }
    if added > 0 {
        tx.set_meta(k, Some(meta));
        tx.touch(k);
    }
    Ok(added)
}

/// Remove `ms` from set `k` (the set with its last member); how many were there.
fn remove(tx: &mut Tx, k: &[u8], ms: &[Vec<u8>]) -> TxResult<u64> {
    let Some(mut meta) = open(tx, k)? else { return Ok(0) };
    let mut removed = 0;
    for m in ms {
        let mk = member_key(k, m);
        if tx.raw_contains(&mk)? {
            tx.raw_delete(mk);
            meta.count -= 1;
            removed += 1;
        }
    }
    if removed > 0 {
        tx.set_meta(k, (meta.count > 0).then_some(meta));
        tx.touch(k);
    }
    Ok(removed)
}

fn bulks(v: impl IntoIterator<Item = Vec<u8>>) -> Reply {
    Reply::Array(v.into_iter().map(Reply::Bulk).collect())
}

fn sadd(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    Ok(Reply::Int(add(tx, &a[0], &a[1..])? as i64))
}

fn srem(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    Ok(Reply::Int(remove(tx, &a[0], &a[1..])? as i64))
}

fn scard(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    Ok(Reply::Int(open(tx, &a[0])?.map_or(0, |m| m.count as i64)))
}

/// SISMEMBER key member, SMISMEMBER key member [member ...]
fn sismember(tx: &mut Tx, _: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let exists = open(tx, &a[0])?.is_some();
    let mut out = Vec::new();
    for m in &a[1..] {
        out.push(Reply::Int(i64::from(exists && tx.raw_contains(&member_key(&a[0], m))?)));
    }
    Ok(if cmd == "SISMEMBER" { out.pop().unwrap_or(Reply::Int(0)) } else { Reply::Array(out) })
}

fn smembers(tx: &mut Tx, cx: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let ms = members(tx, &a[0])?;
    if ms.iter().map(|m| crate::data::bulk_cost(m.len())).sum::<usize>() > cx.budget {
        return Ok(crate::data::over());
    }
    Ok(bulks(ms))
}

/// Up to this many members, a single pick walks to a uniformly random position; past
/// it, it seeks a random point of the member range (one lookup, not uniform).
const UNIFORM_UP_TO: u64 = 512;

/// One member of set `k` (which exists, with `n` members).
fn random_member(tx: &mut Tx, k: &[u8], n: u64) -> TxResult<Option<Vec<u8>>> {
    if n <= UNIFORM_UP_TO {
        let mut skip = random_u64() % n.max(1);
        let mut got = None;
        tx.scan_elems(Kind::SET, k, None, |m, _| {
            if skip == 0 {
                got = Some(m.to_vec());
                return false;
            }
            skip -= 1;
            true
        })?;
        return Ok(got);
    }
    let start = random_u64().to_be_bytes();
    let mut got = None;
    tx.scan_elems(Kind::SET, k, Some(&start), |m, _| {
        got = Some(m.to_vec());
        false
    })?;
    if got.is_none() {
        tx.scan_elems(Kind::SET, k, None, |m, _| {
            got = Some(m.to_vec());
            false
        })?;
    }
    Ok(got)
}

/// SPOP key [count], SRANDMEMBER key [count], as Redis 7.0 answers them.
fn spop(tx: &mut Tx, cx: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let k = &a[0];
    let pop = cmd == "SPOP";
    let count = match a.len() {
        1 => None,
        2 if pop => Some(
            int(&a[1]).filter(|&n| n >= 0).ok_or_else(|| Reply::err("ERR value is out of range, must be positive"))?,
        ),
        2 => Some(match int(&a[1]) {
            None => return Err(Reply::err("ERR value is not an integer or out of range")),
            Some(i64::MIN) => {
                return Err(Reply::err(
                    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
                ))
            }
            Some(n) => n,
        }),
        _ => return Err(Reply::err("ERR syntax error")),
    };
    let Some(meta) = open(tx, k)? else {
        return Ok(if count.is_some() { Reply::Array(Vec::new()) } else { Reply::Nil });
    };
    let Some(count) = count else {
        let m = random_member(tx, k, meta.count)?
            .ok_or_else(|| Reply::err("ERR set is damaged: a member record is missing"))?;
        if pop {
            remove(tx, k, std::slice::from_ref(&m))?;
        }
        return Ok(Reply::Bulk(m));
    };
    if count < 0 {
        // SRANDMEMBER with a negative count: that many picks, repeats allowed.
        let want = count.unsigned_abs();
        if want.saturating_mul(crate::data::bulk_cost(0) as u64) > cx.budget as u64 {
            return Ok(crate::data::over());
        }
        let all = members(tx, k)?;
        return Ok(bulks((0..want).map(|_| all[(random_u64() % all.len() as u64) as usize].clone())));
    }
    let want = (count as u64).min(meta.count) as usize;
    let mut all = members(tx, k)?;
    // A random subset: a partial Fisher-Yates shuffle.
    for i in 0..want {
        let j = i + (random_u64() % (all.len() - i) as u64) as usize;
        all.swap(i, j);
    }
    all.truncate(want);
    if pop {
        remove(tx, k, &all)?;
    }
    Ok(bulks(all))
}

fn smove(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let (src, dst, m) = (&a[0], &a[1], &a[2]);
    // As Redis: an absent source answers 0 before the destination's type is looked at.
    if open(tx, src)?.is_none() {
        return Ok(Reply::Int(0));
    }
    open(tx, dst)?;
    if src == dst {
        return Ok(Reply::Int(i64::from(tx.raw_contains(&member_key(src, m))?)));
    }
    if remove(tx, src, std::slice::from_ref(m))? == 0 {
        return Ok(Reply::Int(0));
    }
    add(tx, dst, std::slice::from_ref(m))?;
    Ok(Reply::Int(1))
}

/// The sets of `keys` (every key's type checked first, an absent key an empty set).
fn sets_of(tx: &mut Tx, keys: &[Vec<u8>]) -> TxResult<Vec<BTreeSet<Vec<u8>>>> {
    for k in keys {
        open(tx, k)?;
    }
    keys.iter().map(|k| Ok(members(tx, k)?.into_iter().collect())).collect()
}

fn combine(op: &str, sets: Vec<BTreeSet<Vec<u8>>>) -> BTreeSet<Vec<u8>> {
    let mut it = sets.into_iter();
    let first = it.next().unwrap_or_default();
    it.fold(first, |acc, s| match op {
        "SINTER" => acc.intersection(&s).cloned().collect(),
        "SUNION" => acc.union(&s).cloned().collect(),
        _ => acc.difference(&s).cloned().collect(),
    })
}

/// SINTER, SUNION, SDIFF and their STORE forms (which replace the destination, whatever
/// its type, and delete it for an empty result).
fn algebra(tx: &mut Tx, cx: &mut Ctx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let op = cmd.trim_end_matches("STORE");
    let store = op.len() != cmd.len();
    let keys = if store { &a[1..] } else { a };
    let out = combine(op, sets_of(tx, keys)?);
    if store {
        let dst = &a[0];
        tx.del(dst)?;
        let n = out.len();
        let all: Vec<Vec<u8>> = out.into_iter().collect();
        add(tx, dst, &all)?;
        if n == 0 {
            tx.touch(dst);
        }
        return Ok(Reply::Int(n as i64));
    }
    if out.iter().map(|m| crate::data::bulk_cost(m.len())).sum::<usize>() > cx.budget {
        return Ok(crate::data::over());
    }
    Ok(bulks(out))
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]
fn sintercard(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let n = int(&a[0]).filter(|&n| n > 0).ok_or_else(|| Reply::err("ERR numkeys should be greater than 0"))? as usize;
    let keys = a.get(1..1 + n).ok_or_else(|| Reply::err("ERR Number of keys can't be greater than number of args"))?;
    let limit = match &a[1 + n..] {
        [] => 0,
        // As Redis: one error for a LIMIT that is not a non-negative integer.
        [o, v] if upper(o) == "LIMIT" => {
            int(v).filter(|&l| l >= 0).ok_or_else(|| Reply::err("ERR LIMIT can't be negative"))? as usize
        }
        _ => return Err(Reply::err("ERR syntax error")),
    };
    let card = combine("SINTER", sets_of(tx, keys)?).len();
    Ok(Reply::Int(if limit > 0 { card.min(limit) } else { card } as i64))
}

fn sscan(tx: &mut Tx, cx: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let after = cursor_start(cx.cursors, &a[1])?;
    let o = scan_opts(&a[2..], tx.store().info().max_key_len, false)?;
    let mut page = Page::new(o.count, cx.budget);
    tx.scan_elems(Kind::SET, &a[0], after.as_deref(), |m, _| {
        let shown = o.pattern.as_ref().is_none_or(|p| p.matches(m));
        let one = [m];
        page.step(m, if shown { &one[..] } else { &[] })
    })?;
    Ok(page.reply(cx.cursors))
}
