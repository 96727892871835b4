//! Every write path under the crash simulator (SPEC P6): at every flush and fence point
//! of each operation, crash images (persisted only, all dirty lines evicted, a random
//! half of the lines, torn 8-byte words) are recovered through the factory; the recovered
//! store must pass `check` (no leak, no unreachable object) and hold a state the
//! operation allows: before or after it, or for a non-atomic batch any prefix of it.

use crate::util::*;
use pmkv::{BatchOp, EngineFactory, ErrorKind, Options, Store, WriteBatch};
use pmkv_substrate::{Eviction, Pool};
use std::sync::{Arc, Mutex};

fn sim_opts() -> Options {
    opts().initial_size(1 << 20).max_size(64 << 20)
}

/// Open a store of `f` on a fresh crash-simulation pool.
fn sim_store(f: &dyn EngineFactory, layout: &str) -> Store {
    let pool = Pool::create_sim(layout, &sim_opts().pool_options()).expect("sim pool");
    Store::from_engine(f.open_pool(Arc::new(pool), &sim_opts()).expect("open on sim pool"))
}

/// Recover a store of `f` from a crash image and read it, checking it first.
fn recover(f: &dyn EngineFactory, layout: &str, img: &[u8]) -> Result<Model, String> {
    let pool = Pool::from_image(img, Some(layout), &sim_opts().pool_options()).map_err(|e| e.to_string())?;
    let s = Store::from_engine(f.open_pool(Arc::new(pool), &sim_opts()).map_err(|e| e.to_string())?);
    let c = s.check().map_err(|e| e.to_string())?;
    if !c.is_ok() {
        return Err(format!("check after recovery: {c}"));
    }
    Ok(contents(&s))
}

/// Crash images taken at crash points, with where each was taken; checked later.
type Taken = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// Apply `op` to a model.
fn apply(m: &mut Model, op: &BatchOp) {
    match op {
        BatchOp::Put(k, v) => {
            m.insert(k.clone(), v.clone());
        }
        BatchOp::Delete(k) => {
            m.remove(k);
        }
    }
}

/// Run each batch on a simulated pool, exploring every crash point of each; a batch of
/// one operation is run as a plain put or delete. Returns the images checked.
///
/// The images of an operation are taken at its crash points and checked once it has
/// returned. For an engine whose state lives at a fixed address (`fixed_address`), the
/// live store is closed first (an image cannot be opened beside it) and reopened after,
/// from the image of the state the operation left — itself a crash right after it.
fn explore(f: &'static dyn EngineFactory, batches: &[Vec<BatchOp>]) -> u64 {
    let layout = f.layout().expect("persistent engines name their layout");
    let mut s = Some(sim_store(f, layout));
    let atomic = s.as_ref().unwrap().info().atomic_batches;
    let fixed = f.info().fixed_address;
    let mut model = Model::new();
    let mut images = 0u64;
    let mut failures: Vec<String> = Vec::new();
    for (i, ops) in batches.iter().enumerate() {
        // The states a crash may leave.
        let mut allowed = vec![model.clone()];
        for op in ops {
            apply(&mut model, op);
            if !atomic || ops.len() == 1 {
                allowed.push(model.clone());
            }
        }
        if atomic && ops.len() > 1 {
            allowed.push(model.clone());
        }
        let desc = format!("op {i} {ops:?}");
        let live = s.as_ref().unwrap();
        let sim_pool = live.engine().pool().expect("engine on a pool").clone();
        let taken: Taken = Arc::new(Mutex::new(Vec::new()));
        let t = taken.clone();
        sim_pool.sim().expect("sim pool").set_hook(true, move |pt| {
            for ev in Eviction::standard(pt.index) {
                t.lock().unwrap().push((format!("point {} ({:?}, {ev:?})", pt.index, pt.kind), pt.image(ev)));
            }
        });
        let r = match &ops[..] {
            [BatchOp::Put(k, v)] => live.put(k, v),
            [BatchOp::Delete(k)] => live.delete(k).map(|_| ()),
            _ => live.write(&ops.iter().cloned().collect::<WriteBatch>()),
        };
        sim_pool.sim().unwrap().clear_hook();
        r.unwrap_or_else(|e| panic!("{desc}: {e}"));
        assert_eq!(contents(live), model, "{desc}: live state");
        let now = sim_pool.sim().unwrap().image_now(&sim_pool, Eviction::None);
        if fixed {
            drop(sim_pool);
            drop(s.take());
        }
        for (at, img) in std::mem::take(&mut *taken.lock().unwrap()) {
            images += 1;
            let r = recover(f, layout, &img).and_then(|got| {
                if allowed.contains(&got) {
                    Ok(())
                } else {
                    Err(format!("state of {} keys is none of the {} allowed", got.len(), allowed.len()))
                }
            });
            if let Err(e) = r {
                if failures.len() < 5 {
                    failures.push(format!("{desc} at {at}: {e}"));
                }
            }
        }
        if fixed {
            let pool =
                Pool::from_image(&now, Some(layout), &sim_opts().pool_options()).expect("image of the live state");
            s = Some(Store::from_engine(f.open_pool(Arc::new(pool), &sim_opts()).expect("reopen the live state")));
            assert_eq!(contents(s.as_ref().unwrap()), model, "{desc}: state reopened after the operation");
        }
    }
    assert!(failures.is_empty(), "crash consistency violated:\n{}", failures.join("\n"));
    // The final state survives a crash right after the last operation.
    let live = s.take().unwrap();
    let sim_pool = live.engine().pool().expect("engine on a pool").clone();
    let img = sim_pool.sim().unwrap().image_now(&sim_pool, Eviction::None);
    if fixed {
        drop(sim_pool);
        drop(live);
    }
    assert_eq!(recover(f, layout, &img).unwrap(), model);
    images
}

