//! Serving replicas (docs/design/replication.md, "pmkv as a primary"): a connection that
//! sent SYNC or PSYNC becomes a replica's link. A partial resynchronisation continues
//! from the backlog (`+CONTINUE`); otherwise a full one sends an RDB of every database,
//! made from a snapshot taken under the gate held exclusively, at the same instant as
//! the replica's place in the stream is registered ([`crate::repl_stream::Repl::attach_full`]).
//! Then the link's task copies the stream out of the backlog and reads the replica's
//! acknowledgements.
//!
//! Above the dispatcher's modules it uses (`rdb`, `dump`, `repl_stream`), below the
//! connection loop that hands it the socket.

use crate::conn::Conn;
use crate::keyspace::Tx;
use crate::rdb::{self, Entry};
use crate::resp::{self, Reply};
use crate::Shared;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a write to a replica may take before the link is taken for dead (Redis's
/// `repl-timeout`).
const REPL_TIMEOUT: Duration = Duration::from_secs(60);

fn reply_text(r: Reply) -> String {
    match r {
        Reply::Error(e) => e,
        other => format!("{other:?}"),
    }
}

/// Why this server does not serve a replica now (`None`: it does).
fn refusal(sh: &Shared) -> Option<&'static str> {
    if sh.cluster.is_some() {
        return Some("ERR pmkv does not serve replicas in cluster mode yet");
    }
    if sh.replica.is_replica() {
        return Some(
            "ERR pmkv does not serve replicas while it is itself a replica (chained replication is not built)",
        );
    }
    None
}

/// The keys of every database with their expiry times, and the function libraries, read under the gate held
/// exclusively, and the replica registered at the stream's offset of that instant; then
/// the RDB made of them (outside the gate). Refused, with the key named, when a key's
/// type has no RDB encoding yet: a replica must not silently miss keys.
fn snapshot(sh: &Shared, ip: String, port: u16) -> Result<(u64, String, u64, Vec<u8>), String> {
    let gate = sh.gate_write().map_err(reply_text)?;
    let mut dbs: Vec<(usize, Vec<Entry>)> = Vec::new();
    for db in 0..sh.databases() {
        let mut tx = Tx::new(&sh.store, sh.ks(db));
        let mut keys = Vec::new();
        tx.keys(std::ops::Bound::Unbounded, |k, _| {
            keys.push(k.to_vec());
            true
        })
        .map_err(reply_text)?;
        let mut entries = Vec::with_capacity(keys.len());
        for k in keys {
            let value = match crate::dump::value(&mut tx, &k) {
                Ok(Some(v)) => v,
                Ok(None) => continue,
                Err(r) => {
                    return Err(format!(
                        "cannot send key '{}' of database {db} in a full sync: {}",
                        String::from_utf8_lossy(&k),
                        reply_text(r)
                    ))
                }
            };
            let at = tx.expire_time(&k).map_err(reply_text)?.unwrap_or(0);
            entries.push(Entry { key: k, value, expire_ms: (at != 0).then_some(at) });
        }
        if !entries.is_empty() {
            dbs.push((db, entries));
        }
    }
    let functions = sh.functions.lock().unwrap_or_else(|e| e.into_inner()).codes();
    let (id, replid, offset) = sh.repl.attach_full(ip, port);
    drop(gate);
    let ctime = crate::keyspace::now_ms() / 1000;
    let refs: Vec<(usize, &[Entry])> = dbs.iter().map(|(db, e)| (*db, e.as_slice())).collect();
    let aux = [("redis-ver", "7.0.15"), ("redis-bits", "64"), ("ctime", &ctime.to_string()), ("aof-base", "0")];
    let aux: Vec<(&str, &str)> = aux.iter().map(|(k, v)| (*k, *v)).collect();
    Ok((id, replid, offset, rdb::write_file_dbs(&aux, &functions, &refs)))
}

async fn write(sock: &mut (impl AsyncWriteExt + Unpin), b: &[u8]) -> std::io::Result<()> {
    match tokio::time::timeout(REPL_TIMEOUT, sock.write_all(b)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the replica took no data for 60 s")),
    }
}

