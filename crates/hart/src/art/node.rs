//! ART inner nodes (Leis et al., "The Adaptive Radix Tree", ICDE 2013; SPEC H2), laid out
//! compactly as in libart: a child is one tagged 8-byte word ([`Slot`]), and each node
//! kind is one allocation that starts with a 24-byte [`Header`]:
//!
//! | kind    | bytes | body after the header |
//! |---------|------:|-----------------------|
//! | Node4   |    64 | 4 sorted key bytes, 4 children |
//! | Node16  |   168 | 16 sorted key bytes, 16 children (searched with one SSE2 compare) |
//! | Node48  |   664 | 256-byte index (0 = none, else child index + 1), 48 children |
//! | Node256 |  2072 | 256 children |
//!
//! A Node4 is one cache line, and reaching any node costs one pointer dereference. (The
//! first version used `Box<Node>` with the wider kinds boxed again behind an enum of
//! 16-byte children: two dereferences and two cache lines for most nodes, which made ART
//! traversal the largest cost of every HART operation on the Dictionary.)
//!
//! Nodes grow when full and shrink with hysteresis (N16→N4 below 3 children, N48→N16
//! below 12, N256→N48 below 37) so that a delete right after an insert at a boundary
//! does not reallocate twice.
//!
//! pmkv adds one field to the classic node: `term`, the leaf of a key that *ends* at this
//! node. Classic ART appends a terminator byte to make keys prefix-free, which forbids
//! that byte inside keys; SPEC H1 requires keys of any bytes, 0x00 included, so a key
//! that is a prefix of another is stored beside the node's children instead.
//!
//! # Safety model
//!
//! Node memory is managed by hand (arena slots named by tagged words), so this module is
//! the only place in the ART that dereferences node pointers. A [`NodePtr`] is a raw
//! handle: `Copy`, without a lifetime, like a raw pointer. Every function that reads or
//! writes a node through one is therefore an `unsafe fn`, with one of two contracts:
//!
//! * **read**: the handle names a *live* node (allocated by this module from an arena and
//!   not freed since), and nothing changes that node while the call runs or while a
//!   reference it returned (a prefix slice) is in use;
//! * **write**: the read contract, and the caller has *exclusive* access to the node: no
//!   other thread reads it meanwhile, and no reference returned from it earlier is used
//!   again (except where a function says otherwise).
//!
//! The functions that allocate, grow, shrink or free nodes ([`add`], [`remove`],
//! [`free_node`], [`free_tree`]) also need the arena the nodes came from. [`Art`](super::Art)
//! discharges all of this: it owns each of its nodes through exactly one slot, allocates
//! them all from its own arena, reads them only under `&self` and changes them only under
//! `&mut self` (HART's per-ART reader-writer lock), and frees a node only after unlinking it.

use super::arena::{NodeArena, SlotKind, KINDS};
use std::ptr::NonNull;

/// Largest children count per node kind.
pub(crate) const N4: usize = 4;
pub(crate) const N16: usize = 16;
pub(crate) const N48: usize = 48;
const N256: usize = 256;

/// Prefix bytes kept inside the header; longer compressed paths live on the heap.
pub(crate) const INLINE_PREFIX: usize = 8;

/// A child word: null empty; low bit set: a leaf, `offset << 1 | 1` (an address without
/// provenance, never dereferenced); otherwise a node pointer with the node's kind in bits
/// 1–2 ([`KIND_TAG`]; nodes are line-aligned, so the low six bits are free). Kept as a
/// pointer, not an integer, so that node pointers keep their provenance (the ART's unit
/// tests run under Miri with strict provenance).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(transparent)]
pub(crate) struct Slot(*mut Header);

// SAFETY: a slot is a plain word; safe code can copy it and decode it (`get`) but never
// dereference it. Every access to the node behind it is an `unsafe` node function whose
// read or write contract demands that the caller synchronize with other threads; `Art`
// does so with `&`/`&mut` borrows, which HART's per-ART reader-writer lock hands out.
// Nodes live in the arena (shared by all threads), not in thread-local memory.
unsafe impl Send for Slot {}
// SAFETY: as above: sharing `&Slot` gives only the word; node access is synchronized by
// the node functions' contracts.
unsafe impl Sync for Slot {}

impl Default for Slot {
    fn default() -> Self {
        Slot::EMPTY
    }
}

/// What a non-empty slot holds.
pub(crate) enum Ref {
    Leaf(u64),
    Node(NodePtr),
}

/// Bits 1–2 of a node's slot word: its [`NodeType`], so that a lookup knows which of the
/// node's lines it will read before the node's header arrives ([`Slot::prefetch_lookup`]).
const KIND_TAG: usize = 0b110;

impl Slot {
    pub(crate) const EMPTY: Slot = Slot(std::ptr::null_mut());

    #[inline]
    pub(crate) fn leaf(off: u64) -> Slot {
        debug_assert!(off < 1 << 63);
        Slot(std::ptr::without_provenance_mut(((off << 1) | 1) as usize))
    }

