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
//! /var/tmp): Redis `always` fsyncs the AOF, pmkv `msync` flushes the pool's pages. Needs
//! `redis-benchmark` and `redis-server` (Debian redis-tools, redis-server) on the PATH;
//! every server runs on loopback and in a temporary directory.
//!
//! **The load generator's own cost.** On a small machine redis-benchmark and the server
//! share the cores, and a figure is the server's only while the client has time to spare.
//! So each measurement also reports the cores each side used, from the kernel's own
//! accounting (the client's user + system time from `getrusage(RUSAGE_CHILDREN)` around its
//! run, the server's from `/proc/PID/stat`), divided by the wall time. A client at about
//! one core (redis-benchmark is one thread) is the ceiling of that column: every server
//! then shows the same figure, and no server can be measured above it on this machine.

use super::CmdResult;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct ServerArgs {
    /// Requests per test without pipelining (doubled with pipelining).
    #[arg(long, default_value_t = 100_000)]
    pub requests: u64,
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
    /// A directory on a disk, for the rows whose writes go to a device: pmkv `msync` and
    /// Redis `appendfsync always` with the AOF there. Empty (`--disk-dir ""`): skip those
    /// rows. (A string, not a path: clap refuses an empty path.)
    #[arg(long, default_value = "/var/tmp")]
    pub disk_dir: String,
    /// Worker threads of pmkv serve (default: its own default, half the cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Write server.png and server.svg here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn wait_ready(port: u16) -> Result<(), String> {
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

/// redis-benchmark's `tests` against `port` at one pipeline depth: each test's requests
/// per second (in the order of `names`, as redis-benchmark labels them), and the
/// (client, server) cores used over the run (the server is process `server`).
fn redis_benchmark(
    port: u16,
    server: u32,
    a: &ServerArgs,
    pipeline: u32,
    tests: &str,
    names: &[&str],
) -> Result<(Vec<f64>, f64, f64), String> {
    let n = if pipeline > 1 { a.requests * 2 } else { a.requests };
    let (c0, s0, t0) = (children_cpu(), process_cpu(server), Instant::now());
    let out = Command::new("redis-benchmark")
        .args(["-p", &port.to_string(), "-t", tests, "-r", "1000000", "--csv"])
        .args(["-n", &n.to_string(), "-c", &a.clients.to_string(), "-P", &pipeline.to_string()])
        .output()
        .map_err(|e| format!("redis-benchmark: {e} (install Debian's redis-tools)"))?;
    let wall = t0.elapsed().as_secs_f64().max(1e-9);
    let (c1, s1) = (children_cpu(), process_cpu(server));
    let text = String::from_utf8_lossy(&out.stdout);
    let rps = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("\"{name}\"")))
            .and_then(|l| l.split(',').nth(1))
            .and_then(|v| v.trim_matches('"').parse::<f64>().ok())
            .ok_or_else(|| format!("no {name} figure in redis-benchmark's output: {text}"))
    };
    let server_cores = match (s0, s1) {
        (Some(s0), Some(s1)) => (s1 - s0) / wall,
        _ => f64::NAN,
    };
    let figures = names.iter().map(|n| rps(n)).collect::<Result<Vec<f64>, String>>()?;
    Ok((figures, (c1 - c0) / wall, server_cores))
}

/// SET and GET at one pipeline depth.
fn benchmark(port: u16, server: u32, a: &ServerArgs, pipeline: u32) -> Result<Measured, String> {
    let (f, client_cores, server_cores) = redis_benchmark(port, server, a, pipeline, "set,get", &["SET", "GET"])?;
    Ok(Measured { set: f[0], get: f[1], client_cores, server_cores })
}

