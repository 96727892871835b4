//! `cjson`: lua-cjson 2.1.0 as Redis 7.0 ships it — `encode`, `decode`, the settings
//! (`encode_sparse_array`, `encode_max_depth`, `decode_max_depth`,
//! `encode_number_precision`, `encode_keep_buffer`, `encode_invalid_numbers`,
//! `decode_invalid_numbers`), `new` (an independent copy with its own settings) and
//! `null`, the NULL light userdata JSON `null` decodes to (so `cjson.decode('null') ==
//! cjson.null`). Settings live in the table's closures: one interpreter's changes are
//! not seen by another.
//!
//! Encoding follows lua-cjson: numbers with `%.14g` (the precision setting), NaN and
//! infinities refused unless `encode_invalid_numbers` allows them; strings escape `"`,
//! `\`, `/`, control bytes and DEL, other bytes pass through; a table is an array when
//! all its keys are whole numbers >= 1 (holes become `null`) unless it is "excessively
//! sparse" (largest index > 10 and more than twice the count: an error, or an object
//! with `encode_sparse_array(true)`); `{}` is `{}`; object keys are strings or numbers.
//!
//! Decoding is lua-cjson's tokenizer and error texts ("Expected value but found invalid
//! token at character 1"), which serde_json could not give: its messages differ, and
//! lua-cjson accepts what JSON does not (by default `decode_invalid_numbers` is on: hex,
//! `Infinity`, `NaN`, `+1`, leading zeros, as C's `strtod` reads them).
//!
//! Nesting: both directions stop at the configured depth (1000 by default), and past
//! the Lua stack limit whatever the setting, where lua-cjson itself stops (encode 7998
//! arrays or 3999 objects deep). The recursion is bounded by that.

use super::{arg_error, as_number, fmt_g, func, lua_type, string, strtod, Ret, MAX_CSTACK};
use mlua::{Function, LightUserData, Lua, Table, Value};
use std::cell::RefCell;
use std::rc::Rc;

#[derive(Clone)]
struct Cfg {
    sparse_convert: bool,
    sparse_ratio: i32,
    sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    /// On/off settings are 0 or 1; `encode_invalid_numbers` 2 is "null".
    encode_invalid_numbers: usize,
    decode_invalid_numbers: usize,
    keep_buffer: usize,
    precision: i32,
}

impl Default for Cfg {
    fn default() -> Cfg {
        Cfg {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: 1,
            keep_buffer: 1,
            precision: 14,
        }
    }
}

type Shared = Rc<RefCell<Cfg>>;

