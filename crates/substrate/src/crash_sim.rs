//! The crash simulator (SPEC P6).
//!
//! A simulated pool lives in anonymous memory (the *working* memory: what the CPU sees,
//! caches included) beside a second mapping of the same size, the *persisted image*: what
//! PM would hold after a power failure. In `adr` mode a line reaches the persisted image
//! only when it was flushed (its content is captured at the flush, as `clwb` would write
//! it back) **and** the flushing thread then fenced. In `eadr` mode every visible store is
//! persistent, so the image is the working memory itself.
//!
//! Every flush and fence of the pool is a *crash point*. A test installs a hook that the
//! simulator calls at each point (before the fence takes effect). The hook asks for crash
//! images ([`CrashPoint::image`]): the persisted image plus any subset of the lines that
//! were written but not yet persisted — a cache may evict any dirty line at any moment —
//! down to 8-byte granularity (PM writes 8 aligned bytes atomically, not a whole line).
//! The test then recovers from each image in a fresh simulated pool and checks its
//! invariants. Running the workload once and checking at every point is what makes the
//! search exhaustive over crash points while keeping it cheap.

use crate::error::{PoolError, Result};
use crate::persist::{CrashModel, Mode, LINE};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::ThreadId;

/// Which of the written-but-not-persisted data a crash image includes.
///
/// The first four draw from every *dirty* line (working memory differs from the persisted
/// image, flushed or not). The last four are deterministic and adversarial: they draw only
/// from the *pending lines* — lines flushed but not yet fenced, in the order of their last
/// flush (oldest first, see [`CrashPoint::pending_lines`]) — and put in the image the copy
/// each flush captured. A random half finds a missing fence only when it happens to pick
/// the later line without the earlier; `OnlyNewest` picks exactly that image at every crash
/// point, so a class of ordering bug is caught by construction rather than by seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eviction {
    /// Only what was flushed and fenced.
    None,
    /// Every dirty line was evicted just before the crash (image = working memory).
    All,
    /// A pseudo-random half of the dirty lines (whole 64-byte lines), by seed.
    Lines(u64),
    /// A pseudo-random half of the dirty 8-byte words: torn lines.
    Words(u64),
    /// Exactly the most recently flushed pending line reached PM, and nothing else: the
    /// image a missing fence between two flushes leaves (a tail, a commit word or a link
    /// persisted before what it covers).
    OnlyNewest,
    /// Every pending line but the most recently flushed one reached PM.
    AllButNewest,
    /// Exactly pending line `i` (0: the oldest) reached PM; nothing if there is no line `i`.
    Only(usize),
    /// Every pending line but line `i` reached PM.
    AllBut(usize),
    /// The [`CrashModel::LinesInOrder`] image: each dirty line reached PM whole, holding a
    /// pseudo-random prefix (by seed, possibly empty or complete) of the 8-byte stores
    /// made to it through [`Pool::store_u64`](crate::Pool::store_u64) since it was last
    /// persisted, in program order. A dirty line whose content those stores do not
    /// explain (written another way, or dirty before the hook was installed) reached PM
    /// whole or not at all, by seed.
    InOrder(u64),
}

impl Eviction {
    /// The evictions a test of an engine that assumes crash model `model` checks at a
    /// point: for [`CrashModel::Words`] the standard ones and random torn words; for
    /// [`CrashModel::LinesInOrder`] the standard ones without torn words, and three
    /// random in-order prefixes per line instead. `seed` varies the random ones.
    pub fn for_model(model: CrashModel, point: u64, seed: u64) -> Vec<Eviction> {
        let s = seed ^ point.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        match model {
            CrashModel::LinesInOrder => vec![
                Eviction::None,
                Eviction::All,
                Eviction::Lines(s),
                Eviction::InOrder(s ^ 1),
                Eviction::InOrder(s ^ 2),
                Eviction::InOrder(s ^ 3),
            ],
            _ => {
                let mut v = Eviction::standard(point).to_vec();
                v.extend([Eviction::Lines(s), Eviction::Words(s ^ 0x5555)]);
                v
            }
        }
    }