fn put(k: &[u8], v: &[u8]) -> Vec<BatchOp> {
    vec![BatchOp::Put(k.to_vec(), v.to_vec())]
}
fn del(k: &[u8]) -> Vec<BatchOp> {
    vec![BatchOp::Delete(k.to_vec())]
}

/// Inserts (short and long keys, empty key, small and large values), updates (same size,
/// smaller, larger), deletes, re-inserts.
pub fn put_delete_every_crash_point(f: &'static dyn EngineFactory) {
    if !f.info().persistent {
        let pool = Arc::new(Pool::create_sim("x", &sim_opts().pool_options()).unwrap());
        assert_kind(f.open_pool(pool, &sim_opts()).map(|_| ()), ErrorKind::Unsupported);
        return;
    }
    let mut ops = Vec::new();
    for i in 0..10u32 {
        ops.push(put(format!("k{i}").as_bytes(), &vec![i as u8; (i as usize * 11) % 40]));
    }
    ops.push(put(&[b'L'; 90], b"long key"));
    ops.push(put(b"", b"empty key"));
    ops.push(put(&[0], &[0; 300]));
    for (i, len) in [(1u32, 8usize), (2, 1), (3, 60), (1, 8), (11, 0)] {
        ops.push(put(format!("k{i}").as_bytes(), &vec![0xa0 + i as u8; len]));
    }
    for i in [0u32, 4, 9] {
        ops.push(del(format!("k{i}").as_bytes()));
    }
    ops.push(del(&[b'L'; 90]));
    ops.push(del(b""));
    ops.push(put(b"k4", b"back"));
    let n = explore(f, &ops);
    assert!(n > 100, "only {n} crash images");
}

/// Batches: mixed puts and deletes, several keys, one key written twice.
pub fn batch_every_crash_point(f: &'static dyn EngineFactory) {
    if !f.info().persistent {
        return;
    }
    let mut batches = Vec::new();
    let mut b = Vec::new();
    for i in 0..6u32 {
        b.push(BatchOp::Put(format!("b{i}").into_bytes(), vec![i as u8; 5 + i as usize * 9]));
    }
    batches.push(b);
    batches.push(vec![
        BatchOp::Put(b"b1".to_vec(), b"updated".to_vec()),
        BatchOp::Delete(b"b2".to_vec()),
        BatchOp::Put(b"b9".to_vec(), vec![9; 100]),
        BatchOp::Put(b"b1".to_vec(), b"twice".to_vec()),
        BatchOp::Delete(b"missing".to_vec()),
    ]);
    let n = explore(f, &batches);
    assert!(n > 20, "only {n} crash images");
}

