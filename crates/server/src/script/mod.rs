//! Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT LOAD/EXISTS/FLUSH/KILL, with
//! Redis's semantics — the `KEYS` and `ARGV` tables, `redis.call`/`redis.pcall`, Redis's
//! conversions between replies and Lua values, `#!lua` shebang flags, and a script runs
//! as one isolated unit (the caller holds the gate exclusively). Client libraries build
//! locks, rate limiters and compare-and-set on this (redis-py's `Lock` releases through a
//! script).
//!
//! Lua 5.1, as Redis embeds, through `mlua` with the interpreter built from source
//! (`vendored`): no system Lua to install, and mlua is the maintained binding (rlua was
//! folded into it). Each script gets a fresh interpreter ([`sandbox`]: no bytecode, no
//! file or OS access, read-only globals) with at most 64 MiB of memory.
//!
//! Writes: a script's writes form one [`Tx`], applied as one atomic batch when it
//! returns, so a crash never leaves half a script. As in Redis, a script that raises an
//! error keeps the writes its earlier `redis.call`s made (Redis has no rollback); each
//! `redis.call` is itself all or nothing. A script that is *stopped* — by SCRIPT KILL,
//! by SHUTDOWN, or by the server's own time limit — has none of its writes applied: its
//! Tx is dropped. Redis refuses SCRIPT KILL once a script has written ("UNKILLABLE"),
//! because it cannot take the writes back; pmkv can, so it kills any script.
//!
//! Time: while a script has run longer than `lua-time-limit` (Redis's default, 5 s; also
//! `busy-reply-threshold`), every other client's command but SCRIPT KILL, FUNCTION KILL,
//! SHUTDOWN, AUTH, HELLO and QUIT is answered `BUSY` (see [`State::busy`]), as in Redis.
//! Redis lets such a script run until someone kills it; pmkv also stops it by itself
//! after `pmkv-script-time-limit` (60 s by default, 0 never), so no client can stall the
//! server for longer than that.

mod functions;
mod libs;
mod reply;
mod sandbox;

use crate::command;
use crate::conn::Conn;
use crate::data::{int, upper, Ctx};
use crate::keyspace::Tx;
use crate::resp::Reply;
use crate::table;
use crate::Shared;
pub(crate) use functions::load_kept as load_kept_functions;
pub use functions::Libraries;
use mlua::chunk::ChunkMode;
use mlua::{Lua, MultiValue, Value};
use reply::{from_lua, to_lua};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const MEMORY: usize = 64 << 20;
/// Bytes of script source the server keeps for EVALSHA: what clients can make it hold is
/// bounded (Redis's cache of EVAL scripts grew without bound until 7.4 evicted it). Past
/// it, EVAL still runs but is not cached, and SCRIPT LOAD is refused.
const CACHE_BYTES: usize = 16 << 20;
/// Lua instructions between two looks at the clock and the kill flag: ~50 µs of Lua.
const HOOK_EVERY: u32 = 10_000;

/// Keep `src` for EVALSHA if the cache has room; whether it was kept.
fn cache(scripts: &mut std::collections::HashMap<String, String>, sha: String, src: &str) -> bool {
    let used: usize = scripts.values().map(String::len).sum();
    if scripts.contains_key(&sha) || used + src.len() <= CACHE_BYTES {
        scripts.insert(sha, src.to_string());
        true
    } else {
        false
    }
}

fn sha1_hex(s: &[u8]) -> String {
    sha1_smol::Sha1::from(s).digest().to_string()
}

/// The script running now, as the other connections see it: whether to answer BUSY,
/// and the request to stop it. Scripts run one at a time (under the gate), so one slot.
pub struct State {
    epoch: Instant,
    /// The running script's number (0: none runs). A kill names the number it saw, so a
    /// kill that races with the script's end cannot stop the next script.
    running: AtomicU64,
    /// When the running script started, in ms since `epoch`.
    started_ms: AtomicU64,
    /// The number of the script to stop (0: none).
    kill: AtomicU64,
    next: AtomicU64,
    /// `lua-time-limit` / `busy-reply-threshold`, ms.
    pub busy_ms: AtomicU64,
    /// `pmkv-script-time-limit`, ms (0: never stopped by the server).
    pub stop_ms: AtomicU64,
    /// The running function's name and command (FUNCTION STATS); `None` while none
    /// runs or the running script is an EVAL. Written only as a script starts and ends.
    function: std::sync::Mutex<Option<RunningFunction>>,
}

impl Default for State {
    fn default() -> State {
        State {
            epoch: Instant::now(),
            running: AtomicU64::new(0),
            started_ms: AtomicU64::new(0),
            kill: AtomicU64::new(0),
            next: AtomicU64::new(1),
            busy_ms: AtomicU64::new(5_000),
            stop_ms: AtomicU64::new(60_000),
            function: std::sync::Mutex::new(None),
        }
    }
}

