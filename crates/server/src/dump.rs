//! DUMP and RESTORE with Redis's serialization ([`crate::rdb`]): a value DUMPed by a
//! real Redis RESTOREs into pmkv as the same value, and the other way round, so keys move
//! between the two with `redis-cli --pipe`, MIGRATE-style tools or a client library.
//!
//! RESTORE follows Redis 7.0's `restoreCommand` step by step, errors word for word: the
//! options (REPLACE, ABSTTL, IDLETIME, FREQ; the last two are accepted and checked, pmkv
//! keeping no LRU/LFU state), BUSYKEY, the TTL, the payload's version and checksum, its
//! decoding; a TTL already past deletes (REPLACE) or leaves the key and answers OK.

use crate::data::{int, not_int, upper, Ctx};
use crate::keyspace::{Kind, Ttl, Tx, TxResult};
use crate::rdb::{self, Value};
use crate::resp::Reply;
use crate::types::{list, set, zset};

/// `DUMP key`: the key's value as Redis's payload (nil: no key).
pub(crate) fn dump(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    Ok(match value(tx, &a[0])? {
        Some(v) => Reply::bulk(rdb::dump(&v)),
        None => Reply::Nil,
    })
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]`.
pub(crate) fn restore(tx: &mut Tx, _: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    restore_in(tx, a)
}

/// The value at `k` in the types RDB encodes (`None`: no key).
pub(crate) fn value(tx: &mut Tx, k: &[u8]) -> TxResult<Option<Value>> {
    Ok(match tx.kind(k)? {
        None => None,
        Some(k2) if k2 == Kind::STRING => tx.get(k)?.map(Value::String),
        Some(k2) if k2 == Kind::HASH => {
            let mut fields = Vec::new();
            tx.hscan(k, None, |f, v| {
                fields.push((f.to_vec(), v.to_vec()));
                true
            })?;
            Some(Value::Hash(fields))
        }
        Some(k2) if k2 == Kind::LIST => Some(Value::List(list::elements(tx, k)?)),
        Some(k2) if k2 == Kind::SET => Some(Value::Set(set::members(tx, k)?)),
        Some(k2) if k2 == Kind::ZSET => Some(Value::ZSet(zset::members(tx, k)?)),
        // A type without an RDB encoding here: refused, never a payload another server
        // would read as something else.
        Some(other) => return Err(Reply::err(format!("ERR DUMP of a {} is not supported", other.name()))),
    })
}

/// Write `v` at `k` (which must not exist), with expiry time `at` (ms; 0 none), through
/// the same writes as the type's commands (HSET, RPUSH, SADD, ZADD).
pub(crate) fn put(tx: &mut Tx, k: &[u8], v: &Value, at: u64) -> TxResult<()> {
    match v {
        Value::String(s) => return tx.set(k, s, if at == 0 { Ttl::Clear } else { Ttl::At(at) }),
        Value::Hash(fields) => {
            for (f, x) in fields {
                tx.hset(k, f, x)?;
            }
        }
        Value::List(items) => list::append(tx, k, items)?,
        Value::Set(members) => set::add(tx, k, members).map(drop)?,
        Value::ZSet(members) => zset::add_all(tx, k, members)?,
    }
    if at != 0 {
        tx.set_expire(k, at)?;
    }
    Ok(())
}

fn restore_in(tx: &mut Tx, a: &[Vec<u8>]) -> TxResult<Reply> {
    let (mut replace, mut absttl, mut idle, mut freq) = (false, false, None, None);
    let mut j = 3;
    while j < a.len() {
        let more = j + 1 < a.len();
        match upper(&a[j]).as_str() {
            "REPLACE" => replace = true,
            "ABSTTL" => absttl = true,
            "IDLETIME" if more && freq.is_none() => {
                let v = int(&a[j + 1]).ok_or_else(not_int)?;
                if v < 0 {
                    return Err(Reply::err("ERR Invalid IDLETIME value, must be >= 0"));
                }
                idle = Some(v);
                j += 1;
            }
            "FREQ" if more && idle.is_none() => {
                let v = int(&a[j + 1]).ok_or_else(not_int)?;
                if !(0..=255).contains(&v) {
                    return Err(Reply::err("ERR Invalid FREQ value, must be >= 0 and <= 255"));
                }
                freq = Some(v);
                j += 1;
            }
            _ => return Err(Reply::err("ERR syntax error")),
        }
        j += 1;
    }
    let k = &a[0];
    if !replace && tx.kind(k)?.is_some() {
        return Err(Reply::err("BUSYKEY Target key name already exists."));
    }
    let ttl = int(&a[1]).ok_or_else(not_int)?;
    if ttl < 0 {
        return Err(Reply::err("ERR Invalid TTL value, must be >= 0"));
    }
    let v = match rdb::undump(&a[2]) {
        Ok(v) => v,
        Err(rdb::Error::Checksum) => return Err(Reply::err("ERR DUMP payload version or checksum are wrong")),
        Err(_) => return Err(Reply::err("ERR Bad data format")),
    };
    if replace {
        tx.del(k)?;
    }
    let at = match (ttl, absttl) {
        (0, _) => 0,
        (t, true) => t as u64,
        (t, false) => tx.now().saturating_add(t as u64),
    };
    if at != 0 && at <= tx.now() {
        return Ok(Reply::ok()); // already expired: nothing is created (the old key is gone)
    }
    put(tx, k, &v, at)?;
    Ok(Reply::ok())
}
