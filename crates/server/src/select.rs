//! Redis's numbered databases: SELECT, SWAPDB, MOVE, COPY … DB, FLUSHALL and the
//! `# Keyspace` lines of INFO.
//!
//! Each physical database is a [`Keyspace`] of its own, whose records carry the prefix
//! [`crate::record::db_prefix`] (none for DB 0: docs/format/server.md). A connection
//! names a *logical* database ([`crate::conn::Conn::db`]); SWAPDB swaps two logical
//! databases by changing the map from logical to physical, one 16-byte record
//! ([`DB_MAP_KEY`]) written in one engine write, so a swap is atomic and durable without
//! moving a record (docs/design/front-ends.md).

use crate::conn::Conn;
use crate::data::int;
use crate::keyspace::{allowed, reserved, store_reply, Keyspace, Tx, DATABASES, DB_MAP_KEY};
use crate::resp::Reply;
use crate::Shared;
use pmkv::Store;
use std::sync::atomic::{AtomicU8, Ordering};

/// The logical → physical map as the pool holds it (the identity when absent, and in a
/// cluster pool, which has only DB 0).
pub(crate) fn load_map(s: &Store, cluster: bool) -> Result<[AtomicU8; DATABASES], String> {
    let map: [AtomicU8; DATABASES] = std::array::from_fn(|i| AtomicU8::new(i as u8));
    if cluster {
        return Ok(map);
    }
    let Some(v) = s.get(DB_MAP_KEY).map_err(|e| format!("reading the database map: {e}"))? else { return Ok(map) };
    let mut seen = [false; DATABASES];
    if v.len() != DATABASES
        || v.iter().any(|&p| (p as usize) >= DATABASES || std::mem::replace(&mut seen[p as usize], true))
    {
        return Err("a malformed pmkv serve database map record (SWAPDB): not a permutation of 0..15".into());
    }
    for (m, p) in map.iter().zip(v) {
        m.store(p, Ordering::Relaxed);
    }
    Ok(map)
}

/// A database number argument: `Err` with Redis's reply for a non-number (`not_int`) or a
/// number out of range.
fn db_index(sh: &Shared, b: &[u8], not_int: &str) -> Result<usize, Reply> {
    let n = int(b).ok_or_else(|| Reply::err(not_int))?;
    usize::try_from(n).ok().filter(|&n| n < sh.databases()).ok_or_else(|| Reply::err("ERR DB index is out of range"))
}

/// SELECT db: this connection's database from now on.
pub(crate) fn select(sh: &Shared, c: &mut Conn, a: &[Vec<u8>]) -> Reply {
    if sh.cluster.is_some() && int(&a[0]) != Some(0) {
        return Reply::err("ERR SELECT is not allowed in cluster mode");
    }
    match db_index(sh, &a[0], "ERR value is not an integer or out of range") {
        Ok(n) => {
            if n != c.db {
                // A SCAN cursor names a place in one database's records.
                c.cursors.clear();
            }
            c.db = n;
            Reply::ok()
        }
        Err(r) => r,
    }
}

/// SWAPDB a b: the two logical databases trade their data, for every connection. The
/// caller holds the gate exclusively (no command runs meanwhile). As Redis, clients that
/// WATCHed a key in either database fail their EXEC (any key they watch there, not only
/// one that exists: a stricter rule than Redis's, never a looser one).
pub(crate) fn swapdb(sh: &Shared, a: &[Vec<u8>]) -> Reply {
    if sh.cluster.is_some() {
        return Reply::err("ERR SWAPDB is not allowed in cluster mode");
    }
    let x = match db_index(sh, &a[0], "ERR invalid first DB index") {
        Ok(x) => x,
        Err(r) => return r,
    };
    let y = match db_index(sh, &a[1], "ERR invalid second DB index") {
        Ok(y) => y,
        Err(r) => return r,
    };
    let mut next = sh.db_map_now();
    next.swap(x, y);
    let identity = next.iter().enumerate().all(|(i, &p)| p as usize == i);
    // One engine write: the swap is in the pool whole or not at all.
    let w = if identity { sh.store.delete(DB_MAP_KEY).map(drop) } else { sh.store.put(DB_MAP_KEY, &next) };
    if let Err(e) = w {
        return store_reply(e);
    }
    sh.set_db_map(next);
    for ks in [sh.ks(x), sh.ks(y)] {
        ks.touch_all();
    }
    Reply::ok()
}

