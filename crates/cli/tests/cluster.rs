//! `pmkv cluster` against real `pmkv serve --cluster` nodes on loopback: create and check;
//! reshard A -> B and back while a writer keeps writing; add-node and rebalance; fix after
//! the source of a reshard is SIGKILLed mid-migration and restarted; a password. Every
//! write the writer had acknowledged must end present once, on the node owning its slot,
//! with its acknowledged value (or a later one whose acknowledgement was lost to a kill).
//!
//! The writer is a small cluster-aware client written here: it routes by CRC16 slot,
//! follows `-MOVED` (remembering the new owner) and `-ASK` (one `ASKING` first), and retries
//! `-TRYAGAIN`.

mod common;
use common::*;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SLOTS: usize = 16_384;

/// Redis's key slot: CRC16 (XMODEM) of the key or of its hash tag, modulo 16,384.
fn key_slot(k: &[u8]) -> usize {
    let mut k = k;
    if let Some(s) = k.iter().position(|&c| c == b'{') {
        if let Some(e) = k[s + 1..].iter().position(|&c| c == b'}') {
            if e > 0 {
                k = &k[s + 1..s + 1 + e];
            }
        }
    }
    let mut crc = 0u16;
    for &x in k {
        crc ^= (x as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc as usize % SLOTS
}

#[derive(Clone, Debug, PartialEq)]
enum R {
    Simple(String),
    Err(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Arr(Vec<R>),
}

fn read_r(r: &mut impl BufRead) -> std::io::Result<R> {
    let mut l = Vec::new();
    if r.read_until(b'\n', &mut l)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let l = String::from_utf8_lossy(&l[..l.len().saturating_sub(2)]).into_owned();
    let (t, rest) = l.split_at(1);
    Ok(match t {
        "+" => R::Simple(rest.into()),
        "-" => R::Err(rest.into()),
        ":" => R::Int(rest.parse().unwrap()),
        "$" => {
            let n: i64 = rest.parse().unwrap();
            if n < 0 {
                R::Bulk(None)
            } else {
                let mut b = vec![0u8; n as usize + 2];
                r.read_exact(&mut b)?;
                b.truncate(n as usize);
                R::Bulk(Some(b))
            }
        }
        "*" => {
            let n: i64 = rest.parse().unwrap();
            R::Arr((0..n.max(0)).map(|_| read_r(r)).collect::<std::io::Result<_>>()?)
        }
        _ => panic!("reply {l:?}"),
    })
}

struct Conn(BufReader<TcpStream>);

impl Conn {
    fn open(addr: &str) -> std::io::Result<Conn> {
        let s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Conn(BufReader::new(s)))
    }

    fn call(&mut self, args: &[&[u8]]) -> std::io::Result<R> {
        let mut b = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            b.extend_from_slice(a);
            b.extend_from_slice(b"\r\n");
        }
        self.0.get_mut().write_all(&b)?;
        read_r(&mut self.0)
    }

    fn cmd(&mut self, args: &[&str]) -> R {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.call(&a).unwrap()
    }
}

/// A cluster-aware client: routes a keyed command by its slot and follows redirections.
struct Client {
    seeds: Vec<String>,
    owner: Vec<Option<String>>,
    conns: HashMap<String, Conn>,
    redirects: u64,
}

impl Client {
    fn new(seeds: &[String]) -> Client {
        Client { seeds: seeds.to_vec(), owner: vec![None; SLOTS], conns: HashMap::new(), redirects: 0 }
    }

    /// Run a command whose first argument after the name is its key. `Err`: no answer (the
    /// command may or may not have been applied).
    fn exec(&mut self, args: &[&[u8]]) -> Result<R, String> {
        let slot = key_slot(args[1]);
        let mut addr = self.owner[slot].clone().unwrap_or_else(|| self.seeds[slot % self.seeds.len()].clone());
        let mut asking = false;
        for _ in 0..50 {
            if !self.conns.contains_key(&addr) {
                let c = Conn::open(&addr).map_err(|e| format!("{addr}: {e}"))?;
                self.conns.insert(addr.clone(), c);
            }
            let c = self.conns.get_mut(&addr).unwrap();
            let r = (|| {
                if asking {
                    assert_eq!(c.call(&[b"ASKING"])?, R::Simple("OK".into()));
                }
                c.call(args)
            })();
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    self.conns.remove(&addr);
                    return Err(format!("{addr}: {e}"));
                }
            };
            asking = false;
            match &r {
                R::Err(e) if e.starts_with("MOVED ") || e.starts_with("ASK ") => {
                    self.redirects += 1;
                    let to = e.rsplit(' ').next().unwrap().to_string();
                    if e.starts_with("MOVED ") {
                        self.owner[slot] = Some(to.clone());
                    } else {
                        asking = true;
                    }
                    addr = to;
                }
                R::Err(e) if e.starts_with("TRYAGAIN") || e.starts_with("CLUSTERDOWN") => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => return Ok(r),
            }
        }
        Err(format!("{args:?}: redirected 50 times"))
    }
}

