//! Lua scripting: EVAL, EVALSHA, SCRIPT LOAD/EXISTS/FLUSH, with Redis's semantics — the
//! `KEYS` and `ARGV` tables, `redis.call`/`redis.pcall`, Redis's conversions between
//! replies and Lua values, and a script runs as one isolated unit (the caller holds the
//! gate exclusively). Client libraries build locks, rate limiters and compare-and-set
//! on this (redis-py's `Lock` releases through a script).
//!
//! Lua 5.1, as Redis embeds, through `mlua` with the interpreter built from source
//! (`vendored`): no system Lua to install, and mlua is the maintained binding (rlua was
//! folded into it). Each script gets a fresh interpreter with only the base, `table`,
//! `string` and `math` libraries (no `io`, `os`, `require`: a script cannot touch the
//! machine), 64 MiB of memory and 5 s of run time; past either it stops with an error.
//!
//! Writes: a script's writes form one [`Tx`], applied as one atomic batch when it
//! returns. As in Redis, a script that raises an error keeps the writes its earlier
//! `redis.call`s made (Redis has no rollback); each `redis.call` is itself all or nothing.

use crate::commands::Conn;
use crate::data::{int, upper, Ctx};
use crate::keyspace::Tx;
use crate::resp::Reply;
use crate::table;
use crate::Shared;
use mlua::{Lua, LuaOptions, MultiValue, StdLib, Value};
use std::time::{Duration, Instant};

const MEMORY: usize = 64 << 20;
/// Bytes of script source the server keeps for EVALSHA: what clients can make it hold is
/// bounded (Redis's cache of EVAL scripts grew without bound until 7.4 evicted it). Past
/// it, EVAL still runs but is not cached, and SCRIPT LOAD is refused.
const CACHE_BYTES: usize = 16 << 20;

/// Keep `src` for EVALSHA if the cache has room; whether it was kept.
fn cache(scripts: &mut std::collections::HashMap<String, String>, sha: String, src: &str) -> bool {
    let used: usize = scripts.values().map(String::len).sum();
    if scripts.contains_key(&sha) || used + src.len() <= CACHE_BYTES {
        scripts.insert(sha, src.to_string());
        true
    } else {
        false
    }
}
const TIME: Duration = Duration::from_secs(5);

fn sha1_hex(s: &str) -> String {
    sha1_smol::Sha1::from(s).digest().to_string()
}

/// SCRIPT LOAD | EXISTS | FLUSH.
pub(crate) fn script(sh: &Shared, a: &[Vec<u8>]) -> Reply {
    let mut scripts = sh.scripts.lock().unwrap_or_else(|e| e.into_inner());
    match upper(&a[0]).as_str() {
        "LOAD" if a.len() == 2 => match std::str::from_utf8(&a[1]) {
            Ok(src) => {
                let sha = sha1_hex(src);
                if cache(&mut scripts, sha.clone(), src) {
                    Reply::bulk(sha)
                } else {
                    Reply::err(format!("ERR the script cache is full ({} MiB): SCRIPT FLUSH", CACHE_BYTES >> 20))
                }
            }
            Err(_) => Reply::err("ERR pmkv runs scripts that are UTF-8 text"),
        },
        "EXISTS" => Reply::Array(
            a[1..]
                .iter()
                .map(|s| Reply::Int(i64::from(scripts.contains_key(&String::from_utf8_lossy(s).to_lowercase()))))
                .collect(),
        ),
        "FLUSH" => {
            scripts.clear();
            Reply::ok()
        }
        _ => Reply::err("ERR unknown SCRIPT subcommand or wrong number of arguments (pmkv has LOAD, EXISTS, FLUSH)"),
    }
}

