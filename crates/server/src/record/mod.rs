//! The server's records: how a key of each Redis type is laid out in the engine's one
//! ordered byte map (docs/format/server.md), and the [`DataType`] trait that says it once
//! per type. This is the lowest layer of the server's data model: it imports nothing of
//! the server but [`crate::resp`]'s score formatting (for `pmkv dump`); the keyspace
//! ([`crate::keyspace`]) works from it, and the types' commands ([`crate::types`]) sit
//! above both.
//!
//! What a [`DataType`] says, and what uses it:
//!
//! * **records** — a string is the record under its own key; any other type (a
//!   *collection*) is its meta record plus *element records* `P tag len(k) k suffix`
//!   ([`elem_prefix`]), one contiguous key range per key, so that deleting, renaming,
//!   copying, dumping or migrating a key is one walk over one range, whatever the type;
//! * **meta** — the 24-byte meta record ([`Meta`]: type code, expiry time, element count)
//!   and, for a type that needs one, an 8-byte word after it ([`DataType::aux`]): a
//!   list's head sequence number;
//! * **recovery** — [`DataType::sound`] says which meta records the type writes, so a
//!   damaged one is refused at start instead of served;
//! * **names** — TYPE and SCAN TYPE say [`DataType::name`]; `pmkv dump` names an element
//!   record with [`describe_record`].
//!
//! Adding a type is one submodule here (its records), one entry in [`TYPES`], its
//! commands in a module of [`crate::types`], their list in [`crate::table`], and its
//! section in docs/format/server.md. The design and what each operation costs:
//! docs/design/server-types.md.

pub(crate) mod hash;
pub(crate) mod list;
pub(crate) mod set;
pub(crate) mod string;
pub(crate) mod zrank;
pub(crate) mod zset;

/// The reserved prefix of the server's own records.
pub const PREFIX: &[u8] = b"\xffpmkv\x00";
/// The tag after [`PREFIX`] of a meta record.
pub(crate) const META: u8 = b'm';
/// The tag after [`PREFIX`] of the records of a database other than 0: DB `n`'s records
/// are DB 0's layout under `P 'd' n` (see [`db_prefix`]).
pub(crate) const DB: u8 = b'd';
/// How many databases `pmkv serve` has (Redis's default `databases` setting).
pub const DATABASES: usize = 16;
/// The record that maps SWAPDB's logical databases to the physical ones (`P 'D'`: 16
/// bytes, byte `i` the physical database logical DB `i` is; absent: the identity).
pub const DB_MAP_KEY: &[u8] = b"\xffpmkv\x00D";
/// The record holding every function library (`P 'F'`): FUNCTION DUMP's payload (Redis's
/// format, with its RDB version and CRC-64), rewritten whole by each FUNCTION LOAD,
/// DELETE, FLUSH and RESTORE; absent when there is none.
pub const FUNCTIONS_KEY: &[u8] = b"\xffpmkv\x00F";

/// The prefix every record of physical database `n` carries before its DB-0 record key:
/// nothing for DB 0, so that a pool written before databases existed opens with its keys
/// in DB 0 and every other front end (`pmkv get`, Python, C) sees DB 0's strings as plain
/// records; `P 'd' n` for the others, under [`PREFIX`], so that DB 0's walks (KEYS, SCAN,
/// DBSIZE) skip them as they skip every record of the server's own.
pub fn db_prefix(n: usize) -> Vec<u8> {
    if n == 0 {
        Vec::new()
    } else {
        [PREFIX, &[DB, n as u8]].concat()
    }
}

/// The meta record's key for user key `k`.
pub fn meta_key(k: &[u8]) -> Vec<u8> {
    [PREFIX, &[META], k].concat()
}

/// What the meta record of a key says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    /// Expiry time in ms since the epoch; 0: none.
    pub expire_ms: u64,
    /// A collection's element records (a hash's fields, a list's length); 0 for a string.
    pub count: u64,
    /// The type word, for a type that has one ([`DataType::aux`]): a list's
    /// head sequence number. 0 otherwise.
    pub aux: u64,
}

const META_VERSION: u8 = 1;
const META_LEN: usize = 24;

impl Meta {
    /// A new key's meta record: no expiry time, no elements yet.
    pub fn new(kind: Kind) -> Meta {
        Meta { kind, expire_ms: 0, count: 0, aux: 0 }
    }