    #[inline]
    pub(crate) fn is_empty(self) -> bool {
        self.0.is_null()
    }

    #[inline]
    pub(crate) fn get(self) -> Option<Ref> {
        let a = self.0.addr();
        if a & 1 == 1 {
            Some(Ref::Leaf((a >> 1) as u64))
        } else {
            NonNull::new(self.0.map_addr(|a| a & !KIND_TAG)).map(|p| Ref::Node(NodePtr(p)))
        }
    }

    /// The kind recorded in a node's slot word (None for a leaf or an empty slot).
    #[cfg(test)]
    pub(crate) fn tagged_kind(self) -> Option<NodeType> {
        let a = self.0.addr();
        (a & 1 == 0 && a != 0).then(|| NodeType::from_u8(((a & KIND_TAG) >> 1) as u8))
    }

    /// The slot of node `p`, of kind `t`.
    fn node(p: NodePtr, t: NodeType) -> Slot {
        debug_assert_eq!(p.0.as_ptr().addr() & (KIND_TAG | 1), 0, "nodes are line-aligned");
        Slot(p.0.as_ptr().map_addr(|a| a | (t as usize) << 1))
    }

    /// Start loading, all at once, the lines of the node in this slot that a lookup of
    /// `byte` in it will read (the slot must name a node). A lookup reads the
    /// node's header first and only then the line its child lies in (a Node48: the index
    /// line, then the child's), each a dependent cache miss once the tree outgrows the
    /// caches; the kind in the slot word tells which lines those are before the header
    /// arrives, so they are fetched in parallel with it. The child's line depends on where
    /// the node's compressed path ends, which only the header tells: `byte` is the key byte
    /// right after the node's depth, the right guess when the node has no prefix (most
    /// nodes below the first levels of a large tree), a wasted prefetch otherwise. A Node48
    /// gets all its child lines, as its index says which only after the index line arrives.
    /// Measured: docs/results/hart-growth.md.
    #[inline(always)]
    pub(crate) fn prefetch_lookup(self, byte: u8) {
        debug_assert!(matches!(self.get(), Some(Ref::Node(_))), "called on a node's slot");
        let a = self.0.addr();
        let base = self.0.map_addr(|a| a & !KIND_TAG).cast::<u8>().cast_const();
        let kind = (a & KIND_TAG) >> 1;
        // Per kind, the line a lookup of `byte` reads after the header's, as (offset,
        // stride per key byte), and a second line: a Node16's children fill its lines 1
        // and 2; a Node48's index byte `b` is at 24 + b, its children at 280..664, lines 4
        // to 10; a Node256's child `b` at 24 + 8b (`layout_is_compact` pins these). A
        // Node4 is one line, the header's, and gets nothing: prefetching it anyway cost
        // the Dictionary's cached passes 1-3 ns per operation (docs/design/hart.md, "Tried and measured").
        const FIRST: [(usize, usize); 4] = [(0, 0), (64, 0), (24, 1), (24, 8)];
        const SECOND: [usize; 4] = [0, 128, 256, 0];
        if kind == NodeType::N4 as usize {
            return;
        }
        let (off, stride) = FIRST[kind];
        prefetch(base, off + stride * byte as usize);
        prefetch(base, SECOND[kind]);
        if kind == NodeType::N48 as usize {
            for line in 5..=10 {
                prefetch(base, line * 64);
            }
        }
    }
}

