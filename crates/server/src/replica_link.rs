//! The replica's side of Redis's replication protocol, against a real Redis primary: the
//! handshake (PING, REPLCONF listening-port, REPLCONF capa eof capa psync2, PSYNC ? -1),
//! the full sync (the RDB payload, length-prefixed or EOF-marked as a diskless primary
//! sends it, read with [`crate::rdb::read_file`] into the pool), then the command stream,
//! applied through the same dispatcher as clients' commands, answering REPLCONF GETACK
//! and acknowledging the offset every second.
//!
//! One thread per link, blocking I/O with a one-second read timeout so a REPLICAOF that
//! replaces the link (the generation moves) or a shutdown is seen within a second. It
//! holds the server weakly: a stopping server is not kept alive by its link. A link that
//! breaks is retried after a second: with `PSYNC replid offset+1` when this link (same
//! REPLICAOF, same process) completed a sync, so that a primary holding that part of
//! its stream in its backlog continues it (`+CONTINUE`); else with a full sync. After a
//! restart it is always a full sync (the durable offset may lag the data).

use crate::commands::{self, Conn};
use crate::keyspace::{Tx, REPLICA_KEY};
use crate::replica::{self, LinkState, Record};
use crate::resp::{Limits, Parser};
use crate::Shared;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Start the link of generation `gen` (called by REPLICAOF).
pub(crate) fn spawn(sh: &Shared, gen: u64) {
    let me = sh.me.clone();
    let _ = std::thread::Builder::new().name("pmkv-replica".into()).spawn(move || run(me, gen));
}

fn run(me: Weak<Shared>, gen: u64) {
    // The primary's replication ID once a sync completed on this link: the keyspace is
    // then exactly its stream up to `replica.offset`, which a partial resync continues.
    // With it, the database the stream last SELECTed: a continued stream goes on in it.
    let mut synced: Option<(String, usize)> = None;
    loop {
        let Some(sh) = me.upgrade() else { return };
        if !sh.replica.current(gen) || sh.stopping() {
            return;
        }
        let Some(p) = sh.replica.primary() else { return };
        drop(sh);
        let r = link(&me, gen, &p.host, p.port, &mut synced);
        let Some(sh) = me.upgrade() else { return };
        sh.replica.update(gen, |p| p.state = LinkState::Connect);
        if let Err(e) = r {
            if sh.replica.current(gen) {
                eprintln!("pmkv serve: replication link to {}:{} broke: {e}", p.host, p.port);
            }
        }
        drop(sh);
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn io_err(msg: impl Into<String>) -> std::io::Error {
    std::io::Error::other(msg.into())
}

fn send(w: &mut TcpStream, args: &[&[u8]]) -> std::io::Result<()> {
    let mut b = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        b.extend_from_slice(a);
        b.extend_from_slice(b"\r\n");
    }
    w.write_all(&b)
}

/// One reply line (a status or an error), skipping the bare newlines a primary sends to
/// keep the link alive while it prepares the RDB.
fn line(r: &mut BufReader<TcpStream>) -> std::io::Result<String> {
    loop {
        let mut l = String::new();
        if r.read_line(&mut l)? == 0 {
            return Err(io_err("the primary closed the link"));
        }
        let l = l.trim_end();
        if !l.is_empty() {
            return Ok(l.to_string());
        }
    }
}

fn expect_ok(r: &mut BufReader<TcpStream>, what: &str) -> std::io::Result<()> {
    let l = line(r)?;
    if l.starts_with('-') {
        return Err(io_err(format!("the primary refused {what}: {l}")));
    }
    Ok(())
}

/// One link: handshake, full sync, then the stream until it breaks or is replaced.
fn link(
    me: &Weak<Shared>,
    gen: u64,
    host: &str,
    port: u16,
    synced: &mut Option<(String, usize)>,
) -> std::io::Result<()> {
    let upgrade = || me.upgrade().ok_or_else(|| io_err("the server stopped"));
    let sh = upgrade()?;
    sh.replica.update(gen, |p| p.state = LinkState::Connecting);
    let my_port = sh.port.to_string();
    drop(sh);
    let mut w = TcpStream::connect((host, port))?;
    w.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut r = BufReader::new(w.try_clone()?);
    send(&mut w, &[b"PING"])?;
    expect_ok(&mut r, "PING")?;
    send(&mut w, &[b"REPLCONF", b"listening-port", my_port.as_bytes()])?;
    expect_ok(&mut r, "REPLCONF listening-port")?;
    send(&mut w, &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])?;
    expect_ok(&mut r, "REPLCONF capa")?;
    match synced.clone() {
        Some((replid, _)) => {
            let next = (upgrade()?.replica.offset.load(Ordering::SeqCst) + 1).to_string();
            send(&mut w, &[b"PSYNC", replid.as_bytes(), next.as_bytes()])?;
        }
        None => send(&mut w, &[b"PSYNC", b"?", b"-1"])?,
    }
    let l = line(&mut r)?;
    if let Some(rest) = l.strip_prefix("+CONTINUE") {
        // The primary continues its stream from our offset: nothing to load.
        let replid = rest.trim();
        let sh = upgrade()?;
        let Some(now) = synced.as_mut() else { return Err(io_err("+CONTINUE to a full sync request")) };
        if !replid.is_empty() {
            now.0 = replid.to_string();
        }
        let id = now.0.clone();
        sh.replica.update(gen, |p| {
            p.state = LinkState::Connected;
            p.replid = id;
            p.last_io = Instant::now();
        });
        let offset = sh.replica.offset.load(Ordering::SeqCst);
        drop(sh);
        return stream(me, gen, r, w, offset, synced);
    }
    // A full sync replaces the keyspace: until it completes, nothing to continue.
    *synced = None;
    let mut parts = l.split(' ');
    let (Some("+FULLRESYNC"), Some(replid), Some(offset)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(io_err(format!("the primary answered PSYNC with {l}")));
    };
    let offset: u64 = offset.parse().map_err(|_| io_err(format!("a bad offset in {l}")))?;
    upgrade()?.replica.update(gen, |p| {
        p.state = LinkState::Sync;
        p.replid = replid.to_string();
    });
    let rdb = read_payload(&mut r)?;
    let sh = upgrade()?;
    let rec = Record { host: host.to_string(), port, replid: replid.to_string(), offset, syncing: true };
    load(&sh, gen, &rdb, rec)?;
    sh.replica.offset.store(offset, Ordering::SeqCst);
    *synced = Some((replid.to_string(), 0));
    sh.replica.update(gen, |p| {
        p.state = LinkState::Connected;
        p.last_io = Instant::now();
    });
    drop(sh);
    stream(me, gen, r, w, offset, synced)
}

