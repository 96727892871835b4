//! Key-value commands over any engine through the one API (SPEC U1/U2):
//! `load`, `get`, `put`, `del`, `scan`, `dump`.
//!
//! Output escapes every byte outside printable ASCII (and the backslash) as `\xNN`, so a
//! dump is one record per line whatever the keys hold; `load --tsv` reads it back.
//!
//! Keys and values are bytes on every input path: file lines are read as bytes (a raw
//! non-UTF-8 byte in `load` or `load --tsv` input is stored as that byte), and keys and
//! values given as arguments are taken as the bytes of the argument (`OsStr` on Unix),
//! never through a lossy UTF-8 conversion; `\xNN` escapes work in both.

use super::CmdResult;
use crate::Outcome;
use pmkv::{Direction, ErrorKind, KeyRange, Latency, Mode, Options, Registry, Store, SyncPolicy};
use std::ffi::{OsStr, OsString};
use std::io::BufRead;
use std::ops::Bound;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Options shared by every command that opens a pool.
#[derive(clap::Args, Clone)]
pub struct OpenArgs {
    /// Persistence mode: adr, eadr, msync, wal or none. Default: wal on a disk file
    /// (durable against power loss, one fdatasync per group of writes), adr elsewhere
    /// (durable against power loss on real PM, DAX; on tmpfs nothing is). A command that
    /// writes warns when the mode promises more than the medium gives; `pmkv info` shows
    /// what each mode survives where the pool is.
    #[arg(long)]
    pub mode: Option<Mode>,
    /// Mode wal: when a write is acknowledged. always: on the device (fdatasync, shared
    /// by the writers waiting at once); everysec: written to the kernel, synced every
    /// second (a power loss loses at most ~1 s); no: written to the kernel, synced when
    /// the kernel chooses.
    #[arg(long, default_value = "always")]
    pub sync: SyncPolicy,
    /// An engine parameter, KEY=VALUE (repeatable). `pmkv engines` lists the parameters.
    #[arg(long = "param", short = 'p', value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// If the pool is open in another process, wait up to this many seconds for it.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub wait: f64,
}

impl OpenArgs {
    /// Library options for an existing pool: the mode, the engine parameters, and the
    /// emulated latency of `PMKV_LATENCY` (the library itself reads no environment).
    pub fn options(&self) -> Result<Options, String> {
        let mut o = Options::default().create(false).latency(Latency::from_env()).sync(self.sync);
        o = match self.mode {
            Some(m) => o.mode(m),
            None => o.wal_on_disk(true),
        };
        for p in &self.params {
            let (k, v) = p.split_once('=').ok_or_else(|| format!("--param {p}: expected KEY=VALUE"))?;
            o = o.param(k.trim(), v.trim());
        }
        Ok(o)
    }

    /// Run `open`, retrying while the pool is locked by another process, up to `--wait`.
    pub fn waiting(&self, mut open: impl FnMut() -> pmkv::Result<Store>) -> pmkv::Result<Store> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(self.wait.clamp(0.0, 86_400.0));
        loop {
            match open() {
                Err(e) if e.kind() == ErrorKind::Locked && std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                r => return r,
            }
        }
    }

    /// Open an existing pool read-write (waiting as `--wait` says).
    pub fn open_existing(&self, pool: &std::path::Path) -> CmdStore {
        let opts = self.options()?;
        Ok(self.waiting(|| Store::open_existing(pool, &opts))?)
    }

    /// Open a pool for a command that only reads it (see [`open_for_reading`]).
    pub fn open_for_reading(&self, pool: &std::path::Path) -> CmdStore {
        let opts = self.options()?;
        Ok(self.waiting(|| open_for_reading(pool, &opts))?)
    }
}

/// A store, or why a command could not open it.
pub type CmdStore = Result<Store, Box<dyn std::error::Error>>;

/// Print, on stderr, the library's warning when the store a command wrote to has a mode
/// that promises more than its medium gives (`adr` on a disk file or on tmpfs): the
/// writes it acknowledged do not survive what the mode's name suggests. `d` is the
/// store's [`Store::durability`], taken at its open. Commands call this once, after
/// their writes succeeded, so that the warning appears once and an error stays the one
/// line on stderr; read-only opens acknowledge no writes and do not warn.
pub fn warn_durability(d: &pmkv::Durability, pool: &std::path::Path) {
    if let Some(w) = d.warning() {
        errln!("pmkv: warning: {}: {w}", pool.display());
    }
}

