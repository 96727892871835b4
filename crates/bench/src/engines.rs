//! Which engines a benchmark runs: every name in [`pmkv::Registry::builtin()`] (read at run time, so a
//! new engine such as `hart` is picked up with no change here) plus the LMDB baselines.

use crate::baseline::lmdb::{Lmdb, LmdbVariant};
use pmkv::{Latency, Mode, Options, Store};
use std::path::{Path, PathBuf};

/// The name of pmkv's volatile baseline engine (a `BTreeMap`, no persistence): it ignores
/// the pool, the persistence mode and the PM latency, so it is measured once per setting.
pub const VOLATILE: &str = "volatile";

/// Engines whose every write waits for a slow durability step of its own:
/// * `lmdb-sync` commits every write with `fdatasync` (6-20 µs here even on tmpfs): a third
///   of the other engines' time in `reproduce hart`.
///
/// `mangosteen` was one while it captured writes by page protection (20-110 µs a write,
/// p99.9 4 ms); with compiler capture and the two-fence log its writes take 1-3.5 µs on
/// the Dictionary (docs/results/mangosteen.md) and 1-8 µs in the main job (inserts and
/// deletes of 500,000 random keys in `adr` the slowest), so the main job runs it on the
/// whole key sets like the others: 146 s of a 241 s job here.
///
/// The long default commands leave them out or cut them short: `reproduce hart` runs them
/// only when asked (`-e lmdb-sync`, `-e all`); the main job never runs `lmdb-sync`, and
/// would give any other engine listed here a prefix of each key set
/// ([`SLOW_WRITES_KEYS`]).
pub const SLOW_WRITES: &[&str] = &["lmdb-sync"];

/// Keys of each workload the main job gives an engine of [`SLOW_WRITES`] (the first ones of
/// the set), unless `--full`.
pub const SLOW_WRITES_KEYS: usize = 50_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// An engine opened through `pmkv::Store::open`.
    Pmkv(&'static str),
    Lmdb(LmdbVariant),
    /// The engine that does nothing: the harness's own cost (`baseline::null`).
    Null,
}

/// An engine to benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EngineSpec {
    pub kind: EngineKind,
}

impl EngineSpec {
    pub fn name(&self) -> &'static str {
        match self.kind {
            EngineKind::Pmkv(n) => n,
            EngineKind::Lmdb(v) => v.name(),
            EngineKind::Null => crate::baseline::null::NAME,
        }
    }

    /// Whether the persistence mode and emulated PM latency apply (pmkv engines over a pool).
    pub fn uses_pool(&self) -> bool {
        matches!(self.kind, EngineKind::Pmkv(n) if n != VOLATILE)
    }

    /// Whether this is the `null` engine (the harness's own cost).
    pub fn is_null(&self) -> bool {
        self.kind == EngineKind::Null
    }

    /// Whether every write of this engine is a slow batch ([`SLOW_WRITES`]).
    pub fn slow_writes(&self) -> bool {
        SLOW_WRITES.contains(&self.name())
    }

    /// Whether this is one of the papers' competitors (FPTree, WOART, FAST&FAIR, ...):
    /// engines built so that the reproductions compare with them, not engines a user
    /// picks, as their [`pmkv::EngineInfo::competitor`] says. The main job leaves them to
    /// `reproduce`; `bench run -e NAME` and `reproduce` run them.
    pub fn is_competitor(&self) -> bool {
        match self.kind {
            EngineKind::Pmkv(n) => pmkv::Registry::builtin().get(n).is_ok_and(|f| f.info().competitor),
            _ => false,
        }
    }

    /// Whether the engine is one of the comparison baselines.
    pub fn is_baseline(&self) -> bool {
        !self.uses_pool()
    }

    /// What a completed write survives, for reports.
    pub fn durability(&self, mode: Mode) -> String {
        match self.kind {
            EngineKind::Pmkv(VOLATILE) => "none (DRAM only)".into(),
            EngineKind::Pmkv(_) => match mode {
                Mode::Adr => "PM, flush+fence per persist (adr)".into(),
                Mode::Eadr => "PM with eADR caches (fences only)".into(),
                Mode::Msync => "msync to the file (power loss on a real disk)".into(),
                Mode::Wal => "redo log with group commit (power loss on a real disk)".into(),
                Mode::None => "none (mode none: no flush, no fence)".into(),
            },
            EngineKind::Lmdb(v) => v.durability().into(),
            EngineKind::Null => "none (does nothing: the harness's own cost)".into(),
        }
    }

    /// Labels for the mode and latency columns: "-" where they do not apply.
    pub fn mode_label(&self, mode: Mode) -> String {
        if self.uses_pool() {
            mode.name().into()
        } else {
            "-".into()
        }
    }

    pub fn latency_label(&self, lat: Latency) -> String {
        if self.uses_pool() {
            latency_name(lat)
        } else {
            "-".into()
        }
    }

    /// The pool file (or LMDB directory) this engine uses for run `tag` in `dir`.
    pub fn pool_path(&self, dir: &Path, tag: &str) -> PathBuf {
        let safe: String = tag.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
        match self.kind {
            EngineKind::Pmkv(n) => dir.join(format!("{n}-{safe}.pool")),
            EngineKind::Lmdb(v) => dir.join(format!("{}-{safe}.lmdb", v.name())),
            EngineKind::Null => dir.join(format!("null-{safe}")),
        }
    }

    /// Open (or create) the store at `path`; `params` are engine parameters (`key=value`,
    /// as `pmkv engines` lists them) for pmkv engines.
    pub fn open(
        &self,
        path: &Path,
        mode: Mode,
        latency: Latency,
        create: bool,
        size_hint: u64,
        params: &[(String, String)],
    ) -> pmkv::Result<Store> {
        match self.kind {
            EngineKind::Pmkv(name) => {
                let mut opts = Options::default()
                    .mode(mode)
                    .latency(latency)
                    .create(create)
                    .initial_size(size_hint.clamp(64 << 20, 8 << 30));
                for (k, v) in params {
                    opts = opts.param(k, v);
                }
                Store::open(path, name, &opts)
            }
            EngineKind::Lmdb(v) => Ok(Store::from_engine(Box::new(Lmdb::open(path, v, create)?))),
            EngineKind::Null => Ok(Store::from_engine(Box::new(crate::baseline::null::Null))),
        }
    }

    /// Delete whatever [`EngineSpec::open`] created at `path`.
    pub fn remove(&self, path: &Path) {
        if path.is_dir() {
            let _ = std::fs::remove_dir_all(path);
        } else {
            let _ = pmkv::remove_pool(path);
        }
    }
}

