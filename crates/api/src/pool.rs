//! Pool files below any engine, for tools: a pool's header read without changing a byte
//! (`pmkv info`), and the persistent allocator's own check of a pool that no engine of the
//! registry claims (`pmkv check`). Front ends reach the substrate only through the API
//! (scripts/layers checks it), so what they need of it is here.

use pmkv_core::Error;
use pmkv_substrate::epalloc::EpAlloc;
use pmkv_substrate::{Latency, Mode, Pool, PoolOptions};
use std::path::Path;
use std::sync::Arc;

/// The pool root at which EPallocator keeps its seal (the chunk lists at the last clean
/// shutdown), which `pmkv info` names instead of printing a bare root.
pub use pmkv_substrate::header::SEAL_ROOT;
/// A pool file's header and state as [`inspect`] reads them, and the errors of a pool.
pub use pmkv_substrate::{PoolError, PoolInfo};

/// A pool's header and state, read without changing a byte of the file (nor taking its
/// lock: [`PoolInfo::in_use`] says whether another process holds it open).
pub fn inspect(path: impl AsRef<Path>) -> Result<PoolInfo, PoolError> {
    Pool::inspect(path)
}

/// What EPallocator's checker found in a pool ([`check_allocator`]), ready to print.
#[derive(Debug)]
pub struct AllocatorCheck {
    /// The layout name in the pool's header.
    pub layout: String,
    /// Interrupted chunk recycles that the allocator's recovery finished before the
    /// check, one line each.
    pub repaired: Vec<String>,
    /// The checker's report (a problem found is an error instead): lists acyclic, chunk headers consistent, no chunk on two
    /// lists, no overlap, every heap byte allocated or free, DRAM state in agreement.
    pub report: String,
    /// Space accounting by object type and size class.
    pub stats: String,
}

/// Why [`check_allocator`] could not check a pool.
#[derive(Debug)]
pub enum AllocatorCheckError {
    /// The pool was not closed cleanly: its allocator's recovery must run first, which
    /// writes, and the file cannot be opened for writing here (the error says why).
    RecoveryBlocked(PoolError),
    /// Anything else: no such file, not a pool, damage the checker cannot read past, ...
    Failed(Error),
}

impl std::fmt::Display for AllocatorCheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AllocatorCheckError::RecoveryBlocked(e) => {
                write!(f, "the pool needs recovery and cannot be opened for writing: {e}")
            }
            AllocatorCheckError::Failed(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for AllocatorCheckError {}

impl From<PoolError> for AllocatorCheckError {
    fn from(e: PoolError) -> Self {
        AllocatorCheckError::Failed(e.into())
    }
}

/// Open the pool at `path` whatever its layout and run EPallocator's checker on it.
/// Read-only, so that checking changes nothing; read-write (running the allocator's crash
/// recovery) only if the header says the pool was not closed cleanly.
pub fn check_allocator(path: impl AsRef<Path>) -> Result<AllocatorCheck, AllocatorCheckError> {
    let path = path.as_ref();
    let opts = PoolOptions::default().mode(Mode::Adr).latency(Latency::NONE);
    let read_only = Pool::open_read_only(path, None, &opts).map(Arc::new).and_then(EpAlloc::open);
    let ep = match read_only {
        Err(PoolError::NeedsRecovery { .. }) => {
            let pool = match Pool::open(path, None, &opts) {
                Err(e @ (PoolError::Io { .. } | PoolError::ReadOnly { .. })) => {
                    return Err(AllocatorCheckError::RecoveryBlocked(e))
                }
                r => r?,
            };
            EpAlloc::open(Arc::new(pool))?
        }
        r => r?,
    };
    let report = ep.check()?;
    Ok(AllocatorCheck {
        layout: ep.pool().layout().to_string(),
        repaired: ep
            .recovery()
            .repaired()
            .map(|(ty, class, case)| format!("interrupted chunk recycle of type {} class code {class}: {case:?}", ty.0))
            .collect(),
        report: report.to_string(),
        stats: ep.stats().to_string(),
    })
}
