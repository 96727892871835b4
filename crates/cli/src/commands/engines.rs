//! `pmkv engines`: the engines of this build (the library's registry), what each offers,
//! and the parameters `--param KEY=VALUE` passes to it.

use super::CmdResult;
use crate::Outcome;

#[derive(clap::Args)]
pub struct Args {}

/// The engines built only as the papers' competitors (FPTree, WOART, ART+CoW, FAST&FAIR):
/// the reproductions measure pmkv's engines against them, and they pass the conformance
/// tests, but they lack what a user's data needs (FAST&FAIR is untuned, none has been
/// hardened against damage as hart, mangosteen and nbtree have), as the README says.
const COMPETITORS: [&str; 4] = ["fptree", "woart", "artcow", "fastfair"];

pub fn run(_: Args) -> CmdResult {
    for f in pmkv::Registry::builtin().factories() {
        let i = f.info();
        let limit = |n: usize| if n == usize::MAX { "unlimited".to_string() } else { format!("{n} bytes") };
        outln!("{}\t{}", i.name, i.description)?;
        if COMPETITORS.contains(&i.name) {
            outln!(
                "  use             competitor, not for use: a paper's baseline, for `reproduce` and `bench run -e`"
            )?;
        }
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
