//! The experiments every front end composes: basic operations (insert, search, update,
//! delete over a key set), operation mixes, range queries, memory use, and build vs
//! recovery. Each opens a fresh pool (or LMDB directory) in the run's temporary directory,
//! deletes it afterwards, and turns an engine that fails to open, returns errors or
//! panics into a [`Record`] with `error` set, so the caller can go on with the others.

use crate::engines::EngineSpec;
use crate::measure::{self, execute, split, OpResult, PhaseStats};
use crate::report::Record;
use crate::rng::Rng;
use crate::workload::mix::{self, Mix, Op, OpKind};
use crate::workload::{fill_value, KeySet};
use pmkv::{Direction, Engine, KeyRange, Latency, Mode, Store};
use pmkv_substrate::counters::{self, Counters};
use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Settings shared by all experiments of a run.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Directory for pools (a temporary directory on /dev/shm by default).
    pub dir: PathBuf,
    pub seed: u64,
    /// Value size in bytes (8, as in HART and NBTree, by default).
    pub value_size: usize,
    /// Time one operation in this many (power of two) for the latency histogram.
    pub sample_every: usize,
    /// Untimed warm-up, as a fraction of the measured operations.
    pub warmup: f64,
    /// Keep latency CDF points in the records.
    pub keep_cdf: bool,
    /// Engine parameters for pmkv engines (`--param key=value`).
    pub params: Vec<(String, String)>,
    /// The order of the search, update and delete phases of [`basic_ops`].
    pub op_order: OpOrder,
}

/// The order in which [`basic_ops`] searches, updates and deletes the keys it inserted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OpOrder {
    /// The insert order again: the HART paper's experiments (Figs. 4-8). An engine that lays
    /// records out in the order they arrive (HART's leaves come from a log-like allocator)
    /// then reads its PM records nearly sequentially, whatever the keys.
    #[default]
    Insert,
    /// An independent random order: the NBTree paper's "random key access" (§6.2), and what
    /// a store serving requests unrelated to its load order sees.
    Shuffled,
}

impl OpOrder {
    pub fn name(self) -> &'static str {
        match self {
            OpOrder::Insert => "insert",
            OpOrder::Shuffled => "shuffled",
        }
    }
}

impl Settings {
    pub fn new(dir: &Path, seed: u64) -> Settings {
        Settings {
            dir: dir.to_path_buf(),
            seed,
            value_size: 8,
            sample_every: 64,
            warmup: 0.1,
            keep_cdf: false,
            params: Vec::new(),
            op_order: OpOrder::Insert,
        }
    }
}

/// An engine in one setting.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    pub engine: EngineSpec,
    pub mode: Mode,
    pub latency: Latency,
}

impl Target {
    pub fn new(engine: EngineSpec, mode: Mode, latency: Latency) -> Target {
        Target { engine, mode, latency }
    }

    fn tag(&self, exp: &str) -> String {
        let charge = if self.latency.charge == pmkv_substrate::Charge::Fence { "-fence" } else { "" };
        format!("{exp}-{}-{}-{}{charge}", self.mode.name(), self.latency.write_ns, self.latency.read_ns)
    }

    /// A record with this target's labels filled in.
    pub fn record(&self, exp: &str, workload: &str, op: &str, threads: usize, records: u64) -> Record {
        Record {
            experiment: exp.into(),
            engine: self.engine.name().into(),
            durability: self.engine.durability(self.mode),
            mode: self.engine.mode_label(self.mode),
            latency: self.engine.latency_label(self.latency),
            workload: workload.into(),
            op: op.into(),
            threads,
            records,
            ..Default::default()
        }
    }
}

