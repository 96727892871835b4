//! `struct`: Roberto Ierusalimschy's struct library (0.2, as Redis ships it): `pack`,
//! `unpack` and `size` of binary records described by a format string.
//!
//! Format: `>` big-endian, `<` little-endian (the default is the machine's: little),
//! `!n` maximum alignment n (a power of 2; `!` alone is 8), `x` a zero byte, `b`/`B`
//! char, `h`/`H` short, `l`/`L` long and `T` size_t (8 bytes), `i`/`I[n]` an n-byte
//! integer (default 4, at most 32), lower case signed, `f` float, `d` double, `c[n]` n
//! bytes (`c0` on unpack: as many as the previous number said), `s` a zero-terminated
//! string, ` ` ignored. Items are aligned to min(size, maximum alignment), 1 unless `!`
//! says otherwise. The format ends at its first NUL byte, as a C string does.

use super::{arg_error, check_bytes, check_number, lib_table, opt_integer, Ret};
use mlua::{Lua, Table, Value};

pub(crate) fn table(lua: &Lua) -> mlua::Result<Table> {
    lib_table(lua, &[("pack", pack), ("unpack", unpack), ("size", size)])
}

/// The largest `i`/`I` size.
const MAX_INT_SIZE: usize = 32;
/// `!` alone: the machine's largest alignment (of a double).
const MAX_ALIGN: usize = 8;

struct Header {
    little: bool,
    align: usize,
}

impl Header {
    fn new() -> Header {
        Header { little: cfg!(target_endian = "little"), align: 1 }
    }
}

/// The format string of argument 1, up to its first NUL.
fn format(lua: &Lua, args: &[Value]) -> Result<Vec<u8>, String> {
    let mut f = check_bytes(lua, args, 0)?;
    if let Some(z) = f.iter().position(|&b| b == 0) {
        f.truncate(z);
    }
    Ok(f)
}

/// `getnum`: the digits at `fmt[*i..]`, or `default` when there are none.
fn getnum(fmt: &[u8], i: &mut usize, default: usize) -> Result<usize, String> {
    if !fmt.get(*i).is_some_and(u8::is_ascii_digit) {
        return Ok(default);
    }
    let mut a: usize = 0;
    while let Some(&d) = fmt.get(*i).filter(|d| d.is_ascii_digit()) {
        let d = usize::from(d - b'0');
        if a > (i32::MAX as usize) / 10 || a * 10 > i32::MAX as usize - d {
            return Err("integral size overflow".into());
        }
        a = a * 10 + d;
        *i += 1;
    }
    Ok(a)
}

/// `optsize`: the size of option `opt` (0 for those without one).
fn optsize(opt: u8, fmt: &[u8], i: &mut usize) -> Result<usize, String> {
    Ok(match opt {
        b'B' | b'b' | b'x' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' => 4,
        b'c' => getnum(fmt, i, 1)?,
        b'i' | b'I' => {
            let sz = getnum(fmt, i, 4)?;
            if sz > MAX_INT_SIZE {
                return Err(format!("integral size {sz} is larger than limit of {MAX_INT_SIZE}"));
            }
            sz
        }
        _ => 0,
    })
}

/// `gettoalign`: padding before an item of `size` at offset `len` (computed as the C
/// code does, also for sizes that are not powers of 2).
fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & (size - 1))) & (size - 1)
}

/// `controloptions`: endianness, alignment, space; anything else is an invalid option.
fn control(lua: &Lua, opt: u8, fmt: &[u8], i: &mut usize, h: &mut Header) -> Result<(), String> {
    match opt {
        b' ' => {}
        b'>' => h.little = false,
        b'<' => h.little = true,
        b'!' => {
            let a = getnum(fmt, i, MAX_ALIGN)?;
            if !a.is_power_of_two() {
                return Err(format!("alignment {a} is not a power of 2"));
            }
            h.align = a;
        }
        _ => return Err(arg_error(lua, 1, &format!("invalid format option '{}'", opt as char))),
    }
    Ok(())
}