/// MOVE key db: the destination database, or the error reply.
pub(crate) fn move_target(sh: &Shared, c: &Conn, a: &[Vec<u8>]) -> Result<usize, Reply> {
    if sh.cluster.is_some() {
        return Err(Reply::err("ERR MOVE is not allowed in cluster mode"));
    }
    let dst = db_index(sh, &a[1], "ERR value is not an integer or out of range")?;
    if dst == c.db {
        return Err(Reply::err("ERR source and destination objects are the same"));
    }
    Ok(dst)
}

/// MOVE key db: `key` from this connection's database to `db`, when it is absent there
/// (1) — else nothing (0). Both databases' writes are one atomic batch.
pub(crate) fn move_key(sh: &Shared, c: &Conn, a: &[Vec<u8>]) -> Reply {
    match move_target(sh, c, a) {
        Ok(dst) => transfer(sh, (c.db, b"MOVE", a), sh.ks(dst), &a[0], &a[0], false, true),
        Err(r) => r,
    }
}

/// COPY src dst DB db [REPLACE] into another database (the copy in the same database is
/// [`crate::data`]'s). `a` are COPY's arguments; `in_exec`: run by EXEC. `None`: a copy
/// within this database, for the data commands.
pub(crate) fn copy_to_db(sh: &Shared, c: &Conn, a: &[Vec<u8>], in_exec: bool) -> Option<Reply> {
    let (mut db, mut replace, mut i) = (None, false, 2);
    while i < a.len() {
        match crate::data::upper(&a[i]).as_str() {
            "REPLACE" => replace = true,
            "DB" if i + 1 < a.len() => {
                db = Some(match db_index(sh, &a[i + 1], "ERR value is not an integer or out of range") {
                    Ok(d) => d,
                    Err(r) => return Some(r),
                });
                i += 1;
            }
            _ => return Some(Reply::err("ERR syntax error")),
        }
        i += 1;
    }
    let dst = db.filter(|&d| d != c.db)?;
    if in_exec {
        // Inside EXEC (the gate held): the one place a copy between databases is refused.
        return Some(Reply::err("ERR pmkv runs COPY … DB into another database outside MULTI only"));
    }
    Some(transfer(sh, (c.db, b"COPY", a), sh.ks(dst), &a[0], &a[1], replace, false))
}

/// Write `src`'s records (from `from`) as `dst` in `to`, replacing `dst` when `replace`,
/// deleting `src` when `remove` (MOVE): 1 done, 0 when `src` is absent or `dst` exists.
/// `cmd`: the source's logical database and the command (name, arguments), which goes
/// to replicas when it did something, still under the keys' locks.
fn transfer(
    sh: &Shared,
    cmd: (usize, &[u8], &[Vec<u8>]),
    to: &Keyspace,
    src: &[u8],
    dst: &[u8],
    replace: bool,
    remove: bool,
) -> Reply {
    let from = sh.ks(cmd.0);
    if !allowed(src) || !allowed(dst) {
        return reserved();
    }
    let _gate = match sh.gate_read() {
        Ok(g) => g,
        Err(r) => return r,
    };
    let _locks = sh.lock(&[src, dst]);
    let (mut tx, mut into) = (Tx::new(&sh.store, from), Tx::new(&sh.store, to));
    match tx.transfer(&mut into, src, dst, replace, remove) {
        Ok(done) => match Tx::commit_all(vec![tx, into]) {
            Ok(()) => {
                if done {
                    let mut args = vec![cmd.1.to_vec()];
                    args.extend(cmd.2.iter().cloned());
                    sh.repl.feed(vec![(cmd.0, args)], false);
                }
                Reply::Int(i64::from(done))
            }
            Err(e) => store_reply(e),
        },
        Err(r) => r,
    }
}

/// FLUSHALL: every database emptied (the caller holds the gate exclusively).
pub(crate) fn flush_all(sh: &Shared) -> pmkv::Result<()> {
    for ks in sh.all_dbs() {
        Tx::flush_all(&sh.store, ks, 1024)?;
    }
    Ok(())
}

/// INFO's `# Keyspace` section: a `dbN:keys=…,expires=…,avg_ttl=0` line per logical
/// database that has keys, as Redis writes it.
pub(crate) fn info_keyspace(sh: &Shared) -> String {
    let mut b = String::new();
    for db in 0..sh.databases() {
        if let Ok(keys) = sh.db_size(db) {
            if keys > 0 {
                let expires = sh.ks(db).expiring();
                b.push_str(&format!("db{db}:keys={keys},expires={expires},avg_ttl=0\r\n"));
            }
        }
    }
    b
}
