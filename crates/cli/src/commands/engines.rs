//! `pmkv engines`: the engines of this build (the library's registry), what each offers,
//! and the parameters `--param KEY=VALUE` passes to it.

use super::CmdResult;
use crate::Outcome;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_: Args) -> CmdResult {
    for f in pmkv::Registry::builtin().factories() {
        let i = f.info();
        let limit = |n: usize| if n == usize::MAX { "unlimited".to_string() } else { format!("{n} bytes") };
        outln!("{}\t{}", i.name, i.description)?;
        outln!("  persistent      {}", if i.persistent { "yes" } else { "no (nothing survives close)" })?;
        outln!("  pool layout     {}", f.layout().unwrap_or("-"))?;
        outln!("  atomic batches  {}", if i.atomic_batches { "yes" } else { "no (a crash leaves a prefix)" })?;
        outln!("  max key         {}", limit(i.max_key_len))?;
        outln!("  max value       {}", limit(i.max_value_len))?;
        for p in f.params() {
            outln!("  --param {}=...  {}", p.name, p.doc)?;
        }
    }
    Ok(Outcome::Ok)
}