/// A running function's name and its FCALL command (FUNCTION STATS).
pub(crate) type RunningFunction = (String, Vec<Vec<u8>>);

/// Why a running script is stopped.
#[derive(Clone, Copy)]
enum Stop {
    Killed,
    TimeLimit(u64),
}

impl Stop {
    fn message(self) -> String {
        match self {
            Stop::Killed => "ERR Script killed by user with SCRIPT KILL (none of its writes were applied)".into(),
            Stop::TimeLimit(ms) => {
                format!("ERR Script stopped after {ms} ms (pmkv-script-time-limit; none of its writes were applied)")
            }
        }
    }
}

impl State {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Whether a script has run past `lua-time-limit`: other clients get BUSY. One
    /// atomic load when no script runs.
    pub fn busy(&self) -> bool {
        self.running.load(Ordering::Acquire) != 0
            && self.now_ms().saturating_sub(self.started_ms.load(Ordering::Acquire))
                >= self.busy_ms.load(Ordering::Relaxed)
    }

    /// Ask the running script to stop, whatever it is (SHUTDOWN); false when none runs.
    pub fn kill(&self) -> bool {
        let r = self.running.load(Ordering::Acquire);
        if r == 0 {
            return false;
        }
        self.kill.store(r, Ordering::Release);
        true
    }

    /// SCRIPT KILL (`function` false) or FUNCTION KILL (true), as Redis answers them:
    /// each stops only its own kind (the other kind's kill answers BUSY), NOTBUSY when
    /// nothing runs.
    pub(crate) fn kill_kind(&self, function: bool) -> Reply {
        if self.running.load(Ordering::Acquire) == 0 {
            return Reply::err("NOTBUSY No scripts in execution right now.");
        }
        if self.running_function().is_some() != function {
            return self.busy_reply();
        }
        self.kill();
        Reply::ok()
    }

    /// The function running now and its command (`None`: none, or an EVAL).
    pub(crate) fn running_function(&self) -> Option<RunningFunction> {
        if self.running.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.function.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How long the running script has run, ms.
    pub(crate) fn running_ms(&self) -> u64 {
        self.now_ms().saturating_sub(self.started_ms.load(Ordering::Acquire))
    }

    /// The reply to a command refused while a script is busy, as Redis words it (a
    /// function is stopped with FUNCTION KILL, a script with SCRIPT KILL).
    pub fn busy_reply(&self) -> Reply {
        let kill = if self.running_function().is_some() { "FUNCTION" } else { "SCRIPT" };
        Reply::err(format!("BUSY Redis is busy running a script. You can only call {kill} KILL or SHUTDOWN NOSAVE."))
    }

    /// Start a script (`function`: a function's name and its FCALL command).
    fn begin_as(&self, function: Option<RunningFunction>) -> u64 {
        *self.function.lock().unwrap_or_else(|e| e.into_inner()) = function;
        self.begin()
    }

    fn begin(&self) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.started_ms.store(self.now_ms(), Ordering::Release);
        self.running.store(id, Ordering::Release);
        id
    }

    fn end(&self) {
        self.running.store(0, Ordering::Release);
    }

    /// Whether script `id` must stop now.
    fn stop(&self, id: u64) -> Option<Stop> {
        if self.kill.load(Ordering::Acquire) == id {
            return Some(Stop::Killed);
        }
        let limit = self.stop_ms.load(Ordering::Relaxed);
        (limit != 0 && self.now_ms().saturating_sub(self.started_ms.load(Ordering::Acquire)) >= limit)
            .then_some(Stop::TimeLimit(limit))
    }
}

/// Whether `args` may run while a script is busy (as Redis's allow-busy commands).
pub fn allowed_while_busy(args: &[Vec<u8>]) -> bool {
    let name = upper(&args[0]);
    match name.as_str() {
        // Transaction state only (Redis's `allow-busy` commands): a pipelined MULTI ...
        // EXEC must not lose its MULTI to a busy script and run half of itself later.
        "AUTH" | "HELLO" | "QUIT" | "SHUTDOWN" | "MULTI" | "DISCARD" | "WATCH" | "UNWATCH" => true,
        "SCRIPT" => args.get(1).is_some_and(|s| upper(s) == "KILL"),
        // FUNCTION STATS shows the running function (and answers BUSY for a script).
        "FUNCTION" => args.get(1).is_some_and(|s| matches!(upper(s).as_str(), "KILL" | "STATS")),
        _ => false,
    }
}

