//! Errors of FAST&FAIR.

use crate::layout::{MAX_KEY, MAX_VALUE};
use pmkv_substrate::PoolError;

/// Result alias of the crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a FAST&FAIR operation failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The pool refused (full, read-only, damaged allocator, ...).
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// A key longer than the limit (64 KiB - 1 bytes, as the other engines').
    #[error("key of {0} bytes is longer than the limit {max}", max = MAX_KEY)]
    KeyTooLarge(usize),
    /// A value longer than the limit (16 MiB).
    #[error("value of {0} bytes is longer than the limit {max}", max = MAX_VALUE)]
    ValueTooLarge(usize),
    /// The pool's FAST&FAIR data is damaged.
    #[error("FAST&FAIR data is damaged: {0}")]
    Corrupt(String),
    /// A format this build cannot read.
    #[error("{0}")]
    Version(String),
}

/// A `Corrupt` error saying `what`.
pub(crate) fn corrupt(what: impl Into<String>) -> Error {
    Error::Corrupt(what.into())
}
