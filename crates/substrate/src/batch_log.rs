//! # Write-batch redo log: batches that are all or nothing across a crash
//!
//! Shared by the engines that allocate with EPallocator and apply a batch with their own
//! puts and deletes (HART, NBTree). Why it is built this way, and what it costs:
//! `docs/design/batch-log.md`; its bytes: `docs/format/batch-log.md`.
//!
//! A batch of two or more operations is, before any of them is applied, serialised —
//! operations, keys, values, a sequence number and a CRC-32C seeded with the log's own
//! offset — into **one EPallocator object of type [`LOG`]**:
//!
//! 1. *reserve* it ([`EpAlloc::alloc`]: DRAM only), write it, flush it, fence (in the
//!    flushing modes: its bytes must be durable before its bit);
//! 2. *publish* it ([`EpAlloc::try_publish`]: the allocator's used bit, one persisted
//!    8-byte store). This is the batch's commit point: from here on a crash ends in the
//!    batch's final state;
//! 3. *apply* the operations with the engine's normal put and delete;
//! 4. *retire* it ([`EpAlloc::try_free`]: the bit reset, persisted): from here on no
//!    recovery replays it, so a later write of one of its keys is never undone.
//!
//! The allocator's bit is the publication: a used `LOG` object *is* a pending batch, and
//! there is no second record (a pool root, a directory) that could disagree with it, so
//! no crash point can leak the object — before step 2 it is an unpublished reservation
//! (free after a crash), from step 2 to 4 recovery finds it by its type, replays it and
//! frees it. Puts and deletes are blind writes: replaying the whole log over a partly
//! applied batch gives the batch's final state, and replaying it twice (a crash during
//! recovery) gives the same.
//!
//! At open, after the engine's own recovery, [`pending`] returns every used log,
//! validated (a log that fails its checks is damage, [`PoolError::CorruptBatchLog`]: never
//! dropped), in the order they were published, and [`finish`] replays and frees them.
//!
//! If applying fails half-way (the pool is full, damage met), the log stays published,
//! the pool is poisoned (so the next open recovers and finishes the batch), and every
//! later write through the engine is refused ([`BatchLog::check_writes`]): a write made
//! after the failed batch returned would otherwise be overwritten when the next open
//! replays it.

use crate::epalloc::{EpAlloc, TypeId};
use crate::error::{PoolError, Result};
use crate::pool::Pool;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The EPallocator type of batch logs. Types `0xF0..=0xFF` are the substrate's own;
/// engines choose theirs below.
pub const LOG: TypeId = TypeId(0xF0);
/// The first 8 bytes of every log.
pub const MAGIC: [u8; 8] = *b"PMKVBLOG";
/// The log format this build writes and reads.
pub const VERSION: u32 = 1;
/// Bytes of the log header; the operations follow.
pub const HEAD: usize = 40;
/// Operation codes in the log body.
pub const PUT: u8 = 1;
pub const DELETE: u8 = 2;

const AT_VERSION: usize = 8;
const AT_CRC: usize = 12;
const AT_SEQ: usize = 16;
const AT_COUNT: usize = 24;
const AT_BODY: usize = 32;

/// One operation of a logged batch (the substrate knows no engine's batch type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op<'a> {
    /// Insert or replace.
    Put(&'a [u8], &'a [u8]),
    /// Remove, if present.
    Delete(&'a [u8]),
}

impl Op<'_> {
    /// The key the operation writes.
    pub fn key(&self) -> &[u8] {
        match self {
            Op::Put(k, _) | Op::Delete(k) => k,
        }
    }

    /// Bytes of the operation in the log body: code, key length, value length (puts),
    /// key, value.
    fn encoded_len(&self) -> usize {
        match self {
            Op::Put(k, v) => 9 + k.len() + v.len(),
            Op::Delete(k) => 5 + k.len(),
        }
    }
}

/// Whether a batch of `n` operations is logged: an atomic one of two or more (a single
/// put or delete is all or nothing by itself).
#[inline]
pub fn logged(atomic: bool, n: usize) -> bool {
    atomic && n > 1
}