/// The RDB after FULLRESYNC: `$<len>\r\n` and that many bytes, or (a diskless primary,
/// since we sent `capa eof`) `$EOF:<40 bytes>\r\n`, the payload and the same 40 bytes.
fn read_payload(r: &mut BufReader<TcpStream>) -> std::io::Result<Vec<u8>> {
    let head = line(r)?;
    let Some(spec) = head.strip_prefix('$') else { return Err(io_err(format!("expected the RDB, got {head}"))) };
    if let Some(mark) = spec.strip_prefix("EOF:") {
        let mark = mark.as_bytes();
        if mark.len() != 40 {
            return Err(io_err("a bad EOF mark"));
        }
        let mut data = Vec::new();
        let mut chunk = vec![0u8; 64 << 10];
        while !data.ends_with(mark) {
            let n = r.read(&mut chunk)?;
            if n == 0 {
                return Err(io_err("the primary closed the link during the sync"));
            }
            data.extend_from_slice(&chunk[..n]);
        }
        data.truncate(data.len() - 40);
        Ok(data)
    } else {
        let n: usize = spec.parse().map_err(|_| io_err(format!("a bad RDB length {head}")))?;
        let mut data = vec![0u8; n];
        r.read_exact(&mut data)?;
        Ok(data)
    }
}

/// Replace the whole keyspace with the RDB's keys: under the gate held exclusively, so no
/// client sees the store half loaded; written in batches of 1024 keys. A crash (SIGKILL,
/// power loss) can stop it between batches, so the pool says so: the replication record
/// `rec`, with its sync-in-progress flag, is made durable before the first key is
/// deleted, and written with the flag cleared in the batch of the last keys. A restart
/// that finds the flag set knows the keyspace is a partial copy and refuses to serve it
/// (`replica::refuse`) until a sync finishes.
fn load(sh: &Shared, gen: u64, rdb: &[u8], mut rec: Record) -> std::io::Result<()> {
    let (_aux, entries, functions) =
        crate::rdb::read_file_with_functions(rdb).map_err(|e| io_err(format!("the primary's RDB: {e}")))?;
    let _gate = sh.gate_write().map_err(|_| io_err("a script is busy"))?;
    if !sh.replica.begin_sync(gen) {
        return Err(io_err("REPLICAOF replaced the link during the sync"));
    }
    let store_err = |e: pmkv::Error| io_err(format!("loading the RDB: {e}"));
    replica::save(&sh.store, sh.ks(0), Some(&rec)).map_err(store_err)?;
    for ks in sh.all_dbs() {
        Tx::flush_all(&sh.store, ks, 1024).map_err(store_err)?;
    }
    // The primary's function libraries replace ours (kept in the pool by FUNCTION
    // RESTORE, as a client's would be).
    let payload = crate::rdb::with_footer(crate::rdb::write_functions(functions.iter().map(Vec::as_slice)));
    if let crate::resp::Reply::Error(e) =
        crate::script::function(sh, &[b"RESTORE".to_vec(), payload, b"FLUSH".to_vec()])
    {
        return Err(io_err(format!("loading the primary's functions: {e}")));
    }
    // Each key into its database (a key of a database this server lacks: an error, as
    // a Redis replica with fewer databases refuses the RDB).
    if let Some((db, _)) = entries.iter().find(|(db, _)| *db as usize >= sh.databases()) {
        return Err(io_err(format!(
            "the primary's RDB has a key in database {db}; this server has {}",
            sh.databases()
        )));
    }
    let now = crate::keyspace::now_ms();
    rec.syncing = false;
    let batches = entries.len().div_ceil(1024).max(1);
    for (i, batch) in entries.chunks(1024).chain(entries.is_empty().then_some(&entries[..])).enumerate() {
        let mut txs: Vec<Tx> = sh.all_dbs().iter().map(|ks| Tx::new(&sh.store, ks)).collect();
        for (db, e) in batch {
            let tx = &mut txs[sh.phys_db(*db as usize)];
            // A key already expired on arrival is not loaded (as a Redis replica does).
            let at = e.expire_ms.unwrap_or(0);
            if at != 0 && at <= now {
                continue;
            }
            crate::dump::put(tx, &e.key, &e.value, at).map_err(|r| io_err(format!("loading the RDB: {r:?}")))?;
        }
        if i + 1 == batches {
            txs[0].put_server_record(REPLICA_KEY, rec.encode());
        }
        txs.retain(|tx| !tx.is_empty());
        Tx::commit_all(txs).map_err(store_err)?;
    }
    sh.replica.set_partial(false);
    Ok(())
}

