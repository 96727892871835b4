//! A pool that was not closed cleanly (a crash, a SIGKILL, a power loss) and is then
//! damaged: every open this build refuses leaves the file byte for byte as it was, as it
//! does for a cleanly closed pool (docs/requirements.md, R2).
//!
//! The crashed pool is a copy of a pool's file taken while its store is open, after a
//! sync: what a SIGKILL at that moment would leave (the header says "in use").

use pmkv::{Options, Store};
use std::path::Path;

fn crashed_copy(engine: &str, dir: &Path) -> Vec<u8> {
    let path = dir.join(format!("{engine}.pool"));
    // A small Mangosteen region: every open checks each of its pages.
    let mut opts = Options::default();
    if engine == "mangosteen" {
        opts = opts.param("region_mib", "8");
    }
    let store = Store::open(&path, engine, &opts).unwrap();
    for i in 0..2_000u32 {
        let value = format!("value-{i}-").repeat(1 + i as usize % 5);
        store.put(format!("key-{i:05}").as_bytes(), value.as_bytes()).unwrap();
    }
    for i in (0..2_000u32).step_by(7) {
        store.delete(format!("key-{i:05}").as_bytes()).unwrap();
    }
    store.sync().unwrap();
    let image = std::fs::read(&path).unwrap();
    store.close().unwrap();
    image
}

fn refused_opens_change_nothing(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let image = crashed_copy(engine, dir.path());
    let path = dir.path().join("damaged.pool");
    // Pages holding data (the rest of a pool file is zeroes), but not the header's: a
    // sample of them, each zeroed (a lost page), and each with a byte flipped in its
    // middle (a flipped bit in a record).
    let pages: Vec<usize> =
        (1..image.len() / 4096).filter(|p| image[p * 4096..(p + 1) * 4096].iter().any(|&b| b != 0)).collect();
    let (mut refused, mut opened) = (0, 0);
    for &page in pages.iter().step_by(pages.len().div_ceil(40).max(1)) {
        for damage in 0..2 {
            let mut bad = image.clone();
            if damage == 0 {
                bad[page * 4096..(page + 1) * 4096].fill(0);
            } else {
                bad[page * 4096 + 2048] ^= 0x5a;
            }
            std::fs::write(&path, &bad).unwrap();
            for read_only in [true, false] {
                match Store::open(&path, engine, &Options::default().read_only(read_only)) {
                    Err(e) => {
                        refused += 1;
                        let now = std::fs::read(&path).unwrap();
                        if let Some(i) = (0..now.len()).find(|&i| now[i] != bad[i]) {
                            eprintln!("first changed byte at {i:#x}: {:#x} -> {:#x}", bad[i], now[i]);
                        }
                        assert!(
                            now == bad,
                            "{engine}: page {page} damage {damage}: a refused open (read_only {read_only}) changed \
                             the file: {e}"
                        );
                    }
                    Ok(store) => {
                        opened += 1;
                        drop(store.close());
                        // Recovery ran (and may have written); start the next case afresh.
                        std::fs::write(&path, &bad).unwrap();
                    }
                }
            }
        }
    }
    eprintln!("{engine}: {refused} refused opens changed nothing; {opened} opens succeeded");
    assert!(refused > 0, "{engine}: no damage was refused, the test checked nothing");
}

#[test]
fn hart_refused_opens_of_a_crashed_pool_change_nothing() {
    refused_opens_change_nothing("hart");
}

#[test]
fn nbtree_refused_opens_of_a_crashed_pool_change_nothing() {
    refused_opens_change_nothing("nbtree");
}

#[test]
fn mangosteen_refused_opens_of_a_crashed_pool_change_nothing() {
    refused_opens_change_nothing("mangosteen");
}
