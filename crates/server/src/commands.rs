//! The commands: what each does to the store, and its reply. Engine-neutral: everything
//! goes through `pmkv::Store`.
//!
//! Read-modify-write commands (SET NX/XX/GET, SETNX, GETSET, GETDEL, INCR…, APPEND, MSET,
//! DEL) take the stripe locks of their keys (sorted, so two never deadlock) for the whole
//! read-modify-write: atomic against each other. Plain GET and SET take no lock; SET takes
//! its stripe so that it orders with RMWs on the same key. A reply to a write is sent
//! only after the engine's put returned, i.e. after the write is persistent in the pool's
//! mode.

use crate::resp::Reply;
use crate::Shared;
use pmkv::{Direction, KeyRange, Store};
use std::ops::Bound;

/// Per-connection state the commands see.
pub struct Conn {
    pub id: u64,
    pub name: Option<Vec<u8>>,
    pub resp3: bool,
    pub authed: bool,
    /// SCAN cursors of this connection: cursor number → the last key returned.
    pub cursors: Vec<Vec<u8>>,
    /// Bytes the next reply may take before the client's output-buffer hard limit is
    /// passed (set by the connection loop before each command): commands whose reply
    /// grows with the data (KEYS, SCAN, MGET, PMKV.RANGE) stop building it there.
    pub reply_budget: usize,
}

impl Conn {
    /// A new connection's state: authenticated already when no password is set.
    pub fn new(id: u64, authed: bool) -> Conn {
        Conn { id, name: None, resp3: false, authed, cursors: Vec::new(), reply_budget: usize::MAX }
    }
}

/// What the connection loop must do after a reply.
pub enum After {
    Continue,
    Close,
    Shutdown,
}

fn upper(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_ascii_uppercase()
}

