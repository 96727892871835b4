//! The plain `pmkv` (built without the `bench` feature): it has no benchmarks, and
//! `pmkv bench ...` says in one line how to get them (exit 2).
//!
//! `--all-features` builds compile this file to nothing, so `scripts/test` also runs it in a
//! default-feature build (`cargo test -p pmkv-cli --test plain_build`).
#![cfg(not(feature = "bench"))]

mod common;
use common::*;

#[test]
fn u2_bench_without_the_feature_says_how_to_get_it() {
    for args in [&["bench"][..], &["bench", "run", "-w", "dictionary"], &["bench", "--help"]] {
        let out = pmkv(args);
        assert_refused(&out);
        assert!(text(&out.stderr).contains("--features bench"), "{args:?}: {}", text(&out.stderr));
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn u2_help_lists_bench_as_not_in_this_build() {
    let out = pmkv(&["--help"]);
    assert!(out.status.success());
    let help = text(&out.stdout);
    let line = help.lines().find(|l| l.trim_start().starts_with("bench ")).unwrap_or_else(|| panic!("{help}"));
    assert!(line.contains("--features bench"), "{line}");
}
