//! Operation mixes and deterministic per-thread operation streams.
//!
//! A stream refers to keys by index into a key set: indices `0..loaded` are the records
//! loaded before the run; each insert takes a fresh index above them. Streams are
//! generated before the clock starts, so generation never shows up in a measurement.
//!
//! Key choice:
//! * search, update, read-modify-write and scan start keys come from the loaded records by
//!   the mix's request distribution (uniform, Zipfian over scrambled ranks, or YCSB's
//!   "latest", which favours the newest records of the thread's view);
//! * a delete removes the oldest record this thread inserted and has not yet deleted; if it
//!   has none, the next record of the thread's own slice of the loaded set (so HART's
//!   Read-Intensive mix, 10% inserts and 10% deletes, keeps the store's size roughly
//!   constant). Searches may then miss a deleted key; reports count hits and misses.

use crate::rng::Rng;
use crate::zipf::{ScrambledZipf, Zipf};
use std::collections::VecDeque;

/// How the key of a read or update is chosen among the loaded records.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    Uniform,
    /// Zipfian with this θ over scrambled ranks.
    Zipf(f64),
    /// YCSB "latest": Zipfian with this θ over recency (most recent insert first).
    Latest(f64),
    /// Zipfian with this θ whose ranks follow key order: the smallest loaded key is the
    /// hottest, and hot keys are neighbours (the NBTree prototype's YCSB on its dense keys
    /// works so). The streams hold ranks; [`Streams::order_by_key`] turns them into key
    /// indices.
    ZipfByKey(f64),
}

impl Dist {
    pub fn label(&self) -> String {
        match self {
            Dist::Uniform => "uniform".into(),
            Dist::Zipf(t) => format!("zipf {t}"),
            Dist::Latest(t) => format!("latest {t}"),
            Dist::ZipfByKey(t) => format!("zipf {t} by key"),
        }
    }
}

/// The share of each operation kind (summing to 1) and the request distribution.
#[derive(Clone, Debug, PartialEq)]
pub struct Mix {
    pub name: String,
    pub insert: f64,
    pub search: f64,
    pub update: f64,
    pub delete: f64,
    /// Ordered scan of 1..=`max_scan_len` records (uniform length), YCSB E.
    pub scan: f64,
    /// Read-modify-write: a search then an update of the same key, YCSB F.
    pub rmw: f64,
    pub dist: Dist,
    pub max_scan_len: u32,
}

/// One operation on key index `.0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Insert(u64),
    Search(u64),
    Update(u64),
    Delete(u64),
    Scan(u64, u32),
    Rmw(u64),
}

/// Operation kinds, for counting and labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    Insert,
    Search,
    Update,
    Delete,
    Scan,
    Rmw,
}

impl OpKind {
    pub const ALL: [OpKind; 6] =
        [OpKind::Insert, OpKind::Search, OpKind::Update, OpKind::Delete, OpKind::Scan, OpKind::Rmw];

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Insert => "insert",
            OpKind::Search => "search",
            OpKind::Update => "update",
            OpKind::Delete => "delete",
            OpKind::Scan => "scan",
            OpKind::Rmw => "rmw",
        }
    }
}

impl Op {
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Insert(_) => OpKind::Insert,
            Op::Search(_) => OpKind::Search,
            Op::Update(_) => OpKind::Update,
            Op::Delete(_) => OpKind::Delete,
            Op::Scan(..) => OpKind::Scan,
            Op::Rmw(_) => OpKind::Rmw,
        }
    }

    pub fn key(&self) -> u64 {
        match *self {
            Op::Insert(k) | Op::Search(k) | Op::Update(k) | Op::Delete(k) | Op::Scan(k, _) | Op::Rmw(k) => k,
        }
    }

    fn map_key(self, f: impl Fn(u64) -> u64) -> Op {
        match self {
            Op::Insert(k) => Op::Insert(f(k)),
            Op::Search(k) => Op::Search(f(k)),
            Op::Update(k) => Op::Update(f(k)),
            Op::Delete(k) => Op::Delete(f(k)),
            Op::Scan(k, n) => Op::Scan(f(k), n),
            Op::Rmw(k) => Op::Rmw(f(k)),
        }
    }
}

