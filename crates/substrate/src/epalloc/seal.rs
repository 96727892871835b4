//! The seal: a digest of every chunk list, recorded in the pool header at clean shutdown.
//!
//! Free space is implicit (whatever no list reaches, see `recovery`), which makes the
//! allocator leak-proof but also blind to one kind of damage: a `PNext` link zeroed or
//! redirected cuts the rest of its list off, and the chunks behind the cut simply look
//! free, with every object in them gone; a bit flipped in a chunk header turns a used
//! object free (or a free slot used) and still leaves a consistent header. In format 2 no
//! walk of the lists alone can tell such a pool from a good one; in format 3 a damaged
//! word fails its own check, but a *valid* word with the wrong content (a link pointed at
//! another chunk of the list, a stale header) still passes.
//!
//! So at a clean shutdown the allocator walks its lists once more and records a digest of
//! what they reach — per list its directory index and tag, per item its offset and header
//! word (extents: their length) — in the header word [`SEAL_ROOT`], which lives in the
//! checksummed, crash-atomic state slots, away from the metadata it describes. Opening a
//! pool that was shut down cleanly recomputes the digest during its walk and refuses the
//! pool if the two differ: a cut list, a lost or extra chunk, a flipped bitmap bit or a
//! changed tag is found before anything is read from the pool. After a crash there is
//! nothing to compare (the lists changed after the last seal); recovery then relies on the
//! walk's own checks — in format 3 every header, link and tag checks itself (`check.rs`),
//! which the seal complements by catching *valid* words with the wrong content — and the
//! engines' checksums on their objects.
//!
//! Cost: nothing on the write path; one walk over the chunk headers at close (a few
//! milliseconds per million objects) and a CRC over the same words at open.
//!
//! [`SEAL_ROOT`]: crate::header::SEAL_ROOT

/// Accumulates the digest of the lists, in directory order and list order.
pub(crate) struct Sealer {
    crc: crc32fast::Hasher,
    items: u64,
}

impl Sealer {
    pub(crate) fn new() -> Sealer {
        Sealer { crc: crc32fast::Hasher::new(), items: 0 }
    }

    /// A directory entry in use: its index and tag.
    pub(crate) fn list(&mut self, index: usize, tag: u64) {
        self.crc.update(&(index as u64).to_le_bytes());
        self.crc.update(&tag.to_le_bytes());
    }

    /// An item of the current list: its offset and header word (extents: their length).
    pub(crate) fn item(&mut self, off: u64, word: u64) {
        self.crc.update(&off.to_le_bytes());
        self.crc.update(&word.to_le_bytes());
        self.items += 1;
    }

    /// The seal: bit 63 set (0 means "no seal"), the item count (31 bits) and the CRC.
    pub(crate) fn finish(self) -> u64 {
        1 << 63 | (self.items & 0x7fff_ffff) << 32 | self.crc.finalize() as u64
    }
}

/// Describe a seal for an error message.
pub(crate) fn describe(seal: u64) -> String {
    if seal == 0 {
        "none".into()
    } else {
        format!("{} items, crc {:08x}", (seal >> 32) & 0x7fff_ffff, seal as u32)
    }
}

use super::chunk;
use super::extent;
use super::root::{decode_tag, DIR_CAP};
use super::size_class::{EXTENT_CLASS, MIN_CHUNK_LEN};
use super::EpAlloc;

impl EpAlloc {
    /// Walk every list in PM, as the next open will, and return its seal; `None` if a walk
    /// meets something the open would refuse (then no seal is written, and the stale one
    /// makes that open fail, as it should).
    pub(crate) fn compute_seal(&self) -> Option<u64> {
        let pool = &*self.pool;
        let heap_top = pool.heap_top();
        let max_steps = heap_top.saturating_sub(self.root.heap_start) / MIN_CHUNK_LEN as u64 + 1;
        let mut s = Sealer::new();
        for i in 0..DIR_CAP {
            let e = self.root.entry(i);
            let tag = e.raw_tag(pool);
            let class = match decode_tag(self.root.fmt, e, tag) {
                Ok(Some((_, class))) => class,
                Ok(None) => continue,
                Err(_) => return None,
            };
            s.list(i, tag);
            let mut off = e.head(pool, self.root.fmt).ok()?;
            let mut steps = 0;
            while off != 0 {
                steps += 1;
                if steps > max_steps
                    || off < self.root.heap_start
                    || off.saturating_add(16) > heap_top
                    || !off.is_multiple_of(16)
                {
                    return None;
                }
                let word = if class == EXTENT_CLASS {
                    extent::read_len(pool, self.root.fmt, off, heap_top)?
                } else {
                    let h = chunk::header(pool, off);
                    if !h.is_valid(self.root.fmt, off) {
                        return None;
                    }
                    // A bit set with `EpAlloc::publish_reserved_lazy` may still be only in
                    // the cache: persist every header the seal covers (the caller fences),
                    // or a power loss after a clean close would fail the seal.
                    pool.flush_off(off, 8);
                    h.0
                };
                s.item(off, word);
                off = chunk::next(pool, self.root.fmt, off).ok()?;
            }
        }
        Some(s.finish())
    }
}

impl Drop for EpAlloc {
    /// Seal the lists for the next open (see the module doc). Only a writable pool that is
    /// about to be marked clean gets a seal: not while a panic unwinds, not after the
    /// engine poisoned the pool (the pool then stays unclean and the seal is not used).
    fn drop(&mut self) {
        let pool = &*self.pool;
        if !self.opened || pool.is_read_only() || pool.is_poisoned() || std::thread::panicking() {
            return;
        }
        let seal = self.compute_seal().unwrap_or(0);
        pool.fence();
        if seal != pool.seal() {
            pool.set_seal(seal);
        }
    }
}