/// The size of a pool a command may create.
#[derive(clap::Args, Clone)]
pub struct NewPoolArgs {
    /// Initial size of a new pool: bytes, or with k, kb, m, mb, g, gb (e.g. 256kb, 16mb;
    /// default 64kb). The pool grows on demand, doubling up to 1 GiB and then by 1 GiB,
    /// so this only saves growth steps. A mangosteen pool is at least its durable region
    /// (--param region_mib) and redo ring, whatever this says: its region cannot grow.
    #[arg(long, value_name = "SIZE", value_parser = parse_pool_size)]
    pub initial_size: Option<u64>,
    /// The initial size in MiB (the older spelling of --initial-size).
    #[arg(long, value_name = "MIB", hide = true, conflicts_with = "initial_size")]
    pub initial_mib: Option<u64>,
}

impl NewPoolArgs {
    /// `opts` with the initial size asked for, if one was.
    pub fn apply(&self, opts: Options) -> Options {
        match (self.initial_size, self.initial_mib) {
            (Some(b), _) => opts.initial_size(b),
            (None, Some(m)) => opts.initial_size(m.saturating_mul(1 << 20)),
            (None, None) => opts,
        }
    }
}

/// A pool size as `--initial-size` takes it (see [`super::size::parse_size`]).
fn parse_pool_size(s: &str) -> Result<u64, String> {
    super::size::parse_size(s).map(|n| n as u64)
}

#[derive(clap::Args)]
pub struct LoadArgs {
    pub pool: PathBuf,
    /// Input file: one key per line (value = the line's 1-based number), or with --tsv
    /// `key<TAB>value` lines as `dump` writes them.
    pub file: PathBuf,
    /// Engine for a new pool.
    #[arg(long, default_value = "hart")]
    pub engine: String,
    /// Lines are escaped `key<TAB>value` pairs (the `dump` format).
    #[arg(long)]
    pub tsv: bool,
    #[command(flatten)]
    pub size: NewPoolArgs,
    #[command(flatten)]
    pub open: OpenArgs,
}

#[derive(clap::Args)]
pub struct KeyArgs {
    pub pool: PathBuf,
    /// The key: the argument's bytes, with `\xNN` escapes.
    pub key: OsString,
    #[command(flatten)]
    pub open: OpenArgs,
}

#[derive(clap::Args)]
pub struct PutArgs {
    pub pool: PathBuf,
    /// The key: the argument's bytes, with `\xNN` escapes.
    pub key: OsString,
    /// The value: the argument's bytes, with `\xNN` escapes.
    pub value: OsString,
    #[command(flatten)]
    pub open: OpenArgs,
}

/// `pmkv scan`'s range: half-open, `--from START --before END` is `[START, END)`, as in
/// every other front end (docs/design/api.md, "A range is half-open"). The inclusive end
/// is named (`--through`), and the old `--to`, which was inclusive, is refused with a
/// message rather than silently given a new meaning.
#[derive(clap::Args)]
pub struct ScanArgs {
    pub pool: PathBuf,
    /// First key, included.
    #[arg(long, value_name = "KEY", conflicts_with_all = ["after", "prefix"])]
    pub from: Option<OsString>,
    /// Start just after KEY (KEY excluded): to continue from the last key printed.
    #[arg(long, value_name = "KEY", conflicts_with = "prefix")]
    pub after: Option<OsString>,
    /// End before KEY (KEY excluded): --from A --before B is [A, B).
    #[arg(long, value_name = "KEY", conflicts_with_all = ["through", "prefix"])]
    pub before: Option<OsString>,
    /// End at KEY, included.
    #[arg(long, value_name = "KEY", conflicts_with = "prefix")]
    pub through: Option<OsString>,
    /// Only keys that begin with PREFIX.
    #[arg(long, value_name = "PREFIX")]
    pub prefix: Option<OsString>,
    /// Refused: it was an inclusive end, unlike every other range in pmkv; say --through
    /// (inclusive, what --to did) or --before (exclusive).
    #[arg(long, hide = true, value_name = "KEY")]
    pub to: Option<OsString>,
    /// At most this many records (the first ones in the order printed).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Descending key order: the same records, highest first.
    #[arg(long)]
    pub reverse: bool,
    #[command(flatten)]
    pub open: OpenArgs,
}

