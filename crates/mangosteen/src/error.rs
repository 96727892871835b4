//! Mangosteen's errors.

use pmkv_substrate::PoolError;

pub type Result<T> = std::result::Result<T, MangosteenError>;

#[derive(Debug, thiserror::Error)]
pub enum MangosteenError {
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error("write of {len} bytes at {off} is outside the {size}-byte region")]
    OutOfRegion { off: u64, len: usize, size: u64 },
    #[error("invalid Mangosteen option: {0}")]
    InvalidOption(String),
    #[error("corrupt Mangosteen pool: {0}")]
    Corrupt(String),
    #[error(
        "the region's fixed address {addr:#x} is in use in this process (is this pool, or a copy of it, open already?)"
    )]
    AddressInUse { addr: u64 },
    #[error("{0} (the batch is not durable; reopen the pool to recover)")]
    Panicked(String),
    #[error("mapping the region's DRAM copy: {0}")]
    Io(#[from] std::io::Error),
}
