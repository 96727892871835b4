//! Every write path under the crash simulator (SPEC P6): at every flush and fence point
//! of each operation, crash images (persisted only, all dirty lines evicted, a random
//! half of the lines, torn 8-byte words) are recovered through the factory; the recovered
//! store must pass `check` (no leak, no unreachable object) and hold a state the
//! operation allows: before or after it, or for a non-atomic batch (an engine without
//! atomic batches, or a [`WriteBatch::independent`] one) any prefix of it.
//!
//! Each case runs in both crash models of a persistent-memory pool, through
//! the same exploration ([`explore_plan_in`]): in `adr` (`*_every_crash_point`) the
//! points are flushes and fences and each has many images (what was persisted plus any
//! evicted lines or words); in `eadr` (the `eadr_*` cases), where caches are in
//! the persistence domain, every store through the pool's store functions and every
//! EPallocator metadata store is a point too, and a point has one image: every store
//! before it and none after (no torn word). An engine that refuses an `eadr` pool
//! ([`eadr_unsupported`]) has its `eadr` cases print a `SKIPPED` line saying why.

use crate::util::*;
use pmkv::{BatchOp, EngineFactory, ErrorKind, Options, Store, WriteBatch};
use pmkv_substrate::{CrashModel, CrashPoint, Eviction, Mode, PointKind, Pool, LINE};
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

fn sim_opts() -> Options {
    sim_opts_in(Mode::Adr)
}

/// Options of a crash-simulation pool in persistence `mode` (`adr` or `eadr`).
fn sim_opts_in(mode: Mode) -> Options {
    opts().initial_size(1 << 20).max_size(64 << 20).mode(mode)
}

/// Open a store of `f` on a fresh crash-simulation pool.
fn sim_store(f: &dyn EngineFactory, layout: &str) -> Store {
    sim_store_with(f, layout, &sim_opts())
}

/// [`sim_store`] on a pool made with `opts` (its initial size, say).
fn sim_store_with(f: &dyn EngineFactory, layout: &str, opts: &Options) -> Store {
    let pool = Pool::create_sim(layout, &opts.pool_options()).expect("sim pool");
    Store::from_engine(f.open_pool(Arc::new(pool), opts).expect("open on sim pool"))
}

/// Recover a store of `f` from a crash image and read it, checking it first; then live on
/// it (see [`life_after_recovery`]) with probes next to the keys in `near`.
/// The pool is opened in persistence `mode`, the mode of the store that crashed.
fn recover_in(f: &dyn EngineFactory, layout: &str, img: &[u8], near: &[Vec<u8>], mode: Mode) -> Result<Model, String> {
    let o = sim_opts_in(mode);
    let pool = Pool::from_image(img, Some(layout), &o.pool_options()).map_err(|e| e.to_string())?;
    let s = Store::from_engine(f.open_pool(Arc::new(pool), &o).map_err(|e| e.to_string())?);
    let c = s.check().map_err(|e| e.to_string())?;
    if !c.is_ok() {
        return Err(format!("check after recovery: {c}"));
    }
    let got = contents(&s);
    life_after_recovery(&s, &got, near)?;
    Ok(got)
}

/// A recovered store must not only read right, it must take writes and stay sound: recovery
/// can leave state that only the next writes build on (NBTree once let a slot whose insert
/// a crash cut short be taken again, with the cut insert's second key word still in it,
/// and `check` rejected the pool only after that later write). So every crash image is
/// recovered and then written: keys next to each key of the interrupted operation (one
/// byte longer, one shorter, its first 7 and 8 bytes, and a long key with it as prefix:
/// the neighbours that land in the same leaf, chunk or node, in each way an engine stores
/// keys), with short, 8-byte and object-sized values; `check`; then the probes are deleted,
/// `check` again, and the contents must be what recovery returned.
fn life_after_recovery(s: &Store, got: &Model, near: &[Vec<u8>]) -> Result<(), String> {
    let mut probes: Vec<Vec<u8>> = Vec::new();
    for k in near {
        let mut cands =
            vec![[k.as_slice(), &[0]].concat(), [k.as_slice(), b"-a-longer-probe-key-to-an-object"].concat()];
        if !k.is_empty() {
            cands.push(k[..k.len() - 1].to_vec());
        }
        cands.push(k[..k.len().min(7)].to_vec());
        cands.push(k[..k.len().min(8)].to_vec());
        for c in cands {
            if !got.contains_key(&c) && !probes.contains(&c) {
                probes.push(c);
            }
        }
    }
    if probes.is_empty() {
        return Ok(());
    }
    let step = |what: &str, r: pmkv::Result<()>| r.map_err(|e| format!("after recovery, {what}: {e}"));
    for (i, p) in probes.iter().enumerate() {
        step("a probe put", s.put(p, &vec![0x5a ^ i as u8; [3, 8, 40][i % 3]]))?;
    }
    let checked = |when: &str| -> Result<(), String> {
        let c = s.check().map_err(|e| format!("check {when}: {e}"))?;
        if c.is_ok() {
            Ok(())
        } else {
            Err(format!("check {when}: {c}"))
        }
    };
    checked("after writes to the recovered store")?;
    for p in &probes {
        step("a probe delete", s.delete(p).map(|_| ()))?;
    }
    checked("after deleting the probes")?;
    if contents(s) != *got {
        return Err("the recovered store changed under writes to other keys".into());
    }
    Ok(())
}

/// Crash images taken at crash points, with where each was taken; checked later.
type Taken = Arc<Mutex<Images>>;

/// Lines of an image that differ from a base image: (offset, bytes).
type LineDiff = Vec<(usize, Vec<u8>)>;

