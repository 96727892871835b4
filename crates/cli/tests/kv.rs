//! SPEC U2: the key-value commands through the real binary — exit codes (0 ok, 1 missing,
//! 2 error with one line on stderr), escaping, dump/load round trip, scan bounds.

use std::process::{Command, Output};

fn pmkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pmkv")).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn assert_error(o: &Output) {
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("pmkv: ") && !err.contains("panicked"), "{err}");
}

#[test]
fn u2_kv_commands() {
    let dir =
        tempfile::tempdir_in(if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" }).unwrap();
    let pool = dir.path().join("kv.pool");
    let p = pool.to_str().unwrap();
    let words = dir.path().join("words.txt");
    std::fs::write(&words, "pear\napple\nfig\n").unwrap();
    assert!(pmkv(&["load", p, words.to_str().unwrap()]).status.success());
    assert_eq!(stdout(&pmkv(&["get", p, "apple"])), "2\n");
    assert_eq!(pmkv(&["get", p, "kiwi"]).status.code(), Some(1));
    assert!(pmkv(&["put", p, "z\\x00\\xff", "bin\\x01"]).status.success());
    assert_eq!(stdout(&pmkv(&["get", p, "z\\x00\\xff"])), "bin\\x01\n");
    assert_eq!(stdout(&pmkv(&["scan", p, "--from", "b", "--to", "p"])), "fig\t3\n");
    assert_eq!(stdout(&pmkv(&["scan", p, "--limit", "1"])), "apple\t2\n");
    assert!(pmkv(&["del", p, "fig"]).status.success());
    assert_eq!(pmkv(&["del", p, "fig"]).status.code(), Some(1));
    let dump = stdout(&pmkv(&["dump", p]));
    assert_eq!(dump, "apple\t2\npear\t1\nz\\x00\\xff\tbin\\x01\n");
    // Round trip through a dump.
    let tsv = dir.path().join("dump.tsv");
    std::fs::write(&tsv, &dump).unwrap();
    let copy = dir.path().join("copy.pool");
    assert!(pmkv(&["load", copy.to_str().unwrap(), tsv.to_str().unwrap(), "--tsv"]).status.success());
    assert_eq!(stdout(&pmkv(&["dump", copy.to_str().unwrap()])), dump);
    assert!(pmkv(&["check", p]).status.success());
    // The reading commands open the pool read-only: the file does not change at all.
    let before = std::fs::read(&pool).unwrap();
    assert_eq!(stdout(&pmkv(&["get", p, "apple"])), "2\n");
    assert_eq!(stdout(&pmkv(&["scan", p, "--limit", "1"])), "apple\t2\n");
    assert_eq!(stdout(&pmkv(&["dump", p])), dump);
    assert!(pmkv(&["check", p, "--stats"]).status.success());
    assert!(std::fs::read(&pool).unwrap() == before, "a reading command changed the pool file");
    // Errors: missing pool, not a pool, unknown or pool-less engine, malformed TSV.
    assert_error(&pmkv(&["get", dir.path().join("none.pool").to_str().unwrap(), "k"]));
    assert_error(&pmkv(&["get", words.to_str().unwrap(), "k"]));
    for engine in ["nosuch", "volatile"] {
        let pool = dir.path().join(format!("{engine}.pool"));
        assert_error(&pmkv(&["load", pool.to_str().unwrap(), words.to_str().unwrap(), "--engine", engine]));
    }
    assert_error(&pmkv(&["load", dir.path().join("t.pool").to_str().unwrap(), words.to_str().unwrap(), "--tsv"]));
}

#[test]
fn u2_engines_lists_every_engine_with_its_parameters() {
    let out = pmkv(&["engines"]);
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    for name in pmkv::Registry::builtin().names() {
        assert!(s.lines().any(|l| l.starts_with(&format!("{name}\t"))), "{name} missing in\n{s}");
    }
    assert!(s.contains("--param hash_key_len=..."), "{s}");
    assert!(s.contains("persistent      no"), "volatile says it keeps nothing: {s}");
}

#[test]
fn u2_param_reaches_the_engine_and_unknown_ones_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let words = dir.path().join("w.txt");
    std::fs::write(&words, "alpha\nbeta\n").unwrap();
    let pool = dir.path().join("p.pool");
    let p = pool.to_str().unwrap();
    let out = pmkv(&["load", p, words.to_str().unwrap(), "--param", "no_such=1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no_such"));
    assert!(pmkv(&["load", p, words.to_str().unwrap(), "--param", "hash_key_len=3"]).status.success());
    let out = pmkv(&["scan", p, "--reverse", "--limit", "1"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "beta\t2\n");
}
