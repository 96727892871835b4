//! `cmsgpack`: lua-cmsgpack 0.4.0 (Salvatore Sanfilippo's, as Redis ships it):
//! MessagePack `pack(...)` (the values' encodings concatenated), `unpack`,
//! `unpack_one(s [, offset])` and `unpack_limit(s, limit [, offset])`.
//!
//! Encoding, byte for byte as the C library (the Redis test suite checks hex):
//! - a number that is an int64 is the smallest integer encoding (positive fixnum, uint
//!   8/16/32/64, negative fixnum, int 8/16/32/64); any other number a float 32 when the
//!   float holds it exactly, else a float 64 (so 2^63 is `ca 5f000000`);
//! - strings are fixstr/str8/str16/str32; booleans, nil; functions and userdata nil;
//! - a table whose keys are exactly 1..n is an array (`{}` included), else a map, in
//!   Lua's iteration order;
//! - tables nest 16 deep at most: a table deeper than that is encoded as nil, which is
//!   what makes a self-referencing table safe to pack.
//!
//! Decoding: uint 64 is read as a signed 64-bit number (0xcf ff…ff is -1, as in Redis);
//! bin and ext types are "Bad data format in input."; the Lua stack limit of 8000 values
//! (results and nested tables) is enforced as Lua 5.1 enforces it on the C library,
//! with its messages, so nesting is bounded (3999 arrays deep).
//!
//! Written here rather than over the rmp crate: rmp picks its own encodings (it would
//! not reproduce the float-32 choice or the int64 rules above) and decoding needs the C
//! library's exact error behaviour, so the wire format is a few dozen lines either way.

use super::{arg_error, as_number, check_bytes, check_integer, lib_table, opt_integer, string, Ret, MAX_CSTACK};
use mlua::{Lua, Table, Value};

pub(crate) fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lib_table(
        lua,
        &[("pack", pack), ("unpack", unpack), ("unpack_one", unpack_one), ("unpack_limit", unpack_limit)],
    )?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

/// How deep tables are encoded (`LUACMSGPACK_MAX_NESTING`).
const MAX_NESTING: usize = 16;

fn pack(lua: &Lua, args: &[Value]) -> Ret {
    if args.is_empty() {
        return Err(arg_error(lua, 0, "MessagePack pack needs input."));
    }
    let mut out = Vec::new();
    for v in args {
        encode(v, 0, &mut out).map_err(super::msg)?;
        if out.len() > super::OUTPUT_LIMIT {
            return Err(super::OUT_OF_MEMORY.into());
        }
    }
    Ok(vec![string(lua, &out)?])
}

/// `IS_INT64_EQUIVALENT`: finite and equal to its int64 conversion.
fn int64(n: f64) -> Option<i64> {
    ((-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) && n.trunc() == n).then_some(n as i64)
}