/// Crash images of one operation, kept until it has returned: each distinct image once
/// (the standard and adversarial evictions of a point often give the same bytes, and one
/// recovery per distinct image is what a case costs), stored as the 64-byte lines where it
/// differs from the first image taken, since the images of one operation differ in a few
/// lines of a pool of a megabyte or more.
#[derive(Default)]
pub struct Images {
    base: Vec<u8>,
    seen: HashSet<u64>,
    /// Where each distinct image was taken, its length, and its lines that differ from
    /// `base` (offset, bytes).
    kept: Vec<(String, usize, LineDiff)>,
    taken: u64,
}

impl Images {
    /// Keep `img`, taken `at`, unless an identical image is kept already.
    pub fn push(&mut self, at: String, img: Vec<u8>) {
        self.taken += 1;
        if self.kept.is_empty() && self.base.is_empty() {
            self.base = img.clone();
        }
        let mut diff = Vec::new();
        for (i, line) in img.chunks(LINE).enumerate() {
            let o = i * LINE;
            let b = self.base.get(o..(o + line.len()).min(self.base.len())).unwrap_or(&[]);
            if b != line {
                diff.push((o, line.to_vec()));
            }
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (img.len(), &diff).hash(&mut h);
        if self.seen.insert(h.finish()) {
            self.kept.push((at, img.len(), diff));
        }
    }

    /// Images pushed, duplicates included.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// The distinct images, rebuilt, with where each was first taken.
    pub fn drain(&mut self) -> impl Iterator<Item = (String, Vec<u8>)> + '_ {
        let base = std::mem::take(&mut self.base);
        self.seen.clear();
        self.taken = 0;
        self.kept.drain(..).map(move |(at, len, diff)| {
            let mut img = base.clone();
            img.resize(len, 0);
            for (o, line) in diff {
                img[o..o + line.len()].copy_from_slice(&line);
            }
            (at, img)
        })
    }
}

/// The evictions a case takes at `pt`: at a fence (or store) point, the standard ones and
/// every adversarial one ([`pmkv_substrate::CrashPoint::evictions`] with at most `cap`
/// single older lines); at a flush point, the standard ones and the newest pending line
/// alone. A flush point's pending lines are a prefix of the next fence point's, whose
/// adversarial images already leave out or keep single lines; taking them all at every
/// flush too would double a Mangosteen operation's images (tens of flushes per fence)
/// for little.
pub fn evictions_at(pt: &CrashPoint<'_>, cap: usize) -> Vec<Eviction> {
    if pt.kind == PointKind::Flush {
        let mut v = Eviction::standard(pt.index).to_vec();
        if pt.pending_lines() > 0 {
            v.push(Eviction::OnlyNewest);
        }
        return v;
    }
    pt.evictions(cap)
}

/// The images a case takes at `pt` of a pool in `mode`: in `adr`, [`evictions_at`]; in
/// `eadr`, the one image a crash there can leave (every store so far and none later: the
/// working memory, whatever the eviction, never a torn word). An engine that assumes
/// [`CrashModel::LinesInOrder`] gets random in-order line prefixes instead of torn words
/// (which its model rules out).
fn evictions_in(mode: Mode, model: CrashModel, pt: &CrashPoint<'_>, cap: usize) -> Vec<Eviction> {
    if mode == Mode::Eadr {
        return vec![Eviction::None];
    }
    let mut v = evictions_at(pt, cap);
    if model == CrashModel::LinesInOrder {
        v.retain(|e| !matches!(e, Eviction::Words(_)));
        v.extend([Eviction::InOrder(pt.index * 2 + 1), Eviction::InOrder(pt.index * 2 + 2)]);
    }
    v
}

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

/// Run one batch on `s` (a batch of one operation as a plain put or delete).
fn run_op(s: &Store, batch: &WriteBatch) -> pmkv::Result<()> {
    match batch.ops() {
        [BatchOp::Put(k, v)] => s.put(k, v),
        [BatchOp::Delete(k)] => s.delete(k).map(|_| ()),
        _ => s.write(batch),
    }
}

/// The states a crash during `batch`, run on a store holding `model`, may leave on an
/// engine with `atomic` batches: before and after it, and for a batch that is not all or
/// nothing every prefix of it. `model` ends as the state after it.
fn allowed_states(model: &mut Model, batch: &WriteBatch, atomic: bool) -> Vec<Model> {
    let all_or_nothing = atomic && batch.is_atomic() && batch.len() > 1;
    let mut allowed = vec![model.clone()];
    for op in batch.ops() {
        apply(model, op);
        if !all_or_nothing {
            allowed.push(model.clone());
        }
    }
    if all_or_nothing {
        allowed.push(model.clone());
    }
    allowed
}

/// Keys next to which a recovered store is written ([`life_after_recovery`]): those of
/// `batch`, at most [`NEAR_KEYS`] of them, spread over the batch.
fn near_keys(batch: &WriteBatch) -> Vec<Vec<u8>> {
    let ops = batch.ops();
    let step = ops.len().div_ceil(NEAR_KEYS).max(1);
    ops.iter().step_by(step).map(|o| o.key().to_vec()).collect()
}

/// Most keys of one operation a recovered store is probed next to: each key costs a
/// recovered image about ten writes and two checks.
const NEAR_KEYS: usize = 16;

/// Which operations of a run [`explore`] crashes, and how thoroughly.
pub struct Plan {
    /// Per operation: take crash images at its points (`true`) or just run it.
    pub explore: Vec<bool>,
    /// Single older pending lines per point ([`Eviction::adversarial`]'s `cap`).
    pub single_lines: usize,
}

