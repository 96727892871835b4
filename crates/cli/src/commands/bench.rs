//! `pmkv bench ...`: forwarded to the benchmark harness (`pmkv-bench`), compiled in only
//! with the `bench` feature so the plain commands do not link it.

use super::CmdResult;
use crate::Outcome;

pub use pmkv_bench::command::Args;

pub fn run(a: Args) -> CmdResult {
    pmkv_bench::command::execute(a).map(|()| Outcome::Ok)
}
