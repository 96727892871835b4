//! A list's records: element `i` (0 the head) of list `k` is `P 'l' len(k) k seq`, `seq`
//! the 8-byte big-endian number `head + i`; the meta record counts the elements and
//! carries `head` as its type word. The commands: [`crate::types::list`].

use super::{DataType, Meta};

pub struct ListType;

/// The tag of a list's element records.
pub const TAG: u8 = b'l';
/// A new list's head sequence number.
pub(crate) const MID: u64 = 1 << 63;

impl DataType for ListType {
    fn name(&self) -> &'static str {
        "list"
    }
    fn code(&self) -> u8 {
        2
    }
    fn tag(&self) -> Option<u8> {
        Some(TAG)
    }
    fn aux(&self) -> bool {
        true
    }
    /// A list exists while it has an element, and its sequence numbers fit in 64 bits.
    fn sound(&self, m: &Meta) -> bool {
        m.count > 0 && m.aux.checked_add(m.count).is_some()
    }
    fn describe(&self, suffix: &[u8]) -> String {
        match <[u8; 8]>::try_from(suffix) {
            Ok(seq) => format!("element seq {}", (u64::from_be_bytes(seq) as i128) - MID as i128),
            Err(_) => format!("malformed element {}", super::escape(suffix)),
        }
    }
}
