//! The engine kit's crash harness: any [`NativeEngine`] (opened through its
//! [`NativeFactory`]) run under the crash simulator, checked at every flush and fence (in
//! `eadr`, every PM store too) of the operations a test selects. Each crash image must
//! recover to an engine whose own check passes (its checker finds no leaked object and
//! no damage) and that holds exactly the state before or after the interrupted operation.
//!
//! What every engine's crash test did with its own copy of this loop; the engine keeps
//! only its workload and what it checks beyond (see [`NativeCrash::live_on`]).

use crate::{apply, model_of_scan, sim_opts, CrashFindings, Model, Op};
use pmkv_core::{KeyRange, NativeEngine, NativeFactory, Options};
use pmkv_substrate::{Eviction, Mode, Pool};
use std::sync::Arc;

/// Extra checks on each recovered engine: given it and the operation the crash
/// interrupted.
pub type LiveOn<E> = fn(&E, &Op) -> Result<(), String>;

/// A crash exploration of one engine in one persistence mode.
pub struct NativeCrash<F: NativeFactory> {
    /// Opens (recovering first) the engine.
    pub factory: &'static F,
    /// The settings the engine is created with (recovery opens with the defaults: what a
    /// pool fixes at creation it keeps).
    pub settings: F::Settings,
    /// `adr`: crash points at flushes and fences; `eadr`: at every PM store too.
    pub mode: Mode,
    /// The evictions each crash point is imaged under, from the seed and the point's index.
    pub evictions: fn(u64, u64) -> Vec<Eviction>,
    /// The seed of random evictions (`PMKV_CRASH_SEED` overrides it).
    pub seed: u64,
    /// More checks on each recovered engine, after the before-or-after one (writes that
    /// must work after recovery, a second recovery that must find nothing to repair).
    pub live_on: Option<LiveOn<F::Engine>>,
}

/// The four standard evictions of the point, random lines kept, and random torn words.
pub fn standard_evictions(seed: u64, index: u64) -> Vec<Eviction> {
    let s = seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut v = Eviction::standard(index).to_vec();
    v.extend([Eviction::Lines(s), Eviction::Words(s ^ 0x5555)]);
    v
}

/// Every record of `e`, in order.
pub fn native_contents<E: NativeEngine>(e: &E) -> Model {
    let mut out = Vec::new();
    e.scan(&KeyRange::all(), usize::MAX, false, &mut |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        true
    })
    .expect("scan");
    model_of_scan(out)
}

/// A [`LiveOn`] check: the recovered engine takes a write next to the interrupted
/// operation's key and its delete, stays sound, and holds what it held before them.
pub fn probe_write<E: NativeEngine>(e: &E, op: &Op) -> Result<(), String> {
    let key = match op {
        Op::Put(k, _) | Op::Delete(k) => [k.as_slice(), b"~probe"].concat(),
    };
    let had = native_contents(e);
    e.put(&key, b"p").map_err(|e| format!("a probe put after recovery: {e}"))?;
    e.check().map_err(|e| format!("check after a probe put: {e}"))?;
    e.delete(&key).map_err(|e| format!("a probe delete after recovery: {e}"))?;
    if native_contents(e) != had {
        return Err("a probe write changed other keys".into());
    }
    Ok(())
}

