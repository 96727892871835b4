//! # pmkv-testutil — what pmkv's tests share
//!
//! It sits just above the substrate and below every engine and the API, so that engine
//! tests, API tests and the conformance suite use one copy of each helper:
//!
//! * pools: temporary directories and files ([`pool_dir`], [`pool_file`], [`disk_dir`]) and
//!   what they live on by the mount table ([`expected_medium`]), options
//!   ([`pool_opts`], [`small_opts`], [`sim_opts`]), bytes read and written at an offset
//!   ([`read_bytes`], [`write_bytes`], [`read_u64`], [`write_u64`]);
//! * pool files: a good one to start from ([`write_pool`]), files of given bytes
//!   ([`write_file`]), damaged copies ([`patched_copy`], [`forge_version`]);
//! * the reference model ([`Model`], [`Op`], [`apply`]) and what a scan of it returns
//!   ([`model_of_scan`], [`model_range`], [`in_bounds`], [`bound_kinds`]);
//! * operation generators: proptest strategies ([`strategy`]) and a seeded stream for
//!   threaded tests ([`op_stream`]); keys that break naive engines ([`edge_keys`]); values
//!   a reader can verify ([`tagged_value`], [`tag_of`]);
//! * crash-image checks shared between a test and its simulator hook ([`CrashFindings`]);
//! * the Dictionary workload ([`words`]);
//! * scenarios every engine's own tests run alike, over the [`harness::Kv`] trait.

#![deny(unsafe_code)]

mod bytes;
mod crash;
mod files;
pub mod harness;
mod model;
mod mounts;
pub mod native_crash;
mod rng;
pub mod strategy;
mod values;

pub use bytes::{read_bytes, read_u64, write_bytes, write_u64};
pub use crash::CrashFindings;
pub use files::{forge_version, patched_copy, write_file, write_pool};
pub use model::{apply, bound_kinds, in_bounds, model_of_scan, model_range, Model, Op, Records};
pub use mounts::{disk_dir, expected_medium, mount_of};
pub use native_crash::{native_contents, probe_write, NativeCrash};
pub use rng::XorShift;
pub use tempfile::TempDir;
pub use values::{edge_keys, op_stream, tag_of, tagged_value};

use pmkv_substrate::{Latency, Mode, PoolOptions};

/// A directory for pool files, removed on drop: on /dev/shm when there is one (memory,
/// the closest thing to PM here, and fast), else the system temp directory.
pub fn pool_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm).expect("temp dir in /dev/shm")
    } else {
        tempfile::tempdir().expect("temp dir")
    }
}

/// A path for a pool file named `name` in a fresh [`pool_dir`], with the directory: keep
/// it alive (bound to a name, not `_`) as long as the file is used.
pub fn pool_file(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = pool_dir();
    let path = dir.path().join(name);
    (dir, path)
}

/// The pool file at `path` (`layout`, `opts`), opened if it exists, else created: a
/// test that reopens one pool across rounds.
pub fn open_or_create(path: &std::path::Path, layout: &str, opts: &PoolOptions) -> pmkv_substrate::Pool {
    match pmkv_substrate::Pool::open(path, Some(layout), opts) {
        Ok(p) => p,
        Err(_) => pmkv_substrate::Pool::create(path, layout, opts).expect("create the pool"),
    }
}

/// The median of `v` (the mean of the middle two for an even count): what a benchmark of
/// alternating rounds reports.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let k = v.len();
    if k % 2 == 1 {
        v[k / 2]
    } else {
        (v[k / 2 - 1] + v[k / 2]) / 2.0
    }
}

/// Options of a test pool: `mode`, `size` bytes at first, growing up to `max`, and no
/// emulated latency whatever `PMKV_LATENCY` says (tests that time latency set their own).
pub fn pool_opts(mode: Mode, size: u64, max: u64) -> PoolOptions {
    PoolOptions::default().mode(mode).latency(Latency::NONE).initial_size(size).max_size(max)
}

/// Options of a small test pool: 64 KiB growing to 1 MiB, `adr` mode — for tests of pool
/// files, headers, locks and roots, where little data goes in.
pub fn small_opts() -> PoolOptions {
    pool_opts(Mode::Adr, 64 << 10, 1 << 20)
}

/// Options of a crash-simulation pool of `size` bytes (growing to 64 MiB), `adr` mode: the
/// mode in which unflushed lines can be lost, so the simulator has the most to explore.
pub fn sim_opts(size: u64) -> PoolOptions {
    pool_opts(Mode::Adr, size, 64 << 20)
}

/// Number of words in [`words`].
pub const WORDS: usize = 466_551;

/// The Dictionary workload (SPEC W): the 466,551 words of `data/words.txt.gz` at the
/// workspace root, in file order.
pub fn words() -> Vec<Vec<u8>> {
    use std::io::Read;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/words.txt.gz");
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut s = Vec::new();
    flate2::read::GzDecoder::new(f).read_to_end(&mut s).unwrap_or_else(|e| panic!("gzip of {path}: {e}"));
    s.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| l.to_vec()).collect()
}

/// A crash-simulation pool of 256 KiB with `heap` bytes taken from its heap, at the
/// returned offset: for this crate's own tests.
#[cfg(test)]
fn test_pool(heap: u64) -> (pmkv_substrate::Pool, u64) {
    let pool = pmkv_substrate::Pool::create_sim("t", &sim_opts(256 << 10)).expect("sim pool");
    let off = pool.take_heap(heap, 64).expect("heap");
    (pool, off)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_dirs_are_fresh_and_removed() {
        let d = pool_dir();
        let p = d.path().to_path_buf();
        assert!(p.is_dir() && std::fs::read_dir(&p).unwrap().next().is_none());
        if std::path::Path::new("/dev/shm").is_dir() {
            assert!(p.starts_with("/dev/shm"), "{p:?}");
        }
        assert_ne!(pool_dir().path(), p);
        drop(d);
        assert!(!p.exists());
        let (d, path) = pool_file("x.pool");
        assert_eq!(path.parent(), Some(d.path()));
        assert!(path.ends_with("x.pool") && !path.exists());
    }

    #[test]
    fn pool_options_say_what_they_were_given() {
        let o = pool_opts(Mode::Msync, 1 << 20, 8 << 20);
        assert_eq!((o.mode, o.initial_size, o.max_size, o.latency), (Mode::Msync, 1 << 20, 8 << 20, Latency::NONE));
        let o = small_opts();
        assert_eq!((o.mode, o.initial_size, o.max_size, o.latency), (Mode::Adr, 64 << 10, 1 << 20, Latency::NONE));
        let o = sim_opts(256 << 10);
        assert_eq!((o.mode, o.initial_size, o.max_size, o.latency), (Mode::Adr, 256 << 10, 64 << 20, Latency::NONE));
        pmkv_substrate::Pool::create_sim("t", &o).expect("a sim pool opens with sim_opts");
    }

    #[test]
    fn the_dictionary_is_there() {
        let w = words();
        assert_eq!(w.len(), WORDS);
        assert!(w.iter().all(|w| !w.is_empty() && !w.contains(&b'\n')));
    }
}
