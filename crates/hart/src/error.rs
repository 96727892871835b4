//! HART's errors.

use pmkv_substrate::PoolError;

pub type Result<T> = std::result::Result<T, HartError>;

#[derive(Debug, thiserror::Error)]
pub enum HartError {
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error("key of {0} bytes is too large (limit {max})", max = crate::layout::MAX_KEY)]
    KeyTooLarge(usize),
    #[error("value of {0} bytes is too large (limit {max})", max = crate::layout::MAX_VALUE)]
    ValueTooLarge(usize),
    #[error("hash key length {0} is out of range (0..=7)")]
    BadHashKeyLen(usize),
    #[error("corrupt HART pool: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Version(String),
}
