//! Open, recovery, the clean close's seal.
//!
//! FAST&FAIR needs no log: every crash state of a shift or a split reads right (see
//! `fast` and `fair`). What the open after a crash does is make that state tidy and the
//! space exact, in steps each safe to interrupt and repeat:
//!
//! 1. Walk the leaf list from the first leaf: remove the duplicate
//!    an interrupted shift left (`FastFair::fix_duplicates`), and finish an interrupted
//!    split's truncation (entries at or above the sibling's low key are the sibling's).
//! 2. Rebuild the inner levels from the leaves' low keys in new nodes, persisted and
//!    published, then switch the superblock's root to them (one 8-byte store). This also
//!    adds every separator a crash kept out of its parent.
//! 3. Sweep: free every used node, key object and record that the tree does not reach:
//!    the old inner nodes, a split's sibling never linked, a record whose insert never
//!    committed or whose update or delete had not freed it yet.
//!
//! **Damage.** Records and key objects carry a CRC checked at each read. Nodes are
//! mutated in place one word at a time, so they carry none; instead a clean close writes
//! the seal, a CRC of every node in level order, and a clean open
//! verifies it, so a damaged node is refused instead of read wrong.

use crate::error::{corrupt, Error, Result};
use crate::layout::*;
use crate::node::NodeImg;
use crate::tree::{FastFair, Options};
use parking_lot::Mutex;
use pmkv_core::RecoveryReport;
use pmkv_substrate::epalloc::{EpAlloc, EPALLOC_ROOT};
use pmkv_substrate::{EngineClaim, Pool};
use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

/// Children per rebuilt inner node: room left for later splits below.
const FILL: usize = CAP * 3 / 4;

impl FastFair {
    /// Open the tree in `pool`, formatting it if the pool is new. A pool another live
    /// engine uses is refused (`PoolError::Locked`).
    pub fn open(pool: Arc<Pool>) -> Result<FastFair> {
        Self::open_with(pool, Options::default())
    }

    /// [`FastFair::open`] with options.
    pub fn open_with(pool: Arc<Pool>, _opts: Options) -> Result<FastFair> {
        let t0 = Instant::now();
        let claim = EngineClaim::take(&pool)?;
        let sb = pool.root(SUPER_ROOT);
        let fresh = sb == 0;
        let alloc = if fresh {
            pool.check_writable()?;
            if pool.root(EPALLOC_ROOT) == 0 {
                EpAlloc::create(pool.clone())?
            } else {
                EpAlloc::open(pool.clone())?
            }
        } else {
            EpAlloc::open(pool.clone())?
        };
        let mut t = FastFair {
            flushes: pool.mode().flushes(),
            read_only: pool.is_read_only(),
            pool,
            alloc,
            sb,
            first_leaf: 0,
            locks: (0..1usize << crate::tree::LOCK_BITS).map(|_| AtomicU64::new(0)).collect(),
            root_lock: Mutex::new(()),
            count: AtomicU64::new(0),
            recovery: RecoveryReport::new("fastfair"),
            closed: false,
            _claim: claim,
        };
        let clean = t.pool.was_clean();
        let mut report = RecoveryReport::new("fastfair");
        report.clean_shutdown = clean && !fresh;
        if fresh {
            t.format()?;
        } else {
            t.read_super()?;
            if clean {
                t.verify_seal()?;
            } else if !t.read_only {
                t.recover(&mut report)?;
            }
        }
        let n = t.count_records()?;
        t.count = AtomicU64::new(n);
        report.records = n;
        report.duration = t0.elapsed();
        t.recovery = report;
        Ok(t)
    }

