//! ART inner nodes (Leis et al., "The Adaptive Radix Tree", ICDE 2013; SPEC H2): Node4 and
//! Node16 keep sorted key bytes beside their children, Node48 a 256-entry index into 48
//! children, Node256 a direct array. Nodes grow when full and shrink with hysteresis
//! (N16→N4 below 3 children, N48→N16 below 12, N256→N48 below 37) so that a delete right
//! after an insert at a boundary does not reallocate twice.
//!
//! pmkv adds one field to the classic node: `term`, the leaf of a key that *ends* at this
//! node. Classic ART appends a terminator byte to make keys prefix-free, which forbids
//! that byte inside keys; SPEC H1 requires keys of any bytes, 0x00 included, so a key
//! that is a prefix of another is stored beside the node's children instead.

use super::Child;

/// Largest children count per node kind.
pub const N4: usize = 4;
pub const N16: usize = 16;
pub const N48: usize = 48;

pub struct Node {
    /// Compressed path (pessimistic path compression: the whole prefix is kept, so a
    /// lookup never reads a PM leaf to check it).
    pub prefix: Prefix,
    /// Leaf whose key ends exactly after `prefix`.
    pub term: Option<u64>,
    pub kind: Kind,
}

/// A compressed path: up to [`Prefix::INLINE`] bytes inside the node (no allocation, the
/// common case for word-like keys), longer ones on the heap. Splits and collapses of
/// paths happen on most inserts and deletes, so keeping them allocation-free matters.
#[derive(Clone)]
pub enum Prefix {
    Inline {
        len: u8,
        bytes: [u8; Prefix::INLINE],
    },
    /// Boxed twice so that the enum stays 16 bytes (a thin pointer): long paths are rare.
    Heap(Box<Vec<u8>>),
}

impl Prefix {
    pub const INLINE: usize = 14;

    /// Heap bytes owned by the prefix (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Prefix::Inline { .. } => 0,
            Prefix::Heap(b) => b.capacity() + std::mem::size_of::<Vec<u8>>(),
        }
    }

    /// `a ++ [b] ++ c`: the path of a node collapsed into its only child.
    pub fn joined(a: &[u8], b: u8, c: &[u8]) -> Prefix {
        let n = a.len() + 1 + c.len();
        if n <= Self::INLINE {
            let mut bytes = [0u8; Self::INLINE];
            bytes[..a.len()].copy_from_slice(a);
            bytes[a.len()] = b;
            bytes[a.len() + 1..n].copy_from_slice(c);
            Prefix::Inline { len: n as u8, bytes }
        } else {
            let mut v = Vec::with_capacity(n);
            v.extend_from_slice(a);
            v.push(b);
            v.extend_from_slice(c);
            Prefix::Heap(Box::new(v))
        }
    }
}

impl Default for Prefix {
    fn default() -> Self {
        Prefix::Inline { len: 0, bytes: [0; Prefix::INLINE] }
    }
}

impl From<&[u8]> for Prefix {
    fn from(s: &[u8]) -> Prefix {
        if s.len() <= Prefix::INLINE {
            let mut bytes = [0u8; Prefix::INLINE];
            bytes[..s.len()].copy_from_slice(s);
            Prefix::Inline { len: s.len() as u8, bytes }
        } else {
            Prefix::Heap(Box::new(s.to_vec()))
        }
    }
}

impl std::ops::Deref for Prefix {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Prefix::Inline { len, bytes } => &bytes[..*len as usize],
            Prefix::Heap(b) => b,
        }
    }
}

pub enum Kind {
    N4 { n: u8, keys: [u8; N4], children: [Option<Child>; N4] },
    N16(Box<Node16>),
    N48(Box<Node48>),
    N256(Box<Node256>),
}

pub struct Node16 {
    pub n: u8,
    pub keys: [u8; N16],
    pub children: [Option<Child>; N16],
}

pub struct Node48 {
    pub n: u8,
    /// 0 = empty, else index+1 into `children`.
    pub index: [u8; 256],
    pub children: [Option<Child>; N48],
}

pub struct Node256 {
    pub n: u16,
    pub children: [Option<Child>; 256],
}

/// Node type, for memory accounting (SPEC H9).
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
}

impl Node {
    pub fn new4(prefix: &[u8]) -> Node {
        Node { prefix: prefix.into(), term: None, kind: Kind::N4 { n: 0, keys: [0; N4], children: Default::default() } }
    }

    pub fn node_type(&self) -> NodeType {
        match self.kind {
            Kind::N4 { .. } => NodeType::N4,
            Kind::N16(_) => NodeType::N16,
            Kind::N48(_) => NodeType::N48,
            Kind::N256(_) => NodeType::N256,
        }
    }

