//! The redo log of mode `wal`: durable pools on ordinary disk files, paying one device
//! flush per *group* of writes (docs/design/substrate.md, "Mode wal"; byte layout in
//! docs/format/pool.md, "The log file").
//!
//! **Why a log.** A disk file mapped `MAP_SHARED` is written back by the kernel whenever it
//! likes, page by page in any order, and a page may be torn at a power cut; `msync` at
//! every fence (mode `msync`) orders it but pays one device flush per fence. Here the
//! pool file is mapped `MAP_PRIVATE`, so the kernel never writes the mapping back at all:
//! the file changes only by this module's `pwrite`s. What the engines flush is captured
//! into a log, and the log is what reaches the device first.
//!
//! **Capture mirrors ADR.** `Pool::flush_off` records the flushed ranges per thread (as
//! `msync` mode does); the thread's next fence copies the current contents of those
//! cache lines into one log record under a short mutex and gets its log sequence number
//! (LSN). A line is thus captured some time between its flush and the fence, as an ADR
//! cache may write a flushed line back any time before the fence completes; the engines
//! are crash consistent under ADR for any content captured at or after the flush, and a
//! prefix of the records is a state ADR could leave at a crash after the last one.
//!
//! **Group commit.** A writer that must wait for its record ([`Wal::wait`]) takes the I/O
//! lock; whoever holds it writes *everything* appended so far and `fdatasync`s once, so
//! every writer queued behind it finds its record durable and returns without I/O.
//!
//! **Checkpoint.** When the log exceeds [`CHECKPOINT_BYTES`] (and at close), the holder
//! of the I/O lock makes the log durable, applies its records to the pool file (`pwrite`
//! of the logged line images, never the live mapping, which holds stores not logged
//! yet), `fdatasync`s the pool file, and only then empties the log. A power cut during
//! the checkpoint may tear pool pages; the log still holds them and is replayed at the
//! next open ([`replay`]).
//!
//! **The log file is reused, not regrown.** An `fdatasync` after an append must also
//! journal the file's new size: on this project's ext4 disk 230–265 µs against 180–200 µs
//! for the same write over bytes already allocated, and at 50 clients that gap was the
//! gap to Redis (`appendfsync always`, appending to its AOF). So the file grows in
//! zero-filled steps of [`GROW`] and, after a checkpoint, records are written again from
//! offset 0 over the old ones. "Emptying" the log is then making its first record
//! invalid: the checkpoint overwrites the first record header with zeros and
//! `fdatasync`s, after the pool file is durable and before a new record goes there.
//! What follows the last new record is a torn record (its CRC fails), zeros, or an older
//! record of this process: LSNs only grow while a pool is open, so an older record's LSN
//! is below the next one expected and ends the valid prefix ([`parse`]). Each open starts
//! with an empty file (after [`replay`]), so LSNs never repeat within one file's
//! contents; a clean close empties it too, giving the space back.

use crate::error::{PoolError, Result};
use crate::persist::{SyncPolicy, LINE};
use parking_lot::{Condvar, Mutex};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The 4 magic bytes that start every log record.
pub(crate) const RECORD_MAGIC: [u8; 4] = *b"PKWL";
/// Log format version written by this build (docs/format/pool.md, "The log file").
pub(crate) const LOG_VERSION: u16 = 1;
/// Bytes of a record header.
const RECORD_HEADER: usize = 32;
/// Bytes of an extent header inside a record.
const EXTENT_HEADER: usize = 16;
/// Largest record accepted when reading: larger lengths are damage.
const MAX_RECORD: u64 = 1 << 30;
/// The default log size past which the holder of the I/O lock checkpoints
/// ([`crate::PoolOptions::checkpoint_bytes`]). Bounds both the log
/// file and recovery (replaying it): 64 MiB of records replay in well under a second
/// from the page cache, about a second from an SSD.
pub const CHECKPOINT_BYTES: u64 = 64 << 20;
/// The log file grows by zero-filled steps of this size (see "The log file is reused").
const GROW: u64 = 4 << 20;
/// An unsynced log buffer larger than this is written out by the fence that grows it, so
/// that a process writing without ever waiting (an engine used directly) holds bounded
/// memory.
const BUFFER_LIMIT: usize = 8 << 20;