    /// Make a new tree: one empty leaf, named by a new superblock, which the pool root
    /// names last (a crash before leaves objects no root names: the next try frees them).
    fn format(&mut self) -> Result<()> {
        for ty in [SUPER, NODE, RECORD, KEY] {
            let mut stale = Vec::new();
            self.alloc.for_each_used(ty, |o| stale.push(o));
            for o in stale {
                self.alloc.try_free(o)?;
            }
        }
        let leaf = self.new_node(&NodeImg::new(0, 0, 0, 0, 0).0)?;
        let mut img = [0u8; SUPER_SIZE];
        img[..8].copy_from_slice(SUPER_MAGIC);
        img[SB_VERSION as usize..][..4].copy_from_slice(&SUPER_VERSION.to_le_bytes());
        img[SB_NODE_SIZE as usize..][..4].copy_from_slice(&(NODE_SIZE as u32).to_le_bytes());
        img[SB_FIRST_LEAF as usize..][..8].copy_from_slice(&leaf.to_le_bytes());
        let crc = super_crc(&img);
        img[SB_CRC as usize..][..4].copy_from_slice(&crc.to_le_bytes());
        img[SB_ROOT as usize..][..8].copy_from_slice(&leaf.to_le_bytes());
        let sb = self.alloc.alloc(SUPER, SUPER_SIZE)?;
        // SAFETY: a reserved, unpublished object of 64 bytes nobody else can reach.
        unsafe { std::ptr::copy_nonoverlapping(img.as_ptr(), self.pool.at::<u8>(sb), SUPER_SIZE) };
        self.pool.persist_off(sb, SUPER_SIZE);
        self.alloc.try_publish(sb)?;
        self.pool.set_root(SUPER_ROOT, sb);
        self.sb = sb;
        self.first_leaf = leaf;
        Ok(())
    }

    fn read_super(&mut self) -> Result<()> {
        let sb = self.sb;
        if !sb.is_multiple_of(8) || !self.pool.contains(sb, SUPER_SIZE as u64) || self.alloc.type_of(sb) != Some(SUPER)
        {
            return Err(corrupt(format!("the superblock offset {sb:#x} is not a superblock object")));
        }
        let mut img = [0u8; SUPER_SIZE];
        for i in 0..SUPER_SIZE / 8 {
            img[8 * i..8 * i + 8].copy_from_slice(&self.load(sb + 8 * i as u64).to_le_bytes());
        }
        if &img[..8] != SUPER_MAGIC {
            return Err(corrupt("the superblock's magic is wrong"));
        }
        let crc = u32::from_le_bytes(img[SB_CRC as usize..][..4].try_into().expect("4 bytes"));
        if crc != super_crc(&img) {
            return Err(corrupt("the superblock fails its checksum"));
        }
        let version = u32::from_le_bytes(img[SB_VERSION as usize..][..4].try_into().expect("4 bytes"));
        if version != SUPER_VERSION {
            let what = match version {
                1 => " (512-byte nodes, node locks in PM)",
                2 => " (every value an out-of-line record)",
                _ => "",
            };
            return Err(Error::Version(format!(
                "FAST&FAIR format version {version}{what}; this build reads version {SUPER_VERSION} only: \
                 dump the pool with a build of its version and load the dump"
            )));
        }
        let node_size = u32::from_le_bytes(img[SB_NODE_SIZE as usize..][..4].try_into().expect("4 bytes"));
        if node_size as usize != NODE_SIZE {
            return Err(Error::Version(format!("FAST&FAIR nodes of {node_size} bytes; this build uses {NODE_SIZE}")));
        }
        self.first_leaf = u64::from_le_bytes(img[SB_FIRST_LEAF as usize..][..8].try_into().expect("8 bytes"));
        if !self.node_obj(self.first_leaf) {
            return Err(corrupt(format!("the first leaf {:#x} is not a node", self.first_leaf)));
        }
        let root = self.load(sb + SB_ROOT);
        if !self.node_obj(root) {
            return Err(corrupt(format!("the root {root:#x} is not a node")));
        }
        Ok(())
    }

