//! What acknowledged writes survive, as the CLI tells it (SPEC P3, U2): `pmkv info` shows
//! the medium a pool sits on and what each mode survives there; a command that opens a
//! pool for writing warns once, on stderr, when its mode promises more than the medium
//! gives; `pmkv serve` says it once at start-up and in INFO. The medium expected is read
//! from the mount table (`expected_medium`), apart from the detection under test: on this
//! machine `/dev/shm` is tmpfs and `/tmp` and the target directory are ext4.

mod common;
use common::*;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Stdio;

/// Directories to try: `/dev/shm` (memory) and a disk directory, each with the medium the
/// mount table says.
fn dirs() -> Vec<(TempDir, pmkv::Medium)> {
    let mut v = Vec::new();
    if Path::new("/dev/shm").is_dir() {
        let d = pool_dir(); // in /dev/shm
        let m = expected_medium(d.path()).unwrap();
        assert_eq!(m, pmkv::Medium::Memory, "/dev/shm is tmpfs by the mount table");
        v.push((d, m));
    }
    match disk_dir(Path::new(env!("CARGO_TARGET_TMPDIR"))) {
        Some(d) => v.push((d, pmkv::Medium::Disk)),
        None => eprintln!("no disk file system to write to here: the disk case was not checked"),
    }
    v
}

fn keys_file(dir: &Path, n: usize) -> String {
    let body: String = (0..n).map(|i| format!("key{i}\n")).collect();
    write_file(dir, "keys.txt", body).to_str().unwrap().to_string()
}

fn warnings(stderr: &[u8]) -> usize {
    text(stderr).lines().filter(|l| l.contains("warning")).count()
}

