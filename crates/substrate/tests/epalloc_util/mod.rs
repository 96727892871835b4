//! Helpers shared by the EPallocator tests (SPEC P7), on top of pmkv-testutil (which
//! every test file also gets from here).
#![allow(dead_code, unused_imports)]

use pmkv_substrate::epalloc::{EpAlloc, RecycleCase, TypeId};
use pmkv_substrate::{CrashPoint, Eviction, Mode, Pool, PoolOptions};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

pub use pmkv_testutil::*;

pub const LAYOUT: &str = "epalloc-test";

/// Small simulated pools: a few hundred KiB, allowed to grow a little.
pub fn opts() -> PoolOptions {
    pool_opts(Mode::Adr, 384 << 10, 4 << 20)
}

/// A fresh simulated pool with options `o`.
pub fn new_sim(o: &PoolOptions) -> Arc<Pool> {
    Arc::new(Pool::create_sim(LAYOUT, o).expect("sim pool"))
}

/// Write `tag` into the first 8 bytes of the object at `off` and persist it: the object's
/// content is durable before it is published (SPEC P7).
pub fn write_tag(pool: &Pool, off: u64, tag: u64) {
    write_u64(pool, off, tag);
    pool.persist_off(off, 8);
}

/// The tag [`write_tag`] wrote.
pub fn read_tag(pool: &Pool, off: u64) -> u64 {
    read_u64(pool, off)
}

/// alloc + content + publish; returns the offset.
pub fn put(ep: &EpAlloc, ty: TypeId, size: usize, tag: u64) -> u64 {
    let off = ep.alloc(ty, size).expect("alloc");
    assert!(ep.capacity(off) >= size.max(8));
    write_tag(ep.pool(), off, tag);
    ep.publish(off);
    assert!(ep.is_used(off));
    off
}

/// The used objects of `types` with their tags: (offset -> (type, tag)).
pub type Used = BTreeMap<u64, (u16, u64)>;

/// The used objects of `types` as [`Used`], each listed once.
pub fn used_set(ep: &EpAlloc, types: &[TypeId]) -> Used {
    let mut m = Used::new();
    for &ty in types {
        ep.for_each_used(ty, |off| {
            let prev = m.insert(off, (ty.0, read_tag(ep.pool(), off)));
            assert!(prev.is_none(), "object {off:#x} listed twice");
        });
    }
    m
}

/// Crash-test state shared between the test body and the simulator hook.
#[derive(Default)]
pub struct Phase {
    /// Used sets a recovery may legally produce right now (before / after the
    /// interrupted operation).
    pub allowed: Vec<Used>,
    pub types: Vec<TypeId>,
    pub images: u64,
    pub points: u64,
    pub failures: Vec<String>,
    pub cases: BTreeMap<RecycleCase, u64>,
    /// Check images of every `stride`-th point only (1 = every point).
    pub stride: u64,
    pub evictions: Option<fn(u64) -> Vec<Eviction>>,
}

pub type Shared = Arc<Mutex<Phase>>;

/// The standard evictions of crash point `i`.
pub fn standard(i: u64) -> Vec<Eviction> {
    Eviction::standard(i).to_vec()
}

/// Recover one crash image and check it: open succeeds, the checker passes, the used set
/// (with each object's persistent content) is one of the allowed ones.
pub fn check_image(
    img: &[u8],
    o: &PoolOptions,
    types: &[TypeId],
    allowed: &[Used],
) -> Result<Vec<RecycleCase>, String> {
    let pool = Pool::from_image(img, Some(LAYOUT), o).map_err(|e| format!("pool: {e}"))?;
    let ep = EpAlloc::open(Arc::new(pool)).map_err(|e| format!("open: {e}"))?;
    let rep = ep.check().map_err(|e| format!("check: {e}"))?;
    let used = used_set(&ep, types);
    if rep.used_slots + rep.extents < used.len() as u64 {
        return Err("checker counts fewer used objects than the lists hold".into());
    }
    if !allowed.contains(&used) {
        let describe = |u: &Used| format!("{:?}", u.keys().map(|k| format!("{k:#x}")).collect::<Vec<_>>());
        return Err(format!(
            "recovered used set {} is none of the allowed {}",
            describe(&used),
            allowed.iter().map(describe).collect::<Vec<_>>().join(" / ")
        ));
    }
    // Recovery that repaired something wrote to PM: crash it at each of its own points
    // and recover again (SPEC R3): the result must be what the uninterrupted one gave.
    if ep.recovery().repaired().next().is_some() {
        recover_twice(img, o, types, &used)?;
    }
    // The recovered allocator must also be usable: allocate, publish and free again.
    let off = ep.alloc(TypeId(999), 40).map_err(|e| format!("alloc after recovery: {e}"))?;
    ep.publish(off);
    ep.free(off);
    ep.check().map_err(|e| format!("check after reuse: {e}"))?;
    Ok(ep.recovery().repaired().map(|c| c.2).collect())
}