    /// The leaves, in list order (validated: used nodes of level 0, no cycle).
    pub(crate) fn leaves(&self) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut node = self.first_leaf;
        while node != 0 {
            if !self.node_obj(node) || !seen.insert(node) {
                return Err(corrupt(format!("the leaf list names {node:#x}, which is not a node, or twice")));
            }
            if self.load(node + H_LEVEL) != 0 {
                return Err(corrupt(format!("the leaf list names node {node:#x} of a level above 0")));
            }
            out.push(node);
            node = self.load(node + H_SIBLING);
        }
        Ok(out)
    }

    /// Every node in level order, top level first, each level along its sibling list
    /// (validated: used nodes, one level below the one above, no cycle).
    pub(crate) fn levels(&self) -> Result<Vec<Vec<u64>>> {
        let mut out: Vec<Vec<u64>> = Vec::new();
        let mut seen = HashSet::new();
        let mut first = self.load(self.sb + SB_ROOT);
        let mut expect = None;
        loop {
            let mut level = Vec::new();
            let mut node = first;
            let lv = self.load(first + H_LEVEL);
            if expect.is_some_and(|e| e != lv) || lv > 64 {
                return Err(corrupt(format!("node {first:#x} is at level {lv}, not {expect:?}")));
            }
            while node != 0 {
                if !self.node_obj(node) || !seen.insert(node) {
                    return Err(corrupt(format!("level {lv} names {node:#x}, which is not a node, or twice")));
                }
                if self.load(node + H_LEVEL) != lv {
                    return Err(corrupt(format!("level {lv}'s list names node {node:#x} of another level")));
                }
                level.push(node);
                node = self.load(node + H_SIBLING);
            }
            out.push(level);
            if lv == 0 {
                break;
            }
            first = self.load(first + H_LEFTMOST);
            if !self.node_obj(first) {
                return Err(corrupt(format!("a leftmost child {first:#x} is not a node")));
            }
            expect = Some(lv - 1);
        }
        if out.last().and_then(|l| l.first()) != Some(&self.first_leaf) {
            return Err(corrupt("the leftmost leaf is not the superblock's first leaf"));
        }
        Ok(out)
    }

    /// The seal of the tree as it is: a CRC of the root and every node.
    fn seal_now(&self) -> Result<u64> {
        let mut c = crc32c::crc32c(&self.load(self.sb + SB_ROOT).to_le_bytes());
        for level in self.levels()? {
            for n in level {
                let mut img = [0u8; NODE_SIZE];
                for i in 0..NODE_SIZE / 8 {
                    let at = 8 * i as u64;
                    let w = self.load(n + at);
                    img[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
                }
                c = crc32c::crc32c_append(c, &n.to_le_bytes());
                c = crc32c::crc32c_append(c, &img);
            }
        }
        Ok(SEAL_PRESENT | c as u64)
    }

    fn verify_seal(&self) -> Result<()> {
        let stored = self.load(self.sb + SB_SEAL);
        let now = self.seal_now()?;
        if stored != now {
            return Err(corrupt(format!(
                "the nodes fail the seal of the last clean close ({stored:#x}, now {now:#x})"
            )));
        }
        Ok(())
    }

    /// Write the seal (clean close). Run with no other thread in the tree.
    pub(crate) fn seal(&self) {
        if self.read_only {
            return;
        }
        if let Ok(s) = self.seal_now() {
            self.pstore(self.sb + SB_SEAL, s);
            self.pool.persist_off(self.sb + SB_SEAL, 8);
        }
    }

    /// The live entries of `leaf` below its sibling's low key (all of them, except in a
    /// crash state of a split that recovery has not tidied: a read-only open's).
    fn owned(&self, leaf: u64) -> Result<(Vec<u64>, Vec<u64>)> {
        let s = self.snap(leaf);
        let mut n = s.n;
        if s.sibling != 0 && s.n > 0 {
            let skw = self.load(s.sibling + H_LOW_KW);
            if s.kw[s.n - 1] >= skw {
                let low = self.read_obj(self.load(s.sibling + H_LOW_PTR)).map_err(corrupt)?.key().to_vec();
                let t = crate::tree::Target::Key { key: &low, kw: skw, strict: true };
                n = self.rank(0, &s.kw[..s.n], &s.ptr[..s.n], t).map_err(corrupt)?;
            }
        }
        Ok((s.kw[..n].to_vec(), s.ptr[..n].to_vec()))
    }

    fn count_records(&self) -> Result<u64> {
        let mut n = 0;
        for leaf in self.leaves()? {
            n += self.owned(leaf)?.0.len() as u64;
        }
        Ok(n)
    }

    /// Crash recovery (see the module doc).
    fn recover(&self, report: &mut RecoveryReport) -> Result<()> {
        let leaves = self.leaves()?;
        let (mut fixed, mut truncated) = (0u64, 0u64);
        for &leaf in &leaves {
            fixed += self.fix_duplicates(leaf) as u64;
        }
        for &leaf in &leaves {
            let (kw, _) = self.owned(leaf)?;
            let raw = self.raw(leaf);
            if kw.len() < raw.n {
                self.pstore(ptr_at(leaf, kw.len()), 0);
                truncated += 1;
            }
        }
        // The inner levels, rebuilt bottom-up.
        let mut level: Vec<(u64, u64, u64)> =
            leaves.iter().map(|&l| (l, self.load(l + H_LOW_KW), self.load(l + H_LOW_PTR))).collect();
        let mut inner = Vec::new();
        let mut lv = 0u32;
        while level.len() > 1 {
            lv += 1;
            let groups: Vec<&[(u64, u64, u64)]> = level.chunks(FILL + 1).collect();
            let mut offs = Vec::with_capacity(groups.len());
            for _ in &groups {
                offs.push(self.alloc.alloc(NODE, NODE_SIZE)?);
            }
            let mut next = Vec::with_capacity(groups.len());
            for (i, g) in groups.iter().enumerate() {
                let sibling = offs.get(i + 1).copied().unwrap_or(0);
                let mut img = NodeImg::new(lv, g[0].0, sibling, g[0].1, g[0].2);
                for (j, &(child, kw, _)) in g[1..].iter().enumerate() {
                    img.entry(j, kw, child);
                }
                // SAFETY: a reserved, unpublished node nobody else can reach.
                unsafe { std::ptr::copy_nonoverlapping(img.0.as_ptr(), self.pool.at::<u8>(offs[i]), NODE_SIZE) };
                self.pool.flush_off(offs[i], NODE_SIZE);
                next.push((offs[i], g[0].1, g[0].2));
            }
            self.pool.fence();
            for &o in &offs {
                self.alloc.try_publish(o)?;
            }
            inner.extend_from_slice(&offs);
            level = next;
        }
        let root = level[0].0;
        if self.load(self.sb + SB_ROOT) != root {
            self.pstore(self.sb + SB_ROOT, root);
        }
        // The sweep.
        let mut nodes: HashSet<u64> = leaves.iter().copied().collect();
        nodes.extend(inner.iter().copied());
        let mut keys = HashSet::new();
        let mut records = HashSet::new();
        for &leaf in &leaves {
            keys.insert(self.load(leaf + H_LOW_PTR));
            let raw = self.raw(leaf);
            records.extend(raw.ptr[..raw.n].iter().filter(|&&v| is_rec(v) && v != HOLE).map(|&v| rec_off(v)));
        }
        let mut swept = 0u64;
        for (ty, keep) in [(NODE, &nodes), (KEY, &keys), (RECORD, &records)] {
            let mut dead = Vec::new();
            self.alloc.for_each_used(ty, |o| {
                if !keep.contains(&o) {
                    dead.push(o)
                }
            });
            for o in dead {
                self.alloc.try_free(o)?;
                swept += 1;
            }
        }
        self.pool.fence();
        report.orphans_freed = swept;
        report.rolled_forward = fixed + truncated;
        report.details.push(("duplicates_fixed".into(), fixed.to_string()));
        report.details.push(("splits_truncated".into(), truncated.to_string()));
        report.details.push(("leaves".into(), leaves.len().to_string()));
        report.details.push(("inner_nodes_rebuilt".into(), inner.len().to_string()));
        Ok(())
    }

    /// Seal, close the pool and mark it clean.
    pub fn close(mut self) -> Result<()> {
        self.seal();
        self.closed = true;
        pmkv_core::close_after(self.pool.clone(), || drop(self))
    }
}

impl Drop for FastFair {
    /// Seal, unless `close` did or the tree may be mid-operation (a panic unwinding, a
    /// poisoned pool): then the pool is left unclean and the next open recovers.
    fn drop(&mut self) {
        if !self.closed && !std::thread::panicking() && !self.pool.is_poisoned() {
            self.seal();
        }
    }
}
