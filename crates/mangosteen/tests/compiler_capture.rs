//! Compiler capture on the `mangosteen` engine: the unchanged `BTreeMap`, compiled with
//! store tracing, is made durable with no missed byte. Verify mode diffs the whole region
//! after every batch against the one before and fails the write on any changed byte the
//! hooks did not report; thousands of random operations of every shape must pass it, and
//! survive a reopen. A write the hooks cannot see is caught by it — and still logged.

use pmkv_core::{Direction, EngineFactory, ErrorKind, KeyRange, Options, WriteBatch};
use pmkv_mangosteen::{Capture, Error, Mangosteen, Options as MgOptions, FACTORY};
use pmkv_substrate::{Eviction, Pool};
use pmkv_testutil::sim_opts;
use std::collections::BTreeMap;
use std::sync::Arc;

fn contents(e: &dyn pmkv_core::Engine) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    e.scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |k, v| {
        m.insert(k.to_vec(), v.to_vec());
        true
    })
    .unwrap();
    m
}

/// A small deterministic generator (xorshift), so a failure names its seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, max: u64) -> Vec<u8> {
        // Mostly short, sometimes long: inline and out-of-node sizes, empty included.
        let n = if self.below(8) == 0 { self.below(max + 1) } else { self.below(24) };
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn verify_mode_finds_no_missed_byte_over_random_operations() {
    let dir = pmkv_testutil::pool_dir();
    let path = dir.path().join("v.pool");
    let o = Options::default().initial_size(16 << 20).param("region_mib", "4").param("verify_capture", "true");
    let e = FACTORY.open(&path, &o).unwrap();
    let mut model = BTreeMap::new();
    let mut rng = Rng(0x5eed_cafe);
    for i in 0..4000 {
        // Keys from a small space, so overwrites and deletes hit.
        let key = |r: &mut Rng| {
            let mut k = r.below(600).to_be_bytes().to_vec();
            k.extend(std::iter::repeat_n(b'k', r.below(40) as usize));
            k
        };
        match rng.below(10) {
            0..=4 => {
                let (k, v) = (key(&mut rng), rng.bytes(2000));
                e.put(&k, &v).unwrap_or_else(|err| panic!("op {i}: put: {err}"));
                model.insert(k, v);
            }
            5 => {
                // Same-size overwrite: the map copies into the old value in place.
                if let Some((k, v)) = model.iter().nth(rng.below(model.len().max(1) as u64) as usize) {
                    let (k, v2) = (k.clone(), v.iter().map(|b| b ^ 0xff).collect::<Vec<u8>>());
                    e.put(&k, &v2).unwrap_or_else(|err| panic!("op {i}: overwrite: {err}"));
                    model.insert(k, v2);
                }
            }
            6..=7 => {
                let k = key(&mut rng);
                let had = e.delete(&k).unwrap_or_else(|err| panic!("op {i}: delete: {err}"));
                assert_eq!(had, model.remove(&k).is_some());
            }
            _ => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.below(8) {
                    let k = key(&mut rng);
                    if rng.below(3) == 0 {
                        b.delete(k.clone());
                        model.remove(&k);
                    } else {
                        let v = rng.bytes(300);
                        b.put(k.clone(), v.clone());
                        model.insert(k, v);
                    }
                }
                e.write_batch(&b).unwrap_or_else(|err| panic!("op {i}: batch: {err}"));
            }
        }
    }
    assert_eq!(contents(&*e), model);
    assert!(e.check().unwrap().is_ok());
    e.close().unwrap();
    let e = FACTORY.open(&path, &o).unwrap();
    assert_eq!(contents(&*e), model, "after a reopen");
    e.close().unwrap();
}

/// Verify mode is not a test that cannot fail: a write into the region that no hook
/// reports (made here by uninstrumented code through `Tx::region`) fails the batch with
/// `CaptureMissed` — and the write is logged anyway, so it survives a crash.
#[test]
fn verify_mode_catches_an_uncaptured_write_and_loses_nothing() {
    let pool = Arc::new(Pool::create_sim("mangosteen", &sim_opts(1 << 20)).unwrap());
    let o =
        MgOptions { region_size: 64 << 10, capture: Capture::Compiler, verify_capture: true, ..MgOptions::default() };
    let m = Mangosteen::open(pool.clone(), o).unwrap();
    m.batch(|tx| tx.write(0, b"captured")).unwrap().unwrap();
    let missed = m.batch(|tx| tx.region()[4096..4100].copy_from_slice(b"lost")).unwrap_err();
    assert!(
        matches!(&missed, Error::CaptureMissed(s) if s.contains("4 changed bytes in 1 blocks") && s.contains("4096")),
        "{missed}"
    );
    // A crash now (nothing unflushed survives) keeps both writes.
    let img = pool.sim().unwrap().image_now(&pool, Eviction::None);
    drop(m);
    let p2 = Arc::new(Pool::from_image(&img, Some("mangosteen"), &sim_opts(1 << 20)).unwrap());
    let m2 = Mangosteen::open(p2, o).unwrap();
    m2.read(|r| {
        assert_eq!(&r[0..8], b"captured");
        assert_eq!(&r[4096..4100], b"lost");
    });
}

/// Page protection stays available (`capture=pages`) and holds the same map format: a
/// pool written with one capture opens and continues with the other.
#[test]
fn pages_and_compiler_capture_share_the_pool() {
    let dir = pmkv_testutil::pool_dir();
    let path = dir.path().join("p.pool");
    let base = Options::default().initial_size(8 << 20).param("region_mib", "2");
    let mut model = BTreeMap::new();
    for (round, capture) in ["pages", "compiler", "pages"].into_iter().enumerate() {
        let e = FACTORY.open(&path, &base.clone().param("capture", capture)).unwrap();
        assert_eq!(contents(&*e), model, "round {round} ({capture}) opens what the last wrote");
        for i in 0..200u32 {
            let (k, v) = (format!("{round}-{i}").into_bytes(), vec![round as u8; (i % 50) as usize]);
            e.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        e.close().unwrap();
    }
    let bad = FACTORY.open(&path, &base.clone().param("capture", "dynamorio")).err().unwrap();
    assert_eq!(bad.kind(), ErrorKind::InvalidArgument);
}