/// SCRIPT LOAD | EXISTS | FLUSH | KILL.
pub(crate) fn script(sh: &Shared, a: &[Vec<u8>]) -> Reply {
    let sub = upper(&a[0]);
    if sub == "KILL" && a.len() == 1 {
        return sh.script.kill_kind(false);
    }
    let mut scripts = sh.scripts.lock().unwrap_or_else(|e| e.into_inner());
    match sub.as_str() {
        "LOAD" if a.len() == 2 => match std::str::from_utf8(&a[1]) {
            Ok(src) => {
                let sha = sha1_hex(src.as_bytes());
                if cache(&mut scripts, sha.clone(), src) {
                    Reply::bulk(sha)
                } else {
                    Reply::err(format!("ERR the script cache is full ({} MiB): SCRIPT FLUSH", CACHE_BYTES >> 20))
                }
            }
            Err(_) => Reply::err("ERR pmkv runs scripts that are UTF-8 text"),
        },
        "EXISTS" if a.len() >= 2 => Reply::Array(
            a[1..]
                .iter()
                .map(|s| Reply::Int(i64::from(scripts.contains_key(&String::from_utf8_lossy(s).to_lowercase()))))
                .collect(),
        ),
        "FLUSH" if a.len() <= 2 => {
            if let Some(mode) = a.get(1).map(|m| upper(m)) {
                if mode != "SYNC" && mode != "ASYNC" {
                    return Reply::err("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
                }
            }
            scripts.clear();
            Reply::ok()
        }
        _ => Reply::err(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try SCRIPT HELP.",
            String::from_utf8_lossy(&a[0])
        )),
    }
}

/// What a `#!lua` first line asks for.
#[derive(Default)]
struct Shebang {
    /// `flags=no-writes`: write commands are refused.
    no_writes: bool,
}

/// The flags of `src`'s shebang line (none: Redis's behaviour for scripts without one),
/// and the source Lua compiles (the line turned into a comment, so lines keep their
/// numbers). Redis's errors for another engine, an unknown option or flag.
fn shebang(src: &str) -> Result<(Shebang, std::borrow::Cow<'_, str>), Reply> {
    let Some(rest) = src.strip_prefix("#!") else { return Ok((Shebang::default(), src.into())) };
    let line = rest.split('\n').next().unwrap_or_default();
    let mut words = line.split(' ').filter(|w| !w.is_empty());
    let engine = words.next().unwrap_or_default();
    if engine != "lua" {
        return Err(Reply::err(format!("ERR Unexpected engine in script shebang: {engine}")));
    }
    let mut flags = Shebang::default();
    for w in words {
        let Some(list) = w.strip_prefix("flags=") else {
            return Err(Reply::err(format!("ERR Unknown lua shebang option: {w}")));
        };
        for f in list.split(',').filter(|f| !f.is_empty()) {
            match f {
                "no-writes" => flags.no_writes = true,
                "allow-oom" | "allow-stale" | "no-cluster" | "allow-cross-slot-keys" => {}
                other => return Err(Reply::err(format!("ERR Unexpected flag in script shebang: {other}"))),
            }
        }
    }
    Ok((flags, format!("--{}", &src[2..]).into()))
}

/// EVAL script numkeys key… arg… / EVALSHA sha1 numkeys key… arg… (and their `_RO`
/// forms, which refuse writes). The caller holds the gate exclusively.
pub(crate) fn eval(sh: &Shared, c: &mut Conn, cmd: &str, a: &[Vec<u8>]) -> Reply {
    let (src, sha) = if cmd.starts_with("EVALSHA") {
        let sha = String::from_utf8_lossy(&a[0]).to_lowercase();
        match sh.scripts.lock().unwrap_or_else(|e| e.into_inner()).get(&sha) {
            Some(s) => (s.clone(), sha),
            None => return Reply::err("NOSCRIPT No matching script. Please use EVAL."),
        }
    } else {
        match std::str::from_utf8(&a[0]) {
            Ok(s) => {
                let sha = sha1_hex(s.as_bytes());
                cache(&mut sh.scripts.lock().unwrap_or_else(|e| e.into_inner()), sha.clone(), s);
                (s.to_string(), sha)
            }
            Err(_) => return Reply::err("ERR pmkv runs scripts that are UTF-8 text"),
        }
    };
    let (flags, src) = match shebang(&src) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let read_only = flags.no_writes || cmd.ends_with("_RO");
    let (keys, argv) = match keys_and_args(a) {
        Ok(x) => x,
        Err(r) => return r,
    };
    // On a cluster node a script's keys are its declared keys' slot (or, with none declared,
    // a slot served here), as Redis requires: another node's keys are not here to read.
    let home = crate::cluster::slot::common_slot(keys.iter().map(|k| k.as_slice())).ok().flatten();
    let local = |cmd: &command::Command, args: &[Vec<u8>]| -> Option<Reply> {
        sh.cluster.as_ref()?;
        let ks = crate::routing::route_keys(cmd, args);
        let slot = match crate::cluster::slot::common_slot(ks.iter().copied()) {
            Ok(s) => s?,
            Err(r) => return Some(r),
        };
        match home {
            Some(h) if h != slot => {
                Some(Reply::err("ERR Script attempted to access a key of another slot than its declared keys"))
            }
            Some(_) => None,
            None => crate::routing::misrouted(sh, Some(slot), false, &ks)
                .map(|_| Reply::err("ERR Script attempted to access a non local key in a cluster node")),
        }
    };
    run_committed(
        sh,
        c,
        &[],
        &src,
        None,
        keys,
        argv,
        Limits { local: &local, read_only, state: (sh.script.clone(), 0), name: sha, effects: None },
    )
}

