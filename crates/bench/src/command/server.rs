//! `pmkv bench server` (issue "pmkv serve"): redis-benchmark against `pmkv serve` and
//! against Debian's redis-server with `appendfsync always`, `appendfsync everysec` and no
//! persistence, in one run: 50 clients, SET and GET over a 1M-key space, without
//! pipelining and with 16 requests per round trip. Prints a Markdown table with each
//! figure's ratio to Redis in the same run (durable SET against `always`, GET against no
//! persistence). Needs `redis-benchmark` and `redis-server` (Debian redis-tools,
//! redis-server) on the PATH; every server runs on loopback and in a temporary directory.

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
    /// Where pools and Redis files go (default: a temporary directory on /dev/shm).
    #[arg(long)]
    pub dir: Option<PathBuf>,
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

pub fn run(a: ServerArgs) -> CmdResult {
    let tmp = match &a.dir {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir())?,
    };
    let dir: &Path = tmp.path();
    let me = std::env::current_exe()?;
    let mut rows: Vec<(String, String, [f64; 4])> = Vec::new();
    let port = free_port()?;
    let mut pmkv = Command::new(&me);
    pmkv.args(["serve", dir.join("bench.pool").to_str().unwrap_or("bench.pool"), "--port", &port.to_string()]).args([
        "--mode",
        &a.mode,
        "--initial-mib",
        "512",
    ]);
    let r = run_one("pmkv serve", pmkv, port, &a)?;
    rows.push((format!("pmkv serve ({})", a.mode), "persistent before the reply".into(), r));
    for (label, durability, conf) in [
        (
            "redis appendfsync always",
            "fsync'd AOF before the reply",
            &["--appendonly", "yes", "--appendfsync", "always"][..],
        ),
        (
            "redis appendfsync everysec",
            "AOF, up to 1 s lost",
            &["--appendonly", "yes", "--appendfsync", "everysec"][..],
        ),
        ("redis, no persistence", "none", &["--appendonly", "no", "--save", ""][..]),
    ] {
        let port = free_port()?;
        let rdir = dir.join(label.replace(' ', "-"));
        std::fs::create_dir_all(&rdir)?;
        let mut redis = Command::new("redis-server");
        redis.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"]).arg(&rdir).args(conf);
        match run_one(label, redis, port, &a) {
            Ok(r) => rows.push((label.into(), durability.into(), r)),
            Err(e) => eprintln!("{label}: skipped ({e}; install Debian's redis-server)"),
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
    if let (Some(p), Some(always), Some(none)) =
        (rows.first().map(|r| r.2), find("redis appendfsync always"), find("redis, no persistence"))
    {
        println!(
            "pmkv durable SET / redis always: {:.2} (P1), {:.2} (P16); pmkv GET / redis without persistence: {:.2} (P1), {:.2} (P16)",
            p[0] / always[0],
            p[2] / always[2],
            p[1] / none[1],
            p[3] / none[3]
        );
    }
    Ok(())
}