impl Plan {
    /// Every operation of `n`, with [`Eviction::SINGLE_LINES`].
    pub fn every(n: usize) -> Plan {
        Plan { explore: vec![true; n], single_lines: Eviction::SINGLE_LINES }
    }
}

/// What a run of [`explore`] checked.
#[derive(Debug, Default)]
pub struct Explored {
    /// Crash images taken (every eviction at every point of the explored operations).
    pub taken: u64,
    /// Distinct images among them, each recovered and checked.
    pub checked: u64,
    /// Checked images that recovered to the state before their operation, and to the
    /// state after it (an image may count as both when the operation changes nothing).
    pub before: u64,
    pub after: u64,
}

/// Run each batch on a simulated pool in `mode`, exploring every crash point of each; a
/// batch of one operation is run as a plain put or delete. Returns the images checked.
fn explore(f: &'static dyn EngineFactory, batches: &[WriteBatch], mode: Mode) -> u64 {
    let done = explore_plan_in(f, batches, &Plan::every(batches.len()), mode);
    eprintln!(
        "{} in {mode}: {} operations, {} crash images, {} distinct, recovered and checked",
        f.info().name,
        batches.len(),
        done.taken,
        done.checked
    );
    done.taken
}

/// [`explore`] with a plan: every crash point of the operations `plan` selects, each with
/// the standard and the adversarial evictions ([`pmkv_substrate::CrashPoint::evictions`]).
///
/// The images of an operation are taken at its crash points and checked once it has
/// returned. For an engine whose state lives at a fixed address (`fixed_address`), the
/// live store is closed first (an image cannot be opened beside it) and reopened after,
/// from the image of the state the operation left — itself a crash right after it.
pub fn explore_plan(f: &'static dyn EngineFactory, batches: &[WriteBatch], plan: &Plan) -> Explored {
    explore_plan_in(f, batches, plan, Mode::Adr)
}

/// [`explore_plan`] in persistence `mode`. In `adr` the crash points are the flushes and
/// fences, each with the standard and adversarial evictions; in `eadr` they are every
/// store through the pool's store functions and EPallocator's metadata stores, every
/// flush and every fence, each with its one image (see [`evictions_in`]).
pub fn explore_plan_in(f: &'static dyn EngineFactory, batches: &[WriteBatch], plan: &Plan, mode: Mode) -> Explored {
    explore_plan_with(f, batches, plan, &sim_opts_in(mode))
}