/// The `cjson` table, with settings of its own.
pub(crate) fn table(lua: &Lua) -> mlua::Result<Table> {
    let cfg: Shared = Rc::default();
    let t = lua.create_table()?;
    let c = cfg.clone();
    let next: Function = lua.globals().raw_get("next")?;
    t.raw_set("encode", func(lua, move |l, a| encode(l, a, &c.borrow(), &next))?)?;
    let c = cfg.clone();
    t.raw_set("decode", func(lua, move |l, a| decode(l, a, &c.borrow()))?)?;
    let c = cfg.clone();
    t.raw_set(
        "encode_sparse_array",
        func(lua, move |l, a| {
            args_at_most(l, a, 3)?;
            let mut c = c.borrow_mut();
            let convert = bool_option(l, a, 0, &mut { c.sparse_convert as usize })?;
            c.sparse_convert = convert != 0;
            c.sparse_ratio = int_option(l, a, 1, c.sparse_ratio, 0, i32::MAX)?;
            c.sparse_safe = int_option(l, a, 2, c.sparse_safe, 0, i32::MAX)?;
            Ok(vec![Value::Boolean(c.sparse_convert), num(c.sparse_ratio), num(c.sparse_safe)])
        })?,
    )?;
    for (name, field, max) in [
        ("encode_max_depth", (|c| &mut c.encode_max_depth) as fn(&mut Cfg) -> &mut i32, i32::MAX),
        ("decode_max_depth", |c| &mut c.decode_max_depth, i32::MAX),
        ("encode_number_precision", |c| &mut c.precision, 14),
    ] {
        let c = cfg.clone();
        t.raw_set(
            name,
            func(lua, move |l, a| {
                args_at_most(l, a, 1)?;
                let mut c = c.borrow_mut();
                let v = field(&mut c);
                *v = int_option(l, a, 0, *v, 1, max)?;
                Ok(vec![num(*v)])
            })?,
        )?;
    }
    for (name, field, options) in [
        ("encode_keep_buffer", (|c| &mut c.keep_buffer) as fn(&mut Cfg) -> &mut usize, &["off", "on"][..]),
        ("encode_invalid_numbers", |c| &mut c.encode_invalid_numbers, &["off", "on", "null"]),
        ("decode_invalid_numbers", |c| &mut c.decode_invalid_numbers, &["off", "on"]),
    ] {
        let c = cfg.clone();
        t.raw_set(
            name,
            func(lua, move |l, a| {
                args_at_most(l, a, 1)?;
                Ok(vec![enum_option(l, a, 0, field(&mut c.borrow_mut()), options)?])
            })?,
        )?;
    }
    t.raw_set(
        "new",
        func(lua, |l, _| {
            let t = table(l).map_err(super::msg)?;
            super::wrap(l, &t).map_err(super::msg)?;
            Ok(vec![Value::Table(t)])
        })?,
    )?;
    t.raw_set("null", Value::LightUserData(LightUserData(std::ptr::null_mut())))?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

fn num(n: i32) -> Value {
    Value::Number(f64::from(n))
}

/// `json_arg_init`: at most `n` arguments.
fn args_at_most(lua: &Lua, a: &[Value], n: usize) -> Result<(), String> {
    if a.len() > n {
        return Err(arg_error(lua, n + 1, "found too many arguments"));
    }
    Ok(())
}

/// `json_integer_option`: argument `i` (0-based), when given, must be in min..=max.
fn int_option(lua: &Lua, a: &[Value], i: usize, cur: i32, min: i32, max: i32) -> Result<i32, String> {
    match a.get(i) {
        None | Some(Value::Nil) => Ok(cur),
        Some(_) => {
            let v = super::check_integer(lua, a, i)? as i32;
            if v < min || v > max {
                return Err(arg_error(lua, 1, &format!("expected integer between {min} and {max}")));
            }
            Ok(v)
        }
    }
}

/// `json_enum_option` for an on/off setting; returns the new value.
fn bool_option(lua: &Lua, a: &[Value], i: usize, cur: &mut usize) -> Result<usize, String> {
    enum_option(lua, a, i, cur, &["off", "on"])?;
    Ok(*cur)
}

/// `json_enum_option`: a boolean, or one of `options` by name; answers a boolean for
/// off/on, else the option's name.
fn enum_option(lua: &Lua, a: &[Value], i: usize, cur: &mut usize, options: &[&str]) -> Result<Value, String> {
    match a.get(i) {
        None | Some(Value::Nil) => {}
        Some(Value::Boolean(b)) => *cur = usize::from(*b),
        Some(v) => {
            let name = match v {
                Value::String(s) => Some(s.to_string_lossy().to_string()),
                v => as_number(v).map(|n| fmt_g(n, 14)),
            };
            let Some(name) = name else {
                return Err(super::type_error(lua, a, i, "string"));
            };
            match options.iter().position(|o| *o == name) {
                Some(p) => *cur = p,
                None => return Err(arg_error(lua, i + 1, &format!("invalid option '{name}'"))),
            }
        }
    }
    Ok(if *cur <= 1 { Value::Boolean(*cur == 1) } else { string(lua, options[*cur].as_bytes())? })
}

// ---- encode ----

fn encode(lua: &Lua, a: &[Value], cfg: &Cfg, next: &Function) -> Ret {
    if a.len() != 1 {
        return Err(arg_error(lua, 1, "expected 1 argument"));
    }
    let mut out = Vec::new();
    let held = lua.create_table().map_err(super::msg)?;
    let mut e = Encoder { cfg, out: &mut out, held, next, frames: Vec::new() };
    e.run(&a[0])?;
    Ok(vec![string(lua, &out)?])
}

/// A table being written: an array's next index and length, or an object's pairs so
/// far; `top` the C encoder's Lua stack height at the table.
struct Frame {
    array: Option<(usize, usize)>,
    first: bool,
    top: usize,
}

/// The encoder. It does not recurse: the tables being written wait in `held` (frame
/// `d` at `2d - 1`, an object's current key at `2d`, walked with Lua's `next`), so that
/// nesting as deep as lua-cjson allows costs Rust neither stack nor a Lua reference per
/// level (mlua's references are bounded by the same 8000-slot Lua limit).
struct Encoder<'a> {
    cfg: &'a Cfg,
    out: &'a mut Vec<u8>,
    held: Table,
    next: &'a Function,
    frames: Vec<Frame>,
}

