//! RESP, the Redis serialization protocol: requests (arrays of bulk strings, or inline
//! commands as telnet and `redis-cli` send them) and replies in RESP2 or RESP3.
//!
//! Parsing is bounded: a bulk string longer than [`Limits::max_bulk`], an array of more
//! than [`Limits::max_args`] elements or an inline line longer than [`Limits::max_inline`]
//! is a protocol error (the connection gets an error reply and is closed), so a client
//! cannot make the server allocate without limit; [`Parser::held`] with the unparsed input
//! is what the server holds against [`Limits::max_query`]. A request is one array of bulk
//! strings: an element that is itself an array (`*1\r\n*1\r\n…`) is an error at once, so no
//! nesting a client sends becomes depth in the parser (nothing here recurses on input).
//! Nothing here panics on any input.

use std::io::{self, BufRead, Write};

/// Bounds on what one request may make the server read and hold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Longest bulk string (Redis's `proto-max-bulk-len`).
    pub max_bulk: usize,
    /// Most elements in one request (Redis: 1,048,576 once authenticated, 10 before).
    pub max_args: usize,
    /// Longest inline request line.
    pub max_inline: usize,
    /// Most input a client may have sent that is not yet a whole request: the unparsed
    /// bytes plus what the parser holds of a request still arriving (Redis's
    /// `client-query-buffer-limit`). Passing it closes the connection.
    pub max_query: usize,
}

/// The largest value pmkv's engines accept (HART and NBTree: 16 MiB; Mangosteen less):
/// the defaults below are multiples of it.
pub const LARGEST_VALUE: usize = 16 << 20;

impl Default for Limits {
    /// A bulk as long as the largest value; four of them pending at most (an MSET of four
    /// largest values still arrives whole), and Redis's 1 Mi elements.
    fn default() -> Self {
        Limits { max_bulk: LARGEST_VALUE, max_args: 1 << 20, max_inline: 64 << 10, max_query: 4 * LARGEST_VALUE }
    }
}

impl Limits {
    /// What a connection may send before it has authenticated, when a password is set:
    /// enough for `AUTH`, `HELLO 3 AUTH user pass SETNAME name` and `PING`, and nothing
    /// more, so that a stranger cannot make the server hold more than a few KiB (Redis
    /// bounds unauthenticated clients to 10 elements and 16 KiB bulks likewise).
    pub const UNAUTHENTICATED: Limits =
        Limits { max_bulk: 4 << 10, max_args: 10, max_inline: 4 << 10, max_query: 8 << 10 };
}

/// Why a request could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The connection closed (cleanly, between requests).
    Eof,
    Io(io::Error),
    /// Malformed or over the limits: reply with this message and close.
    Protocol(String),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            ReadError::Eof
        } else {
            ReadError::Io(e)
        }
    }
}

fn read_line(r: &mut impl BufRead, max: usize) -> Result<Vec<u8>, ReadError> {
    let mut line = Vec::new();
    let n = io::Read::take(&mut *r, max as u64 + 2).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Err(ReadError::Eof);
    }
    if line.last() != Some(&b'\n') {
        return Err(if n > max { ReadError::Protocol("too big inline request".into()) } else { ReadError::Eof });
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(line)
}

fn parse_len(b: &[u8], what: &str) -> Result<i64, ReadError> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| ReadError::Protocol(format!("invalid {what} length")))
}