/// Prefetch the line holding byte `at` of the node at `base`.
#[inline(always)]
fn prefetch(base: *const u8, at: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: a prefetch never faults and has no architectural effect; the address lies
    // inside the node (`wrapping_add` keeps even that from mattering).
    unsafe {
        std::arch::x86_64::_mm_prefetch(base.wrapping_add(at).cast::<i8>(), std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = (base, at);
}

/// The part every node kind starts with.
#[repr(C)]
pub(crate) struct Header {
    /// Leaf of the key ending at this node, `offset << 1 | 1` (0 = none).
    term: u64,
    /// The compressed path: inline if `plen <= INLINE_PREFIX`, else a heap `Box<[u8]>`
    /// of `plen` bytes (pessimistic path compression: a lookup never reads a PM leaf to
    /// learn the path).
    prefix: PrefixData,
    plen: u32,
    n: u16,
    kind: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
union PrefixData {
    inline: [u8; INLINE_PREFIX],
    heap: *mut u8,
}

#[repr(C)]
struct Node4 {
    h: Header,
    keys: [u8; N4],
    children: [Slot; N4],
}

#[repr(C)]
struct Node16 {
    h: Header,
    keys: [u8; N16],
    children: [Slot; N16],
}

#[repr(C)]
struct Node48 {
    h: Header,
    index: [u8; 256],
    children: [Slot; N48],
}

#[repr(C)]
struct Node256 {
    h: Header,
    children: [Slot; N256],
}

/// Node kind, for growth and memory accounting (SPEC H9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum NodeType {
    N4,
    N16,
    N48,
    N256,
}

impl NodeType {
    pub(crate) const ALL: [NodeType; KINDS] = [NodeType::N4, NodeType::N16, NodeType::N48, NodeType::N256];

    pub(crate) fn name(self) -> &'static str {
        match self {
            NodeType::N4 => "art node4",
            NodeType::N16 => "art node16",
            NodeType::N48 => "art node48",
            NodeType::N256 => "art node256",
        }
    }

    /// Bytes of the arena slot of a node of this kind: its size rounded up to whole cache
    /// lines, so that slots are line-aligned.
    pub(crate) fn slot_bytes(self) -> usize {
        self.bytes().next_multiple_of(64)
    }

    /// Bytes of a node of this kind (without a heap prefix).
    pub(crate) fn bytes(self) -> usize {
        match self {
            NodeType::N4 => std::mem::size_of::<Node4>(),
            NodeType::N16 => std::mem::size_of::<Node16>(),
            NodeType::N48 => std::mem::size_of::<Node48>(),
            NodeType::N256 => std::mem::size_of::<Node256>(),
        }
    }

    fn capacity(self) -> usize {
        match self {
            NodeType::N4 => N4,
            NodeType::N16 => N16,
            NodeType::N48 => N48,
            NodeType::N256 => N256,
        }
    }

    /// The kind of a header's or slot word's kind field (always below 4). A match on the
    /// low two bits, which compiles to nothing, where indexing `ALL` cost a bounds check
    /// and a table load on every descent step (~40 instructions per insert).
    #[inline(always)]
    fn from_u8(k: u8) -> NodeType {
        debug_assert!((k as usize) < KINDS, "node kind {k}");
        match k & 3 {
            0 => NodeType::N4,
            1 => NodeType::N16,
            2 => NodeType::N48,
            _ => NodeType::N256,
        }
    }
}

impl SlotKind for NodeType {
    fn pool(self) -> usize {
        self as usize
    }
    fn slot_bytes(self) -> usize {
        NodeType::slot_bytes(self)
    }
}

/// The prefix representation of `bytes` (the concatenation of `parts`), newly allocated
/// if long. Built before the old prefix is released, so `parts` may borrow from it.
fn make_prefix(parts: &[&[u8]]) -> (PrefixData, u32) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len <= INLINE_PREFIX {
        let mut inline = [0u8; INLINE_PREFIX];
        let mut at = 0;
        for p in parts {
            inline[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        (PrefixData { inline }, len as u32)
    } else {
        let boxed: Box<[u8]> = parts.concat().into_boxed_slice();
        (PrefixData { heap: Box::into_raw(boxed) as *mut u8 }, len as u32)
    }
}

/// Release a heap prefix (no-op for an inline one).
///
/// # Safety
///
/// `(data, len)` came from [`make_prefix`], is released once, and is not read afterwards.
unsafe fn release_prefix(data: PrefixData, len: u32) {
    if len as usize > INLINE_PREFIX {
        // SAFETY: per the contract, `heap` is the pointer of a Box<[u8]> of `len` bytes.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(data.heap, len as usize)) });
    }
}

fn header(prefix: &[u8]) -> Header {
    let (data, plen) = make_prefix(&[prefix]);
    Header { term: 0, prefix: data, plen, n: 0, kind: 0 }
}

/// Allocate an empty node of kind `t` with header `h` (whose prefix it takes over).
/// The arena hands out zeroed memory, which is an empty node (no keys, index entries 0,
/// empty slots); only the header is written.
fn alloc_node(arena: &NodeArena, t: NodeType, mut h: Header) -> NodePtr {
    h.kind = t as u8;
    h.n = 0;
    let p = arena.alloc(t).cast::<Header>();
    // SAFETY: a fresh, zeroed, line-aligned slot of `t.slot_bytes()` bytes; zero is a
    // valid value of every node field (integers, and null slots = EMPTY).
    unsafe { p.as_ptr().write(h) };
    NodePtr(p)
}

/// Open a gap at `at` in the first `len` entries (short arrays: a loop, not a memmove call).
#[inline]
fn shift_up<T: Copy>(a: &mut [T], at: usize, len: usize) {
    let mut i = len;
    while i > at {
        a[i] = a[i - 1];
        i -= 1;
    }
}

/// Close the gap at `at` in the first `len` entries.
#[inline]
fn shift_down<T: Copy>(a: &mut [T], at: usize, len: usize) {
    for i in at..len - 1 {
        a[i] = a[i + 1];
    }
}

/// Give the memory of node `p` back to the arena, but not its prefix (which was moved
/// elsewhere or released by the caller).
///
/// # Safety
///
/// `p` is live, was allocated from `arena`, is named by no slot, and neither `p` nor any
/// reference obtained through it is used afterwards.
unsafe fn dealloc_node(arena: &NodeArena, p: NodePtr) {
    // SAFETY: `p` is live (read contract) until the arena takes its slot back, which the
    // contract allows: the slot came from `arena` with this kind, and is not used again.
    unsafe { arena.free(p.node_type(), p.0.cast()) };
}

/// A new Node4 with compressed path `prefix`, as a slot, and a handle to it. The node
/// belongs to whoever stores the slot; it is freed only through [`free_node`] or
/// [`free_tree`] (a slot that is dropped leaks it, which is safe).
pub(crate) fn new4(arena: &NodeArena, prefix: &[u8]) -> (Slot, NodePtr) {
    let p = alloc_node(arena, NodeType::N4, header(prefix));
    (Slot::node(p, NodeType::N4), p)
}

/// Free one node that was unlinked from the tree (its children are not touched).
///
/// # Safety
///
/// `p` is live and was allocated from `arena`; no slot names it any more, no other thread
/// can reach it, and neither `p` (or a copy) nor a reference obtained through it is used
/// afterwards.
pub(crate) unsafe fn free_node(arena: &NodeArena, p: NodePtr) {
    // SAFETY: per the contract `p` is live and ours alone; its prefix was made by
    // `make_prefix` (every header's is) and is released once, here, and the node's memory
    // goes back to the arena it came from.
    unsafe {
        let h = p.h();
        release_prefix(h.prefix, h.plen);
        dealloc_node(arena, p);
    }
}

/// Free a whole subtree (leaves are PM offsets and are not touched).
///
/// # Safety
///
/// Every node under `s` satisfies [`free_node`]'s contract: the subtree was allocated from
/// `arena`, is owned by `s` alone (`s` is not stored in any tree, or is removed from it),
/// and neither `s` nor any handle into the subtree is used afterwards.
pub(crate) unsafe fn free_tree(arena: &NodeArena, s: Slot) {
    if let Some(Ref::Node(p)) = s.get() {
        // SAFETY: `p` and its children are live and exclusively ours (the contract); each
        // child subtree is freed before `p`, and nothing reads them afterwards.
        unsafe {
            p.for_each(|_, c| {
                free_tree(arena, c);
                true
            });
            free_node(arena, p);
        }
    }
}

/// Index of `byte` among the first `n` sorted keys of a Node16.
#[inline]
fn find16(keys: &[u8; N16], n: usize, byte: u8) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
        // SAFETY: SSE2 is part of the x86_64 baseline; the load reads the 16 key bytes.
        let bits = unsafe {
            let k = _mm_loadu_si128(keys.as_ptr() as *const __m128i);
            _mm_movemask_epi8(_mm_cmpeq_epi8(k, _mm_set1_epi8(byte as i8))) as u32
        } & ((1u32 << n) - 1);
        (bits != 0).then(|| bits.trailing_zeros() as usize)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        keys[..n].iter().position(|&k| k == byte)
    }
}

