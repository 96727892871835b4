//! Pool files (SPEC P1) and offsets (SPEC P2): create/open/reopen, roots, the clean-shutdown
//! flag, growth with a fixed base, `Full`, locking (in this process and across processes),
//! and every way an open can be refused — each of which must leave the file untouched.

use pmkv_substrate::header::{FORMAT_VERSION, HEADER_SIZE, SEAL_ROOT};
use pmkv_substrate::{Durability, Event, Medium, Mode, Pool, PoolError, Survives, MIN_POOL_SIZE};
use pmkv_testutil::{
    forge_version, patched_copy, pool_dir, pool_file, read_bytes, read_u64, small_opts, write_bytes, write_file,
    write_pool, write_u64,
};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

const LAYOUT: &str = "testlayout";
/// Offsets of the two 128-byte state slots and the immutable-part CRC (docs/format/pool.md).
const SLOT_AT: [usize; 2] = [256, 384];
const IMM_CRC_AT: usize = 252;

/// A pool's lock is a `flock` on its open file description. A child process started while
/// a pool is open shares that description from `fork` until its `exec` closes the
/// (close-on-exec) descriptor, so for that instant the pool stays locked even after this
/// process drops it. Tests that close and reopen pools hold this guard shared; the test
/// that starts child processes holds it exclusively while it spawns them.
static SPAWN: RwLock<()> = RwLock::new(());

fn no_spawn() -> RwLockReadGuard<'static, ()> {
    SPAWN.read().unwrap_or_else(|e| e.into_inner())
}

fn spawning() -> RwLockWriteGuard<'static, ()> {
    SPAWN.write().unwrap_or_else(|e| e.into_inner())
}

/// Write `bytes` at `off` and persist them.
fn write_at(pool: &Pool, off: u64, bytes: &[u8]) {
    write_bytes(pool, off, bytes);
    pool.persist_off(off, bytes.len());
}

/// Write `v` at `off` and persist it.
fn persist_u64(pool: &Pool, off: u64, v: u64) {
    write_u64(pool, off, v);
    pool.persist_off(off, 8);
}

/// Deterministic content for byte `i` of a test pattern.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|i| (i.wrapping_mul(31).wrapping_add(seed.wrapping_mul(7919)) % 251) as u8).collect()
}

/// A pool file `name` in `dir` holding `pattern(1, 4096)` at root 0, closed cleanly.
fn new_pool_file(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    write_pool(&path, LAYOUT, &small_opts(), 0, &pattern(1, 4096));
    path
}

#[test]
fn p1_create_open_reopen_roots_survive() {
    let _g = no_spawn();
    let (dir, path) = pool_file("a.pool");
    let mut expect = Vec::new();
    {
        let pool = Pool::create(&path, LAYOUT, &small_opts()).unwrap();
        assert_eq!(pool.layout(), LAYOUT);
        assert_eq!(pool.size(), 64 << 10);
        assert_eq!(pool.max_size(), 1 << 20);
        assert_eq!(pool.heap_top(), HEADER_SIZE);
        assert_eq!(pool.path(), Some(path.as_path()));
        assert!(!pool.is_sim());
        for i in 0..SEAL_ROOT {
            assert_eq!(pool.root(i), 0, "a new pool has no roots");
            let off = pool.take_heap(100 + 10 * i as u64, 64).unwrap();
            assert_eq!(off % 64, 0);
            let data = pattern(i as u64, 100 + 10 * i);
            write_at(&pool, off, &data);
            pool.set_root(i, off);
            expect.push((off, data));
        }
    }
    let top;
    {
        let pool = Pool::open(&path, Some(LAYOUT), &small_opts()).unwrap();
        top = pool.heap_top();
        assert!(top > HEADER_SIZE);
        for (i, (off, data)) in expect.iter().enumerate() {
            assert_eq!(pool.root(i), *off, "root {i} survives reopen");
            assert_eq!(&read_bytes(&pool, *off, data.len()), data);
        }
        // Change one root in the second session.
        pool.set_root(3, 0);
    }
    // Third session, any layout accepted, another mode: still the same state.
    let pool = Pool::open(&path, None, &small_opts().mode(Mode::Eadr)).unwrap();
    assert_eq!(pool.layout(), LAYOUT);
    assert_eq!(pool.heap_top(), top);
    assert_eq!(pool.root(3), 0);
    for i in [0, 1, 2, 4, 5, 6] {
        assert_eq!(pool.root(i), expect[i].0);
        assert_eq!(read_bytes(&pool, expect[i].0, expect[i].1.len()), expect[i].1);
    }
    drop(pool);

    // Creating over an existing pool is refused and changes nothing.
    let before = std::fs::read(&path).unwrap();
    assert!(matches!(Pool::create(&path, LAYOUT, &small_opts()), Err(PoolError::AlreadyExists { .. })));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // open_or_create opens it.
    let pool = Pool::open_or_create(&path, LAYOUT, &small_opts()).unwrap();
    assert_eq!(pool.root(0), expect[0].0);
    drop(pool);
    // ... and creates a missing one.
    let fresh = dir.path().join("fresh.pool");
    let pool = Pool::open_or_create(&fresh, LAYOUT, &small_opts()).unwrap();
    assert_eq!(pool.root(0), 0);
}

