//! Redis 7's functions: FUNCTION LOAD registers a library of named Lua functions, FCALL
//! and FCALL_RO call one. A library's code is run once at LOAD, in a sandbox whose
//! `redis` table has only `register_function` and the logging helpers (so it cannot
//! touch data), to learn its functions and flags; each FCALL then runs the library's
//! code again in a fresh interpreter, as EVAL runs a script, and calls the function with
//! its keys and arguments.
//!
//! Libraries live in server memory: like scripts (SCRIPT LOAD) they are not kept across
//! a restart, where Redis keeps them in its RDB or AOF file. Clients load them again at
//! start (docs/design/front-ends.md says why and what is not served: DUMP, RESTORE).

use super::{lua_err, sandbox};
use crate::data::upper;
use crate::record::FUNCTIONS_KEY;
use crate::resp::Reply;
use mlua::chunk::ChunkMode;
use mlua::{MultiValue, Value};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// One registered function.
#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    pub flags: Vec<String>,
    pub description: Option<String>,
}

/// A library: its code and what it registered.
#[derive(Clone, Debug)]
pub struct Library {
    pub name: String,
    pub code: String,
    pub functions: Vec<Function>,
}

/// Every library loaded, by name.
#[derive(Default, Clone)]
pub struct Libraries {
    libs: BTreeMap<String, Library>,
}

/// The flags Redis 7.0 accepts on a function.
const FLAGS: &[&str] = &["no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"];

/// How long a library's code may run at LOAD (Redis: 500 ms).
const LOAD_TIME: Duration = Duration::from_millis(500);