impl ScanArgs {
    /// The range the options name (before the pool is opened: a refusal opens nothing).
    pub fn range(&self) -> Result<KeyRange, String> {
        if let Some(k) = &self.to {
            let k = escape(&arg_bytes(k)?);
            return Err(format!(
                "scan --to is gone: it included its key, unlike every other range in pmkv; \
                 say --through {k} for the same records, or --before {k} to stop short of it"
            ));
        }
        if let Some(p) = &self.prefix {
            return Ok(KeyRange::prefix(arg_bytes(p)?));
        }
        // clap refuses --from with --after and --before with --through.
        let start = match (&self.from, &self.after) {
            (Some(k), _) => Bound::Included(arg_bytes(k)?),
            (None, Some(k)) => Bound::Excluded(arg_bytes(k)?),
            (None, None) => Bound::Unbounded,
        };
        let end = match (&self.before, &self.through) {
            (Some(k), _) => Bound::Excluded(arg_bytes(k)?),
            (None, Some(k)) => Bound::Included(arg_bytes(k)?),
            (None, None) => Bound::Unbounded,
        };
        Ok(KeyRange { start, end })
    }
}

#[derive(clap::Args)]
pub struct DumpArgs {
    pub pool: PathBuf,
    /// Name each record of `pmkv serve` (its meta and element records, kept under the
    /// reserved prefix `\xffpmkv`) in words instead of printing its raw key: `pmkv serve
    /// zset member m of key k<TAB>value`. For reading: `load --tsv` does not read it back.
    #[arg(long)]
    pub describe: bool,
    #[command(flatten)]
    pub open: OpenArgs,
}

/// `\xNN` for bytes outside printable ASCII, and for `\`: one spelling of bytes as text,
/// shared with the server's record names (`pmkv check` and `dump` name server records with
/// it), so a key reads the same in both.
pub use pmkv_server::record::escape;

/// Inverse of [`escape`]; also used for keys given on the command line. Bytes other
/// than escapes are kept as they are, whatever they are (raw non-UTF-8 included).
pub fn unescape(b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1] == b'x' {
            let hex = &b[i + 2..i + 4];
            let v = std::str::from_utf8(hex).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
            out.push(v.ok_or_else(|| format!("bad escape \\x{} in '{}'", escape(hex), escape(b)))?);
            i += 4;
        } else if b[i] == b'\\' && i + 1 < b.len() && b[i + 1] == b'\\' {
            out.push(b'\\');
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// A key or value given as an argument: its bytes, unescaped.
fn arg_bytes(a: &OsStr) -> Result<Vec<u8>, String> {
    unescape(a.as_bytes())
}

/// Records per batch of `pmkv load`.
const LOAD_BATCH: usize = 256;

/// The file a load into a new pool builds before it takes the pool's name:
/// `<pool>.loading`.
fn loading_path(pool: &std::path::Path) -> PathBuf {
    let mut s = pool.as_os_str().to_owned();
    s.push(".loading");
    PathBuf::from(s)
}

/// Make way for a new `<pool>.loading`: one left by an interrupted load (no process holds
/// it: the pool lock is a `flock`) is deleted; one held by a running load is refused.
fn clear_loading(path: &std::path::Path) -> Result<(), String> {
    use std::os::unix::io::AsRawFd;
    let Ok(f) = std::fs::File::open(path) else { return Ok(()) };
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(format!("{}: another pmkv load is building this pool", path.display()));
    }
    pmkv::remove_pool(path).map_err(|e| format!("{}: {e}", path.display()))?;
    errln!("pmkv: {}: left by an interrupted load; deleted", path.display());
    Ok(())
}

/// Give the loaded pool its name, durably: the file's pages on the device, then the
/// rename (refused if something took the name meanwhile), then the directory.
fn publish_loaded(from: &std::path::Path, to: &std::path::Path) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    let err = |what: &str, e: std::io::Error| format!("{}: {what}: {e}", from.display());
    std::fs::File::open(from).and_then(|f| f.sync_all()).map_err(|e| err("fsync", e))?;
    let c = |p: &std::path::Path| std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(|e| e.to_string());
    let (cf, ct) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths; AT_FDCWD resolves them as `rename` would.
    let r =
        unsafe { libc::renameat2(libc::AT_FDCWD, cf.as_ptr(), libc::AT_FDCWD, ct.as_ptr(), libc::RENAME_NOREPLACE) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!(
            "{}: could not take the name {} ({e}); the loaded pool is complete and durable there",
            from.display(),
            to.display()
        ));
    }
    let dir = match to.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| format!("{}: fsync: {e}", dir.display()))
}

