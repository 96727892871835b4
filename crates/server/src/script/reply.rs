//! Replies to Lua values and back, as Redis converts them, with a bound on nesting.
//!
//! A script's result is a Lua value that may be nested arbitrarily deep or refer to
//! itself (`local a = {} a[1] = {a} return a`); converting it recursively without a bound
//! overflowed a worker's stack and aborted the whole server. Redis stops at its Lua stack
//! limit and puts the error `ERR reached lua stack limit` where the deeper value would
//! have been; pmkv does the same at [`MAX_DEPTH`] levels, far below what the worker's
//! stack holds (each level takes a few hundred bytes of stack here and in the reply's
//! writer), and far above what any client library returns.

use crate::resp::Reply;
use mlua::{Lua, Value};

/// Levels of nested tables a script's result may have.
pub(crate) const MAX_DEPTH: usize = 1000;

/// The error Redis puts where a result nests too deep.
pub(crate) const TOO_DEEP: &str = "ERR reached lua stack limit";

/// A reply as Redis hands it to Lua: integers numbers, bulks strings, nil false, arrays
/// tables, status `{ok=…}`, errors `{err=…}`; maps flat in RESP2, `{map={…}}` after
/// `redis.setresp(3)`.
pub(crate) fn to_lua(lua: &Lua, r: &Reply, resp3: bool) -> mlua::Result<Value> {
    Ok(match r {
        Reply::Int(i) => Value::Integer(*i),
        Reply::Bulk(b) => Value::String(lua.create_string(b)?),
        // As Redis: `{double=…}` after `redis.setresp(3)`, else the bulk string.
        Reply::Double(d) if resp3 => {
            let t = lua.create_table()?;
            t.set("double", *d)?;
            Value::Table(t)
        }
        Reply::Double(d) => Value::String(lua.create_string(crate::resp::fmt_score(*d))?),
        Reply::Nil | Reply::NilArray if resp3 => Value::Nil,
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
        Reply::Array(items) | Reply::Push(items) | Reply::Seq(items) => {
            let t = lua.create_table()?;
            for (i, x) in items.iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, x, resp3)?)?;
            }
            Value::Table(t)
        }
        Reply::Map(pairs) if resp3 => {
            let m = lua.create_table()?;
            for (k, v) in pairs {
                m.raw_set(to_lua(lua, k, resp3)?, to_lua(lua, v, resp3)?)?;
            }
            let t = lua.create_table()?;
            t.set("map", m)?;
            Value::Table(t)
        }
        Reply::Map(pairs) => {
            let t = lua.create_table()?;
            for (i, (k, v)) in pairs.iter().enumerate() {
                t.raw_set(2 * i + 1, to_lua(lua, k, resp3)?)?;
                t.raw_set(2 * i + 2, to_lua(lua, v, resp3)?)?;
            }
            Value::Table(t)
        }
    })
}

/// A script's result as Redis replies it: numbers integers (truncated), strings bulks,
/// false and nil nil, true 1, `{ok=…}` status, `{err=…}` error, `{map=…}` a map, other
/// tables arrays up to their first nil; [`TOO_DEEP`] past [`MAX_DEPTH`] levels.
pub(crate) fn from_lua(v: &Value) -> Reply {
    from_lua_at(v, 0)
}

fn from_lua_at(v: &Value, depth: usize) -> Reply {
    match v {
        Value::Nil | Value::Boolean(false) => Reply::Nil,
        Value::Boolean(true) => Reply::Int(1),
        Value::Integer(i) => Reply::Int(*i),
        Value::Number(n) => Reply::Int(*n as i64),
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Table(_) if depth >= MAX_DEPTH => Reply::Error(TOO_DEEP.into()),
        Value::Table(t) => {
            if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
                return Reply::Error(e.to_string_lossy().to_string());
            }
            if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
                return Reply::Simple(s.to_string_lossy().to_string());
            }
            if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
                let mut pairs = Vec::new();
                for (k, v) in m.pairs::<Value, Value>().flatten() {
                    pairs.push((from_lua_at(&k, depth + 1), from_lua_at(&v, depth + 1)));
                }
                return Reply::Map(pairs);
            }
            let mut items = Vec::new();
            for i in 1.. {
                match t.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => break,
                    Ok(x) => items.push(from_lua_at(&x, depth + 1)),
                }
            }
            Reply::Array(items)
        }
        _ => Reply::Nil,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Levels of arrays above the first non-array.
    fn depth(r: &Reply) -> (usize, &Reply) {
        match r {
            Reply::Array(v) if v.len() == 1 => {
                let (d, leaf) = depth(&v[0]);
                (d + 1, leaf)
            }
            other => (0, other),
        }
    }

    #[test]
    fn self_referencing_and_deep_results_end_in_an_error() {
        let lua = Lua::new();
        for src in [
            "local a = {} local b = {a} a[1] = b return a",
            "local t = {} local c = t for i = 1, 7000 do c[1] = {} c = c[1] end return t",
        ] {
            let v = lua.load(src).eval::<Value>().unwrap();
            let r = from_lua(&v);
            let (d, leaf) = depth(&r);
            assert_eq!(d, MAX_DEPTH, "{src}");
            assert!(matches!(leaf, Reply::Error(e) if e == TOO_DEEP), "{src}: {leaf:?}");
            // The reply writes out (the writer recurses as deep).
            let mut out = Vec::new();
            r.write(&mut out, false).unwrap();
            assert!(out.ends_with(b"-ERR reached lua stack limit\r\n"));
        }
        // A shallow result is whole.
        let v = lua.load("return {1, {2, {3}}}").eval::<Value>().unwrap();
        assert_eq!(
            from_lua(&v),
            Reply::Array(vec![Reply::Int(1), Reply::Array(vec![Reply::Int(2), Reply::Array(vec![Reply::Int(3)])])])
        );
    }

    #[test]
    fn maps_follow_the_script_protocol() {
        let lua = Lua::new();
        let r = Reply::Map(vec![(Reply::bulk("f"), Reply::bulk("v"))]);
        let Value::Table(t) = to_lua(&lua, &r, false).unwrap() else { panic!() };
        assert_eq!(t.raw_len(), 2);
        let v = to_lua(&lua, &r, true).unwrap();
        assert_eq!(from_lua(&v), r, "a RESP3 map comes back as a map");
        assert_eq!(to_lua(&lua, &Reply::Nil, false).unwrap(), Value::Boolean(false));
        assert_eq!(to_lua(&lua, &Reply::Nil, true).unwrap(), Value::Nil);
    }
}
