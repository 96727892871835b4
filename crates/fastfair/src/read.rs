//! What reading a node or an object yields: a node's live entries (tolerating the
//! duplicates a shift leaves, FAST) and a verified object. A module of its own because the
//! tree consumes these and the node code produces them: with the types in `node`, `node`
//! and `tree` imported each other.

use crate::layout::*;

/// A node as one consistent read: its header and its live entries, in order.
pub(crate) struct Snap {
    pub(crate) sibling: u64,
    pub(crate) leftmost: u64,
    pub(crate) level: u32,
    pub(crate) low_kw: u64,
    pub(crate) low_ptr: u64,
    /// Live entries: key words and pointers.
    pub(crate) kw: [u64; SLOTS],
    pub(crate) ptr: [u64; SLOTS],
    pub(crate) n: usize,
    /// Slots in use, duplicates included (the first null pointer's index).
    pub(crate) phys: usize,
    /// The lock word the read was validated against.
    pub(crate) version: u64,
}

/// The raw slots of a node, up to the first null pointer.
pub(crate) struct Raw {
    pub(crate) kw: [u64; SLOTS],
    pub(crate) ptr: [u64; SLOTS],
    pub(crate) n: usize,
}

/// Which slots of `raw` are live in a node of `level`. Inner nodes (child pointers, unique
/// in a node; they only shift right, nothing merges): a slot whose pointer repeats its
/// left neighbour's (slot -1's is `left`) is the stale one. Leaves (whose value words
/// repeat): [`leaf_stale`]. Every intermediate state of a shift reads
/// as the node before or after it this way (docs/design/fastfair.md, "FAST").
pub(crate) fn live(raw: &Raw, level: u32, left: u64) -> impl Iterator<Item = usize> + '_ {
    let mut prev: Option<(u64, u64)> = None;
    (0..raw.n).filter(move |&i| {
        if level == 0 {
            let e = (raw.kw[i], raw.ptr[i]);
            let stale = leaf_stale(prev, e);
            if !stale {
                prev = Some(e);
            }
            !stale
        } else {
            let prev = if i == 0 { left } else { raw.ptr[i - 1] };
            raw.ptr[i] != prev
        }
    })
}

/// Whether leaf slot `e` (key word, value word) is stale, given the last live entry
/// before it (`None` at the start): it is the [`HOLE`], or it repeats that entry.
///
/// A leaf's value words are not unique (inline values repeat), so FAST's test on the
/// pointer word alone cannot tell a shift's copy from a real entry. The word that is
/// unique depends on the entry: a record's value word (each record is its own object),
/// an inline entry's key word (the leaf invariant: an inline entry's key word is shared
/// with no other entry of its leaf; a key that would tie with one makes both records).
/// `e` repeats `p` when they share the unique word of either: the same record, or the
/// same key word with an inline entry on either side. Two distinct live neighbours never
/// do; a shift's half-copied slot always does (docs/design/fastfair.md, "FAST with
/// values inline").
pub(crate) fn leaf_stale(prev: Option<(u64, u64)>, e: (u64, u64)) -> bool {
    e.1 == HOLE || prev.is_some_and(|p| repeats(e, p))
}

fn repeats(e: (u64, u64), p: (u64, u64)) -> bool {
    (e.1 == p.1 && is_rec(e.1)) || (e.0 == p.0 && (e.1 == p.1 || !is_rec(e.1) || !is_rec(p.1)))
}

/// An object read whole and verified.
pub(crate) struct Obj {
    pub(crate) buf: Vec<u8>,
    pub(crate) klen: usize,
}

impl Obj {
    pub(crate) fn key(&self) -> &[u8] {
        &self.buf[OBJ_HEAD..OBJ_HEAD + self.klen]
    }
    pub(crate) fn value(&self) -> &[u8] {
        &self.buf[OBJ_HEAD + self.klen..]
    }
}