/// The key bytes and children arrays of a Node4 or Node16, the kinds that keep their
/// children sorted by key byte (their first `n` entries are used), with the arrays'
/// capacity; None for the indexed kinds. Raw pointers, so that readers (under a shared
/// borrow) and writers (under an exclusive one) can share the code without creating a
/// `&mut` that aliases another reader's view.
///
/// # Safety
///
/// `raw` is a live node.
unsafe fn sorted_arrays(raw: *mut Header) -> Option<(*mut u8, *mut Slot, usize)> {
    // SAFETY: the header's kind names the allocation's real type (module invariant).
    unsafe {
        match NodeType::from_u8((*raw).kind) {
            NodeType::N4 => {
                let n = raw.cast::<Node4>();
                Some((&raw mut (*n).keys as *mut u8, &raw mut (*n).children as *mut Slot, N4))
            }
            NodeType::N16 => {
                let n = raw.cast::<Node16>();
                Some((&raw mut (*n).keys as *mut u8, &raw mut (*n).children as *mut Slot, N16))
            }
            _ => None,
        }
    }
}

/// Index of `byte` among the `len` sorted keys at `keys` (an array of `cap` bytes).
///
/// # Safety
///
/// `keys` points to `cap` readable bytes and `len <= cap`.
#[inline]
unsafe fn sorted_find(keys: *const u8, len: usize, cap: usize, byte: u8) -> Option<usize> {
    // SAFETY: `keys` points to `cap` readable bytes and `len <= cap` (the contract), so
    // the 16-byte array (when cap is N16) and the `len`-byte slice lie inside them.
    unsafe {
        if cap == N16 {
            find16(&*keys.cast::<[u8; N16]>(), len, byte)
        } else {
            std::slice::from_raw_parts(keys, len).iter().position(|&k| k == byte)
        }
    }
}

/// A raw handle to a node: `Copy` and without a lifetime, so every method that touches
/// the node is an `unsafe fn` with the module's *read* or *write* contract (see the
/// module's safety model).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct NodePtr(NonNull<Header>);