/// A node: its process (SIGKILLed when dropped), pool and port.
struct Node {
    child: Option<Child>,
    pool: std::path::PathBuf,
    port: u16,
}

impl Node {
    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn start(pool: &std::path::Path, port: u16, extra: &[&str]) -> Node {
        // A port just left by a killed node may take a moment to be free again.
        for _ in 0..100 {
            let mut child = pmkv_command()
                .args(["serve", pool.to_str().unwrap(), "--cluster", "--port", &port.to_string(), "--mode", "adr"])
                .args(extra)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut line = String::new();
            BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
            if let Some(p) = line.trim().rsplit(':').next().and_then(|p| p.parse().ok()) {
                return Node { child: Some(child), pool: pool.to_path_buf(), port: p };
            }
            let _ = child.wait();
            assert_ne!(port, 0, "pmkv serve --cluster did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("port {port} stayed busy");
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

fn start_nodes(dir: &std::path::Path, n: usize, extra: &[&str]) -> Vec<Node> {
    (0..n).map(|i| Node::start(&dir.join(format!("node{i}.pool")), 0, extra)).collect()
}

fn cluster(args: &[&str]) -> Output {
    let mut a = vec!["cluster"];
    a.extend_from_slice(args);
    pmkv(&a)
}

#[track_caller]
fn ok(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "stdout {} stderr {}", text(&o.stdout), text(&o.stderr));
    text(&o.stdout)
}

/// What the writer did to each key: its last acknowledged value, and the values sent
/// after it whose reply never came (any of them may have landed).
#[derive(Default, Debug)]
struct Written {
    acked: Option<String>,
    unsure: Vec<String>,
}

type Log = BTreeMap<String, Written>;

fn record(log: &mut Log, k: &str, v: String, r: Result<R, String>) {
    let w = log.entry(k.to_string()).or_default();
    match r {
        Ok(R::Simple(s)) if s == "OK" => {
            w.acked = Some(v);
            w.unsure.clear();
        }
        Ok(r) => panic!("SET {k}: {r:?}"),
        Err(_) => w.unsure.push(v),
    }
}

/// Keys `prefix{i}` whose slot is in `slots`, `n` of them.
fn keys_in(prefix: &str, slots: std::ops::Range<usize>, n: usize) -> Vec<String> {
    (0..).map(|i| format!("{prefix}{i}")).filter(|k| slots.contains(&key_slot(k.as_bytes()))).take(n).collect()
}

/// SET every key of `keys` (value: the key, reversed) through a cluster client.
fn preload(seeds: &[String], keys: &[String]) -> Log {
    let mut c = Client::new(seeds);
    let mut log = Log::new();
    for k in keys {
        let v: String = k.chars().rev().collect();
        let r = c.exec(&[b"SET", k.as_bytes(), v.as_bytes()]);
        record(&mut log, k, v, r);
    }
    log
}

/// A thread SETting `keys` round-robin (value: a counter) until `stop`, at most 200,000
/// writes or 120 s; returns what it did.
fn writer(seeds: Vec<String>, keys: Vec<String>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(Log, u64)> {
    std::thread::spawn(move || {
        let mut c = Client::new(&seeds);
        let mut log = Log::new();
        let t0 = Instant::now();
        for n in 0..200_000u64 {
            if stop.load(Ordering::Relaxed) || t0.elapsed() > Duration::from_secs(120) {
                break;
            }
            let k = &keys[n as usize % keys.len()];
            let v = format!("w{n}");
            let r = c.exec(&[b"SET", k.as_bytes(), v.as_bytes()]);
            if r.is_err() {
                std::thread::sleep(Duration::from_millis(2));
            }
            record(&mut log, k, v, r);
        }
        (log, c.redirects)
    })
}

/// slot -> owner address, from a node's topology.
fn owners(addr: &str) -> Vec<Option<String>> {
    let mut c = Conn::open(addr).unwrap();
    let R::Arr(v) = c.cmd(&["PMKV.TOPOLOGY", "GET"]) else { panic!() };
    let R::Bulk(Some(t)) = &v[1] else { panic!("{v:?}") };
    let mut own = vec![None; SLOTS];
    for line in text(t).lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        for r in &w[2..] {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            let (a, b) = (a.parse::<usize>().unwrap(), b.parse::<usize>().unwrap());
            own[a..=b].fill(Some(w[1].to_string()));
        }
    }
    own
}

/// Every key of `logs` is on exactly one node, the one owning its slot, with its last
/// acknowledged value or one of the unacknowledged values written after it; no node holds
/// a key the logs do not know.
fn verify(nodes: &[&Node], logs: &[&Log]) {
    let own = owners(&nodes[0].addr());
    let mut at: HashMap<String, Vec<String>> = HashMap::new();
    for n in nodes {
        let mut c = Conn::open(&n.addr()).unwrap();
        let R::Arr(keys) = c.cmd(&["KEYS", "*"]) else { panic!() };
        for k in keys {
            let R::Bulk(Some(k)) = k else { panic!() };
            at.entry(text(&k)).or_default().push(n.addr());
        }
    }
    let mut known = HashSet::new();
    for log in logs {
        for (k, w) in log.iter() {
            known.insert(k.clone());
            let Some(acked) = &w.acked else { continue };
            let owner = own[key_slot(k.as_bytes())].clone().expect("every slot owned");
            assert_eq!(
                at.get(k),
                Some(&vec![owner.clone()]),
                "{k}: on the nodes {:?}, its slot's owner is {owner}",
                at.get(k)
            );
            let mut c = Conn::open(&owner).unwrap();
            let R::Bulk(Some(v)) = c.cmd(&["GET", k]) else { panic!("GET {k} on {owner}") };
            let v = text(&v);
            assert!(&v == acked || w.unsure.contains(&v), "{k}: {v:?}, acknowledged {acked:?}, unsure {:?}", w.unsure);
        }
    }
    for k in at.keys() {
        assert!(known.contains(k), "{k} on {:?} was never written", at[k]);
    }
}

#[test]
fn create_refuses_bad_clusters_and_check_passes_a_new_one() {
    let dir = pool_dir();
    let nodes = start_nodes(dir.path(), 3, &[]);
    let addrs: Vec<String> = nodes.iter().map(Node::addr).collect();
    // Nothing configured yet: check says so, exit 1.
    let o = cluster(&["check", &addrs[0]]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    assert!(text(&o.stdout).contains("no node is configured"), "{}", text(&o.stdout));
    // A node given twice, an unreachable one, a bad address: one-line refusals.
    assert_refused(&cluster(&["create", &addrs[0], &addrs[0]]));
    let dead =
        format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    let o = cluster(&["create", &addrs[0], &dead]);
    assert_refused(&o);
    assert!(text(&o.stderr).contains(&dead), "{}", text(&o.stderr));
    assert_eq!(cluster(&["create", "nohost"]).status.code(), Some(2));

    let out = ok(&cluster(&["create", &addrs[0], &addrs[1], &addrs[2]]));
    assert!(out.contains("0-5460") && out.contains("5461-10922") && out.contains("10923-16383"), "{out}");
    let out = ok(&cluster(&["check", &addrs[1]]));
    assert!(out.contains("[OK]") && out.contains("agree on epoch 1"), "{out}");
    // A node named otherwise than in the topology is still that node.
    let out = ok(&cluster(&["check", &format!("localhost:{}", nodes[1].port)]));
    assert!(out.contains("[OK] 3 nodes"), "{out}");
    // A node that owns slots is refused by a second create.
    let o = cluster(&["create", &addrs[0]]);
    assert_refused(&o);
    assert!(text(&o.stderr).contains("already owns"), "{}", text(&o.stderr));
    // The reshard's arguments are checked before anything moves.
    assert_refused(&cluster(&["reshard", &addrs[0], "--from", &addrs[0], "--to", &addrs[0], "--slots", "1"]));
    assert_refused(&cluster(&["reshard", &addrs[0], "--from", &addrs[0], "--to", &addrs[1], "--slots", "6000"]));
    assert_refused(&cluster(&["reshard", &addrs[0], "--from", "ffff", "--to", &addrs[1], "--slots", "1"]));
}

/// Three nodes made a cluster by `create`, loaded with 1,500 keys in the slots the reshard
/// tests move (node 0's lowest 300) and 500 anywhere: the pool directory (kept alive by the
/// caller), the nodes, their addresses and the log of the load.
fn three_nodes_loaded_for_a_reshard() -> (TempDir, Vec<Node>, Vec<String>, Log) {
    let dir = pool_dir();
    let nodes = start_nodes(dir.path(), 3, &[]);
    let addrs: Vec<String> = nodes.iter().map(Node::addr).collect();
    ok(&cluster(&["create", &addrs[0], &addrs[1], &addrs[2]]));
    let mut keys = keys_in("pre", 0..300, 1500);
    keys.extend(keys_in("any", 0..SLOTS, 500));
    let pre = preload(&addrs, &keys);
    (dir, nodes, addrs, pre)
}

/// `pmkv cluster` arguments that move those 300 slots from node 0 to node 1, `pipeline`
/// keys a MIGRATE.
fn reshard_300_from_0_to_1<'a>(addrs: &'a [String], pipeline: &'a str) -> [&'a str; 10] {
    ["reshard", &addrs[0], "--from", &addrs[0], "--to", &addrs[1], "--slots", "300", "--pipeline", pipeline]
}

#[test]
fn reshard_there_and_back_under_writes_loses_no_acknowledged_write() {
    let (_dir, nodes, addrs, pre) = three_nodes_loaded_for_a_reshard();
    assert!(pre.values().all(|w| w.acked.is_some()), "a fresh cluster acknowledges every write");
    let stop = Arc::new(AtomicBool::new(false));
    let w = writer(addrs.clone(), keys_in("w", 0..300, 400), stop.clone());
    let out = ok(&cluster(&reshard_300_from_0_to_1(&addrs, "7")));
    assert!(out.contains("moved 300 slots") && out.contains(": 0-299"), "{out}");
    ok(&cluster(&["check", &addrs[2]]));
    let own = owners(&addrs[2]);
    assert!(
        (0..300).all(|s| own[s].as_deref() == Some(addrs[1].as_str()))
            && own[300].as_deref() == Some(addrs[0].as_str())
    );
    let out = ok(&cluster(&["reshard", &addrs[1], "--from", &addrs[1], "--to", &addrs[0], "--slots", "300"]));
    assert!(out.contains("moved 300 slots") && out.contains(": 0-299"), "{out}");
    stop.store(true, Ordering::Relaxed);
    let (log, redirects) = w.join().unwrap();
    ok(&cluster(&["check", &addrs[0]]));
    assert!(log.values().filter(|w| w.acked.is_some()).count() > 100, "the writer wrote");
    eprintln!("writer: {} writes logged, {redirects} redirects", log.len());
    assert!(redirects > 0, "the writer was redirected while the slots moved");
    verify(&nodes.iter().collect::<Vec<_>>(), &[&pre, &log]);
    let own = owners(&addrs[1]);
    assert!((0..=5460).all(|s| own[s].as_deref() == Some(addrs[0].as_str())), "slots 0-299 are back on node 0");
}

#[test]
fn add_node_then_rebalance_evens_the_slots() {
    let dir = pool_dir();
    let mut nodes = start_nodes(dir.path(), 3, &[]);
    let addrs: Vec<String> = nodes.iter().map(Node::addr).collect();
    ok(&cluster(&["create", &addrs[0], &addrs[1], &addrs[2]]));
    let pre = preload(&addrs, &keys_in("k", 0..SLOTS, 2000));
    nodes.push(Node::start(&dir.path().join("node3.pool"), 0, &[]));
    let new = nodes[3].addr();
    let out = ok(&cluster(&["add-node", &new, &addrs[0]]));
    assert!(out.contains("joined owning no slots"), "{out}");
    ok(&cluster(&["check", &new]));
    assert_refused(&cluster(&["add-node", &new, &addrs[0]]));
    let stop = Arc::new(AtomicBool::new(false));
    let w = writer(addrs.clone(), keys_in("w", 0..SLOTS, 400), stop.clone());
    let out = ok(&cluster(&["rebalance", &addrs[1]]));
    assert!(out.contains("4096 slots moved") || out.contains("[OK] 4096"), "{out}");
    stop.store(true, Ordering::Relaxed);
    let (log, _) = w.join().unwrap();
    ok(&cluster(&["check", &addrs[2]]));
    let own = owners(&new);
    for n in &nodes {
        assert_eq!(own.iter().filter(|o| o.as_deref() == Some(n.addr().as_str())).count(), 4096, "{}", n.addr());
    }
    assert!(ok(&cluster(&["rebalance", &addrs[0]])).contains("nothing to move"));
    verify(&nodes.iter().collect::<Vec<_>>(), &[&pre, &log]);
}

#[test]
fn fix_finishes_a_reshard_whose_source_was_killed() {
    fix_finishes_a_reshard_after_a_kill(0);
}

#[test]
fn fix_finishes_a_reshard_whose_target_was_killed() {
    fix_finishes_a_reshard_after_a_kill(1);
}

/// Reshard slots from node 0 to node 1 under writes, SIGKILL node `victim` (0: the source,
/// 1: the target) mid-move, restart it on its pool and port, `fix`: no acknowledged write
/// is lost and `check` passes.
fn fix_finishes_a_reshard_after_a_kill(victim: usize) {
    let (_dir, mut nodes, addrs, pre) = three_nodes_loaded_for_a_reshard();
    let stop = Arc::new(AtomicBool::new(false));
    let w = writer(addrs.clone(), keys_in("w", 0..300, 400), stop.clone());
    let mut probe = Conn::open(&addrs[0]).unwrap();
    let R::Arr(v) = probe.cmd(&["PMKV.TOPOLOGY", "GET"]) else { panic!() };
    let R::Int(e0) = v[0] else { panic!("{v:?}") };
    let mut reshard = pmkv_command()
        .arg("cluster")
        .args(reshard_300_from_0_to_1(&addrs, "2"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kill the source once 20 slots have moved, while a slot is MIGRATING.
    let t0 = Instant::now();
    loop {
        let R::Arr(v) = probe.cmd(&["PMKV.TOPOLOGY", "GET"]) else { panic!() };
        let (R::Int(e), R::Arr(m)) = (&v[0], &v[2]) else { panic!("{v:?}") };
        if *e >= e0 + 20 && !m.is_empty() {
            break;
        }
        assert!(*e < e0 + 300, "the reshard ended before the kill");
        assert!(t0.elapsed() < Duration::from_secs(60), "the reshard made no progress");
    }
    nodes[victim].kill();
    let st = reshard.wait().unwrap();
    let mut err = String::new();
    reshard.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(st.code(), Some(2), "the driver fails when a node of the move dies: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // While the node is down, check names it and fix refuses to guess.
    let o = cluster(&["check", &addrs[2]]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stdout).contains(&format!("node {} did not answer", addrs[victim])), "{}", text(&o.stdout));
    let o = cluster(&["fix", &addrs[2]]);
    assert_refused(&o);
    assert!(text(&o.stderr).contains(&addrs[victim]), "{}", text(&o.stderr));
    // The writer goes on through the outage; the node comes back on its pool and port.
    std::thread::sleep(Duration::from_millis(300));
    let (pool, port) = (nodes[victim].pool.clone(), nodes[victim].port);
    nodes[victim] = Node::start(&pool, port, &[]);
    // The kill almost always lands while a slot is MIGRATING (rarely between two slots).
    let R::Arr(v) = Conn::open(&addrs[0]).unwrap().cmd(&["PMKV.TOPOLOGY", "GET"]) else { panic!() };
    let open = v[2] != R::Arr(vec![]);
    let o = cluster(&["check", &addrs[1]]);
    if open {
        assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
        assert!(text(&o.stdout).contains("MIGRATING"), "{}", text(&o.stdout));
    }
    let out = ok(&cluster(&["fix", &addrs[2]]));
    eprintln!("killed with a slot open: {open}; fix said:\n{out}");
    assert!(out.contains("[OK]"), "{out}");
    assert!(!open || out.contains("finished moving"), "{out}");
    ok(&cluster(&["check", &addrs[0]]));
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let (log, redirects) = w.join().unwrap();
    eprintln!(
        "writer: {} keys acknowledged, {redirects} redirects",
        log.values().filter(|w| w.acked.is_some()).count()
    );
    verify(&nodes.iter().collect::<Vec<_>>(), &[&pre, &log]);
    // The slots not reached stay on the source; the rest moved, the slot open at the kill
    // with them.
    let own = owners(&addrs[0]);
    let moved = (0..300).filter(|&s| own[s].as_deref() == Some(addrs[1].as_str())).count();
    assert!((20..300).contains(&moved), "{moved} slots moved");
    assert!((0..moved).all(|s| own[s].as_deref() == Some(addrs[1].as_str())));
    assert!((moved..=5460).all(|s| own[s].as_deref() == Some(addrs[0].as_str())));
}

/// A topology pushed to some nodes only (by an interrupted or foreign driver) that gives
/// away slots whose keys are still on their old owner: fix moves the keys, then makes
/// every node agree.
#[test]
fn fix_makes_disagreeing_nodes_agree_without_stranding_keys() {
    let dir = pool_dir();
    let nodes = start_nodes(dir.path(), 3, &[]);
    let addrs: Vec<String> = nodes.iter().map(Node::addr).collect();
    ok(&cluster(&["create", &addrs[0], &addrs[1], &addrs[2]]));
    let pre = preload(&addrs, &keys_in("d", 0..5, 40));
    let R::Arr(v) = Conn::open(&addrs[0]).unwrap().cmd(&["PMKV.TOPOLOGY", "GET"]) else { panic!() };
    let R::Bulk(Some(t)) = &v[1] else { panic!() };
    let lines: Vec<String> = text(t).lines().map(String::from).collect();
    let newer = format!(
        "{}\n{}\n{}\n",
        lines[0].replace(" 0-5460", " 5-5460"),
        lines[1].replace(" 5461-10922", " 0-4 5461-10922"),
        lines[2]
    );
    for a in &addrs[1..] {
        assert_eq!(Conn::open(a).unwrap().cmd(&["PMKV.TOPOLOGY", "SET", "5", &newer]), R::Simple("OK".into()));
    }
    let o = cluster(&["check", &addrs[0]]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stdout).contains(&format!("node {} has topology epoch 1 older", addrs[0])), "{}", text(&o.stdout));
    let out = ok(&cluster(&["fix", &addrs[0]]));
    assert!(out.contains("still held") && out.contains("[OK]"), "{out}");
    ok(&cluster(&["check", &addrs[2]]));
    let own = owners(&addrs[0]);
    assert!((0..5).all(|s| own[s].as_deref() == Some(addrs[1].as_str())));
    verify(&nodes.iter().collect::<Vec<_>>(), &[&pre]);
}

#[test]
fn a_password_is_sent_to_every_node_and_with_migrate() {
    let dir = pool_dir();
    let nodes = start_nodes(dir.path(), 2, &["--requirepass", "s3cret"]);
    let addrs: Vec<String> = nodes.iter().map(Node::addr).collect();
    let o = cluster(&["create", &addrs[0], &addrs[1]]);
    assert_refused(&o);
    assert_refused(&cluster(&["create", &addrs[0], &addrs[1], "--password", "wrong"]));
    let o = pmkv_command()
        .args(["cluster", "create", &addrs[0], &addrs[1]])
        .env("REDISCLI_AUTH", "s3cret")
        .output()
        .unwrap();
    ok(&o);
    let mut c = Conn::open(&addrs[0]).unwrap();
    assert_eq!(c.cmd(&["AUTH", "s3cret"]), R::Simple("OK".into()));
    let keys = keys_in("p", 0..10, 50);
    for k in &keys {
        assert_eq!(c.cmd(&["SET", k, "v"]), R::Simple("OK".into()));
    }
    let out =
        ok(&cluster(&["reshard", &addrs[0], "--from", &addrs[0], "--to", &addrs[1], "--slots", "10", "-a", "s3cret"]));
    assert!(out.contains("50 keys"), "{out}");
    ok(&cluster(&["check", &addrs[1], "--password", "s3cret"]));
    let o = cluster(&["check", &addrs[1], "--password", "hunter2x"]);
    assert_refused(&o);
    assert!(!text(&o.stderr).contains("hunter2x"), "no password echoed: {}", text(&o.stderr));
}

#[test]
fn key_slots_are_redis_s() {
    assert_eq!(key_slot(b"123456789"), 0x31c3 % SLOTS);
    assert_eq!(key_slot(b"foo"), 12182);
    assert_eq!(key_slot(b"somekey"), 11058);
    assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
    assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
    assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
}