/// An inline command's words, split as Redis splits them (`sdssplitargs`): blanks
/// separate words; "double quotes" take `\n \r \t \b \a \xHH` and `\` before any other
/// byte; 'single quotes' take `\'`; a closing quote must end the word, and an unclosed
/// one is an error. A NUL byte ends the line, as in Redis (whose line is a C string).
pub fn split_inline(line: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let unbalanced = || "unbalanced quotes in request".to_string();
    let line = line.split(|&c| c == 0).next().unwrap_or_default();
    let blank = |c: u8| matches!(c, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c);
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    // A closing quote must end the word.
    let end_quote = |n: Option<u8>| if n.is_some_and(|n| !blank(n)) { Err(unbalanced()) } else { Ok(()) };
    let (mut words, mut i) = (Vec::new(), 0);
    loop {
        while i < line.len() && blank(line[i]) {
            i += 1;
        }
        if i == line.len() {
            return Ok(words);
        }
        let mut w = Vec::new();
        let (mut dq, mut sq) = (false, false);
        loop {
            let c = line.get(i).copied();
            let next = line.get(i + 1).copied();
            if dq {
                match (c, next) {
                    (Some(b'\\'), Some(b'x'))
                        if line.get(i + 2).and_then(|&h| hex(h)).is_some()
                            && line.get(i + 3).and_then(|&h| hex(h)).is_some() =>
                    {
                        w.push(hex(line[i + 2]).unwrap_or(0) * 16 + hex(line[i + 3]).unwrap_or(0));
                        i += 3;
                    }
                    (Some(b'\\'), Some(e)) => {
                        w.push(match e {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            e => e,
                        });
                        i += 1;
                    }
                    (Some(b'"'), n) => {
                        end_quote(n)?;
                        i += 1;
                        break;
                    }
                    (None, _) => return Err(unbalanced()),
                    (Some(c), _) => w.push(c),
                }
            } else if sq {
                match (c, next) {
                    (Some(b'\\'), Some(b'\'')) => {
                        w.push(b'\'');
                        i += 1;
                    }
                    (Some(b'\''), n) => {
                        end_quote(n)?;
                        i += 1;
                        break;
                    }
                    (None, _) => return Err(unbalanced()),
                    (Some(c), _) => w.push(c),
                }
            } else {
                match c {
                    None => break,
                    Some(c) if blank(c) => break,
                    Some(b'"') => dq = true,
                    Some(b'\'') => sq = true,
                    Some(c) => w.push(c),
                }
            }
            i += 1;
        }
        words.push(w);
    }
}

/// Read one request: its arguments (the command name first).
pub fn read_request(r: &mut impl BufRead, lim: &Limits) -> Result<Vec<Vec<u8>>, ReadError> {
    loop {
        let line = read_line(r, lim.max_inline)?;
        if line.is_empty() {
            continue; // empty lines between inline commands
        }
        if line[0] != b'*' {
            let args = split_inline(&line).map_err(ReadError::Protocol)?;
            if args.len() > lim.max_args {
                return Err(ReadError::Protocol("invalid multibulk length".into()));
            }
            return Ok(args);
        }
        let n = parse_len(&line[1..], "multibulk")?;
        if n <= 0 {
            continue; // `*0` or `*-1`: nothing to do
        }
        if n as usize > lim.max_args {
            return Err(ReadError::Protocol("invalid multibulk length".into()));
        }
        let mut args = Vec::with_capacity((n as usize).min(1024));
        for _ in 0..n {
            let h = read_line(r, 64)?;
            if h.first() != Some(&b'$') {
                return Err(ReadError::Protocol(format!(
                    "expected '$', got '{}'",
                    h.first().map(|&c| c as char).unwrap_or(' ')
                )));
            }
            let len = parse_len(&h[1..], "bulk")?;
            if len < 0 || len as usize > lim.max_bulk {
                return Err(ReadError::Protocol("invalid bulk length".into()));
            }
            let mut buf = vec![0u8; len as usize + 2];
            r.read_exact(&mut buf)?;
            if &buf[len as usize..] != b"\r\n" {
                return Err(ReadError::Protocol("bulk string not terminated by CRLF".into()));
            }
            buf.truncate(len as usize);
            args.push(buf);
        }
        return Ok(args);
    }
}

/// A parsed request and the bytes it took, or `None` when more input is needed.
pub type Parsed = Option<(Vec<Vec<u8>>, usize)>;

/// What [`Parser::parse`] returns: a request if one is complete, and the bytes consumed.
pub type Step = (Option<Vec<Vec<u8>>>, usize);