/// FCALL function numkeys key… arg… (FCALL_RO: the function must be flagged
/// `no-writes`): the library's code runs in a fresh interpreter, as a script, and the
/// function is called with the keys and arguments. The caller holds the gate exclusively.
pub(crate) fn fcall(sh: &Shared, c: &mut Conn, cmd: &str, a: &[Vec<u8>]) -> Reply {
    let name = String::from_utf8_lossy(&a[0]).into_owned();
    let (code, read_only) = {
        let libs = sh.functions.lock().unwrap_or_else(|e| e.into_inner());
        let Some((lib, f)) = libs.find(&name) else { return Reply::err("ERR Function not found") };
        if let Some(r) = functions::ro_refusal(f, cmd == "FCALL_RO") {
            return r;
        }
        (lib.code.clone(), f.flags.iter().any(|x| x == "no-writes"))
    };
    if int(&a[1]).is_none() {
        return Reply::err("ERR Bad number of keys provided");
    }
    let (keys, argv) = match keys_and_args(a) {
        Ok(x) => x,
        Err(r) => return r,
    };
    if sh.cluster.is_some() {
        return Reply::err("ERR pmkv runs functions on plain servers only; use EVAL on a cluster node");
    }
    let local = |_: &command::Command, _: &[Vec<u8>]| None;
    let lim = Limits { local: &local, read_only, state: (sh.script.clone(), 0), name: name.clone(), effects: None };
    // FUNCTION STATS shows the command (its name in lower case: the case the client
    // sent is not kept).
    let command: Vec<Vec<u8>> =
        std::iter::once(cmd.to_ascii_lowercase().into_bytes()).chain(a.iter().cloned()).collect();
    run_committed(sh, c, &command, &code, Some(&name), keys, argv, lim)
}

/// A script's keys and arguments.
type KeysArgs<'a> = (&'a [Vec<u8>], &'a [Vec<u8>]);

/// EVAL's and FCALL's `numkeys key… arg…`: the keys and the arguments, or Redis's error.
fn keys_and_args(a: &[Vec<u8>]) -> Result<KeysArgs<'_>, Reply> {
    let nkeys = match int(&a[1]) {
        Some(n) if n >= 0 && (n as usize) <= a.len() - 2 => n as usize,
        Some(n) if n >= 0 => return Err(Reply::err("ERR Number of keys can't be greater than number of args")),
        Some(_) => return Err(Reply::err("ERR Number of keys can't be negative")),
        None => return Err(Reply::err("ERR value is not an integer or out of range")),
    };
    let (keys, argv) = a[2..].split_at(nkeys);
    if !keys.iter().all(|k| crate::keyspace::allowed(k)) {
        return Err(crate::keyspace::reserved());
    }
    Ok((keys, argv))
}

/// Run a script (or a library's function `entry`) as the server's running script, and
/// commit its writes as one batch; a stopped script's writes are dropped. `lim.state`'s
/// number is filled in here.
#[allow(clippy::too_many_arguments)]
fn run_committed(
    sh: &Shared,
    c: &mut Conn,
    command: &[Vec<u8>],
    src: &str,
    entry: Option<&str>,
    keys: &[Vec<u8>],
    argv: &[Vec<u8>],
    lim: Limits,
) -> Reply {
    let fx: Effects = RefCell::new(Vec::new());
    let streamed = sh.repl.on();
    let mut lim = Limits { effects: streamed.then_some(&fx), ..lim };
    // In the caller's database; a database the script SELECTs gets a Tx of its own, and
    // all of them are committed as one batch.
    let mut tx = Tx::new(&sh.store, sh.ks(c.db));
    let open = |db: usize| (db < sh.databases()).then(|| Tx::new(&sh.store, sh.ks(db)));
    let mut others = Vec::new();
    lim.state.1 = sh.script.begin_as(entry.map(|f| (f.to_string(), command.to_vec())));
    let (r, stopped) = run(c, &mut tx, (&open, &mut others), src, entry, keys, argv, lim);
    sh.script.end();
    if let Some(why) = stopped {
        // Nothing of a stopped script is applied: its Txs are dropped here.
        drop((tx, others));
        return Reply::err(why.message());
    }
    match Tx::commit_all(std::iter::once(tx).chain(others.into_iter().map(|(_, t)| t)).collect()) {
        Ok(()) => {
            // Under the gate the caller holds exclusively: in order with every write.
            let fx = fx.into_inner();
            let multi = fx.len() > 1;
            sh.repl.feed(fx, multi);
            r
        }
        Err(e) => Reply::err(format!("ERR the script's writes could not be applied, none was: {e}")),
    }
}

