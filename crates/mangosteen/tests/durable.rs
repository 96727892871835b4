//! `Durable<T>`: an ordinary Rust value (a `HashMap` of `Vec`s and a `VecDeque`) made
//! durable with its code unchanged; reopens, a crash at every flush and fence point of
//! its writes, and misuse refused without losing an acknowledged write: another type, a
//! full region, a panicking write, compiler capture. (A program without `SplitAlloc` is
//! refused in `misuse.rs`, whose binary does not install it.)

use pmkv_mangosteen::{Capture, Durable, Error, Options, SplitAlloc};
use pmkv_substrate::{Eviction, Pool};
use pmkv_testutil::sim_opts;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[global_allocator]
static A: SplitAlloc = SplitAlloc;

/// Page capture serves one region per process at a time: the tests take turns.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// An inverted index, as a program would write it with no thought of durability.
#[derive(Default, Debug, Clone, PartialEq)]
struct Index {
    postings: HashMap<u32, Vec<u32>>,
    recent: VecDeque<(u32, u32)>,
    ops: u64,
}

impl Index {
    fn add(&mut self, word: u32, doc: u32) {
        self.postings.entry(word).or_default().push(doc);
        self.recent.push_back((word, doc));
        if self.recent.len() > 16 {
            self.recent.pop_front();
        }
        self.ops += 1;
    }
}

fn opts(region: u64) -> Options {
    Options { region_size: region, ..Options::default() }
}

fn file_pool(dir: &tempfile::TempDir) -> Arc<Pool> {
    let path = dir.path().join("durable.pool");
    let po = pmkv_substrate::PoolOptions::default().mode(pmkv_substrate::Mode::Eadr);
    Arc::new(match Pool::open(&path, Some("mangosteen"), &po) {
        Ok(p) => p,
        Err(_) => Pool::create(&path, "mangosteen", &po).unwrap(),
    })
}

/// Writes and reads against a model, through two reopens; another type and compiler
/// capture are refused at open and change nothing.
#[test]
fn a_durable_index_survives_reopens_and_refuses_another_type() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut model = Index::default();
    for round in 0..3u32 {
        let d = Durable::<Index>::open(file_pool(&dir), opts(1 << 20)).unwrap();
        assert_eq!(d.read(|i| i.clone()), model, "round {round}: the reopened index");
        for k in 0..200u32 {
            let (w, doc) = ((k * 7919 + round) % 37, round * 1000 + k);
            let ops = d.write(move |i| {
                i.add(w, doc);
                i.ops
            });
            model.add(w, doc);
            assert_eq!(ops.unwrap(), model.ops);
        }
        assert_eq!(d.read(|i| i.postings.get(&3).map_or(0, Vec::len)), model.postings.get(&3).map_or(0, Vec::len));
    }
    let e = Durable::<Vec<u64>>::open(file_pool(&dir), opts(1 << 20)).err().expect("another type is refused");
    assert!(matches!(e, Error::InvalidOption(ref m) if m.contains("another type") && m.contains("Vec<u64>")), "{e}");
    let e = Durable::<Index>::open(file_pool(&dir), Options { capture: Capture::Compiler, ..opts(1 << 20) })
        .err()
        .expect("compiler capture is refused");
    assert!(matches!(e, Error::NotInstrumented(ref m) if m.contains("Capture::Pages")), "{e}");
    let d = Durable::<Index>::open(file_pool(&dir), opts(1 << 20)).unwrap();
    assert_eq!(d.read(|i| i.clone()), model);
}

/// A write that finds the region full returns `Error::Full` and leaves nothing (its
/// partial insert rolled back); a write whose code panics is rolled back and the panic
/// raised again with its message; writes go on after both, and a reopen agrees.
#[test]
fn a_full_region_and_a_panic_roll_the_write_back() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let d = Durable::<Index>::open(file_pool(&dir), opts(256 << 10)).unwrap();
    let mut writes = 0u32;
    let e = loop {
        // Each write adds a word with 4,000 documents: 16 KB of postings.
        match d.write(move |i| {
            for doc in 0..4000 {
                i.add(writes, doc);
            }
        }) {
            Ok(()) => writes += 1,
            Err(e) => break e,
        }
        assert!(writes < 100, "a 256 KiB region took {writes} writes of 16 KB");
    };
    assert!(matches!(e, Error::Full(ref m) if m.contains("rolled back")), "{e}");
    assert!(writes > 2, "{writes}");
    let before = d.read(|i| i.clone());
    assert_eq!(before.postings.len(), writes as usize, "the failed write left no word");
    assert_eq!(before.ops, 4000 * u64::from(writes));

    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        d.write(|i| {
            i.add(999_999, 1);
            panic!("half an operation");
        })
    }))
    .expect_err("the panic is raised again");
    let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("half an operation") && msg.contains("rolled back"), "{msg}");
    assert_eq!(d.read(|i| i.clone()), before, "the panicking write left nothing");

    // Room made, writes go on.
    d.write(|i| {
        i.postings.remove(&0);
    })
    .unwrap();
    d.write(|i| i.add(5_000, 1)).unwrap();
    let after = d.read(|i| i.clone());
    assert!(after.postings.contains_key(&5_000) && !after.postings.contains_key(&0));
    drop(d);
    let d = Durable::<Index>::open(file_pool(&dir), opts(256 << 10)).unwrap();
    assert_eq!(d.read(|i| i.clone()), after);
}

/// A crash at every flush and fence point of a run of writes — one of them rolled back
/// for want of room — recovers an index that some prefix of the writes made, holding
/// every write acknowledged before the crash.
#[test]
fn every_crash_point_of_durable_writes_recovers_a_prefix_with_every_acknowledged_write() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let pool = Arc::new(Pool::create_sim("mangosteen", &sim_opts(4 << 20)).unwrap());
    let d = Durable::<Index>::open(pool.clone(), opts(64 << 10)).unwrap();
    // The states after each prefix of the writes, and the writes acknowledged at each image.
    let mut states = vec![d.read(|i| i.clone())];
    let acked = Arc::new(AtomicUsize::new(0));
    let images = Arc::new(Mutex::new(Vec::new()));
    let (sink, seen) = (images.clone(), acked.clone());
    pool.sim().unwrap().set_hook(true, move |p| {
        sink.lock().unwrap().push((seen.load(Ordering::SeqCst), p.image(Eviction::Words(p.index))))
    });
    for k in 0..12u32 {
        let n = if k == 6 { 100_000 } else { 1 + k % 3 };
        match d.write(move |i| {
            for doc in 0..n {
                i.add(k, doc);
            }
        }) {
            Ok(()) => {
                states.push(d.read(|i| i.clone()));
                acked.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => assert!(k == 6 && matches!(e, Error::Full(_)), "write {k}: {e}"),
        }
    }
    pool.sim().unwrap().clear_hook();
    drop(d);
    let images = std::mem::take(&mut *images.lock().unwrap());
    assert!(images.len() > 50, "{} crash points", images.len());
    for (n, (acked, img)) in images.iter().enumerate() {
        let p = Arc::new(Pool::from_image(img, Some("mangosteen"), &sim_opts(4 << 20)).unwrap());
        let d = Durable::<Index>::open(p, opts(64 << 10)).unwrap_or_else(|e| panic!("image {n}: {e}"));
        let got = d.read(|i| i.clone());
        let at = states.iter().position(|s| *s == got).unwrap_or_else(|| panic!("image {n}: no prefix's state"));
        assert!(at >= *acked, "image {n}: the state of {at} writes, {acked} acknowledged");
    }
}
