//! Open, format and crash recovery (docs/design/woart.md, "Recovery").
//!
//! WOART needs no log: every operation's last step is one 8-byte store. What a
//! crash can leave behind is (a) objects published but never linked (a new leaf or node
//! whose linking store did not happen), (b) objects unlinked but not yet freed (the old
//! node of a growth, a replaced or deleted leaf, an emptied node), (c) a stale header
//! after a path-compression split, and (d) an emptied node still linked. Every
//! open walks the whole tree (it counts the records and verifies every object); an
//! unclean open also repairs (c) and (d) and then sweeps: every used object of WOART's
//! types that the walk did not reach is freed. Cost: one visit of every node and leaf,
//! plus one pass over the allocator's chunk lists. A clean open instead checks the walk
//! against the seal the clean close wrote (record count and a hash of every leaf's CRC).

use crate::error::{Error, Result};
use crate::layout::*;
use crate::node::{corrupt, Pm};
use crate::tree::Woart;
use parking_lot::RwLock;
use pmkv_core::RecoveryReport;
use pmkv_substrate::epalloc::{EpAlloc, EPALLOC_ROOT};
use pmkv_substrate::{EngineClaim, Pool};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a walk of the tree found.
#[derive(Default)]
pub(crate) struct Walk {
    pub(crate) reachable: HashSet<u64>,
    pub(crate) count: u64,
    pub(crate) hash: u64,
    /// Stale headers: (word offset, repaired header).
    pub(crate) headers: Vec<(u64, u64)>,
    /// Empty nodes still linked: (parent kind, parent, byte).
    pub(crate) empties: Vec<(Kind, u64, u8)>,
    pub(crate) nodes: u64,
    /// Children of each Node48 and Node256 (`Pm::population`).
    pub(crate) pops: HashMap<u64, u16>,
}

