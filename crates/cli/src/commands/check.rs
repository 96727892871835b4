//! `pmkv check POOL`: the allocator-level check (SPEC P7, U2). Opens the pool whatever
//! its layout (read-only, or read-write when it needs the allocator's crash recovery),
//! opens its EPallocator and runs the checker: lists acyclic, chunk headers consistent, no chunk on
//! two lists, no overlap, every heap byte either allocated or free (no leak), DRAM state
//! in agreement. Prints the report; a failed check is an error (exit 2, one line).

use super::CmdResult;
use crate::Outcome;
use pmkv_substrate::epalloc::EpAlloc;
use pmkv_substrate::{Latency, Mode, Pool, PoolError, PoolOptions};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct Args {
    /// Pool file.
    pub pool: PathBuf,
    /// Also print space accounting by object type and size class.
    #[arg(long)]
    pub stats: bool,
}

pub fn run(a: Args) -> CmdResult {
    let info = Pool::inspect(&a.pool)?;
    if pmkv::ENGINES.contains(&info.header.layout.as_str()) {
        return check_engine(&a);
    }
    // Read-only, so that checking changes nothing; read-write (running the allocator's
    // recovery) only if the pool needs repair.
    let opts = PoolOptions::default().mode(Mode::Adr).latency(Latency::NONE);
    let read_only = Pool::open_read_only(&a.pool, None, &opts).map(Arc::new).and_then(EpAlloc::open);
    let ep = match read_only {
        Err(PoolError::NeedsRecovery { .. } | PoolError::ReadOnly { .. }) => {
            EpAlloc::open(Arc::new(Pool::open(&a.pool, None, &opts)?))?
        }
        r => r?,
    };
    let layout = ep.pool().layout().to_string();
    let report = ep.check()?;
    println!("pool             {}", a.pool.display());
    println!("layout           {layout}");
    for (ty, class, case) in ep.recovery().repaired() {
        println!("recovered        interrupted chunk recycle of type {} class code {class}: {case:?}", ty.0);
    }
    println!("{report}");
    if a.stats {
        println!("{}", ep.stats());
    }
    Ok(Outcome::Ok)
}

/// An engine's pool: open it through the API (which runs the engine's recovery) and run
/// the engine's checker, which includes the allocator's.
fn check_engine(a: &Args) -> CmdResult {
    let opts = pmkv::Options { mode: Mode::Adr, latency: Latency::NONE, create: false, ..pmkv::Options::default() };
    let store = super::kv::open_for_reading(&a.pool, &opts)?;
    let e = store.engine();
    println!("pool             {}", a.pool.display());
    println!("engine           {}", e.name());
    if let Some(r) = e.recovery_info() {
        println!("recovery         {r}");
    }
    println!("{}", e.check()?);
    if a.stats {
        let m = e.memory();
        for (name, bytes) in &m.dram {
            println!("dram  {bytes:>14}  {name}");
        }
        for (name, bytes) in &m.pm {
            println!("pm    {bytes:>14}  {name}");
        }
        println!("total dram {} B, pm {} B", m.dram_total(), m.pm_total());
    }
    Ok(Outcome::Ok)
}
