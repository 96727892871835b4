//! OBJECT (ENCODING, REFCOUNT, FREQ, IDLETIME, HELP): what Redis 7.0 says about a key's
//! value, answered from pmkv's records.
//!
//! pmkv has one layout per type (records in the engine), so the encoding is the one
//! Redis 7.0 would pick for the same value under the same thresholds (`CONFIG SET
//! hash-max-listpack-entries` …): clients and tests that ask it (Redis's suite does, to
//! check its own conversions) get Redis's word. Redis converts a small encoding to a big
//! one and never back; pmkv answers from the value as it is now, so a hash that grew
//! past the threshold and shrank again says `listpack` here where Redis says
//! `hashtable`. A string is `int` when it is an integer in canonical form, `embstr` up
//! to 44 bytes and `raw` above (Redis's `OBJ_ENCODING_EMBSTR_SIZE_LIMIT`); Redis also
//! says `raw` for a short string an APPEND or SETRANGE made, which pmkv cannot tell.
//!
//! REFCOUNT is 1 but for the integers 0–9999, which Redis shares (2147483647, its
//! `OBJ_SHARED_REFCOUNT`) under the default eviction policy. FREQ answers Redis's error
//! for a server without an LFU policy (pmkv has no eviction). IDLETIME needs the time of
//! each key's last access, which pmkv does not keep: an error says so rather than a
//! made-up number.

use crate::command::Ctx;
use crate::data::upper;
use crate::keyspace::{Tx, TxResult};
use crate::record::Kind;
use crate::resp::Reply;

/// Redis's `OBJ_ENCODING_EMBSTR_SIZE_LIMIT`: longer strings are `raw`.
const EMBSTR_MAX: usize = 44;
/// Redis's `OBJ_SHARED_INTEGERS`: the integers below it are shared objects.
const SHARED_INTEGERS: i64 = 10_000;
/// Redis's `OBJ_SHARED_REFCOUNT` (INT_MAX): the refcount of a shared object.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// OBJECT HELP, as Redis 7.0 words it.
const HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

/// Redis's encoding thresholds (`CONFIG SET` names, Redis 7.0's defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Thresholds {
    pub hash_entries: u64,
    pub hash_value: usize,
    pub set_intset_entries: u64,
    pub zset_entries: u64,
    pub zset_value: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds { hash_entries: 128, hash_value: 64, set_intset_entries: 512, zset_entries: 128, zset_value: 64 }
    }
}

impl Thresholds {
    /// The thresholds as `CONFIG SET` left them (`params`: name → value); a missing or
    /// unreadable one keeps Redis's default.
    pub(crate) fn from_params(params: &std::collections::BTreeMap<&'static str, String>) -> Thresholds {
        let d = Thresholds::default();
        let n = |name: &str, dflt: u64| params.get(name).and_then(|v| v.parse::<u64>().ok()).unwrap_or(dflt);
        Thresholds {
            hash_entries: n("hash-max-listpack-entries", d.hash_entries),
            hash_value: n("hash-max-listpack-value", d.hash_value as u64) as usize,
            set_intset_entries: n("set-max-intset-entries", d.set_intset_entries),
            zset_entries: n("zset-max-listpack-entries", d.zset_entries),
            zset_value: n("zset-max-listpack-value", d.zset_value as u64) as usize,
        }
    }
}

/// An integer in the form Redis's `string2ll` accepts (no sign but `-`, no leading
/// zero, no spaces, fits in 64 bits): such strings are stored as integers.
fn canonical_int(v: &[u8]) -> Option<i64> {
    if v.is_empty() || v.len() > 20 {
        return None;
    }
    let n: i64 = std::str::from_utf8(v).ok()?.parse().ok()?;
    (n.to_string().as_bytes() == v).then_some(n)
}

/// Whether `visit` meets more than `max` elements, or one (its length as `len` says)
/// longer than `max_len`: Redis's test for leaving its compact encoding.
fn over<F>(visit: F, max: u64, max_len: usize) -> TxResult<bool>
where
    F: FnOnce(&mut dyn FnMut(usize) -> bool) -> TxResult<()>,
{
    let (mut n, mut big) = (0u64, false);
    visit(&mut |len| {
        n += 1;
        big = n > max || len > max_len;
        !big
    })?;
    Ok(big)
}