/// Pools are mapped from a 2 MiB boundary, so a file system with 2 MiB pages (DAX, a
/// tmpfs mounted `huge=`) can map them with huge pages (offsets and addresses agree modulo
/// 2 MiB), after growth too.
#[test]
fn p1_pools_start_on_a_huge_page_boundary() {
    let _g = no_spawn();
    let (_dir, path) = pool_file("h.pool");
    let pools: Vec<Pool> = (0..4)
        .map(|i| {
            let p = path.with_extension(format!("{i}"));
            Pool::create(&p, LAYOUT, &small_opts()).unwrap()
        })
        .collect();
    for p in &pools {
        assert_eq!(p.base() as usize % (2 << 20), 0, "pool base {:p}", p.base());
    }
    let sim = Pool::create_sim(LAYOUT, &small_opts()).unwrap();
    assert_eq!(sim.base() as usize % (2 << 20), 0);
}

/// Bytes of this process's page tables that map `[start, end)`: the sum of `Rss` over the
/// mappings inside it (a pool's extents are separate mappings), from /proc/self/smaps.
fn resident_bytes(start: usize, end: usize) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("/proc/self/smaps");
    let mut inside = false;
    let mut total = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                inside = a >= start && b <= end;
                continue;
            }
        }
        if inside {
            if let Some(kb) = line.strip_prefix("Rss:") {
                total += kb.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap() * 1024;
            }
        }
    }
    total
}

/// Whether this kernel has `MADV_POPULATE_WRITE` (Linux 5.14).
fn kernel_populates() -> bool {
    // SAFETY: a private anonymous page of our own, advised, then unmapped.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        let ok = libc::madvise(p, 4096, libc::MADV_POPULATE_WRITE) == 0;
        libc::munmap(p, 4096);
        ok
    }
}

/// `PoolOptions::prefault`: a new pool's pages, and those of each extent it grows by, are
/// mapped before any operation touches them (so no operation pays a first-touch fault);
/// not in `msync` mode (it would dirty a disk file's every page), and not when turned off.
#[test]
fn p1_prefault_maps_new_pages_at_creation_and_growth() {
    if !kernel_populates() {
        eprintln!("skipped: this kernel has no MADV_POPULATE_WRITE");
        return;
    }
    let _g = no_spawn();
    let (_dir, path) = pool_file("pf.pool");
    let mb = 1u64 << 20;
    let opts = |mode: Mode| pmkv_testutil::pool_opts(mode, 8 * mb, 64 * mb);
    let span = |p: &Pool| (p.base() as usize, p.base() as usize + p.size() as usize);
    for (name, o, want) in [
        ("adr", opts(Mode::Adr), true),
        ("eadr", opts(Mode::Eadr), true),
        ("adr, prefault off", opts(Mode::Adr).prefault(false), false),
        ("msync", opts(Mode::Msync), false),
    ] {
        let _ = std::fs::remove_file(&path);
        let pool = Pool::create(&path, LAYOUT, &o).unwrap();
        let (a, b) = span(&pool);
        let rss = resident_bytes(a, b);
        if want {
            assert!(rss >= 8 * mb - 64 * 1024, "{name}: {rss} bytes of 8 MiB mapped after creation");
        } else {
            assert!(rss < 2 * mb, "{name}: {rss} bytes mapped after creation without prefault");
        }
        pool.ensure_size(20 * mb).unwrap();
        let (a2, b2) = span(&pool);
        assert_eq!(a2, a, "growth keeps the base");
        // The new extent's mapping may merge with the first (same file, adjoining
        // offsets), so the whole pool is measured.
        let all = resident_bytes(a, b2);
        if want {
            assert!(all >= (b2 - a) as u64 - 64 * 1024, "{name}: {all} of {} bytes mapped after growth", b2 - a);
        } else {
            assert!(all < 2 * mb, "{name}: {all} bytes mapped after growth without prefault");
        }
        drop(pool);
    }
    // A pool on a disk file system is not prefaulted in any mode: write-faulting its pages
    // would dirty them all for writeback.
    let disk = tempfile::tempdir_in("/var/tmp").unwrap();
    // SAFETY: statfs of an existing directory into a zeroed struct.
    let on_disk = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        let c = std::ffi::CString::new(disk.path().as_os_str().as_encoded_bytes()).unwrap();
        libc::statfs(c.as_ptr(), &mut st) == 0 && !matches!(st.f_type as i64, 0x0102_1994 | 0x8584_58f6 | 0x9584_58f6)
    };
    if on_disk {
        let pool = Pool::create(disk.path().join("d.pool"), LAYOUT, &opts(Mode::Adr)).unwrap();
        let (a, b) = span(&pool);
        let rss = resident_bytes(a, b);
        assert!(rss < 2 * mb, "a pool on a disk file system: {rss} bytes mapped after creation");
    } else {
        eprintln!("/var/tmp is in memory here: the disk case was not checked");
    }
}

