//! Redis's RDB serialization (RDB version 10, as Redis 7.0 writes it): the value encoding
//! DUMP and RESTORE exchange, and the whole-file framing a full resynchronisation sends.
//! Why the choices: docs/design/replication.md.
//!
//! Encoding writes the plain forms (a string as its bytes, a hash as `len` field/value
//! pairs): every Redis since 2.0 reads them, and converts a small hash to its compact
//! form itself. Decoding reads what Redis 7.0 emits besides: integer-encoded and
//! LZF-compressed strings, and hashes as a ziplist (RDB 7–9) or a listpack (RDB 10).
//!
//! Nothing here trusts a length: each is checked against the input left before anything
//! is allocated, so a corrupt or hostile payload is an [`Error`], never a panic or a huge
//! allocation.
//!
//! Lists, sets and sorted sets: [`Value`] and [`read_value`] are where their types
//! (`RDB_TYPE_LIST_QUICKLIST_2`, `SET`/`SET_INTSET`/`SET_LISTPACK`, `ZSET_2`/
//! `ZSET_LISTPACK`) are to be added when pmkv serves them; until then they decode to
//! [`Error::Unsupported`].

/// The RDB version written (Redis 7.0's); payloads of later versions are refused.
pub const RDB_VERSION: u16 = 10;

/// Object types (`RDB_TYPE_*` in Redis's rdb.h).
pub const TYPE_STRING: u8 = 0;
pub const TYPE_LIST: u8 = 1;
pub const TYPE_SET: u8 = 2;
pub const TYPE_ZSET: u8 = 3;
pub const TYPE_HASH: u8 = 4;
pub const TYPE_ZSET_2: u8 = 5;
pub const TYPE_LIST_ZIPLIST: u8 = 10;
pub const TYPE_SET_INTSET: u8 = 11;
pub const TYPE_ZSET_ZIPLIST: u8 = 12;
pub const TYPE_HASH_ZIPLIST: u8 = 13;
pub const TYPE_LIST_QUICKLIST: u8 = 14;
pub const TYPE_HASH_LISTPACK: u8 = 16;
pub const TYPE_ZSET_LISTPACK: u8 = 17;
pub const TYPE_LIST_QUICKLIST_2: u8 = 18;
/// Redis 7.2's (RDB 11) small set; read, in case a version-10 payload carries one.
pub const TYPE_SET_LISTPACK: u8 = 20;

/// A quicklist node's container (`QUICKLIST_NODE_CONTAINER_*`): one element as it is,
/// or a listpack of elements.
const NODE_PLAIN: u64 = 1;
const NODE_PACKED: u64 = 2;
/// The size a written quicklist node's listpack stays under (Redis's default
/// `list-max-listpack-size -2`: 8 KiB), unless one element alone is larger.
const NODE_BYTES: usize = 8192;

/// File opcodes (`RDB_OPCODE_*`).
/// A function library (its code) in an RDB file or a FUNCTION DUMP payload.
pub const OP_FUNCTION2: u8 = 245;
const OP_MODULE_AUX: u8 = 247;
const OP_IDLE: u8 = 248;
const OP_FREQ: u8 = 249;
const OP_AUX: u8 = 250;
const OP_RESIZEDB: u8 = 251;
const OP_EXPIRETIME_MS: u8 = 252;
const OP_EXPIRETIME: u8 = 253;
const OP_SELECTDB: u8 = 254;
const OP_EOF: u8 = 255;

/// The largest string accepted (Redis's `proto-max-bulk-len` default).
const MAX_STRING: usize = 512 << 20;

/// A value in the types pmkv serves.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    String(Vec<u8>),
    /// Fields in any order, each once.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    /// Elements, head first.
    List(Vec<Vec<u8>>),
    /// Members in any order, each once.
    Set(Vec<Vec<u8>>),
    /// Members with their scores (never NaN), each once; pmkv reads them out in Redis's
    /// order (score, then member bytes), a payload may hold them in any.
    ZSet(Vec<(Vec<u8>, f64)>),
}

/// Equality is total: a score is never NaN (the decoder refuses one, the keyspace
/// stores none).
impl Eq for Value {}

/// Why a payload could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// Too short, a wrong version or checksum (DUMP's footer, or the file's).
    Checksum,
    /// The bytes do not decode (a length past the end, a bad encoding...).
    Corrupt(&'static str),
    /// A type pmkv does not serve yet (its RDB type number).
    Unsupported(u8),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Checksum => write!(f, "RDB version or checksum wrong"),
            Error::Corrupt(what) => write!(f, "corrupt RDB data: {what}"),
            Error::Unsupported(t) => write!(f, "RDB object type {t} is not served by pmkv yet"),
        }
    }
}

type Result<T> = std::result::Result<T, Error>;

/// CRC-64 Jones, reflected, as Redis's crc64.c (`crc::CRC_64_REDIS`).
pub fn crc64(data: &[u8]) -> u64 {
    crc::Crc::<u64>::new(&crc::CRC_64_REDIS).checksum(data)
}

// ---- writing ----

/// Redis's length encoding: 6 bits, 14 bits, or 32/64 bits big-endian.
pub fn write_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
    } else if n <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// A string: as an integer where Redis would (a canonical decimal that fits 32 bits),
/// else its length and bytes (uncompressed: compression is Redis's option, not a need).
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    if let Some(i) = canonical_int(s) {
        if let Ok(v) = i8::try_from(i) {
            out.extend_from_slice(&[0xC0, v as u8]);
            return;
        }
        if let Ok(v) = i16::try_from(i) {
            out.push(0xC1);
            out.extend_from_slice(&v.to_le_bytes());
            return;
        }
        if let Ok(v) = i32::try_from(i) {
            out.push(0xC2);
            out.extend_from_slice(&v.to_le_bytes());
            return;
        }
    }
    write_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// `s` as an integer if it is one written the way Redis writes it (no sign on 0, no
/// leading zeros or `+`), at most 11 bytes.
fn canonical_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 11 {
        return None;
    }
    let i: i64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    (i.to_string().as_bytes() == s).then_some(i)
}

/// The value's type byte and encoding.
pub fn write_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::String(s) => {
            out.push(TYPE_STRING);
            write_string(out, s);
        }
        Value::Hash(fields) => {
            header(out, TYPE_HASH, fields.len());
            for (f, x) in fields {
                write_string(out, f);
                write_string(out, x);
            }
        }
        Value::List(items) => {
            let mut nodes = Vec::new();
            let mut node = Listpack::new();
            for it in items {
                if node.count > 0 && node.b.len() + it.len() + 16 > NODE_BYTES {
                    nodes.push(std::mem::replace(&mut node, Listpack::new()).finish());
                }
                node.push(it);
            }
            if node.count > 0 {
                nodes.push(node.finish());
            }
            header(out, TYPE_LIST_QUICKLIST_2, nodes.len());
            for lp in nodes {
                write_len(out, NODE_PACKED);
                write_len(out, lp.len() as u64);
                out.extend_from_slice(&lp);
            }
        }
        Value::Set(members) => {
            header(out, TYPE_SET, members.len());
            for m in members {
                write_string(out, m);
            }
        }
        Value::ZSet(members) => {
            header(out, TYPE_ZSET_2, members.len());
            for (m, score) in members {
                write_string(out, m);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
    }
}

