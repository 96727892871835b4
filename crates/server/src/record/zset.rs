//! A sorted set's records, two per member under the key's one element range
//! `P 'z' len(k) k`: the member record `… 0x00 member → enc(score)` and the score index
//! record `… 0x01 enc(score) member → ""` ([`enc`]). The commands: [`crate::types::zset`].

use super::{DataType, Meta};
use crate::resp::fmt_score;

pub struct ZSetType;

/// The tag of a sorted set's element records.
pub const TAG: u8 = b'z';
/// The byte after the key that starts a member record.
pub(crate) const MEMBER: u8 = 0;
/// The byte after the key that starts a score-index record.
pub(crate) const INDEX: u8 = 1;

impl DataType for ZSetType {
    fn name(&self) -> &'static str {
        "zset"
    }
    fn code(&self) -> u8 {
        4
    }
    fn tag(&self) -> Option<u8> {
        Some(TAG)
    }
    /// Two records per member: a count that is not even is a damaged meta record.
    fn sound(&self, m: &Meta) -> bool {
        m.count > 0 && m.count.is_multiple_of(2)
    }
    fn element(&self) -> &'static str {
        "member"
    }
    fn describe(&self, suffix: &[u8]) -> String {
        match suffix.split_first() {
            Some((&MEMBER, m)) => format!("member {}", super::escape(m)),
            Some((&INDEX, r)) if r.len() >= 8 => {
                format!("score index {} member {}", fmt_score(dec(&r[..8])), super::escape(&r[8..]))
            }
            _ => format!("record {}", super::escape(suffix)),
        }
    }
}

/// A score's 8-byte order encoding: big-endian, sign bit flipped for positive numbers
/// and all bits for negative ones, so that byte order is numeric order (−inf lowest,
/// +inf highest). Scores are never NaN, and −0 is stored as 0 (Redis treats them as one).
pub(crate) fn enc(s: f64) -> [u8; 8] {
    let b = (s + 0.0).to_bits();
    let b = if b >> 63 == 1 { !b } else { b | 1 << 63 };
    b.to_be_bytes()
}

/// The score whose encoding ([`enc`]) is the first 8 bytes of `e`.
pub(crate) fn dec(e: &[u8]) -> f64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&e[..8]);
    let b = u64::from_be_bytes(a);
    f64::from_bits(if b >> 63 == 1 { b & !(1 << 63) } else { !b })
}
