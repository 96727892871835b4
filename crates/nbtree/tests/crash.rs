//! SPEC N4/N8 + P6: every write path of NBTree under the crash simulator, in `adr` (every
//! flush and fence is a crash point; images keep what was persisted, plus random lines
//! or torn 8-byte words) and in `eadr` (every PM store is a crash point and an image keeps
//! every store before it). Inserts, in-place and out-of-line updates, deletes, and SMOs
//! (two-way splits and one-way compactions) of leaves holding inline and object keys. The
//! recovered tree must pass `check` (no leak, every entry reachable, each key once) and
//! hold exactly the state before or after the interrupted operation.

use pmkv_nbtree::{NbTree, Options};
use pmkv_substrate::{Eviction, Mode};
use pmkv_testutil::{NativeCrash, Op};

fn recover(img: &[u8], mode: Mode) -> Result<NbTree, String> {
    NativeCrash::new(&pmkv_nbtree::FACTORY, mode).recover(img)
}

fn evictions(seed: u64, i: u64) -> Vec<Eviction> {
    let s = seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut v = Eviction::standard(i).to_vec();
    v.extend([Eviction::Lines(s), Eviction::Words(s ^ 0x5555)]);
    v
}

/// A recovered tree has the kind of leaf its pool was created with.
fn keeps(r: &NbTree, single_layer: bool) -> Result<(), String> {
    match r.single_layer() == single_layer {
        true => Ok(()),
        false => Err("the pool changed its kind of leaf".to_string()),
    }
}

/// Run `ops` on a fresh simulated pool in `mode` under the kit's crash harness, checking
/// the crash images of every crash point of each op; every recovered pool keeps its kind
/// of leaf. Returns the images checked.
fn explore(ops: &[Op], mode: Mode, single_layer: bool) -> u64 {
    let mut run = NativeCrash::new(&pmkv_nbtree::FACTORY, mode);
    if std::env::var("PMKV_CRASH_SEED").is_err() {
        run.seed = 0x00c0_ffee;
    }
    run.evictions = evictions;
    run.settings = Options { single_layer, ..Options::default() };
    run.live_on = Some(if single_layer { |r, _| keeps(r, true) } else { |r, _| keeps(r, false) });
    run.explore(ops, |_| true)
}

/// Keys of every storage kind: 8-byte integers (the paper's fast path), short inline
/// keys, 9- and 16-byte keys held in the entry's two key words, long keys in objects,
/// and the all-zero 8-byte key (an object, since key 0 marks an empty slot).
fn key(i: u32) -> Vec<u8> {
    match i % 6 {
        0 | 1 => (0x0100_0000_0000_0000u64 + i as u64 * 7919).to_be_bytes().to_vec(),
        2 => format!("s{i:04}").into_bytes(),
        3 => format!("pair{i:05}").into_bytes(),
        4 => format!("pair-key-{i:07}").into_bytes(),
        _ => format!("a-longer-key-{i:06}-in-an-object").into_bytes(),
    }
}

fn value(i: u32, round: u32) -> Vec<u8> {
    // Inline (<= 7 bytes) and object values.
    vec![(i + round) as u8; [3, 7, 8, 40][(i + round) as usize % 4]]
}

/// Enough inserts to split the first leaf twice, then updates, then deletes that leave a
/// leaf sparse, then inserts that make it split again (an SMO that compacts into one
/// leaf), across both kinds of values.
fn workload(n: u32, tail: u32) -> Vec<Op> {
    let mut ops: Vec<Op> = (0..n).map(|i| Op::Put(key(i), value(i, 0))).collect();
    ops.push(Op::Put(vec![0; 8], b"zero key".to_vec()));
    for i in (0..n).step_by(3) {
        ops.push(Op::Put(key(i), value(i, 1)));
    }
    // Same lengths as before: inline values of up to 8 bytes are updated in place.
    for i in (0..n).step_by(4) {
        ops.push(Op::Put(key(i), value(i, 4)));
    }
    for i in (0..n).filter(|i| i % 5 != 0) {
        ops.push(Op::Delete(key(i)));
    }
    ops.extend((n..n + tail).map(|i| Op::Put(key(i), value(i, 2))));
    ops
}

#[test]
fn n4_adr_every_crash_point() {
    let n = explore(&workload(140, 70), Mode::Adr, false);
    eprintln!("adr: {n} crash images checked");
}

