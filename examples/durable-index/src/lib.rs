//! A program's own inverted index ([`index::Index`]) made durable with Mangosteen's
//! compiler capture, beside its plain version: the example of docs/design/mangosteen.md,
//! "Compiler capture of a program's own structure".
//!
//! * `src/index.rs`: the structure, plain Rust;
//! * `src/durable_part.rs`: its writes, compiled with capture by `build.rs`;
//! * [`DurableIndex`] (here): the program's side, loading that module and naming its
//!   writes; reads run this crate's own code of `Index` on the region.

pub mod index;

use index::Index;
use pmkv_mangosteen::{Captured, CapturedModule, Op, Options, Result};
use pmkv_substrate::Pool;
use std::sync::Arc;

/// The captured module `build.rs` compiled.
pub static MODULE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/index.so"));

/// The index, durable in a Mangosteen pool.
pub struct DurableIndex {
    pub captured: Captured<Index>,
    add: Op<Index, (&'static str, u32), usize>,
    add_doc: Op<Index, (u32, &'static [&'static str]), usize>,
    add_range: Op<Index, (&'static str, u32, u32), usize>,
    remove: Op<Index, &'static str, usize>,
}

impl DurableIndex {
    /// Open (or make) the index in `pool`.
    pub fn open(pool: Arc<Pool>, opts: Options) -> Result<DurableIndex> {
        let captured = Captured::<Index>::open(pool, opts, CapturedModule::load(MODULE)?)?;
        Ok(DurableIndex {
            add: captured.op("add")?,
            add_doc: captured.op("add_doc")?,
            add_range: captured.op("add_range")?,
            remove: captured.op("remove")?,
            captured,
        })
    }

    /// [`Index::add`], durable once it returns.
    pub fn add(&self, word: &str, doc: u32) -> Result<usize> {
        self.captured.write(&self.add, (word, doc))
    }

    /// [`Index::add_doc`], durable once it returns.
    pub fn add_doc(&self, doc: u32, words: &[&str]) -> Result<usize> {
        self.captured.write(&self.add_doc, (doc, words))
    }

    /// [`Index::add_range`], durable once it returns.
    pub fn add_range(&self, word: &str, first: u32, n: u32) -> Result<usize> {
        self.captured.write(&self.add_range, (word, first, n))
    }

    /// [`Index::remove`], durable once it returns.
    pub fn remove(&self, word: &str) -> Result<usize> {
        self.captured.write(&self.remove, word)
    }

    /// Run `f` on the index (the program's own code, on the region).
    pub fn read<R>(&self, f: impl FnOnce(&Index) -> R) -> R {
        self.captured.read(f)
    }
}