/// `json_encode_exception`: "Cannot serialise <type of the culprit>: <reason>".
fn cannot(v: &Value, reason: &str) -> String {
    format!("Cannot serialise {}: {reason}", lua_type(v))
}

/// lua-cjson's escape for byte `b`, if it needs one.
fn escape(b: u8) -> Option<&'static str> {
    const CTRL: [&str; 32] = [
        "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007", "\\b", "\\t", "\\n",
        "\\u000b", "\\f", "\\r", "\\u000e", "\\u000f", "\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014",
        "\\u0015", "\\u0016", "\\u0017", "\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e",
        "\\u001f",
    ];
    match b {
        0..=31 => Some(CTRL[b as usize]),
        b'"' => Some("\\\""),
        b'/' => Some("\\/"),
        b'\\' => Some("\\\\"),
        127 => Some("\\u007f"),
        _ => None,
    }
}

impl Encoder<'_> {
    /// Writes `v` and every table in it.
    fn run(&mut self, v: &Value) -> Result<(), String> {
        let m = super::msg;
        self.value(v, 1)?;
        loop {
            let d = self.frames.len();
            let Some(f) = self.frames.last_mut() else { break };
            let t: Table = self.held.raw_get(2 * d - 1).map_err(m)?;
            let (first, top) = (f.first, f.top);
            f.first = false;
            match &mut f.array {
                Some((i, n)) => {
                    if *i > *n {
                        self.out.push(b']');
                        self.close(d)?;
                        continue;
                    }
                    if !first {
                        self.out.push(b',');
                    }
                    let v: Value = t.raw_get(*i).map_err(m)?;
                    *i += 1;
                    self.value(&v, top + 1)?;
                }
                None => {
                    let key: Value = self.held.raw_get(2 * d).map_err(m)?;
                    let (k, v): (Value, Value) = self.next.call((t, key)).map_err(m)?;
                    if k == Value::Nil {
                        self.out.push(b'}');
                        self.close(d)?;
                        continue;
                    }
                    if !first {
                        self.out.push(b',');
                    }
                    match &k {
                        Value::String(s) => self.string(&s.as_bytes()),
                        Value::Integer(_) | Value::Number(_) => {
                            self.out.push(b'"');
                            self.number(&k)?;
                            self.out.push(b'"');
                        }
                        k => return Err(cannot(k, "table key must be a number or string")),
                    }
                    self.out.push(b':');
                    self.held.raw_set(2 * d, k).map_err(m)?;
                    self.value(&v, top + 2)?;
                }
            }
        }
        Ok(())
    }

    fn close(&mut self, d: usize) -> Result<(), String> {
        self.frames.pop();
        self.held.raw_set(2 * d - 1, Value::Nil).map_err(super::msg)?;
        self.held.raw_set(2 * d, Value::Nil).map_err(super::msg)
    }

    /// Writes `v`, the C encoder holding `top` values on the Lua stack (`v` the last);
    /// a table is opened: its `[` or `{` written, its frame pushed.
    fn value(&mut self, v: &Value, top: usize) -> Result<(), String> {
        if self.out.len() > super::OUTPUT_LIMIT {
            return Err(super::OUT_OF_MEMORY.into());
        }
        match v {
            Value::Nil => self.out.extend_from_slice(b"null"),
            Value::Boolean(b) => self.out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Integer(_) | Value::Number(_) => self.number(v)?,
            Value::String(s) => self.string(&s.as_bytes()),
            Value::Table(t) => {
                let depth = self.frames.len() + 1;
                // The configured limit, and Lua's stack limit (an array element takes a
                // slot, an object's key and value two) that bounds lua-cjson whatever
                // the setting.
                if depth > self.cfg.encode_max_depth as usize || top + 3 > MAX_CSTACK {
                    return Err(format!("Cannot serialise, excessive nesting ({depth})"));
                }
                let array = self.array_length(t)?.map(|n| (1, n));
                self.out.push(if array.is_some() { b'[' } else { b'{' });
                self.frames.push(Frame { array, first: true, top });
                self.held.raw_set(2 * depth - 1, t).map_err(super::msg)?;
            }
            Value::LightUserData(p) if p.0.is_null() => self.out.extend_from_slice(b"null"),
            v => return Err(cannot(v, "type not supported")),
        }
        Ok(())
    }

    fn number(&mut self, v: &Value) -> Result<(), String> {
        let n = as_number(v).unwrap_or(0.0);
        match self.cfg.encode_invalid_numbers {
            0 if !n.is_finite() => return Err(cannot(v, "must not be NaN or Inf")),
            1 if n.is_nan() => {
                self.out.extend_from_slice(b"nan");
                return Ok(());
            }
            2 if !n.is_finite() => {
                self.out.extend_from_slice(b"null");
                return Ok(());
            }
            _ => {}
        }
        self.out.extend_from_slice(fmt_g(n, self.cfg.precision as usize).as_bytes());
        Ok(())
    }

    fn string(&mut self, s: &[u8]) {
        self.out.push(b'"');
        for &b in s {
            match escape(b) {
                Some(e) => self.out.extend_from_slice(e.as_bytes()),
                None => self.out.push(b),
            }
        }
        self.out.push(b'"');
    }

    /// `lua_array_length`: the array length, or `None` for an object.
    fn array_length(&self, t: &Table) -> Result<Option<usize>, String> {
        let (mut max, mut items) = (0f64, 0f64);
        for kv in t.pairs::<Value, Value>() {
            let (k, _) = kv.map_err(super::msg)?;
            match as_number(&k) {
                Some(n) if n != 0.0 && n.floor() == n && n >= 1.0 => {
                    max = max.max(n);
                    items += 1.0;
                }
                _ => return Ok(None),
            }
        }
        let c = self.cfg;
        if c.sparse_ratio > 0 && max > items * f64::from(c.sparse_ratio) && max > f64::from(c.sparse_safe) {
            if !c.sparse_convert {
                return Err(cannot(&Value::Table(t.clone()), "excessively sparse array"));
            }
            return Ok(None);
        }
        // Beyond a C int the C library's length goes negative and the table is encoded
        // as an object; so it is here.
        Ok((max > 0.0 && max <= f64::from(i32::MAX)).then_some(max as usize))
    }
}