/// The medium a pool reports is what its directory is mounted from by the mount table (an
/// oracle apart from the `fstatfs` and `MAP_SYNC` probe the pool uses): on this machine
/// `/dev/shm` is tmpfs (memory) and both `/tmp` and the target directory are ext4 (a
/// disk). Read-write opens, read-only opens and `inspect` agree, and a pool's durability
/// is its medium with its mode.
#[test]
fn p1_a_pool_reports_the_medium_it_sits_on() {
    let _g = no_spawn();
    let target_tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let shm = Path::new("/dev/shm");
    let disk = pmkv_testutil::disk_dir(target_tmp);
    let mut dirs: Vec<(tempfile::TempDir, &str)> = Vec::new();
    if shm.is_dir() {
        dirs.push((tempfile::tempdir_in(shm).unwrap(), "/dev/shm"));
    }
    if let Some(d) = disk {
        dirs.push((d, "a disk directory"));
    } else {
        eprintln!("no disk file system to write to here: the disk case was not checked");
    }
    for (dir, name) in &dirs {
        let want = pmkv_testutil::expected_medium(dir.path()).expect("a mount table");
        if *name == "/dev/shm" {
            assert_eq!(want, Medium::Memory, "/dev/shm is tmpfs by the mount table");
        } else {
            assert_eq!(want, Medium::Disk);
        }
        let path = dir.path().join("medium.pool");
        let pool = Pool::create(&path, LAYOUT, &small_opts().mode(Mode::Msync)).unwrap();
        assert_eq!(pool.medium(), want, "{name}");
        assert_eq!(pool.durability(), Durability::new(want, Mode::Msync), "{name}");
        assert!(!pool.map_sync() || want == Medium::Dax, "{name}: MAP_SYNC only on DAX");
        drop(pool);
        assert_eq!(Pool::inspect(&path).unwrap().medium, want, "{name}: inspect");
        let ro = Pool::open_read_only(&path, Some(LAYOUT), &small_opts()).unwrap();
        assert_eq!(ro.medium(), want, "{name}: read-only open");
        assert_eq!(ro.durability().mode, Mode::Adr);
        drop(ro);
        let file = std::fs::File::open(&path).unwrap();
        assert_eq!(Medium::of_file(&file), want, "{name}: Medium::of_file");
    }
    let sim = Pool::create_sim(LAYOUT, &small_opts()).unwrap();
    assert_eq!(sim.medium(), Medium::Anonymous);
    assert_eq!(sim.durability().survives(Event::ProcessCrash), Survives::No);
}

#[test]
fn p1_every_mode_opens_the_same_pool() {
    let _g = no_spawn();
    let (_dir, path) = pool_file("m.pool");
    drop(Pool::create(&path, LAYOUT, &small_opts()).unwrap());
    for (k, mode) in Mode::ALL.into_iter().enumerate() {
        let pool = Pool::open(&path, Some(LAYOUT), &small_opts().mode(mode)).unwrap();
        assert_eq!(pool.mode(), mode);
        // Check the previous session's write, then make our own.
        if k > 0 {
            let prev = pool.root(0);
            assert_eq!(read_u64(&pool, prev), k as u64 - 1);
        }
        let off = pool.take_heap(8, 8).unwrap();
        persist_u64(&pool, off, k as u64);
        pool.set_root(0, off);
    }
}

#[test]
fn p1_clean_shutdown_flag() {
    let _g = no_spawn();
    let (_dir, path) = pool_file("c.pool");
    let pool = Pool::create(&path, LAYOUT, &small_opts()).unwrap();
    assert!(!pool.was_clean(), "a new pool has no previous session");
    let info = Pool::inspect(&path).unwrap();
    assert!(!info.state.clean, "clean flag is false while the pool is open");
    assert!(info.in_use, "another handle holds it");
    drop(pool);
    let info = Pool::inspect(&path).unwrap();
    assert!(info.state.clean, "clean flag is true after drop");
    assert!(!info.in_use);

    let pool = Pool::open(&path, Some(LAYOUT), &small_opts()).unwrap();
    assert!(pool.was_clean());
    assert!(!Pool::inspect(&path).unwrap().state.clean);
    pool.close().unwrap();
    assert!(Pool::inspect(&path).unwrap().state.clean);

    // A handle that is never dropped (as in a process that dies without unwinding) leaves
    // the flag false. Its descriptor — and so its lock — is leaked too, so in this process
    // the pool stays locked: that is correct, the "process" still holds it open. (The
    // cross-process test below shows the next open after a real exit sees `was_clean` false.)
    let pool = Pool::open(&path, Some(LAYOUT), &small_opts()).unwrap();
    assert!(pool.was_clean());
    std::mem::forget(pool);
    let info = Pool::inspect(&path).unwrap();
    assert!(!info.state.clean, "no drop, no clean flag");
    assert!(info.in_use);
    assert!(matches!(Pool::open(&path, Some(LAYOUT), &small_opts()), Err(PoolError::Locked { .. })));
}

/// A read-only open changes nothing in the file, shares the pool with other readers but
/// not with a writer, refuses every change with an error, and refuses a pool that needs
/// crash recovery.
#[test]
fn p1_read_only_open() {
    let _g = no_spawn();
    let dir = pool_dir();
    let path = new_pool_file(dir.path(), "r.pool");
    let before = std::fs::read(&path).unwrap();
    {
        let a = Pool::open_read_only(&path, Some(LAYOUT), &small_opts()).unwrap();
        let b = Pool::open_read_only(&path, None, &small_opts()).unwrap();
        assert!(a.is_read_only() && b.is_read_only() && a.was_clean());
        let off = a.root(0);
        assert_eq!(read_bytes(&a, off, 4096), pattern(1, 4096));
        assert_eq!(read_bytes(&b, off, 4096), pattern(1, 4096));
        assert!(matches!(a.take_heap(64, 64), Err(PoolError::ReadOnly { .. })));
        assert!(matches!(a.ensure_size(a.size() + 4096), Err(PoolError::ReadOnly { .. })));
        assert!(matches!(a.check_writable(), Err(PoolError::ReadOnly { .. })));
        assert!(matches!(Pool::open(&path, Some(LAYOUT), &small_opts()), Err(PoolError::Locked { .. })));
        assert!(matches!(
            Pool::open_read_only(&path, Some("other"), &small_opts()),
            Err(PoolError::WrongLayout { .. })
        ));
    }
    assert_eq!(std::fs::read(&path).unwrap(), before, "read-only opens changed the file");
    let w = Pool::open(&path, Some(LAYOUT), &small_opts()).unwrap();
    assert!(w.check_writable().is_ok());
    assert!(matches!(Pool::open_read_only(&path, None, &small_opts()), Err(PoolError::Locked { .. })));
    // A writer that vanishes without closing leaves the pool unclean. A copy taken while
    // the writer still has it open is what a crash leaves (the original stays locked by
    // this process): the read-only open refuses it, a read-write open recovers it.
    std::mem::forget(w);
    let copy = dir.path().join("copy.pool");
    std::fs::copy(&path, &copy).unwrap();
    assert!(matches!(Pool::open_read_only(&copy, None, &small_opts()), Err(PoolError::NeedsRecovery { .. })));
    drop(Pool::open(&copy, None, &small_opts()).unwrap());
    assert!(Pool::open_read_only(&copy, None, &small_opts()).unwrap().was_clean());
    assert!(matches!(
        Pool::open_read_only(dir.path().join("missing.pool"), None, &small_opts()),
        Err(PoolError::NotFound { .. })
    ));
}