/// FUNCTION and its subcommands.
pub(crate) fn function(sh: &Shared, a: &[Vec<u8>]) -> Reply {
    functions::command(sh, a)
}

/// Run `src` against `tx` as EVAL runs it on a plain server (writes allowed, no time
/// limit, no cluster), without committing: for tests that crash a script's batch at
/// every point (`tests/crash.rs`). Its reply.
#[doc(hidden)]
pub fn run_in(tx: &mut Tx, src: &str, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> Reply {
    let state = std::sync::Arc::new(State { stop_ms: AtomicU64::new(0), ..State::default() });
    let id = state.begin();
    let mut c = Conn::new(0, true);
    c.reply_budget = usize::MAX;
    let local = |_: &command::Command, _: &[Vec<u8>]| None;
    let name = sha1_hex(src.as_bytes());
    let lim = Limits { local: &local, read_only: false, state: (state, id), name, effects: None };
    run(&mut c, tx, (&|_| None, &mut Vec::new()), src, None, keys, argv, lim).0
}

fn lua_err(m: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(m.into())
}

/// Refuses a command whose keys are not this node's to serve (a cluster node).
type Local<'a> = &'a dyn Fn(&command::Command, &[Vec<u8>]) -> Option<Reply>;

/// What a script may do, from its caller.
struct Limits<'a> {
    local: Local<'a>,
    /// Write commands are refused (EVAL_RO, `flags=no-writes`).
    read_only: bool,
    /// The server's script state and this script's number in it (whether to stop).
    state: (std::sync::Arc<State>, u64),
    /// What errors call the script: its SHA-1, or the function's name.
    name: String,
    /// Where the effects of its writes are gathered for replicas (`None`: no replica
    /// is streamed): each write's deterministic form, with its logical database.
    effects: Option<&'a Effects>,
}

/// A script's writes as replicas get them (effects replication, as Redis 7 does).
type Effects = RefCell<Vec<(usize, crate::repl_stream::Cmd)>>;

/// A script's other databases: what opens a Tx on logical database `n` (`None`: no
/// such database), and the Txs of the databases it SELECTed, by number.
type OtherDbs<'f, 't> = (&'f dyn Fn(usize) -> Option<Tx<'t>>, &'f mut Vec<(usize, Tx<'t>)>);

