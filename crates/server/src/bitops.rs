//! Redis's algorithms over a string's bytes: SETBIT/GETBIT, BITCOUNT, BITPOS, BITOP and
//! LCS. Pure functions, so each command in [`crate::data`] stays one read and at most one
//! write of its keys; their results and edge cases follow Redis 7.0 (`bitops.c`,
//! `t_string.c`), which the differential test against a real `redis-server` checks.

/// Bits are numbered from the most significant bit of byte 0, as in Redis.
pub fn get_bit(v: &[u8], bit: u64) -> bool {
    v.get((bit >> 3) as usize).is_some_and(|b| b & (0x80 >> (bit & 7)) != 0)
}

/// Set `bit` to `on`, growing `v` with zero bytes as needed; the bit's old value.
pub fn set_bit(v: &mut Vec<u8>, bit: u64, on: bool) -> bool {
    let byte = (bit >> 3) as usize;
    if v.len() <= byte {
        v.resize(byte + 1, 0);
    }
    let mask = 0x80 >> (bit & 7);
    let old = v[byte] & mask != 0;
    if on {
        v[byte] |= mask;
    } else {
        v[byte] &= !mask;
    }
    old
}

/// The inclusive range `[start, end]` of `len` units (negative: from the end), clamped
/// as Redis clamps GETRANGE's, BITCOUNT's and BITPOS's; `None` when empty. GETRANGE and
/// BITCOUNT (`neg_order`) also answer empty when both ends count from the end and cross,
/// before clamping; BITPOS does not.
pub fn clamp(start: i64, end: i64, len: i64, neg_order: bool) -> Option<(u64, u64)> {
    if neg_order && start < 0 && end < 0 && start > end {
        return None;
    }
    let norm = |i: i64| if i < 0 { len.saturating_add(i).max(0) } else { i };
    let (s, e) = (norm(start), norm(end).min(len - 1));
    (s <= e).then_some((s as u64, e as u64))
}

/// A bit range's first and last bit of a byte range `[s, e]` when `bits` is false.
fn bit_span(s: u64, e: u64, bits: bool) -> (u64, u64) {
    if bits {
        (s, e)
    } else {
        (s * 8, e * 8 + 7)
    }
}

/// Set bits in the bit range `[s, e]` of `v` (`bits`: the range counts bits, else bytes).
pub fn count(v: &[u8], s: u64, e: u64, bits: bool) -> u64 {
    let (s, e) = bit_span(s, e, bits);
    let (sb, eb) = ((s >> 3) as usize, (e >> 3) as usize);
    let mut n: u64 = v[sb..=eb].iter().map(|b| u64::from(b.count_ones())).sum();
    // Bits of the edge bytes outside the range.
    n -= u64::from((v[sb] & !(0xffu8 >> (s & 7))).count_ones());
    n -= u64::from((v[eb] & (0x7fu8 >> (e & 7))).count_ones());
    n
}

/// BITPOS: the first bit equal to `bit` in the range (`None`: the whole string), or
/// what Redis answers when there is none: -1, except that a clear bit sought without an
/// explicit end is found just past the range (the string reads as zero-padded).
pub fn position(v: &[u8], bit: bool, range: Option<(u64, u64)>, bits: bool, end_given: bool) -> i64 {
    let Some((s, e)) = range.map(|(s, e)| bit_span(s, e, bits)) else { return -1 };
    for i in s..=e {
        if get_bit(v, i) == bit {
            return i as i64;
        }
    }
    if bit || end_given {
        -1
    } else {
        // Past the last byte the range touches (Redis searches whole bytes there).
        (((e >> 3) + 1) * 8) as i64
    }
}

/// BITOP's operations.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Op {
    And,
    Or,
    Xor,
    Not,
}

/// BITOP over `srcs` (a missing key is an empty string): the result is as long as the
/// longest source, the shorter ones read as zero-padded.
pub fn bitop(op: Op, srcs: &[Vec<u8>]) -> Vec<u8> {
    let len = srcs.iter().map(Vec::len).max().unwrap_or(0);
    let at = |s: &Vec<u8>, i: usize| s.get(i).copied().unwrap_or(0);
    (0..len)
        .map(|i| match op {
            Op::Not => !at(&srcs[0], i),
            Op::And => srcs.iter().fold(0xff, |acc, s| acc & at(s, i)),
            Op::Or => srcs.iter().fold(0, |acc, s| acc | at(s, i)),
            Op::Xor => srcs.iter().fold(0, |acc, s| acc ^ at(s, i)),
        })
        .collect()
}