/// P1 and P16 measurements of one server, and with `ping` also PING_MBULK's requests per
/// second at P1 and P16: the cheapest request a server can be sent (no data touched), so
/// against Redis the most this client gets out of any real server on this machine.
fn run_one(name: &str, mut cmd: Command, port: u16, a: &ServerArgs, ping: bool) -> Result<Served, String> {
    let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().map_err(|e| format!("{name}: {e}"))?;
    let pid = child.id();
    let _g = Guard(child);
    wait_ready(port)?;
    let runs = [benchmark(port, pid, a, 1)?, benchmark(port, pid, a, 16)?];
    let ping = if ping {
        let p1 = redis_benchmark(port, pid, a, 1, "ping_mbulk", &["PING_MBULK"])?;
        let p16 = redis_benchmark(port, pid, a, 16, "ping_mbulk", &["PING_MBULK"])?;
        Some([(p1.0[0], p1.1), (p16.0[0], p16.1)])
    } else {
        None
    };
    Ok(Served { runs, ping })
}

/// What [`run_one`] measured: SET/GET at P1 and P16, and PING_MBULK's requests per second
/// with the client's cores at P1 and P16 if asked.
struct Served {
    runs: [Measured; 2],
    ping: Option<[(f64, f64); 2]>,
}

/// One server to measure: label, what a SET's reply promises, how to start it.
struct Row {
    label: String,
    durability: &'static str,
    pmkv_mode: Option<String>,
    redis_conf: &'static [&'static str],
    dir: PathBuf,
}

/// The row whose server also answers PING_MBULK for the ceiling line.
const NO_PERSISTENCE: &str = "redis, no persistence";

const ALWAYS: &[&str] = &["--appendonly", "yes", "--appendfsync", "always"];