impl Pm<'_> {
    /// Whether `off` is a used object of `kind` big enough for it.
    pub(crate) fn valid(&self, kind: Kind, off: u64) -> bool {
        off != 0
            && self.pool.contains(off, kind.size() as u64)
            && self.alloc.type_of(off) == Some(kind.type_id())
            && self.alloc.is_used(off)
            && self.alloc.capacity(off) >= kind.size()
    }

    pub(crate) fn check_leaf(&self, off: u64) -> Result<()> {
        if !self.valid(Kind::Leaf, off) {
            return Err(corrupt(format!("leaf pointer {off:#x} names no leaf")));
        }
        let h = self.load(off);
        let (kl, vl) = (h as u32 as usize, (h >> 32) as usize);
        let after = if inline_value(vl) { 0 } else { vl };
        if kl > MAX_KEY || vl > MAX_VALUE || LEAF_HEAD + kl + after > self.alloc.capacity(off) {
            return Err(corrupt(format!("leaf {off:#x}: lengths {kl}+{vl} do not fit")));
        }
        let (k, v) = self.leaf(off);
        if leaf_crc(k, v) != self.load(off + 8) as u32 {
            return Err(corrupt(format!("leaf {off:#x} fails its CRC")));
        }
        // The CRC leaves a value in the value word out (it changes in place); its padding
        // must be zero, as every write leaves it.
        if after == 0 && self.load(off + LEAF_VALUE) != value_word(v) {
            return Err(corrupt(format!("leaf {off:#x}: its value word has bytes past the value's length")));
        }
        Ok(())
    }

    /// The commit words of a node are well formed.
    pub(crate) fn check_node_words(&self, kind: Kind, n: u64) -> Result<()> {
        let t = self.load(n + TERM);
        if t != 0 && !matches!(untag(t), Some((Kind::Leaf, _))) {
            return Err(corrupt(format!("node {n:#x}: terminal word {t:#x} is not a leaf")));
        }
        match kind {
            Kind::N4 => {
                let m = self.load(n + N4_META);
                let cnt = ((m >> 32) & 0xff) as usize;
                let idx = (m as u32).to_le_bytes();
                if cnt > 4 || m >> 40 != 0 || (0..cnt).any(|i| idx[i] > 3 || idx[..i].contains(&idx[i])) {
                    return Err(corrupt(format!("node4 {n:#x}: bad slot array {m:#x}")));
                }
                let keys: Vec<u8> = idx[..cnt].iter().map(|&p| self.byte(n + N4_KEYS + u64::from(p))).collect();
                if keys.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(corrupt(format!("node4 {n:#x}: keys out of order")));
                }
            }
            Kind::N16 => {
                let bm = self.load(n + N16_BITMAP);
                let ch = self.children(kind, n);
                if bm >> 16 != 0 || ch.windows(2).any(|w| w[0].0 == w[1].0) {
                    return Err(corrupt(format!("node16 {n:#x}: bad bitmap or duplicate keys")));
                }
            }
            Kind::N48 => {
                let mut seen = [false; 48];
                for b in 0..256u64 {
                    let i = self.byte(n + N48_INDEX + b) as usize;
                    if i > 48 || (i > 0 && std::mem::replace(&mut seen[i - 1], true)) {
                        return Err(corrupt(format!("node48 {n:#x}: bad child index")));
                    }
                }
            }
            _ => {}
        }
        if self.children(kind, n).iter().any(|c| untag(c.2).is_none()) {
            return Err(corrupt(format!("node {n:#x}: a child word names nothing")));
        }
        Ok(())
    }

    /// Verify the node `v` names (its key prefix, up to its depth, is `path`), count the
    /// leaves it holds, and push its child nodes on `stack`.
    fn visit(&self, v: Visit, path: &mut Vec<u8>, strict: bool, w: &mut Walk, stack: &mut Vec<Visit>) -> Result<()> {
        let (kind, n, d) = (v.kind, v.n, v.d);
        if !self.valid(kind, n) || !w.reachable.insert(n) {
            return Err(corrupt(format!("node pointer {n:#x} names no node, or one reached twice")));
        }
        w.nodes += 1;
        let h = self.header(n);
        if usize::from(h.depth) != d && strict {
            return Err(corrupt(format!("node {n:#x}: header depth {} met at depth {d}", h.depth)));
        }
        let p = self.eff_plen(n, d)?;
        let Some(l) = self.first_leaf(kind, n, true)? else {
            match v.edge {
                None => return Ok(()),
                Some(_) if strict => return Err(corrupt(format!("node {n:#x} is empty"))),
                Some(e) => {
                    w.empties.push(e);
                    return Ok(());
                }
            }
        };
        let lk = self.leaf_key(l);
        if lk.len() < d + p || !lk.starts_with(path) {
            return Err(corrupt(format!("node {n:#x}: leaf {l:#x} does not fit its path")));
        }
        let pre = &lk[d..d + p];
        if usize::from(h.depth) == d {
            if h.partial[..p.min(PARTIAL)] != pre[..p.min(PARTIAL)] {
                return Err(corrupt(format!("node {n:#x}: header prefix differs from its leaves")));
            }
        } else {
            w.headers.push((n + HDR, Header::new(d, pre).encode()));
        }
        path.extend_from_slice(pre);
        let base = path.len();
        if let Some((_, t)) = untag(self.load(n + TERM)) {
            self.leaf_at(t, path, true, w)?;
        }
        let children = self.children(kind, n);
        if matches!(kind, Kind::N48 | Kind::N256) {
            w.pops.insert(n, children.len() as u16);
        }
        for (b, _, cw) in children {
            match untag(cw) {
                Some((Kind::Leaf, c)) => {
                    path.push(b);
                    self.leaf_at(c, path, false, w)?;
                    path.pop();
                }
                Some((k, c)) => stack.push(Visit { kind: k, n: c, d: d + p + 1, base, edge: Some((kind, n, b)) }),
                None => return Err(corrupt(format!("node {n:#x}: bad child word {cw:#x}"))),
            }
        }
        Ok(())
    }

    fn leaf_at(&self, l: u64, path: &[u8], term: bool, w: &mut Walk) -> Result<()> {
        self.check_leaf(l)?;
        if !w.reachable.insert(l) {
            return Err(corrupt(format!("leaf {l:#x} reached twice")));
        }
        let k = self.leaf_key(l);
        if !k.starts_with(path) || (term && k.len() != path.len()) || (!term && k.len() < path.len()) {
            return Err(corrupt(format!("leaf {l:#x} does not fit its place in the tree")));
        }
        w.count += 1;
        w.hash = w.hash.wrapping_add(self.leaf_hash_of(l));
        Ok(())
    }
}

/// A node the walk has still to visit: its kind and offset, the depth it is met at, the
/// length of its parent's key prefix and the edge to it (parent kind, parent, byte).
struct Visit {
    kind: Kind,
    n: u64,
    d: usize,
    base: usize,
    edge: Option<(Kind, u64, u8)>,
}

/// Walk the whole tree with an explicit stack (a path may be as long as a key, too deep
/// for recursion). `strict`: a stale header or an empty node below the root is damage (a
/// clean open, or a variant whose crashes leave neither).
fn walk_tree(pm: &Pm<'_>, root: u64, strict: bool) -> Result<Walk> {
    let mut w = Walk::default();
    let mut path = Vec::new();
    let mut stack = vec![Visit { kind: Kind::N256, n: root, d: 0, base: 0, edge: None }];
    while let Some(v) = stack.pop() {
        path.truncate(v.base);
        if let Some((_, _, b)) = v.edge {
            path.push(b);
        }
        pm.visit(v, &mut path, strict, &mut w, &mut stack)?;
    }
    Ok(w)
}

