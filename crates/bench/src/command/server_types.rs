//! `pmkv bench server --types`: lists, sets and sorted sets in `pmkv serve` beside
//! Redis. redis-benchmark's own `-t lpush,rpop,sadd,spop,zadd,zpopmin`, then ZRANGEBYSCORE
//! (ten members from a random score on) and ZRANK (a random member) on a sorted set of
//! `--members` (1M) members, at P1 and P16; pmkv (`--mode`, `adr` by default: durable on
//! emulated PM) beside Redis with `appendfsync always`, its AOF on the same medium as
//! pmkv's pool (/dev/shm unless `--dir`). Each server is fresh in every round, rounds
//! alternate (pmkv, Redis, pmkv, ...), and the table gives the median and range of
//! `--runs` rounds with pmkv's ratio to Redis.
//!
//! **Memory per member** of the big sorted set: for pmkv, the pool bytes its INFO
//! reports in use (`pmkv_pm_bytes`) and the server's resident memory, each as its growth
//! over the fill divided by the members, and the growth of resident memory when the
//! first ZRANK builds the set's DRAM rank index; for Redis, `used_memory`'s growth (its
//! resident memory is given too). The fill is ZADD in batches of 1,000 members, pipelined;
//! the one ZRANK that builds pmkv's index is sent before the measurement (its time is
//! printed, not counted in the figures).

use super::server::{free_port, redis_benchmark_args, wait_ready, work_dir, Guard, ServerArgs};
use super::CmdResult;
use crate::human::{self, thousands};
use crate::stats;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// redis-benchmark's built-in tests, as `-t` names them and as its CSV labels them.
const BUILTIN: &str = "lpush,rpop,sadd,spop,zadd,zpopmin";
const BUILTIN_NAMES: &[&str] = &["LPUSH", "RPOP", "SADD", "SPOP", "ZADD", "ZPOPMIN"];
/// The big sorted set (not redis-benchmark's `myzset`, which its ZADD and ZPOPMIN use).
const BIG: &str = "bigzset";
/// The commands on the big set (redis-benchmark puts a random 12-digit number, below
/// `-r`, for each `__rand_int__`, and labels the CSV row with the command as given).
const ZRANGEBYSCORE: &str = "ZRANGEBYSCORE bigzset __rand_int__ +inf LIMIT 0 10";
const ZRANK: &str = "ZRANK bigzset member:__rand_int__";
/// Column labels, in the order of a round's figures.
const LABELS: &[&str] = &["LPUSH", "RPOP", "SADD", "SPOP", "ZADD", "ZPOPMIN", "ZRANGEBYSCORE", "ZRANK"];

/// One round of one server: requests per second of each of [`LABELS`] at P1 and P16, and
/// memory.
struct Round {
    rps: [Vec<f64>; 2],
    /// Bytes per member: pmkv (pool, resident, rank index); Redis (used_memory, resident, 0).
    mem: [f64; 3],
    fill_secs: f64,
    first_rank_secs: f64,
}

/// A minimal RESP client for the fill and INFO.
struct Conn {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Conn {
    fn new(port: u16) -> std::io::Result<Conn> {
        let w = TcpStream::connect(("127.0.0.1", port))?;
        Ok(Conn { r: BufReader::new(w.try_clone()?), w })
    }

    fn send(&mut self, args: &[&[u8]]) -> std::io::Result<()> {
        let mut b = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            b.extend_from_slice(a);
            b.extend_from_slice(b"\r\n");
        }
        self.w.write_all(&b)
    }

    /// One reply, as text (an array's items joined by newlines).
    fn reply(&mut self) -> Result<String, String> {
        let mut line = String::new();
        self.r.read_line(&mut line).map_err(|e| e.to_string())?;
        let line = line.trim_end().to_string();
        match line.split_at_checked(1) {
            Some(("$", n)) => {
                let n: i64 = n.parse().map_err(|_| format!("bad reply {line}"))?;
                if n < 0 {
                    return Ok(String::new());
                }
                let mut b = vec![0u8; n as usize + 2];
                std::io::Read::read_exact(&mut self.r, &mut b).map_err(|e| e.to_string())?;
                Ok(String::from_utf8_lossy(&b[..n as usize]).into_owned())
            }
            Some(("*", n)) => {
                let n: i64 = n.parse().map_err(|_| format!("bad reply {line}"))?;
                (0..n.max(0)).map(|_| self.reply()).collect::<Result<Vec<_>, _>>().map(|v| v.join("\n"))
            }
            Some(("-", e)) => Err(e.to_string()),
            Some((_, rest)) => Ok(rest.to_string()),
            None => Err("the server closed the connection".into()),
        }
    }

