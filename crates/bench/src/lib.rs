//! # pmkv-bench — the benchmark harness (SPEC U5, workloads SPEC W)
//!
//! One module per concept:
//!
//! * [`workload`] — key sets (Dictionary, Sequential, Random, 8-byte integers) and
//!   operation mixes (HART's three, YCSB A–F, sweeps), deterministic given a seed;
//! * [`zipf`] — an exact Zipfian generator (rejection-inversion), θ configurable;
//! * [`rng`] — the portable PRNG everything above draws from;
//! * [`measure`] — the timed executor: ns/op, Mops/s, HDR-histogram percentiles, and the
//!   substrate's per-thread persistence counters summed over workers;
//! * [`experiment`] — basic operations, mixes, range queries, memory, build vs recovery;
//! * [`engines`] — every engine of `pmkv::Registry::builtin()` plus [`baseline`]s (LMDB via heed);
//! * [`report`] — terminal tables, JSON, CSV; [`plot`] — PNG and SVG figures;
//! * [`stats`] — medians and ranges of repeated runs; [`human`] — rates and durations as
//!   people read them; [`progress`] — plans of steps with progress and an estimate;
//! * [`reproduce`] — the papers' experiments (`pmkv bench reproduce hart`);
//! * [`command`] — the `pmkv bench` subcommands (arguments and what each runs), which the
//!   `pmkv` CLI forwards to when built with its `bench` feature.

pub mod baseline;
pub mod command;
pub mod engines;
pub mod experiment;
pub mod human;
pub mod measure;
pub mod pages;
pub mod plot;
pub mod progress;
pub mod report;
pub mod reproduce;
pub mod rng;
pub mod stats;
pub mod workload;
pub mod zipf;

/// Errors of the harness: one printable line.
#[derive(Debug)]
pub struct BenchError(pub String);

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

impl From<String> for BenchError {
    fn from(s: String) -> Self {
        BenchError(s)
    }
}

impl From<&str> for BenchError {
    fn from(s: &str) -> Self {
        BenchError(s.into())
    }
}

impl From<std::io::Error> for BenchError {
    fn from(e: std::io::Error) -> Self {
        BenchError(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, BenchError>;

/// Where temporary pools go: `dir` if given, else /dev/shm (memory, the closest thing to PM
/// here) when it exists, else the system temp directory.
pub fn pool_base(dir: Option<&std::path::Path>) -> std::path::PathBuf {
    match dir {
        Some(d) => d.to_path_buf(),
        None => {
            let shm = std::path::PathBuf::from("/dev/shm");
            if shm.is_dir() {
                shm
            } else {
                std::env::temp_dir()
            }
        }
    }
}

/// A temporary directory for pools under [`pool_base`]`(base)`. Deleted when dropped.
pub fn pool_dir(base: Option<&std::path::Path>) -> Result<tempfile::TempDir> {
    let base = pool_base(base);
    tempfile::Builder::new()
        .prefix("pmkv-bench-")
        .tempdir_in(&base)
        .map_err(|e| BenchError(format!("cannot create a pool directory in {}: {e}", base.display())))
}
