//! The data commands — strings, hashes, expiry, keys — each over a [`Tx`]: what it reads
//! includes what the same command (or the same EXEC) wrote before, and its writes are
//! applied by the caller as one atomic batch. A command that fails returns its error
//! and the caller drops what it wrote, so no command is ever half applied.

use crate::bitops;
use crate::command::Command;
pub(crate) use crate::command::{int, Ctx};
use crate::keyspace::{wrongtype, Kind, Ttl, Tx, TxResult};
use crate::resp::Reply;
use std::ops::Bound;

pub(crate) fn upper(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_ascii_uppercase()
}

pub(crate) fn float(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    // Redis refuses leading/trailing space and NaN.
    if s.is_empty() || s.trim() != s {
        return None;
    }
    s.parse::<f64>().ok().filter(|f| !f.is_nan())
}

/// A float as Redis prints INCRBYFLOAT results: shortest round-trip, no exponent for
/// ordinary magnitudes, integers without a point.
fn fmt_float(f: f64) -> String {
    if f == f.trunc() && f.abs() < 1e17 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

pub(crate) fn not_int() -> Reply {
    Reply::err("ERR value is not an integer or out of range")
}

fn syntax() -> Reply {
    Reply::err("ERR syntax error")
}

fn bulk_or_nil(v: Option<Vec<u8>>) -> Reply {
    v.map(Reply::Bulk).unwrap_or(Reply::Nil)
}

/// Bytes a bulk reply of `n` bytes takes on the wire (header, CRLFs), as counted against
/// the output limit.
pub(crate) fn bulk_cost(n: usize) -> usize {
    n + 16
}

/// An expiry option's time: `amount` in `unit_ms` from `now`, or an absolute time in
/// `unit_ms` (`absolute`). Redis's errors for non-positive or overflowing times.
fn expiry_at(now: u64, amount: &[u8], unit_ms: u64, absolute: bool, cmd: &str) -> TxResult<u64> {
    let invalid = || Reply::err(format!("ERR invalid expire time in '{}' command", cmd.to_ascii_lowercase()));
    let n = int(amount).ok_or_else(not_int)?;
    if n <= 0 {
        return Err(invalid());
    }
    let ms = (n as u64).checked_mul(unit_ms).ok_or_else(invalid)?;
    if absolute {
        Ok(ms)
    } else {
        now.checked_add(ms).filter(|&t| t < i64::MAX as u64).ok_or_else(invalid)
    }
}

/// SET's options: NX/XX, GET, and one of EX/PX/EXAT/PXAT/KEEPTTL.
fn set(tx: &mut Tx, k: &[u8], v: &[u8], opts: &[Vec<u8>]) -> TxResult<Reply> {
    let (mut nx, mut xx, mut get, mut ttl, mut timed) = (false, false, false, Ttl::Clear, false);
    let mut i = 0;
    while i < opts.len() {
        let o = upper(&opts[i]);
        match o.as_str() {
            "NX" => nx = true,
            "XX" => xx = true,
            "GET" => get = true,
            "KEEPTTL" if !timed => {
                ttl = Ttl::Keep;
                timed = true;
            }
            "EX" | "PX" | "EXAT" | "PXAT" if !timed && i + 1 < opts.len() => {
                let unit = if o.starts_with('E') { 1000 } else { 1 };
                ttl = Ttl::At(expiry_at(tx.now(), &opts[i + 1], unit, o.ends_with("AT"), "set")?);
                timed = true;
                i += 1;
            }
            _ => return Err(syntax()),
        }
        i += 1;
    }
    if nx && xx {
        return Err(syntax());
    }
    let old = if get { tx.get(k)? } else { None };
    let exists = if get {
        old.is_some()
    } else if nx || xx {
        tx.kind(k)?.is_some()
    } else {
        false
    };
    if (nx && exists) || (xx && !exists) {
        return Ok(if get { bulk_or_nil(old) } else { Reply::Nil });
    }
    tx.set(k, v, ttl)?;
    Ok(if get { bulk_or_nil(old) } else { Reply::ok() })
}

fn incr(tx: &mut Tx, k: &[u8], by: i64) -> TxResult<Reply> {
    let cur = match tx.get(k)? {
        None => 0,
        Some(v) => int(&v).ok_or_else(not_int)?,
    };
    let n = cur.checked_add(by).ok_or_else(|| Reply::err("ERR increment or decrement would overflow"))?;
    tx.set(k, n.to_string().as_bytes(), Ttl::Keep)?;
    Ok(Reply::Int(n))
}

fn incr_float(cur: Option<Vec<u8>>, by: &[u8], hash: bool) -> TxResult<(f64, String)> {
    let not_float = || Reply::err("ERR value is not a valid float");
    // Redis's order differs: INCRBYFLOAT reads the value first, HINCRBYFLOAT the
    // increment (and names the hash value and an infinite increment in its errors).
    let parse_by = || match float(by) {
        Some(f) if hash && f.is_infinite() => Err(Reply::err("ERR value is NaN or Infinity")),
        Some(f) => Ok(f),
        None => Err(not_float()),
    };
    let by_first = if hash { Some(parse_by()?) } else { None };
    let cur = match cur {
        None => 0.0,
        Some(v) if hash => float(&v).ok_or_else(|| Reply::err("ERR hash value is not a float"))?,
        Some(v) => float(&v).ok_or_else(not_float)?,
    };
    let by = match by_first {
        Some(f) => f,
        None => parse_by()?,
    };
    let n = cur + by;
    if !n.is_finite() {
        return Err(Reply::err("ERR increment would produce NaN or Infinity"));
    }
    Ok((n, fmt_float(n)))
}

/// Remaining time to live, Redis's TTL/PTTL answers: -2 absent, -1 no expiry time.
fn ttl(tx: &mut Tx, k: &[u8], unit_ms: u64) -> TxResult<Reply> {
    Ok(Reply::Int(match tx.expire_time(k)? {
        None => -2,
        Some(0) => -1,
        Some(at) => {
            let left = at.saturating_sub(tx.now());
            ((left + unit_ms / 2) / unit_ms) as i64
        }
    }))
}

/// EXPIRE and friends, with NX/XX/GT/LT.
fn expire(tx: &mut Tx, cmd: &str, a: &[Vec<u8>]) -> TxResult<Reply> {
    let k = &a[0];
    let unit = if cmd.starts_with('P') { 1 } else { 1000 };
    let absolute = cmd.ends_with("AT");
    let n = int(&a[1]).ok_or_else(not_int)?;
    let invalid = || Reply::err(format!("ERR invalid expire time in '{}' command", cmd.to_ascii_lowercase()));
    let ms = n.checked_mul(unit as i64).ok_or_else(invalid)?;
    let at = if absolute { ms } else { (tx.now() as i64).checked_add(ms).ok_or_else(invalid)? };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for o in &a[2..] {
        match upper(o).as_str() {
            "NX" => nx = true,
            "XX" => xx = true,
            "GT" => gt = true,
            "LT" => lt = true,
            o => return Err(Reply::err(format!("ERR Unsupported option {o}"))),
        }
    }
    if nx && (xx || gt || lt) {
        return Err(Reply::err("ERR NX and XX, GT or LT options at the same time are not compatible"));
    }
    if gt && lt {
        return Err(Reply::err("ERR GT and LT options at the same time are not compatible"));
    }
    let Some(cur) = tx.expire_time(k)? else { return Ok(Reply::Int(0)) };
    // No expiry time counts as infinite for GT and LT.
    let skip = (nx && cur != 0)
        || (xx && cur == 0)
        || (gt && (cur == 0 || at <= cur as i64))
        || (lt && cur != 0 && at >= cur as i64);
    if skip {
        return Ok(Reply::Int(0));
    }
    // A time not in the future deletes the key (as Redis does); `set_expire` does that.
    tx.set_expire(k, at.max(1) as u64)?;
    Ok(Reply::Int(1))
}

/// HSCAN/SCAN options: MATCH pattern, COUNT n (and TYPE t for SCAN).
pub(crate) struct ScanOpts {
    pub pattern: Option<crate::glob::Pattern>,
    pub count: usize,
    pub kind: Option<String>,
}

pub(crate) fn scan_opts(a: &[Vec<u8>], max_key: usize, allow_type: bool) -> TxResult<ScanOpts> {
    let mut o = ScanOpts { pattern: None, count: 10, kind: None };
    let mut i = 0;
    while i < a.len() {
        match upper(&a[i]).as_str() {
            "MATCH" if i + 1 < a.len() => o.pattern = Some(crate::glob::Pattern::new(&a[i + 1], max_key)),
            "COUNT" if i + 1 < a.len() => match int(&a[i + 1]) {
                Some(n) if n > 0 => o.count = (n as usize).min(100_000),
                _ => return Err(not_int()),
            },
            "TYPE" if allow_type && i + 1 < a.len() => o.kind = Some(String::from_utf8_lossy(&a[i + 1]).to_lowercase()),
            _ => return Err(syntax()),
        }
        i += 2;
    }
    Ok(o)
}

/// Hash replies: HGETALL a map (RESP3) or flat array, HKEYS/HVALS arrays; `None` when
/// the reply would pass `budget` bytes.
fn hash_walk(tx: &mut Tx, k: &[u8], keys: bool, vals: bool, budget: usize, resp3: bool) -> TxResult<Option<Reply>> {
    let (mut items, mut size, mut over) = (Vec::new(), 0usize, false);
    tx.hscan(k, None, |f, v| {
        if keys {
            size += bulk_cost(f.len());
            items.push(Reply::bulk(f));
        }
        if vals {
            size += bulk_cost(v.len());
            items.push(Reply::bulk(v));
        }
        over = size > budget;
        !over
    })?;
    if over {
        return Ok(None);
    }
    Ok(Some(if keys && vals && resp3 {
        let mut it = items.into_iter();
        let mut pairs = Vec::new();
        while let (Some(f), Some(v)) = (it.next(), it.next()) {
            pairs.push((f, v));
        }
        Reply::Map(pairs)
    } else {
        Reply::Array(items)
    }))
}

/// The error for a reply over the output limit: the caller closes the connection.
pub(crate) const OVER_LIMIT: &str = "\u{0}over-output-limit";

pub(crate) fn over() -> Reply {
    Reply::Error(OVER_LIMIT.into())
}

/// Remember `last` as a cursor; its number (bounded: at most 1024 cursors and 1 MiB of
/// their keys per connection, past which old cursors become invalid).
fn cursor_for(cursors: &mut Vec<Vec<u8>>, last: Vec<u8>) -> i64 {
    if cursors.len() >= 1024 || cursors.iter().map(Vec::len).sum::<usize>() + last.len() > 1 << 20 {
        cursors.clear();
    }
    cursors.push(last);
    cursors.len() as i64
}

pub(crate) fn cursor_start(cursors: &[Vec<u8>], arg: &[u8]) -> TxResult<Option<Vec<u8>>> {
    match int(arg).filter(|&n| n >= 0) {
        Some(0) => Ok(None),
        Some(n) => cursors.get(n as usize - 1).cloned().map(Some).ok_or_else(|| Reply::err("ERR invalid cursor")),
        None => Err(Reply::err("ERR invalid cursor")),
    }
}

/// Redis's largest string (`proto-max-bulk-len`, 512 MiB); the engine's own value limit
/// may be lower and is checked as well.
const MAX_STRING: u64 = 512 << 20;

fn too_big() -> Reply {
    Reply::err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
}

/// A SETBIT/GETBIT offset: a bit of a string no longer than [`MAX_STRING`].
fn bit_offset(b: &[u8]) -> TxResult<u64> {
    let bad = || Reply::err("ERR bit offset is not an integer or out of range");
    let n = int(b).ok_or_else(bad)?;
    (0..(MAX_STRING * 8) as i64).contains(&n).then_some(n as u64).ok_or_else(bad)
}

/// BITCOUNT's `[start end [BYTE|BIT]]` (`start_needs_end`) or BITPOS's
/// `[start [end [BYTE|BIT]]]` over `v`: the clamped range (`None`: empty) and whether it
/// counts bits.
fn bit_range(v: &[u8], a: &[Vec<u8>], start_needs_end: bool) -> TxResult<(Option<(u64, u64)>, bool)> {
    let len = v.len() as i64;
    if a.is_empty() {
        return Ok((bitops::clamp(0, len - 1, len, false), false));
    }
    if a.len() > 3 || (start_needs_end && a.len() == 1) {
        return Err(syntax());
    }
    let start = int(&a[0]).ok_or_else(not_int)?;
    let bits = match a.get(2).map(|u| upper(u)) {
        None => false,
        Some(u) if u == "BIT" => true,
        Some(u) if u == "BYTE" => false,
        Some(_) => return Err(syntax()),
    };
    let total = if bits { len * 8 } else { len };
    let end = match a.get(1) {
        Some(e) => int(e).ok_or_else(not_int)?,
        None => total - 1,
    };
    Ok((bitops::clamp(start, end, total, start_needs_end), bits))
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN].
fn lcs(tx: &mut Tx, a: &[Vec<u8>], resp3: bool) -> TxResult<Reply> {
    let (mut len, mut idx, mut with_len, mut min_len) = (false, false, false, 0u64);
    let mut i = 2;
    while i < a.len() {
        match upper(&a[i]).as_str() {
            "LEN" => len = true,
            "IDX" => idx = true,
            "WITHMATCHLEN" => with_len = true,
            "MINMATCHLEN" if i + 1 < a.len() => {
                min_len = int(&a[i + 1]).ok_or_else(not_int)?.max(0) as u64;
                i += 1;
            }
            _ => return Err(syntax()),
        }
        i += 1;
    }
    let string = |r: TxResult<Option<Vec<u8>>>| match r {
        Err(e) if e == wrongtype() => Err(Reply::err("ERR The specified keys must contain string values")),
        r => r.map(Option::unwrap_or_default),
    };
    let x = string(tx.get(&a[0]))?;
    let y = string(tx.get(&a[1]))?;
    if len && idx {
        return Err(Reply::err("ERR If you want both the length and indexes, please just use IDX."));
    }
    // The table is transient memory this one command takes: bounded as Redis bounds it.
    if bitops::table_bytes(x.len(), y.len()) > MAX_STRING {
        return Err(Reply::err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"));
    }
    let (s, matches) = bitops::lcs(&x, &y, min_len);
    if !idx {
        return Ok(if len { Reply::Int(s.len() as i64) } else { Reply::Bulk(s) });
    }
    let pair = |(p, q): (u64, u64)| Reply::Array(vec![Reply::Int(p as i64), Reply::Int(q as i64)]);
    let items = matches
        .into_iter()
        .map(|m| {
            let mut e = vec![pair(m.a), pair(m.b)];
            if with_len {
                e.push(Reply::Int(m.len as i64));
            }
            Reply::Array(e)
        })
        .collect();
    let body = vec![(Reply::bulk("matches"), Reply::Array(items)), (Reply::bulk("len"), Reply::Int(s.len() as i64))];
    Ok(if resp3 { Reply::Map(body) } else { Reply::Array(body.into_iter().flat_map(|(k, v)| [k, v]).collect()) })
}

/// A random 64-bit number (std's per-process random hash keys and a counter; no crate
/// needed for RANDOMKEY's and HRANDFIELD's picks, which need no quality beyond that).
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    thread_local!(static S: std::collections::hash_map::RandomState = std::collections::hash_map::RandomState::new());
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    S.with(|s| {
        let mut h = s.build_hasher();
        h.write_u64(n);
        h.finish()
    })
}

/// HRANDFIELD key [count [WITHVALUES]], as Redis 7.0: a positive count picks distinct
/// fields (all of them when it exceeds the hash), a negative one `-count` picks with
/// repeats.
fn hrandfield(tx: &mut Tx, k: &[u8], a: &[Vec<u8>], cx: &mut Ctx) -> TxResult<Reply> {
    let count = match a.first() {
        None => None,
        Some(c) => match int(c).ok_or_else(not_int)? {
            i64::MIN => {
                return Err(Reply::err(
                    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
                ))
            }
            n => Some(n),
        },
    };
    let with_values = match a.get(1) {
        None => false,
        Some(w) if a.len() == 2 && upper(w) == "WITHVALUES" => true,
        Some(_) => return Err(syntax()),
    };
    if with_values && count.is_some_and(|n| n.unsigned_abs() > i64::MAX as u64 / 2) {
        return Err(Reply::err("ERR value is out of range"));
    }
    if tx.kind(k)? == Some(Kind::STRING) {
        return Err(wrongtype());
    }
    let mut all = Vec::new();
    let mut size = 0usize;
    tx.hscan(k, None, |f, v| {
        size += bulk_cost(f.len()) + bulk_cost(v.len());
        all.push((f.to_vec(), v.to_vec()));
        size <= cx.budget
    })?;
    if size > cx.budget {
        return Ok(over());
    }
    let Some(count) = count else {
        return Ok(match all.len() {
            0 => Reply::Nil,
            n => Reply::Bulk(all.swap_remove((random_u64() % n as u64) as usize).0),
        });
    };
    if all.is_empty() || count == 0 {
        return Ok(Reply::Array(Vec::new()));
    }
    let n = all.len();
    let picks: Vec<usize> = if count < 0 {
        let want = count.unsigned_abs();
        // Each pick costs at least a field's bulk: refuse before building a reply past the limit.
        if want.saturating_mul(bulk_cost(0) as u64) > cx.budget as u64 {
            return Ok(over());
        }
        (0..want).map(|_| (random_u64() % n as u64) as usize).collect()
    } else {
        // A random subset in random order: a partial Fisher-Yates shuffle.
        let mut order: Vec<usize> = (0..n).collect();
        let want = (count as usize).min(n);
        for i in 0..want {
            let j = i + (random_u64() % (n - i) as u64) as usize;
            order.swap(i, j);
        }
        order.truncate(want);
        order
    };
    let mut items = Vec::with_capacity(picks.len() * 2);
    for i in picks {
        let (f, v) = &all[i];
        match (with_values, cx.resp3) {
            (false, _) => items.push(Reply::bulk(f.as_slice())),
            (true, false) => items.extend([Reply::bulk(f.as_slice()), Reply::bulk(v.as_slice())]),
            (true, true) => items.push(Reply::Array(vec![Reply::bulk(f.as_slice()), Reply::bulk(v.as_slice())])),
        }
    }
    Ok(Reply::Array(items))
}

/// One page of SCAN or HSCAN: COUNT elements looked at, the bulks of those shown, the
/// element to resume after, and the output budget.
pub(crate) struct Page {
    items: Vec<Reply>,
    seen: usize,
    count: usize,
    last: Vec<u8>,
    size: usize,
    budget: usize,
}

impl Page {
    pub(crate) fn new(count: usize, budget: usize) -> Page {
        Page { items: Vec::new(), seen: 0, count, last: Vec::new(), size: 0, budget }
    }

    /// Look at one element (`resume`: what a cursor resumes after), showing `bulks`;
    /// whether to go on.
    pub(crate) fn step(&mut self, resume: &[u8], bulks: &[&[u8]]) -> bool {
        self.seen += 1;
        for b in bulks {
            self.size += bulk_cost(b.len());
            self.items.push(Reply::bulk(*b));
        }
        if self.seen == self.count {
            self.last = resume.to_vec();
        }
        self.seen < self.count && self.size <= self.budget
    }

    /// `[next cursor, [bulks]]`, or the over-limit error.
    pub(crate) fn reply(self, cursors: &mut Vec<Vec<u8>>) -> Reply {
        if self.size > self.budget {
            return over();
        }
        let next = if self.seen < self.count { 0 } else { cursor_for(cursors, self.last) };
        Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(self.items)])
    }
}

