//! Dispatch: every request is checked against the command table ([`crate::table`]) before
//! anything runs; connection and server commands are answered here; data commands run in
//! [`crate::data`] over a [`Tx`] whose writes are applied as one atomic batch.
//!
//! Isolation. A data command takes the stripe locks of its keys (sorted, so two never
//! deadlock) for its whole read-modify-write, and the server's gate shared; EXEC, EVAL and
//! FLUSHDB take the gate exclusively, so no other command sees them half done and they
//! see no other command half done, as Redis's single thread gives. A reply to a write is
//! sent only after its batch was applied, i.e. after the writes are persistent in the
//! pool's mode.
//!
//! Transactions (MULTI/EXEC/DISCARD/WATCH/UNWATCH) follow Redis: queued commands are
//! checked at once (an unknown command or a wrong argument count fails the whole EXEC
//! with EXECABORT, and nothing is applied); at EXEC they run in order as one isolated
//! unit, each command's runtime error is its own reply while the others apply; a write to
//! a WATCHed key by anyone else since WATCH makes EXEC answer a null array. What EXEC
//! applies is one atomic engine batch: after a crash all of it is there or none.

use crate::command::Command;
pub use crate::conn::Conn;
use crate::data::{self, int, upper, Ctx, OVER_LIMIT};
use crate::keyspace::{allowed, reserved, store_reply, Tx};
use crate::resp::Reply;
use crate::routing::{misrouted, route_keys};
use crate::table;
use crate::Shared;
use pmkv::Store;
use std::sync::atomic::Ordering;

/// What the connection loop must do after a reply.
pub enum After {
    Continue,
    Close,
    Shutdown,
    /// SYNC/PSYNC: the connection becomes a replica's link (`primary::serve`).
    Replicate,
}

fn store_err(e: pmkv::Error) -> Reply {
    store_reply(e)
}

/// Glob match as Redis's KEYS/SCAN MATCH: `*`, `?`, `[...]`, `\\` escapes (see
/// [`crate::glob`]: iterative, no recursion, O(|pattern| × |key|)).
pub fn glob(p: &[u8], s: &[u8]) -> bool {
    crate::glob::glob(p, s)
}

/// The reply when a reply being built would pass the client's output-buffer hard limit:
/// the client is told why and disconnected (Redis disconnects it silently), and the
/// server never holds the rest of that reply.
fn over_output_limit(sh: &Shared) -> (Reply, After) {
    sh.output_limit_closes.fetch_add(1, Ordering::Relaxed);
    (
        Reply::err(format!(
            "ERR reply exceeds client-output-buffer-limit hard limit ({} bytes): closing the connection",
            sh.output.hard
        )),
        After::Close,
    )
}

/// Whether `args` may take long enough (a walk over the store, or many keys) that it
/// must not run on a worker the other connections need: the connection loop runs such
/// commands with `tokio::task::block_in_place`, which hands the worker's other tasks to
/// another thread first, so a KEYS over a large store does not stall PING elsewhere.
pub fn may_take_long(args: &[Vec<u8>]) -> bool {
    const LONG: [&[u8]; 26] = [
        // Blocking pops wait for a push or their timeout.
        b"BZPOPMIN",
        b"BZPOPMAX",
        b"BZMPOP",
        b"BLPOP",
        b"BRPOP",
        b"BLMOVE",
        b"BRPOPLPUSH",
        b"BLMPOP",
        b"KEYS",
        b"SCAN",
        b"FLUSHDB",
        b"FLUSHALL",
        b"PMKV.RANGE",
        b"INFO",
        b"DBSIZE",
        b"EXEC",
        b"HGETALL",
        b"EVAL",
        b"EVALSHA",
        b"EVAL_RO",
        b"EVALSHA_RO",
        // A function runs as long as a script (a worker it held would leave the
        // connections queued behind it unanswered, not even BUSY).
        b"FCALL",
        b"FCALL_RO",
        // A network round trip to another node, and walks over a slot.
        b"MIGRATE",
        b"CLUSTER",
        // Waits for replicas' acknowledgements.
        b"WAIT",
    ];
    args.len() > 16 || args.first().is_some_and(|c| LONG.iter().any(|l| c.eq_ignore_ascii_case(l)))
}

/// Whether `cmd` runs in a [`Tx`] ([`crate::data`]): the data commands but the walks
/// that read the store as it is (DBSIZE, PMKV.RANGE) and those with their own isolation.
fn in_tx(cmd: &Command) -> bool {
    cmd.data() && !matches!(cmd.name, "PMKV.RANGE" | "DBSIZE" | "FLUSHDB" | "FLUSHALL" | "MOVE" | "SWAPDB")
}

/// One command as an entry of Redis's `COMMAND` reply.
fn command_info(cmd: &Command) -> Reply {
    let movable =
        cmd.keys.numkeys > 0 || matches!(cmd.name, "EVAL" | "EVALSHA" | "EVAL_RO" | "EVALSHA_RO" | "PMKV.RANGE");
    let flags = if movable { vec![Reply::Simple("movablekeys".into())] } else { Vec::new() };
    Reply::Array(vec![
        Reply::bulk(cmd.name.to_ascii_lowercase().into_bytes()),
        Reply::Int(cmd.arity as i64),
        Reply::Array(flags),
        Reply::Int(cmd.keys.first as i64),
        Reply::Int(cmd.keys.last as i64),
        Reply::Int(cmd.keys.step as i64),
        Reply::Array(Vec::new()),
    ])
}

/// Run one command, and count it (`INFO commandstats`).
pub fn run(sh: &Shared, c: &mut Conn, args: &[Vec<u8>]) -> (Reply, After) {
    let t = std::time::Instant::now();
    c.current = None;
    let (r, after) = run_uncounted(sh, c, args);
    if sh.repl.on() {
        // WAIT waits for what was streamed up to this command (its writes among it).
        c.woff = sh.repl.end();
    }
    if let Reply::Error(e) = &r {
        sh.stats.error_reply(e);
    }
    // Clients blocked on the lists this command pushed to are served before its reply.
    crate::blocking::serve(sh);
    if let Some(cmd) = c.current.take() {
        // Queued inside MULTI is not a call yet: EXEC counts it when it runs.
        if !matches!(&r, Reply::Simple(q) if q == "QUEUED") {
            sh.stats.ran(cmd, Some(t.elapsed()), matches!(r, Reply::Error(_)));
        }
    }
    (r, after)
}