/// Bytes of the log of `ops`, header included.
pub fn log_len(ops: &[Op<'_>]) -> usize {
    HEAD + ops.iter().map(Op::encoded_len).sum::<usize>()
}

/// The CRC-32C of a log at pool offset `off`: the offset (so that a log's bytes copied
/// elsewhere do not pass), the header but its CRC field, and the body.
fn checksum(off: u64, head: &[u8], body: &[u8]) -> u32 {
    let c = crc32c::crc32c(&off.to_le_bytes());
    let c = crc32c::crc32c_append(c, &head[..AT_CRC]);
    let c = crc32c::crc32c_append(c, &head[AT_CRC + 4..HEAD]);
    crc32c::crc32c_append(c, body)
}

/// Serialise `ops` as the log at `off` with sequence number `seq` into `out`, which holds
/// exactly [`log_len`]`(ops)` bytes.
fn encode(ops: &[Op<'_>], seq: u64, off: u64, out: &mut [u8]) {
    let (head, body) = out.split_at_mut(HEAD);
    head.fill(0);
    head[..8].copy_from_slice(&MAGIC);
    head[AT_VERSION..AT_VERSION + 4].copy_from_slice(&VERSION.to_le_bytes());
    head[AT_SEQ..AT_SEQ + 8].copy_from_slice(&seq.to_le_bytes());
    head[AT_COUNT..AT_COUNT + 8].copy_from_slice(&(ops.len() as u64).to_le_bytes());
    head[AT_BODY..AT_BODY + 8].copy_from_slice(&(body.len() as u64).to_le_bytes());
    let mut at = 0;
    let mut put = |b: &[u8]| {
        body[at..at + b.len()].copy_from_slice(b);
        at += b.len();
    };
    for op in ops {
        match op {
            Op::Put(k, v) => {
                put(&[PUT]);
                put(&(k.len() as u32).to_le_bytes());
                put(&(v.len() as u32).to_le_bytes());
                put(k);
                put(v);
            }
            Op::Delete(k) => {
                put(&[DELETE]);
                put(&(k.len() as u32).to_le_bytes());
                put(k);
            }
        }
    }
    debug_assert_eq!(at, body.len());
    let crc = checksum(off, head, body);
    head[AT_CRC..AT_CRC + 4].copy_from_slice(&crc.to_le_bytes());
}

/// The `count` operations of a log body, or why the body is not one.
fn decode(body: &[u8], count: u64) -> std::result::Result<Vec<Op<'_>>, String> {
    let mut ops = Vec::new();
    let mut at = 0usize;
    let take = |at: &mut usize, n: usize| -> std::result::Result<&[u8], String> {
        let end = at.checked_add(n).filter(|&e| e <= body.len()).ok_or("an operation runs past the body")?;
        let b = &body[*at..end];
        *at = end;
        Ok(b)
    };
    let len = |at: &mut usize| -> std::result::Result<usize, String> {
        Ok(u32::from_le_bytes(take(at, 4)?.try_into().expect("4 bytes")) as usize)
    };
    for _ in 0..count {
        match take(&mut at, 1)?[0] {
            PUT => {
                let (kl, vl) = (len(&mut at)?, len(&mut at)?);
                let k = take(&mut at, kl)?;
                ops.push(Op::Put(k, take(&mut at, vl)?));
            }
            DELETE => {
                let kl = len(&mut at)?;
                ops.push(Op::Delete(take(&mut at, kl)?));
            }
            c => return Err(format!("operation {} has the unknown code {c}", ops.len())),
        }
    }
    if at != body.len() {
        return Err(format!("{} bytes follow its {count} operations", body.len() - at));
    }
    Ok(ops)
}

/// A log found in use at open: a batch a crash (or a failed apply) interrupted after it
/// was published. Its bytes were validated and copied out.
#[derive(Debug)]
pub struct Pending {
    off: u64,
    seq: u64,
    count: u64,
    body: Vec<u8>,
}

impl Pending {
    /// Pool offset of the log object.
    pub fn offset(&self) -> u64 {
        self.off
    }
    /// The batch's operations, in order.
    pub fn ops(&self) -> Vec<Op<'_>> {
        decode(&self.body, self.count).expect("validated by `pending`")
    }
}