fn int(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

fn wrong_args(cmd: &str) -> Reply {
    Reply::err(format!("ERR wrong number of arguments for '{}' command", cmd.to_ascii_lowercase()))
}

fn store_err(e: pmkv::Error) -> Reply {
    Reply::err(format!("ERR {} ({})", e, e.kind().name()))
}

/// Glob match as Redis's KEYS/SCAN MATCH: `*`, `?`, `[...]`, `\\` escapes (see
/// [`crate::glob`]: iterative, no recursion, O(|pattern| × |key|)).
pub fn glob(p: &[u8], s: &[u8]) -> bool {
    crate::glob::glob(p, s)
}

/// The reply when a reply being built would pass the client's output-buffer hard limit:
/// the client is told why and disconnected (Redis disconnects it silently), and the
/// server never holds the rest of that reply.
fn over_output_limit(sh: &Shared) -> (Reply, After) {
    sh.output_limit_closes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    (
        Reply::err(format!(
            "ERR reply exceeds client-output-buffer-limit hard limit ({} bytes): closing the connection",
            sh.output.hard
        )),
        After::Close,
    )
}

/// Bytes a bulk reply of `n` bytes takes on the wire (header, CRLFs), as counted against
/// the output limit.
fn bulk_cost(n: usize) -> usize {
    n + 16
}

/// Whether `args` may take long enough (a walk over the store, or many keys) that it
/// must not run on a worker the other connections need: the connection loop runs such
/// commands with `tokio::task::block_in_place`, which hands the worker's other tasks to
/// another thread first, so a KEYS over a large store does not stall PING elsewhere.
pub fn may_take_long(args: &[Vec<u8>]) -> bool {
    const LONG: [&[u8]; 7] = [b"KEYS", b"SCAN", b"FLUSHDB", b"FLUSHALL", b"PMKV.RANGE", b"INFO", b"DBSIZE"];
    args.len() > 16 || args.first().is_some_and(|c| LONG.iter().any(|l| c.eq_ignore_ascii_case(l)))
}

/// Run one command.
pub fn run(sh: &Shared, c: &mut Conn, args: &[Vec<u8>]) -> (Reply, After) {
    let cmd = upper(&args[0]);
    let a = &args[1..];
    let s: &Store = &sh.store;
    if !c.authed && !matches!(cmd.as_str(), "AUTH" | "HELLO" | "QUIT" | "PING") {
        return (Reply::err("NOAUTH Authentication required."), After::Continue);
    }
    let r = match cmd.as_str() {
        "PING" => match a.len() {
            0 => Reply::Simple("PONG".into()),
            1 => Reply::bulk(a[0].clone()),
            _ => wrong_args(&cmd),
        },
        "ECHO" if a.len() == 1 => Reply::bulk(a[0].clone()),
        "QUIT" => return (Reply::ok(), After::Close),
        "RESET" => {
            c.resp3 = false;
            c.name = None;
            c.cursors.clear();
            Reply::Simple("RESET".into())
        }
        "SELECT" if a.len() == 1 => match int(&a[0]) {
            Some(0) => Reply::ok(),
            _ => Reply::err("ERR DB index is out of range (pmkv serves database 0 only)"),
        },
        "AUTH" => {
            let pass = a.last().cloned().unwrap_or_default();
            match &sh.password {
                None => Reply::err("ERR AUTH <password> called without any password configured"),
                Some(p) if crate::constant_time_eq(p.as_bytes(), &pass) => {
                    c.authed = true;
                    Reply::ok()
                }
                Some(_) => Reply::err("WRONGPASS invalid username-password pair or user is disabled."),
            }
        }
        "HELLO" => {
            let mut i = 0;
            if let Some(v) = a.first() {
                match int(v) {
                    Some(2) => c.resp3 = false,
                    Some(3) => c.resp3 = true,
                    _ => return (Reply::err("NOPROTO unsupported protocol version"), After::Continue),
                }
                i = 1;
            }
            while i < a.len() {
                match upper(&a[i]).as_str() {
                    "AUTH" if i + 2 < a.len() => {
                        let ok = sh.password.as_ref().is_some_and(|p| crate::constant_time_eq(p.as_bytes(), &a[i + 2]));
                        if !ok {
                            return (Reply::err("WRONGPASS invalid username-password pair"), After::Continue);
                        }
                        c.authed = true;
                        i += 3;
                    }
                    "SETNAME" if i + 1 < a.len() => {
                        c.name = Some(a[i + 1].clone());
                        i += 2;
                    }
                    _ => return (Reply::err("ERR syntax error in HELLO option"), After::Continue),
                }
            }
            if !c.authed {
                return (
                    Reply::err("NOAUTH HELLO must be called with the client already authenticated"),
                    After::Continue,
                );
            }
            let b = |s: &str| Reply::bulk(s.as_bytes().to_vec());
            Reply::Map(vec![
                (b("server"), b("pmkv")),
                (b("version"), b(env!("CARGO_PKG_VERSION"))),
                (b("proto"), Reply::Int(if c.resp3 { 3 } else { 2 })),
                (b("id"), Reply::Int(c.id as i64)),
                (b("mode"), b("standalone")),
                (b("role"), b("master")),
                (b("modules"), Reply::Array(vec![])),
            ])
        }
        "CLIENT" if !a.is_empty() => match upper(&a[0]).as_str() {
            "SETNAME" if a.len() == 2 => {
                c.name = Some(a[1].clone());
                Reply::ok()
            }
            "GETNAME" => c.name.clone().map(Reply::Bulk).unwrap_or(Reply::Nil),
            "ID" => Reply::Int(c.id as i64),
            "SETINFO" => Reply::ok(),
            _ => Reply::err("ERR unknown CLIENT subcommand (pmkv has SETNAME, GETNAME, ID, SETINFO)"),
        },
        "COMMAND" => match a.first().map(|x| upper(x)) {
            None => Reply::Array(vec![]),
            Some(s) if s == "DOCS" => {
                if c.resp3 {
                    Reply::Map(vec![])
                } else {
                    Reply::Array(vec![])
                }
            }
            Some(s) if s == "COUNT" => Reply::Int(0),
            _ => Reply::Array(vec![]),
        },
        "CONFIG" if a.len() >= 2 && upper(&a[0]) == "GET" => {
            let mut out = Vec::new();
            let params = config_params(sh);
            for p in &a[1..] {
                let pat = crate::glob::Pattern::new(&p.to_ascii_lowercase(), 64);
                for (k, v) in &params {
                    if pat.matches(k.as_bytes()) && !out.iter().any(|(n, _)| n == &Reply::bulk(k.as_bytes().to_vec())) {
                        out.push((Reply::bulk(k.as_bytes().to_vec()), Reply::bulk(v.as_bytes().to_vec())));
                    }
                }
            }
            Reply::Map(out)
        }
        "GET" if a.len() == 1 => match s.get(&a[0]) {
            Ok(Some(v)) => Reply::Bulk(v),
            Ok(None) => Reply::Nil,
            Err(e) => store_err(e),
        },
        "SET" if a.len() >= 2 => set(sh, &a[0], &a[1], &a[2..]),
        "SETNX" if a.len() == 2 => match set(sh, &a[0], &a[1], &[b"NX".to_vec()]) {
            Reply::Simple(_) => Reply::Int(1),
            Reply::Nil => Reply::Int(0),
            r => r,
        },
        "GETSET" if a.len() == 2 => set(sh, &a[0], &a[1], &[b"GET".to_vec()]),
        "GETDEL" if a.len() == 1 => {
            let _g = sh.lock(&[&a[0]]);
            match s.get(&a[0]) {
                Ok(Some(v)) => match s.delete(&a[0]) {
                    Ok(_) => Reply::Bulk(v),
                    Err(e) => store_err(e),
                },
                Ok(None) => Reply::Nil,
                Err(e) => store_err(e),
            }
        }
        "MGET" if !a.is_empty() => {
            let mut items = Vec::with_capacity(a.len().min(1024));
            let mut size = 0usize;
            for k in a {
                let r = match s.get(k) {
                    Ok(Some(v)) => {
                        size += bulk_cost(v.len());
                        Reply::Bulk(v)
                    }
                    Ok(None) => Reply::Nil,
                    Err(e) => store_err(e),
                };
                size += 8;
                if size > c.reply_budget {
                    return over_output_limit(sh);
                }
                items.push(r);
            }
            Reply::Array(items)
        }
        "MSET" if !a.is_empty() && a.len().is_multiple_of(2) => {
            let keys: Vec<&Vec<u8>> = a.iter().step_by(2).collect();
            let _g = sh.lock(&keys.iter().map(|k| k.as_slice()).collect::<Vec<_>>());
            let mut b = pmkv::WriteBatch::new();
            for kv in a.chunks(2) {
                b.put(kv[0].clone(), kv[1].clone());
            }
            match s.write(&b) {
                Ok(()) => Reply::ok(),
                Err(e) => store_err(e),
            }
        }
        "DEL" | "UNLINK" if !a.is_empty() => {
            let _g = sh.lock(&a.iter().map(|k| k.as_slice()).collect::<Vec<_>>());
            let mut n = 0;
            for k in a {
                match s.delete(k) {
                    Ok(true) => n += 1,
                    Ok(false) => {}
                    Err(e) => return (store_err(e), After::Continue),
                }
            }
            Reply::Int(n)
        }
        "EXISTS" if !a.is_empty() => {
            let mut n = 0;
            for k in a {
                match s.contains(k) {
                    Ok(true) => n += 1,
                    Ok(false) => {}
                    Err(e) => return (store_err(e), After::Continue),
                }
            }
            Reply::Int(n)
        }
        "INCR" | "DECR" if a.len() == 1 => incr(sh, &a[0], if cmd == "INCR" { 1 } else { -1 }),
        "INCRBY" | "DECRBY" if a.len() == 2 => match int(&a[1]) {
            Some(d) if cmd == "INCRBY" => incr(sh, &a[0], d),
            Some(d) => match d.checked_neg() {
                Some(d) => incr(sh, &a[0], d),
                None => Reply::err("ERR decrement would overflow"),
            },
            None => Reply::err("ERR value is not an integer or out of range"),
        },
        "APPEND" if a.len() == 2 => {
            let _g = sh.lock(&[&a[0]]);
            match s.get(&a[0]) {
                Ok(v) => {
                    let mut v = v.unwrap_or_default();
                    v.extend_from_slice(&a[1]);
                    match s.put(&a[0], &v) {
                        Ok(()) => Reply::Int(v.len() as i64),
                        Err(e) => store_err(e),
                    }
                }
                Err(e) => store_err(e),
            }
        }
        "STRLEN" if a.len() == 1 => match s.get(&a[0]) {
            Ok(v) => Reply::Int(v.map_or(0, |v| v.len() as i64)),
            Err(e) => store_err(e),
        },
        "TYPE" if a.len() == 1 => match s.contains(&a[0]) {
            Ok(true) => Reply::Simple("string".into()),
            Ok(false) => Reply::Simple("none".into()),
            Err(e) => store_err(e),
        },
        "DBSIZE" => match s.len() {
            Ok(n) => Reply::Int(n as i64),
            Err(e) => store_err(e),
        },
        "KEYS" if a.len() == 1 => {
            let pat = crate::glob::Pattern::new(&a[0], s.info().max_key_len);
            match walk_to_array(s, &KeyRange::all(), c.reply_budget, |k, _, out| {
                if pat.matches(k) {
                    out.push(k.to_vec());
                }
                true
            }) {
                Ok(Some(r)) => r,
                Ok(None) => return over_output_limit(sh),
                Err(e) => store_err(e),
            }
        }
        "SCAN" if !a.is_empty() => match scan(s, c, a) {
            Some(r) => r,
            None => return over_output_limit(sh),
        },
        "FLUSHDB" | "FLUSHALL" => {
            // In rounds of at most FLUSH_ROUND keys, so that flushing a large store holds
            // no more than one round's keys (and none of their values) at a time.
            const FLUSH_ROUND: usize = 1024;
            loop {
                let mut keys = Vec::new();
                let walked = s.scan(&KeyRange::all(), Direction::Forward, |k, _| {
                    keys.push(k.to_vec());
                    keys.len() < FLUSH_ROUND
                });
                if let Err(e) = walked {
                    return (store_err(e), After::Continue);
                }
                for k in &keys {
                    if let Err(e) = s.delete(k) {
                        return (store_err(e), After::Continue);
                    }
                }
                if keys.len() < FLUSH_ROUND {
                    break;
                }
            }
            Reply::ok()
        }
        "PMKV.RANGE" if a.len() == 3 => {
            let lim = match int(&a[2]) {
                Some(n) if n >= 0 => n as usize,
                _ => return (Reply::err("ERR limit must be a non-negative integer"), After::Continue),
            };
            let bound = |k: &Vec<u8>| {
                if k.as_slice() == b"-" || k.as_slice() == b"+" {
                    Bound::Unbounded
                } else {
                    Bound::Included(k.clone())
                }
            };
            let end = if a[1].as_slice() == b"+" { Bound::Unbounded } else { Bound::Excluded(a[1].clone()) };
            match walk_to_array(s, &KeyRange { start: bound(&a[0]), end }, c.reply_budget, |k, v, out| {
                if out.len() / 2 >= lim {
                    return false;
                }
                out.push(k.to_vec());
                out.push(v.to_vec());
                true
            }) {
                Ok(Some(r)) => r,
                Ok(None) => return over_output_limit(sh),
                Err(e) => store_err(e),
            }
        }
        "INFO" => info(sh),
        // As Redis: no reply; the connection closes when the server has stopped.
        "SHUTDOWN" => return (Reply::Nil, After::Shutdown),
        "SET" | "GET" | "ECHO" | "SELECT" | "SETNX" | "GETSET" | "GETDEL" | "MGET" | "MSET" | "DEL" | "UNLINK"
        | "EXISTS" | "INCR" | "DECR" | "INCRBY" | "DECRBY" | "APPEND" | "STRLEN" | "TYPE" | "KEYS" | "SCAN"
        | "PMKV.RANGE" | "CLIENT" | "CONFIG" => wrong_args(&cmd),
        _ => Reply::err(format!(
            "ERR unknown command '{}', with args beginning with: {}",
            String::from_utf8_lossy(&args[0]),
            a.iter().take(3).map(|x| format!("'{}' ", String::from_utf8_lossy(x))).collect::<String>()
        )),
    };
    (r, After::Continue)
}

/// Whether `args` is a plain `SET key value` this connection may run and the engine
/// accepts the sizes of: such SETs, when pipelined back to back, are applied together by
/// [`set_many`] (group commit).
pub fn is_plain_set(sh: &Shared, c: &Conn, args: &[Vec<u8>]) -> bool {
    args.len() == 3
        && c.authed
        && args[0].eq_ignore_ascii_case(b"SET")
        && sh.store.info().check_sizes(&args[1], Some(&args[2])).is_ok()
}

/// `GET key` from a client that may run it: [`get_into`] answers it.
pub fn is_plain_get(c: &Conn, args: &[Vec<u8>]) -> bool {
    args.len() == 2 && c.authed && args[0].eq_ignore_ascii_case(b"GET")
}

/// Answer `GET key` into `out` (what [`run`] replies, without building the reply), the
/// value read into `value`, whose allocation the next GET reuses.
pub fn get_into(
    sh: &Shared,
    key: &[u8],
    value: &mut Option<Vec<u8>>,
    out: &mut Vec<u8>,
    resp3: bool,
) -> std::io::Result<()> {
    match sh.store.get_into(key, value) {
        Ok(true) => {
            let v = value.as_deref().unwrap_or_default();
            use std::io::Write as _;
            write!(out, "${}\r\n", v.len())?;
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
            Ok(())
        }
        Ok(false) => Reply::Nil.write(out, resp3),
        Err(e) => store_err(e).write(out, resp3),
    }
}

/// Group commit of plain SETs that arrived together: one write batch,
/// under the stripe locks of all their keys (so read-modify-write commands stay atomic),
/// in which the engine shares persists and fences where it can (HART: one commit fence
/// per run of keys in one ART, see `Hart::put_many`). Each SET is acknowledged only after
/// the batch returned, i.e. after all of them are durable. On an error (say, a full pool)
/// a prefix of the batch may have been applied; every SET of it gets the error reply, as
/// a client cannot tell which of a failed pipeline's writes landed anyway. Returns the
/// Walk `range` forward into an array reply of the bulks `add` appends for each record
/// (it returns whether to go on), holding no more than `budget` bytes of reply: the
/// client's output limit, checked while walking so that a reply over it is never built
/// whole. `Ok(None)`: the reply would exceed the budget.
fn walk_to_array(
    s: &Store,
    range: &KeyRange,
    budget: usize,
    mut add: impl FnMut(&[u8], &[u8], &mut Vec<Vec<u8>>) -> bool,
) -> pmkv::Result<Option<Reply>> {
    let (mut items, mut size, mut over) = (Vec::new(), 0usize, false);
    s.scan(range, Direction::Forward, |k, v| {
        let before = items.len();
        let go_on = add(k, v, &mut items);
        size += items[before..].iter().map(|b| bulk_cost(b.len())).sum::<usize>();
        if size > budget {
            over = true;
            return false;
        }
        go_on
    })?;
    Ok((!over).then(|| Reply::Array(items.into_iter().map(Reply::Bulk).collect())))
}

/// reply of each of them.
pub fn set_many(sh: &Shared, sets: Vec<Vec<Vec<u8>>>) -> Reply {
    let mut b = pmkv::WriteBatch::new();
    for mut a in sets {
        let v = a.pop().unwrap_or_default();
        let k = a.pop().unwrap_or_default();
        b.put(k, v);
    }
    let keys: Vec<&[u8]> = b.ops().iter().map(|op| op.key()).collect();
    let _g = sh.lock(&keys);
    match sh.store.write(&b) {
        Ok(()) => Reply::ok(),
        Err(e) => store_err(e),
    }
}

fn set(sh: &Shared, k: &[u8], v: &[u8], opts: &[Vec<u8>]) -> Reply {
    let (mut nx, mut xx, mut get) = (false, false, false);
    for o in opts {
        match upper(o).as_str() {
            "NX" => nx = true,
            "XX" => xx = true,
            "GET" => get = true,
            "EX" | "PX" | "EXAT" | "PXAT" | "KEEPTTL" => {
                return Reply::err("ERR pmkv keeps no expiry times: EX, PX, EXAT, PXAT and KEEPTTL are not supported")
            }
            _ => return Reply::err("ERR syntax error"),
        }
    }
    if nx && xx {
        return Reply::err("ERR syntax error");
    }
    let s = &sh.store;
    let _g = sh.lock(&[k]);
    let old = if nx || xx || get {
        match s.get(k) {
            Ok(o) => o,
            Err(e) => return store_err(e),
        }
    } else {
        None
    };
    if (nx && old.is_some()) || (xx && old.is_none()) {
        return if get { old.map(Reply::Bulk).unwrap_or(Reply::Nil) } else { Reply::Nil };
    }
    match s.put(k, v) {
        Ok(()) if get => old.map(Reply::Bulk).unwrap_or(Reply::Nil),
        Ok(()) => Reply::ok(),
        Err(e) => store_err(e),
    }
}

fn incr(sh: &Shared, k: &[u8], by: i64) -> Reply {
    let s = &sh.store;
    let _g = sh.lock(&[k]);
    let cur = match s.get(k) {
        Ok(None) => 0,
        Ok(Some(v)) => match int(&v) {
            Some(n) => n,
            None => return Reply::err("ERR value is not an integer or out of range"),
        },
        Err(e) => return store_err(e),
    };
    let Some(n) = cur.checked_add(by) else { return Reply::err("ERR increment or decrement would overflow") };
    match s.put(k, n.to_string().as_bytes()) {
        Ok(()) => Reply::Int(n),
        Err(e) => store_err(e),
    }
}

/// SCAN: up to COUNT records after the cursor's key, the keys that MATCH replied.
/// `None` when the reply would pass the client's output-buffer hard limit.
fn scan(s: &Store, c: &mut Conn, a: &[Vec<u8>]) -> Option<Reply> {
    let Some(cur) = int(&a[0]).filter(|&n| n >= 0) else { return Some(Reply::err("ERR invalid cursor")) };
    let (mut pattern, mut count) = (None, 10usize);
    let mut i = 1;
    while i < a.len() {
        match upper(&a[i]).as_str() {
            "MATCH" if i + 1 < a.len() => pattern = Some(crate::glob::Pattern::new(&a[i + 1], s.info().max_key_len)),
            "COUNT" if i + 1 < a.len() => match int(&a[i + 1]) {
                Some(n) if n > 0 => count = n as usize,
                _ => return Some(Reply::err("ERR value is not an integer or out of range")),
            },
            "TYPE" if i + 1 < a.len() => {}
            _ => return Some(Reply::err("ERR syntax error")),
        }
        i += 2;
    }
    // Cursor 0 starts; n > 0 continues after the key remembered for it.
    let start = match cur {
        0 => Bound::Unbounded,
        n => match c.cursors.get(n as usize - 1) {
            Some(k) => Bound::Excluded(k.clone()),
            None => return Some(Reply::err("ERR invalid cursor")),
        },
    };
    let count = count.min(100_000);
    let (mut keys, mut seen, mut last, mut size, mut over) = (Vec::new(), 0usize, Vec::new(), 0usize, false);
    let walked = s.scan(&KeyRange { start, end: Bound::Unbounded }, Direction::Forward, |k, _| {
        seen += 1;
        if pattern.as_ref().is_none_or(|p| p.matches(k)) {
            size += bulk_cost(k.len());
            if size > c.reply_budget {
                over = true;
                return false;
            }
            keys.push(Reply::Bulk(k.to_vec()));
        }
        if seen == count {
            last = k.to_vec();
            return false;
        }
        true
    });
    if over {
        return None;
    }
    if let Err(e) = walked {
        return Some(store_err(e));
    }
    let next = if seen < count {
        0
    } else {
        // Bounded memory per connection: at most 1024 cursors and 1 MiB of their keys;
        // past that the old cursors become invalid.
        if c.cursors.len() >= 1024 || c.cursors.iter().map(Vec::len).sum::<usize>() + last.len() > 1 << 20 {
            c.cursors.clear();
        }
        c.cursors.push(last);
        c.cursors.len() as i64
    };
    Some(Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(keys)]))
}

