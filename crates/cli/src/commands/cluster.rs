//! `pmkv cluster`: the driver of a cluster of `pmkv serve --cluster` nodes, shaped like
//! `redis-cli --cluster` (create, add-node, reshard, rebalance, check, fix). pmkv nodes have
//! no gossip bus: the driver reads every node's topology (`PMKV.TOPOLOGY GET`), decides,
//! and pushes the whole new topology to every node (`PMKV.TOPOLOGY SET`), moving slots by
//! Redis's protocol (SETSLOT IMPORTING/MIGRATING, GETKEYSINSLOT, MIGRATE). The design and
//! the reasons: docs/design/cluster.md.
//!
//! Exit status: 0 done (for `check`: the cluster is whole), 1 `check` or `fix` found the
//! cluster not whole (what is wrong is printed), 2 an error (an unreachable node, a
//! refusal, bad arguments), one line on stderr.

mod client;
mod topology;

use super::CmdResult;
use crate::Outcome;
use client::{as_text, split_addr, Conn};
use pmkv_server::resp::Reply;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};
use topology::{NodeState, Topology, SLOTS};

const FIX_HELP: &str = "\
fix's rules, in order:
  1. Every node named by any node's topology must answer (fix refuses otherwise: start
     it again on its pool, on the same address).
  2. The newest topology is the one with the largest epoch (of two with the same epoch
     and different texts: the one more nodes hold, then the one of the lowest address).
  3. A slot left MIGRATING on node A to B (and/or IMPORTING on B from A) is finished,
     never rolled back: B is set IMPORTING and A MIGRATING where they are not yet, every
     key A still holds in the slot is moved to B (MIGRATE ... REPLACE, so a key both hold
     after a crash ends as A's copy), and the slot is given to B. A slot whose states
     disagree (MIGRATING to one node, IMPORTING on another) is refused: clear the wrong
     one with CLUSTER SETSLOT slot STABLE, then run fix again. A node whose own, older
     topology gives it a slot that the newest gives to another, and that still holds
     keys of it, has them moved to that owner the same way (a slot the newest gives to
     no one stays with it).
  4. A slot no node owns goes to the one node that holds keys in it, or, when none does,
     to the node owning the fewest slots; keys of it on several nodes are refused.
  5. The resulting topology is pushed to every node at an epoch larger than any node's,
     so nodes that disagreed agree.
Then fix runs check's verdicts and exits 0 only when the cluster is whole.";

#[derive(clap::Args)]
#[command(after_help = "NODE (--from, --to) is a node's id, a unique prefix of it (4 digits or more) or its \
                         host:port. The driver pushes the whole topology to every node; it is safe to run again \
                         after a failure: `check` says what is wrong, `fix` repairs it.")]
pub struct Args {
    #[command(subcommand)]
    what: What,
    /// Password of the nodes (default: $REDISCLI_AUTH): AUTH on every connection, and
    /// MIGRATE ... AUTH with it.
    #[arg(long, short = 'a', global = true)]
    password: Option<String>,
}

#[derive(clap::Args, Clone, Copy)]
struct MoveArgs {
    /// Keys per MIGRATE.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pipeline: u64,
    /// MIGRATE's timeout, in milliseconds (a node's replies are awaited this long plus 5 s).
    #[arg(long, default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    timeout_ms: u64,
}

#[derive(clap::Subcommand)]
enum What {
    /// Make a cluster of nodes started with `pmkv serve --cluster` that own no slots and
    /// hold no keys: slots spread evenly in contiguous ranges, in the order given. A node
    /// that refuses connections is waited for up to 5 s (it may have just been started).
    Create {
        #[arg(required = true, value_name = "ADDR")]
        addrs: Vec<String>,
    },
    /// Add a node (owning no slots, holding no keys) to the cluster EXISTING_ADDR is in
    /// (NEW_ADDR is waited for up to 5 s, as by create).
    AddNode { new_addr: String, existing_addr: String },
    /// Move --slots N slots (the source's lowest, as redis-cli takes them) from one node to
    /// another, keys and all, while clients keep working.
    Reshard {
        addr: String,
        #[arg(long, value_name = "NODE")]
        from: String,
        #[arg(long, value_name = "NODE")]
        to: String,
        #[arg(long)]
        slots: usize,
        #[command(flatten)]
        mv: MoveArgs,
    },
    /// Even the slots over every node with the fewest moves.
    Rebalance {
        addr: String,
        #[command(flatten)]
        mv: MoveArgs,
    },
    /// Exit 0 only when every slot is owned once, every node agrees on the topology and
    /// its epoch, and no slot is MIGRATING or IMPORTING; otherwise print what is wrong and
    /// exit 1.
    Check { addr: String },
    /// Finish every slot left MIGRATING or IMPORTING, give unowned slots an owner and make
    /// every node agree (the rules: `pmkv cluster fix --help`).
    #[command(after_help = FIX_HELP)]
    Fix {
        addr: String,
        #[command(flatten)]
        mv: MoveArgs,
    },
}

pub fn run(a: Args) -> CmdResult {
    let password = a.password.or_else(|| std::env::var("REDISCLI_AUTH").ok()).filter(|p| !p.is_empty());
    let opts = |mv: Option<MoveArgs>| {
        let mv = mv.unwrap_or(MoveArgs { pipeline: 100, timeout_ms: 60_000 });
        Opts { password: password.clone(), pipeline: mv.pipeline as usize, timeout_ms: mv.timeout_ms }
    };
    match a.what {
        What::Create { addrs } => create(&opts(None), &addrs),
        What::AddNode { new_addr, existing_addr } => add_node(&opts(None), &new_addr, &existing_addr),
        What::Reshard { addr, from, to, slots, mv } => reshard(&opts(Some(mv)), &addr, &from, &to, slots),
        What::Rebalance { addr, mv } => rebalance(&opts(Some(mv)), &addr),
        What::Check { addr } => check(&opts(None), &addr),
        What::Fix { addr, mv } => fix(&opts(Some(mv)), &addr),
    }
}

struct Opts {
    password: Option<String>,
    pipeline: usize,
    timeout_ms: u64,
}

type Res<T> = Result<T, String>;

/// Connect to a node and authenticate.
fn connect(addr: &str, o: &Opts) -> Res<Conn> {
    connect_within(addr, o, Duration::ZERO)
}

/// [`connect`], retrying a refused connection for up to `patience`: `create` and
/// `add-node` are often run right after `pmkv serve … &`, before the node listens.
fn connect_within(addr: &str, o: &Opts, patience: Duration) -> Res<Conn> {
    let t0 = Instant::now();
    let io = Duration::from_millis(o.timeout_ms + 5_000);
    let mut c = loop {
        match Conn::connect(addr, Duration::from_secs(5), io) {
            Err(e) if e.contains("refused") && t0.elapsed() < patience => std::thread::sleep(Duration::from_millis(50)),
            r => break r?,
        }
    };
    if let Some(p) = &o.password {
        // Not through `ok`, whose message would quote the password.
        match c.call(&["AUTH", p.as_str()]) {
            Ok(Reply::Simple(_)) => {}
            Ok(r) => return Err(format!("{addr}: AUTH: {}", reply_text(&r))),
            Err(e) => return Err(format!("{addr}: AUTH: {e}")),
        }
    }
    Ok(c)
}

fn int(r: &Reply, what: &str) -> Res<i64> {
    match r {
        Reply::Int(i) => Ok(*i),
        r => Err(format!("{what}: expected an integer, got {r:?}")),
    }
}

/// The (slot, node id) pairs of a flat array `[slot, id, slot, id, ...]`.
fn slot_pairs(r: &Reply, what: &str) -> Res<Vec<(usize, String)>> {
    let Reply::Array(v) = r else { return Err(format!("{what}: expected an array, got {r:?}")) };
    v.chunks(2)
        .map(|p| match p {
            [Reply::Int(s), id] if (0..SLOTS as i64).contains(s) => {
                Ok((*s as usize, as_text(id).ok_or_else(|| format!("{what}: {id:?} is not a node id"))?))
            }
            _ => Err(format!("{what}: malformed pair {p:?}")),
        })
        .collect()
}

/// Ask a node who it is and what it holds: CLUSTER MYID, PMKV.TOPOLOGY GET, DBSIZE.
fn ask(c: &mut Conn) -> Res<NodeState> {
    let myid = as_text(&c.ok(&["CLUSTER", "MYID"])?).unwrap_or_default();
    if !topology::is_node_id(&myid) {
        return Err(format!("{}: CLUSTER MYID: {myid:?} is not a node id (is this `pmkv serve --cluster`?)", c.addr));
    }
    let what = format!("{}: PMKV.TOPOLOGY GET", c.addr);
    let (epoch, text, migrating, importing) = match c.ok(&["PMKV.TOPOLOGY", "GET"])? {
        Reply::Array(v) if v.len() == 4 => (
            int(&v[0], &what)?,
            as_text(&v[1]).ok_or_else(|| format!("{what}: the text is {:?}", v[1]))?,
            slot_pairs(&v[2], &what)?,
            slot_pairs(&v[3], &what)?,
        ),
        r => return Err(format!("{what}: expected [epoch, text, migrating, importing], got {r:?}")),
    };
    let keys = int(&c.ok(&["DBSIZE"])?, &format!("{}: DBSIZE", c.addr))?;
    Ok(NodeState { myid, epoch: epoch.max(0) as u64, text, migrating, importing, keys: keys.max(0) as u64 })
}

/// The nodes of a cluster as the driver sees them: every address any node's topology
/// names, starting from one, each with its connection and its answers (or why not).
struct Cluster {
    conns: BTreeMap<String, Conn>,
    states: BTreeMap<String, Result<NodeState, String>>,
}

impl Cluster {
    /// Find every node from `entry`, following the addresses in each node's topology.
    fn discover(entry: &str, o: &Opts) -> Res<Cluster> {
        split_addr(entry)?;
        let mut c = Cluster { conns: BTreeMap::new(), states: BTreeMap::new() };
        let mut todo = VecDeque::from([entry.to_string()]);
        while let Some(addr) = todo.pop_front() {
            if c.states.contains_key(&addr) {
                continue;
            }
            let got = connect(&addr, o).and_then(|mut conn| {
                let s = ask(&mut conn)?;
                c.conns.insert(addr.clone(), conn);
                Ok(s)
            });
            if addr == entry {
                if let Err(e) = &got {
                    return Err(e.clone());
                }
            }
            if let Ok(s) = &got {
                let t = Topology::parse(&s.text).map_err(|e| format!("{addr}: {e}"))?;
                todo.extend(t.nodes.into_iter().map(|n| n.addr));
            }
            c.states.insert(addr, got);
        }
        // The entry given under another name than the topology's (`localhost:7001` for
        // `127.0.0.1:7001`) is the same node, not one missing from the topology.
        let entry_id = c.states.get(entry).and_then(|s| s.as_ref().ok()).map(|s| s.myid.clone());
        let listed = |c: &Cluster| {
            c.ok_states()
                .filter_map(|(_, s)| Topology::parse(&s.text).ok())
                .any(|t| t.nodes.iter().any(|n| n.addr == entry))
        };
        if let Some(id) = entry_id {
            let twin = c.ok_states().any(|(a, s)| a != entry && s.myid == id);
            if twin && !listed(&c) {
                c.states.remove(entry);
                c.conns.remove(entry);
            }
        }
        Ok(c)
    }

    fn ok_states(&self) -> impl Iterator<Item = (&String, &NodeState)> {
        self.states.iter().filter_map(|(a, s)| s.as_ref().ok().map(|s| (a, s)))
    }

    /// The largest epoch any node has.
    fn max_epoch(&self) -> u64 {
        self.ok_states().map(|(_, s)| s.epoch).max().unwrap_or(0)
    }

    /// The newest topology (fix's rule 2).
    fn newest(&self) -> Res<Topology> {
        Topology::parse(topology::newest(&self.states).map_or("", |(_, s)| s.text.as_str()))
    }

    /// The cluster must be whole for a change: else the error says what is wrong.
    fn require_whole(&self) -> Res<Topology> {
        let v = topology::verdicts(&self.states);
        if let Some(first) = v.first() {
            let more = if v.len() > 1 { format!(" (and {} more problems)", v.len() - 1) } else { String::new() };
            return Err(format!(
                "the cluster is not whole: {first}{more}; `pmkv cluster check` lists it, `pmkv cluster fix` repairs it"
            ));
        }
        self.newest()
    }

    fn conn(&mut self, addr: &str) -> Res<&mut Conn> {
        self.conns.get_mut(addr).ok_or_else(|| format!("{addr}: not connected"))
    }

    /// Push `t` at `epoch` to the nodes `first` (in order), then every other node of `t`
    /// and every other node found.
    fn push(&mut self, epoch: u64, t: &Topology, first: &[&str]) -> Res<()> {
        let text = t.text();
        let mut order: Vec<String> = first.iter().map(|s| s.to_string()).collect();
        for a in t.nodes.iter().map(|n| n.addr.clone()).chain(self.conns.keys().cloned()) {
            if !order.contains(&a) {
                order.push(a);
            }
        }
        let e = epoch.to_string();
        for a in order {
            self.conn(&a)?.ok(&["PMKV.TOPOLOGY", "SET", e.as_str(), text.as_str()])?;
            if let Some(Ok(s)) = self.states.get_mut(&a) {
                s.epoch = epoch;
                s.text = text.clone();
                // As the node does: states of slots it no longer owns, or now owns, end.
                let me = t.index_of_id(&s.myid);
                s.migrating.retain(|(slot, _)| t.owner[*slot] == me && me.is_some());
                s.importing.retain(|(slot, _)| t.owner[*slot] != me || me.is_none());
            }
        }
        Ok(())
    }

    /// Move slot `slot` from node `src` to node `dst` (indices in `t`) by the protocol of
    /// docs/design/cluster.md, "Moving a slot", and push the new topology at `epoch + 1`
    /// (target, source, then the rest). Returns the keys moved. Steps a node has already
    /// taken (a slot already IMPORTING, already MIGRATING) are not repeated, so `fix` uses
    /// this to finish a move.
    fn move_slot(
        &mut self,
        o: &Opts,
        t: &mut Topology,
        epoch: &mut u64,
        slot: usize,
        src: usize,
        dst: usize,
    ) -> Res<u64> {
        let (sa, da) = (t.nodes[src].addr.clone(), t.nodes[dst].addr.clone());
        let (sid, did) = (t.nodes[src].id.clone(), t.nodes[dst].id.clone());
        let s = slot.to_string();
        let state = |c: &Cluster, a: &str| c.states.get(a).and_then(|s| s.as_ref().ok()).cloned();
        let owns = |st: &Option<NodeState>| {
            st.as_ref().is_some_and(|st| {
                Topology::parse(&st.text)
                    .ok()
                    .is_some_and(|own| own.index_of_id(&st.myid).is_some_and(|i| own.owner[slot] == Some(i)))
            })
        };
        let (ds, ss) = (state(self, &da), state(self, &sa));
        if !owns(&ds) && !ds.as_ref().is_some_and(|d| d.importing.contains(&(slot, sid.clone()))) {
            self.conn(&da)?.ok(&["CLUSTER", "SETSLOT", s.as_str(), "IMPORTING", sid.as_str()])?;
        }
        let src_owns = owns(&ss);
        if src_owns && !ss.as_ref().is_some_and(|x| x.migrating.contains(&(slot, did.clone()))) {
            self.conn(&sa)?.ok(&["CLUSTER", "SETSLOT", s.as_str(), "MIGRATING", did.as_str()])?;
        }
        let (host, port) = split_addr(&da)?;
        let (port, timeout) = (port.to_string(), o.timeout_ms.to_string());
        let count = o.pipeline.to_string();
        let mut moved = 0u64;
        let mut last: Vec<Vec<u8>> = Vec::new();
        loop {
            let keys = match self.conn(&sa)?.ok(&["CLUSTER", "GETKEYSINSLOT", s.as_str(), count.as_str()])? {
                Reply::Array(v) => v
                    .into_iter()
                    .map(|k| match k {
                        Reply::Bulk(b) => Ok(b),
                        k => Err(format!("{sa}: CLUSTER GETKEYSINSLOT {slot}: {k:?} is not a key")),
                    })
                    .collect::<Res<Vec<Vec<u8>>>>()?,
                r => return Err(format!("{sa}: CLUSTER GETKEYSINSLOT {slot}: expected an array, got {r:?}")),
            };
            if keys.is_empty() {
                break;
            }
            if !src_owns {
                return Err(format!(
                    "{sa} holds {} keys of slot {slot} it does not own: they cannot be moved by MIGRATE",
                    keys.len()
                ));
            }
            if keys == last {
                return Err(format!("{sa}: MIGRATE to {da} answered but slot {slot} still holds the same keys"));
            }
            let mut args: Vec<&[u8]> =
                vec![b"MIGRATE", host.as_bytes(), port.as_bytes(), b"", b"0", timeout.as_bytes(), b"REPLACE"];
            if let Some(p) = &o.password {
                args.extend([&b"AUTH"[..], p.as_bytes()]);
            }
            args.push(b"KEYS");
            args.extend(keys.iter().map(|k| k.as_slice()));
            match self.conn(&sa)?.call(&args) {
                Ok(Reply::Simple(r)) if r == "OK" || r == "NOKEY" => {}
                Ok(r) => {
                    return Err(format!(
                        "{sa}: MIGRATE of {} keys of slot {slot} to {da}: {}",
                        keys.len(),
                        reply_text(&r)
                    ))
                }
                Err(e) => return Err(format!("{sa}: MIGRATE of {} keys of slot {slot} to {da}: {e}", keys.len())),
            }
            moved += keys.len() as u64;
            last = keys;
        }
        t.owner[slot] = Some(dst);
        *epoch = (*epoch).max(self.max_epoch()) + 1;
        self.push(*epoch, t, &[&da, &sa])?;
        Ok(moved)
    }
}

/// A reply as the one line a user reads.
fn reply_text(r: &Reply) -> String {
    match r {
        Reply::Error(e) | Reply::Simple(e) => e.clone(),
        r => as_text(r).unwrap_or_else(|| format!("{r:?}")),
    }
}

fn create(o: &Opts, addrs: &[String]) -> CmdResult {
    let mut seen = BTreeSet::new();
    for a in addrs {
        split_addr(a)?;
        if !seen.insert(a) {
            return Err(format!("{a} is given twice").into());
        }
    }
    let mut conns = BTreeMap::new();
    let mut t = Topology::empty();
    let mut epoch = 0;
    for a in addrs {
        let mut c = connect_within(a, o, Duration::from_secs(5))?;
        let s = ask(&mut c)?;
        let own = Topology::parse(&s.text).map_err(|e| format!("{a}: {e}"))?;
        if let Some(i) = own.index_of_id(&s.myid) {
            let n = own.slots_of(i).len();
            if n > 0 {
                return Err(format!("{a} already owns {n} slots (epoch {}): it is in a cluster", s.epoch).into());
            }
        }
        if s.keys > 0 {
            return Err(format!("{a} holds {} keys: a new cluster's nodes must be empty", s.keys).into());
        }
        if let Some(n) = t.nodes.iter().find(|n| n.id == s.myid) {
            return Err(format!("{a} and {} are the same node (id {})", n.addr, s.myid).into());
        }
        epoch = epoch.max(s.epoch);
        t.nodes.push(topology::Node { id: s.myid.clone(), addr: a.clone() });
        conns.insert(a.clone(), c);
    }
    for (i, (lo, hi)) in topology::spread(addrs.len()).into_iter().enumerate() {
        t.owner[lo..=hi].iter_mut().for_each(|x| *x = Some(i));
    }
    let epoch = epoch + 1;
    let text = t.text();
    let e = epoch.to_string();
    for a in addrs {
        conns.get_mut(a).expect("connected above").ok(&["PMKV.TOPOLOGY", "SET", e.as_str(), text.as_str()])?;
    }
    for (i, n) in t.nodes.iter().enumerate() {
        outln!("{} {} slots {}", n.id, n.addr, topology::ranges_text(&t.slots_of(i)))?;
    }
    outln!("[OK] cluster of {} nodes created, all {SLOTS} slots covered, epoch {epoch}", addrs.len())?;
    Ok(Outcome::Ok)
}

fn add_node(o: &Opts, new: &str, existing: &str) -> CmdResult {
    let mut c = Cluster::discover(existing, o)?;
    let mut t = c.require_whole()?;
    let mut nc = connect_within(new, o, Duration::from_secs(5))?;
    let s = ask(&mut nc)?;
    if let Some(n) = t.nodes.iter().find(|n| n.id == s.myid || n.addr == new) {
        return Err(format!("{new} is already in the cluster (as {} {})", n.id, n.addr).into());
    }
    let own = Topology::parse(&s.text).map_err(|e| format!("{new}: {e}"))?;
    if let Some(i) = own.index_of_id(&s.myid) {
        if !own.slots_of(i).is_empty() {
            return Err(format!("{new} already owns slots (epoch {}): it is in another cluster", s.epoch).into());
        }
    }
    if s.keys > 0 {
        return Err(format!("{new} holds {} keys: a node joins empty", s.keys).into());
    }
    let epoch = c.max_epoch().max(s.epoch) + 1;
    t.nodes.push(topology::Node { id: s.myid.clone(), addr: new.to_string() });
    c.conns.insert(new.to_string(), nc);
    c.states.insert(new.to_string(), Ok(s.clone()));
    c.push(epoch, &t, &[new])?;
    outln!(
        "[OK] {} {new} joined owning no slots, epoch {epoch} ({} nodes): `pmkv cluster rebalance` gives it slots",
        s.myid,
        t.nodes.len()
    )?;
    Ok(Outcome::Ok)
}

/// Carry out moves `(slot, from, to)`, printing a line per (from, to) pair at the end.
fn do_moves(
    o: &Opts,
    c: &mut Cluster,
    t: &mut Topology,
    moves: &[(usize, usize, usize)],
) -> Result<u64, Box<dyn std::error::Error>> {
    let t0 = Instant::now();
    let mut epoch = c.max_epoch();
    let mut per: BTreeMap<(usize, usize), (Vec<usize>, u64)> = BTreeMap::new();
    let mut total = 0;
    for &(slot, from, to) in moves {
        let k = c
            .move_slot(o, t, &mut epoch, slot, from, to)
            .map_err(|e| format!("moving slot {slot} from {} to {}: {e}", t.nodes[from].addr, t.nodes[to].addr))?;
        let e = per.entry((from, to)).or_default();
        e.0.push(slot);
        e.1 += k;
        total += k;
    }
    for ((from, to), (slots, keys)) in &per {
        let mut slots = slots.clone();
        slots.sort_unstable();
        outln!(
            "moved {} slots ({keys} keys) from {} to {}: {}",
            slots.len(),
            t.nodes[*from].addr,
            t.nodes[*to].addr,
            topology::ranges_text(&slots)
        )?;
    }
    outln!("[OK] {} slots moved, {total} keys, in {:.1} s; epoch {epoch}", moves.len(), t0.elapsed().as_secs_f64())?;
    Ok(total)
}

fn reshard(o: &Opts, addr: &str, from: &str, to: &str, n: usize) -> CmdResult {
    let mut c = Cluster::discover(addr, o)?;
    let mut t = c.require_whole()?;
    let (f, d) = (t.find(from)?, t.find(to)?);
    if f == d {
        return Err("--from and --to are the same node".into());
    }
    let have = t.slots_of(f);
    if n == 0 || n > have.len() {
        return Err(format!("--slots {n}: {} owns {} slots", t.nodes[f].addr, have.len()).into());
    }
    let moves: Vec<(usize, usize, usize)> = have[..n].iter().map(|&s| (s, f, d)).collect();
    do_moves(o, &mut c, &mut t, &moves)?;
    Ok(Outcome::Ok)
}

fn rebalance(o: &Opts, addr: &str) -> CmdResult {
    let mut c = Cluster::discover(addr, o)?;
    let mut t = c.require_whole()?;
    let moves = topology::rebalance(&t);
    if moves.is_empty() {
        outln!("[OK] balanced already: nothing to move")?;
        return Ok(Outcome::Ok);
    }
    do_moves(o, &mut c, &mut t, &moves)?;
    Ok(Outcome::Ok)
}

/// Print every node and the verdicts; `NotFound` (exit 1) when there are any.
fn report(c: &Cluster) -> CmdResult {
    let newest = c.newest().unwrap_or_else(|_| Topology::empty());
    for (a, s) in &c.states {
        match s {
            Ok(s) => {
                let slots = newest.index_of_id(&s.myid).map(|i| newest.slots_of(i)).unwrap_or_default();
                outln!(
                    "{a} {} epoch {} slots {} ({}) keys {}",
                    s.myid,
                    s.epoch,
                    slots.len(),
                    if slots.is_empty() { "-".into() } else { topology::ranges_text(&slots) },
                    s.keys
                )?;
            }
            Err(e) => outln!("{a} did not answer: {e}")?,
        }
    }
    let v = topology::verdicts(&c.states);
    if v.is_empty() {
        outln!(
            "[OK] {} nodes agree on epoch {}; all {SLOTS} slots covered; no slot open",
            c.states.len(),
            c.max_epoch()
        )?;
        return Ok(Outcome::Ok);
    }
    for p in &v {
        outln!("[ERR] {p}")?;
    }
    Ok(Outcome::NotFound)
}

fn check(o: &Opts, addr: &str) -> CmdResult {
    report(&Cluster::discover(addr, o)?)
}

fn fix(o: &Opts, addr: &str) -> CmdResult {
    let mut c = Cluster::discover(addr, o)?;
    if let Some((a, Err(e))) = c.states.iter().find(|(_, s)| s.is_err()) {
        return Err(format!("cannot fix while node {a} does not answer: {e}").into());
    }
    let mut t = c.newest()?;
    if t.nodes.is_empty() {
        return Err(format!("{addr}: no topology to fix: run `pmkv cluster create`").into());
    }
    for n in &t.nodes {
        if !c.conns.contains_key(&n.addr) {
            return Err(format!("cannot fix: node {} of the topology was not reached", n.addr).into());
        }
    }
    let by_addr = |t: &Topology, a: &str| t.nodes.iter().position(|n| n.addr == a);
    let not_in = |slot: usize, a: &str| format!("slot {slot}: {a} is not in the newest topology");
    // Rule 3, second part, first: a node whose own (older) topology gives it a slot the
    // newest gives to another, and which still holds keys of it. Until they are moved the
    // slot stays its own in every topology pushed: pushing the newest would strand them.
    let mut stale: Vec<(usize, usize, Option<usize>)> = Vec::new();
    for (a, st) in c.ok_states() {
        let (Ok(own), Some(me)) = (Topology::parse(&st.text), by_addr(&t, a)) else { continue };
        let Some(mine) = own.index_of_id(&st.myid) else { continue };
        stale.extend(
            (0..SLOTS).filter(|&s| own.owner[s] == Some(mine) && t.owner[s] != Some(me)).map(|s| (s, me, None)),
        );
    }
    let mut held = Vec::new();
    for (slot, src, _) in stale {
        let a = t.nodes[src].addr.clone();
        let r = c.conn(&a)?.ok(&["CLUSTER", "COUNTKEYSINSLOT", slot.to_string().as_str()])?;
        if int(&r, &format!("{a}: CLUSTER COUNTKEYSINSLOT"))? > 0 {
            held.push((slot, src, t.owner[slot]));
            t.owner[slot] = Some(src);
        }
    }
    // Rule 3: every open slot, finished forward.
    // slot -> ([(node MIGRATING it, target id)], [(node IMPORTING it, source id)])
    type Pairs = Vec<(String, String)>;
    let mut open: BTreeMap<usize, (Pairs, Pairs)> = BTreeMap::new();
    for (a, s) in c.ok_states() {
        for (slot, to) in &s.migrating {
            open.entry(*slot).or_default().0.push((a.clone(), to.clone()));
        }
        for (slot, from) in &s.importing {
            open.entry(*slot).or_default().1.push((a.clone(), from.clone()));
        }
    }
    let mut epoch = c.max_epoch();
    let by_id = |t: &Topology, id: &str, slot: usize| {
        t.index_of_id(id).ok_or_else(|| format!("slot {slot}: node {id} is not in the newest topology"))
    };
    for (slot, (mig, imp)) in &open {
        let conflict = || {
            format!(
                "slot {slot}: the nodes disagree on where it goes (MIGRATING {mig:?}, IMPORTING {imp:?}): \
                 clear the wrong one with CLUSTER SETSLOT {slot} STABLE, then run fix again"
            )
        };
        let (src, dst) = match (&mig[..], &imp[..]) {
            ([(a, to)], imps) => {
                let src = by_addr(&t, a).ok_or_else(|| not_in(*slot, a))?;
                let dst = by_id(&t, to, *slot)?;
                if imps.iter().any(|(ia, from)| by_addr(&t, ia) != Some(dst) || from != &t.nodes[src].id) {
                    return Err(conflict().into());
                }
                (src, dst)
            }
            ([], [(a, from)]) => (by_id(&t, from, *slot)?, by_addr(&t, a).ok_or_else(|| not_in(*slot, a))?),
            _ => return Err(conflict().into()),
        };
        let k =
            c.move_slot(o, &mut t, &mut epoch, *slot, src, dst).map_err(|e| format!("finishing slot {slot}: {e}"))?;
        outln!("slot {slot}: finished moving from {} to {} ({k} keys)", t.nodes[src].addr, t.nodes[dst].addr)?;
    }
    // Rule 3, second part: the keys held by a node the newest topology took the slot from.
    for (slot, src, to) in held {
        let Some(dst) = to else { continue };
        if t.owner[slot] != Some(src) {
            continue; // finished above, as an open slot
        }
        let a = t.nodes[src].addr.clone();
        let k = c
            .move_slot(o, &mut t, &mut epoch, slot, src, dst)
            .map_err(|e| format!("moving the keys {a} still holds in slot {slot}: {e}"))?;
        outln!("slot {slot}: moved the {k} keys {a} still held to its owner {}", t.nodes[dst].addr)?;
    }
    // Rule 4: unowned slots.
    let unowned = t.unowned();
    if !unowned.is_empty() {
        let mut count = vec![0usize; t.nodes.len()];
        for o in t.owner.iter().flatten() {
            count[*o] += 1;
        }
        for &slot in &unowned {
            let s = slot.to_string();
            let mut holders = Vec::new();
            for (i, n) in t.nodes.iter().enumerate() {
                let r = c.conn(&n.addr)?.ok(&["CLUSTER", "COUNTKEYSINSLOT", s.as_str()])?;
                if int(&r, &format!("{}: CLUSTER COUNTKEYSINSLOT", n.addr))? > 0 {
                    holders.push(i);
                }
            }
            let to = match holders[..] {
                [i] => i,
                [] => (0..t.nodes.len()).min_by_key(|&i| (count[i], i)).expect("a node"),
                _ => {
                    return Err(
                        format!("slot {slot} has no owner and keys on {} nodes: fix it by hand", holders.len()).into()
                    )
                }
            };
            t.owner[slot] = Some(to);
            count[to] += 1;
        }
        outln!("gave {} unowned slots an owner: {}", unowned.len(), topology::ranges_text(&unowned))?;
    }
    // Rule 5: everyone agrees, at an epoch larger than any.
    let text = t.text();
    if c.ok_states().any(|(_, s)| s.text != text || s.epoch != epoch) {
        epoch = c.max_epoch() + 1;
        c.push(epoch, &t, &[])?;
        outln!("pushed the topology to every node at epoch {epoch}")?;
    }
    report(&Cluster::discover(addr, o)?)
}