/// Serve the replica that sent `args` (SYNC, or PSYNC replid offset) on `sock`, until
/// its link ends. `pending`: what it sent after that command.
pub(crate) async fn serve(
    sh: &Shared,
    mut sock: tokio::net::TcpStream,
    c: &Conn,
    args: &[Vec<u8>],
    pending: Vec<u8>,
) -> std::io::Result<()> {
    let peer_ip = sock.peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    let ip = c.repl_ip.clone().unwrap_or(peer_ip);
    let port = c.repl_port;
    if let Some(why) = refusal(sh) {
        return write(&mut sock, format!("-{why}\r\n").as_bytes()).await;
    }
    let psync = args[0].eq_ignore_ascii_case(b"PSYNC");
    let wanted = if psync {
        let Some(off) = std::str::from_utf8(&args[2]).ok().and_then(|s| s.parse::<i64>().ok()) else {
            return write(&mut sock, b"-ERR value is not an integer or out of range\r\n").await;
        };
        Some((String::from_utf8_lossy(&args[1]).into_owned(), off))
    } else {
        None
    };
    let partial = wanted.and_then(|(replid, off)| sh.repl.attach_partial(&replid, off, ip.clone(), port));
    let id = match partial {
        Some((id, replid)) => {
            if let Err(e) = write(&mut sock, format!("+CONTINUE {replid}\r\n").as_bytes()).await {
                sh.repl.detach(id);
                return Err(e);
            }
            id
        }
        None => match tokio::task::block_in_place(|| snapshot(sh, ip.clone(), port)) {
            Err(why) => {
                eprintln!("pmkv serve: full sync for replica {ip}:{port} refused: {why}");
                return write(&mut sock, format!("-ERR {why}\r\n").as_bytes()).await;
            }
            Ok((id, replid, offset, rdb)) => {
                let mut head = if psync { format!("+FULLRESYNC {replid} {offset}\r\n") } else { String::new() };
                head.push_str(&format!("${}\r\n", rdb.len()));
                let sent = async {
                    write(&mut sock, head.as_bytes()).await?;
                    write(&mut sock, &rdb).await
                };
                if let Err(e) = sent.await {
                    sh.repl.detach(id);
                    return Err(e);
                }
                sh.repl.online(id);
                id
            }
        },
    };
    let r = stream(sh, sock, id, pending).await;
    sh.repl.detach(id);
    if let Err(e) = &r {
        eprintln!("pmkv serve: replica {ip}:{port} disconnected: {e}");
    }
    Ok(())
}

/// The link after the sync: the stream out, REPLCONF ACKs in.
async fn stream(sh: &Shared, sock: tokio::net::TcpStream, id: u64, mut inbuf: Vec<u8>) -> std::io::Result<()> {
    let (mut rd, mut wr) = sock.into_split();
    let mut tick = sh.repl.subscribe();
    let mut parser = resp::Parser::default();
    let limits = resp::Limits::default();
    loop {
        tick.borrow_and_update();
        loop {
            let chunk = sh.repl.take(id, 1 << 20).map_err(std::io::Error::other)?;
            if chunk.is_empty() {
                break;
            }
            write(&mut wr, &chunk).await?;
        }
        let mut used = 0;
        loop {
            match parser.parse(&inbuf[used..], &limits) {
                Ok((Some(a), n)) => {
                    used += n;
                    let ack =
                        a.len() >= 3 && a[0].eq_ignore_ascii_case(b"REPLCONF") && a[1].eq_ignore_ascii_case(b"ACK");
                    if let Some(off) = ack.then(|| std::str::from_utf8(&a[2]).ok()?.parse::<u64>().ok()).flatten() {
                        sh.repl.ack(id, off);
                    }
                }
                Ok((None, n)) => {
                    used += n;
                    break;
                }
                Err(m) => return Err(std::io::Error::other(format!("a protocol error from the replica: {m}"))),
            }
        }
        inbuf.drain(..used);
        if sh.stopping() {
            return Ok(());
        }
        inbuf.reserve(4096);
        tokio::select! {
            r = tick.changed() => if r.is_err() { return Ok(()) },
            r = rd.read_buf(&mut inbuf) => if r? == 0 {
                return Err(std::io::Error::other("the replica closed the link"));
            },
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
