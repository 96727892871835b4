//! CRC-32C of short inputs, for the checks every engine keeps beside its PM words (an
//! allocator word, a HART leaf, a Mangosteen redo record or line).
//!
//! The values are exactly `crc32c::crc32c` of the same bytes (the tests below compare
//! them), so the on-PM formats do not depend on which path computed them. The inputs are
//! a few words, where the `crc32c` crate's set-up (a call, alignment handling, a choice
//! between its one- and three-stream loops) costs more than the CRC itself: a 60-byte
//! Mangosteen record took ~25 ns through the crate and a quarter of a `mangosteen` insert
//! went to such checks. On x86-64 with SSE 4.2 these functions use the `crc32`
//! instruction inline, 8 bytes at a time (about 1 ns per word); elsewhere they call the
//! crate. Long inputs (a whole page, a batch log body) should call the crate, whose
//! three-stream loop is faster there.

/// CRC-32C of `seed` (8 bytes, little-endian) followed by every part: the same value as
/// `crc32c::crc32c` of their concatenation. The seed is usually the pool offset of what
/// the check covers, so that bytes written at the wrong place fail their check.
#[inline]
pub fn crc32c_parts(seed: u64, parts: &[&[u8]]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above).
            return unsafe { parts_sse42(seed, parts) };
        }
    }
    let mut c = crc32c::crc32c(&seed.to_le_bytes());
    for p in parts {
        c = crc32c::crc32c_append(c, p);
    }
    c
}

/// [`crc32c_parts`]`(seed, &[&head.to_le_bytes(), bytes])`: a word, then a short byte
/// string (a key or a value after its length word). The slice-of-parts loop of
/// `crc32c_parts` was over half of the instructions of HART's key check (84 for a
/// 9-byte key: a call, and per part a chunk iterator and its remainder's three tests).
#[inline]
pub fn crc32c_word_bytes(seed: u64, head: u64, bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above).
            return unsafe { word_bytes_sse42(seed, head, bytes) };
        }
    }
    crc32c_parts(seed, &[&head.to_le_bytes(), bytes])
}

/// [`crc32c_word_bytes`] with the `crc32` instruction.
///
/// # Safety
///
/// The CPU supports SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn word_bytes_sse42(seed: u64, head: u64, bytes: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u16, _mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};
    let mut c = _mm_crc32_u64(_mm_crc32_u64(0xffff_ffff, seed), head);
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        c = _mm_crc32_u64(c, u64::from_le_bytes(w.try_into().expect("8-byte chunk")));
    }
    let rest = words.remainder();
    let mut c = c as u32;
    // The 0..7 bytes left, as in `parts_sse42`: four, two and one at a time.
    let n = rest.len();
    if n & 4 != 0 {
        c = _mm_crc32_u32(c, u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")));
    }
    if n & 2 != 0 {
        let at = n & 4;
        c = _mm_crc32_u16(c, u16::from_le_bytes(rest[at..at + 2].try_into().expect("2 bytes")));
    }
    if n & 1 != 0 {
        c = _mm_crc32_u8(c, rest[n - 1]);
    }
    !c
}

/// [`crc32c_parts`]`(offs[k], &[lines[k]])` for each of `K` 64-byte lines, computed side by
/// side: the `crc32` instruction has a latency of three cycles and a throughput of one,
/// so one line's chain of nine leaves the unit idle two cycles in three, and `K`
/// independent chains fill it (Mangosteen's backend checks each line a batch writes).
#[inline]
pub fn crc32c_lines<const K: usize>(offs: [u64; K], lines: [&[u8; 64]; K]) -> [u32; K] {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above).
            return unsafe { lines_sse42(offs, lines) };
        }
    }
    std::array::from_fn(|k| crc32c_parts(offs[k], &[&lines[k][..]]))
}

/// [`crc32c_lines`] with the `crc32` instruction.
///
/// # Safety
///
/// The CPU supports SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn lines_sse42<const K: usize>(offs: [u64; K], lines: [&[u8; 64]; K]) -> [u32; K] {
    use std::arch::x86_64::_mm_crc32_u64;
    let mut c = offs.map(|o| _mm_crc32_u64(0xffff_ffff, o));
    for w in 0..8 {
        for k in 0..K {
            let word = u64::from_le_bytes(lines[k][8 * w..8 * w + 8].try_into().expect("8 bytes"));
            c[k] = _mm_crc32_u64(c[k], word);
        }
    }
    c.map(|c| !(c as u32))
}