/// EVAL script numkeys key… arg… / EVALSHA sha1 numkeys key… arg…. The caller holds the
/// gate exclusively.
pub(crate) fn eval(sh: &Shared, c: &mut Conn, cmd: &str, a: &[Vec<u8>]) -> Reply {
    let src = if cmd == "EVALSHA" {
        let sha = String::from_utf8_lossy(&a[0]).to_lowercase();
        match sh.scripts.lock().unwrap_or_else(|e| e.into_inner()).get(&sha) {
            Some(s) => s.clone(),
            None => return Reply::err("NOSCRIPT No matching script. Please use EVAL."),
        }
    } else {
        match std::str::from_utf8(&a[0]) {
            Ok(s) => {
                cache(&mut sh.scripts.lock().unwrap_or_else(|e| e.into_inner()), sha1_hex(s), s);
                s.to_string()
            }
            Err(_) => return Reply::err("ERR pmkv runs scripts that are UTF-8 text"),
        }
    };
    let nkeys = match int(&a[1]) {
        Some(n) if n >= 0 && (n as usize) <= a.len() - 2 => n as usize,
        Some(n) if n >= 0 => return Reply::err("ERR Number of keys can't be greater than number of args"),
        _ => return Reply::err("ERR Number of keys can't be negative"),
    };
    let (keys, argv) = a[2..].split_at(nkeys);
    if !keys.iter().all(|k| crate::keyspace::allowed(k)) {
        return crate::keyspace::reserved();
    }
    // On a cluster node a script's keys are its declared keys' slot (or, with none declared,
    // a slot served here), as Redis requires: another node's keys are not here to read.
    let home = crate::cluster::slot::common_slot(keys.iter().map(|k| k.as_slice())).ok().flatten();
    let local = |cmd: &table::Command, args: &[Vec<u8>]| -> Option<Reply> {
        sh.cluster.as_ref()?;
        let ks = crate::commands::route_keys(cmd, args);
        let slot = match crate::cluster::slot::common_slot(ks.iter().copied()) {
            Ok(s) => s?,
            Err(r) => return Some(r),
        };
        match home {
            Some(h) if h != slot => {
                Some(Reply::err("ERR Script attempted to access a key of another slot than its declared keys"))
            }
            Some(_) => None,
            None => crate::commands::misrouted(sh, Some(slot), false, &ks)
                .map(|_| Reply::err("ERR Script attempted to access a non local key in a cluster node")),
        }
    };
    let mut tx = Tx::new(&sh.store, &sh.ks);
    let r = run(c, &mut tx, &src, keys, argv, &local);
    match tx.commit() {
        Ok(()) => r,
        Err(e) => Reply::err(format!("ERR the script's writes could not be applied, none was: {e}")),
    }
}

fn lua_err(m: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(m.into())
}

/// Refuses a command whose keys are not this node's to serve (a cluster node).
type Local<'a> = &'a dyn Fn(&table::Command, &[Vec<u8>]) -> Option<Reply>;

