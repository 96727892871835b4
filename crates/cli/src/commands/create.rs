//! `pmkv create POOL --engine E`: a new, empty pool, so that `put` has somewhere to write
//! without loading an empty file. An existing file is refused, never opened or changed:
//! creating is the one command whose meaning is "there was nothing here".

use super::kv::{warn_durability, NewPoolArgs, OpenArgs};
use super::CmdResult;
use crate::Outcome;
use pmkv::{Registry, Store};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The new pool file (refused if anything is there).
    pub pool: PathBuf,
    /// Engine of the pool (`pmkv engines` lists them).
    #[arg(long, default_value = "hart")]
    pub engine: String,
    #[command(flatten)]
    pub size: NewPoolArgs,
    #[command(flatten)]
    pub open: OpenArgs,
}

pub fn run(a: Args) -> CmdResult {
    let factory = Registry::builtin().get(&a.engine)?;
    if !factory.info().persistent {
        return Err(format!("engine '{}' keeps nothing: it has no pool to create", a.engine).into());
    }
    // Checked first so that an existing pool is not even opened. (A file that appears
    // between this check and the create is opened as it is, unchanged unless it is a
    // pool of this engine; the window is one system call wide.)
    if std::fs::symlink_metadata(&a.pool).is_ok() {
        return Err(format!(
            "{}: already exists; `pmkv info {}` shows what it is (remove it first to start afresh)",
            a.pool.display(),
            a.pool.display()
        )
        .into());
    }
    let opts = a.size.apply(a.open.options()?.create(true));
    let store = Store::open_with(factory, &a.pool, &opts)?;
    let durability = store.durability();
    store.close()?;
    errln!("created {} ({} pool, empty)", a.pool.display(), a.engine);
    warn_durability(&durability, &a.pool);
    Ok(Outcome::Ok)
}