/// Run `src` in a fresh sandboxed interpreter, its `redis.call`s against `tx` (the
/// caller's database) or, after `redis.call('SELECT', n)`, against database `n`'s Tx in
/// `dbs` (the script's database only: the caller's stays as it was). The reply, and why
/// the script was stopped if it was (its writes must then be dropped).
#[allow(clippy::too_many_arguments)]
fn run<'t>(
    c: &mut Conn,
    tx: &mut Tx<'t>,
    dbs: OtherDbs<'_, 't>,
    src: &str,
    entry: Option<&str>,
    keys: &[Vec<u8>],
    argv: &[Vec<u8>],
    lim: Limits,
) -> (Reply, Option<Stop>) {
    // The stop, once seen, stays (the sandbox raises it again past pcall).
    let stopped: Rc<Cell<Option<Stop>>> = Rc::new(Cell::new(None));
    let (lua, env) = {
        // The wrapped pcall & co. read the stop the hook below has seen.
        let seen = stopped.clone();
        let check = Rc::new(move || seen.get().map(Stop::message));
        match sandbox::interpreter(MEMORY, check) {
            Ok((lua, env, ro)) => (lua, (env, ro)),
            Err(e) => return (Reply::err(format!("ERR starting Lua: {e}")), None),
        }
    };
    if let Err(e) = libs::open(&lua) {
        return (Reply::err(format!("ERR starting Lua: {e}")), None);
    }
    let (env, ro) = env;
    let budget = c.reply_budget;
    // Scripts start in RESP2 whatever the client speaks (redis.setresp changes it).
    let resp3 = Rc::new(Cell::new(false));
    let mut cursors = Vec::new();
    let tx_cell = RefCell::new(&mut *tx);
    let (open, others) = dbs;
    let others_cell = RefCell::new(others);
    // The script's database: `None` the caller's, else an index of `others`.
    let current: Cell<Option<usize>> = Cell::new(None);
    let caller_db = c.db;
    let cursors_cell = RefCell::new(&mut cursors);
    let call = |lua: &Lua, args: MultiValue, protected: bool| -> mlua::Result<Value> {
        let mut v: Vec<Vec<u8>> = Vec::with_capacity(args.len());
        for x in args {
            match x {
                Value::String(s) => v.push(s.as_bytes().to_vec()),
                Value::Integer(i) => v.push(i.to_string().into_bytes()),
                Value::Number(n) => v.push(lua_number(n).into_bytes()),
                _ => return Err(lua_err("ERR Lua redis lib command arguments must be strings or integers")),
            }
        }
        if v.is_empty() {
            return Err(lua_err("ERR Please specify at least one argument for this redis lib call"));
        }
        let reply = match table::check(&v) {
            // Redis's texts for a script's unknown command and wrong argument count.
            Err(_) if table::lookup(&v[0]).is_none() => Reply::err("ERR Unknown Redis command called from script"),
            Err(_) => Reply::err("ERR Wrong number of args calling Redis command from script"),
            Ok(cmd)
                if cmd.no_multi
                    || cmd.attempt.is_some()
                    || matches!(
                        cmd.group,
                        command::Group::Scripting | command::Group::Transactions | command::Group::Cluster
                    ) =>
            {
                Reply::err("ERR This Redis command is not allowed from script")
            }
            Ok(cmd)
                if matches!(
                    cmd.name,
                    "FLUSHDB" | "FLUSHALL" | "PMKV.RANGE" | "DBSIZE" | "INFO" | "CONFIG" | "MOVE" | "SWAPDB"
                ) =>
            {
                Reply::err(format!("ERR pmkv does not run {} from a script", cmd.name))
            }
            Ok(cmd) if cmd.name == "SELECT" => match int(&v[1]).and_then(|n| usize::try_from(n).ok()) {
                None => Reply::err("ERR value is not an integer or out of range"),
                Some(n) if n == caller_db => {
                    current.set(None);
                    Reply::ok()
                }
                Some(n) => {
                    let mut o = others_cell.borrow_mut();
                    let at = match o.iter().position(|(d, _)| *d == n) {
                        Some(i) => Some(i),
                        None => open(n).map(|t| {
                            o.push((n, t));
                            o.len() - 1
                        }),
                    };
                    match at {
                        Some(i) => {
                            current.set(Some(i));
                            Reply::ok()
                        }
                        None => Reply::err("ERR DB index is out of range"),
                    }
                }
            },
            Ok(cmd) if matches!(cmd.group, command::Group::Connection | command::Group::Server) => match cmd.name {
                "PING" => match v.len() {
                    1 => Reply::Simple("PONG".into()),
                    2 => Reply::bulk(v[1].clone()),
                    _ => Reply::err(command::wrong_args("ping")),
                },
                "ECHO" => Reply::bulk(v[1].clone()),
                "TIME" => {
                    let us =
                        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros());
                    Reply::Array(vec![
                        Reply::bulk((us / 1_000_000).to_string()),
                        Reply::bulk((us % 1_000_000).to_string()),
                    ])
                }
                _ => Reply::err("ERR This Redis command is not allowed from script"),
            },
            Ok(cmd) if lim.read_only && cmd.writes() => {
                Reply::err("ERR Write commands are not allowed from read-only scripts.")
            }
            Ok(cmd) => match (lim.local)(cmd, &v) {
                Some(refused) => refused,
                None => {
                    let mut main = tx_cell.borrow_mut();
                    let mut o = others_cell.borrow_mut();
                    let db = current.get().map_or(caller_db, |i| o[i].0);
                    let tx: &mut Tx = match current.get() {
                        None => &mut main,
                        Some(i) => &mut o[i].1,
                    };
                    let mut cur = cursors_cell.borrow_mut();
                    // Redis's default encoding thresholds (OBJECT ENCODING): a script has no
                    // server settings at hand.
                    let mut cx = Ctx { budget, resp3: resp3.get(), cursors: &mut cur, encodings: None };
                    let mark = tx.savepoint();
                    match crate::data::run(tx, &mut cx, cmd, &v[1..]) {
                        Ok(r) => {
                            if let Some(fx) = lim.effects {
                                let mut out = Vec::new();
                                crate::repl_stream::effects(tx, cmd, &v, &r, &mut out);
                                fx.borrow_mut().extend(out.into_iter().map(|x| (db, x)));
                            }
                            r
                        }
                        Err(r) => {
                            tx.rollback(mark);
                            tx.expired.clear();
                            r
                        }
                    }
                }
            },
        };
        match reply {
            // As Redis 7: an error raised by redis.call names the script and the line.
            Reply::Error(e) if !protected => {
                let at = lua.inspect_stack(1, |d| (d.source().source.map(|s| s.into_owned()), d.current_line()));
                Err(lua_err(match at {
                    Some((Some(src), Some(line))) => format!("{e} script: {}, on {src}:{line}.", lim.name),
                    _ => e,
                }))
            }
            r => to_lua(lua, &r, resp3.get()),
        }
    };
    let out = lua.scope(|scope| {
        // The clock and kill flag, every HOOK_EVERY instructions, in every coroutine too:
        // a global hook (Lua 5.1 copies the hook into every thread a script creates, and
        // mlua's per-thread hook would switch itself off there: `coroutine.wrap(function()
        // while true do end end)()` then ran forever).
        let seen = stopped.clone();
        let (state, id) = lim.state.clone();
        lua.set_global_hook(mlua::HookTriggers::new().every_nth_instruction(HOOK_EVERY), move |_, _| {
            if let Some(s) = seen.get().or_else(|| state.stop(id)) {
                seen.set(Some(s));
                return Err(lua_err(s.message()));
            }
            Ok(mlua::VmState::Continue)
        })?;
        let g = lua.globals();
        let to_table = |items: &[Vec<u8>]| -> mlua::Result<mlua::Table> {
            let t = lua.create_table()?;
            for (i, x) in items.iter().enumerate() {
                t.raw_set(i + 1, lua.create_string(x)?)?;
            }
            Ok(t)
        };
        g.raw_set("KEYS", to_table(keys)?)?;
        g.raw_set("ARGV", to_table(argv)?)?;
        let redis = lua.create_table()?;
        redis.set("call", scope.create_function(|lua, args: MultiValue| call(lua, args, false))?)?;
        redis.set("pcall", scope.create_function(|lua, args: MultiValue| call(lua, args, true))?)?;
        let r3 = resp3.clone();
        redis.set(
            "setresp",
            lua.create_function(move |_, v: Value| match v {
                Value::Integer(n @ (2 | 3)) => {
                    r3.set(n == 3);
                    Ok(())
                }
                Value::Number(n) if n == 2.0 || n == 3.0 => {
                    r3.set(n == 3.0);
                    Ok(())
                }
                _ => Err(lua_err("RESP version must be 2 or 3.")),
            })?,
        )?;
        redis_helpers(&lua, &redis)?;
        // A function's library registers its functions as it runs; FCALL then calls one.
        let registered: Rc<RefCell<Vec<(String, mlua::Function)>>> = Rc::default();
        if entry.is_some() {
            let reg = registered.clone();
            redis.set(
                "register_function",
                lua.create_function(move |_, args: MultiValue| {
                    let (f, cb) = functions::registration(args)?;
                    reg.borrow_mut().push((f.name, cb));
                    Ok(())
                })?,
            )?;
        }
        g.raw_set("redis", redis.clone())?;
        sandbox::seal(&lua, &ro, &["redis"])?;
        match entry {
            None => lua
                .load(src)
                .set_name("@user_script")
                .set_mode(ChunkMode::Text)
                .set_environment(env)
                .eval::<Value>()
                .map(|v| from_lua(&v)),
            Some(name) => {
                lua.load(functions::strip_shebang(src))
                    .set_name("@user_function")
                    .set_mode(ChunkMode::Text)
                    .set_environment(env)
                    .exec()?;
                // As Redis: a function cannot register functions (only the library's
                // code, as it loads).
                redis.raw_set("register_function", Value::Nil)?;
                let f = registered.borrow().iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, f)| f.clone());
                let f = f.ok_or_else(|| lua_err("ERR Function not found"))?;
                f.call::<Value>((to_table(keys)?, to_table(argv)?)).map(|v| from_lua(&v))
            }
        }
    });
    lua.remove_global_hook();
    let stop = stopped.get();
    match out {
        _ if stop.is_some() => (Reply::Nil, stop),
        Ok(r) => (r, None),
        Err(e) => (Reply::err(script_error(&e)), None),
    }
}