/// Run `src` in a fresh sandboxed interpreter, its `redis.call`s against `tx`; `local`
/// refuses what a cluster node must not serve.
fn run(c: &mut Conn, tx: &mut Tx, src: &str, keys: &[Vec<u8>], argv: &[Vec<u8>], local: Local) -> Reply {
    let lua = match Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::default()) {
        Ok(l) => l,
        Err(e) => return Reply::err(format!("ERR starting Lua: {e}")),
    };
    if let Err(e) = crate::script_libs::open(&lua) {
        return Reply::err(format!("ERR starting Lua: {e}"));
    }
    let _ = lua.set_memory_limit(MEMORY);
    let start = Instant::now();
    lua.set_hook(mlua::HookTriggers::new().every_nth_instruction(10_000), move |_, _| {
        if start.elapsed() > TIME {
            Err(lua_err(format!("ERR script ran longer than {} s: stopped", TIME.as_secs())))
        } else {
            Ok(mlua::VmState::Continue)
        }
    })
    .ok();
    let mut cursors = Vec::new();
    let budget = c.reply_budget;
    let resp3 = c.resp3;
    let tx_cell = std::cell::RefCell::new(&mut *tx);
    let cursors_cell = std::cell::RefCell::new(&mut cursors);
    let call = |lua: &Lua, args: MultiValue, protected: bool| -> mlua::Result<Value> {
        let mut v: Vec<Vec<u8>> = Vec::with_capacity(args.len());
        for x in args {
            match x {
                Value::String(s) => v.push(s.as_bytes().to_vec()),
                Value::Integer(i) => v.push(i.to_string().into_bytes()),
                Value::Number(n) => v.push(lua_number(n).into_bytes()),
                _ => return Err(lua_err("ERR Lua redis lib command arguments must be strings or integers")),
            }
        }
        if v.is_empty() {
            return Err(lua_err("ERR Please specify at least one argument for this redis lib call"));
        }
        let reply = match table::check(&v) {
            Err(e) => Reply::err(e),
            Ok(cmd)
                if cmd.no_multi
                    || matches!(
                        cmd.group,
                        table::Group::Scripting | table::Group::Transactions | table::Group::Cluster
                    ) =>
            {
                Reply::err("ERR This Redis command is not allowed from script")
            }
            Ok(cmd) if matches!(cmd.name, "FLUSHDB" | "FLUSHALL" | "PMKV.RANGE" | "DBSIZE" | "INFO" | "CONFIG") => {
                Reply::err(format!("ERR pmkv does not run {} from a script", cmd.name))
            }
            Ok(cmd) if matches!(cmd.group, table::Group::Connection | table::Group::Server) => match cmd.name {
                "PING" => Reply::Simple("PONG".into()),
                "ECHO" => Reply::bulk(v[1].clone()),
                "TIME" => {
                    let us =
                        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros());
                    Reply::Array(vec![
                        Reply::bulk((us / 1_000_000).to_string()),
                        Reply::bulk((us % 1_000_000).to_string()),
                    ])
                }
                _ => Reply::err("ERR This Redis command is not allowed from script"),
            },
            Ok(cmd) => match local(cmd, &v) {
                Some(refused) => refused,
                None => {
                    let mut tx = tx_cell.borrow_mut();
                    let mut cur = cursors_cell.borrow_mut();
                    let mut cx = Ctx { budget, resp3, cursors: &mut cur };
                    let mark = tx.savepoint();
                    match crate::data::run(&mut tx, &mut cx, cmd.name, &v[1..]) {
                        Ok(r) => r,
                        Err(r) => {
                            tx.rollback(mark);
                            r
                        }
                    }
                }
            },
        };
        match reply {
            Reply::Error(e) if !protected => Err(lua_err(e)),
            r => to_lua(lua, &r),
        }
    };
    let out = lua.scope(|scope| {
        let g = lua.globals();
        let to_table = |items: &[Vec<u8>]| -> mlua::Result<mlua::Table> {
            let t = lua.create_table()?;
            for (i, x) in items.iter().enumerate() {
                t.raw_set(i + 1, lua.create_string(x)?)?;
            }
            Ok(t)
        };
        g.set("KEYS", to_table(keys)?)?;
        g.set("ARGV", to_table(argv)?)?;
        let redis = lua.create_table()?;
        redis.set("call", scope.create_function(|lua, args: MultiValue| call(lua, args, false))?)?;
        redis.set("pcall", scope.create_function(|lua, args: MultiValue| call(lua, args, true))?)?;
        redis.set(
            "error_reply",
            lua.create_function(|lua, m: String| {
                let t = lua.create_table()?;
                t.set("err", m)?;
                Ok(t)
            })?,
        )?;
        redis.set(
            "status_reply",
            lua.create_function(|lua, m: String| {
                let t = lua.create_table()?;
                t.set("ok", m)?;
                Ok(t)
            })?,
        )?;
        g.set("redis", redis)?;
        lua.load(src).set_name("@user_script").eval::<Value>().map(|v| from_lua(&v))
    });
    match out {
        Ok(r) => r,
        Err(e) => Reply::err(script_error(&e)),
    }
}