/// The log file of the pool at `pool_path`: the same name with `.wal` appended.
pub(crate) fn log_path(pool_path: &Path) -> PathBuf {
    let mut s = pool_path.as_os_str().to_owned();
    s.push(".wal");
    PathBuf::from(s)
}

/// Delete a pool: its file and, for a pool that was ever open in mode `wal`, its log
/// (`<pool>.wal`). A pool is two files in that mode, so deleting only the first would leave
/// the log behind (harmless to a new pool at the path, whose id differs, but a leftover).
/// Files already gone are not an error.
pub fn remove_pool(pool_path: &Path) -> std::io::Result<()> {
    for p in [pool_path.to_path_buf(), log_path(pool_path)] {
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Which file an I/O acts on (for the power-loss recorder).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WalFile {
    Pool,
    Log,
}

/// The I/O a `wal` pool makes, through which every write to its two files goes, so that
/// the power-loss simulation (`crash-sim` feature) can record it.
pub(crate) struct Files {
    pub(crate) pool: File,
    pub(crate) log: File,
    pool_path: PathBuf,
    #[cfg(feature = "crash-sim")]
    pub(crate) recorder: Mutex<Option<Arc<dyn Recorder>>>,
}

/// What watches a `wal` pool's file I/O: the power-loss simulation (`crash-sim` feature;
/// `power::PowerLog`). A trait, so that the log, which the simulation is built on, does not
/// depend on it.
#[cfg(feature = "crash-sim")]
pub(crate) trait Recorder: Send + Sync {
    fn write(&self, file: WalFile, off: u64, data: &[u8]);
    fn set_len(&self, file: WalFile, len: u64);
    fn sync(&self, file: WalFile);
}

impl Files {
    fn file(&self, which: WalFile) -> &File {
        match which {
            WalFile::Pool => &self.pool,
            WalFile::Log => &self.log,
        }
    }

    fn err(&self, which: WalFile, what: &str, e: std::io::Error) -> PoolError {
        let path = match which {
            WalFile::Pool => self.pool_path.clone(),
            WalFile::Log => log_path(&self.pool_path),
        };
        PoolError::io(format!("{}: {what}", path.display()), e)
    }

    pub(crate) fn write_at(&self, which: WalFile, off: u64, data: &[u8]) -> Result<()> {
        #[cfg(feature = "crash-sim")]
        if let Some(r) = &*self.recorder.lock() {
            r.write(which, off, data);
        }
        self.file(which).write_all_at(data, off).map_err(|e| self.err(which, "writing", e))
    }

    pub(crate) fn sync(&self, which: WalFile) -> Result<()> {
        self.file(which).sync_data().map_err(|e| self.err(which, "fdatasync", e))?;
        #[cfg(feature = "crash-sim")]
        if let Some(r) = &*self.recorder.lock() {
            r.sync(which);
        }
        Ok(())
    }

    pub(crate) fn set_len(&self, which: WalFile, len: u64) -> Result<()> {
        #[cfg(feature = "crash-sim")]
        if let Some(r) = &*self.recorder.lock() {
            r.set_len(which, len);
        }
        self.file(which).set_len(len).map_err(|e| self.err(which, "setting the length", e))
    }

    /// The pool file grew to `len` (by `allocate_file`): record it, and make the new size
    /// durable before any log record can refer to the new bytes.
    pub(crate) fn grown(&self, len: u64) -> Result<()> {
        #[cfg(feature = "crash-sim")]
        if let Some(r) = &*self.recorder.lock() {
            r.set_len(WalFile::Pool, len);
        }
        let _ = len;
        self.sync(WalFile::Pool)
    }
}

/// The records appended and not yet written to the log file.
struct Buffer {
    bytes: Vec<u8>,
    /// LSN of the last record appended (0: none since the log was opened).
    last: u64,
}

/// What the holder of the I/O lock owns.
struct Io {
    /// Bytes of the log file holding records of this cycle (since the last checkpoint).
    log_len: u64,
    /// Bytes of the log file allocated and zero-filled or holding older records: writes
    /// below it change no file size.
    allocated: u64,
    /// A cleared buffer swapped with [`Buffer::bytes`], so that writing out allocates
    /// nothing.
    spare: Vec<u8>,
    /// An I/O failed: durability can no longer be promised, every later wait fails.
    failed: Option<String>,
}

/// The log of one open `wal` pool.
pub(crate) struct Wal {
    pub(crate) files: Files,
    pool_id: u64,
    policy: SyncPolicy,
    buf: Mutex<Buffer>,
    io: Mutex<Io>,
    /// Highest LSN written to the log file (reached the kernel: survives a process crash).
    written: AtomicU64,
    /// Highest LSN on the device (`fdatasync` returned: survives a power loss).
    durable: AtomicU64,
    /// Checkpoints done, records applied by them (for `pmkv info` and tests).
    checkpoints: AtomicU64,
    /// Stops the `everysec` thread.
    stop: Mutex<bool>,
    stop_cv: Condvar,
    syncer: Mutex<Option<std::thread::JoinHandle<()>>>,
    checkpoint_bytes: u64,
}

impl Wal {
    /// Open the log of the pool file `pool` (already replayed by [`replay`], so empty),
    /// creating it if needed, and start the `everysec` thread if that is the policy.
    pub(crate) fn open(
        pool: &File,
        pool_path: &Path,
        pool_id: u64,
        policy: SyncPolicy,
        checkpoint_bytes: u64,
    ) -> Result<Arc<Wal>> {
        let lp = log_path(pool_path);
        let existed = lp.exists();
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lp)
            .map_err(|e| PoolError::io(format!("{}: opening the log", lp.display()), e))?;
        if !existed {
            // The log's name must be durable before anything relies on its contents.
            sync_dir(pool_path);
        }
        let log_len = log.metadata().map_err(|e| PoolError::io(format!("{}: stat", lp.display()), e))?.len();
        if log_len > 0 {
            // `replay` emptied a log with records of this pool; what is left is a torn
            // tail or another pool's log: records appended after it would never be read.
            log.set_len(0).map_err(|e| PoolError::io(format!("{}: emptying the log", lp.display()), e))?;
            log.sync_data().map_err(|e| PoolError::io(format!("{}: fdatasync", lp.display()), e))?;
        }
        let files = Files {
            pool: pool.try_clone().map_err(|e| PoolError::io(format!("{}: dup", pool_path.display()), e))?,
            log,
            pool_path: pool_path.to_path_buf(),
            #[cfg(feature = "crash-sim")]
            recorder: Mutex::new(None),
        };
        let wal = Arc::new(Wal {
            files,
            pool_id,
            policy,
            buf: Mutex::new(Buffer { bytes: Vec::new(), last: 0 }),
            io: Mutex::new(Io { log_len: 0, allocated: 0, spare: Vec::new(), failed: None }),
            written: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
            stop: Mutex::new(false),
            stop_cv: Condvar::new(),
            syncer: Mutex::new(None),
            checkpoint_bytes,
        });
        if policy == SyncPolicy::Everysec {
            let w = Arc::clone(&wal);
            let h = std::thread::Builder::new()
                .name("pmkv-wal-sync".into())
                .spawn(move || w.sync_every_second())
                .map_err(|e| PoolError::io("starting the log's sync thread", e))?;
            *wal.syncer.lock() = Some(h);
        }
        Ok(wal)
    }

    pub(crate) fn policy(&self) -> SyncPolicy {
        self.policy
    }

    /// LSN of the last record appended.
    pub(crate) fn appended(&self) -> u64 {
        self.buf.lock().last
    }

    pub(crate) fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// Highest LSN as safe as the policy promises an acknowledged write: what [`wait`]
    /// waits for (durable under `always`, written to the kernel otherwise).
    ///
    /// [`wait`]: Wal::wait
    pub(crate) fn acknowledged(&self) -> u64 {
        let done = if self.policy == SyncPolicy::Always { &self.durable } else { &self.written };
        done.load(Ordering::Acquire)
    }

    pub(crate) fn checkpoints(&self) -> u64 {
        self.checkpoints.load(Ordering::Relaxed)
    }

    /// Append one record holding the current contents of the 64-byte-aligned `extents`
    /// (offset, length, sorted, not overlapping) of the pool mapped at `base`; returns its
    /// LSN.
    ///
    /// # Safety
    /// Every extent lies in the mapped pool at `base`.
    pub(crate) unsafe fn append(self: &Arc<Self>, base: *const u8, extents: &[(u64, u64)]) -> u64 {
        let body: u64 = extents.iter().map(|&(_, l)| EXTENT_HEADER as u64 + l).sum();
        let total = RECORD_HEADER + body as usize;
        let (lsn, big) = {
            let mut b = self.buf.lock();
            let lsn = b.last + 1;
            let start = b.bytes.len();
            b.bytes.resize(start + total, 0);
            let rec = &mut b.bytes[start..];
            rec[0..4].copy_from_slice(&RECORD_MAGIC);
            rec[4..6].copy_from_slice(&LOG_VERSION.to_le_bytes());
            rec[12..16].copy_from_slice(&(total as u32).to_le_bytes());
            rec[16..24].copy_from_slice(&lsn.to_le_bytes());
            rec[24..32].copy_from_slice(&self.pool_id.to_le_bytes());
            let mut at = RECORD_HEADER;
            for &(off, len) in extents {
                rec[at..at + 8].copy_from_slice(&off.to_le_bytes());
                rec[at + 8..at + 16].copy_from_slice(&len.to_le_bytes());
                at += EXTENT_HEADER;
                // Word by word with atomic loads: other threads may store to these lines
                // meanwhile (lock-free engines), and a plain copy racing with them would
                // be a data race. Lines are 64-aligned, so every word is 8-aligned.
                for w in 0..(len as usize / 8) {
                    // SAFETY: the extent lies in the mapped pool (the caller's contract),
                    // and the word is 8-aligned; atomics keep concurrent stores defined.
                    let v = unsafe { AtomicU64::from_ptr(base.add(off as usize + 8 * w) as *mut u64) }
                        .load(Ordering::Relaxed);
                    rec[at + 8 * w..at + 8 * w + 8].copy_from_slice(&v.to_ne_bytes());
                }
                at += len as usize;
            }
            let crc = record_crc(rec);
            rec[8..12].copy_from_slice(&crc.to_le_bytes());
            b.last = lsn;
            (lsn, b.bytes.len() > BUFFER_LIMIT)
        };
        if big {
            // Best effort: a failure is remembered and reported by the next wait.
            let _ = self.write_out(lsn, false);
        }
        lsn
    }

    /// Return once record `lsn` is as safe as the sync policy promises an acknowledged
    /// write: on the device (`always`), or written to the kernel (`everysec`, `no`).
    pub(crate) fn wait(&self, lsn: u64) -> Result<()> {
        self.write_out(lsn, self.policy == SyncPolicy::Always)
    }

    /// Make every record appended so far durable on the device, whatever the policy.
    pub(crate) fn sync_all(&self) -> Result<()> {
        self.write_out(self.appended(), true)
    }

    /// Group commit: return once record `lsn` is written (and, if `sync`, durable). The
    /// first waiter to get the I/O lock writes everything appended so far with one
    /// `pwrite` and one `fdatasync`; the waiters queued behind it find their records
    /// done.
    fn write_out(&self, lsn: u64, sync: bool) -> Result<()> {
        let done = if sync { &self.durable } else { &self.written };
        if done.load(Ordering::Acquire) >= lsn {
            return Ok(());
        }
        let mut io = self.io.lock();
        if let Some(why) = &io.failed {
            return Err(PoolError::io(why.clone(), std::io::Error::other("an earlier log write failed")));
        }
        if done.load(Ordering::Acquire) >= lsn {
            return Ok(());
        }
        let r = self.write_out_locked(&mut io, sync);
        if let Err(e) = &r {
            io.failed = Some(e.to_string());
        }
        r
    }

    fn write_out_locked(&self, io: &mut Io, sync: bool) -> Result<()> {
        let last = {
            let mut b = self.buf.lock();
            std::mem::swap(&mut b.bytes, &mut io.spare);
            b.last
        };
        if !io.spare.is_empty() {
            let end = io.log_len + io.spare.len() as u64;
            // Zero-filled ahead only for a write that is synced now: a bulk write-out (no
            // one waits) extends the file itself, and its size reaches the device with
            // the next sync, once.
            if end > io.allocated && sync {
                self.grow(io, end)?;
            }
            self.files.write_at(WalFile::Log, io.log_len, &io.spare)?;
            io.allocated = io.allocated.max(end);
            io.log_len += io.spare.len() as u64;
            io.spare.clear();
        }
        self.written.fetch_max(last, Ordering::AcqRel);
        if sync && self.durable.load(Ordering::Acquire) < last {
            self.files.sync(WalFile::Log)?;
            self.durable.fetch_max(last, Ordering::AcqRel);
        }
        if io.log_len > self.checkpoint_bytes {
            self.checkpoint_locked(io)?;
        }
        Ok(())
    }

    /// Checkpoint now (at close): everything appended is applied to the pool file and the
    /// log file truncated to nothing.
    pub(crate) fn checkpoint(&self) -> Result<()> {
        let mut io = self.io.lock();
        if let Some(why) = &io.failed {
            return Err(PoolError::io(why.clone(), std::io::Error::other("an earlier log write failed")));
        }
        let r = self.write_out_locked(&mut io, true).and_then(|()| self.checkpoint_locked(&mut io)).and_then(|()| {
            // The log holds nothing the pool file lacks: give its space back.
            self.files.set_len(WalFile::Log, 0)?;
            self.files.sync(WalFile::Log)?;
            io.allocated = 0;
            Ok(())
        });
        if let Err(e) = &r {
            io.failed = Some(e.to_string());
        }
        r
    }

    /// Apply the log file's records to the pool file, make the pool file durable, then
    /// empty the log. The caller holds the I/O lock and has written out the buffer.
    fn checkpoint_locked(&self, io: &mut Io) -> Result<()> {
        if io.log_len == 0 {
            return Ok(());
        }
        let last = self.written.load(Ordering::Acquire);
        if self.durable.load(Ordering::Acquire) < last {
            self.files.sync(WalFile::Log)?;
            self.durable.fetch_max(last, Ordering::AcqRel);
        }
        let mut log = vec![0u8; io.log_len as usize];
        self.files
            .log
            .read_exact_at(&mut log, 0)
            .map_err(|e| self.files.err(WalFile::Log, "reading for a checkpoint", e))?;
        let parsed = parse(&log, self.pool_id, false);
        apply(&log, &parsed.lines, |off, data| self.files.write_at(WalFile::Pool, off, data))?;
        self.files.sync(WalFile::Pool)?;
        // Only now may the records go: the first header zeroed ends the valid prefix at
        // offset 0, and it is durable before a new record can be written over it.
        self.files.write_at(WalFile::Log, 0, &[0u8; RECORD_HEADER])?;
        self.files.sync(WalFile::Log)?;
        io.log_len = 0;
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Zero-fill the log file from its allocated end to past `end`, in whole steps of
    /// [`GROW`]. Made durable by the next `fdatasync` of the log, which the records
    /// written into it wait for anyway.
    fn grow(&self, io: &mut Io, end: u64) -> Result<()> {
        let to = end.div_ceil(GROW) * GROW;
        let zeros = vec![0u8; (1 << 20).min((to - io.allocated) as usize)];
        while io.allocated < to {
            let n = zeros.len().min((to - io.allocated) as usize);
            self.files.write_at(WalFile::Log, io.allocated, &zeros[..n])?;
            io.allocated += n as u64;
        }
        Ok(())
    }

    /// The `everysec` thread: make the log durable once a second until stopped.
    fn sync_every_second(&self) {
        let mut stop = self.stop.lock();
        while !*stop {
            self.stop_cv.wait_for(&mut stop, Duration::from_secs(1));
            if *stop {
                break;
            }
            let upto = self.appended();
            if self.durable() < upto {
                drop(stop);
                // A failure is remembered (`Io::failed`) and reported to the next waiter.
                let _ = self.write_out(upto, true);
                stop = self.stop.lock();
            }
        }
    }

    /// Stop the `everysec` thread (at close).
    pub(crate) fn stop(&self) {
        *self.stop.lock() = true;
        self.stop_cv.notify_all();
        if let Some(h) = self.syncer.lock().take() {
            let _ = h.join();
        }
    }
}

/// CRC-32C of a record with its CRC field (bytes 8..12) taken as zero.
fn record_crc(rec: &[u8]) -> u32 {
    let c = crc32c::crc32c(&rec[..8]);
    let c = crc32c::crc32c_append(c, &[0; 4]);
    crc32c::crc32c_append(c, &rec[12..])
}

/// The valid prefix of a log: where the latest content of every logged 64-byte line is.
pub(crate) struct Parsed {
    /// (line offset in the pool, position of its latest logged bytes in the log), sorted
    /// by offset, one entry per line.
    pub(crate) lines: Vec<(u64, usize)>,
    /// Records in the valid prefix, and the LSN of the last.
    pub(crate) records: u64,
    pub(crate) last_lsn: u64,
    /// Bytes of the valid prefix (the rest is a torn or stale tail).
    pub(crate) valid_len: u64,
}

/// Parse the valid prefix of `log` for the pool `pool_id`: records whose magic, version,
/// length and CRC check out, of this pool, with consecutive LSNs. The first record that
/// fails any check ends the prefix (a torn tail, or bytes of an older log).
///
/// `check_crc` false skips the CRCs: for a checkpoint, which reads back the log this
/// process wrote and synced (it is in the page cache); recovery always checks.
pub(crate) fn parse(log: &[u8], pool_id: u64, check_crc: bool) -> Parsed {
    let mut p = Parsed { lines: Vec::new(), records: 0, last_lsn: 0, valid_len: 0 };
    let mut at = 0usize;
    while log.len() - at >= RECORD_HEADER {
        let rec = &log[at..];
        let u32_at = |i: usize| u32::from_le_bytes(rec[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(rec[i..i + 8].try_into().expect("8 bytes"));
        let len = u32_at(12) as u64;
        if rec[0..4] != RECORD_MAGIC
            || u16::from_le_bytes([rec[4], rec[5]]) != LOG_VERSION
            || len < RECORD_HEADER as u64
            || len > MAX_RECORD
            || len > rec.len() as u64
        {
            break;
        }
        let rec = &rec[..len as usize];
        let lsn = u64_at(16);
        if (check_crc && u32_at(8) != record_crc(rec))
            || u64_at(24) != pool_id
            || (p.records > 0 && lsn != p.last_lsn + 1)
        {
            break;
        }
        // Extents: checked against the record's length (a CRC match makes damage
        // unlikely, not impossible; a bad extent ends the prefix like a bad CRC).
        let mut lines = Vec::new();
        let mut e = RECORD_HEADER;
        let mut ok = true;
        while e < rec.len() {
            if rec.len() - e < EXTENT_HEADER {
                ok = false;
                break;
            }
            let off = u64_at(e);
            let elen = u64_at(e + 8);
            e += EXTENT_HEADER;
            if off % LINE as u64 != 0 || elen % LINE as u64 != 0 || elen > (rec.len() - e) as u64 {
                ok = false;
                break;
            }
            for i in 0..elen as usize / LINE {
                lines.push((off + (i * LINE) as u64, at + e + i * LINE));
            }
            e += elen as usize;
        }
        if !ok {
            break;
        }
        p.lines.append(&mut lines);
        p.records += 1;
        p.last_lsn = lsn;
        at += len as usize;
        p.valid_len = at as u64;
    }
    // By offset, the latest record's bytes last (a stable sort keeps log order), then
    // one entry per line: the last.
    p.lines.sort_by_key(|&(off, _)| off);
    let mut out: Vec<(u64, usize)> = Vec::with_capacity(p.lines.len());
    for l in p.lines.drain(..) {
        match out.last_mut() {
            Some(last) if last.0 == l.0 => *last = l,
            _ => out.push(l),
        }
    }
    p.lines = out;
    p
}

/// Write the `lines` of `log` (from [`parse`]) to the pool file through `write`, one
/// call per run of adjacent lines, in offset order.
fn apply(log: &[u8], lines: &[(u64, usize)], mut write: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<()> {
    let mut run: Vec<u8> = Vec::new();
    let mut run_start = 0;
    for &(off, pos) in lines {
        if !run.is_empty() && run_start + run.len() as u64 != off {
            write(run_start, &run)?;
            run.clear();
        }
        if run.is_empty() {
            run_start = off;
        }
        run.extend_from_slice(&log[pos..pos + LINE]);
    }
    if !run.is_empty() {
        write(run_start, &run)?;
    }
    Ok(())
}

/// What [`replay`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Records applied to the pool file.
    pub records: u64,
    /// Bytes of the log read.
    pub log_bytes: u64,
    /// Wall time of the replay, in microseconds.
    pub micros: u64,
}

/// Recovery at open: if the pool file at `path` (open as `file`) has a log with valid
/// records, apply them to the file, make it durable, and empty the log. Runs before the
/// header is read, in every mode (a pool last used in mode `wal` may be opened in
/// another), so the header read is the recovered one.
///
/// With `write` false (a read-only open) nothing is changed, and a log with records is
/// [`PoolError::NeedsRecovery`].
pub(crate) fn replay(file: &File, path: &Path, write: bool) -> Result<Replayed> {
    let start = std::time::Instant::now();
    let lp = log_path(path);
    let log = match std::fs::read(&lp) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Replayed::default()),
        Err(e) => return Err(PoolError::io(format!("{}: reading the log", lp.display()), e)),
    };
    if log.is_empty() {
        return Ok(Replayed::default());
    }
    // The immutable header never changes after creation (written and synced before the
    // file got its name), so the pool id can be read before the log is applied.
    let mut imm = vec![0u8; 256];
    if file.read_exact_at(&mut imm, 0).is_err() {
        return Ok(Replayed::default()); // not a pool: the header read will say so
    }
    let Ok(imm) = crate::header::Immutable::read(&imm, path) else { return Ok(Replayed::default()) };
    let parsed = parse(&log, imm.pool_id, true);
    if parsed.records > 0 && !write {
        return Err(PoolError::NeedsRecovery { path: path.into() });
    }
    if !write {
        return Ok(Replayed::default());
    }
    let err = |what: &str, e| PoolError::io(format!("{}: {what}", path.display()), e);
    apply(&log, &parsed.lines, |off, data| file.write_all_at(data, off).map_err(|e| err("replaying the log", e)))?;
    file.sync_data().map_err(|e| err("fdatasync", e))?;
    let logf = OpenOptions::new().write(true).open(&lp).map_err(|e| err("opening the log", e))?;
    logf.set_len(0).map_err(|e| err("emptying the log", e))?;
    logf.sync_data().map_err(|e| err("fdatasync of the log", e))?;
    Ok(Replayed { records: parsed.records, log_bytes: log.len() as u64, micros: start.elapsed().as_micros() as u64 })
}

/// `fsync` the directory holding `path`, so that a new name in it is durable.
fn sync_dir(path: &Path) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(lsn: u64, pool_id: u64, extents: &[(u64, u8)]) -> Vec<u8> {
        let total = RECORD_HEADER + extents.len() * (EXTENT_HEADER + LINE);
        let mut r = vec![0u8; total];
        r[0..4].copy_from_slice(&RECORD_MAGIC);
        r[4..6].copy_from_slice(&LOG_VERSION.to_le_bytes());
        r[12..16].copy_from_slice(&(total as u32).to_le_bytes());
        r[16..24].copy_from_slice(&lsn.to_le_bytes());
        r[24..32].copy_from_slice(&pool_id.to_le_bytes());
        let mut at = RECORD_HEADER;
        for &(off, fill) in extents {
            r[at..at + 8].copy_from_slice(&off.to_le_bytes());
            r[at + 8..at + 16].copy_from_slice(&(LINE as u64).to_le_bytes());
            r[at + 16..at + 16 + LINE].fill(fill);
            at += EXTENT_HEADER + LINE;
        }
        let crc = record_crc(&r);
        r[8..12].copy_from_slice(&crc.to_le_bytes());
        r
    }

    #[test]
    fn the_valid_prefix_ends_at_the_first_bad_record() {
        let mut log = record(5, 9, &[(4096, 1), (4160, 2)]);
        log.extend(record(6, 9, &[(4096, 3)]));
        let good = log.len() as u64;
        let p = parse(&log, 9, true);
        assert_eq!((p.records, p.last_lsn, p.valid_len), (2, 6, good));
        assert_eq!(p.lines.len(), 2);
        assert_eq!((p.lines[0].0, log[p.lines[0].1]), (4096, 3), "the later record wins");
        assert_eq!((p.lines[1].0, log[p.lines[1].1]), (4160, 2));
        // A torn third record, a gap in the LSNs, another pool's record: each ends it.
        let mut torn = log.clone();
        let third = record(7, 9, &[(8192, 4)]);
        torn.extend(&third[..third.len() - 1]);
        assert_eq!(parse(&torn, 9, true).records, 2);
        let mut flipped = log.clone();
        let mut bad = third.clone();
        bad[RECORD_HEADER + EXTENT_HEADER] ^= 1;
        flipped.extend(bad);
        assert_eq!(parse(&flipped, 9, true).records, 2);
        let mut gap = log.clone();
        gap.extend(record(8, 9, &[(8192, 4)]));
        assert_eq!(parse(&gap, 9, true).records, 2);
        assert_eq!(parse(&log, 10, true).records, 0, "a log of another pool is not replayed");
        let mut whole = log;
        whole.extend(third);
        assert_eq!(parse(&whole, 9, true).records, 3);
    }

    /// A reused log file: this cycle's records from offset 0, then records of an earlier
    /// cycle (lower LSNs, valid CRCs). Only the new ones are the prefix; with the first
    /// header zeroed (a checkpoint's "empty"), nothing is.
    #[test]
    fn older_records_after_the_newest_are_not_replayed() {
        let mut log = record(40, 9, &[(4096, 7)]);
        log.extend(record(41, 9, &[(4160, 8)]));
        let new_len = log.len() as u64;
        for lsn in 12..15 {
            log.extend(record(lsn, 9, &[(8192, lsn as u8)]));
        }
        let p = parse(&log, 9, true);
        assert_eq!((p.records, p.last_lsn, p.valid_len), (2, 41, new_len));
        log[..RECORD_HEADER].fill(0);
        assert_eq!(parse(&log, 9, true).records, 0);
    }

    #[test]
    fn apply_writes_runs_in_order() {
        let mut log = record(1, 9, &[(128, 1), (0, 2), (64, 3), (512, 4)]);
        log.extend(record(2, 9, &[(64, 5)]));
        let p = parse(&log, 9, true);
        let mut calls = Vec::new();
        apply(&log, &p.lines, |off, d| {
            calls.push((off, d.len(), d[0], d.get(64).copied(), d.get(128).copied()));
            Ok(())
        })
        .unwrap();
        // Lines 0, 64, 128 in one run (64 from the later record), then 512 alone.
        assert_eq!(calls[0], (0, 192, 2, Some(5), Some(1)));
        assert_eq!((calls[1].0, calls[1].1), (512, 64));
    }
}
