//! # pmkv-hart — HART on pmkv's substrate
//!
//! HART (Pan et al., "HART: A Concurrent Hash-Assisted Radix Tree for DRAM-PM Hybrid
//! Memory Systems", IPDPS 2019): a DRAM hash table keyed by the first k_h bytes of a key
//! ([`hash_table`]), one adaptive radix tree per hash key in DRAM ([`art`]), leaves and
//! values in PM allocated by EPallocator ([`layout`]), an update micro-log
//! ([`micro_log`]), and recovery from the leaf chunk list ([`recovery`]).

pub mod art;
pub mod checker;
mod engine;
pub mod error;
pub mod hart;
pub mod hash_table;
pub mod layout;
pub mod micro_log;
pub mod recovery;

pub use engine::{hart_options, HartEngine, HartFactory, FACTORY, LAYOUT};
pub use error::{HartError, Result};
pub use hart::{Hart, HartOptions, RecoveryReport};