/// SPEC R3: recovery is itself crash-safe. Crash images are taken during puts (new keys,
/// inline and out-of-line values, updates through the micro-log), deletes and a batch;
/// each is recovered once without interruption (the reference), then again with a crash
/// at every flush and fence point of that recovery, each of whose images is recovered a
/// second time: the result must equal the reference, and `check` must be clean.
pub fn recovery_survives_its_own_crash(f: &'static dyn EngineFactory) {
    if !f.info().persistent {
        return;
    }
    let layout = f.layout().expect("persistent engines name their layout");
    let s = sim_store(f, layout);
    let sim_pool = s.engine().pool().expect("engine on a pool").clone();
    for i in 0..6u32 {
        s.put(format!("base{i}").as_bytes(), &vec![i as u8; 3 + 20 * (i as usize % 2)]).unwrap();
    }
    let images: Arc<Mutex<Vec<Vec<u8>>>> = Arc::new(Mutex::new(Vec::new()));
    let ops: Vec<Vec<BatchOp>> = vec![
        put(b"new-inline", b"1234"),
        put(b"new-long-value", &[7; 90]),
        put(b"base1", &[9; 60]),
        put(b"base2", &[5; 40]),
        del(b"base3"),
        vec![BatchOp::Put(b"b-a".to_vec(), vec![1; 30]), BatchOp::Delete(b"base0".to_vec())],
    ];
    for ops in &ops {
        let imgs = images.clone();
        sim_pool.sim().unwrap().set_hook(true, move |pt| {
            let mut v = imgs.lock().unwrap();
            for ev in Eviction::standard(pt.index) {
                v.push(pt.image(ev));
            }
        });
        let r = match &ops[..] {
            [BatchOp::Put(k, v)] => s.put(k, v),
            [BatchOp::Delete(k)] => s.delete(k).map(|_| ()),
            _ => s.write(&ops.iter().cloned().collect::<WriteBatch>()),
        };
        sim_pool.sim().unwrap().clear_hook();
        r.unwrap();
    }
    let all = std::mem::take(&mut *images.lock().unwrap());
    // Images are opened only once no other store of the pool is (see `explore`).
    drop(sim_pool);
    drop(s);
    // Every image would take minutes in a debug build: an even sample of 48 keeps every
    // operation and eviction kind represented.
    let step = (all.len() / 48).max(1);
    let mut checked = 0u64;
    let failures: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    for (n, img) in all.iter().enumerate().step_by(step) {
        let reference = match recover(f, layout, img) {
            Ok(m) => m,
            Err(e) => panic!("image {n}: the first recovery failed: {e}"),
        };
        let pool = Pool::from_image(img, Some(layout), &sim_opts().pool_options()).unwrap();
        // The images of the interrupted recovery, checked once it has finished.
        let nested: Taken = Arc::new(Mutex::new(Vec::new()));
        let nt = nested.clone();
        pool.sim().unwrap().set_hook(true, move |pt| {
            for ev in Eviction::standard(pt.index) {
                nt.lock().unwrap().push((format!("recovery point {} ({ev:?})", pt.index), pt.image(ev)));
            }
        });
        let st = Store::from_engine(f.open_pool(Arc::new(pool), &sim_opts()).expect("interrupted-recovery open"));
        assert_eq!(contents(&st), reference, "image {n}: recovery with a hook differs from without");
        drop(st);
        for (at, img2) in std::mem::take(&mut *nested.lock().unwrap()) {
            checked += 1;
            match recover(f, layout, &img2) {
                Ok(got) if got == reference => {}
                Ok(got) => failures.lock().unwrap().push(format!(
                    "image {n}, {at}: {} keys after the second recovery, {} expected",
                    got.len(),
                    reference.len()
                )),
                Err(e) => failures.lock().unwrap().push(format!("image {n}, {at}: {e}")),
            }
        }
    }
    let fl = failures.lock().unwrap();
    assert!(
        fl.is_empty(),
        "recovery is not crash-safe:\n{}",
        fl.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
    );
    assert!(checked > 0, "no recovery issued a flush or fence: nothing was tested");
    eprintln!(
        "{}: {checked} images of interrupted recoveries, from {} crash images",
        f.info().name,
        all.len().div_ceil(step)
    );
}