/// Fill a record from a phase's statistics.
pub fn fill(mut r: Record, st: &PhaseStats, keep_cdf: bool) -> Record {
    r.ops = st.ops;
    r.threads = st.threads;
    r.wall_s = st.wall.as_secs_f64();
    r.ns_per_op = st.ns_per_op();
    r.mops = st.mops();
    r.p50_ns = st.quantile(0.5);
    r.p99_ns = st.quantile(0.99);
    r.p999_ns = st.quantile(0.999);
    r.flushes_per_op = st.per_op(st.counters.flushes);
    r.fences_per_op = st.per_op(st.counters.fences);
    r.lines_written_per_op = st.per_op(st.counters.lines_written);
    r.lines_read_per_op = st.per_op(st.counters.lines_read);
    r.found = st.tally.found;
    r.missed = st.tally.missed;
    r.errors = st.tally.errors;
    r.op_error = st.tally.first_error.clone();
    if keep_cdf {
        r.cdf = st.cdf();
    }
    r
}

/// The pool of one experiment: created fresh, deleted on drop.
struct Pool {
    engine: EngineSpec,
    path: PathBuf,
    params: Vec<(String, String)>,
}

impl Pool {
    fn fresh(s: &Settings, t: &Target, exp: &str) -> Pool {
        let path = t.engine.pool_path(&s.dir, &t.tag(exp));
        t.engine.remove(&path);
        Pool { engine: t.engine, path, params: s.params.clone() }
    }
    fn open(&self, t: &Target, create: bool, size_hint: u64) -> Result<Store, String> {
        t.engine.open(&self.path, t.mode, t.latency, create, size_hint, &self.params).map_err(|e| format!("open: {e}"))
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.engine.remove(&self.path);
    }
}

fn size_hint(keys: &KeySet, value_size: usize) -> u64 {
    (keys.bytes() as u64 + keys.len() as u64 * (value_size as u64 + 96)) * 2
}

/// Run `f`, turning an error or a panic into one failed record.
pub fn guarded(t: &Target, exp: &str, workload: &str, f: impl FnOnce() -> Result<Vec<Record>, String>) -> Vec<Record> {
    let res = catch_unwind(AssertUnwindSafe(f));
    let msg = match res {
        Ok(Ok(v)) => return v,
        Ok(Err(e)) => e,
        Err(p) => {
            let m = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
            format!("panicked: {}", m.unwrap_or_else(|| "(no message)".into()))
        }
    };
    let mut r = t.record(exp, workload, "-", 0, 0);
    r.error = Some(msg);
    vec![r]
}

#[inline(always)]
fn put(e: &dyn Engine, keys: &KeySet, i: u64, version: u64, vs: usize, sc: &mut measure::Scratch) -> OpResult {
    put_key(e, keys.get(i as usize), i, version, vs, sc)
}

/// Put key `key` (record `i` of its key set) with the value of `version`.
#[inline(always)]
fn put_key(e: &dyn Engine, key: &[u8], i: u64, version: u64, vs: usize, sc: &mut measure::Scratch) -> OpResult {
    fill_value(&mut sc.value, i, version, vs);
    e.put(key, &sc.value).map(|_| true)
}

#[inline]
fn get(e: &dyn Engine, keys: &KeySet, i: u64, sc: &mut measure::Scratch) -> OpResult {
    get_key(e, keys.get(i as usize), sc)
}

#[inline]
fn get_key(e: &dyn Engine, key: &[u8], sc: &mut measure::Scratch) -> OpResult {
    let mut sink = 0u64;
    let r = e.get_with(key, &mut |v| sink = sink.wrapping_add(v.len() as u64 + v.first().copied().unwrap_or(0) as u64));
    sc.sink = sc.sink.wrapping_add(sink);
    r
}

/// A measured operation of a mix with its key's place in the staged key buffer.
struct Staged {
    op: Op,
    start: usize,
    len: usize,
}

/// Load keys `0..n` untimed (on `threads` threads).
fn load(e: &dyn Engine, keys: &KeySet, n: u64, threads: usize, vs: usize) -> Result<PhaseStats, String> {
    let idx: Vec<u64> = (0..n).collect();
    let st = execute(&split(&idx, threads), 64, |&i, sc| put(e, keys, i, 0, vs, sc));
    if st.tally.errors > 0 {
        return Err(format!("load failed: {}", st.tally.first_error.clone().unwrap_or_default()));
    }
    Ok(st)
}

