//! Damage is never silent (SPEC P1, P7, H5, R1): copies of a
//! pool holding every kind of object (inline and out-of-line values, key objects, extents,
//! updated and deleted records, recycled chunks) are damaged at random — a flipped bit, 64
//! bytes of garbage, a zeroed 4 KiB page, a truncation — and every read command is run on
//! each copy. Each must either give a clear error (exit 2, one line) or exactly the right
//! data; `check` may pass only if the data is right; no read command may change the file
//! (unless the damage made the header say the pool needs crash recovery, which a read
//! command then runs), nor may a refused write; `salvage` recovers the intact records, never a wrong one.
//!
//! The default run damages `PMKV_DAMAGE_COPIES` copies (200); the soak is
//! `PMKV_DAMAGE_COPIES=3000 cargo test --release -p pmkv-cli --test damage -- --nocapture`.

mod common;

use common::*;
use pmkv::{Mode, Options, Store};
use std::collections::BTreeMap;
use std::path::Path;

/// A small deterministic generator (xorshift64*), so a failing copy can be replayed from
/// the seed the test prints.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The pristine pool: every kind of object HART and EPallocator write.
fn build(path: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let opts = Options::default().mode(Mode::Adr).create(true).initial_size(1 << 20);
    let store = Store::open(path, "hart", &opts).unwrap();
    let mut model = BTreeMap::new();
    let mut put = |k: Vec<u8>, v: Vec<u8>| {
        store.put(&k, &v).unwrap();
        model.insert(k, v);
    };
    for i in 0..1500u32 {
        put(format!("small{i:05}").into_bytes(), i.to_le_bytes().to_vec()); // inline values
    }
    for i in 0..300u32 {
        put(format!("mid{i:04}").into_bytes(), format!("{i}-{}", "v".repeat(40 + i as usize % 90)).into_bytes());
    }
    for i in 0..40u32 {
        put(format!("long-key-{i:03}-{}", "k".repeat(40 + i as usize)).into_bytes(), vec![b'L'; 20]);
        // key objects
    }
    for i in 0..3u32 {
        put(format!("big{i}").into_bytes(), vec![b'0' + i as u8; 5000 + 700 * i as usize]);
        // extents
    }
    for i in (0..1500u32).step_by(7) {
        put(format!("small{i:05}").into_bytes(), (i + 1).to_le_bytes().to_vec());
        // in place
    }
    for i in (0..300u32).step_by(5) {
        put(format!("mid{i:04}").into_bytes(), format!("updated {i}").into_bytes());
        // Algorithm 3
    }
    for i in (0..1500u32).step_by(3) {
        let k = format!("small{i:05}").into_bytes();
        store.delete(&k).unwrap();
        model.remove(&k);
    }
    for i in 0..300u32 {
        // Delete whole runs so that chunks empty and are recycled.
        if i % 10 < 6 {
            let k = format!("mid{i:04}").into_bytes();
            store.delete(&k).unwrap();
            model.remove(&k);
        }
    }
    store.close().unwrap();
    model
}

