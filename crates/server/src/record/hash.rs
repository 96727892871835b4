//! Hashes: one element record per field, `P 'h' len(k) k field → value`, in field order;
//! the meta record counts the fields. The hash commands are in [`crate::data`].

use super::DataType;

pub struct HashType;

/// The tag of a hash's field records.
pub const TAG: u8 = b'h';

impl DataType for HashType {
    fn name(&self) -> &'static str {
        "hash"
    }
    fn code(&self) -> u8 {
        1
    }
    fn tag(&self) -> Option<u8> {
        Some(TAG)
    }
    fn element(&self) -> &'static str {
        "field"
    }
}