fn encode(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::String(s) => {
            let b = s.as_bytes();
            let n = b.len();
            if n < 32 {
                out.push(0xa0 | n as u8);
            } else if n <= 0xff {
                out.extend_from_slice(&[0xd9, n as u8]);
            } else if n <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(_) | Value::Number(_) => {
            let n = as_number(v).unwrap_or(0.0);
            match int64(n) {
                Some(i) => encode_int(i, out),
                None => {
                    let f = n as f32;
                    if f64::from(f) == n {
                        out.push(0xca);
                        out.extend_from_slice(&f.to_be_bytes());
                    } else {
                        out.push(0xcb);
                        out.extend_from_slice(&n.to_be_bytes());
                    }
                }
            }
        }
        Value::Table(t) if level < MAX_NESTING => encode_table(t, level, out)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// A length header: fix form when `n <= 15`, else 16 or 32 bits.
fn header(fix: u8, b16: u8, n: usize, out: &mut Vec<u8>) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b16 + 1);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// `table_is_an_array`: every key a positive whole number (as a C `int`) and the
/// largest one equal to the count.
fn is_array(t: &Table) -> mlua::Result<bool> {
    let (mut count, mut max) = (0f64, 0f64);
    for kv in t.pairs::<Value, Value>() {
        let (k, _) = kv?;
        match as_number(&k) {
            Some(n) if n > 0.0 && n == f64::from(n as i32) => {
                max = f64::max(max, n);
                count += 1.0;
            }
            _ => return Ok(false),
        }
    }
    Ok(max == count)
}

fn encode_table(t: &Table, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    if is_array(t)? {
        let n = t.raw_len();
        header(0x90, 0xdc, n, out);
        for j in 1..=n {
            // lua_gettable: metamethods apply, as in the C library.
            encode(&t.get::<Value>(j)?, level + 1, out)?;
        }
    } else {
        // Counted, then encoded, in two passes as the C code does: holding all pairs
        // would take a Lua reference each, which mlua bounds.
        let n = t.pairs::<Value, Value>().count();
        header(0x80, 0xde, n, out);
        for kv in t.pairs::<Value, Value>() {
            let (k, v) = kv?;
            encode(&k, level + 1, out)?;
            encode(&v, level + 1, out)?;
        }
    }
    if out.len() > super::OUTPUT_LIMIT {
        return Err(mlua::Error::MemoryError(super::OUT_OF_MEMORY.into()));
    }
    Ok(())
}

fn unpack(lua: &Lua, args: &[Value]) -> Ret {
    let s = check_bytes(lua, args, 0)?;
    unpack_full(lua, &s, 0, 0, args.len(), args.len())
}

fn unpack_one(lua: &Lua, args: &[Value]) -> Ret {
    let offset = opt_integer(lua, args, 1, 0)? as i32;
    let s = check_bytes(lua, args, 0)?;
    unpack_full(lua, &s, 1, offset, 1, args.len())
}

fn unpack_limit(lua: &Lua, args: &[Value]) -> Ret {
    let limit = check_integer(lua, args, 1)? as i32;
    let offset = opt_integer(lua, args, 2, 0)? as i32;
    let s = check_bytes(lua, args, 0)?;
    unpack_full(lua, &s, limit, offset, 1, args.len())
}

/// `mp_unpack_full`: up to `limit` values from `offset` (all of them when both are 0),
/// preceded by the next offset (-1 at the end) unless decoding all. `stack` is how many
/// values the C function holds before its results (its arguments), `nargs` how many
/// arguments the callback has.
fn unpack_full(lua: &Lua, s: &[u8], limit: i32, offset: i32, stack: usize, nargs: usize) -> Ret {
    let all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        // The C library prints the input length where it means the limit.
        return Err(format!("Invalid request to unpack with offset of {offset} and limit of {}.", s.len()));
    }
    if offset as usize > s.len() {
        return Err(format!("Start offset {offset} greater than input length {}.", s.len()));
    }
    let limit = if all { i32::MAX } else { limit };
    let held = lua.create_table().map_err(super::msg)?;
    let mut c = Cursor { s, p: offset as usize, lua, held, frames: Vec::new() };
    let mut out = Vec::new();
    while c.p < s.len() && (out.len() as i64) < i64::from(limit) {
        // An mlua callback's arguments and results share MAX_RESULTS slots (a C
        // function returns 7999 values in Redis): past that, the C library's message.
        if nargs + out.len() + usize::from(!all) >= MAX_RESULTS {
            return Err(TOO_MANY.into());
        }
        out.push(c.value(stack + out.len())?);
    }
    if !all {
        let next = if c.p == s.len() { -1 } else { c.p.min(i32::MAX as usize) as i64 };
        out.insert(0, Value::Number(next as f64));
    }
    Ok(out)
}

const MISSING: &str = "Missing bytes in input.";
const TOO_MANY: &str = "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)";
/// The most arguments and results an mlua callback can have (with the flag `func` adds).
const MAX_RESULTS: usize = MAX_CSTACK - 2;
const BAD: &str = "Bad data format in input.";

/// A table being filled: `left` items (pairs) to go; `top` the C decoder's stack height
/// below the table.
struct Frame {
    map: bool,
    left: usize,
    /// Arrays: the next index. Maps: 1 while the pending key waits for its value.
    next: usize,
    top: usize,
}

/// One decoded item: a finished value, or a table opened (now the innermost frame).
enum Item {
    Done(Value),
    Open,
}