/// Every log in use in `alloc`'s pool, validated, in the order their batches were
/// published. Call it after the engine's own recovery, before the engine takes writes.
///
/// A log in a pool that was closed cleanly, or one that fails its checks (magic, version,
/// lengths, CRC, operation encoding), is damage: [`PoolError::CorruptBatchLog`]. It is
/// never dropped: the batch it holds may be half applied.
pub fn pending(alloc: &EpAlloc) -> Result<Vec<Pending>> {
    let pool = alloc.pool();
    let mut offs = Vec::new();
    alloc.for_each_used(LOG, |o| offs.push(o));
    let mut out = Vec::with_capacity(offs.len());
    for off in offs {
        let damaged = |why: &str| PoolError::CorruptBatchLog(format!("the write batch log at {off:#x} {why}"));
        if pool.was_clean() {
            return Err(damaged("is in use in a pool that was closed cleanly, when no batch can be under way"));
        }
        let cap = alloc.capacity(off);
        if cap < HEAD || !pool.contains(off, cap as u64) {
            return Err(damaged(&format!("lies in an object of {cap} bytes, too small for its header")));
        }
        // SAFETY: a used object of `cap >= HEAD` bytes inside the mapped pool (checked);
        // nothing writes a published log, and the engine is opening: no batch runs.
        let head = unsafe { std::slice::from_raw_parts(pool.at::<u8>(off), HEAD) };
        let u32_at = |at: usize| u32::from_le_bytes(head[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().expect("8 bytes"));
        if head[..8] != MAGIC {
            return Err(damaged("has a bad magic"));
        }
        if u32_at(AT_VERSION) != VERSION {
            return Err(damaged(&format!(
                "is of log format {} (this build reads {VERSION}): a damaged word, or a newer pmkv",
                u32_at(AT_VERSION)
            )));
        }
        let body_len = u64_at(AT_BODY);
        if body_len > (cap - HEAD) as u64 {
            return Err(damaged(&format!("claims {body_len} bytes of operations in an object of {cap} bytes")));
        }
        // SAFETY: as for `head`: `HEAD + body_len <= cap` bytes of the used object.
        let body = unsafe { std::slice::from_raw_parts(pool.at::<u8>(off + HEAD as u64), body_len as usize) };
        pool.note_read_at(off, HEAD + body_len as usize);
        if checksum(off, head, body) != u32_at(AT_CRC) {
            return Err(damaged("fails its checksum"));
        }
        let count = u64_at(AT_COUNT);
        decode(body, count).map_err(|why| damaged(&why))?;
        out.push(Pending { off, seq: u64_at(AT_SEQ), count, body: body.to_vec() });
    }
    out.sort_by_key(|p| (p.seq, p.off));
    Ok(out)
}

/// Finish the batches [`pending`] found: apply each log's operations in full with
/// `apply` (the engine's normal writes), then free the log (persisted), oldest first.
/// Returns how many were finished. A crash in here leaves the unfinished logs in use, and
/// the next open replays them again (blind writes: the same result).
pub fn finish<E: From<PoolError>>(
    alloc: &EpAlloc,
    pending: Vec<Pending>,
    mut apply: impl FnMut(&[Op<'_>]) -> std::result::Result<(), E>,
) -> std::result::Result<u64, E> {
    if pending.is_empty() {
        return Ok(0);
    }
    alloc.pool().check_writable()?;
    for p in &pending {
        apply(&p.ops())?;
        alloc.try_free(p.off)?;
    }
    Ok(pending.len() as u64)
}

/// Problems of a quiescent pool's logs, for the engines' checkers: at rest no log is in
/// use (a used one is a batch left unfinished, or a leaked object).
pub fn problems(alloc: &EpAlloc) -> Vec<String> {
    let mut out = Vec::new();
    alloc.for_each_used(LOG, |o| out.push(format!("write batch log {o:#x} is in use while no batch runs")));
    out
}

/// An engine's batch-log state in DRAM: the publication order, the gate that lets a
/// checker wait for running batches, and whether a batch failed half-way.
#[derive(Debug)]
pub struct BatchLog {
    /// Sequence number of the next log (replay order of logs published concurrently).
    seq: AtomicU64,
    /// Held shared by every running batch, exclusively by a checker: a log in use while a
    /// batch runs is no problem, one at rest is.
    gate: RwLock<()>,
    /// Why writes are refused: a batch failed after its log was published.
    stuck: OnceLock<String>,
}

impl Default for BatchLog {
    fn default() -> Self {
        BatchLog { seq: AtomicU64::new(1), gate: RwLock::new(()), stuck: OnceLock::new() }
    }
}

impl BatchLog {
    /// The state of an engine just opened (after [`finish`]: no log is in use).
    pub fn new() -> BatchLog {
        BatchLog::default()
    }

    /// Run one atomic batch: log `ops`, publish the log, `apply` them (the engine's
    /// normal writes, which must apply exactly `ops`, in order), retire the log. On an
    /// error before the publication nothing was applied; after it, see the module doc.
    pub fn run<E: From<PoolError> + std::fmt::Display>(
        &self,
        alloc: &EpAlloc,
        ops: &[Op<'_>],
        apply: impl FnOnce(&[Op<'_>]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        self.check_writes()?;
        let pool = alloc.pool();
        pool.check_writable()?;
        if ops.iter().any(|op| match op {
            Op::Put(k, v) => k.len() > u32::MAX as usize || v.len() > u32::MAX as usize,
            Op::Delete(k) => k.len() > u32::MAX as usize,
        }) {
            return Err(PoolError::Allocator("a write batch log holds keys and values of at most 4 GiB".into()).into());
        }
        let _running = self.gate.read();
        let len = log_len(ops);
        let off = alloc.alloc(LOG, len)?;
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `off` is an object of at least `len` bytes this thread has just
        // reserved: until it is published nothing else reads or writes it.
        let buf = unsafe { std::slice::from_raw_parts_mut(pool.at::<u8>(off), len) };
        encode(ops, seq, off, buf);
        pool.flush_off(off, len);
        // The log's bytes must be durable before its bit. In `eadr` the publishing CAS,
        // a locked instruction, already follows every store of the log.
        if pool.mode().flushes() {
            pool.fence();
        }
        if let Err(e) = alloc.try_publish(off) {
            let _ = alloc.try_unreserve(off);
            return Err(e.into());
        }
        if let Err(e) = apply(ops) {
            self.stick(pool, off, &e.to_string());
            return Err(e);
        }
        if let Err(e) = alloc.try_free(off) {
            self.stick(pool, off, &e.to_string());
            return Err(e.into());
        }
        Ok(())
    }

    /// A batch failed after its log was published: poison the pool (its next open
    /// recovers, and finishes the batch) and refuse writes until then.
    fn stick(&self, pool: &Pool, off: u64, why: &str) {
        pool.poison();
        let _ = self.stuck.set(format!(
            "a write batch failed half-way ({why}); it is logged at {off:#x} and finished when the pool is opened again"
        ));
    }

    /// Before any write: [`PoolError::BatchUnfinished`] once a batch has failed half-way
    /// (see the module doc).
    #[inline]
    pub fn check_writes(&self) -> Result<()> {
        match self.stuck.get() {
            None => Ok(()),
            Some(why) => Err(PoolError::BatchUnfinished(why.clone())),
        }
    }

    /// Run `f` while no batch runs (waits for running ones, holds new ones): for a
    /// checker that holds logs in use to be problems.
    pub fn quiesced<R>(&self, f: impl FnOnce() -> R) -> R {
        let _g = self.gate.write();
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip_and_every_flip_fails() {
        let ops = [Op::Put(b"k1", b"value one"), Op::Delete(b""), Op::Put(b"", b""), Op::Delete(b"gone")];
        let mut buf = vec![0u8; log_len(&ops)];
        encode(&ops, 7, 0x1000, &mut buf);
        let (head, body) = buf.split_at(HEAD);
        assert_eq!(checksum(0x1000, head, body), u32::from_le_bytes(head[AT_CRC..AT_CRC + 4].try_into().unwrap()));
        assert_eq!(decode(body, 4).unwrap(), ops);
        // Elsewhere in the pool the same bytes fail.
        assert_ne!(checksum(0x2000, head, body), u32::from_le_bytes(head[AT_CRC..AT_CRC + 4].try_into().unwrap()));
        for i in 0..buf.len() {
            if (AT_CRC..AT_CRC + 4).contains(&i) {
                continue;
            }
            let mut b = buf.clone();
            b[i] ^= 1;
            let (h, y) = b.split_at(HEAD);
            assert_ne!(checksum(0x1000, h, y), u32::from_le_bytes(h[AT_CRC..AT_CRC + 4].try_into().unwrap()), "{i}");
        }
    }

    #[test]
    fn malformed_bodies_are_errors_not_panics() {
        let ops = [Op::Put(b"key", b"v")];
        let mut buf = vec![0u8; log_len(&ops)];
        encode(&ops, 1, 64, &mut buf);
        let body = &buf[HEAD..];
        assert!(decode(body, 2).is_err(), "more operations than the body holds");
        assert!(decode(body, 0).is_err(), "bytes left over");
        let mut bad = body.to_vec();
        bad[0] = 9;
        assert!(decode(&bad, 1).is_err(), "unknown code");
        bad[0] = PUT;
        bad[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&bad, 1).is_err(), "a key longer than the body");
        assert!(decode(&[], 0).unwrap().is_empty());
    }
}