/// OBJECT ENCODING's word for `k` (`None`: no such key).
fn encoding(tx: &mut Tx, k: &[u8], t: Thresholds) -> TxResult<Option<&'static str>> {
    let Some(kind) = tx.kind(k)? else { return Ok(None) };
    let count = tx.meta(k).map_or(0, |m| m.count);
    Ok(Some(if kind == Kind::STRING {
        let v = tx.get(k)?.unwrap_or_default();
        if canonical_int(&v).is_some() {
            "int"
        } else if v.len() <= EMBSTR_MAX {
            "embstr"
        } else {
            "raw"
        }
    } else if kind == Kind::HASH {
        let big = count > t.hash_entries
            || over(|f| tx.scan_elems(kind, k, None, |fl, v| f(fl.len().max(v.len()))), u64::MAX, t.hash_value)?;
        if big {
            "hashtable"
        } else {
            "listpack"
        }
    } else if kind == Kind::SET {
        let mut ints = true;
        if count <= t.set_intset_entries {
            tx.scan_elems(kind, k, None, |m, _| {
                ints = canonical_int(m).is_some();
                ints
            })?;
        }
        if count <= t.set_intset_entries && ints {
            "intset"
        } else {
            "hashtable"
        }
    } else if kind == Kind::ZSET {
        // Two records per member: the member record (a 0 byte, then the member) and
        // the score index; only the member records' lengths count.
        let members = count / 2;
        let big = members > t.zset_entries
            || over(
                |f| {
                    tx.scan_elems(kind, k, None, |rec, _| {
                        rec.first() != Some(&crate::record::zset::MEMBER) || f(rec.len() - 1)
                    })
                },
                u64::MAX,
                t.zset_value,
            )?;
        if big {
            "skiplist"
        } else {
            "listpack"
        }
    } else {
        // Redis 7.0's lists are always quicklists (of listpacks).
        "quicklist"
    }))
}

/// The thresholds the connection's server has now (Redis's defaults in a context
/// without a server's settings).
fn thresholds(cx: &Ctx) -> Thresholds {
    cx.encodings
        .map_or_else(Thresholds::default, |m| Thresholds::from_params(&m.lock().unwrap_or_else(|e| e.into_inner())))
}

/// OBJECT REFCOUNT of `k` (`None`: no such key).
fn refcount(tx: &mut Tx, k: &[u8]) -> TxResult<Option<i64>> {
    Ok(match tx.kind(k)? {
        None => None,
        Some(kind) if kind == Kind::STRING => {
            let v = tx.get(k)?.unwrap_or_default();
            Some(match canonical_int(&v) {
                Some(n) if (0..SHARED_INTEGERS).contains(&n) => SHARED_REFCOUNT,
                _ => 1,
            })
        }
        Some(_) => Some(1),
    })
}

/// `OBJECT subcommand [key]`: the handler (`a`: the arguments after the name).
pub(crate) fn object(tx: &mut Tx, cx: &mut Ctx, _: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let sub = upper(&a[0]);
    let arity = match sub.as_str() {
        "HELP" => 1,
        "ENCODING" | "REFCOUNT" | "FREQ" | "IDLETIME" => 2,
        _ => {
            return Ok(Reply::err(format!(
                "ERR unknown subcommand '{}'. Try OBJECT HELP.",
                String::from_utf8_lossy(&a[0])
            )))
        }
    };
    if a.len() != arity {
        return Ok(Reply::err(format!(
            "ERR wrong number of arguments for 'object|{}' command",
            sub.to_ascii_lowercase()
        )));
    }
    if sub == "HELP" {
        return Ok(Reply::Array(HELP.iter().map(|l| Reply::Simple((*l).into())).collect()));
    }
    let k = &a[1];
    Ok(match sub.as_str() {
        "ENCODING" => encoding(tx, k, thresholds(cx))?.map_or(Reply::Nil, |e| Reply::bulk(e.as_bytes().to_vec())),
        "REFCOUNT" => refcount(tx, k)?.map_or(Reply::Nil, Reply::Int),
        _ if tx.kind(k)?.is_none() => Reply::Nil,
        "FREQ" => Reply::err(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when \
             switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ),
        _ => Reply::err("ERR pmkv does not track when a key was last accessed: OBJECT IDLETIME is not available"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_those_redis_stores_as_integers() {
        assert_eq!(canonical_int(b"123"), Some(123));
        assert_eq!(canonical_int(b"-5"), Some(-5));
        assert_eq!(canonical_int(b"0"), Some(0));
        for not in [&b"007"[..], b"+1", b" 1", b"1.5", b"", b"-0", b"12345678901234567890", b"1e3"] {
            assert_eq!(canonical_int(not), None, "{}", String::from_utf8_lossy(not));
        }
        assert_eq!(canonical_int(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn thresholds_follow_config_set() {
        let mut p = std::collections::BTreeMap::new();
        assert_eq!(Thresholds::from_params(&p), Thresholds::default());
        p.insert("hash-max-listpack-entries", "3".to_string());
        p.insert("zset-max-listpack-value", "junk".to_string());
        let t = Thresholds::from_params(&p);
        assert_eq!((t.hash_entries, t.zset_value), (3, 64));
    }
}