impl NodePtr {
    /// The header, borrowed for `'a`.
    ///
    /// # Safety
    ///
    /// The read contract, for all of `'a`.
    #[inline]
    unsafe fn h<'a>(self) -> &'a Header {
        // SAFETY: a live node (the contract), unchanged while the borrow is used; every
        // node kind starts with its header.
        unsafe { self.0.as_ref() }
    }

    /// The header, borrowed exclusively for `'a`.
    ///
    /// # Safety
    ///
    /// The write contract, for all of `'a`.
    #[inline]
    unsafe fn h_mut<'a>(self) -> &'a mut Header {
        // SAFETY: a live node to which the caller has exclusive access (the contract).
        unsafe { &mut *self.0.as_ptr() }
    }

    /// The node's kind.
    ///
    /// # Safety
    ///
    /// The read contract.
    pub(crate) unsafe fn node_type(self) -> NodeType {
        // SAFETY: the caller keeps the read contract (a live node, unchanged meanwhile),
        // which is what `h` asks for; only the kind byte is copied out.
        NodeType::from_u8(unsafe { self.h() }.kind)
    }

    /// The compressed path, borrowed for `'a`, a lifetime the caller picks.
    ///
    /// # Safety
    ///
    /// The read contract for all of `'a`: in particular the node's prefix is not replaced
    /// ([`NodePtr::set_prefix`]) and the node is not freed while the slice is in use.
    #[inline]
    pub(crate) unsafe fn prefix<'a>(self) -> &'a [u8] {
        // SAFETY: the read contract, for `'a`.
        let h = unsafe { self.h() };
        let len = h.plen as usize;
        if len <= INLINE_PREFIX {
            // SAFETY: short prefixes are stored inline (`Header::prefix`).
            unsafe { &h.prefix.inline[..len] }
        } else {
            // SAFETY: long prefixes are a heap slice of `plen` bytes owned by the node,
            // released only when the prefix is replaced or the node freed (not during `'a`).
            unsafe { std::slice::from_raw_parts(h.prefix.heap, len) }
        }
    }

    /// Replace the compressed path by the concatenation of `parts`.
    ///
    /// # Safety
    ///
    /// The write contract. `parts` may borrow the node's current prefix (they are copied
    /// before it is released), but such borrows must not be used after this call.
    pub(crate) unsafe fn set_prefix(self, parts: &[&[u8]]) {
        let (data, len) = make_prefix(parts);
        // SAFETY: exclusive access (the contract); the old representation came from
        // `make_prefix` and is released once, after the new one was built from `parts`,
        // and nothing reads it again.
        unsafe {
            let h = self.h_mut();
            release_prefix(h.prefix, h.plen);
            h.prefix = data;
            h.plen = len;
        }
    }

    /// The leaf of the key that ends at this node.
    ///
    /// # Safety
    ///
    /// The read contract.
    #[inline]
    pub(crate) unsafe fn term(self) -> Option<u64> {
        // SAFETY: the caller keeps the read contract (a live node, unchanged meanwhile),
        // which is what `h` asks for; only the term word is copied out.
        let t = unsafe { self.h() }.term;
        (t != 0).then_some(t >> 1)
    }

    /// Set or clear the leaf of the key that ends at this node.
    ///
    /// # Safety
    ///
    /// The write contract.
    pub(crate) unsafe fn set_term(self, leaf: Option<u64>) {
        // SAFETY: the caller keeps the write contract (a live node it alone accesses),
        // which is what `h_mut` asks for; the borrow ends with this store.
        unsafe { self.h_mut() }.term = leaf.map_or(0, |l| (l << 1) | 1);
    }

    /// Number of children (not counting `term`).
    ///
    /// # Safety
    ///
    /// The read contract.
    #[inline]
    pub(crate) unsafe fn count(self) -> usize {
        // SAFETY: the caller keeps the read contract (a live node, unchanged meanwhile),
        // which is what `h` asks for; only the child count is copied out.
        unsafe { self.h() }.n as usize
    }

    /// Address of the child slot under `byte`, if that child exists.
    ///
    /// # Safety
    ///
    /// The read contract; the address is valid as long as the node is live and not
    /// rebuilt, and may be written through only under the write contract.
    #[inline]
    unsafe fn child_ptr(self, byte: u8) -> Option<*mut Slot> {
        let raw = self.0.as_ptr();
        // SAFETY: a live node (the contract) whose header's kind names the allocation's
        // real type; only addresses are computed, through raw pointers.
        unsafe {
            if let Some((keys, children, cap)) = sorted_arrays(raw) {
                return sorted_find(keys, (*raw).n as usize, cap, byte).map(|i| children.add(i));
            }
            match NodeType::from_u8((*raw).kind) {
                NodeType::N4 | NodeType::N16 => unreachable!("sorted kinds handled above"),
                NodeType::N48 => {
                    let n = raw.cast::<Node48>();
                    match (*n).index[byte as usize] {
                        0 => None,
                        i => Some((&raw mut (*n).children as *mut Slot).add(i as usize - 1)),
                    }
                }
                NodeType::N256 => {
                    let c = (&raw mut (*raw.cast::<Node256>()).children as *mut Slot).add(byte as usize);
                    (!(*c).is_empty()).then_some(c)
                }
            }
        }
    }

