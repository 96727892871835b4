//! Hashes: one element record per field, `P 'h' len(k) k field → value`, in field order;
//! the meta record counts the fields. The hash commands are in [`crate::data`].

use super::DataType;
use crate::keyspace::Meta;

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
    /// A hash exists while it has a field.
    fn sound(&self, m: &Meta) -> bool {
        m.count > 0
    }
    fn describe(&self, suffix: &[u8]) -> String {
        format!("field {}", super::escape(suffix))
    }
}