#[test]
fn u2_info_shows_the_medium_and_what_each_mode_survives() {
    for (dir, medium) in dirs() {
        let pool = dir.path().join("i.pool");
        let p = pool.to_str().unwrap();
        let keys = keys_file(dir.path(), 5);
        let o = pmkv(&["load", p, &keys, "--mode", "msync"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let o = pmkv(&["info", p]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let out = text(&o.stdout);
        assert!(out.contains(&format!("medium          {}: ", medium.name())), "{medium}: {out}");
        match medium {
            pmkv::Medium::Memory => assert!(
                out.contains(
                    "survives        adr, eadr, msync, wal, none: process crash yes, kernel crash no, power loss no, reboot no\n"
                ),
                "{out}"
            ),
            _ => {
                assert!(
                    out.contains(
                        "survives        adr, eadr, none: process crash yes, kernel crash no, power loss no, reboot yes\n"
                    ),
                    "{out}"
                );
                // Mode wal, by sync policy: everysec may lose the last second, no an
                // unbounded tail, each keeping a consistent prefix.
                for line in [
                    "                msync, wal (sync always): process crash yes, kernel crash yes, power loss yes, reboot yes\n",
                    "                wal (sync everysec): process crash yes, kernel crash all-but-last-second, \
                     power loss all-but-last-second, reboot yes\n",
                    "                wal (sync no): process crash yes, kernel crash prefix, power loss prefix, reboot yes\n",
                ] {
                    assert!(out.contains(line), "{out}");
                }
            }
        }
    }
}

#[test]
fn u2_a_read_write_open_warns_once_when_the_mode_over_promises() {
    for (dir, medium) in dirs() {
        let pool = dir.path().join("w.pool");
        let p = pool.to_str().unwrap();
        // 200 writes in one command, one open: one warning.
        let keys = keys_file(dir.path(), 200);
        let o = pmkv(&["load", p, &keys, "--mode", "adr"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(warnings(&o.stderr), 1, "{medium}: {}", text(&o.stderr));
        let why = if medium == pmkv::Medium::Memory { "memory file system" } else { "mode adr on a disk file" };
        assert!(
            text(&o.stderr).contains("mode wal survives both") || medium == pmkv::Medium::Memory,
            "{}",
            text(&o.stderr)
        );
        assert!(text(&o.stderr).contains(why), "{medium}: {}", text(&o.stderr));
        assert!(text(&o.stderr).contains(p), "the warning names the pool: {}", text(&o.stderr));
        let o = pmkv(&["put", p, "k", "v", "--mode", "adr"]);
        assert!(o.status.success() && warnings(&o.stderr) == 1, "{medium}: {}", text(&o.stderr));
        // The default: mode wal on a disk, which keeps its promise (no warning); adr on
        // a memory file system, which warns.
        let o = pmkv(&["put", p, "k", "v"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(warnings(&o.stderr), usize::from(medium == pmkv::Medium::Memory), "{medium}: {}", text(&o.stderr));
        // Reads acknowledge no writes; `none` promises nothing; msync on a disk keeps its
        // promise.
        let o = pmkv(&["get", p, "k"]);
        assert!(o.status.success() && o.stderr.is_empty(), "{medium}: {}", text(&o.stderr));
        let o = pmkv(&["put", p, "k", "v", "--mode", "none"]);
        assert!(o.status.success() && o.stderr.is_empty(), "{medium}: {}", text(&o.stderr));
        let o = pmkv(&["del", p, "k", "--mode", "msync"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(warnings(&o.stderr), usize::from(medium == pmkv::Medium::Memory), "{medium}: {}", text(&o.stderr));
    }
}

/// One RESP command on `s`, its reply read to the end of a bulk string.
fn info_reply(port: u16) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"*1\r\n$4\r\nINFO\r\n").unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).unwrap();
        out.extend_from_slice(&buf[..n]);
        let t = text(&out);
        if let Some((head, body)) = t.split_once("\r\n") {
            let len: usize = head.trim_start_matches('$').parse().unwrap();
            if body.len() >= len + 2 {
                return body[..len].to_string();
            }
        }
        assert!(n > 0, "connection closed: {t}");
    }
}

#[test]
fn u3_serve_says_what_survives_at_start_up_and_in_info() {
    for (dir, medium) in dirs() {
        let pool = dir.path().join("s.pool");
        let (child, port) = spawn_serve(&pool, &[], Stdio::piped());
        let info = info_reply(port);
        assert!(info.contains("pmkv_mode:adr\r\n"), "{info}");
        assert!(info.contains(&format!("pmkv_medium:{}\r\n", medium.name())), "{info}");
        assert!(info.contains("pmkv_survives_process_crash:yes\r\n"), "{info}");
        assert!(info.contains("pmkv_survives_kernel_crash:no\r\n"), "{info}");
        assert!(info.contains("pmkv_survives_power_loss:no\r\n"), "{info}");
        let reboot = if medium == pmkv::Medium::Memory { "no" } else { "yes" };
        assert!(info.contains(&format!("pmkv_survives_reboot:{reboot}\r\n")), "{info}");
        assert!(!info.contains("durable_writes"), "{info}");
        // Several clients, one warning: it is said at start-up only.
        for _ in 0..3 {
            info_reply(port);
        }
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"*1\r\n$8\r\nSHUTDOWN\r\n").unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let err = text(&out.stderr);
        assert_eq!(err.lines().filter(|l| l.contains("acknowledged writes survive:")).count(), 1, "{err}");
        assert!(err.contains(&format!("mode adr on {}", medium.name())), "{err}");
        assert_eq!(warnings(&out.stderr), 1, "{err}");
    }
}

/// Mode wal says its sync policy and what that keeps through a power loss, at start-up and
/// in INFO, with no warning: each policy keeps what it promises.
#[test]
fn u3_serve_in_mode_wal_says_what_its_sync_policy_keeps() {
    let Some(dir) = disk_dir(Path::new(env!("CARGO_TARGET_TMPDIR"))) else {
        eprintln!("no disk file system to write to here: not checked");
        return;
    };
    for (sync, power_loss) in [("always", "yes"), ("everysec", "all-but-last-second"), ("no", "prefix")] {
        let pool = dir.path().join(format!("{sync}.pool"));
        let (child, port) = spawn_serve_with(&pool, &["--mode", "wal", "--sync", sync], Stdio::piped());
        let info = info_reply(port);
        assert!(info.contains("pmkv_mode:wal\r\n"), "{info}");
        assert!(info.contains(&format!("pmkv_sync:{sync}\r\n")), "{info}");
        assert!(info.contains("pmkv_survives_process_crash:yes\r\n"), "{info}");
        assert!(info.contains(&format!("pmkv_survives_kernel_crash:{power_loss}\r\n")), "{info}");
        assert!(info.contains(&format!("pmkv_survives_power_loss:{power_loss}\r\n")), "{info}");
        assert!(info.contains("pmkv_survives_reboot:yes\r\n"), "{info}");
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"*1\r\n$8\r\nSHUTDOWN\r\n").unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let err = text(&out.stderr);
        assert!(err.contains(&format!("mode wal (sync {sync}) on disk: acknowledged writes survive: ")), "{err}");
        assert!(err.contains(&format!("power loss {power_loss}")), "{err}");
        assert_eq!(warnings(&out.stderr), 0, "{err}");
    }
}

/// A load into a new pool is one unit: built beside its name (`<pool>.loading`, mode adr,
/// nothing logged), made durable with one fsync, then renamed; on a disk it leaves no log
/// and no warning. A `.loading` file left by an interrupted load is replaced; one that a
/// running load holds is refused; a load that fails creates nothing. A load into an
/// existing pool goes through its mode (the log, on a disk).
#[test]
fn a_load_into_a_new_pool_is_built_whole_then_named() {
    for (d, medium) in dirs() {
        let keys = keys_file(d.path(), 500);
        let pool = d.path().join("new.pool");
        let p = pool.to_str().unwrap();
        let loading = d.path().join("new.pool.loading");
        // An interrupted load's leftover: a pool file that no one holds.
        assert!(pmkv(&["load", loading.to_str().unwrap(), &keys, "--mode", "adr"]).status.success());
        let o = pmkv(&["load", p, &keys]);
        assert!(o.status.success(), "{medium:?}: {}", text(&o.stderr));
        assert!(text(&o.stderr).contains("interrupted load"), "{medium:?}: {}", text(&o.stderr));
        assert!(!loading.exists(), "{medium:?}: the .loading file is left");
        assert!(!d.path().join("new.pool.wal").exists(), "{medium:?}: a new pool's load wrote a log");
        if medium == pmkv::Medium::Disk {
            assert_eq!(warnings(&o.stderr), 0, "{}", text(&o.stderr));
        }
        assert_eq!(text(&pmkv(&["get", p, "key499"]).stdout).trim(), "500");
        // Into the existing pool: through its mode, adding to what is there.
        let more = write_file(d.path(), "more.txt", "extra\n");
        assert!(pmkv(&["load", p, more.to_str().unwrap()]).status.success());
        assert_eq!(text(&pmkv(&["get", p, "key0"]).stdout).trim(), "1");
        assert_eq!(text(&pmkv(&["get", p, "extra"]).stdout).trim(), "1");
        // A failing load (a malformed TSV line) of a new pool creates nothing.
        let bad = write_file(d.path(), "bad.tsv", "a\t1\nno tab here\n");
        let failed = d.path().join("failed.pool");
        let o = pmkv(&["load", failed.to_str().unwrap(), bad.to_str().unwrap(), "--tsv"]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains("line 2"), "{}", text(&o.stderr));
        assert!(!failed.exists() && !d.path().join("failed.pool.loading").exists());
        // A `.loading` file that another process holds is refused, and kept.
        let held = d.path().join("held.pool");
        let held_loading = d.path().join("held.pool.loading");
        assert!(pmkv(&["load", held_loading.to_str().unwrap(), &keys, "--mode", "adr"]).status.success());
        let f = std::fs::File::open(&held_loading).unwrap();
        // SAFETY: flock on an open descriptor of this test.
        assert_eq!(unsafe { libc::flock(std::os::unix::io::AsRawFd::as_raw_fd(&f), libc::LOCK_EX) }, 0);
        let o = pmkv(&["load", held.to_str().unwrap(), &keys]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains("another pmkv load"), "{}", text(&o.stderr));
        assert!(held_loading.exists() && !held.exists());
    }
}
