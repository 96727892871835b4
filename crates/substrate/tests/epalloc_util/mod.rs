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
    // The recovered allocator must also be usable: allocate, publish and free again.
    let off = ep.alloc(TypeId(999), 40).map_err(|e| format!("alloc after recovery: {e}"))?;
    ep.publish(off);
    ep.free(off);
    ep.check().map_err(|e| format!("check after reuse: {e}"))?;
    Ok(ep.recovery().repaired().map(|c| c.2).collect())
}

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