// ---- decode ----

#[derive(Debug, PartialEq)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    /// A token error: what lua-cjson calls it ("invalid token", "invalid number", …).
    Error(&'static str),
}

impl Tok {
    /// lua-cjson's name for the token in "Expected … but found …".
    fn name(&self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str(_) => "T_STRING",
            Tok::Num(_) => "T_NUMBER",
            Tok::Bool(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(m) => m,
        }
    }
}

struct Parser<'a> {
    /// The JSON text, up to its first NUL byte (lua-cjson reads a C string).
    s: &'a [u8],
    p: usize,
    depth: usize,
    /// Values the C decoder would hold on the Lua stack (its argument, the open tables
    /// and object keys): bounded by `MAX_CSTACK`, as in lua-cjson.
    top: usize,
    cfg: &'a Cfg,
    lua: &'a Lua,
    /// The tables being filled, innermost last: whether each is an object.
    frames: Vec<bool>,
    held: Table,
}

fn decode(lua: &Lua, a: &[Value], cfg: &Cfg) -> Ret {
    if a.len() != 1 {
        return Err(arg_error(lua, 1, "expected 1 argument"));
    }
    let s = super::check_bytes(lua, a, 0)?;
    if s.len() >= 2 && (s[0] == 0 || s[1] == 0) {
        return Err("JSON parser does not support UTF-16 or UTF-32".into());
    }
    // lua-cjson reads a C string: a NUL byte ends the text.
    let s = &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())];
    let held = lua.create_table().map_err(super::msg)?;
    let mut p = Parser { s, p: 0, depth: 0, top: 1, cfg, lua, frames: Vec::new(), held };
    let v = p.parse()?;
    let (tok, at) = p.next();
    if tok != Tok::End {
        return Err(expected("the end", &tok, at));
    }
    Ok(vec![v])
}

/// `json_throw_parse_error`; `at` is 0-based, shown from 1.
fn expected(what: &str, tok: &Tok, at: usize) -> String {
    format!("Expected {what} but found {} at character {}", tok.name(), at + 1)
}

fn hex4(b: &[u8]) -> Option<u32> {
    let b = b.get(..4)?;
    b.iter().try_fold(0u32, |a, &c| Some(a * 16 + (c as char).to_digit(16)?))
}

