//! The examples a user copies (`examples/`) run as they are, each in a directory of its
//! own, and the README's quick starts are those files, byte for byte (the README shows the
//! code to a reader on GitHub, where a file cannot be included, so a test keeps the copy
//! equal instead): the Rust one is `examples/quickstart.rs`, the C one
//! `bindings/c/examples/quickstart.c` (built and run by `bindings/c/tests/run.sh`).

/// Each example's `main`, as it is in its file.
macro_rules! example {
    ($name:ident) => {
        mod $name {
            include!(concat!("../examples/", stringify!($name), ".rs"));
            pub(super) fn run() -> Result<(), pmkv::Error> {
                main()
            }
        }
    };
}
example!(quickstart);
example!(nbtree_writers);
example!(mangosteen_region);

use std::path::Path;

/// The body of the first fenced block of `lang` after the line starting with `marker`.
fn readme_block(marker: &str, lang: &str) -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap();
    let from = readme.find(&format!("\n{marker}")).unwrap_or_else(|| panic!("README has no line {marker:?}"));
    let rest = &readme[from..];
    let open = format!("\n```{lang}\n");
    let start = rest.find(&open).unwrap_or_else(|| panic!("no ```{lang} block after {marker:?}")) + open.len();
    let end = rest[start..].find("\n```\n").expect("an unterminated block") + start;
    rest[start..=end].to_string()
}

fn file(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

#[test]
fn readme_quick_starts_are_the_example_files() {
    assert_eq!(readme_block("**Rust**", "rust,no_run"), file("examples/quickstart.rs"), "README's Rust quick start");
    assert_eq!(readme_block("**C**", "c"), file("../../bindings/c/examples/quickstart.c"), "README's C quick start");
}

/// Every example, run in a fresh directory (they write their pools to the current one):
/// one test, as the current directory is the process's.
#[test]
fn examples_run_in_a_fresh_directory() {
    let back = std::env::current_dir().unwrap();
    type Run = fn() -> pmkv::Result<()>;
    type Check = fn(&pmkv::Store);
    let runs: [(&str, Run, &str, Check); 3] = [
        ("quickstart", quickstart::run, "demo.pool", |s| {
            let all = s.collect(&pmkv::KeyRange::all(), pmkv::Direction::Forward, 10).unwrap();
            assert_eq!(all, [(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"2".to_vec())]);
        }),
        ("nbtree_writers", nbtree_writers::run, "orders.pool", |s| {
            // 4,000 ids, a few of them equal (they are taken modulo a million).
            assert!((3_900..=4_000).contains(&s.len().unwrap()), "{}", s.len().unwrap());
            assert_eq!(s.info().name, "nbtree");
        }),
        ("mangosteen_region", mangosteen_region::run, "sessions.pool", |s| {
            assert_eq!(s.get(b"session:00000").unwrap().as_deref(), Some(&b"renewed"[..]));
            assert!(s.get(b"session:00001").unwrap().is_none());
            assert!(s.len().unwrap() > 100, "a 1 MiB region holds more than 100 values of 1 KB");
        }),
    ];
    for (name, run, pool, check) in runs {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_current_dir(dir.path()).unwrap();
        // Twice: a user runs an example again on the pool the first run left.
        for round in 0..2 {
            run().unwrap_or_else(|e| panic!("example {name}, run {round}: {e}"));
        }
        std::env::set_current_dir(&back).unwrap();
        let store = pmkv::Store::open_existing(dir.path().join(pool), &pmkv::Options::default()).unwrap();
        check(&store);
        store.close().unwrap();
    }
}