impl Mix {
    fn new(name: &str, [insert, search, update, delete, scan, rmw]: [f64; 6], dist: Dist) -> Mix {
        Mix { name: name.into(), insert, search, update, delete, scan, rmw, dist, max_scan_len: 100 }
    }

    /// HART §IV-C (1): 10% insert, 70% search, 10% update, 10% delete; uniform.
    pub fn hart_read_intensive() -> Mix {
        Mix::new("read-intensive", [0.1, 0.7, 0.1, 0.1, 0.0, 0.0], Dist::Uniform)
    }
    /// HART §IV-C (2): 50% search, 50% update; uniform.
    pub fn hart_read_modify_write() -> Mix {
        Mix::new("read-modify-write", [0.0, 0.5, 0.5, 0.0, 0.0, 0.0], Dist::Uniform)
    }
    /// HART §IV-C (3): 20% search, 40% insert, 40% update; uniform.
    pub fn hart_write_intensive() -> Mix {
        Mix::new("write-intensive", [0.4, 0.2, 0.4, 0.0, 0.0, 0.0], Dist::Uniform)
    }

    /// YCSB core workloads A–F (Cooper et al. 2010) with Zipf θ for the skewed ones.
    pub fn ycsb(letter: char, theta: f64) -> Option<Mix> {
        let z = Dist::Zipf(theta);
        Some(match letter.to_ascii_lowercase() {
            'a' => Mix::new("ycsb-a", [0.0, 0.5, 0.5, 0.0, 0.0, 0.0], z),
            'b' => Mix::new("ycsb-b", [0.0, 0.95, 0.05, 0.0, 0.0, 0.0], z),
            'c' => Mix::new("ycsb-c", [0.0, 1.0, 0.0, 0.0, 0.0, 0.0], z),
            'd' => Mix::new("ycsb-d", [0.05, 0.95, 0.0, 0.0, 0.0, 0.0], Dist::Latest(theta)),
            'e' => Mix::new("ycsb-e", [0.05, 0.0, 0.0, 0.0, 0.95, 0.0], z),
            'f' => Mix::new("ycsb-f", [0.0, 0.5, 0.0, 0.0, 0.0, 0.5], z),
            _ => return None,
        })
    }

    /// NBTree Fig. 8/9: `read` share of searches, the rest upserts (updates of loaded keys),
    /// Zipfian θ.
    pub fn read_write(read: f64, theta: f64) -> Mix {
        let read = read.clamp(0.0, 1.0);
        let name = format!("r{:.0}:w{:.0} zipf {theta}", read * 100.0, (1.0 - read) * 100.0);
        Mix::new(
            &name,
            [0.0, read, 1.0 - read, 0.0, 0.0, 0.0],
            if theta == 0.0 { Dist::Uniform } else { Dist::Zipf(theta) },
        )
    }

    /// A mix by name: `ri`/`read-intensive`, `rmw`/`read-modify-write`, `wi`/`write-intensive`,
    /// `ycsb-a` … `ycsb-f`.
    pub fn by_name(name: &str, theta: f64) -> Option<Mix> {
        match name.to_ascii_lowercase().as_str() {
            "ri" | "read-intensive" => Some(Mix::hart_read_intensive()),
            "rmw" | "read-modify-write" => Some(Mix::hart_read_modify_write()),
            "wi" | "write-intensive" => Some(Mix::hart_write_intensive()),
            s => s
                .strip_prefix("ycsb-")
                .and_then(|l| if l.len() == 1 { l.chars().next() } else { None })
                .and_then(|c| Mix::ycsb(c, theta)),
        }
    }

    pub fn shares(&self) -> [(OpKind, f64); 6] {
        [
            (OpKind::Insert, self.insert),
            (OpKind::Search, self.search),
            (OpKind::Update, self.update),
            (OpKind::Delete, self.delete),
            (OpKind::Scan, self.scan),
            (OpKind::Rmw, self.rmw),
        ]
    }

