//! The tree and its base operations: insert (Algorithm 1), update (Algorithm 3), delete
//! (Algorithm 4), search (Algorithm 5), and ordered scans over the leaf list.
//!
//! **Persistence (SPEC N2, N8).** An insert writes its entry (payload, then key) into the
//! slot it took with fetch-and-add, makes it durable, and only then commits it by a CAS of
//! the DRAM bitmap: no reader can see an entry that a crash could lose. In `eadr` the two
//! stores are ordered by program order (one PM line written, no flush); in `adr` the
//! payload is flushed and fenced before the key is stored, because a crash may persist
//! any subset of a line's dirty 8-byte words (the simulator's torn-line images), and a
//! key must never be durable without its value. Updates and deletes change one 8-byte
//! word of the entry with a CAS (plus the key word for a delete), then persist that line.
//!
//! **ADR caveat.** In `adr`, between an update's CAS and its flush another thread may read
//! the new value; a power failure in that window loses a value that was read (the paper's
//! "dirty read", §2.3, which eADR removes). The writer itself returns only after the flush.
//!
//! **Reclamation.** Every operation runs pinned in crossbeam-epoch. Leaves replaced by an
//! SMO, inner nodes replaced by a copy, blocks and key/value objects that an update or
//! delete released are freed only after every thread pinned at that time has unpinned.

use crate::error::{Error, Result};
use crate::inner::{self, INode, NodeArena};
use crate::layout::*;
use crate::leaf::{self, find, load, pick, pick_below, Leaf, LeafArena, SMO_BIT};
use crate::reclaim::Reclaimer;
use crossbeam_epoch::{self as epoch, Guard};
use parking_lot::Mutex;
use pmkv_core::{KeyRange, Visitor};
use pmkv_substrate::epalloc::EpAlloc;
use pmkv_substrate::{Mode, Pool};
use std::ops::Bound;
use std::sync::atomic::{AtomicI64, AtomicPtr, Ordering};
use std::sync::Arc;

/// Options of an NBTree (not stored in the pool: they may change between opens). Given to
/// [`NbTree::open_with`], or, through pmkv, attached with
/// `pmkv_core::Options::with_engine_options`; the engine parameters `write_locks` and
/// `single_layer` set the same fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// NBTree-W, the paper's ablation (§6.4, Fig. 8): writers take a per-leaf lock, as
    /// FAST&FAIR and uTree do, instead of writing lock-free. For measuring what the
    /// lock-free writes are worth; never faster.
    pub write_locks: bool,
    /// NBTree-SL, the paper's other ablation (Fig. 6): single-layer leaves, whose bitmap,
    /// `num` and fingerprints live in the PM block instead of DRAM, so every operation
    /// reads them from PM and an insert writes (and in `adr` flushes) them there. Chosen
    /// when the pool is created and stored in it (the block format differs: 60 entries
    /// instead of 63); an existing pool keeps its kind, and asking for single-layer
    /// leaves on a two-layer pool is an error.
    pub single_layer: bool,
}

/// A value alone on its cache line(s).
#[repr(align(64))]
struct Padded<T>(T);

/// Counters striped over cache lines so that writers on different cores do not share one.
pub(crate) struct Striped([Padded<AtomicI64>; 16]);

impl Striped {
    pub(crate) fn new(v: i64) -> Striped {
        let s = Striped(std::array::from_fn(|_| Padded(AtomicI64::new(0))));
        s.0[0].0.store(v, Ordering::Relaxed);
        s
    }
    #[inline]
    pub(crate) fn add(&self, d: i64) {
        thread_local! {
            static STRIPE: usize = {
                static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                NEXT.fetch_add(1, Ordering::Relaxed) % 16
            };
        }
        let i = STRIPE.with(|s| *s);
        self.0[i].0.fetch_add(d, Ordering::Relaxed);
    }
    pub(crate) fn sum(&self) -> i64 {
        self.0.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
    }
}

/// An open NBTree over one pool.
pub struct NbTree {
    pub(crate) pool: Arc<Pool>,
    pub(crate) alloc: EpAlloc,
    /// Superblock offset.
    pub(crate) sb: u64,
    /// The sentinel: head of both lists, holds no key, never splits.
    pub(crate) head: *const Leaf,
    pub(crate) root: AtomicPtr<INode>,
    /// Serialises inner-node changes (the link phases of SMOs).
    pub(crate) inner_lock: Mutex<()>,
    pub(crate) reclaim: Reclaimer,
    pub(crate) count: Striped,
    /// What the open's recovery did (SPEC N6), with NBTree's own figures in `details`.
    pub(crate) recovery: pmkv_core::RecoveryReport,
    /// `close` sealed the blocks already.
    pub(crate) closed: bool,
    /// NBTree-W: node-grained write locks (see [`Options`]).
    pub(crate) write_locks: bool,
    /// NBTree-SL: leaves keep their metadata in PM (see [`Options::single_layer`]).
    pub(crate) sl: bool,
    /// What the pool's format has: [`KIND_PAIR`] keys (format 2 on; a format-1 pool keeps
    /// putting 9-to-16-byte keys in objects, so that older binaries can still read it),
    /// entry checks and checked `next` words (format 3 on; older pools keep writing
    /// their own format).
    pub(crate) fmt: leaf::Fmt,
    /// Where the leaves live (shared with the deferred frees of retired leaves).
    pub(crate) arena: Arc<LeafArena>,
    /// Where the inner nodes live (likewise).
    pub(crate) nodes: Arc<NodeArena>,
    /// The write batches' redo log state (see `batch`).
    pub(crate) batches: pmkv_substrate::batch_log::BatchLog,
    /// The superblock carries the [`BATCH_LOGS`] flag (set before the first log).
    pub(crate) batch_logs: std::sync::atomic::AtomicBool,
    pub(crate) _claim: pmkv_substrate::EngineClaim,
}