fn pack(lua: &Lua, args: &[Value]) -> Ret {
    let fmt = format(lua, args)?;
    // The C code pushes a nil after its arguments: a missing value is "got nil".
    let args = &[args, &[Value::Nil]].concat();
    let mut h = Header::new();
    let mut arg = 1; // 0-based index of the next value
    let mut out: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = optsize(opt, &fmt, &mut i)?;
        let pad = gettoalign(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = check_number(lua, args, arg)?;
                arg += 1;
                let mut v = c_unsigned(n);
                let mut bytes = vec![0u8; size];
                // As the C code: bytes past the eighth are zero, sign or not.
                for b in bytes.iter_mut() {
                    *b = (v & 0xff) as u8;
                    v = v.checked_shr(8).unwrap_or(0);
                }
                if !h.little {
                    bytes.reverse();
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = check_number(lua, args, arg)? as f32;
                arg += 1;
                out.extend_from_slice(&if h.little { f.to_le_bytes() } else { f.to_be_bytes() });
            }
            b'd' => {
                let d = check_number(lua, args, arg)?;
                arg += 1;
                out.extend_from_slice(&if h.little { d.to_le_bytes() } else { d.to_be_bytes() });
            }
            b'c' | b's' => {
                let s = check_bytes(lua, args, arg)?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // The C code reports the argument after the string (it has already
                    // moved on): kept, as scripts may match the text.
                    return Err(arg_error(lua, arg + 1, "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => control(lua, opt, &fmt, &mut i, &mut h)?,
        }
        if out.len() > super::OUTPUT_LIMIT {
            return Err(super::OUT_OF_MEMORY.into());
        }
    }
    Ok(vec![super::string(lua, &out)?])
}

/// `getinteger`: `size` bytes as an integer, sign-extended when signed (for sizes past 8
/// the high bytes fall off and the sign bit is found as the C code finds it).
fn getinteger(b: &[u8], little: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let mut push = |byte: u8| l = (l << 8) | u64::from(byte);
    if little {
        b.iter().rev().for_each(|&x| push(x));
    } else {
        b.iter().for_each(|&x| push(x));
    }
    if !signed {
        return l as f64;
    }
    // `~0 << (size*8 - 1)`: x86 takes the shift count modulo 64, as wrapping_shl does.
    let mask = (!0u64).wrapping_shl((b.len() * 8).wrapping_sub(1) as u32);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: &[Value]) -> Ret {
    let fmt = format(lua, args)?;
    let data = check_bytes(lua, args, 1)?;
    let ld = data.len();
    let pos = opt_integer(lua, args, 2, 1)?;
    if pos == 0 {
        return Err(arg_error(lua, 3, "offset must be 1 or greater"));
    }
    // A negative offset is a huge size_t in C: "data string too short" at the first item.
    let mut pos = (pos as u64 as usize).wrapping_sub(1);
    let mut h = Header::new();
    let mut out: Vec<Value> = Vec::new();
    let short = |lua: &Lua| arg_error(lua, 2, "data string too short");
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = optsize(opt, &fmt, &mut i)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if !(size <= ld && pos <= ld - size) {
            return Err(short(lua));
        }
        // The C code checks for 2 more stack slots; an mlua callback also counts its
        // arguments and the flag `func` adds (so a few values fewer than Redis).
        if args.len() + out.len() + 2 > super::MAX_CSTACK - 2 {
            return Err("stack overflow (too many results)".into());
        }
        let item = &data[pos..pos + size];
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                out.push(Value::Number(getinteger(item, h.little, opt.is_ascii_lowercase())));
            }
            b'x' => {}
            b'f' => {
                let a = [item[0], item[1], item[2], item[3]];
                let f = if h.little { f32::from_le_bytes(a) } else { f32::from_be_bytes(a) };
                out.push(Value::Number(f64::from(f)));
            }
            b'd' => {
                let mut a = [0u8; 8];
                a.copy_from_slice(item);
                out.push(Value::Number(if h.little { f64::from_le_bytes(a) } else { f64::from_be_bytes(a) }));
            }
            b'c' => {
                if size == 0 {
                    let n = match out.last().and_then(|v| super::to_number(Some(v))) {
                        Some(n) => n,
                        None => return Err("format 'c0' needs a previous size".into()),
                    };
                    out.pop();
                    size = c_unsigned(n) as usize;
                    if !(size <= ld && pos <= ld - size) {
                        return Err(short(lua));
                    }
                }
                out.push(super::string(lua, &data[pos..pos + size])?);
            }
            b's' => match data[pos..].iter().position(|&b| b == 0) {
                None => return Err("unfinished string in data".into()),
                Some(z) => {
                    size = z + 1;
                    out.push(super::string(lua, &data[pos..pos + z])?);
                }
            },
            _ => control(lua, opt, &fmt, &mut i, &mut h)?,
        }
        pos = pos.wrapping_add(size);
    }
    out.push(Value::Number(pos.wrapping_add(1) as i64 as f64));
    Ok(out)
}

/// C's conversion of a double to an unsigned 64-bit integer as gcc compiles it for
/// x86-64 (Redis's build): exact in [0, 2^64), 0 from 2^64 up, 2^63 for NaN; a negative
/// number wraps through `long` (2^63 below -2^63). The struct code uses it for sizes
/// (`c0`) and, for non-negative numbers, for the integers it packs.
fn c_unsigned(n: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if n.is_nan() {
        1 << 63
    } else if n < 0.0 {
        n as i64 as u64
    } else if n < 2.0 * TWO_63 {
        n as u64
    } else {
        0
    }
}

