//! The backend (paper Fig. 4): applies committed records to the PM copy of the region and
//! advances the persistent head.
//!
//! For each record from the head: a REDO's block is copied to its place in the PM copy and
//! flushed (line 15–17); at a COMMIT, one fence makes the batch's blocks durable and the
//! head moves past it, persisted (lines 21–24). A crash anywhere leaves the head at or
//! before the batch being applied; recovery applies that batch again, which is harmless:
//! a REDO record writes the same bytes to the same place however often it is replayed.
//! The backend never reads past the persistent tail, so it only ever applies whole,
//! durable batches.

//!
//! Page checks (damage is never silent): each 4 KiB page of the PM copy has a CRC-32 in
//! the checks object. At a COMMIT the backend recomputes the checks of the pages the batch
//! wrote, flushed before the same fence as the blocks, so blocks and checks become durable
//! together; a crash before that fence is replayed, which recomputes them. An open
//! verifies every page after recovery: a damaged pool file is refused, not read.

use crate::error::{Error, Result};
use crate::redo_log::{Record, RedoLog};
use pmkv_substrate::Pool;

/// Bytes per page check.
pub const PAGE: u64 = 4096;

/// The PM copy of the region: its offset and size in the pool, and the offset of its page
/// checks (0: a pool made before page checks existed, which has none).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PmCopy {
    pub region: u64,
    pub size: u64,
    pub checks: u64,
}

impl PmCopy {
    pub fn pages(&self) -> u64 {
        self.size.div_ceil(PAGE)
    }

    /// The CRC-32 of page `p` as it is in PM now.
    pub fn compute(&self, pool: &Pool, p: u64) -> u32 {
        let start = p * PAGE;
        let len = PAGE.min(self.size - start) as usize;
        // SAFETY: page `p` lies inside the region object (p < pages()); only the backend
        // or a lone recovery writes it, and not during this read.
        crc32fast::hash(unsafe { std::slice::from_raw_parts(pool.at::<u8>(self.region + start), len) })
    }

    /// Recompute and flush page `p`'s check (durable at the caller's next fence).
    pub fn update(&self, pool: &Pool, p: u64) {
        if self.checks == 0 {
            return;
        }
        let c = self.compute(pool, p);
        let at = self.checks + 4 * p;
        // SAFETY: the check word of page `p` inside the checks object; only the backend
        // (or a lone recovery, or `format`) writes it, and no reference to it exists.
        unsafe { pool.store_u32(at, c) };
        pool.flush_off(at, 4);
    }

    /// Every page against its check: the first page that fails, if any.
    pub fn verify(&self, pool: &Pool) -> Result<()> {
        self.verify_except(pool, &[])
    }

    /// Every page but those in `skip` (sorted) against its check. Recovery runs this
    /// before it replays anything, skipping the pages the pending records write (a crash
    /// may have left those between two states; the replay rewrites them and their
    /// checks), so that damage anywhere else refuses the open before a byte is written.
    pub fn verify_except(&self, pool: &Pool, skip: &[u64]) -> Result<()> {
        if self.checks == 0 {
            return Ok(());
        }
        for p in 0..self.pages() {
            if skip.binary_search(&p).is_ok() {
                continue;
            }
            // SAFETY: inside the checks object (validated at open); read-only here.
            let want = unsafe { pool.at::<u32>(self.checks + 4 * p).read() };
            if self.compute(pool, p) != want {
                return Err(Error::Corrupt(format!(
                    "page {p} of the region (bytes {}..{}) fails its check: the pool file is damaged",
                    p * PAGE,
                    ((p + 1) * PAGE).min(self.size)
                )));
            }
        }
        Ok(())
    }
}

/// Apply every record in `[from, to)` to the PM copy; returns the new head. `to` must not
/// exceed the persistent tail.
pub(crate) fn apply(log: &RedoLog, pm: &PmCopy, from: u64, to: u64) -> Result<u64> {
    let pool = &log.pool;
    let (region, size) = (pm.region, pm.size);
    let mut head = from;
    let mut dirty: Vec<u64> = Vec::new();
    for idx in from..to {
        match log.read(idx)? {
            Record::Redo { addr, len, data } => {
                if addr.checked_add(len as u64).is_none_or(|e| e > size) {
                    return Err(Error::Corrupt(format!(
                        "redo record {idx} writes {len} bytes at {addr}, outside the {size}-byte region"
                    )));
                }
                let at = region + addr;
                // SAFETY: inside the region (checked), an object of this pool that only
                // the backend (or recovery, which runs alone) writes; the DRAM copy is a
                // separate buffer, so no reference into these bytes exists.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), pool.at::<u8>(at), len) };
                pool.flush_off(at, len);
                let (first, last) = (addr / PAGE, (addr + len.max(1) as u64 - 1) / PAGE);
                for p in first..=last {
                    if dirty.last() != Some(&p) {
                        dirty.push(p);
                    }
                }
            }
            Record::Commit { .. } => {
                dirty.sort_unstable();
                dirty.dedup();
                for p in dirty.drain(..) {
                    pm.update(pool, p);
                }
                pool.fence(); // line 21: the batch's blocks (and their pages' checks) are durable
                head = idx + 1;
                log.set_p_head(head); // lines 22–24
            }
        }
    }
    Ok(head)
}