    fn cmd(&mut self, args: &[&str]) -> Result<String, String> {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.send(&a).map_err(|e| e.to_string())?;
        self.reply()
    }

    /// Field `name` of INFO `section`, as a number.
    fn info(&mut self, section: &str, name: &str) -> Result<f64, String> {
        let text = self.cmd(&["INFO", section])?;
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| format!("no {name} in INFO {section}"))
    }
}

/// Resident memory of process `pid`, in bytes (`/proc/PID/status` VmRSS).
fn rss(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb * 1024.0)
}

/// ZADD `members` members `member:NNNNNNNNNNNN` (redis-benchmark's `__rand_int__` form)
/// with score N into [`BIG`], 1,000 per command, pipelined 16 commands deep.
fn fill(c: &mut Conn, members: u64) -> Result<(), String> {
    const BATCH: u64 = 1000;
    let mut pending = 0;
    let mut i = 0;
    while i < members {
        let mut args: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), BIG.as_bytes().to_vec()];
        for n in i..(i + BATCH).min(members) {
            args.push(n.to_string().into_bytes());
            args.push(format!("member:{n:012}").into_bytes());
        }
        i += BATCH;
        let a: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        c.send(&a).map_err(|e| e.to_string())?;
        pending += 1;
        if pending == 16 {
            for _ in 0..pending {
                c.reply()?;
            }
            pending = 0;
        }
    }
    for _ in 0..pending {
        c.reply()?;
    }
    Ok(())
}

/// Start server `pmkv` (or Redis) in `dir`, fill it, measure it.
fn round(a: &ServerArgs, me: &Path, pmkv: bool, dir: &Path, say: &dyn Fn(&str)) -> Result<Round, String> {
    let port = free_port().map_err(|e| e.to_string())?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut c = if pmkv {
        let mut c = Command::new(me);
        c.arg("serve").arg(dir.join("bench.pool")).args(["--port", &port.to_string(), "--mode", &a.mode]);
        c.args(["--initial-mib", "1024", "--engine", &a.engine]);
        if let Some(t) = a.threads {
            c.args(["--threads", &t.to_string()]);
        }
        c
    } else {
        let mut c = Command::new("redis-server");
        c.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""]);
        c.args(["--appendonly", "yes", "--appendfsync", "always", "--dir"]).arg(dir);
        c
    };
    let child = c.stdout(Stdio::null()).stderr(Stdio::null()).spawn().map_err(|e| format!("start: {e}"))?;
    let pid = child.id();
    let _guard = Guard(child);
    wait_ready(port)?;
    let mut conn = Conn::new(port).map_err(|e| e.to_string())?;
    let used = |c: &mut Conn| c.info("memory", if pmkv { "pmkv_pm_bytes" } else { "used_memory" });
    let (u0, r0) = (used(&mut conn)?, rss(pid));
    let t = Instant::now();
    fill(&mut conn, a.members)?;
    let fill_secs = t.elapsed().as_secs_f64();
    let (u1, r1) = (used(&mut conn)?, rss(pid));
    let t = Instant::now();
    conn.cmd(&["ZRANK", BIG, &format!("member:{:012}", a.members / 2)])?;
    let first_rank_secs = t.elapsed().as_secs_f64();
    let r2 = rss(pid);
    let n = a.members as f64;
    let mem = [(u1 - u0) / n, (r1 - r0) / n, if pmkv { (r2 - r1) / n } else { 0.0 }];
    say(&format!("filled {} members in {}", thousands(a.members), human::duration(fill_secs)));
    let mut rps = [Vec::new(), Vec::new()];
    for (j, p) in [1u32, 16].into_iter().enumerate() {
        let req = if p > 1 { a.requests * 2 } else { a.requests };
        let base: Vec<String> =
            ["-n", &req.to_string(), "-c", &a.clients.to_string(), "-P", &p.to_string()].map(String::from).to_vec();
        let mut args = base.clone();
        args.extend(["-t".to_string(), BUILTIN.to_string()]);
        let (f, _, _) = redis_benchmark_args(port, &[pid], &args, BUILTIN_NAMES)?;
        rps[j].extend(f);
        for cmd in [ZRANGEBYSCORE, ZRANK] {
            let mut args = base.clone();
            args.extend(cmd.split(' ').map(String::from));
            let (f, _, _) = redis_benchmark_args(port, &[pid], &args, &[cmd])?;
            rps[j].extend(f);
        }
        say(&format!("P{p}: {}", rps[j].iter().map(|x| human::rate(*x)).collect::<Vec<_>>().join(", ")));
    }
    Ok(Round { rps, mem, fill_secs, first_rank_secs })
}

