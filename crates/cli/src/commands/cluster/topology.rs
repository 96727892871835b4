//! The topology a driver pushes (`PMKV.TOPOLOGY SET epoch text`, docs/design/cluster.md) and
//! the pure decisions made on it: how slots are spread at `create`, which slots
//! `rebalance` moves, and `check`'s verdicts. Nothing here talks to a node, so all of it is
//! unit-tested without servers.

use std::collections::BTreeMap;

/// Hash slots of a cluster, as in Redis.
pub const SLOTS: usize = 16_384;

/// One node of a topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// 40 lowercase hex digits (`CLUSTER MYID`).
    pub id: String,
    /// `host:port` clients are sent to.
    pub addr: String,
}

/// A topology: its nodes in the order of its text, and the owner of every slot (an index
/// into `nodes`, or none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub nodes: Vec<Node>,
    pub owner: Vec<Option<usize>>,
}

/// `id` is a node id: 40 lowercase hex digits (the server's rule).
pub fn is_node_id(id: &str) -> bool {
    pmkv_server::cluster::valid_id(id)
}

impl Topology {
    /// No node, no slot owned (a node never configured).
    pub fn empty() -> Topology {
        Topology { nodes: Vec::new(), owner: vec![None; SLOTS] }
    }

    /// Parse a topology text: one line per node, `id host:port slots...`, slots as `a-b` or
    /// `a`. The grammar and its refusals are the server's own (`pmkv_server::cluster::
    /// Topology::parse`), so the driver never accepts a text a node would refuse.
    pub fn parse(text: &str) -> Result<Topology, String> {
        let server = pmkv_server::cluster::Topology::parse(0, text)?;
        let mut t = Topology::empty();
        for (i, n) in server.nodes.iter().enumerate() {
            t.nodes.push(Node { id: n.id.clone(), addr: n.addr.clone() });
            for &(a, b) in &n.slots {
                for s in a..=b {
                    t.owner[s as usize] = Some(i);
                }
            }
        }
        Ok(t)
    }

    /// The text of the topology: nodes in order, each with its slots as ascending ranges,
    /// every line ending in a newline.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (i, n) in self.nodes.iter().enumerate() {
            out.push_str(&n.id);
            out.push(' ');
            out.push_str(&n.addr);
            for (a, b) in self.ranges(i) {
                if a == b {
                    out.push_str(&format!(" {a}"));
                } else {
                    out.push_str(&format!(" {a}-{b}"));
                }
            }
            out.push('\n');
        }
        out
    }

    /// Node `i`'s slots as ascending inclusive ranges.
    pub fn ranges(&self, i: usize) -> Vec<(usize, usize)> {
        let mut v: Vec<(usize, usize)> = Vec::new();
        for s in self.slots_of(i) {
            match v.last_mut() {
                Some(l) if l.1 + 1 == s => l.1 = s,
                _ => v.push((s, s)),
            }
        }
        v
    }

    /// Node `i`'s slots, ascending.
    pub fn slots_of(&self, i: usize) -> Vec<usize> {
        (0..SLOTS).filter(|&s| self.owner[s] == Some(i)).collect()
    }

    /// The index of the node with this id.
    pub fn index_of_id(&self, id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    /// The node `name` designates: its full id, a unique prefix of its id (at least 4
    /// digits), or its `host:port`.
    pub fn find(&self, name: &str) -> Result<usize, String> {
        if let Some(i) = self.nodes.iter().position(|n| n.addr == name || n.id == name) {
            return Ok(i);
        }
        let hits: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| name.len() >= 4 && self.nodes[i].id.starts_with(&name.to_ascii_lowercase()))
            .collect();
        match hits[..] {
            [i] => Ok(i),
            [] => Err(format!("no node {name:?} in the cluster (give an id, a unique id prefix or host:port)")),
            _ => Err(format!("{name:?} is the prefix of {} node ids: give more digits", hits.len())),
        }
    }

    /// Slots no node owns.
    pub fn unowned(&self) -> Vec<usize> {
        (0..SLOTS).filter(|&s| self.owner[s].is_none()).collect()
    }
}

