//! `pmkv info` and `pmkv bench persist` (with the `bench` feature), run as the built binary
//! (SPEC P1, P3, U2).
//!
//! Every refused file must give exit status 2, exactly one line on stderr starting with
//! `pmkv:`, no panic, and leave the file byte-for-byte unchanged.

mod common;
use common::*;
use pmkv_substrate::header::Mutable;
use pmkv_substrate::Pool;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Mutex, MutexGuard};

const LAYOUT: &str = "clitest";

/// A pool's lock is a `flock` on its open file description, which a child process shares
/// from `fork` until its `exec` closes it. A test that closes a pool and then asks `pmkv`
/// whether it is in use could see the lock still held by a child another test thread was
/// starting at that instant; so the tests of this file run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn info(path: &Path) -> Output {
    pmkv(&["info", path.to_str().unwrap()])
}

/// A good pool with a root and some data, closed cleanly.
fn good_pool(dir: &Path, name: &str) -> (PathBuf, u64) {
    let path = dir.join(name);
    let off = write_pool(&path, LAYOUT, &small_opts(), 3, &[0x5a; 1000]);
    (path, off)
}

#[test]
fn p1_info_on_a_good_pool() {
    let _s = serial();
    let dir = pool_dir();
    let (path, off) = good_pool(dir.path(), "good.pool");
    let before = std::fs::read(&path).unwrap();
    let out = info(&path);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    assert!(stdout.contains(&format!("layout          {LAYOUT}\n")), "{stdout}");
    assert!(stdout.contains("format version  1\n"), "{stdout}");
    assert!(stdout.contains(&format!("size            {} bytes (file {} bytes)", 64 << 10, before.len())), "{stdout}");
    assert!(stdout.contains(&format!("max size        {} bytes", 1 << 20)), "{stdout}");
    assert!(stdout.contains("clean shutdown  yes\n"), "{stdout}");
    assert!(stdout.contains("in use          no\n"), "{stdout}");
    assert!(stdout.contains(&format!("root[3]         {off:#x}\n")), "{stdout}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "info changed the pool");

    // A pool of another engine is still a good pool for `info`.
    let other = dir.path().join("other.pool");
    drop(Pool::create(&other, "hart", &small_opts()).unwrap());
    let out = info(&other);
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("layout          hart\n"));
}

#[test]
fn p1_info_on_a_pool_held_open_shows_in_use() {
    let _s = serial();
    let dir = pool_dir();
    let (path, _) = good_pool(dir.path(), "held.pool");
    let pool = Pool::open(&path, Some(LAYOUT), &small_opts()).unwrap();
    let out = info(&path);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("in use          yes"), "{stdout}");
    assert!(stdout.contains("clean shutdown  no"), "{stdout}");
    drop(pool);
    let stdout = text(&info(&path).stdout);
    assert!(stdout.contains("in use          no"), "{stdout}");
    assert!(stdout.contains("clean shutdown  yes"), "{stdout}");
}

#[test]
fn p1_info_on_a_torn_newest_state_shows_the_previous_one() {
    let _s = serial();
    let dir = pool_dir();
    let (path, _) = good_pool(dir.path(), "torn.pool");
    let seq = Pool::inspect(&path).unwrap().state.seq;
    let mut bytes = std::fs::read(&path).unwrap();
    let slot = Mutable::slot_for(seq);
    bytes[slot + 70] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let out = info(&path);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    assert!(stdout.contains(&format!("header seq      {}\n", seq - 1)), "{stdout}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[test]
fn p1_info_refuses_bad_files_with_one_line_and_changes_nothing() {
    let _s = serial();
    let dir = pool_dir();
    let d = dir.path();
    let (good_path, _) = good_pool(d, "good.pool");
    let good = std::fs::read(good_path).unwrap();
    let patched = |name: &str, f: &dyn Fn(&mut Vec<u8>)| patched_copy(d, name, &good, f);

    let cases: Vec<(PathBuf, &str)> = vec![
        (d.join("missing.pool"), "no such pool file"),
        (write_file(d, "text.pool", b"just some text\n".repeat(500)), "not a pmkv pool"),
        (write_file(d, "empty.pool", b""), "not a pmkv pool"),
        (patched("v2.pool", &|b| forge_version(b, 2)), "format version 2 is not supported"),
        (patched("cut100.pool", &|b| b.truncate(100)), "truncated"),
        (patched("cut3000.pool", &|b| b.truncate(3000)), "truncated"),
        (patched("cut-size.pool", &|b| b.truncate(b.len() - 4096)), "truncated"),
        (patched("imm.pool", &|b| b[40] ^= 0x10), "corrupt pool header"),
        (
            patched("slots.pool", &|b| {
                b[256 + 16] ^= 1;
                b[384 + 16] ^= 1;
            }),
            "corrupt pool header",
        ),
    ];
    for (path, why) in &cases {
        let before = std::fs::read(path).ok();
        let out = info(path);
        let stderr = text(&out.stderr);
        let name = path.file_name().unwrap().to_string_lossy();
        assert_refused(&out);
        assert!(out.stdout.is_empty(), "{name}: nothing on stdout: {}", text(&out.stdout));
        assert!(stderr.contains(why), "{name}: expected '{why}' in {stderr}");
        assert!(stderr.contains(&*name), "{name}: the message names the file: {stderr}");
        assert_eq!(std::fs::read(path).ok(), before, "{name}: the file changed");
    }
    assert!(!d.join("missing.pool").exists(), "info does not create a missing pool");

    // A directory is not a pool either.
    assert_refused(&info(d));
}

#[cfg(feature = "bench")]
#[test]
fn p3_bench_persist_reports_every_mode() {
    let _s = serial();
    let dir = pool_dir();
    let out = pmkv(&["bench", "persist", "--iters", "200", "--dir", dir.path().to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("flush instruction: "), "{stdout}");
    for mode in ["adr", "eadr", "msync", "none"] {
        let row = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(mode))
            .unwrap_or_else(|| panic!("no row for {mode} in\n{stdout}"));
        let ns: Vec<f64> = row.split_whitespace().skip(1).take(3).map(|c| c.parse().unwrap()).collect();
        assert_eq!(ns.len(), 3, "{row}");
        assert!(ns.iter().all(|&x| x > 0.0 && x.is_finite()), "{row}");
    }
    let flushes = |mode: &str| {
        let row = stdout.lines().find(|l| l.starts_with(&format!("{mode} "))).unwrap();
        row.split(", ").nth(1).unwrap().split_whitespace().next().unwrap().to_string()
    };
    assert_eq!(flushes("adr"), "1", "adr flushes the one line of a 64 B op");
    assert_eq!(flushes("eadr"), "0");
    assert_eq!(flushes("none"), "0");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the bench removes its pools");
}