pub fn run(a: ServerArgs) -> CmdResult {
    let tmp = match &a.dir {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir())?,
    };
    let disk = if a.disk_dir.is_empty() { None } else { Some(tempfile::tempdir_in(&a.disk_dir)?) };
    let mem = tmp.path().to_path_buf();
    let disk_label = format!("pmkv serve ({} msync, disk)", a.engine);
    let mut plan = vec![
        Row {
            label: format!("pmkv serve ({} {}, memory)", a.engine, a.mode),
            durability: "persistent before the reply",
            pmkv_mode: Some(a.mode.clone()),
            redis_conf: &[],
            dir: mem.clone(),
        },
        Row {
            label: "redis appendfsync always (memory)".into(),
            durability: "AOF write + fsync before the reply (fsync of tmpfs: no-op)",
            pmkv_mode: None,
            redis_conf: ALWAYS,
            dir: mem.clone(),
        },
        Row {
            label: "redis appendfsync everysec (memory)".into(),
            durability: "AOF, up to 1 s lost",
            pmkv_mode: None,
            redis_conf: &["--appendonly", "yes", "--appendfsync", "everysec"],
            dir: mem.clone(),
        },
        Row {
            label: NO_PERSISTENCE.into(),
            durability: "none",
            pmkv_mode: None,
            redis_conf: &["--appendonly", "no", "--save", ""],
            dir: mem.clone(),
        },
    ];
    if let Some(d) = &disk {
        let d = d.path().to_path_buf();
        plan.push(Row {
            label: disk_label.clone(),
            durability: "msync'd to the device before the reply",
            pmkv_mode: Some("msync".into()),
            redis_conf: &[],
            dir: d.clone(),
        });
        plan.push(Row {
            label: "redis appendfsync always (disk)".into(),
            durability: "fsync'd to the device before the reply",
            pmkv_mode: None,
            redis_conf: ALWAYS,
            dir: d,
        });
    }
    let me = std::env::current_exe()?;
    let mut rows: Vec<(String, String, [f64; 4])> = Vec::new();
    let mut cores: Vec<(String, [Measured; 2])> = Vec::new();
    let mut ceiling: Option<[(f64, f64); 2]> = None;
    for (i, row) in plan.iter().enumerate() {
        let port = free_port()?;
        let sub = row.dir.join(format!("server-{i}"));
        std::fs::create_dir_all(&sub)?;
        let cmd = match &row.pmkv_mode {
            Some(mode) => {
                let mut c = Command::new(&me);
                c.arg("serve").arg(sub.join("bench.pool")).args(["--port", &port.to_string(), "--mode", mode]);
                c.args(["--initial-mib", "512", "--engine", &a.engine]);
                if let Some(t) = a.threads {
                    c.args(["--threads", &t.to_string()]);
                }
                c
            }
            None => {
                let mut c = Command::new("redis-server");
                c.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"]).arg(&sub).args(row.redis_conf);
                c
            }
        };
        let ping = row.label == NO_PERSISTENCE;
        match run_one(&row.label, cmd, port, &a, ping) {
            Ok(Served { runs: [p1, p16], ping: p }) => {
                rows.push((row.label.clone(), row.durability.into(), [p1.set, p1.get, p16.set, p16.get]));
                cores.push((row.label.clone(), [p1, p16]));
                if p.is_some() {
                    ceiling = p;
                }
            }
            Err(e) if row.pmkv_mode.is_none() => {
                eprintln!("{}: skipped ({e}; install Debian's redis-server)", row.label)
            }
            Err(e) => return Err(e.into()),
        }
    }
    println!(
        "redis-benchmark, {} clients, 1M-key space, SET and GET, requests per second (P1: no pipelining; P16: 16 per round trip)",
        a.clients
    );
    println!("| server | durability of a SET | SET P1 | GET P1 | SET P16 | GET P16 |");
    println!("|---|---|---:|---:|---:|---:|");
    for (n, d, r) in &rows {
        println!("| {n} | {d} | {:.0} | {:.0} | {:.0} | {:.0} |", r[0], r[1], r[2], r[3]);
    }
    println!();
    println!("cores used over each run (user + system CPU time / wall time; redis-benchmark is one thread: near 1.0 it is the bottleneck)");
    println!("| server | client P1 | server P1 | client P16 | server P16 |");
    println!("|---|---:|---:|---:|---:|");
    for (n, [p1, p16]) in &cores {
        println!(
            "| {n} | {:.2} | {:.2} | {:.2} | {:.2} |",
            p1.client_cores, p1.server_cores, p16.client_cores, p16.server_cores
        );
    }
    let busiest = |i: usize| cores.iter().map(|c| c.1[i].client_cores).fold(0.0, f64::max);
    if busiest(0) > 0.9 || busiest(1) > 0.9 {
        println!(
            "the client used up to {:.2} (P1) and {:.2} (P16) of a core: where it is near 1.0 the figures are the client's ceiling, not the servers'",
            busiest(0),
            busiest(1)
        );
    }
    if let Some([(p1, c1), (p16, c16)]) = ceiling {
        println!(
            "ceiling: PING_MBULK (no data touched) against {NO_PERSISTENCE}: {p1:.0} (P1, client {c1:.2} cores), {p16:.0} (P16, client {c16:.2} cores) requests per second"
        );
    }
    let find = |l: &str| rows.iter().find(|r| r.0 == l).map(|r| r.2);
    let pm = find(&plan[0].label);
    if let (Some(p), Some(always), Some(none)) = (pm, find("redis appendfsync always (memory)"), find(NO_PERSISTENCE)) {
        println!(
            "in memory: pmkv durable SET / redis always: {:.2} (P1), {:.2} (P16); pmkv GET / redis without persistence: {:.2} (P1), {:.2} (P16)",
            p[0] / always[0],
            p[2] / always[2],
            p[1] / none[1],
            p[3] / none[3]
        );
    }
    if let (Some(p), Some(always)) = (find(&disk_label), find("redis appendfsync always (disk)")) {
        println!(
            "on disk: pmkv msync SET / redis always SET: {:.2} (P1), {:.2} (P16)",
            p[0] / always[0],
            p[2] / always[2]
        );
    }
    if let Some(out) = &a.out {
        for f in plot(&rows, a.clients, out)? {
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