/// HART Figs. 4–8 and 10d: insert every key of `keys` in order into an empty store, then
/// search, update and delete them all, in the same order, or with [`OpOrder::Shuffled`] in
/// another random order (NBTree Figs. 5–6). Insert measures a cold store by definition; an
/// untimed warm-up of searches over a tenth of the keys precedes the search phase. Returns
/// one record per operation.
pub fn basic_ops(s: &Settings, t: &Target, exp: &str, workload: &str, keys: &KeySet, threads: usize) -> Vec<Record> {
    guarded(t, exp, workload, || {
        let pool = Pool::fresh(s, t, exp);
        let store = pool.open(t, true, size_hint(keys, s.value_size))?;
        let e = store.engine();
        let n = keys.len() as u64;
        let vs = s.value_size;
        let idx: Vec<u64> = (0..n).collect();
        let work = split(&idx, threads);
        let mut out = Vec::new();
        let mut push = |op: &str, records: u64, st: &PhaseStats| {
            out.push(fill(t.record(exp, workload, op, threads, records), st, s.keep_cdf));
        };
        let st = execute(&work, s.sample_every, |&i, sc| put(e, keys, i, 0, vs, sc));
        push("insert", 0, &st);
        // Built before the clock starts again; the phases below read it in order.
        let reordered;
        let keys = match s.op_order {
            OpOrder::Insert => keys,
            OpOrder::Shuffled => {
                reordered = keys.shuffled(s.seed);
                &reordered
            }
        };
        let len = e.len();
        if len != n && !t.engine.is_null() {
            return Err(format!("after inserting {n} distinct keys the store holds {len}"));
        }
        // Warm-up: search a spread-out tenth of the keys (at least 1), untimed.
        let step = ((1.0 / s.warmup.clamp(1e-6, 1.0)) as u64).max(1);
        let warm: Vec<u64> = (0..n).step_by(step as usize).collect();
        let _ = execute(&split(&warm, threads), 1 << 20, |&i, sc| get(e, keys, i, sc));
        let st = execute(&work, s.sample_every, |&i, sc| get(e, keys, i, sc));
        push("search", n, &st);
        let st = execute(&work, s.sample_every, |&i, sc| put(e, keys, i, 1, vs, sc));
        push("update", n, &st);
        let st = execute(&work, s.sample_every, |&i, _| e.delete(keys.get(i as usize)));
        push("delete", n, &st);
        drop(store);
        drop(pool);
        Ok(out)
    })
}

/// Lines an insert writes beyond which it counts as having run a structural modification:
/// an NBTree SMO writes at least one new 2 KiB block (a header line and a line per two
/// entries copied), a split two of them; an individual insert writes one entry line, twice
/// counted at most (`adr` flushes it before and after its key word).
pub const SMO_LINES: u64 = 8;