    /// `[0]` version (1), `[1]` type code, `[2..8]` zero, `[8..16]` expiry time (ms since
    /// the epoch, little-endian, 0 none), `[16..24]` element count (LE); then, for a type
    /// with a type word, `[24..32]` that word (LE).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; META_LEN];
        b[0] = META_VERSION;
        b[1] = self.kind.code();
        b[8..16].copy_from_slice(&self.expire_ms.to_le_bytes());
        b[16..24].copy_from_slice(&self.count.to_le_bytes());
        if self.kind.0.aux() {
            b.extend_from_slice(&self.aux.to_le_bytes());
        }
        b
    }

    /// The meta record `b`, if it is one its type writes (anything else: `None`).
    pub fn decode(b: &[u8]) -> Option<Meta> {
        if b.len() < META_LEN || b[0] != META_VERSION || b[2..8] != [0; 6] {
            return None;
        }
        let kind = Kind::from_code(b[1])?;
        if b.len() != META_LEN + if kind.0.aux() { 8 } else { 0 } {
            return None;
        }
        let expire_ms = u64::from_le_bytes(b[8..16].try_into().ok()?);
        let count = u64::from_le_bytes(b[16..24].try_into().ok()?);
        let aux = b.get(24..32).map_or(0, |w| u64::from_le_bytes(w.try_into().unwrap_or_default()));
        let m = Meta { kind, expire_ms, count, aux };
        kind.0.sound(&m).then_some(m)
    }

    /// Whether the key's expiry time is at or before `now` (ms since the epoch).
    pub(crate) fn expired(&self, now: u64) -> bool {
        self.expire_ms != 0 && self.expire_ms <= now
    }
}

/// One Redis data type's records, as the keyspace sees them.
pub trait DataType: Sync {
    /// What TYPE answers and SCAN TYPE matches.
    fn name(&self) -> &'static str;
    /// Byte 1 of the meta record (docs/format/server.md); never reused.
    fn code(&self) -> u8;
    /// The tag byte of the element records (`None`: a string, stored under its own key).
    fn tag(&self) -> Option<u8>;
    /// Whether the meta record carries the 8-byte type word after its 24 bytes.
    fn aux(&self) -> bool {
        false
    }
    /// Whether `m` is a meta record this type writes (checked at start: recovery). By
    /// default: a collection exists while it has an element.
    fn sound(&self, m: &Meta) -> bool {
        m.count > 0
    }
    /// What one element is called (a hash's "field", a set's "member").
    fn element(&self) -> &'static str {
        "element"
    }
    /// A readable name of an element record's suffix (the part after the user key), for
    /// `pmkv dump`.
    fn describe(&self, suffix: &[u8]) -> String {
        format!("{} {}", self.element(), escape(suffix))
    }
}

/// A key's type: a handle on its [`DataType`] (two kinds are equal when their codes are).
#[derive(Clone, Copy)]
pub struct Kind(pub &'static dyn DataType);

impl Kind {
    pub const STRING: Kind = Kind(&string::StringType);
    pub const HASH: Kind = Kind(&hash::HashType);
    pub const LIST: Kind = Kind(&list::ListType);
    pub const SET: Kind = Kind(&set::SetType);
    pub const ZSET: Kind = Kind(&zset::ZSetType);

    pub fn name(self) -> &'static str {
        self.0.name()
    }

    pub fn code(self) -> u8 {
        self.0.code()
    }

    pub fn tag(self) -> Option<u8> {
        self.0.tag()
    }

    /// Whether a key of this type is a collection (no record under its own name).
    pub fn collection(self) -> bool {
        self.0.tag().is_some()
    }

    /// The type whose meta code is `code`.
    pub fn from_code(code: u8) -> Option<Kind> {
        TYPES.iter().copied().find(|k| k.code() == code)
    }

    /// The type whose element records carry `tag`.
    pub fn from_tag(tag: u8) -> Option<Kind> {
        TYPES.iter().copied().find(|k| k.tag() == Some(tag))
    }
}

impl PartialEq for Kind {
    fn eq(&self, o: &Kind) -> bool {
        self.code() == o.code()
    }
}

impl Eq for Kind {}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Bytes as text: printable ASCII as it is, anything else (and `\\`) as `\xNN`.
pub fn escape(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len());
    for &c in b {
        if (0x20..0x7f).contains(&c) && c != b'\\' {
            s.push(c as char);
        } else {
            s.push_str(&format!("\\x{c:02x}"));
        }
    }
    s
}