/// A collection's type byte and its count (of fields, members or quicklist nodes).
fn header(out: &mut Vec<u8>, ty: u8, n: usize) {
    out.push(ty);
    write_len(out, n as u64);
}

/// A listpack being written (listpack.c's layout: a 4-byte total size, a 2-byte count,
/// the entries, 0xFF), each entry in the smallest encoding Redis's `lpAppend` picks.
struct Listpack {
    b: Vec<u8>,
    count: usize,
}

impl Listpack {
    fn new() -> Listpack {
        Listpack { b: vec![0; 6], count: 0 }
    }

    /// Append `s`: as an integer when it is a canonical decimal of an `i64` (7-bit
    /// unsigned, 13-bit, 16, 24, 32 or 64-bit signed), else a string with a 6-bit, 12-bit
    /// or 32-bit length; then the back-length ([`backlen_size`]).
    fn push(&mut self, s: &[u8]) {
        let b = &mut self.b;
        let start = b.len();
        let int =
            std::str::from_utf8(s).ok().and_then(|t| t.parse::<i64>().ok()).filter(|i| i.to_string().as_bytes() == s);
        match int {
            Some(v @ 0..=127) => b.push(v as u8),
            Some(v @ -4096..=4095) => {
                let u = (v as u16) & 0x1FFF;
                b.extend_from_slice(&[0xC0 | (u >> 8) as u8, u as u8]);
            }
            Some(v) if i16::try_from(v).is_ok() => {
                b.push(0xF1);
                b.extend_from_slice(&(v as i16).to_le_bytes());
            }
            Some(v @ -8_388_608..=8_388_607) => {
                b.push(0xF2);
                b.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            Some(v) if i32::try_from(v).is_ok() => {
                b.push(0xF3);
                b.extend_from_slice(&(v as i32).to_le_bytes());
            }
            Some(v) => {
                b.push(0xF4);
                b.extend_from_slice(&v.to_le_bytes());
            }
            None if s.len() < 64 => b.push(0x80 | s.len() as u8),
            None if s.len() < 4096 => b.extend_from_slice(&[0xE0 | (s.len() >> 8) as u8, s.len() as u8]),
            None => {
                b.push(0xF0);
                b.extend_from_slice(&(s.len() as u32).to_le_bytes());
            }
        }
        if int.is_none() {
            b.extend_from_slice(s);
        }
        // The back-length: the entry's size in 7-bit groups, most significant first,
        // the high bit set on all but the first (read from the end, it says where the
        // entry starts).
        let size = b.len() - start;
        let n = backlen_size(size);
        for i in (0..n).rev() {
            let group = ((size >> (7 * i)) & 127) as u8;
            b.push(if i + 1 == n { group } else { group | 128 });
        }
        self.count += 1;
    }

    /// The listpack's bytes: its size and count (65535: more, "unknown" to Redis) filled in.
    fn finish(mut self) -> Vec<u8> {
        self.b.push(0xFF);
        let total = self.b.len() as u32;
        self.b[..4].copy_from_slice(&total.to_le_bytes());
        let count = u16::try_from(self.count).unwrap_or(u16::MAX);
        self.b[4..6].copy_from_slice(&count.to_le_bytes());
        self.b
    }
}

/// How many bytes a listpack entry of `size` bytes (encoding and data) has for its
/// back-length: one per 7 bits (listpack.c's `lpEncodeBacklen` thresholds).
fn backlen_size(size: usize) -> usize {
    match size {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// DUMP's payload: the value, then the RDB version (2 bytes LE) and the CRC-64 of all
/// before it (8 bytes LE).
pub fn dump(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_value(&mut out, v);
    with_footer(out)
}

/// A payload (DUMP's, FUNCTION DUMP's): `body`, the RDB version (2 bytes LE) and the
/// CRC-64 of all before it (8 bytes LE).
pub fn with_footer(mut body: Vec<u8>) -> Vec<u8> {
    body.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

/// A payload's body, once its footer (RDB version at most [`RDB_VERSION`], CRC-64)
/// was checked.
pub fn checked_body(p: &[u8]) -> Result<&[u8]> {
    if p.len() < 10 {
        return Err(Error::Checksum);
    }
    let (body, footer) = p.split_at(p.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..].try_into().expect("8 bytes"));
    if version > RDB_VERSION || crc != crc64(&p[..p.len() - 8]) {
        return Err(Error::Checksum);
    }
    Ok(body)
}

/// FUNCTION DUMP's body: each library's code after [`OP_FUNCTION2`].
pub fn write_functions<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for c in codes {
        out.push(OP_FUNCTION2);
        write_string(&mut out, c);
    }
    out
}

/// The libraries' code in a FUNCTION DUMP body (`Unsupported`: something else in it).
pub fn read_functions(body: &[u8]) -> Result<Vec<Vec<u8>>> {
    let mut r = Reader::new(body);
    let mut codes = Vec::new();
    while r.left() > 0 {
        match r.u8()? {
            OP_FUNCTION2 => codes.push(r.string()?),
            op => return Err(Error::Unsupported(op)),
        }
    }
    Ok(codes)
}

/// An RDB file's aux fields (name, value), in file order.
pub type Aux = Vec<(Vec<u8>, Vec<u8>)>;

/// An RDB file's keys, each with its database.
pub type Keys = Vec<(u64, Entry)>;

/// One key of an RDB file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: Vec<u8>,
    pub value: Value,
    /// Expiry time, ms since the epoch.
    pub expire_ms: Option<u64>,
}

/// A whole RDB file of database 0: header, `aux` fields, SELECTDB, RESIZEDB, the keys
/// (each with EXPIRETIME_MS when it has one), EOF and the CRC-64 of all before it.
pub fn write_file(aux: &[(&str, &str)], entries: &[Entry]) -> Vec<u8> {
    write_file_dbs(aux, &[], &[(0, entries)])
}

/// A whole RDB file of several databases (a primary's full sync): the function
/// libraries' code (FUNCTION2, where Redis 7.0 writes them: after the aux fields), then
/// per database with keys, its SELECTDB and RESIZEDB, then its keys.
pub fn write_file_dbs(aux: &[(&str, &str)], functions: &[Vec<u8>], dbs: &[(usize, &[Entry])]) -> Vec<u8> {
    let mut out = format!("REDIS{RDB_VERSION:04}").into_bytes();
    for (k, v) in aux {
        out.push(OP_AUX);
        write_string(&mut out, k.as_bytes());
        write_string(&mut out, v.as_bytes());
    }
    for code in functions {
        out.push(OP_FUNCTION2);
        write_string(&mut out, code);
    }
    for &(db, entries) in dbs {
        out.push(OP_SELECTDB);
        write_len(&mut out, db as u64);
        out.push(OP_RESIZEDB);
        write_len(&mut out, entries.len() as u64);
        write_len(&mut out, entries.iter().filter(|e| e.expire_ms.is_some()).count() as u64);
        for e in entries {
            if let Some(t) = e.expire_ms {
                out.push(OP_EXPIRETIME_MS);
                out.extend_from_slice(&t.to_le_bytes());
            }
            let mut v = Vec::new();
            write_value(&mut v, &e.value);
            out.push(v[0]);
            write_string(&mut out, &e.key);
            out.extend_from_slice(&v[1..]);
        }
    }
    out.push(OP_EOF);
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

// ---- reading ----

/// A cursor over bytes whose every read is bounds-checked.
pub struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

/// A length, or one of the special string encodings.
enum Len {
    Plain(u64),
    Int8,
    Int16,
    Int32,
    Lzf,
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Reader<'a> {
        Reader { b, pos: 0 }
    }

    /// Bytes read so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    fn left(&self) -> usize {
        self.b.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.left() {
            return Err(Error::Corrupt("a length past the end"));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("took N bytes"))
    }