fn run_uncounted(sh: &Shared, c: &mut Conn, args: &[Vec<u8>]) -> (Reply, After) {
    if !c.authed && !matches!(upper(&args[0]).as_str(), "AUTH" | "HELLO" | "QUIT" | "PING") {
        return (Reply::err("NOAUTH Authentication required."), After::Continue);
    }
    // A script past lua-time-limit holds the gate: answer at once, as Redis does, but to
    // what may run beside it (SCRIPT KILL above all).
    if sh.script.busy() && !crate::script::allowed_while_busy(args) {
        if let Some(cmd) = table::lookup(&args[0]) {
            sh.stats.rejected(cmd);
        }
        // As Redis: a refused command fails the transaction it was sent in, and a
        // refused EXEC discards it.
        if c.multi.is_some() {
            if args[0].eq_ignore_ascii_case(b"EXEC") {
                c.multi = None;
                c.multi_failed = false;
                c.unwatch(sh);
                let Reply::Error(busy) = sh.script.busy_reply() else { unreachable!("BUSY is an error") };
                return (Reply::err(format!("EXECABORT Transaction discarded because of: {busy}")), After::Continue);
            }
            c.multi_failed = true;
        }
        return (sh.script.busy_reply(), After::Continue);
    }
    let asking = std::mem::take(&mut c.asking);
    let cmd = match table::check(args) {
        Ok(cmd) => {
            c.current = Some(cmd);
            let refused = crate::pubsub::refuse(&c.subs, c.resp3, cmd.name, &args[1..])
                .or_else(|| crate::replica::refuse(&sh.replica, cmd, c.from_primary));
            if let Some(r) = refused {
                // As Redis: a refused command fails the transaction it was sent in (the
                // subscribed-mode PING reply is an answer, not a refusal).
                if c.multi.is_some() && matches!(r, Reply::Error(_)) {
                    c.multi_failed = true;
                }
                return (r, After::Continue);
            }
            cmd
        }
        Err(e) => {
            if let Some(cmd) = table::lookup(&args[0]) {
                sh.stats.rejected(cmd);
            }
            if c.multi.is_some() {
                c.multi_failed = true;
            }
            return (Reply::err(e), After::Continue);
        }
    };
    // A cluster node: the command's slot (CROSSSLOT for keys of several).
    let keys = if sh.cluster.is_some() { route_keys(cmd, args) } else { Vec::new() };
    let slot = match crate::cluster::slot::common_slot(keys.iter().copied()) {
        Ok(s) => s,
        Err(r) => {
            if c.multi.is_some() {
                c.multi_failed = true;
            }
            return (r, After::Continue);
        }
    };
    if sh.cluster.is_some() && cmd.name == "PMKV.RANGE" && slot.is_none() {
        return (
            Reply::err("ERR on a cluster node PMKV.RANGE needs a key as one end: the range is that key's slot"),
            After::Continue,
        );
    }
    if c.multi.is_some() && !matches!(cmd.name, "EXEC" | "DISCARD" | "MULTI" | "WATCH" | "QUIT" | "RESET") {
        if cmd.no_multi || matches!(cmd.name, "MIGRATE" | "CLUSTER") {
            c.multi_failed = true;
            return (Reply::err("ERR Command not allowed inside a transaction"), After::Continue);
        }
        if let Some(s) = slot {
            // Checked again, under the gate, at EXEC.
            // As Redis: the command is routed on its own first, then against the others.
            let r = misrouted(sh, slot, asking, &keys).or_else(|| {
                c.multi_slot
                    .is_some_and(|t| t != s)
                    .then(|| Reply::err("CROSSSLOT Keys in request don't hash to the same slot"))
            });
            if let Some(r) = r {
                c.multi_failed = true;
                return (r, After::Continue);
            }
            c.multi_slot = Some(s);
        }
        c.multi.get_or_insert_with(Vec::new).push(args.to_vec());
        return (Reply::Simple("QUEUED".into()), After::Continue);
    }
    let a = &args[1..];
    if cmd.name == "COPY" {
        if let Some(r) = crate::select::copy_to_db(sh, c, a, false) {
            return (r, After::Continue);
        }
    }
    let r = match cmd.name {
        "MULTI" if c.multi.is_some() => Reply::err("ERR MULTI calls can not be nested"),
        "MULTI" => {
            c.multi = Some(Vec::new());
            c.multi_slot = None;
            Reply::ok()
        }
        "DISCARD" => match c.multi.take() {
            None => Reply::err("ERR DISCARD without MULTI"),
            Some(_) => {
                c.multi_failed = false;
                c.unwatch(sh);
                Reply::ok()
            }
        },
        "EXEC" => return exec(sh, c, asking),
        "WATCH" if c.multi.is_some() => Reply::err("ERR WATCH inside MULTI is not allowed"),
        "WATCH" => {
            for k in a {
                if !allowed(k) {
                    return (reserved(), After::Continue);
                }
            }
            if let Some(r) = misrouted(sh, slot, asking, &keys) {
                return (r, After::Continue);
            }
            for k in a {
                sh.ks(c.db).watch(k, &c.dirty);
                c.watched.push(k.clone());
            }
            Reply::ok()
        }
        "UNWATCH" => {
            c.unwatch(sh);
            Reply::ok()
        }
        "FLUSHDB" | "FLUSHALL" => {
            if a.len() > 1 || a.first().is_some_and(|o| !matches!(upper(o).as_str(), "ASYNC" | "SYNC")) {
                return (Reply::err("ERR syntax error"), After::Continue);
            }
            // Exclusive: no command runs while the store empties, as in Redis.
            let _gate = match sh.gate_write() {
                Ok(g) => g,
                Err(r) => return (r, After::Continue),
            };
            let flushed = if cmd.name == "FLUSHALL" {
                crate::select::flush_all(sh)
            } else {
                Tx::flush_all(&sh.store, sh.ks(c.db), 1024)
            };
            match flushed.and_then(|()| whole_after_flush(sh)) {
                Ok(()) => {
                    sh.repl.feed(vec![(c.db, args.to_vec())], false);
                    Reply::ok()
                }
                Err(e) => store_err(e),
            }
        }
        "SWAPDB" => {
            // Exclusive: no command runs against either database while they swap.
            let _gate = match sh.gate_write() {
                Ok(g) => g,
                Err(r) => return (r, After::Continue),
            };
            let r = crate::select::swapdb(sh, a);
            if !matches!(r, Reply::Error(_)) {
                sh.repl.feed(vec![(c.db, args.to_vec())], false);
            }
            r
        }
        "MOVE" => {
            // A cluster node routes the key first (then refuses MOVE, as Redis does).
            if let Some(r) = misrouted(sh, slot, asking, &keys) {
                return (r, After::Continue);
            }
            crate::select::move_key(sh, c, a)
        }
        "EVAL" | "EVALSHA" | "EVAL_RO" | "EVALSHA_RO" | "FCALL" | "FCALL_RO" => {
            let _gate = match sh.gate_write() {
                Ok(g) => g,
                Err(r) => return (r, After::Continue),
            };
            if let Some(r) = misrouted(sh, slot, asking, &keys) {
                return (r, After::Continue);
            }
            if cmd.name.starts_with("FCALL") {
                crate::script::fcall(sh, c, cmd.name, a)
            } else {
                crate::script::eval(sh, c, cmd.name, a)
            }
        }
        "ASKING" | "READONLY" | "READWRITE" | "CLUSTER" | "PMKV.TOPOLOGY" if sh.cluster.is_none() => {
            Reply::err("ERR This instance has cluster support disabled (start it with pmkv serve --cluster)")
        }
        "ASKING" => {
            c.asking = true;
            Reply::ok()
        }
        // No replicas: every node is a primary, whose reads READONLY does not change.
        "READONLY" | "READWRITE" => Reply::ok(),
        "CLUSTER" => crate::cluster::command(sh, a),
        "PMKV.TOPOLOGY" => {
            let _gate = match (upper(&a[0]) == "SET").then(|| sh.gate_write()).transpose() {
                Ok(g) => g,
                Err(r) => return (r, After::Continue),
            };
            sh.cluster.as_ref().map_or_else(Reply::ok, |cl| cl.topology_cmd(&sh.store, a))
        }
        "MIGRATE" => crate::cluster::migrate::migrate(sh, a),
        "PMKV.RESTORE" => {
            let _gate = match sh.gate_read() {
                Ok(g) => g,
                Err(r) => return (r, After::Continue),
            };
            if let Some(cl) = &sh.cluster {
                if let Err(r) = cl.may_restore(crate::cluster::slot::key_slot(&a[0])) {
                    return (r, After::Continue);
                }
            }
            let _locks = sh.lock(&[a[0].as_slice()]);
            let mut tx = Tx::new(&sh.store, sh.ks(c.db));
            match crate::cluster::migrate::restore(&mut tx, a) {
                Ok(r) => match tx.commit() {
                    Ok(()) => r,
                    Err(e) => store_err(e),
                },
                Err(r) => r,
            }
        }
        _ if cmd.attempt.is_some() => {
            if let Some(r) = misrouted(sh, slot, asking, &keys) {
                return (r, After::Continue);
            }
            crate::blocking::block(sh, c, cmd, args)
        }
        _ if in_tx(cmd) => {
            // SORT reads the keys its BY and GET patterns name, known only as it runs:
            // it runs alone, as EVAL does; every other command shares the gate.
            let exclusive = matches!(cmd.name, "SORT" | "SORT_RO");
            let _gate = match (!exclusive).then(|| sh.gate_read()).transpose() {
                Ok(g) => g,
                Err(r) => return (r, After::Continue),
            };
            let _alone = match exclusive.then(|| sh.gate_write()).transpose() {
                Ok(g) => g,
                Err(r) => return (r, After::Continue),
            };
            if let Some(r) = misrouted(sh, slot, asking, &keys) {
                return (r, After::Continue);
            }
            let _locks = sh.lock(&cmd.keys(args));
            let mut tx = Tx::new(&sh.store, sh.ks(c.db));
            let r = one(sh, c, &mut tx, cmd, args);
            match r {
                Reply::Error(_) => r,
                _ => {
                    // What replicas get, read from the Tx before it commits; sent after
                    // it committed, still under the keys' locks (the stream's order).
                    let mut fx = Vec::new();
                    if sh.repl.on() && !tx.is_empty() {
                        crate::repl_stream::effects(&mut tx, cmd, args, &r, &mut fx);
                    }
                    match tx.commit() {
                        Ok(()) => {
                            sh.repl.feed(fx.into_iter().map(|x| (c.db, x)).collect(), false);
                            r
                        }
                        Err(e) => store_err(e),
                    }
                }
            }
        }
        _ => {
            // The walks see no EXEC half applied (inside EXEC the gate is held already).
            let _gate = match matches!(cmd.name, "DBSIZE" | "PMKV.RANGE").then(|| sh.gate_read()).transpose() {
                Ok(g) => g,
                Err(r) => return (r, After::Continue),
            };
            if let Some(r) = misrouted(sh, slot, asking, &keys) {
                return (r, After::Continue);
            }
            return other(sh, c, cmd, a, slot);
        }
    };
    if matches!(&r, Reply::Error(e) if e == OVER_LIMIT) {
        return over_output_limit(sh);
    }
    (r, After::Continue)
}

