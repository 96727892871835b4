//! `pmkv info POOL`: read the header without changing a byte of the file.

use super::CmdResult;
use crate::Outcome;
use pmkv::{Durability, Mode, SyncPolicy};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Pool file.
    pub pool: PathBuf,
}

/// A time stored as unix seconds, for people: UTC in ISO 8601 (RFC 3339) and the seconds.
/// A value past the year 9999 (only a forged header has one) is shown as seconds alone.
fn when(unix: u64) -> String {
    const YEAR_10000: u64 = 253_402_300_800;
    if unix >= YEAR_10000 {
        return format!("{unix} (unix seconds)");
    }
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix);
    format!("{} (unix {unix})", humantime::format_rfc3339_seconds(t))
}

pub fn run(a: Args) -> CmdResult {
    let i = pmkv::pool::inspect(&a.pool)?;
    let h = &i.header;
    let s = &i.state;
    outln!("pool            {}", i.path.display())?;
    outln!("layout          {}", h.layout)?;
    outln!("format version  {}", h.version)?;
    outln!("pool id         {:016x}", h.pool_id)?;
    outln!("created         {}", when(h.created_unix))?;
    outln!("size            {} bytes (file {} bytes)", s.size, i.file_len)?;
    outln!("max size        {} bytes", h.max_size)?;
    outln!("used            {} bytes ({:.1}%)", s.heap_top, 100.0 * s.heap_top as f64 / s.size as f64)?;
    outln!("clean shutdown  {}", if s.clean { "yes" } else { "no (open now, or crashed)" })?;
    outln!("in use          {}", if i.in_use { "yes, by another process" } else { "no" })?;
    outln!("header seq      {}", s.seq)?;
    for (n, r) in s.roots.iter().enumerate().filter(|(_, r)| **r != 0) {
        if n == pmkv::pool::SEAL_ROOT {
            outln!("allocator seal  {r:#018x} (the chunk lists at the last clean shutdown)")?;
        } else {
            outln!("root[{n}]         {r:#x}")?;
        }
    }
    outln!("medium          {}: {}", i.medium, i.medium.describe())?;
    // What acknowledged writes survive here, in each mode and each sync policy of mode
    // wal (those with the same answer on one line): both are chosen at each open, so all
    // are shown.
    // A mode whose policies all answer alike (on tmpfs) is shown once, by its name.
    let mut each: Vec<(String, String)> = Vec::new();
    for mode in Mode::ALL {
        let d = Durability::new(i.medium, mode);
        let by_policy: Vec<_> = SyncPolicy::ALL.map(|p| d.with_sync(p)).into_iter().collect();
        if d.sync.is_some() && by_policy.iter().any(|p| p.summary() != d.summary()) {
            each.extend(by_policy.iter().map(|p| (p.label(), p.summary())));
        } else {
            each.push((mode.name().to_string(), d.summary()));
        }
    }
    let mut rows: Vec<(Vec<String>, String)> = Vec::new();
    for (label, line) in each {
        match rows.iter_mut().find(|(_, l)| *l == line) {
            Some((modes, _)) => modes.push(label),
            None => rows.push((vec![label], line)),
        }
    }
    for (n, (modes, line)) in rows.iter().enumerate() {
        let head = if n == 0 { "survives" } else { "" };
        outln!("{head:<15} {}: {line}", modes.join(", "))?;
    }
    outln!(
        "mode            chosen at each open (default wal on a disk, adr elsewhere), and wal's sync policy \
         (default always); neither is stored in the pool"
    )?;
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_are_utc_iso_8601_and_seconds() {
        assert_eq!(super::when(0), "1970-01-01T00:00:00Z (unix 0)");
        assert_eq!(super::when(1_795_915_104), "2026-11-29T01:18:24Z (unix 1795915104)");
        assert_eq!(super::when(u64::MAX), format!("{} (unix seconds)", u64::MAX));
    }
}