/// Run data command `cmd` (upper case, known, arity checked) with arguments `a`.
pub(crate) fn run(tx: &mut Tx, cx: &mut Ctx, command: &Command, a: &[Vec<u8>]) -> TxResult<Reply> {
    let cmd = command.name;
    if let Some(run) = command.run {
        return run(tx, cx, cmd, a);
    }
    let k = a.first().map_or(&[][..], |k| k.as_slice());
    Ok(match cmd {
        "GET" => bulk_or_nil(tx.get(k)?),
        "SET" => set(tx, k, &a[1], &a[2..])?,
        "SETNX" => match set(tx, k, &a[1], &[b"NX".to_vec()])? {
            Reply::Simple(_) => Reply::Int(1),
            _ => Reply::Int(0),
        },
        "SETEX" | "PSETEX" => {
            let unit = if cmd == "SETEX" { 1000 } else { 1 };
            let at = expiry_at(tx.now(), &a[1], unit, false, cmd)?;
            tx.set(k, &a[2], Ttl::At(at))?;
            Reply::ok()
        }
        "GETSET" => set(tx, k, &a[1], &[b"GET".to_vec()])?,
        "GETDEL" => {
            let v = tx.get(k)?;
            if v.is_some() {
                tx.del(k)?;
            }
            bulk_or_nil(v)
        }
        "GETEX" => {
            let v = tx.get(k)?;
            let o = a.get(1).map(|o| upper(o));
            let at = match (o.as_deref(), a.len()) {
                (None, 1) => None,
                (Some("PERSIST"), 2) => Some(0),
                (Some(u @ ("EX" | "PX" | "EXAT" | "PXAT")), 3) => {
                    let unit = if u.starts_with('E') { 1000 } else { 1 };
                    Some(expiry_at(tx.now(), &a[2], unit, u.ends_with("AT"), "getex")?)
                }
                _ => return Err(syntax()),
            };
            if let (Some(at), true) = (at, v.is_some()) {
                tx.set_expire(k, at)?;
            }
            bulk_or_nil(v)
        }
        "MGET" => {
            let mut items = Vec::with_capacity(a.len().min(1024));
            let mut size = 0usize;
            for k in a {
                // A key of another type answers nil in MGET, as in Redis.
                let v = match tx.get(k) {
                    Ok(v) => v,
                    Err(e) if e == wrongtype() => None,
                    Err(e) => return Err(e),
                };
                size += 8 + v.as_ref().map_or(0, |v| bulk_cost(v.len()));
                if size > cx.budget {
                    return Ok(over());
                }
                items.push(bulk_or_nil(v));
            }
            Reply::Array(items)
        }
        "MSET" | "MSETNX" => {
            if !a.len().is_multiple_of(2) {
                return Err(Reply::err(crate::command::wrong_args(cmd)));
            }
            if cmd == "MSETNX" {
                for kv in a.chunks(2) {
                    if tx.kind(&kv[0])?.is_some() {
                        return Ok(Reply::Int(0));
                    }
                }
            }
            for kv in a.chunks(2) {
                tx.set(&kv[0], &kv[1], Ttl::Clear)?;
            }
            if cmd == "MSET" {
                Reply::ok()
            } else {
                Reply::Int(1)
            }
        }
        "INCR" => incr(tx, k, 1)?,
        "DECR" => incr(tx, k, -1)?,
        "INCRBY" => incr(tx, k, int(&a[1]).ok_or_else(not_int)?)?,
        "DECRBY" => {
            let d = int(&a[1]).ok_or_else(not_int)?;
            incr(tx, k, d.checked_neg().ok_or_else(|| Reply::err("ERR decrement would overflow"))?)?
        }
        "INCRBYFLOAT" => {
            let (_, s) = incr_float(tx.get(k)?, &a[1], false)?;
            tx.set(k, s.as_bytes(), Ttl::Keep)?;
            Reply::bulk(s)
        }
        "APPEND" => {
            let mut v = tx.get(k)?.unwrap_or_default();
            v.extend_from_slice(&a[1]);
            tx.store().info().check_sizes(k, Some(&v)).map_err(crate::keyspace::store_reply)?;
            tx.set(k, &v, Ttl::Keep)?;
            Reply::Int(v.len() as i64)
        }
        "STRLEN" => Reply::Int(tx.get(k)?.map_or(0, |v| v.len() as i64)),
        "GETRANGE" | "SUBSTR" => {
            let v = tx.get(k)?.unwrap_or_default();
            let (s, e) = (int(&a[1]).ok_or_else(not_int)?, int(&a[2]).ok_or_else(not_int)?);
            match bitops::clamp(s, e, v.len() as i64, true) {
                None => Reply::bulk(Vec::new()),
                Some((s, e)) => Reply::bulk(v[s as usize..=e as usize].to_vec()),
            }
        }
        "SETRANGE" => {
            let off = int(&a[1]).ok_or_else(not_int)?;
            if off < 0 {
                return Err(Reply::err("ERR offset is out of range"));
            }
            let cur = tx.get(k)?;
            if a[2].is_empty() {
                return Ok(Reply::Int(cur.map_or(0, |v| v.len() as i64)));
            }
            let end = (off as u64).saturating_add(a[2].len() as u64);
            if end > MAX_STRING {
                return Err(too_big());
            }
            let mut v = cur.unwrap_or_default();
            let (off, end) = (off as usize, end as usize);
            if v.len() < end {
                v.resize(end, 0);
            }
            v[off..end].copy_from_slice(&a[2]);
            tx.store().info().check_sizes(k, Some(&v)).map_err(crate::keyspace::store_reply)?;
            tx.set(k, &v, Ttl::Keep)?;
            Reply::Int(v.len() as i64)
        }
        "GETBIT" => {
            let bit = bit_offset(&a[1])?;
            Reply::Int(i64::from(tx.get(k)?.is_some_and(|v| bitops::get_bit(&v, bit))))
        }
        "SETBIT" => {
            let bit = bit_offset(&a[1])?;
            let on = match a[2].as_slice() {
                b"0" => false,
                b"1" => true,
                _ => return Err(Reply::err("ERR bit is not an integer or out of range")),
            };
            let mut v = tx.get(k)?.unwrap_or_default();
            let old = bitops::set_bit(&mut v, bit, on);
            tx.store().info().check_sizes(k, Some(&v)).map_err(crate::keyspace::store_reply)?;
            tx.set(k, &v, Ttl::Keep)?;
            Reply::Int(i64::from(old))
        }
        "BITCOUNT" => {
            let Some(v) = tx.get(k)? else { return Ok(Reply::Int(0)) };
            let (range, bits) = bit_range(&v, &a[1..], true)?;
            Reply::Int(range.map_or(0, |(s, e)| bitops::count(&v, s, e, bits)) as i64)
        }
        "BITPOS" => {
            let bit = match int(&a[1]).ok_or_else(not_int)? {
                0 => false,
                1 => true,
                _ => return Err(Reply::err("ERR The bit argument must be 1 or 0.")),
            };
            let Some(v) = tx.get(k)? else { return Ok(Reply::Int(if bit { -1 } else { 0 })) };
            let (range, bits) = bit_range(&v, &a[2..], false)?;
            Reply::Int(bitops::position(&v, bit, range, bits, a.len() >= 4))
        }
        "BITOP" => {
            let op = match upper(&a[0]).as_str() {
                "AND" => bitops::Op::And,
                "OR" => bitops::Op::Or,
                "XOR" => bitops::Op::Xor,
                "NOT" => bitops::Op::Not,
                _ => return Err(syntax()),
            };
            if op == bitops::Op::Not && a.len() != 3 {
                return Err(Reply::err("ERR BITOP NOT must be called with a single source key."));
            }
            let mut srcs = Vec::with_capacity(a.len() - 2);
            for s in &a[2..] {
                srcs.push(tx.get(s)?.unwrap_or_default());
            }
            let out = bitops::bitop(op, &srcs);
            if out.is_empty() {
                tx.del(&a[1])?;
            } else {
                tx.store().info().check_sizes(&a[1], Some(&out)).map_err(crate::keyspace::store_reply)?;
                tx.set(&a[1], &out, Ttl::Clear)?;
            }
            Reply::Int(out.len() as i64)
        }
        "LCS" => lcs(tx, a, cx.resp3)?,
        "RENAME" | "RENAMENX" => {
            let nx = cmd == "RENAMENX";
            if tx.kind(k)?.is_none() {
                return Err(Reply::err("ERR no such key"));
            }
            if a[0] == a[1] {
                return Ok(if nx { Reply::Int(0) } else { Reply::ok() });
            }
            if !tx.copy_key(k, &a[1], !nx)? {
                return Ok(Reply::Int(0));
            }
            tx.del(k)?;
            if nx {
                Reply::Int(1)
            } else {
                Reply::ok()
            }
        }
        "COPY" => {
            let mut replace = false;
            let mut i = 2;
            while i < a.len() {
                match upper(&a[i]).as_str() {
                    "REPLACE" => replace = true,
                    "DB" if i + 1 < a.len() => {
                        // The dispatcher copies into another database
                        // (`crate::select::copy_to_db`); here `DB` names this one.
                        int(&a[i + 1]).ok_or_else(not_int)?;
                        i += 1;
                    }
                    _ => return Err(syntax()),
                }
                i += 1;
            }
            if a[0] == a[1] {
                return Err(Reply::err("ERR source and destination objects are the same"));
            }
            Reply::Int(i64::from(tx.copy_key(k, &a[1], replace)?))
        }
        "RANDOMKEY" => {
            // Up to 32 keys from a random point of the key space (wrapping to the start),
            // and one of them at random: not uniform over keys (keys after a gap are
            // likelier), as Redis's is not over its hash table's buckets either.
            let start = tx.engine_key(&random_u64().to_be_bytes());
            let mut window: Vec<Vec<u8>> = Vec::new();
            for bound in [Bound::Included(start), Bound::Unbounded] {
                tx.keys(bound, |user, _| {
                    if !window.iter().any(|w| w == user) {
                        window.push(user.to_vec());
                    }
                    window.len() < 32
                })?;
                if window.len() >= 32 {
                    break;
                }
            }
            match window.len() {
                0 => Reply::Nil,
                n => Reply::Bulk(window.swap_remove((random_u64() % n as u64) as usize)),
            }
        }
        "TOUCH" => {
            let mut n = 0;
            for k in a {
                n += i64::from(tx.kind(k)?.is_some());
            }
            Reply::Int(n)
        }
        "HRANDFIELD" => hrandfield(tx, k, &a[1..], cx)?,
        "MEMORY" => match (upper(k).as_str(), a.len()) {
            // The bytes of the key's records (keys and values as stored, and a
            // record's fixed cost in the engine, 16 bytes): an estimate, as Redis's is.
            ("USAGE", 2) | ("USAGE", 4) => {
                if a.len() == 4 && (upper(&a[2]) != "SAMPLES" || int(&a[3]).is_none()) {
                    return Err(syntax());
                }
                let recs = tx.records_of(&a[1])?;
                if recs.is_empty() {
                    Reply::Nil
                } else {
                    Reply::Int(recs.iter().map(|(rk, v)| rk.len() + v.len() + 16).sum::<usize>() as i64)
                }
            }
            _ => Reply::err(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try MEMORY HELP.",
                String::from_utf8_lossy(k)
            )),
        },

        "HSET" | "HMSET" => {
            if !(a.len() - 1).is_multiple_of(2) {
                return Err(Reply::err(crate::command::wrong_args(cmd)));
            }
            let mut new = 0;
            for fv in a[1..].chunks(2) {
                new += i64::from(tx.hset(k, &fv[0], &fv[1])?);
            }
            if cmd == "HSET" {
                Reply::Int(new)
            } else {
                Reply::ok()
            }
        }
        "HSETNX" => {
            if tx.hget(k, &a[1])?.is_some() {
                Reply::Int(0)
            } else {
                tx.hset(k, &a[1], &a[2])?;
                Reply::Int(1)
            }
        }
        "HGET" => bulk_or_nil(tx.hget(k, &a[1])?),
        "HMGET" => {
            let mut items = Vec::new();
            let mut size = 0;
            for f in &a[1..] {
                let v = tx.hget(k, f)?;
                size += 8 + v.as_ref().map_or(0, |v| bulk_cost(v.len()));
                if size > cx.budget {
                    return Ok(over());
                }
                items.push(bulk_or_nil(v));
            }
            Reply::Array(items)
        }
        "HDEL" => {
            let mut n = 0;
            for f in &a[1..] {
                n += i64::from(tx.hdel(k, f)?);
            }
            Reply::Int(n)
        }
        "HEXISTS" => Reply::Int(i64::from(tx.hget(k, &a[1])?.is_some())),
        "HLEN" => Reply::Int(tx.hlen(k)? as i64),
        "HSTRLEN" => Reply::Int(tx.hget(k, &a[1])?.map_or(0, |v| v.len() as i64)),
        "HGETALL" | "HKEYS" | "HVALS" => match hash_walk(tx, k, cmd != "HVALS", cmd != "HKEYS", cx.budget, cx.resp3)? {
            Some(r) => r,
            None => over(),
        },
        "HINCRBY" => {
            let by = int(&a[2]).ok_or_else(not_int)?;
            let cur = match tx.hget(k, &a[1])? {
                None => 0,
                Some(v) => int(&v).ok_or_else(|| Reply::err("ERR hash value is not an integer"))?,
            };
            let n = cur.checked_add(by).ok_or_else(|| Reply::err("ERR increment or decrement would overflow"))?;
            tx.hset(k, &a[1], n.to_string().as_bytes())?;
            Reply::Int(n)
        }
        "HINCRBYFLOAT" => {
            let (_, s) = incr_float(tx.hget(k, &a[1])?, &a[2], true)?;
            tx.hset(k, &a[1], s.as_bytes())?;
            Reply::bulk(s)
        }
        "HSCAN" => {
            let after = cursor_start(cx.cursors, &a[1])?;
            let o = scan_opts(&a[2..], tx.store().info().max_key_len, false)?;
            let mut page = Page::new(o.count, cx.budget);
            tx.hscan(k, after.as_deref(), |f, v| {
                let shown = o.pattern.as_ref().is_none_or(|p| p.matches(f));
                let both = [f, v];
                page.step(f, if shown { &both[..] } else { &[] })
            })?;
            page.reply(cx.cursors)
        }
        "DEL" | "UNLINK" => {
            let mut n = 0;
            for k in a {
                n += i64::from(tx.del(k)?);
            }
            Reply::Int(n)
        }
        "EXISTS" => {
            let mut n = 0;
            for k in a {
                n += i64::from(tx.kind(k)?.is_some());
            }
            Reply::Int(n)
        }
        "TYPE" => Reply::Simple(tx.kind(k)?.map_or("none", Kind::name).into()),
        "EXPIRE" | "PEXPIRE" | "EXPIREAT" | "PEXPIREAT" => expire(tx, cmd, a)?,
        "TTL" => ttl(tx, k, 1000)?,
        "PTTL" => ttl(tx, k, 1)?,
        "EXPIRETIME" | "PEXPIRETIME" => Reply::Int(match tx.expire_time(k)? {
            None => -2,
            Some(0) => -1,
            Some(at) if cmd == "EXPIRETIME" => (at / 1000) as i64,
            Some(at) => at as i64,
        }),
        "PERSIST" => match tx.expire_time(k)? {
            Some(t) if t != 0 => {
                tx.set_expire(k, 0)?;
                Reply::Int(1)
            }
            _ => Reply::Int(0),
        },
        "KEYS" => {
            let pat = crate::glob::Pattern::new(k, tx.store().info().max_key_len);
            let (mut items, mut size) = (Vec::new(), 0usize);
            tx.keys(Bound::Unbounded, |user, _| {
                if pat.matches(user) {
                    size += bulk_cost(user.len());
                    items.push(Reply::bulk(user));
                }
                size <= cx.budget
            })?;
            if size > cx.budget {
                return Ok(over());
            }
            Reply::Array(items)
        }
        "SCAN" => {
            let start = cursor_start(cx.cursors, &a[0])?.map_or(Bound::Unbounded, Bound::Excluded);
            let o = scan_opts(&a[1..], tx.store().info().max_key_len, true)?;
            let mut page = Page::new(o.count, cx.budget);
            tx.typed_keys(start, |user, rec, kind| {
                let kind = kind.name();
                let shown =
                    o.pattern.as_ref().is_none_or(|p| p.matches(user)) && o.kind.as_deref().is_none_or(|t| t == kind);
                let one = [user];
                page.step(rec, if shown { &one[..] } else { &[] })
            })?;
            page.reply(cx.cursors)
        }
        _ => return Err(Reply::err(format!("ERR '{}' is not a data command", cmd.to_ascii_lowercase()))),
    })
}