fn valid_name(n: &str) -> bool {
    !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl Libraries {
    /// The library holding function `name`, and the function.
    pub fn find(&self, name: &str) -> Option<(&Library, &Function)> {
        // Any case, as Redis's function names are matched.
        self.libs.values().find_map(|l| l.functions.iter().find(|f| f.name.eq_ignore_ascii_case(name)).map(|f| (l, f)))
    }

    /// FUNCTION LOAD [REPLACE] code: the library's name, or Redis's error.
    pub fn load(&mut self, code: &str, replace: bool) -> Result<String, Reply> {
        let name = library_name(code)?;
        if self.libs.contains_key(&name) && !replace {
            return Err(Reply::err(format!("ERR Library '{name}' already exists")));
        }
        let functions = registered(code)?;
        for f in &functions {
            if let Some((l, _)) = self.find(&f.name) {
                if l.name != name {
                    return Err(Reply::err(format!("ERR Function {} already exists", f.name)));
                }
            }
        }
        self.libs.insert(name.clone(), Library { name: name.clone(), code: code.to_string(), functions });
        Ok(name)
    }

    /// Every library's code (a full sync's RDB carries them).
    pub(crate) fn codes(&self) -> Vec<Vec<u8>> {
        self.libs.values().map(|l| l.code.clone().into_bytes()).collect()
    }

    /// FUNCTION DUMP: Redis's payload (each library's code, the RDB version, a CRC-64),
    /// which a real Redis's FUNCTION RESTORE reads, and the other way round.
    fn dump(&self) -> Vec<u8> {
        crate::rdb::with_footer(crate::rdb::write_functions(self.libs.values().map(|l| l.code.as_bytes())))
    }

    /// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]: all of the payload's libraries
    /// loaded, or none (the libraries are left as they were on any error).
    fn restore(&mut self, payload: &[u8], policy: Option<&[u8]>) -> Reply {
        let policy = policy.map_or_else(|| "APPEND".to_string(), upper);
        if !matches!(policy.as_str(), "FLUSH" | "APPEND" | "REPLACE") {
            return Reply::err("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.");
        }
        let Ok(body) = crate::rdb::checked_body(payload) else {
            return Reply::err("ERR DUMP payload version or checksum are wrong");
        };
        let Ok(codes) = crate::rdb::read_functions(body) else {
            return Reply::err("ERR given type is not a function");
        };
        let mut next = if policy == "FLUSH" { Libraries::default() } else { self.clone() };
        for code in codes {
            let Ok(code) = std::str::from_utf8(&code) else {
                return Reply::err("ERR pmkv runs libraries that are UTF-8 text");
            };
            let name = match library_name(code) {
                Ok(n) => n,
                Err(r) => return r,
            };
            if policy == "APPEND" && next.libs.contains_key(&name) {
                return Reply::err(format!("ERR Library {name} already exists"));
            }
            if let Err(r) = next.load(code, policy == "REPLACE") {
                return r;
            }
        }
        *self = next;
        Reply::ok()
    }

    /// FUNCTION and its subcommands but LOAD's running (see [`command`]).
    fn list(&self, a: &[Vec<u8>]) -> Reply {
        let (mut code, mut pattern) = (false, None);
        let mut i = 0;
        while i < a.len() {
            match upper(&a[i]).as_str() {
                "WITHCODE" if !code => code = true,
                "LIBRARYNAME" if pattern.is_none() && i + 1 < a.len() => {
                    pattern = Some(a[i + 1].clone());
                    i += 1;
                }
                "LIBRARYNAME" if i + 1 >= a.len() => return Reply::err("ERR library name argument was not given"),
                _ => {
                    return Reply::err(format!("ERR Unknown argument {}", String::from_utf8_lossy(&a[i])));
                }
            }
            i += 1;
        }
        let mut out = Vec::new();
        for l in self.libs.values() {
            if pattern.as_ref().is_some_and(|p| !crate::glob::glob(p, l.name.as_bytes())) {
                continue;
            }
            let fns = l
                .functions
                .iter()
                .map(|f| {
                    Reply::Map(vec![
                        (Reply::bulk("name"), Reply::bulk(f.name.as_str())),
                        (
                            Reply::bulk("description"),
                            f.description.as_ref().map_or(Reply::Nil, |d| Reply::bulk(d.as_str())),
                        ),
                        (
                            Reply::bulk("flags"),
                            Reply::Array(f.flags.iter().map(|x| Reply::Simple(x.clone())).collect()),
                        ),
                    ])
                })
                .collect();
            let mut m = vec![
                (Reply::bulk("library_name"), Reply::bulk(l.name.as_str())),
                (Reply::bulk("engine"), Reply::bulk("LUA")),
                (Reply::bulk("functions"), Reply::Array(fns)),
            ];
            if code {
                m.push((Reply::bulk("library_code"), Reply::bulk(l.code.as_str())));
            }
            out.push(Reply::Map(m));
        }
        Reply::Array(out)
    }

    /// FUNCTION STATS: the running function (its name, command and how long it has
    /// run, ms), and the counts.
    fn stats(&self, running: Option<(super::RunningFunction, u64)>) -> Reply {
        let n: usize = self.libs.values().map(|l| l.functions.len()).sum();
        Reply::Map(vec![
            (
                Reply::bulk("running_script"),
                running.map_or(Reply::Nil, |((name, command), ms)| {
                    Reply::Map(vec![
                        (Reply::bulk("name"), Reply::bulk(name)),
                        (Reply::bulk("command"), Reply::Array(command.into_iter().map(Reply::Bulk).collect())),
                        (Reply::bulk("duration_ms"), Reply::Int(ms as i64)),
                    ])
                }),
            ),
            (
                Reply::bulk("engines"),
                Reply::Map(vec![(
                    Reply::bulk("LUA"),
                    Reply::Map(vec![
                        (Reply::bulk("libraries_count"), Reply::Int(self.libs.len() as i64)),
                        (Reply::bulk("functions_count"), Reply::Int(n as i64)),
                    ]),
                )]),
            ),
        ])
    }
}

/// The libraries kept in `store` ([`FUNCTIONS_KEY`]), for the server's start: none if
/// the record is absent; an error naming the record if it cannot be loaded (a server that
/// started without a user's functions would answer FCALL with "not found" as if they had
/// never been loaded).
pub(crate) fn load_kept(store: &pmkv::Store) -> Result<Libraries, String> {
    let Some(payload) = store.get(FUNCTIONS_KEY).map_err(|e| format!("reading the function libraries: {e}"))? else {
        return Ok(Libraries::default());
    };
    let mut libs = Libraries::default();
    match libs.restore(&payload, Some(b"FLUSH")) {
        Reply::Error(e) => Err(format!("the function libraries kept in the pool do not load: {e}")),
        _ => Ok(libs),
    }
}

/// Keep `libs` in the pool: one engine write of FUNCTION DUMP's payload (or a delete when
/// there is no library), so a change is kept whole or not at all.
fn keep(sh: &crate::Shared, libs: &Libraries) -> Result<(), Reply> {
    let w = if libs.libs.is_empty() {
        sh.store.delete(FUNCTIONS_KEY).map(drop)
    } else {
        sh.store.put(FUNCTIONS_KEY, &libs.dump())
    };
    w.map_err(crate::keyspace::store_reply)
}

/// FUNCTION LOAD | LIST | DELETE | FLUSH | STATS | KILL | DUMP | RESTORE. LOAD, DELETE,
/// FLUSH and RESTORE are kept in the pool before they answer (`keep`); if that write
/// fails, the libraries are left as they were and the error is the reply.
pub(crate) fn command(sh: &crate::Shared, a: &[Vec<u8>]) -> Reply {
    let sub = upper(&a[0]);
    let mut libs = sh.functions.lock().unwrap_or_else(|e| e.into_inner());
    let before = matches!(sub.as_str(), "LOAD" | "DELETE" | "FLUSH" | "RESTORE").then(|| libs.clone());
    let reply = run(sh, &sub, a, &mut libs);
    if let Some(before) = before {
        let changed = before.libs.len() != libs.libs.len()
            || before.libs.iter().zip(&libs.libs).any(|((n, l), (m, k))| n != m || l.code != k.code);
        if changed {
            if let Err(e) = keep(sh, &libs) {
                *libs = before;
                return e;
            }
        }
    }
    reply
}

fn run(sh: &crate::Shared, sub: &str, a: &[Vec<u8>], libs: &mut Libraries) -> Reply {
    let wrong = || {
        Reply::err(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
            String::from_utf8_lossy(&a[0])
        ))
    };
    match sub {
        "LOAD" => {
            // As Redis: every argument before the code is an option, REPLACE the only one.
            let Some((code, opts)) = a[1..].split_last() else { return wrong() };
            if let Some(o) = opts.iter().find(|o| upper(o) != "REPLACE") {
                return Reply::err(format!("ERR Unknown option given: {}", String::from_utf8_lossy(o)));
            }
            let replace = !opts.is_empty();
            let Ok(code) = std::str::from_utf8(code) else {
                return Reply::err("ERR pmkv runs libraries that are UTF-8 text");
            };
            match libs.load(code, replace) {
                Ok(name) => Reply::bulk(name),
                Err(r) => r,
            }
        }
        "LIST" => libs.list(&a[1..]),
        "DELETE" if a.len() == 2 => match libs.libs.remove(String::from_utf8_lossy(&a[1]).as_ref()) {
            Some(_) => Reply::ok(),
            None => Reply::err("ERR Library not found"),
        },
        "FLUSH" if a.len() <= 2 => {
            if a.len() == 2 && !matches!(upper(&a[1]).as_str(), "ASYNC" | "SYNC") {
                return Reply::err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
            }
            libs.libs.clear();
            Reply::ok()
        }
        // As Redis: while an EVAL script is busy, STATS answers BUSY.
        "STATS" if a.len() == 1 && sh.script.busy() && sh.script.running_function().is_none() => sh.script.busy_reply(),
        "STATS" if a.len() == 1 => libs.stats(sh.script.running_function().map(|f| (f, sh.script.running_ms()))),
        "KILL" if a.len() == 1 => sh.script.kill_kind(true),
        "DUMP" if a.len() == 1 => Reply::bulk(libs.dump()),
        "RESTORE" if (2..=3).contains(&a.len()) => libs.restore(&a[1], a.get(2).map(Vec::as_slice)),
        "DELETE" | "FLUSH" | "STATS" | "KILL" | "DUMP" | "RESTORE" => wrong(),
        _ => Reply::err(format!("ERR unknown subcommand '{}'. Try FUNCTION HELP.", String::from_utf8_lossy(&a[0]))),
    }
}

