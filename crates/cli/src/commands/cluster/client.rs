//! A small blocking RESP2 client: one TCP connection, one request at a time, replies as the
//! server crate's [`Reply`].
//!
//! Why not the `redis` crate (reachable in the registry): the driver sends a few dozen
//! command shapes one at a time and needs bytes in, bytes out, explicit timeouts and the
//! server's own error text; `redis` would bring a connection manager, URL parsing, its own
//! value and error types and ~15 transitive crates to build on a shared 2-core machine for
//! that. The reply parser below is bounded (lengths checked, nesting limited) so a wrong or
//! hostile peer gives an error, never a panic or an unbounded allocation.

use pmkv_server::resp::Reply;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Longest bulk string accepted in a reply (a value is at most 16 MiB; a topology text or
/// `CLUSTER NODES` far less).
const MAX_BULK: usize = 64 << 20;
/// Most elements of one array in a reply.
const MAX_ARRAY: usize = 1 << 22;
/// Deepest nesting of arrays in a reply (`CLUSTER SHARDS` is 4 levels).
const MAX_DEPTH: usize = 16;

/// A connection to one node.
pub struct Conn {
    /// `host:port` as the user or the topology wrote it, for messages.
    pub addr: String,
    r: BufReader<TcpStream>,
}

/// Split `host:port` (the port after the last colon; `[v6]:port` keeps its brackets off).
pub fn split_addr(addr: &str) -> Result<(String, u16), String> {
    // The server's rule, so that the driver and the nodes read an address alike.
    pmkv_server::cluster::split_addr(addr)
        .map(|(h, p)| (h.to_string(), p))
        .ok_or_else(|| format!("{addr:?} is not host:port (a port from 1 to 65535)"))
}

impl Conn {
    /// Connect to `addr` (`host:port`) within `timeout`; every later read or write waits at
    /// most `io_timeout`.
    pub fn connect(addr: &str, timeout: Duration, io_timeout: Duration) -> Result<Conn, String> {
        let (host, port) = split_addr(addr)?;
        let addrs: Vec<_> =
            (host.as_str(), port).to_socket_addrs().map_err(|e| format!("{addr}: cannot resolve: {e}"))?.collect();
        let mut last = None;
        for sa in addrs {
            match TcpStream::connect_timeout(&sa, timeout) {
                Ok(s) => {
                    s.set_read_timeout(Some(io_timeout)).map_err(|e| format!("{addr}: {e}"))?;
                    s.set_write_timeout(Some(io_timeout)).map_err(|e| format!("{addr}: {e}"))?;
                    let _ = s.set_nodelay(true);
                    return Ok(Conn { addr: addr.to_string(), r: BufReader::new(s) });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(match last {
            Some(e) => format!("{addr}: cannot connect: {e}"),
            None => format!("{addr}: resolves to no address"),
        })
    }

    /// Send one command and read its reply; an error reply is `Ok(Reply::Error)`, a broken
    /// connection or a malformed reply `Err` (the connection is then of no further use).
    pub fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<Reply> {
        let mut b = Vec::with_capacity(64);
        b.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            let a = a.as_ref();
            b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            b.extend_from_slice(a);
            b.extend_from_slice(b"\r\n");
        }
        self.r.get_mut().write_all(&b)?;
        read_reply(&mut self.r, 0)
    }

    /// [`Conn::call`] where anything but a success is an error message naming the node and
    /// the command: `127.0.0.1:7001: CLUSTER SETSLOT 5 STABLE: ERR ...`.
    pub fn ok<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Reply, String> {
        let addr = self.addr.clone();
        let what = || {
            let words: Vec<String> =
                args.iter().take(6).map(|a| String::from_utf8_lossy(a.as_ref()).into_owned()).collect();
            let more = if args.len() > 6 { " ..." } else { "" };
            format!("{addr}: {}{more}", words.join(" "))
        };
        match self.call(args) {
            Ok(Reply::Error(e)) => Err(format!("{}: {e}", what())),
            Ok(r) => Ok(r),
            Err(e) => Err(format!("{}: {}", what(), io_text(&e))),
        }
    }
}

/// An I/O error as the one line a user reads.
fn io_text(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => "no reply in time".into(),
        io::ErrorKind::UnexpectedEof => "connection closed".into(),
        _ => e.to_string(),
    }
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

fn line(r: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut l = Vec::new();
    let n = r.by_ref().take(64 << 10).read_until(b'\n', &mut l)?;
    if n == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    if !l.ends_with(b"\r\n") {
        return Err(bad("reply line not ended by CRLF"));
    }
    l.truncate(l.len() - 2);
    Ok(l)
}

fn number(b: &[u8]) -> io::Result<i64> {
    std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()).ok_or_else(|| bad("malformed length or integer in reply"))
}

/// Read one reply (RESP2, and the RESP3 types a server might send anyway, flattened).
pub fn read_reply(r: &mut impl BufRead, depth: usize) -> io::Result<Reply> {
    if depth > MAX_DEPTH {
        return Err(bad("reply nested too deep"));
    }
    let l = line(r)?;
    let (&t, rest) = l.split_first().ok_or_else(|| bad("empty reply line"))?;
    let text = || String::from_utf8_lossy(rest).into_owned();
    Ok(match t {
        b'+' => Reply::Simple(text()),
        b'-' => Reply::Error(text()),
        b':' => Reply::Int(number(rest)?),
        b'_' => Reply::Nil,
        b'$' | b'=' => {
            let n = number(rest)?;
            if n < 0 {
                return Ok(Reply::Nil);
            }
            let n = n as usize;
            if n > MAX_BULK {
                return Err(bad("bulk reply too long"));
            }
            let mut b = vec![0u8; n + 2];
            r.read_exact(&mut b)?;
            if &b[n..] != b"\r\n" {
                return Err(bad("bulk reply not ended by CRLF"));
            }
            b.truncate(n);
            Reply::Bulk(b)
        }
        b'*' | b'~' | b'%' => {
            let n = number(rest)?;
            if n < 0 {
                return Ok(Reply::NilArray);
            }
            let n = n as usize * if t == b'%' { 2 } else { 1 };
            if n > MAX_ARRAY {
                return Err(bad("array reply too long"));
            }
            let mut v = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                v.push(read_reply(r, depth + 1)?);
            }
            Reply::Array(v)
        }
        _ => return Err(bad(format!("unexpected reply type {:?}", t as char))),
    })
}

/// A bulk or simple string reply as text.
pub fn as_text(r: &Reply) -> Option<String> {
    match r {
        Reply::Bulk(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Reply::Simple(s) => Some(s.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(b: &[u8]) -> io::Result<Reply> {
        read_reply(&mut BufReader::new(b), 0)
    }

    #[test]
    fn replies_parse_and_bad_input_is_an_error() {
        assert_eq!(parse(b"+OK\r\n").unwrap(), Reply::Simple("OK".into()));
        assert_eq!(parse(b"-ERR no\r\n").unwrap(), Reply::Error("ERR no".into()));
        assert_eq!(parse(b":-7\r\n").unwrap(), Reply::Int(-7));
        assert_eq!(parse(b"$-1\r\n").unwrap(), Reply::Nil);
        assert_eq!(parse(b"$3\r\na\r\n\r\n").unwrap(), Reply::Bulk(b"a\r\n".to_vec()));
        assert_eq!(
            parse(b"*2\r\n:1\r\n*1\r\n$1\r\nx\r\n").unwrap(),
            Reply::Array(vec![Reply::Int(1), Reply::Array(vec![Reply::Bulk(b"x".to_vec())])])
        );
        for b in [
            &b""[..],
            b"+OK",
            b"$5\r\nab\r\n",
            b"$2\r\nabcd",
            b":x\r\n",
            b"?\r\n",
            b"$99999999999\r\n",
            b"*99999999999\r\n",
        ] {
            assert!(parse(b).is_err(), "{:?}", String::from_utf8_lossy(b));
        }
        let deep = "*1\r\n".repeat(100);
        assert!(parse(deep.as_bytes()).is_err());
    }

    #[test]
    fn addresses_split_at_the_last_colon() {
        assert_eq!(split_addr("127.0.0.1:7001").unwrap(), ("127.0.0.1".into(), 7001));
        assert_eq!(split_addr("[::1]:7001").unwrap(), ("::1".into(), 7001));
        for bad in ["7001", "host:", ":7001", "h:0", "h:70000", "h:x"] {
            assert!(split_addr(bad).is_err(), "{bad}");
        }
    }
}
