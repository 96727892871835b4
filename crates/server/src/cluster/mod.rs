//! `pmkv serve --cluster`: the Redis Cluster protocol (design: docs/design/cluster.md).
//!
//! * [`slot`] — a key's hash slot, as Redis computes it.
//! * `topology` — the topology a driver pushes, and the node's durable state.
//! * `migrate` — `MIGRATE` (source) and `PMKV.RESTORE` (target): moving keys.
//! * here — routing (`-MOVED`, `-ASK`, `-TRYAGAIN`, `-CLUSTERDOWN`) and the `CLUSTER`
//!   and `PMKV.TOPOLOGY` commands.
//!
//! Every decision about a slot is taken under the server's gate (shared for a data
//! command, exclusive for what changes the state or moves keys), so a command never
//! checks a slot, waits, and then writes a key that moved meanwhile.

pub(crate) mod migrate;
pub mod slot;
mod topology;

use crate::resp::Reply;
use pmkv::Store;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard};
pub use topology::{split_addr, valid_id, Node, State, Topology};

/// The key of the node's state record. Every other record of a cluster pool begins with
/// its slot's high byte (below 0x40), so this one is in no slot.
pub const STATE_KEY: &[u8] = b"\xffpmkv\x00C";

/// The cluster side of a node.
pub struct Cluster {
    state: RwLock<State>,
    /// One bit per slot: owned here and not migrating — what every GET and SET asks, so it
    /// is answered by one atomic load rather than the state's lock and an id comparison
    /// (3% of a pipelined SET's time, measured with perf). Rewritten with the state, under
    /// the gate held exclusively; the fast paths read it again under the gate.
    stable: Vec<AtomicU64>,
}

