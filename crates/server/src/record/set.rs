//! A set's records: member `m` of set `k` is `P 's' len(k) k m → ""`; the meta record
//! counts the members. The commands: [`crate::types::set`].

use super::DataType;

pub struct SetType;

/// The tag of a set's member records.
pub const TAG: u8 = b's';

impl DataType for SetType {
    fn name(&self) -> &'static str {
        "set"
    }
    fn code(&self) -> u8 {
        3
    }
    fn tag(&self) -> Option<u8> {
        Some(TAG)
    }
    fn element(&self) -> &'static str {
        "member"
    }
}
