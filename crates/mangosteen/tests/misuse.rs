//! Misuse is refused with a clear error instead of acknowledged and lost:
//! compiler capture over Rust code that was not compiled with capture, a larger region at
//! a later open, and an allocation in the split heap aligned beyond its 16 bytes.

use pmkv_core::{EngineFactory, ErrorKind, Options};
use pmkv_mangosteen::{Capture, Error, Instrumented, Mangosteen, Options as MgOptions, FACTORY};
use pmkv_substrate::Pool;
use pmkv_testutil::sim_opts;
use std::sync::Arc;

fn pool() -> Arc<Pool> {
    Arc::new(Pool::create_sim("mangosteen", &sim_opts(4 << 20)).unwrap())
}

/// `Capture::Compiler` over the caller's own Rust code (a `HashMap` its batches would
/// mutate) is refused at open, with the alternatives in the message; the pool is left as
/// it was (no region is created), and page capture then opens it.
#[test]
fn compiler_capture_over_uninstrumented_rust_code_is_refused() {
    let p = pool();
    let o = MgOptions { region_size: 64 << 10, capture: Capture::Compiler, ..MgOptions::default() };
    let e = Mangosteen::open(p.clone(), o).err().expect("compiler capture over Rust code is refused");
    let msg = e.to_string();
    assert!(matches!(e, Error::NotInstrumented(_)), "{msg}");
    for needle in ["mangosteen engine", "Capture::Pages", "HashMap", "lost"] {
        assert!(msg.contains(needle), "the message names {needle:?}: {msg}");
    }
    assert_eq!(p.root(0), 0, "nothing was created in the pool");
    // The same structure with page capture is made durable.
    let m = Mangosteen::open(p, MgOptions { capture: Capture::Pages, ..o }).unwrap();
    m.batch(|tx| tx.region()[..5].copy_from_slice(b"paged")).unwrap();
    m.read(|r| assert_eq!(&r[..5], b"paged"));
}

/// No Rust code of a test binary registered itself as compiled with capture, so no
/// address of it yields the token that `open_instrumented` needs.
#[test]
fn no_token_for_code_that_did_not_register() {
    let f = compiler_capture_over_uninstrumented_rust_code_is_refused as fn();
    let e = Instrumented::code_at(f as usize).expect_err("an unregistered module is refused");
    assert!(matches!(e, Error::NotInstrumented(ref m) if m.contains("pmkv-cc") && m.contains("PAGES")), "{e}");
    assert!(Instrumented::code_at(0).is_err());
}

/// Verify mode is the one way to run compiler capture over Rust code: every store the
/// hooks did not see fails its batch (and is logged all the same), so nothing is lost in
/// silence. Plain Rust code updating a structure of its own in the region is the case of
/// the issue.
#[test]
fn compiler_capture_with_verify_fails_every_uncaptured_write() {
    let o =
        MgOptions { region_size: 64 << 10, capture: Capture::Compiler, verify_capture: true, ..MgOptions::default() };
    let m = Mangosteen::open(pool(), o).unwrap();
    let e = m
        .batch(|tx| {
            let counters = tx.region().as_mut_ptr() as *mut u64;
            for i in 0..4 {
                // SAFETY: four words at the region's start, ours for the batch.
                unsafe { *counters.add(i) += 1 };
            }
        })
        .expect_err("uncaptured stores fail the batch");
    assert!(matches!(e, Error::CaptureMissed(ref m) if m.contains("4 blocks") || m.contains("1 blocks")), "{e}");
    // Logged all the same: the region holds them.
    m.read(|r| assert_eq!(r[0], 1));
}

/// A later open asking for a larger region than the pool holds is refused, naming the
/// existing size, and changes nothing; the same size or a smaller one opens the region
/// as it is.
#[test]
fn a_larger_region_at_a_later_open_is_refused_naming_its_size() {
    let p = pool();
    let small = MgOptions { region_size: 64 << 10, ..MgOptions::default() };
    let m = Mangosteen::open(p.clone(), small).unwrap();
    m.batch(|tx| tx.write(100, b"kept").unwrap()).unwrap();
    drop(m);
    let e = Mangosteen::open(p.clone(), MgOptions { region_size: 128 << 10, ..small }).err().expect("refused");
    assert!(matches!(e, Error::RegionSize { existing: 65536, asked: 131072 }), "{e}");
    assert!(e.to_string().contains("65536 bytes"), "{e}");
    for size in [64 << 10, 32 << 10] {
        let m = Mangosteen::open(p.clone(), MgOptions { region_size: size, ..small }).unwrap();
        assert_eq!(m.size(), 64 << 10);
        m.read(|r| assert_eq!(&r[100..104], b"kept"));
    }
}

