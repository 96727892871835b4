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
//! Node memory is managed by hand (raw allocations named by tagged words), so this module
//! is the only place with `unsafe` in the ART. The invariant that makes [`NodePtr`]'s
//! safe-looking methods sound: a `NodePtr` is only obtained from a [`Slot`] of a tree the
//! caller borrows (`&Art` for the reading methods, `&mut Art` for the mutating ones), the
//! tree owns each node through exactly one slot, and a node is freed only after it was
//! unlinked from its slot ([`free_node`], [`free_tree`]).

use super::arena::NodeArena;
use std::ptr::NonNull;

/// Largest children count per node kind.
pub const N4: usize = 4;
pub const N16: usize = 16;
pub const N48: usize = 48;
const N256: usize = 256;

/// Prefix bytes kept inside the header; longer compressed paths live on the heap.
pub const INLINE_PREFIX: usize = 8;

/// A child word: null empty; low bit set: a leaf, `offset << 1 | 1` (an address without
/// provenance, never dereferenced); otherwise a node pointer (allocations are 8-aligned,
/// so the low bit is free). Kept as a pointer, not an integer, so that node pointers
/// keep their provenance (the ART's unit tests run under Miri with strict provenance).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(transparent)]
pub struct Slot(*mut Header);

// SAFETY: a slot owns the node it names (or none); all access to that node goes through
// the owning `Art`, whose `&`/`&mut` borrows (behind HART's per-ART lock) synchronize it.
unsafe impl Send for Slot {}
// SAFETY: as above: shared access only reads.
unsafe impl Sync for Slot {}

impl Default for Slot {
    fn default() -> Self {
        Slot::EMPTY
    }
}

/// What a non-empty slot holds.
pub enum Ref {
    Leaf(u64),
    Node(NodePtr),
}

impl Slot {
    pub const EMPTY: Slot = Slot(std::ptr::null_mut());

    #[inline]
    pub fn leaf(off: u64) -> Slot {
        debug_assert!(off < 1 << 63);
        Slot(std::ptr::without_provenance_mut(((off << 1) | 1) as usize))
    }

    #[inline]
    pub fn is_empty(self) -> bool {
        self.0.is_null()
    }

    #[inline]
    pub fn get(self) -> Option<Ref> {
        let a = self.0.addr();
        if a & 1 == 1 {
            Some(Ref::Leaf((a >> 1) as u64))
        } else {
            NonNull::new(self.0).map(|p| Ref::Node(NodePtr(p)))
        }
    }

    fn node(p: NodePtr) -> Slot {
        Slot(p.0.as_ptr())
    }
}

/// The part every node kind starts with.
#[repr(C)]
pub struct Header {
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
pub enum NodeType {
    N4,
    N16,
    N48,
    N256,
}

impl NodeType {
    pub const ALL: [NodeType; 4] = [NodeType::N4, NodeType::N16, NodeType::N48, NodeType::N256];

    pub fn name(self) -> &'static str {
        match self {
            NodeType::N4 => "art node4",
            NodeType::N16 => "art node16",
            NodeType::N48 => "art node48",
            NodeType::N256 => "art node256",
        }
    }

    /// Bytes of the arena slot of a node of this kind: its size rounded up to whole cache
    /// lines, so that slots are line-aligned.
    pub fn slot_bytes(self) -> usize {
        self.bytes().next_multiple_of(64)
    }