/// Open the tree in `pool`, formatting it if the pool is new.
pub(crate) fn open(pool: Arc<Pool>, variant: Variant) -> Result<Woart> {
    let t0 = Instant::now();
    let claim = EngineClaim::take(&pool)?;
    let sb = pool.root(SUPER_ROOT);
    if sb == 0 {
        pool.check_writable()?;
        return format(pool, claim, t0, variant);
    }
    let alloc = EpAlloc::open(pool.clone())?;
    let pm = Pm { pool: &pool, alloc: &alloc, pops: None };
    if !(alloc.type_of(sb) == Some(SUPER) && alloc.is_used(sb)) {
        return Err(corrupt(format!("superblock {sb:#x} is not a superblock object")));
    }
    if alloc.capacity(sb) < SUPER_SIZE || pm.load(sb) != variant.magic() {
        return Err(corrupt(format!("bad superblock magic: not a {} pool", variant.name())));
    }
    let v = pm.load(sb + SB_VERSION) as u32;
    if v != VERSION {
        return Err(Error::Version(format!(
            "{} format version {v}: this build reads format version {VERSION}",
            variant.name()
        )));
    }
    let root = pm.load(sb + SB_ROOT);
    if !pm.valid(Kind::N256, root) {
        return Err(corrupt(format!("root {root:#x} is not a Node256")));
    }
    let clean = pool.was_clean();
    let rw = !pool.is_read_only();
    let mut w = walk_tree(&pm, root, clean || !variant.lazy_repairs())?;
    if clean {
        let (c, h, chk) = (pm.load(sb + SB_SEAL_COUNT), pm.load(sb + SB_SEAL_HASH), pm.load(sb + SB_SEAL_CHECK));
        if chk != seal_check(variant.magic(), c, h) || c != w.count || h != w.hash {
            return Err(corrupt("the tree does not match the seal of the clean close"));
        }
    }
    let mut rep = RecoveryReport::new(variant.name());
    rep.clean_shutdown = clean;
    let (mut repaired, mut orphans) = (0u64, 0u64);
    if !clean && rw {
        if !w.headers.is_empty() || !w.empties.is_empty() {
            for &(at, hw) in &w.headers {
                pm.store_persist(at, hw);
            }
            for &(k, n, b) in &w.empties {
                pm.remove_child(k, n, b);
            }
            repaired = (w.headers.len() + w.empties.len()) as u64;
            w = walk_tree(&pm, root, false)?;
        }
        for ty in TYPES {
            let mut stale = Vec::new();
            alloc.for_each_used(ty, |o| {
                if o != sb && !w.reachable.contains(&o) {
                    stale.push(o)
                }
            });
            for o in stale {
                alloc.try_free(o)?;
                orphans += 1;
            }
        }
    }
    rep.records = w.count;
    rep.orphans_freed = orphans;
    rep.duration = Duration::from_micros(t0.elapsed().as_micros() as u64);
    let mut rep = rep.with_detail("nodes", w.nodes);
    if variant.lazy_repairs() {
        rep = rep.with_detail("headers_and_empty_nodes_repaired", repaired);
    }
    Ok(assemble(pool, alloc, variant, sb, root, (w.count, w.hash, w.pops), rep, claim))
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    pool: Arc<Pool>,
    alloc: EpAlloc,
    variant: Variant,
    sb: u64,
    root: u64,
    (count, hash, pops): (u64, u64, HashMap<u64, u16>),
    recovery: RecoveryReport,
    claim: EngineClaim,
) -> Woart {
    Woart {
        pool,
        alloc,
        variant,
        sb,
        root,
        lock: RwLock::new(()),
        pops: parking_lot::Mutex::new(pops),
        count: AtomicU64::new(count),
        hash: AtomicU64::new(hash),
        recovery,
        closed: false,
        _claim: claim,
    }
}