#[test]
fn p1_growth_keeps_base_and_contents() {
    let _g = no_spawn();
    let (_dir, path) = pool_file("g.pool");
    let initial = MIN_POOL_SIZE; // 8 KiB: the smallest pool, so growth starts at once
    let max = 4 << 20;
    let o = small_opts().initial_size(initial).max_size(max);
    let pool = Pool::create(&path, LAYOUT, &o).unwrap();
    let base = pool.base();
    assert_eq!(pool.size(), initial);

    // Fill the initial pool up to 100 bytes before its end, then take 200 bytes: that
    // allocation straddles the initial end and forces the first growth step.
    let first_len = initial - HEADER_SIZE - 100;
    let first = pool.take_heap(first_len, 1).unwrap();
    assert_eq!(pool.size(), initial, "no growth yet");
    let first_data = pattern(98, first_len as usize);
    write_at(&pool, first, &first_data);
    let straddle_off = pool.take_heap(200, 1).unwrap();
    assert_eq!(straddle_off, initial - 100);
    assert!(pool.size() > initial);
    assert_eq!(pool.base(), base);
    let straddle = pattern(99, 200);
    write_at(&pool, straddle_off, &straddle);
    pool.set_root(1, straddle_off);

    // Many allocations of awkward sizes, each filled, until the pool is ~3 MiB: every
    // growth step must keep the base and everything written before it.
    let mut written: Vec<(u64, Vec<u8>)> = vec![(straddle_off, straddle), (first, first_data)];
    let mut sizes_seen = vec![pool.size()];
    let mut i = 0u64;
    while pool.heap_top() < 3 << 20 {
        let len = 1000 + (i * 7919) % 30_000;
        let off = pool.take_heap(len, 64).unwrap();
        assert_eq!(pool.base(), base, "the base never moves");
        assert!(off + len <= pool.size());
        let data = pattern(i + 1000, len as usize);
        write_at(&pool, off, &data);
        written.push((off, data));
        if *sizes_seen.last().unwrap() != pool.size() {
            sizes_seen.push(pool.size());
            // Everything written so far is intact after this growth step.
            for (o, d) in &written {
                assert_eq!(&read_bytes(&pool, *o, d.len()), d, "content at {o} after growth to {}", pool.size());
            }
        }
        i += 1;
    }
    assert!(sizes_seen.len() >= 8, "growth steps: {sizes_seen:?}");
    assert!(sizes_seen.windows(2).all(|w| w[0] < w[1]));
    let size = pool.size();
    let top = pool.heap_top();
    // Remember the chain of allocations through a root.
    pool.set_root(0, written[2].0);
    drop(pool);

    let file_len = std::fs::metadata(&path).unwrap().len();
    assert!(file_len >= size, "the file is backed up to the pool size");
    let pool = Pool::open(&path, Some(LAYOUT), &o).unwrap();
    assert_eq!(pool.size(), size, "size survives reopen");
    assert_eq!(pool.heap_top(), top);
    assert_eq!(pool.root(1), written[0].0);
    for (o, d) in &written {
        assert_eq!(&read_bytes(&pool, *o, d.len()), d, "content at {o} after reopen");
    }
}

#[test]
fn p1_growth_up_to_max_then_full() {
    let _g = no_spawn();
    let (_dir, path) = pool_file("f.pool");
    let max = 256 << 10;
    let o = small_opts().initial_size(16 << 10).max_size(max);
    let pool = Pool::create(&path, LAYOUT, &o).unwrap();
    let mut taken = Vec::new();
    let err = loop {
        match pool.take_heap(5000, 8) {
            Ok(off) => {
                write_at(&pool, off, &pattern(off, 5000));
                taken.push(off);
            }
            Err(e) => break e,
        }
    };
    match err {
        PoolError::Full { max: m, .. } => assert_eq!(m, max),
        e => panic!("expected Full, got {e}"),
    }
    assert_eq!(pool.size(), max, "the pool grew exactly to its maximum");
    assert!(taken.len() as u64 >= (max - HEADER_SIZE) / 5000 - 1);
    // Exactly the maximum is fine, one more byte is not; a failed growth changes nothing.
    pool.ensure_size(max).unwrap();
    assert!(matches!(pool.ensure_size(max + 1), Err(PoolError::Full { .. })));
    assert!(matches!(pool.take_heap(u64::MAX - 10, 8), Err(PoolError::Full { .. })));
    let rest = max - pool.heap_top();
    let last = pool.take_heap(rest, 1).unwrap();
    assert_eq!(last + rest, max);
    assert!(matches!(pool.take_heap(1, 1), Err(PoolError::Full { .. })));
    for off in &taken {
        assert_eq!(read_bytes(&pool, *off, 5000), pattern(*off, 5000));
    }
    drop(pool);
    let pool = Pool::open(&path, Some(LAYOUT), &o).unwrap();
    assert_eq!(pool.size(), max);
    assert_eq!(pool.heap_top(), max);
    for off in &taken {
        assert_eq!(read_bytes(&pool, *off, 5000), pattern(*off, 5000));
    }
}

