//! # pmkv-hart — HART on pmkv's substrate
//!
//! HART (Pan et al., "HART: A Concurrent Hash-Assisted Radix Tree for DRAM-PM Hybrid
//! Memory Systems", IPDPS 2019; /work/shared/papers/hart.txt): a DRAM hash table keyed by
//! the first k_h bytes of a key, one adaptive radix tree per hash key in DRAM, and the
//! leaves and values in PM, allocated by EPallocator (§III.A). Only the leaves persist, so
//! opening a pool rebuilds the trees from them (Algorithm 7).
//!
//! ## Layers
//!
//! Each layer imports only the ones before it (`scripts/module-graph crates/hart` checks
//! that no import goes the other way):
//!
//! 1. **Format** — `layout` (the leaf, value object and superblock, byte by byte),
//!    `checksum` (the offset-seeded checks that make damage visible), `error`.
//! 2. **PM** — `pm`: the `Pm` handle (pool, EPallocator, the superblock's k_h and log
//!    offset, the first damage met) with the word, key and value accessors. It knows
//!    nothing of the trees.
//! 3. **Logs** — `micro_log` (the update log of Algorithm 3, one fence instead of four)
//!    and `insert_log` (pmkv's writer lanes: one persist per small insert), over `Pm`.
//! 4. **DRAM index** — `art` (the ART of Leis et al., lazy expansion against PM keys),
//!    `art_lock`, `hash_table` (hash key → ART, and the ordered index for scans). These
//!    need no PM: the trees read keys through the `art::KeySource` that `pm` implements.
//! 5. **Recovery** — `recovery` (Algorithm 7 with micro-log replay, torn-insert undo and
//!    an orphan sweep): from a pool it builds and returns the parts, `Pm` and the table.
//! 6. **Facade** — `hart`: [`Hart`] owns the parts, formats or recovers a pool, syncs and
//!    closes it. Its operations are one module each, named as the paper names them:
//!    `insert` (Algorithm 1), `update` (Algorithm 3), `search` (Algorithm 4), `delete`
//!    (Algorithm 5), `scan` (ordered scans, SPEC H8), `batch` (write batches, all or
//!    nothing across a crash through the substrate's batch log); `memory` accounts for the
//!    structures (SPEC H9), `checker` verifies them, `salvage` reads a damaged image.
//! 7. **Engine** — `engine`: HART behind `pmkv-core`'s engine contract ([`FACTORY`]).
//!
//! ## Public API
//!
//! [`FACTORY`] (what the `pmkv` registry lists), [`Options`], [`Error`] and [`Result`],
//! shared in shape with the other engine crates; [`Hart`] itself for programs that use
//! HART directly (the examples, the tests); and the limits [`MAX_KEY`] and [`MAX_VALUE`].
//! Recovery is reported with `pmkv_core::RecoveryReport` ([`Hart::recovery_report`]),
//! HART's own figures in its details. Everything else is crate-private: the ART node code
//! hands out raw node handles and slices whose validity rests on the crate's own locking
//! (a node is freed only under its ART's write lock), and the micro-log and PM accessors
//! write PM at the offsets they are given; their contracts are `unsafe fn`s with
//! `# Safety` sections, and the operations on `Hart` discharge them. The on-PM format is
//! documented in `layout` and in docs/format/hart.md; the reasons in docs/design/hart.md.
// Keeps the public shape above honest: an item marked `pub` that the crate root does not
// export is a warning (so an error under `clippy -D warnings`); write `pub(crate)`.
#![warn(unreachable_pub)]

pub(crate) mod art;
mod art_lock;
mod batch;
mod checker;
mod checksum;
mod delete;
mod engine;
mod error;
mod hart;
mod hash_table;
mod insert;
mod insert_log;
mod layout;
mod memory;
mod micro_log;
mod pm;
mod recovery;
mod salvage;
mod scan;
mod search;
mod update;

pub use engine::FACTORY;
pub use error::{Error, Result};
pub use hart::{Hart, Options};
pub use layout::{MAX_KEY, MAX_VALUE};