/// The library name of a `#!lua name=<name>` first line.
fn library_name(code: &str) -> Result<String, Reply> {
    let first = code.lines().next().unwrap_or_default();
    if !first.starts_with("#!") {
        return Err(Reply::err("ERR Missing library metadata"));
    }
    // As Redis: the line's words split with its quoting rules (`name="foo"` is foo),
    // the engine the first of them without its `#!` (`#! name=x`: the engine '').
    let words = crate::resp::split_inline(first.as_bytes()).map_err(|_| Reply::err("ERR Invalid library metadata"))?;
    let engine =
        words.first().and_then(|w| w.get(2..)).map_or("", |e| std::str::from_utf8(e).unwrap_or_default()).to_string();
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(Reply::err(format!("ERR Engine '{engine}' not found")));
    }
    let mut name = None;
    for w in words.iter().skip(1).map(|w| String::from_utf8_lossy(w)) {
        match w.split_once('=') {
            Some(("name", _)) if name.is_some() => {
                return Err(Reply::err("ERR Invalid metadata value, name argument was given multiple times"))
            }
            Some(("name", n)) => name = Some(n.to_string()),
            _ => return Err(Reply::err(format!("ERR Invalid metadata value given: {w}"))),
        }
    }
    let name = name.ok_or_else(|| Reply::err("ERR Library name was not given"))?;
    if !valid_name(&name) {
        return Err(Reply::err(
            "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long",
        ));
    }
    Ok(name)
}