/// `create`: `n` nodes get contiguous, even ranges (sizes differ by at most one), node `i`
/// the `i`-th: for 3 nodes 0-5460, 5461-10922, 10923-16383, as redis-cli spreads them.
pub fn spread(n: usize) -> Vec<(usize, usize)> {
    // Boundaries at i * 16384 / n rounded to the nearest slot, as redis-cli rounds them.
    let at = |i: usize| (2 * i * SLOTS + n) / (2 * n);
    (0..n).map(|i| (at(i), at(i + 1) - 1)).collect()
}

/// `rebalance`: the fewest slot moves `(slot, from, to)` after which every node of `t`
/// owns as many of the owned slots as any other, give or take one. Nodes that own the
/// most keep the extra slot where there is one; a node gives away its highest slots, and a
/// node receives them in ascending order, so ranges stay as contiguous as they can. Slots
/// no node owns are left alone (`fix` is for them).
pub fn rebalance(t: &Topology) -> Vec<(usize, usize, usize)> {
    let n = t.nodes.len();
    if n == 0 {
        return Vec::new();
    }
    let mut count = vec![0usize; n];
    for o in t.owner.iter().flatten() {
        count[*o] += 1;
    }
    let total: usize = count.iter().sum();
    let (q, r) = (total / n, total % n);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(count[i]), i));
    let mut want = vec![q; n];
    for &i in order.iter().take(r) {
        want[i] = q + 1;
    }
    let mut given: Vec<(usize, usize)> = Vec::new();
    for i in 0..n {
        if count[i] > want[i] {
            let s = t.slots_of(i);
            given.extend(s[s.len() - (count[i] - want[i])..].iter().map(|&s| (s, i)));
        }
    }
    given.sort();
    let mut takers = (0..n).filter(|&i| want[i] > count[i]).flat_map(|i| std::iter::repeat_n(i, want[i] - count[i]));
    given.into_iter().map(|(s, from)| (s, from, takers.next().expect("as many wanted as given"))).collect()
}

/// What one node said when asked, for [`verdicts`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeState {
    pub myid: String,
    pub epoch: u64,
    pub text: String,
    /// (slot, target id)
    pub migrating: Vec<(usize, String)>,
    /// (slot, source id)
    pub importing: Vec<(usize, String)>,
    pub keys: u64,
}

/// The node holding the newest topology: the largest epoch; of two texts at that epoch,
/// the one more nodes hold, then the one of the lowest address (`fix`'s rule 2).
pub fn newest(nodes: &BTreeMap<String, Result<NodeState, String>>) -> Option<(&String, &NodeState)> {
    let ok = || nodes.iter().filter_map(|(a, r)| r.as_ref().ok().map(|s| (a, s)));
    let top = ok().map(|(_, s)| s.epoch).max()?;
    let holders = |text: &str| ok().filter(|(_, s)| s.epoch == top && s.text == text).count();
    // Addresses ascend: the first of the most held text wins a tie.
    ok().filter(|(_, s)| s.epoch == top)
        .fold(None, |best: Option<(&String, &NodeState, usize)>, (a, s)| {
            let n = holders(&s.text);
            match best {
                Some(b) if b.2 >= n => Some(b),
                _ => Some((a, s, n)),
            }
        })
        .map(|(a, s, _)| (a, s))
}