/// Build a linked list in the pool whose links are offsets, not pointers (SPEC P2).
/// Node: [next offset (0 = end), value].
fn build_list(pool: &Pool, n: u64) {
    let mut next = 0;
    for v in 0..n {
        let off = pool.take_heap(16, 16).unwrap();
        persist_u64(pool, off, next);
        persist_u64(pool, off + 8, v * v + 7);
        next = off;
    }
    pool.set_root(2, next);
}

fn walk_list(pool: &Pool) -> Vec<u64> {
    let mut out = Vec::new();
    let mut off = pool.root(2);
    while off != 0 {
        assert!(pool.contains(off, 16), "link {off} lies in the pool");
        out.push(read_u64(pool, off + 8));
        off = read_u64(pool, off);
    }
    out
}

#[test]
fn p2_offsets_survive_mapping_at_another_address() {
    let _g = no_spawn();
    let (_dir, path) = pool_file("o.pool");
    let o = small_opts().initial_size(16 << 10).max_size(1 << 20);
    let expect: Vec<u64> = (0..500u64).rev().map(|v| v * v + 7).collect();
    let pool = Pool::create(&path, LAYOUT, &o).unwrap();
    build_list(&pool, 500);
    assert_eq!(walk_list(&pool), expect);
    let old_base = pool.base() as usize;
    let reserved = pool.max_size() as usize;
    drop(pool);

    // Occupy the old address range so the reopened pool cannot land there again. If another
    // test thread maps something into the freed range first, the blocker fails, and once
    // that mapping is gone the pool might land at the old base after all: then try again.
    let mut blockers = Vec::new();
    let mut attempts = 0;
    let pool = loop {
        attempts += 1;
        assert!(attempts <= 100, "could not keep the old address range occupied");
        // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping.
        let b = unsafe {
            libc::mmap(
                old_base as *mut libc::c_void,
                reserved,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if b != libc::MAP_FAILED {
            blockers.push(b);
        }
        let pool = Pool::open(&path, Some(LAYOUT), &o).unwrap();
        if pool.base() as usize != old_base {
            break pool;
        }
    };
    let new_base = pool.base() as usize;
    assert_ne!(new_base, old_base, "the pool maps at another address");
    assert_eq!(walk_list(&pool), expect, "offsets are valid at the new address");

    // A third mapping of the same bytes (a simulated pool built from the file's image),
    // alive at the same time as the file pool, so necessarily elsewhere.
    let image = std::fs::read(&path).unwrap();
    let copy = Pool::from_image(&image, Some(LAYOUT), &o).unwrap();
    assert_ne!(copy.base() as usize, new_base);
    assert_ne!(copy.base() as usize, old_base);
    assert_eq!(walk_list(&copy), expect);
    drop(pool);
    for b in blockers {
        // SAFETY: each blocker is a `reserved`-byte mapping this test made and nothing
        // else uses (the pools mapped around them, not into them).
        unsafe { libc::munmap(b, reserved) };
    }
}

#[test]
fn p1_second_open_in_same_process_is_locked() {
    let _g = no_spawn();
    let dir = pool_dir();
    let path = new_pool_file(dir.path(), "l.pool");
    let pool = Pool::open(&path, Some(LAYOUT), &small_opts()).unwrap();
    let before = std::fs::read(&path).unwrap();
    for mode in Mode::ALL {
        match Pool::open(&path, Some(LAYOUT), &small_opts().mode(mode)) {
            Err(PoolError::Locked { path: p, .. }) => assert_eq!(p, path),
            Err(e) => panic!("expected Locked, got {e}"),
            Ok(_) => panic!("a second handle opened a locked pool"),
        }
    }
    assert!(matches!(Pool::open_or_create(&path, LAYOUT, &small_opts()), Err(PoolError::Locked { .. })));
    assert_eq!(std::fs::read(&path).unwrap(), before, "a refused open changes nothing");
    assert!(Pool::inspect(&path).unwrap().in_use);
    drop(pool);
    assert!(!Pool::inspect(&path).unwrap().in_use);
    let pool = Pool::open(&path, Some(LAYOUT), &small_opts()).unwrap();
    assert!(pool.was_clean());
}

// ----- error cases -----------------------------------------------------------------------

/// Every way of opening `path` fails with an error `check` accepts, and the file (or its
/// absence) is byte-for-byte unchanged afterwards.
fn assert_refused(path: &Path, what: &str, check: impl Fn(&PoolError) -> bool) {
    let before = std::fs::read(path).ok();
    let attempts: Vec<(&str, Result<(), PoolError>)> = vec![
        ("open(layout)", Pool::open(path, Some(LAYOUT), &small_opts()).map(drop)),
        ("open(any)", Pool::open(path, None, &small_opts()).map(drop)),
        ("open(eadr)", Pool::open(path, Some(LAYOUT), &small_opts().mode(Mode::Eadr)).map(drop)),
        ("inspect", Pool::inspect(path).map(drop)),
    ];
    for (how, r) in attempts {
        match r {
            Err(e) => {
                assert!(check(&e), "{what}: {how} gave the wrong error: {e:?}");
                let msg = e.to_string();
                assert!(!msg.contains('\n'), "{what}: one-line message: {msg}");
                assert!(msg.contains(&path.display().to_string()), "{what}: message names the file: {msg}");
            }
            Ok(()) => panic!("{what}: {how} succeeded"),
        }
        assert_eq!(std::fs::read(path).ok(), before, "{what}: {how} changed the file");
    }
    if before.is_some() {
        // open_or_create must neither overwrite nor replace an existing bad file.
        assert!(Pool::open_or_create(path, LAYOUT, &small_opts()).is_err(), "{what}: open_or_create");
        assert_eq!(std::fs::read(path).ok(), before, "{what}: open_or_create changed the file");
    }
}

#[test]
fn p1_refused_opens_leave_the_file_unchanged() {
    let _g = no_spawn();
    let dir = pool_dir();
    let d = dir.path();
    let good = std::fs::read(new_pool_file(d, "good.pool")).unwrap();
    let size = good.len();
    let variant = |name: &str, f: &dyn Fn(&mut Vec<u8>)| patched_copy(d, name, &good, f);

    assert_refused(&d.join("missing.pool"), "missing", |e| matches!(e, PoolError::NotFound { .. }));
    assert!(!d.join("missing.pool").exists());

    let text = write_file(d, "text.pool", "this is a text file, not a pool\n".repeat(300));
    assert_refused(&text, "text file", |e| matches!(e, PoolError::NotAPool { .. }));

    let empty = write_file(d, "empty.pool", b"");
    assert_refused(&empty, "empty file", |e| matches!(e, PoolError::NotAPool { .. }));

    let magic = variant("magic.pool", &|b| b[3] ^= 0x20);
    assert_refused(&magic, "bad magic", |e| matches!(e, PoolError::NotAPool { .. }));

    // A valid pool of another format version: version patched, checksum recomputed.
    let v2 = variant("v2.pool", &|b| forge_version(b, FORMAT_VERSION + 1));
    assert_refused(
        &v2,
        "other version",
        |e| matches!(e, PoolError::Version { found, supported, .. } if *found == FORMAT_VERSION + 1 && *supported == FORMAT_VERSION),
    );

    // Truncated: inside the immutable part, inside the header page, below the recorded size.
    for cut in [12usize, 200, 300, 4000, HEADER_SIZE as usize, size - 4096, size - 1] {
        let p = variant(&format!("cut{cut}.pool"), &|b| b.truncate(cut));
        assert_refused(
            &p,
            &format!("truncated to {cut}"),
            |e| matches!(e, PoolError::Truncated { actual, .. } if *actual == cut as u64),
        );
    }

    // Corrupt immutable part: layout name, maximum size, CRC itself.
    for at in [20usize, 50, 100, IMM_CRC_AT] {
        let p = variant(&format!("imm{at}.pool"), &|b| b[at] ^= 0x01);
        assert_refused(&p, &format!("byte {at} flipped"), |e| matches!(e, PoolError::CorruptHeader { .. }));
    }

    // Both state slots corrupt.
    let slots = variant("slots.pool", &|b| {
        b[SLOT_AT[0] + 8] ^= 0x40;
        b[SLOT_AT[1] + 100] ^= 0x02;
    });
    assert_refused(&slots, "both slots corrupt", |e| matches!(e, PoolError::CorruptHeader { .. }));
    let zeroed = variant("zeroslots.pool", &|b| b[256..512].fill(0));
    assert_refused(&zeroed, "both slots zero", |e| matches!(e, PoolError::CorruptHeader { .. }));

    // Another layout: refused when a layout is asked for, accepted with `None`.
    let other = d.join("other.pool");
    drop(Pool::create(&other, "otherlayout", &small_opts()).unwrap());
    let before = std::fs::read(&other).unwrap();
    match Pool::open(&other, Some(LAYOUT), &small_opts()) {
        Err(PoolError::WrongLayout { found, expected, .. }) => {
            assert_eq!(found, "otherlayout");
            assert_eq!(expected, LAYOUT);
        }
        Err(e) => panic!("expected WrongLayout, got {e}"),
        Ok(_) => panic!("opened a pool of another layout"),
    }
    assert!(matches!(Pool::open_or_create(&other, LAYOUT, &small_opts()), Err(PoolError::WrongLayout { .. })));
    assert_eq!(std::fs::read(&other).unwrap(), before);
    assert_eq!(Pool::open(&other, None, &small_opts()).unwrap().layout(), "otherlayout");
}

#[test]
fn p1_create_refuses_bad_options_without_leaving_a_file() {
    let _g = no_spawn();
    let (_dir, p) = pool_file("small.pool");
    let r = Pool::create(&p, LAYOUT, &small_opts().initial_size(MIN_POOL_SIZE - 1));
    assert!(matches!(r, Err(PoolError::TooSmall { min, .. }) if min == MIN_POOL_SIZE));
    assert!(!p.exists(), "no file is left behind");
    assert!(matches!(Pool::create(&p, LAYOUT, &small_opts().initial_size(0)), Err(PoolError::TooSmall { .. })));
    assert!(matches!(Pool::create(&p, &"x".repeat(32), &small_opts()), Err(PoolError::LayoutName(_))));
    assert!(matches!(Pool::create(&p, "", &small_opts()), Err(PoolError::LayoutName(_))));
    assert!(matches!(Pool::create(&p, "a\0b", &small_opts()), Err(PoolError::LayoutName(_))));
    assert!(matches!(Pool::create(&p, LAYOUT, &small_opts().max_size(1 << 50)), Err(PoolError::InvalidOption(_))));
    assert!(!p.exists());
    assert!(matches!(Pool::create_sim(LAYOUT, &small_opts().initial_size(100)), Err(PoolError::TooSmall { .. })));
    // A 31-byte layout name is the longest allowed.
    let long = "y".repeat(31);
    let pool = Pool::create(&p, &long, &small_opts().initial_size(MIN_POOL_SIZE)).unwrap();
    assert_eq!(pool.size(), MIN_POOL_SIZE);
    drop(pool);
    assert_eq!(Pool::open(&p, Some(&long), &small_opts()).unwrap().layout(), long);
}

#[test]
fn p1_torn_newest_state_slot_falls_back_to_previous_state() {
    let _g = no_spawn();
    let (_dir, path) = pool_file("t.pool");
    let a;
    let b;
    {
        let pool = Pool::create(&path, LAYOUT, &small_opts()).unwrap();
        a = pool.take_heap(64, 64).unwrap();
        b = pool.take_heap(64, 64).unwrap();
        pool.set_root(0, a);
        pool.set_root(0, b);
    }
    let info = Pool::inspect(&path).unwrap();
    let newest = info.state.seq;
    assert!(info.state.clean);
    assert_eq!(info.state.roots[0], b);

    // Tear the newest slot the way a crash in the middle of its 128-byte write would: its
    // second cache line still holds the older content of that slot (here: garbage).
    let mut bytes = std::fs::read(&path).unwrap();
    let at = SLOT_AT[(newest & 1) as usize];
    for x in &mut bytes[at + 64..at + 128] {
        *x ^= 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();

    let info = Pool::inspect(&path).unwrap();
    assert_eq!(info.state.seq, newest - 1, "the previous state is what a reader sees");
    assert!(!info.state.clean, "the torn update was the clean-shutdown mark");
    assert_eq!(info.state.roots[0], b);
    let pool = Pool::open(&path, Some(LAYOUT), &small_opts()).unwrap();
    assert!(!pool.was_clean(), "a torn clean mark counts as a crash");
    assert_eq!(pool.root(0), b);
    drop(pool);
    // The next update (the clean mark at close: an open of a pool already marked unclean
    // writes nothing) rewrote the torn slot, with the torn update's sequence number: both
    // slots are valid again.
    let info = Pool::inspect(&path).unwrap();
    assert!(info.state.clean);
    assert_eq!(info.state.seq, newest);
    let bytes = std::fs::read(&path).unwrap();
    let mut one_bad = bytes.clone();
    one_bad[SLOT_AT[(info.state.seq & 1) as usize] + 3] ^= 1;
    std::fs::write(&path, &one_bad).unwrap();
    assert_eq!(Pool::inspect(&path).unwrap().state.seq, info.state.seq - 1);
}

#[test]
fn p1_from_image_refuses_bad_images_without_panicking() {
    let _g = no_spawn();
    let pool = Pool::create_sim(LAYOUT, &small_opts()).unwrap();
    let sim = pool.sim().unwrap();
    let image = sim.image_now(&pool, pmkv_substrate::Eviction::None);
    assert_eq!(image.len() as u64, pool.size());
    let o = small_opts();
    assert!(Pool::from_image(&image, Some(LAYOUT), &o).is_ok());
    assert!(matches!(Pool::from_image(&image, Some("zzz"), &o), Err(PoolError::WrongLayout { .. })));
    assert!(matches!(Pool::from_image(b"", None, &o), Err(PoolError::NotAPool { .. })));
    assert!(matches!(Pool::from_image(&image[..100], None, &o), Err(PoolError::Truncated { .. })));
    for cut in [256usize, 300, 400, 511, 4095, image.len() - 8] {
        assert!(
            matches!(Pool::from_image(&image[..cut], None, &o), Err(PoolError::Truncated { .. })),
            "image cut to {cut}"
        );
    }
    let mut bad = image.clone();
    bad[SLOT_AT[0] + 1] ^= 1;
    bad[SLOT_AT[1] + 1] ^= 1;
    assert!(matches!(Pool::from_image(&bad, None, &o), Err(PoolError::CorruptHeader { .. })));
}

// ----- across processes --------------------------------------------------------------------

const CHILD_ENV: &str = "PMKV_POOL_TEST_CHILD";

/// Entry point of the child processes of the cross-process tests: the test binary runs
/// itself with `CHILD_ENV` set to `<action>:<pool path>`. In a normal test run the variable
/// is unset and this test does nothing.
#[test]
fn child_process_helper() {
    let Ok(spec) = std::env::var(CHILD_ENV) else { return };
    let (action, path) = spec.split_once(':').unwrap();
    match action {
        "try_open" => match Pool::open(path, Some(LAYOUT), &small_opts()) {
            Err(PoolError::Locked { .. }) => println!("CHILD locked"),
            Err(e) => println!("CHILD error {e}"),
            Ok(_) => println!("CHILD opened"),
        },
        "hold_then_die" => {
            let pool = Pool::open(path, Some(LAYOUT), &small_opts()).unwrap();
            let off = pool.take_heap(8, 8).unwrap();
            persist_u64(&pool, off, 0xfeed_f00d);
            pool.set_root(5, off);
            println!("CHILD holding");
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
            // Die without dropping the pool: no clean-shutdown mark, as in a crash.
            std::process::exit(0);
        }
        other => panic!("unknown child action {other}"),
    }
}

fn child(action: &str, path: &Path) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["child_process_helper", "--exact", "--nocapture", "--test-threads=1", "-q"])
        .env(CHILD_ENV, format!("{action}:{}", path.display()));
    c
}

fn child_says(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.starts_with("CHILD ")).collect()
}

