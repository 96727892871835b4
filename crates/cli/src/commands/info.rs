//! `pmkv info POOL`: read the header without changing a byte of the file.

use super::CmdResult;
use crate::Outcome;
use pmkv::{Durability, Mode};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Pool file.
    pub pool: PathBuf,
}

pub fn run(a: Args) -> CmdResult {
    let i = pmkv::pool::inspect(&a.pool)?;
    let h = &i.header;
    let s = &i.state;
    outln!("pool            {}", i.path.display())?;
    outln!("layout          {}", h.layout)?;
    outln!("format version  {}", h.version)?;
    outln!("pool id         {:016x}", h.pool_id)?;
    outln!("created         {} (unix seconds)", h.created_unix)?;
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
    // What acknowledged writes survive here, in each mode (modes with the same answer on
    // one line): the mode is chosen at each open, so all are shown.
    let mut rows: Vec<(Vec<&str>, String)> = Vec::new();
    for mode in Mode::ALL {
        let line = Durability::new(i.medium, mode).summary();
        match rows.iter_mut().find(|(_, l)| *l == line) {
            Some((modes, _)) => modes.push(mode.name()),
            None => rows.push((vec![mode.name()], line)),
        }
    }
    for (n, (modes, line)) in rows.iter().enumerate() {
        let head = if n == 0 { "survives" } else { "" };
        outln!("{head:<15} {}: {line}", modes.join(", "))?;
    }
    outln!("mode            chosen at each open (default adr); not stored in the pool")?;
    Ok(Outcome::Ok)
}
