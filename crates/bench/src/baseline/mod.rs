//! Baselines measured in the same run as pmkv's engines: an industrial embedded store
//! (LMDB) besides the volatile `BTreeMap` that lives in the `pmkv` crate, and the `null`
//! engine that measures the harness itself.

pub mod lmdb;
pub mod null;