/// A match of LCS's IDX form: ranges in `a` and `b` (inclusive) and its length.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Match {
    pub a: (u64, u64),
    pub b: (u64, u64),
    pub len: u64,
}

/// The longest common subsequence of `a` and `b`, and its matching ranges from the end
/// backwards (as Redis lists them) of at least `min_len` bytes. The table is
/// `(|a|+1)·(|b|+1)` 32-bit cells: callers bound it first ([`table_bytes`]).
pub fn lcs(a: &[u8], b: &[u8], min_len: u64) -> (Vec<u8>, Vec<Match>) {
    let (n, m) = (a.len(), b.len());
    let w = m + 1;
    let mut t = vec![0u32; (n + 1) * w];
    for i in 1..=n {
        for j in 1..=m {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let mut out = vec![0u8; t[n * w + m] as usize];
    let mut k = out.len();
    let mut matches = Vec::new();
    // The current range, (a start, a end, b start, b end); a start == n: none yet.
    let (mut a0, mut a1, mut b0, mut b1) = (n, 0, 0, 0);
    let (mut i, mut j) = (n, m);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            out[k - 1] = a[i - 1];
            if a0 == n {
                (a0, a1, b0, b1) = (i - 1, i - 1, j - 1, j - 1);
            } else if a0 == i && b0 == j {
                a0 -= 1;
                b0 -= 1;
            } else {
                emit = true;
            }
            if a0 == 0 || b0 == 0 {
                emit = true;
            }
            k -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if a0 != n {
                emit = true;
            }
        }
        if emit {
            let len = (a1 - a0 + 1) as u64;
            if min_len == 0 || len >= min_len {
                matches.push(Match { a: (a0 as u64, a1 as u64), b: (b0 as u64, b1 as u64), len });
            }
            a0 = n;
        }
    }
    (out, matches)
}

/// Bytes [`lcs`]'s table takes for strings of `n` and `m` bytes.
pub fn table_bytes(n: usize, m: usize) -> u64 {
    (n as u64 + 1) * (m as u64 + 1) * 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_count_and_positions_agree_with_a_bit_by_bit_reading() {
        let mut rng = pmkv_testutil::XorShift::new(7);
        for _ in 0..300 {
            let v: Vec<u8> = (0..rng.below(12)).map(|_| rng.next_u64() as u8).collect();
            let len = v.len() as i64;
            let bits: Vec<bool> = (0..len as u64 * 8).map(|i| get_bit(&v, i)).collect();
            for _ in 0..20 {
                let (s, e) = (rng.below(40) as i64 - 20, rng.below(40) as i64 - 20);
                for in_bits in [false, true] {
                    let total = if in_bits { len * 8 } else { len };
                    let r = clamp(s, e, total, true);
                    let want: u64 = match r {
                        None => 0,
                        Some((s, e)) => {
                            let (s, e) = if in_bits { (s, e) } else { (s * 8, e * 8 + 7) };
                            (s..=e).filter(|&i| bits[i as usize]).count() as u64
                        }
                    };
                    assert_eq!(r.map_or(0, |(s, e)| count(&v, s, e, in_bits)), want, "{v:?} {s} {e} {in_bits}");
                }
            }
        }
        let mut v = Vec::new();
        assert!(!set_bit(&mut v, 13, true));
        assert_eq!(v, [0, 0x04]);
        assert!(set_bit(&mut v, 13, false));
        assert_eq!(position(&[0xff, 0xf0], false, Some((0, 1)), false, false), 12);
        assert_eq!(position(&[0xff], false, Some((0, 0)), false, false), 8);
        assert_eq!(position(&[0xff], false, Some((0, 0)), false, true), -1);
        assert_eq!(position(&[0x00], true, Some((0, 0)), false, false), -1);
    }

    #[test]
    fn lcs_finds_redis_documented_example() {
        let (s, m) = lcs(b"ohmytext", b"mynewtext", 0);
        assert_eq!(s, b"mytext");
        assert_eq!(
            m,
            [Match { a: (4, 7), b: (5, 8), len: 4 }, Match { a: (2, 3), b: (0, 1), len: 2 }],
            "the ranges of Redis's LCS documentation"
        );
        assert_eq!(lcs(b"", b"abc", 0).0, b"");
        assert_eq!(lcs(b"ohmytext", b"mynewtext", 4).1.len(), 1);
        assert_eq!(bitop(Op::And, &[vec![0xff, 0x0f], vec![0xf0]]), [0xf0, 0x00]);
        assert_eq!(bitop(Op::Not, &[vec![0x0f]]), [0xf0]);
    }
}