/// `check`'s verdicts on the nodes found (`addr` -> what it answered, or why it did not),
/// judged against the topology with the largest epoch: empty when the cluster is whole.
pub fn verdicts(nodes: &BTreeMap<String, Result<NodeState, String>>) -> Vec<String> {
    let mut bad = Vec::new();
    let ok: Vec<(&String, &NodeState)> = nodes.iter().filter_map(|(a, r)| r.as_ref().ok().map(|s| (a, s))).collect();
    for (a, r) in nodes {
        if let Err(e) = r {
            bad.push(format!("node {a} did not answer: {e}"));
        }
    }
    let Some((newest_addr, newest)) = newest(nodes) else {
        return bad;
    };
    let topo = match Topology::parse(&newest.text) {
        Ok(t) => t,
        Err(e) => {
            bad.push(format!("node {newest_addr}'s topology (epoch {}) does not parse: {e}", newest.epoch));
            return bad;
        }
    };
    if topo.nodes.is_empty() {
        bad.push(format!("no node is configured (epoch {}): run `pmkv cluster create`", newest.epoch));
        return bad;
    }
    for (a, s) in &ok {
        if s.epoch != newest.epoch || s.text != newest.text {
            bad.push(format!(
                "node {a} has topology epoch {} {}than node {newest_addr} (epoch {})",
                s.epoch,
                if s.epoch == newest.epoch { "with another text " } else { "older " },
                newest.epoch
            ));
        }
        match topo.nodes.iter().find(|n| &n.addr == *a) {
            Some(n) if n.id != s.myid => bad.push(format!("node {a} has id {}, the topology says {}", s.myid, n.id)),
            None => bad.push(format!("node {a} (id {}) is not in the topology of epoch {}", s.myid, newest.epoch)),
            Some(_) => {}
        }
        for (slot, to) in &s.migrating {
            bad.push(format!("node {a}: slot {slot} is MIGRATING to {to}"));
        }
        for (slot, from) in &s.importing {
            bad.push(format!("node {a}: slot {slot} is IMPORTING from {from}"));
        }
    }
    for n in &topo.nodes {
        if !nodes.contains_key(&n.addr) {
            bad.push(format!("node {} ({}) of the topology was not asked", n.addr, n.id));
        }
    }
    let unowned = topo.unowned();
    if !unowned.is_empty() {
        bad.push(format!("{} slots have no owner: {}", unowned.len(), ranges_text(&unowned)));
    }
    bad
}

