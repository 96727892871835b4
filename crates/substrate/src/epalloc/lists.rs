//! The chunk lists in DRAM, one per (object type, size class): the allocation fast path
//! (a compare-and-swap on the current chunk's reservation word) and slow path (a new
//! chunk under the list's mutex), linking items into lists and recycling empty chunks
//! (Algorithm 6, through `recycle_log`).

use super::*;
use crate::epalloc::index::Item;

/// DRAM state of one chunk list (one directory entry).
pub(crate) struct ListState {
    pub idx: u32,
    pub entry: Entry,
    pub ty: TypeId,
    /// Class code: index into [`CLASSES`], or [`EXTENT_CLASS`].
    pub class: u8,
    /// Chunk geometry; `None` for an extent list.
    pub geo: Option<Geometry>,
    /// Current chunk per shard (`pack(id, gen)`, 0 = none).
    pub(super) cur: Box<[Padded<AtomicU64>]>,
    pub inner: Mutex<ListInner>,
}

/// The part of a list changed only under its lock.
#[derive(Default)]
pub(crate) struct ListInner {
    /// First item of the DRAM mirror of the persistent list (same order), 0 = empty.
    pub head: u32,
    /// Chunks that may have free slots and are nobody's current chunk (`pack(id, gen)`).
    pub partial: Vec<u64>,
    /// Items on the list.
    pub count: u64,
}

impl ListState {
    pub(crate) fn new(idx: usize, entry: Entry, ty: TypeId, class: u8) -> ListState {
        ListState {
            idx: idx as u32,
            entry,
            ty,
            class,
            geo: (class != EXTENT_CLASS).then(|| GEOMETRY[class as usize]),
            cur: (0..SHARDS).map(|_| Padded(AtomicU64::new(0))).collect(),
            inner: Mutex::new(ListInner::default()),
        }
    }

    /// Whether `p` is some shard's current chunk; the calling thread's own shard, the
    /// usual answer, is looked at first.
    pub(super) fn is_cur(&self, p: u64) -> bool {
        self.cur[shard()].0.load(Ordering::Acquire) == p || self.cur.iter().any(|c| c.0.load(Ordering::Acquire) == p)
    }
}

impl EpAlloc {
    /// The lists of type `ty`, by class.
    pub(super) fn lists_of(&self, ty: TypeId) -> Vec<&ListState> {
        let mut v: Vec<&ListState> = self.lists.iter().filter_map(|l| l.get()).filter(|l| l.ty == ty).collect();
        v.sort_by_key(|l| l.class);
        v
    }

    /// Offsets on a list's persistent chain, head first; `inner` is the list's locked state.
    ///
    /// Read from the DRAM mirror, which is the persistent chain in the same order (built
    /// by the open's verified walk and changed under this lock together with PM; the
    /// checker proves they agree): a link damaged while the pool is open must not make a
    /// run-time walk — HART's recovery sweep frees what it does not see — stop early.
    pub(crate) fn walk_list(&self, inner: &ListInner) -> Vec<u64> {
        let mut v = Vec::new();
        let mut id = inner.head;
        while let Some(it) = self.index.item(id) {
            if v.len() as u64 > self.max_items() {
                break;
            }
            v.push(it.off.load(Ordering::Acquire));
            id = it.next.load(Ordering::Acquire);
        }
        v
    }

    /// An upper bound on the number of chunks the heap can hold (bounds list walks).
    pub(crate) fn max_items(&self) -> u64 {
        (self.pool.heap_top().saturating_sub(self.root.heap_start)) / size_class::MIN_CHUNK_LEN as u64 + 1
    }

    pub(super) fn kind_of(class: u8) -> usize {
        if class == EXTENT_CLASS {
            NUM_CLASSES
        } else {
            class as usize
        }
    }

