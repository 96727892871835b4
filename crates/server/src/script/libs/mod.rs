//! The Lua libraries Redis 7.0 loads into its scripting interpreter, for scripts that
//! call them: `cjson` (lua-cjson 2.1.0), `cmsgpack` (lua-cmsgpack 0.4.0), `bit`
//! (LuaBitOp 1.0.2) and `struct` (Roberto Ierusalimschy's struct 0.2). Scripts written for
//! Redis rely on their exact behaviour — number formatting, which tables are arrays, the
//! bytes MessagePack emits, error texts — so each follows its C original, checked against
//! a real `redis-server` 7.0.15 (crates/server/tests/lua_libs.rs compares the two).
//!
//! Written in Rust over mlua rather than compiling the C files in: the C libraries call
//! `lua_error` (a `longjmp`) across their own frames, which mlua's vendored build allows,
//! but every one of them recurses without bound on hostile input (a self-referencing
//! table, 100,000 nested `[`); here every recursion has a depth limit.
//!
//! Errors: a C library raises a Lua *string* with `luaL_error`, prefixed by the caller's
//! position when Lua code called it (`user_script:1: …`), and scripts test it with
//! `string.find`. An error returned from an mlua callback becomes a userdata instead, so
//! each function is a Rust callback that returns `(false, message)` on error, wrapped in
//! a two-line Lua function that raises the message as a string at its caller's level.
//! Argument errors name the function as `luaL_argerror` does (from the call site, `?`
//! through `pcall`).

mod bit;
mod cjson;
mod cmsgpack;
mod lstruct;

use mlua::{Function, Lua, MultiValue, Table, Value};

/// Sets the globals `cjson`, `cmsgpack`, `bit` and `struct`: plain tables, built afresh
/// for this interpreter (no state shared between interpreters).
pub(crate) fn open(lua: &Lua) -> mlua::Result<()> {
    lua.set_named_registry_value(WRAP, wrap_maker(lua)?)?;
    let g = lua.globals();
    for (name, t) in [
        ("cjson", cjson::table(lua)?),
        ("cmsgpack", cmsgpack::table(lua)?),
        ("bit", bit::table(lua)?),
        ("struct", lstruct::table(lua)?),
    ] {
        wrap(lua, &t)?;
        g.raw_set(name, t)?;
    }
    Ok(())
}

/// What a library function returns: its results, or the message of the error it raises.
pub(crate) type Ret = Result<Vec<Value>, String>;

/// Lua 5.1's `LUAI_MAXCSTACK`: how many values one C function may hold on the Lua
/// stack. Redis's libraries run into it on deep input (cjson at nesting 7998,
/// cmsgpack at 3999), so it shapes their limits; the ones here reproduce them.
pub(crate) const MAX_CSTACK: usize = 8000;

/// Bytes an encoder may produce: the script's whole memory (script.rs gives each
/// interpreter 64 MiB), past which Lua could not hold the result anyway. A table that
/// asks for more (an array of a billion `null`s) stops with Lua's own message.
pub(crate) const OUTPUT_LIMIT: usize = 64 << 20;
pub(crate) const OUT_OF_MEMORY: &str = "not enough memory";

/// The callback that runs `f`: it returns `true` and the results, or `false` and the
/// error message; [`wrap`] turns it into the library function.
pub(crate) fn func(lua: &Lua, f: impl Fn(&Lua, &[Value]) -> Ret + 'static) -> mlua::Result<Function> {
    lua.create_function(move |lua, args: MultiValue| {
        let args = Vec::from(args);
        let mut out = Vec::new();
        match f(lua, &args) {
            Ok(vals) => {
                out.push(Value::Boolean(true));
                out.extend(vals);
            }
            Err(m) => {
                out.push(Value::Boolean(false));
                out.push(Value::String(lua.create_string(m)?));
            }
        }
        Ok(MultiValue::from_vec(out))
    })
}

/// Replaces each callback of `t` (made by [`func`]) with the Lua function that calls it
/// and raises its error as a string at the caller's level.
pub(crate) fn wrap(lua: &Lua, t: &Table) -> mlua::Result<()> {
    lua.named_registry_value::<Function>(WRAP)?.call(t)
}

/// Registry name of the Lua function that wraps a table's callbacks (compiled once per
/// interpreter, in `open`; one call a table).
const WRAP: &str = "pmkv.script_libs.wrap";

