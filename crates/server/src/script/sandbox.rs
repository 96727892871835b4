//! The interpreter a script runs in: what Redis 7.0's scripting environment offers, and
//! nothing that reaches past the script.
//!
//! What a script can reach, and why:
//! * **No code but source text.** Lua 5.1 loads precompiled bytecode as readily as source,
//!   and its bytecode verifier does not make that safe: crafted bytecode reads and writes
//!   the interpreter's memory (the reason Redis removed it after CVE-2015-4335). The main
//!   chunk is loaded in text mode, and `loadstring` is replaced by one that loads text only
//!   (a binary chunk gives `nil` and a message, as Redis's does). `load` (chunks from a
//!   reader function), `dofile` and `loadfile` (files of the server's disk), `print` (the
//!   server's stdout), `getfenv`/`setfenv` (they hand out and replace the environment the
//!   protection below rests on) and `newproxy` are not there: a script that names one gets
//!   Redis's "nonexistent global variable" error.
//! * **Read-only globals and libraries**, with Redis's error texts: reading an undeclared
//!   global is an error ("Script attempted to access nonexistent global variable"), and
//!   so is every assignment to a global or to a field of `redis`, `string`, `table`,
//!   `math`, `coroutine` or the Lua libraries ("Attempt to modify a readonly table").
//!   Redis marks tables read-only inside its patched Lua; pmkv uses the stock interpreter,
//!   so the script sees empty proxy tables whose `__index` reads the real table and whose
//!   `__newindex` refuses, with their metatables themselves protected, and `rawset` and
//!   `setmetatable` refuse a proxy; `pairs`, `next` and `rawget` see through a proxy to
//!   the table it shows, so `pairs(cjson)` lists cjson's fields as in Redis. Each script
//!   gets a fresh interpreter, so nothing a script does outlives it anyway.
//! * **No library outside the interpreter**: no `io`, `os`, `package`/`require`, `debug`.
//! * **A kill that `pcall` cannot catch.** The server stops a script by raising an error
//!   from the instruction hook; a script could catch that with `pcall`, `xpcall` or
//!   `coroutine.resume` and loop on. Those three are wrapped: once the script is being
//!   stopped, they raise the stop again instead of returning.

use mlua::chunk::ChunkMode;
use mlua::{Function, Lua, LuaOptions, LuaString, MultiValue, StdLib, Table, Value};

/// What the sandbox needs from its caller: whether the script is being stopped, and the
/// message to stop it with.
pub(crate) type Stopping = std::rc::Rc<dyn Fn() -> Option<String>>;

/// The protection, in Lua (run once per interpreter, with the real globals): returns the
/// table that becomes the scripts' `_G` and a function making a read-only proxy.
const PRELUDE: &str = r#"
local G, stopping = ...
local error, rawget, tostring, type = error, rawget, tostring, type
local setmt, rawset0, rawget0, next0, pcall0, xpcall0 = setmetatable, rawset, rawget, next, pcall, xpcall
local resume0 = coroutine.resume
local readonly = setmt({}, {__mode = "k"})
-- proxy -> the table it shows (what pairs, next and rawget read)
local shows = setmt({}, {__mode = "k"})
local function deny() error("Attempt to modify a readonly table", 2) end
local function protect(index)
  local mt = {__index = index, __newindex = deny}
  local shown = setmt({}, {__index = mt, __newindex = deny, __metatable = false})
  readonly[shown] = true
  mt.__metatable = shown
  local p = setmt({}, mt)
  readonly[p] = true
  if type(index) == "table" then shows[p] = index end
  return p
end
local function ro(t) return protect(t) end
local env = protect(function(_, k)
  local v = rawget(G, k)
  if v == nil then
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end
  return v
end)
shows[env] = G
-- Raise the server's stop again if a protected call caught it.
local function recheck(...)
  local m = stopping()
  if m then error(m, 0) end
  return ...
end
G.rawset = function(t, k, v)
  if readonly[t] then deny() end
  return rawset0(t, k, v)
end
G.setmetatable = function(t, mt)
  if readonly[t] then deny() end
  return setmt(t, mt)