// SAFETY: the raw pointers are to leaves and inner nodes owned by the tree, shared between
// threads only through atomics and freed only through the epoch scheme (see `reclaim`).
unsafe impl Send for NbTree {}
// SAFETY: as above; every method takes `&self` and synchronises through atomics.
unsafe impl Sync for NbTree {}

/// What a writer holds of its key and value while it retries: objects allocated once.
struct Prepared {
    /// Payload bits (the length) and value word of a value that fits the entry.
    inline: Option<(u64, u64)>,
    /// The value's object, once made (always for values that do not fit the entry).
    obj: Option<u64>,
    /// Key word, second key word and payload key bits, once encoded (objects are made
    /// only for inserts).
    key: Option<(u64, u64, u64)>,
}

impl NbTree {
    /// The pool under the tree.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// What the open's recovery did: the common figures, and NBTree's own in `details`
    /// (`leaves`, `repaired`, `threads` and the phases' microseconds, read with
    /// [`pmkv_core::RecoveryReport::detail_u64`]).
    pub fn recovery_report(&self) -> &pmkv_core::RecoveryReport {
        &self.recovery
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.count.sum().max(0) as u64
    }

    /// Whether the tree holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the tree has single-layer leaves (NBTree-SL).
    pub fn single_layer(&self) -> bool {
        self.sl
    }

    /// The first slot of a block that holds entries (a single-layer block keeps its
    /// metadata in the first ones).
    #[inline]
    pub(crate) fn first_slot(&self) -> usize {
        if self.sl {
            SL_FIRST
        } else {
            0
        }
    }

    fn root(&self) -> &INode {
        // SAFETY: the root is replaced only by `smo::link`, which frees the old one through
        // the epoch scheme; every caller is pinned.
        unsafe { &*self.root.load(Ordering::Acquire) }
    }

