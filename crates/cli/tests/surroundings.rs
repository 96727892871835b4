//! SPEC U2: the CLI survives where shells put it — closed pipes, full
//! devices, FIFOs, file-size limits, interrupted creates, pools open elsewhere, bad input —
//! with a clear line and exit 2, or quietly where that is the convention; never a panic.

mod common;
use common::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

#[track_caller]
fn no_panic(o: &Output) {
    assert_ne!(o.status.code(), Some(101), "panicked: {}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("panicked"), "{}", text(&o.stderr));
}

/// A pool with `n` records (`k00000` = `v00000` ...), loaded through the CLI.
fn pool_with(dir: &Path, n: usize) -> String {
    let words = dir.join("in.tsv");
    let mut f = std::fs::File::create(&words).unwrap();
    for i in 0..n {
        writeln!(f, "k{i:05}\tv{i:05}-{}", "x".repeat(40)).unwrap();
    }
    let pool = dir.join("p.pool").to_str().unwrap().to_string();
    let o = pmkv(&["load", &pool, words.to_str().unwrap(), "--tsv"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    pool
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let dir = pool_dir();
    let pool = pool_with(dir.path(), 5000);
    for args in
        [vec!["dump", &pool], vec!["check", &pool, "--stats"], vec!["info", &pool], vec!["get", &pool, "k00001"]]
    {
        let mut child = pmkv_command().args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        drop(child.stdout.take()); // the reader goes away at once, as `| true` does
        let o = child.wait_with_output().unwrap();
        no_panic(&o);
        assert!(o.status.success(), "{args:?}: {:?} {}", o.status, text(&o.stderr));
        assert!(o.stderr.is_empty(), "{args:?}: {}", text(&o.stderr));
    }
}

#[test]
fn a_full_device_is_an_error_not_a_panic() {
    if !std::path::Path::new("/dev/full").exists() {
        return;
    }
    let dir = pool_dir();
    let pool = pool_with(dir.path(), 2000);
    for args in [vec!["dump", &pool], vec!["scan", &pool], vec!["info", &pool], vec!["check", &pool], vec!["engines"]] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let o = pmkv_command().args(&args).stdout(full).output().unwrap();
        no_panic(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: output lost without an error");
        assert!(text(&o.stderr).contains("No space left"), "{args:?}: {}", text(&o.stderr));
    }
    // Diagnostics that cannot be written are dropped; the command still works.
    let words = write_file(dir.path(), "w.txt", "a\nb\n");
    let p2 = dir.path().join("p2.pool");
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let o = pmkv_command().args(["load", p2.to_str().unwrap(), words.to_str().unwrap()]).stderr(full).output().unwrap();
    assert!(o.status.success(), "{:?}", o.status);
}

#[test]
fn only_regular_files_are_pools_and_a_fifo_does_not_hang() {
    let dir = pool_dir();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let f = fifo.to_str().unwrap();
    for args in [vec!["get", f, "k"], vec!["info", f], vec!["check", f], vec!["dump", f], vec!["put", f, "k", "v"]] {
        let mut child = pmkv_command().args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                panic!("{args:?} hangs on a FIFO");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(text(&o.stderr).contains("FIFO"), "{args:?}: {}", text(&o.stderr));
    }
    let o = pmkv(&["get", dir.path().to_str().unwrap(), "k"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("directory"), "{}", text(&o.stderr));
}

#[test]
fn a_file_size_limit_is_reported_not_a_signal() {
    let dir = pool_dir();
    let words = write_file(dir.path(), "w.txt", "a\n");
    let pool = dir.path().join("limited.pool");
    // 2048 blocks of 512 bytes: 1 MiB, below the 4 MiB asked for the new pool.
    let script = format!(
        "ulimit -f 2048; exec {} load {} {} --initial-size 4mb",
        env!("CARGO_BIN_EXE_pmkv"),
        pool.display(),
        words.display()
    );
    let o = Command::new("sh").arg("-c").arg(&script).output().unwrap();
    no_panic(&o);
    assert_eq!(o.status.code(), Some(2), "killed by a signal? {:?} {}", o.status, text(&o.stderr));
    assert!(text(&o.stderr).contains("ulimit"), "{}", text(&o.stderr));
}

#[test]
fn an_empty_file_left_by_an_interrupted_create_is_replaced_by_load() {
    let dir = pool_dir();
    let pool = write_file(dir.path(), "p.pool", b"");
    let words = write_file(dir.path(), "w.txt", "alpha\nbeta\n");
    let o = pmkv(&["load", pool.to_str().unwrap(), words.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&pmkv(&["get", pool.to_str().unwrap(), "beta"]).stdout), "2\n");
    // A file with content that is not a pool is never replaced.
    let junk = write_file(dir.path(), "junk.pool", b"precious");
    let o = pmkv(&["load", junk.to_str().unwrap(), words.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read(&junk).unwrap(), b"precious");
}

#[test]
fn wait_outlasts_a_pool_open_elsewhere() {
    let dir = pool_dir();
    let pool = pool_with(dir.path(), 10);
    let held = pmkv::Store::open_existing(&pool, &pmkv::Options::default()).unwrap();
    let o = pmkv(&["get", &pool, "k00001"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("open in another"), "{}", text(&o.stderr));
    let child = pmkv_command().args(["get", &pool, "k00001", "--wait", "20"]).stdout(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    held.close().unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    assert!(text(&o.stdout).starts_with("v00001"));
}

#[test]
fn input_errors_name_their_line() {
    let dir = pool_dir();
    let tsv = write_file(dir.path(), "bad.tsv", "a\t1\nb\t2\nc\\xzz\t3\n");
    let pool = dir.path().join("p.pool");
    let o = pmkv(&["load", pool.to_str().unwrap(), tsv.to_str().unwrap(), "--tsv"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("line 3"), "{}", text(&o.stderr));
    std::fs::write(&tsv, format!("a\t1\n{}\t2\n", "k".repeat(70_000))).unwrap();
    let o = pmkv(&["load", pool.to_str().unwrap(), tsv.to_str().unwrap(), "--tsv"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("line 2") && text(&o.stderr).contains("too large"), "{}", text(&o.stderr));
}

/// A recycle-log pointer set in a cleanly closed pool is damage. A read
/// command reports it and changes nothing; it does not fall back to a read-write open
/// that would "finish" a recycle that never happened and drop live records.
#[test]
fn a_read_command_never_repairs_a_clean_pool() {
    use pmkv_substrate::epalloc::root;
    use std::os::unix::fs::FileExt;
    let dir = pool_dir();
    let pool = pool_with(dir.path(), 3000);
    let info = pmkv_substrate::Pool::inspect(&pool).unwrap();
    assert!(info.state.clean);
    let r = info.state.roots[pmkv_substrate::epalloc::EPALLOC_ROOT];
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&pool).unwrap();
    let word = |at: u64| {
        let mut b = [0u8; 8];
        file.read_exact_at(&mut b, at).unwrap();
        u64::from_le_bytes(b)
    };
    // The first list in use: point its PCurrent at its own head chunk, a valid chunk.
    use pmkv_substrate::epalloc::{check, Format};
    let head = |e: root::Entry| check::link_value(Format::V3, e.head_at(), word(e.head_at())).expect("a valid PHead");
    let e = (0..root::DIR_CAP as u64)
        .map(|i| root::Entry(r + root::DIR_AT + i * root::ENTRY_LEN))
        .find(|&e| word(e.tag_at()) != 0 && head(e) != 0)
        .expect("a list in use");
    let logged = check::link_word(Format::V3, e.pcurrent_at(), head(e));
    file.write_all_at(&logged.to_le_bytes(), e.pcurrent_at()).unwrap();
    drop(file);
    let before = std::fs::read(&pool).unwrap();
    for args in [vec!["get", &pool, "k00001"], vec!["dump", &pool], vec!["scan", &pool], vec!["check", &pool]] {
        let o = pmkv(&args);
        no_panic(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stdout));
        assert!(text(&o.stderr).contains("cleanly closed"), "{args:?}: {}", text(&o.stderr));
        assert!(std::fs::read(&pool).unwrap() == before, "{args:?} changed the file");
    }
}