/// Run data command `cmd` (`args` with its name) in `tx`: its reply, an error reply
/// when it failed (its writes then must not be applied).
pub(crate) fn one(sh: &Shared, c: &mut Conn, tx: &mut Tx, cmd: &Command, args: &[Vec<u8>]) -> Reply {
    let mut cx =
        Ctx { budget: c.reply_budget, resp3: c.resp3, cursors: &mut c.cursors, encodings: Some(&sh.encodings) };
    match data::run(tx, &mut cx, cmd, &args[1..]) {
        Ok(r) | Err(r) => r,
    }
}

/// EXEC: the queued commands as one isolated unit, applied as one atomic batch. On a
/// cluster node the whole transaction is routed again under the gate (a slot may have
/// moved since the commands were queued), as Redis routes EXEC by its queued commands.
fn exec(sh: &Shared, c: &mut Conn, asking: bool) -> (Reply, After) {
    let Some(queue) = c.multi.take() else { return (Reply::err("ERR EXEC without MULTI"), After::Continue) };
    let slot = c.multi_slot.take();
    if std::mem::take(&mut c.multi_failed) {
        c.unwatch(sh);
        return (Reply::err("EXECABORT Transaction discarded because of previous errors."), After::Continue);
    }
    // The gate first: every write that committed before it has told its watchers.
    let _gate = match sh.gate_write() {
        Ok(g) => g,
        Err(r) => {
            c.unwatch(sh);
            return (r, After::Continue);
        }
    };
    if sh.cluster.is_some() {
        let keys: Vec<&[u8]> = queue
            .iter()
            .flat_map(|args| table::lookup(&args[0]).map(|cmd| route_keys(cmd, args)).unwrap_or_default())
            .collect();
        if let Some(r) = misrouted(sh, slot, asking, &keys) {
            c.unwatch(sh);
            return (r, After::Continue);
        }
    }
    let dirty = c.dirty.load(Ordering::Acquire);
    c.unwatch(sh);
    if dirty {
        return (Reply::NilArray, After::Continue);
    }
    // One Tx per physical database the transaction SELECTs, committed as one batch.
    let mut txs: Vec<(usize, Tx)> = Vec::new();
    let mut replies = Vec::with_capacity(queue.len());
    // What replicas get: MULTI, each write's effect, EXEC (sent after the commit).
    let streamed = sh.repl.on();
    let mut fx: Vec<(usize, crate::repl_stream::Cmd)> = Vec::new();
    for args in &queue {
        let cmd = table::lookup(&args[0]).expect("queued commands are known");
        let t = std::time::Instant::now();
        let db = c.db;
        let i = tx_of(sh, &mut txs, c.db);
        let r = if cmd.name == "MOVE" {
            match crate::select::move_target(sh, c, &args[1..]) {
                Ok(dst) => {
                    let j = tx_of(sh, &mut txs, dst);
                    let (mut from, mut into) = (txs.swap_remove(i.max(j)), txs.swap_remove(i.min(j)));
                    if i < j {
                        std::mem::swap(&mut from, &mut into);
                    }
                    let (mf, mi) = (from.1.savepoint(), into.1.savepoint());
                    let r = from.1.transfer(&mut into.1, &args[1], &args[1], false, true);
                    if r.is_err() {
                        from.1.rollback(mf);
                        into.1.rollback(mi);
                    }
                    txs.extend([from, into]);
                    r.map_or_else(|r| r, |done| Reply::Int(i64::from(done)))
                }
                Err(r) => r,
            }
        } else if cmd.name == "SWAPDB" {
            crate::select::swapdb(sh, &args[1..])
        } else if let Some(r) =
            (cmd.name == "COPY").then(|| crate::select::copy_to_db(sh, c, &args[1..], true)).flatten()
        {
            r
        } else if matches!(cmd.name, "FLUSHDB" | "FLUSHALL") {
            // Inside EXEC the flush is part of the one batch (all or nothing with the
            // rest), so it is bounded: see FLUSH_IN_EXEC_MAX. FLUSHALL: every database.
            let dbs: Vec<usize> = if cmd.name == "FLUSHALL" { (0..sh.databases()).collect() } else { vec![c.db] };
            let at: Vec<usize> = dbs.into_iter().map(|db| tx_of(sh, &mut txs, db)).collect();
            let marks: Vec<_> = at.iter().map(|&j| txs[j].1.savepoint()).collect();
            let r = match at.iter().try_for_each(|&j| flush_in_tx(&mut txs[j].1, &args[1..])) {
                Ok(()) => Reply::ok(),
                Err(r) => r,
            };
            if matches!(r, Reply::Error(_)) {
                for (&j, m) in at.iter().zip(marks) {
                    txs[j].1.rollback(m);
                }
            }
            r
        } else if in_tx(cmd) {
            let tx = &mut txs[i].1;
            // A command that fails leaves nothing of itself in the transaction.
            let mark = tx.savepoint();
            let r = one(sh, c, tx, cmd, args);
            if matches!(r, Reply::Error(_)) {
                tx.rollback(mark);
                tx.expired.clear();
            } else if streamed {
                let mut out = Vec::new();
                crate::repl_stream::effects(tx, cmd, args, &r, &mut out);
                fx.extend(out.into_iter().map(|x| (db, x)));
            }
            r
        } else {
            let r = other(sh, c, cmd, &args[1..], slot).0;
            if streamed && cmd.name == "FUNCTION" && !matches!(r, Reply::Error(_)) && function_writes(&args[1..]) {
                fx.push((db, args.clone()));
            }
            r
        };
        if streamed
            && matches!(cmd.name, "MOVE" | "SWAPDB" | "FLUSHDB" | "FLUSHALL" | "COPY")
            && !in_tx(cmd)
            && !matches!(r, Reply::Error(_) | Reply::Int(0))
        {
            fx.push((db, args.clone()));
        }
        sh.stats.ran(cmd, Some(t.elapsed()), matches!(r, Reply::Error(_)));
        if let Reply::Error(e) = &r {
            sh.stats.error_reply(e);
        }
        if matches!(&r, Reply::Error(e) if e == OVER_LIMIT) {
            return over_output_limit(sh);
        }
        replies.push(r);
    }
    match Tx::commit_all(txs.into_iter().map(|(_, tx)| tx).collect()) {
        Ok(()) => {
            sh.repl.feed(fx, true);
            (Reply::Array(replies), After::Continue)
        }
        Err(e) => (
            Reply::err(format!("EXECABORT the transaction's writes could not be applied, none was: {e}")),
            After::Continue,
        ),
    }
}