    fn len_or_enc(&mut self) -> Result<Len> {
        let b = self.u8()?;
        Ok(match b >> 6 {
            0 => Len::Plain((b & 0x3F) as u64),
            1 => Len::Plain((((b & 0x3F) as u64) << 8) | self.u8()? as u64),
            2 => match b {
                0x80 => Len::Plain(u32::from_be_bytes(self.array()?) as u64),
                0x81 => Len::Plain(u64::from_be_bytes(self.array()?)),
                _ => return Err(Error::Corrupt("an unknown length encoding")),
            },
            _ => match b & 0x3F {
                0 => Len::Int8,
                1 => Len::Int16,
                2 => Len::Int32,
                3 => Len::Lzf,
                _ => return Err(Error::Corrupt("an unknown string encoding")),
            },
        })
    }

    /// A length (not a special encoding).
    pub fn length(&mut self) -> Result<u64> {
        match self.len_or_enc()? {
            Len::Plain(n) => Ok(n),
            _ => Err(Error::Corrupt("a string encoding where a length belongs")),
        }
    }

    /// A count of items that each take at least one byte: no more than the input left.
    fn count(&mut self) -> Result<usize> {
        let n = self.length()?;
        if n > self.left() as u64 {
            return Err(Error::Corrupt("more items than bytes left"));
        }
        Ok(n as usize)
    }

    /// A count, then that many strings times `per` (a hash counts its pairs).
    fn strings(&mut self, per: usize) -> Result<Vec<Vec<u8>>> {
        let n = self.count()?.saturating_mul(per);
        let mut out = Vec::with_capacity(n.min(self.left()));
        for _ in 0..n {
            out.push(self.string()?);
        }
        Ok(out)
    }

    /// A score as `RDB_TYPE_ZSET` writes it: a 1-byte length and the text, or 253 for
    /// NaN, 254 for +inf, 255 for -inf.
    fn text_score(&mut self) -> Result<f64> {
        match self.u8()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => text_score(self.take(n as usize)?),
        }
    }

    /// A string in any of its encodings.
    pub fn string(&mut self) -> Result<Vec<u8>> {
        Ok(match self.len_or_enc()? {
            Len::Plain(n) => {
                let n = usize::try_from(n).map_err(|_| Error::Corrupt("a string too long"))?;
                self.take(n)?.to_vec()
            }
            Len::Int8 => (self.u8()? as i8).to_string().into_bytes(),
            Len::Int16 => i16::from_le_bytes(self.array()?).to_string().into_bytes(),
            Len::Int32 => i32::from_le_bytes(self.array()?).to_string().into_bytes(),
            Len::Lzf => {
                let clen = self.length()?;
                let ulen = self.length()?;
                let clen = usize::try_from(clen).map_err(|_| Error::Corrupt("a string too long"))?;
                let data = self.take(clen)?;
                // LZF expands at most 264 bytes per 3 of input: a larger claim is a lie.
                if ulen as usize > MAX_STRING || ulen > (clen as u64) * 88 + 64 {
                    return Err(Error::Corrupt("an LZF string longer than its input can give"));
                }
                lzf_decompress(data, ulen as usize)?
            }
        })
    }
}

/// LZF decompression (liblzf's format, as Redis's lzf_d.c). Written here because the
/// `lzf` crate is deprecated; the format is a dozen lines: a control byte below 32 is a
/// run of `ctrl + 1` literal bytes, else a back reference of length `(ctrl >> 5) + 2`
/// (7 meaning a further length byte) at distance `((ctrl & 31) << 8 | next) + 1`.
fn lzf_decompress(input: &[u8], ulen: usize) -> Result<Vec<u8>> {
    let bad = Error::Corrupt("bad LZF data");
    let mut out = Vec::with_capacity(ulen);
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            if i + n > input.len() || out.len() + n > ulen {
                return Err(bad);
            }
            out.extend_from_slice(&input[i..i + n]);
            i += n;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += *input.get(i).ok_or(bad.clone())? as usize;
                i += 1;
            }
            n += 2;
            let back = ((ctrl & 0x1F) << 8) + *input.get(i).ok_or(bad.clone())? as usize + 1;
            i += 1;
            if back > out.len() || out.len() + n > ulen {
                return Err(bad);
            }
            let from = out.len() - back;
            for j in 0..n {
                // Byte by byte: a reference may overlap what it writes.
                out.push(out[from + j]);
            }
        }
    }
    if out.len() != ulen {
        return Err(bad);
    }
    Ok(out)
}

/// A value of RDB type `ty`.
pub fn read_value(r: &mut Reader, ty: u8) -> Result<Value> {
    read_object(r, ty)?.ok_or(Error::Corrupt("an empty collection"))
}

