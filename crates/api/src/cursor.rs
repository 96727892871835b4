//! [`Cursor`]: a pull iterator over a key range, both ways, holding no lock between steps.
//!
//! Each refill asks the engine for the next chunk of records after the last key yielded
//! (a fresh descent), copies them into one buffer, and releases every engine lock before
//! the first of them is yielded. So a caller may write to the store while iterating, step
//! the cursor from C or Python at its own pace, or keep it across requests in a server.
//! What it sees is what B-link tree scans see: every key that is in the range for the
//! cursor's whole life and not written meanwhile is yielded exactly once, in order; a key
//! written or deleted ahead of the cursor while it runs may or may not be seen (with its
//! old or new value); no key is yielded twice, and keys come out strictly ordered. Chunks
//! start small (a cursor used for one record costs one short scan) and double up to 1024.

use crate::guard::Guarded;
use pmkv_core::{Direction, KeyRange, Result};
use std::ops::Bound;

const FIRST_CHUNK: usize = 16;
const MAX_CHUNK: usize = 1024;

/// Records fetched for one side: keys and values packed in one buffer.
#[derive(Default)]
struct Chunk {
    data: Vec<u8>,
    /// (key start, value start, value end) into `data`.
    ents: Vec<(usize, usize, usize)>,
    /// Next entry to yield.
    pos: usize,
    /// Size of the next refill.
    want: usize,
    /// The engine has nothing more on this side (within the range when last refilled).
    end: bool,
}

impl Chunk {
    fn key(&self, i: usize) -> &[u8] {
        let (k, v, _) = self.ents[i];
        &self.data[k..v]
    }
    fn entry(&self, i: usize) -> (&[u8], &[u8]) {
        let (k, v, e) = self.ents[i];
        (&self.data[k..v], &self.data[v..e])
    }
    /// The last key yielded from this side, if any since the last refill.
    fn last_yielded(&self) -> Option<&[u8]> {
        self.pos.checked_sub(1).map(|i| self.key(i))
    }
}

/// A cursor over a key range; see the module docs for what it sees. Created by
/// [`Store::range`](crate::Store::range). As an iterator it yields owned pairs; [`next_entry`](Cursor::next_entry)
/// and [`next_back_entry`](Cursor::next_back_entry) lend them without a copy.
pub struct Cursor<'s> {
    store: &'s Guarded,
    /// The part of the range not yet yielded from either side, as of the last refills.
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    front: Chunk,
    back: Chunk,
    /// An error was returned: the cursor is finished.
    failed: bool,
}

impl<'s> Cursor<'s> {
    pub(crate) fn new(store: &'s Guarded, range: KeyRange) -> Cursor<'s> {
        let empty = range.is_empty();
        Cursor {
            store,
            lo: range.start,
            hi: range.end,
            front: Chunk { want: FIRST_CHUNK, end: empty, ..Chunk::default() },
            back: Chunk { want: FIRST_CHUNK, end: empty, ..Chunk::default() },
            failed: empty,
        }
    }

    /// The next record in ascending order, lent until the next call.
    pub fn next_entry(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        self.step(Direction::Forward)
    }

    /// The next record in descending order (from the high end), lent until the next call.
    pub fn next_back_entry(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        self.step(Direction::Reverse)
    }

    fn step(&mut self, dir: Direction) -> Option<Result<(&[u8], &[u8])>> {
        if self.failed {
            return None;
        }
        loop {
            let (mine, other) = match dir {
                Direction::Forward => (&self.front, &self.back),
                Direction::Reverse => (&self.back, &self.front),
            };
            if mine.pos < mine.ents.len() {
                let k = mine.key(mine.pos);
                // Stop where the other side has already been.
                let met = match (dir, other.last_yielded()) {
                    (Direction::Forward, Some(b)) => k >= b,
                    (Direction::Reverse, Some(f)) => k <= f,
                    (_, None) => false,
                } || match dir {
                    Direction::Forward => !before(&self.hi, k),
                    Direction::Reverse => !after(&self.lo, k),
                };
                if met {
                    self.failed = true; // exhausted: both sides have met
                    return None;
                }
                let mine = match dir {
                    Direction::Forward => &mut self.front,
                    Direction::Reverse => &mut self.back,
                };
                mine.pos += 1;
                let i = mine.pos - 1;
                let mine = match dir {
                    Direction::Forward => &self.front,
                    Direction::Reverse => &self.back,
                };
                return Some(Ok(mine.entry(i)));
            }
            if mine.end {
                return None;
            }
            if let Err(e) = self.refill(dir) {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }

    /// Fetch the next chunk of one side, narrowing the range by what both sides yielded.
    fn refill(&mut self, dir: Direction) -> Result<()> {
        if let Some(k) = self.front.last_yielded() {
            self.lo = Bound::Excluded(k.to_vec());
        }
        if let Some(k) = self.back.last_yielded() {
            self.hi = Bound::Excluded(k.to_vec());
        }
        // The other side's yielded entries are now folded into the bounds: drop them.
        for c in [&mut self.front, &mut self.back] {
            c.data.drain(..c.ents.get(c.pos).map_or(c.data.len(), |e| e.0));
            let shift = c.ents.get(c.pos).map_or(0, |e| e.0);
            c.ents.drain(..c.pos);
            for e in &mut c.ents {
                e.0 -= shift;
                e.1 -= shift;
                e.2 -= shift;
            }
            c.pos = 0;
        }
        let range = KeyRange { start: self.lo.clone(), end: self.hi.clone() };
        let c = match dir {
            Direction::Forward => &mut self.front,
            Direction::Reverse => &mut self.back,
        };
        c.data.clear();
        c.ents.clear();
        let want = c.want;
        c.want = (c.want * 2).min(MAX_CHUNK);
        let (data, ents) = (&mut c.data, &mut c.ents);
        self.store.call("scan", |e| {
            e.scan(&range, dir, want, &mut |k, v| {
                let s = data.len();
                data.extend_from_slice(k);
                data.extend_from_slice(v);
                ents.push((s, s + k.len(), data.len()));
                true
            })
        })?;
        if c.ents.len() < want {
            c.end = true;
        }
        Ok(())
    }
}

fn after(lo: &Bound<Vec<u8>>, k: &[u8]) -> bool {
    match lo {
        Bound::Unbounded => true,
        Bound::Included(s) => k >= s.as_slice(),
        Bound::Excluded(s) => k > s.as_slice(),
    }
}

fn before(hi: &Bound<Vec<u8>>, k: &[u8]) -> bool {
    match hi {
        Bound::Unbounded => true,
        Bound::Included(e) => k <= e.as_slice(),
        Bound::Excluded(e) => k < e.as_slice(),
    }
}

impl Iterator for Cursor<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
    }
}

impl DoubleEndedIterator for Cursor<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.next_back_entry().map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
    }
}

impl std::iter::FusedIterator for Cursor<'_> {}
