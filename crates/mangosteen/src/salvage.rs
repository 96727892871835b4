//! Salvage for mangosteen pools: whole or nothing.
//!
//! The map is the standard library's `BTreeMap`, serialized as its in-memory nodes (raw
//! pointers at the region's fixed address) in the durable region; its node layout is
//! not a format anyone can decode from bytes. A node can be trusted only if its page's
//! check passes, and a record only if every node on its path can: with the nodes' layout
//! private to `std`, no sound partial salvage exists. So salvage opens a private copy of
//! the image the way every open does — the redo log replayed (paper §3.3's recovery),
//! every line check of the PM copy verified — and, if that succeeds, hands over every
//! record; otherwise it fails with the open's reason (which names the failing page).
//! That is still better than "not supported": a pool whose header says it needs recovery,
//! or whose file a read-only command refuses, is copied out whole.
//!
//! **Beside a live store.** The image is usually a copy of a pool that this very process
//! may have open (a crash image checked by a server or a test that keeps the store
//! running), and it names the same fixed address, which the live store's DRAM copy
//! holds. Then the copy is opened in a child process (`fork`): the child unmaps its copies
//! of this process's fixed-address regions (`capture::fixed_mappings`, kept locked across
//! the `fork` so the list is whole), opens the copy at its address, and sends the records
//! through a pipe. The parent's mappings are its own, so the live store is not touched.
//! The child runs only the open and the scan, then `_exit`s. glibc makes `malloc` safe
//! after `fork`; a lock another thread of the parent held at the `fork` (the pool's
//! claim list, taken briefly at an open) would stop the child, so it has an `alarm`
//! watchdog and the parent reports a child that died without finishing.

use crate::error::Error as MgError;
use pmkv_core::{Direction, Emit, Engine, EngineFactory, Error, ErrorKind, KeyRange, Options, Result, SalvageReport};
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// A temporary copy of the image, removed when dropped.
struct TempCopy(PathBuf);

impl Drop for TempCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn nothing(e: Error) -> Error {
    Error::new(
        e.kind(),
        format!(
            "nothing can be salvaged: {e} (a mangosteen map is salvaged whole or not at all: its nodes are \
             trusted only when every line check passes)"
        ),
    )
}

/// Salvage `image` (a mangosteen pool file's bytes) whole; see the module doc.
pub(crate) fn salvage(factory: &dyn EngineFactory, image: &[u8], emit: Emit<'_>) -> Result<SalvageReport> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let copy = TempCopy(std::env::temp_dir().join(format!("pmkv-salvage-{}-{nanos}.pool", std::process::id())));
    std::fs::write(&copy.0, image).map_err(|e| Error::new(ErrorKind::Io, format!("{}: {e}", copy.0.display())))?;
    match open_copy(factory, &copy.0) {
        Ok(engine) => scan_all(engine, emit),
        // The image's fixed address is taken here, by a live store of the pool it is a
        // copy of (or by a read-only open of another copy): its own address space.
        Err(e) if address_in_use(&e) => in_child(factory, &copy.0, emit),
        Err(e) => Err(nothing(e)),
    }
}

/// Open the private copy: read-only first (it never formats anything); a copy that needs
/// recovery is opened read-write (it is ours) so that the log is replayed.
fn open_copy(factory: &dyn EngineFactory, path: &Path) -> Result<Box<dyn Engine>> {
    match factory.open(path, &Options::default().read_only(true)) {
        Err(e) if e.kind() == ErrorKind::NeedsRecovery => factory.open(path, &Options::default()),
        r => r,
    }
}

/// Hand every record of `engine` to `emit`, then close it.
fn scan_all(engine: Box<dyn Engine>, emit: Emit<'_>) -> Result<SalvageReport> {
    let mut rep = SalvageReport::default();
    let mut failed = None;
    engine.scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |k, v| match emit(k, v) {
        Ok(()) => {
            rep.records += 1;
            true
        }
        Err(e) => {
            failed = Some(e);
            false
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    engine.close()?;
    Ok(rep)
}

/// Whether `e` is the runtime's [`MgError::AddressInUse`].
fn address_in_use(e: &Error) -> bool {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<MgError>())
        .is_some_and(|m| matches!(m, MgError::AddressInUse { .. }))
}

/// The child's messages on the pipe: a record (`R`, key and value lengths as u32 LE, the
/// bytes), the end (`D`), or the open's or scan's error (`E`, kind code as i32 LE, message
/// length as u32 LE, the message).
const RECORD: u8 = b'R';
const DONE: u8 = b'D';
const FAILED: u8 = b'E';

/// How long the child may take before it is killed (`alarm`): a watchdog against a lock
/// another thread held at the `fork` (see the module doc), not a measurement.
const CHILD_SECONDS: u32 = 600;

/// Salvage the copy at `path` in a child process, whose address space is its own: it
/// unmaps its copies of this process's fixed-address regions (the live stores), opens the
/// copy at its address, and sends the records through a pipe; this process hands them to
/// `emit`. The live stores are not touched: the child's mappings are copies.
fn in_child(factory: &dyn EngineFactory, path: &Path, emit: Emit<'_>) -> Result<SalvageReport> {
    let io = |what: &str| {
        Error::new(ErrorKind::Io, format!("salvage in a child process: {what}: {}", std::io::Error::last_os_error()))
    };
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `pipe2` writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io("pipe"));
    }
    // SAFETY: both descriptors were just made and are owned here, once each.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let fixed = crate::capture::fixed_mappings();
    let regions: Vec<(usize, usize)> = fixed.clone();
    // SAFETY: `fork` has no preconditions; the child only runs `child`, then `_exit`.
    let pid = unsafe { libc::fork() };
    drop(fixed);
    if pid < 0 {
        return Err(io("fork"));
    }
    if pid == 0 {
        drop(rd);
        let code = child(factory, path, wr, &regions);
        // SAFETY: ends the child without running this process's exit handlers or
        // destructors (they belong to the parent's state).
        unsafe { libc::_exit(code) };
    }
    drop(wr);
    let got = receive(std::io::BufReader::with_capacity(1 << 16, std::fs::File::from(rd)), emit);
    if got.is_err() {
        // `emit` failed (or the stream broke): the child's work is not wanted any more.
        // SAFETY: the child process started above, not yet waited for.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let mut status = 0;
    // SAFETY: waits for the child started above; `status` is a local.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match got {
        Ok(Some(rep)) => Ok(rep),
        Ok(None) => Err(Error::new(
            ErrorKind::Internal,
            format!("nothing can be salvaged: the child process that opened the copy died (wait status {status:#x})"),
        )),
        Err(e) => Err(e),
    }
}