fn size(lua: &Lua, args: &[Value]) -> Ret {
    let fmt = format(lua, args)?;
    let mut h = Header::new();
    let mut pos: usize = 0;
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let size = optsize(opt, &fmt, &mut i)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if opt == b's' {
            return Err(arg_error(lua, 1, "option 's' has no fixed size"));
        }
        if opt == b'c' && size == 0 {
            return Err(arg_error(lua, 1, "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            control(lua, opt, &fmt, &mut i, &mut h)?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(vec![Value::Number(pos as f64)])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{lua, ok};

    #[test]
    fn pack_lays_out_bytes_as_struct_does() {
        let l = lua();
        let hex =
            "local function hx(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end ";
        let cases = [
            ("struct.pack('>i', 1)", "00000001"),
            ("struct.pack('<i2', -2)", "feff"),
            ("struct.pack('bBhH', -1, 255, -2, 65535)", "ffff feffffff"),
            ("struct.pack('>I3', 0x010203)", "010203"),
            ("struct.pack('!4 b i', 1, 2)", "01000000 02000000"),
            ("struct.pack('!b d', 1, 1)", "0100000000000000 000000000000f03f"),
            ("struct.pack('>d', 0.5)", "3fe0000000000000"),
            ("struct.pack('>f', 0.5)", "3f000000"),
            ("struct.pack('c3 s x', 'abcdef', 'hi')", "616263 686900 00"),
            ("struct.pack('c0', 'xyz')", "78797a"),
            ("struct.pack('<i10', -1)", "ffffffffffffffff0000"),
            ("struct.pack('>l', 2^40)", "0000010000000000"),
        ];
        for (expr, want) in cases {
            assert_eq!(ok(&l, &format!("{hex} return hx({expr})")), want.replace(' ', ""), "{expr}");
        }
    }

    #[test]
    fn unpack_reads_back_and_returns_the_next_position() {
        let l = lua();
        assert_eq!(ok(&l, "return struct.unpack('>i2 b', '\\255\\254\\127')"), "-2 127 4");
        assert_eq!(ok(&l, "return struct.unpack('<I2', '\\255\\254')"), "65279 3");
        assert_eq!(ok(&l, "return struct.unpack('s c2', 'ab\\0xyz')"), "ab xy 6");
        assert_eq!(ok(&l, "return struct.unpack('b c0', '\\3abcd')"), "abc 5");
        assert_eq!(ok(&l, "return struct.unpack('i', struct.pack('i', 7) .. 'zz', 1)"), "7 5");
        assert_eq!(ok(&l, "return struct.unpack('c1', 'abc', 3)"), "c 4");
        assert_eq!(ok(&l, "return struct.unpack('!4 b i', struct.pack('!4 b i', 9, -9))"), "9 -9 9");
        assert_eq!(ok(&l, "return struct.unpack('d f', struct.pack('d f', 0.1, 0.5))"), "0.1 0.5 13");
        assert_eq!(ok(&l, "return struct.unpack('<i9', string.rep('\\255', 9))"), "-1 10");
        assert_eq!(ok(&l, "return struct.size('!4 b i d c5'), struct.size('>hz')"), "21 2");
    }

    #[test]
    fn bad_formats_and_short_data_are_errors() {
        let l = lua();
        let err = |s: &str| ok(&l, &format!("return select(2, pcall({s}))"));
        assert_eq!(err("struct.pack, 'i33', 1"), "integral size 33 is larger than limit of 32");
        assert_eq!(err("struct.pack, '!3'"), "alignment 3 is not a power of 2");
        assert_eq!(err("struct.pack, 'y'"), "bad argument #1 to '?' (invalid format option 'y')");
        assert_eq!(err("struct.pack, 'i'"), "bad argument #2 to '?' (number expected, got nil)");
        assert_eq!(err("struct.pack, 'ii', 1"), "bad argument #3 to '?' (number expected, got nil)");
        assert_eq!(err("struct.pack, 'c5', 'ab'"), "bad argument #3 to '?' (string too short)");
        assert_eq!(err("struct.unpack, 'i', 'ab'"), "bad argument #2 to '?' (data string too short)");
        assert_eq!(err("struct.unpack, 'i', 'abcd', 0"), "bad argument #3 to '?' (offset must be 1 or greater)");
        assert_eq!(err("struct.unpack, 'i', 'abcd', -1"), "bad argument #2 to '?' (data string too short)");
        assert_eq!(err("struct.unpack, 's', 'ab'"), "unfinished string in data");
        assert_eq!(err("struct.unpack, 'c0', 'ab'"), "format 'c0' needs a previous size");
        assert_eq!(err("struct.unpack, 'bc0', '\\255ab'"), "bad argument #2 to '?' (data string too short)");
        assert_eq!(err("struct.size, 's'"), "bad argument #1 to '?' (option 's' has no fixed size)");
        assert_eq!(err("struct.pack, 'i99999999999'"), "integral size overflow");
        assert_eq!(err("struct.unpack, 'b', '\\1\\2', 2^53"), "bad argument #2 to '?' (data string too short)");
        assert_eq!(
            err("struct.unpack, string.rep('b', 9000), string.rep('\\0', 9000)"),
            "stack overflow (too many results)"
        );
    }
}