/// A check of `words` (each little-endian) made of four CRC-32C chains side by side, for
/// records of tens of words whose check is on a commit's critical path: one chain is
/// bound by the `crc32` instruction's latency (three cycles a word), four fill its
/// throughput (one a word). Lane *k* is the CRC-32C of `seed + k` (8 bytes,
/// little-endian) followed by words *k*, *k* + 4, *k* + 8, …; the check is the CRC-32C of
/// the four lanes' values (4 bytes each, little-endian, lane 0 first). Any change to one
/// word changes its lane, which changes the check unless two CRC-32C values collide.
#[inline]
pub fn crc32c_lanes(seed: u64, words: &[u64]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above).
            return unsafe { lanes_sse42(seed, words) };
        }
    }
    let lanes: Vec<u8> = (0..4u64)
        .flat_map(|k| {
            let lane: Vec<u8> = words.iter().skip(k as usize).step_by(4).flat_map(|w| w.to_le_bytes()).collect();
            crc32c_parts(seed.wrapping_add(k), &[&lane]).to_le_bytes()
        })
        .collect();
    crc32c::crc32c(&lanes)
}

/// [`crc32c_lanes`] with the `crc32` instruction.
///
/// # Safety
///
/// The CPU supports SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn lanes_sse42(seed: u64, words: &[u64]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u32, _mm_crc32_u64};
    let mut c = [0u64, 1, 2, 3].map(|k| _mm_crc32_u64(0xffff_ffff, seed.wrapping_add(k)));
    let mut quads = words.chunks_exact(4);
    for q in &mut quads {
        for k in 0..4 {
            c[k] = _mm_crc32_u64(c[k], q[k]);
        }
    }
    for (k, &w) in quads.remainder().iter().enumerate() {
        c[k] = _mm_crc32_u64(c[k], w);
    }
    let mut out = 0xffff_ffff;
    for lane in c {
        out = _mm_crc32_u32(out, !(lane as u32));
    }
    !out
}

/// CRC-32C of the words (each little-endian), in order: the same value as
/// `crc32c::crc32c` of their bytes. With a constant `N` the loop unrolls into `N`
/// instructions.
///
/// Inlined whole (the fallback kept out of line): a call cost a three-word check about
/// three times its instructions.
#[inline(always)]
pub fn crc32c_words<const N: usize>(words: [u64; N]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above).
            return unsafe { words_sse42(words) };
        }
    }
    words_portable(words)
}

/// [`crc32c_words`] without the `crc32` instruction.
#[inline(never)]
fn words_portable<const N: usize>(words: [u64; N]) -> u32 {
    let mut c = 0;
    for w in words {
        c = crc32c::crc32c_append(c, &w.to_le_bytes());
    }
    c
}

/// CRC-32C of the words (each little-endian) followed by the 4 bytes of `tail`
/// (little-endian): the same value as `crc32c::crc32c` of those bytes. For records of
/// whole words whose check fills the last half word.
#[inline]
pub fn crc32c_words_then<const N: usize>(words: [u64; N], tail: u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above).
            return unsafe { words_then_sse42(words, tail) };
        }
    }
    let mut c = 0;
    for w in words {
        c = crc32c::crc32c_append(c, &w.to_le_bytes());
    }
    crc32c::crc32c_append(c, &tail.to_le_bytes())
}

/// [`crc32c_words`] of `a` and of `b`, computed side by side (two independent chains of
/// the `crc32` instruction, whose latency is three cycles and throughput one): for a
/// word's check before and after a change, as the allocator's bit updates need.
#[inline(always)]
pub fn crc32c_words_x2<const N: usize>(a: [u64; N], b: [u64; N]) -> (u32, u32) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above).
            return unsafe { words_x2_sse42(a, b) };
        }
    }
    (words_portable(a), words_portable(b))
}

/// [`crc32c_words_x2`] with the `crc32` instruction ([`crc32_u64`]: inlined).
///
/// # Safety
///
/// The CPU supports SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn words_x2_sse42<const N: usize>(a: [u64; N], b: [u64; N]) -> (u32, u32) {
    let (mut x, mut y) = (0xffff_ffff, 0xffff_ffff);
    for i in 0..N {
        // SAFETY: the CPU supports SSE 4.2 (the contract).
        unsafe {
            x = crc32_u64(x, a[i]);
            y = crc32_u64(y, b[i]);
        }
    }
    (!(x as u32), !(y as u32))
}

