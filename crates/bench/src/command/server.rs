//! `pmkv bench server`: redis-benchmark against `pmkv serve` and
//! against Debian's redis-server with `appendfsync always`, `appendfsync everysec` and no
//! persistence, in one run: 50 clients, SET and GET over a 1M-key space, without
//! pipelining and with 16 requests per round trip. Prints a Markdown table with each
//! figure's ratio to Redis in the same run (durable SET against `always`, GET against no
//! persistence) and, with `--out`, writes it as a bar chart (PNG and SVG).
//!
//! Where a durable write goes decides what it costs, so both media are measured: pmkv's
//! pool and Redis's AOF on /dev/shm (memory: pmkv `adr` emulates PM with clwb + sfence,
//! and Redis's fsync of a tmpfs file returns at once, so its `always` there guards only
//! against a process crash), and both on a disk-backed directory (`--disk-dir`, default
//! /var/tmp), policy against policy: pmkv mode `wal` with `--sync always` beside Redis
//! `appendfsync always` (acknowledged = on the device), and `--sync everysec` beside
//! Redis `everysec` (at most about a second lost at a power cut). `--disk-msync` adds pmkv
//! mode `msync` (a device flush per fence), the slow way the log replaced. Needs
//! `redis-benchmark` and `redis-server` (Debian redis-tools, redis-server) on the PATH;
//! every server runs on loopback and in a temporary directory.
//!
//! **Runs and duration.** Every server is measured `--runs` times (3), in alternating rounds
//! (each row once, then each row again, ...), and the tables give the median and the range
//! of the runs; every ratio is a ratio of medians of this run. The disk rows send
//! `--disk-requests` (50,000) per test instead of `--requests` (100,000), all the same
//! count, so their ratios compare like with like; the `msync` row sends at most 5,000 (a
//! device flush per fence: 100,000 of them once took 17 minutes). Progress (which server,
//! which run and test, time in it, an estimate of the time left) goes to stderr.
//!
//! **The load generator's own cost.** On a small machine redis-benchmark and the server
//! share the cores, and a figure is the server's only while the client has time to spare.
//! So each measurement also reports the cores each side used, from the kernel's own
//! accounting (the client's user + system time from `getrusage(RUSAGE_CHILDREN)` around its
//! run, the server's from `/proc/PID/stat`), divided by the wall time. A client at about
//! one core (redis-benchmark is one thread) is the ceiling of that column: every server
//! then shows the same figure, and no server can be measured above it on this machine.

use super::CmdResult;
use crate::human::{self, thousands};
use crate::progress::Progress;
use crate::stats::{self, Spread};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
#[command(after_help = "Takes 1 to 2 min with the defaults on this project's 2-core machine (3 runs, the \
                         four disk rows at 50,000 requests per test); --disk-msync adds up to ~3 min when the \
                         disk is slow (a pmkv msync SET is a device flush, 300 to 8,900 per second on this VM).")]
pub struct ServerArgs {
    /// Requests per test of the memory rows without pipelining (doubled with pipelining).
    #[arg(long, default_value_t = 100_000)]
    pub requests: u64,
    /// Requests per test of the disk rows without pipelining (doubled with pipelining).
    /// All get the same count (the `--disk-msync` row at most 5,000).
    #[arg(long, default_value_t = 50_000)]
    pub disk_requests: u64,
    /// Also measure pmkv mode `msync` on the disk (a device flush per fence).
    #[arg(long)]
    pub disk_msync: bool,
    /// Runs of every server, in alternating rounds: tables give the median and the range.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Concurrent clients.
    #[arg(long, default_value_t = 50)]
    pub clients: u32,
    /// Persistence mode of pmkv serve.
    #[arg(long, default_value = "adr")]
    pub mode: String,
    /// Engine of pmkv serve's pools (any of `pmkv engines`).
    #[arg(long, default_value = "hart")]
    pub engine: String,
    /// Where the in-memory pools and Redis files go (default: a temporary directory on
    /// /dev/shm).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// A directory on a disk, for the rows whose writes go to a device: pmkv `wal` and
    /// Redis's AOF there, under `always` and `everysec`. Empty (`--disk-dir ""`): skip those
    /// rows. (A string, not a path: clap refuses an empty path.)
    #[arg(long, default_value = "/var/tmp")]
    pub disk_dir: String,
    /// Worker threads of pmkv serve (default: its own default, half the cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Write server.png and server.svg here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No progress output.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Instead of the comparison: clusters of 1, 2, ... N `pmkv serve --cluster` nodes,
    /// each made with `pmkv cluster create` and measured with `redis-benchmark --cluster`
    /// (SET and GET, P1 and P16), with the cores the nodes and the client used.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=16))]
    pub cluster: Option<u32>,
    /// Instead of the comparison: lists, sets and sorted sets (LPUSH, RPOP, SADD, SPOP,
    /// ZADD, ZPOPMIN, and ZRANGEBYSCORE and ZRANK on a 1M-member sorted set), pmkv beside
    /// Redis `appendfsync always` on the same medium, with memory per member.
    #[arg(long, conflicts_with = "cluster")]
    pub types: bool,
    /// Members of the sorted set that `--types` fills for ZRANK and ZRANGEBYSCORE.
    #[arg(long, default_value_t = 1_000_000, requires = "types")]
    pub members: u64,
}

