//! One engine per pool mapping ([`EngineClaim`]).

use super::Pool;
use crate::error::{PoolError, Result};
use std::sync::Arc;

/// The mappings (by base address) some engine has claimed.
static IN_USE: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

/// An engine's claim on the pool it runs on, released when dropped.
///
/// A second engine over the same open pool would run a second allocator over the same
/// slots (handing one slot to both) and a second set of volatile structures over the same
/// PM objects. (A pool *file* opened twice is refused by the file lock; this covers one
/// `Pool` handed to two engines, or two opens of one simulated pool.) The claim holds the
/// pool, so that the mapping whose address names it outlives it.
pub struct EngineClaim(Arc<Pool>);

impl EngineClaim {
    /// Claim `pool`, or `PoolError::Locked` if a live engine already has.
    pub fn take(pool: &Arc<Pool>) -> Result<EngineClaim> {
        let at = pool.base() as usize;
        let mut used = IN_USE.lock().unwrap_or_else(|e| e.into_inner());
        if used.contains(&at) {
            let path = pool.path().map_or_else(|| "(simulated pool)".into(), |p| p.to_path_buf());
            let holder = "; another engine in this process has it open: close that store first".into();
            return Err(PoolError::Locked { path, holder });
        }
        used.push(at);
        Ok(EngineClaim(pool.clone()))
    }
}

impl Drop for EngineClaim {
    fn drop(&mut self) {
        let at = self.0.base() as usize;
        IN_USE.lock().unwrap_or_else(|e| e.into_inner()).retain(|&a| a != at);
    }
}
