//! `pmkv salvage DAMAGED NEW`: copy every intact record of a damaged pool into a new pool.
//!
//! A pool that fails its checks is refused by every other command (reads must never
//! return damaged data, writes must not build on it). Salvage reads the damaged file as
//! plain bytes — it never opens or changes it — and asks its engine to find the records
//! whose checks pass (`EngineFactory::salvage`: HART finds its leaves by their
//! offset-seeded key checks, NBTree its blocks by their seals and its entries by their
//! objects' checks, trusting neither the header nor the allocator; Mangosteen copies a
//! pool whole or not at all). Those go into a new pool of the same engine; records whose
//! key survived but whose value did not are counted and listed. A refused salvage
//! removes the new pool it had created.

use super::kv::{escape, warn_durability, NewPoolArgs, OpenArgs};
use super::CmdResult;
use crate::Outcome;
use pmkv::{Registry, Store};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The damaged pool file (read only, never changed).
    pub damaged: PathBuf,
    /// The new pool to create (must not exist).
    pub new: PathBuf,
    /// The damaged pool's engine, if its header is too damaged to say.
    #[arg(long)]
    pub engine: Option<String>,
    #[command(flatten)]
    pub size: NewPoolArgs,
    #[command(flatten)]
    pub open: OpenArgs,
}

pub fn run(a: Args) -> CmdResult {
    let reg = Registry::builtin();
    let factory = match &a.engine {
        Some(name) => reg.get(name)?,
        None => reg
            .for_pool(&a.damaged)
            .map_err(|e| format!("{e}; if the header is what was damaged, name the engine with --engine"))?,
    };
    if std::fs::symlink_metadata(&a.new).is_ok() {
        return Err(format!("{}: already exists (salvage writes a new pool)", a.new.display()).into());
    }
    let image = std::fs::read(&a.damaged).map_err(|e| format!("{}: {e}", a.damaged.display()))?;
    let opts = a.size.apply(a.open.options()?.create(true));
    let store = Store::open_with(factory, &a.new, &opts)?;
    let durability = store.durability();
    let report = match factory.salvage(&image, &mut |k, v| store.put(k, v)) {
        Ok(r) => r,
        Err(e) => {
            // Nothing to keep: the new pool did not exist before (checked above), so a
            // refused salvage leaves no half-filled pool behind to be mistaken for a copy.
            drop(store);
            let _ = std::fs::remove_file(&a.new);
            return Err(e.into());
        }
    };
    store.close()?;
    outln!("salvaged         {} records into {}", report.records, a.new.display())?;
    outln!("lost             {} records whose value failed its check", report.damaged)?;
    outln!("duplicates       {} stale copies skipped", report.duplicates)?;
    for k in &report.lost_keys {
        outln!("lost key         {}", escape(k))?;
    }
    // Last, once the report is out: a command that fails (its output lost to a full
    // device, say) prints its one error line and no warning.
    crate::output::flush()?;
    warn_durability(&durability, &a.new);
    Ok(Outcome::Ok)
}