impl<F: NativeFactory> NativeCrash<F> {
    /// Standard evictions, the default seed, no extra checks.
    pub fn new(factory: &'static F, mode: Mode) -> Self {
        let seed = std::env::var("PMKV_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_u64);
        NativeCrash { factory, settings: Default::default(), mode, evictions: standard_evictions, seed, live_on: None }
    }

    /// Open the engine on a copy of `img` (a simulated pool).
    pub fn recover(&self, img: &[u8]) -> Result<F::Engine, String> {
        recover(self.factory, self.mode, img)
    }

    /// Run `ops` on a fresh simulated pool, checking every crash image of each op that
    /// `select` (given its index) picks; then the final state, live and recovered. Panics
    /// on the first inconsistency found, listing the first failing images. Returns the
    /// number of images checked.
    pub fn explore(&self, ops: &[Op], select: impl Fn(usize) -> bool) -> u64 {
        let t = self.fresh();
        let found = CrashFindings::new();
        let mut model = Model::new();
        for (i, op) in ops.iter().enumerate() {
            let before = model.clone();
            apply(&mut model, op);
            if select(i) {
                self.hook(&t, &found, format!("op {i} {op:?}"), before, model.clone(), op.clone());
            }
            match op {
                Op::Put(k, v) => t.put(k, v).unwrap(),
                Op::Delete(k) => assert!(t.delete(k).unwrap(), "op {i}: {op:?} found nothing to delete"),
            }
            t.pool().sim().unwrap().clear_hook();
        }
        found.assert_none("crash consistency violated");
        self.check_final(&t, &model);
        found.images()
    }

    /// Apply `setup` (unchecked), hand the engine to `prepare` (which may change the pool
    /// and return the engine reopened), then apply each of `batches` as one atomic write
    /// batch, checking every crash image of each: all or nothing. Each batch must be
    /// durable once applied (an image taken then recovers to it). Returns the images
    /// checked and the engine.
    pub fn explore_batches(
        &self,
        setup: &[Op],
        batches: &[Vec<Op>],
        prepare: impl FnOnce(F::Engine) -> F::Engine,
    ) -> (u64, F::Engine) {
        use pmkv_substrate::batch_log::Op as LogOp;
        let t = self.fresh();
        let mut model = Model::new();
        for op in setup {
            apply(&mut model, op);
            match op {
                Op::Put(k, v) => t.put(k, v).unwrap(),
                Op::Delete(k) => drop(t.delete(k).unwrap()),
            }
        }
        let t = prepare(t);
        let found = CrashFindings::new();
        for (b, batch) in batches.iter().enumerate() {
            let before = model.clone();
            for op in batch {
                apply(&mut model, op);
            }
            let last = batch.last().cloned().unwrap_or(Op::Delete(Vec::new()));
            self.hook(&t, &found, format!("batch {b}"), before, model.clone(), last);
            let ops: Vec<LogOp<'_>> = batch
                .iter()
                .map(|op| match op {
                    Op::Put(k, v) => LogOp::Put(k, v),
                    Op::Delete(k) => LogOp::Delete(k),
                })
                .collect();
            t.write_batch(&ops, true).unwrap();
            t.pool().sim().unwrap().clear_hook();
            self.check_final(&t, &model);
        }
        found.assert_none("atomic batches are not all or nothing");
        (found.images(), t)
    }

    /// The engine on a fresh simulated pool.
    fn fresh(&self) -> F::Engine {
        let pool =
            Arc::new(Pool::create_sim(self.factory.layout(), &sim_opts(2 << 20).mode(self.mode)).expect("sim pool"));
        self.factory.open_native(pool, self.settings.clone(), &Options::default()).expect("format")
    }

    /// Check the images of every crash point until the hook is cleared: recovery, the
    /// engine's check, before or after, and [`NativeCrash::live_on`].
    fn hook(&self, t: &F::Engine, found: &CrashFindings, what: String, before: Model, after: Model, op: Op) {
        let (factory, mode, evictions, seed, live_on) =
            (self.factory, self.mode, self.evictions, self.seed, self.live_on);
        let (f, desc) = (found.clone(), format!("{} {mode:?} {what}", factory.layout()));
        t.pool().sim().unwrap().set_hook_with(true, mode == Mode::Eadr, move |pt| {
            f.check_images(pt, evictions(seed, pt.index), &desc, |img| {
                let r = recover(factory, mode, img)?;
                r.check().map_err(|e| format!("check after recovery: {e}"))?;
                let got = native_contents(&r);
                if got != before && got != after {
                    return Err(format!("state is neither before nor after ({} keys)", got.len()));
                }
                live_on.map_or(Ok(()), |l| l(&r, &op))
            });
        });
    }

    /// The live engine holds `model` and passes its check, and so does its recovery from
    /// an image taken now.
    fn check_final(&self, t: &F::Engine, model: &Model) {
        assert_eq!(&native_contents(t), model);
        t.check().unwrap();
        let img = t.pool().sim().unwrap().image_now(t.pool(), Eviction::None);
        let r = self.recover(&img).unwrap();
        r.check().unwrap();
        assert_eq!(&native_contents(&r), model);
    }
}

fn recover<F: NativeFactory>(factory: &F, mode: Mode, img: &[u8]) -> Result<F::Engine, String> {
    let pool =
        Pool::from_image(img, Some(factory.layout()), &sim_opts(1 << 20).mode(mode)).map_err(|e| e.to_string())?;
    factory.open_native(Arc::new(pool), Default::default(), &Options::default()).map_err(|e| e.to_string())
}
