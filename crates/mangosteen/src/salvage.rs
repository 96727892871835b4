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

use pmkv_core::{Direction, Emit, EngineFactory, Error, ErrorKind, KeyRange, Options, Result, SalvageReport};
use std::path::PathBuf;

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
    // Read-only first: it never formats anything. A copy that needs recovery is opened
    // read-write (it is ours) so that the log is replayed.
    let engine = match factory.open(&copy.0, &Options::default().read_only(true)) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NeedsRecovery => {
            factory.open(&copy.0, &Options::default()).map_err(nothing)?
        }
        Err(e) => return Err(nothing(e)),
    };
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