/// Parse one request from the front of `buf` without blocking: `Ok(Some((args, used)))`
/// for a complete request (`used` bytes), `Ok(None)` if more bytes are needed (nothing is
/// consumed), `Err` for malformed input or input over the limits. The same grammar and
/// limits as [`read_request`]; a [`Parser`] that is dropped when the input runs short.
pub fn parse_request(buf: &[u8], lim: &Limits) -> Result<Parsed, String> {
    match Parser::default().parse(buf, lim)? {
        (Some(args), n) => Ok(Some((args, n))),
        (None, _) => Ok(None),
    }
}

/// Allocation overhead counted per element held, beyond its bytes: a million empty
/// elements are tens of MiB of heap, not the 6 MiB they take on the wire.
const ELEMENT_OVERHEAD: usize = 32 + std::mem::size_of::<Vec<u8>>();

/// An incremental request parser, one per connection: the elements of a request that
/// has not fully arrived are kept here, so the bytes they came in can be dropped and are
/// never parsed or copied again (re-parsing from the request's start on every read made
/// a request of many elements cost time quadratic in its size).
#[derive(Debug, Default)]
pub struct Parser {
    /// Inside a multibulk: its elements still to come.
    left: usize,
    args: Vec<Vec<u8>>,
    /// Bytes held in `args`, with [`ELEMENT_OVERHEAD`] each.
    held: usize,
    /// Bytes still to arrive for the bulk being read (0 when unknown).
    want: usize,
}

fn next_line(buf: &[u8], at: usize, max: usize) -> Result<Option<(&[u8], usize)>, String> {
    let rest = &buf[at.min(buf.len())..];
    match rest.iter().take(max + 2).position(|&c| c == b'\n') {
        Some(i) => {
            let l = &rest[..i];
            Ok(Some((l.strip_suffix(b"\r").unwrap_or(l), at + i + 1)))
        }
        None if rest.len() > max + 1 => Err("too big inline request".into()),
        None => Ok(None),
    }
}

fn num(b: &[u8], what: &str) -> Result<i64, String> {
    std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()).ok_or_else(|| format!("invalid {what} length"))
}

impl Parser {
    /// Parse from `buf`, which starts where the last call's consumed bytes ended:
    /// `(Some(args), used)` for a complete request, `(None, used)` when more input is
    /// needed — in both cases the first `used` bytes are consumed (the elements they
    /// held are kept here) and the caller drops them. `Err` for malformed input or input
    /// over `lim`; the connection is then closed, and the parser is not used again.
    pub fn parse(&mut self, buf: &[u8], lim: &Limits) -> Result<Step, String> {
        let mut at = 0;
        self.want = 0;
        if self.left == 0 {
            loop {
                let Some((l, next)) = next_line(buf, at, lim.max_inline)? else { return Ok((None, at)) };
                if l.is_empty() {
                    at = next;
                    continue;
                }
                if l[0] != b'*' {
                    let args = split_inline(l)?;
                    if args.len() > lim.max_args {
                        return Err("invalid multibulk length".into());
                    }
                    return Ok((Some(args), next));
                }
                let n = num(&l[1..], "multibulk")?;
                at = next;
                if n <= 0 {
                    continue; // `*0` or `*-1`: nothing to do
                }
                if n as u64 > lim.max_args as u64 {
                    return Err("invalid multibulk length".into());
                }
                self.left = n as usize;
                self.args = Vec::with_capacity(self.left.min(1024));
                self.held = 0;
                break;
            }
        }
        while self.left > 0 {
            let Some((h, after)) = next_line(buf, at, 64)? else { return Ok((None, at)) };
            if h.first() != Some(&b'$') {
                return Err(format!("expected '$', got '{}'", h.first().map(|&c| c as char).unwrap_or(' ')));
            }
            let len = num(&h[1..], "bulk")?;
            if len < 0 || len as u64 > lim.max_bulk as u64 {
                return Err("invalid bulk length".into());
            }
            let end = after + len as usize;
            if buf.len() < end + 2 {
                self.want = end + 2 - buf.len();
                return Ok((None, at));
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err("bulk string not terminated by CRLF".into());
            }
            self.args.push(buf[after..end].to_vec());
            self.held += len as usize + ELEMENT_OVERHEAD;
            self.left -= 1;
            at = end + 2;
        }
        self.held = 0;
        Ok((Some(std::mem::take(&mut self.args)), at))
    }