/// The decoder. It does not recurse: the tables being filled wait in `held` (frame `d`
/// at `2d - 1`, a map's pending key at `2d`), a Lua table, so that however deep the
/// input nests, Rust holds neither stack frames nor Lua references per level (mlua's
/// references are bounded by the same 8000-slot Lua limit).
struct Cursor<'a> {
    s: &'a [u8],
    p: usize,
    lua: &'a Lua,
    held: Table,
    frames: Vec<Frame>,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.s.len() - self.p < n {
            return Err(MISSING.into());
        }
        self.p += n;
        Ok(&self.s[self.p - n..self.p])
    }

    fn be(&mut self, n: usize) -> Result<u64, String> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b)))
    }

    /// `mp_decode_to_lua_type` for a top-level value, `top` values on the C stack.
    fn value(&mut self, top: usize) -> Result<Value, String> {
        let m = super::msg;
        let mut item = self.item(top)?;
        loop {
            let d = self.frames.len();
            let Some(f) = self.frames.last_mut() else { break };
            if let Item::Done(v) = item {
                let t: Table = self.held.raw_get(2 * d - 1).map_err(m)?;
                if !f.map {
                    t.raw_set(f.next, v).map_err(m)?;
                    f.next += 1;
                    f.left -= 1;
                } else if f.next == 0 {
                    self.held.raw_set(2 * d, v).map_err(m)?;
                    f.next = 1;
                } else {
                    let k: Value = self.held.raw_get(2 * d).map_err(m)?;
                    match &k {
                        Value::Nil => return Err("table index is nil".into()),
                        Value::Number(x) if x.is_nan() => return Err("table index is NaN".into()),
                        _ => {}
                    }
                    t.raw_set(k, v).map_err(m)?;
                    self.held.raw_set(2 * d, Value::Nil).map_err(m)?;
                    f.next = 0;
                    f.left -= 1;
                }
                if f.left == 0 && (!f.map || f.next == 0) {
                    self.frames.pop();
                    self.held.raw_set(2 * d - 1, Value::Nil).map_err(m)?;
                    item = Item::Done(Value::Table(t));
                    continue;
                }
            }
            // The next item of the innermost table: an array's index, or a map's key,
            // sits above the table while it is decoded.
            // The frame is still open (a finished one `continue`d above).
            let Some(f) = self.frames.last() else { return Err(BAD.into()) };
            let top = if f.map && f.next == 0 { f.top + 1 } else { f.top + 2 };
            item = self.item(top)?;
        }
        match item {
            Item::Done(v) => Ok(v),
            // An open table always leaves a frame, so the loop cannot end on one.
            Item::Open => Err(BAD.into()),
        }
    }

    /// One item with `top` values on the C stack: a scalar, an empty table, or a table
    /// opened for its items.
    fn item(&mut self, top: usize) -> Result<Item, String> {
        if top + 1 > MAX_CSTACK {
            return Err(TOO_MANY.into());
        }
        let t = self.take(1)?[0];
        let num = |n: f64| Ok(Item::Done(Value::Number(n)));
        let lua = self.lua;
        match t {
            0xcc => num(self.be(1)? as f64),
            0xcd => num(self.be(2)? as f64),
            0xce => num(self.be(4)? as f64),
            0xcf => num(self.be(8)? as i64 as f64),
            0xd0 => num(f64::from(self.be(1)? as u8 as i8)),
            0xd1 => num(f64::from(self.be(2)? as u16 as i16)),
            0xd2 => num(f64::from(self.be(4)? as u32 as i32)),
            0xd3 => num(self.be(8)? as i64 as f64),
            0xc0 => Ok(Item::Done(Value::Nil)),
            0xc2 => Ok(Item::Done(Value::Boolean(false))),
            0xc3 => Ok(Item::Done(Value::Boolean(true))),
            0xca => num(f64::from(f32::from_bits(self.be(4)? as u32))),
            0xcb => num(f64::from_bits(self.be(8)?)),
            0xd9..=0xdb => {
                let n = self.be(1 << (t - 0xd9))? as usize;
                Ok(Item::Done(string(lua, self.take(n)?)?))
            }
            0xdc | 0xdd => {
                let n = self.be(if t == 0xdc { 2 } else { 4 })? as usize;
                self.open(false, n, top)
            }
            0xde | 0xdf => {
                let n = self.be(if t == 0xde { 2 } else { 4 })? as usize;
                self.open(true, n, top)
            }
            _ if t & 0x80 == 0 => num(f64::from(t)),
            _ if t & 0xe0 == 0xe0 => num(f64::from(t as i8)),
            _ if t & 0xe0 == 0xa0 => Ok(Item::Done(string(lua, self.take(usize::from(t & 0x1f))?)?)),
            _ if t & 0xf0 == 0x90 => self.open(false, usize::from(t & 0x0f), top),
            _ if t & 0xf0 == 0x80 => self.open(true, usize::from(t & 0x0f), top),
            _ => Err(BAD.into()),
        }
    }

    /// A table of `n` items (not preallocated: `n` comes from the input). An array's
    /// table at `top + 1` must leave a slot for its index, as the C code checks.
    fn open(&mut self, map: bool, n: usize, top: usize) -> Result<Item, String> {
        if !map && top + 2 > MAX_CSTACK {
            return Err("stack overflow (in function mp_decode_to_lua_array)".into());
        }
        let t = self.lua.create_table().map_err(super::msg)?;
        if n == 0 {
            return Ok(Item::Done(Value::Table(t)));
        }
        self.frames.push(Frame { map, left: n, next: usize::from(!map), top });
        self.held.raw_set(2 * self.frames.len() - 1, t).map_err(super::msg)?;
        Ok(Item::Open)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{lua, ok};

    const HEX: &str =
        "local function hx(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end ";

    #[test]
    fn pack_emits_the_bytes_redis_does() {
        let l = lua();
        let cases = [
            ("0.1", "cb3fb999999999999a"),
            ("-1099511627776", "d3ffffff0000000000"),
            ("0.5, 1/0, 2^63, -2^63, 2^64", "ca3f000000 ca7f800000 ca5f000000 d38000000000000000 ca5f800000"),
            ("127, 128, 255, 256, 65535, 65536", "7f cc80 ccff cd0100 cdffff ce00010000"),
            ("2^32-1, 2^32, -32, -33, -128, -129", "ceffffffff cf0000000100000000 e0 d0df d080 d1ff7f"),
            ("-32768, -32769, -2^31, -2^31-1", "d18000 d2ffff7fff d280000000 d3ffffffff7fffffff"),
            ("true, false, nil", "c3 c2 c0"),
            ("string.rep('x', 31):sub(1, 1), ''", "a178 a0"),
            ("{}, {1, 2}, {[1]=1, [3]=3}", "90 920102 820101 0303"),
            ("{1.5}, {[0]='a'}, {f=string.len}", "91ca3fc00000 8100a161 81a166c0"),
        ];
        for (args, want) in cases {
            assert_eq!(ok(&l, &format!("{HEX} return hx(cmsgpack.pack({args}))")), want.replace(' ', ""), "{args}");
        }
        assert_eq!(ok(&l, &format!("{HEX} return hx(cmsgpack.pack(string.rep('x', 32)):sub(1, 2))")), "d920");
        assert_eq!(ok(&l, &format!("{HEX} return hx(cmsgpack.pack(string.rep('x', 256)):sub(1, 3))")), "da0100");
        assert_eq!(ok(&l, &format!("{HEX} return hx(cmsgpack.pack(string.rep('x', 65536)):sub(1, 5))")), "db00010000");
        let big = "local t = {} for i = 1, 70000 do t[i] = 1 end";
        assert_eq!(ok(&l, &format!("{HEX} {big} return hx(cmsgpack.pack(t):sub(1, 5))")), "dd00011170");
    }

    #[test]
    fn self_referencing_tables_stop_at_depth_16() {
        let l = lua();
        let src = format!(
            "{HEX} local a = {{x=nil, y=5}} local b = {{x=a}} a.x = b
             local re = cmsgpack.unpack(cmsgpack.pack(a))
             return hx(cmsgpack.pack(a)), re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.y, re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x == nil"
        );
        let want = format!("82a17905a17881a178{}c0 5 true", "82a17905a17881a178".repeat(7));
        assert_eq!(ok(&l, &src), want);
        let t = "local t = {} t[1] = t";
        assert_eq!(ok(&l, &format!("{HEX} {t} return hx(cmsgpack.pack(t))")), format!("{}c0", "91".repeat(16)));
    }

    #[test]
    fn unpack_reads_back_values_and_offsets() {
        let l = lua();
        assert_eq!(ok(&l, "return cmsgpack.unpack(cmsgpack.pack(1, 'a', true, 0.25, -7))"), "1 a true 0.25 -7");
        assert_eq!(ok(&l, "return cmsgpack.unpack_one('\\1\\2', 1)"), "-1 2");
        assert_eq!(ok(&l, "return cmsgpack.unpack_one('\\1\\2')"), "1 1");
        assert_eq!(ok(&l, "return cmsgpack.unpack_limit('\\1\\2\\3', 2)"), "2 1 2");
        assert_eq!(ok(&l, "return cmsgpack.unpack_one('\\1\\2', 2)"), "-1");
        assert_eq!(ok(&l, "return select('#', cmsgpack.unpack(''))"), "0");
        assert_eq!(ok(&l, "return cmsgpack.unpack('\\207\\255\\255\\255\\255\\255\\255\\255\\255')"), "-1");
        assert_eq!(ok(&l, "return cmsgpack.unpack(12)"), "49 50");
        assert_eq!(ok(&l, "local t = cmsgpack.unpack('\\146\\192\\1') return t[1] == nil, t[2]"), "true 1");
        assert_eq!(ok(&l, "local t = cmsgpack.unpack(cmsgpack.pack({a={b={1,2}}})) return t.a.b[2]"), "2");
        // Redis returns up to 7999 values; an mlua callback 7998 less its arguments.
        assert_eq!(ok(&l, "return select('#', cmsgpack.unpack(string.rep('\\1', 7997)))"), "7997");
        assert_eq!(ok(&l, "return select('#', cmsgpack.unpack_limit(string.rep('\\1', 8000), 7994))"), "7995");
    }

    #[test]
    fn bad_input_gives_the_c_librarys_errors() {
        let l = lua();
        let err = |s: &str| ok(&l, &format!("return select(2, pcall({s}))"));
        assert_eq!(err("cmsgpack.pack"), "bad argument #0 to '?' (MessagePack pack needs input.)");
        assert_eq!(err("cmsgpack.unpack"), "bad argument #1 to '?' (string expected, got no value)");
        assert_eq!(err("cmsgpack.unpack, '\\145'"), "Missing bytes in input.");
        assert_eq!(err("cmsgpack.unpack, '\\193'"), "Bad data format in input.");
        assert_eq!(err("cmsgpack.unpack, '\\196\\1a'"), "Bad data format in input.");
        assert_eq!(err("cmsgpack.unpack, '\\221\\255\\255\\255\\255\\1'"), "Missing bytes in input.");
        assert_eq!(err("cmsgpack.unpack, '\\129\\192\\1'"), "table index is nil");
        assert_eq!(
            err("cmsgpack.unpack_one, '\\1\\2', -1"),
            "Invalid request to unpack with offset of -1 and limit of 2."
        );
        assert_eq!(err("cmsgpack.unpack_one, '\\1\\2', 3"), "Start offset 3 greater than input length 2.");
        assert_eq!(
            err("cmsgpack.unpack, string.rep('\\1', 8000)"),
            "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"
        );
        // Nesting is bounded where Lua's stack limit bounds the C library.
        assert_eq!(ok(&l, "return type(cmsgpack.unpack(string.rep('\\145', 3999) .. '\\1'))"), "table");
        assert_eq!(
            err("cmsgpack.unpack, string.rep('\\145', 4000) .. '\\1'"),
            "stack overflow (in function mp_decode_to_lua_array)"
        );
        assert_eq!(
            err("cmsgpack.unpack, string.rep('\\145', 100000) .. '\\1'"),
            "stack overflow (in function mp_decode_to_lua_array)"
        );
        assert_eq!(
            err("cmsgpack.unpack, string.rep('\\129\\1', 4000) .. '\\1'"),
            "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"
        );
    }
}