/// Read `redis.register_function`'s arguments: the function's description, and its
/// callback.
pub(super) fn registration(args: MultiValue) -> mlua::Result<(Function, mlua::Function)> {
    let bad = |m: &str| Err(lua_err(m.to_string()));
    // A string, or a number Lua would read as one (as Redis's `lua_isstring`).
    let text = |v: &Value| -> Option<String> {
        match v {
            Value::String(s) => s.to_str().ok().map(|s| s.to_string()),
            Value::Integer(n) => Some(n.to_string()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let v: Vec<Value> = args.into_iter().collect();
    let (name, callback, flags, description) = match v.as_slice() {
        [Value::Table(t)] => {
            let (mut name, mut cb, mut flags, mut desc) = (None, None, Vec::new(), None);
            for pair in t.clone().pairs::<String, Value>() {
                let (k, val) = pair?;
                match (k.as_str(), val) {
                    ("function_name", v) => match text(&v) {
                        Some(n) => name = Some(n),
                        None => return bad("function_name argument given to redis.register_function must be a string"),
                    },
                    ("callback", Value::Function(f)) => cb = Some(f),
                    ("callback", _) => {
                        return bad("callback argument given to redis.register_function must be a function")
                    }
                    ("description", v) => match text(&v) {
                        Some(d) => desc = Some(d),
                        None => return bad("description argument given to redis.register_function must be a string"),
                    },
                    ("flags", Value::Table(ft)) => {
                        for f in ft.sequence_values::<Value>() {
                            match f? {
                                Value::String(s) => flags.push(s.to_str()?.to_string()),
                                _ => return bad("unknown flag given"),
                            }
                        }
                    }
                    ("flags", _) => {
                        return bad(
                            "flags argument to redis.register_function must be a table representing function flags",
                        )
                    }
                    _ => return bad("unknown argument given to redis.register_function"),
                }
            }
            let Some(name) = name else { return bad("redis.register_function must get a function name argument") };
            let Some(cb) = cb else { return bad("redis.register_function must get a callback argument") };
            (name, cb, flags, desc)
        }
        [n, f] => match (text(n), f) {
            (None, _) => return bad("first argument to redis.register_function must be a string"),
            (Some(n), Value::Function(f)) => (n, f.clone(), Vec::new(), None),
            _ => return bad("second argument to redis.register_function must be a function"),
        },
        [_] => {
            return bad("calling redis.register_function with a single argument is only applicable to Lua table \
                 (representing named arguments).")
        }
        _ => return bad("wrong number of arguments to redis.register_function"),
    };
    // Redis 7.0 says "Library" here too (its text for a bad function name).
    if !valid_name(&name) {
        return bad("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long");
    }
    if let Some(f) = flags.iter().find(|f| !FLAGS.contains(&f.as_str())) {
        return Err(lua_err(format!("unknown flag given: {f}")));
    }
    Ok((Function { name, flags, description }, callback))
}

/// What of the `redis` table a library's code sees as it loads, as in Redis 7.0.
const LOAD_REDIS: &[&str] = &[
    "register_function",
    "log",
    "LOG_DEBUG",
    "LOG_VERBOSE",
    "LOG_NOTICE",
    "LOG_WARNING",
    "REDIS_VERSION",
    "REDIS_VERSION_NUM",
];

/// Lua that makes the strict, read-only view of a table the loading code sees: a name
/// missing from it is Redis's "nonexistent global variable" error, a write Redis's
/// read-only error.
const LOAD_GLOBALS: &str = r#"
local rawget, error, tostring, setmetatable = rawget, error, tostring, setmetatable
return function(t)
    return setmetatable({}, {
        __index = function(_, k)
            local v = rawget(t, k)
            if v == nil then
                error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
            end
            return v
        end,
        __newindex = function() error("Attempt to modify a readonly table", 2) end,
        __metatable = false,
    })
end
"#;

/// Run a library's code at LOAD, with only `register_function` and the logging helpers
/// in `redis`: what it registered.
fn registered(code: &str) -> Result<Vec<Function>, Reply> {
    let load_err = |e: String| Reply::err(format!("ERR Error registering functions: {e}"));
    let (lua, _, _) =
        sandbox::interpreter(super::MEMORY, Rc::new(|| None::<String>)).map_err(|e| load_err(e.to_string()))?;
    super::libs::open(&lua).map_err(|e| load_err(e.to_string()))?;
    let found: Rc<RefCell<Vec<Function>>> = Rc::default();
    let start = Instant::now();
    lua.set_global_hook(mlua::HookTriggers::new().every_nth_instruction(super::HOOK_EVERY), move |_, _| {
        if start.elapsed() > LOAD_TIME {
            return Err(lua_err("FUNCTION LOAD timeout"));
        }
        Ok(mlua::VmState::Continue)
    })
    .map_err(|e| load_err(e.to_string()))?;
    // As Redis: code that does not compile is told apart from code that fails running.
    if let Err(e) = lua.load(strip_shebang(code)).set_name("@user_function").set_mode(ChunkMode::Text).into_function() {
        let m = match &e {
            mlua::Error::SyntaxError { message, .. } => message.clone(),
            e => e.to_string(),
        };
        return Err(Reply::err(format!("ERR Error compiling function: {m}")));
    }
    let run = || -> mlua::Result<()> {
        let redis = lua.create_table()?;
        let f = found.clone();
        redis.set(
            "register_function",
            lua.create_function(move |_, args: MultiValue| {
                let (func, _) = registration(args)?;
                if f.borrow().iter().any(|x| x.name == func.name) {
                    return Err(lua_err("Function already exists in the library"));
                }
                f.borrow_mut().push(func);
                Ok(())
            })?,
        )?;
        super::redis_helpers(&lua, &redis)?;
        // As Redis: the code loading sees `redis` (register_function and the helpers)
        // and nothing else; any other name, global or field of `redis`, is an error,
        // and both are read-only. The functions run later with the scripts' globals.
        let strict: mlua::Function = lua.load(LOAD_GLOBALS).set_name("=load").set_mode(ChunkMode::Text).eval()?;
        // Of `redis`, only what Redis 7.0.15 gives a loading library (checked against it:
        // sha1hex, error_reply, set_repl … are "nonexistent" there).
        let visible = lua.create_table()?;
        for name in LOAD_REDIS {
            visible.raw_set(*name, redis.raw_get::<Value>(*name)?)?;
        }
        let load_redis: mlua::Table = strict.call(visible)?;
        let globals = lua.create_table()?;
        globals.raw_set("redis", load_redis)?;
        let load_env: mlua::Table = strict.call(globals)?;
        lua.load(strip_shebang(code))
            .set_name("@user_function")
            .set_mode(ChunkMode::Text)
            .set_environment(load_env)
            .exec()
    };
    let out = run();
    lua.remove_global_hook();
    out.map_err(|e| load_err(super::script_error(&e).trim_start_matches("ERR ").to_string()))?;
    let found = found.take();
    if found.is_empty() {
        return Err(Reply::err("ERR No functions registered"));
    }
    Ok(found)
}

/// The code with its `#!` line made a comment (line numbers kept).
pub(super) fn strip_shebang(code: &str) -> String {
    format!("--{}", code.strip_prefix("#!").unwrap_or(code))
}

/// Why FCALL_RO refuses a function, if it does.
pub(super) fn ro_refusal(f: &Function, ro_command: bool) -> Option<Reply> {
    (ro_command && !f.flags.iter().any(|x| x == "no-writes"))
        .then(|| Reply::err("ERR Can not execute a script with write flag using *_ro command."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libraries_register_their_functions_or_are_refused() {
        let mut l = Libraries::default();
        let code = "#!lua name=mylib\nredis.register_function('f1', function(k, a) return 1 end)\n\
                    redis.register_function{function_name='f2', callback=function() return 2 end, flags={'no-writes'}}";
        assert_eq!(l.load(code, false).unwrap(), "mylib");
        assert_eq!(l.find("f2").unwrap().1.flags, ["no-writes"]);
        assert!(l.load(code, false).is_err(), "exists without REPLACE");
        assert!(l.load(code, true).is_ok());
        let other = "#!lua name=other\nredis.register_function('f1', function() end)";
        assert_eq!(l.load(other, false).unwrap_err(), Reply::err("ERR Function f1 already exists"));
        for (bad, why) in [
            ("redis.register_function('x', function() end)", "ERR Missing library metadata"),
            ("#!lua\nredis.register_function('x', function() end)", "ERR Library name was not given"),
            ("#!lua name=a-b\n", "ERR Library names can only"),
            ("#!js name=a\n", "ERR Engine 'js' not found"),
            ("#!lua name=z\nreturn 1", "ERR No functions registered"),
            ("#!lua name=z\nredis.call('set', 'k', 'v')", "ERR Error registering functions"),
            ("#!lua name=z\nredis.register_function('f', function() end, 3)", "ERR Error registering functions"),
            ("#!lua name=z\nwhile true do end", "ERR Error registering functions"),
        ] {
            match l.load(bad, false) {
                Err(Reply::Error(e)) => assert!(e.starts_with(why), "{bad}: {e}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
