//! Moving keys between nodes: `MIGRATE` on the source, `PMKV.RESTORE` on the target.
//!
//! A key travels as its records (value or fields, and its meta record, docs/format/server.md),
//! so a hash or a key with an expiry time arrives whole. The expiry time is absolute wall-clock
//! time, as everywhere in the server: nodes' clocks are assumed in step (NTP), as Redis's
//! `RESTORE ... ABSTTL` assumes.

use crate::data::upper;
use crate::keyspace::{store_reply, Tx};
use crate::resp::Reply;
use crate::Shared;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// A parsed `MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw] [AUTH2 user pw] [KEYS k…]`.
struct Args<'a> {
    host: String,
    port: u16,
    timeout: Duration,
    copy: bool,
    replace: bool,
    auth: Vec<&'a [u8]>,
    keys: Vec<&'a [u8]>,
}

fn parse(a: &[Vec<u8>]) -> Result<Args<'_>, Reply> {
    let syntax = || Reply::err("ERR syntax error");
    let num = |b: &[u8]| std::str::from_utf8(b).ok().and_then(|t| t.parse::<u64>().ok());
    let port = num(&a[1]).and_then(|p| u16::try_from(p).ok()).filter(|&p| p != 0).ok_or_else(syntax)?;
    if num(&a[3]) != Some(0) {
        return Err(Reply::err("ERR pmkv serves database 0 only"));
    }
    let ms = num(&a[4]).ok_or_else(|| Reply::err("ERR timeout is not an integer or out of range"))?;
    let mut m = Args {
        host: String::from_utf8_lossy(&a[0]).into_owned(),
        port,
        timeout: Duration::from_millis(if ms == 0 { 1000 } else { ms }),
        copy: false,
        replace: false,
        auth: Vec::new(),
        keys: Vec::new(),
    };
    let mut i = 5;
    while i < a.len() {
        match upper(&a[i]).as_str() {
            "COPY" => m.copy = true,
            "REPLACE" => m.replace = true,
            "AUTH" if i + 1 < a.len() => {
                m.auth = vec![&a[i + 1]];
                i += 1;
            }
            "AUTH2" if i + 2 < a.len() => {
                m.auth = vec![&a[i + 1], &a[i + 2]];
                i += 2;
            }
            "KEYS" if a[2].is_empty() => {
                m.keys = a[i + 1..].iter().map(|k| k.as_slice()).collect();
                break;
            }
            "KEYS" => {
                return Err(Reply::err(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ))
            }
            _ => return Err(syntax()),
        }
        i += 1;
    }
    if !a[2].is_empty() {
        m.keys = vec![&a[2]];
    }
    Ok(m)
}

fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for x in args {
        out.extend_from_slice(format!("${}\r\n", x.len()).as_bytes());
        out.extend_from_slice(x);
        out.extend_from_slice(b"\r\n");
    }
}

/// Send the commands in `out` to the target and read one status reply for each:
/// `Ok(line)` for `+line`, `Err(line)` for `-line`.
fn exchange(m: &Args, out: &[u8], n: usize) -> std::io::Result<Vec<Result<String, String>>> {
    let addr = (m.host.as_str(), m.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no address"))?;
    let sock = TcpStream::connect_timeout(&addr, m.timeout)?;
    sock.set_read_timeout(Some(m.timeout))?;
    sock.set_write_timeout(Some(m.timeout))?;
    sock.set_nodelay(true)?;
    (&sock).write_all(out)?;
    let mut r = BufReader::new(&sock);
    let mut replies = Vec::with_capacity(n);
    let mut line = Vec::new();
    for _ in 0..n {
        line.clear();
        r.read_until(b'\n', &mut line)?;
        let text = String::from_utf8_lossy(line.strip_suffix(b"\r\n").unwrap_or(&line)).into_owned();
        match text.as_bytes().first() {
            Some(b'+') => replies.push(Ok(text[1..].to_string())),
            Some(b'-') => replies.push(Err(text[1..].to_string())),
            _ => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("unexpected reply {text:?} (is the target a pmkv node?)"),
                ))
            }
        }
    }
    Ok(replies)
}

/// `MIGRATE`: copy the keys to the target, then (unless COPY) delete here those the target
/// acknowledged. The gate is held exclusively throughout, so no command of this node reads
/// or writes a key between its copy and its delete; the target acknowledges a key only
/// once it is durable there. Replies `+OK`, `+NOKEY` when none of the keys exists, or an
/// error naming what failed (the keys not acknowledged stay here).
pub(crate) fn migrate(sh: &Shared, a: &[Vec<u8>]) -> Reply {
    let m = match parse(a) {
        Ok(m) => m,
        Err(r) => return r,
    };
    let _gate = match sh.gate_write() {
        Ok(g) => g,
        Err(r) => return r,
    };
    let mut payload = Vec::new();
    {
        let mut tx = Tx::new(&sh.store, sh.ks(0));
        for &k in &m.keys {
            match tx.records_of(k) {
                Ok(r) if r.is_empty() => {}
                Ok(r) => payload.push((k, r)),
                Err(e) => return e,
            }
        }
    }
    if payload.is_empty() {
        return Reply::Simple("NOKEY".into());
    }
    let mut out = Vec::new();
    let mut n = 0;
    if !m.auth.is_empty() {
        let mut args: Vec<&[u8]> = vec![b"AUTH"];
        args.extend(&m.auth);
        command(&mut out, &args);
        n += 1;
    }
    for (k, recs) in &payload {
        let mut args: Vec<&[u8]> = vec![b"PMKV.RESTORE", k, if m.replace { b"REPLACE" } else { b"NOREPLACE" }];
        for (rk, v) in recs {
            args.push(rk);
            args.push(v);
        }
        command(&mut out, &args);
        n += 1;
    }
    let replies = match exchange(&m, &out, n) {
        Ok(r) => r,
        Err(e) => return Reply::err(format!("IOERR error or timeout moving keys to target instance: {e}")),
    };
    let (auth, restored) = replies.split_at(n - payload.len());
    if let Some(Err(e)) = auth.first() {
        return Reply::err(format!("ERR Target instance replied with error: {e}"));
    }
    let mut first_err = None;
    let mut tx = Tx::new(&sh.store, sh.ks(0));
    for ((k, _), r) in payload.iter().zip(restored) {
        match r {
            Ok(_) if !m.copy => {
                if let Err(e) = tx.del(k) {
                    return e;
                }
            }
            Ok(_) => {}
            Err(e) => {
                first_err.get_or_insert_with(|| e.clone());
            }
        }
    }
    if let Err(e) = tx.commit() {
        return store_reply(e);
    }
    match first_err {
        Some(e) => Reply::err(format!("ERR Target instance replied with error: {e}")),
        None => Reply::ok(),
    }
}

/// `PMKV.RESTORE key REPLACE|NOREPLACE record-key value …` (sent by `MIGRATE`), run in `tx`.
pub(crate) fn restore(tx: &mut Tx, a: &[Vec<u8>]) -> Result<Reply, Reply> {
    let replace = match upper(&a[1]).as_str() {
        "REPLACE" => true,
        "NOREPLACE" => false,
        _ => return Err(Reply::err("ERR PMKV.RESTORE key REPLACE|NOREPLACE record-key value ...")),
    };
    if !(a.len() - 2).is_multiple_of(2) {
        return Err(Reply::err("ERR PMKV.RESTORE takes record keys and values in pairs"));
    }
    let recs: Vec<(Vec<u8>, Vec<u8>)> = a[2..].chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
    tx.restore(&a[0], &recs, replace)?;
    Ok(Reply::ok())
}
