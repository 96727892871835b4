//! `pmkv salvage` end to end for the engines besides HART whose salvage is built in:
//! NBTree (seals and object CRCs). A clean pool salvages to a new pool with exactly its
//! records; a damaged copy salvages to a subset of them, never a wrong line.

mod common;
use common::*;
use std::collections::HashSet;

#[test]
fn salvage_copies_an_nbtree_pool_and_a_damaged_copy_to_a_subset() {
    let dir = pool_dir();
    let tsv = dir.path().join("in.tsv");
    let mut lines = String::new();
    for i in 0..2000 {
        match i % 3 {
            0 => lines.push_str(&format!("k{i}\tv{i}\n")),
            1 => lines.push_str(&format!("pair-key-{i:06}\tvalue-in-an-object-{i}\n")),
            _ => lines.push_str(&format!("a-key-long-enough-for-an-object-{i:06}\tvalue-{i:06}-long\n")),
        }
    }
    std::fs::write(&tsv, lines).unwrap();
    let pool = dir.path().join("nb.pool");
    let p = pool.to_str().unwrap();
    let o = pmkv(&["load", p, tsv.to_str().unwrap(), "--tsv", "--engine", "nbtree"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let want = pmkv(&["dump", p]).stdout;
    assert_eq!(text(&want).lines().count(), 2000);

    let new = dir.path().join("new.pool");
    let o = pmkv(&["salvage", p, new.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("salvaged         2000 records"), "{}", text(&o.stdout));
    assert_eq!(pmkv(&["dump", new.to_str().unwrap()]).stdout, want);

    // Damage: zero a 4 KiB page and flip bytes across the used part of the file.
    let mut b = std::fs::read(&pool).unwrap();
    let page = b.len() / 2 / 4096 * 4096;
    b[page..page + 4096].fill(0);
    for o in (8192..b.len()).step_by(7919) {
        b[o] ^= 0x5a;
    }
    let damaged = dir.path().join("damaged.pool");
    std::fs::write(&damaged, &b).unwrap();
    let new2 = dir.path().join("new2.pool");
    let o = pmkv(&["salvage", damaged.to_str().unwrap(), new2.to_str().unwrap(), "--engine", "nbtree"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let good: HashSet<String> = text(&want).lines().map(str::to_owned).collect();
    let got = pmkv(&["dump", new2.to_str().unwrap()]);
    assert!(got.status.success(), "{}", text(&got.stderr));
    for line in text(&got.stdout).lines() {
        assert!(good.contains(line), "salvaged a wrong record: {line}");
    }
}

/// Mangosteen salvages whole or not at all: a clean pool to a new pool with exactly its
/// records; a pool with a damaged map page to a clear error and no new pool's records.
#[test]
fn salvage_copies_a_mangosteen_pool_whole_or_refuses_it() {
    let dir = pool_dir();
    let tsv = dir.path().join("in.tsv");
    let lines: String = (0..300).map(|i| format!("key{i:04}\tvalue-{i}\n")).collect();
    std::fs::write(&tsv, lines).unwrap();
    let pool = dir.path().join("mg.pool");
    let p = pool.to_str().unwrap();
    let o = pmkv(&["load", p, tsv.to_str().unwrap(), "--tsv", "--engine", "mangosteen"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let want = pmkv(&["dump", p]).stdout;
    assert_eq!(text(&want).lines().count(), 300);
    let new = dir.path().join("new.pool");
    let o = pmkv(&["salvage", p, new.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("salvaged         300 records"), "{}", text(&o.stdout));
    assert_eq!(pmkv(&["dump", new.to_str().unwrap()]).stdout, want);

    // Every page of the file damaged in turn: each salvage is the whole dump or an error.
    let good = std::fs::read(&pool).unwrap();
    let mut refused = 0;
    for (n, page) in (4096..good.len()).step_by(good.len() / 12 / 4096 * 4096 + 4096).enumerate() {
        let mut b = good.clone();
        b[page..page + 4096].iter_mut().for_each(|x| *x ^= 0x3c);
        let damaged = dir.path().join(format!("d{n}.pool"));
        std::fs::write(&damaged, &b).unwrap();
        let out = dir.path().join(format!("s{n}.pool"));
        let o = pmkv(&["salvage", damaged.to_str().unwrap(), out.to_str().unwrap(), "--engine", "mangosteen"]);
        if o.status.success() {
            assert_eq!(pmkv(&["dump", out.to_str().unwrap()]).stdout, want, "page {page:#x}");
        } else {
            assert!(text(&o.stderr).contains("nothing can be salvaged"), "{}", text(&o.stderr));
            assert!(!out.exists(), "a refused salvage left its new pool behind");
            refused += 1;
        }
    }
    assert!(refused > 0, "no damaged page was noticed");
}