    /// The leaf the inner nodes route `key` to (`upper`), or the leaf that holds the keys
    /// just below `key` (`!upper`).
    pub(crate) fn find_leaf<'g>(&self, key: &[u8], upper: bool, _g: &'g Guard) -> &'g Leaf {
        let kp = inner::prefix(key);
        let mut n = self.root();
        loop {
            let i = n.route(key, kp, upper);
            if n.level == 0 {
                self.prefetch_block(n.blocks[i]);
                // SAFETY: leaves reachable from a root loaded while pinned stay alive
                // until the guard is dropped.
                let leaf = unsafe { &*(n.children[i] as *const Leaf) };
                debug_assert_eq!(n.blocks[i], leaf.block, "a level-0 node names its leaf's block");
                return leaf;
            }
            // SAFETY: the child of a node reached from a root loaded while pinned:
            // `smo::link_phase` frees replaced nodes only through the epoch scheme, after this
            // guard is dropped.
            n = unsafe { &*(n.children[i] as *const INode) };
        }
    }

    /// Start fetching the key-value block at `block` while the caller reads its leaf's
    /// metadata. The line an operation needs is known only from the metadata (the
    /// fingerprints pick the slot), but the block's address translation is not: with the
    /// pool in 4 KiB pages nearly every random operation misses the TLB on its PM line,
    /// and under a hypervisor that page walk costs about as much as the line itself. A
    /// prefetch of the block's first and last entry lines (a 2 KiB block may straddle two
    /// pages) walks the page tables in parallel with the metadata miss instead of after
    /// it. The prefetched lines themselves are a by-product (one holds the entry one time
    /// in 32; a single-layer leaf's metadata is the first of them), so they go to L2, not
    /// L1: brought into L1 they evicted lines a cached workload needs (the Dictionary,
    /// whose tree fits the caches, ran 5-8% slower with `_MM_HINT_T0`, and level with no
    /// prefetch with `_MM_HINT_T2`; the page walk is the same either way).
    #[inline]
    fn prefetch_block(&self, block: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            let first = self.pool.at::<i8>(block + BLK_ENTRIES);
            let last = self.pool.at::<i8>(block + BLOCK_SIZE as u64 - 64);
            // SAFETY: prefetches never fault, whatever the address.
            unsafe {
                std::arch::x86_64::_mm_prefetch(first, std::arch::x86_64::_MM_HINT_T2);
                if (first as usize) >> 12 != (last as usize) >> 12 {
                    std::arch::x86_64::_mm_prefetch(last, std::arch::x86_64::_MM_HINT_T2);
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = block;
    }

    /// Follow `copy_ptr`s from `leaf` to the leaf that now holds `key` (readers: the new
    /// leaves of an SMO are complete once `copy_ptr` is set, §4.2 Table 3).
    #[inline]
    fn resolve<'g>(&self, mut leaf: &'g Leaf, key: &[u8], below: bool) -> &'g Leaf {
        loop {
            if !leaf.in_smo(&self.pool) {
                return leaf;
            }
            let c = leaf.copy.load(Ordering::Acquire);
            if c.is_null() {
                return leaf;
            }
            // SAFETY: a copy is freed only after the leaf that points to it was replaced
            // and the guard's epoch ended; we are pinned.
            let c = unsafe { &*c };
            let p = if below { pick_below(c, key) } else { pick(c, key) };
            // SAFETY: `pick`/`pick_below` return `c` or its `sibling`, both leaves of the published
            // copy, freed only after the leaf that points to them was replaced and every pinned
            // thread has unpinned.
            leaf = unsafe { &*p };
        }
    }

    /// The leaf that holds `key`, for a reader.
    pub(crate) fn locate<'g>(&self, key: &[u8], g: &'g Guard) -> &'g Leaf {
        self.resolve(self.find_leaf(key, true, g), key, false)
    }

    /// The leaf that holds `key`, for a writer: any SMO on the way is completed first
    /// (cooperative SMO), so a writer never writes a leaf that is not linked in PM.
    fn locate_w<'g>(&self, key: &[u8], g: &'g Guard) -> Result<&'g Leaf> {
        let mut leaf = self.find_leaf(key, true, g);
        while leaf.in_smo(&self.pool) {
            self.smo(leaf, g)?;
            // SAFETY: `smo` returns once `copy` is set and linked; pinned.
            let c = unsafe { &*leaf.copy.load(Ordering::Acquire) };
            // SAFETY: `pick` returns `c` or its `sibling`, set before `copy` was published; both
            // stay alive while this thread is pinned (`g`).
            leaf = unsafe { &*pick(c, key) };
        }
        Ok(leaf)
    }

    /// Search (Algorithm 5): call `f` with the value of `key`.
    pub fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let g = epoch::pin();
        let fp = fingerprint(key);
        loop {
            let leaf = self.locate(key, &g);
            // SAFETY: `leaf` was reached while pinned (`g`), so its block and the objects its
            // entries name stay allocated until the guard drops (`find`'s contract).
            let hit = unsafe { find(&self.pool, leaf, key, fp, leaf.bits(&self.pool), self.fmt) }
                .map(|(slot, p)| leaf::value_of(&self.pool, leaf, slot, p));
            crate::chaos::point();
            // Valid only if no SMO published new leaves meanwhile: writes go to those
            // only after `copy` is set (see `smo`), so with `copy` still null the value
            // read was the key's latest.
            if !leaf.copy.load(Ordering::Acquire).is_null() {
                continue;
            }
            return match hit {
                None => Ok(false),
                Some((p, w)) => {
                    // SAFETY: pinned; the object stays allocated until we unpin.
                    if unsafe { leaf::with_value(&self.pool, p, w, self.fmt.checks, f) } {
                        Ok(true)
                    } else {
                        Err(Error::Corrupt(format!("the value of key {key:x?} fails its check")))
                    }
                }
            };
        }
    }

    fn prepare_value(&self, value: &[u8]) -> Result<Prepared> {
        if value.len() <= INLINE_VALUE {
            return Ok(Prepared { inline: Some(inline_value(value)), obj: None, key: None });
        }
        Ok(Prepared { inline: None, obj: Some(self.new_object(VALUE, value)?), key: None })
    }

    /// The value's object, made now if it was not yet.
    fn value_obj(&self, value: &[u8], prep: &mut Prepared) -> Result<u64> {
        if let Some(o) = prep.obj {
            return Ok(o);
        }
        let o = self.new_object(VALUE, value)?;
        prep.obj = Some(o);
        Ok(o)
    }

    /// Allocate, write and publish an object holding `bytes`, *without a fence*: its
    /// content and its allocator bit become durable at this thread's next fence, which the
    /// caller issues before any PM word names the object (an insert fences before it stores
    /// the key in `adr`; an update before its CAS, [`NbTree::fence_before_naming`]; in
    /// `eadr` program order is enough). A crash before that fence can leave the object used
    /// but named by nothing, or its bit durable before its bytes: either way no entry names
    /// it, and the next open's sweep frees it. This saves two fences per object.
    pub(crate) fn new_object(&self, ty: pmkv_substrate::epalloc::TypeId, bytes: &[u8]) -> Result<u64> {
        let off = self.alloc.alloc(ty, OBJ_HEAD + bytes.len())?;
        let head = (bytes.len() as u64) | (obj_crc(bytes) as u64) << 32;
        // SAFETY: a reserved object nobody else can reach: plain writes inside it.
        unsafe {
            std::ptr::write(self.pool.at::<u64>(off), head);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.pool.at::<u8>(off + OBJ_HEAD as u64), bytes.len());
        }
        self.pool.flush_off(off, OBJ_HEAD + bytes.len());
        self.alloc.publish_unfenced(off);
        Ok(off)
    }

    /// Order what this thread flushed before a store that makes an object reachable, where
    /// the mode needs a fence for that (`adr`, `msync`; in `eadr` and `none` stores persist
    /// in program order).
    #[inline]
    fn fence_before_naming(&self) {
        if !matches!(self.pool.mode(), Mode::Eadr | Mode::None) {
            self.pool.fence();
        }
    }

    /// The key word, second key word and payload key bits of `key` (making its key object
    /// if it needs one, once per put).
    fn key_word_for(&self, key: &[u8], prep: &mut Prepared) -> Result<(u64, u64, u64)> {
        if let Some(k) = prep.key {
            return Ok(k);
        }
        let k = match key_word(key, self.fmt.pairs, self.fmt.empty) {
            KeyWord::Inline { word, word2, bits } => (word, word2, bits),
            KeyWord::Object => (self.new_object(KEY, key)?, 0, KIND_OBJ << KIND_SHIFT),
        };
        prep.key = Some(k);
        Ok(k)
    }

    /// Free what a writer allocated and did not use.
    fn release(&self, prep: &mut Prepared) {
        if let Some(o) = prep.obj.take() {
            self.alloc.free(o);
        }
        if let Some((w, _, bits)) = prep.key.take() {
            if bits == KIND_OBJ << KIND_SHIFT {
                self.alloc.free(w);
            }
        }
    }

    /// Retire the objects of a payload that no entry references any more.
    fn retire_value(&self, p: u64, g: &Guard) {
        if p & VAL_PTR != 0 {
            self.reclaim.retire(val_off(p, self.fmt.checks), g);
        }
    }

    /// Persist the entry line of `slot`: the write's durability point.
    #[inline]
    fn persist_entry(&self, leaf: &Leaf, slot: usize) {
        self.pool.flush_off(leaf.key_at(slot), ENTRY as usize);
        self.pool.commit_fence();
    }

    /// Insert or replace (Algorithms 1 and 3). Returns whether the key was new.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        pmkv_core::check_sizes(key, Some(value), MAX_KEY, MAX_VALUE)?;
        self.pool.check_writable()?;
        self.batches.check_writes()?;
        let g = epoch::pin();
        let mut prep = self.prepare_value(value)?;
        let r = self.put_prepared(key, value, &mut prep, &g);
        // Whatever the put did not use (all of it, on an error).
        self.release(&mut prep);
        r
    }

    fn put_prepared(&self, key: &[u8], value: &[u8], prep: &mut Prepared, g: &Guard) -> Result<bool> {
        let fp = fingerprint(key);
        'retry: loop {
            let leaf = self.locate_w(key, g)?;
            let _w = self.write_locks.then(|| leaf.wlock.lock());
            let mut seen = leaf.bits(&self.pool);
            let cands = leaf::candidates(&self.pool, leaf, fp, seen);
            if cands == 0 {
                // Certainly a new key (no committed slot has its fingerprint): fetch the
                // entry line it will take for writing now, so that the miss overlaps the
                // slot's fetch-and-add and the entry's stores instead of stalling the
                // commit. Not when a fingerprint matches: then the key is almost always
                // there (an update), and the line would be a wasted PM read (docs/design/nbtree.md,
                // "DRAM layer").
                let next = leaf.next_slot(&self.pool);
                if next < self.fmt.cap() {
                    self.pool.prefetch_write(leaf.key_at(next));
                }
            }
            if let Some((slot, p)) =
                // SAFETY: pinned (`g`): `leaf`'s block and the objects its entries name stay
                // allocated while `find_among` reads them.
                unsafe { leaf::find_among(&self.pool, leaf, key, cands, self.fmt) }
            {
                if self.update_slot(leaf, slot, p, value, prep, g)? {
                    return Ok(false);
                }
                continue 'retry;
            }
            if seen & SMO_BIT != 0 {
                continue 'retry; // locate_w completes it
            }
            // Algorithm 1: take the next slot.
            let pos = leaf.take_slot(&self.pool);
            if pos >= self.fmt.cap() {
                leaf.set_smo(&self.pool); // line 4
                continue 'retry; // lines 5-6 (locate_w runs the SMO)
            }
            let (kw, kw2, kbits) = self.key_word_for(key, prep)?;
            let (vbits, w) = match (prep.inline, prep.obj) {
                (Some(i), _) => i,
                (None, Some(o)) => (VAL_PTR | o, 0),
                (None, None) => unreachable!("a value that does not fit the entry has its object"),
            };
            let payload = if self.fmt.checks { entry_check(kw, kw2, kbits | vbits, w) } else { kbits | vbits };
            self.write_entry(leaf, pos, (kw, kw2), payload, w);
            leaf.set_fp(&self.pool, pos, fp);
            crate::chaos::point();
            // Commit: CAS the bitmap (line 8). A concurrent commit of the same key (two
            // upserts of one new key) is caught here: the bits set since `seen` are
            // searched before each attempt, so the CAS succeeds only if none holds it.
            loop {
                let b = leaf.bits(&self.pool);
                if b & SMO_BIT != 0 {
                    self.abandon(leaf, pos);
                    continue 'retry; // line 9
                }
                if b != seen {
                    // SAFETY: pinned (`g`): the leaf's block and the objects its committed entries
                    // name stay allocated while `find` reads them.
                    if unsafe { find(&self.pool, leaf, key, fp, b & !seen, self.fmt) }.is_some() {
                        self.abandon(leaf, pos);
                        continue 'retry;
                    }
                    seen = b;
                }
                if leaf.cas_bits(&self.pool, b, b | 1 << pos) {
                    leaf.touch();
                    // The entry owns them now.
                    prep.key = None;
                    if prep.inline.is_none() {
                        prep.obj = None;
                    }
                    self.count.add(1);
                    return Ok(true);
                }
            }
        }
    }

    /// Write a new entry into the free slot `pos` and make it durable (§3.2 Figure 2,
    /// steps 2-3): value, payload and a pair key's second word, then the key word.
    fn write_entry(&self, leaf: &Leaf, pos: usize, (kw, kw2): (u64, u64), payload: u64, w: u64) {
        let (ko, po) = (leaf.key_at(pos), leaf.payload_at(pos));
        // SAFETY: slot `pos` was taken by this thread's fetch-and-add and is not committed:
        // no other thread writes it, readers skip it (bitmap), and it holds no reference.
        unsafe {
            self.pool.store_u64(leaf.value_at(pos), w);
            self.pool.store_u64(po, payload);
            // Always written, 0 for keys of other kinds: the slot may have been taken
            // before, by an insert a crash cut short after it wrote this word and before
            // its key word (recovery then lets the slot be taken again), or by one that
            // was abandoned. One more store to a line written anyway.
            self.pool.store_u64(ko + E_KEY2, kw2);
        }
        // The payload and second key word (one line with the key word), and the objects
        // the payload and key name, must be durable before the key word (torn lines, see
        // the module doc; `new_object`).
        if !matches!(self.pool.mode(), Mode::Eadr | Mode::None) {
            self.pool.flush_off(po, 8);
        }
        self.fence_before_naming();
        // SAFETY: slot `pos` is still this thread's alone (taken by fetch-and-add, not committed in
        // the bitmap): no other thread writes its key word.
        unsafe { self.pool.store_u64(ko, kw) };
        self.persist_entry(leaf, pos);
    }

    /// Give up slot `pos` whose insert did not commit: store the empty key word (0, or
    /// [`EMPTY_KEY`] in format 4) so that recovery does not find it.
    fn abandon(&self, leaf: &Leaf, pos: usize) {
        // SAFETY: the slot is this thread's (never committed).
        unsafe { self.pool.store_u64(leaf.key_at(pos), self.fmt.empty) };
        self.persist_entry(leaf, pos);
    }

    /// In-place update (Algorithm 3 line 2) of a committed slot found with payload `p`.
    /// `Ok(false)`: the entry changed or is frozen; the caller retries.
    ///
    /// A value of the same length that fits the entry is written in the entry: in formats
    /// 1 and 2 one 8-byte store of the value word (the paper's in-place update), in format
    /// 3 by [`NbTree::update_checked`], which changes the value and its check together.
    /// Anything else (another length, a value in an object before or after, an entry
    /// another in-place update holds) swaps the payload by CAS to the new value's object:
    /// one word names the value and carries its check. A store that races such a swap, or
    /// a delete, is ordered before it (its value is simply never read); one that races an
    /// SMO's freeze sees the frozen bit when it re-reads the payload and is redone in the
    /// new leaf, whether or not the copy carried it.
    fn update_slot(
        &self,
        leaf: &Leaf,
        slot: usize,
        p: u64,
        value: &[u8],
        prep: &mut Prepared,
        g: &Guard,
    ) -> Result<bool> {
        if p & FROZEN != 0 {
            // Copied by an SMO: the write belongs in the new leaf.
            self.smo(leaf, g)?;
            return Ok(false);
        }
        match prep.inline {
            Some((bits, w)) if self.fmt.checks && p & (VAL_PTR | BUSY) == 0 && p & VLEN_MASK == bits => {
                if !self.update_checked(leaf, slot, p, w, g)? {
                    return Ok(false);
                }
            }
            Some((bits, w)) if !self.fmt.checks && p & VAL_PTR == 0 && p & VLEN_MASK == bits => {
                crate::chaos::point();
                // SAFETY: the value word of a committed entry, written only by atomic
                // stores of whole words.
                unsafe { self.pool.store_u64(leaf.value_at(slot), w) };
                self.persist_entry(leaf, slot);
                crate::chaos::point();
                if load(&self.pool, leaf.payload_at(slot)) & FROZEN != 0 {
                    self.smo(leaf, g)?;
                    return Ok(false);
                }
            }
            _ => {
                let o = self.value_obj(value, prep)?;
                self.fence_before_naming();
                let mut new = (p & KEY_BITS) | VAL_PTR | o;
                if self.fmt.checks {
                    // The key words are immutable while the entry is live; if a delete
                    // zeroed the key meanwhile, its DEL bit fails the CAS below.
                    let kw = load(&self.pool, leaf.key_at(slot));
                    new = entry_check(kw, load(&self.pool, leaf.key_at(slot) + E_KEY2), new, 0);
                }
                // SAFETY: an entry word shared by writers, changed only by CAS.
                if unsafe { self.pool.cas_u64(leaf.payload_at(slot), p, new) }.is_err() {
                    return Ok(false);
                }
                self.persist_entry(leaf, slot);
                prep.obj = None; // the entry owns it
                self.retire_value(p, g);
            }
        }
        leaf.touch();
        Ok(true)
    }

    /// Format 3's in-place update of an inline value (same length) to value word `w`: the
    /// value and its check change together, whichever of the words a crash keeps
    /// (docs/design/integrity.md, "NBTree"). `Ok(false)`: the entry changed first; the
    /// caller retries.
    ///
    /// 1. Claim: CAS the payload to [`BUSY`]. Until it is cleared no other writer writes
    ///    a value word of this entry (another update swaps the payload to a value object
    ///    instead; a delete or an SMO's freeze CASes the payload too, so this update's
    ///    next CAS fails and it is ordered before them).
    /// 2. Two slots (keys that leave the fourth word free): write the slot not in use,
    ///    then CAS the payload to select it, with the new check and the replaced value's
    ///    check as the previous one; persist the line (one flush, one fence: the claim and
    ///    the slot may reach PM in any order, the previous check proves the old slot while
    ///    the new one is not durable). One slot (a [`KIND_PAIR`] key): the claim carries
    ///    the new check and the current one, and in `adr` is persisted before the value
    ///    word is stored over the old value (a second fence: two stores in one line may
    ///    reach PM in either order).
    /// 3. Release: clear BUSY and drop the previous check, so that later damage to the
    ///    value cannot fall back to the replaced one. Not flushed: until the line is
    ///    written back a crash keeps the previous check, which only a damaged value would
    ///    consult. Only after the persist: the next update overwrites the replaced slot.
    ///    In `eadr` a two-slot update's commit is its release (stores persist in order).
    fn update_checked(&self, leaf: &Leaf, slot: usize, p: u64, w: u64, g: &Guard) -> Result<bool> {
        let (e, po) = (leaf.key_at(slot), leaf.payload_at(slot));
        let prev = (p & CHK) << CHK_PREV_SHIFT;
        // SAFETY: an entry word shared by writers, changed only by CAS (so are the CASes
        // below).
        if unsafe { self.pool.cas_u64(po, p, p | BUSY) }.is_err() {
            return Ok(false);
        }
        crate::chaos::point();
        let kw = load(&self.pool, e);
        let w4 = load(&self.pool, e + E_KEY2);
        let held = if two_slots(p) {
            let np = p ^ SLOT_B;
            // SAFETY: the slot not in use, whose only writer is the BUSY holder.
            unsafe { self.pool.store_u64(e + value_word_off(np), w) };
            let c = check_of(kw, 0, np, w);
            let flushes = self.pool.mode().flushes();
            // Without flushes (`eadr`) stores persist in program order: once the commit is
            // visible the slot is durable, so the commit is the release too (no previous
            // check, BUSY clear), one CAS fewer.
            let commit = if flushes {
                (np & !(CHK | CHK << CHK_PREV_SHIFT)) | BUSY | c | prev
            } else {
                (np & !(CHK | CHK << CHK_PREV_SHIFT)) | c | c << CHK_PREV_SHIFT
            };
            // SAFETY: see above.
            if unsafe { self.pool.cas_u64(po, p | BUSY, commit) }.is_err() {
                return Ok(false); // a delete, a freeze or a swap took the entry: retry
            }
            // A fence, not a commit fence that a group commit would defer: once released,
            // the next update (this thread's, in the same group, or another's) overwrites
            // the replaced slot, which is safe only once this payload is durable.
            self.pool.flush_off(e, ENTRY as usize);
            self.pool.fence();
            if !flushes {
                return Ok(true);
            }
            commit
        } else {
            let claim = (p & !(CHK | CHK << CHK_PREV_SHIFT)) | BUSY | check_of(kw, w4, p, w) | prev;
            // SAFETY: see above.
            if unsafe { self.pool.cas_u64(po, p | BUSY, claim) }.is_err() {
                return Ok(false);
            }
            if self.pool.mode().flushes() {
                self.pool.flush_off(po, 8);
                self.pool.fence();
            }
            crate::chaos::point();
            // SAFETY: the value word of an entry whose only value writer is the BUSY holder.
            unsafe { self.pool.store_u64(e + E_VALUE, w) };
            self.persist_entry(leaf, slot);
            claim
        };
        crate::chaos::point();
        let rest = (held & !(BUSY | CHK << CHK_PREV_SHIFT)) | (held & CHK) << CHK_PREV_SHIFT;
        // SAFETY: see above.
        if unsafe { self.pool.cas_u64(po, held, rest) }.is_err() && !two_slots(p) && load(&self.pool, po) & FROZEN != 0
        {
            // An SMO froze the entry after the claim: its copy may hold the old value word.
            self.smo(leaf, g)?;
            return Ok(false);
        }
        Ok(true)
    }

    /// Delete (Algorithm 4): mark the payload [`DEL`], then empty the key word; returns whether
    /// the key was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        if key.len() > MAX_KEY {
            return Ok(false);
        }
        self.pool.check_writable()?;
        self.batches.check_writes()?;
        let g = epoch::pin();
        let fp = fingerprint(key);
        loop {
            let leaf = self.locate_w(key, &g)?;
            let _w = self.write_locks.then(|| leaf.wlock.lock());
            // SAFETY: pinned (`g`): `leaf`'s block and the objects its entries name stay allocated
            // while `find` reads them.
            let Some((slot, p)) = (unsafe { find(&self.pool, leaf, key, fp, leaf.bits(&self.pool), self.fmt) }) else {
                if leaf.in_smo(&self.pool) {
                    continue;
                }
                return Ok(false);
            };
            if p & FROZEN != 0 {
                self.smo(leaf, &g)?;
                continue;
            }
            // Format 3: the check covers DEL, so that damage setting it (which would make
            // recovery finish a delete nobody made) is caught.
            let del = if self.fmt.checks {
                let e = leaf.key_at(slot);
                entry_check(load(&self.pool, e), load(&self.pool, e + E_KEY2), p | DEL, 0)
            } else {
                p | DEL
            };
            // SAFETY: an entry word shared by writers, changed only by CAS.
            if unsafe { self.pool.cas_u64(leaf.payload_at(slot), p, del) }.is_err() {
                continue;
            }
            crate::chaos::point();
            let kw = load(&self.pool, leaf.key_at(slot));
            // The empty key word: 0, or in format 4 [`EMPTY_KEY`], so that a zero one is
            // damage. One 8-byte store either way.
            // SAFETY: the DEL bit made this thread the slot's only writer.
            unsafe { self.pool.store_u64(leaf.key_at(slot), self.fmt.empty) };
            self.persist_entry(leaf, slot);
            leaf.touch();
            self.count.add(-1);
            self.retire_value(p, &g);
            if (p & KIND_MASK) >> KIND_SHIFT == KIND_OBJ {
                self.reclaim.retire(kw, &g);
            }
            return Ok(true);
        }
    }

    /// Visit the records in `[start, end)` bounds in order (or reverse) until `visit`
    /// returns false or `limit` records were visited. Leaves are unsorted: each leaf's
    /// live entries are read, sorted, and visited; then the scan moves to the next leaf
    /// by its fence. Each leaf is read at one moment (validated against a concurrent
    /// SMO), not the whole range at once.
    pub fn scan(&self, range: &KeyRange, limit: usize, reverse: bool, visit: Visitor<'_>) -> Result<()> {
        let g = epoch::pin();
        let mut left = limit;
        let (start, end) = (range.start_bound(), range.end_bound());
        let in_start = |k: &[u8]| range.after_start(k);
        let in_end = |k: &[u8]| range.before_end(k);
        // Forward: `cur` is a key the next leaf must cover. Reverse: `cur` is an exclusive
        // upper bound (None = +inf).
        let mut cur: Option<Vec<u8>> = if reverse {
            match end {
                Bound::Included(e) => {
                    let mut v = e.to_vec();
                    v.push(0); // the least key above `e`
                    Some(v)
                }
                Bound::Excluded(e) => Some(e.to_vec()),
                Bound::Unbounded => None,
            }
        } else {
            Some(match start {
                Bound::Included(s) | Bound::Excluded(s) => s.to_vec(),
                Bound::Unbounded => Vec::new(),
            })
        };
        let mut recs: Vec<(Vec<u8>, u64, u64)> = Vec::new();
        // Forward: the leaf to read next, when known.
        let mut fwd: Option<&Leaf> = None;
        loop {
            if left == 0 {
                return Ok(());
            }
            let leaf = if reverse {
                match &cur {
                    None => self.last_leaf(&g),
                    Some(c) => self.resolve(self.find_leaf(c, false, &g), c, true),
                }
            } else {
                match fwd.take() {
                    Some(l) => l,
                    None => self.locate(cur.as_deref().expect("forward scans always have a key"), &g),
                }
            };
            recs.clear();
            for (slot, kw, p, w) in leaf::live_entries(&self.pool, leaf, self.fmt.empty) {
                // SAFETY: pinned (`g`): a key object that a live entry of `leaf` names is freed
                // only through the epoch scheme, after this guard drops.
                let k = unsafe { leaf::entry_key(&self.pool, leaf.key_at(slot), kw, p, false) }
                    .ok_or_else(|| Error::Corrupt(format!("an entry of block {:#x} has a bad key", leaf.block)))?;
                recs.push((k.as_slice().to_vec(), p, w));
            }
            if !leaf.copy.load(Ordering::Acquire).is_null() {
                // Replaced meanwhile: read its new leaves.
                if !reverse {
                    fwd = Some(self.resolve(leaf, &leaf.low, false));
                }
                continue;
            }
            recs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            if reverse {
                recs.reverse();
            }
            for (k, p, w) in &recs {
                if !in_start(k) || !in_end(k) {
                    continue;
                }
                if let Some(c) = &cur {
                    if reverse && k.as_slice() >= c.as_slice() {
                        continue;
                    }
                    if !reverse && k.as_slice() < c.as_slice() {
                        continue;
                    }
                }
                let mut go = true;
                // SAFETY: pinned (`g`): the value object of payload `p`, read while the entry was
                // live, is retired through the epoch scheme and freed only after this guard drops.
                let ok = unsafe { leaf::with_value(&self.pool, *p, *w, self.fmt.checks, &mut |v| go = visit(k, v)) };
                if !ok {
                    return Err(Error::Corrupt(format!("the value of key {k:x?} fails its check")));
                }
                left -= 1;
                if !go || left == 0 {
                    return Ok(());
                }
            }
            if reverse {
                // Done at the first leaf, or when every key below this leaf is below the
                // range's start.
                let below_start = match start {
                    Bound::Included(s) | Bound::Excluded(s) => *leaf.low <= *s,
                    Bound::Unbounded => false,
                };
                if leaf.low.is_empty() || below_start {
                    return Ok(());
                }
                cur = Some(leaf.low.to_vec());
            } else {
                let next = leaf.next.load(Ordering::Acquire);
                if next.is_null() {
                    return Ok(());
                }
                // Forward moves by the list, not the inner nodes: a leaf left empty by
                // deletes before a crash is in the list but has no fence of its own.
                // SAFETY: `next` was loaded while pinned from a leaf we hold. A leaf is retired only
                // after its predecessor's `next` moved past it, so a stale `next` names a leaf retired
                // after the one holding it: either way it is freed only after `g` drops.
                let nl = unsafe { &*next };
                if !in_end(&nl.low) {
                    return Ok(());
                }
                fwd = Some(self.resolve(nl, &nl.low, false));
            }
        }
    }

    /// The last leaf (holding the largest keys).
    fn last_leaf<'g>(&self, g: &'g Guard) -> &'g Leaf {
        let mut n = self.root();
        loop {
            let c = n.children[n.n - 1];
            if n.level == 0 {
                // SAFETY: the last child of a level-0 node reached from a root loaded while pinned:
                // leaves are freed only through the epoch scheme, after `g` drops.
                let mut leaf = unsafe { &*(c as *const Leaf) };
                // Follow copies to the rightmost new leaf.
                loop {
                    let cp = leaf.copy.load(Ordering::Acquire);
                    if !leaf.in_smo(&self.pool) || cp.is_null() {
                        break;
                    }
                    // SAFETY: `cp` is a non-null `copy` of a leaf in SMO, a new leaf freed only
                    // after it too is replaced and every pinned thread (this one: `g`) has
                    // unpinned.
                    let cp = unsafe { &*cp };
                    let s = cp.sibling.load(Ordering::Acquire);
                    // SAFETY: a non-null `sibling` of the copy, set before the copy was published;
                    // freed only through the epoch scheme, after `g` drops.
                    leaf = if s.is_null() { cp } else { unsafe { &*s } };
                }
                let _ = g;
                return leaf;
            }
            // SAFETY: a child of an inner node reached from a root loaded while pinned: replaced
            // nodes are freed only through the epoch scheme, after `g` drops.
            n = unsafe { &*(c as *const INode) };
        }
    }

    /// Every leaf of the live list after the sentinel, in order. Only while no SMO runs.
    pub(crate) fn leaves_quiesced(&self) -> Vec<*const Leaf> {
        let mut out = Vec::new();
        // SAFETY: the sentinel lives as long as the tree.
        let mut p = unsafe { &*self.head }.next.load(Ordering::Acquire) as *const Leaf;
        while !p.is_null() {
            out.push(p);
            // SAFETY: leaves of the live list are alive while no SMO retires them (the
            // caller's condition).
            p = unsafe { &*p }.next.load(Ordering::Acquire);
        }
        out
    }

    /// Free `off` (a block, key or value object) once no thread can hold it.
    pub(crate) fn retire(&self, off: u64, g: &Guard) {
        self.reclaim.retire(off, g);
        if self.reclaim.ready_len() >= 64 {
            self.collect();
        }
    }

    /// Seal the blocks, release the DRAM layer, close the pool and mark it clean.
    pub fn close(mut self) -> Result<()> {
        self.seal();
        self.closed = true;
        pmkv_core::close_after(self.pool.clone(), || drop(self))
    }

    /// Drain retired objects whose grace period has passed.
    pub(crate) fn collect(&self) {
        self.reclaim.collect(&self.alloc);
    }

    /// `msync` or fence, as the pool's mode needs.
    pub fn sync(&self) -> Result<()> {
        Ok(self.pool.sync()?)
    }
}