    /// Single pending lines a thorough test tries per crash point besides the newest (as
    /// [`Eviction::Only`] and [`Eviction::AllBut`]); bounds a point's images to 4 + 2 + 2 × 4.
    pub const SINGLE_LINES: usize = 4;

    /// The variants a thorough test checks at one crash point.
    pub fn standard(point: u64) -> [Eviction; 4] {
        [Eviction::None, Eviction::All, Eviction::Lines(point * 2 + 1), Eviction::Words(point * 2 + 2)]
    }

    /// The deterministic adversarial variants for a point with `pending` pending lines:
    /// `OnlyNewest` and `AllButNewest`, then `Only(i)` and `AllBut(i)` for up to `cap`
    /// older lines `i`, spread evenly from the oldest. Variants whose image another one
    /// (or [`Eviction::None`]) already gives are left out: none for no pending line, only
    /// `OnlyNewest` for one, the newest pair for two.
    pub fn adversarial(pending: usize, cap: usize) -> Vec<Eviction> {
        let mut v = Vec::new();
        if pending == 0 {
            return v;
        }
        v.push(Eviction::OnlyNewest);
        if pending == 1 {
            return v;
        }
        v.push(Eviction::AllButNewest);
        if pending == 2 {
            return v;
        }
        let older = pending - 1;
        let n = cap.min(older);
        let mut last = usize::MAX;
        for k in 0..n {
            let i = k * older / n;
            if i != last {
                v.push(Eviction::Only(i));
                v.push(Eviction::AllBut(i));
                last = i;
            }
        }
        v
    }
}

/// What kind of event a crash point is (more kinds may come: match with a wildcard).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PointKind {
    Flush,
    Fence,
    /// Just before a store an engine makes through the pool's store functions
    /// ([`Pool::store_u64`]) or EPallocator makes to its metadata: the eADR crash model,
    /// where every store is persistent the moment it is visible, so a crash between two
    /// stores keeps exactly the first.
    Store,
}