end
-- A proxy iterates and reads raw as the table it shows (Redis's read-only tables are the
-- tables themselves: pairs(cjson) lists cjson's fields).
local function next(t, k) return next0(shows[t] or t, k) end
G.next = next
G.pairs = function(t)
  if type(t) ~= "table" then error("bad argument #1 to 'pairs' (table expected, got " .. type(t) .. ")", 2) end
  return next, t, nil
end
G.rawget = function(t, k) return rawget0(shows[t] or t, k) end
G.pcall = function(...) return recheck(pcall0(...)) end
G.xpcall = function(...) return recheck(xpcall0(...)) end
local co = {}
for k, v in pairs(coroutine) do co[k] = v end
co.resume = function(...) return recheck(resume0(...)) end
G.coroutine = co
G._G = env
return env, ro
"#;

/// Globals of Lua 5.1's base library a script must not have (see the module doc).
const REMOVED: [&str; 7] = ["dofile", "loadfile", "load", "print", "getfenv", "setfenv", "newproxy"];

/// Library tables made read-only for scripts, those of them that are there (the `redis`
/// table is named by the caller).
const LIBRARIES: [&str; 8] = ["string", "table", "math", "coroutine", "bit", "cjson", "cmsgpack", "struct"];

/// A fresh interpreter with Redis's libraries and no way out, its memory capped at
/// `memory` bytes; `stopping` says when the server stops the script. Returns it with the
/// scripts' environment (the read-only `_G`) and the function that protects a table.
pub(crate) fn interpreter(memory: usize, stopping: Stopping) -> mlua::Result<(Lua, Table, Function)> {
    let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::default())?;
    lua.set_memory_limit(memory)?;
    let g = lua.globals();
    for name in REMOVED {
        g.raw_set(name, Value::Nil)?;
    }
    let stop_check = lua.create_function(move |_, ()| Ok(stopping()))?;
    let (env, ro): (Table, Function) =
        lua.load(PRELUDE).set_name("=sandbox").set_mode(ChunkMode::Text).call((g.clone(), stop_check))?;
    // `loadstring` loads source text only, into the scripts' environment (Lua 5.1's own
    // would give the loaded chunk the unprotected globals).
    let env2 = env.clone();
    let loadstring = lua.create_function(move |lua, (src, name): (LuaString, Option<String>)| {
        let bytes = src.as_bytes();
        let chunk = lua
            .load(&bytes[..])
            .set_name(name.unwrap_or_else(|| {
                // Lua names a string's chunk after its text; control bytes (a NUL) cannot be in a name.
                let text: String = String::from_utf8_lossy(&bytes[..bytes.len().min(60)])
                    .chars()
                    .map(|c| if c.is_control() { '?' } else { c })
                    .collect();
                format!("={text}")
            }))
            .set_mode(ChunkMode::Text)
            .set_environment(env2.clone());
        Ok(match chunk.into_function() {
            Ok(f) => MultiValue::from_iter([Value::Function(f)]),
            Err(e) => MultiValue::from_iter([Value::Nil, Value::String(lua.create_string(e.to_string())?)]),
        })
    })?;
    g.raw_set("loadstring", loadstring)?;
    Ok((lua, env, ro))
}

