//! SPEC P6: the crash simulator's deterministic adversarial images (`Eviction::OnlyNewest`,
//! `AllButNewest`, `Only(i)`, `AllBut(i)`) over the pending lines, in flush order.
//!
//! The point of them: a missing fence between two flushes (a log's records and the tail
//! that covers them) passes both the image with nothing written back and the image with
//! everything written back, and a random half of the lines catches it only when the seed
//! happens to pick the tail's line without the records'. `OnlyNewest` is exactly that
//! image, at every crash point, so the bug is caught by construction.

use pmkv_substrate::{CrashPoint, Eviction, Pool};
use pmkv_testutil::{read_bytes, sim_opts, write_bytes, CrashFindings};
use std::sync::{Arc, Mutex};

fn pool() -> (Pool, u64) {
    let pool = Pool::create_sim("adv", &sim_opts(128 << 10)).expect("sim pool");
    let off = pool.take_heap(64 * 64, 64).expect("heap");
    (pool, off)
}

fn line(img: &[u8], off: u64) -> &[u8] {
    &img[off as usize..off as usize + 64]
}

#[test]
fn adversarial_variants_are_distinct_and_capped() {
    assert!(Eviction::adversarial(0, 4).is_empty());
    assert_eq!(Eviction::adversarial(1, 4), [Eviction::OnlyNewest]);
    assert_eq!(Eviction::adversarial(2, 4), [Eviction::OnlyNewest, Eviction::AllButNewest]);
    assert_eq!(
        Eviction::adversarial(3, 4),
        [
            Eviction::OnlyNewest,
            Eviction::AllButNewest,
            Eviction::Only(0),
            Eviction::AllBut(0),
            Eviction::Only(1),
            Eviction::AllBut(1)
        ]
    );
    // 40 pending lines, cap 4: the newest pair and 4 older lines spread from the oldest.
    let v = Eviction::adversarial(40, 4);
    assert_eq!(v.len(), 2 + 2 * 4);
    let singles: Vec<usize> =
        v.iter().filter_map(|e| if let Eviction::Only(i) = e { Some(*i) } else { None }).collect();
    assert_eq!(singles, [0, 9, 19, 29]);
    assert_eq!(Eviction::adversarial(40, 0).len(), 2);
}

#[test]
fn pending_lines_are_in_flush_order_with_the_flushed_copy() {
    let (pool, off) = pool();
    let sim = pool.sim().unwrap();
    let (a, b) = (off, off + 64);
    write_bytes(&pool, a, &[1; 64]);
    pool.flush_off(a, 64);
    write_bytes(&pool, b, &[2; 64]);
    pool.flush_off(b, 64);
    // Line a changes after its flush: the copy its flush captured is what can reach PM.
    write_bytes(&pool, a, &[3; 64]);
    let img = sim.image_now(&pool, Eviction::OnlyNewest);
    assert_eq!((line(&img, a), line(&img, b)), (&[0u8; 64][..], &[2u8; 64][..]));
    let img = sim.image_now(&pool, Eviction::Only(0));
    assert_eq!((line(&img, a), line(&img, b)), (&[1u8; 64][..], &[0u8; 64][..]));
    let img = sim.image_now(&pool, Eviction::AllButNewest);
    assert_eq!((line(&img, a), line(&img, b)), (&[1u8; 64][..], &[0u8; 64][..]));
    let img = sim.image_now(&pool, Eviction::AllBut(1));
    assert_eq!((line(&img, a), line(&img, b)), (&[1u8; 64][..], &[0u8; 64][..]));
    let img = sim.image_now(&pool, Eviction::Only(7));
    assert_eq!(img, sim.image_now(&pool, Eviction::None), "no line 7: nothing added");
    // Flushed again, line a is the newest, with its new content, and counted once.
    pool.flush_off(a, 64);
    let img = sim.image_now(&pool, Eviction::OnlyNewest);
    assert_eq!((line(&img, a), line(&img, b)), (&[3u8; 64][..], &[0u8; 64][..]));
    let img = sim.image_now(&pool, Eviction::AllButNewest);
    assert_eq!((line(&img, a), line(&img, b)), (&[0u8; 64][..], &[2u8; 64][..]));
    // After the fence nothing is pending: every adversarial image is the persisted one.
    pool.fence();
    let none = sim.image_now(&pool, Eviction::None);
    assert_eq!((line(&none, a), line(&none, b)), (&[3u8; 64][..], &[2u8; 64][..]));
    for ev in [Eviction::OnlyNewest, Eviction::AllButNewest, Eviction::Only(0), Eviction::AllBut(0)] {
        assert_eq!(sim.image_now(&pool, ev), none, "{ev:?}");
    }
    // A dirty line never flushed is not pending: only the random and `All` images have it.
    write_bytes(&pool, a, &[4; 64]);
    assert_eq!(sim.image_now(&pool, Eviction::OnlyNewest), none);
    assert_eq!(line(&sim.image_now(&pool, Eviction::All), a), &[4u8; 64][..]);
}

