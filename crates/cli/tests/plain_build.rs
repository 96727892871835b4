//! The plain `pmkv` (built without the `bench` feature): it has no benchmarks, and
//! `pmkv bench ...` says in one line how to get them (exit 2).
//!
//! `--all-features` builds compile this file to nothing, so `scripts/test` also runs it in a
//! default-feature build (`cargo test -p pmkv-cli --test plain_build`).
#![cfg(not(feature = "bench"))]

use std::process::Command;

#[test]
fn u2_bench_without_the_feature_says_how_to_get_it() {
    for args in [&["bench"][..], &["bench", "run", "-w", "dictionary"], &["bench", "--help"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_pmkv")).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr:?}");
        assert!(stderr.starts_with("pmkv: ") && stderr.contains("--features bench"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn u2_help_lists_bench_as_not_in_this_build() {
    let out = Command::new(env!("CARGO_BIN_EXE_pmkv")).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let line = help.lines().find(|l| l.trim_start().starts_with("bench ")).unwrap_or_else(|| panic!("{help}"));
    assert!(line.contains("--features bench"), "{line}");
}
