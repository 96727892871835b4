//! RPC mode (SPEC M1): clients reach a [`Frontend`] over a socket.
//!
//! Framing is the runtime's, not the application's: each request and each response is a
//! 4-byte little-endian length and that many bytes (at most [`MAX_FRAME`]). A response
//! starts with one status byte: 0 = the application's response follows, 1 = an error
//! message follows (a request the application could not parse, or a failure to commit).
//! A write's response is sent only after its batch is durable, so a client that received
//! it may count on it surviving any crash. One thread per connection; requests of one
//! connection are answered in order. A malformed frame (too long) closes the connection.
//!
//! [`serve`] is the server side; [`RpcClient`] the client side for Rust programs (others
//! speak the framing themselves, e.g. with [`read_frame`] and [`write_frame`]).

use crate::callback::{Application, Frontend};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;

/// Largest request or response frame.
pub const MAX_FRAME: usize = 1 << 20;

/// Read one frame; `None` at a clean end of stream.
pub fn read_frame(s: &mut impl Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let n = u32::from_le_bytes(len) as usize;
    if n > MAX_FRAME {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("frame of {n} bytes")));
    }
    let mut b = vec![0u8; n];
    s.read_exact(&mut b)?;
    Ok(Some(b))
}

/// Write one frame.
pub fn write_frame(s: &mut impl Write, b: &[u8]) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(4 + b.len());
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
    s.write_all(&out)
}

/// Serve `frontend` on `listener` until the listener fails (one thread per connection).
pub fn serve<A: Application>(listener: TcpListener, frontend: Arc<Frontend<A>>) -> std::io::Result<()> {
    for conn in listener.incoming() {
        let conn = conn?;
        let f = frontend.clone();
        std::thread::spawn(move || {
            let _ = connection(conn, &f);
        });
    }
    Ok(())
}

fn connection<A: Application>(mut s: TcpStream, f: &Frontend<A>) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    let mut client = f.app().init_client();
    let r = (|| {
        while let Some(req) = read_frame(&mut s)? {
            let resp = match f.handle(&mut client, &req) {
                Ok(Ok(r)) => [&[0u8][..], &r].concat(),
                Ok(Err(e)) => [&[1u8][..], e.as_bytes()].concat(),
                Err(e) => [&[1u8][..], e.to_string().as_bytes()].concat(),
            };
            write_frame(&mut s, &resp)?;
        }
        Ok(())
    })();
    f.app().destroy_client(client);
    r
}

/// A client of a [`serve`]d frontend: one connection, one request at a time.
pub struct RpcClient {
    stream: TcpStream,
}

impl RpcClient {
    /// Connect to a server (Nagle off: a request is one small frame that waits for its
    /// answer).
    pub fn connect(addr: impl ToSocketAddrs) -> std::io::Result<RpcClient> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Ok(RpcClient { stream })
    }

    /// Send `request` and wait for its response: `Ok(Ok(bytes))` is the application's
    /// response (for a write, sent only once its batch is durable), `Ok(Err(message))`
    /// the server's refusal (an unparsable request, a failed commit). An I/O error —
    /// the server gone mid-request included — leaves the request's fate unknown: it may
    /// have been committed.
    pub fn call(&mut self, request: &[u8]) -> std::io::Result<std::result::Result<Vec<u8>, String>> {
        write_frame(&mut self.stream, request)?;
        let resp = read_frame(&mut self.stream)?.ok_or(std::io::ErrorKind::UnexpectedEof)?;
        match resp.split_first() {
            Some((0, body)) => Ok(Ok(body.to_vec())),
            Some((1, msg)) => Ok(Err(String::from_utf8_lossy(msg).into_owned())),
            _ => Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "response without a valid status byte")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::KvApp;
    use crate::runtime::{Mangosteen, Options};
    use std::sync::Arc;

    #[test]
    fn m1_a_client_gets_responses_and_refusals_over_the_socket() {
        let pool = pmkv_substrate::Pool::create_sim("mangosteen", &pmkv_testutil::sim_opts(8 << 20)).unwrap();
        let m = Mangosteen::open(Arc::new(pool), Options { region_size: 64 << 10, ..Options::default() }).unwrap();
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let fe = Arc::new(Frontend::new(KvApp, m));
        std::thread::spawn(move || serve(listener, fe));
        let mut c = RpcClient::connect(("127.0.0.1", port)).unwrap();
        let set = [&b"S"[..], &7u64.to_le_bytes(), &42u64.to_le_bytes()].concat();
        assert_eq!(c.call(&set).unwrap(), Ok(b"OK".to_vec()));
        assert_eq!(c.call(&[&b"G"[..], &7u64.to_le_bytes()].concat()).unwrap(), Ok(42u64.to_le_bytes().to_vec()));
        assert_eq!(c.call(b"N").unwrap(), Ok(1u64.to_le_bytes().to_vec()));
        let refused = c.call(b"X").unwrap().unwrap_err();
        assert!(refused.contains("bad request"), "{refused}");
    }
}