    pub fn share(&self, k: OpKind) -> f64 {
        self.shares().iter().find(|(x, _)| *x == k).map_or(0.0, |x| x.1)
    }

    /// Shares must be non-negative and sum to 1.
    pub fn validate(&self) -> Result<(), String> {
        let s: f64 = self.shares().iter().map(|x| x.1).sum();
        if self.shares().iter().any(|x| x.1 < 0.0) || (s - 1.0).abs() > 1e-9 {
            return Err(format!("mix '{}': shares must be >= 0 and sum to 1 (sum {s})", self.name));
        }
        match self.dist {
            Dist::Zipf(t) | Dist::Latest(t) | Dist::ZipfByKey(t) if !(t.is_finite() && t >= 0.0) => {
                Err(format!("mix '{}': Zipf θ must be >= 0, got {t}", self.name))
            }
            _ => Ok(()),
        }
    }

    /// Whether the mix inserts new records (and so needs keys beyond the loaded ones).
    pub fn inserts(&self) -> bool {
        self.insert > 0.0
    }
}

/// The streams of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Streams {
    /// One stream per thread: `warmup` operations, then the measured ones.
    pub per_thread: Vec<Vec<Op>>,
    /// Untimed leading operations of each thread's stream.
    pub warmup: usize,
    /// Records loaded before the run: key indices `0..loaded`.
    pub loaded: u64,
    /// Key indices used in all: the key set must have at least this many keys.
    pub total_keys: u64,
}

impl Streams {
    /// For [`Dist::ZipfByKey`]: replace each rank `r` of a loaded record by `by_key[r]`,
    /// the index of the loaded record whose key is the `r`-th smallest. Inserts (indices
    /// past the loaded records) keep theirs.
    pub fn order_by_key(&mut self, by_key: &[u64]) {
        assert_eq!(by_key.len() as u64, self.loaded, "one index per loaded record");
        for s in &mut self.per_thread {
            for op in s.iter_mut() {
                *op = op.map_key(|k| if k < self.loaded { by_key[k as usize] } else { k });
            }
        }
    }

    pub fn warmup_part(&self, t: usize) -> &[Op] {
        &self.per_thread[t][..self.warmup]
    }
    pub fn measured_part(&self, t: usize) -> &[Op] {
        &self.per_thread[t][self.warmup..]
    }
    pub fn measured_ops(&self) -> u64 {
        self.per_thread.iter().map(|s| (s.len() - self.warmup) as u64).sum()
    }
}

const OWN: u64 = 1 << 63;

enum Chooser {
    Uniform,
    Zipf(ScrambledZipf),
    Latest(Zipf),
    /// Ranks, 0 the hottest (mapped to keys by [`Streams::order_by_key`]).
    ByKey(Zipf),
}

/// Generate `threads` streams of `warmup + ops` operations each over `loaded` records.
/// A function of its arguments only: the same seed gives the same streams.
pub fn generate(mix: &Mix, loaded: u64, warmup: usize, ops: usize, threads: usize, seed: u64) -> Streams {
    assert!(threads > 0, "at least one thread");
    assert!(loaded > 0 || mix.insert >= 1.0, "a mix that reads or updates needs loaded records");
    let chooser = match mix.dist {
        Dist::Uniform => Chooser::Uniform,
        Dist::Zipf(t) => Chooser::Zipf(ScrambledZipf::new(loaded.max(1), t, seed)),
        Dist::Latest(t) => Chooser::Latest(Zipf::new(loaded.max(1), t)),
        Dist::ZipfByKey(t) => Chooser::ByKey(Zipf::new(loaded.max(1), t)),
    };
    let cum: Vec<(OpKind, f64)> = mix
        .shares()
        .iter()
        .scan(0.0, |acc, &(k, p)| {
            *acc += p;
            Some((k, *acc))
        })
        .filter(|(k, _)| mix.share(*k) > 0.0)
        .collect();
    let g = Gen { mix, chooser, cum, loaded, threads, total: warmup + ops };
    let mut streams = Vec::with_capacity(threads);
    let mut own_inserts = Vec::with_capacity(threads);
    for t in 0..threads {
        let (s, inserted) = g.thread_stream(t, Rng::derive(seed, 1000 + t as u64));
        streams.push(s);
        own_inserts.push(inserted);
    }
    // Give each thread's inserts a disjoint index range above the loaded records.
    let mut base = loaded;
    for (s, n) in streams.iter_mut().zip(&own_inserts) {
        let b = base;
        for op in s.iter_mut() {
            *op = op.map_key(|k| if k & OWN != 0 { b + (k & !OWN) } else { k });
        }
        base += n;
    }
    Streams { per_thread: streams, warmup, loaded, total_keys: base }
}

