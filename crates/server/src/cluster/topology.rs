//! The topology a driver pushes (`PMKV.TOPOLOGY SET epoch text`) and the node's durable
//! cluster state: its id, the topology, and the slots it is migrating or importing.
//!
//! Both are text, so that an operator can read them with `PMKV.TOPOLOGY GET` or in the pool
//! (`pmkv get`); the byte layout of the state record is in docs/format/server.md.

use super::slot::SLOTS;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One node: its id (40 lowercase hex digits), the address clients reach it at, and the
/// slot ranges it owns (ascending, merged).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    pub addr: String,
    pub slots: Vec<(u16, u16)>,
}

impl Node {
    /// The host and port of `addr` (`host:port`, `[v6]:port`).
    pub fn host_port(&self) -> (&str, u16) {
        split_addr(&self.addr).unwrap_or((&self.addr, 0))
    }
}

/// `host:port` (a bracketed IPv6 host allowed): the host without brackets and the port.
pub fn split_addr(a: &str) -> Option<(&str, u16)> {
    let (host, port) = a.rsplit_once(':')?;
    let port = port.parse::<u16>().ok().filter(|&p| p != 0)?;
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    // Printable ASCII only: a NUL (a zeroed byte) or other control byte is damage, not a
    // name (hostnames and IP literals never hold one).
    (!host.is_empty() && host.bytes().all(|b| b.is_ascii_graphic())).then_some((host, port))
}

/// Whether `id` is a node id: 40 lowercase hex digits, as Redis's.
pub fn valid_id(id: &str) -> bool {
    id.len() == 40 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Who owns which slot, at which epoch.
#[derive(Clone, Debug)]
pub struct Topology {
    pub epoch: u64,
    pub nodes: Vec<Node>,
    /// Slot → index into `nodes`, [`NOBODY`] when no node owns it.
    owner: Vec<u16>,
}

pub const NOBODY: u16 = u16::MAX;

impl Default for Topology {
    fn default() -> Self {
        Topology { epoch: 0, nodes: Vec::new(), owner: vec![NOBODY; SLOTS as usize] }
    }
}

fn parse_range(t: &str) -> Option<(u16, u16)> {
    let num = |s: &str| s.parse::<u16>().ok().filter(|&n| n < SLOTS);
    match t.split_once('-') {
        Some((a, b)) => Some((num(a)?, num(b)?)).filter(|(a, b)| a <= b),
        None => num(t).map(|n| (n, n)),
    }
}

impl Topology {
    /// Parse `text` (one line per node: `id host:port slots…`, slots `a-b` or `a`), refusing
    /// it whole when anything is wrong: a malformed line, a slot out of range or given
    /// twice, an id or address that repeats.
    pub fn parse(epoch: u64, text: &str) -> Result<Topology, String> {
        let mut t = Topology { epoch, ..Topology::default() };
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let bad = |why: String| format!("topology line {}: {why}", i + 1);
            let mut words = line.split_ascii_whitespace();
            let id = words.next().unwrap_or_default();
            if !valid_id(id) {
                return Err(bad(format!("{id:?} is not a node id (40 lowercase hex digits)")));
            }
            let addr = words.next().ok_or_else(|| bad("no address".into()))?;
            if split_addr(addr).is_none() {
                return Err(bad(format!("{addr:?} is not host:port")));
            }
            if t.nodes.iter().any(|n| n.id == id || n.addr == addr) {
                return Err(bad(format!("node {id} or address {addr} given twice")));
            }
            let idx = t.nodes.len() as u16;
            for w in words {
                let (a, b) = parse_range(w).ok_or_else(|| bad(format!("{w:?} is not a slot or a slot range")))?;
                for s in a..=b {
                    if t.owner[s as usize] != NOBODY {
                        return Err(bad(format!("slot {s} given twice")));
                    }
                    t.owner[s as usize] = idx;
                }
            }
            t.nodes.push(Node { id: id.to_string(), addr: addr.to_string(), slots: Vec::new() });
        }
        t.index_slots();
        Ok(t)
    }

    /// Rebuild each node's ranges from `owner`.
    fn index_slots(&mut self) {
        for n in &mut self.nodes {
            n.slots.clear();
        }
        let mut s = 0usize;
        while s < SLOTS as usize {
            let o = self.owner[s];
            let mut e = s;
            while e + 1 < SLOTS as usize && self.owner[e + 1] == o {
                e += 1;
            }
            if o != NOBODY {
                self.nodes[o as usize].slots.push((s as u16, e as u16));
            }
            s = e + 1;
        }
    }

    /// The canonical text: nodes in the order given, ranges merged and ascending, each line
    /// ending in a newline. Two topologies are the same when their texts are.
    pub fn text(&self) -> String {
        let mut t = String::new();
        for n in &self.nodes {
            t.push_str(&n.id);
            t.push(' ');
            t.push_str(&n.addr);
            for &(a, b) in &n.slots {
                if a == b {
                    let _ = write!(t, " {a}");
                } else {
                    let _ = write!(t, " {a}-{b}");
                }
            }
            t.push('\n');
        }
        t
    }

    /// The node owning `slot`.
    pub fn owner(&self, slot: u16) -> Option<&Node> {
        self.nodes.get(self.owner[slot as usize] as usize)
    }

    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Slots some node owns.
    pub fn covered(&self) -> usize {
        self.owner.iter().filter(|&&o| o != NOBODY).count()
    }

    /// The same topology with `slot` given to node `id` (which must be in it), at `epoch`.
    pub fn with_owner(&self, slot: u16, id: &str, epoch: u64) -> Option<Topology> {
        let idx = self.nodes.iter().position(|n| n.id == id)?;
        let mut t = self.clone();
        t.owner[slot as usize] = idx as u16;
        t.epoch = epoch;
        t.index_slots();
        Some(t)
    }
}