/// Read the child's messages, handing records to `emit`: the report on `D`, `None` if the
/// stream ended without one (the child died).
fn receive(mut r: impl Read, emit: Emit<'_>) -> Result<Option<SalvageReport>> {
    let broken = |e: std::io::Error| Error::new(ErrorKind::Io, format!("salvage in a child process: {e}"));
    let mut rep = SalvageReport::default();
    let mut tag = [0u8; 1];
    let mut word = [0u8; 4];
    loop {
        if r.read(&mut tag).map_err(broken)? == 0 {
            return Ok(None);
        }
        let mut u32_of = |r: &mut dyn Read| -> Result<u32> {
            r.read_exact(&mut word).map_err(broken)?;
            Ok(u32::from_le_bytes(word))
        };
        match tag[0] {
            RECORD => {
                let (kl, vl) = (u32_of(&mut r)? as usize, u32_of(&mut r)? as usize);
                let mut kv = vec![0u8; kl + vl];
                r.read_exact(&mut kv).map_err(broken)?;
                emit(&kv[..kl], &kv[kl..])?;
                rep.records += 1;
            }
            DONE => return Ok(Some(rep)),
            FAILED => {
                let code = u32_of(&mut r)? as i32;
                let n = u32_of(&mut r)? as usize;
                let mut m = vec![0u8; n];
                r.read_exact(&mut m).map_err(broken)?;
                let kind = ErrorKind::from_code(code).unwrap_or(ErrorKind::Internal);
                return Err(nothing(Error::new(kind, String::from_utf8_lossy(&m).into_owned())));
            }
            t => return Err(broken(std::io::Error::other(format!("unknown message {t:#x}")))),
        }
    }
}

/// The child's work (see [`in_child`]); its exit code.
fn child(factory: &dyn EngineFactory, path: &Path, wr: OwnedFd, regions: &[(usize, usize)]) -> i32 {
    // SAFETY: `alarm` has no preconditions; SIGALRM's default action ends the child.
    unsafe { libc::alarm(CHILD_SECONDS) };
    for &(a, len) in regions {
        // SAFETY: this process's copy of a live store's region, which the child never
        // uses (it runs nothing but this function, then `_exit`); the parent's mapping is
        // its own and stays.
        unsafe { libc::munmap(a as *mut libc::c_void, len) };
    }
    let mut w = std::io::BufWriter::with_capacity(1 << 16, std::fs::File::from(wr));
    let mut scan = || -> std::result::Result<(), Error> {
        let engine = open_copy(factory, path)?;
        let mut failed = None;
        engine.scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |k, v| {
            let mut put = || -> std::io::Result<()> {
                w.write_all(&[RECORD])?;
                w.write_all(&(k.len() as u32).to_le_bytes())?;
                w.write_all(&(v.len() as u32).to_le_bytes())?;
                w.write_all(k)?;
                w.write_all(v)
            };
            match put() {
                Ok(()) => true,
                Err(e) => {
                    failed = Some(e);
                    false
                }
            }
        })?;
        if let Some(e) = failed {
            return Err(Error::new(ErrorKind::Io, e.to_string()));
        }
        Ok(())
    };
    let end = match scan() {
        Ok(()) => w.write_all(&[DONE]),
        Err(e) => {
            let m = e.to_string();
            w.write_all(&[FAILED])
                .and_then(|()| w.write_all(&e.code().to_le_bytes()))
                .and_then(|()| w.write_all(&(m.len() as u32).to_le_bytes()))
                .and_then(|()| w.write_all(m.as_bytes()))
        }
    };
    match end.and_then(|()| w.flush()) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}