    /// The child under `byte` (empty if none).
    ///
    /// # Safety
    ///
    /// The read contract.
    #[inline]
    pub(crate) unsafe fn find(self, byte: u8) -> Slot {
        // SAFETY: the read contract; the slot word is copied out.
        unsafe { self.child_ptr(byte).map_or(Slot::EMPTY, |p| *p) }
    }

    /// The child slot under `byte`, for replacing it in place; None if there is no child.
    ///
    /// # Safety
    ///
    /// The write contract for all of `'a`, a lifetime the caller picks: the node is not
    /// rebuilt, freed or otherwise accessed while the returned borrow is in use.
    #[inline]
    pub(crate) unsafe fn find_mut<'a>(self, byte: u8) -> Option<&'a mut Slot> {
        // SAFETY: a live slot of the node, borrowed exclusively for `'a` (the contract).
        unsafe { self.child_ptr(byte).map(|p| &mut *p) }
    }

    /// Visit children in ascending byte order until `f` returns false.
    ///
    /// # Safety
    ///
    /// The read contract (`f` must not change this node).
    pub(crate) unsafe fn for_each(self, mut f: impl FnMut(u8, Slot) -> bool) -> bool {
        let raw = self.0.as_ptr();
        // SAFETY: as `child_ptr`; children are copied out, the node is not mutated.
        unsafe {
            if let Some((keys, children, _)) = sorted_arrays(raw) {
                let len = (*raw).n as usize;
                return (0..len).all(|i| f(*keys.add(i), *children.add(i)));
            }
            match NodeType::from_u8((*raw).kind) {
                NodeType::N4 | NodeType::N16 => unreachable!("sorted kinds handled above"),
                NodeType::N48 => {
                    let n = &*raw.cast::<Node48>();
                    (0..256).all(|b| match n.index[b] {
                        0 => true,
                        i => f(b as u8, n.children[i as usize - 1]),
                    })
                }
                NodeType::N256 => {
                    let n = &*raw.cast::<Node256>();
                    (0..256).all(|b| n.children[b].is_empty() || f(b as u8, n.children[b]))
                }
            }
        }
    }

    /// Visit children in descending byte order until `f` returns false.
    ///
    /// # Safety
    ///
    /// The read contract (`f` must not change this node).
    pub(crate) unsafe fn for_each_rev(self, mut f: impl FnMut(u8, Slot) -> bool) -> bool {
        let raw = self.0.as_ptr();
        // SAFETY: a live node, unchanged meanwhile (the read contract), whose header's kind
        // names its real type; children are copied out and the node is not mutated.
        unsafe {
            if let Some((keys, children, _)) = sorted_arrays(raw) {
                let len = (*raw).n as usize;
                return (0..len).rev().all(|i| f(*keys.add(i), *children.add(i)));
            }
            match NodeType::from_u8((*raw).kind) {
                NodeType::N4 | NodeType::N16 => unreachable!("sorted kinds handled above"),
                NodeType::N48 => {
                    let n = &*raw.cast::<Node48>();
                    (0..256).rev().all(|b| match n.index[b] {
                        0 => true,
                        i => f(b as u8, n.children[i as usize - 1]),
                    })
                }
                NodeType::N256 => {
                    let n = &*raw.cast::<Node256>();
                    (0..256).rev().all(|b| n.children[b].is_empty() || f(b as u8, n.children[b]))
                }
            }
        }
    }

    /// The first child (used when collapsing a node with one child).
    ///
    /// # Safety
    ///
    /// The read contract.
    pub(crate) unsafe fn first_child(self) -> Option<(u8, Slot)> {
        let mut first = None;
        // SAFETY: the read contract; the closure does not touch the node.
        unsafe {
            self.for_each(|b, c| {
                first = Some((b, c));
                false
            })
        };
        first
    }

    /// Heap bytes of this node alone (for memory accounting).
    ///
    /// # Safety
    ///
    /// The read contract.
    pub(crate) unsafe fn dram_bytes(self) -> usize {
        // SAFETY: the caller keeps the read contract, which `h` and `node_type` ask for;
        // only the prefix length and the kind are copied out.
        let (plen, t) = unsafe { (self.h().plen as usize, self.node_type()) };
        t.slot_bytes() + if plen > INLINE_PREFIX { plen } else { 0 }
    }

