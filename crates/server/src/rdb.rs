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
pub const TYPE_HASH: u8 = 4;
pub const TYPE_HASH_ZIPLIST: u8 = 13;
pub const TYPE_HASH_LISTPACK: u8 = 16;

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    String(Vec<u8>),
    /// Fields in any order, each once.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
}

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
            out.push(TYPE_HASH);
            write_len(out, fields.len() as u64);
            for (f, x) in fields {
                write_string(out, f);
                write_string(out, x);
            }
        }
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
    match ty {
        TYPE_STRING => Ok(Value::String(r.string()?)),
        TYPE_HASH => {
            let n = r.count()?;
            let mut fields = Vec::with_capacity(n);
            for _ in 0..n {
                fields.push((r.string()?, r.string()?));
            }
            hash(fields)
        }
        TYPE_HASH_ZIPLIST => hash(pairs(ziplist(&r.string()?)?)?),
        TYPE_HASH_LISTPACK => hash(pairs(listpack(&r.string()?)?)?),
        // Lists, sets, sorted sets, streams, modules, zipmaps: not (yet) served.
        other => Err(Error::Unsupported(other)),
    }
}

/// A hash as Redis accepts one: not empty, no field twice.
fn hash(mut fields: Vec<(Vec<u8>, Vec<u8>)>) -> Result<Value> {
    if fields.is_empty() {
        return Err(Error::Corrupt("an empty hash"));
    }
    let mut names: Vec<&[u8]> = fields.iter().map(|(f, _)| f.as_slice()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::Corrupt("a hash field twice"));
    }
    fields.shrink_to_fit();
    Ok(Value::Hash(fields))
}

fn pairs(items: Vec<Vec<u8>>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    if !items.len().is_multiple_of(2) {
        return Err(Error::Corrupt("a hash with a field and no value"));
    }
    let mut it = items.into_iter();
    let mut out = Vec::new();
    while let (Some(f), Some(v)) = (it.next(), it.next()) {
        out.push((f, v));
    }
    Ok(out)
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
        let size = r.pos() - start;
        let backlen = match size {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2097150 => 3,
            2097151..=268435454 => 4,
            _ => 5,
        };
        r.take(backlen)?;
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
                let value = read_value(&mut r, ty)?;
                entries.push((db, Entry { key, value, expire_ms: expire.take() }));
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
            body[0] = [TYPE_STRING, TYPE_HASH, TYPE_HASH_ZIPLIST, TYPE_HASH_LISTPACK][(pcg >> 40) as usize % 4];
            body.extend_from_slice(&RDB_VERSION.to_le_bytes());
            let crc = crc64(&body);
            body.extend_from_slice(&crc.to_le_bytes());
            let _ = undump(&body);
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