type Hook = Box<dyn FnMut(&CrashPoint<'_>) + Send>;

/// Per thread, its lines flushed but not yet fenced: (offset, flush sequence number,
/// content at the flush).
type Pending = HashMap<ThreadId, Vec<(usize, u64, [u8; LINE])>>;

/// Per line, the 8-byte stores made to it since its persisted copy was captured, in
/// program order: (sequence number, offset, value). Kept only while a hook is installed
/// in a flushing mode (what [`Eviction::InOrder`] draws prefixes from).
type StoreLog = HashMap<usize, Vec<(u64, usize, u64)>>;

struct Inner {
    /// Lines flushed but not yet fenced, per thread, with a global flush sequence number
    /// and their content at flush time.
    pending: Pending,
    /// Sequence number of the flush whose copy each line of the persisted image holds.
    /// When two threads flush the same line, a fence may only install a copy newer than
    /// the one already there: real hardware never writes an older line over a newer one.
    applied: HashMap<usize, u64>,
    flush_seq: u64,
    stores: StoreLog,
    hook: Option<Hook>,
    hook_on_flush: bool,
    hook_on_store: bool,
}

/// Simulator state of one pool.
pub struct SimState {
    persisted: *mut u8,
    reserved: u64,
    size: AtomicU64,
    mode: Mode,
    points: AtomicU64,
    inner: Mutex<Inner>,
}

// SAFETY: `persisted` is a private mapping owned by this state; writes to it happen under
// `inner`'s lock.
unsafe impl Send for SimState {}
// SAFETY: as for Send: shared access goes through `inner`'s lock or atomics.
unsafe impl Sync for SimState {}

/// One crash point, handed to the hook.
pub struct CrashPoint<'a> {
    /// Sequence number of this point in the run (0-based).
    pub index: u64,
    pub kind: PointKind,
    sim: &'a SimState,
    working: *const u8,
    size: usize,
    /// The simulator's pending lines and the flush each persisted line holds, read under
    /// its lock (held while the point exists).
    pending: &'a Pending,
    applied: &'a HashMap<usize, u64>,
    stores: &'a StoreLog,
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Read `n` bytes of possibly concurrently written memory word by word (atomic loads keep
/// the simulator free of data races when several threads run on a simulated pool).
///
/// # Safety
/// `src` must be 8-byte aligned and point to at least `dst.len()` mapped, readable bytes.
unsafe fn read_words(src: *const u8, dst: &mut [u8]) {
    for (i, chunk) in dst.chunks_exact_mut(8).enumerate() {
        // SAFETY: the caller guarantees `src` holds `dst.len()` readable bytes, 8-aligned
        // (pool and image bases are page-aligned); an atomic load tolerates racing writers.
        let w = unsafe { AtomicU64::from_ptr(src.add(i * 8) as *mut u64) }.load(Ordering::Relaxed);
        chunk.copy_from_slice(&w.to_ne_bytes());
    }
}

impl SimState {
    /// The simulator of a pool of at most `reserved` bytes, keeping its persisted image in
    /// `persisted`.
    ///
    /// # Safety
    ///
    /// `persisted` is a fresh reservation of `reserved` bytes of address space (the pool's
    /// `reserve`) that nothing else uses: the state owns it, makes it accessible as the
    /// pool grows, and unmaps it on drop.
    pub(crate) unsafe fn new(persisted: *mut u8, reserved: u64, mode: Mode) -> SimState {
        SimState {
            persisted,
            reserved,
            size: AtomicU64::new(0),
            mode,
            points: AtomicU64::new(0),
            inner: Mutex::new(Inner {
                pending: HashMap::new(),
                applied: HashMap::new(),
                flush_seq: 0,
                stores: HashMap::new(),
                hook: None,
                hook_on_flush: false,
                hook_on_store: false,
            }),
        }
    }

    pub(crate) fn grow(&self, to: u64) -> Result<()> {
        let cur = self.size.load(Ordering::Acquire);
        if to > cur {
            // SAFETY: `[cur, to)` lies inside the `reserved` bytes this state reserved in
            // `new` and alone owns (`to` never exceeds the pool's max size, which is
            // `reserved`); mprotect only changes that range's access rights.
            let rc = unsafe {
                libc::mprotect(
                    self.persisted.add(cur as usize) as *mut libc::c_void,
                    (to - cur) as usize,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
            if rc != 0 {
                return Err(PoolError::io("mprotect", std::io::Error::last_os_error()));
            }
            self.size.store(to, Ordering::Release);
        }
        Ok(())
    }

    /// # Safety
    /// `bytes.len()` must not exceed the grown size.
    pub(crate) unsafe fn load_persisted(&self, bytes: &[u8]) {
        // SAFETY: the caller keeps `bytes.len()` within the grown (mapped) size; the image
        // and the persisted mapping never overlap.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.persisted, bytes.len()) };
    }

    /// Install the crash-point hook. With `on_flush`, flushes are crash points too (fences
    /// always are). The hook runs under the simulator's lock: it must not use this pool.
    pub fn set_hook(&self, on_flush: bool, hook: impl FnMut(&CrashPoint<'_>) + Send + 'static) {
        self.set_hook_with(on_flush, false, hook);
    }

    /// Install the crash-point hook with stores as crash points too (`on_store`, see
    /// [`PointKind::Store`]): the eADR crash model, where a crash between two stores that
    /// no fence separates is possible and keeps the first. Useful in `adr` as well (a
    /// dirty line may be evicted between any two stores).
    pub fn set_hook_with(&self, on_flush: bool, on_store: bool, hook: impl FnMut(&CrashPoint<'_>) + Send + 'static) {
        let mut g = self.inner.lock();
        g.hook = Some(Box::new(hook));
        g.hook_on_flush = on_flush;
        g.hook_on_store = on_store;
    }

    /// Remove the hook (and the store log kept for it).
    pub fn clear_hook(&self) {
        let mut g = self.inner.lock();
        g.hook = None;
        g.stores.clear();
    }

    /// Number of crash points passed so far.
    pub fn points(&self) -> u64 {
        self.points.load(Ordering::Relaxed)
    }

    /// A flush of `[off, off+len)` of the pool whose memory starts at `working`.
    ///
    /// # Safety
    ///
    /// `working` is the base of the pool this simulator belongs to, and the range is mapped.
    pub(crate) unsafe fn on_flush(&self, working: *const u8, off: usize, len: usize) {
        if len == 0 {
            return;
        }
        let mut g = self.inner.lock();
        if self.mode.flushes() {
            let first = off & !(LINE - 1);
            let tid = std::thread::current().id();
            let mut line = first;
            while line < off + len {
                let mut buf = [0u8; LINE];
                // SAFETY: the flushed range is mapped (this function's contract), and its
                // lines, 64-aligned from a page-aligned base, lie within the range's pages.
                unsafe { read_words(working.add(line), &mut buf) };
                g.flush_seq += 1;
                let seq = g.flush_seq;
                g.pending.entry(tid).or_default().push((line, seq, buf));
                line += LINE;
            }
        }
        if g.hook_on_flush {
            // SAFETY: `working` is this simulator's pool (this function's contract).
            unsafe { self.fire(&mut g, working, PointKind::Flush) };
        }
    }

    /// Lines the calling thread flushed and has not fenced yet (see
    /// `Pool::unfenced_flushes`).
    pub(crate) fn unfenced_of_this_thread(&self) -> usize {
        self.inner.lock().pending.get(&std::thread::current().id()).map_or(0, Vec::len)
    }

    /// A store is about to be made (see [`PointKind::Store`]).
    ///
    /// # Safety
    ///
    /// `working` is the base of the pool this simulator belongs to.
    pub(crate) unsafe fn on_store(&self, working: *const u8) {
        let mut g = self.inner.lock();
        if g.hook_on_store {
            // SAFETY: `working` is this simulator's pool (this function's contract).
            unsafe { self.fire(&mut g, working, PointKind::Store) };
        }
    }

    /// The 8-byte store of `v` at `off` is about to be made: its crash point (as
    /// `on_store`), then, while a hook is installed in a flushing mode, its entry in the
    /// line's store log (after the point: an image taken there must not hold it).
    ///
    /// # Safety
    ///
    /// As `on_store`.
    pub(crate) unsafe fn on_store_word(&self, working: *const u8, off: usize, v: u64) {
        let mut g = self.inner.lock();
        if g.hook_on_store {
            // SAFETY: `working` is this simulator's pool (this function's contract).
            unsafe { self.fire(&mut g, working, PointKind::Store) };
        }
        if g.hook.is_some() && self.mode.flushes() {
            g.flush_seq += 1;
            let seq = g.flush_seq;
            g.stores.entry(off & !(LINE - 1)).or_default().push((seq, off, v));
        }
    }

    /// A fence of the calling thread.
    ///
    /// # Safety
    ///
    /// `working` is the base of the pool this simulator belongs to.
    pub(crate) unsafe fn on_fence(&self, working: *const u8) {
        let mut g = self.inner.lock();
        // SAFETY: `working` is this simulator's pool (this function's contract).
        unsafe { self.fire(&mut g, working, PointKind::Fence) };
        let tid = std::thread::current().id();
        if let Some(lines) = g.pending.remove(&tid) {
            for (line, seq, buf) in lines {
                let newest = g.applied.entry(line).or_insert(0);
                if seq < *newest {
                    continue;
                }
                *newest = seq;
                // SAFETY: the line lies inside the grown persisted image; we hold the lock.
                unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), self.persisted.add(line), LINE) };
                // The stores this copy holds are persisted: only later ones stay logged.
                if let Some(log) = g.stores.get_mut(&line) {
                    log.retain(|&(s, _, _)| s > seq);
                }
            }
        }
    }

    /// Bytes a crash image covers: the simulator's own size, not `pool.size()`. While a
    /// pool grows, the new extent is mapped and the simulator grown *before* the header
    /// slot recording the new size is persisted, and the pool publishes the new size only
    /// after that; an image cut at `pool.size()` would then be shorter than the size its
    /// own header records (as a file is not: the file is extended first).
    fn image_size(&self) -> usize {
        self.size.load(Ordering::Acquire) as usize
    }

    /// Count a crash point and call the hook with it.
    ///
    /// # Safety
    ///
    /// `working` is the base of the pool this simulator belongs to: the hook's images read
    /// the simulator's size from it, which the pool keeps mapped (it grows the simulator
    /// only after mapping the new extent).
    unsafe fn fire(&self, g: &mut Inner, working: *const u8, kind: PointKind) {
        let index = self.points.fetch_add(1, Ordering::Relaxed);
        let Inner { hook, pending, applied, stores, .. } = g;
        if let Some(hook) = hook.as_mut() {
            let pt = CrashPoint { index, kind, sim: self, working, size: self.image_size(), pending, applied, stores };
            hook(&pt);
        }
    }

    /// The image a crash right now would leave, read from the pool memory at `working`
    /// (`SimState::image_now` checks that it is this simulator's pool).
    ///
    /// # Safety
    ///
    /// As for `fire`: `working` is the base of the pool this simulator belongs to.
    pub(crate) unsafe fn image_at(&self, working: *const u8, ev: Eviction) -> Vec<u8> {
        let g = self.inner.lock();
        let pt = CrashPoint {
            index: self.points(),
            kind: PointKind::Fence,
            sim: self,
            working,
            size: self.image_size(),
            pending: &g.pending,
            applied: &g.applied,
            stores: &g.stores,
        };
        pt.image(ev)
    }
}

impl CrashPoint<'_> {
    /// The pending lines at this point — flushed by any thread and not yet fenced — in
    /// the order of their last flush (oldest first), each once, with the copy that flush
    /// captured. A line whose persisted copy is already newer (another thread flushed and
    /// fenced it later) is not pending: no eviction can bring the older copy back.
    fn pending_list(&self) -> Vec<(usize, u64, &[u8; LINE])> {
        let mut newest: HashMap<usize, (u64, &[u8; LINE])> = HashMap::new();
        for lines in self.pending.values() {
            for (line, seq, buf) in lines {
                if self.applied.get(line).is_some_and(|&a| a > *seq) || line + LINE > self.size {
                    continue;
                }
                let e = newest.entry(*line).or_insert((*seq, buf));
                if *seq > e.0 {
                    *e = (*seq, buf);
                }
            }
        }
        let mut v: Vec<_> = newest.into_iter().map(|(line, (seq, buf))| (line, seq, buf)).collect();
        v.sort_unstable_by_key(|&(_, seq, _)| seq);
        v
    }

    /// Number of pending lines (see [`Eviction`]): what [`Eviction::Only`] and
    /// [`Eviction::AllBut`] index.
    pub fn pending_lines(&self) -> usize {
        if self.sim.mode == Mode::Eadr {
            return 0;
        }
        self.pending_list().len()
    }

    /// Every eviction a thorough check takes at this point: [`Eviction::standard`] and
    /// [`Eviction::adversarial`] with at most `cap` single older lines (use
    /// [`Eviction::SINGLE_LINES`] unless the workload's cost says otherwise).
    pub fn evictions(&self, cap: usize) -> Vec<Eviction> {
        let mut v = Eviction::standard(self.index).to_vec();
        v.extend(Eviction::adversarial(self.pending_lines(), cap));
        v
    }

    /// A crash image at this point: the persisted image plus the dirty data `ev` selects.
    pub fn image(&self, ev: Eviction) -> Vec<u8> {
        let mut working = vec![0u8; self.size];
        // SAFETY: `size` bytes of the working memory are mapped.
        unsafe { read_words(self.working, &mut working) };
        if self.sim.mode == Mode::Eadr || ev == Eviction::All {
            return working;
        }
        let mut img = vec![0u8; self.size];
        // SAFETY: the persisted image is grown in step with the pool.
        unsafe { std::ptr::copy_nonoverlapping(self.sim.persisted, img.as_mut_ptr(), self.size) };
        let pending = |img: &mut [u8], keep: &dyn Fn(usize, usize) -> bool| {
            let list = self.pending_list();
            let n = list.len();
            for (i, (line, _, buf)) in list.into_iter().enumerate() {
                if keep(i, n) {
                    img[line..line + LINE].copy_from_slice(buf);
                }
            }
        };
        match ev {
            Eviction::None | Eviction::All => {}
            Eviction::OnlyNewest => pending(&mut img, &|i, n| i + 1 == n),
            Eviction::AllButNewest => pending(&mut img, &|i, n| i + 1 != n),
            Eviction::Only(j) => pending(&mut img, &|i, _| i == j),
            Eviction::AllBut(j) => pending(&mut img, &|i, _| i != j),
            Eviction::Lines(seed) => {
                let mut s = seed;
                for (w, p) in working.chunks_exact(LINE).zip(img.chunks_exact_mut(LINE)) {
                    if w != p && splitmix(&mut s) & 1 == 1 {
                        p.copy_from_slice(w);
                    }
                }
            }
            Eviction::Words(seed) => {
                let mut s = seed;
                for (w, p) in working.chunks_exact(8).zip(img.chunks_exact_mut(8)) {
                    if w != p && splitmix(&mut s) & 1 == 1 {
                        p.copy_from_slice(w);
                    }
                }
            }
            Eviction::InOrder(seed) => self.in_order(&working, &mut img, seed),
        }
        img
    }

    /// [`Eviction::InOrder`]: each dirty line of `img` (the persisted image) becomes a
    /// prefix of its logged stores, or, when those do not explain it, all or nothing.
    fn in_order(&self, working: &[u8], img: &mut [u8], seed: u64) {
        let mut s = seed;
        for (i, (w, p)) in working.chunks_exact(LINE).zip(img.chunks_exact_mut(LINE)).enumerate() {
            if w == p {
                continue;
            }
            let log = self.stores.get(&(i * LINE)).map_or(&[][..], Vec::as_slice);
            let apply = |line: &mut [u8], stores: &[(u64, usize, u64)]| {
                for &(_, off, v) in stores {
                    line[off - i * LINE..][..8].copy_from_slice(&v.to_ne_bytes());
                }
            };
            let mut replay = [0u8; LINE];
            replay.copy_from_slice(p);
            apply(&mut replay, log);
            if !log.is_empty() && replay == *w {
                let k = (splitmix(&mut s) % (log.len() as u64 + 1)) as usize;
                apply(p, &log[..k]);
            } else if splitmix(&mut s) & 1 == 1 {
                p.copy_from_slice(w);
            }
        }
    }

    /// Number of 64-byte lines that differ between working memory and the persisted image.
    pub fn dirty_lines(&self) -> usize {
        let all = self.image(Eviction::All);
        let none = self.image(Eviction::None);
        all.chunks_exact(LINE).zip(none.chunks_exact(LINE)).filter(|(a, b)| a != b).count()
    }
}

impl Drop for SimState {
    fn drop(&mut self) {
        // SAFETY: `persisted` is the `reserved`-byte mapping made in `new`, owned by this
        // state alone; no `CrashPoint` (which borrows the state) outlives it, so nothing
        // reads it after the unmap.
        unsafe { libc::munmap(self.persisted as *mut libc::c_void, self.reserved as usize) };
    }
}
