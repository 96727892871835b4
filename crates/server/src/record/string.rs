//! Strings: the value under the key itself, and a meta record only while the key has an
//! expiry time — so a pool written by `pmkv put`, Python or C reads the same through
//! `pmkv serve`. The string commands are in [`crate::data`].

use super::DataType;
use super::Meta;

pub struct StringType;

impl DataType for StringType {
    fn name(&self) -> &'static str {
        "string"
    }
    fn code(&self) -> u8 {
        0
    }
    fn tag(&self) -> Option<u8> {
        None
    }
    /// A string carries a meta record only for its expiry time.
    fn sound(&self, m: &Meta) -> bool {
        m.expire_ms != 0 && m.count == 0
    }
}
