//! Errors as values: every failure a user can cause has a variant, none panics.

use pmkv_substrate::PoolError;

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error("key of {len} bytes is too large (limit {max})")]
    KeyTooLarge { len: usize, max: usize },
    #[error("value of {len} bytes is too large (limit {max})")]
    ValueTooLarge { len: usize, max: usize },
    #[error("unknown engine '{0}' (available: {list})", list = crate::engine::ENGINES.join(", "))]
    UnknownEngine(String),
    #[error("engine '{engine}' does not support {what}")]
    Unsupported { engine: &'static str, what: &'static str },
    #[error("pool is corrupt: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Other(String),
}
