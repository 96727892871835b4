//! Mangosteen's errors: [`Error`], re-exported at the crate root as every engine crate's
//! `Error` is. The `mangosteen` engine maps them onto `pmkv_core::ErrorKind` (engine.rs);
//! the C API onto its `PMKV_E_*` codes.

use pmkv_substrate::PoolError;

/// What the runtime's fallible operations return.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a runtime operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The pool below failed (open, growth, persistence, read-only, ...).
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// A `Tx::write` or `Tx::record` outside the region; nothing was written.
    #[error("write of {len} bytes at {off} is outside the {size}-byte region")]
    OutOfRegion { off: u64, len: usize, size: u64 },
    /// An option out of range, or a batch too large for the redo ring.
    #[error("invalid Mangosteen option: {0}")]
    InvalidOption(String),
    /// The pool's Mangosteen objects fail their checks (or the backend stopped on one).
    #[error("corrupt Mangosteen pool: {0}")]
    Corrupt(String),
    /// The pool's Mangosteen objects are of a format version this build does not read.
    #[error(
        "Mangosteen format version {found} is not supported (this build reads version {supported}); copy the data out with the build that made the pool and load it into a new pool"
    )]
    Version { found: u32, supported: u32 },
    /// The region's fixed address (M7) is taken in this process, most likely by another
    /// open of the same pool (or of a copy of it, such as a crash image). Salvage of a
    /// copy works all the same (it runs in a child process, `salvage.rs`).
    #[error(
        "the region's fixed address {addr:#x} is in use in this process (is this pool, or a copy of it, open \
         already? close it first, or salvage the copy, which runs in a child process)"
    )]
    AddressInUse { addr: u64 },
    /// The combiner panicked while committing a batch: the batch is not durable.
    #[error("{0} (the batch is not durable; reopen the pool to recover)")]
    Panicked(String),
    /// Verify mode found writes to the region that the capture missed (they were logged
    /// all the same): the application has code that is not instrumented.
    #[error("write capture verification failed: {0}")]
    CaptureMissed(String),
    /// The instrumented application library could not be loaded.
    #[error("compiler capture is unavailable: {0}")]
    Capture(String),
    /// Compiler capture was asked for code that was not compiled with pmkv's
    /// instrumentation: its writes would not be captured, and would be acknowledged and
    /// then lost at the next open. Refused instead (docs/design/mangosteen.md, "Refusing
    /// misuse").
    #[error("compiler capture refused: {0}")]
    NotInstrumented(String),
    /// The request called `Tx::abort`: every write of its batch was undone.
    #[error("the request aborted and its writes were rolled back")]
    Aborted,
    /// Another request in the same batch aborted: this one's writes were undone with the
    /// batch's, and nothing of it was applied; run it again.
    #[error("another request of the batch aborted: this one's writes were rolled back with it; run it again")]
    RolledBack,
    /// A later open asked for a larger region than the pool holds: regions keep the size
    /// they were created with.
    #[error(
        "the region is {existing} bytes, fixed when the pool was created; this open asks for {asked}: a region \
         does not grow (open with at most {existing} bytes, or create a new pool of the larger size and copy \
         the data into it)"
    )]
    RegionSize { existing: u64, asked: u64 },
    /// The region's heap could not serve an allocation of a write: the write was rolled
    /// back, nothing of it committed.
    #[error("the region is full: {0}")]
    Full(String),
    /// Mapping or protecting the DRAM copy failed.
    #[error("mapping the region's DRAM copy: {0}")]
    Io(#[from] std::io::Error),
}