/// Format a new tree: an empty root Node256 and the superblock, published, then named by
/// pool root 1 (one atomic store). A crash before that leaves objects no root names,
/// freed by the next try.
fn format(pool: Arc<Pool>, claim: EngineClaim, t0: Instant, variant: Variant) -> Result<Woart> {
    let alloc =
        if pool.root(EPALLOC_ROOT) == 0 { EpAlloc::create(pool.clone())? } else { EpAlloc::open(pool.clone())? };
    for ty in TYPES {
        let mut stale = Vec::new();
        alloc.for_each_used(ty, |o| stale.push(o));
        for o in stale {
            alloc.try_free(o)?;
        }
    }
    let pm = Pm { pool: &pool, alloc: &alloc, pops: None };
    let root = pm.new_node(Kind::N256, Header::new(0, b"").encode(), 0, &[])?;
    let sb = alloc.alloc(SUPER, SUPER_SIZE)?;
    let mut img = [0u8; SUPER_SIZE];
    img[..8].copy_from_slice(&variant.magic().to_le_bytes());
    img[8..12].copy_from_slice(&VERSION.to_le_bytes());
    img[16..24].copy_from_slice(&root.to_le_bytes());
    // SAFETY: a reserved object no one else can reach.
    unsafe { std::ptr::copy_nonoverlapping(img.as_ptr(), pool.at::<u8>(sb), SUPER_SIZE) };
    pool.persist_off(sb, SUPER_SIZE);
    alloc.try_publish(sb)?;
    pool.set_root(SUPER_ROOT, sb);
    let mut rep = RecoveryReport::new(variant.name());
    rep.clean_shutdown = true;
    rep.duration = Duration::from_micros(t0.elapsed().as_micros() as u64);
    Ok(assemble(pool, alloc, variant, sb, root, (0, 0, HashMap::from([(root, 0)])), rep, claim))
}

impl Woart {
    /// Verify every reachable object and that no used object of the tree's types is
    /// unreachable (a leak). A summary, or `Corrupt` listing the problems.
    pub fn check(&self) -> Result<String> {
        let _g = self.lock.write();
        let pm = self.pm();
        let w = walk_tree(&pm, self.root, !self.variant.lazy_repairs())?;
        let mut problems = Vec::new();
        for ty in TYPES {
            self.alloc.for_each_used(ty, |o| {
                if o != self.sb && !w.reachable.contains(&o) {
                    problems.push(format!("object {o:#x} of type {} is used but unreachable (leak)", ty.0));
                }
            });
        }
        if w.count != self.len() {
            problems.push(format!("{} records reachable, {} counted", w.count, self.len()));
        }
        if !problems.is_empty() {
            return Err(Error::Corrupt(problems.join("\n")));
        }
        Ok(format!("{} records, {} nodes", w.count, w.nodes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmkv_substrate::Eviction;
    use pmkv_substrate::{Mode, PoolOptions};

    fn sim_pool() -> Arc<Pool> {
        let o = PoolOptions::default().mode(Mode::Adr).initial_size(1 << 20).max_size(64 << 20);
        Arc::new(Pool::create_sim("woart", &o).expect("sim pool"))
    }

    fn all(t: &Woart) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        t.scan(&pmkv_core::KeyRange::all(), usize::MAX, false, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
        out
    }

    /// The crash the paper's lazy recovery is for: a path-compression split whose parent
    /// link is durable but whose rewrite of the old node's header is not. Readers of the
    /// image (read-only or not) see every key; a read-write open rewrites the header, and
    /// then a clean close and open find nothing stale.
    #[test]
    fn stale_header_after_a_split_is_read_right_and_repaired() {
        let t = Woart::open_with(sim_pool(), crate::Options::default()).unwrap();
        t.put(b"k0abcdefghij", b"1").unwrap();
        t.put(b"k0abcdefgXYZ", b"2").unwrap();
        let mut before = Vec::new();
        t.alloc.for_each_used(N4, |o| before.push((o, t.pm().load(o + HDR))));
        t.put(b"k0abQ", b"3").unwrap();
        let mut stale = 0;
        for (o, h) in before {
            if t.pm().load(o + HDR) != h {
                // The crash: the header store never reached PM.
                t.pm().store_persist(o + HDR, h);
                stale += 1;
            }
        }
        assert_eq!(stale, 1, "the split rewrote one header");
        let want = vec![
            (b"k0abQ".to_vec(), b"3".to_vec()),
            (b"k0abcdefgXYZ".to_vec(), b"2".to_vec()),
            (b"k0abcdefghij".to_vec(), b"1".to_vec()),
        ];
        assert_eq!(all(&t), want, "the live tree reads through the stale header");
        let img = t.pool().sim().unwrap().image_now(t.pool(), Eviction::None);
        drop(t);
        let o = PoolOptions::default().mode(Mode::Adr).max_size(64 << 20);
        let r =
            Woart::open_with(Arc::new(Pool::from_image(&img, Some("woart"), &o).unwrap()), Default::default()).unwrap();
        assert!(!r.recovery_report().clean_shutdown);
        assert!(r.recovery_report().details.iter().any(|(k, v)| k.starts_with("headers") && v == "1"));
        assert_eq!(all(&r), want);
        r.check().unwrap();
        r.put(b"k0abcdefgh", b"4").unwrap();
        let mut v = Vec::new();
        assert!(r.get_with(b"k0abcdefgh", &mut |x| v = x.to_vec()).unwrap());
        assert_eq!(v, b"4");
        assert_eq!(r.len(), 4);
        r.check().unwrap();
    }
}