/// The wrapper maker: `finish` is tail-called, so Lua 5.1 counts the wrapper's frame as a
/// lost tail call and level 3 is the wrapper's caller, whose position luaL_error would
/// have shown. (When the caller itself tail-calls the wrapper, its frame is gone and no
/// position is shown, where Redis, calling a C function, would show it.)
fn wrap_maker(lua: &Lua) -> mlua::Result<Function> {
    let g = lua.globals();
    lua.load(
        "local error, pairs, type = ...\n\
         local function finish(ok, ...) if ok then return ... end error((...), 3) end\n\
         return function(t)\n\
           for k, raw in pairs(t) do\n\
             if type(raw) == 'function' then t[k] = function(...) return finish(raw(...)) end end\n\
           end\n\
         end",
    )
    .set_name("=[C]")
    .call((g.raw_get::<Function>("error")?, g.raw_get::<Function>("pairs")?, g.raw_get::<Function>("type")?))
}

/// A library function that keeps no state.
pub(crate) type LibFn = fn(&Lua, &[Value]) -> Ret;

/// A table of library functions, set with [`func`].
pub(crate) fn lib_table(lua: &Lua, fns: &[(&str, LibFn)]) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    for &(name, f) in fns {
        t.raw_set(name, func(lua, f)?)?;
    }
    Ok(t)
}

/// `luaL_argerror`: "bad argument #n to 'name' (msg)", the name as the caller spelt it
/// (`?` when unknown, e.g. through `pcall`); for a method call the self argument is not
/// counted.
pub(crate) fn arg_error(lua: &Lua, narg: usize, msg: &str) -> String {
    // Level 0 is the Rust callback, level 1 the Lua wrapper the script called.
    let (name, what) = lua
        .inspect_stack(1, |d| {
            let n = d.names();
            (n.name.map(|s| s.to_string()), n.name_what.map(str::to_string))
        })
        .unwrap_or((None, None));
    let mut narg = narg as i64;
    if what.as_deref() == Some("method") {
        narg -= 1;
        if narg == 0 {
            return format!("calling '{}' on bad self ({msg})", name.as_deref().unwrap_or("?"));
        }
    }
    format!("bad argument #{narg} to '{}' ({msg})", name.as_deref().unwrap_or("?"))
}

/// Lua's name for the type of argument `i` (0-based), "no value" past the last.
pub(crate) fn type_name(args: &[Value], i: usize) -> &'static str {
    match args.get(i) {
        None => "no value",
        Some(v) => lua_type(v),
    }
}

/// `lua_typename(lua_type(v))`.
pub(crate) fn lua_type(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// `luaL_typerror`: argument `i` (0-based) is not a `want`.
pub(crate) fn type_error(lua: &Lua, args: &[Value], i: usize, want: &str) -> String {
    arg_error(lua, i + 1, &format!("{want} expected, got {}", type_name(args, i)))
}

/// A number as Lua 5.1 holds it.
pub(crate) fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// `lua_tonumber`: a number, or a string Lua converts to one (`" 0x1F "`, `"1e3"`).
pub(crate) fn to_number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::String(s) => str_to_number(&s.as_bytes()),
        v => as_number(v),
    }
}

/// Lua 5.1's `luaO_str2d`: `strtod`, else a hexadecimal integer; spaces around allowed.
fn str_to_number(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s).ok()?.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\x0b');
    if t.is_empty() {
        return None;
    }
    let (neg, body) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        // strtoul: wraps at 2^64 like the C library saturates; either way a huge number.
        let v = u64::from_str_radix(hex, 16).ok().map(|v| v as f64).or_else(|| {
            hex.bytes().all(|b| b.is_ascii_hexdigit()).then_some(u64::MAX as f64).filter(|_| !hex.is_empty())
        })?;
        return Some(if neg { -v } else { v });
    }
    let (n, used) = strtod(t.as_bytes())?;
    (used == t.len()).then_some(n)
}