#[test]
fn p1_lock_across_processes_and_crash_leaves_pool_unclean() {
    let dir = pool_dir();
    let path = new_pool_file(dir.path(), "x.pool");

    // This process holds the pool: another process cannot open it.
    let pool = Pool::open(&path, Some(LAYOUT), &small_opts()).unwrap();
    let out = {
        let _g = spawning();
        child("try_open", &path).output().unwrap()
    };
    assert!(out.status.success(), "{out:?}");
    assert_eq!(child_says(&String::from_utf8_lossy(&out.stdout)), ["CHILD locked"]);
    drop(pool);
    // Released: now the other process can.
    let out = {
        let _g = spawning();
        child("try_open", &path).output().unwrap()
    };
    assert_eq!(child_says(&String::from_utf8_lossy(&out.stdout)), ["CHILD opened"]);

    // Another process holds the pool: this one cannot open it, and sees it in use.
    let mut holder = {
        let _g = spawning();
        child("hold_then_die", &path).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap()
    };
    let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
    let said = lines.by_ref().map(|l| l.unwrap()).find(|l| l.starts_with("CHILD "));
    assert_eq!(said.as_deref(), Some("CHILD holding"));
    let before = std::fs::read(&path).unwrap();
    assert!(matches!(Pool::open(&path, Some(LAYOUT), &small_opts()), Err(PoolError::Locked { .. })));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let info = Pool::inspect(&path).unwrap();
    assert!(info.in_use);
    assert!(!info.state.clean);

    // The holder exits without closing the pool; the lock dies with it.
    holder.stdin.take().unwrap().write_all(b"die\n").unwrap();
    assert!(holder.wait().unwrap().success());
    let pool = Pool::open(&path, Some(LAYOUT), &small_opts()).unwrap();
    assert!(!pool.was_clean(), "a process that died holding the pool left it unclean");
    let off = pool.root(5);
    assert_ne!(off, 0, "its durable writes survive");
    assert_eq!(read_u64(&pool, off), 0xfeed_f00d);
    drop(pool);
    assert!(Pool::open(&path, Some(LAYOUT), &small_opts()).unwrap().was_clean());
}

