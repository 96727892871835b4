//! SPEC H4/H5/H6 + P6: every write path of HART under the crash simulator. For each
//! operation, at EVERY flush and fence it issues, crash images (persisted only, all dirty
//! lines evicted, random halves of the lines and torn 8-byte words, seeded and printed) are recovered in a fresh
//! pool; the recovered HART must pass `check` (no leak, no unreachable leaf, bits
//! consistent) and hold exactly the state before or after the operation.

mod common;
use common::*;
use pmkv_hart::{Hart, Options};
use pmkv_substrate::Eviction;

/// Run `ops` one by one; explore every crash point of each. Returns images checked.
fn explore(ops: &[Op], pool_size: u64) -> u64 {
    explore_with(ops, pool_size, Options::default())
}

/// The evictions checked at point `i`: the four standard ones, plus two more random
/// samples (lines, torn words) drawn from the run's seed, printed so a failure replays
/// with `PMKV_CRASH_SEED`.
fn evictions(seed: u64, i: u64) -> Vec<Eviction> {
    let s = seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut v = Eviction::standard(i).to_vec();
    v.extend([Eviction::Lines(s), Eviction::Words(s ^ 0x5555)]);
    v
}

fn seed() -> u64 {
    let seed = std::env::var("PMKV_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x00c0_ffee);
    eprintln!("crash test eviction seed {seed} (PMKV_CRASH_SEED={seed} replays it)");
    seed
}

fn explore_with(ops: &[Op], pool_size: u64, opts: Options) -> u64 {
    explore_in(ops, sim_hart_with(pool_size, opts), false)
}

/// Run `ops` on `h` with every crash point of each checked; with `stores`, every store
/// HART and EPallocator make to PM is a crash point too (the eADR crash model).
fn explore_in(ops: &[Op], h: Hart, stores: bool) -> u64 {
    let seed = seed();
    let mut model = Model::new();
    let found = CrashFindings::new();
    for (i, op) in ops.iter().enumerate() {
        let before = model.clone();
        apply(&mut model, op);
        let after = model.clone();
        let (f, desc) = (found.clone(), format!("op {i} {op:?}"));
        h.pool().sim().unwrap().set_hook_with(true, stores, move |pt| {
            f.check_images(pt, evictions(seed, pt.index), &desc, |img| {
                let r = recover(img)?;
                r.check().map_err(|e| e.to_string())?;
                let got = contents(&r);
                if got != before && got != after {
                    return Err(format!("state is neither before nor after ({} keys)", got.len()));
                }
                Ok(())
            });
        });
        match op {
            Op::Put(k, v) => h.put(k, v).unwrap(),
            Op::Delete(k) => assert!(h.delete(k).unwrap()),
        }
        h.pool().sim().unwrap().clear_hook();
        assert_eq!(contents(&h), model);
    }
    found.assert_none("crash consistency violated");
    // The running engine, which every crash point was taken from, is sound too.
    h.check().unwrap();
    // The final state survives a crash right after the last operation.
    let img = h.pool().sim().unwrap().image_now(h.pool(), Eviction::None);
    let r = recover(&img).unwrap();
    r.check().unwrap();
    assert_eq!(contents(&r), model);
    found.images()
}

#[test]
fn h4_insert_every_crash_point() {
    let ops: Vec<Op> = (0..20u32)
        .map(|i| Op::Put(format!("k{i:03}").into_bytes(), vec![i as u8; 1 + (i as usize * 7) % 40]))
        .chain([
            Op::Put(vec![b'L'; 100], b"long key".to_vec()),
            Op::Put(vec![], b"empty key".to_vec()),
            Op::Put(vec![0], vec![0; 300]),
            // A key object and a value object, both published under the leaf's first fence.
            Op::Put(vec![b'K'; 90], vec![7; 100]),
        ])
        .collect();
    let n = explore(&ops, 512 << 10);
    eprintln!("insert: {n} crash images checked");
}

/// Inserts into the slots of deleted leaves (format 8: one line per insert, the bit set
/// unpersisted after the fence, recovery adopting complete leaves in free slots): a torn
/// insert can never bring the deleted record back (the same key with its old value, or
/// another key), because its generation makes the slot's old value check fail, and a
/// delete persists its erase mark with its reset bit.
#[test]
fn h4_insert_into_deleted_slots_every_crash_point() {
    let keys: Vec<Vec<u8>> = (0..10u32).map(|i| format!("r{i}").into_bytes()).collect();
    let mut ops: Vec<Op> = keys.iter().map(|k| Op::Put(k.clone(), b"old".to_vec())).collect();
    for k in keys.iter().step_by(2) {
        ops.push(Op::Delete(k.clone()));
    }
    for k in keys.iter().step_by(2) {
        ops.push(Op::Put(k.clone(), b"new".to_vec()));
        ops.push(Op::Put([k.as_slice(), b"x"].concat(), b"old".to_vec()));
    }
    let n = explore(&ops, 512 << 10);
    eprintln!("insert into deleted slots: {n} crash images checked");
}

#[test]
fn h4_update_every_crash_point() {
    let mut ops: Vec<Op> = (0..8u32).map(|i| Op::Put(format!("u{i}").into_bytes(), b"first".to_vec())).collect();
    for round in 0..3u8 {
        for i in 0..8u32 {
            ops.push(Op::Put(format!("u{i}").into_bytes(), vec![round; 5 + 30 * round as usize]));
        }
    }
    ops.push(Op::Put(vec![b'L'; 64], b"a".to_vec()));
    ops.push(Op::Put(vec![b'L'; 64], b"b".to_vec()));
    // Same-size 8-byte values: in place by default, Algorithm 3 with `paper_updates`.
    for round in 0..3u64 {
        for i in 0..4u32 {
            ops.push(Op::Put(format!("u{i}").into_bytes(), (round * 1000 + i as u64).to_le_bytes().to_vec()));
        }
    }
    // Inline values (≤ 8 bytes, new keys): same-length updates in the leaf, then a length
    // change (3 → 5 bytes) and a growth (8 → 20 bytes), which move the value out of line
    // through the micro-log, then an update of the moved value.
    for i in 0..3u32 {
        ops.push(Op::Put(format!("n{i}").into_bytes(), vec![i as u8; 3]));
        ops.push(Op::Put(format!("m{i}").into_bytes(), vec![i as u8; 8]));
    }
    // In adr, keys of at most 32 bytes alternate between the leaf's two value slots (one
    // persist each): n* takes three updates (ends in slot B, then moves out of line from
    // there), m* two (back in slot A). A 36-byte key has no slot B: two persists in place.
    let wide = |i: u32| format!("{i}{}", "w".repeat(35)).into_bytes();
    for i in 0..2u32 {
        ops.push(Op::Put(wide(i), vec![i as u8; 6]));
    }
    for round in 1..4u8 {
        for i in 0..3u32 {
            ops.push(Op::Put(format!("n{i}").into_bytes(), vec![round; 3]));
            if round < 3 {
                ops.push(Op::Put(format!("m{i}").into_bytes(), vec![round; 8]));
            }
        }
        for i in 0..2u32 {
            ops.push(Op::Put(wide(i), vec![round; 6]));
        }
    }
    for i in 0..3u32 {
        ops.push(Op::Put(format!("n{i}").into_bytes(), vec![9; 5]));
        ops.push(Op::Put(format!("m{i}").into_bytes(), vec![9; 20]));
        ops.push(Op::Put(format!("n{i}").into_bytes(), vec![7; 5]));
    }
    let n = explore(&ops, 512 << 10);
    eprintln!("update (default): {n} crash images checked");
    let n = explore_with(&ops, 512 << 10, Options { paper_updates: true, ..Options::default() });
    eprintln!("update (paper_updates): {n} crash images checked");
}

#[test]
fn h4_h6_delete_and_chunk_recycle_every_crash_point() {
    // 60 keys fill more than one 56-slot leaf chunk; deleting them all empties chunks,
    // which EPallocator recycles (Algorithm 6), and empties ARTs, which HART frees (H6).
    let keys: Vec<Vec<u8>> = (0..60u32).map(|i| format!("d{:02}{}", i % 7, i).into_bytes()).collect();
    let mut ops: Vec<Op> = keys.iter().map(|k| Op::Put(k.clone(), k.clone())).collect();
    ops.push(Op::Put(vec![b'Z'; 70], b"long".to_vec()));
    // Values out of line (longer than 8 bytes) besides the inline ones above.
    ops.push(Op::Put(b"d-out".to_vec(), vec![3; 24]));
    ops.push(Op::Put(b"d-moved".to_vec(), vec![4; 2]));
    ops.push(Op::Put(b"d-moved".to_vec(), vec![5; 30]));
    for k in keys.iter().rev() {
        ops.push(Op::Delete(k.clone()));
    }
    ops.push(Op::Delete(vec![b'Z'; 70]));
    ops.push(Op::Delete(b"d-out".to_vec()));
    ops.push(Op::Delete(b"d-moved".to_vec()));
    let n = explore(&ops, 512 << 10);
    eprintln!("delete+recycle: {n} crash images checked");
}

/// The eADR crash model: every store HART and EPallocator make to a reachable object is a
/// crash point (in eADR a store is persistent the moment it is visible, so a crash between
/// two stores that no fence separates keeps exactly the first). Covers the orders the fence
/// points alone cannot see: the inline update's value check before its value word, the
/// Algorithm 3 swing's three words, a delete's erase before its bit, the allocator's bit
/// and link stores.
#[test]
fn h4_eadr_every_store_point() {
    use pmkv_substrate::{Mode, Pool};
    let pool = std::sync::Arc::new(Pool::create_sim("hart", &sim_opts(512 << 10).mode(Mode::Eadr)).unwrap());
    let h = Hart::open(pool, Options::default()).unwrap();
    let mut ops: Vec<Op> = (0..12u32).map(|i| Op::Put(format!("e{i:02}").into_bytes(), vec![i as u8; 8])).collect();
    for i in 0..12u32 {
        ops.push(Op::Put(format!("e{i:02}").into_bytes(), vec![0xa0 | i as u8; 8]));
        // in place
    }
    ops.push(Op::Put(b"e00".to_vec(), vec![1; 3])); // inline length change: micro-log
    ops.push(Op::Put(b"e01".to_vec(), vec![2; 40])); // out of line
    ops.push(Op::Put(b"e01".to_vec(), vec![3; 40])); // Algorithm 3
    ops.push(Op::Put(vec![b'K'; 60], b"long key".to_vec()));
    for i in (0..12u32).step_by(2) {
        ops.push(Op::Delete(format!("e{i:02}").into_bytes()));
    }
    ops.push(Op::Delete(vec![b'K'; 60]));
    let n = explore_in(&ops, h, true);
    eprintln!("eadr, every store point: {n} crash images checked");
}

#[test]
fn recovery_of_empty_and_clean_pools() {
    let h = sim_hart(256 << 10, 2);
    let img = h.pool().sim().unwrap().image_now(h.pool(), Eviction::All);
    let r: Hart = recover(&img).unwrap();
    assert_eq!(r.len(), 0);
    r.check().unwrap();
}

/// Formatting a new HART pool (allocator root, superblock object, root 1) is a write path
/// too: at every crash point of it, reopening gives an empty, checkable HART with no
/// leaked superblock.
#[test]
fn h5_format_every_crash_point() {
    let pool = sim_pool(512 << 10);
    let found = CrashFindings::new();
    let f = found.clone();
    pool.sim().unwrap().set_hook(true, move |pt| {
        f.check_images(pt, Eviction::standard(pt.index), "format", |img| {
            let h = recover(img)?;
            h.check().map_err(|e| e.to_string())?;
            if !h.is_empty() {
                return Err(format!("{} keys in a pool being formatted", h.len()));
            }
            Ok(())
        });
    });
    let h = Hart::open(pool, Options::default()).unwrap();
    h.pool().sim().unwrap().clear_hook();
    found.assert_none("format is not crash consistent");
    assert!(found.images() > 0);
    h.check().unwrap();
}

/// Group commit (`Hart::put_many`): puts that share one commit fence per run of keys in
/// one ART. At every crash point of a batch (every flush and fence, and in eADR every
/// store), the recovered HART passes `check` and holds the state after some prefix of
/// the batch: the deferred fences lose at most the unacknowledged tail, never a put in
/// the middle.
#[test]
fn h4_group_commit_every_crash_point() {
    use pmkv_substrate::{Mode, Pool};
    let batches: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![
        // Inserts into one ART (hash key "gk"), with 3-byte inline values.
        (0..16u32).map(|i| (format!("gk{i:03}").into_bytes(), vec![i as u8; 3])).collect(),
        // Same-length updates in place, one of them twice.
        (0..16u32).chain([3]).map(|i| (format!("gk{i:03}").into_bytes(), vec![0x80 | i as u8; 3])).collect(),
        // A mix: ART changes, a new key between updates, length changes (micro-log),
        // out-of-line values, a long key.
        vec![
            (b"gk000".to_vec(), vec![1; 5]),
            (b"gk001".to_vec(), vec![2; 30]),
            (b"gk100".to_vec(), vec![3; 3]),
            (b"ab".to_vec(), vec![4; 8]),
            (b"gk002".to_vec(), vec![5; 3]),
            (vec![b'g'; 70], b"long key".to_vec()),
            (b"gk001".to_vec(), vec![6; 30]),
            (b"gk002".to_vec(), vec![7; 3]),
        ],
    ];
    for (mode, stores) in [(Mode::Adr, false), (Mode::Eadr, true)] {
        let seed = seed();
        let pool = std::sync::Arc::new(Pool::create_sim("hart", &sim_opts(512 << 10).mode(mode)).unwrap());
        let h = Hart::open(pool, Options::default()).unwrap();
        let found = CrashFindings::new();
        let mut model = Model::new();
        for (b, batch) in batches.iter().enumerate() {
            let mut prefixes = vec![model.clone()];
            for (k, v) in batch {
                apply(&mut model, &Op::Put(k.clone(), v.clone()));
                prefixes.push(model.clone());
            }
            let (f, desc) = (found.clone(), format!("{mode} batch {b}"));
            h.pool().sim().unwrap().set_hook_with(true, stores, move |pt| {
                f.check_images(pt, evictions(seed, pt.index), &desc, |img| {
                    let r = recover(img)?;
                    r.check().map_err(|e| e.to_string())?;
                    let got = contents(&r);
                    if !prefixes.contains(&got) {
                        return Err(format!("state is no prefix of the batch ({} keys)", got.len()));
                    }
                    Ok(())
                });
            });
            let puts: Vec<(&[u8], &[u8])> = batch.iter().map(|(k, v)| (&k[..], &v[..])).collect();
            h.put_many(&puts).unwrap();
            h.pool().sim().unwrap().clear_hook();
            assert_eq!(contents(&h), model);
            // Once put_many returned, the whole batch is durable.
            let img = h.pool().sim().unwrap().image_now(h.pool(), Eviction::None);
            assert_eq!(contents(&recover(&img).unwrap()), model, "{mode} batch {b} not durable on return");
        }
        found.assert_none("group commit is not crash consistent");
        eprintln!("group commit ({mode}): {} crash images checked", found.images());
        h.check().unwrap();
    }
}

/// Atomic write batches (`Hart::write_batch`, the substrate's batch log), in `adr` at every
/// flush and fence and in `eadr` at every store too (where the log's bytes are ordered
/// before its bit by the publishing CAS, not by a fence): every crash image recovers to
/// exactly the state before the batch or after it, passes `check`, and a batch is durable
/// once `write_batch` returned. Batches: inserts, in-place and micro-log updates, out-of-line
/// values, deletes, a key written twice, a delete of a missing key.
#[test]
fn atomic_batches_every_crash_point_and_eadr_store() {
    use pmkv_substrate::Mode;
    use pmkv_testutil::NativeCrash;
    let batches: Vec<Vec<Op>> = vec![
        (0..10u32)
            .map(|i| Op::Put(format!("ab{i:03}").into_bytes(), vec![i as u8; 3 + 9 * (i as usize % 3)]))
            .collect(),
        vec![
            Op::Put(b"ab000".to_vec(), vec![0xa0; 3]),
            Op::Put(b"ab001".to_vec(), vec![0xa1; 5]),
            Op::Delete(b"ab002".to_vec()),
            Op::Put(b"ab100".to_vec(), vec![0xa2; 40]),
            Op::Put(vec![b'L'; 70], b"long key".to_vec()),
            Op::Put(b"ab001".to_vec(), vec![0xa3; 30]),
            Op::Delete(b"missing".to_vec()),
            Op::Delete(b"ab003".to_vec()),
        ],
    ];
    for mode in [Mode::Adr, Mode::Eadr] {
        let mut run = NativeCrash::new(&pmkv_hart::FACTORY, mode);
        (run.seed, run.evictions) = (seed(), evictions);
        let (n, _) = run.explore_batches(&[], &batches, |h| h);
        eprintln!("atomic batches ({mode}): {n} crash images checked");
    }
}
