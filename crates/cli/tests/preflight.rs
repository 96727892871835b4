//! `scripts/preflight` (run first by `scripts/test`): on a machine that lacks a
//! prerequisite it stops within seconds, naming it and the Debian package to install.
//! The machine is simulated by a PATH that holds every program of the real one but the
//! hidden ones.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A directory of links to every program on this PATH except `hidden`.
fn path_without(hidden: &[&str]) -> common::TempDir {
    let dir = common::pool_dir();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in std::env::split_paths(&path) {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let name = e.file_name();
            let to = dir.path().join(&name);
            if hidden.iter().any(|h| name == **h) || to.exists() {
                continue;
            }
            let _ = std::os::unix::fs::symlink(e.path(), to);
        }
    }
    dir
}

/// Run the preflight with `hidden` programs missing; returns (status, stderr, time taken).
fn preflight(hidden: &[&str]) -> (Option<i32>, String, Duration) {
    let bin = path_without(hidden);
    let t = Instant::now();
    let o = std::process::Command::new(root().join("scripts/preflight"))
        .current_dir(root())
        .env("PATH", bin.path())
        .output()
        .expect("running scripts/preflight");
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned(), t.elapsed())
}

#[test]
fn a_missing_prerequisite_stops_the_test_run_within_30_seconds_naming_it() {
    let (code, err, took) = preflight(&["clang-19", "redis-cli"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert!(err.contains("  - clang-19\n") && err.contains("  - redis-cli\n"), "{err}");
    let apt = err.lines().find(|l| l.starts_with("On Debian or Ubuntu: sudo apt-get install")).unwrap_or("");
    assert!(apt.contains(" clang-19") && apt.contains(" redis-tools"), "{err}");
    // And scripts/test runs it before anything else.
    let test = std::fs::read_to_string(root().join("scripts/test")).unwrap();
    let first = test.lines().find(|l| !l.starts_with('#') && l.contains("cargo ") || l.trim() == "scripts/preflight");
    assert_eq!(first.map(str::trim), Some("scripts/preflight"), "scripts/test must run the preflight first");
}
