//! The example's index, durable with compiler capture: reopens, a crash at every flush
//! and fence point of its writes (verify mode on, so any write the capture missed fails
//! its batch), and misuse refused without losing an acknowledged write: a library not
//! built by the helper, one built for another ABI, a module for another type, a write
//! of other types, a full region, a panicking write.

use pmkv_example_durable_index::index::Index;
use pmkv_example_durable_index::{DurableIndex, MODULE};
use pmkv_mangosteen::{Captured, CapturedModule, Error, Options};
use pmkv_substrate::{Eviction, Pool};
use pmkv_testutil::sim_opts;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Verify mode: every batch is compared with a shadow copy, and a write the capture
/// missed fails it (`Error::CaptureMissed`).
fn opts(region: u64) -> Options {
    Options { region_size: region, verify_capture: true, ..Options::default() }
}

fn file_pool(dir: &tempfile::TempDir) -> Arc<Pool> {
    let po = pmkv_substrate::PoolOptions::default().mode(pmkv_substrate::Mode::Eadr);
    Arc::new(pmkv_testutil::open_or_create(&dir.path().join("index.pool"), "mangosteen", &po))
}

/// Writes and reads against the plain index, through three reopens.
#[test]
fn the_index_survives_reopens_and_matches_the_plain_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Index::default();
    let words = ["apple", "pear", "fig", "plum", "kiwi", "lime", "date"];
    for round in 0..3u32 {
        let d = DurableIndex::open(file_pool(&dir), opts(1 << 20)).unwrap();
        assert_eq!(d.read(Index::clone), model, "round {round}: the reopened index");
        for k in 0..150u32 {
            let doc = round * 1000 + k;
            let w = words[(k as usize * 5 + round as usize) % words.len()];
            assert_eq!(d.add(w, doc).unwrap(), model.add(w, doc));
            if k % 10 == 0 {
                let ws = ["every", &format!("w{k}")];
                let doc = 1_000_000 + doc;
                assert_eq!(d.add_doc(doc, &ws).unwrap(), model.add_doc(doc, &ws));
            }
        }
        let gone = words[round as usize];
        assert_eq!(d.remove(gone).unwrap(), model.remove(gone));
        assert_eq!(d.read(|i| i.get("fig").to_vec()), model.get("fig"));
    }
    let d = DurableIndex::open(file_pool(&dir), opts(1 << 20)).unwrap();
    assert_eq!(d.read(Index::clone), model);
    assert!(model.total > 400);
}

/// The C library's file, as mapped into this process.
fn libc_file() -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps.lines().find(|l| l.contains("/libc.so") || l.contains("/libc-")).expect("libc is mapped");
    line[line.find('/').unwrap()..].to_string()
}

/// A library the helper did not build (the C library's file) and one built for
/// another capture ABI (the module with its marker's digits changed) are refused before
/// any of their code runs; so are a module for another type, and a write of other types.
#[test]
fn a_module_not_built_by_the_helper_or_for_another_type_is_refused() {
    let plain: &'static [u8] = std::fs::read(libc_file()).unwrap().leak();
    let e = CapturedModule::load(plain).expect_err("a library not built by the helper");
    assert!(matches!(e, Error::NotInstrumented(ref m) if m.contains("not built by pmkv-mangosteen-build")), "{e}");
    let mark = b"pmkv-mangosteen-build module abi ";
    let at = MODULE.windows(mark.len()).position(|w| w == mark).expect("the module carries the marker");
    let mut other = MODULE.to_vec();
    other[at + mark.len()..at + mark.len() + 2].copy_from_slice(b"99");
    let e = CapturedModule::load(other.leak()).expect_err("another ABI");
    assert!(matches!(e, Error::NotInstrumented(ref m) if m.contains("capture ABI 99")), "{e}");

    let module = CapturedModule::load(MODULE).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let e = Captured::<Vec<u64>>::open(file_pool(&dir), opts(1 << 20), module).err().expect("another type");
    assert!(matches!(e, Error::InvalidOption(ref m) if m.contains("another type") && m.contains("Vec<u64>")), "{e}");
    let c = Captured::<Index>::open(file_pool(&dir), opts(1 << 20), module).unwrap();
    let e = c.op::<u32, usize>("add").err().expect("a write of other types");
    assert!(matches!(e, Error::InvalidOption(ref m) if m.contains("does not take")), "{e}");
    let e = c.op::<u32, usize>("no_such_write").err().expect("a write the module lacks");
    assert!(matches!(e, Error::InvalidOption(ref m) if m.contains("no write")), "{e}");
}