/// What a node keeps about the cluster, durably, in one record of its pool.
#[derive(Clone, Debug, Default)]
pub struct State {
    pub myid: String,
    pub topo: Topology,
    /// Slot → the node it is moving to (this node owns it).
    pub migrating: BTreeMap<u16, String>,
    /// Slot → the node it is coming from (this node does not own it yet).
    pub importing: BTreeMap<u16, String>,
}

/// The first line of the state record: its format and version.
const MAGIC: &str = "pmkv-cluster-state 1";

impl State {
    /// A new node's state: its id, no topology.
    pub fn new(myid: String) -> State {
        State { myid, ..State::default() }
    }

    /// Whether this node owns `slot`.
    pub fn owns(&self, slot: u16) -> bool {
        self.topo.owner(slot).is_some_and(|n| n.id == self.myid)
    }

    /// Take topology `t`: migration marks that no longer apply are dropped (a slot this
    /// node gave away is no longer migrating; one it now owns no longer importing).
    pub fn adopt(&mut self, t: Topology) {
        self.topo = t;
        let owned: Vec<u16> = self.migrating.keys().copied().filter(|&s| self.owns(s)).collect();
        self.migrating.retain(|s, _| owned.contains(s));
        let me = self.myid.clone();
        let topo = &self.topo;
        self.importing.retain(|&s, _| topo.owner(s).is_none_or(|n| n.id != me));
    }

    /// The record's bytes (docs/format/server.md).
    pub fn encode(&self) -> Vec<u8> {
        let mut t = format!("{MAGIC}\nmyid {}\nepoch {}\n", self.myid, self.topo.epoch);
        for (s, id) in &self.migrating {
            let _ = writeln!(t, "migrating {s} {id}");
        }
        for (s, id) in &self.importing {
            let _ = writeln!(t, "importing {s} {id}");
        }
        t.push_str("topology\n");
        t.push_str(&self.topo.text());
        t.into_bytes()
    }