/// C's `strtod` over `s` (which ends at its first NUL): the number and how many bytes it
/// took, or `None` when no number starts there. Decimal, hexadecimal (`0x1.8p3`),
/// `inf`/`infinity` and `nan`/`nan(...)`, any case, with an optional sign.
pub(crate) fn strtod(s: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    let neg = match at(0) {
        b'-' => {
            i = 1;
            true
        }
        b'+' => {
            i = 1;
            false
        }
        _ => false,
    };
    let sign = |v: f64| if neg { -v } else { v };
    let word = |i: usize, w: &str| s.len() >= i + w.len() && s[i..i + w.len()].eq_ignore_ascii_case(w.as_bytes());
    if word(i, "infinity") {
        return Some((sign(f64::INFINITY), i + 8));
    }
    if word(i, "inf") {
        return Some((sign(f64::INFINITY), i + 3));
    }
    if word(i, "nan") {
        let mut j = i + 3;
        if at(j) == b'(' {
            let mut k = j + 1;
            while at(k).is_ascii_alphanumeric() || at(k) == b'_' {
                k += 1;
            }
            if at(k) == b')' {
                j = k + 1;
            }
        }
        return Some((sign(f64::NAN), j));
    }
    if at(i) == b'0' && (at(i + 1) | 0x20) == b'x' {
        if let Some((v, used)) = hex_float(&s[i + 2..]) {
            return Some((sign(v), i + 2 + used));
        }
        return Some((sign(0.0), i + 1));
    }
    let start = i;
    let mut digits = 0;
    while at(i).is_ascii_digit() {
        i += 1;
        digits += 1;
    }
    if at(i) == b'.' {
        i += 1;
        while at(i).is_ascii_digit() {
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if (at(i) | 0x20) == b'e' {
        let mut j = i + 1;
        if matches!(at(j), b'+' | b'-') {
            j += 1;
        }
        if at(j).is_ascii_digit() {
            while at(j).is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    let text = std::str::from_utf8(&s[start..i]).ok()?;
    let v: f64 = text.parse().ok()?;
    Some((sign(v), i))
}

/// The digits of a hexadecimal float after `0x`: value and bytes taken.
fn hex_float(s: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let (mut i, mut mant, mut exp, mut digits) = (0usize, 0f64, 0i64, 0);
    let mut frac = false;
    loop {
        let c = at(i);
        if c == b'.' && !frac {
            frac = true;
        } else if let Some(d) = (c as char).to_digit(16) {
            mant = mant * 16.0 + f64::from(d);
            digits += 1;
            if frac {
                exp -= 4;
            }
        } else {
            break;
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if (at(i) | 0x20) == b'p' {
        let mut j = i + 1;
        let eneg = at(j) == b'-';
        if matches!(at(j), b'+' | b'-') {
            j += 1;
        }
        if at(j).is_ascii_digit() {
            let mut e = 0i64;
            while at(j).is_ascii_digit() {
                e = (e * 10 + i64::from(at(j) - b'0')).min(100_000);
                j += 1;
            }
            exp += if eneg { -e } else { e };
            i = j;
        }
    }
    Some((mant * 2f64.powi(exp.clamp(-2000, 2000) as i32), i))
}

/// C's `printf("%.<prec>g", x)`, which Lua 5.1 uses to turn numbers into strings
/// (precision 14) and lua-cjson to encode them.
pub(crate) fn fmt_g(x: f64, prec: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf".into() } else { "inf".into() };
    }
    let p = prec.max(1);
    // Whole numbers with at most `p` digits print as integers: the common case, without
    // the exact formatting below.
    if x.trunc() == x && x.abs() < 10f64.powi(p.min(15) as i32) && !(x == 0.0 && x.is_sign_negative()) {
        return (x as i64).to_string();
    }
    let e = format!("{:.*e}", p - 1, x);
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i64 {
        let mant = strip_zeros(mant);
        format!("{mant}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        let f = format!("{:.*}", (p as i64 - 1 - exp).max(0) as usize, x);
        strip_zeros(&f).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// `luaL_checknumber` on argument `i` (0-based).
pub(crate) fn check_number(lua: &Lua, args: &[Value], i: usize) -> Result<f64, String> {
    to_number(args.get(i)).ok_or_else(|| type_error(lua, args, i, "number"))
}

/// `luaL_checkinteger`: the number truncated toward zero.
pub(crate) fn check_integer(lua: &Lua, args: &[Value], i: usize) -> Result<i64, String> {
    check_number(lua, args, i).map(|n| n as i64)
}

/// `luaL_optinteger`: `default` when argument `i` is absent or nil.
pub(crate) fn opt_integer(lua: &Lua, args: &[Value], i: usize, default: i64) -> Result<i64, String> {
    match args.get(i) {
        None | Some(Value::Nil) => Ok(default),
        _ => check_integer(lua, args, i),
    }
}

/// `luaL_checklstring`: a string, or a number as Lua prints it.
pub(crate) fn check_bytes(lua: &Lua, args: &[Value], i: usize) -> Result<Vec<u8>, String> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(v) if as_number(v).is_some() => Ok(fmt_g(as_number(v).unwrap_or(0.0), 14).into_bytes()),
        _ => Err(type_error(lua, args, i, "string")),
    }
}

/// A Lua string value from bytes.
pub(crate) fn string(lua: &Lua, b: &[u8]) -> Result<Value, String> {
    lua.create_string(b).map(Value::String).map_err(|e| e.to_string())
}

/// An mlua failure (out of memory, mostly) as a message.
pub(crate) fn msg(e: mlua::Error) -> String {
    match e {
        mlua::Error::MemoryError(_) => OUT_OF_MEMORY.to_string(),
        e => e.to_string(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fresh interpreter as script.rs makes one, with the libraries open.
    pub(crate) fn lua() -> Lua {
        let lua =
            Lua::new_with(mlua::StdLib::TABLE | mlua::StdLib::STRING | mlua::StdLib::MATH, mlua::LuaOptions::default())
                .unwrap();
        open(&lua).unwrap();
        lua
    }

    /// Runs `src` (a chunk named as script.rs names scripts) and returns its results as
    /// strings (`tostring`), or the error text.
    pub(crate) fn run(lua: &Lua, src: &str) -> Result<Vec<String>, String> {
        let f = lua.load(src).set_name("@user_script").into_function().map_err(|e| e.to_string())?;
        let tostring: Function = lua.globals().get("tostring").unwrap();
        match f.call::<MultiValue>(()) {
            Ok(vals) => Ok(vals.iter().map(|v| tostring.call::<String>(v.clone()).unwrap()).collect()),
            // Without mlua's traceback.
            Err(e) => Err(match e {
                mlua::Error::RuntimeError(m) => m,
                e => e.to_string(),
            }
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()),
        }
    }

    /// `run` that must succeed, its results joined by spaces.
    pub(crate) fn ok(lua: &Lua, src: &str) -> String {
        run(lua, src).unwrap_or_else(|e| panic!("{src}: {e}")).join(" ")
    }

    #[test]
    fn numbers_print_as_c_does_with_g() {
        for (x, p, s) in [
            (0.1, 14, "0.1"),
            (1e300, 14, "1e+300"),
            (1.0 / 3.0, 14, "0.33333333333333"),
            (100.0, 14, "100"),
            (1e14, 14, "1e+14"),
            (123456789012345.0, 14, "1.2345678901234e+14"),
            (0.0001, 14, "0.0001"),
            (0.00001, 14, "1e-05"),
            (-0.0, 14, "-0"),
            (2.5, 1, "2"),
            (f64::NAN, 14, "nan"),
            (f64::NEG_INFINITY, 14, "-inf"),
            (1023.2, 3, "1.02e+03"),
        ] {
            assert_eq!(fmt_g(x, p), s, "{x} at {p}");
        }
    }

    #[test]
    fn strtod_takes_what_c_takes() {
        assert_eq!(strtod(b"1e"), Some((1.0, 1)));
        assert_eq!(strtod(b"1.]"), Some((1.0, 2)));
        assert_eq!(strtod(b"-5e3,"), Some((-5000.0, 4)));
        assert_eq!(strtod(b"0x10"), Some((16.0, 4)));
        assert_eq!(strtod(b"0x1.8p1"), Some((3.0, 7)));
        assert_eq!(strtod(b"0xg"), Some((0.0, 1)));
        assert_eq!(strtod(b"+Infinity"), Some((f64::INFINITY, 9)));
        assert!(strtod(b"nan(123)x").is_some_and(|(v, n)| v.is_nan() && n == 8));
        assert_eq!(strtod(b"-"), None);
        assert_eq!(strtod(b"."), None);
    }

    #[test]
    fn strings_convert_to_numbers_as_lua_does() {
        assert_eq!(str_to_number(b" 0x1F "), Some(31.0));
        assert_eq!(str_to_number(b"1e3"), Some(1000.0));
        assert_eq!(str_to_number(b"1e"), None);
        assert_eq!(str_to_number(b""), None);
        assert_eq!(str_to_number(b"12abc"), None);
    }

    #[test]
    fn errors_are_strings_placed_as_lual_error_places_them() {
        let lua = lua();
        // Called from Lua code: the caller's position; through pcall: none; argument
        // errors name the function as the call site spelt it.
        assert_eq!(
            ok(&lua, "local ok, e = pcall(function() local x = cjson.encode(function() end) end) return type(e), e"),
            "string user_script:1: Cannot serialise function: type not supported"
        );
        assert_eq!(
            ok(&lua, "local ok, e = pcall(cjson.encode, function() end) return e"),
            "Cannot serialise function: type not supported"
        );
        assert_eq!(ok(&lua, "return select(2, pcall(cjson.decode))"), "bad argument #1 to '?' (expected 1 argument)");
        assert_eq!(
            ok(&lua, "local ok, e = pcall(function() local x = bit.tobit() end) return e"),
            "user_script:1: bad argument #1 to 'tobit' (number expected, got no value)"
        );
        assert_eq!(
            run(&lua, "\n\nlocal x = struct.pack('z')"),
            Err("user_script:3: bad argument #1 to 'pack' (invalid format option 'z')".into())
        );
    }
}
