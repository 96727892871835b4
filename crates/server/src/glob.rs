//! Glob patterns as Redis's KEYS, SCAN MATCH and CONFIG GET take them: `*` (any run of
//! bytes), `?` (any one byte), `[...]` (a class: bytes, ranges `a-z` in either order, `^`
//! first to negate, `\` escaping inside; an unclosed class runs to the pattern's end, as
//! in Redis), and `\x` (the byte `x`; a trailing `\` is itself).
//!
//! Why not Redis's own shape (a recursive matcher that retries the rest of the pattern
//! at every offset a `*` may cover): its depth is the number of `*` a client sends (a
//! pattern of 100,000 `*` overflowed a worker's stack and aborted the process) and its
//! time is exponential in the number of `*` on a near miss (`a*a*…a*b` over a run of
//! `a`s). Here the pattern is compiled once into tokens — consecutive `*` folded into one,
//! each class into a 256-bit set, so testing a byte is O(1) whatever the class's size —
//! and matched by the iterative two-pointer algorithm that, on a mismatch, backtracks only
//! to the most recent `*` and lets it cover one more byte. Earlier `*` never need
//! revisiting: whatever a later segment would gain from them, the latest `*` can absorb.
//! That makes a match O(|pattern| × |key|) time with no recursion, and O(|key|) when the
//! pattern has no `*`; a pattern needing more bytes than the key has fails before any
//! work, which bounds the tokens that reach the loop by 2 × |key| + 1.

/// One element of a compiled pattern.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tok {
    /// Any run of bytes, including none (consecutive `*` are one).
    Star,
    /// Any one byte.
    Any,
    /// This byte.
    Byte(u8),
    /// A byte in `Pattern::classes[i]`.
    Class(u32),
}

/// A compiled glob pattern; [`Pattern::matches`] tests a key.
#[derive(Clone, Debug)]
pub struct Pattern {
    toks: Vec<Tok>,
    classes: Vec<[u64; 4]>,
    /// Bytes a subject needs at least (tokens other than `*`).
    min_len: usize,
    has_star: bool,
    /// Matches nothing (it needs more bytes than any subject may have).
    never: bool,
}

fn set(bits: &mut [u64; 4], b: u8) {
    bits[(b >> 6) as usize] |= 1 << (b & 63);
}

impl Pattern {
    /// Compile `p`. `max_subject` is the longest subject it will be tested on (the
    /// engine's longest key): a pattern needing more bytes than that matches nothing, and
    /// compiling stops there, so a client's megabytes of pattern cost no more than that.
    pub fn new(p: &[u8], max_subject: usize) -> Pattern {
        let mut pat = Pattern { toks: Vec::new(), classes: Vec::new(), min_len: 0, has_star: false, never: false };
        let mut i = 0;
        while i < p.len() {
            if pat.min_len > max_subject {
                pat.never = true;
                pat.toks.clear();
                pat.classes.clear();
                return pat;
            }
            let t = match p[i] {
                b'*' => {
                    i += 1;
                    pat.has_star = true;
                    if pat.toks.last() == Some(&Tok::Star) {
                        continue;
                    }
                    Tok::Star
                }
                b'?' => {
                    i += 1;
                    Tok::Any
                }
                b'[' => {
                    i += 1;
                    let neg = p.get(i) == Some(&b'^');
                    if neg {
                        i += 1;
                    }
                    let mut bits = [0u64; 4];
                    // Up to `]` or the pattern's end (Redis: an unclosed class ends there).
                    while i < p.len() && p[i] != b']' {
                        if p[i] == b'\\' && i + 1 < p.len() {
                            set(&mut bits, p[i + 1]);
                            i += 2;
                        } else if i + 2 < p.len() && p[i + 1] == b'-' && p[i + 2] != b']' {
                            // A range; Redis accepts its ends in either order. `[a-]` is the
                            // class of `a` and `-` (Redis would read a range up to `]`).
                            let (lo, hi) = (p[i].min(p[i + 2]), p[i].max(p[i + 2]));
                            for b in lo..=hi {
                                set(&mut bits, b);
                            }
                            i += 3;
                        } else {
                            set(&mut bits, p[i]);
                            i += 1;
                        }
                    }
                    i += 1; // the `]` (or past the end)
                    if neg {
                        for w in &mut bits {
                            *w = !*w;
                        }
                    }
                    pat.classes.push(bits);
                    Tok::Class(pat.classes.len() as u32 - 1)
                }
                b'\\' if i + 1 < p.len() => {
                    i += 2;
                    Tok::Byte(p[i - 1])
                }
                b => {
                    i += 1;
                    Tok::Byte(b)
                }
            };
            if t != Tok::Star {
                pat.min_len += 1;
            }
            pat.toks.push(t);
        }
        pat.never = pat.min_len > max_subject;
        pat
    }