/// "300/100" style name of a latency setting ("300/100/fence" charged per fence,
/// "300/300/llc=2M" with reads charged by the cache model), "none" for zero.
pub fn latency_name(l: Latency) -> String {
    l.name()
}

/// The `null` engine.
pub const NULL: EngineSpec = EngineSpec { kind: EngineKind::Null };

/// Every engine of `pmkv::Registry::builtin()`, then the LMDB baselines, then `null`.
pub fn all() -> Vec<EngineSpec> {
    let mut v: Vec<EngineSpec> =
        pmkv::Registry::builtin().names().into_iter().map(|n| EngineSpec { kind: EngineKind::Pmkv(n) }).collect();
    v.extend(LmdbVariant::ALL.iter().map(|&l| EngineSpec { kind: EngineKind::Lmdb(l) }));
    v.push(NULL);
    v
}

/// The engines of `pmkv::Registry::builtin()` that use a pool (everything but the volatile baseline).
pub fn pmkv_pool_engines() -> Vec<EngineSpec> {
    all().into_iter().filter(|e| e.uses_pool()).collect()
}

/// Look an engine up by name (`lmdb` alone means `lmdb-wm-nosync`).
pub fn parse(name: &str) -> Result<EngineSpec, String> {
    let n = name.trim().to_ascii_lowercase();
    let n = if n == "lmdb" { LmdbVariant::WriteMapNoSync.name().to_string() } else { n };
    all().into_iter().find(|e| e.name() == n).ok_or_else(|| {
        format!(
            "unknown engine '{name}' (available: {})",
            all().iter().map(|e| e.name()).collect::<Vec<_>>().join(", ")
        )
    })
}

/// Parse a list of names, or all engines when empty.
pub fn parse_list(names: &[String]) -> Result<Vec<EngineSpec>, String> {
    if names.is_empty() {
        return Ok(all());
    }
    let mut out = Vec::new();
    for n in names.iter().flat_map(|s| s.split(',')).filter(|s| !s.trim().is_empty()) {
        let e = parse(n)?;
        if !out.contains(&e) {
            out.push(e);
        }
    }
    // Every table shows the harness's own cost beside the engines it was asked for.
    if !out.contains(&NULL) {
        out.push(NULL);
    }
    Ok(out)
}