/// A Lua number as Redis passes it to a command (integers without a point).
fn lua_number(n: f64) -> String {
    if n == n.trunc() && n.abs() < 1e17 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// The message of a script's error: a `redis.call` error keeps its Redis code
/// (`WRONGTYPE …`, `ERR …`), anything else is an `ERR` with Lua's message.
fn script_error(e: &mlua::Error) -> String {
    let mut e = e;
    while let mlua::Error::CallbackError { cause, .. } = e {
        e = cause;
    }
    match e {
        mlua::Error::RuntimeError(m)
            if m.split(' ').next().is_some_and(|w| w.chars().all(|c| c.is_ascii_uppercase())) =>
        {
            m.clone()
        }
        other => format!("ERR Error running script: {}", other.to_string().replace(['\r', '\n'], " ")),
    }
}

/// A reply as Redis hands it to Lua: integers numbers, bulks strings, nil false, arrays
/// tables, status `{ok=…}`, errors `{err=…}`.
fn to_lua(lua: &Lua, r: &Reply) -> mlua::Result<Value> {
    Ok(match r {
        Reply::Int(i) => Value::Integer(*i),
        Reply::Bulk(b) => Value::String(lua.create_string(b)?),
        Reply::Nil | Reply::NilArray => Value::Boolean(false),
        Reply::Simple(s) => {
            let t = lua.create_table()?;
            t.set("ok", s.as_str())?;
            Value::Table(t)
        }
        Reply::Error(e) => {
            let t = lua.create_table()?;
            t.set("err", e.as_str())?;
            Value::Table(t)
        }
        Reply::Array(items) => {
            let t = lua.create_table()?;
            for (i, x) in items.iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, x)?)?;
            }
            Value::Table(t)
        }
        Reply::Map(pairs) => {
            let t = lua.create_table()?;
            for (i, (k, v)) in pairs.iter().enumerate() {
                t.raw_set(2 * i + 1, to_lua(lua, k)?)?;
                t.raw_set(2 * i + 2, to_lua(lua, v)?)?;
            }
            Value::Table(t)
        }
    })
}

/// A script's result as Redis replies it: numbers integers (truncated), strings bulks,
/// false and nil nil, true 1, `{ok=…}` status, `{err=…}` error, other tables arrays up to
/// their first nil.
fn from_lua(v: &Value) -> Reply {
    match v {
        Value::Nil => Reply::Nil,
        Value::Boolean(false) => Reply::Nil,
        Value::Boolean(true) => Reply::Int(1),
        Value::Integer(i) => Reply::Int(*i),
        Value::Number(n) => Reply::Int(*n as i64),
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Table(t) => {
            if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
                return Reply::Error(e.to_string_lossy().to_string());
            }
            if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
                return Reply::Simple(s.to_string_lossy().to_string());
            }
            let mut items = Vec::new();
            for i in 1.. {
                match t.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => break,
                    Ok(x) => items.push(from_lua(&x)),
                }
            }
            Reply::Array(items)
        }
        _ => Reply::Nil,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_script_cache_is_bounded() {
        let mut m = std::collections::HashMap::new();
        let big = "x".repeat(super::CACHE_BYTES / 2);
        assert!(super::cache(&mut m, "a".into(), &big));
        assert!(super::cache(&mut m, "b".into(), &big));
        assert!(!super::cache(&mut m, "c".into(), "y"), "full");
        assert!(super::cache(&mut m, "a".into(), &big), "a script already kept stays");
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn script_ids_are_sha1_as_redis_computes_them() {
        // Redis: SCRIPT LOAD "return 1" answers e0e1f9fabfc9d4800c877a703b823ac0578ff8db.
        assert_eq!(super::sha1_hex("return 1"), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    }
}