    /// Bytes of a node of this kind (without a heap prefix).
    pub fn bytes(self) -> usize {
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

    fn from_u8(k: u8) -> NodeType {
        NodeType::ALL[k as usize]
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
/// SAFETY: `(data, len)` came from [`make_prefix`] and is released once.
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
fn dealloc_node(arena: &NodeArena, p: NodePtr) {
    arena.free(p.node_type(), p.0.cast());
}

/// A new Node4 with compressed path `prefix`, as a slot.
pub fn new4(arena: &NodeArena, prefix: &[u8]) -> (Slot, NodePtr) {
    let p = alloc_node(arena, NodeType::N4, header(prefix));
    (Slot::node(p), p)
}

/// Free one node that was unlinked from the tree (its children are not touched).
pub fn free_node(arena: &NodeArena, p: NodePtr) {
    let h = p.h();
    // SAFETY: the caller unlinked `p` (module invariant); its prefix is released once here.
    unsafe { release_prefix(h.prefix, h.plen) };
    dealloc_node(arena, p);
}

/// Free a whole subtree (leaves are PM offsets and are not touched).
pub fn free_tree(arena: &NodeArena, s: Slot) {
    if let Some(Ref::Node(p)) = s.get() {
        p.for_each(|_, c| {
            free_tree(arena, c);
            true
        });
        free_node(arena, p);
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
/// SAFETY: `raw` is a live node.
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
/// SAFETY: `keys` points to `cap` readable bytes and `len <= cap`.
#[inline]
unsafe fn sorted_find(keys: *const u8, len: usize, cap: usize, byte: u8) -> Option<usize> {
    // SAFETY: per the contract.
    unsafe {
        if cap == N16 {
            find16(&*keys.cast::<[u8; N16]>(), len, byte)
        } else {
            std::slice::from_raw_parts(keys, len).iter().position(|&k| k == byte)
        }
    }
}

/// A node of a tree the caller borrows (see the module's safety model).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct NodePtr(NonNull<Header>);

impl NodePtr {
    #[inline]
    fn h<'a>(self) -> &'a Header {
        // SAFETY: a live node (module invariant); only header bytes are borrowed.
        unsafe { self.0.as_ref() }
    }
    #[inline]
    fn h_mut<'a>(self) -> &'a mut Header {
        // SAFETY: a live node of a tree the caller borrows mutably (module invariant).
        unsafe { &mut *self.0.as_ptr() }
    }

    pub fn node_type(self) -> NodeType {
        NodeType::from_u8(self.h().kind)
    }

    /// The compressed path.
    #[inline]
    pub fn prefix<'a>(self) -> &'a [u8] {
        let h = self.h();
        let len = h.plen as usize;
        if len <= INLINE_PREFIX {
            // SAFETY: short prefixes are stored inline (`Header::prefix`).
            unsafe { &h.prefix.inline[..len] }
        } else {
            // SAFETY: long prefixes are a heap slice of `plen` bytes owned by the node.
            unsafe { std::slice::from_raw_parts(h.prefix.heap, len) }
        }
    }

    /// Replace the compressed path by the concatenation of `parts` (which may borrow the
    /// current path).
    pub fn set_prefix(self, parts: &[&[u8]]) {
        let (data, len) = make_prefix(parts);
        let h = self.h_mut();
        // SAFETY: the old representation is released once, after the new one was built.
        unsafe { release_prefix(h.prefix, h.plen) };
        h.prefix = data;
        h.plen = len;
    }

    #[inline]
    pub fn term(self) -> Option<u64> {
        let t = self.h().term;
        (t != 0).then_some(t >> 1)
    }

    pub fn set_term(self, leaf: Option<u64>) {
        self.h_mut().term = leaf.map_or(0, |l| (l << 1) | 1);
    }

    /// Number of children (not counting `term`).
    #[inline]
    pub fn count(self) -> usize {
        self.h().n as usize
    }

    /// Address of the child slot under `byte`, if that child exists.
    #[inline]
    fn child_ptr(self, byte: u8) -> Option<*mut Slot> {
        let raw = self.0.as_ptr();
        // SAFETY: the header's kind names the allocation's real type (module invariant).
        unsafe {
            if let Some((keys, children, cap)) = sorted_arrays(raw) {
                return sorted_find(keys, (*raw).n as usize, cap, byte).map(|i| children.add(i));
            }
            match NodeType::from_u8((*raw).kind) {
                NodeType::N4 | NodeType::N16 => unreachable!("sorted kinds handled above"),
                NodeType::N48 => {
                    let n = &mut *raw.cast::<Node48>();
                    match n.index[byte as usize] {
                        0 => None,
                        i => Some(&mut n.children[i as usize - 1] as *mut Slot),
                    }
                }
                NodeType::N256 => {
                    let n = &mut *raw.cast::<Node256>();
                    let c = &mut n.children[byte as usize];
                    (!c.is_empty()).then_some(c as *mut Slot)
                }
            }
        }
    }

    /// The child under `byte` (empty if none).
    #[inline]
    pub fn find(self, byte: u8) -> Slot {
        // SAFETY: a slot of a live node, read under the caller's borrow of the tree.
        self.child_ptr(byte).map_or(Slot::EMPTY, |p| unsafe { *p })
    }

    /// The child slot under `byte`, for replacing it in place (a mutable borrow of the
    /// tree). None if there is no child.
    #[inline]
    pub fn find_mut<'a>(self, byte: u8) -> Option<&'a mut Slot> {
        // SAFETY: as `find`, with the caller's exclusive borrow.
        self.child_ptr(byte).map(|p| unsafe { &mut *p })
    }

    /// Visit children in ascending byte order until `f` returns false.
    pub fn for_each(self, mut f: impl FnMut(u8, Slot) -> bool) -> bool {
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
    pub fn for_each_rev(self, mut f: impl FnMut(u8, Slot) -> bool) -> bool {
        let raw = self.0.as_ptr();
        // SAFETY: as `for_each`.
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
    pub fn first_child(self) -> Option<(u8, Slot)> {
        let mut first = None;
        self.for_each(|b, c| {
            first = Some((b, c));
            false
        });
        first
    }

    /// Heap bytes of this node alone (for memory accounting).
    pub fn dram_bytes(self) -> usize {
        let plen = self.h().plen as usize;
        self.node_type().slot_bytes() + if plen > INLINE_PREFIX { plen } else { 0 }
    }

    /// Put `child` under `byte`, which has none, in a node with room.
    fn insert_child(self, byte: u8, child: Slot) {
        let raw = self.0.as_ptr();
        // SAFETY: as `child_ptr`, under the caller's exclusive borrow.
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
    fn take_child(self, byte: u8) -> Slot {
        let raw = self.0.as_ptr();
        // SAFETY: as `insert_child`.
        let out = unsafe {
            match NodeType::from_u8((*raw).kind) {
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
            }
        };
        self.h_mut().n -= 1;
        out
    }

    /// A copy of this node as kind `to` (children, term and prefix moved over); the old
    /// node is freed.
    fn rebuild(self, arena: &NodeArena, to: NodeType) -> NodePtr {
        let old = self.h();
        let h = Header { term: old.term, prefix: old.prefix, plen: old.plen, n: 0, kind: 0 };
        let new = alloc_node(arena, to, h);
        self.for_each(|b, c| {
            new.insert_child(b, c);
            true
        });
        // `self` is replaced by `new` in its slot by the caller; the prefix was moved to
        // `new`, so only the memory is released.
        dealloc_node(arena, self);
        new
    }
}

/// Add `child` under `byte` (which has none) to the node in `slot`, growing it into the
/// next kind when full (`*slot` then names the new node).
pub fn add(arena: &NodeArena, slot: &mut Slot, byte: u8, child: Slot) {
    let Some(Ref::Node(mut p)) = slot.get() else { unreachable!("add to a node slot") };
    let t = p.node_type();
    if p.count() == t.capacity() {
        let to = match t {
            NodeType::N4 => NodeType::N16,
            NodeType::N16 => NodeType::N48,
            NodeType::N48 => NodeType::N256,
            NodeType::N256 => unreachable!("a Node256 has room for every byte"),
        };
        p = p.rebuild(arena, to);
        *slot = Slot::node(p);
    }
    p.insert_child(byte, child);
}

/// Remove the entry of `byte` from the node in `slot` and return its slot word, shrinking
/// the node when it gets sparse (`*slot` then names the new node). The entry must exist,
/// but its slot may already have been emptied in place (a removal below it): the entry
/// is unlinked all the same.
pub fn remove(arena: &NodeArena, slot: &mut Slot, byte: u8) -> Slot {
    let Some(Ref::Node(p)) = slot.get() else { unreachable!("remove from a node slot") };
    let out = p.take_child(byte);
    let n = p.count();
    let to = match p.node_type() {
        NodeType::N16 if n < 3 => NodeType::N4,
        NodeType::N48 if n < 12 => NodeType::N16,
        NodeType::N256 if n < 37 => NodeType::N48,
        _ => return out,
    };
    *slot = Slot::node(p.rebuild(arena, to));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p_find(s: &Slot, b: u8) -> Slot {
        let Some(Ref::Node(p)) = s.get() else { panic!("a node") };
        p.find(b)
    }

    #[test]
    fn layout_is_compact() {
        assert_eq!(std::mem::size_of::<Header>(), 24);
        assert_eq!(NodeType::N4.bytes(), 64);
        assert_eq!(NodeType::N16.bytes(), 168);
        assert_eq!(NodeType::N4.slot_bytes(), 64);
        assert_eq!(NodeType::N16.slot_bytes(), 192);
        assert_eq!(std::mem::size_of::<Slot>(), 8);
    }

    #[test]
    fn prefixes_round_trip_inline_and_on_the_heap() {
        let arena = NodeArena::new();
        for n in [0usize, 1, 8, 9, 40] {
            let v: Vec<u8> = (0..n as u8).collect();
            let (s, p) = new4(&arena, &v);
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

    #[test]
    fn nodes_grow_and_shrink_keeping_children_sorted() {
        let arena = NodeArena::new();
        let (mut s, _) = new4(&arena, b"ab");
        let order: Vec<u8> = (0..=255u8).map(|b| b.wrapping_mul(167)).collect();
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