/// [`explore_plan`] on a simulated pool made with `opts` (in the persistence mode they set).
fn explore_plan_with(f: &'static dyn EngineFactory, batches: &[WriteBatch], plan: &Plan, opts: &Options) -> Explored {
    let layout = f.layout().expect("persistent engines name their layout");
    let mode = opts.pool_options().mode;
    let mut s = Some(sim_store_with(f, layout, opts));
    let atomic = s.as_ref().unwrap().info().atomic_batches;
    let fixed = f.info().fixed_address;
    let mut model = Model::new();
    let mut done = Explored::default();
    let mut failures: Vec<String> = Vec::new();
    for (i, ops) in batches.iter().enumerate() {
        let allowed = allowed_states(&mut model, ops, atomic);
        let desc =
            if ops.len() <= 8 { format!("op {i} {ops:?}") } else { format!("op {i} (a batch of {})", ops.len()) };
        let near = near_keys(ops);
        let live = s.as_ref().unwrap();
        if !plan.explore.get(i).copied().unwrap_or(true) {
            run_op(live, ops).unwrap_or_else(|e| panic!("{desc}: {e}"));
            continue;
        }
        let sim_pool = live.engine().pool().expect("engine on a pool").clone();
        let taken: Taken = Arc::default();
        let t = taken.clone();
        let cap = plan.single_lines;
        let crash_model = f.info().crash_model;
        sim_pool.sim().expect("sim pool").set_hook_with(true, mode == Mode::Eadr, move |pt| {
            let mut t = t.lock().unwrap();
            for ev in evictions_in(mode, crash_model, pt, cap) {
                t.push(format!("point {} ({:?}, {ev:?})", pt.index, pt.kind), pt.image(ev));
            }
        });
        let r = run_op(live, ops);
        sim_pool.sim().unwrap().clear_hook();
        r.unwrap_or_else(|e| panic!("{desc}: {e}"));
        assert_eq!(contents(live), model, "{desc}: live state");
        let now = sim_pool.sim().unwrap().image_now(&sim_pool, Eviction::None);
        if fixed {
            drop(sim_pool);
            drop(s.take());
        }
        let mut t = taken.lock().unwrap();
        done.taken += t.taken();
        for (at, img) in t.drain() {
            done.checked += 1;
            let r = recover_in(f, layout, &img, &near, mode).and_then(|got| {
                done.before += u64::from(got == allowed[0]);
                done.after += u64::from(Some(&got) == allowed.last());
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
            let pool = Pool::from_image(&now, Some(layout), &opts.pool_options()).expect("image of the live state");
            s = Some(Store::from_engine(f.open_pool(Arc::new(pool), opts).expect("reopen the live state")));
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
    assert_eq!(recover_in(f, layout, &img, &[], mode).unwrap(), model);
    done
}

/// Crash points of each batch run on a fresh simulated pool, without taking an image:
/// what an operation costs in flushes and fences, which is how [`structural_every_crash_point`]
/// finds the operations that restructure (a split, a growth, a new or freed chunk writes
/// and orders more than a plain insert does).
pub fn points_per_op(f: &'static dyn EngineFactory, batches: &[WriteBatch], mode: Mode) -> Vec<u64> {
    let layout = f.layout().expect("persistent engines name their layout");
    let s = sim_store_with(f, layout, &sim_opts_in(mode));
    let sim_pool = s.engine().pool().expect("engine on a pool").clone();
    let sim = sim_pool.sim().expect("sim pool");
    // A hook that takes nothing: with it flushes (and in `eadr` stores) are points too.
    sim.set_hook_with(true, mode == Mode::Eadr, |_| {});
    let mut v = Vec::with_capacity(batches.len());
    for ops in batches {
        let before = sim.points();
        run_op(&s, ops).expect("operation of the workload");
        v.push(sim.points() - before);
    }
    sim.clear_hook();
    v
}

fn put(k: &[u8], v: &[u8]) -> WriteBatch {
    batch(vec![BatchOp::Put(k.to_vec(), v.to_vec())])
}
fn del(k: &[u8]) -> WriteBatch {
    batch(vec![BatchOp::Delete(k.to_vec())])
}
/// An atomic batch of `ops`.
fn batch(ops: Vec<BatchOp>) -> WriteBatch {
    ops.into_iter().collect()
}

/// Why `f` is not crash-tested in `eadr`, if it is not: it keeps nothing (not
/// persistent), or it refuses a pool in `eadr` mode with `Unsupported` (an engine whose
/// crash consistency rests on flushes it cannot order otherwise would). Any other error
/// opening an `eadr` pool fails the case.
pub fn eadr_unsupported(f: &dyn EngineFactory) -> Option<String> {
    let info = f.info();
    if !info.persistent {
        return Some("not a persistent engine: nothing survives a crash in any mode".into());
    }
    let layout = f.layout().expect("persistent engines name their layout");
    let o = sim_opts_in(Mode::Eadr);
    let pool = Pool::create_sim(layout, &o.pool_options()).expect("eadr sim pool");
    match f.open_pool(Arc::new(pool), &o) {
        Ok(_) => None,
        Err(e) if e.kind() == ErrorKind::Unsupported => Some(format!("refuses a pool in eadr mode: {e}")),
        Err(e) => panic!("{}: opening a fresh pool in eadr mode failed: {e}", info.name),
    }
}

/// Whether an `eadr` case is to run for `f`; if not, says so and why on stderr, in a line
/// that names the engine and the case and starts with `SKIPPED`.
fn eadr_runs(f: &dyn EngineFactory, case: &str) -> bool {
    match eadr_unsupported(f) {
        None => true,
        Some(why) => {
            eprintln!("SKIPPED {case} for engine '{}': {why}", f.info().name);
            false
        }
    }
}

/// Inserts (short and long keys, empty key, small and large values), updates (same size,
/// smaller, larger), deletes, re-inserts.
pub fn put_delete_every_crash_point(f: &'static dyn EngineFactory) {
    if !f.info().persistent {
        let pool = Arc::new(Pool::create_sim("x", &sim_opts().pool_options()).unwrap());
        assert_kind(f.open_pool(pool, &sim_opts()).map(|_| ()), ErrorKind::Unsupported);
        return;
    }
    put_delete_in(f, Mode::Adr);
}

/// [`put_delete_every_crash_point`] in `eadr`: a crash at every store, flush and fence of
/// each operation, the image keeping every store before it.
pub fn eadr_put_delete_every_store_point(f: &'static dyn EngineFactory) {
    if eadr_runs(f, "eadr_put_delete_every_store_point") {
        put_delete_in(f, Mode::Eadr);
    }
}

fn put_delete_in(f: &'static dyn EngineFactory, mode: Mode) {
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
    let n = explore(f, &ops, mode);
    assert!(n > 100, "only {n} crash images");
}

/// Batches: mixed puts and deletes, several keys, one key written twice.
pub fn batch_every_crash_point(f: &'static dyn EngineFactory) {
    if f.info().persistent {
        batch_in(f, Mode::Adr);
    }
}

/// [`batch_every_crash_point`] in `eadr`, at every store point.
pub fn eadr_batch_every_store_point(f: &'static dyn EngineFactory) {
    if eadr_runs(f, "eadr_batch_every_store_point") {
        batch_in(f, Mode::Eadr);
    }
}

fn batch_in(f: &'static dyn EngineFactory, mode: Mode) {
    let mut batches = Vec::new();
    let mut b = Vec::new();
    for i in 0..6u32 {
        b.push(BatchOp::Put(format!("b{i}").into_bytes(), vec![i as u8; 5 + i as usize * 9]));
    }
    batches.push(batch(b));
    let second = vec![
        BatchOp::Put(b"b1".to_vec(), b"updated".to_vec()),
        BatchOp::Delete(b"b2".to_vec()),
        BatchOp::Put(b"b9".to_vec(), vec![9; 100]),
        BatchOp::Put(b"b1".to_vec(), b"twice".to_vec()),
        BatchOp::Delete(b"missing".to_vec()),
    ];
    // The same writes as an independent batch (a prefix may survive), then atomic.
    let mut independent = WriteBatch::independent();
    for op in &second {
        match op {
            BatchOp::Put(k, v) => independent.put(k.clone(), [v.as_slice(), b"-i"].concat()),
            BatchOp::Delete(k) => independent.delete(k.clone()),
        };
    }
    batches.push(independent);
    batches.push(batch(second));
    let n = explore(f, &batches, mode);
    assert!(n > 20, "only {n} crash images");
}

/// The writes `pmkv serve` makes while two clients pipeline SET and DEL over the same
/// keys: runs of SETs applied as one batch (the server's group commit), single DELs and
/// SETs of the other client between them, keys deleted and set again, so that slots, leaves
/// and chunks freed by one client are taken again by the other. Keys of every length an
/// engine stores differently (up to 7 bytes, 8, 9 to 16, longer) and values inline and in
/// objects. Every crash image is recovered and then written to (see `life_after_recovery`).
pub fn pipelined_server_traffic_every_crash_point(f: &'static dyn EngineFactory) {
    if f.info().persistent {
        pipelined_in(f, Mode::Adr);
    }
}

/// [`pipelined_server_traffic_every_crash_point`] in `eadr`, at every store point.
pub fn eadr_pipelined_server_traffic_every_store_point(f: &'static dyn EngineFactory) {
    if eadr_runs(f, "eadr_pipelined_server_traffic_every_store_point") {
        pipelined_in(f, Mode::Eadr);
    }
}

fn pipelined_in(f: &'static dyn EngineFactory, mode: Mode) {
    let key = |i: usize| -> Vec<u8> {
        match i % 4 {
            0 => format!("s{i}"),
            1 => format!("key:{i:04}"),
            2 => format!("user:{i:010}"),
            _ => format!("session:{i:04}:a-key-long-enough-for-an-object"),
        }
        .into_bytes()
    };
    let value = |i: usize, round: usize| vec![(i * 7 + round) as u8; [1, 8, 5, 90][(i + round) % 4]];
    let mut batches = Vec::new();
    for round in 0..3 {
        // Client A: a pipeline of SETs, one batch of independent writes (the server's
        // `set_many`: each SET is its own command, only their fences are shared).
        let mut a = WriteBatch::independent();
        for i in 0..6 {
            a.put(key(i + round), value(i, round));
        }
        batches.push(a);
        // Client B, between A's pipelines: DELs of A's keys, a SET of a key just deleted.
        batches.push(del(&key(round + 1)));
        batches.push(del(&key(round + 2)));
        batches.push(put(&key(round + 1), &value(9, round)));
        batches.push(del(&key(round + 3)));
    }
    let n = explore(f, &batches, mode);
    assert!(n > 50, "only {n} crash images");
}

/// SPEC R3: recovery is itself crash-safe. Crash images are taken during puts (new keys,
/// inline and out-of-line values, updates through the micro-log), deletes and a batch;
/// each is recovered once without interruption (the reference), then again with a crash
/// at every flush and fence point of that recovery, each of whose images is recovered a
/// second time: the result must equal the reference, and `check` must be clean.
pub fn recovery_survives_its_own_crash(f: &'static dyn EngineFactory) {
    if f.info().persistent {
        recovery_in(f, Mode::Adr);
    }
}

/// [`recovery_survives_its_own_crash`] in `eadr`: the images of the operations and of the
/// interrupted recoveries taken at every store point too.
pub fn eadr_recovery_survives_its_own_crash(f: &'static dyn EngineFactory) {
    if eadr_runs(f, "eadr_recovery_survives_its_own_crash") {
        recovery_in(f, Mode::Eadr);
    }
}

fn recovery_in(f: &'static dyn EngineFactory, mode: Mode) {
    let layout = f.layout().expect("persistent engines name their layout");
    let o = sim_opts_in(mode);
    let stores = mode == Mode::Eadr;
    let s = sim_store_with(f, layout, &o);
    let sim_pool = s.engine().pool().expect("engine on a pool").clone();
    for i in 0..6u32 {
        s.put(format!("base{i}").as_bytes(), &vec![i as u8; 3 + 20 * (i as usize % 2)]).unwrap();
    }
    let images: Taken = Arc::default();
    let ops: Vec<WriteBatch> = vec![
        put(b"new-inline", b"1234"),
        put(b"new-long-value", &[7; 90]),
        put(b"base1", &[9; 60]),
        put(b"base2", &[5; 40]),
        del(b"base3"),
        batch(vec![BatchOp::Put(b"b-a".to_vec(), vec![1; 30]), BatchOp::Delete(b"base0".to_vec())]),
    ];
    let crash_model = f.info().crash_model;
    for ops in &ops {
        let imgs = images.clone();
        sim_pool.sim().unwrap().set_hook_with(true, stores, move |pt| {
            let mut v = imgs.lock().unwrap();
            for ev in evictions_in(mode, crash_model, pt, Eviction::SINGLE_LINES) {
                v.push(format!("point {} ({ev:?})", pt.index), pt.image(ev));
            }
        });
        let r = run_op(&s, ops);
        sim_pool.sim().unwrap().clear_hook();
        r.unwrap();
    }
    let all: Vec<Vec<u8>> = images.lock().unwrap().drain().map(|(_, img)| img).collect();
    // Images are opened only once no other store of the pool is (see `explore`).
    drop(sim_pool);
    drop(s);
    // Every image would take minutes in a debug build: an even sample of 48 keeps every
    // operation and eviction kind represented. In `eadr`, whose recoveries have more
    // points (every store) with one image each, 24 keep every operation represented and
    // the case's cost near the `adr` one's.
    let sample = if mode == Mode::Eadr { 24 } else { 48 };
    let step = (all.len() / sample).max(1);
    let mut checked = 0u64;
    let failures: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    for (n, img) in all.iter().enumerate().step_by(step) {
        let reference = match recover_in(f, layout, img, &[], mode) {
            Ok(m) => m,
            Err(e) => panic!("image {n}: the first recovery failed: {e}"),
        };
        let pool = Pool::from_image(img, Some(layout), &o.pool_options()).unwrap();
        // The images of the interrupted recovery, checked once it has finished.
        // Standard evictions and the newest pending line alone and left out: the single
        // older lines would multiply the nested recoveries for little (recovery writes
        // few lines between its fences).
        let nested: Taken = Arc::default();
        let nt = nested.clone();
        let crash_model = f.info().crash_model;
        pool.sim().unwrap().set_hook_with(true, stores, move |pt| {
            let mut v = nt.lock().unwrap();
            for ev in evictions_in(mode, crash_model, pt, 0) {
                v.push(format!("recovery point {} ({ev:?})", pt.index), pt.image(ev));
            }
        });
        let st = Store::from_engine(f.open_pool(Arc::new(pool), &o).expect("interrupted-recovery open"));
        assert_eq!(contents(&st), reference, "image {n}: recovery with a hook differs from without");
        drop(st);
        let nested: Vec<(String, Vec<u8>)> = nested.lock().unwrap().drain().collect();
        for (at, img2) in nested {
            checked += 1;
            match recover_in(f, layout, &img2, &[], mode) {
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
        "{} in {mode}: {checked} images of interrupted recoveries, from {} crash images",
        f.info().name,
        all.len().div_ceil(step)
    );
}

/// Key `i` of the structural workload: a shared two-byte prefix (so that HART, selecting
/// an ART by the first two bytes, puts every key in one tree), then `i` big-endian, so
/// that ascending `i` is ascending key order and one node sees all 256 values of a byte.
fn structural_key(i: usize) -> Vec<u8> {
    let mut k = b"sk".to_vec();
    k.extend_from_slice(&(i as u16).to_be_bytes());
    k
}

/// Operations of each phase of the structural workload explored in full: the ones with
/// the most crash points (the restructuring ones), and a seeded sample of the others.
const MOST_POINTS_PER_PHASE: usize = 3;
const SAMPLED_PER_PHASE: usize = 1;

/// The seed of the sampled operations: `PMKV_CRASH_SEED` if set (to rerun a failure),
/// else the clock. Printed either way.
fn crash_seed() -> u64 {
    std::env::var("PMKV_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
    })
}

/// Structural operations under the crash simulator: the small workloads of the other
/// cases never split a leaf, so an engine's split, merge, growth or chunk-recycling bug
/// (NBTree's new split block linked before it is flushed) passed the whole suite. Here
/// the workload is sized from what the engine reports ([`pmkv::EngineInfo::node_keys`],
/// `n`): 3n + 2 ascending inserts (splits, node growth, new allocator chunks), 2n deletes
/// of a contiguous run (empty leaves and nodes: merges, shrinks, freed chunks), n
/// re-inserts of that run (recycled blocks and chunks), and one batch of new keys.
///
/// Exploring every point of every operation would take minutes, so the operations are
/// first run once counting their crash points (no image): in each phase the
/// [`MOST_POINTS_PER_PHASE`] operations with the most points — a restructuring operation
/// flushes and fences more than a plain one — are explored in full, with every standard
/// and adversarial eviction, plus [`SAMPLED_PER_PHASE`] others drawn with a seed that is
/// printed (`PMKV_CRASH_SEED` replays it).
pub fn structural_every_crash_point(f: &'static dyn EngineFactory) {
    if f.info().persistent {
        structural_in(f, Mode::Adr);
    }
}

/// [`structural_every_crash_point`] in `eadr`: the operations with the most points (store
/// points included) explored at every store point.
pub fn eadr_structural_every_store_point(f: &'static dyn EngineFactory) {
    if eadr_runs(f, "eadr_structural_every_store_point") {
        structural_in(f, Mode::Eadr);
    }
}

fn structural_in(f: &'static dyn EngineFactory, mode: Mode) {
    let n = f.info().node_keys;
    assert!(n > 0, "{}: a persistent engine reports how many keys a node holds (EngineInfo::node_keys)", f.info().name);
    let total = 3 * n + 2;
    let value = |i: usize, round: u8| vec![i as u8 ^ round; 8];
    let mut ops: Vec<WriteBatch> = Vec::new();
    let mut phases: Vec<(&str, std::ops::Range<usize>)> = Vec::new();
    let mut phase = |name, ops: &mut Vec<WriteBatch>, new: Vec<WriteBatch>| {
        phases.push((name, ops.len()..ops.len() + new.len()));
        ops.extend(new);
    };
    phase("insert", &mut ops, (0..total).map(|i| put(&structural_key(i), &value(i, 0))).collect());
    let run = n / 2..n / 2 + 2 * n;
    phase("delete", &mut ops, run.clone().map(|i| del(&structural_key(i))).collect());
    phase("re-insert", &mut ops, run.take(n).map(|i| put(&structural_key(i), &value(i, 0x5a))).collect());
    let new_keys = (total..total + n.min(16)).map(|i| BatchOp::Put(structural_key(i), value(i, 0xa5))).collect();
    phase("batch", &mut ops, vec![batch(new_keys)]);

    let points = points_per_op(f, &ops, mode);
    let seed = crash_seed();
    let mut rng = pmkv_testutil::XorShift::new(seed);
    let mut plan = Plan { explore: vec![false; ops.len()], single_lines: Eviction::SINGLE_LINES };
    let mut chosen = Vec::new();
    for (name, range) in &phases {
        let mut by_points: Vec<usize> = range.clone().collect();
        by_points.sort_by_key(|&i| (std::cmp::Reverse(points[i]), i));
        let mut sorted: Vec<u64> = range.clone().map(|i| points[i]).collect();
        sorted.sort_unstable();
        let median = sorted[sorted.len() / 2];
        if *name == "insert" {
            assert!(
                points[range.clone()].iter().any(|&p| p > median),
                "{}: {total} ascending inserts (node_keys {n}) never took more crash points than a plain \
                 insert: nothing restructured, or node_keys is wrong",
                f.info().name
            );
        }
        for &i in by_points.iter().take(MOST_POINTS_PER_PHASE) {
            plan.explore[i] = true;
        }
        for _ in 0..SAMPLED_PER_PHASE.min(range.len()) {
            let i = range.start + rng.below(range.len() as u64) as usize;
            plan.explore[i] = true;
        }
        chosen.push(format!(
            "{name}: ops {:?} of {} (median {median} points, most {})",
            range.clone().filter(|&i| plan.explore[i]).map(|i| (i, points[i])).collect::<Vec<_>>(),
            range.len(),
            points[by_points[0]]
        ));
    }
    eprintln!(
        "{}: structural crash case in {mode}, node_keys {n}, seed {seed} (PMKV_CRASH_SEED={seed} replays it); explored (op, points):\n  {}",
        f.info().name,
        chosen.join("\n  ")
    );
    let done = explore_plan_in(f, &ops, &plan, mode);
    eprintln!("{}: {} crash images, {} distinct, recovered and checked", f.info().name, done.taken, done.checked);
    assert!(done.checked > 20, "only {} crash images", done.checked);
}

/// Engines with atomic batches (SPEC P6 for [`pmkv::EngineInfo::atomic_batches`]): one
/// large atomic batch over a store that holds keys already — updates of existing keys to
/// values of the same size, larger and smaller, deletes of existing keys, enough new keys
/// to restructure ([`pmkv::EngineInfo::node_keys`] of them, up to 64, plus 8: a leaf
/// split, an index node grown, a new allocator chunk), a new key put twice, a new key put
/// then deleted, a missing key deleted, a 5000-byte value (so that a log kept in
/// EPallocator is an extent) — crashed at every flush and fence point. Every
/// recovered image must hold exactly the state before the batch or exactly the state
/// after it, and pass `check` (the engines' checkers count every reachable object, a
/// batch log left in use included, so nothing leaked). Then an image taken while the
/// batch's log was in use (where the engine keeps one in an EPallocator object, as HART
/// and NBTree do) is damaged inside the log: the open must fail with `Corrupt`, never
/// open without the batch or with part of it.
pub fn atomic_batch_every_crash_point(f: &'static dyn EngineFactory) {
    atomic_batch_in(f, Mode::Adr);
}

/// [`atomic_batch_every_crash_point`] in `eadr`: the batch crashed at every store point
/// (a redo log written word by word, then applied in place: every cut of either must
/// recover to all or nothing). The damaged-log check is the `adr` case's alone (the log's
/// format and its check are the same in both modes).
pub fn eadr_atomic_batch_every_store_point(f: &'static dyn EngineFactory) {
    if f.info().persistent && !f.info().atomic_batches {
        return;
    }
    if eadr_runs(f, "eadr_atomic_batch_every_store_point") {
        atomic_batch_in(f, Mode::Eadr);
    }
}

fn atomic_batch_in(f: &'static dyn EngineFactory, mode: Mode) {
    let info = f.info();
    if !info.persistent || !info.atomic_batches {
        return;
    }
    let layout = f.layout().expect("persistent engines name their layout");
    let fresh = info.node_keys.clamp(8, 64) + 8;
    // Existing keys are every 4th of the structural keys, the new ones those between:
    // both in the same nodes, leaves and hash key.
    let existing: Vec<usize> = (0..24).map(|i| 4 * i).collect();
    let new: Vec<usize> = (0..).filter(|i| i % 4 != 0).take(fresh).collect();
    let mut prefill = WriteBatch::independent();
    for &i in &existing {
        prefill.put(structural_key(i), vec![i as u8; 8]);
    }
    let mut b = WriteBatch::new();
    for (j, &i) in new.iter().enumerate() {
        b.put(structural_key(i), vec![j as u8; [3, 8, 20, 90][j % 4]]);
        if let Some(&e) = existing.get(j / 3).filter(|_| j % 3 == 2) {
            match (j / 3) % 4 {
                0 => b.put(structural_key(e), vec![0xe0; 8]),
                1 => b.put(structural_key(e), vec![0xe1; 40]),
                2 => b.put(structural_key(e), vec![0xe2; 1]),
                _ => b.delete(structural_key(e)),
            };
        }
    }
    let (first, gone) = (structural_key(new[0]), structural_key(10_000));
    b.put(gone.clone(), b"short-lived").delete(gone).delete(structural_key(20_000));
    // A value above 4 KiB: a log that large is an allocator extent, not a chunk slot.
    b.put(structural_key(30_000), vec![0x5a; 5000]);
    b.put(first, b"written twice");
    let plan = Plan { explore: vec![false, true], single_lines: 1 };
    let done = explore_plan_in(f, &[prefill.clone(), b.clone()], &plan, mode);
    eprintln!(
        "{} in {mode}: an atomic batch of {} operations, {} crash images, {} distinct, recovered and checked: {} to \
         the state before it, {} to the state after it",
        info.name,
        b.len(),
        done.taken,
        done.checked,
        done.before,
        done.after
    );
    assert!(done.checked > 50, "only {} crash images", done.checked);
    // Both outcomes occur (an engine with a redo log reaches the state after the batch
    // from most of them, the crash points of its apply, only by finishing it).
    assert!(done.before > 0 && done.after > 0, "{done:?}");
    if mode != Mode::Adr {
        return;
    }

    // A log damaged while in use is reported.
    let s = sim_store(f, layout);
    run_op(&s, &prefill).expect("prefill");
    let sim_pool = s.engine().pool().expect("engine on a pool").clone();
    let images: Taken = Arc::default();
    let t = images.clone();
    sim_pool.sim().expect("sim pool").set_hook(false, move |pt| {
        t.lock().unwrap().push(format!("point {}", pt.index), pt.image(Eviction::None));
    });
    let r = run_op(&s, &b);
    sim_pool.sim().unwrap().clear_hook();
    r.expect("the batch");
    drop(sim_pool);
    drop(s);
    let mut imgs = std::mem::take(&mut *images.lock().unwrap());
    let logged = imgs.drain().find_map(|(at, img)| batch_logs_in(layout, &img).first().map(|&o| (at, img, o)));
    let Some((at, mut img, log)) = logged else {
        eprintln!("{}: keeps no batch log in an EPallocator object; no log to damage", info.name);
        return;
    };
    let at_byte = log as usize + pmkv_substrate::batch_log::HEAD + 5;
    img[at_byte] ^= 0x10;
    let r = Pool::from_image(&img, Some(layout), &sim_opts().pool_options())
        .map_err(pmkv::Error::from)
        .and_then(|p| f.open_pool(Arc::new(p), &sim_opts()));
    match r {
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{at}, log {log:#x} damaged: {e}");
            assert!(e.to_string().contains("batch log"), "{at}: the error does not name the log: {e}");
        }
        Ok(_) => panic!("{at}: a pool whose batch log at {log:#x} is damaged opened"),
    }
}

/// The batch logs in use in a crash image (offsets of used objects of the substrate's
/// batch-log type), read with the allocator alone on a copy of the image.
fn batch_logs_in(layout: &str, img: &[u8]) -> Vec<u64> {
    let Ok(pool) = Pool::from_image(img, Some(layout), &sim_opts().pool_options()) else { return Vec::new() };
    let Ok(alloc) = pmkv_substrate::epalloc::EpAlloc::open(Arc::new(pool)) else { return Vec::new() };
    let mut v = Vec::new();
    alloc.for_each_used(pmkv_substrate::batch_log::LOG, |o| v.push(o));
    v
}

/// New pools start small ([`pmkv::DEFAULT_INITIAL_SIZE`], 64 KiB) and grow while
/// operations run, so the first writes to every pool grow it. Here a crash-simulation
/// pool starts at the default size, and 1 KiB values are inserted until the pool has grown
/// three times. Every crash point of each operation that grew it is explored: the file
/// extended, the header's new size persisted, the new space taken and written. Each image
/// must recover, at the old size or the new, to a state the operation allows, and must
/// take writes after. (An engine whose operations never grow the pool, like `mangosteen`,
/// whose pool is sized for its region at creation, has its first operations explored on
/// the pool that creation grew.)
pub fn growth_every_crash_point(f: &'static dyn EngineFactory) {
    if f.info().persistent {
        growth_in(f, Mode::Adr);
    }
}

/// [`growth_every_crash_point`] in `eadr`, at every store point of the growing operations.
pub fn eadr_growth_every_store_point(f: &'static dyn EngineFactory) {
    if eadr_runs(f, "eadr_growth_every_store_point") {
        growth_in(f, Mode::Eadr);
    }
}

fn growth_in(f: &'static dyn EngineFactory, mode: Mode) {
    let opts = opts().initial_size(pmkv::DEFAULT_INITIAL_SIZE).max_size(64 << 20).mode(mode);
    let layout = f.layout().expect("persistent engines name their layout");
    let key = |i: usize| format!("grow:{i:05}").into_bytes();
    let value = |i: usize| vec![i as u8; 1024];
    // A dry run: which operations grow the pool.
    let s = sim_store_with(f, layout, &opts);
    let pool = s.engine().pool().expect("engine on a pool").clone();
    let created = pool.size();
    let mut ops = Vec::new();
    let mut grew = Vec::new();
    // At most 4000 inserts (4 MiB of values), and 64 if none grows the pool.
    while grew.iter().filter(|&&g| g).count() < 3 && ops.len() < 4000 && (ops.len() < 64 || grew.contains(&true)) {
        let i = ops.len();
        let before = pool.size();
        s.put(&key(i), &value(i)).expect("put");
        ops.push(put(&key(i), &value(i)));
        grew.push(pool.size() > before);
    }
    let (grown, inserts) = (pool.size(), ops.len());
    drop(pool);
    drop(s);
    let growths = grew.iter().filter(|&&g| g).count();
    if growths == 0 {
        assert!(
            created > pmkv::DEFAULT_INITIAL_SIZE,
            "{}: the pool neither grew at creation nor in {} inserts",
            f.info().name,
            ops.len()
        );
        ops.truncate(3);
        grew = vec![true; ops.len()];
    } else {
        assert_eq!(growths, 3, "{}: {inserts} inserts grew the pool {growths} times", f.info().name);
    }
    eprintln!(
        "{}: growth crash case in {mode}: pool {created} bytes after creation, {grown} after {inserts} inserts; exploring ops {:?}",
        f.info().name,
        grew.iter().enumerate().filter(|(_, &g)| g).map(|(i, _)| i).collect::<Vec<_>>()
    );
    let plan = Plan { explore: grew, single_lines: Eviction::SINGLE_LINES };
    let done = explore_plan_with(f, &ops, &plan, &opts);
    eprintln!("{}: {} crash images, {} distinct, recovered and checked", f.info().name, done.taken, done.checked);
    assert!(done.checked > 10, "only {} crash images", done.checked);
}