    /// The list of (`ty`, `class`), created on first use.
    #[inline]
    pub(super) fn list_for(&self, ty: TypeId, class: u8) -> Result<&ListState> {
        if (ty.0 as usize) < DIRECT_TYPES {
            let v = self.direct[ty.0 as usize * KINDS + Self::kind_of(class)].load(Ordering::Acquire);
            if v != 0 {
                if let Some(l) = self.lists[v as usize - 1].get() {
                    return Ok(l);
                }
            }
        }
        self.list_for_slow(ty, class)
    }

    /// [`EpAlloc::list_for`] for a type without a direct entry, or a list not created yet:
    /// kept out of line so that the fast path above stays a few loads.
    #[cold]
    #[inline(never)]
    fn list_for_slow(&self, ty: TypeId, class: u8) -> Result<&ListState> {
        if (ty.0 as usize) >= DIRECT_TYPES {
            if let Some(&i) = self.other.read().get(&(ty.0, class)) {
                if let Some(l) = self.lists[i as usize].get() {
                    return Ok(l);
                }
            }
        }
        self.create_list(ty, class)
    }

    /// Register a list (at open, or when created).
    pub(crate) fn install_list(&self, list: ListState) {
        let (i, ty, class) = (list.idx as usize, list.ty, list.class);
        let _ = self.lists[i].set(list);
        if (ty.0 as usize) < DIRECT_TYPES {
            self.direct[ty.0 as usize * KINDS + Self::kind_of(class)].store(i as u32 + 1, Ordering::Release);
        } else {
            self.other.write().insert((ty.0, class), i as u32);
        }
    }

    /// Allocate a directory entry for (`ty`, `class`): one persisted 8-byte tag store.
    pub(super) fn create_list(&self, ty: TypeId, class: u8) -> Result<&ListState> {
        let _g = self.dir_lock.lock();
        let fmt = self.root.fmt;
        let mut free = None;
        for i in 0..DIR_CAP {
            let e = self.root.entry(i);
            let t = e.raw_tag(&self.pool);
            if t != 0 && t == root::tag_word(fmt, e, ty, class) {
                // Created by another thread meanwhile.
                return self.lists[i].get().ok_or_else(|| PoolError::CorruptAllocator("directory out of sync".into()));
            }
            if t == 0 && free.is_none() {
                free = Some(i);
            }
        }
        let Some(i) = free else {
            return Err(PoolError::Allocator(format!(
                "allocator directory full: at most {DIR_CAP} (object type, size class) lists per pool"
            )));
        };
        let e = self.root.entry(i);
        self.pool.note_store();
        chunk::word(&self.pool, e.tag_at()).store(root::tag_word(fmt, e, ty, class), Ordering::Release);
        self.pool.persist_off(e.tag_at(), 8);
        if fmt.checked() {
            // Entries are used in index order (the first free one is taken), so entry `i`
            // makes `i + 1` in use. Flushed, not fenced: durable at this thread's next
            // fence; until then a crash leaves entries beyond the count, which open
            // accepts (see root.rs). No persist is added to the allocation.
            self.root.set_count(&self.pool, i as u64 + 1, false);
        }
        self.install_list(ListState::new(i, e, ty, class));
        Ok(self.lists[i].get().expect("just installed"))
    }