    /// Bytes held of a request still arriving (its complete elements, with their
    /// allocation overhead).
    pub fn held(&self) -> usize {
        self.held
    }

    /// Bytes the bulk being read still needs beyond the input the last [`Parser::parse`]
    /// saw (0 when not inside a bulk): the reader reserves room for them at once.
    pub fn want(&self) -> usize {
        self.want
    }
}

/// A simple-string or error line: `kind`, `s` with any CR or LF made a space (they would
/// end the line early), CRLF. Copied as is in the common case, with no allocation: every
/// acknowledged SET of a pipeline writes one.
fn line(w: &mut impl Write, kind: u8, s: &str) -> io::Result<()> {
    w.write_all(&[kind])?;
    if s.contains(['\r', '\n']) {
        w.write_all(s.replace(['\r', '\n'], " ").as_bytes())?;
    } else {
        w.write_all(s.as_bytes())?;
    }
    w.write_all(b"\r\n")
}

/// A reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    /// The null array: EXEC aborted by WATCH.
    NilArray,
    Array(Vec<Reply>),
    /// A map (RESP3), sent as a flat array in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// A double (RESP3 `,`), sent as a bulk string in RESP2; printed as Redis 7.0 prints
    /// a sorted set's score.
    Double(f64),
    /// An out-of-band push (RESP3 `>`: Pub/Sub's messages and (un)subscribe
    /// confirmations), sent as an array in RESP2.
    Push(Vec<Reply>),
    /// Several replies to one command, written one after another (SUBSCRIBE of n
    /// channels answers n confirmations).
    Seq(Vec<Reply>),
}

impl Reply {
    pub fn ok() -> Reply {
        Reply::Simple("OK".into())
    }
    pub fn err(msg: impl Into<String>) -> Reply {
        Reply::Error(msg.into())
    }
    pub fn bulk(b: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(b.into())
    }

    /// Write the reply in RESP2 (`resp3` false) or RESP3.
    pub fn write(&self, w: &mut impl Write, resp3: bool) -> io::Result<()> {
        match self {
            Reply::Simple(s) => line(w, b'+', s),
            Reply::Error(s) => line(w, b'-', s),
            Reply::Int(i) => write!(w, ":{i}\r\n"),
            Reply::Bulk(b) => {
                write!(w, "${}\r\n", b.len())?;
                w.write_all(b)?;
                w.write_all(b"\r\n")
            }
            Reply::Nil => w.write_all(if resp3 { b"_\r\n" } else { b"$-1\r\n" }),
            Reply::NilArray => w.write_all(if resp3 { b"_\r\n" } else { b"*-1\r\n" }),
            Reply::Array(items) => {
                write!(w, "*{}\r\n", items.len())?;
                items.iter().try_for_each(|i| i.write(w, resp3))
            }
            Reply::Double(d) => {
                let s = fmt_score(*d);
                if resp3 {
                    line(w, b',', &s)
                } else {
                    Reply::Bulk(s.into_bytes()).write(w, false)
                }
            }
            Reply::Map(pairs) => {
                if resp3 {
                    write!(w, "%{}\r\n", pairs.len())?;
                } else {
                    write!(w, "*{}\r\n", pairs.len() * 2)?;
                }
                pairs.iter().try_for_each(|(k, v)| {
                    k.write(w, resp3)?;
                    v.write(w, resp3)
                })
            }
            Reply::Push(items) => {
                write!(w, "{}{}\r\n", if resp3 { '>' } else { '*' }, items.len())?;
                items.iter().try_for_each(|i| i.write(w, resp3))
            }
            Reply::Seq(replies) => replies.iter().try_for_each(|r| r.write(w, resp3)),
        }
    }
}