/// The NBTree paper's Table 1 counts the PM cost of an *individual* insert, without the
/// structural modifications that some inserts run. Load the first `loaded` keys of `keys`
/// (untimed), then insert the rest one at a time on this thread, reading the persistence
/// counters around each, and split them into inserts that wrote fewer than [`SMO_LINES`]
/// lines ("individual") and the others. Returns one record, op `insert (individual)`,
/// whose per-op counters are the individual inserts' means; its `extra` holds
/// `individual_share` (their fraction of all inserts), `amortized_lines_written` and
/// `amortized_flushes` (means over all of them, SMOs included).
pub fn individual_inserts(
    s: &Settings,
    t: &Target,
    exp: &str,
    workload: &str,
    keys: &KeySet,
    loaded: usize,
) -> Vec<Record> {
    guarded(t, exp, workload, || {
        let pool = Pool::fresh(s, t, exp);
        let store = pool.open(t, true, size_hint(keys, s.value_size))?;
        let e = store.engine();
        let loaded = loaded.min(keys.len());
        load(e, keys, loaded as u64, 1, s.value_size)?;
        let mut sc = measure::Scratch::default();
        let (mut single, mut all) = (Counters::default(), Counters::default());
        let mut n_single = 0u64;
        // An untimed counting pass: every insert's lines written are counted exactly.
        let was = counters::set_exact(true);
        for i in loaded..keys.len() {
            let c0 = counters::snapshot();
            counters::begin_op();
            put(e, keys, i as u64, 0, s.value_size, &mut sc).map_err(|err| format!("insert {i}: {err}"))?;
            let d = counters::snapshot().since(&c0);
            all = all.add(&d);
            if d.lines_written < SMO_LINES {
                single = single.add(&d);
                n_single += 1;
            }
        }
        counters::set_exact(was);
        let n = (keys.len() - loaded) as u64;
        let mut r = t.record(exp, workload, "insert (individual)", 1, loaded as u64);
        let per = |x: u64, of: u64| if of == 0 { 0.0 } else { x as f64 / of as f64 };
        r.ops = n_single;
        r.flushes_per_op = per(single.flushes, n_single);
        r.fences_per_op = per(single.fences, n_single);
        r.lines_written_per_op = per(single.lines_written, n_single);
        r.lines_read_per_op = per(single.lines_read, n_single);
        r.extra.insert("individual_share".into(), per(n_single, n));
        r.extra.insert("amortized_lines_written".into(), per(all.lines_written, n));
        r.extra.insert("amortized_flushes".into(), per(all.flushes, n));
        Ok(vec![r])
    })
}

/// An operation mix: load `loaded` records (untimed), run an untimed warm-up of
/// `warmup × ops` operations, then measure `ops` operations split over `threads` threads.
/// `keys` must hold at least the stream's `total_keys` (see [`mix_keys_needed`]).
#[allow(clippy::too_many_arguments)]
pub fn mix_run(
    s: &Settings,
    t: &Target,
    exp: &str,
    workload: &str,
    keys: &KeySet,
    m: &Mix,
    loaded: u64,
    ops: u64,
    threads: usize,
) -> Vec<Record> {
    guarded(t, exp, workload, || {
        m.validate()?;
        let threads = threads.max(1);
        let per = (ops as usize).div_ceil(threads);
        let warm = ((per as f64) * s.warmup).ceil() as usize;
        let mut streams = mix::generate(m, loaded, warm, per, threads, s.seed);
        if (keys.len() as u64) < streams.total_keys {
            return Err(format!("mix needs {} keys, the key set has {}", streams.total_keys, keys.len()));
        }
        if matches!(m.dist, mix::Dist::ZipfByKey(_)) {
            let mut by_key: Vec<u64> = (0..loaded).collect();
            by_key.sort_unstable_by(|&a, &b| keys.get(a as usize).cmp(keys.get(b as usize)));
            streams.order_by_key(&by_key);
        }
        let pool = Pool::fresh(s, t, exp);
        let store = pool.open(t, true, size_hint(keys, s.value_size))?;
        let e = store.engine();
        let vs = s.value_size;
        let load_st = load(e, keys, loaded, threads, vs)?;
        let run = |op: &Op, key: &[u8], sc: &mut measure::Scratch| -> OpResult {
            match *op {
                Op::Insert(i) => put_key(e, key, i, 0, vs, sc),
                Op::Search(_) => get_key(e, key, sc),
                Op::Update(i) => put_key(e, key, i, 1, vs, sc),
                Op::Delete(_) => e.delete(key),
                Op::Scan(_, len) => {
                    let r = KeyRange { start: Bound::Included(key.to_vec()), end: Bound::Unbounded };
                    let mut c = 0u64;
                    e.scan(&r, Direction::Forward, len as usize, &mut |_, v| {
                        c += 1 + v.len() as u64;
                        true
                    })?;
                    sc.sink = sc.sink.wrapping_add(c);
                    Ok(c > 0)
                }
                Op::Rmw(i) => {
                    let found = get_key(e, key, sc)?;
                    put_key(e, key, i, 2, vs, sc)?;
                    Ok(found)
                }
            }
        };
        let warm_parts: Vec<&[Op]> = (0..threads).map(|i| streams.warmup_part(i)).collect();
        let _ = execute(&warm_parts, 1 << 20, |op, sc| run(op, keys.get(op.key() as usize), sc));
        // The measured operations' keys, copied in operation order into one buffer before
        // the clock starts: the timed loop then reads each key right after the previous
        // one (streaming, prefetched) instead of looking it up in the key table, one or two
        // cache misses per operation on a large key set that the `null` engine, which never
        // reads a key, could not show (no key-table lookups on the timed path).
        let mut kbuf: Vec<u8> = Vec::new();
        let staged: Vec<Vec<Staged>> = (0..threads)
            .map(|t| {
                streams
                    .measured_part(t)
                    .iter()
                    .map(|op| {
                        let k = keys.get(op.key() as usize);
                        let st = Staged { op: *op, start: kbuf.len(), len: k.len() };
                        kbuf.extend_from_slice(k);
                        st
                    })
                    .collect()
            })
            .collect();
        let parts: Vec<&[Staged]> = staged.iter().map(|v| v.as_slice()).collect();
        let st = execute(&parts, s.sample_every, |x, sc| run(&x.op, &kbuf[x.start..x.start + x.len], sc));
        let mut r = fill(t.record(exp, workload, &m.name, threads, loaded), &st, s.keep_cdf);
        r.extra.insert("load_s".into(), load_st.wall.as_secs_f64());
        for (k, c) in mix::count_kinds(&streams) {
            r.extra.insert(format!("ops:{}", k.name()), c as f64);
        }
        drop(store);
        Ok(vec![r])
    })
}

