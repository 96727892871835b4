//! `bit`: LuaBitOp 1.0.2, 32-bit bitwise operations on Lua 5.1's double numbers.
//!
//! An argument becomes 32 bits the way LuaBitOp does it: add 2^52 + 2^51 to the double and
//! keep the low word of its bit pattern, which rounds to nearest (ties to even) and wraps
//! modulo 2^32; results are signed (`bit.tobit(0xffffffff) == -1`). Strings that Lua
//! converts to numbers are accepted, anything else is "number expected".

use super::{lib_table, to_number, type_error, Ret};
use mlua::{Lua, Table, Value};

pub(crate) fn table(lua: &Lua) -> mlua::Result<Table> {
    lib_table(
        lua,
        &[
            ("tobit", |l, a| unary(l, a, |b| b)),
            ("bnot", |l, a| unary(l, a, |b| !b)),
            ("band", |l, a| fold(l, a, |x, y| x & y)),
            ("bor", |l, a| fold(l, a, |x, y| x | y)),
            ("bxor", |l, a| fold(l, a, |x, y| x ^ y)),
            ("lshift", |l, a| shift(l, a, |b, n| b << n)),
            ("rshift", |l, a| shift(l, a, |b, n| b >> n)),
            ("arshift", |l, a| shift(l, a, |b, n| ((b as i32) >> n) as u32)),
            ("rol", |l, a| shift(l, a, u32::rotate_left)),
            ("ror", |l, a| shift(l, a, u32::rotate_right)),
            ("bswap", |l, a| unary(l, a, u32::swap_bytes)),
            ("tohex", tohex),
        ],
    )
}

/// LuaBitOp's `barg`: argument `i` (0-based) as 32 bits.
fn barg(lua: &Lua, args: &[Value], i: usize) -> Result<u32, String> {
    let n = to_number(args.get(i)).unwrap_or(0.0);
    let b = (n + 6_755_399_441_055_744.0).to_bits() as u32;
    // As the C code: only a zero result is checked for having come from a non-number.
    if b == 0 && to_number(args.get(i)).is_none() {
        return Err(type_error(lua, args, i, "number"));
    }
    Ok(b)
}

fn ret(b: u32) -> Ret {
    Ok(vec![Value::Number(f64::from(b as i32))])
}

fn unary(lua: &Lua, args: &[Value], f: fn(u32) -> u32) -> Ret {
    ret(f(barg(lua, args, 0)?))
}

/// band/bor/bxor: the first argument combined with each further one (LuaBitOp folds
/// from the last argument down; the operations commute, so the result is the same).
fn fold(lua: &Lua, args: &[Value], f: fn(u32, u32) -> u32) -> Ret {
    let mut b = barg(lua, args, 0)?;
    for i in (1..args.len()).rev() {
        b = f(b, barg(lua, args, i)?);
    }
    ret(b)
}

/// Shifts and rotations: the count is taken modulo 32.
fn shift(lua: &Lua, args: &[Value], f: fn(u32, u32) -> u32) -> Ret {
    let b = barg(lua, args, 0)?;
    let n = barg(lua, args, 1)? & 31;
    ret(f(b, n))
}

/// `bit.tohex(x [, n])`: the low `|n|` hex digits (default 8, at most 8), upper case
/// when `n` is negative.
fn tohex(lua: &Lua, args: &[Value]) -> Ret {
    let mut b = barg(lua, args, 0)?;
    let mut n = if args.len() < 2 { 8 } else { barg(lua, args, 1)? as i32 };
    let digits: &[u8; 16] = if n < 0 {
        n = n.wrapping_neg();
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    // -i32::MIN overflows in C; Redis's build then prints 8 digits (checked).
    let n = if n == i32::MIN { 8 } else { n.clamp(0, 8) as usize };
    let mut buf = vec![0u8; n];
    for c in buf.iter_mut().rev() {
        *c = digits[(b & 15) as usize];
        b >>= 4;
    }
    super::string(lua, &buf).map(|v| vec![v])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{lua, ok, run};

    #[test]
    fn the_operations_give_luabitop_results() {
        let l = lua();
        assert_eq!(
            ok(&l, "return bit.tobit(1), bit.band(1), bit.bxor(1,2), bit.bor(1,2,4,8,16,32,64,128)"),
            "1 1 3 255"
        );
        assert_eq!(
            ok(&l, "return bit.tobit(0xffffffff), bit.tobit(2^32 + 5), bit.tobit(-1), bit.tobit(2.5), bit.tobit(3.5)"),
            "-1 5 -1 2 4"
        );
        assert_eq!(ok(&l, "return bit.bnot(0), bit.band(0xff, 0x0f, 0x3), bit.bxor(5, 3, 1)"), "-1 3 7");
        assert_eq!(
            ok(&l, "return bit.lshift(1, 31), bit.lshift(1, 32), bit.lshift(1, 33), bit.rshift(-1, 28)"),
            "-2147483648 1 2 15"
        );
        assert_eq!(
            ok(&l, "return bit.arshift(-256, 4), bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), bit.rol(7, 0)"),
            "-16 878082066 2014458966 7"
        );
        assert_eq!(ok(&l, "return bit.bswap(0x12345678), bit.tohex(255), bit.tohex(-1, -4), bit.tohex(0x1234, 2), bit.tohex(1, 20)"), "2018915346 000000ff FFFF 34 00000001");
        assert_eq!(ok(&l, "return bit.tohex(0x9872C7B0, -2^31)"), "9872C7B0");
        assert_eq!(ok(&l, "return bit.tobit('0x10'), bit.band(' 12 ', 4)"), "16 4");
        assert_eq!(ok(&l, "return bit.tobit(1/0), bit.tobit(0/0)"), "0 0");
    }

    #[test]
    fn non_numbers_are_refused() {
        let l = lua();
        assert_eq!(
            ok(&l, "return select(2, pcall(bit.band))"),
            "bad argument #1 to '?' (number expected, got no value)"
        );
        assert_eq!(
            ok(&l, "return select(2, pcall(bit.bor, 1, {}))"),
            "bad argument #2 to '?' (number expected, got table)"
        );
        assert_eq!(
            ok(&l, "return select(2, pcall(bit.tobit, 'x'))"),
            "bad argument #1 to '?' (number expected, got string)"
        );
        assert!(run(&l, "local x = bit.lshift(1)")
            .is_err_and(|e| e.contains("bad argument #2 to 'lshift' (number expected, got no value)")));
    }
}