/// Make the libraries and `extra` globals read-only, as the scripts see them.
pub(crate) fn seal(lua: &Lua, ro: &Function, extra: &[&str]) -> mlua::Result<()> {
    let g = lua.globals();
    for name in LIBRARIES.iter().chain(extra) {
        if let Value::Table(t) = g.raw_get::<Value>(*name)? {
            g.raw_set(*name, ro.call::<Table>(t)?)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run `src` as a script runs: its result shown as `Debug` prints it (strings as text).
    fn run(src: &str) -> Result<String, String> {
        let (lua, env, ro) = interpreter(8 << 20, std::rc::Rc::new(|| None)).map_err(|e| e.to_string())?;
        seal(&lua, &ro, &[]).map_err(|e| e.to_string())?;
        let r = lua.load(src).set_name("@user_script").set_mode(ChunkMode::Text).set_environment(env).eval::<Value>();
        match r {
            Ok(Value::String(s)) => Ok(s.to_string_lossy().to_string()),
            Ok(v) => Ok(format!("{v:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    fn err(src: &str) -> String {
        match run(src) {
            Ok(v) => panic!("{src}: ran and gave {v}"),
            Err(e) => e,
        }
    }

    #[test]
    fn no_bytecode_reaches_the_interpreter() {
        // string.dump works (as in Redis); loading its output does not.
        assert!(
            err("return loadstring(string.dump(function() return 1 end))()").contains("attempt to call a nil value")
        );
        let m = run("local f, m = loadstring(string.dump(function() return 1 end)); return m").unwrap();
        assert!(m.contains("binary"), "{m}");
        // Source text still loads, into the protected environment.
        assert_eq!(run("return loadstring('return 41 + 1')()").unwrap(), "Integer(42)");
        assert!(err("loadstring('x = 1')()").contains("Attempt to modify a readonly table"));
    }

    #[test]
    fn no_file_os_or_environment_access() {
        for name in REMOVED {
            let e = err(&format!("return {name}('x')"));
            assert!(e.contains(&format!("Script attempted to access nonexistent global variable '{name}'")), "{e}");
        }
        for lib in ["io", "os", "package", "require", "debug"] {
            assert!(err(&format!("return {lib}")).contains("nonexistent global variable"), "{lib}");
        }
    }

    #[test]
    fn globals_and_libraries_are_read_only() {
        for src in [
            "a = 10",
            "_G = {}",
            "_G.x = 1",
            "rawset(_G, 'x', 1)",
            "setmetatable(_G, {})",
            "local g = getmetatable(_G); g.__index = {}",
            "setmetatable(getmetatable(_G), {})",
            "string.rep = nil",
            "rawset(string, 'x', 1)",
            "table.insert = nil",
            "math.pi = 3",
            "coroutine.wrap = nil",
        ] {
            assert!(err(src).contains("Attempt to modify a readonly table"), "{src}");
        }
        assert!(err("return a").contains("Script attempted to access nonexistent global variable 'a'"));
        // Reads and ordinary tables work as before.
        assert_eq!(run("local t = {} t.x = 1 rawset(t, 'y', 2) return t.x + t.y").unwrap(), "Integer(3)");
        assert_eq!(run("return string.rep('a', 3) == 'aaa' and math.max(1, 2) == 2").unwrap(), "Boolean(true)");
        assert_eq!(run("return _G.string.len('abc')").unwrap(), "Integer(3)");
        assert_eq!(run("return ('abc'):upper()").unwrap(), "ABC", "string methods");
        assert_eq!(run("local n = 0 for _ in pairs({1, 2}) do n = n + 1 end return n").unwrap(), "Integer(2)");
        // Proxies iterate and read raw as their tables.
        assert_eq!(run("local n = 0 for k in pairs(string) do n = n + 1 end return n > 10").unwrap(), "Boolean(true)");
        assert_eq!(run("return next(math, nil) ~= nil and rawget(math, 'pi') == math.pi").unwrap(), "Boolean(true)");
        assert_eq!(
            run("local seen = false for k in pairs(_G) do seen = seen or k == 'string' end return seen").unwrap(),
            "Boolean(true)"
        );
    }

    #[test]
    fn a_stop_cannot_be_caught() {
        let stop = std::rc::Rc::new(std::cell::Cell::new(false));
        let s = stop.clone();
        let (lua, env, ro) =
            interpreter(8 << 20, std::rc::Rc::new(move || s.get().then(|| "stopped by the test".to_string()))).unwrap();
        seal(&lua, &ro, &[]).unwrap();
        let f = lua.create_function(move |_, ()| -> mlua::Result<()> {
            stop.set(true);
            Err(mlua::Error::RuntimeError("stopped by the test".into()))
        });
        lua.globals().raw_set("stop_now", f.unwrap()).unwrap();
        for src in [
            "while true do pcall(stop_now) end",
            "while true do xpcall(stop_now, function(e) return e end) end",
            "while true do coroutine.resume(coroutine.create(function() stop_now() end)) end",
        ] {
            let r = lua.load(src).set_mode(ChunkMode::Text).set_environment(env.clone()).exec();
            let e = r.unwrap_err().to_string();
            assert!(e.contains("stopped by the test"), "{src}: {e}");
        }
    }
}
