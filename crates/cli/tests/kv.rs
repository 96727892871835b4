//! SPEC U2: the key-value commands through the real binary — exit codes (0 ok, 1 missing,
//! 2 error with one line on stderr), escaping, dump/load round trip, scan bounds.

mod common;
use common::*;

#[test]
fn u2_kv_commands() {
    let dir = pool_dir();
    let pool = dir.path().join("kv.pool");
    let p = pool.to_str().unwrap();
    let words = write_file(dir.path(), "words.txt", "pear\napple\nfig\n");
    assert!(pmkv(&["load", p, words.to_str().unwrap()]).status.success());
    assert_eq!(text(&pmkv(&["get", p, "apple"]).stdout), "2\n");
    assert_eq!(pmkv(&["get", p, "kiwi"]).status.code(), Some(1));
    assert!(pmkv(&["put", p, "z\\x00\\xff", "bin\\x01"]).status.success());
    assert_eq!(text(&pmkv(&["get", p, "z\\x00\\xff"]).stdout), "bin\\x01\n");
    assert_eq!(text(&pmkv(&["scan", p, "--from", "b", "--before", "p"]).stdout), "fig\t3\n");
    assert_eq!(text(&pmkv(&["scan", p, "--limit", "1"]).stdout), "apple\t2\n");
    assert!(pmkv(&["del", p, "fig"]).status.success());
    assert_eq!(pmkv(&["del", p, "fig"]).status.code(), Some(1));
    let dump = text(&pmkv(&["dump", p]).stdout);
    assert_eq!(dump, "apple\t2\npear\t1\nz\\x00\\xff\tbin\\x01\n");
    // Round trip through a dump.
    let tsv = write_file(dir.path(), "dump.tsv", &dump);
    let copy = dir.path().join("copy.pool");
    assert!(pmkv(&["load", copy.to_str().unwrap(), tsv.to_str().unwrap(), "--tsv"]).status.success());
    assert_eq!(text(&pmkv(&["dump", copy.to_str().unwrap()]).stdout), dump);
    assert!(pmkv(&["check", p]).status.success());
    // The reading commands open the pool read-only: the file does not change at all.
    let before = std::fs::read(&pool).unwrap();
    assert_eq!(text(&pmkv(&["get", p, "apple"]).stdout), "2\n");
    assert_eq!(text(&pmkv(&["scan", p, "--limit", "1"]).stdout), "apple\t2\n");
    assert_eq!(text(&pmkv(&["dump", p]).stdout), dump);
    assert!(pmkv(&["check", p, "--stats"]).status.success());
    assert!(std::fs::read(&pool).unwrap() == before, "a reading command changed the pool file");
    // Errors: missing pool, not a pool, unknown or pool-less engine, malformed TSV.
    assert_refused(&pmkv(&["get", dir.path().join("none.pool").to_str().unwrap(), "k"]));
    assert_refused(&pmkv(&["get", words.to_str().unwrap(), "k"]));
    for engine in ["nosuch", "volatile"] {
        let pool = dir.path().join(format!("{engine}.pool"));
        assert_refused(&pmkv(&["load", pool.to_str().unwrap(), words.to_str().unwrap(), "--engine", engine]));
    }
    assert_refused(&pmkv(&["load", dir.path().join("t.pool").to_str().unwrap(), words.to_str().unwrap(), "--tsv"]));
}

#[test]
fn u2_engines_lists_every_engine_with_its_parameters() {
    let out = pmkv(&["engines"]);
    assert!(out.status.success());
    let s = text(&out.stdout);
    for name in pmkv::Registry::builtin().names() {
        assert!(s.lines().any(|l| l.starts_with(&format!("{name}\t"))), "{name} missing in\n{s}");
    }
    assert!(s.contains("--param hash_key_len=..."), "{s}");
    assert!(s.contains("persistent      no"), "volatile says it keeps nothing: {s}");
}

#[test]
fn u2_param_reaches_the_engine_and_unknown_ones_are_refused() {
    let dir = pool_dir();
    let words = write_file(dir.path(), "w.txt", "alpha\nbeta\n");
    let pool = dir.path().join("p.pool");
    let p = pool.to_str().unwrap();
    let out = pmkv(&["load", p, words.to_str().unwrap(), "--param", "no_such=1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no_such"));
    assert!(pmkv(&["load", p, words.to_str().unwrap(), "--param", "hash_key_len=3"]).status.success());
    let out = pmkv(&["scan", p, "--reverse", "--limit", "1"]);
    assert_eq!(text(&out.stdout), "beta\t2\n");
}

/// A new pool starts at 64 KiB and grows on demand; `--initial-size` (bytes, or with a
/// unit) starts it larger, as does `--initial-mib`, its older spelling; both at once, or
/// a size that is not one, are refused before any file is made.
#[test]
fn u2_new_pools_start_small_unless_told_otherwise() {
    let dir = pool_dir();
    let words = write_file(dir.path(), "w.txt", "alpha\nbeta\n");
    let w = words.to_str().unwrap();
    let size_of = |p: &std::path::Path| std::fs::metadata(p).unwrap().len();
    for (name, args, want) in [
        ("default.pool", &[][..], 64u64 << 10),
        ("kb.pool", &["--initial-size", "256kb"][..], 256 << 10),
        ("bytes.pool", &["--initial-size", "1000000"][..], 1_003_520), // rounded up to a page
        ("mib.pool", &["--initial-mib", "2"][..], 2 << 20),
    ] {
        let pool = dir.path().join(name);
        let o = pmkv_command().args(["load", pool.to_str().unwrap(), w]).args(args).output().unwrap();
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        assert_eq!(size_of(&pool), want, "{name}");
    }
    for args in [&["--initial-size", "1mb", "--initial-mib", "1"][..], &["--initial-size", "lots"][..]] {
        let pool = dir.path().join("refused.pool");
        let o = pmkv_command().args(["load", pool.to_str().unwrap(), w]).args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(!pool.exists(), "{args:?}: a refused load created its pool");
    }
    let help = text(&pmkv(&["load", "--help"]).stdout);
    assert!(help.contains("--initial-size") && help.contains("default 64kb"), "{help}");
    assert!(!help.contains("--initial-mib"), "the older spelling is hidden: {help}");
}
