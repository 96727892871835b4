//! The Lua libraries of `pmkv serve`'s scripts (cjson, cmsgpack, bit, struct) over the
//! wire: the cases Redis's own test suite runs on them (tests/unit/scripting.tcl of
//! 7.0.15, rewritten here), and the same EVALs sent to a real `redis-server` on a private
//! port, whose replies pmkv's must equal.

mod common;

use common::{start, Client, RealRedis, Running};
use pmkv_server::Config;
use pmkv_testutil::XorShift;

fn pmkv() -> Running {
    start("hart", 16, Config { threads: 2, ..Config::default() })
}

fn eval(c: &mut Client, script: &str) -> String {
    c.cmd(&["EVAL", script, "0"])
}

/// Turns a string into hex, for replies that are binary.
const HEX: &str =
    "local function hx(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end\n";

#[test]
fn redis_test_suite_cases_pass() {
    let s = pmkv();
    let mut c = Client::new(s.port);
    // JSON numeric decoding: the table returned as text, floats would become integers.
    assert_eq!(
        eval(&mut c, r#"return table.concat(cjson.decode("[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]"), " ")"#),
        "0 -5000 -1 0.0003 1023.2 0"
    );
    assert_eq!(
        eval(&mut c, r#"local d = cjson.decode('{"keya": "a", "keyb": "b"}') return {d.keya, d.keyb}"#),
        "[a,b]"
    );
    // JSON smoke test: round trips, settings, and what must fail.
    let smoke = r#"
        local some_map = {s1="Some string", n1=100, a1={"Some","String","Array"}, nil1=nil, b1=true, b2=false}
        local decoded = cjson.decode(cjson.encode(some_map))
        assert(table.concat(some_map) == table.concat(decoded))
        cjson.encode_keep_buffer(false)
        decoded = cjson.decode(cjson.encode(some_map))
        assert(table.concat(some_map) == table.concat(decoded))
        local table1 = {one="one", [1]="one"}
        decoded = cjson.decode(cjson.encode(table1))
        assert(decoded["one"] == table1["one"])
        assert(decoded["1"] == table1[1])
        local array1 = {[1]="one", [2]="two"}
        assert(table.concat(array1) == table.concat(cjson.decode(cjson.encode(array1))))
        local invalid_map = {}
        invalid_map[false] = "false"
        assert(pcall(cjson.encode, invalid_map) == false)
        cjson.encode_max_depth(1)
        assert(pcall(cjson.encode, some_map) == false)
        cjson.decode_max_depth(1)
        assert(pcall(cjson.decode, '{"obj": {"array": [1,2,3,4]}}') == false)
        assert(pcall(cjson.encode, {num1=0/0}) == false)
        cjson.encode_invalid_numbers(true)
        assert(pcall(cjson.encode, {num1=0/0}) == true)
        cjson.decode_max_depth(1000)
        cjson.encode_max_depth(1000)
        cjson.encode_invalid_numbers(false)
        return 'ok'"#;
    assert_eq!(eval(&mut c, smoke), "ok");
    assert_eq!(eval(&mut c, &format!("{HEX} return hx(cmsgpack.pack(0.1))")), "cb3fb999999999999a");
    assert_eq!(eval(&mut c, &format!("{HEX} return hx(cmsgpack.pack(-1099511627776))")), "d3ffffff0000000000");
    let msgpack_smoke = r#"
        local str_lt_32, str_lt_255 = string.rep("x", 30), string.rep("x", 250)
        local str_lt_65535, str_long = string.rep("x", 65530), string.rep("x", 100000)
        local array_big, map_big = {}, {}
        for i = 1, 100000 do array_big[i] = i map_big[tostring(i)] = i end
        local some_map = {s1=str_lt_32, s2=str_lt_255, s3=str_lt_65535, s4=str_long, d1=0.1,
            i1=1, i2=250, i3=65530, i4=100000, i5=2^40, i6=-1, i7=-120, i8=-32000, i9=-100000,
            i10=-3147483648, a1={1, 2, 3, 4, 5}, a2={1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18},
            a3=array_big, m1={a=1, b=2}, m2=map_big, b1=false, b2=true, n=nil}
        local encoded = cmsgpack.pack(some_map)
        local decoded = cmsgpack.unpack(encoded)
        assert(table.concat(some_map) == table.concat(decoded))
        assert(decoded.m2["77777"] == 77777 and decoded.a3[100000] == 100000 and decoded.s4 == str_long)
        local offset, decoded_one = cmsgpack.unpack_one(encoded, 0)
        assert(table.concat(some_map) == table.concat(decoded_one))
        assert(offset == -1)
        local encoded_multiple = cmsgpack.pack(str_lt_32, str_lt_255, str_lt_65535, str_long)
        local offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, 0)
        assert(obj == str_lt_32)
        offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, offset)
        assert(obj == str_lt_255)
        offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, offset)
        assert(obj == str_lt_65535)
        offset, obj = cmsgpack.unpack_limit(encoded_multiple, 1, offset)
        assert(obj == str_long)
        assert(offset == -1)
        return 'ok'"#;
    assert_eq!(eval(&mut c, msgpack_smoke), "ok");
    let circular = format!(
        "{HEX} local a = {{x=nil, y=5}} local b = {{x=a}} a['x'] = b
        local encoded = cmsgpack.pack(a)
        local re = cmsgpack.unpack(encoded)
        assert(re.x.x.y == re.y and re.x.x.x.x.y == re.y and re.x.x.x.x.x.x.x.x.x.x.y == re.y)
        assert(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.y == re.y)
        assert(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x)
        assert(re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x == nil)
        return {{hx(encoded), re.x.x.x.x.x.x.x.x.y == re.y, re.y == 5}}"
    );
    assert_eq!(eval(&mut c, &circular), format!("[{}c0,:1,:1]", "82a17905a17881a178".repeat(8)));
    assert_eq!(
        eval(&mut c, "assert(bit.tobit(1) == 1) assert(bit.band(1) == 1) assert(bit.bxor(1,2) == 3) assert(bit.bor(1,2,4,8,16,32,64,128) == 255) return 'ok'"),
        "ok"
    );
}

