//! `pmkv check POOL`: the allocator-level check (SPEC P7, U2). Opens the pool whatever
//! its layout (read-only, or read-write when it needs the allocator's crash recovery),
//! opens its EPallocator and runs the checker: lists acyclic, chunk headers consistent, no chunk on
//! two lists, no overlap, every heap byte either allocated or free (no leak), DRAM state
//! in agreement. Prints the report; a failed check is an error (exit 2, one line).

use super::CmdResult;
use crate::Outcome;
use pmkv::{Latency, Mode};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Pool file.
    pub pool: PathBuf,
    /// Also print space accounting by object type and size class.
    #[arg(long)]
    pub stats: bool,
}

pub fn run(a: Args) -> CmdResult {
    let info = pmkv::pool::inspect(&a.pool)?;
    if pmkv::Registry::builtin().for_layout(&info.header.layout).is_some() {
        return check_engine(&a);
    }
    let c = match pmkv::pool::check_allocator(&a.pool) {
        Err(pmkv::pool::AllocatorCheckError::RecoveryBlocked(e)) => {
            return Err(super::kv::recovery_blocked(&a.pool, &e).into())
        }
        r => r?,
    };
    outln!("pool             {}", a.pool.display())?;
    outln!("layout           {}", c.layout)?;
    for line in &c.repaired {
        outln!("recovered        {line}")?;
    }
    outln!("{}", c.report)?;
    if a.stats {
        outln!("{}", c.stats)?;
    }
    Ok(Outcome::Ok)
}

/// An engine's pool: open it through the API (which runs the engine's recovery) and run
/// the engine's checker, which includes the allocator's. Problems found are printed, and
/// make the command fail (exit 2).
fn check_engine(a: &Args) -> CmdResult {
    let opts = pmkv::Options::default().mode(Mode::Adr).latency(Latency::NONE).create(false);
    let (store, recovery) = super::kv::open_for_reading_reporting(&a.pool, &opts)?;
    outln!("pool             {}", a.pool.display())?;
    outln!("engine           {}", store.info().name)?;
    if let Some(r) = recovery {
        outln!("recovery         {r}")?;
    }
    let report = store.check()?;
    outln!("{report}")?;
    if a.stats {
        let m = store.memory()?;
        for (name, bytes) in &m.dram {
            outln!("dram  {bytes:>14}  {name}")?;
        }
        for (name, bytes) in &m.pm {
            outln!("pm    {bytes:>14}  {name}")?;
        }
        outln!("total dram {} B, pm {} B", m.dram_total(), m.pm_total())?;
    }
    if !report.is_ok() {
        return Err(format!("check found {} problem(s) in {}", report.problems.len(), a.pool.display()).into());
    }
    Ok(Outcome::Ok)
}