impl Parser<'_> {
    fn at(&self, i: usize) -> u8 {
        self.s.get(i).copied().unwrap_or(0)
    }

    /// `json_is_invalid_number`: what strict JSON would refuse (hex, leading zeros, a
    /// plus sign, inf, nan).
    fn invalid_number(&self) -> bool {
        let mut i = self.p;
        if self.at(i) == b'+' {
            return true;
        }
        if self.at(i) == b'-' {
            i += 1;
        }
        if self.at(i) == b'0' {
            let c = self.at(i + 1);
            return (c | 0x20) == b'x' || c.is_ascii_digit();
        }
        if self.at(i) <= b'9' {
            return false;
        }
        let rest = &self.s[i.min(self.s.len())..];
        let starts = |w: &[u8]| rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(w);
        starts(b"inf") || starts(b"nan")
    }

    fn number(&mut self) -> Tok {
        match strtod(&self.s[self.p..]) {
            Some((n, used)) if used > 0 => {
                self.p += used;
                Tok::Num(n)
            }
            _ => Tok::Error("invalid number"),
        }
    }

    /// `json_next_token`: the next token and where it starts.
    fn next(&mut self) -> (Tok, usize) {
        while matches!(self.at(self.p), b' ' | b'\t' | b'\n' | b'\r') {
            self.p += 1;
        }
        let at = self.p;
        let c = self.at(at);
        let single = match c {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            0 => return (Tok::End, at),
            _ => None,
        };
        if let Some(t) = single {
            self.p += 1;
            return (t, at);
        }
        if !matches!(c, b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'"' | b'+' | b'-' | b'0'..=b'9') {
            return (Tok::Error("invalid token"), at);
        }
        let rest = &self.s[at..];
        let tok = if c == b'"' {
            self.string()
        } else if c == b'-' || c.is_ascii_digit() {
            if self.cfg.decode_invalid_numbers == 0 && self.invalid_number() {
                Tok::Error("invalid number")
            } else {
                self.number()
            }
        } else if rest.starts_with(b"true") {
            self.p += 4;
            Tok::Bool(true)
        } else if rest.starts_with(b"false") {
            self.p += 5;
            Tok::Bool(false)
        } else if rest.starts_with(b"null") {
            self.p += 4;
            Tok::Null
        } else if self.cfg.decode_invalid_numbers != 0 && self.invalid_number() {
            self.number()
        } else {
            Tok::Error("invalid token")
        };
        // A token error is reported where the scanner stopped (an escape's backslash).
        let at = if matches!(tok, Tok::Error(_)) { self.p } else { at };
        (tok, at)
    }

    /// `json_next_string_token`, at the opening quote; on a failure `self.p` is left
    /// where the scan stopped.
    fn string(&mut self) -> Tok {
        self.p += 1;
        let mut out = Vec::new();
        loop {
            let c = self.at(self.p);
            match c {
                b'"' => break,
                0 => return Tok::Error("unexpected end of string"),
                b'\\' => {
                    let e = self.at(self.p + 1);
                    let ch = match e {
                        b'"' | b'\\' | b'/' => e,
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => match self.unicode_escape() {
                            Some(cp) => {
                                let mut buf = [0u8; 4];
                                out.extend_from_slice(cp.encode_utf8(&mut buf).as_bytes());
                                continue;
                            }
                            None => return Tok::Error("invalid unicode escape code"),
                        },
                        _ => return Tok::Error("invalid escape code"),
                    };
                    out.push(ch);
                    self.p += 2;
                }
                c => {
                    out.push(c);
                    self.p += 1;
                }
            }
        }
        self.p += 1;
        Tok::Str(out)
    }

    /// `json_append_unicode_escape` at `\\u`: the character (a UTF-16 surrogate pair
    /// taken together), the scanner moved past it.
    fn unicode_escape(&mut self) -> Option<char> {
        let rest = &self.s[self.p..];
        let mut cp = hex4(rest.get(2..)?)?;
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 || rest.get(6) != Some(&b'\\') || rest.get(7) != Some(&b'u') {
                return None;
            }
            let low = hex4(rest.get(8..)?)?;
            if low & 0xFC00 != 0xDC00 {
                return None;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        let c = char::from_u32(cp)?;
        self.p += len;
        Some(c)
    }

    /// `json_decode_descend`: one level deeper, within the configured depth and the Lua
    /// stack (a level needs `slots` more).
    fn descend(&mut self, at: usize, slots: usize) -> Result<(), String> {
        self.depth += 1;
        if self.depth > self.cfg.decode_max_depth as usize || self.top + slots > MAX_CSTACK {
            return Err(format!("Found too many nested data structures ({}) at character {}", self.depth, at + 1));
        }
        Ok(())
    }

    /// `json_process_value` for the whole text. It does not recurse: the tables being
    /// filled wait in `held` (depth `d` at `2d - 1`, an object's pending key at `2d`), so
    /// nesting as deep as lua-cjson allows costs Rust neither stack nor a Lua reference
    /// per level.
    fn parse(&mut self) -> Result<Value, String> {
        let m = super::msg;
        let (tok, at) = self.next();
        let mut done = self.start(tok, at)?;
        loop {
            let d = self.frames.len();
            let Some(&object) = self.frames.last() else {
                return Ok(done.unwrap_or(Value::Nil));
            };
            let t: Table = self.held.raw_get(2 * d - 1).map_err(m)?;
            let end = if object { Tok::ObjEnd } else { Tok::ArrEnd };
            let (mut tok, mut at) = self.next();
            if let Some(v) = done.take() {
                if object {
                    let k: Value = self.held.raw_get(2 * d).map_err(m)?;
                    t.raw_set(k, v).map_err(m)?;
                } else {
                    t.raw_set(t.raw_len() + 1, v).map_err(m)?;
                }
                if tok != end && tok != Tok::Comma {
                    let what = if object { "comma or object end" } else { "comma or array end" };
                    return Err(expected(what, &tok, at));
                }
                if tok == Tok::Comma {
                    (tok, at) = self.next();
                    done = self.element(object, d, tok, at)?;
                    continue;
                }
            } else if tok != end {
                done = self.element(object, d, tok, at)?;
                continue;
            }
            // The table is complete.
            self.frames.pop();
            self.held.raw_set(2 * d - 1, Value::Nil).map_err(m)?;
            self.held.raw_set(2 * d, Value::Nil).map_err(m)?;
            self.depth -= 1;
            self.top -= if object { 2 } else { 1 };
            done = Some(Value::Table(t));
        }
    }

    /// The next element of the table at depth `d`: for an object, its key and colon
    /// first. `None` when the element is a table just opened.
    fn element(&mut self, object: bool, d: usize, tok: Tok, at: usize) -> Result<Option<Value>, String> {
        if !object {
            return self.start(tok, at);
        }
        let Tok::Str(k) = tok else {
            return Err(expected("object key string", &tok, at));
        };
        self.held.raw_set(2 * d, string(self.lua, &k)?).map_err(super::msg)?;
        let (tok, at) = self.next();
        if tok != Tok::Colon {
            return Err(expected("colon", &tok, at));
        }
        let (tok, at) = self.next();
        self.start(tok, at)
    }

    /// A value starting with `tok`: a scalar, or `None` for a table opened (its frame
    /// pushed).
    fn start(&mut self, tok: Tok, at: usize) -> Result<Option<Value>, String> {
        Ok(Some(match tok {
            Tok::Str(b) => string(self.lua, &b)?,
            Tok::Num(n) => Value::Number(n),
            Tok::Bool(b) => Value::Boolean(b),
            Tok::Null => Value::LightUserData(LightUserData(std::ptr::null_mut())),
            Tok::ArrBegin | Tok::ObjBegin => {
                let object = tok == Tok::ObjBegin;
                // An array holds its table on the Lua stack, an object its key too.
                self.descend(at, if object { 3 } else { 2 })?;
                self.top += if object { 2 } else { 1 };
                let t = self.lua.create_table().map_err(super::msg)?;
                self.frames.push(object);
                self.held.raw_set(2 * self.frames.len() - 1, t).map_err(super::msg)?;
                return Ok(None);
            }
            tok => return Err(expected("value", &tok, at)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{lua, ok};

    fn err(l: &mlua::Lua, call: &str) -> String {
        ok(l, &format!("return select(2, pcall({call}))"))
    }

    #[test]
    fn encode_formats_as_lua_cjson() {
        let l = lua();
        assert_eq!(
            ok(&l, r#"return cjson.encode({"a/b", "\1\31\127", 0.1, 1e300, -0, 1/3, {}, cjson.null, true})"#),
            r#"["a\/b","\u0001\u001f\u007f",0.1,1e+300,-0,0.33333333333333,{},null,true]"#
        );
        assert_eq!(ok(&l, r#"return cjson.encode("\128\255") == '"\128\255"'"#), "true");
        assert_eq!(ok(&l, "return cjson.encode({[1]=1, [3]=2})"), "[1,null,2]");
        assert_eq!(ok(&l, "return cjson.encode({a={b='\\n\\t\"\\\\'}})"), r#"{"a":{"b":"\n\t\"\\"}}"#);
        assert_eq!(ok(&l, "return cjson.encode({[2.5]='x'})"), r#"{"2.5":"x"}"#);
        assert_eq!(ok(&l, "return cjson.encode(12345678901234567)"), "1.2345678901235e+16");
        assert_eq!(ok(&l, "cjson.encode_number_precision(3) return cjson.encode(1/3)"), "0.333");
        assert_eq!(ok(&l, "return cjson.encode('\\0\\8\\12\\13\\11')"), r#""\u0000\b\f\r\u000b""#);
    }

    #[test]
    fn encode_refuses_what_lua_cjson_refuses() {
        let l = lua();
        assert_eq!(err(&l, "cjson.encode, 0/0"), "Cannot serialise number: must not be NaN or Inf");
        assert_eq!(
            err(&l, "cjson.encode, {[false]=1}"),
            "Cannot serialise boolean: table key must be a number or string"
        );
        assert_eq!(err(&l, "cjson.encode, string.len"), "Cannot serialise function: type not supported");
        assert_eq!(err(&l, "cjson.encode, {[1]=1, [20]=2}"), "Cannot serialise table: excessively sparse array");
        assert_eq!(err(&l, "cjson.encode"), "bad argument #1 to '?' (expected 1 argument)");
        assert_eq!(
            ok(&l, "cjson.encode_invalid_numbers(true) return cjson.encode({0/0, 1/0, -1/0})"),
            "[nan,inf,-inf]"
        );
        assert_eq!(ok(&l, "cjson.encode_invalid_numbers('null') return cjson.encode({0/0, 1/0})"), "[null,null]");
        assert_eq!(ok(&l, "cjson.encode_sparse_array(true) return cjson.encode({[1]=1, [20]=2})"), r#"{"1":1,"20":2}"#);
    }

    #[test]
    fn self_reference_and_deep_nesting_stop_with_an_error() {
        let l = lua();
        assert_eq!(
            err(&l, "cjson.encode, (function() local t = {} t[1] = t return t end)()"),
            "Cannot serialise, excessive nesting (1001)"
        );
        // Past the setting, Lua's stack limit stops lua-cjson: here too, at the same depth.
        assert_eq!(
            ok(&l, "cjson.encode_max_depth(100000) local t = {} t[1] = t return select(2, pcall(cjson.encode, t))"),
            "Cannot serialise, excessive nesting (7998)"
        );
        assert_eq!(
            ok(&l, "cjson.encode_max_depth(100000) local t = {} t.a = t return select(2, pcall(cjson.encode, t))"),
            "Cannot serialise, excessive nesting (4000)"
        );
        assert_eq!(
            ok(&l, "cjson.encode_max_depth(1) return select(2, pcall(cjson.encode, {{}}))"),
            "Cannot serialise, excessive nesting (2)"
        );
        assert_eq!(
            err(&l, "cjson.decode, string.rep('[', 1001) .. string.rep(']', 1001)"),
            "Found too many nested data structures (1001) at character 1001"
        );
        let l = lua();
        assert_eq!(
            ok(&l, "cjson.decode_max_depth(100000) return select(2, pcall(cjson.decode, string.rep('[', 7999) .. string.rep(']', 7999)))"),
            "Found too many nested data structures (7999) at character 7999"
        );
        assert_eq!(ok(&l, "return #cjson.decode(string.rep('[', 7998) .. string.rep(']', 7998))"), "1");
        assert_eq!(
            ok(
                &l,
                "return select(2, pcall(cjson.decode, string.rep('{\"a\":', 4000) .. '1' .. string.rep('}', 4000)))"
            ),
            "Found too many nested data structures (4000) at character 19996"
        );
        let l = lua();
        assert_eq!(
            err(&l, "cjson.decode, string.rep('[', 100000)"),
            "Found too many nested data structures (1001) at character 1001"
        );
    }

    #[test]
    fn decode_reads_json_as_lua_cjson() {
        let l = lua();
        assert_eq!(
            ok(&l, r#"return table.concat(cjson.decode("[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]"), " ")"#),
            "0 -5000 -1 0.0003 1023.2 0"
        );
        assert_eq!(ok(&l, r#"local d = cjson.decode('{"keya": "a", "keyb": "b"}') return d.keya, d.keyb"#), "a b");
        assert_eq!(
            ok(&l, r#"return cjson.decode("null") == cjson.null, cjson.decode('[null]')[1] == cjson.null"#),
            "true true"
        );
        assert_eq!(ok(&l, r#"return cjson.decode('"\\u00e9\\ud83d\\ude00\\/\\b"')"#), "é😀/\u{8}");
        assert_eq!(
            ok(&l, r#"local t = cjson.decode("[0x10, +5, 007, Infinity, -inf, 1.5E2]") return unpack(t)"#),
            "16 5 7 inf -inf 150"
        );
        assert_eq!(
            ok(&l, r#"return tostring(cjson.decode("NaN")), cjson.decode(12), cjson.decode(' true ')"#),
            "nan 12 true"
        );
        assert_eq!(ok(&l, r#"return cjson.decode('{"a":1,"a":2}').a, next(cjson.decode('{}'))"#), "2 nil");
    }

    #[test]
    fn decode_errors_name_the_token_and_place() {
        let l = lua();
        for (json, want) in [
            ("", "Expected value but found T_END at character 1"),
            ("[1,2", "Expected comma or array end but found T_END at character 5"),
            (r#"{"a" 1}"#, "Expected colon but found T_NUMBER at character 6"),
            ("[1] x", "Expected the end but found invalid token at character 5"),
            (r#""\x""#, "Expected value but found invalid escape code at character 2"),
            (r#""abc"#, "Expected value but found unexpected end of string at character 5"),
            (r#""\ud800""#, "Expected value but found invalid unicode escape code at character 2"),
            ("nul", "Expected value but found invalid token at character 1"),
            ("-", "Expected value but found invalid number at character 1"),
            ("[0x10, 1e, 1.]", "Expected comma or array end but found invalid token at character 9"),
            ("{1:2}", "Expected object key string but found T_NUMBER at character 2"),
            ("[1,]", "Expected value but found T_ARR_END at character 4"),
            ("a\0", "JSON parser does not support UTF-16 or UTF-32"),
        ] {
            let lit = json.replace('\\', "\\\\").replace('\'', "\\'").replace('\0', "\\0");
            assert_eq!(err(&l, &format!("cjson.decode, '{lit}'")), want, "{json}");
        }
        assert_eq!(err(&l, "cjson.decode, nil"), "bad argument #1 to '?' (string expected, got nil)");
        assert_eq!(
            ok(&l, "cjson.decode_invalid_numbers(false) return select(2, pcall(cjson.decode, '0x10'))"),
            "Expected value but found invalid number at character 1"
        );
    }

    #[test]
    fn settings_answer_and_check_as_lua_cjson() {
        let l = lua();
        assert_eq!(ok(&l, "return cjson.encode_sparse_array()"), "false 2 10");
        assert_eq!(
            ok(&l, "return cjson.encode_invalid_numbers(), cjson.decode_invalid_numbers(), cjson.encode_keep_buffer(), cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision()"),
            "false true true 1000 1000 14"
        );
        assert_eq!(
            ok(&l, "return cjson.encode_invalid_numbers('null'), cjson.encode_keep_buffer(false)"),
            "null false"
        );
        assert_eq!(
            err(&l, "cjson.encode_max_depth, 0"),
            "bad argument #1 to '?' (expected integer between 1 and 2147483647)"
        );
        assert_eq!(err(&l, "cjson.encode_max_depth, 1, 2"), "bad argument #2 to '?' (found too many arguments)");
        assert_eq!(
            err(&l, "cjson.encode_number_precision, 15"),
            "bad argument #1 to '?' (expected integer between 1 and 14)"
        );
        assert_eq!(err(&l, "cjson.encode_invalid_numbers, 'foo'"), "bad argument #1 to '?' (invalid option 'foo')");
        // `new` has settings of its own.
        assert_eq!(
            ok(&l, "local c = cjson.new() c.encode_max_depth(5) return c.encode_max_depth(), cjson.encode_max_depth()"),
            "5 1000"
        );
        assert_eq!(ok(&l, "return cjson._NAME, cjson._VERSION, type(cjson.null)"), "cjson 2.1.0 userdata");
    }
}