#[test]
fn crash_points_report_their_pending_lines() {
    let (pool, off) = pool();
    let seen: Arc<Mutex<Vec<(usize, usize)>>> = Arc::default();
    let s = seen.clone();
    pool.sim().unwrap().set_hook(true, move |pt: &CrashPoint<'_>| {
        s.lock().unwrap().push((pt.pending_lines(), pt.evictions(Eviction::SINGLE_LINES).len()))
    });
    for i in 0..5 {
        write_bytes(&pool, off + 64 * i, &[9; 64]);
        pool.flush_off(off + 64 * i, 64);
    }
    pool.fence();
    pool.sim().unwrap().clear_hook();
    // Five flush points with 1..=5 pending lines, then the fence with 5.
    let v = seen.lock().unwrap().clone();
    assert_eq!(v.iter().map(|p| p.0).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 5]);
    assert_eq!(v.iter().map(|p| p.1).collect::<Vec<_>>(), [5, 6, 10, 12, 14, 14]);
}

/// A log: the tail word on line 0, two-line records after it. Appending record `k`
/// writes and flushes it, fences (unless `FENCED` is false: the planted bug), then
/// writes, flushes and fences `tail = k + 1`.
fn append<const FENCED: bool>(pool: &Pool, off: u64, k: u64) {
    let rec = off + 64 + 128 * k;
    write_bytes(pool, rec, &[k as u8 + 1; 128]);
    pool.flush_off(rec, 128);
    if FENCED {
        pool.fence();
    }
    write_bytes(pool, off, &(k + 1).to_le_bytes());
    pool.persist_off(off, 8);
}

/// The invariant of an image of the log: every record below the tail is whole.
fn check_log(img: &[u8], off: u64) -> Result<(), String> {
    let tail = u64::from_le_bytes(img[off as usize..off as usize + 8].try_into().unwrap());
    for k in 0..tail {
        let rec = (off + 64 + 128 * k) as usize;
        if img[rec..rec + 128].iter().any(|&b| b != k as u8 + 1) {
            return Err(format!("tail {tail} covers record {k}, which is not whole"));
        }
    }
    Ok(())
}

/// Run 20 appends with every flush and fence a crash point, checking the images that
/// `evictions` gives at each; returns (images, failures).
fn run<const FENCED: bool>(evictions: fn(&CrashPoint<'_>) -> Vec<Eviction>) -> (u64, u64) {
    let (pool, off) = pool();
    let found = CrashFindings::new();
    let f = found.clone();
    pool.sim().unwrap().set_hook(true, move |pt| {
        let evs = evictions(pt);
        f.check_images(pt, evs, "append", |img| check_log(img, off))
    });
    for k in 0..20 {
        append::<FENCED>(&pool, off, k);
    }
    pool.sim().unwrap().clear_hook();
    assert_eq!(read_bytes(&pool, off, 8), 20u64.to_le_bytes());
    (found.images(), found.failed())
}

#[test]
fn only_newest_catches_a_missing_fence_at_every_append() {
    // The correct log passes every image, adversarial ones included.
    let (images, failed) = run::<true>(|pt| pt.evictions(Eviction::SINGLE_LINES));
    assert!(images > 20 * 4 * 4, "{images}");
    assert_eq!(failed, 0);
    // Without the fence, nothing-written-back and everything-written-back both pass...
    let (_, failed) = run::<false>(|_| vec![Eviction::None, Eviction::All]);
    assert_eq!(failed, 0, "None and All cannot see a missing fence");
    // ...and the tail's line alone fails at the last flush and the fence of every append
    // (three points each: the records' flush, the tail's flush, the fence).
    let (images, failed) = run::<false>(|_| vec![Eviction::OnlyNewest]);
    assert_eq!((images, failed), (20 * 3, 20 * 2));
    let (_, failed) = run::<false>(|pt| pt.evictions(Eviction::SINGLE_LINES));
    assert!(failed >= 20 * 2, "{failed}");
}