    /// DRAM bytes of this node alone (struct, boxed body, prefix).
    pub fn dram_bytes(&self) -> usize {
        let body = match self.kind {
            Kind::N4 { .. } => 0,
            Kind::N16(_) => std::mem::size_of::<Node16>(),
            Kind::N48(_) => std::mem::size_of::<Node48>(),
            Kind::N256(_) => std::mem::size_of::<Node256>(),
        };
        std::mem::size_of::<Node>() + body + self.prefix.heap_bytes()
    }

    /// Number of children (not counting `term`).
    pub fn count(&self) -> usize {
        match &self.kind {
            Kind::N4 { n, .. } => *n as usize,
            Kind::N16(b) => b.n as usize,
            Kind::N48(b) => b.n as usize,
            Kind::N256(b) => b.n as usize,
        }
    }

    pub fn find(&self, byte: u8) -> Option<&Child> {
        match &self.kind {
            Kind::N4 { n, keys, children } => {
                keys[..*n as usize].iter().position(|&k| k == byte).and_then(|i| children[i].as_ref())
            }
            Kind::N16(b) => b.keys[..b.n as usize].iter().position(|&k| k == byte).and_then(|i| b.children[i].as_ref()),
            Kind::N48(b) => match b.index[byte as usize] {
                0 => None,
                i => b.children[i as usize - 1].as_ref(),
            },
            Kind::N256(b) => b.children[byte as usize].as_ref(),
        }
    }

    pub fn find_mut(&mut self, byte: u8) -> Option<&mut Option<Child>> {
        match &mut self.kind {
            Kind::N4 { n, keys, children } => {
                keys[..*n as usize].iter().position(|&k| k == byte).map(move |i| &mut children[i])
            }
            Kind::N16(b) => {
                let n = b.n as usize;
                b.keys[..n].iter().position(|&k| k == byte).map(move |i| &mut b.children[i])
            }
            Kind::N48(b) => match b.index[byte as usize] {
                0 => None,
                i => Some(&mut b.children[i as usize - 1]),
            },
            Kind::N256(b) => {
                if b.children[byte as usize].is_some() {
                    Some(&mut b.children[byte as usize])
                } else {
                    None
                }
            }
        }
    }

    /// Add a child under a byte that has none; grows the node when it is full.
    pub fn add(&mut self, byte: u8, child: Child) {
        if self.count() == self.capacity() {
            self.grow();
        }
        match &mut self.kind {
            Kind::N4 { n, keys, children } => {
                let len = *n as usize;
                let at = keys[..len].iter().position(|&k| k > byte).unwrap_or(len);
                for i in (at..len).rev() {
                    keys[i + 1] = keys[i];
                    children[i + 1] = children[i].take();
                }
                keys[at] = byte;
                children[at] = Some(child);
                *n += 1;
            }
            Kind::N16(b) => {
                let len = b.n as usize;
                let at = b.keys[..len].iter().position(|&k| k > byte).unwrap_or(len);
                for i in (at..len).rev() {
                    b.keys[i + 1] = b.keys[i];
                    b.children[i + 1] = b.children[i].take();
                }
                b.keys[at] = byte;
                b.children[at] = Some(child);
                b.n += 1;
            }
            Kind::N48(b) => {
                let slot = b.children.iter().position(|c| c.is_none()).expect("node48 has room");
                b.children[slot] = Some(child);
                b.index[byte as usize] = slot as u8 + 1;
                b.n += 1;
            }
            Kind::N256(b) => {
                b.children[byte as usize] = Some(child);
                b.n += 1;
            }
        }
    }

    /// Remove and return the child under `byte`; shrinks the node when it gets sparse.
    pub fn remove(&mut self, byte: u8) -> Option<Child> {
        let out = match &mut self.kind {
            Kind::N4 { n, keys, children } => {
                let len = *n as usize;
                let at = keys[..len].iter().position(|&k| k == byte)?;
                let c = children[at].take();
                for i in at..len - 1 {
                    keys[i] = keys[i + 1];
                    children[i] = children[i + 1].take();
                }
                *n -= 1;
                c
            }
            Kind::N16(b) => {
                let len = b.n as usize;
                let at = b.keys[..len].iter().position(|&k| k == byte)?;
                let c = b.children[at].take();
                for i in at..len - 1 {
                    b.keys[i] = b.keys[i + 1];
                    b.children[i] = b.children[i + 1].take();
                }
                b.n -= 1;
                c
            }
            Kind::N48(b) => {
                let i = b.index[byte as usize];
                if i == 0 {
                    return None;
                }
                b.index[byte as usize] = 0;
                b.n -= 1;
                b.children[i as usize - 1].take()
            }
            Kind::N256(b) => {
                let c = b.children[byte as usize].take()?;
                b.n -= 1;
                Some(c)
            }
        };
        self.shrink();
        out
    }