/// EVALs whose replies must equal Redis's. Each leaves the library settings as it found
/// them: Redis keeps one interpreter for all scripts, pmkv makes one per script.
const SAME_AS_REDIS: &[&str] = &[
    // cjson: encoding
    r#"return cjson.encode({"a/b", "\1\31\127", 0.1, 1e300, -0, 1/3, 2^53, {}, cjson.null, true, false})"#,
    r#"return cjson.encode({[1]=1, [3]=2, [4]=3})"#,
    r#"return cjson.encode({a={b={c={1, 2, {d="e"}}}}})"#,
    r#"return cjson.encode({x=1, y=2, z={3}, [7]="seven", [2.5]="half", longer_key="v"})"#,
    r#"return cjson.encode("\0\8\9\10\12\13\34\47\92")"#,
    r#"return cjson.encode(12345678901234567), cjson.encode(-1e-7), cjson.encode(100)"#,
    r#"cjson.encode_number_precision(3) local r = cjson.encode({1/3, 1234567}) cjson.encode_number_precision(14) return r"#,
    r#"cjson.encode_sparse_array(true) local r = cjson.encode({[1]=1, [20]=2}) cjson.encode_sparse_array(false) return r"#,
    r#"cjson.encode_sparse_array(false, 0) local r = cjson.encode({[1]=1, [30]=2}) cjson.encode_sparse_array(false, 2, 10) return r"#,
    r#"cjson.encode_invalid_numbers(true) local r = cjson.encode({0/0, 1/0, -1/0}) cjson.encode_invalid_numbers(false) return r"#,
    r#"cjson.encode_invalid_numbers("null") local r = cjson.encode({1/0}) cjson.encode_invalid_numbers(false) return r"#,
    r#"return {pcall(cjson.encode, 0/0)}"#,
    r#"return {pcall(cjson.encode, {[false]=1})}"#,
    r#"return {pcall(cjson.encode, {f=string.len})}"#,
    r#"return {pcall(cjson.encode, {[1]=1, [20]=2})}"#,
    r#"return {pcall(cjson.encode)}"#,
    r#"local t = {} t[1] = t return {pcall(cjson.encode, t)}"#,
    r#"local t = {} t.a = {b=t} return {pcall(cjson.encode, t)}"#,
    r#"cjson.encode_max_depth(100000) local t = {} t[1] = t local r = {pcall(cjson.encode, t)} cjson.encode_max_depth(1000) return r"#,
    r#"cjson.encode_max_depth(100000) local t = {} t.a = t local r = {pcall(cjson.encode, t)} cjson.encode_max_depth(1000) return r"#,
    // cjson: settings
    r#"return {cjson.encode_sparse_array()}"#,
    r#"return {cjson.encode_invalid_numbers(), cjson.decode_invalid_numbers(), cjson.encode_keep_buffer(), cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision()}"#,
    r#"return {pcall(cjson.encode_max_depth, 0)}"#,
    r#"return {pcall(cjson.encode_max_depth, 1, 2)}"#,
    r#"return {pcall(cjson.encode_number_precision, 15)}"#,
    r#"return {pcall(cjson.encode_invalid_numbers, "foo")}"#,
    r#"return {pcall(cjson.decode_max_depth, "x")}"#,
    r#"return {cjson._NAME, cjson._VERSION, type(cjson.null), tostring(cjson.null), type(cjson.new)}"#,
    // cjson: decoding
    r#"local t = cjson.decode('[1, "two", true, false, null, {"a": [3]}]') return {t[1], t[2], tostring(t[3]), tostring(t[4]), t[5] == cjson.null, t[6].a[1]}"#,
    r#"local t = cjson.decode("[0x10, +5, 007, Infinity, -inf, 1.5E2, 1e-2]") for i = 1, #t do t[i] = tostring(t[i]) end return t"#,
    r#"return {tostring(cjson.decode("NaN")), cjson.decode(12), tostring(cjson.decode(" true "))}"#,
    r#"return cjson.decode('"\\u00e9\\ud83d\\ude00\\/\\b\\f\\n\\r\\t\\"\\\\"')"#,
    r#"return cjson.decode('{"a":1,"a":2}').a"#,
    r#"return {pcall(cjson.decode, "")}"#,
    r#"return {pcall(cjson.decode, "[1,2")}"#,
    r#"return {pcall(cjson.decode, '{"a" 1}')}"#,
    r#"return {pcall(cjson.decode, "[1] x")}"#,
    r#"return {pcall(cjson.decode, '"\\x"')}"#,
    r#"return {pcall(cjson.decode, '"abc')}"#,
    r#"return {pcall(cjson.decode, '"\\ud800"')}"#,
    r#"return {pcall(cjson.decode, '"\\udc00\\ud800"')}"#,
    r#"return {pcall(cjson.decode, '"\\u12"')}"#,
    r#"return {pcall(cjson.decode, "nul")}"#,
    r#"return {pcall(cjson.decode, "-")}"#,
    r#"return {pcall(cjson.decode, "[0x10, 1e, 1.]")}"#,
    r#"return {pcall(cjson.decode, "{1:2}")}"#,
    r#"return {pcall(cjson.decode, "[1,]")}"#,
    r#"return {pcall(cjson.decode, "{\"a\":1,}")}"#,
    r#"return {pcall(cjson.decode, "a\0")}"#,
    r#"return {pcall(cjson.decode, "1\0")}"#,
    r#"return {pcall(cjson.decode, "[1]\0x")}"#,
    r#"return {pcall(cjson.decode, nil)}"#,
    r#"return {pcall(cjson.decode, {})}"#,
    r#"cjson.decode_invalid_numbers(false) local r = {pcall(cjson.decode, "0x10")} cjson.decode_invalid_numbers(true) return r"#,
    r#"cjson.decode_invalid_numbers(false) local r = {pcall(cjson.decode, "[007]")} cjson.decode_invalid_numbers(true) return r"#,
    r#"return {pcall(cjson.decode, string.rep("[", 1001) .. string.rep("]", 1001))}"#,
    r#"return {pcall(cjson.decode, string.rep("[", 100000))}"#,
    r#"cjson.decode_max_depth(100000) local r = {pcall(cjson.decode, string.rep("[", 7999) .. string.rep("]", 7999))} cjson.decode_max_depth(1000) return r"#,
    r#"cjson.decode_max_depth(100000) local ok = pcall(cjson.decode, string.rep("[", 7998) .. string.rep("]", 7998)) cjson.decode_max_depth(1000) return tostring(ok)"#,
    r#"cjson.decode_max_depth(100000) local r = {pcall(cjson.decode, string.rep('{"a":', 4000) .. "1" .. string.rep("}", 4000))} cjson.decode_max_depth(1000) return r"#,
    r#"local ok, e = pcall(function() local x = cjson.decode("[") end) return e"#,
    // cmsgpack
    "return hx(cmsgpack.pack(0.5, 1/0, 2^63, -2^63, 2^64, 127, 128, 255, 256, 65535, 65536, 2^32-1, 2^32))",
    "return hx(cmsgpack.pack(-32, -33, -128, -129, -32768, -32769, -2^31, -2^31-1, true, false, nil, 1.5, -0.1))",
    "return hx(cmsgpack.pack(string.rep('x', 31), string.rep('y', 32), '', string.rep('z', 256):sub(1, 3)))",
    "return hx(cmsgpack.pack(string.rep('x', 256)):sub(1, 6)), hx(cmsgpack.pack(string.rep('x', 65536)):sub(1, 10))",
    "return hx(cmsgpack.pack({}, {1, 2}, {[1]=1, [3]=3}, {1.5}, {[0]='a'}, {f=string.len}, {{{}}}))",
    "return hx(cmsgpack.pack({a=1, b={c=2}, [5]=true}))",
    "local t = {} for i = 1, 20 do t[i] = i end local m = {} for i = 1, 20 do m['k'..i] = i end return hx(cmsgpack.pack(t, m))",
    "local t = {} t[1] = t return hx(cmsgpack.pack(t))",
    "return {cmsgpack.unpack(cmsgpack.pack(1, 'a', 0.25, -7, 2^40))}",
    "return {cmsgpack.unpack_one('\\1\\2', 1)}",
    "return {cmsgpack.unpack_one('\\1\\2')}",
    "return {cmsgpack.unpack_limit('\\1\\2\\3', 2)}",
    "return {cmsgpack.unpack_limit('\\1\\2\\3', 2, 1)}",
    "return {cmsgpack.unpack_one('\\1\\2', 2)}",
    "return {select('#', cmsgpack.unpack(''))}",
    "return {tostring(cmsgpack.unpack('\\207\\255\\255\\255\\255\\255\\255\\255\\255')), tostring(cmsgpack.unpack('\\203\\127\\248\\0\\0\\0\\0\\0\\1'))}",
    "return {cmsgpack.unpack(12)}",
    "local t = cmsgpack.unpack('\\146\\192\\1') return {t[1] == nil, t[2]}",
    "return {pcall(cmsgpack.pack)}",
    "return {pcall(cmsgpack.unpack)}",
    "return {pcall(cmsgpack.unpack, '\\145')}",
    "return {pcall(cmsgpack.unpack, '\\193')}",
    "return {pcall(cmsgpack.unpack, '\\196\\1a')}",
    "return {pcall(cmsgpack.unpack, '\\221\\255\\255\\255\\255\\1')}",
    "return {pcall(cmsgpack.unpack, '\\129\\192\\1')}",
    "return {pcall(cmsgpack.unpack_one, '\\1\\2', -1)}",
    "return {pcall(cmsgpack.unpack_one, '\\1\\2', 3)}",
    "return {pcall(cmsgpack.unpack_limit, '\\1', -1)}",
    "return {pcall(cmsgpack.unpack, string.rep('\\145', 4000) .. '\\1')}",
    "return {pcall(cmsgpack.unpack, string.rep('\\145', 100000) .. '\\1')}",
    "return {pcall(cmsgpack.unpack, string.rep('\\129\\1', 4000) .. '\\1')}",
    "return {pcall(cmsgpack.unpack, string.rep('\\1', 100000))}",
    "return {type(cmsgpack.unpack(string.rep('\\145', 3999) .. '\\1'))}",
    "return {cmsgpack._NAME, cmsgpack._VERSION, cmsgpack._COPYRIGHT, cmsgpack._DESCRIPTION}",
    // read-only library tables (made so by script/sandbox.rs)
    "return {pcall(function() cjson.encode = function() return 1 end end)}",
    "return {pcall(function() cmsgpack.pack = 1 end)}",
    "return {pcall(function() bit.lshift = 1 end)}",
    "return {pcall(function() struct.x = 1 end)}",
    // bit
    "return {bit.tobit(0xffffffff), bit.tobit(2^32 + 5), bit.tobit(-1), bit.tobit(2.5), bit.tobit(3.5), bit.tobit(-2.5), bit.tobit(2^53)}",
    "return {bit.bnot(0), bit.band(0xff, 0x0f, 0x3), bit.bxor(5, 3, 1), bit.bor(1, 2, 4, 8, 16, 32, 64, 128)}",
    "return {bit.lshift(1, 31), bit.lshift(1, 32), bit.lshift(1, 33), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.arshift(256, 36)}",
    "return {bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), bit.rol(7, 0), bit.ror(1, -1), bit.bswap(0x12345678)}",
    "return {bit.tohex(255), bit.tohex(-1, -4), bit.tohex(0x1234, 2), bit.tohex(1, 20), bit.tohex(1, 0)}",
    "return {bit.tobit('0x10'), bit.band(' 12 ', 4), bit.tobit(1/0), bit.tobit(0/0)}",
    "return {pcall(bit.band)}",
    "return {pcall(bit.bor, 1, {})}",
    "return {pcall(bit.tobit, 'x')}",
    "local ok, e = pcall(function() local x = bit.lshift(1) end) return e",
    // struct
    "return hx(struct.pack('>i', 1) .. struct.pack('<i2', -2) .. struct.pack('bBhH', -1, 255, -2, 65535))",
    "return hx(struct.pack('>I3', 0x010203) .. struct.pack('!4 b i', 1, 2) .. struct.pack('!b d', 1, 1))",
    "return hx(struct.pack('>d', 0.5) .. struct.pack('>f', 0.5) .. struct.pack('<f', 0.1) .. struct.pack('c3 s x', 'abcdef', 'hi'))",
    "return hx(struct.pack('c0', 'xyz') .. struct.pack('<i10', -1) .. struct.pack('>l', 2^40) .. struct.pack('>L', -1) .. struct.pack('T', 7))",
    "return hx(struct.pack('!2 b h !8 b d', 1, 2, 3, 4) .. struct.pack('<i3 >i3', -5, -5))",
    "return {struct.unpack('>i2 b', '\\255\\254\\127')}",
    "return {struct.unpack('<I2', '\\255\\254')}",
    "return {struct.unpack('s c2', 'ab\\0xyz')}",
    "return {struct.unpack('b c0', '\\3abcd')}",
    "return {struct.unpack('c1', 'abc', 3)}",
    "return {struct.unpack('!4 b i', struct.pack('!4 b i', 9, -9))}",
    "local a, b, n = struct.unpack('d f', struct.pack('d f', 0.1, 0.5)) return {tostring(a), tostring(b), n}",
    "return {struct.unpack('<i9', string.rep('\\255', 9))}",
    "return {struct.unpack('>I16', string.rep('\\1', 16))}",
    "return {struct.size('!4 b i d c5'), struct.size('>hz'), struct.size('i3 !4 i'), struct.size('')}",
    "return {pcall(struct.pack, 'i33', 1)}",
    "return {pcall(struct.pack, '!3')}",
    "return {pcall(struct.pack, 'y')}",
    "return {pcall(struct.pack, 'i')}",
    "return {pcall(struct.pack, 'c5', 'ab')}",
    "return {pcall(struct.unpack, 'i', 'ab')}",
    "return {pcall(struct.unpack, 'i', 'abcd', 0)}",
    "return {pcall(struct.unpack, 'i', 'abcd', -1)}",
    "return {pcall(struct.unpack, 's', 'ab')}",
    "return {pcall(struct.unpack, 'c0', 'ab')}",
    "return {pcall(struct.size, 's')}",
    "return {pcall(struct.size, 'c0')}",
    "return {pcall(struct.pack, 'i99999999999')}",
    "return {pcall(struct.unpack, 'b', '\\1\\2', 2^53)}",
    "return {pcall(struct.pack)}",
    "return hx(struct.pack('<L', 2^64) .. struct.pack('<L', 2^63) .. struct.pack('<L', 0/0) .. struct.pack('<l', -2^70))",
    "return {struct.unpack('<f c0', struct.pack('<f', 1e30) .. 'abc')}",
    "return {pcall(struct.unpack, string.rep('b', 9000), string.rep('\\0', 9000))}",
    "return select('#', struct.unpack(string.rep('b', 7000), string.rep('\\0', 7000)))",
    "local ok, e = pcall(function() local x = struct.pack('>q') end) return e",
];