fn new_id() -> std::io::Result<String> {
    use std::io::Read as _;
    let mut b = [0u8; 20];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

impl Cluster {
    /// The cluster state of `s`: read from its state record, or, for a pool with no record
    /// at all, a new node (a fresh id, no topology) written to it. A pool holding records
    /// written without `--cluster` is refused: its keys are not where a cluster node looks.
    pub fn open(s: &Store) -> Result<Cluster, String> {
        let st = match s.get(STATE_KEY).map_err(|e| e.to_string())? {
            Some(b) => State::decode(&b).map_err(|e| format!("the pool's cluster state record is damaged: {e}"))?,
            None => {
                let mut any = false;
                s.scan(&pmkv::KeyRange::all(), pmkv::Direction::Forward, |_, _| {
                    any = true;
                    false
                })
                .map_err(|e| e.to_string())?;
                if any {
                    return Err("the pool holds records written without --cluster; a cluster node keeps its keys \
                                after their slot and cannot serve them (copy them in through the cluster: \
                                pmkv dump, then redis-cli -c or a cluster client)"
                        .into());
                }
                let st = State::new(new_id().map_err(|e| format!("making a node id: {e}"))?);
                s.put(STATE_KEY, &st.encode()).map_err(|e| e.to_string())?;
                st
            }
        };
        let cl = Cluster { state: RwLock::new(st), stable: (0..slot::SLOTS / 64).map(|_| AtomicU64::new(0)).collect() };
        cl.index();
        Ok(cl)
    }

    /// Rebuild [`Cluster::stable`] from the state.
    fn index(&self) {
        let st = self.state();
        for (w, word) in self.stable.iter().enumerate() {
            let mut bits = 0u64;
            for b in 0..64 {
                let s = (w * 64 + b) as u16;
                if st.owns(s) && !st.migrating.contains_key(&s) {
                    bits |= 1 << b;
                }
            }
            word.store(bits, Ordering::Release);
        }
    }

    pub fn state(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Change the state: `f` edits a copy, which is written to the pool and then, only if
    /// that succeeded, becomes the state. The caller holds the gate exclusively.
    pub(crate) fn update(&self, s: &Store, f: impl FnOnce(&mut State) -> Result<(), Reply>) -> Reply {
        let mut next = self.state().clone();
        if let Err(r) = f(&mut next) {
            return r;
        }
        if let Err(e) = s.put(STATE_KEY, &next.encode()) {
            return crate::keyspace::store_reply(e);
        }
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = next;
        self.index();
        Reply::ok()
    }

    /// Whether this node owns `slot` and is not moving it: a command on it needs no look at
    /// its keys.
    pub fn stably_owned(&self, slot: u16) -> bool {
        self.stable[slot as usize / 64].load(Ordering::Acquire) >> (slot % 64) & 1 == 1
    }

    /// Whether a command on `slot` runs here. `asking`: the connection sent ASKING just
    /// before. `present` counts which of the command's keys exist here and how many it has;
    /// it is asked only while the slot is migrating away. Redis's rules: a migrating slot
    /// serves a command whose keys are all here, sends one whose keys are all gone to the
    /// target (`-ASK`), and has the client retry a mix (`-TRYAGAIN`); an importing slot
    /// serves only after ASKING.
    pub fn route(&self, slot: u16, asking: bool, present: impl FnOnce() -> (usize, usize)) -> Result<(), Reply> {
        let st = self.state();
        if st.owns(slot) {
            let Some(target) = st.migrating.get(&slot) else { return Ok(()) };
            let (here, all) = present();
            if here == all {
                return Ok(());
            }
            if here > 0 {
                return Err(Reply::err("TRYAGAIN Multiple keys request during rehashing of slot"));
            }
            return match st.topo.node(target) {
                Some(n) => Err(Reply::err(format!("ASK {slot} {}", n.addr))),
                // A target the topology does not know: serve here (nothing can be sent).
                None => Ok(()),
            };
        }
        if asking && st.importing.contains_key(&slot) {
            return Ok(());
        }
        match st.topo.owner(slot) {
            Some(n) => Err(Reply::err(format!("MOVED {slot} {}", n.addr))),
            None => Err(Reply::err("CLUSTERDOWN Hash slot not served")),
        }
    }

    /// Whether `PMKV.RESTORE` may write `slot` here: owned, or being imported.
    pub fn may_restore(&self, slot: u16) -> Result<(), Reply> {
        let st = self.state();
        if st.owns(slot) || st.importing.contains_key(&slot) {
            return Ok(());
        }
        match st.topo.owner(slot) {
            Some(n) => Err(Reply::err(format!("MOVED {slot} {}", n.addr))),
            None => Err(Reply::err("CLUSTERDOWN Hash slot not served")),
        }
    }

    /// `PMKV.TOPOLOGY GET|SET`. SET is refused for an epoch below the node's, and for the
    /// same epoch with another topology (the same one again is accepted: drivers retry).
    pub(crate) fn topology_cmd(&self, s: &Store, a: &[Vec<u8>]) -> Reply {
        match (crate::data::upper(&a[0]).as_str(), a.len()) {
            ("GET", 1) => {
                let st = self.state();
                let marks = |m: &std::collections::BTreeMap<u16, String>| {
                    Reply::Array(
                        m.iter()
                            .flat_map(|(s, id)| [Reply::Int(*s as i64), Reply::bulk(id.as_bytes().to_vec())])
                            .collect(),
                    )
                };
                Reply::Array(vec![
                    Reply::Int(st.topo.epoch as i64),
                    Reply::bulk(st.topo.text().into_bytes()),
                    marks(&st.migrating),
                    marks(&st.importing),
                ])
            }
            ("SET", 3) => {
                let Some(epoch) = std::str::from_utf8(&a[1]).ok().and_then(|e| e.parse::<u64>().ok()) else {
                    return Reply::err("ERR the epoch must be a non-negative integer");
                };
                let Ok(text) = std::str::from_utf8(&a[2]) else { return Reply::err("ERR the topology is not text") };
                let t = match Topology::parse(epoch, text) {
                    Ok(t) => t,
                    Err(e) => return Reply::err(format!("ERR {e}")),
                };
                self.update(s, |st| {
                    let cur = st.topo.epoch;
                    if epoch < cur || (epoch == cur && t.text() != st.topo.text()) {
                        return Err(Reply::err(format!(
                            "ERR stale topology: epoch {epoch} {} this node's {cur}",
                            if epoch < cur { "is older than" } else { "differs from the one at" }
                        )));
                    }
                    st.adopt(t);
                    Ok(())
                })
            }
            _ => Reply::err("ERR PMKV.TOPOLOGY GET | PMKV.TOPOLOGY SET epoch text"),
        }
    }

    /// `CLUSTER SETSLOT slot MIGRATING id | IMPORTING id | STABLE | NODE id`.
    pub(crate) fn setslot(&self, s: &Store, a: &[Vec<u8>]) -> Reply {
        let Some(slot) = a.first().and_then(|b| slot::parse_slot(b)) else {
            return Reply::err("ERR Invalid or out of range slot");
        };
        let what = a.get(1).map(|w| crate::data::upper(w)).unwrap_or_default();
        let id = a.get(2).map(|i| String::from_utf8_lossy(i).into_owned());
        match (what.as_str(), id) {
            ("MIGRATING", Some(id)) if a.len() == 3 => self.update(s, |st| {
                if !st.owns(slot) {
                    return Err(Reply::err(format!("ERR I'm not the owner of hash slot {slot}")));
                }
                if id == st.myid || st.topo.node(&id).is_none() {
                    return Err(Reply::err(format!("ERR I don't know about node {id}")));
                }
                st.migrating.insert(slot, id);
                Ok(())
            }),
            ("IMPORTING", Some(id)) if a.len() == 3 => self.update(s, |st| {
                if st.owns(slot) {
                    return Err(Reply::err(format!("ERR I'm already the owner of hash slot {slot}")));
                }
                if id == st.myid || st.topo.node(&id).is_none() {
                    return Err(Reply::err(format!("ERR I don't know about node {id}")));
                }
                st.importing.insert(slot, id);
                Ok(())
            }),
            ("STABLE", None) => self.update(s, |st| {
                st.migrating.remove(&slot);
                st.importing.remove(&slot);
                Ok(())
            }),
            // Redis's way to end a move on one node. Here it changes this node's topology
            // only, at epoch + 1; a driver should push the whole topology instead
            // (PMKV.TOPOLOGY SET), which `pmkv cluster check` compares across nodes.
            ("NODE", Some(id)) if a.len() == 3 => self.update(s, |st| {
                let epoch = st.topo.epoch + 1;
                let t =
                    st.topo.with_owner(slot, &id, epoch).ok_or_else(|| Reply::err(format!("ERR Unknown node {id}")))?;
                st.adopt(t);
                Ok(())
            }),
            _ => Reply::err("ERR CLUSTER SETSLOT slot MIGRATING id | IMPORTING id | STABLE | NODE id"),
        }
    }

    /// `CLUSTER SLOTS`: [start, end, [host, port, id]] per range.
    pub fn slots_reply(&self) -> Reply {
        let st = self.state();
        let mut ranges: Vec<(u16, u16, &topology::Node)> =
            st.topo.nodes.iter().flat_map(|n| n.slots.iter().map(move |&(a, b)| (a, b, n))).collect();
        ranges.sort_by_key(|r| r.0);
        Reply::Array(
            ranges
                .into_iter()
                .map(|(a, b, n)| {
                    let (host, port) = n.host_port();
                    Reply::Array(vec![
                        Reply::Int(a as i64),
                        Reply::Int(b as i64),
                        Reply::Array(vec![
                            Reply::bulk(host.as_bytes().to_vec()),
                            Reply::Int(port as i64),
                            Reply::bulk(n.id.as_bytes().to_vec()),
                        ]),
                    ])
                })
                .collect(),
        )
    }

    /// `CLUSTER SHARDS`: one shard per node (no replicas).
    pub fn shards_reply(&self) -> Reply {
        let st = self.state();
        let b = |s: &str| Reply::bulk(s.as_bytes().to_vec());
        Reply::Array(
            st.topo
                .nodes
                .iter()
                .map(|n| {
                    let (host, port) = n.host_port();
                    let slots =
                        n.slots.iter().flat_map(|&(a, z)| [Reply::Int(a as i64), Reply::Int(z as i64)]).collect();
                    Reply::Map(vec![
                        (b("slots"), Reply::Array(slots)),
                        (
                            b("nodes"),
                            Reply::Array(vec![Reply::Map(vec![
                                (b("id"), b(&n.id)),
                                (b("port"), Reply::Int(port as i64)),
                                (b("ip"), b(host)),
                                (b("endpoint"), b(host)),
                                (b("role"), b("master")),
                                (b("replication-offset"), Reply::Int(0)),
                                (b("health"), b("online")),
                            ])]),
                        ),
                    ])
                })
                .collect(),
        )
    }

    /// `CLUSTER NODES`, in Redis's format (the bus port given as port + 10000, nominal:
    /// pmkv has no cluster bus).
    pub fn nodes_text(&self, port: u16) -> String {
        let st = self.state();
        let mut t = String::new();
        let mut me_listed = false;
        for n in &st.topo.nodes {
            let me = n.id == st.myid;
            me_listed |= me;
            let (_, p) = n.host_port();
            t.push_str(&format!(
                "{} {}@{} {} - 0 0 {} connected",
                n.id,
                n.addr,
                p as u32 + 10000,
                if me { "myself,master" } else { "master" },
                st.topo.epoch
            ));
            for &(a, b) in &n.slots {
                if a == b {
                    t.push_str(&format!(" {a}"));
                } else {
                    t.push_str(&format!(" {a}-{b}"));
                }
            }
            if me {
                for (s, id) in &st.migrating {
                    t.push_str(&format!(" [{s}->-{id}]"));
                }
                for (s, id) in &st.importing {
                    t.push_str(&format!(" [{s}-<-{id}]"));
                }
            }
            t.push('\n');
        }
        if !me_listed {
            t.push_str(&format!("{} :{}@{} myself,master - 0 0 0 connected\n", st.myid, port, port as u32 + 10000));
        }
        t
    }

    /// `CLUSTER INFO`.
    pub fn info_text(&self) -> String {
        let st = self.state();
        let covered = st.topo.covered();
        let size = st.topo.nodes.iter().filter(|n| !n.slots.is_empty()).count();
        let ok = covered == slot::SLOTS as usize;
        format!(
            "cluster_enabled:1\r\ncluster_state:{}\r\ncluster_slots_assigned:{covered}\r\ncluster_slots_ok:{covered}\r\n\
             cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{}\r\ncluster_size:{size}\r\n\
             cluster_current_epoch:{}\r\ncluster_my_epoch:{}\r\ncluster_stats_messages_sent:0\r\n\
             cluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n",
            if ok { "ok" } else { "fail" },
            st.topo.nodes.len().max(1),
            st.topo.epoch,
            st.topo.epoch
        )
    }
}

/// `CLUSTER subcommand …` on a cluster node.
pub(crate) fn command(sh: &crate::Shared, a: &[Vec<u8>]) -> Reply {
    let Some(cl) = &sh.cluster else { return Reply::err("ERR This instance has cluster support disabled") };
    let sub = crate::data::upper(&a[0]);
    let slot_arg = |i: usize| a.get(i).and_then(|b| slot::parse_slot(b)).ok_or_else(|| Reply::err("ERR Invalid slot"));
    match (sub.as_str(), a.len()) {
        ("MYID" | "MYSHARDID", 1) => Reply::bulk(cl.state().myid.as_bytes().to_vec()),
        ("INFO", 1) => Reply::bulk(cl.info_text().into_bytes()),
        ("NODES", 1) => Reply::bulk(cl.nodes_text(sh.port).into_bytes()),
        ("SLOTS", 1) => cl.slots_reply(),
        ("SHARDS", 1) => cl.shards_reply(),
        ("KEYSLOT", 2) => Reply::Int(slot::key_slot(&a[1]) as i64),
        ("COUNTKEYSINSLOT", 2) | ("GETKEYSINSLOT", 3) => {
            let slot = match slot_arg(1) {
                Ok(s) => s,
                Err(r) => return r,
            };
            let count = match a.get(2).map(|c| crate::data::int(c)) {
                None => usize::MAX,
                Some(Some(n)) if n >= 0 => n as usize,
                Some(_) => return Reply::err("ERR Invalid number of keys"),
            };
            let _gate = match sh.gate_read() {
                Ok(g) => g,
                Err(r) => return r,
            };
            let tx = crate::keyspace::Tx::new(&sh.store, sh.ks(0));
            let (mut n, mut keys) = (0usize, Vec::new());
            let walked = tx.keys_in(&crate::keyspace::Tx::slot_range(slot), |user, _, _| {
                if sub == "GETKEYSINSLOT" {
                    if keys.len() >= count {
                        return false;
                    }
                    keys.push(Reply::bulk(user.to_vec()));
                }
                n += 1;
                true
            });
            match walked {
                Err(r) => r,
                Ok(()) if sub == "GETKEYSINSLOT" => Reply::Array(keys),
                Ok(()) => Reply::Int(n as i64),
            }
        }
        ("SETSLOT", 3 | 4) => {
            let _gate = match sh.gate_write() {
                Ok(g) => g,
                Err(r) => return r,
            };
            cl.setslot(&sh.store, &a[1..])
        }
        ("HELP", 1) => Reply::Array(
            [
                "CLUSTER MYID | MYSHARDID | INFO | NODES | SLOTS | SHARDS",
                "CLUSTER KEYSLOT key | COUNTKEYSINSLOT slot | GETKEYSINSLOT slot count",
                "CLUSTER SETSLOT slot MIGRATING id | IMPORTING id | STABLE | NODE id",
                "PMKV.TOPOLOGY GET | PMKV.TOPOLOGY SET epoch text (the topology, pushed by pmkv cluster)",
            ]
            .iter()
            .map(|l| Reply::Simple(l.to_string()))
            .collect(),
        ),
        _ => Reply::err(format!(
            "ERR unknown CLUSTER subcommand or wrong number of arguments for '{}' (CLUSTER HELP lists them)",
            String::from_utf8_lossy(&a[0])
        )),
    }
}