fn used_bytes(path: &Path) -> u64 {
    let o = pmkv(&["info", path.to_str().unwrap()]);
    let t = text(&o.stdout);
    let line = t.lines().find(|l| l.starts_with("used")).expect("info prints the used bytes");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Damage `b` in one of four ways; returns a description.
fn damage(b: &mut Vec<u8>, used: u64, rng: &mut Rng) -> String {
    let len = b.len() as u64;
    // Mostly where the data is; sometimes anywhere.
    let span = if rng.below(5) == 0 { len } else { used.min(len) };
    let at = rng.below(span) as usize;
    match rng.below(4) {
        0 => {
            let bit = rng.below(8);
            b[at] ^= 1 << bit;
            format!("bit {bit} of byte {at:#x} flipped")
        }
        1 => {
            let at = at.min(b.len() - 64);
            for x in &mut b[at..at + 64] {
                *x = rng.next() as u8;
            }
            format!("64 bytes of garbage at {at:#x}")
        }
        2 => {
            let at = at / 4096 * 4096;
            b[at..at + 4096].fill(0);
            format!("page {at:#x} zeroed")
        }
        _ => {
            b.truncate(at);
            format!("truncated to {at} bytes")
        }
    }
}

struct Counts {
    copies: u64,
    refused: u64,
    exact: u64,
    check_failed: u64,
    recovered: u64,
    salvaged_records: u64,
    refused_writes: u64,
}

#[test]
fn damaged_pools_give_errors_or_the_right_data_never_wrong_data() {
    let dir = pool_dir();
    let good = dir.path().join("good.pool");
    let model = build(&good);
    let g = good.to_str().unwrap();
    let dump = pmkv(&["dump", g]);
    assert_eq!(dump.status.code(), Some(0), "{}", text(&dump.stderr));
    let want_dump = dump.stdout;
    assert_eq!(text(&want_dump).lines().count(), model.len());
    let ok = pmkv(&["check", g]);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    let pristine = std::fs::read(&good).unwrap();
    let used = used_bytes(&good);
    let probes: Vec<(String, Vec<u8>)> = model
        .keys()
        .step_by(model.len() / 3)
        .map(|k| {
            let k = String::from_utf8(k.clone()).unwrap();
            let o = pmkv(&["get", g, &k]);
            assert_eq!(o.status.code(), Some(0));
            (k, o.stdout)
        })
        .collect();
    let want_lines: std::collections::HashSet<String> = text(&want_dump).lines().map(str::to_owned).collect();

    let copies: u64 = std::env::var("PMKV_DAMAGE_COPIES").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
    let seed: u64 = std::env::var("PMKV_DAMAGE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_da3a);
    println!("damage test: {copies} copies, seed {seed} (PMKV_DAMAGE_SEED replays it)");
    let mut rng = Rng(seed | 1);
    let mut n =
        Counts { copies, refused: 0, exact: 0, check_failed: 0, recovered: 0, salvaged_records: 0, refused_writes: 0 };
    for c in 0..copies {
        let mut b = pristine.clone();
        let what = damage(&mut b, used, &mut rng);
        let ctx = format!("copy {c} (seed {seed}): {what}");
        let path = dir.path().join("d.pool");
        std::fs::write(&path, &b).unwrap();
        let p = path.to_str().unwrap();
        let info = pmkv(&["info", p]);
        let unclean = text(&info.stdout).contains("clean shutdown  no");

        // Every command: exit 0 with exactly the right answer, or a one-line refusal.
        let mut right = true;
        let d = pmkv(&["dump", p]);
        match d.status.code() {
            Some(0) => assert!(d.stdout == want_dump, "{ctx}: dump exits 0 with wrong data"),
            _ => {
                assert_refused(&d);
                right = false;
            }
        }
        for (key, want) in &probes {
            let o = pmkv(&["get", p, key]);
            match o.status.code() {
                Some(0) => assert_eq!(&o.stdout, want, "{ctx}: get {key} wrong"),
                _ => {
                    // exit 1 ("not found") would be a silent loss: only a refusal is allowed.
                    assert_refused(&o);
                    right = false;
                }
            }
        }
        let chk = pmkv(&["check", p]);
        match chk.status.code() {
            Some(0) => assert!(right, "{ctx}: check passes but reads failed"),
            _ => {
                assert_refused(&chk);
                n.check_failed += 1;
            }
        }
        if right {
            n.exact += 1;
        } else {
            n.refused += 1;
        }
        // Read commands change nothing, unless the header itself says crash recovery is
        // due (then the first of them ran it, as after any crash).
        let after = std::fs::read(&path).unwrap();
        if unclean {
            n.recovered += 1;
        } else {
            assert!(after == b, "{ctx}: a read command changed the file");
        }

        // A write to a pool that is refused (damage found when opening it read-write)
        // changes nothing either, not even the header's sequence number.
        // (A put the open did not refuse — the damage lies where only a read of that record
        // finds it — adds its record, which salvage may then find too.)
        let mut added = false;
        if !right && !unclean {
            let w = pmkv(&["put", p, "new-key", "new-value"]);
            added = w.status.code() == Some(0);
            if !added {
                assert_refused(&w);
                assert!(std::fs::read(&path).unwrap() == b, "{ctx}: a refused put changed the file");
                n.refused_writes += 1;
            }
        }

        // Salvage (every 4th copy, it is the slowest command): never a wrong record.
        if c % 4 == 0 {
            let out = dir.path().join("s.pool");
            let _ = std::fs::remove_file(&out);
            let s = pmkv(&["salvage", p, out.to_str().unwrap(), "--engine", "hart"]);
            if s.status.code() == Some(0) {
                let sd = pmkv(&["dump", out.to_str().unwrap()]);
                assert_eq!(sd.status.code(), Some(0), "{ctx}: the salvaged pool opens");
                let got = text(&sd.stdout);
                for line in got.lines() {
                    assert!(
                        want_lines.contains(line) || (added && line == "new-key\tnew-value"),
                        "{ctx}: salvage produced a record that was not there: {line}"
                    );
                }
                n.salvaged_records += got.lines().count() as u64;
                // What salvage could not save, it named: only damage loses records.
                if right {
                    assert_eq!(got.lines().count(), model.len(), "{ctx}: salvage of an intact pool lost records");
                }
            } else {
                assert_refused(&s);
            }
        }
    }
    println!(
        "damage test: {} copies: {} read exactly right, {} refused with an error, 0 wrong; check failed on {}; \
         {} needed crash recovery; {} refused puts left the file unchanged; salvage recovered {} records from {} copies",
        n.copies,
        n.exact,
        n.refused,
        n.check_failed,
        n.recovered,
        n.refused_writes,
        n.salvaged_records,
        copies.div_ceil(4)
    );
}