    fn accepts(&self, t: Tok, b: u8) -> bool {
        match t {
            Tok::Star => false,
            Tok::Any => true,
            Tok::Byte(x) => x == b,
            Tok::Class(i) => self.classes[i as usize][(b >> 6) as usize] & (1 << (b & 63)) != 0,
        }
    }

    /// Whether the whole of `s` matches (see the module's note for the algorithm).
    pub fn matches(&self, s: &[u8]) -> bool {
        if self.never || self.min_len > s.len() || (!self.has_star && self.min_len != s.len()) {
            return false;
        }
        let toks = &self.toks;
        let (mut p, mut i) = (0usize, 0usize);
        // After the latest `*`: the token that follows it, and the next byte it would
        // cover if the tokens after it fail.
        let mut back: Option<(usize, usize)> = None;
        while i < s.len() {
            if let Some(&t) = toks.get(p) {
                if t == Tok::Star {
                    p += 1;
                    back = Some((p, i));
                    continue;
                }
                if self.accepts(t, s[i]) {
                    p += 1;
                    i += 1;
                    continue;
                }
            }
            match back {
                Some((bp, bi)) => {
                    p = bp;
                    i = bi + 1;
                    back = Some((bp, bi + 1));
                }
                None => return false,
            }
        }
        toks[p..].iter().all(|&t| t == Tok::Star)
    }
}