pub fn load(a: LoadArgs) -> CmdResult {
    // A load is acknowledged as a whole: durable when the command exits, so its writes
    // need not wait one by one.
    //
    // Into an existing pool the writes go through the pool's mode (on a disk, the log:
    // each record written twice, to the log then by the checkpoint at close). A new pool
    // is one unit, as an LMDB transaction is: built in mode adr under `<pool>.loading`
    // (the page cache; nothing logged), written to the device with one fsync at the end,
    // then renamed to its name. A crash meanwhile leaves no pool at the name, only the
    // `.loading` file, which the next load deletes. Only the default mode (or wal) takes
    // this way; an explicit adr, eadr, msync or none is kept as asked.
    // A file that never got its header (a load killed between creating the file and
    // writing it) holds nothing: replace it rather than refuse it forever as "bad magic".
    if std::fs::symlink_metadata(&a.pool).is_ok_and(|m| m.is_file() && m.len() == 0) {
        std::fs::remove_file(&a.pool).map_err(|e| format!("{}: {e}", a.pool.display()))?;
        errln!("pmkv: {}: empty file (an interrupted create) replaced by a new pool", a.pool.display());
    }
    let whole = a.open.mode.is_none_or(|m| m == Mode::Wal) && std::fs::symlink_metadata(&a.pool).is_err();
    let path = if whole { loading_path(&a.pool) } else { a.pool.clone() };
    let mut opts = a.size.apply(a.open.options()?.create(true).sync(pmkv::SyncPolicy::No));
    if whole {
        clear_loading(&path)?;
        opts = opts.mode(Mode::Adr);
    }
    let factory = Registry::builtin().get(&a.engine)?;
    if !factory.info().persistent {
        return Err(format!("engine '{}' keeps nothing: it has no pool, nothing would be stored", a.engine).into());
    }
    let input = std::fs::File::open(&a.file).map_err(|e| format!("{}: {e}", a.file.display()))?;
    let total = input.metadata().map(|m| m.len()).unwrap_or(0);
    let store = a.open.waiting(|| Store::open_with(factory, &path, &opts))?;
    let durability = store.durability();
    let filled = fill(&store, &a, input, total).and_then(|n| {
        errln!("loaded {n} records; {} keys in the pool", store.len().map_err(|e| e.to_string())?);
        store.close().map_err(|e| e.to_string())
    });
    if let Err(e) = filled {
        if whole {
            // A new pool is loaded whole or not at all.
            let _ = pmkv::remove_pool(&path);
            return Err(format!("{e} (nothing loaded: {} was not created)", a.pool.display()).into());
        }
        return Err(e.into());
    }
    if whole {
        publish_loaded(&path, &a.pool)?;
        // On a disk the fsync made it durable; elsewhere adr is what the default gives.
        if durability.medium == pmkv::Medium::Disk {
            return Ok(Outcome::Ok);
        }
    }
    warn_durability(&durability, &a.pool);
    Ok(Outcome::Ok)
}