pub(super) struct Guard(pub(super) Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where the in-memory pools and Redis's files go: `--dir`, else a temporary directory on
/// /dev/shm (or the system's temporary directory where there is none).
pub(super) fn work_dir(a: &ServerArgs) -> std::io::Result<tempfile::TempDir> {
    match &a.dir {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()),
    }
}

pub(super) fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

pub(super) fn wait_ready(port: u16) -> Result<(), String> {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(20) {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("no server on port {port} after 20 s"))
}

/// CPU seconds (user + system) of the children this process has waited for.
fn children_cpu() -> f64 {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed value it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_CHILDREN is always a valid `who`.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}

/// CPU seconds (user + system) process `pid` has used so far, from `/proc/PID/stat`
/// (fields 14 and 15, in clock ticks); `None` where there is no such file.
fn process_cpu(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after its closing paren are plain.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks / hz as f64)
}

/// One redis-benchmark run (SET then GET at one pipeline depth): requests per second of
/// each, and the cores the client and the server used over the run.
#[derive(Clone, Copy, Default)]
struct Measured {
    set: f64,
    get: f64,
    client_cores: f64,
    server_cores: f64,
}

/// redis-benchmark's `tests`, `n` requests each, against `port` at one pipeline depth with
/// `extra` arguments (`--cluster`): each test's requests per second (in the order of
/// `names`, as redis-benchmark labels them), and the (client, server) cores used over the
/// run (the server's: those of every process in `servers` added up).
#[allow(clippy::too_many_arguments)]
fn redis_benchmark_on(
    port: u16,
    servers: &[u32],
    extra: &[&str],
    clients: u32,
    n: u64,
    pipeline: u32,
    tests: &str,
    names: &[&str],
) -> Result<(Vec<f64>, f64, f64), String> {
    let mut args: Vec<String> = ["-t", tests].iter().chain(extra).map(|s| s.to_string()).collect();
    args.extend(["-n".into(), n.to_string(), "-c".into(), clients.to_string(), "-P".into(), pipeline.to_string()]);
    redis_benchmark_args(port, servers, &args, names)
}

/// redis-benchmark against `port` with `args` (after `-h`, `-p`, `-r 1000000` and
/// `--csv`; a command to send may end them): the requests per second of each test of
/// `names` (as its CSV labels them), and the (client, server) cores used over the run
/// (the server's: those of every process in `servers` added up).
pub(super) fn redis_benchmark_args(
    port: u16,
    servers: &[u32],
    args: &[String],
    names: &[&str],
) -> Result<(Vec<f64>, f64, f64), String> {
    let cpu = || servers.iter().map(|&p| process_cpu(p)).sum::<Option<f64>>();
    let (c0, s0, t0) = (children_cpu(), cpu(), Instant::now());
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-r", "1000000", "--csv"])
        .args(args)
        .output()
        .map_err(|e| format!("redis-benchmark: {e} (install Debian's redis-tools)"))?;
    let wall = t0.elapsed().as_secs_f64().max(1e-9);
    let (c1, s1) = (children_cpu(), cpu());
    let text = String::from_utf8_lossy(&out.stdout);
    let rps = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("\"{name}\"")))
            .and_then(|l| l.split(',').nth(1))
            .and_then(|v| v.trim_matches('"').parse::<f64>().ok())
            .ok_or_else(|| {
                let err = String::from_utf8_lossy(&out.stderr);
                format!("no {name} figure in redis-benchmark's output: {text}{}", err.trim())
            })
    };
    let server_cores = match (s0, s1) {
        (Some(s0), Some(s1)) => (s1 - s0) / wall,
        _ => f64::NAN,
    };
    let figures = names.iter().map(|n| rps(n)).collect::<Result<Vec<f64>, String>>()?;
    Ok((figures, (c1 - c0) / wall, server_cores))
}