/// Recover `img` with the simulator watching recovery itself, then recover each image of
/// each of recovery's flush/fence points (four evictions each) again: every one must open,
/// pass the checker and hold exactly `want` (what the uninterrupted recovery produced).
pub fn recover_twice(img: &[u8], o: &PoolOptions, types: &[TypeId], want: &Used) -> Result<(), String> {
    let pool = Pool::from_image(img, Some(LAYOUT), o).map_err(|e| format!("pool: {e}"))?;
    let images: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let sink = images.clone();
    pool.sim().expect("sim pool").set_hook(true, move |pt: &CrashPoint<'_>| {
        let mut v = sink.lock().unwrap();
        for ev in Eviction::standard(pt.index) {
            v.push(pt.image(ev));
        }
    });
    let ep = EpAlloc::open(Arc::new(pool)).map_err(|e| format!("open: {e}"))?;
    ep.pool().sim().expect("sim pool").clear_hook();
    let images = std::mem::take(&mut *images.lock().unwrap());
    if images.is_empty() {
        return Err("a recovery that repaired a recycle wrote nothing".into());
    }
    for (i, second) in images.iter().enumerate() {
        let pool =
            Pool::from_image(second, Some(LAYOUT), o).map_err(|e| format!("recovery crashed ({i}): pool: {e}"))?;
        let ep2 = EpAlloc::open(Arc::new(pool)).map_err(|e| format!("recovery crashed ({i}): open: {e}"))?;
        ep2.check().map_err(|e| format!("recovery crashed ({i}): check: {e}"))?;
        if &used_set(&ep2, types) != want {
            return Err(format!("recovery crashed at its image {i}: the second recovery differs from the first"));
        }
    }
    DOUBLE_CRASH_IMAGES.fetch_add(images.len() as u64, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// Images of crashed recoveries recovered by [`recover_twice`] (for the tests' reports).
pub static DOUBLE_CRASH_IMAGES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Install a hook that checks the images of every crash point (flushes included).
pub fn install_hook(pool: &Pool, shared: &Shared, o: &PoolOptions) {
    let s = shared.clone();
    let o = o.clone();
    pool.sim().expect("sim pool").set_hook(true, move |pt: &CrashPoint<'_>| {
        let mut g = s.lock().unwrap();
        g.points += 1;
        if g.allowed.is_empty() || !pt.index.is_multiple_of(g.stride.max(1)) {
            return;
        }
        let evs = g.evictions.map_or_else(|| standard(pt.index), |f| f(pt.index));
        for ev in evs {
            let img = pt.image(ev);
            g.images += 1;
            match check_image(&img, &o, &g.types, &g.allowed) {
                Ok(cases) => {
                    for c in cases {
                        *g.cases.entry(c).or_default() += 1;
                    }
                }
                Err(e) => {
                    if g.failures.len() < 20 {
                        g.failures.push(format!("point {} ({:?}) {ev:?}: {e}", pt.index, pt.kind));
                    }
                }
            }
        }
    });
}

/// The tags of `used`.
pub fn tags(used: &Used) -> BTreeSet<u64> {
    used.values().map(|v| v.1).collect()
}

/// A format-3 link word naming `off`, for the word at `at` (tests that patch lists).
pub fn link(at: u64, off: u64) -> u64 {
    pmkv_substrate::epalloc::check::link_word(pmkv_substrate::epalloc::Format::V3, at, off)
}

/// The offset the format-3 link word `w` at `at` names (panics if it is not valid).
pub fn link_off(at: u64, w: u64) -> u64 {
    pmkv_substrate::epalloc::check::link_value(pmkv_substrate::epalloc::Format::V3, at, w)
        .unwrap_or_else(|| panic!("link word {w:#x} at {at:#x} is not valid"))
}

/// A valid format-3 header word of the chunk at `chunk` with `bitmap`.
pub fn header3(chunk: u64, bitmap: u64) -> u64 {
    pmkv_substrate::epalloc::chunk::HeaderWord::encode(pmkv_substrate::epalloc::Format::V3, chunk, bitmap).0
}

/// The directory entry of (`ty`, `class` code) in the format-3 allocator whose root
/// block is at `r`, read through `rd`.
pub fn find_entry(r: u64, rd: impl Fn(u64) -> u64, ty: TypeId, class: u8) -> pmkv_substrate::epalloc::root::Entry {
    use pmkv_substrate::epalloc::root;
    (0..root::DIR_CAP as u64)
        .map(|i| root::Entry(r + root::DIR_AT + i * root::ENTRY_LEN))
        .find(|&e| rd(e.tag_at()) == root::tag_word(pmkv_substrate::epalloc::Format::V3, e, ty, class))
        .expect("the list of this type and class")
}