/// `redis.error_reply(msg)`'s error, as Redis 7.0 makes it: `-CODE text` or `CODE
/// text` keeps its code (the first word), a message of one word or none gets `ERR`
/// (`error_reply("")` is `ERR `); a trailing newline is dropped.
fn error_text(msg: &[u8]) -> Vec<u8> {
    let m = msg.strip_prefix(b"-").unwrap_or(msg);
    let (code, text) = match m.iter().position(|&b| b == b' ') {
        Some(sp) => (&m[..sp], &m[sp + 1..]),
        None => (&b"ERR"[..], m),
    };
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    let text = text.strip_suffix(b"\r").unwrap_or(text);
    [code, b" ", text].concat()
}

/// The parts of the `redis` table that need no connection: replies, hashing, logging,
/// and the calls Redis keeps for compatibility (replication flags, the debugger).
fn redis_helpers(lua: &Lua, redis: &mlua::Table) -> mlua::Result<()> {
    let reply = |field: &'static str| {
        lua.create_function(move |lua, m: Value| {
            let t = lua.create_table()?;
            match m {
                Value::String(s) if field == "err" => t.set(field, lua.create_string(error_text(&s.as_bytes()))?)?,
                Value::String(s) => t.set(field, s)?,
                _ => return Err(lua_err("wrong number or type of arguments")),
            }
            Ok(t)
        })
    };
    redis.set("error_reply", reply("err")?)?;
    redis.set("status_reply", reply("ok")?)?;
    redis.set(
        "sha1hex",
        lua.create_function(|_, s: Value| match s {
            Value::String(s) => Ok(sha1_hex(&s.as_bytes())),
            Value::Integer(i) => Ok(sha1_hex(i.to_string().as_bytes())),
            Value::Number(n) => Ok(sha1_hex(lua_number(n).as_bytes())),
            _ => Err(lua_err("wrong number of arguments")),
        })?,
    )?;
    for (name, level) in [("LOG_DEBUG", 0), ("LOG_VERBOSE", 1), ("LOG_NOTICE", 2), ("LOG_WARNING", 3)] {
        redis.set(name, level)?;
    }
    // Redis writes notices and warnings to its log (its default verbosity); pmkv's log is
    // its standard error.
    redis.set(
        "log",
        lua.create_function(|_, args: MultiValue| {
            let mut it = args.into_iter();
            let level = match it.next() {
                Some(Value::Integer(l)) if (0..=3).contains(&l) => l,
                Some(Value::Integer(_)) => return Err(lua_err("Invalid debug level.")),
                _ => return Err(lua_err("First argument must be a number (log level).")),
            };
            let words: Vec<String> = it
                .filter_map(|v| match v {
                    Value::String(s) => Some(s.to_string_lossy().to_string()),
                    Value::Integer(i) => Some(i.to_string()),
                    Value::Number(n) => Some(lua_number(n)),
                    _ => None,
                })
                .collect();
            if words.is_empty() {
                return Err(lua_err("redis.log() requires two arguments or more."));
            }
            if level >= 2 {
                eprintln!("pmkv serve: script: {}", words.join(" "));
            }
            Ok(())
        })?,
    )?;
    for (name, v) in [("REPL_NONE", 0), ("REPL_AOF", 1), ("REPL_SLAVE", 2), ("REPL_REPLICA", 2), ("REPL_ALL", 3)] {
        redis.set(name, v)?;
    }
    redis.set(
        "set_repl",
        lua.create_function(|_, v: Value| match v {
            Value::Integer(0..=3) => Ok(()),
            _ => Err(lua_err("ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")),
        })?,
    )?;
    // Scripts replicate by effects, always (Redis 7 too): nothing to switch.
    redis.set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    // No debugger: outside a debugging session Redis's breakpoint returns false and its
    // debug prints nothing.
    redis.set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    redis.set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    redis.set("REDIS_VERSION", "7.0.0")?;
    redis.set("REDIS_VERSION_NUM", 0x0007_0000)?;
    Ok(())
}

