//! RPC mode (SPEC M1): clients reach a [`Frontend`] over a socket.
//!
//! Framing is the runtime's, not the application's: each request and each response is a
//! 4-byte little-endian length and that many bytes (at most [`MAX_FRAME`]). A response
//! starts with one status byte: 0 = the application's response follows, 1 = an error
//! message follows (a request the application could not parse, or a failure to commit).
//! A write's response is sent only after its batch is durable, so a client that received
//! it may count on it surviving any crash. One thread per connection; requests of one
//! connection are answered in order. A malformed frame (too long) closes the connection.

use crate::callback::{Application, Frontend};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
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