    /// Algorithm 2, fast path: a slot of the shard's current chunk.
    #[inline]
    pub(super) fn alloc_slot(&self, ty: TypeId, class: usize) -> Result<Reserved<'_>> {
        let list = self.list_for(ty, class as u8)?;
        let s = shard();
        let p = list.cur[s].0.load(Ordering::Acquire);
        if p != 0 {
            if let Some(r) = self.try_reserve(list, p) {
                return Ok(r);
            }
        }
        self.alloc_slow(list, s)
    }

    /// Reserve the lowest free slot of chunk `p = pack(id, gen)` in DRAM (Algorithm 2
    /// `GetFreeObject`, lines 3 and 11). The PM next-free index says the same for the used
    /// bits, but reservations must not write PM, so the DRAM reservation word decides.
    pub(super) fn try_reserve(&self, list: &ListState, p: u64) -> Option<Reserved<'_>> {
        self.try_reserve_run(list, p, 1, None)
    }

    /// [`EpAlloc::try_reserve`] of up to `want` slots with one compare-and-swap: the
    /// lowest free slot is returned, the others (if any) go to `rest`.
    #[inline]
    pub(super) fn try_reserve_run(
        &self,
        list: &ListState,
        p: u64,
        want: u32,
        rest: Option<&mut ReservedRun>,
    ) -> Option<Reserved<'_>> {
        let (id, gen) = unpack(p);
        let it = self.index.item(id)?;
        let geo = list.geo?;
        let mut r = it.reserved.load(Ordering::Acquire);
        loop {
            if r & LOCKED != 0 || r & BITMAP_MASK == BITMAP_MASK {
                return None;
            }
            let i = (!r).trailing_zeros() as usize;
            // The lowest `want` free slots (one in the common case).
            let mut take = 1u64 << i;
            let mut free = !r & BITMAP_MASK & !take;
            for _ in 1..want {
                if free == 0 {
                    break;
                }
                let b = free & free.wrapping_neg();
                take |= b;
                free &= !b;
            }
            match it.reserved.compare_exchange_weak(r, r | take, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    if it.gen.load(Ordering::Acquire) != gen || it.list.load(Ordering::Acquire) != list.idx {
                        // The chunk was recycled and its item reused since `p` was read
                        // (only on the lock-free fast path, see `alloc_slow`): undo.
                        let old = it.reserved.fetch_and(!take, Ordering::AcqRel);
                        if let Some(l) = self.lists.get(it.list.load(Ordering::Acquire) as usize).and_then(|l| l.get())
                        {
                            self.released(l, id, it.gen.load(Ordering::Acquire), old, take);
                        }
                        return None;
                    }
                    let base = it.off.load(Ordering::Acquire);
                    if let Some(rest) = rest {
                        *rest = ReservedRun {
                            id,
                            gen,
                            base,
                            first: geo.slot_off(base, 0),
                            stride: geo.slot as u64,
                            mask: take & !(1 << i),
                        };
                    }
                    // The publish that follows sets a bit in the chunk header: start
                    // fetching its line for writing now. In `adr` the previous publish's
                    // `clwb` evicted it (on this CPU), and the bit's CAS would otherwise
                    // wait for that read after the object's own persist.
                    self.pool.prefetch_write(base);
                    return Some(Reserved { off: geo.slot_off(base, i), base, slot: i as u32, gen, it });
                }
                Err(now) => r = now,
            }
        }
    }

    /// Algorithm 2, slow path, under the list lock: another chunk with a free slot
    /// (lines 2–7, from the DRAM `partial` set instead of a list walk), else a new chunk
    /// linked at the head of the list (lines 8–11).
    #[cold]
    #[inline(never)]
    pub(super) fn alloc_slow(&self, list: &ListState, s: usize) -> Result<Reserved<'_>> {
        let mut inner = list.inner.lock();
        // Under the lock, an item of this list that has the expected generation cannot be
        // retired (retiring takes this lock), so `try_reserve` below never meets a stale
        // item and never calls `released`, which could take this lock again.
        let old = list.cur[s].0.load(Ordering::Acquire);
        if self.is_live_in(list, old) {
            if let Some(r) = self.try_reserve(list, old) {
                return Ok(r);
            }
        }
        while let Some(p) = inner.partial.pop() {
            if !self.is_live_in(list, p) {
                continue;
            }
            let Some(it) = self.index.item(unpack(p).0) else { continue };
            it.in_partial.store(false, Ordering::Relaxed);
            if let Some(r) = self.try_reserve(list, p) {
                list.cur[s].0.store(p, Ordering::Release);
                self.displace(&mut inner, old);
                return Ok(r);
            }
        }
        let p = self.new_chunk(list, &mut inner)?;
        let r = self
            .try_reserve(list, p)
            .ok_or_else(|| PoolError::CorruptAllocator("a new chunk has no free slot".into()))?;
        list.cur[s].0.store(p, Ordering::Release);
        self.displace(&mut inner, old);
        Ok(r)
    }

    /// Whether `p = pack(id, gen)` is still the same incarnation of an item of `list`.
    pub(super) fn is_live_in(&self, list: &ListState, p: u64) -> bool {
        let (id, gen) = unpack(p);
        self.index
            .item(id)
            .is_some_and(|it| it.gen.load(Ordering::Acquire) == gen && it.list.load(Ordering::Acquire) == list.idx)
    }

    /// A shard's previous current chunk `old` is replaced: keep it findable if it still
    /// has free slots (another thread of the shard may have freed into it).
    pub(super) fn displace(&self, inner: &mut ListInner, old: u64) {
        let (id, gen) = unpack(old);
        if let Some(it) = self.index.item(id) {
            let r = it.reserved.load(Ordering::Acquire);
            if it.gen.load(Ordering::Acquire) == gen
                && r & LOCKED == 0
                && r & BITMAP_MASK != BITMAP_MASK
                && !it.in_partial.swap(true, Ordering::AcqRel)
            {
                inner.partial.push(old);
            }
        }
    }

    /// Algorithm 2 lines 9–10: a new chunk, initialised and persisted while unlinked, then
    /// linked at the head with one persisted store — the moment its space becomes
    /// allocated in PM. Returns `pack(id, gen)`.
    pub(super) fn new_chunk(&self, list: &ListState, inner: &mut ListInner) -> Result<u64> {
        let geo = list.geo.expect("chunk list");
        let fmt = self.root.fmt;
        let head = list.entry.head(&self.pool, fmt)?;
        let off = self.take_space(geo.chunk_len as u64, geo.align as u64)?;
        chunk::init(&self.pool, fmt, off, head);
        list.entry.set_head(&self.pool, fmt, off);
        let id = self.link_item(list, inner, off, geo.chunk_len as u64, true);
        let it = self.index.item(id).expect("fresh id");
        it.reserved.store(0, Ordering::Release);
        Ok(pack(id, it.gen.load(Ordering::Acquire)))
    }

    /// DRAM side of linking an item at the head of `list` (the PM side is done).
    pub(crate) fn link_item(&self, list: &ListState, inner: &mut ListInner, off: u64, len: u64, whole: bool) -> u32 {
        let id = self.index.alloc_id();
        let it = self.index.item(id).expect("fresh id");
        self.init_item(it, list, off, len);
        it.next.store(inner.head, Ordering::Release);
        if let Some(h) = self.index.item(inner.head) {
            h.prev.store(id, Ordering::Release);
        }
        inner.head = id;
        inner.count += 1;
        self.index.register(id, off, off + len, whole);
        id
    }

    pub(crate) fn init_item(&self, it: &Item, list: &ListState, off: u64, len: u64) {
        it.len.store(len, Ordering::Release);
        it.list.store(list.idx, Ordering::Release);
        it.prev.store(0, Ordering::Release);
        it.next.store(0, Ordering::Release);
        it.off.store(off, Ordering::Release);
    }

    /// Space for a chunk or extent: from the free-space map, else from the top of the
    /// heap. The pool's persistent heap top is raised *before* the space is used; until
    /// the space is linked into a list it is free space that the next open recomputes.
    pub(crate) fn take_space(&self, len: u64, align: u64) -> Result<u64> {
        let mut sp = self.space.lock();
        if let Some(off) = sp.take(len, align) {
            return Ok(off);
        }
        let top = self.pool.heap_top();
        let base = sp.block_ending_at(top).unwrap_or(top);
        let start = base.next_multiple_of(align);
        let end = start.checked_add(len).ok_or(PoolError::Full {
            requested: len,
            available: 0,
            max: self.pool.max_size(),
        })?;
        self.pool.raise_heap_top(end)?;
        if base < top {
            sp.remove_exact(base, top);
        }
        sp.insert(base, start);
        Ok(start)
    }

    /// Bit(s) `bits` of a chunk's reservation word were just cleared (`old` is the word
    /// before): make the chunk findable again if it was full, recycle it if it is empty.
    pub(super) fn released(&self, list: &ListState, id: u32, gen: u32, old: u64, bits: u64) {
        let new = old & !bits;
        if old & BITMAP_MASK == BITMAP_MASK && old & LOCKED == 0 {
            let mut inner = list.inner.lock();
            if let Some(it) = self.index.item(id) {
                if it.gen.load(Ordering::Acquire) == gen && !it.in_partial.swap(true, Ordering::AcqRel) {
                    inner.partial.push(pack(id, gen));
                }
            }
        }
        if new == 0 {
            self.maybe_recycle(list, id, gen);
        }
    }

    /// EPRecycle's caller side (Algorithm 6 lines 1–2): recycle the chunk if nothing in
    /// it is used or reserved and it is no shard's current chunk. Keeping current chunks
    /// is the allocator's hysteresis: a thread that allocates and frees one object in a
    /// loop would otherwise create and recycle a chunk on every iteration.
    pub(super) fn maybe_recycle(&self, list: &ListState, id: u32, gen: u32) {
        // Unlocked pre-check: the common case (a thread freeing into its own current
        // chunk) must not take the list lock. Re-checked under the lock below.
        if list.is_cur(pack(id, gen)) {
            return;
        }
        let mut inner = list.inner.lock();
        let Some(it) = self.index.item(id) else { return };
        if it.gen.load(Ordering::Acquire) != gen || list.is_cur(pack(id, gen)) {
            return;
        }
        self.recycle_locked(list, &mut inner, id, it);
    }

    /// Recycle chunk `id` if its reservation word is 0, under the list lock.
    pub(super) fn recycle_locked(&self, list: &ListState, inner: &mut ListInner, id: u32, it: &Item) -> bool {
        if it.reserved.compare_exchange(0, LOCKED, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return false; // line 1: something was reserved meanwhile
        }
        let off = it.off.load(Ordering::Acquire);
        if chunk::header(&self.pool, off).bitmap() != 0 {
            // Cannot happen (DRAM reservations include every used bit); refuse rather
            // than lose objects.
            it.reserved.store(chunk::header(&self.pool, off).bitmap(), Ordering::Release);
            return false;
        }
        if self.unlink_locked(list, inner, it).is_err() {
            // A damaged link (format 3): keep the chunk rather than splice garbage into
            // the list; the next open or check reports the damage.
            it.reserved.store(0, Ordering::Release);
            return false;
        }
        self.retire(id, it, true);
        true
    }

    /// Algorithm 6 lines 3–10 and 12 for item `id` (PM), then the DRAM mirror.
    pub(crate) fn unlink_locked(&self, list: &ListState, inner: &mut ListInner, it: &Item) -> Result<()> {
        let prev_id = it.prev.load(Ordering::Acquire);
        let next_id = it.next.load(Ordering::Acquire);
        let prev_off = self.index.item(prev_id).map_or(0, |p| p.off.load(Ordering::Acquire));
        recycle_log::unlink(&self.pool, self.root.fmt, list.entry, it.off.load(Ordering::Acquire), prev_off)?;
        match self.index.item(prev_id) {
            Some(p) => p.next.store(next_id, Ordering::Release),
            None => inner.head = next_id,
        }
        if let Some(n) = self.index.item(next_id) {
            n.prev.store(prev_id, Ordering::Release);
        }
        inner.count -= 1;
        Ok(())
    }

    /// Algorithm 6 line 11 (`pfree`): forget the item and return its space.
    pub(crate) fn retire(&self, id: u32, it: &Item, whole: bool) {
        let off = it.off.load(Ordering::Acquire);
        let len = it.len.load(Ordering::Acquire);
        self.index.unregister(id, off, off + len, whole);
        self.index.free_id(id);
        self.space.lock().insert(off, off + len);
    }
}