/// What every thread's stream is drawn from.
struct Gen<'a> {
    mix: &'a Mix,
    chooser: Chooser,
    /// Cumulative shares of the operation kinds the mix has.
    cum: Vec<(OpKind, f64)>,
    loaded: u64,
    threads: usize,
    total: usize,
}

impl Gen<'_> {
    /// Thread `t`'s operations, its own inserts tagged `OWN | i`; and how many it inserts.
    fn thread_stream(&self, t: usize, mut rng: Rng) -> (Vec<Op>, u64) {
        let (loaded, threads) = (self.loaded, self.threads);
        let (slice_lo, slice_hi) = (loaded * t as u64 / threads as u64, loaded * (t as u64 + 1) / threads as u64);
        let mut slice_next = slice_hi; // loaded keys of this thread's slice, deleted from the top
        let mut inserted: u64 = 0; // own inserts so far
        let mut fifo: VecDeque<u64> = VecDeque::new(); // own live inserts (OWN-tagged)
        let mut s = Vec::with_capacity(self.total);
        for _ in 0..self.total {
            let u = rng.f64();
            let cum = &self.cum;
            let kind = cum.iter().find(|(_, c)| u < *c).map_or(cum.last().map_or(OpKind::Search, |x| x.0), |x| x.0);
            let op = match kind {
                OpKind::Insert => {
                    let k = OWN | inserted;
                    inserted += 1;
                    fifo.push_back(k);
                    Op::Insert(k)
                }
                OpKind::Search => Op::Search(self.pick(&mut rng, inserted)),
                OpKind::Update => Op::Update(self.pick(&mut rng, inserted)),
                OpKind::Rmw => Op::Rmw(self.pick(&mut rng, inserted)),
                OpKind::Scan => {
                    Op::Scan(self.pick(&mut rng, inserted), 1 + rng.below(self.mix.max_scan_len.max(1) as u64) as u32)
                }
                OpKind::Delete => {
                    if let Some(k) = fifo.pop_front() {
                        Op::Delete(k)
                    } else if slice_next > slice_lo {
                        slice_next -= 1;
                        Op::Delete(slice_next)
                    } else {
                        Op::Delete(self.pick(&mut rng, inserted))
                    }
                }
            };
            s.push(op);
        }
        (s, inserted)
    }

    /// A key to read or update: a loaded record, or (Latest) one of this thread's own
    /// inserts, `OWN`-tagged.
    fn pick(&self, rng: &mut Rng, inserted: u64) -> u64 {
        let loaded = self.loaded;
        match &self.chooser {
            Chooser::Uniform => rng.below(loaded.max(1)),
            Chooser::Zipf(z) => z.sample(rng),
            Chooser::ByKey(z) => z.sample(rng) - 1,
            Chooser::Latest(z) => {
                let newest = loaded + inserted; // exclusive
                let v = newest.saturating_sub(z.sample(rng));
                if v < loaded {
                    v
                } else {
                    OWN | (v - loaded)
                }
            }
        }
    }
}

/// Count operation kinds in the measured part of `streams`.
pub fn count_kinds(streams: &Streams) -> std::collections::BTreeMap<OpKind, u64> {
    let mut m = std::collections::BTreeMap::new();
    for t in 0..streams.per_thread.len() {
        for op in streams.measured_part(t) {
            *m.entry(op.kind()).or_insert(0) += 1;
        }
    }
    m
}
