//! What a directory lives on, read from the mount table: the oracle the tests of medium
//! detection check `Medium::of_file` (which asks `fstatfs` and probes `MAP_SYNC`)
//! against, so that a test does not repeat the code it tests.

use pmkv_substrate::Medium;
use std::path::Path;

/// The file-system type and mount options of the mount that holds `path` (the mount
/// point that is the longest prefix of its canonical path, in `/proc/self/mounts`), or
/// `None` where there is no mount table.
pub fn mount_of(path: &Path) -> Option<(String, String)> {
    let path = path.canonicalize().ok()?;
    let table = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let mut best: Option<(usize, String, String)> = None;
    for line in table.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [_, at, fs, opts, ..] = f[..] else { continue };
        // Spaces and the like in mount points are octal escapes (`\040`).
        let at = at.replace("\\040", " ");
        if path.starts_with(&at) && best.as_ref().is_none_or(|(n, _, _)| at.len() >= *n) {
            best = Some((at.len(), fs.to_string(), opts.to_string()));
        }
    }
    best.map(|(_, fs, opts)| (fs, opts))
}

/// The medium a pool in `dir` should report, by the mount table: memory for tmpfs, ramfs
/// and hugetlbfs, DAX for a mount with the `dax` option, a disk for anything else.
pub fn expected_medium(dir: &Path) -> Option<Medium> {
    let (fs, opts) = mount_of(dir)?;
    Some(if matches!(fs.as_str(), "tmpfs" | "ramfs" | "hugetlbfs") {
        Medium::Memory
    } else if opts.split(',').any(|o| o == "dax" || o == "dax=always") {
        Medium::Dax
    } else {
        Medium::Disk
    })
}

/// A temporary directory on a disk file system, if this machine has one where tests may
/// write: the system temp directory, else `fallback` (give the test's
/// `CARGO_TARGET_TMPDIR`, inside the build's target directory). `None` if neither is on
/// a disk by the mount table.
pub fn disk_dir(fallback: &Path) -> Option<tempfile::TempDir> {
    let _ = std::fs::create_dir_all(fallback);
    [std::env::temp_dir(), fallback.to_path_buf()]
        .into_iter()
        .find(|d| expected_medium(d) == Some(Medium::Disk))
        .and_then(|d| tempfile::tempdir_in(d).ok())
}