#[test]
fn replies_equal_a_real_redis() {
    let r = RealRedis::start();
    let s = pmkv();
    let (mut theirs, mut ours) = (Client::new(r.port), Client::new(s.port));
    let mut differ = Vec::new();
    for script in SAME_AS_REDIS {
        let src = format!("{HEX}{script}");
        let (want, got) = (eval(&mut theirs, &src), eval(&mut ours, &src));
        if want != got {
            differ.push(format!("{script}\n  redis: {want}\n  pmkv:  {got}"));
        }
    }
    assert!(differ.is_empty(), "{} of {} differ:\n{}", differ.len(), SAME_AS_REDIS.len(), differ.join("\n"));
}

#[test]
fn deep_or_hostile_input_is_an_error_not_a_crash() {
    let s = pmkv();
    let mut c = Client::new(s.port);
    let cases = [
        (
            "local t = {} t[1] = t return select(2, pcall(cjson.encode, t))",
            "Cannot serialise, excessive nesting (1001)",
        ),
        (
            "return select(2, pcall(cjson.decode, string.rep('[', 1000000)))",
            "Found too many nested data structures (1001) at character 1001",
        ),
        (
            "return select(2, pcall(cmsgpack.unpack, string.rep('\\145', 1000000)))",
            "stack overflow (in function mp_decode_to_lua_array)",
        ),
        (
            "return select(2, pcall(cmsgpack.unpack, string.rep('\\223\\255\\255\\255\\255', 10)))",
            "Missing bytes in input.",
        ),
    ];
    for (script, want) in cases {
        assert_eq!(eval(&mut c, script), want, "{script}");
    }
    // A table past the script's memory when encoded: refused, the server still answers.
    let r = eval(&mut c, "cjson.encode_sparse_array(false, 0) return select(2, pcall(cjson.encode, {[2^31-1] = 1}))");
    assert_eq!(r, "not enough memory");
    assert_eq!(c.cmd(&["PING"]), "+PONG");
}