/// Apply the primary's command stream, counting its bytes into the offset.
fn stream(
    me: &Weak<Shared>,
    gen: u64,
    mut r: BufReader<TcpStream>,
    mut w: TcpStream,
    mut offset: u64,
    synced: &mut Option<(String, usize)>,
) -> std::io::Result<()> {
    w.set_read_timeout(Some(Duration::from_secs(1)))?;
    let mut c = Conn::new(0, true);
    c.from_primary = true;
    c.db = synced.as_ref().map_or(0, |s| s.1);
    let mut parser = Parser::default();
    let limits = Limits::default();
    let mut buf: Vec<u8> = Vec::new();
    // Bytes of a command still arriving (the parser holds them).
    let mut partial = 0u64;
    let mut last_ack = Instant::now();
    let (mut saved, mut last_save) = (offset, Instant::now());
    let ack = |w: &mut TcpStream, off: u64| send(w, &[b"REPLCONF", b"ACK", off.to_string().as_bytes()]);
    loop {
        let sh: Arc<Shared> = me.upgrade().ok_or_else(|| io_err("the server stopped"))?;
        if !sh.replica.current(gen) || sh.stopping() {
            return Ok(());
        }
        let mut used = 0;
        loop {
            match parser.parse(&buf[used..], &limits) {
                Ok((Some(args), n)) => {
                    used += n;
                    let bytes = std::mem::take(&mut partial) + n as u64;
                    if args.is_empty() {
                        offset += bytes;
                        continue;
                    }
                    if args[0].eq_ignore_ascii_case(b"REPLCONF") {
                        // GETACK: the offset before this command, as Redis acknowledges it.
                        if args.get(1).is_some_and(|a| a.eq_ignore_ascii_case(b"GETACK")) {
                            ack(&mut w, offset)?;
                        }
                    } else {
                        let _ = commands::run(&sh, &mut c, &args);
                        if let Some(s) = synced.as_mut() {
                            s.1 = c.db;
                        }
                    }
                    offset += bytes;
                    sh.replica.offset.store(offset, Ordering::SeqCst);
                }
                Ok((None, n)) => {
                    used += n;
                    partial += n as u64;
                    break;
                }
                Err(m) => return Err(io_err(format!("a protocol error in the primary's stream: {m}"))),
            }
        }
        buf.drain(..used);
        if last_ack.elapsed() >= Duration::from_secs(1) {
            ack(&mut w, offset)?;
            last_ack = Instant::now();
        }
        if offset != saved && last_save.elapsed() >= replica::OFFSET_SAVE_EVERY {
            save_offset(&sh, gen, offset).map_err(|e| io_err(format!("saving the replication offset: {e}")))?;
            saved = offset;
            last_save = Instant::now();
        }
        drop(sh);
        let mut chunk = [0u8; 16 << 10];
        match r.read(&mut chunk) {
            Ok(0) => return Err(io_err("the primary closed the link")),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if let Some(sh) = me.upgrade() {
                    sh.replica.update(gen, |p| p.last_io = Instant::now());
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Advance the offset in the replication record (a standalone write; see
/// [`replica::OFFSET_SAVE_EVERY`] for why not in each command's batch). Under the gate
/// shared: not beside a full sync's load or a FLUSHALL, which hold it exclusively.
fn save_offset(sh: &Shared, gen: u64, offset: u64) -> pmkv::Result<()> {
    let Ok(_gate) = sh.gate_read() else { return Ok(()) };
    sh.replica.save_offset(gen, &sh.store, sh.ks(0), offset)
}