#[test]
fn p1_concurrent_take_heap_hands_out_disjoint_extents() {
    let _g = no_spawn();
    let dir = pool_dir();
    let o = small_opts().initial_size(MIN_POOL_SIZE).max_size(4 << 20);
    let pool = Pool::create(dir.path().join("race.pool"), LAYOUT, &o).unwrap();
    let mut all: Vec<(u64, u64)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4u64)
            .map(|t| {
                let pool = &pool;
                s.spawn(move || {
                    (0..300u64)
                        .map(|i| {
                            let len = 64 + 8 * ((i + t) % 50);
                            (pool.take_heap(len, 8).unwrap(), len)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    all.sort_unstable();
    for w in all.windows(2) {
        assert!(w[0].0 + w[0].1 <= w[1].0, "extents {w:?} overlap");
    }
    let (last, len) = *all.last().unwrap();
    assert!(last + len <= pool.heap_top());
    assert!(pool.heap_top() <= pool.size());
}

/// Regression test: mapping a growth extent must never open a hole in the pool's address
/// reservation. (An earlier version tried `MAP_SYNC | MAP_FIXED` first and fell back to
/// plain `MAP_FIXED`; on Linux 6.x a non-DAX file system refuses `MAP_SYNC` only after the
/// kernel has detached the old range, so for a moment the range was free, another thread's
/// mmap could land there, and the fallback then silently replaced that mapping.) Here one
/// thread grows pools step by step while another keeps mapping, filling and checking
/// anonymous pages; any page of theirs that a pool clobbers or unmaps is detected. (The
/// hole appeared with pools on disk file systems such as ext4, where the temp dir of this
/// test normally is; tmpfs refuses `MAP_SYNC` before touching the old range.)
#[test]
fn p1_growth_never_clobbers_other_mappings() {
    let _g = no_spawn();
    let dir = pool_dir();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let page = 4096usize;
    std::thread::scope(|s| {
        let other = s.spawn(|| {
            let mut rounds = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || rounds < 50 {
                let maps: Vec<(*mut u8, u8)> = (0..64u8)
                    .map(|k| {
                        // SAFETY: a fresh private anonymous mapping.
                        let p = unsafe {
                            libc::mmap(
                                std::ptr::null_mut(),
                                8 * page,
                                libc::PROT_READ | libc::PROT_WRITE,
                                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                                -1,
                                0,
                            )
                        };
                        assert_ne!(p, libc::MAP_FAILED);
                        let tag = (rounds as u8).wrapping_mul(17).wrapping_add(k) | 1;
                        // SAFETY: our mapping, 8 pages long.
                        unsafe { std::ptr::write_bytes(p as *mut u8, tag, 8 * page) };
                        (p as *mut u8, tag)
                    })
                    .collect();
                for (p, tag) in maps {
                    // SAFETY: our mapping (unless a pool unmapped it, which is the bug).
                    let bytes = unsafe { std::slice::from_raw_parts(p, 8 * page) };
                    assert!(bytes.iter().all(|&b| b == tag), "a pool replaced memory it does not own");
                    // SAFETY: `p` is the 8-page mapping this thread made above, and the slice
                    // read from it is no longer used.
                    unsafe { libc::munmap(p as *mut libc::c_void, 8 * page) };
                }
                rounds += 1;
            }
        });
        for round in 0..100 {
            let path = dir.path().join(format!("grow{round}.pool"));
            let o = small_opts().initial_size(MIN_POOL_SIZE).max_size(2 << 20);
            let pool = Pool::create(&path, LAYOUT, &o).unwrap();
            while pool.size() < 2 << 20 {
                let off = pool.take_heap(3000, 8).unwrap();
                persist_u64(&pool, off, off);
            }
            assert_eq!(read_u64(&pool, HEADER_SIZE), HEADER_SIZE);
            drop(pool);
            std::fs::remove_file(&path).unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        other.join().unwrap();
    });
}