/// A value of RDB type `ty`; `None`: an empty collection, which Redis refuses in a
/// payload and skips in a file.
fn read_object(r: &mut Reader, ty: u8) -> Result<Option<Value>> {
    let v = match ty {
        TYPE_STRING => return Ok(Some(Value::String(r.string()?))),
        TYPE_HASH => Value::Hash(pairs(r.strings(2)?)?),
        TYPE_HASH_ZIPLIST => Value::Hash(pairs(ziplist(&r.string()?)?)?),
        TYPE_HASH_LISTPACK => Value::Hash(pairs(listpack(&r.string()?)?)?),
        TYPE_LIST => Value::List(r.strings(1)?),
        TYPE_LIST_ZIPLIST => Value::List(ziplist(&r.string()?)?),
        TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => Value::List(quicklist(r, ty == TYPE_LIST_QUICKLIST_2)?),
        TYPE_SET => Value::Set(r.strings(1)?),
        TYPE_SET_INTSET => Value::Set(intset(&r.string()?)?),
        TYPE_SET_LISTPACK => Value::Set(listpack(&r.string()?)?),
        TYPE_ZSET | TYPE_ZSET_2 => {
            let n = r.count()?;
            let mut members = Vec::with_capacity(n);
            for _ in 0..n {
                let m = r.string()?;
                let score = if ty == TYPE_ZSET_2 { f64::from_le_bytes(r.array()?) } else { r.text_score()? };
                members.push((m, score));
            }
            Value::ZSet(members)
        }
        TYPE_ZSET_ZIPLIST => Value::ZSet(scored(ziplist(&r.string()?)?)?),
        TYPE_ZSET_LISTPACK => Value::ZSet(scored(listpack(&r.string()?)?)?),
        // Streams, modules, zipmaps: not served.
        other => return Err(Error::Unsupported(other)),
    };
    accepted(v)
}

/// Collection `v` as Redis accepts one: no hash field or (sorted) set member twice, no
/// NaN score; `None` when empty.
fn accepted(v: Value) -> Result<Option<Value>> {
    let (empty, twice) = {
        let mut names: Vec<&[u8]> = match &v {
            Value::String(_) | Value::List(_) => Vec::new(),
            Value::Hash(f) => f.iter().map(|(n, _)| n.as_slice()).collect(),
            Value::Set(m) => m.iter().map(Vec::as_slice).collect(),
            Value::ZSet(m) => {
                if m.iter().any(|(_, s)| s.is_nan()) {
                    return Err(Error::Corrupt("a NaN score"));
                }
                m.iter().map(|(n, _)| n.as_slice()).collect()
            }
        };
        let empty = match &v {
            Value::List(l) => l.is_empty(),
            _ => names.is_empty(),
        };
        names.sort_unstable();
        (empty, names.windows(2).any(|w| w[0] == w[1]))
    };
    if twice {
        return Err(Error::Corrupt("a field or member twice"));
    }
    Ok((!empty).then_some(v))
}

/// Entries taken two by two (a field and its value, a member and its score).
fn pairs(items: Vec<Vec<u8>>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    if !items.len().is_multiple_of(2) {
        return Err(Error::Corrupt("an odd number of entries where pairs belong"));
    }
    let mut it = items.into_iter();
    let mut out = Vec::new();
    while let (Some(f), Some(v)) = (it.next(), it.next()) {
        out.push((f, v));
    }
    Ok(out)
}

/// A compact sorted set's entries (member, score as text or integer), as pairs.
fn scored(items: Vec<Vec<u8>>) -> Result<Vec<(Vec<u8>, f64)>> {
    pairs(items)?.into_iter().map(|(m, s)| Ok((m, text_score(&s)?))).collect()
}

/// A score written as text (`%.17g`, `inf`, `-inf`), as Redis's `strtod` reads it.
fn text_score(b: &[u8]) -> Result<f64> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .ok_or(Error::Corrupt("a score that is not a number"))
}

/// A list's quicklist: nodes, each a ziplist (`RDB_TYPE_LIST_QUICKLIST`) or, after its
/// container (`v2`: `RDB_TYPE_LIST_QUICKLIST_2`), a listpack or one plain element. An
/// empty node is refused, as Redis refuses it; a node with no entries is skipped.
fn quicklist(r: &mut Reader, v2: bool) -> Result<Vec<Vec<u8>>> {
    let nodes = r.count()?;
    let mut items = Vec::new();
    for _ in 0..nodes {
        let container = if v2 { r.length()? } else { NODE_PACKED };
        if container != NODE_PLAIN && container != NODE_PACKED {
            return Err(Error::Corrupt("an unknown quicklist container"));
        }
        let data = r.string()?;
        if data.is_empty() {
            return Err(Error::Corrupt("an empty quicklist node"));
        }
        match container {
            NODE_PLAIN => items.push(data),
            _ if v2 => items.extend(listpack(&data)?),
            _ => items.extend(ziplist(&data)?),
        }
    }
    Ok(items)
}

/// The members of an intset (intset.c): a 4-byte width (2, 4 or 8), a 4-byte count,
/// then the integers, little-endian.
fn intset(b: &[u8]) -> Result<Vec<Vec<u8>>> {
    let mut r = Reader::new(b);
    let width = u32::from_le_bytes(r.array()?) as usize;
    let n = u32::from_le_bytes(r.array()?) as usize;
    if !matches!(width, 2 | 4 | 8) || (n as u64) * (width as u64) != r.left() as u64 {
        return Err(Error::Corrupt("an intset whose length is not its size"));
    }
    let ints = r.take(r.left())?;
    Ok(ints
        .chunks_exact(width)
        .map(|c| {
            let v = match c.len() {
                2 => i16::from_le_bytes([c[0], c[1]]) as i64,
                4 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64,
                _ => i64::from_le_bytes(c.try_into().unwrap_or_default()),
            };
            v.to_string().into_bytes()
        })
        .collect())
}

/// The entries of a listpack (Redis ≥ 7.0's compact encoding): a 4-byte total length, a
/// 2-byte count, entries each followed by its back-length, and 0xFF.
fn listpack(b: &[u8]) -> Result<Vec<Vec<u8>>> {
    let bad = |w| Error::Corrupt(w);
    let mut r = Reader::new(b);
    let total = u32::from_le_bytes(r.array()?) as usize;
    if total != b.len() {
        return Err(bad("a listpack whose length is not its size"));
    }
    let _count = u16::from_le_bytes(r.array()?);
    let mut items = Vec::new();
    loop {
        let start = r.pos();
        let e = r.u8()?;
        let item = if e == 0xFF {
            break;
        } else if e & 0x80 == 0 {
            (e as i64).to_string().into_bytes()
        } else if e & 0xC0 == 0x80 {
            r.take((e & 0x3F) as usize)?.to_vec()
        } else if e & 0xE0 == 0xC0 {
            let v = (((e & 0x1F) as i64) << 8) | r.u8()? as i64;
            signed(v, 13).to_string().into_bytes()
        } else if e & 0xF0 == 0xE0 {
            let n = (((e & 0x0F) as usize) << 8) | r.u8()? as usize;
            r.take(n)?.to_vec()
        } else {
            match e {
                0xF0 => {
                    let n = u32::from_le_bytes(r.array()?) as usize;
                    r.take(n)?.to_vec()
                }
                0xF1 => i16::from_le_bytes(r.array()?).to_string().into_bytes(),
                0xF2 => {
                    let [a, b2, c] = r.array()?;
                    signed(i64::from_le_bytes([a, b2, c, 0, 0, 0, 0, 0]), 24).to_string().into_bytes()
                }
                0xF3 => i32::from_le_bytes(r.array()?).to_string().into_bytes(),
                0xF4 => i64::from_le_bytes(r.array()?).to_string().into_bytes(),
                _ => return Err(bad("an unknown listpack entry encoding")),
            }
        };
        // The back-length: the entry's size in 7-bit groups, most significant first.
        r.take(backlen_size(r.pos() - start))?;
        items.push(item);
    }
    if r.left() != 0 {
        return Err(bad("bytes after a listpack's end"));
    }
    Ok(items)
}

