//! What a demanding user met, through the real binary: keys and values are
//! bytes on every input path; every command's output goes through one path that reports
//! a failed write and ends quietly on a closed pipe; a crashed pool on read-only media is
//! refused with what to do.

mod common;
use common::*;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// A pool with `n` records (`k00000` = `v00000` ...), loaded through the CLI.
fn pool_with(dir: &Path, n: usize) -> String {
    let words = dir.join("in.tsv");
    let mut f = std::fs::File::create(&words).unwrap();
    for i in 0..n {
        writeln!(f, "k{i:05}\tv{i:05}").unwrap();
    }
    let pool = dir.join("p.pool").to_str().unwrap().to_string();
    let o = pmkv(&["load", &pool, words.to_str().unwrap(), "--tsv"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    pool
}

#[test]
fn raw_non_utf8_bytes_round_trip_through_load_tsv() {
    let dir = pool_dir();
    // `printf 'a\xff\tv\xfe\n'`: raw bytes, not escapes.
    let tsv = write_file(dir.path(), "raw.tsv", b"a\xff\tv\xfe\nplain\tx\n");
    let pool = dir.path().join("p.pool");
    let p = pool.to_str().unwrap();
    let o = pmkv(&["load", p, tsv.to_str().unwrap(), "--tsv"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // Stored as the bytes 0xff / 0xfe, shown escaped, never as U+FFFD (ef bf bd).
    let dump = text(&pmkv(&["dump", p]).stdout);
    assert_eq!(dump, "a\\xff\tv\\xfe\nplain\tx\n");
    assert_eq!(text(&pmkv(&["get", p, "a\\xff"]).stdout), "v\\xfe\n");
    // And the dump loads back to the same records.
    let again = write_file(dir.path(), "dump.tsv", &dump);
    let copy = dir.path().join("copy.pool");
    assert!(pmkv(&["load", copy.to_str().unwrap(), again.to_str().unwrap(), "--tsv"]).status.success());
    assert_eq!(text(&pmkv(&["dump", copy.to_str().unwrap()]).stdout), dump);
}

#[test]
fn raw_non_utf8_bytes_round_trip_through_plain_load_and_arguments() {
    let dir = pool_dir();
    let words = write_file(dir.path(), "w.txt", b"x\xff\n\xc3\x28\n");
    let pool = dir.path().join("p.pool");
    let p = pool.to_str().unwrap();
    assert!(pmkv(&["load", p, words.to_str().unwrap()]).status.success());
    assert_eq!(text(&pmkv(&["dump", p]).stdout), "x\\xff\t1\n\\xc3(\t2\n");
    // put/get/del/scan arguments: the argument's bytes (OsStr), not a lossy conversion.
    let raw = |b: &[u8]| OsStr::from_bytes(b).to_os_string();
    let run = |args: &[std::ffi::OsString]| pmkv_command().args(args).output().unwrap();
    let o = run(&["put".into(), p.into(), raw(b"k\xfe"), raw(b"v\x80")]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&run(&["get".into(), p.into(), raw(b"k\xfe")]).stdout), "v\\x80\n");
    // The raw byte and its escape name the same key.
    assert_eq!(text(&pmkv(&["get", p, "k\\xfe"]).stdout), "v\\x80\n");
    assert_eq!(text(&run(&["get".into(), p.into(), raw(b"x\xff")]).stdout), "1\n");
    let o = run(&["scan".into(), p.into(), "--from".into(), raw(b"k\xfe"), "--through".into(), raw(b"k\xfe")]);
    assert_eq!(text(&o.stdout), "k\\xfe\tv\\x80\n");
    assert!(run(&["del".into(), p.into(), raw(b"k\xfe")]).status.success());
    assert_eq!(run(&["get".into(), p.into(), raw(b"k\xfe")]).status.code(), Some(1));
}

#[test]
fn every_command_reports_output_lost_to_a_full_device() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    let dir = pool_dir();
    let pool = pool_with(dir.path(), 20);
    let new = dir.path().join("salvaged.pool");
    // Small outputs too: they fit a buffer, so only the final flush can fail.
    for args in [
        vec!["scan", &pool, "--limit", "5"],
        vec!["scan", &pool, "--limit", "1", "--reverse"],
        vec!["dump", &pool],
        vec!["get", &pool, "k00001"],
        vec!["check", &pool],
        vec!["info", &pool],
        vec!["engines"],
        vec!["salvage", &pool, new.to_str().unwrap()],
    ] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let o = pmkv_command().args(&args).stdout(full).output().unwrap();
        assert_refused(&o);
        assert!(text(&o.stderr).contains("writing output: No space left"), "{args:?}: {}", text(&o.stderr));
    }
}

#[test]
fn a_reader_that_stops_after_one_line_ends_every_command_quietly() {
    let dir = pool_dir();
    let pool = pool_with(dir.path(), 20_000);
    // `pmkv ... | head -1`: the reader takes one line and goes away mid-output.
    for args in [vec!["dump", &pool], vec!["scan", &pool, "--limit", "15000"], vec!["check", &pool, "--stats"]] {
        let mut child = pmkv_command().args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        assert!(!first.is_empty(), "{args:?}");
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{args:?}: {:?} {}", o.status, text(&o.stderr));
        assert!(o.stderr.is_empty(), "{args:?}: error spam: {}", text(&o.stderr));
    }
    // Through a shell pipe as a user types it.
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("{} dump {pool} | head -1; echo \"status ${{PIPESTATUS:-0}}\"", env!("CARGO_BIN_EXE_pmkv")))
        .output()
        .unwrap();
    assert_eq!(text(&o.stdout).lines().next(), Some("k00000\tv00000"));
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
}

