//! What a new user meets in the first hour at the command line: a pool is created with
//! `pmkv create`, and every refusal on the way says what to do next — a missing pool names
//! `pmkv create`, a pool held by another process names that process (and whether it is a
//! `pmkv serve`) and `--wait`, a damaged one names `pmkv check` and `pmkv salvage`, whose
//! suggested run is then made and must recover the records. Plus what `engines`, `info`
//! and `check --stats` print for people.

mod common;
use common::*;

/// `pmkv load POOL` of `keys` (one per line), which must succeed.
fn load(dir: &std::path::Path, pool: &str, keys: &str) {
    let f = write_file(dir, "keys.txt", keys);
    let o = pmkv(&["load", pool, f.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn create_makes_an_empty_pool_and_refuses_an_existing_file() {
    let dir = pool_dir();
    let pool = dir.path().join("new.pool");
    let p = pool.to_str().unwrap();
    // `put` on a missing pool says how to make one, and makes nothing.
    let o = pmkv(&["put", p, "k", "v"]);
    assert_refused(&o);
    assert!(text(&o.stderr).contains(&format!("pmkv create {p} --engine hart")), "{}", text(&o.stderr));
    assert!(!pool.exists());
    // Created empty, in the engine asked for, and usable at once.
    let o = pmkv(&["create", p, "--engine", "nbtree", "--mode", "msync"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("created"), "{}", text(&o.stderr));
    let info = text(&pmkv(&["info", p]).stdout);
    assert!(info.contains("layout          nbtree"), "{info}");
    assert_eq!(pmkv(&["dump", p]).stdout, b"");
    assert!(pmkv(&["put", p, "k", "v"]).status.success());
    assert_eq!(text(&pmkv(&["get", p, "k"]).stdout), "v\n");
    // An existing file, pool or not, is refused and left as it was.
    let before = std::fs::read(&pool).unwrap();
    for engine in ["nbtree", "hart"] {
        let o = pmkv(&["create", p, "--engine", engine]);
        assert_refused(&o);
        assert!(text(&o.stderr).contains("already exists"), "{}", text(&o.stderr));
    }
    assert!(std::fs::read(&pool).unwrap() == before, "a refused create changed the pool");
    let other = write_file(dir.path(), "notes.txt", "not a pool\n");
    assert_refused(&pmkv(&["create", other.to_str().unwrap()]));
    assert_eq!(std::fs::read(&other).unwrap(), b"not a pool\n");
    // An engine that keeps nothing, or none at all: refused, no file left.
    for engine in ["volatile", "nosuch"] {
        let q = dir.path().join(format!("{engine}.pool"));
        assert_refused(&pmkv(&["create", q.to_str().unwrap(), "--engine", engine]));
        assert!(!q.exists(), "{engine}");
    }
    // The default engine is hart.
    let h = dir.path().join("h.pool");
    assert!(pmkv(&["create", h.to_str().unwrap()]).status.success());
    assert!(text(&pmkv(&["info", h.to_str().unwrap()]).stdout).contains("layout          hart"));
}

#[test]
fn a_pool_held_by_a_server_names_it_and_the_wait() {
    let dir = pool_dir();
    let pool = dir.path().join("served.pool");
    let p = pool.to_str().unwrap();
    let (mut server, _port) = spawn_serve(&pool, &[], std::process::Stdio::null());
    for args in [vec!["get", p, "k"], vec!["put", p, "k", "v"], vec!["check", p]] {
        let o = pmkv(&args);
        assert_refused(&o);
        let err = text(&o.stderr);
        assert!(err.contains(&format!("held by pid {} (", server.id())), "{args:?}: {err}");
        assert!(err.contains("it is a `pmkv serve`: send your requests to that server"), "{args:?}: {err}");
        assert!(err.contains("--wait SECONDS"), "{args:?}: {err}");
    }
    server.kill().unwrap();
    server.wait().unwrap();
    // A holder that is not a server (a `load` still reading its input) is named without
    // the server's advice; the lock dies with it.
    let mut loader = pmkv_command()
        .args(["load", p, "/dev/stdin", "--wait", "60"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let held = (0..3000).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        text(&pmkv(&["info", p]).stdout).contains("in use          yes")
    });
    assert!(held, "the loader never opened the pool");
    let o = pmkv(&["get", p, "a"]);
    drop(loader.stdin.take());
    assert!(loader.wait().unwrap().success());
    assert_refused(&o);
    let err = text(&o.stderr);
    assert!(err.contains(&format!("held by pid {} (", loader.id())) && err.contains("load"), "{err}");
    assert!(!err.contains("pmkv serve") && err.contains("--wait SECONDS"), "{err}");
    assert_eq!(pmkv(&["get", p, "a"]).status.code(), Some(1), "the lock died with its holder");
}

#[test]
fn a_damaged_pool_names_check_and_salvage_and_the_salvage_recovers() {
    let dir = pool_dir();
    let pool = dir.path().join("d.pool");
    let p = pool.to_str().unwrap();
    load(dir.path(), p, "apple\nfig\npear\n");
    let good = text(&pmkv(&["dump", p]).stdout);
    // Break the first root block (the allocator's): its magic zeroed.
    let info = text(&pmkv(&["info", p]).stdout);
    let root = info.lines().find_map(|l| l.strip_prefix("root[0]")).unwrap_or_else(|| panic!("{info}"));
    let at = u64::from_str_radix(root.trim().trim_start_matches("0x"), 16).unwrap() as usize;
    let mut bytes = std::fs::read(&pool).unwrap();
    bytes[at..at + 8].fill(0);
    std::fs::write(&pool, &bytes).unwrap();
    let o = pmkv(&["get", p, "fig"]);
    assert_refused(&o);
    let err = text(&o.stderr);
    assert!(err.contains(&format!("`pmkv check {p}`")), "{err}");
    assert!(err.contains(&format!("`pmkv salvage {p} NEW_POOL`")), "{err}");
    // What it suggests works: every record comes back.
    let new = dir.path().join("new.pool");
    let o = pmkv(&["salvage", p, new.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&pmkv(&["dump", new.to_str().unwrap()]).stdout), good);
}

#[test]
fn engines_marks_the_papers_competitors() {
    let out = text(&pmkv(&["engines"]).stdout);
    let names = pmkv::Registry::builtin().names();
    let marked = |name: &str| {
        let mut lines = out.lines().skip_while(|l| !l.starts_with(&format!("{name}\t")));
        lines.next().is_some() && lines.next().is_some_and(|l| l.contains("competitor, not for use"))
    };
    for name in names {
        let competitor = ["fptree", "woart", "artcow", "fastfair"].contains(&name);
        assert_eq!(marked(name), competitor, "{name}:\n{out}");
    }
}

#[test]
fn info_prints_the_creation_time_in_utc_and_check_stats_has_no_stray_line() {
    let dir = pool_dir();
    let pool = dir.path().join("i.pool");
    let p = pool.to_str().unwrap();
    assert!(pmkv(&["create", p]).status.success());
    let info = text(&pmkv(&["info", p]).stdout);
    let created = info.lines().find_map(|l| l.strip_prefix("created")).unwrap_or_else(|| panic!("{info}")).trim();
    // e.g. `2026-11-29T05:51:37Z (unix 1795916697)`, within a minute of now.
    let (iso, unix) = created.split_once(" (unix ").unwrap_or_else(|| panic!("{created}"));
    let unix: u64 = unix.trim_end_matches(')').parse().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert!(unix <= now && now - unix < 60, "{created}");
    assert!(iso.len() == 20 && iso.ends_with('Z') && iso.as_bytes()[10] == b'T', "{created}");
    let check = text(&pmkv(&["check", p, "--stats"]).stdout);
    assert!(!check.contains("summary:"), "{check}");
    assert!(check.lines().any(|l| l.trim_start().starts_with("allocator root")), "{check}");
}