/// `v`, `bits` wide, as two's complement.
fn signed(v: i64, bits: u32) -> i64 {
    if v >= 1 << (bits - 1) {
        v - (1 << bits)
    } else {
        v
    }
}

/// The entries of a ziplist (RDB 7–9's compact encoding): 4-byte size, 4-byte tail
/// offset, 2-byte count, entries (previous length, encoding, data), 0xFF.
fn ziplist(b: &[u8]) -> Result<Vec<Vec<u8>>> {
    let bad = |w| Error::Corrupt(w);
    let mut r = Reader::new(b);
    let total = u32::from_le_bytes(r.array()?) as usize;
    if total != b.len() {
        return Err(bad("a ziplist whose length is not its size"));
    }
    let _tail = r.array::<4>()?;
    let _count = r.array::<2>()?;
    let mut items = Vec::new();
    loop {
        let prev = r.u8()?;
        if prev == 0xFF {
            break;
        }
        if prev == 0xFE {
            r.take(4)?;
        }
        let e = r.u8()?;
        let item = match e >> 6 {
            0 => r.take((e & 0x3F) as usize)?.to_vec(),
            1 => {
                let n = (((e & 0x3F) as usize) << 8) | r.u8()? as usize;
                r.take(n)?.to_vec()
            }
            2 => {
                let n = u32::from_be_bytes(r.array()?) as usize;
                r.take(n)?.to_vec()
            }
            _ => match e {
                0xC0 => i16::from_le_bytes(r.array()?) as i64,
                0xD0 => i32::from_le_bytes(r.array()?) as i64,
                0xE0 => i64::from_le_bytes(r.array()?),
                0xF0 => {
                    let [a, b2, c] = r.array()?;
                    signed(i64::from_le_bytes([a, b2, c, 0, 0, 0, 0, 0]), 24)
                }
                0xFE => r.u8()? as i8 as i64,
                0xF1..=0xFD => (e & 0x0F) as i64 - 1,
                _ => return Err(bad("an unknown ziplist entry encoding")),
            }
            .to_string()
            .into_bytes(),
        };
        items.push(item);
    }
    if r.left() != 0 {
        return Err(bad("bytes after a ziplist's end"));
    }
    Ok(items)
}

/// A DUMP payload's value, after its footer (RDB version at most [`RDB_VERSION`],
/// CRC-64) was checked.
pub fn undump(p: &[u8]) -> Result<Value> {
    let mut r = Reader::new(checked_body(p)?);
    let ty = r.u8()?;
    read_value(&mut r, ty)
}

/// A whole RDB file: its aux fields and the keys of every database, each with its
/// database's number (SELECTDB's), skipping what pmkv keeps nothing of (LRU idle times,
/// LFU frequencies, module aux data is refused, functions are refused).
pub fn read_file(b: &[u8]) -> Result<(Aux, Keys)> {
    read_file_with_functions(b).map(|(aux, entries, _)| (aux, entries))
}