/// One server to measure: label, what a SET's reply promises, how to start it.
struct Row {
    label: String,
    durability: &'static str,
    pmkv_mode: Option<String>,
    /// `--sync` of a pmkv row in mode `wal`.
    pmkv_sync: Option<&'static str>,
    redis_conf: &'static [&'static str],
    dir: PathBuf,
    /// Requests per test without pipelining.
    requests: u64,
    /// Also measure PING_MBULK (the ceiling line).
    ping: bool,
}

/// The row whose server also answers PING_MBULK for the ceiling line.
const NO_PERSISTENCE: &str = "redis, no persistence";

const ALWAYS: &[&str] = &["--appendonly", "yes", "--appendfsync", "always"];
const EVERYSEC: &[&str] = &["--appendonly", "yes", "--appendfsync", "everysec"];

/// The label of the pmkv row on the disk in mode `wal` with `--sync sync`.
fn disk_wal_label(engine: &str, sync: &str) -> String {
    format!("pmkv serve ({engine} wal {sync}, disk)")
}

/// One redis-benchmark invocation of the plan: SET and GET, or PING_MBULK, at a pipeline depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Test {
    SetGet(u32),
    Ping(u32),
}

/// One step of the plan: a test of row `row` in round `run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Job {
    row: usize,
    run: usize,
    test: Test,
}

/// Every redis-benchmark invocation of the command, in run order: round by round, each
/// row's SET/GET at P1 and P16 (and PING_MBULK at both for the row with `ping`). The
/// progress total is this list's length and the loop runs this list.
fn jobs(rows: &[Row], runs: usize) -> Vec<Job> {
    let mut v = Vec::new();
    for run in 0..runs.max(1) {
        for (row, r) in rows.iter().enumerate() {
            let mut tests = vec![Test::SetGet(1), Test::SetGet(16)];
            if r.ping {
                tests.extend([Test::Ping(1), Test::Ping(16)]);
            }
            v.extend(tests.into_iter().map(|test| Job { row, run, test }));
        }
    }
    v
}

/// What a row measured over its runs.
#[derive(Default)]
struct Served {
    /// SET/GET at P1 and P16, one entry per run.
    runs: Vec<[Measured; 2]>,
    /// PING_MBULK (requests per second, client cores) at P1 and P16, per run.
    ping: Vec<[(f64, f64); 2]>,
    /// Why the row has no figures (its server did not start).
    skipped: Option<String>,
}

/// The command that starts row `row`'s server on `port` with its files in `sub`.
fn server_command(a: &ServerArgs, me: &Path, row: &Row, port: u16, sub: &Path) -> Command {
    match &row.pmkv_mode {
        Some(mode) => {
            let mut c = Command::new(me);
            c.arg("serve").arg(sub.join("bench.pool")).args(["--port", &port.to_string(), "--mode", mode]);
            c.args(["--initial-mib", "512", "--engine", &a.engine]);
            if let Some(sync) = row.pmkv_sync {
                c.args(["--sync", sync]);
            }
            if let Some(t) = a.threads {
                c.args(["--threads", &t.to_string()]);
            }
            c
        }
        None => {
            let mut c = Command::new("redis-server");
            c.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"]).arg(sub).args(row.redis_conf);
            c
        }
    }
}

/// A running server of one row and round: the process, its port, its files.
struct Running {
    row: usize,
    run: usize,
    port: u16,
    pid: u32,
    _guard: Guard,
    sub: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.sub);
    }
}

fn start(a: &ServerArgs, me: &Path, rows: &[Row], j: &Job) -> Result<Running, String> {
    let row = &rows[j.row];
    let port = free_port().map_err(|e| e.to_string())?;
    let sub = row.dir.join(format!("server-{}-{}", j.row, j.run));
    std::fs::create_dir_all(&sub).map_err(|e| format!("{}: {e}", sub.display()))?;
    let child = server_command(a, me, row, port, &sub)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", row.label))?;
    let pid = child.id();
    let r = Running { row: j.row, run: j.run, port, pid, _guard: Guard(child), sub };
    wait_ready(port)?;
    Ok(r)
}

fn test_label(t: Test, n: u64) -> String {
    match t {
        Test::SetGet(1) => format!("SET+GET P1, {} each", thousands(n)),
        Test::SetGet(p) => format!("SET+GET P{p}, {} each", thousands(n * 2)),
        Test::Ping(1) => format!("PING_MBULK P1, {}", thousands(n)),
        Test::Ping(p) => format!("PING_MBULK P{p}, {}", thousands(n * 2)),
    }
}