/// The index in `txs` of the Tx of logical database `db` (one is made when missing).
fn tx_of<'a>(sh: &'a Shared, txs: &mut Vec<(usize, Tx<'a>)>, db: usize) -> usize {
    let p = sh.phys_db(db);
    match txs.iter().position(|(q, _)| *q == p) {
        Some(i) => i,
        None => {
            txs.push((p, Tx::new(&sh.store, &sh.all_dbs()[p])));
            txs.len() - 1
        }
    }
}

/// REPLICAOF host port | NO ONE: replicate a Redis primary (see `replica_link`), or stop.
fn replicaof(sh: &Shared, a: &[Vec<u8>]) -> Reply {
    if sh.cluster.is_some() {
        return Reply::err("ERR REPLICAOF not allowed in cluster mode.");
    }
    if upper(&a[0]) == "NO" && upper(&a[1]) == "ONE" {
        // Not under the gate: EXEC (Sentinel sends REPLICAOF inside MULTI) holds it.
        let was = sh.replica.primary().map(|p| (p.replid, sh.replica.offset.load(Ordering::SeqCst)));
        return match sh.replica.stop(&sh.store, sh.ks(0)) {
            Ok(()) => {
                // A new history: a new replication ID, the primary's kept as the second.
                if let Some((replid, offset)) = was {
                    sh.repl.promote(&replid, offset);
                }
                Reply::ok()
            }
            Err(r) => r,
        };
    }
    let Some(port) = int(&a[1]).filter(|p| (0..=65535).contains(p)) else {
        return Reply::err("ERR Invalid master port");
    };
    let host = String::from_utf8_lossy(&a[0]).into_owned();
    if sh.replica.primary().is_some_and(|p| p.host == host && p.port == port as u16) {
        return Reply::Simple("OK Already connected to specified master".into());
    }
    // As Redis: a server that becomes a replica drops its own replicas.
    sh.repl.detach_all();
    let generation = match sh.replica.start(&sh.store, sh.ks(0), host, port as u16) {
        Ok(g) => g,
        Err(e) => return store_err(e),
    };
    (sh.start_link)(sh, generation);
    Reply::ok()
}

/// After a FLUSHALL on a replica holding a partial copy: the empty keyspace is whole again
/// (nothing of the primary's claimed), so the record's sync flag is cleared and REPLICAOF
/// NO ONE may promote it.
fn whole_after_flush(sh: &Shared) -> pmkv::Result<()> {
    if !sh.replica.is_partial() {
        return Ok(());
    }
    if let Some(mut rec) = crate::replica::load(&sh.store).map_err(|e| pmkv::Error::new(pmkv::ErrorKind::Corrupt, e))? {
        rec.syncing = false;
        crate::replica::save(&sh.store, sh.ks(0), Some(&rec))?;
    }
    sh.replica.set_partial(false);
    Ok(())
}

/// Most keys FLUSHDB/FLUSHALL deletes inside MULTI/EXEC. There it joins the
/// transaction's one atomic batch, which lives in memory until it commits; a larger
/// keyspace is refused with an error (flush outside MULTI instead, which works in
/// bounded rounds).
pub const FLUSH_IN_EXEC_MAX: usize = 100_000;

/// FLUSHDB/FLUSHALL [ASYNC|SYNC] inside EXEC: every key deleted in `tx`.
fn flush_in_tx(tx: &mut Tx, a: &[Vec<u8>]) -> Result<(), Reply> {
    if a.len() > 1 || a.first().is_some_and(|o| !matches!(upper(o).as_str(), "ASYNC" | "SYNC")) {
        return Err(Reply::err("ERR syntax error"));
    }
    let mut keys = Vec::new();
    tx.keys(std::ops::Bound::Unbounded, |k, _| {
        keys.push(k.to_vec());
        keys.len() <= FLUSH_IN_EXEC_MAX
    })?;
    if keys.len() > FLUSH_IN_EXEC_MAX {
        return Err(Reply::err(format!(
            "ERR FLUSHDB inside MULTI deletes at most {FLUSH_IN_EXEC_MAX} keys (one atomic batch); flush outside MULTI"
        )));
    }
    for k in keys {
        tx.del(&k)?;
    }
    Ok(())
}