/// Read `input` (`total` bytes) into `store` as `a` says, in batches; the count of records.
fn fill(store: &Store, a: &LoadArgs, input: std::fs::File, total: u64) -> Result<u64, String> {
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} loading [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut reader = std::io::BufReader::new(input);
    let mut line = Vec::new();
    let mut n = 0u64;
    // Records go in independent batches of LOAD_BATCH: one acknowledgement (in mode wal,
    // one log write) per batch instead of per record. A batch the store refuses is
    // applied again record by record, so that the error names its line.
    let mut batch = pmkv::WriteBatch::independent();
    let mut first_line = 1u64;
    let flush = |batch: &mut pmkv::WriteBatch, first_line: u64| -> Result<(), String> {
        if batch.is_empty() {
            return Ok(());
        }
        if store.write(batch).is_err() {
            for (i, op) in batch.ops().iter().enumerate() {
                if let pmkv::BatchOp::Put(k, v) = op {
                    store
                        .put(k, v)
                        .map_err(|e| format!("{}: line {}: {e}", a.file.display(), first_line + i as u64))?;
                }
            }
        }
        batch.clear();
        Ok(())
    };
    loop {
        line.clear();
        let got = reader.read_until(b'\n', &mut line).map_err(|e| format!("{}: {e}", a.file.display()))?;
        if got == 0 {
            break;
        }
        bar.inc(got as u64);
        n += 1;
        let mut rec = line.as_slice();
        if rec.last() == Some(&b'\n') {
            rec = &rec[..rec.len() - 1];
        }
        if rec.last() == Some(&b'\r') {
            rec = &rec[..rec.len() - 1];
        }
        if batch.is_empty() {
            first_line = n;
        }
        if a.tsv {
            // Bytes, split at the first TAB: raw bytes (UTF-8 or not) are kept as they are.
            let at = |e: String| format!("{}: line {n}: {e}", a.file.display());
            let tab = rec.iter().position(|&c| c == b'\t').ok_or_else(|| at("no TAB between key and value".into()))?;
            let (k, v) = (&rec[..tab], &rec[tab + 1..]);
            let (k, v) = (unescape(k).map_err(at)?, unescape(v).map_err(at)?);
            batch.put(k, v);
        } else {
            batch.put(rec, n.to_string());
        }
        if batch.len() >= LOAD_BATCH {
            flush(&mut batch, first_line)?;
        }
    }
    flush(&mut batch, first_line)?;
    bar.finish_and_clear();
    Ok(n)
}

/// Open a pool for a command that only reads it: read-only, so the file does not change
/// and other readers may run at once. Only if the header says the pool was not closed
/// cleanly (`NeedsRecovery`) is it opened read-write once, which runs the engine's crash
/// recovery and closes it cleanly, and then read-only for the reads. Any other refusal (damage included) is reported as it is:
/// a read command never "repairs" a cleanly closed pool.
///
/// A pool that needs recovery but cannot be opened for writing (read-only media, no write
/// permission) is refused with a message that says so and what to do, not only with the
/// system's "Read-only file system".
pub fn open_for_reading(pool: &std::path::Path, opts: &Options) -> pmkv::Result<Store> {
    open_for_reading_reporting(pool, opts).map(|(s, _)| s)
}

/// [`open_for_reading`], and the report of the recovery it ran (or of the open).
pub fn open_for_reading_reporting(
    pool: &std::path::Path,
    opts: &Options,
) -> pmkv::Result<(Store, Option<pmkv::RecoveryReport>)> {
    match Store::open_existing(pool, &opts.clone().read_only(true)) {
        Err(e) if e.kind() == ErrorKind::NeedsRecovery => {
            let recovered = Store::open_existing(pool, &opts.clone().read_only(false)).map_err(|e| match e.kind() {
                ErrorKind::Io | ErrorKind::ReadOnly => pmkv::Error::new(e.kind(), recovery_blocked(pool, &e)),
                _ => e,
            })?;
            // Closed as soon as recovery is done, and the reads made read-only: damage a
            // read meets then poisons nothing that stays behind (a store that meets damage
            // leaves its pool marked unclean, so that it is never sealed as good), and the
            // next read command changes nothing.
            let report = recovered.recovery();
            recovered.close()?;
            Ok((Store::open_existing(pool, &opts.clone().read_only(true))?, report))
        }
        r => r.map(|s| {
            let report = s.recovery();
            (s, report)
        }),
    }
}

/// Why a pool that was not closed cleanly cannot be read where it is, and what to do.
pub fn recovery_blocked(pool: &std::path::Path, e: &dyn std::fmt::Display) -> String {
    let p = pool.display();
    format!(
        "{p}: the pool was not closed cleanly (a crash, or a process killed with it open) and needs \
         recovery before it can be read; recovery writes to the pool, which cannot be opened for writing \
         here ({e}). Open it read-write once where it is writable (e.g. `pmkv check` on a writable copy), \
         or copy its records out with `pmkv salvage {p} NEW`"
    )
}

pub fn get(a: KeyArgs) -> CmdResult {
    let store = a.open.open_for_reading(&a.pool)?;
    match store.get(&arg_bytes(&a.key)?)? {
        Some(v) => {
            outln!("{}", escape(&v))?;
            Ok(Outcome::Ok)
        }
        None => Ok(Outcome::NotFound),
    }
}

