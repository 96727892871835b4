//! Baselines measured in the same run as pmkv's engines: an industrial embedded store
//! (LMDB) besides the volatile `BTreeMap` that lives in the `pmkv` crate.

pub mod lmdb;