/// Connection and server commands, and the walks DBSIZE and PMKV.RANGE (the caller
/// holds the gate for those).
fn other(sh: &Shared, c: &mut Conn, cmd: &Command, a: &[Vec<u8>], slot: Option<u16>) -> (Reply, After) {
    let s: &Store = &sh.store;
    let r = match cmd.name {
        "PING" => match a.len() {
            0 => Reply::Simple("PONG".into()),
            1 => Reply::bulk(a[0].clone()),
            _ => Reply::err(crate::command::wrong_args("ping")),
        },
        "ECHO" => Reply::bulk(a[0].clone()),
        "REPLICAOF" | "SLAVEOF" => replicaof(sh, a),
        "ROLE" => sh.replica.role().unwrap_or_else(|| sh.repl.role()),
        // A replica's handshake: what it says of itself, kept for ROLE and INFO.
        "REPLCONF" => {
            let mut i = 0;
            while i + 1 < a.len() {
                match upper(&a[i]).as_str() {
                    "LISTENING-PORT" => match int(&a[i + 1]).and_then(|p| u16::try_from(p).ok()) {
                        Some(p) => c.repl_port = p,
                        None => return (Reply::err("ERR value is not an integer or out of range"), After::Continue),
                    },
                    "IP-ADDRESS" => c.repl_ip = Some(String::from_utf8_lossy(&a[i + 1]).into_owned()),
                    // ACK and GETACK belong to a replica's link (`primary`); a client's
                    // gets no reply, as in Redis.
                    "ACK" | "GETACK" => return (Reply::Seq(Vec::new()), After::Continue),
                    _ => {}
                }
                i += 2;
            }
            if a.len() % 2 == 1 {
                Reply::err("ERR syntax error")
            } else {
                Reply::ok()
            }
        }
        "SYNC" | "PSYNC" => return (Reply::Seq(Vec::new()), After::Replicate),
        "WAIT" => wait(sh, c, a),
        "SUBSCRIBE" | "UNSUBSCRIBE" | "PSUBSCRIBE" | "PUNSUBSCRIBE" | "PUBLISH" | "PUBSUB" => {
            crate::pubsub::command(sh, &mut c.subs, (c.id, c.resp3), cmd.name, a)
        }
        "QUIT" => return (Reply::ok(), After::Close),
        "RESET" => {
            c.resp3 = false;
            c.name = None;
            c.cursors.clear();
            c.multi = None;
            c.multi_failed = false;
            c.multi_slot = None;
            c.asking = false;
            c.unwatch(sh);
            crate::pubsub::leave(sh, &mut c.subs);
            Reply::Simple("RESET".into())
        }
        "SELECT" => crate::select::select(sh, c, a),
        "AUTH" => {
            let pass = a.last().cloned().unwrap_or_default();
            match &sh.password {
                None => Reply::err("ERR AUTH <password> called without any password configured"),
                Some(p) if crate::constant_time_eq(p.as_bytes(), &pass) => {
                    c.authed = true;
                    Reply::ok()
                }
                Some(_) => Reply::err("WRONGPASS invalid username-password pair or user is disabled."),
            }
        }
        "HELLO" => {
            let mut i = 0;
            if let Some(v) = a.first() {
                match int(v) {
                    Some(2) => c.resp3 = false,
                    Some(3) => c.resp3 = true,
                    _ => return (Reply::err("NOPROTO unsupported protocol version"), After::Continue),
                }
                i = 1;
            }
            while i < a.len() {
                match upper(&a[i]).as_str() {
                    "AUTH" if i + 2 < a.len() => {
                        let ok = sh.password.as_ref().is_some_and(|p| crate::constant_time_eq(p.as_bytes(), &a[i + 2]));
                        if !ok {
                            return (Reply::err("WRONGPASS invalid username-password pair"), After::Continue);
                        }
                        c.authed = true;
                        i += 3;
                    }
                    "SETNAME" if i + 1 < a.len() => {
                        c.name = Some(a[i + 1].clone());
                        i += 2;
                    }
                    _ => return (Reply::err("ERR syntax error in HELLO option"), After::Continue),
                }
            }
            if !c.authed {
                return (
                    Reply::err("NOAUTH HELLO must be called with the client already authenticated"),
                    After::Continue,
                );
            }
            let b = |s: &str| Reply::bulk(s.as_bytes().to_vec());
            Reply::Map(vec![
                (b("server"), b("pmkv")),
                (b("version"), b(env!("CARGO_PKG_VERSION"))),
                (b("proto"), Reply::Int(if c.resp3 { 3 } else { 2 })),
                (b("id"), Reply::Int(c.id as i64)),
                (b("mode"), b(if sh.cluster.is_some() { "cluster" } else { "standalone" })),
                (b("role"), b("master")),
                (b("modules"), Reply::Array(vec![])),
            ])
        }
        "CLIENT" => match upper(&a[0]).as_str() {
            "SETNAME" if a.len() == 2 => {
                c.name = Some(a[1].clone());
                Reply::ok()
            }
            "GETNAME" => c.name.clone().map(Reply::Bulk).unwrap_or(Reply::Nil),
            "ID" => Reply::Int(c.id as i64),
            "SETINFO" => Reply::ok(),
            _ => Reply::err("ERR unknown CLIENT subcommand (pmkv has SETNAME, GETNAME, ID, SETINFO)"),
        },
        // The table as Redis's COMMAND gives it (name, arity, flags, first key, last key,
        // step, ACL categories): cluster clients (redis-py's RedisCluster) find a command's
        // keys there. Commands whose keys depend on their arguments are `movablekeys`, and
        // COMMAND GETKEYS answers for them.
        "COMMAND" => match a.first().map(|x| upper(x)) {
            None => Reply::Array(table::commands().iter().copied().map(command_info).collect()),
            Some(s) if s == "INFO" => {
                Reply::Array(a[1..].iter().map(|n| table::lookup(n).map_or(Reply::Nil, command_info)).collect())
            }
            Some(s) if s == "GETKEYS" && a.len() >= 2 => match table::check(&a[1..]) {
                Err(e) => Reply::err(e),
                Ok(cmd) => {
                    let keys = route_keys(cmd, &a[1..]);
                    if keys.is_empty() {
                        Reply::err("ERR The command has no key arguments")
                    } else {
                        Reply::Array(keys.into_iter().map(|k| Reply::bulk(k.to_vec())).collect())
                    }
                }
            },
            Some(s) if s == "DOCS" => {
                if c.resp3 {
                    Reply::Map(vec![])
                } else {
                    Reply::Array(vec![])
                }
            }
            Some(s) if s == "COUNT" => Reply::Int(table::commands().len() as i64),
            _ => Reply::err("ERR pmkv has COMMAND, COMMAND INFO, COMMAND GETKEYS, COMMAND COUNT and COMMAND DOCS"),
        },
        "CONFIG" if upper(&a[0]) == "GET" && a.len() >= 2 => {
            let mut out = Vec::new();
            let params = config_params(sh);
            for p in &a[1..] {
                let pat = crate::glob::Pattern::new(&p.to_ascii_lowercase(), 64);
                for (k, v) in &params {
                    if pat.matches(k.as_bytes()) && !out.iter().any(|(n, _)| n == &Reply::bulk(k.as_bytes().to_vec())) {
                        out.push((Reply::bulk(k.as_bytes().to_vec()), Reply::bulk(v.as_bytes().to_vec())));
                    }
                }
            }
            Reply::Map(out)
        }
        "CONFIG" if upper(&a[0]) == "SET" && a.len() >= 3 && a.len() % 2 == 1 => config_set(sh, &a[1..]),
        "CONFIG" if upper(&a[0]) == "RESETSTAT" && a.len() == 1 => {
            // As Redis: the command and error counters and the server's totals restart.
            sh.stats.reset();
            for n in [&sh.connections, &sh.commands, &sh.rejected, &sh.query_limit_closes, &sh.output_limit_closes] {
                n.store(0, Ordering::Relaxed);
            }
            Reply::ok()
        }
        "CONFIG" => config_refused(a),
        // Every acknowledged write is already durable in the pool: nothing to save.
        "SAVE" => Reply::ok(),
        "TIME" => {
            let us = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros());
            Reply::Array(vec![Reply::bulk((us / 1_000_000).to_string()), Reply::bulk((us % 1_000_000).to_string())])
        }
        "DBSIZE" => match sh.db_size(c.db) {
            Ok(n) => Reply::Int(n as i64),
            Err(e) => store_err(e),
        },
        "SCRIPT" => crate::script::script(sh, a),
        "FUNCTION" => {
            let r = crate::script::function(sh, a);
            if !matches!(r, Reply::Error(_)) && function_writes(a) {
                let mut args = vec![b"FUNCTION".to_vec()];
                args.extend(a.iter().cloned());
                sh.repl.feed(vec![(c.db, args)], false);
            }
            r
        }
        // Syntax, bounds and limits: crate::range.
        "PMKV.RANGE" if (2..=4).contains(&a.len()) => {
            match crate::range::pmkv_range(s, sh.ks(c.db), a, c.reply_budget, slot) {
                Some(r) => r,
                None => return over_output_limit(sh),
            }
        }
        "PMKV.RANGE" => Reply::err(crate::command::wrong_args("pmkv.range")),
        "INFO" => info(sh, a),
        // As Redis: no reply; the connection closes when the server has stopped.
        "SHUTDOWN" => {
            // A running script is stopped (none of its writes applied) so the store closes.
            sh.script.kill();
            return (Reply::Nil, After::Shutdown);
        }
        _ => Reply::err(crate::command::unknown(&[cmd.name.as_bytes().to_vec()])),
    };
    (r, After::Continue)
}