fn cell(xs: &[f64], f: impl Fn(f64) -> String) -> String {
    stats::spread(xs).map_or("–".into(), |s| human::with_range(s.median, s.min, s.max, f))
}

fn median(xs: &[f64]) -> f64 {
    stats::median(xs).unwrap_or(f64::NAN)
}

pub fn run(a: &ServerArgs) -> CmdResult {
    let started = Instant::now();
    let tmp = work_dir(a)?;
    let me = std::env::current_exe()?;
    let runs = a.runs.max(1) as usize;
    let mut got: [Vec<Round>; 2] = [Vec::new(), Vec::new()];
    for run in 0..runs {
        for (s, pmkv) in [true, false].into_iter().enumerate() {
            let name = if pmkv { "pmkv" } else { "redis" };
            let say = |m: &str| {
                if !a.quiet {
                    eprintln!(
                        "[{name} run {}/{runs}, {}] {m}",
                        run + 1,
                        human::duration(started.elapsed().as_secs_f64())
                    );
                }
            };
            let dir = tmp.path().join(format!("{name}-{run}"));
            let r = round(a, &me, pmkv, &dir, &say)?;
            if pmkv {
                let _ = pmkv::remove_pool(&dir.join("bench.pool"));
            }
            let _ = std::fs::remove_dir_all(&dir);
            got[s].push(r);
        }
    }
    println!(
        "redis-benchmark, {} clients, {} requests per test at P1 ({} at P16); ZRANGEBYSCORE (LIMIT 0 10 from a random \
         score) and ZRANK (a random member) on a {}-member sorted set; requests per second, median of {runs} \
         alternating rounds (min–max); pmkv serve --mode {} --engine {} beside redis-server --appendonly yes \
         --appendfsync always, both on {}",
        a.clients,
        thousands(a.requests),
        thousands(a.requests * 2),
        thousands(a.members),
        a.mode,
        a.engine,
        a.dir.as_deref().map_or("/dev/shm".into(), |d| d.display().to_string())
    );
    println!();
    println!("| test | pmkv P1 | Redis always P1 | ratio | pmkv P16 | Redis always P16 | ratio |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (i, label) in LABELS.iter().enumerate() {
        let col = |s: usize, j: usize| got[s].iter().map(|r| r.rps[j][i]).collect::<Vec<f64>>();
        let ratio = |j: usize| format!("{:.2}x", median(&col(0, j)) / median(&col(1, j)));
        println!(
            "| {label} | {} | {} | {} | {} | {} | {} |",
            cell(&col(0, 0), human::si),
            cell(&col(1, 0), human::si),
            ratio(0),
            cell(&col(0, 1), human::si),
            cell(&col(1, 1), human::si),
            ratio(1)
        );
    }
    println!();
    let mem = |s: usize, k: usize| got[s].iter().map(|r| r.mem[k]).collect::<Vec<f64>>();
    let bytes = |x: f64| format!("{x:.0}");
    println!(
        "memory per member of the {}-member sorted set (bytes; growth over the fill / members)",
        thousands(a.members)
    );
    println!();
    println!("| server | pool (PM) or used_memory | resident (DRAM) | rank index (DRAM) | fill | first ZRANK |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (s, name) in [(0, "pmkv"), (1, "Redis always")] {
        let secs = |f: fn(&Round) -> f64| human::duration(median(&got[s].iter().map(f).collect::<Vec<_>>()));
        println!(
            "| {name} | {} | {} | {} | {} | {} |",
            cell(&mem(s, 0), bytes),
            cell(&mem(s, 1), bytes),
            if s == 0 { cell(&mem(s, 2), bytes) } else { "–".into() },
            secs(|r| r.fill_secs),
            secs(|r| r.first_rank_secs)
        );
    }
    println!(
        "pmkv's first ZRANK on the set builds its DRAM rank index from the score index records (a scan); it is \
         sent before the measurement and its time is the last column. pmkv's pool column is PM, its resident \
         column DRAM (the keyspace and the engine's DRAM parts); Redis keeps everything in DRAM (used_memory)."
    );
    println!("{} ({runs} runs)", human::duration(started.elapsed().as_secs_f64()));
    Ok(())
}
