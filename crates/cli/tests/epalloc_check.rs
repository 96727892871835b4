//! `pmkv check POOL` and `pmkv bench alloc`, run as the built binary (SPEC P7, U2): a good
//! allocator prints its report and exits 0; a pool without an allocator or with damaged
//! allocator metadata exits 2 with one line on stderr, never a panic.

mod common;
use common::*;
use pmkv_substrate::epalloc::{EpAlloc, TypeId, EPALLOC_ROOT};
use pmkv_substrate::{Mode, Pool, PoolOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn opts() -> PoolOptions {
    pool_opts(Mode::Adr, 1 << 20, 4 << 20)
}

/// A pool with an allocator and some objects; returns the path and the first chunk of
/// the 64-byte list (for corrupting it).
fn pool_with_objects(dir: &Path) -> (PathBuf, u64) {
    let path = dir.join("ep.pool");
    let pool = Arc::new(Pool::create(&path, "anylayout", &opts()).unwrap());
    let ep = EpAlloc::create(pool).unwrap();
    let mut first = 0;
    for i in 0..100u64 {
        let off = ep.alloc(TypeId(1 + (i % 3) as u16), [8, 64, 5000][i as usize % 3]).unwrap();
        ep.publish(off);
        if i == 1 {
            first = off;
        }
    }
    (path, first - 64)
}

#[test]
fn p7_check_prints_the_report_of_a_good_pool() {
    let dir = pool_dir();
    let (path, _) = pool_with_objects(dir.path());
    let out = pmkv(&["check", path.to_str().unwrap(), "--stats"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("layout           anylayout"), "{s}");
    assert!(s.contains("OK: lists acyclic"), "{s}");
    assert!(s.contains("33 extents") || s.contains("extents          33"), "{s}");
    assert!(s.contains("overhead B"), "stats table: {s}");
}

#[test]
fn p7_check_refuses_missing_or_damaged_allocator() {
    let dir = pool_dir();
    // No allocator in the pool.
    let bare = dir.path().join("bare.pool");
    drop(Pool::create(&bare, "x", &opts()).unwrap());
    assert_refused(&pmkv(&["check", bare.to_str().unwrap()]));
    // Not a pool at all, and a missing file.
    let junk = write_file(dir.path(), "junk", [7u8; 8192]);
    assert_refused(&pmkv(&["check", junk.to_str().unwrap()]));
    assert_refused(&pmkv(&["check", dir.path().join("nope").to_str().unwrap()]));
    // A cycle in a chunk list: the chunk's PNext points to itself.
    let (path, chunk) = pool_with_objects(dir.path());
    {
        let pool = Pool::open(&path, None, &opts()).unwrap();
        assert!(pool.root(EPALLOC_ROOT) != 0);
        write_u64(&pool, chunk + 8, chunk);
        pool.persist_off(chunk + 8, 8);
    }
    let out = pmkv(&["check", path.to_str().unwrap()]);
    assert_refused(&out);
    assert!(text(&out.stderr).contains("allocator"), "{}", text(&out.stderr));
}

#[cfg(feature = "bench")]
#[test]
fn p7_bench_alloc_runs() {
    let dir = pool_dir();
    let out = pmkv(&["bench", "alloc", "--iters", "2000", "--threads", "1,2", "--dir", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("EPallocator ns"), "{s}");
    assert_eq!(s.lines().filter(|l| l.trim_start().starts_with(['1', '2'])).count(), 2, "{s}");
    assert!(s.contains("x ") || s.contains("libpmemobj not installed"), "{s}");
}