impl Drop for NbTree {
    /// Seal (unless `close` did, or a panic is unwinding or has poisoned the pool: it is
    /// then not marked clean and the next open recovers, so nothing should be written),
    /// then free the metadata layer and inner nodes.
    /// Leaves and nodes already retired are freed by the epoch scheme.
    fn drop(&mut self) {
        if !self.closed && !std::thread::panicking() && !self.pool.is_poisoned() {
            self.seal();
        }
        for l in self.leaves_quiesced() {
            // SAFETY: the live leaves are owned by the tree, and no thread uses it now.
            unsafe { self.arena.free(l as *mut Leaf) };
        }
        // SAFETY: as above, for the sentinel.
        unsafe { self.arena.free(self.head as *mut Leaf) };
        // SAFETY: the nodes reachable from the root are owned by the tree.
        for n in unsafe { inner::nodes(self.root.load(Ordering::Acquire)) } {
            // SAFETY: as above; each node is listed once.
            unsafe { self.nodes.free(n as *mut INode) };
        }
    }
}

#[cfg(test)]
mod timing {
    //! Where a search's time goes (run by hand: `cargo test --release -p pmkv-nbtree
    //! timing -- --ignored --nocapture`): the inner nodes alone, then the leaf metadata,
    //! then the entry's PM line (one pin for all), then the whole search.
    use super::*;
    use pmkv_substrate::PoolOptions;
    use std::time::Instant;