/// Every type the server knows.
pub const TYPES: &[Kind] = &[Kind::STRING, Kind::HASH, Kind::LIST, Kind::SET, Kind::ZSET];

/// The common prefix of collection `k`'s element records (type tag `tag`):
/// `P tag len(k) k`, `len(k)` 4 bytes big-endian, so that one key's elements are one
/// range and no key's elements run into another's.
pub fn elem_prefix(tag: u8, k: &[u8]) -> Vec<u8> {
    [PREFIX, &[tag], &(k.len() as u32).to_be_bytes(), k].concat()
}

/// Bytes an element record's key adds to the user key and the suffix.
pub const ELEM_OVERHEAD: usize = PREFIX.len() + 1 + 4;

/// For an element record key `rk`: its type, user key and suffix.
pub fn split_elem(rk: &[u8]) -> Option<(Kind, &[u8], &[u8])> {
    let rest = rk.strip_prefix(PREFIX)?;
    let (&tag, r) = rest.split_first()?;
    let kind = Kind::from_tag(tag)?;
    let n = u32::from_be_bytes(r.get(..4)?.try_into().ok()?) as usize;
    let user = r.get(4..4 + n)?;
    Some((kind, user, &r[4 + n..]))
}

/// What record key `rk` is, in words, when it is one of the server's own (`None`: a
/// string's value under its own key, or a key the server does not know): for
/// `pmkv dump`, so a server pool's internal records are never shown as user keys.
pub fn describe_record(rk: &[u8]) -> Option<String> {
    let rest = rk.strip_prefix(PREFIX)?;
    if let [DB, n, inner @ ..] = rest {
        let what = describe_record(inner).unwrap_or_else(|| format!("string {}", escape(inner)));
        return Some(format!("db {n}: {what}"));
    }
    if rest == b"D" {
        return Some("pmkv serve SWAPDB database map".into());
    }
    if let Some(k) = rest.strip_prefix(b"m") {
        return Some(format!("pmkv serve meta record of key {}", escape(k)));
    }
    if rest == b"C" {
        return Some("pmkv serve cluster state".into());
    }
    if rest == b"R" {
        return Some("pmkv serve replication state".into());
    }
    if rest == b"F" {
        return Some("pmkv serve function libraries".into());
    }
    let (kind, user, suffix) = split_elem(rk)?;
    Some(format!("pmkv serve {} {} of key {}", kind.name(), kind.0.describe(suffix), escape(user)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_tags_are_unique() {
        for (i, a) in TYPES.iter().enumerate() {
            for b in &TYPES[..i] {
                assert!(a.code() != b.code(), "{} and {} share a code", a.name(), b.name());
                assert!(a.tag().is_none() || a.tag() != b.tag(), "{} and {} share a tag", a.name(), b.name());
            }
            assert_eq!(Kind::from_code(a.code()), Some(*a));
        }
    }

    #[test]
    fn element_records_name_their_key() {
        let rk = [elem_prefix(b'h', b"user:1").as_slice(), b"name"].concat();
        let (kind, user, suffix) = split_elem(&rk).unwrap();
        assert_eq!((kind, user, suffix), (Kind::HASH, &b"user:1"[..], &b"name"[..]));
        assert_eq!(describe_record(&rk).unwrap(), "pmkv serve hash field name of key user:1");
        assert!(describe_record(b"plain").is_none());
        assert!(describe_record(&meta_key(b"q")).unwrap().contains("meta record of key q"));
        // "a" + field "bc" and "ab" + field "c" must not share a record key.
        let x = [elem_prefix(b'h', b"a").as_slice(), b"bc"].concat();
        let y = [elem_prefix(b'h', b"ab").as_slice(), b"c"].concat();
        assert_ne!(x, y);
        let in3 = [db_prefix(3).as_slice(), &meta_key(b"q")].concat();
        assert_eq!(describe_record(&in3).unwrap(), "db 3: pmkv serve meta record of key q");
        assert_eq!(describe_record(&[db_prefix(15).as_slice(), b"s"].concat()).unwrap(), "db 15: string s");
        assert!(db_prefix(0).is_empty());
        assert_eq!(describe_record(FUNCTIONS_KEY).unwrap(), "pmkv serve function libraries");
        assert_eq!(describe_record(b"\xffpmkv\x00R").unwrap(), "pmkv serve replication state");
    }
}