/// Slots as `a-b c d-e` (at most 10 ranges, then `...`).
pub fn ranges_text(slots: &[usize]) -> String {
    let mut v: Vec<(usize, usize)> = Vec::new();
    for &s in slots {
        match v.last_mut() {
            Some(l) if l.1 + 1 == s => l.1 = s,
            _ => v.push((s, s)),
        }
    }
    let mut parts: Vec<String> =
        v.iter().take(10).map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    if v.len() > 10 {
        parts.push("...".into());
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(c: char) -> String {
        std::iter::repeat_n(c, 40).collect()
    }

    fn topo(n: usize) -> Topology {
        let mut t = Topology::empty();
        for (i, (a, b)) in spread(n).into_iter().enumerate() {
            t.nodes.push(Node { id: id(char::from(b'a' + i as u8)), addr: format!("127.0.0.1:{}", 7000 + i) });
            for s in a..=b {
                t.owner[s] = Some(i);
            }
        }
        t
    }

    #[test]
    fn create_spreads_slots_evenly_in_contiguous_ranges() {
        assert_eq!(spread(1), [(0, 16383)]);
        assert_eq!(spread(3), [(0, 5460), (5461, 10922), (10923, 16383)]);
        for n in 1..=50 {
            let s = spread(n);
            assert_eq!(s[0].0, 0);
            assert_eq!(s[n - 1].1, SLOTS - 1);
            assert!(s.windows(2).all(|w| w[0].1 + 1 == w[1].0), "contiguous, no gap");
            let sizes: Vec<usize> = s.iter().map(|(a, b)| b - a + 1).collect();
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{n}: {sizes:?}");
        }
    }

    #[test]
    fn topology_text_round_trips_and_bad_text_is_refused() {
        let t = topo(3);
        let text = t.text();
        assert_eq!(
            text,
            format!(
                "{} 127.0.0.1:7000 0-5460\n{} 127.0.0.1:7001 5461-10922\n{} 127.0.0.1:7002 10923-16383\n",
                id('a'),
                id('b'),
                id('c')
            )
        );
        assert_eq!(Topology::parse(&text).unwrap(), t);
        let mut u = t.clone();
        u.owner[7] = Some(2);
        u.owner[8] = None;
        u.nodes.push(Node { id: id('d'), addr: "h:1".into() });
        let ut = u.text();
        assert!(ut.starts_with(&format!("{} 127.0.0.1:7000 0-6 9-5460\n", id('a'))), "{ut}");
        assert!(ut.contains(" 7 10923-16383\n") && ut.ends_with(&format!("{} h:1\n", id('d'))), "{ut}");
        assert_eq!(Topology::parse(&ut).unwrap(), u);
        assert_eq!(Topology::parse("").unwrap(), Topology::empty());
        let a = id('a');
        let b = id('b');
        for bad in [
            format!("{a} h:1 0-10\n{b} h:2 10"),
            format!("{a} h:1 0-16384"),
            format!("{a} h:1 5-4"),
            format!("{a} h:1 x"),
            format!("{a} h:1\n{a} h:2"),
            format!("{a} h:1\n{b} h:1"),
            format!("{} h:1", &a[..39]),
            format!("{} h:1", a.to_uppercase()),
            format!("{a} h 1"),
            a.to_string(),
        ] {
            assert!(Topology::parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn nodes_are_found_by_id_prefix_or_address() {
        let t = topo(3);
        assert_eq!(t.find(&id('b')).unwrap(), 1);
        assert_eq!(t.find("cccc").unwrap(), 2);
        assert_eq!(t.find("127.0.0.1:7000").unwrap(), 0);
        assert!(t.find("ccc").is_err(), "too short a prefix");
        assert!(t.find("dddd").is_err());
    }

    /// Applies `moves` to `t`, checking each move's source owns the slot.
    fn apply(t: &Topology, moves: &[(usize, usize, usize)]) -> Topology {
        let mut u = t.clone();
        for &(s, from, to) in moves {
            assert_eq!(u.owner[s], Some(from), "slot {s} moved from a node that does not own it");
            u.owner[s] = Some(to);
        }
        u
    }

    fn counts(t: &Topology) -> Vec<usize> {
        (0..t.nodes.len()).map(|i| t.slots_of(i).len()).collect()
    }

    #[test]
    fn rebalance_evens_slots_with_the_fewest_moves() {
        // A new node owning nothing: it gets a quarter, each old node gives a quarter of its.
        let mut t = topo(3);
        t.nodes.push(Node { id: id('d'), addr: "h:4".into() });
        let m = rebalance(&t);
        assert_eq!(m.len(), 4096, "the new node's share, no more");
        assert!(m.iter().all(|&(_, _, to)| to == 3));
        let u = apply(&t, &m);
        assert_eq!(counts(&u), [4096, 4096, 4096, 4096]);
        assert_eq!(u.ranges(0).len(), 1, "each old node gives its highest slots: still one range");
        assert!(rebalance(&u).is_empty(), "balanced: nothing to move");
        // Skewed: the fewest moves is the sum of the excesses over the even share.
        let mut t = topo(2);
        for s in 0..10_000 {
            t.owner[s] = Some(0);
        }
        let m = rebalance(&t);
        assert_eq!(m.len(), 10_000 - 8192);
        assert_eq!(counts(&apply(&t, &m)), [8192, 8192]);
        // Unowned slots stay unowned; an odd total leaves one node with one more.
        let mut t = topo(3);
        t.owner[0] = None;
        t.owner[100] = Some(1);
        let u = apply(&t, &rebalance(&t));
        let c = counts(&u);
        assert_eq!(c.iter().sum::<usize>(), SLOTS - 1);
        assert!(c.iter().max().unwrap() - c.iter().min().unwrap() <= 1, "{c:?}");
        assert_eq!(u.owner[0], None);
        assert!(rebalance(&Topology::empty()).is_empty());
    }

    fn state(t: &Topology, i: usize, epoch: u64) -> NodeState {
        NodeState { myid: t.nodes[i].id.clone(), epoch, text: t.text(), migrating: vec![], importing: vec![], keys: 0 }
    }

    #[test]
    fn check_passes_a_whole_cluster_and_names_what_is_wrong() {
        let t = topo(3);
        let whole: BTreeMap<String, Result<NodeState, String>> =
            (0..3).map(|i| (t.nodes[i].addr.clone(), Ok(state(&t, i, 5)))).collect();
        assert_eq!(verdicts(&whole), Vec::<String>::new());

        let mut m = whole.clone();
        m.get_mut("127.0.0.1:7001").unwrap().as_mut().unwrap().epoch = 4;
        let v = verdicts(&m);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("127.0.0.1:7001") && v[0].contains("epoch 4 older"), "{v:?}");

        let mut m = whole.clone();
        let mut u = t.clone();
        u.owner[0] = Some(1);
        m.get_mut("127.0.0.1:7002").unwrap().as_mut().unwrap().text = u.text();
        let v = verdicts(&m);
        assert!(v.len() == 1 && v[0].contains("another text"), "{v:?}");

        let mut m = whole.clone();
        let s = m.get_mut("127.0.0.1:7000").unwrap().as_mut().unwrap();
        s.migrating.push((3, id('b')));
        let s = m.get_mut("127.0.0.1:7001").unwrap().as_mut().unwrap();
        s.importing.push((3, id('a')));
        let v = verdicts(&m);
        assert!(v.len() == 2 && v[0].contains("slot 3 is MIGRATING") && v[1].contains("IMPORTING"), "{v:?}");

        let mut m = whole.clone();
        m.insert("127.0.0.1:7002".into(), Err("cannot connect".into()));
        let v = verdicts(&m);
        assert!(v.len() == 1 && v[0].contains("did not answer"), "{v:?}");

        let mut m = whole.clone();
        m.remove("127.0.0.1:7002");
        assert!(verdicts(&m)[0].contains("was not asked"));

        let mut m = whole.clone();
        let mut u = t.clone();
        for s in 0..10 {
            u.owner[s] = None;
        }
        for s in m.values_mut() {
            s.as_mut().unwrap().text = u.text();
        }
        let v = verdicts(&m);
        assert!(v.len() == 1 && v[0].contains("10 slots have no owner: 0-9"), "{v:?}");

        let mut m = whole.clone();
        m.get_mut("127.0.0.1:7000").unwrap().as_mut().unwrap().myid = id('f');
        assert!(verdicts(&m)[0].contains("has id"));

        let fresh: BTreeMap<String, Result<NodeState, String>> = [(
            "h:1".to_string(),
            Ok(NodeState {
                myid: id('a'),
                epoch: 0,
                text: String::new(),
                migrating: vec![],
                importing: vec![],
                keys: 0,
            }),
        )]
        .into();
        assert!(verdicts(&fresh)[0].contains("no node is configured"));
    }

    #[test]
    fn the_newest_topology_is_the_largest_epoch_then_the_most_held() {
        let t = topo(3);
        let mut u = t.clone();
        u.owner[0] = Some(1);
        let mut m: BTreeMap<String, Result<NodeState, String>> =
            (0..3).map(|i| (t.nodes[i].addr.clone(), Ok(state(&t, i, 5)))).collect();
        m.insert("127.0.0.1:6999".into(), Err("down".into()));
        assert_eq!(newest(&m).unwrap().0, "127.0.0.1:7000", "all agree: the lowest address");
        m.get_mut("127.0.0.1:7000").unwrap().as_mut().unwrap().text = u.text();
        assert_eq!(newest(&m).unwrap().1.text, t.text(), "same epoch: the text two nodes hold");
        m.get_mut("127.0.0.1:7002").unwrap().as_mut().unwrap().epoch = 6;
        assert_eq!(newest(&m).unwrap().0, "127.0.0.1:7002", "a larger epoch wins over more holders");
        m.get_mut("127.0.0.1:7002").unwrap().as_mut().unwrap().epoch = 5;
        m.get_mut("127.0.0.1:7001").unwrap().as_mut().unwrap().text = u.text();
        assert_eq!(newest(&m).unwrap().0, "127.0.0.1:7000", "two against one, the other way");
        let down: BTreeMap<String, Result<NodeState, String>> = [("h:1".to_string(), Err("x".to_string()))].into();
        assert!(newest(&down).is_none());
    }

    #[test]
    fn slot_lists_print_as_ranges() {
        assert_eq!(ranges_text(&[1, 2, 3, 5, 7, 8]), "1-3 5 7-8");
        assert_eq!(ranges_text(&(0..40).step_by(2).collect::<Vec<_>>()), "0 2 4 6 8 10 12 14 16 18 ...");
    }
}