    #[test]
    #[ignore = "a measurement, not a test"]
    fn search_breakdown() {
        let n = 4_000_000u64;
        let path = std::path::Path::new("/dev/shm/pmkv-timing.pool");
        let _ = std::fs::remove_file(path);
        let opts = PoolOptions::default().mode(Mode::Eadr).initial_size(64 << 20).max_size(8 << 30);
        let t = NbTree::open(Arc::new(Pool::create(path, "nbtree", &opts).unwrap())).unwrap();
        let key = |i: u64| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1).to_be_bytes();
        for i in 0..n {
            t.put(&key(i), &i.to_le_bytes()).unwrap();
        }
        let order: Vec<u64> = (0..n).map(|i| i.wrapping_mul(0x2545_f491_4f6c_dd1d) % n).collect();
        let g = epoch::pin();
        let t0 = Instant::now();
        let mut x = 0usize;
        for &j in &order {
            x ^= t.find_leaf(&key(j), true, &g) as *const Leaf as usize;
        }
        let inner = t0.elapsed().as_nanos() as f64 / n as f64;
        let t0 = Instant::now();
        for &j in &order {
            let l = t.find_leaf(&key(j), true, &g);
            x ^= l.bits(&t.pool) as usize ^ l.fp(&t.pool, 5) as usize;
        }
        let meta = t0.elapsed().as_nanos() as f64 / n as f64;
        let t0 = Instant::now();
        for &j in &order {
            let k = key(j);
            let l = t.locate(&k, &g);
            // SAFETY: pinned (`g`): `l`'s block and the objects its entries name stay allocated
            // while `find` reads them.
            if let Some((s, _)) = unsafe { find(&t.pool, l, &k, fingerprint(&k), l.bits(&t.pool), t.fmt) } {
                x ^= load(&t.pool, l.value_at(s)) as usize;
            }
        }
        let entry = t0.elapsed().as_nanos() as f64 / n as f64;
        drop(g);
        let t0 = Instant::now();
        for &j in &order {
            t.get_with(&key(j), &mut |v| x ^= v[0] as usize).unwrap();
        }
        let whole = t0.elapsed().as_nanos() as f64 / n as f64;
        println!(
            "inner nodes {inner:.0} ns, + leaf metadata {meta:.0} ns, + the entry {entry:.0} ns, whole search {whole:.0} ns ({x})"
        );
        t.close().unwrap();
        let _ = std::fs::remove_file(path);
    }
}
