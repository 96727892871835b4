//! A linearizability checker for the histories of one key (Wing & Gong's search with
//! Lowe's memoization, as in Horn & Kroening, "Faster linearizability checking via
//! P-compositionality", 2015).
//!
//! **Why per key.** Linearizability is local (Herlihy & Wing 1990, Theorem 1): a history
//! over many objects is linearizable iff its restriction to each object is. A key of a
//! store is one object — a register that may be absent — as long as every operation names
//! one key, which `get`, `put` and `delete` do. So a history of a whole run is checked
//! key by key, each a search over far fewer operations.
//!
//! **The search.** Operations carry the times of their call and return, taken from one
//! sequentially consistent counter, so "`a` returned before `b` was called" is real-time
//! order. Some operation must take effect first: any one whose call precedes every
//! pending operation's return (anything later was called after some operation had
//! already returned, so cannot go before it). The search tries those candidates in call
//! order, applies the first whose result agrees with the register's state, and goes on;
//! at a dead end it takes the last choice back and tries the next candidate. A set of
//! operations already applied together with the state they leave is remembered, so that
//! no such configuration is explored twice (Lowe's cache): that keeps a history of a few
//! thousand operations with short overlaps to about linear time.

use std::collections::HashSet;

/// What one operation did to the register (the key): its argument or its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `put(v)`: the key now holds `v`.
    Put(u64),
    /// `get`: returned this value (`None`: absent).
    Get(Option<u64>),
    /// `delete`: returned whether the key was present.
    Delete(bool),
}

/// One completed operation: `call` and `ret` are ticks of one sequentially consistent
/// counter, taken right before the call and right after the return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub call: u64,
    pub ret: u64,
    pub op: Op,
}

/// The register's state after `op` if `op`'s result agrees with `state`.
fn apply(state: Option<u64>, op: Op) -> Option<Option<u64>> {
    match op {
        Op::Put(v) => Some(Some(v)),
        Op::Get(r) => (r == state).then_some(state),
        Op::Delete(was) => (was == state.is_some()).then_some(None),
    }
}