pub fn put(a: PutArgs) -> CmdResult {
    let store = match a.open.open_existing(&a.pool) {
        Err(e) if e.downcast_ref::<pmkv::Error>().is_some_and(|e| e.kind() == ErrorKind::NotFound) => {
            let p = a.pool.display();
            return Err(format!(
                "{e}; create it first: `pmkv create {p} --engine hart` (`pmkv engines` lists the others)"
            )
            .into());
        }
        r => r?,
    };
    let durability = store.durability();
    store.put(&arg_bytes(&a.key)?, &arg_bytes(&a.value)?)?;
    store.close()?;
    warn_durability(&durability, &a.pool);
    Ok(Outcome::Ok)
}

pub fn del(a: KeyArgs) -> CmdResult {
    let store = a.open.open_existing(&a.pool)?;
    let durability = store.durability();
    let found = store.delete(&arg_bytes(&a.key)?)?;
    store.close()?;
    if found {
        warn_durability(&durability, &a.pool);
    }
    Ok(if found { Outcome::Ok } else { Outcome::NotFound })
}

/// Print `range` as `key<TAB>value` lines. The store's scan runs no output while an
/// engine lock is held (it copies records out in chunks), so a slow pipe blocks no writer.
/// A failed write (full device, closed pipe) ends the scan and is returned, for `main` to
/// report (or, for a closed pipe, to end quietly).
/// Print the records of `range` as `key<TAB>value` lines, at most `limit`; with
/// `describe`, a `pmkv serve` record's key is its name in words
/// ([`pmkv_server::record::describe_record`]). Returns how many of the records printed
/// are the server's own.
fn print_range(
    store: &Store,
    range: &KeyRange,
    dir: Direction,
    limit: usize,
    describe: bool,
) -> Result<u64, Box<dyn std::error::Error>> {
    let mut out = crate::output::Records::new();
    let mut err = None;
    let mut left = limit;
    let mut server = 0u64;
    if left > 0 {
        store.scan(range, dir, |k, v| {
            let described = pmkv_server::record::describe_record(k);
            server += u64::from(described.is_some());
            let key = match described {
                Some(d) if describe => d,
                _ => escape(k),
            };
            match out.line(&[key.as_bytes(), b"\t", escape(v).as_bytes()]) {
                Ok(()) => {
                    left -= 1;
                    left > 0
                }
                Err(e) => {
                    err = Some(e);
                    false
                }
            }
        })?;
    }
    if let Some(e) = err {
        return Err(e.into());
    }
    out.finish()?;
    Ok(server)
}

pub fn scan(a: ScanArgs) -> CmdResult {
    let range = a.range()?;
    let store = a.open.open_for_reading(&a.pool)?;
    let dir = if a.reverse { Direction::Reverse } else { Direction::Forward };
    print_range(&store, &range, dir, a.limit.unwrap_or(usize::MAX), false)?;
    Ok(Outcome::Ok)
}

/// Every record as `key<TAB>value`, which `load --tsv` reads back: a `pmkv serve` pool's
/// own records too (without them its lists, hashes, sets, sorted sets and TTLs would not
/// come back). Their keys are not user keys, so a server pool's dump says on stderr how
/// many of its records are the server's, and `--describe` names each in words.
pub fn dump(a: DumpArgs) -> CmdResult {
    let store = a.open.open_for_reading(&a.pool)?;
    let server = print_range(&store, &KeyRange::all(), Direction::Forward, usize::MAX, a.describe)?;
    if server > 0 && !a.describe {
        errln!(
            "pmkv dump: {server} record(s) are pmkv serve's own metadata and collection elements (keys under \\xffpmkv, \
             not user keys); `pmkv dump --describe` names each"
        );
    }
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_round_trip() {
        let all: Vec<u8> = (0..=255u8).collect();
        let e = escape(&all);
        assert!(!e.contains('\t') && !e.contains('\n'));
        assert_eq!(unescape(e.as_bytes()).unwrap(), all);
        assert_eq!(unescape(b"a\\x00b").unwrap(), b"a\0b");
        assert!(unescape(b"\\xzz").is_err());
        // Raw bytes that are not UTF-8 pass through unchanged.
        assert_eq!(unescape(b"a\xff\xfe\\x41").unwrap(), b"a\xff\xfeA");
    }
}