/// Whether FUNCTION's subcommand `a[0]` changes the libraries (and goes to replicas
/// verbatim, as Redis sends it).
fn function_writes(a: &[Vec<u8>]) -> bool {
    a.first().is_some_and(|s| matches!(upper(s).as_str(), "LOAD" | "DELETE" | "FLUSH" | "RESTORE"))
}

/// WAIT numreplicas timeout: how many replicas acknowledged this client's last write,
/// waiting (off the workers: the connection loop runs WAIT with `block_in_place`) until
/// `numreplicas` have or `timeout` ms passed (0: forever, until the client leaves).
fn wait(sh: &Shared, c: &Conn, a: &[Vec<u8>]) -> Reply {
    if sh.replica.is_replica() {
        return Reply::err("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.");
    }
    let (Some(n), Some(ms)) = (int(&a[0]).filter(|n| *n >= 0), int(&a[1])) else {
        return Reply::err("ERR value is not an integer or out of range");
    };
    if ms < 0 {
        return Reply::err("ERR timeout is negative");
    }
    let timeout = (ms > 0).then(|| std::time::Duration::from_millis(ms as u64));
    Reply::Int(sh.repl.wait(c.woff, n as usize, timeout, || c.peer_closed() || sh.stopping()) as i64)
}

/// Whether `args` is a plain `SET key value` this connection may run now and the engine
/// accepts the sizes of, on a key without a meta record: such SETs, when pipelined back
/// to back, are applied together by [`set_many`] (group commit).
pub fn is_plain_set(sh: &Shared, c: &Conn, args: &[Vec<u8>]) -> bool {
    args.len() == 3
        && c.authed
        && c.multi.is_none()
        && c.subs.is_none()
        && !sh.replica.is_replica()
        && args[0].eq_ignore_ascii_case(b"SET")
        && allowed(&args[1])
        && c.db == 0
        && sh.ks(0).is_db0()
        && sh.store.info().check_sizes(&sh.ks(0).phys(&args[1]), Some(&args[2])).is_ok()
        && !sh.ks(0).may_have_meta(&args[1])
        && plain_slot(sh, c, &args[1])
}

/// Not a cluster node, or one that owns `key`'s slot and is not moving it, and no ASKING
/// pending: the command needs no routing beyond the look its fast path repeats under the
/// gate ([`stably_owned`]).
fn plain_slot(sh: &Shared, c: &Conn, key: &[u8]) -> bool {
    !c.asking && stably_owned(sh, key)
}

/// Whether `key`'s slot is this node's and not moving (always, on a plain server).
fn stably_owned(sh: &Shared, key: &[u8]) -> bool {
    stable_slot(sh, key).is_some()
}

/// `Some(key's slot)` (0 on a plain server) when [`stably_owned`]: computed once for the
/// check and the engine key.
fn stable_slot(sh: &Shared, key: &[u8]) -> Option<u16> {
    match &sh.cluster {
        None => Some(0),
        Some(cl) => Some(crate::cluster::slot::key_slot(key)).filter(|&s| cl.stably_owned(s)),
    }
}

/// `GET key` of a key without a meta record, from a client that may run it now:
/// [`get_into`] answers it.
pub fn is_plain_get(sh: &Shared, c: &Conn, args: &[Vec<u8>]) -> bool {
    args.len() == 2
        && c.authed
        && c.multi.is_none()
        && c.subs.is_none()
        && !sh.replica.is_partial()
        && args[0].eq_ignore_ascii_case(b"GET")
        && allowed(&args[1])
        && c.db == 0
        && sh.ks(0).is_db0()
        && !sh.ks(0).may_have_meta(&args[1])
        && plain_slot(sh, c, &args[1])
}

/// Answer `GET key` into `out` (what [`run`] replies, without building the reply), the
/// value read into `value`, whose allocation the next GET reuses. `false`: not answered,
/// the key's slot moved since [`is_plain_get`] looked (run the command instead).
pub fn get_into(
    sh: &Shared,
    key: &[u8],
    value: &mut Option<Vec<u8>>,
    out: &mut Vec<u8>,
    resp3: bool,
) -> std::io::Result<bool> {
    // Busy (a script holds the gate): not answered here; the command path says BUSY.
    let Ok(_gate) = sh.gate_read() else { return Ok(false) };
    let Some(slot) = stable_slot(sh, key) else { return Ok(false) };
    // A SWAPDB since [`is_plain_get`] looked: DB 0 is another physical database now.
    if !sh.ks(0).is_db0() {
        return Ok(false);
    }
    match sh.store.get_into(&sh.ks(0).phys_at(slot, key), value) {
        Ok(true) => {
            let v = value.as_deref().unwrap_or_default();
            use std::io::Write as _;
            write!(out, "${}\r\n", v.len())?;
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
            Ok(true)
        }
        Ok(false) => Reply::Nil.write(out, resp3).map(|_| true),
        Err(e) => store_err(e).write(out, resp3).map(|_| true),
    }
}

/// Group commit of plain SETs that arrived together: one write batch, under the gate and
/// the stripe locks of all their keys (so read-modify-write commands stay atomic), in
/// which the engine shares persists and fences where it can (HART: one commit fence per
/// run of keys in one ART, see `Hart::put_many`). The SETs are independent commands, so
/// the batch is not made atomic (that would cost a log write). Each SET is acknowledged
/// only after the batch returned, i.e. after all of them are durable. On an error (say, a
/// full pool) a prefix of the batch may have been applied; every SET of it gets the error
/// reply, as a client cannot tell which of a failed pipeline's writes landed anyway.
/// A key that gained a meta record (a TTL, a hash) since [`is_plain_set`] looked goes
/// through the full SET instead. Returns the reply of each of them; `Err(sets)` when a
/// key's slot moved since [`is_plain_set`] looked (run each SET as a command instead).
pub fn set_many(sh: &Shared, sets: Vec<Vec<Vec<u8>>>) -> Result<Reply, Vec<Vec<Vec<u8>>>> {
    let _gate = match sh.gate_read() {
        Ok(g) => g,
        Err(busy) => return Ok(busy),
    };
    let Some(slots) = sets.iter().map(|a| stable_slot(sh, &a[1])).collect::<Option<Vec<u16>>>() else {
        return Err(sets);
    };
    // Keys and values move into the batch (no copy); a cluster node's batch holds engine
    // keys, so it keeps the user keys beside.
    // A SWAPDB since [`is_plain_set`] looked: DB 0 is another physical database now.
    if !sh.ks(0).is_db0() {
        return Err(sets);
    }
    let ks = sh.ks(0);
    let slotted = ks.slotted();
    let mut b = pmkv::WriteBatch::independent();
    let mut user = Vec::new();
    for (mut a, slot) in sets.into_iter().zip(slots) {
        let v = a.pop().unwrap_or_default();
        let k = a.pop().unwrap_or_default();
        if slotted {
            b.put(ks.phys_at(slot, &k).into_owned(), v);
            user.push(k);
        } else {
            b.put(k, v);
        }
    }
    let keys: Vec<&[u8]> =
        if slotted { user.iter().map(|k| k.as_slice()).collect() } else { b.ops().iter().map(|op| op.key()).collect() };
    let _g = sh.lock(&keys);
    let r = if keys.iter().any(|k| ks.may_have_meta(k)) {
        let mut tx = Tx::new(&sh.store, ks);
        for (k, op) in keys.iter().zip(b.ops()) {
            if let pmkv::BatchOp::Put(_, v) = op {
                if let Err(r) = tx.set(k, v, crate::keyspace::Ttl::Clear) {
                    return Ok(r);
                }
            }
        }
        tx.commit()
    } else {
        sh.store.write(&b)
    };
    Ok(match r {
        Ok(()) => {
            ks.touch(&mut keys.iter().copied());
            if sh.repl.on() {
                let sets = keys.iter().zip(b.ops()).filter_map(|(k, op)| match op {
                    pmkv::BatchOp::Put(_, v) => Some((0, vec![b"SET".to_vec(), k.to_vec(), v.clone()])),
                    _ => None,
                });
                sh.repl.feed(sets.collect(), false);
            }
            Reply::ok()
        }
        Err(e) => store_err(e),
    })
}

