//! Who holds a pool's lock, for the message of [`PoolError::Locked`](crate::PoolError::Locked).
//!
//! "The pool is open in another process" leaves a user asking which one and what to do.
//! The lock is a `flock` (see the module documentation of `pool`), which the kernel lists
//! in `/proc/locks` with the locking process's id and the file's device and inode; the
//! holder's command line is in `/proc/PID/cmdline`. Both are read only on this error path
//! and only on Linux; when either is unreadable (another system, a process of another user
//! hidden by `hidepid`), the message simply names no holder.

use std::fs::File;
use std::os::unix::fs::MetadataExt;

/// The longest command line quoted in a message, in characters.
const MAX_CMDLINE: usize = 80;

/// The text that follows "{path}: pool is open in another process or handle" in a
/// `Locked` error: who holds the lock (when the system says), and what to do about it.
pub(crate) fn describe(file: &File) -> String {
    let holders = file.metadata().map(|m| holders(m.dev(), m.ino())).unwrap_or_default();
    let me = std::process::id();
    let mut who = Vec::new();
    let mut server = false;
    for pid in holders.iter().copied().take(4) {
        if pid == me {
            who.push("this process (another handle)".to_string());
            continue;
        }
        let cmd = cmdline(pid);
        server |= cmd.as_deref().is_some_and(is_pmkv_serve);
        who.push(match cmd {
            Some(c) => format!("pid {pid} ({c})"),
            None => format!("pid {pid}"),
        });
    }
    if holders.len() > who.len() {
        who.push(format!("{} more", holders.len() - who.len()));
    }
    let mut s = String::new();
    if !who.is_empty() {
        s.push_str(&format!(", held by {}", who.join(", ")));
    }
    if server {
        s.push_str("; it is a `pmkv serve`: send your requests to that server (e.g. with redis-cli), or");
    } else {
        s.push(';');
    }
    s.push_str(" wait until it closes the pool (pmkv commands: --wait SECONDS; Python: open(..., wait=SECONDS))");
    s
}

/// The processes holding a `flock` on the file `dev`/`ino`, from `/proc/locks` (empty if
/// it cannot be read). Its lines look like `1: FLOCK  ADVISORY  WRITE 18942 fe:00:6021902 0 EOF`:
/// major and minor device numbers in hex, the inode in decimal.
fn holders(dev: u64, ino: u64) -> Vec<u32> {
    let Ok(text) = std::fs::read_to_string("/proc/locks") else { return Vec::new() };
    let want = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    let mut pids: Vec<u32> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // "->" marks a process waiting for the lock, not holding it.
            if f.get(1) != Some(&"FLOCK") || f.contains(&"->") {
                return None;
            }
            (f.get(5) == Some(&want.as_str())).then(|| f.get(4)?.parse().ok())?
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// `pid`'s command line, arguments joined by spaces, cut to [`MAX_CMDLINE`] characters.
fn cmdline(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> =
        raw.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let mut s = args.join(" ");
    if s.is_empty() {
        return None;
    }
    if s.chars().count() > MAX_CMDLINE {
        s = s.chars().take(MAX_CMDLINE - 3).collect::<String>() + "...";
    }
    Some(s)
}

/// Whether a command line is `pmkv serve ...` (the program `pmkv` under any directory).
fn is_pmkv_serve(cmd: &str) -> bool {
    let mut words = cmd.split(' ');
    let prog = words.next().unwrap_or("");
    prog.rsplit('/').next() == Some("pmkv") && words.next() == Some("serve")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock this process holds through another open file is found, named as this
    /// process, and the message says what to do.
    #[test]
    fn names_the_holder_and_the_wait() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let a = File::create(&path).unwrap();
        let b = File::open(&path).unwrap();
        assert!(!describe(&b).contains("held by"), "no lock yet: {}", describe(&b));
        // SAFETY: flock on a valid descriptor.
        assert_eq!(unsafe { libc::flock(a.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
        let m = describe(&b);
        if std::path::Path::new("/proc/locks").exists() {
            assert!(m.contains("held by this process (another handle)"), "{m}");
        }
        assert!(m.contains("--wait SECONDS") && m.contains("wait=SECONDS"), "{m}");
        assert!(!m.contains("pmkv serve"), "{m}");
    }

    #[test]
    fn recognises_a_server() {
        assert!(is_pmkv_serve("/usr/local/bin/pmkv serve p.pool --port 0"));
        assert!(is_pmkv_serve("pmkv serve p.pool"));
        assert!(!is_pmkv_serve("pmkv get p.pool serve"));
        assert!(!is_pmkv_serve("/bin/notpmkv serve"));
        assert!(!is_pmkv_serve("python3 -c serve"));
    }

    #[test]
    fn cmdline_of_this_process_is_cut() {
        if let Some(c) = cmdline(std::process::id()) {
            assert!(c.chars().count() <= MAX_CMDLINE, "{c}");
        }
    }
}