/// `len` random picks from `alphabet`, concatenated.
fn text(rng: &mut XorShift, alphabet: &[&[u8]], len: usize) -> Vec<u8> {
    (0..len).flat_map(|_| alphabet[rng.below(alphabet.len() as u64) as usize].to_vec()).collect()
}

/// Random input, much of it malformed, sent to Redis and to pmkv: the replies (values
/// or error texts) must be equal. Each script gets its input as ARGV[1] (and ARGV[2]).
#[test]
fn random_input_gets_the_replies_redis_gives() {
    let r = RealRedis::start();
    let s = pmkv();
    let (mut theirs, mut ours) = (Client::new(r.port), Client::new(s.port));
    let json: &[&[u8]] = &[
        b"[",
        b"]",
        b"{",
        b"}",
        b"\"",
        b"\"a\"",
        b":",
        b",",
        b" ",
        b"0",
        b"1",
        b"9",
        b".",
        b"e",
        b"E",
        b"-",
        b"+",
        b"x",
        b"true",
        b"false",
        b"null",
        b"nan",
        b"Infinity",
        b"\\",
        b"\\u",
        b"\\ud83d",
        b"\\n",
        b"00",
        b"0x1f",
    ];
    let msgpack: &[&[u8]] = &[
        b"\x00",
        b"\x7f",
        b"\x91",
        b"\x92",
        b"\x81",
        b"\x82",
        b"\xa1",
        b"\xa3",
        b"\xc0",
        b"\xc2",
        b"\xc3",
        b"\xca",
        b"\xcb",
        b"\xcc",
        b"\xcd",
        b"\xce",
        b"\xcf",
        b"\xd0",
        b"\xd3",
        b"\xd9",
        b"\xda",
        b"\xdc",
        b"\xde",
        b"\xe0",
        b"\xff",
        b"\xc1",
        b"\xc4",
        b"a",
        b"\x01\x00",
    ];
    let fmt: &[&[u8]] = &[
        b"<", b">", b"!", b"!2", b"!4", b"b", b"B", b"h", b"H", b"l", b"L", b"T", b"i", b"I3", b"i7", b"i12", b"c",
        b"c2", b"c0", b"s", b"x", b"f", b"d", b" ",
    ];
    let scripts = [
        // JSON: decode, and encode what was decoded.
        "local ok, v = pcall(cjson.decode, ARGV[1]) if not ok then return {'error', v} end
         local ok2, e = pcall(cjson.encode, v) return {'ok', tostring(ok2), e}",
        // MessagePack: unpack everything, and pack it again.
        "local function f(ok, ...) if not ok then return {'error', (...)} end
         local n = select('#', ...) return {'ok', n, n > 0 and hx(cmsgpack.pack(...)) or ''} end
         return f(pcall(cmsgpack.unpack, ARGV[1]))",
        "local function f(ok, ...) if not ok then return {'error', (...)} end
         local n = select('#', ...) return {'ok', n, hx(cmsgpack.pack(...))} end
         return f(pcall(cmsgpack.unpack_limit, ARGV[1], 2, 1))",
        // struct: unpack ARGV[2] with format ARGV[1], and pack the numbers back.
        "local r = {pcall(struct.unpack, ARGV[1], ARGV[2])} if not r[1] then return {'error', r[2]} end
         for i = 2, #r do r[i] = tostring(r[i]) end return r",
        "local ok, v = pcall(struct.size, ARGV[1]) return {tostring(ok), v}",
        // Tables built from ARGV[1]'s bytes (whole and fractional number keys, some sparse,
        // some 0 or negative; string keys; nesting), encoded both ways.
        "local s, t = ARGV[1], {} local cur = t
         for i = 1, #s do
             local b = s:byte(i)
             if b < 60 then cur[b % 25] = b elseif b < 120 then cur['k' .. b % 7] = b / 3
             elseif b < 180 then local n = {} cur[#cur + 1] = n cur = n
             elseif b < 200 then cur[b - 185] = b % 2 == 0 elseif b < 230 then cur[b / 7] = 'f' else cur = t end
         end
         local ok, j = pcall(cjson.encode, t)
         return {tostring(ok), j, hx(cmsgpack.pack(t))}",
    ];
    let mut rng = XorShift::new(0x9e37_79b9_7f4a_7c15);
    let mut differ = Vec::new();
    for round in 0..1000 {
        for (n, script) in scripts.iter().enumerate() {
            let len = 1 + rng.below(12) as usize;
            let (a, b) = match n {
                0 => (text(&mut rng, json, len), Vec::new()),
                5 => ((0..len * 3).map(|_| rng.next_u64() as u8).collect(), Vec::new()),
                1 | 2 => (text(&mut rng, msgpack, len), Vec::new()),
                _ => {
                    let f = text(&mut rng, fmt, len / 2 + 1);
                    let data_len = rng.below(40);
                    (f, (0..data_len).map(|_| rng.next_u64() as u8).collect())
                }
            };
            let src = format!("{HEX}{script}");
            let args: [&[u8]; 5] = [b"EVAL", src.as_bytes(), b"0", &a, &b];
            let (want, got) = (theirs.try_cmd(&args), ours.try_cmd(&args));
            if want != got {
                let cut = |r: Option<String>| r.map(|r| r.chars().take(300).collect::<String>());
                differ.push(format!(
                    "round {round}, script {n}, input {a:?} {b:?}\n  redis: {:?}\n  pmkv:  {:?}",
                    cut(want),
                    cut(got)
                ));
            }
        }
    }
    assert!(
        differ.is_empty(),
        "{} differ:\n{}",
        differ.len(),
        differ.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// bit on random numbers, whole and fractional, huge and tiny, against Redis.
#[test]
fn bit_on_random_numbers_as_redis() {
    let r = RealRedis::start();
    let s = pmkv();
    let (mut theirs, mut ours) = (Client::new(r.port), Client::new(s.port));
    let script = "local x, y = tonumber(ARGV[1]), tonumber(ARGV[2])
        return {bit.tobit(x), bit.bnot(x), bit.band(x, y), bit.bor(x, y), bit.bxor(x, y), bit.lshift(x, y),
            bit.rshift(x, y), bit.arshift(x, y), bit.rol(x, y), bit.ror(x, y), bit.bswap(x), bit.tohex(x, y)}";
    let mut rng = XorShift::new(42);
    for _ in 0..1000 {
        let num = |rng: &mut XorShift| -> String {
            let m = rng.next_u64() as i64 as f64;
            match rng.below(4) {
                0 => format!("{}", m as i32),
                1 => format!("{}", m / 2f64.powi(rng.below(70) as i32)),
                2 => format!("{}.5", rng.below(1000) as i64 - 500),
                _ => format!("{:e}", m),
            }
        };
        let (x, y) = (num(&mut rng), num(&mut rng));
        let args: [&[u8]; 5] = [b"EVAL", script.as_bytes(), b"0", x.as_bytes(), y.as_bytes()];
        assert_eq!(theirs.try_cmd(&args), ours.try_cmd(&args), "bit on {x} {y}");
    }
}

/// `pairs` over a library table lists its fields, as in Redis (whose read-only tables are
/// flagged in place; pmkv's are proxies that `pairs` sees through).
#[test]
fn library_tables_list_their_fields_as_in_redis() {
    let s = pmkv();
    let mut c = Client::new(s.port);
    for (lib, fields) in [
        ("cjson", "[_NAME,_VERSION,decode,decode_invalid_numbers,decode_max_depth,encode,encode_invalid_numbers,encode_keep_buffer,encode_max_depth,encode_number_precision,encode_sparse_array,new,null]"),
        ("cmsgpack", "[_COPYRIGHT,_DESCRIPTION,_NAME,_VERSION,pack,unpack,unpack_limit,unpack_one]"),
        ("bit", "[arshift,band,bnot,bor,bswap,bxor,lshift,rol,ror,rshift,tobit,tohex]"),
        ("struct", "[pack,size,unpack]"),
    ] {
        let script = format!("local t = {{}} for k in pairs({lib}) do t[#t+1] = k end table.sort(t) return t");
        assert_eq!(eval(&mut c, &script), fields, "{lib}");
    }
}