    /// Read a state record; `Err` says what is wrong with it.
    pub fn decode(b: &[u8]) -> Result<State, String> {
        let text = std::str::from_utf8(b).map_err(|_| "not UTF-8".to_string())?;
        let (head, topo) = text.split_once("topology\n").ok_or("no topology section")?;
        let mut lines = head.lines();
        match lines.next() {
            Some(MAGIC) => {}
            Some(l) if l.starts_with("pmkv-cluster-state ") => return Err(format!("unsupported version: {l:?}")),
            _ => return Err("not a cluster state record".into()),
        }
        let mut st = State::default();
        let mut epoch = None;
        for l in lines {
            let w: Vec<&str> = l.split_ascii_whitespace().collect();
            let slot = |s: &str| s.parse::<u16>().ok().filter(|&s| s < SLOTS);
            match w.as_slice() {
                ["myid", id] if valid_id(id) => st.myid = id.to_string(),
                ["epoch", e] => epoch = e.parse::<u64>().ok(),
                ["migrating", s, id] if valid_id(id) => {
                    st.migrating.insert(slot(s).ok_or("bad slot")?, id.to_string());
                }
                ["importing", s, id] if valid_id(id) => {
                    st.importing.insert(slot(s).ok_or("bad slot")?, id.to_string());
                }
                _ => return Err(format!("malformed line {l:?}")),
            }
        }
        if st.myid.is_empty() {
            return Err("no node id".into());
        }
        st.topo = Topology::parse(epoch.ok_or("no epoch")?, topo)?;
        Ok(st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(c: char) -> String {
        std::iter::repeat_n(c, 40).collect()
    }

    #[test]
    fn topology_text_is_canonical_and_checked() {
        let text = format!("{} 127.0.0.1:7001 0-99 100 101-200\n{} [::1]:7002 16383 201-300\n", id('a'), id('b'));
        let t = Topology::parse(3, &text).unwrap();
        assert_eq!(t.text(), format!("{} 127.0.0.1:7001 0-200\n{} [::1]:7002 201-300 16383\n", id('a'), id('b')));
        assert_eq!(t.owner(150).unwrap().id, id('a'));
        assert_eq!(t.owner(16383).unwrap().host_port(), ("::1", 7002));
        assert!(t.owner(301).is_none());
        assert_eq!(t.covered(), 301 + 1);
        let again = Topology::parse(3, &t.text()).unwrap();
        assert_eq!(again.text(), t.text());
        for bad in [
            format!("{} h:1 0-10\n{} g:2 10", id('a'), id('b')),
            format!("{} h:1 10-5", id('a')),
            format!("{} h:1 16384", id('a')),
            format!("{} h:1\n{} h:1", id('a'), id('b')),
            format!("{} h:1\n{} g:1", id('a'), id('a')),
            format!("{} h 1", id('a')),
            format!("{} h:0 1", id('a')),
            "XYZ h:1 1".to_string(),
        ] {
            assert!(Topology::parse(1, &bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn state_round_trips_and_adopt_drops_stale_marks() {
        let text = format!("{} h:1 0-8191\n{} g:2 8192-16383\n", id('a'), id('b'));
        let mut st = State::new(id('a'));
        st.adopt(Topology::parse(7, &text).unwrap());
        st.migrating.insert(5, id('b'));
        st.importing.insert(9000, id('b'));
        let back = State::decode(&st.encode()).unwrap();
        assert_eq!(back.encode(), st.encode());
        assert_eq!(back.topo.epoch, 7);
        assert!(back.owns(5) && !back.owns(9000));
        // Slot 5 moves to b, slot 9000 to a: both marks end.
        let t2 = st.topo.with_owner(5, &id('b'), 8).unwrap().with_owner(9000, &id('a'), 8).unwrap();
        st.adopt(t2);
        assert!(st.migrating.is_empty() && st.importing.is_empty());
        assert!(State::decode(b"pmkv-cluster-state 2\ntopology\n").unwrap_err().contains("version"));
        assert!(State::decode(b"junk").is_err());
        assert!(State::decode(format!("{MAGIC}\nmyid {}\ntopology\n", id('a')).as_bytes()).is_err());
    }

    /// The state record's text has no all-zero "nothing here": a NUL is never valid in a
    /// token, so zeroed bytes anywhere in it (past the engine's own value check) are
    /// refused at start, never read as a shorter topology or a missing migration mark.
    #[test]
    fn zeroed_bytes_anywhere_in_the_state_are_refused() {
        let text = format!("{} h:1 0-8191\n{} g:2 8192-16383\n", id('a'), id('b'));
        let mut st = State::new(id('a'));
        st.adopt(Topology::parse(7, &text).unwrap());
        st.migrating.insert(5, id('b'));
        st.importing.insert(9000, id('b'));
        let good = st.encode();
        for width in [1, 8] {
            for at in 0..=good.len() - width {
                let mut bad = good.clone();
                bad[at..at + width].fill(0);
                assert!(State::decode(&bad).is_err(), "zeroed {width} bytes at {at} accepted");
            }
        }
    }
}
