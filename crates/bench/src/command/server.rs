//! `pmkv bench server` (issue "pmkv serve"): redis-benchmark against `pmkv serve` and
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
    /// Where the in-memory pools and Redis files go (default: a temporary directory on
    /// /dev/shm).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// A directory on a disk, for the rows whose writes go to a device: pmkv `msync` and
    /// Redis `appendfsync always` with the AOF there. Empty: skip those rows.
    #[arg(long, default_value = "/var/tmp")]
    pub disk_dir: PathBuf,
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

/// (SET, GET) requests per second, from redis-benchmark's CSV.
fn benchmark(port: u16, a: &ServerArgs, pipeline: u32) -> Result<(f64, f64), String> {
    let n = if pipeline > 1 { a.requests * 2 } else { a.requests };
    let out = Command::new("redis-benchmark")
        .args(["-p", &port.to_string(), "-t", "set,get", "-r", "1000000", "--csv"])
        .args(["-n", &n.to_string(), "-c", &a.clients.to_string(), "-P", &pipeline.to_string()])
        .output()
        .map_err(|e| format!("redis-benchmark: {e} (install Debian's redis-tools)"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let rps = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("\"{name}\"")))
            .and_then(|l| l.split(',').nth(1))
            .and_then(|v| v.trim_matches('"').parse::<f64>().ok())
            .ok_or_else(|| format!("no {name} figure in redis-benchmark's output: {text}"))
    };
    Ok((rps("SET")?, rps("GET")?))
}

fn run_one(name: &str, mut cmd: Command, port: u16, a: &ServerArgs) -> Result<[f64; 4], String> {
    let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().map_err(|e| format!("{name}: {e}"))?;
    let _g = Guard(child);
    wait_ready(port)?;
    let (s1, g1) = benchmark(port, a, 1)?;
    let (s16, g16) = benchmark(port, a, 16)?;
    Ok([s1, g1, s16, g16])
}

/// One server to measure: label, what a SET's reply promises, how to start it.
struct Row {
    label: String,
    durability: &'static str,
    pmkv_mode: Option<String>,
    redis_conf: &'static [&'static str],
    dir: PathBuf,
}

const ALWAYS: &[&str] = &["--appendonly", "yes", "--appendfsync", "always"];

pub fn run(a: ServerArgs) -> CmdResult {
    let tmp = match &a.dir {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir())?,
    };
    let disk = if a.disk_dir.as_os_str().is_empty() { None } else { Some(tempfile::tempdir_in(&a.disk_dir)?) };
    let mem = tmp.path().to_path_buf();
    let mut plan = vec![
        Row {
            label: format!("pmkv serve ({}, memory)", a.mode),
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
            label: "redis, no persistence".into(),
            durability: "none",
            pmkv_mode: None,
            redis_conf: &["--appendonly", "no", "--save", ""],
            dir: mem.clone(),
        },
    ];
    if let Some(d) = &disk {
        let d = d.path().to_path_buf();
        plan.push(Row {
            label: "pmkv serve (msync, disk)".into(),
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
    for (i, row) in plan.iter().enumerate() {
        let port = free_port()?;
        let sub = row.dir.join(format!("server-{i}"));
        std::fs::create_dir_all(&sub)?;
        let cmd = match &row.pmkv_mode {
            Some(mode) => {
                let mut c = Command::new(&me);
                c.arg("serve").arg(sub.join("bench.pool")).args(["--port", &port.to_string(), "--mode", mode]);
                c.args(["--initial-mib", "512"]);
                c
            }
            None => {
                let mut c = Command::new("redis-server");
                c.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"]).arg(&sub).args(row.redis_conf);
                c
            }
        };
        match run_one(&row.label, cmd, port, &a) {
            Ok(r) => rows.push((row.label.clone(), row.durability.into(), r)),
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
    let find = |l: &str| rows.iter().find(|r| r.0 == l).map(|r| r.2);
    let pm = find(&plan[0].label);
    if let (Some(p), Some(always), Some(none)) =
        (pm, find("redis appendfsync always (memory)"), find("redis, no persistence"))
    {
        println!(
            "in memory: pmkv durable SET / redis always: {:.2} (P1), {:.2} (P16); pmkv GET / redis without persistence: {:.2} (P1), {:.2} (P16)",
            p[0] / always[0],
            p[2] / always[2],
            p[1] / none[1],
            p[3] / none[3]
        );
    }
    if let (Some(p), Some(always)) = (find("pmkv serve (msync, disk)"), find("redis appendfsync always (disk)")) {
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