/// A Lua number as Redis passes it to a command (integers without a point).
fn lua_number(n: f64) -> String {
    if n == n.trunc() && n.abs() < 1e17 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// The message of a script's error: a `redis.call` error keeps its Redis code
/// (`WRONGTYPE …`, `ERR …`), anything else is an `ERR` with Lua's message.
fn script_error(e: &mlua::Error) -> String {
    let mut e = e;
    while let mlua::Error::CallbackError { cause, .. } = e {
        e = cause;
    }
    match e {
        mlua::Error::RuntimeError(m)
            if m.split(' ').next().is_some_and(|w| w.chars().all(|c| c.is_ascii_uppercase())) =>
        {
            m.clone()
        }
        other => format!("ERR Error running script: {}", other.to_string().replace(['\r', '\n'], " ")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_replies_get_a_code_as_redis_gives_them() {
        // Redis 7.0.15: EVAL "return redis.error_reply(...)" answers these.
        for (msg, want) in [
            (&b"MY_ERR_CODE custom msg"[..], &b"MY_ERR_CODE custom msg"[..]),
            (b"-X y", b"X y"),
            (b"x", b"ERR x"),
            (b"", b"ERR "),
            (b"-", b"ERR "),
            (b"CODE line\r\n", b"CODE line"),
        ] {
            assert_eq!(super::error_text(msg), want, "{}", String::from_utf8_lossy(msg));
        }
    }

    #[test]
    fn the_script_cache_is_bounded() {
        let mut m = std::collections::HashMap::new();
        let big = "x".repeat(super::CACHE_BYTES / 2);
        assert!(super::cache(&mut m, "a".into(), &big));
        assert!(super::cache(&mut m, "b".into(), &big));
        assert!(!super::cache(&mut m, "c".into(), "y"), "full");
        assert!(super::cache(&mut m, "a".into(), &big), "a script already kept stays");
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn script_ids_are_sha1_as_redis_computes_them() {
        // Redis: SCRIPT LOAD "return 1" answers e0e1f9fabfc9d4800c877a703b823ac0578ff8db.
        assert_eq!(super::sha1_hex(b"return 1"), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    }
}
