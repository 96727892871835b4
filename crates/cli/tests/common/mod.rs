//! Helpers shared by the CLI's tests: the built `pmkv` binary and the shape of its refusals,
//! on top of pmkv-testutil (which every test file also gets from here).
#![allow(dead_code, unused_imports)]

use std::process::{Command, Output};

pub use pmkv_testutil::*;

/// The built `pmkv` binary as a command, for tests that set its input, output, limits or
/// environment before running it.
pub fn pmkv_command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pmkv"))
}

/// Run `pmkv ARGS` to the end and return what it did.
pub fn pmkv(args: &[&str]) -> Output {
    pmkv_command().args(args).output().expect("running pmkv")
}

/// Run `pmkv ARGS` (output discarded) and kill it with SIGKILL after `ms` milliseconds,
/// as a crash would; returns once it has exited.
pub fn run_then_kill(args: &[&str], ms: u64) {
    let mut child = pmkv_command()
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("running pmkv");
    std::thread::sleep(std::time::Duration::from_millis(ms));
    let _ = child.kill();
    let _ = child.wait();
}

/// Start `pmkv serve POOL --port 0 --mode adr EXTRA...` (its stderr to `stderr`) and return
/// the child and the port it printed it listens on.
pub fn spawn_serve(pool: &std::path::Path, extra: &[&str], stderr: std::process::Stdio) -> (std::process::Child, u16) {
    spawn_serve_with(pool, &[&["--mode", "adr"], extra].concat(), stderr)
}

/// [`spawn_serve`] with exactly the options `args` (no `--mode adr`).
pub fn spawn_serve_with(
    pool: &std::path::Path,
    args: &[&str],
    stderr: std::process::Stdio,
) -> (std::process::Child, u16) {
    use std::io::BufRead;
    let mut child = pmkv_command()
        .args(["serve", pool.to_str().unwrap(), "--port", "0"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("running pmkv serve");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port = line.trim().rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("{line:?}"));
    (child, port)
}

/// Output bytes as text (invalid UTF-8 shown as U+FFFD).
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `o` is a refusal as the CLI gives them (SPEC U2): exit status 2 and exactly one line on
/// stderr, starting with `pmkv: `, that is not a panic.
#[track_caller]
pub fn assert_refused(o: &Output) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "exit status; stdout {} stderr {err}", text(&o.stdout));
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.starts_with("pmkv: ") && err.ends_with('\n'), "{err:?}");
    assert!(!err.contains("panicked"), "{err}");
}

/// One reply from `r`, rendered compactly (`+OK`, `:1`, a bulk as its text, `[..]`).
pub fn read_reply(r: &mut impl std::io::BufRead) -> std::io::Result<String> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let line = line.trim_end().to_string();
    match line.as_bytes().first() {
        Some(b'*') => {
            let n: i64 = line[1..].parse().unwrap();
            let items: std::io::Result<Vec<String>> = (0..n.max(0)).map(|_| read_reply(r)).collect();
            Ok(format!("[{}]", items?.join(",")))
        }
        Some(b'$') if line != "$-1" => {
            let mut b = vec![0u8; line[1..].parse::<usize>().unwrap() + 2];
            std::io::Read::read_exact(r, &mut b)?;
            Ok(String::from_utf8_lossy(&b[..b.len() - 2]).into_owned())
        }
        _ => Ok(line),
    }
}