/// Key indices a mix run over `loaded` records with these parameters will use.
pub fn mix_keys_needed(s: &Settings, m: &Mix, loaded: u64, ops: u64, threads: usize) -> u64 {
    if !m.inserts() {
        return loaded;
    }
    let threads = threads.max(1);
    let per = (ops as usize).div_ceil(threads);
    let warm = ((per as f64) * s.warmup).ceil() as usize;
    mix::generate(m, loaded, warm, per, threads, s.seed).total_keys
}

/// HART Fig. 10a: `reps` ordered scans of `len` records each, from random start keys, over a
/// store loaded with `keys` (Sequential in the paper). One record: ns per scan, with
/// `extra.ns_per_record`.
pub fn range_query(
    s: &Settings,
    t: &Target,
    exp: &str,
    workload: &str,
    keys: &KeySet,
    len: usize,
    reps: usize,
) -> Vec<Record> {
    guarded(t, exp, workload, || {
        let n = keys.len();
        if n < len {
            return Err(format!("range query of {len} records needs at least that many keys, have {n}"));
        }
        let pool = Pool::fresh(s, t, exp);
        let store = pool.open(t, true, size_hint(keys, s.value_size))?;
        let e = store.engine();
        load(e, keys, n as u64, 1, s.value_size)?;
        let mut rng = Rng::derive(s.seed, 0x7261_6e67);
        let starts: Vec<u64> = (0..reps.max(1)).map(|_| rng.below((n - len + 1) as u64)).collect();
        // Warm-up: one scan, untimed.
        let scan = |&st: &u64, sc: &mut measure::Scratch| -> OpResult {
            let r = KeyRange { start: Bound::Included(keys.get(st as usize).to_vec()), end: Bound::Unbounded };
            let mut c = 0usize;
            e.scan(&r, Direction::Forward, len, &mut |_, v| {
                c += 1;
                sc.sink = sc.sink.wrapping_add(v.len() as u64);
                true
            })?;
            Ok(c == len)
        };
        let _ = execute(&[&starts[..1]], 1, scan);
        let st = execute(&[&starts[..]], 1, scan);
        let mut r = fill(t.record(exp, workload, &format!("range {len}"), 1, n as u64), &st, false);
        r.extra.insert("records_per_scan".into(), len as f64);
        r.extra.insert("ns_per_record".into(), r.ns_per_op / len as f64);
        if st.tally.missed > 0 {
            return Err(format!("{} of {} scans returned fewer than {len} records", st.tally.missed, st.ops));
        }
        // The paper's range query (HART §IV, Fig. 10a): one search per key of the range.
        // The key set ascends (Sequential), so keys st..st+len are exactly the range.
        let by_search = |&st: &u64, sc: &mut measure::Scratch| -> OpResult {
            let mut c = 0usize;
            for i in st as usize..st as usize + len {
                if e.get_with(keys.get(i), &mut |v| sc.sink = sc.sink.wrapping_add(v.len() as u64))? {
                    c += 1;
                }
            }
            Ok(c == len)
        };
        let st2 = execute(&[&starts[..]], 1, by_search);
        let mut r2 = fill(t.record(exp, workload, &format!("range {len} by search"), 1, n as u64), &st2, false);
        r2.extra.insert("records_per_scan".into(), len as f64);
        r2.extra.insert("ns_per_record".into(), r2.ns_per_op / len as f64);
        Ok(vec![r, r2])
    })
}

