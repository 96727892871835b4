//! One tree per pool mapping: a second NBTree over the same pool would run a second
//! allocator over the same slots and a second metadata layer over the same blocks.

use pmkv_substrate::{Pool, PoolError};
use std::sync::Arc;

static IN_USE: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

/// A tree's claim on its pool, released when dropped; it holds the pool so that the
/// mapping (whose address names the claim) outlives the claim.
pub(crate) struct PoolClaim(Arc<Pool>);

impl PoolClaim {
    pub(crate) fn take(pool: &Arc<Pool>) -> Result<PoolClaim, PoolError> {
        let at = pool.base() as usize;
        let mut used = IN_USE.lock().unwrap_or_else(|e| e.into_inner());
        if used.contains(&at) {
            let path = pool.path().map_or_else(|| "(simulated pool)".into(), |p| p.to_path_buf());
            return Err(PoolError::Locked { path });
        }
        used.push(at);
        Ok(PoolClaim(pool.clone()))
    }
}

impl Drop for PoolClaim {
    fn drop(&mut self) {
        let at = self.0.base() as usize;
        IN_USE.lock().unwrap_or_else(|e| e.into_inner()).retain(|&a| a != at);
    }
}