#[test]
fn n4_eadr_every_store_point() {
    let n = explore(&workload(140, 70), Mode::Eadr, false);
    eprintln!("eadr: {n} crash images checked");
}

/// NBTree-SL: the metadata words in the blocks are written at every insert, so their
/// stores and flushes are crash points too; recovery rebuilds them from the entries. A
/// smaller workload (its 60-entry leaves split at the 61st insert, and the tail makes a
/// compaction), since every image is a whole recovery.
#[test]
fn n4_single_layer_adr_every_crash_point() {
    let n = explore(&workload(64, 40), Mode::Adr, true);
    eprintln!("adr, single-layer: {n} crash images checked");
}

#[test]
fn n4_single_layer_eadr_every_store_point() {
    let n = explore(&workload(64, 40), Mode::Eadr, true);
    eprintln!("eadr, single-layer: {n} crash images checked");
}

/// Format 3's in-place updates, several in a row on one key: an 8-byte key (two value
/// slots: each update writes the slot the previous one replaced) and a 9-byte key (one
/// slot: the claim with the new check is persisted before the value word), interleaved,
/// then a delete of each. Every crash point must leave an entry that verifies and holds
/// the value before or after the interrupted update.
#[test]
fn repeated_in_place_updates_of_one_key_every_crash_point() {
    let keys = [key(0), key(3), key(2)];
    let mut ops: Vec<Op> = keys.iter().map(|k| Op::Put(k.clone(), b"v0000000".to_vec())).collect();
    for i in 1..=8u8 {
        ops.push(Op::Put(keys[usize::from(i % 3)].clone(), vec![b'0' + i; 8]));
    }
    ops.extend(keys.iter().map(|k| Op::Delete(k.clone())));
    for mode in [Mode::Adr, Mode::Eadr] {
        let n = explore(&ops, mode, false);
        eprintln!("{mode:?}: {n} crash images checked");
    }
}

/// Atomic write batches (`NbTree::write_batch`, the substrate's batch log) in `adr` at every
/// flush and fence and in `eadr` at every store: a batch of 75 operations (inserts of
/// every key kind, enough to split a leaf, updates in place and to objects, deletes, a
/// missing key) on a tree of 30 keys, in a pool without the batch-log flag (as an older
/// build left it), so the flag's store is crashed too. Every image recovers to exactly the
/// state before or after the batch and passes `check`.
#[test]
fn atomic_batch_every_crash_point_and_eadr_store() {
    /// The superblock's word holding the batch-log flag (bit 16).
    fn flag_word(t: &NbTree) -> u64 {
        t.pool().root(1) + 8
    }
    fn flag(t: &NbTree) -> u64 {
        // SAFETY: the superblock's version word, 8-aligned inside the pool; no other
        // thread uses the tree.
        unsafe { t.pool().load_u64(flag_word(t)) & 1 << 16 }
    }
    for mode in [Mode::Adr, Mode::Eadr] {
        let setup: Vec<Op> = (0..30).map(|i| Op::Put(key(i), value(i, 0))).collect();
        let mut batch: Vec<Op> = (30..90).map(|i| Op::Put(key(i), value(i, 3))).collect();
        batch.extend((0..30).step_by(4).map(|i| Op::Put(key(i), value(i, 5))));
        batch.extend((1..30).step_by(4).map(|i| Op::Delete(key(i))));
        batch.push(Op::Delete(b"missing".to_vec()));
        let mut run = NativeCrash::new(&pmkv_nbtree::FACTORY, mode);
        run.seed = 0x00c0_ffee;
        run.evictions = evictions;
        // The superblock (pool root 1) as an older build left it: no batch-log flag.
        let (n, t) = run.explore_batches(&setup, &[batch], |t| {
            let word = flag_word(&t);
            // SAFETY: as in `flag`.
            unsafe { t.pool().store_u64(word, t.pool().load_u64(word) & !(1 << 16)) };
            t.pool().persist_off(word, 8);
            let img = t.pool().sim().unwrap().image_now(t.pool(), Eviction::None);
            drop(t);
            let t = recover(&img, mode).unwrap();
            assert_eq!(flag(&t), 0, "no flag before the batch");
            t
        });
        assert_ne!(flag(&t), 0, "the flag after it");
        eprintln!("{mode:?}: an atomic batch, {n} crash images checked");
    }
}