    fn capacity(&self) -> usize {
        match self.kind {
            Kind::N4 { .. } => N4,
            Kind::N16(_) => N16,
            Kind::N48(_) => N48,
            Kind::N256(_) => 256,
        }
    }

    /// Children in ascending byte order (drains the node).
    fn drain_sorted(&mut self) -> Vec<(u8, Child)> {
        let mut out = Vec::with_capacity(self.count());
        match &mut self.kind {
            Kind::N4 { n, keys, children } => {
                for i in 0..*n as usize {
                    out.push((keys[i], children[i].take().unwrap()));
                }
                *n = 0;
            }
            Kind::N16(b) => {
                for i in 0..b.n as usize {
                    out.push((b.keys[i], b.children[i].take().unwrap()));
                }
                b.n = 0;
            }
            Kind::N48(b) => {
                for byte in 0..256 {
                    let i = b.index[byte];
                    if i != 0 {
                        out.push((byte as u8, b.children[i as usize - 1].take().unwrap()));
                        b.index[byte] = 0;
                    }
                }
                b.n = 0;
            }
            Kind::N256(b) => {
                for (byte, c) in b.children.iter_mut().enumerate() {
                    if let Some(c) = c.take() {
                        out.push((byte as u8, c));
                    }
                }
                b.n = 0;
            }
        }
        out
    }

    fn rebuild(&mut self, to: NodeType) {
        let kids = self.drain_sorted();
        self.kind = match to {
            NodeType::N4 => Kind::N4 { n: 0, keys: [0; N4], children: Default::default() },
            NodeType::N16 => Kind::N16(Box::new(Node16 { n: 0, keys: [0; N16], children: Default::default() })),
            NodeType::N48 => {
                Kind::N48(Box::new(Node48 { n: 0, index: [0; 256], children: std::array::from_fn(|_| None) }))
            }
            NodeType::N256 => Kind::N256(Box::new(Node256 { n: 0, children: std::array::from_fn(|_| None) })),
        };
        for (b, c) in kids {
            self.add(b, c);
        }
    }

    fn grow(&mut self) {
        let to = match self.kind {
            Kind::N4 { .. } => NodeType::N16,
            Kind::N16(_) => NodeType::N48,
            Kind::N48(_) => NodeType::N256,
            Kind::N256(_) => return,
        };
        self.rebuild(to);
    }

    fn shrink(&mut self) {
        let n = self.count();
        let to = match self.kind {
            Kind::N16(_) if n < 3 => NodeType::N4,
            Kind::N48(_) if n < 12 => NodeType::N16,
            Kind::N256(_) if n < 37 => NodeType::N48,
            _ => return,
        };
        self.rebuild(to);
    }

    /// Visit children in ascending byte order.
    pub fn for_each<'a>(&'a self, mut f: impl FnMut(u8, &'a Child) -> bool) -> bool {
        match &self.kind {
            Kind::N4 { n, keys, children } => {
                for i in 0..*n as usize {
                    if !f(keys[i], children[i].as_ref().unwrap()) {
                        return false;
                    }
                }
            }
            Kind::N16(b) => {
                for i in 0..b.n as usize {
                    if !f(b.keys[i], b.children[i].as_ref().unwrap()) {
                        return false;
                    }
                }
            }
            Kind::N48(b) => {
                for byte in 0..256 {
                    let i = b.index[byte];
                    if i != 0 && !f(byte as u8, b.children[i as usize - 1].as_ref().unwrap()) {
                        return false;
                    }
                }
            }
            Kind::N256(b) => {
                for (byte, c) in b.children.iter().enumerate() {
                    if let Some(c) = c {
                        if !f(byte as u8, c) {
                            return false;
                        }
                    }
                }
            }
        }
        true
    }

    /// Visit children in descending byte order.
    pub fn for_each_rev<'a>(&'a self, mut f: impl FnMut(u8, &'a Child) -> bool) -> bool {
        let mut kids: Vec<(u8, &'a Child)> = Vec::with_capacity(self.count());
        self.for_each(|b, c| {
            kids.push((b, c));
            true
        });
        for (b, c) in kids.into_iter().rev() {
            if !f(b, c) {
                return false;
            }
        }
        true
    }

    /// Take the only child (used when collapsing a node with one child).
    pub fn take_only(&mut self) -> Option<(u8, Child)> {
        if self.count() != 1 {
            return None;
        }
        self.drain_sorted().pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_is_compact_and_round_trips() {
        assert_eq!(std::mem::size_of::<Prefix>(), 16);
        for n in [0usize, 1, 14, 15, 40] {
            let v: Vec<u8> = (0..n as u8).collect();
            assert_eq!(&*Prefix::from(&v[..]), &v[..]);
            let j = Prefix::joined(&v, 9, &v);
            let mut w = v.clone();
            w.push(9);
            w.extend_from_slice(&v);
            assert_eq!(&*j, &w[..]);
        }
    }
}