/// Through the engine: a `region_mib` larger than the existing region is refused
/// (`InvalidArgument`, the size named); without `region_mib` the region opens as it is.
#[test]
fn the_engine_refuses_a_larger_region_mib_and_opens_without_one() {
    let dir = pmkv_testutil::pool_dir();
    let path = dir.path().join("p.pool");
    let base = Options::default().initial_size(8 << 20);
    let e = FACTORY.open(&path, &base.clone().param("region_mib", "1")).unwrap();
    e.put(b"k", b"v").unwrap();
    e.close().unwrap();
    let err = FACTORY.open(&path, &base.clone().param("region_mib", "2")).err().expect("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("1048576 bytes"), "{err}");
    let e = FACTORY.open(&path, &base.max_size(1 << 30)).unwrap();
    let mut got = Vec::new();
    assert!(e.get_with(b"k", &mut |v| got = v.to_vec()).unwrap());
    assert_eq!(got, b"v");
    e.close().unwrap();
}

/// A request that cannot finish aborts (`Tx::abort`): every write of its batch is undone,
/// to the last committed state even where the inline backend had not yet applied the
/// batches before (their records are applied first), nothing of it is logged, the next
/// batch commits as usual, and a crash image (or a reopen) holds the committed state only.
/// For every capture and log mode, with the backend inline and on its own thread.
#[test]
fn an_aborted_batch_leaves_nothing_behind() {
    use pmkv_mangosteen::Log;
    use pmkv_substrate::Eviction;
    let modes = [
        (Capture::Explicit, Log::Batched, false),
        (Capture::Explicit, Log::Batched, true),
        (Capture::Explicit, Log::PerWrite, false),
        (Capture::Pages, Log::Batched, false),
        (Capture::Pages, Log::Batched, true),
    ];
    for (capture, log, background) in modes {
        for verify in [false, true] {
            let what = format!("{capture:?} {log:?} background {background} verify {verify}");
            let po = sim_opts(4 << 20);
            let pool = Arc::new(Pool::create_sim("mangosteen", &po).unwrap());
            let o = MgOptions {
                region_size: 64 << 10,
                capture,
                log,
                background,
                verify_capture: verify,
                ..MgOptions::default()
            };
            let m = Mangosteen::open(pool.clone(), o).unwrap();
            // Committed batches whose records the inline backend has not applied yet.
            for v in 1..=5u8 {
                m.batch(|tx| tx.write(0, &[v; 40]).unwrap()).unwrap();
            }
            let (_, tail) = m.log_indices();
            let e = m
                .batch(|tx| {
                    tx.write(8, b"partial").unwrap();
                    tx.region()[5000] = 9;
                    if capture == Capture::Explicit {
                        tx.record(5000, 1).unwrap();
                    }
                    tx.write(60_000, &[7; 100]).unwrap();
                    tx.abort();
                })
                .expect_err(&what);
            assert!(matches!(e, Error::Aborted), "{what}: {e}");
            assert_eq!(m.log_indices().1, tail, "{what}: nothing of it was committed");
            m.read(|r| {
                assert_eq!(&r[..40], &[5u8; 40][..], "{what}");
                assert_eq!(r[5000], 0, "{what}");
                assert!(r[60_000..60_100].iter().all(|&b| b == 0), "{what}");
            });
            m.batch(|tx| tx.write(100, b"next").unwrap()).expect(&what);
            let img = pool.sim().unwrap().image_now(&pool, Eviction::None);
            drop(m);
            let again = Mangosteen::open(Arc::new(Pool::from_image(&img, None, &po).unwrap()), o).unwrap();
            again.read(|r| {
                assert_eq!(&r[..40], &[5u8; 40][..], "{what}: after a crash");
                assert_eq!(&r[100..104], b"next", "{what}: after a crash");
                assert_eq!(r[5000], 0, "{what}: after a crash");
            });
        }
    }
}

/// `Durable` in a program whose global allocator is not `SplitAlloc` (this test binary):
/// the value's allocations would come from the system and be lost at reopen, so the open
/// is refused, saying how to install it, before anything is created.
#[test]
fn durable_without_split_alloc_is_refused() {
    let p = pool();
    let e = pmkv_mangosteen::Durable::<Vec<u64>>::open(p.clone(), MgOptions::default())
        .err()
        .expect("refused without SplitAlloc");
    assert!(matches!(e, Error::InvalidOption(ref m) if m.contains("#[global_allocator]")), "{e}");
    assert_eq!(p.root(0), 0, "nothing was created in the pool");
}
