//! Page-protection capture: code that writes the region through plain pointers, with no
//! `record` call, is made durable — exactly the blocks it changed are logged (bytes
//! rewritten with their own value log nothing), and a crash at any point of such a batch
//! recovers a prefix that holds every acknowledged batch.

use pmkv_mangosteen::{Capture, Mangosteen, Options};
use pmkv_substrate::{Eviction, Pool};
use pmkv_testutil::{sim_opts, CrashFindings};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const SIZE: u64 = 64 << 10;

fn opts() -> Options {
    Options { region_size: SIZE, ring_records: 64, capture: Capture::Pages, ..Options::default() }
}

/// An "unchanged" data structure: a hash table of u64 counters over the region's bytes,
/// updated through a plain `&mut [u8]`.
fn bump(region: &mut [u8], key: u64) {
    let slots = region.len() / 8;
    let i = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20) as usize % slots;
    let w: &mut [u8; 8] = (&mut region[i * 8..i * 8 + 8]).try_into().unwrap();
    *w = (u64::from_le_bytes(*w) + 1).to_le_bytes();
}

fn model(batches: usize) -> Vec<u8> {
    let mut r = vec![0u8; SIZE as usize];
    for b in 0..batches as u64 {
        for k in 0..(1 + b % 5) {
            bump(&mut r, b * 31 + k);
        }
    }
    r
}

#[test]
fn pages_capture_plain_writes_and_survive_every_crash_point() {
    let pool = Arc::new(Pool::create_sim("mangosteen", &sim_opts(1 << 20)).unwrap());
    let m = Mangosteen::open(pool.clone(), opts()).unwrap();
    // Same bytes written back: the page faults, but nothing changed, so nothing is logged.
    let before = m.log_indices();
    m.batch(|tx| {
        let r = tx.region();
        let v = std::hint::black_box(r[100]);
        r[100] = v.wrapping_add(0);
    })
    .unwrap();
    assert_eq!(m.log_indices(), before);
    // One byte changed on each of two pages: one record of two one-block runs (a 24-byte
    // header, two descriptors, two 32-byte blocks: two slots).
    m.batch(|tx| {
        tx.region()[5] = 1;
        tx.region()[5] = 0; // and back: the batch's net change is what counts
        tx.region()[9000] = 7;
        tx.region()[20000] = 7;
    })
    .unwrap();
    assert_eq!(m.log_indices().1, before.1 + 2);
    m.batch(|tx| {
        tx.region()[9000] = 0;
        tx.region()[20000] = 0;
    })
    .unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let found = CrashFindings::new();
    let (f, d) = (found.clone(), done.clone());
    pool.sim().unwrap().set_hook(true, move |pt| {
        let acked = d.load(Ordering::Acquire);
        f.check_images(pt, Eviction::standard(pt.index), "", |img| {
            let p = Arc::new(Pool::from_image(img, Some("mangosteen"), &sim_opts(1 << 20)).map_err(|e| e.to_string())?);
            let m = Mangosteen::open(p, Options { capture: Capture::Explicit, ..opts() }).map_err(|e| e.to_string())?;
            let got = m.read(|r| r.to_vec());
            if got != model(acked) && got != model(acked + 1) {
                return Err(format!("not a prefix with the {acked} acknowledged batches"));
            }
            Ok(())
        });
    });
    for b in 0..30u64 {
        m.batch(|tx| {
            for k in 0..(1 + b % 5) {
                bump(tx.region(), b * 31 + k);
            }
        })
        .unwrap();
        done.store(b as usize + 1, Ordering::Release);
    }
    pool.sim().unwrap().clear_hook();
    found.assert_none("page capture crash consistency");
    assert!(found.images() > 200);
    assert_eq!(m.read(|r| r.to_vec()), model(30));
    // The log carried only changed blocks: a recovery from now replays nothing new and
    // the PM copy equals the DRAM copy.
    let img = pool.sim().unwrap().image_now(&pool, Eviction::None);
    drop(m);
    let p = Arc::new(Pool::from_image(&img, Some("mangosteen"), &sim_opts(1 << 20)).unwrap());
    let m2 = Mangosteen::open(p, Options { capture: Capture::Explicit, ..opts() }).unwrap();
    assert_eq!(m2.read(|r| r.to_vec()), model(30));
}