/// Whether `history` (the completed operations on one key, in any order) is linearizable
/// for a register that starts as `initial`. On failure, says how far the longest
/// linearizable prefix got and which operations were pending there.
///
/// Every operation called before the first one not yet applied (`lo`) has been applied,
/// so a step looks only at the window from `lo` on, and stops at the first call after the
/// earliest pending return (calls are sorted and a return never precedes its call): a
/// step costs the width of the overlap, not the length of the history. For the same
/// reason a configuration is `lo`, the applied operations past it and the state.
pub fn check_register(history: &[Event], initial: Option<u64>) -> Result<(), String> {
    let mut ops: Vec<Event> = history.to_vec();
    ops.sort_by_key(|e| e.call);
    let n = ops.len();
    let mut done = vec![false; n];
    let mut lo = 0; // every operation before `lo` is applied
    let mut state = initial;
    // (operation applied, state before it) for each step taken.
    let mut stack: Vec<(usize, Option<u64>)> = Vec::with_capacity(n);
    let mut seen: HashSet<(usize, Vec<u32>, Option<u64>)> = HashSet::new();
    let mut deepest = 0;
    // The candidate to try next at the current depth (after a backtrack, the one after
    // the choice taken back).
    let mut from = 0;
    'search: loop {
        while lo < n && done[lo] {
            lo += 1;
        }
        if lo == n {
            return Ok(());
        }
        // Candidates: pending operations called before the earliest pending return.
        let mut min_ret = u64::MAX;
        for j in lo..n {
            if ops[j].call >= min_ret {
                break;
            }
            if !done[j] {
                min_ret = min_ret.min(ops[j].ret);
            }
        }
        let mut i = from.max(lo);
        while i < n && ops[i].call < min_ret {
            if !done[i] {
                if let Some(next) = apply(state, ops[i].op) {
                    done[i] = true;
                    let mut at = lo;
                    while at < n && done[at] {
                        at += 1;
                    }
                    // Every applied operation was called before `min_ret` (it was a
                    // candidate, and the earliest pending return only grows as
                    // operations are applied), so they all lie in this prefix.
                    let past: Vec<u32> =
                        (at..n).take_while(|&j| ops[j].call < min_ret).filter(|&j| done[j]).map(|j| j as u32).collect();
                    if seen.insert((at, past, next)) {
                        stack.push((i, state));
                        state = next;
                        deepest = deepest.max(stack.len());
                        from = 0;
                        continue 'search;
                    }
                    done[i] = false;
                }
            }
            i += 1;
        }
        // Dead end: take the last step back and try the candidate after it.
        let Some((j, before)) = stack.pop() else {
            let pending: Vec<String> =
                ops.iter().take(deepest + 8).skip(deepest.saturating_sub(8)).map(|e| format!("{e:?}")).collect();
            return Err(format!(
                "not linearizable: at most {deepest} of {n} operations can be ordered; operations around there, by call: {}",
                pending.join(", ")
            ));
        };
        done[j] = false;
        lo = lo.min(j);
        state = before;
        from = j + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(call: u64, ret: u64, op: Op) -> Event {
        Event { call, ret, op }
    }

    #[test]
    fn sequential_histories_are_checked_exactly() {
        let h = [
            ev(0, 1, Op::Get(None)),
            ev(2, 3, Op::Put(1)),
            ev(4, 5, Op::Get(Some(1))),
            ev(6, 7, Op::Delete(true)),
            ev(8, 9, Op::Delete(false)),
            ev(10, 11, Op::Get(None)),
        ];
        assert_eq!(check_register(&h, None), Ok(()));
        assert!(check_register(&h, Some(9)).is_err(), "the first get saw no value");
        let mut stale = h;
        stale[2].op = Op::Get(None); // a read that misses a completed put
        assert!(check_register(&stale, None).is_err());
        let mut wrong = h;
        wrong[4].op = Op::Delete(true); // a second delete that claims it found the key
        assert!(check_register(&wrong, None).is_err());
    }

    #[test]
    fn overlapping_operations_may_take_effect_in_either_order() {
        // get overlaps put(2): it may return the old value or the new one.
        for seen in [1, 2] {
            let h = [ev(0, 1, Op::Put(1)), ev(2, 7, Op::Put(2)), ev(3, 5, Op::Get(Some(seen)))];
            assert_eq!(check_register(&h, None), Ok(()), "get saw {seen}");
        }
        // ... but once put(2) returned, never the old one.
        let h = [ev(0, 1, Op::Put(1)), ev(2, 3, Op::Put(2)), ev(4, 5, Op::Get(Some(1)))];
        assert!(check_register(&h, None).is_err());
    }

    #[test]
    fn the_search_backtracks_out_of_a_wrong_first_choice() {
        // put(2) and put(1) overlap; the reads force put(1) first and put(2) second,
        // but put(2), called first, is tried first and must be taken back.
        let h =
            [ev(0, 10, Op::Put(2)), ev(1, 10, Op::Put(1)), ev(2, 4, Op::Get(Some(1))), ev(11, 12, Op::Get(Some(2)))];
        assert_eq!(check_register(&h, None), Ok(()));
        // Two readers that saw the puts in opposite orders, after both returned: no order fits.
        let h = [ev(0, 3, Op::Put(1)), ev(0, 3, Op::Put(2)), ev(4, 5, Op::Get(Some(1))), ev(6, 7, Op::Get(Some(2)))];
        assert!(check_register(&h, None).is_err());
    }

    #[test]
    fn long_histories_with_short_overlaps_are_checked() {
        // 3,000 operations, each overlapping its neighbours (the cache keeps this about
        // linear: an exponential search would not finish).
        let mut h = Vec::new();
        for i in 0..3000u64 {
            let op = match i % 3 {
                0 => Op::Put(i),
                1 => Op::Get(Some(i - 1)),
                _ => Op::Delete(true),
            };
            h.push(ev(2 * i, 2 * i + 3, op));
        }
        assert_eq!(check_register(&h, None), Ok(()));
        h[1501].op = Op::Get(Some(7)); // a value put long before and overwritten since
        assert!(check_register(&h, None).is_err());
    }
}