/// LevelDB's `readseq` and `readreverse` (Mangosteen Fig. 9): load `keys` (untimed), then
/// every one of `threads` threads scans the whole store in key order, forward, then
/// backward (an untimed scan of each first). Two records, op `readseq` and `readreverse`,
/// whose throughput counts records visited (`mops` = records visited by all threads per
/// µs of wall time, `ns_per_op` its inverse); a scan that misses a record is an error.
pub fn full_scans(s: &Settings, t: &Target, exp: &str, workload: &str, keys: &KeySet, threads: usize) -> Vec<Record> {
    guarded(t, exp, workload, || {
        let threads = threads.max(1);
        let pool = Pool::fresh(s, t, exp);
        let store = pool.open(t, true, size_hint(keys, s.value_size))?;
        let e = store.engine();
        let n = keys.len() as u64;
        load(e, keys, n, threads, s.value_size)?;
        let work: Vec<u64> = (0..threads as u64).collect();
        let parts = split(&work, threads);
        let mut out = Vec::new();
        for (op, dir) in [("readseq", Direction::Forward), ("readreverse", Direction::Reverse)] {
            let scan = |_: &u64, sc: &mut measure::Scratch| -> OpResult {
                let mut c = 0u64;
                // At most the records loaded (the `null` engine visits as many as asked).
                e.scan(&KeyRange::all(), dir, n as usize, &mut |_, v| {
                    c += 1;
                    sc.sink = sc.sink.wrapping_add(v.len() as u64);
                    true
                })?;
                Ok(c == n)
            };
            let _ = execute(&parts, 1, scan);
            let st = execute(&parts, 1, scan);
            if st.tally.missed > 0 || st.tally.errors > 0 {
                return Err(format!("{op}: a scan did not visit all {n} records"));
            }
            let mut r = fill(t.record(exp, workload, op, threads, n), &st, false);
            let visited = (n * st.ops) as f64;
            let wall = st.wall.as_secs_f64().max(1e-9);
            r.mops = visited / wall / 1e6;
            r.ns_per_op = wall * 1e9 / visited.max(1.0);
            r.extra.insert("scans".into(), st.ops as f64);
            out.push(r);
        }
        drop(store);
        Ok(out)
    })
}