pub fn run(a: ServerArgs) -> CmdResult {
    if let Some(n) = a.cluster {
        return cluster(&a, n);
    }
    let started = Instant::now();
    let tmp = work_dir(&a)?;
    let disk = if a.disk_dir.is_empty() { None } else { Some(tempfile::tempdir_in(&a.disk_dir)?) };
    let mem = tmp.path().to_path_buf();
    let row = |label: String, durability, pmkv_mode, redis_conf, dir: &Path, requests| Row {
        ping: label == NO_PERSISTENCE,
        label,
        durability,
        pmkv_mode,
        pmkv_sync: None,
        redis_conf,
        dir: dir.to_path_buf(),
        requests,
    };
    let mut plan = vec![
        row(
            format!("pmkv serve ({} {}, memory)", a.engine, a.mode),
            "persistent before the reply",
            Some(a.mode.clone()),
            &[],
            &mem,
            a.requests,
        ),
        row(
            "redis appendfsync always (memory)".into(),
            "AOF write + fsync before the reply (fsync of tmpfs: no-op)",
            None,
            ALWAYS,
            &mem,
            a.requests,
        ),
        row("redis appendfsync everysec (memory)".into(), "AOF, up to 1 s lost", None, EVERYSEC, &mem, a.requests),
        row(NO_PERSISTENCE.into(), "none", None, &["--appendonly", "no", "--save", ""], &mem, a.requests),
    ];
    if let Some(d) = &disk {
        let n = a.disk_requests;
        for (sync, durability, redis) in [
            ("always", "on the device (fdatasync) before the reply", ALWAYS),
            ("everysec", "written before the reply, on the device within ~1 s", EVERYSEC),
        ] {
            let mut pm = row(disk_wal_label(&a.engine, sync), durability, Some("wal".into()), &[], d.path(), n);
            pm.pmkv_sync = Some(sync);
            plan.push(pm);
            plan.push(row(format!("redis appendfsync {sync} (disk)"), durability, None, redis, d.path(), n));
        }
        if a.disk_msync {
            plan.push(row(
                format!("pmkv serve ({} msync, disk)", a.engine),
                "msync'd to the device before the reply",
                Some("msync".into()),
                &[],
                d.path(),
                n.min(5_000),
            ));
        }
    }
    let runs = a.runs.max(1) as usize;
    let me = std::env::current_exe()?;
    let jobs = jobs(&plan, runs);
    let mut pg = Progress::with_keys(jobs.iter().map(|j| format!("{}-{:?}", j.row, j.test)).collect(), a.quiet);
    pg.println(&format!(
        "pmkv bench server: {} servers x {runs} runs, {} redis-benchmark runs; memory rows {} requests per test, disk rows {} (--requests, --disk-requests; doubled at P16)",
        plan.len(),
        jobs.len(),
        thousands(a.requests),
        thousands(a.disk_requests)
    ));
    let mut served: Vec<Served> = plan.iter().map(|_| Served::default()).collect();
    let mut running: Option<Running> = None;
    for j in &jobs {
        let r = &plan[j.row];
        let label = format!(
            "{} [{}/{}] run {}/{runs}: {}",
            r.label,
            j.row + 1,
            plan.len(),
            j.run + 1,
            test_label(j.test, r.requests)
        );
        pg.set(&label);
        if served[j.row].skipped.is_some() {
            pg.inc(&format!("{label}: skipped"));
            continue;
        }
        if running.as_ref().map(|s| (s.row, s.run)) != Some((j.row, j.run)) {
            running = None;
            match start(&a, &me, &plan, j) {
                Ok(s) => running = Some(s),
                Err(e) if r.pmkv_mode.is_none() => {
                    pg.println(&format!("{}: skipped ({e}; install Debian's redis-server)", r.label));
                    served[j.row].skipped = Some(e);
                    pg.inc(&format!("{label}: skipped"));
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
        }
        let Some(s) = &running else { continue };
        let got = match j.test {
            Test::SetGet(p) => {
                let n = if p > 1 { r.requests * 2 } else { r.requests };
                redis_benchmark_on(s.port, &[s.pid], &[], a.clients, n, p, "set,get", &["SET", "GET"])
            }
            Test::Ping(p) => {
                let n = if p > 1 { r.requests * 2 } else { r.requests };
                redis_benchmark_on(s.port, &[s.pid], &[], a.clients, n, p, "ping_mbulk", &["PING_MBULK"])
            }
        };
        let (f, client_cores, server_cores) = match got {
            Ok(x) => x,
            Err(e) if r.pmkv_mode.is_none() => {
                pg.println(&format!("{}: skipped ({e})", r.label));
                served[j.row].skipped = Some(e);
                running = None;
                pg.inc(&format!("{label}: skipped"));
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let sv = &mut served[j.row];
        match j.test {
            Test::SetGet(p) => {
                let m = Measured { set: f[0], get: f[1], client_cores, server_cores };
                if p == 1 {
                    sv.runs.push([m, Measured::default()]);
                } else if let Some(last) = sv.runs.last_mut() {
                    last[1] = m;
                }
            }
            Test::Ping(p) => {
                if p == 1 {
                    sv.ping.push([(f[0], client_cores), (0.0, 0.0)]);
                } else if let Some(last) = sv.ping.last_mut() {
                    last[1] = (f[0], client_cores);
                }
            }
        }
        let done = match j.test {
            Test::SetGet(_) => format!("{label}: SET {}, GET {}", human::rate(f[0]), human::rate(f[1])),
            Test::Ping(_) => format!("{label}: {}", human::rate(f[0])),
        };
        pg.inc(&done);
    }
    drop(running);
    pg.finish();
    drop(pg);
    report(&a, &plan, &served, runs, started.elapsed().as_secs_f64())
}

/// `--cluster N`: for k = 1..=N, k fresh nodes on loopback, `pmkv cluster create`, then
/// `redis-benchmark --cluster` at P1 and P16 (plain redis-benchmark for one node, which
/// `--cluster` refuses); `--runs` rounds, each over every k.
fn cluster(a: &ServerArgs, n: u32) -> CmdResult {
    let started = Instant::now();
    let tmp = work_dir(a)?;
    let me = std::env::current_exe()?;
    let runs = a.runs.max(1) as usize;
    let total = runs * n as usize * 2;
    let keys = (0..total).map(|i| format!("{}-{}", i / 2 % n as usize, i % 2)).collect();
    let mut pg = Progress::with_keys(keys, a.quiet);
    pg.println(&format!(
        "pmkv bench server --cluster {n}: clusters of 1..{n} nodes x {runs} runs, {} requests per test ({} at P16)",
        thousands(a.requests),
        thousands(a.requests * 2)
    ));
    // [k-1] -> one [P1, P16] per run
    let mut got: Vec<Vec<[Measured; 2]>> = vec![Vec::new(); n as usize];
    for run in 0..runs {
        for k in 1..=n as usize {
            let mut nodes = Vec::new();
            for i in 0..k {
                let port = free_port()?;
                let pool = tmp.path().join(format!("node-{run}-{k}-{i}.pool"));
                let mut c = Command::new(&me);
                c.arg("serve").arg(&pool).args(["--cluster", "--port", &port.to_string(), "--mode", &a.mode]);
                c.args(["--initial-mib", "512", "--engine", &a.engine]);
                if let Some(t) = a.threads {
                    c.args(["--threads", &t.to_string()]);
                }
                let child =
                    c.stdout(Stdio::null()).stderr(Stdio::null()).spawn().map_err(|e| format!("pmkv serve: {e}"))?;
                let pid = child.id();
                nodes.push((port, pid, Guard(child), pool));
                wait_ready(port)?;
            }
            let addrs: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.0)).collect();
            let out = Command::new(&me).args(["cluster", "create"]).args(&addrs).output()?;
            if !out.status.success() {
                return Err(format!("pmkv cluster create: {}", String::from_utf8_lossy(&out.stderr).trim()).into());
            }
            let pids: Vec<u32> = nodes.iter().map(|n| n.1).collect();
            let mut m = [Measured::default(); 2];
            for (j, p) in [1u32, 16].into_iter().enumerate() {
                let label = format!("{k} node{} run {}/{runs}: SET+GET P{p}", if k > 1 { "s" } else { "" }, run + 1);
                pg.set(&label);
                let req = if p > 1 { a.requests * 2 } else { a.requests };
                // redis-benchmark refuses `--cluster` on one node ("Invalid cluster: 1
                // node(s)"); a node owning every slot serves any key, so it runs without.
                let extra: &[&str] = if k > 1 { &["--cluster"] } else { &[] };
                let (f, client_cores, server_cores) =
                    redis_benchmark_on(nodes[0].0, &pids, extra, a.clients, req, p, "set,get", &["SET", "GET"])?;
                m[j] = Measured { set: f[0], get: f[1], client_cores, server_cores };
                pg.inc(&format!("{label}: SET {}, GET {}", human::rate(f[0]), human::rate(f[1])));
            }
            got[k - 1].push(m);
            for (_, _, guard, pool) in nodes {
                drop(guard);
                let _ = pmkv::remove_pool(&pool);
            }
        }
    }
    pg.finish();
    drop(pg);
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    println!(
        "redis-benchmark --cluster, {} clients, 1M-key space, requests per second against clusters of pmkv serve --cluster \
         ({} {}), made by pmkv cluster create; median of {runs} runs, (min–max)",
        a.clients, a.engine, a.mode
    );
    print!("{}", node_table(&got, ["SET P1", "GET P1", "SET P16", "GET P16"], rps_cell, |m| (m.set, m.get)));
    println!();
    println!("cores used over each run (user + system CPU time / wall time): every node together, and redis-benchmark");
    let heads = ["nodes P1", "redis-benchmark P1", "nodes P16", "redis-benchmark P16"];
    print!("{}", node_table(&got, heads, cores_cell, |m| (m.server_cores, m.client_cores)));
    println!(
        "this machine has {cores} core{}: every node and redis-benchmark share {}, so a larger cluster here shows \
         the cost of the cluster (more processes and connections on the same cores), not scaling; scaling needs \
         a core or a machine per node and a client that is not the bottleneck",
        if cores == 1 { "" } else { "s" },
        if cores == 1 { "it" } else { "them" }
    );
    println!(
        "the client changes with the cluster too: one node is measured by plain redis-benchmark (one thread; \
         --cluster refuses a single node), a cluster of k nodes by redis-benchmark --cluster, which runs one \
         thread per node"
    );
    println!("{} ({runs} runs)", human::duration(started.elapsed().as_secs_f64()));
    Ok(())
}

/// The median and range of one figure over a row's runs.
fn spread_of(runs: &[[Measured; 2]], f: impl Fn(&[Measured; 2]) -> f64) -> Spread {
    let v: Vec<f64> = runs.iter().map(f).collect();
    stats::spread(&v).unwrap_or(Spread { median: f64::NAN, min: f64::NAN, max: f64::NAN, runs: 0 })
}

/// One markdown table with a row per cluster size (`got[k - 1]` holds the runs of `k` nodes):
/// the two figures `pick` takes from a run, at pipeline depth 1 then 16, each cell the
/// median and range over the runs as `cell` writes it. Both cluster tables share this so
/// their columns cannot drift apart.
fn node_table(
    got: &[Vec<[Measured; 2]>],
    headers: [&str; 4],
    cell: fn(&Spread) -> String,
    pick: impl Fn(&Measured) -> (f64, f64),
) -> String {
    let mut t = format!("| nodes | {} |\n|---:|---:|---:|---:|---:|\n", headers.join(" | "));
    for (k, r) in got.iter().enumerate() {
        let s = spreads_of(r, &pick);
        t += &format!("| {} | {} | {} | {} | {} |\n", k + 1, cell(&s[0]), cell(&s[1]), cell(&s[2]), cell(&s[3]));
    }
    t
}

/// The four columns of a row: the spreads of the two figures `pick` takes from a run, at
/// pipeline depth 1 then 16.
fn spreads_of(runs: &[[Measured; 2]], pick: impl Fn(&Measured) -> (f64, f64)) -> [Spread; 4] {
    [
        spread_of(runs, |m| pick(&m[0]).0),
        spread_of(runs, |m| pick(&m[0]).1),
        spread_of(runs, |m| pick(&m[1]).0),
        spread_of(runs, |m| pick(&m[1]).1),
    ]
}

/// A requests-per-second cell: `94.1 k (93.0 k–95.2 k)`.
fn rps_cell(s: &Spread) -> String {
    human::with_range(s.median, s.min, s.max, human::si)
}

/// A cores cell: `0.98 (0.95–0.99)`.
fn cores_cell(s: &Spread) -> String {
    human::with_range(s.median, s.min, s.max, |x| format!("{x:.2}"))
}

/// The tables, the ceiling, the ratios of medians and the plot.
fn report(a: &ServerArgs, plan: &[Row], served: &[Served], runs: usize, secs: f64) -> CmdResult {
    // (label, durability, spreads of SET P1, GET P1, SET P16, GET P16)
    let mut rows: Vec<(&Row, [Spread; 4])> = Vec::new();
    for (r, sv) in plan.iter().zip(served) {
        if sv.skipped.is_some() || sv.runs.is_empty() {
            continue;
        }
        let s = spreads_of(&sv.runs, |m| (m.set, m.get));
        rows.push((r, s));
    }
    println!(
        "redis-benchmark, {} clients, 1M-key space, SET and GET, requests per second (P1: no pipelining; P16: 16 per round trip); \
         median of {runs} runs in alternating rounds, (min–max) of the runs; {} requests per test in memory, {} on disk ({} at P16)",
        a.clients,
        thousands(a.requests),
        thousands(a.disk_requests),
        thousands(a.disk_requests * 2)
    );
    println!("| server | durability of a SET | requests (P1) | SET P1 | GET P1 | SET P16 | GET P16 |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (r, s) in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.label,
            r.durability,
            thousands(r.requests),
            rps_cell(&s[0]),
            rps_cell(&s[1]),
            rps_cell(&s[2]),
            rps_cell(&s[3])
        );
    }
    println!();
    println!("cores used over each run (user + system CPU time / wall time; redis-benchmark is one thread: near 1.0 it is the bottleneck); medians (min–max)");
    println!("| server | client P1 | server P1 | client P16 | server P16 |");
    println!("|---|---:|---:|---:|---:|");
    let mut busiest = [0.0f64; 2];
    for (r, sv) in plan.iter().zip(served) {
        if sv.skipped.is_some() || sv.runs.is_empty() {
            continue;
        }
        let c = spreads_of(&sv.runs, |m| (m.client_cores, m.server_cores));
        busiest[0] = busiest[0].max(c[0].max);
        busiest[1] = busiest[1].max(c[2].max);
        println!(
            "| {} | {} | {} | {} | {} |",
            r.label,
            cores_cell(&c[0]),
            cores_cell(&c[1]),
            cores_cell(&c[2]),
            cores_cell(&c[3])
        );
    }
    if busiest[0] > 0.9 || busiest[1] > 0.9 {
        println!(
            "the client used up to {:.2} (P1) and {:.2} (P16) of a core: where it is near 1.0 the figures are the client's ceiling, not the servers'",
            busiest[0], busiest[1]
        );
    }
    if let Some(sv) = plan.iter().zip(served).find(|(r, _)| r.ping).map(|(_, s)| s).filter(|s| !s.ping.is_empty()) {
        let at = |i: usize, f: fn(&(f64, f64)) -> f64| {
            stats::spread(&sv.ping.iter().map(|p| f(&p[i])).collect::<Vec<_>>()).unwrap_or(Spread {
                median: f64::NAN,
                min: f64::NAN,
                max: f64::NAN,
                runs: 0,
            })
        };
        println!(
            "ceiling: PING_MBULK (no data touched) against {NO_PERSISTENCE}: {} (P1, client {:.2} cores), {} (P16, client {:.2} cores) requests per second",
            rps_cell(&at(0, |p| p.0)),
            at(0, |p| p.1).median,
            rps_cell(&at(1, |p| p.0)),
            at(1, |p| p.1).median
        );
    }
    let find = |l: &str| rows.iter().find(|r| r.0.label == l).map(|r| r.1.map(|s| s.median));
    let pm = find(&plan[0].label);
    if let (Some(p), Some(always), Some(none)) = (pm, find("redis appendfsync always (memory)"), find(NO_PERSISTENCE)) {
        println!(
            "in memory (ratios of medians): pmkv durable SET / redis always: {:.2} (P1), {:.2} (P16); pmkv GET / redis without persistence: {:.2} (P1), {:.2} (P16)",
            p[0] / always[0],
            p[2] / always[2],
            p[1] / none[1],
            p[3] / none[3]
        );
    }
    for sync in ["always", "everysec"] {
        if let (Some(p), Some(r)) =
            (find(&disk_wal_label(&a.engine, sync)), find(&format!("redis appendfsync {sync} (disk)")))
        {
            println!(
                "on disk (ratios of medians, {} requests each): pmkv wal {sync} SET / redis {sync} SET: {:.2} (P1), {:.2} (P16); GET: {:.2} (P1), {:.2} (P16)",
                thousands(a.disk_requests),
                p[0] / r[0],
                p[2] / r[2],
                p[1] / r[1],
                p[3] / r[3]
            );
        }
    }
    if let Some(d) = plan.iter().find(|r| r.pmkv_mode.as_deref() == Some("msync")) {
        if let (Some(p), Some(always)) = (find(&d.label), find("redis appendfsync always (disk)")) {
            println!(
                "on disk: pmkv msync SET ({} requests) / redis always SET: {:.3} (P1), {:.3} (P16)",
                thousands(d.requests),
                p[0] / always[0],
                p[2] / always[2]
            );
        }
    }
    println!("{} ({runs} runs)", human::duration(secs));
    if let Some(out) = &a.out {
        let bars: Vec<(String, String, [f64; 4])> =
            rows.iter().map(|(r, s)| (r.label.clone(), r.durability.to_string(), s.map(|x| x.median))).collect();
        for f in plot(&bars, a.clients, out)? {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}

/// The table as grouped bars: one group per test, one bar per server.
fn plot(rows: &[(String, String, [f64; 4])], clients: u32, out: &Path) -> Result<Vec<PathBuf>, String> {
    use crate::plot::{render, Bars, Figure, Panel, PanelKind};
    let panel = |title: &str, cols: [usize; 2]| {
        let series = rows
            .iter()
            .enumerate()
            .map(|(i, (name, _, r))| Bars {
                name: name.clone(),
                color: i,
                values: cols.iter().map(|&c| Some(r[c])).collect(),
            })
            .collect();
        Panel::new(
            title,
            "test",
            "requests per second",
            false,
            PanelKind::Bars { categories: vec!["SET".into(), "GET".into()], series },
        )
    };
    let fig = Figure {
        title: format!("pmkv bench server: redis-benchmark, {clients} clients, 1M keys"),
        cols: 2,
        panels: vec![panel("no pipelining (P1)", [0, 1]), panel("16 per round trip (P16)", [2, 3])],
    };
    render(&fig, &out.join("server"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, ping: bool) -> Row {
        Row {
            label: label.into(),
            durability: "",
            pmkv_mode: None,
            pmkv_sync: None,
            redis_conf: &[],
            dir: PathBuf::new(),
            requests: 10,
            ping,
        }
    }

    /// The progress total is the list the loop runs: two tests per server and round, two
    /// more for the server that answers PING_MBULK, rounds alternating over the servers.
    #[test]
    fn the_plan_counts_every_benchmark_run() {
        let rows = [row("a", false), row(NO_PERSISTENCE, true), row("c", false)];
        let j = jobs(&rows, 3);
        assert_eq!(j.len(), 3 * (2 + 4 + 2));
        assert_eq!(j.iter().filter(|x| matches!(x.test, Test::Ping(_))).count(), 3 * 2);
        let order: Vec<(usize, usize)> = j.iter().map(|x| (x.run, x.row)).collect();
        assert_eq!(&order[..4], [(0, 0), (0, 0), (0, 1), (0, 1)]);
        assert_eq!(order[8], (1, 0), "round 2 starts after every server's round 1");
        assert_eq!(jobs(&rows, 0).len(), 8, "at least one round");
    }

    /// Both cluster tables: a row per cluster size, the picked figures at P1 then P16, each
    /// the median (range) over the runs; a size with no runs shows dashes.
    #[test]
    fn node_tables_put_each_figure_in_its_column() {
        let m = |set: f64, get: f64, c: f64, s: f64| Measured { set, get, client_cores: c, server_cores: s };
        let one = [
            [m(10_000.0, 20_000.0, 0.5, 0.25), m(30_000.0, 40_000.0, 0.75, 1.5)],
            [m(12_000.0, 20_000.0, 0.5, 0.25), m(30_000.0, 40_000.0, 0.75, 1.5)],
            [m(11_000.0, 20_000.0, 0.5, 0.25), m(30_000.0, 40_000.0, 0.75, 1.5)],
        ];
        let got = vec![one.to_vec(), Vec::new()];
        assert_eq!(
            node_table(&got, ["a", "b", "c", "d"], rps_cell, |m| (m.set, m.get)),
            "| nodes | a | b | c | d |\n|---:|---:|---:|---:|---:|\n| 1 | 11.0 k (10.0 k–12.0 k) | 20.0 k | 30.0 k | 40.0 k |\n\
             | 2 | – | – | – | – |\n"
        );
        let cores = node_table(&got, ["a", "b", "c", "d"], cores_cell, |m| (m.server_cores, m.client_cores));
        assert!(cores.ends_with("| 1 | 0.25 | 0.50 | 1.50 | 0.75 |\n| 2 | NaN | NaN | NaN | NaN |\n"), "{cores}");
    }

    #[test]
    fn labels_say_how_many_requests() {
        assert_eq!(test_label(Test::SetGet(1), 5_000), "SET+GET P1, 5,000 each");
        assert_eq!(test_label(Test::SetGet(16), 5_000), "SET+GET P16, 10,000 each");
    }
}