/// What `CONFIG GET` shows: Redis's names for the limits this server enforces, in
/// Redis's units (bytes, seconds), and the fixed answers clients probe for.
fn config_params(sh: &Shared) -> Vec<(&'static str, String)> {
    let (l, o) = (&sh.limits, &sh.output);
    let u = crate::resp::Limits::UNAUTHENTICATED;
    let mut params = vec![
        ("save", String::new()),
        ("appendonly", "no".into()),
        ("databases", "1".into()),
        ("maxmemory", "0".into()),
        ("maxclients", sh.max_clients.to_string()),
        ("timeout", sh.idle_timeout.as_secs().to_string()),
        ("proto-max-bulk-len", l.max_bulk.to_string()),
        ("client-query-buffer-limit", l.max_query.to_string()),
        ("client-output-buffer-limit", format!("normal {} {} {}", o.hard, o.soft, o.soft_time.as_secs())),
        ("requirepass", if sh.password.is_some() { "(set)" } else { "" }.into()),
        ("lua-time-limit", sh.script.busy_ms.load(Ordering::Relaxed).to_string()),
        ("repl-backlog-size", sh.repl.backlog_size().to_string()),
        ("busy-reply-threshold", sh.script.busy_ms.load(Ordering::Relaxed).to_string()),
        ("pmkv-script-time-limit", sh.script.stop_ms.load(Ordering::Relaxed).to_string()),
        (
            "pmkv-unauthenticated-limits",
            format!("query {} bulk {} multibulk {} inline {}", u.max_query, u.max_bulk, u.max_args, u.max_inline),
        ),
    ];
    let e = sh.encodings.lock().unwrap_or_else(|e| e.into_inner());
    for (&name, v) in e.iter() {
        params.push((name, v.clone()));
        if let Some(&(_, alias)) = ALIASES.iter().find(|(n, _)| *n == name) {
            params.push((alias, v.clone()));
        }
    }
    params
}

/// The 6.x names CONFIG GET also answers to.
const ALIASES: &[(&str, &str)] = &[
    ("hash-max-listpack-entries", "hash-max-ziplist-entries"),
    ("hash-max-listpack-value", "hash-max-ziplist-value"),
    ("zset-max-listpack-entries", "zset-max-ziplist-entries"),
    ("zset-max-listpack-value", "zset-max-ziplist-value"),
    ("list-max-listpack-size", "list-max-ziplist-size"),
];

/// Redis's encoding thresholds (compact encodings of small hashes, sets, sorted sets,
/// lists and streams) with Redis 7.0's defaults. pmkv stores each type one way, so they
/// change nothing here; CONFIG SET accepts an integer for them and CONFIG GET reports it,
/// so that clients and Redis's own tests that tune them run unchanged (OBJECT ENCODING is
/// not served). The 6.x `ziplist` names are aliases of the `listpack` ones, as in Redis.
pub const ENCODING_PARAMS: &[(&str, &str)] = &[
    ("hash-max-listpack-entries", "128"),
    ("hash-max-listpack-value", "64"),
    ("set-max-intset-entries", "512"),
    ("zset-max-listpack-entries", "128"),
    ("zset-max-listpack-value", "64"),
    ("list-max-listpack-size", "-2"),
    ("list-compress-depth", "0"),
    ("stream-node-max-bytes", "4096"),
    ("stream-node-max-entries", "100"),
];

/// The reply to a CONFIG that is not a GET or SET pmkv runs, in Redis's words where
/// Redis refuses it too (a wrong argument count, an unknown subcommand).
fn config_refused(a: &[Vec<u8>]) -> Reply {
    let sub = upper(&a[0]);
    match sub.as_str() {
        "GET" => Reply::err(crate::command::wrong_args("config|get")),
        "SET" if a.len() < 3 => Reply::err(crate::command::wrong_args("config|set")),
        "SET" => Reply::err("ERR syntax error"),
        "RESETSTAT" | "REWRITE" | "HELP" if a.len() > 1 => {
            Reply::err(crate::command::wrong_args(&format!("config|{}", sub.to_ascii_lowercase())))
        }
        "REWRITE" | "HELP" => {
            Reply::err("ERR pmkv supports CONFIG GET, and CONFIG SET of the parameters it can change")
        }
        _ => Reply::err(format!("ERR unknown subcommand '{}'. Try CONFIG HELP.", String::from_utf8_lossy(&a[0]))),
    }
}

/// A Redis memory value: bytes, or a number with `k`/`m`/`g` (10^3…) or `kb`/`mb`/`gb`
/// (2^10…), any case.
fn memory_value(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?.to_ascii_lowercase();
    let units = [
        ("gb", 1i64 << 30),
        ("mb", 1 << 20),
        ("kb", 1 << 10),
        ("g", 1_000_000_000),
        ("m", 1_000_000),
        ("k", 1000),
        ("b", 1),
    ];
    let (num, mul) = units.iter().find_map(|&(u, m)| s.strip_suffix(u).map(|n| (n, m))).unwrap_or((s.as_str(), 1));
    num.parse::<i64>().ok().filter(|n| *n >= 0)?.checked_mul(mul)
}

/// An encoding parameter's canonical name (aliases resolved), if `name` is one.
fn encoding_param(name: &str) -> Option<&'static str> {
    let name = name.replace("ziplist", "listpack");
    ENCODING_PARAMS.iter().map(|&(n, _)| n).find(|&n| n == name)
}

/// The parameters `CONFIG SET` changes: Redis's name, and where the value lives.
fn settable<'s>(sh: &'s Shared, name: &str) -> Option<&'s std::sync::atomic::AtomicU64> {
    match name {
        "lua-time-limit" | "busy-reply-threshold" => Some(&sh.script.busy_ms),
        "pmkv-script-time-limit" => Some(&sh.script.stop_ms),
        _ => None,
    }
}

