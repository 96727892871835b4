//! Errors of the substrate. Every way a pool can be refused has its own variant so that
//! front ends can print one clear line and callers can match on the cause.

use std::path::PathBuf;

/// Result alias used throughout the substrate.
pub type Result<T> = std::result::Result<T, PoolError>;

/// Why a pool operation failed. None of these leave the pool file changed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("{path}: no such pool file")]
    NotFound { path: PathBuf },
    #[error("{path}: already exists")]
    AlreadyExists { path: PathBuf },
    #[error("{path}: not a pmkv pool (bad magic)")]
    NotAPool { path: PathBuf },
    #[error("{path}: truncated pool file ({actual} bytes, header says {expected})")]
    Truncated { path: PathBuf, actual: u64, expected: u64 },
    #[error("{path}: corrupt pool header ({what})")]
    CorruptHeader { path: PathBuf, what: String },
    #[error("{path}: pool format version {found} is not supported (this build reads version {supported})")]
    Version { path: PathBuf, found: u32, supported: u32 },
    #[error("{path}: pool has layout '{found}', expected '{expected}'")]
    WrongLayout { path: PathBuf, found: String, expected: String },
    #[error("{path}: not a pool file: it is {kind}")]
    NotARegularFile { path: PathBuf, kind: &'static str },
    /// `holder` says who holds the lock, when the system tells, and what to do: wait for
    /// it, or (a `pmkv serve`) ask the server (see `pool::holder`).
    #[error("{path}: pool is open in another process or handle{holder}")]
    Locked { path: PathBuf, holder: String },
    #[error("pool size {size} is too small: at least {min} bytes are needed")]
    TooSmall { size: u64, min: u64 },
    #[error("invalid pool option: {0}")]
    InvalidOption(String),
    #[error("{path}: opened read-only, it cannot be changed")]
    ReadOnly { path: PathBuf },
    #[error("{path}: the pool was not closed cleanly and must be opened read-write once to recover")]
    NeedsRecovery { path: PathBuf },
    #[error("pool is full: {requested} more bytes requested, {available} available below the maximum size {max}")]
    Full { requested: u64, available: u64, max: u64 },
    #[error("layout name '{0}' is longer than 31 bytes")]
    LayoutName(String),
    /// EPallocator metadata in the pool is damaged (bad root, broken chunk list, ...).
    #[error("corrupt allocator metadata: {0}")]
    CorruptAllocator(String),
    /// A write-batch redo log in the pool is damaged (see `batch_log`): the batch it holds
    /// may be half applied, so the pool is refused rather than opened without it.
    #[error("corrupt write batch log: {0}")]
    CorruptBatchLog(String),
    /// A write batch failed after its log was published: writes are refused until the
    /// pool is opened again, which finishes the batch (see `batch_log`).
    #[error("writes are refused: {0}")]
    BatchUnfinished(String),
    /// The allocator's root block is of a format version this build does not read.
    #[error("allocator format version {found} is not supported (this build reads {oldest} to {supported}){hint}")]
    AllocatorVersion { found: u32, oldest: u32, supported: u32, hint: &'static str },
    /// An allocator request that cannot be served for a reason other than space
    /// (no allocator in the pool, allocator directory full, object too large, ...).
    #[error("allocator: {0}")]
    Allocator(String),
    /// The engine panicked (or was told to stop) while the pool was open: it was released
    /// but left marked unclean, so the next open runs crash recovery.
    #[error(
        "{path}: the pool was poisoned by a failed operation and is left marked unclean (the next open runs crash \
         recovery, which finishes interrupted operations but repairs no damage)"
    )]
    Poisoned { path: PathBuf },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl PoolError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        PoolError::Io { context: context.into(), source }
    }
}
