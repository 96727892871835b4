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
        println!("{}\t{}", i.name, i.description);
        println!("  persistent      {}", if i.persistent { "yes" } else { "no (nothing survives close)" });
        println!("  pool layout     {}", f.layout().unwrap_or("-"));
        println!("  atomic batches  {}", if i.atomic_batches { "yes" } else { "no (a crash leaves a prefix)" });
        println!("  max key         {}", limit(i.max_key_len));
        println!("  max value       {}", limit(i.max_value_len));
        for p in f.params() {
            println!("  --param {}=...  {}", p.name, p.doc);
        }
    }
    Ok(Outcome::Ok)
}