/// The `crc32` instruction on a 64-bit word, as `_mm_crc32_u64`, but written as inline
/// assembly so that it inlines into callers compiled without SSE 4.2 enabled: a
/// `#[target_feature]` function cannot be inlined into them, and calling it (with the
/// call, the feature test and the moves around it) cost a three-word check about three
/// times the three instructions it runs (callgrind: ~18 instructions per HART search, on
/// every read, insert and update; docs/design/hart.md).
///
/// # Safety
///
/// The CPU supports SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn crc32_u64(crc: u64, word: u64) -> u64 {
    let mut c = crc;
    // SAFETY: `crc32 r64, r64` reads and writes only the two registers named (no memory,
    // no stack, no flags); the CPU supports it (the contract).
    unsafe {
        std::arch::asm!("crc32 {c}, {w}", c = inout(reg) c, w = in(reg) word, options(pure, nomem, nostack, preserves_flags));
    }
    c
}

/// [`crc32c_words_then`] with the `crc32` instruction.
///
/// # Safety
///
/// The CPU supports SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn words_then_sse42<const N: usize>(words: [u64; N], tail: u32) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u32, _mm_crc32_u64};
    let mut c = 0xffff_ffff;
    for w in words {
        c = _mm_crc32_u64(c, w);
    }
    !_mm_crc32_u32(c as u32, tail)
}

/// [`crc32c_parts`] with the `crc32` instruction.
///
/// # Safety
///
/// The CPU supports SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn parts_sse42(seed: u64, parts: &[&[u8]]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u16, _mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};
    let mut c = _mm_crc32_u64(0xffff_ffff, seed);
    for p in parts {
        let mut words = p.chunks_exact(8);
        for w in &mut words {
            c = _mm_crc32_u64(c, u64::from_le_bytes(w.try_into().expect("8-byte chunk")));
        }
        // The 0..7 bytes left: four, two and one at a time (at most three instructions
        // instead of seven; the same CRC, since each instruction takes its bytes in
        // little-endian order).
        let mut rest = words.remainder();
        if rest.len() >= 4 {
            c = _mm_crc32_u32(c as u32, u32::from_le_bytes(rest[..4].try_into().expect("4 bytes"))) as u64;
            rest = &rest[4..];
        }
        if rest.len() >= 2 {
            c = _mm_crc32_u16(c as u32, u16::from_le_bytes(rest[..2].try_into().expect("2 bytes"))) as u64;
            rest = &rest[2..];
        }
        if let Some(&b) = rest.first() {
            c = _mm_crc32_u8(c as u32, b) as u64;
        }
    }
    !(c as u32)
}

