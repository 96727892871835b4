//! Damage to the allocator's lists after a crash is never silent (integrity, SPEC P7).
//!
//! A pool file is left as a crash (SIGKILL, power loss) leaves it: the allocator and pool
//! are never dropped (`std::mem::forget`), so no seal is written and the pool stays marked
//! unclean; a copy of the file is what the next process finds. The copy is then damaged
//! the way a zeroed page or a flipped bit damages it, and the next open must refuse it
//! with `CorruptAllocator`: after a crash there is no seal to compare, so only the words'
//! own checks (format 3) can tell a cut list from a short one.
//!
//! The damage is written as raw bytes found from object offsets, so this test reads the
//! same with allocator format 2: there, a zeroed `PNext`, a zeroed header line, a zeroed
//! last directory entry and a free bit set above the next-free index all opened without
//! an error, with the objects behind them gone.

mod epalloc_util;

use epalloc_util::*;
use pmkv_substrate::epalloc::{root, EpAlloc, TypeId, EPALLOC_ROOT, SLOTS};
use pmkv_substrate::{Pool, PoolError};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const A: TypeId = TypeId(1);
const B: TypeId = TypeId(2);
const C: TypeId = TypeId(3);

/// Where things are in the crashed pool.
struct Crashed {
    _dir: tempfile::TempDir,
    path: PathBuf,
    /// Chunks of the class-64 list of type A, in creation order (the list runs from the
    /// last to the first); the last one is partly filled.
    chunks: Vec<u64>,
    /// Directory entries in use, in index order (the last one is an empty list).
    entries: Vec<u64>,
    used: Used,
}

/// A pool with three class-64 chunks of type A, a class-24 list of type B, an extent of
/// type B and an empty list of type C (the last directory entry), "crashed".
fn crashed() -> Crashed {
    let (dir, path) = pool_file("live.pool");
    let o = opts();
    let ep = EpAlloc::create(Arc::new(Pool::create(&path, LAYOUT, &o).unwrap())).unwrap();
    let mut a = Vec::new();
    for i in 0..3 * SLOTS as u64 - 10 {
        a.push(put(&ep, A, 64, i));
    }
    for i in 0..20 {
        put(&ep, B, 24, 1000 + i);
    }
    put(&ep, B, 9000, 5000);
    // An empty list: created by its first reservation, its chunk recycled.
    let r = ep.alloc(C, 8).unwrap();
    ep.unreserve(r);
    ep.release_empty_chunks();
    // Class 64: 64-byte chunk head, slots in order, so slot 0 of chunk k is object 56k.
    let chunks: Vec<u64> = (0..3).map(|k| a[k * SLOTS] - 64).collect();
    let used = used_set(&ep, &[A, B, C]);
    let root_at = ep.pool().root(EPALLOC_ROOT);
    let entries: Vec<u64> = (0..root::DIR_CAP as u64)
        .map(|i| root_at + root::DIR_AT + i * root::ENTRY_LEN)
        .filter(|&e| read_u64(ep.pool(), e) != 0)
        .collect();
    assert_eq!(entries.len(), 4, "lists A/64, B/24, B/extent and C/8");
    let pool = ep.pool().clone();
    // The crash: nothing is dropped, no seal, the pool stays unclean and locked.
    std::mem::forget(ep);
    std::mem::forget(pool);
    let copy = dir.path().join("crashed.pool");
    std::fs::copy(&path, &copy).unwrap();
    Crashed { _dir: dir, path: copy, chunks, entries, used }
}

fn open(path: &Path) -> Result<EpAlloc, PoolError> {
    EpAlloc::open(Arc::new(Pool::open(path, Some(LAYOUT), &opts()).unwrap()))
}

fn read_at(path: &Path, at: u64) -> u64 {
    let mut b = [0u8; 8];
    std::fs::File::open(path).unwrap().read_exact_at(&mut b, at).unwrap();
    u64::from_le_bytes(b)
}

#[test]
fn p7_damage_after_a_crash_is_refused() {
    let c = crashed();
    assert!(!Pool::inspect(&c.path).unwrap().state.clean, "the copy is what a crash leaves");
    let good = std::fs::read(&c.path).unwrap();
    let entries = &c.entries;
    let (last_entry, head_chunk, full_chunk) = (entries[entries.len() - 1], c.chunks[2], c.chunks[0]);
    let cases: Vec<(&str, u64, Vec<u8>)> = vec![
        ("a zeroed header line of a full chunk", full_chunk, vec![0; 64]),
        ("a zeroed header line of the head chunk", head_chunk, vec![0; 64]),
        ("a zeroed PNext of the head chunk (a cut list)", head_chunk + 8, vec![0; 8]),
        ("a zeroed PNext of the middle chunk", c.chunks[1] + 8, vec![0; 8]),
        ("a zeroed header word", c.chunks[1], vec![0; 8]),
        ("a free bit set in the partly filled chunk", head_chunk, {
            let w = read_at(&c.path, head_chunk) | 1 << 50;
            w.to_le_bytes().to_vec()
        }),
        ("a used bit cleared in a full chunk", full_chunk, {
            let w = read_at(&c.path, full_chunk) & !(1 << 7);
            w.to_le_bytes().to_vec()
        }),
        ("the first directory entry zeroed", entries[0], vec![0; 64]),
        ("the last used directory entry zeroed", last_entry, vec![0; 64]),
        ("the last used directory entry's tag zeroed (an empty list)", last_entry, vec![0; 8]),
        ("the first directory entry's PHead zeroed", entries[0] + 8, vec![0; 8]),
        ("the 4 KiB page holding the head chunk's header zeroed", head_chunk & !4095, vec![0; 4096]),
    ];
    let mut silent = Vec::new();
    for (what, at, bytes) in &cases {
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&c.path).unwrap();
        file.write_all_at(&good, 0).unwrap();
        file.write_all_at(bytes, *at).unwrap();
        drop(file);
        match open(&c.path) {
            Err(PoolError::CorruptAllocator(m)) => {
                assert!(!m.contains('\n'), "{what}: a one-line message: {m}");
            }
            Err(e) => panic!("{what}: not a corruption error: {e}"),
            Ok(ep) => {
                let now = used_set(&ep, &[A, B, C]).len();
                silent.push(format!("{what} (used objects {} before, {now} after)", c.used.len()));
            }
        }
    }
    assert!(silent.is_empty(), "damage opened without an error:\n  {}", silent.join("\n  "));
    // The undamaged crash image recovers with every object, and checks.
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&c.path).unwrap();
    file.write_all_at(&good, 0).unwrap();
    drop(file);
    let ep = open(&c.path).unwrap();
    assert_eq!(used_set(&ep, &[A, B, C]), c.used);
    ep.check().unwrap();
}