/// A score as Redis 7.0 prints one (`d2string`): integers below 2^52 without a point,
/// `inf`/`-inf`, anything else as C's `%.17g`.
pub fn fmt_score(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == v.trunc() && v.abs() < 4_503_599_627_370_496.0 {
        return format!("{}", v as i64);
    }
    // %.17g: 17 significant digits, scientific when the exponent is < -4 or >= 17,
    // trailing zeros dropped.
    let sci = format!("{v:.16e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..17).contains(&x) {
        format!("{}e{}{:02}", trim(mant), if x < 0 { '-' } else { '+' }, x.abs())
    } else {
        trim(&format!("{:.*}", (16 - x) as usize, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_commands_split_as_redis_splits_them() {
        let ok = |l: &str| split_inline(l.as_bytes()).unwrap();
        let strs = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        assert_eq!(ok("  set  k   v "), strs(&["set", "k", "v"]));
        assert_eq!(ok(r#"set "a b" 'c d'"#), strs(&["set", "a b", "c d"]));
        assert_eq!(
            ok(r#"set k "\x41\n\t\"q\\" 'it\'s'"#),
            vec![b"set".to_vec(), b"k".to_vec(), b"A\n\t\"q\\".to_vec(), b"it's".to_vec()]
        );
        assert_eq!(ok(r#"set k "\xZZ""#)[2], b"xZZ");
        assert_eq!(ok(r#"ab"c d"e"#.split('e').next().unwrap()), strs(&["abc d"]));
        assert_eq!(ok(r#"set "" ''"#), strs(&["set", "", ""]));
        assert_eq!(ok("get k\0ignored"), strs(&["get", "k"]));
        for bad in [r#"set "k"x v"#, r#"set "k v"#, "set 'k v", "set 'k'x v"] {
            assert!(split_inline(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    fn parse(b: &[u8]) -> Result<Vec<Vec<u8>>, ReadError> {
        read_request(
            &mut std::io::BufReader::new(b),
            &Limits { max_bulk: 100, max_args: 10, max_inline: 50, max_query: 1000 },
        )
    }

    #[test]
    fn requests_parse_and_bad_input_is_an_error_not_a_panic() {
        assert_eq!(parse(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").unwrap(), vec![b"GET".to_vec(), b"k".to_vec()]);
        assert_eq!(parse(b"PING  hello\r\n").unwrap(), vec![b"PING".to_vec(), b"hello".to_vec()]);
        assert_eq!(parse(b"*1\r\n$0\r\n\r\n").unwrap(), vec![Vec::<u8>::new()]);
        for bad in [
            &b"*2\r\n$3\r\nGET\r\n"[..], // truncated
            b"*11\r\n",                  // too many args
            b"*1\r\n$101\r\n",           // bulk too long
            b"*1\r\n$-5\r\n",            // negative bulk
            b"*x\r\n",                   // not a number
            b"*1\r\n:3\r\n",             // not a bulk
            b"*1\r\n$3\r\nGETXX",        // no CRLF after the bulk
            &[b'P'; 80],                 // inline too long
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        // Random garbage never panics.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let mut b = Vec::new();
            for _ in 0..(x % 40) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b.push(b"*$\r\n0123456789-GETSET"[(x % 20) as usize]);
            }
            let _ = parse(&b);
        }
    }

    /// The buffer parser agrees with the reader on every prefix: incomplete until the
    /// whole request is there, then the same arguments; errors where the reader errs.
    #[test]
    fn the_buffer_parser_agrees_with_the_reader() {
        let lim = Limits { max_bulk: 100, max_args: 10, max_inline: 50, max_query: 1000 };
        let good: &[&[u8]] =
            &[b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", b"PING  hello\r\n", b"*1\r\n$0\r\n\r\n", b"\r\n*0\r\nPING\r\n"];
        for g in good {
            let whole = parse_request(g, &lim).unwrap().expect("complete");
            assert_eq!(whole.0, read_request(&mut std::io::BufReader::new(*g), &lim).unwrap());
            assert_eq!(whole.1, g.len());
            for cut in 0..g.len() {
                assert!(parse_request(&g[..cut], &lim).unwrap().is_none(), "{g:?} cut at {cut}");
            }
        }
        for bad in [
            &b"*11\r\n"[..],
            b"*1\r\n$101\r\n",
            b"*1\r\n$-5\r\n",
            b"*x\r\n",
            b"*1\r\n:3\r\n",
            b"*1\r\n$3\r\nGETXX",
            &[b'P'; 80],
        ] {
            assert!(parse_request(bad, &lim).is_err(), "{bad:?}");
        }
    }

    /// The incremental parser gives the same requests whatever way the input is cut into
    /// reads, consuming each byte once; the bytes it holds of a partial request are what
    /// it has parsed of it.
    #[test]
    fn the_incremental_parser_agrees_across_every_split() {
        let lim = Limits { max_bulk: 100, max_args: 10, max_inline: 50, max_query: 1000 };
        let input: &[u8] =
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING  hello\r\n\r\n*0\r\n*3\r\n$3\r\nSET\r\n$2\r\nab\r\n$4\r\nv\r\nx\r\n";
        let want: Vec<Vec<Vec<u8>>> = vec![
            vec![b"GET".to_vec(), b"k".to_vec()],
            vec![b"PING".to_vec(), b"hello".to_vec()],
            vec![b"SET".to_vec(), b"ab".to_vec(), b"v\r\nx".to_vec()],
        ];
        for step in 1..=input.len() {
            let (mut p, mut buf, mut got) = (Parser::default(), Vec::new(), Vec::new());
            for chunk in input.chunks(step) {
                buf.extend_from_slice(chunk);
                loop {
                    let (r, used) = p.parse(&buf, &lim).unwrap();
                    buf.drain(..used);
                    match r {
                        Some(a) => got.push(a),
                        None => break,
                    }
                }
            }
            assert_eq!(got, want, "reads of {step} bytes");
            assert!(buf.is_empty() && p.held() == 0);
        }
        // Part of a request: its whole elements are held, the rest is wanted.
        let mut p = Parser::default();
        let (r, used) = p.parse(b"*3\r\n$3\r\nSET\r\n$50\r\nabc", &lim).unwrap();
        assert!(r.is_none() && used == 13 && p.held() == 3 + ELEMENT_OVERHEAD && p.want() == 50 + 2 - 3);
    }

    /// An array inside a request is an error at its first element, however deep the
    /// nesting sent (no depth in the parser), and a stream of a million `*1` lines costs
    /// one line.
    #[test]
    fn nested_arrays_are_refused_without_recursion() {
        let deep = b"*1\r\n".repeat(1_000_000);
        let lim = Limits::default();
        assert_eq!(parse_request(&deep, &lim).unwrap_err(), "expected '$', got '*'");
        assert!(read_request(&mut std::io::BufReader::new(&deep[..]), &lim).is_err());
        let mut p = Parser::default();
        assert!(p.parse(b"*2\r\n$1\r\na\r\n*1\r\n$1\r\nb\r\n", &lim).is_err());
        // Before AUTH: eleven elements, a 5 KiB bulk or a long inline line are refused.
        let u = Limits::UNAUTHENTICATED;
        assert!(parse_request(b"*11\r\n", &u).is_err());
        assert!(parse_request(b"*2\r\n$4\r\nAUTH\r\n$5000\r\n", &u).is_err());
        assert!(parse_request(&[b'A'; 5000], &u).is_err());
        assert!(parse_request(&[b"AUTH".as_slice(), &b" x".repeat(10), b"\r\n"].concat(), &u).is_err());
        assert!(parse_request(b"*2\r\n$4\r\nAUTH\r\n$6\r\ns3cret\r\n", &u).unwrap().is_some());
    }

    #[test]
    fn replies_in_resp2_and_resp3() {
        let mut o = Vec::new();
        Reply::Array(vec![Reply::bulk("a"), Reply::Nil, Reply::Int(3)]).write(&mut o, false).unwrap();
        assert_eq!(o, b"*3\r\n$1\r\na\r\n$-1\r\n:3\r\n");
        o.clear();
        Reply::Map(vec![(Reply::bulk("k"), Reply::Int(1))]).write(&mut o, true).unwrap();
        assert_eq!(o, b"%1\r\n$1\r\nk\r\n:1\r\n");
        o.clear();
        Reply::Nil.write(&mut o, true).unwrap();
        assert_eq!(o, b"_\r\n");
    }
}