/// [`read_file`], and the function libraries' code the file carries (a Redis 7 full
/// sync's RDB has them).
pub fn read_file_with_functions(b: &[u8]) -> Result<(Aux, Keys, Vec<Vec<u8>>)> {
    if b.len() < 9 || &b[..5] != b"REDIS" {
        return Err(Error::Corrupt("not an RDB file"));
    }
    let version: u16 =
        std::str::from_utf8(&b[5..9]).ok().and_then(|v| v.parse().ok()).ok_or(Error::Corrupt("not an RDB file"))?;
    if version > RDB_VERSION {
        return Err(Error::Checksum);
    }
    let mut r = Reader::new(b);
    r.take(9)?;
    let (mut aux, mut entries, mut functions) = (Vec::new(), Vec::new(), Vec::new());
    let (mut expire, mut db) = (None, 0);
    loop {
        let op = r.u8()?;
        match op {
            OP_EOF => break,
            OP_AUX => aux.push((r.string()?, r.string()?)),
            OP_SELECTDB => db = r.length()?,
            OP_RESIZEDB => {
                r.length()?;
                r.length()?;
            }
            OP_EXPIRETIME_MS => expire = Some(u64::from_le_bytes(r.array()?)),
            OP_EXPIRETIME => expire = Some(u32::from_le_bytes(r.array()?) as u64 * 1000),
            OP_IDLE => {
                r.length()?;
            }
            OP_FREQ => {
                r.u8()?;
            }
            OP_FUNCTION2 => functions.push(r.string()?),
            OP_MODULE_AUX => return Err(Error::Unsupported(op)),
            ty => {
                let key = r.string()?;
                let expire_ms = expire.take();
                // An empty collection is skipped, as Redis skips it loading a file.
                if let Some(value) = read_object(&mut r, ty)? {
                    entries.push((db, Entry { key, value, expire_ms }));
                }
            }
        }
    }
    // Version 5 on: a CRC-64 of all before it (0: the writer had checksums off).
    if version >= 5 {
        let end = r.pos();
        let crc = u64::from_le_bytes(r.array()?);
        if crc != 0 && crc != crc64(&b[..end]) {
            return Err(Error::Checksum);
        }
    }
    Ok((aux, entries, functions))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_redis_crc64_jones() {
        // The check value in Redis's crc64.c.
        assert_eq!(crc64(b"123456789"), 0xe9c6d914c4b8d9ca);
    }

    #[test]
    fn lengths_and_integer_strings_round_trip() {
        for n in [0u64, 63, 64, 16383, 16384, u32::MAX as u64, u32::MAX as u64 + 1] {
            let mut b = Vec::new();
            write_len(&mut b, n);
            assert_eq!(Reader::new(&b).length().unwrap(), n);
        }
        for s in ["0", "-1", "127", "-128", "128", "32767", "-32768", "65536", "2147483647", "-2147483648"] {
            let mut b = Vec::new();
            write_string(&mut b, s.as_bytes());
            assert!(b[0] >= 0xC0, "{s} is int-encoded");
            assert_eq!(Reader::new(&b).string().unwrap(), s.as_bytes());
        }
        for s in ["", "01", "+1", "-0", "2147483648", "1.5", "abc", "99999999999"] {
            let mut b = Vec::new();
            write_string(&mut b, s.as_bytes());
            assert!(b[0] < 0xC0, "{s} is not int-encoded");
            assert_eq!(Reader::new(&b).string().unwrap(), s.as_bytes());
        }
    }

    #[test]
    fn lzf_decodes_literals_and_overlapping_back_references() {
        // "abc" literal, then a back reference of 9 at distance 3: "abcabcabcabc".
        let data = [2, b'a', b'b', b'c', 7 << 5, 0, 2];
        assert_eq!(lzf_decompress(&data, 12).unwrap(), b"abcabcabcabc");
        assert!(lzf_decompress(&data, 11).is_err());
        assert!(lzf_decompress(&[(1 << 5), 5], 3).is_err(), "a reference before the start");
        assert!(lzf_decompress(&[5, b'a'], 6).is_err(), "a literal past the end");
    }

    #[test]
    fn corrupt_payloads_are_errors_never_panics() {
        let good = dump(&Value::Hash(vec![(b"f".to_vec(), b"v".to_vec()), (b"g".to_vec(), b"12".to_vec())]));
        assert!(undump(&good).is_ok());
        // Every truncation and every single-byte change fails (checksum), without panic.
        for n in 0..good.len() {
            assert!(undump(&good[..n]).is_err());
            let mut b = good.clone();
            b[n] ^= 0x41;
            assert!(undump(&b).is_err(), "byte {n} changed");
        }
        // Bodies with a valid footer but nonsense inside: errors too.
        let mut pcg = 0x853c49e6748fea9bu64;
        for _ in 0..20000 {
            let len = (pcg >> 59) as usize + 1;
            let mut body = Vec::new();
            for _ in 0..len {
                pcg = pcg.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                body.push((pcg >> 33) as u8);
            }
            const TYPES: [u8; 15] = [
                TYPE_STRING,
                TYPE_LIST,
                TYPE_SET,
                TYPE_ZSET,
                TYPE_HASH,
                TYPE_ZSET_2,
                TYPE_LIST_ZIPLIST,
                TYPE_SET_INTSET,
                TYPE_ZSET_ZIPLIST,
                TYPE_HASH_ZIPLIST,
                TYPE_LIST_QUICKLIST,
                TYPE_HASH_LISTPACK,
                TYPE_ZSET_LISTPACK,
                TYPE_LIST_QUICKLIST_2,
                TYPE_SET_LISTPACK,
            ];
            body[0] = TYPES[(pcg >> 40) as usize % TYPES.len()];
            body.extend_from_slice(&RDB_VERSION.to_le_bytes());
            let crc = crc64(&body);
            body.extend_from_slice(&crc.to_le_bytes());
            let _ = undump(&body);
        }
    }

    /// A ziplist of `items` (RDB 7–9's compact form), as ziplist.c lays one out: short
    /// strings and 16-bit integers are enough to exercise the reader.
    fn ziplist_of(items: &[&[u8]]) -> Vec<u8> {
        let mut b = vec![0; 10];
        let mut prev = 0u8;
        for it in items {
            let start = b.len();
            b.push(prev);
            match std::str::from_utf8(it).ok().and_then(|t| t.parse::<i16>().ok()) {
                Some(v) if v.to_string().as_bytes() == *it => {
                    b.push(0xC0);
                    b.extend_from_slice(&v.to_le_bytes());
                }
                _ => {
                    b.push(it.len() as u8);
                    b.extend_from_slice(it);
                }
            }
            prev = (b.len() - start) as u8;
        }
        b.push(0xFF);
        let total = b.len() as u32;
        b[..4].copy_from_slice(&total.to_le_bytes());
        b[8..10].copy_from_slice(&(items.len() as u16).to_le_bytes());
        b
    }

    fn listpack_of(items: &[&[u8]]) -> Vec<u8> {
        let mut lp = Listpack::new();
        for it in items {
            lp.push(it);
        }
        lp.finish()
    }

    /// A payload of type `ty` whose body is `body`.
    fn payload(ty: u8, body: &[u8]) -> Vec<u8> {
        with_footer([&[ty], body].concat())
    }

    fn raw_string(b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write_len(&mut out, b.len() as u64);
        out.extend_from_slice(b);
        out
    }

    fn strs(items: &[&str]) -> Vec<Vec<u8>> {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn listpack_entries_are_encoded_as_redis_encodes_them() {
        // Entry bytes then back-length, per listpack.c: 7-bit uint, 13-bit, 16/24/32/64-bit
        // ints, 6-bit and 12-bit and 32-bit string lengths.
        let cases: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (b"0".to_vec(), vec![0x00, 1]),
            (b"127".to_vec(), vec![0x7F, 1]),
            (b"-1".to_vec(), vec![0xDF, 0xFF, 2]),
            (b"4095".to_vec(), vec![0xCF, 0xFF, 2]),
            (b"-4096".to_vec(), vec![0xD0, 0x00, 2]),
            (b"4096".to_vec(), vec![0xF1, 0x00, 0x10, 3]),
            (b"-32769".to_vec(), vec![0xF2, 0xFF, 0x7F, 0xFF, 4]),
            (b"8388608".to_vec(), vec![0xF3, 0x00, 0x00, 0x80, 0x00, 5]),
            (b"-9223372036854775808".to_vec(), [vec![0xF4], i64::MIN.to_le_bytes().to_vec(), vec![9]].concat()),
            (b"a".to_vec(), vec![0x81, b'a', 2]),
            (b"007".to_vec(), vec![0x83, b'0', b'0', b'7', 4]),
            (b"".to_vec(), vec![0x80, 1]),
        ];
        for (s, want) in &cases {
            let lp = listpack_of(&[s]);
            assert_eq!(&lp[6..lp.len() - 1], &want[..], "{}", String::from_utf8_lossy(s));
            assert_eq!(listpack(&lp).unwrap(), vec![s.clone()]);
        }
        // 12-bit string length and a 2-byte back-length (an entry of 202 bytes).
        let s = vec![b'x'; 200];
        let lp = listpack_of(&[&s]);
        assert_eq!(&lp[6..8], &[0xE0, 200]);
        assert_eq!(&lp[lp.len() - 3..lp.len() - 1], &[202 >> 7, (202 & 127) | 128]);
        // 32-bit string length (still a 2-byte back-length: 5005 < 16383, 5005 = 39 << 7 | 13).
        let s = vec![b'y'; 5000];
        let lp = listpack_of(&[&s]);
        assert_eq!(&lp[6..11], &[0xF0, 0x88, 0x13, 0, 0]);
        assert_eq!(&lp[lp.len() - 3..lp.len() - 1], &[39, 13 | 128]);
        assert_eq!(listpack(&lp).unwrap(), vec![s]);
        // A 3-byte back-length: 20005 bytes, high group first without its top bit.
        let s = vec![b'z'; 20000];
        let lp = listpack_of(&[&s]);
        let size = 20005usize;
        let want = [(size >> 14) as u8, ((size >> 7) & 127) as u8 | 128, (size & 127) as u8 | 128];
        assert_eq!(&lp[lp.len() - 4..lp.len() - 1], &want);
        assert_eq!(listpack(&lp).unwrap(), vec![s]);
        // Header: total size, count.
        let lp = listpack_of(&[b"a", b"1"]);
        assert_eq!(u32::from_le_bytes(lp[..4].try_into().unwrap()) as usize, lp.len());
        assert_eq!(&lp[4..6], &[2, 0]);
        assert_eq!(*lp.last().unwrap(), 0xFF);
    }

    #[test]
    fn lists_sets_and_zsets_round_trip() {
        let mut big: Vec<Vec<u8>> = (0..3000i64).map(|i| (i * i * 7919 - 5_000_000).to_string().into_bytes()).collect();
        big.extend((0..300).map(|i| vec![i as u8; i * 17 % 5000]));
        big.push(vec![0, 255, 13, 10]);
        big.push(i64::MAX.to_string().into_bytes());
        big.push(b"-0".to_vec());
        let values = [
            Value::List(strs(&["a", "1", "a", "-77", ""])),
            Value::List(big.clone()),
            Value::Set(strs(&["1", "2", "300000", "-5"])),
            Value::Set(big.iter().take(3000).cloned().chain([b"x".to_vec()]).collect()),
            Value::ZSet(vec![
                (b"a".to_vec(), f64::NEG_INFINITY),
                (b"b".to_vec(), -2.5),
                (vec![0, 1, 2], 0.0),
                (b"12".to_vec(), 1e300),
                (b"z".to_vec(), f64::INFINITY),
            ]),
        ];
        for v in &values {
            let p = dump(v);
            assert_eq!(&undump(&p).unwrap(), v);
        }
        // The big list is written in several listpack nodes of at most 8 KiB.
        let p = dump(&values[1]);
        assert_eq!(p[0], TYPE_LIST_QUICKLIST_2);
        let mut r = Reader::new(&p[1..]);
        let nodes = r.length().unwrap();
        assert!(nodes > 10, "{nodes} nodes");
        for _ in 0..nodes {
            assert_eq!(r.length().unwrap(), NODE_PACKED);
            assert!(r.string().unwrap().len() <= NODE_BYTES + 5100);
        }
    }

    #[test]
    fn every_older_form_redis_writes_is_read() {
        let items: &[&[u8]] = &[b"a", b"12", b"-3", b"bcd"];
        let want = Value::List(strs(&["a", "12", "-3", "bcd"]));
        // RDB_TYPE_LIST: a count and strings.
        let mut body = Vec::new();
        write_len(&mut body, 4);
        for it in items {
            write_string(&mut body, it);
        }
        assert_eq!(undump(&payload(TYPE_LIST, &body)).unwrap(), want);
        // RDB_TYPE_LIST_ZIPLIST: one ziplist.
        assert_eq!(undump(&payload(TYPE_LIST_ZIPLIST, &raw_string(&ziplist_of(items)))).unwrap(), want);
        // RDB_TYPE_LIST_QUICKLIST: ziplist nodes (one with no entries: skipped).
        let mut body = Vec::new();
        write_len(&mut body, 3);
        body.extend(raw_string(&ziplist_of(&items[..1])));
        body.extend(raw_string(&ziplist_of(&[])));
        body.extend(raw_string(&ziplist_of(&items[1..])));
        assert_eq!(undump(&payload(TYPE_LIST_QUICKLIST, &body)).unwrap(), want);
        // RDB_TYPE_LIST_QUICKLIST_2 with a plain node between listpack nodes.
        let mut body = Vec::new();
        write_len(&mut body, 3);
        for (c, data) in [
            (NODE_PACKED, listpack_of(&items[..2])),
            (NODE_PLAIN, b"-3".to_vec()),
            (NODE_PACKED, listpack_of(&items[3..])),
        ] {
            write_len(&mut body, c);
            body.extend(raw_string(&data));
        }
        assert_eq!(undump(&payload(TYPE_LIST_QUICKLIST_2, &body)).unwrap(), want);
        // Sets: an intset of each width, a listpack.
        for (width, ints) in [(2u32, vec![-3i64, 7]), (4, vec![-70000, 1]), (8, vec![i64::MIN, 5_000_000_000])] {
            let mut b = width.to_le_bytes().to_vec();
            b.extend_from_slice(&(ints.len() as u32).to_le_bytes());
            for i in &ints {
                b.extend_from_slice(&i.to_le_bytes()[..width as usize]);
            }
            let want = Value::Set(ints.iter().map(|i| i.to_string().into_bytes()).collect());
            assert_eq!(undump(&payload(TYPE_SET_INTSET, &raw_string(&b))).unwrap(), want);
        }
        let want = Value::Set(strs(&["a", "12", "-3", "bcd"]));
        assert_eq!(undump(&payload(TYPE_SET_LISTPACK, &raw_string(&listpack_of(items)))).unwrap(), want);
        // Sorted sets: text scores (RDB_TYPE_ZSET), a ziplist, a listpack.
        let mut body = Vec::new();
        write_len(&mut body, 4);
        for (m, s) in
            [(&b"a"[..], &[3, b'1', b'.', b'5'][..]), (b"b", &[255]), (b"c", &[254]), (b"d", &[2, b'-', b'2'])]
        {
            write_string(&mut body, m);
            body.extend_from_slice(s);
        }
        let want = Value::ZSet(vec![
            (b"a".to_vec(), 1.5),
            (b"b".to_vec(), f64::NEG_INFINITY),
            (b"c".to_vec(), f64::INFINITY),
            (b"d".to_vec(), -2.0),
        ]);
        assert_eq!(undump(&payload(TYPE_ZSET, &body)).unwrap(), want);
        let pairs: &[&[u8]] = &[b"a", b"1.5", b"b", b"-inf", b"c", b"inf", b"d", b"-2"];
        assert_eq!(undump(&payload(TYPE_ZSET_ZIPLIST, &raw_string(&ziplist_of(pairs)))).unwrap(), want);
        assert_eq!(undump(&payload(TYPE_ZSET_LISTPACK, &raw_string(&listpack_of(pairs)))).unwrap(), want);
    }

    #[test]
    fn what_redis_refuses_is_refused() {
        let set = |ms: &[&[u8]]| {
            let mut b = Vec::new();
            write_len(&mut b, ms.len() as u64);
            for m in ms {
                write_string(&mut b, m);
            }
            b
        };
        let bad = |p: Vec<u8>| assert!(matches!(undump(&p), Err(Error::Corrupt(_))), "{p:?}");
        bad(payload(TYPE_SET, &set(&[b"a", b"b", b"a"])));
        bad(payload(TYPE_SET, &set(&[])));
        bad(payload(TYPE_LIST, &set(&[])));
        bad(payload(TYPE_HASH, &set(&[])));
        bad(payload(TYPE_SET_LISTPACK, &raw_string(&listpack_of(&[b"1", b"x", b"1"]))));
        bad(payload(TYPE_SET_INTSET, &raw_string(&[2, 0, 0, 0, 0, 0, 0, 0])));
        bad(payload(TYPE_SET_INTSET, &raw_string(&[3, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0])));
        bad(payload(TYPE_SET_INTSET, &raw_string(&[2, 0, 0, 0, 2, 0, 0, 0, 7, 0])));
        bad(payload(TYPE_LIST_QUICKLIST_2, &[0]));
        bad(payload(TYPE_LIST_QUICKLIST_2, &[1, 2, 0]));
        bad(payload(TYPE_LIST_QUICKLIST_2, &[1, 3, 1, b'x']));
        bad(payload(TYPE_LIST_ZIPLIST, &raw_string(&ziplist_of(&[]))));
        let zset2 = |ms: &[(&[u8], f64)]| {
            let mut b = Vec::new();
            write_len(&mut b, ms.len() as u64);
            for (m, s) in ms {
                write_string(&mut b, m);
                b.extend_from_slice(&s.to_le_bytes());
            }
            payload(TYPE_ZSET_2, &b)
        };
        assert!(undump(&zset2(&[(b"a", 1.0), (b"b", 1.0)])).is_ok());
        bad(zset2(&[(b"a", 1.0), (b"a", 2.0)]));
        bad(zset2(&[(b"a", f64::NAN)]));
        bad(zset2(&[]));
        bad(payload(TYPE_ZSET, &[1, 0x81, b'a', 253]));
        bad(payload(TYPE_ZSET, &[1, 0x81, b'a', 2, b'x', b'y']));
        bad(payload(TYPE_ZSET_LISTPACK, &raw_string(&listpack_of(&[b"a", b"1", b"b"]))));
        bad(payload(TYPE_ZSET_LISTPACK, &raw_string(&listpack_of(&[b"a", b"nan"]))));
        // In a file an empty collection is skipped, as Redis skips it, not refused.
        let f = write_file(
            &[],
            &[
                Entry { key: b"e".to_vec(), value: Value::Set(Vec::new()), expire_ms: Some(5) },
                Entry { key: b"s".to_vec(), value: Value::Set(strs(&["m"])), expire_ms: None },
            ],
        );
        let (_, back) = read_file(&f).unwrap();
        assert_eq!(back, vec![(0, Entry { key: b"s".to_vec(), value: Value::Set(strs(&["m"])), expire_ms: None })]);
    }

    #[test]
    fn mutated_compact_payloads_are_errors_never_panics() {
        let lp: &[&[u8]] = &[b"a", b"1", b"b", b"-2", b"c", b"300000", b"dddddddddddddddddd", b"2.5"];
        let mut ints = 2u32.to_le_bytes().to_vec();
        ints.extend_from_slice(&3u32.to_le_bytes());
        ints.extend_from_slice(&[1, 0, 2, 0, 3, 0]);
        let mut ql = vec![2];
        ql.extend(raw_string(&ziplist_of(&lp[..4])));
        ql.extend(raw_string(&ziplist_of(&lp[4..])));
        let seeds = [
            dump(&Value::List(lp.iter().map(|x| x.to_vec()).collect())),
            dump(&Value::ZSet(vec![(b"m".to_vec(), 1.5), (b"n".to_vec(), -3.0)])),
            dump(&Value::Set(strs(&["a", "17"]))),
            payload(TYPE_ZSET_LISTPACK, &raw_string(&listpack_of(lp))),
            payload(TYPE_ZSET_ZIPLIST, &raw_string(&ziplist_of(lp))),
            payload(TYPE_LIST_ZIPLIST, &raw_string(&ziplist_of(lp))),
            payload(TYPE_LIST_QUICKLIST, &ql),
            payload(TYPE_SET_INTSET, &raw_string(&ints)),
            payload(TYPE_SET_LISTPACK, &raw_string(&listpack_of(lp))),
        ];
        let mut pcg = 0x2545f4914f6cdd1du64;
        for seed in &seeds {
            assert!(undump(seed).is_ok());
            let body = &seed[..seed.len() - 10];
            for _ in 0..3000 {
                let mut b = body.to_vec();
                for _ in 0..1 + (pcg >> 62) {
                    pcg = pcg.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let at = 1 + (pcg >> 33) as usize % (b.len() - 1);
                    b[at] = (pcg >> 13) as u8;
                }
                if pcg & 1 == 1 {
                    b.truncate(1 + (pcg >> 20) as usize % b.len());
                }
                let _ = undump(&with_footer(b));
            }
        }
    }

    #[test]
    fn files_round_trip_with_expiry_and_aux_fields() {
        let entries = vec![
            Entry { key: b"s".to_vec(), value: Value::String(b"v".to_vec()), expire_ms: None },
            Entry { key: b"n".to_vec(), value: Value::String(b"-77".to_vec()), expire_ms: Some(4_000_000_000_123) },
            Entry {
                key: b"h".to_vec(),
                value: Value::Hash(vec![(b"a".to_vec(), vec![0, 255, 13, 10])]),
                expire_ms: Some(1),
            },
        ];
        let f = write_file(&[("redis-ver", "7.0.15"), ("redis-bits", "64")], &entries);
        let (aux, back) = read_file(&f).unwrap();
        assert_eq!(aux[0], (b"redis-ver".to_vec(), b"7.0.15".to_vec()));
        assert_eq!(aux[1], (b"redis-bits".to_vec(), b"64".to_vec()));
        assert_eq!(back, entries.into_iter().map(|e| (0, e)).collect::<Vec<_>>());
        let mut bad = f.clone();
        bad[12] ^= 1;
        assert!(read_file(&bad).is_err());
    }
}