    /// Put `child` under `byte`, which has none, in a node with room.
    ///
    /// # Safety
    ///
    /// The write contract; the node has fewer children than its kind's capacity.
    unsafe fn insert_child(self, byte: u8, child: Slot) {
        let raw = self.0.as_ptr();
        // SAFETY: as `child_ptr`, with exclusive access; the arrays have room (contract).
        unsafe {
            if let Some((keys, children, cap)) = sorted_arrays(raw) {
                let (keys, children) =
                    (std::slice::from_raw_parts_mut(keys, cap), std::slice::from_raw_parts_mut(children, cap));
                let len = (*raw).n as usize;
                let at = keys[..len].iter().position(|&k| k > byte).unwrap_or(len);
                shift_up(keys, at, len);
                shift_up(children, at, len);
                keys[at] = byte;
                children[at] = child;
                (*raw).n += 1;
                return;
            }
            match NodeType::from_u8((*raw).kind) {
                NodeType::N4 | NodeType::N16 => unreachable!("sorted kinds handled above"),
                NodeType::N48 => {
                    let n = &mut *raw.cast::<Node48>();
                    let at = n.children.iter().position(|c| c.is_empty()).expect("node48 has room");
                    n.children[at] = child;
                    n.index[byte as usize] = at as u8 + 1;
                }
                NodeType::N256 => {
                    let n = &mut *raw.cast::<Node256>();
                    n.children[byte as usize] = child;
                }
            }
            (*raw).n += 1;
        }
    }

    /// Take the entry of `byte`, which exists, out of the node (no resizing); returns its
    /// slot word (EMPTY if the caller emptied the slot in place).
    ///
    /// # Safety
    ///
    /// The write contract.
    unsafe fn take_child(self, byte: u8) -> Slot {
        let raw = self.0.as_ptr();
        // SAFETY: a live node the caller alone accesses (the write contract), whose kind
        // names its real type, so the casts and the arrays `sorted_arrays` reports (of
        // `cap` entries, n <= cap) are in bounds; every index below is < n, or a byte.
        unsafe {
            let out = match NodeType::from_u8((*raw).kind) {
                NodeType::N4 | NodeType::N16 => {
                    let (keys, children, cap) = sorted_arrays(raw).expect("a sorted kind");
                    let len = (*raw).n as usize;
                    let Some(at) = sorted_find(keys, len, cap, byte) else { return Slot::EMPTY };
                    let (keys, children) =
                        (std::slice::from_raw_parts_mut(keys, cap), std::slice::from_raw_parts_mut(children, cap));
                    let c = children[at];
                    shift_down(keys, at, len);
                    shift_down(children, at, len);
                    children[len - 1] = Slot::EMPTY;
                    c
                }
                NodeType::N48 => {
                    let n = &mut *raw.cast::<Node48>();
                    let i = n.index[byte as usize];
                    if i == 0 {
                        return Slot::EMPTY;
                    }
                    n.index[byte as usize] = 0;
                    std::mem::take(&mut n.children[i as usize - 1])
                }
                NodeType::N256 => {
                    // No key array: the entry is the slot itself, which the caller may
                    // have emptied already (see `remove`).
                    let n = &mut *raw.cast::<Node256>();
                    std::mem::take(&mut n.children[byte as usize])
                }
            };
            self.h_mut().n -= 1;
            out
        }
    }

    /// A copy of this node as kind `to` (children, term and prefix moved over); the old
    /// node is freed.
    ///
    /// # Safety
    ///
    /// The write contract; the node came from `arena` and has at most `to`'s capacity of
    /// children. Afterwards `self` is dangling: the caller stores the returned node in the
    /// old one's slot and never uses `self` (or a reference from it) again.
    unsafe fn rebuild(self, arena: &NodeArena, to: NodeType) -> NodePtr {
        // SAFETY: the contract. The header's prefix representation moves to the new node
        // (which owns it from then on), so the old node's memory is released without it.
        unsafe {
            let old = self.h();
            let h = Header { term: old.term, prefix: old.prefix, plen: old.plen, n: 0, kind: 0 };
            let new = alloc_node(arena, to, h);
            self.for_each(|b, c| {
                new.insert_child(b, c);
                true
            });
            dealloc_node(arena, self);
            new
        }
    }
}

/// Add `child` under `byte` (which has none) to the node in `slot`, growing it into the
/// next kind when full: `*slot` then names the new node, and handles to the old one dangle.
///
/// # Safety
///
/// `*slot` names a node allocated from `arena`, under the write contract; `child`, if it
/// names a node, is owned by no other slot from now on.
pub(crate) unsafe fn add(arena: &NodeArena, slot: &mut Slot, byte: u8, child: Slot) {
    let Some(Ref::Node(mut p)) = slot.get() else { unreachable!("add to a node slot") };
    // SAFETY: the write contract for `p` (and for its replacement, which only `*slot`
    // names); a full node is rebuilt from `arena`, its own arena, before the insertion.
    unsafe {
        let t = p.node_type();
        if p.count() == t.capacity() {
            let to = match t {
                NodeType::N4 => NodeType::N16,
                NodeType::N16 => NodeType::N48,
                NodeType::N48 => NodeType::N256,
                NodeType::N256 => unreachable!("a Node256 has room for every byte"),
            };
            p = p.rebuild(arena, to);
            *slot = Slot::node(p, to);
        }
        p.insert_child(byte, child);
    }
}