/// A copy of `pool` taken while it is open in this process: the image of a crash (the
/// header says it was not closed cleanly), in `dir`.
fn crashed_copy(pool: &str, dir: &Path) -> std::path::PathBuf {
    let held = pmkv::Store::open_existing(pool, &pmkv::Options::default()).unwrap();
    let copy = dir.join("crashed.pool");
    std::fs::copy(pool, &copy).unwrap();
    drop(held);
    assert!(!pmkv_substrate::Pool::inspect(&copy).unwrap().state.clean);
    copy
}

#[test]
fn a_crashed_pool_on_read_only_media_says_it_needs_recovery_and_how() {
    let dir = pool_dir();
    let pool = pool_with(dir.path(), 50);
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let copy = crashed_copy(&pool, &ro);
    let bin = env!("CARGO_BIN_EXE_pmkv");
    // A read-only bind mount in a mount namespace of its own (root); otherwise a file
    // without write permission (anyone else), which fails the same way for the same reason.
    let probe = Command::new("unshare").args(["-m", "true"]).status().is_ok_and(|s| s.success());
    let run = |cmd: &str| {
        if probe {
            let script = format!("mount --bind -o ro {r} {r} && exec {bin} {cmd}", r = ro.display());
            Command::new("unshare").args(["-m", "sh", "-c", &script]).output().unwrap()
        } else {
            Command::new("sh").arg("-c").arg(format!("exec {bin} {cmd}")).output().unwrap()
        }
    };
    if !probe {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o444)).unwrap();
        if std::fs::OpenOptions::new().write(true).open(&copy).is_ok() {
            eprintln!("skipped: neither a read-only mount nor a read-only file can be had here");
            return;
        }
    }
    let before = std::fs::read(&copy).unwrap();
    let c = copy.display();
    for cmd in [format!("get {c} k00001"), format!("dump {c}"), format!("scan {c}"), format!("check {c}")] {
        let o = run(&cmd);
        assert_refused(&o);
        let err = text(&o.stderr);
        for needed in ["not closed cleanly", "needs recovery", "writes to the pool", "pmkv check", "pmkv salvage"] {
            assert!(err.contains(needed), "{cmd}: no '{needed}' in {err}");
        }
    }
    assert!(std::fs::read(&copy).unwrap() == before, "the read-only pool changed");
    // The way out it names works: salvage reads the image and writes a new pool elsewhere.
    let new = dir.path().join("new.pool");
    let o = run(&format!("salvage {c} {}", new.display()));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&pmkv(&["get", new.to_str().unwrap(), "k00001"]).stdout), "v00001\n");
}