/// [`crc32c_words`] with the `crc32` instruction ([`crc32_u64`]: inlined).
///
/// # Safety
///
/// The CPU supports SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn words_sse42<const N: usize>(words: [u64; N]) -> u32 {
    let mut c = 0xffff_ffff;
    for w in words {
        // SAFETY: the CPU supports SSE 4.2 (the contract).
        c = unsafe { crc32_u64(c, w) };
    }
    !(c as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes(n: usize, salt: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt)).collect()
    }

    #[test]
    fn words_x2_equal_words() {
        for (a, b) in [([0u64, 0], [1u64, 2]), ([u64::MAX, 5], [0x1234_5678_9abc_def0, 0])] {
            assert_eq!(crc32c_words_x2(a, b), (crc32c_words(a), crc32c_words(b)));
            assert_eq!(crc32c_words_x2(b, a), (crc32c_words(b), crc32c_words(a)));
        }
    }

    #[test]
    fn word_bytes_equal_parts() {
        for seed in [0u64, 7, u64::MAX] {
            for head in [0u64, 9 | 1 << 32, u64::MAX] {
                for n in 0..=70 {
                    let b = bytes(n, 3);
                    assert_eq!(
                        crc32c_word_bytes(seed, head, &b),
                        crc32c_parts(seed, &[&head.to_le_bytes(), &b]),
                        "seed {seed:#x} head {head:#x}, {n} bytes"
                    );
                }
            }
        }
    }

    #[test]
    fn parts_equal_the_crate_over_their_concatenation() {
        for seed in [0u64, 1, 0x1234_5678_9abc_def0, u64::MAX] {
            for a in 0..=20 {
                for b in [0, 1, 3, 7, 8, 13, 52, 64] {
                    let (x, y) = (bytes(a, 1), bytes(b, 2));
                    let cat: Vec<u8> = seed.to_le_bytes().iter().chain(&x).chain(&y).copied().collect();
                    assert_eq!(crc32c_parts(seed, &[&x, &y]), crc32c::crc32c(&cat), "seed {seed:#x}, {a}+{b} bytes");
                }
            }
        }
    }

    #[test]
    fn words_equal_the_crate_over_their_bytes() {
        let w = [7u64, 0xdead_beef_0000_0001, u64::MAX, 0, 42, 1 << 63, 3, 9];
        let cat: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(crc32c_words(w), crc32c::crc32c(&cat));
        assert_eq!(crc32c_words([w[0], w[1]]), crc32c::crc32c(&cat[..16]));
        assert_eq!(crc32c_words([w[0], w[1], w[2]]), crc32c::crc32c(&cat[..24]));
        assert_eq!(crc32c_words::<0>([]), crc32c::crc32c(&[]));
        for tail in [0u32, 1, 0xdead_beef] {
            let mut cat7 = cat[..56].to_vec();
            cat7.extend_from_slice(&tail.to_le_bytes());
            let seven: [u64; 7] = w[..7].try_into().unwrap();
            assert_eq!(crc32c_words_then(seven, tail), crc32c::crc32c(&cat7));
        }
    }

    #[test]
    fn lines_side_by_side_equal_one_at_a_time() {
        let l: Vec<[u8; 64]> = (0..4).map(|k| bytes(64, k as u8).try_into().unwrap()).collect();
        let offs = [0u64, 64, 4096, u64::MAX];
        let got = crc32c_lines(offs, [&l[0], &l[1], &l[2], &l[3]]);
        for k in 0..4 {
            let cat: Vec<u8> = offs[k].to_le_bytes().iter().chain(&l[k]).copied().collect();
            assert_eq!(got[k], crc32c::crc32c(&cat), "line {k}");
        }
        assert_eq!(crc32c_lines([64], [&l[1]]), [got[1]]);
    }

    #[test]
    fn lanes_equal_their_definition_and_see_every_word() {
        let w: Vec<u64> = (0..23u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        for n in [0, 1, 3, 4, 5, 8, 23] {
            let words = &w[..n];
            let lanes: Vec<u8> = (0..4u64)
                .flat_map(|k| {
                    let mut b = (7 + k).to_le_bytes().to_vec();
                    b.extend(words.iter().skip(k as usize).step_by(4).flat_map(|x| x.to_le_bytes()));
                    crc32c::crc32c(&b).to_le_bytes()
                })
                .collect();
            assert_eq!(crc32c_lanes(7, words), crc32c::crc32c(&lanes), "{n} words");
        }
        let c = crc32c_lanes(7, &w);
        for i in 0..w.len() {
            let mut v = w.clone();
            v[i] ^= 1 << (i % 64);
            assert_ne!(crc32c_lanes(7, &v), c, "a flipped bit in word {i}");
        }
        assert_ne!(crc32c_lanes(8, &w), c, "the seed");
    }

    #[test]
    fn checks_see_every_bit() {
        let base = bytes(60, 5);
        let c = crc32c_parts(9, &[&base]);
        for i in 0..base.len() * 8 {
            let mut b = base.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert_ne!(crc32c_parts(9, &[&b]), c, "bit {i}");
        }
    }

    fn bytes_of(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    proptest! {
        /// The word checks (the inline-assembly `crc32` path where the CPU has SSE 4.2,
        /// and the portable fallback everywhere) give `crc32c::crc32c` of the words' bytes.
        #[test]
        fn word_checks_match_the_reference(a in any::<[u64; 3]>(), b in any::<[u64; 3]>()) {
            prop_assert_eq!(crc32c_words(a), crc32c::crc32c(&bytes_of(&a)));
            prop_assert_eq!(words_portable(a), crc32c::crc32c(&bytes_of(&a)));
            prop_assert_eq!(crc32c_words_x2(a, b), (crc32c_words(a), crc32c_words(b)));
            let (a2, b2) = ([a[0], a[1]], [b[0], b[1]]);
            prop_assert_eq!(crc32c_words(a2), crc32c::crc32c(&bytes_of(&a2)));
            prop_assert_eq!(crc32c_words_x2(a2, b2), (words_portable(a2), words_portable(b2)));
        }
    }
}