/// Remove the entry of `byte` from the node in `slot` and return its slot word, shrinking
/// the node when it gets sparse: `*slot` then names the new node, and handles to the old
/// one dangle. The entry must exist, but its slot may already have been emptied in place
/// (a removal below it): the entry is unlinked all the same.
///
/// # Safety
///
/// `*slot` names a node allocated from `arena`, under the write contract.
pub(crate) unsafe fn remove(arena: &NodeArena, slot: &mut Slot, byte: u8) -> Slot {
    let Some(Ref::Node(p)) = slot.get() else { unreachable!("remove from a node slot") };
    // SAFETY: the write contract for `p`; a shrunk node is rebuilt from `arena` (fewer
    // children than the smaller kind holds) and `p` is not used afterwards.
    unsafe {
        let out = p.take_child(byte);
        let n = p.count();
        let to = match p.node_type() {
            NodeType::N16 if n < 3 => NodeType::N4,
            NodeType::N48 if n < 12 => NodeType::N16,
            NodeType::N256 if n < 37 => NodeType::N48,
            _ => return out,
        };
        *slot = Slot::node(p.rebuild(arena, to), to);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    // The tests own every node they make: the slots below are the only ones naming them,
    // only this thread touches them, and each tree is freed once, at the end. That is the
    // write contract of every node function for the whole test.

    fn p_find(s: &Slot, b: u8) -> Slot {
        let Some(Ref::Node(p)) = s.get() else { panic!("a node") };
        // SAFETY: a live node of the test's tree (see above).
        unsafe { p.find(b) }
    }

    #[test]
    fn layout_is_compact() {
        assert_eq!(std::mem::size_of::<Header>(), 24);
        assert_eq!(NodeType::N4.bytes(), 64);
        assert_eq!(NodeType::N16.bytes(), 168);
        assert_eq!(NodeType::N4.slot_bytes(), 64);
        assert_eq!(NodeType::N16.slot_bytes(), 192);
        assert_eq!(std::mem::size_of::<Slot>(), 8);
        // The lines `Slot::prefetch_lookup` fetches.
        assert_eq!((offset_of!(Node16, children), size_of::<Node16>()), (40, 168), "Node16 children: lines 0-2");
        assert_eq!(offset_of!(Node48, index), 24);
        assert_eq!((offset_of!(Node48, children), size_of::<Node48>()), (280, 664), "Node48 children: lines 4-10");
        assert_eq!(offset_of!(Node256, children), 24);
    }

    #[test]
    fn prefixes_round_trip_inline_and_on_the_heap() {
        let arena = NodeArena::new();
        for n in [0usize, 1, 8, 9, 40] {
            let v: Vec<u8> = (0..n as u8).collect();
            let (s, p) = new4(&arena, &v);
            // SAFETY: the test owns the node (see above); the prefix borrows passed to
            // `set_prefix` are not used after it; `s` is freed once and not used again.
            unsafe {
                assert_eq!(p.prefix(), &v[..]);
                // Joined from parts that borrow the node's own prefix.
                p.set_prefix(&[p.prefix(), &[9], p.prefix()]);
                let mut w = v.clone();
                w.push(9);
                w.extend_from_slice(&v);
                assert_eq!(p.prefix(), &w[..]);
                free_tree(&arena, s);
            }
        }
    }

    #[test]
    fn nodes_grow_and_shrink_keeping_children_sorted() {
        let arena = NodeArena::new();
        let (mut s, _) = new4(&arena, b"ab");
        let order: Vec<u8> = (0..=255u8).map(|b| b.wrapping_mul(167)).collect();
        // SAFETY: the test owns the tree (see above); every handle is re-read from `s`
        // after a call that may rebuild the node; `s` is freed once, at the end.
        unsafe {
            for &b in &order {
                add(&arena, &mut s, b, Slot::leaf(b as u64));
            }
            let Some(Ref::Node(p)) = s.get() else { panic!() };
            assert_eq!(p.node_type(), NodeType::N256);
            assert_eq!(p.prefix(), b"ab");
            for &b in order.iter().take(254) {
                assert_eq!(remove(&arena, &mut s, b), Slot::leaf(b as u64));
                assert!(p_find(&s, b).is_empty());
            }
            let Some(Ref::Node(p)) = s.get() else { panic!() };
            assert_eq!(p.node_type(), NodeType::N4);
            assert_eq!(p.prefix(), b"ab");
            let mut left: Vec<u8> = order[254..].to_vec();
            left.sort();
            let mut seen = Vec::new();
            p.for_each(|b, c| {
                assert_eq!(c, Slot::leaf(b as u64));
                seen.push(b);
                true
            });
            assert_eq!(seen, left);
            let mut rev = Vec::new();
            p.for_each_rev(|b, _| {
                rev.push(b);
                true
            });
            rev.reverse();
            assert_eq!(rev, left);
            free_tree(&arena, s);
        }
    }
}
