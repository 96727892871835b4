//! HART's errors.

use pmkv_substrate::PoolError;

/// The result of a HART operation.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a HART operation failed. The engine layer maps each variant to a stable
/// `pmkv_core::ErrorKind` (see `engine`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
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