/// Whether `s` matches the glob `p` (compiled for this one test).
pub fn glob(p: &[u8], s: &[u8]) -> bool {
    Pattern::new(p, s.len()).matches(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A plain recursive matcher with Redis's semantics, for short inputs only: the
    /// reference the compiled matcher must agree with.
    fn reference(p: &[u8], s: &[u8]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some(b'*') => reference(&p[1..], s) || (!s.is_empty() && reference(p, &s[1..])),
            Some(b'?') => !s.is_empty() && reference(&p[1..], &s[1..]),
            Some(b'[') => {
                let Some(&c) = s.first() else { return false };
                let mut i = 1;
                let neg = p.get(i) == Some(&b'^');
                if neg {
                    i += 1;
                }
                let mut hit = false;
                while i < p.len() && p[i] != b']' {
                    if p[i] == b'\\' && i + 1 < p.len() {
                        hit |= p[i + 1] == c;
                        i += 2;
                    } else if i + 2 < p.len() && p[i + 1] == b'-' && p[i + 2] != b']' {
                        hit |= p[i].min(p[i + 2]) <= c && c <= p[i].max(p[i + 2]);
                        i += 3;
                    } else {
                        hit |= p[i] == c;
                        i += 1;
                    }
                }
                hit != neg && reference(&p[(i + 1).min(p.len())..], &s[1..])
            }
            Some(b'\\') if p.len() > 1 => s.first() == Some(&p[1]) && reference(&p[2..], &s[1..]),
            Some(&a) => s.first() == Some(&a) && reference(&p[1..], &s[1..]),
        }
    }

    #[test]
    fn redis_syntax() {
        assert!(glob(b"*", b"") && glob(b"*", b"anything") && glob(b"h?llo", b"hello") && !glob(b"h?llo", b"hllo"));
        assert!(glob(b"h[ae]llo", b"hallo") && !glob(b"h[ae]llo", b"hillo"));
        assert!(glob(b"h[^e]llo", b"hallo") && !glob(b"h[^e]llo", b"hello"));
        assert!(glob(b"k[0-9]", b"k7") && glob(b"k[9-0]", b"k7") && !glob(b"k[0-9]", b"ka"));
        assert!(glob(b"a\\*", b"a*") && !glob(b"a\\*", b"ab") && glob(b"a\\", b"a\\"));
        assert!(glob(b"[\\]]", b"]") && glob(b"[a-]", b"-") && glob(b"[abc", b"c"));
        assert!(glob(b"a**b", b"ab") && glob(b"*a*b*", b"xxaxxbxx") && !glob(b"*a*b*", b"xxbxxaxx"));
        assert!(glob(b"user:*:name", b"user:42:name") && !glob(b"user:*:name", b"user:42:names"));
        assert!(!glob(b"", b"x") && glob(b"", b""));
    }

    /// Agrees with the reference on every pattern and subject over a small alphabet.
    #[test]
    fn agrees_with_the_reference() {
        let alpha: &[u8] = b"ab*?[]^-\\";
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..50_000 {
            let pl = (next() % 8) as usize;
            let p: Vec<u8> = (0..pl).map(|_| alpha[(next() % alpha.len() as u64) as usize]).collect();
            let sl = (next() % 7) as usize;
            let s: Vec<u8> = (0..sl).map(|_| b"ab-]"[(next() % 4) as usize]).collect();
            assert_eq!(glob(&p, &s), reference(&p, &s), "pattern {:?} subject {:?}", p, s);
        }
    }

    /// The reproducers: a pattern of 100,000 `*` (deep recursion before) and `a*a*…a*b`
    /// over runs of `a` (exponential time before) answer at once, on a thread whose stack
    /// is small enough that any recursion per pattern byte would overflow it.
    #[test]
    fn pathological_patterns_are_fast_and_use_no_stack() {
        let t = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(|| {
                let start = Instant::now();
                let stars = vec![b'*'; 200_000];
                assert!(Pattern::new(&stars, 65_535).matches(b"anything"));
                let mut ab = b"a*".repeat(12);
                ab.push(b'b');
                let p = Pattern::new(&ab, 65_535);
                for n in 30..=80 {
                    assert!(!p.matches(&vec![b'a'; n]));
                }
                // Long near misses: O(|p| x |s|), not more.
                let long = Pattern::new(&[b"*".as_slice(), &b"a".repeat(1000), b"b"].concat(), 65_535);
                assert!(!long.matches(&vec![b'a'; 65_535]));
                // A class of every byte, tested against a long key: O(1) per byte.
                let mut cls = b"*[".to_vec();
                cls.extend((0u8..=255).filter(|&b| b != b']' && b != b'\\'));
                cls.extend_from_slice(b"]x");
                assert!(!Pattern::new(&cls, 65_535).matches(&vec![b'a'; 65_535]));
                start.elapsed()
            })
            .unwrap();
        let took = t.join().expect("no stack overflow");
        assert!(took < Duration::from_secs(5), "took {took:?}");
    }

    /// A pattern longer than any key matches nothing and keeps no tokens past that.
    #[test]
    fn patterns_longer_than_any_key_are_cut_short() {
        let p = Pattern::new(&vec![b'?'; 1 << 20], 100);
        assert!(p.never && p.toks.is_empty());
        assert!(!p.matches(&[b'a'; 100]));
        assert!(Pattern::new(&[b'?'; 100], 100).matches(&[b'a'; 100]));
    }
}
