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

/// Which slots of `raw` are live: with direction [`RIGHT`] (the last shift moved entries
/// right, an insert) a slot whose pointer repeats its left neighbour's (slot -1's is
/// `left`) is the stale one; with [`LEFT`] (a delete) one whose pointer repeats its right
/// neighbour's. Every intermediate state of either shift reads as the node before or
/// after it this way (docs/design/fastfair.md, "FAST").
pub(crate) fn live(raw: &Raw, dir: u64, left: u64) -> impl Iterator<Item = usize> + '_ {
    (0..raw.n).filter(move |&i| {
        if dir == LEFT {
            let next = if i + 1 < raw.n { raw.ptr[i + 1] } else { 0 };
            raw.ptr[i] != next
        } else {
            let prev = if i == 0 { left } else { raw.ptr[i - 1] };
            raw.ptr[i] != prev
        }
    })
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