/// `CONFIG SET name value [name value ...]`: all or none, as in Redis (every pair is
/// checked before any is applied).
fn config_set(sh: &Shared, pairs: &[Vec<u8>]) -> Reply {
    let mut set = Vec::new();
    let mut encodings = Vec::new();
    let mut backlog = None;
    for p in pairs.chunks(2) {
        let name = String::from_utf8_lossy(&p[0]).to_ascii_lowercase();
        if let Some(e) = encoding_param(&name) {
            // Byte sizes take Redis's memory units; the others are plain integers.
            let memory = e.ends_with("-value") || e.ends_with("-bytes");
            match if memory { memory_value(&p[1]) } else { int(&p[1]) } {
                Some(v) => encodings.push((e, v.to_string())),
                None if memory => {
                    return Reply::err(format!(
                    "ERR CONFIG SET failed (possibly related to argument '{name}') - argument must be a memory value"
                ))
                }
                None => {
                    return Reply::err(format!(
                    "ERR Invalid argument '{}' for CONFIG SET '{name}' - argument couldn't be parsed into an integer",
                    String::from_utf8_lossy(&p[1])
                ))
                }
            }
            continue;
        }
        if name == "save" {
            // No snapshots to schedule: every write is in the pool when it is answered.
            // "" (no snapshots, what Redis's tests set) is what pmkv does already.
            if !p[1].is_empty() {
                return Reply::err(
                    "ERR pmkv takes no snapshots (every write is durable when answered): only save \"\"",
                );
            }
            continue;
        }
        if name == "repl-backlog-size" {
            match memory_value(&p[1]) {
                Some(n) => backlog = Some(n as usize),
                None => {
                    return Reply::err(
                        "ERR CONFIG SET failed (possibly related to argument 'repl-backlog-size') - argument must be a memory value",
                    )
                }
            }
            continue;
        }
        if name == "maxmemory" {
            // Redis's check of the value first; then why pmkv does not take it.
            return match memory_value(&p[1]) {
                None => Reply::err(
                    "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value",
                ),
                Some(_) => Reply::err("ERR pmkv has no maxmemory: it does not evict keys (the pool's size bounds the data)"),
            };
        }
        let Some(slot) = settable(sh, &name) else {
            return Reply::err(format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'"));
        };
        match int(&p[1]) {
            Some(v) if v >= 0 => set.push((slot, v as u64)),
            _ => {
                return Reply::err(format!(
                    "ERR Invalid argument '{}' for CONFIG SET '{name}' - argument couldn't be parsed into an integer",
                    String::from_utf8_lossy(&p[1])
                ))
            }
        }
    }
    for (slot, v) in set {
        slot.store(v, Ordering::Relaxed);
    }
    if let Some(n) = backlog {
        sh.repl.set_backlog_size(n);
    }
    let mut e = sh.encodings.lock().unwrap_or_else(|e| e.into_inner());
    for (name, v) in encodings {
        e.insert(name, v);
    }
    Reply::ok()
}

/// INFO [section ...]: Redis's sections, each only when asked for (`default`, `all` and
/// `everything` name sets of them, as in Redis; names in any case; none: `default`).
/// `latencystats` and `modules` are not kept; `replication` describes a
/// primary without replicas (replication is not built).
fn info(sh: &Shared, a: &[Vec<u8>]) -> Reply {
    use std::sync::atomic::Ordering::Relaxed;
    const DEFAULT: &[&str] =
        &["server", "clients", "memory", "persistence", "stats", "replication", "cpu", "cluster", "keyspace"];
    let mut want: Vec<String> = Vec::new();
    for w in a.iter().map(|w| String::from_utf8_lossy(w).to_ascii_lowercase()) {
        match w.as_str() {
            "default" => want.extend(DEFAULT.iter().map(|s| s.to_string())),
            "all" | "everything" => {
                want.extend(DEFAULT.iter().map(|s| s.to_string()));
                want.extend(["commandstats".into(), "errorstats".into()]);
            }
            _ => want.push(w),
        }
    }
    if a.is_empty() {
        want.extend(DEFAULT.iter().map(|s| s.to_string()));
    }
    let wants = |name: &str| want.iter().any(|w| w == name);
    let s = &sh.store;
    let info = s.info();
    let mut t = String::new();
    let mut section = |name: &str, body: String| {
        if !t.is_empty() {
            t.push_str("\r\n");
        }
        t.push_str(&format!("# {name}\r\n{body}"));
    };
    if wants("server") {
        let up = sh.started.elapsed().as_secs();
        section(
            "Server",
            format!(
                "redis_version:7.0.0-pmkv\r\npmkv_version:{}\r\npmkv_engine:{}\r\nredis_mode:{}\r\narch_bits:{}\r\n\
                 process_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{up}\r\nuptime_in_days:{}\r\n",
                env!("CARGO_PKG_VERSION"),
                info.name,
                if sh.cluster.is_some() { "cluster" } else { "standalone" },
                usize::BITS,
                std::process::id(),
                sh.port,
                up / 86_400
            ),
        );
    }
    if wants("clients") {
        section(
            "Clients",
            format!(
                "connected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\n",
                sh.clients.load(Relaxed),
                sh.max_clients,
                sh.all_dbs().iter().map(|ks| ks.ready.clients()).sum::<usize>()
            ),
        );
    }
    if wants("memory") {
        if let Ok(m) = s.memory() {
            section(
                "Memory",
                format!(
                    "used_memory:{}\r\npmkv_dram_bytes:{}\r\npmkv_pm_bytes:{}\r\nmem_allocator:libc\r\n\
                     number_of_cached_scripts:{}\r\n",
                    m.dram_total(),
                    m.dram_total(),
                    m.pm_total(),
                    sh.scripts.lock().unwrap_or_else(|e| e.into_inner()).len()
                ),
            );
        }
    }
    if wants("persistence") {
        // What an acknowledged write survives here, from the medium the pool sits on, its
        // mode and (mode wal) sync policy: yes, no, if-eadr (eadr on DAX: only on eADR
        // hardware, which cannot be detected), all-but-last-second (wal, everysec) or
        // prefix (wal, no: a consistent prefix of unbounded age).
        let d = s.durability();
        let mut b = format!("loading:0\r\naof_enabled:0\r\npmkv_mode:{}\r\npmkv_medium:{}\r\n", sh.mode, d.medium);
        if let Some(p) = d.sync {
            b.push_str(&format!("pmkv_sync:{p}\r\n"));
        }
        for (event, survives) in d.table() {
            b.push_str(&format!("pmkv_survives_{}:{}\r\n", event.name(), survives.name()));
        }
        section("Persistence", b);
    }
    if wants("stats") {
        section(
            "Stats",
            format!(
                "total_connections_received:{}\r\ntotal_commands_processed:{}\r\nrejected_connections:{}\r\n\
                 client_query_buffer_limit_disconnections:{}\r\nclient_output_buffer_limit_disconnections:{}\r\n\
                 total_error_replies:{}\r\n",
                sh.connections.load(Relaxed),
                sh.commands.load(Relaxed),
                sh.rejected.load(Relaxed),
                sh.query_limit_closes.load(Relaxed),
                sh.output_limit_closes.load(Relaxed),
                sh.stats.total_errors()
            ),
        );
    }
    if let Some(r) = wants("replication").then(|| sh.replica.info(&sh.repl.replid())).flatten() {
        section("Replication", r);
    } else if wants("replication") {
        section("Replication", sh.repl.info());
    }
    if wants("cpu") {
        let secs = |who| {
            // SAFETY: getrusage writes the struct it is given; a zeroed rusage is valid.
            let mut u: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: `u` is a valid, writable rusage.
            unsafe { libc::getrusage(who, &mut u) };
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            (tv(u.ru_stime), tv(u.ru_utime))
        };
        let ((sys, user), (csys, cuser)) = (secs(libc::RUSAGE_SELF), secs(libc::RUSAGE_CHILDREN));
        section(
            "CPU",
            format!(
                "used_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:{csys:.6}\r\n\
                 used_cpu_user_children:{cuser:.6}\r\n"
            ),
        );
    }
    if wants("commandstats") {
        section("Commandstats", sh.stats.lines());
    }
    if wants("errorstats") {
        section("Errorstats", sh.stats.error_lines());
    }
    if wants("cluster") {
        section("Cluster", format!("cluster_enabled:{}\r\n", sh.cluster.is_some() as u8));
    }
    if wants("keyspace") {
        section("Keyspace", crate::select::info_keyspace(sh));
    }
    Reply::Bulk(t.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn glob_matches_like_redis() {
        assert!(glob(b"*", b"anything") && glob(b"h?llo", b"hello") && glob(b"h*o", b"hello"));
        assert!(glob(b"h[ae]llo", b"hallo") && !glob(b"h[^e]llo", b"hello") && glob(b"k[0-9]", b"k7"));
        assert!(!glob(b"a*b", b"acd") && glob(b"a\\*", b"a*") && !glob(b"a\\*", b"ab"));
    }
}