/// A write that finds the region full returns `Error::Full` and leaves the index as it
/// was; a write whose code panics half-way (a new word's entry made, then an older
/// document for another word) is rolled back and the panic raised again with its
/// message; writes go on after both, and a reopen agrees.
#[test]
fn a_full_region_and_a_panic_roll_the_write_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = DurableIndex::open(file_pool(&dir), opts(256 << 10)).unwrap();
    d.add("old", 9).unwrap();
    let mut n = 0u32;
    let e = loop {
        match d.add_range(&format!("big{n}"), 0, 4000) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
        assert!(n < 100, "a 256 KiB region took {n} writes of 16 KB");
    };
    assert!(matches!(e, Error::Full(ref m) if m.contains("rolled back")), "{e}");
    assert!(n > 2, "{n}");
    let before = d.read(Index::clone);
    assert_eq!(before.postings.len(), n as usize + 1, "the failed write left no word");
    assert_eq!(before.total, 1 + 4000 * u64::from(n));

    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| d.add_doc(7, &["new", "old"])))
        .expect_err("the panic is raised again");
    let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("out of order") && msg.contains("rolled back"), "{msg}");
    assert_eq!(d.read(Index::clone), before, "the panicking write left nothing (no \"new\")");

    assert_eq!(d.remove("big0").unwrap(), 4000);
    assert_eq!(d.add_doc(10, &["new", "old"]).unwrap(), 2);
    let after = d.read(Index::clone);
    assert_eq!(after.get("new"), [10]);
    drop(d);
    let d = DurableIndex::open(file_pool(&dir), opts(256 << 10)).unwrap();
    assert_eq!(d.read(Index::clone), after);
}

/// A crash at every flush and fence point of a run of writes — one rolled back for want
/// of room, one for a panic — recovers an index that some prefix of the writes made,
/// holding every write acknowledged before the crash; verify mode saw no missed write.
#[test]
fn every_crash_point_recovers_a_prefix_with_every_acknowledged_write() {
    let pool = Arc::new(Pool::create_sim("mangosteen", &sim_opts(4 << 20)).unwrap());
    let d = DurableIndex::open(pool.clone(), opts(64 << 10)).unwrap();
    let mut states = vec![d.read(Index::clone)];
    let acked = Arc::new(AtomicUsize::new(0));
    let images = Arc::new(Mutex::new(Vec::new()));
    let (sink, seen) = (images.clone(), acked.clone());
    pool.sim().unwrap().set_hook(true, move |p| {
        sink.lock().unwrap().push((seen.load(Ordering::SeqCst), p.image(Eviction::Words(p.index))))
    });
    for k in 0..12u32 {
        let w = format!("w{}", k % 4);
        let r = match k {
            6 => d.add_range("huge", 0, 100_000),
            9 => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| d.add_doc(0, &["fresh", "w0"])))
                .map_err(|_| Error::Aborted)
                .and_then(|r| r),
            5 => d.remove("w1"),
            _ => d.add_doc(100 + k, &[&w, "every"]),
        };
        match r {
            Ok(_) => {
                states.push(d.read(Index::clone));
                acked.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => assert!(
                (k == 6 && matches!(e, Error::Full(_))) || (k == 9 && matches!(e, Error::Aborted)),
                "write {k}: {e}"
            ),
        }
    }
    pool.sim().unwrap().clear_hook();
    drop(d);
    let images = std::mem::take(&mut *images.lock().unwrap());
    assert!(images.len() > 50, "{} crash points", images.len());
    for (n, (acked, img)) in images.iter().enumerate() {
        let p = Arc::new(Pool::from_image(img, Some("mangosteen"), &sim_opts(4 << 20)).unwrap());
        let d = DurableIndex::open(p, opts(64 << 10)).unwrap_or_else(|e| panic!("image {n}: {e}"));
        let got = d.read(Index::clone);
        let at = states.iter().position(|s| *s == got).unwrap_or_else(|| panic!("image {n}: no prefix's state"));
        assert!(at >= *acked, "image {n}: the state of {at} writes, {acked} acknowledged");
    }
}