/// What `CONFIG GET` shows: Redis's names for the limits this server enforces, in
/// Redis's units (bytes, seconds), and the fixed answers clients probe for.
fn config_params(sh: &Shared) -> Vec<(&'static str, String)> {
    let (l, o) = (&sh.limits, &sh.output);
    let u = crate::resp::Limits::UNAUTHENTICATED;
    vec![
        ("save", String::new()),
        ("appendonly", "no".into()),
        ("databases", "1".into()),
        ("maxmemory", "0".into()),
        ("maxclients", sh.max_clients.to_string()),
        ("timeout", sh.idle_timeout.as_secs().to_string()),
        ("proto-max-bulk-len", l.max_bulk.to_string()),
        ("client-query-buffer-limit", l.max_query.to_string()),
        ("client-output-buffer-limit", format!("normal {} {} {}", o.hard, o.soft, o.soft_time.as_secs())),
        ("requirepass", if sh.password.is_some() { "(set)" } else { "" }.into()),
        (
            "pmkv-unauthenticated-limits",
            format!("query {} bulk {} multibulk {} inline {}", u.max_query, u.max_bulk, u.max_args, u.max_inline),
        ),
    ]
}

fn info(sh: &Shared) -> Reply {
    use std::sync::atomic::Ordering::Relaxed;
    let s = &sh.store;
    let info = s.info();
    let mut t = String::new();
    t.push_str("# Server\r\nredis_version:7.0.0-pmkv\r\npmkv_version:");
    t.push_str(env!("CARGO_PKG_VERSION"));
    t.push_str(&format!("\r\npmkv_engine:{}\r\ntcp_port:{}\r\n", info.name, sh.port));
    t.push_str(&format!(
        "\r\n# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\n",
        sh.clients.load(Relaxed),
        sh.max_clients
    ));
    if let Ok(m) = s.memory() {
        t.push_str(&format!(
            "\r\n# Memory\r\nused_memory:{}\r\npmkv_dram_bytes:{}\r\npmkv_pm_bytes:{}\r\n",
            m.dram_total(),
            m.dram_total(),
            m.pm_total()
        ));
    }
    // What an acknowledged write survives here, from the medium the pool sits on and its
    // mode: yes, no, or if-eadr (eadr on DAX: only on eADR hardware, which cannot be
    // detected).
    let d = s.durability();
    t.push_str(&format!(
        "\r\n# Persistence\r\nloading:0\r\naof_enabled:0\r\npmkv_mode:{}\r\npmkv_medium:{}\r\n",
        sh.mode, d.medium
    ));
    for (event, survives) in d.table() {
        t.push_str(&format!("pmkv_survives_{}:{}\r\n", event.name(), survives.name()));
    }
    t.push_str(&format!(
        "\r\n# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\nrejected_connections:{}\r\n\
         client_query_buffer_limit_disconnections:{}\r\nclient_output_buffer_limit_disconnections:{}\r\n",
        sh.connections.load(Relaxed),
        sh.commands.load(Relaxed),
        sh.rejected.load(Relaxed),
        sh.query_limit_closes.load(Relaxed),
        sh.output_limit_closes.load(Relaxed)
    ));
    if let Ok(n) = s.len() {
        t.push_str(&format!("\r\n# Keyspace\r\ndb0:keys={n},expires=0,avg_ttl=0\r\n"));
    }
    Reply::Bulk(t.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn glob_matches_like_redis() {
        assert!(glob(b"*", b"anything") && glob(b"h?llo", b"hello") && glob(b"h*o", b"hello"));
        assert!(glob(b"h[ae]llo", b"hallo") && !glob(b"h[^e]llo", b"hello") && glob(b"k[0-9]", b"k7"));
        assert!(!glob(b"a*b", b"acd") && glob(b"a\\*", b"a*") && !glob(b"a\\*", b"ab"));
    }
}