/// HART Fig. 10b: DRAM and PM in use after loading `keys`, as the engine accounts it
/// (`Engine::memory`). One record with `extra.dram_bytes`, `extra.pm_bytes` and each
/// structure as `extra."dram:NAME"` / `extra."pm:NAME"`.
pub fn memory(s: &Settings, t: &Target, exp: &str, workload: &str, keys: &KeySet) -> Vec<Record> {
    guarded(t, exp, workload, || {
        let pool = Pool::fresh(s, t, exp);
        let store = pool.open(t, true, size_hint(keys, s.value_size))?;
        let e = store.engine();
        let st = load(e, keys, keys.len() as u64, 1, s.value_size)?;
        let m = e.memory();
        let mut r = fill(t.record(exp, workload, "memory", 1, keys.len() as u64), &st, false);
        r.op = "memory".into();
        r.extra.insert("dram_bytes".into(), m.dram_total() as f64);
        r.extra.insert("pm_bytes".into(), m.pm_total() as f64);
        r.extra.insert("key_bytes".into(), keys.bytes() as f64);
        for (k, v) in &m.dram {
            r.extra.insert(format!("dram:{k}"), *v as f64);
        }
        for (k, v) in &m.pm {
            r.extra.insert(format!("pm:{k}"), *v as f64);
        }
        Ok(vec![r])
    })
}

/// HART Fig. 10c: build = insert every key into a fresh pool (timed); recovery = drop the
/// store and open the same pool again (timed), then check every record came back. Two
/// records, "build" and "recovery", with the time in `wall_s`. An engine that keeps
/// nothing across a reopen (the volatile baseline) gets a recovery record with `error`
/// saying so.
pub fn build_recover(s: &Settings, t: &Target, exp: &str, workload: &str, keys: &KeySet) -> Vec<Record> {
    guarded(t, exp, workload, || {
        let n = keys.len() as u64;
        let pool = Pool::fresh(s, t, exp);
        let hint = size_hint(keys, s.value_size);
        let t0 = Instant::now();
        let store = pool.open(t, true, hint)?;
        let open_s = t0.elapsed().as_secs_f64();
        let st = load(store.engine(), keys, n, 1, s.value_size)?;
        let mut b = fill(t.record(exp, workload, "build", 1, n), &st, false);
        b.wall_s = open_s + st.wall.as_secs_f64();
        b.ns_per_op = b.wall_s * 1e9 / n.max(1) as f64;
        let t1 = Instant::now();
        drop(store);
        let close_s = t1.elapsed().as_secs_f64();
        b.extra.insert("close_s".into(), close_s);
        let t2 = Instant::now();
        let store = pool.open(t, false, hint)?;
        let rec_s = t2.elapsed().as_secs_f64();
        let got = store.len().map_err(|e| e.to_string())?;
        let mut r = t.record(exp, workload, "recovery", 1, n);
        r.wall_s = rec_s;
        r.ops = n;
        r.ns_per_op = rec_s * 1e9 / n.max(1) as f64;
        r.extra.insert("recovered_records".into(), got as f64);
        if got != n && !t.engine.is_null() {
            r.error = Some(if got == 0 && t.engine.is_baseline() {
                "not persistent: nothing survives a reopen (recovery n/a)".into()
            } else {
                format!("reopened store holds {got} of {n} records")
            });
        } else {
            // Spot-check that records, not just a count, came back.
            let e = store.engine();
            let mut rng = Rng::derive(s.seed, 0x7265_6376);
            let mut sc = measure::Scratch::default();
            let missing = (0..1000.min(n)).filter(|_| !matches!(get(e, keys, rng.below(n), &mut sc), Ok(true))).count();
            if missing > 0 {
                r.error = Some(format!("{missing} of 1000 sampled records missing after recovery"));
            }
        }
        drop(store);
        Ok(vec![b, r])
    })
}

/// Kinds of operations a mix contains, for labels.
pub fn mix_label(m: &Mix) -> String {
    OpKind::ALL
        .iter()
        .filter(|k| m.share(**k) > 0.0)
        .map(|k| format!("{:.0}% {}", m.share(*k) * 100.0, k.name()))
        .collect::<Vec<_>>()
        .join(", ")
}
