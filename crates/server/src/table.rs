//! The command table: every command the server knows, its arity and which of its
//! arguments are keys, as in Redis's own table.
//!
//! One table serves four needs, so they cannot disagree: a command is refused before
//! anything is applied when it is unknown or has the wrong number of arguments (and,
//! inside MULTI, that refusal fails the whole EXEC, as in Redis); the key positions say
//! which stripe locks a command takes; `pmkv serve --help` lists exactly these commands;
//! `COMMAND COUNT` counts them.

/// Where a command's keys are (Redis's `first key`, `last key`, `step`; `last` < 0 counts
/// from the end, `first` 0: no keys).
#[derive(Clone, Copy, Debug)]
pub struct Keys {
    pub first: usize,
    pub last: isize,
    pub step: usize,
}

/// One command.
#[derive(Clone, Copy, Debug)]
pub struct Command {
    pub name: &'static str,
    /// Redis's arity: `n` ≥ 0 exactly `n` arguments with the name, `-n` at least `n`.
    pub arity: i32,
    pub keys: Keys,
    /// What it is, for `serve --help`.
    pub group: Group,
    /// Not allowed between MULTI and EXEC (it changes the connection, not the data).
    pub no_multi: bool,
}

/// The groups `serve --help` lists the commands in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    Connection,
    Server,
    Keys,
    Strings,
    Hashes,
    Expiry,
    Transactions,
    Scripting,
    Cluster,
}

impl Group {
    pub const ALL: [Group; 9] = [
        Group::Strings,
        Group::Hashes,
        Group::Keys,
        Group::Expiry,
        Group::Transactions,
        Group::Scripting,
        Group::Cluster,
        Group::Connection,
        Group::Server,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Group::Connection => "connection",
            Group::Server => "server",
            Group::Keys => "keys",
            Group::Strings => "strings",
            Group::Hashes => "hashes",
            Group::Expiry => "expiry",
            Group::Transactions => "transactions",
            Group::Scripting => "scripting",
            Group::Cluster => "cluster",
        }
    }
}

const NONE: Keys = Keys { first: 0, last: 0, step: 0 };
const ONE: Keys = Keys { first: 1, last: 1, step: 1 };
const ALL_ARGS: Keys = Keys { first: 1, last: -1, step: 1 };

const fn c(name: &'static str, arity: i32, keys: Keys, group: Group) -> Command {
    Command { name, arity, keys, group, no_multi: false }
}

const fn conn(name: &'static str, arity: i32, group: Group) -> Command {
    Command { name, arity, keys: NONE, group, no_multi: true }
}

use Group::*;

/// Every command, by group.
pub const COMMANDS: &[Command] = &[
    c("GET", 2, ONE, Strings),
    c("SET", -3, ONE, Strings),
    c("SETNX", 3, ONE, Strings),
    c("SETEX", 4, ONE, Strings),
    c("PSETEX", 4, ONE, Strings),
    c("GETSET", 3, ONE, Strings),
    c("GETDEL", 2, ONE, Strings),
    c("GETEX", -2, ONE, Strings),
    c("MGET", -2, ALL_ARGS, Strings),
    c("MSET", -3, Keys { first: 1, last: -1, step: 2 }, Strings),
    c("MSETNX", -3, Keys { first: 1, last: -1, step: 2 }, Strings),
    c("INCR", 2, ONE, Strings),
    c("DECR", 2, ONE, Strings),
    c("INCRBY", 3, ONE, Strings),
    c("DECRBY", 3, ONE, Strings),
    c("INCRBYFLOAT", 3, ONE, Strings),
    c("APPEND", 3, ONE, Strings),
    c("STRLEN", 2, ONE, Strings),
    c("GETRANGE", 4, ONE, Strings),
    c("SUBSTR", 4, ONE, Strings),
    c("SETRANGE", 4, ONE, Strings),
    c("GETBIT", 3, ONE, Strings),
    c("SETBIT", 4, ONE, Strings),
    c("BITCOUNT", -2, ONE, Strings),
    c("BITPOS", -3, ONE, Strings),
    c("BITOP", -4, Keys { first: 2, last: -1, step: 1 }, Strings),
    c("LCS", -3, Keys { first: 1, last: 2, step: 1 }, Strings),
    c("HSET", -4, ONE, Hashes),
    c("HMSET", -4, ONE, Hashes),
    c("HSETNX", 4, ONE, Hashes),
    c("HGET", 3, ONE, Hashes),
    c("HMGET", -3, ONE, Hashes),
    c("HDEL", -3, ONE, Hashes),
    c("HEXISTS", 3, ONE, Hashes),
    c("HLEN", 2, ONE, Hashes),
    c("HSTRLEN", 3, ONE, Hashes),
    c("HGETALL", 2, ONE, Hashes),
    c("HKEYS", 2, ONE, Hashes),
    c("HVALS", 2, ONE, Hashes),
    c("HINCRBY", 4, ONE, Hashes),
    c("HINCRBYFLOAT", 4, ONE, Hashes),
    c("HSCAN", -3, ONE, Hashes),
    c("HRANDFIELD", -2, ONE, Hashes),
    c("DEL", -2, ALL_ARGS, Keys),
    c("UNLINK", -2, ALL_ARGS, Keys),
    c("EXISTS", -2, ALL_ARGS, Keys),
    c("TYPE", 2, ONE, Keys),
    c("TOUCH", -2, ALL_ARGS, Keys),
    c("RENAME", 3, Keys { first: 1, last: 2, step: 1 }, Keys),
    c("RENAMENX", 3, Keys { first: 1, last: 2, step: 1 }, Keys),
    c("COPY", -3, Keys { first: 1, last: 2, step: 1 }, Keys),
    c("RANDOMKEY", 1, NONE, Keys),
    c("DUMP", 2, ONE, Keys),
    c("RESTORE", -4, ONE, Keys),
    c("MEMORY", -2, Keys { first: 2, last: 2, step: 1 }, Keys),
    c("KEYS", 2, NONE, Keys),
    c("SCAN", -2, NONE, Keys),
    c("DBSIZE", 1, NONE, Keys),
    c("FLUSHDB", -1, NONE, Keys),
    c("FLUSHALL", -1, NONE, Keys),
    c("PMKV.RANGE", -3, NONE, Keys),
    c("EXPIRE", -3, ONE, Expiry),
    c("PEXPIRE", -3, ONE, Expiry),
    c("EXPIREAT", -3, ONE, Expiry),
    c("PEXPIREAT", -3, ONE, Expiry),
    c("TTL", 2, ONE, Expiry),
    c("PTTL", 2, ONE, Expiry),
    c("EXPIRETIME", 2, ONE, Expiry),
    c("PEXPIRETIME", 2, ONE, Expiry),
    c("PERSIST", 2, ONE, Expiry),
    conn("MULTI", 1, Transactions),
    conn("EXEC", 1, Transactions),
    conn("DISCARD", 1, Transactions),
    Command { name: "WATCH", arity: -2, keys: ALL_ARGS, group: Transactions, no_multi: true },
    c("UNWATCH", 1, NONE, Transactions),
    Command { name: "EVAL", arity: -3, keys: NONE, group: Scripting, no_multi: false },
    Command { name: "EVALSHA", arity: -3, keys: NONE, group: Scripting, no_multi: false },
    Command { name: "EVAL_RO", arity: -3, keys: NONE, group: Scripting, no_multi: false },
    Command { name: "EVALSHA_RO", arity: -3, keys: NONE, group: Scripting, no_multi: false },
    c("SCRIPT", -2, NONE, Scripting),
    c("FUNCTION", -2, NONE, Scripting),
    c("FCALL", -3, NONE, Scripting),
    c("FCALL_RO", -3, NONE, Scripting),
    c("CLUSTER", -2, NONE, Cluster),
    conn("ASKING", 1, Cluster),
    conn("READONLY", 1, Cluster),
    conn("READWRITE", 1, Cluster),
    c("MIGRATE", -6, NONE, Cluster),
    c("PMKV.TOPOLOGY", -2, NONE, Cluster),
    c("PMKV.RESTORE", -5, ONE, Cluster),
    c("PING", -1, NONE, Connection),
    c("ECHO", 2, NONE, Connection),
    conn("QUIT", -1, Connection),
    conn("RESET", 1, Connection),
    c("SELECT", 2, NONE, Connection),
    conn("AUTH", -2, Connection),
    conn("HELLO", -1, Connection),
    c("CLIENT", -2, NONE, Connection),
    c("SUBSCRIBE", -2, NONE, Connection),
    c("UNSUBSCRIBE", -1, NONE, Connection),
    c("PSUBSCRIBE", -2, NONE, Connection),
    c("PUNSUBSCRIBE", -1, NONE, Connection),
    c("PUBLISH", 3, NONE, Connection),
    c("PUBSUB", -2, NONE, Connection),
    c("COMMAND", -1, NONE, Server),
    c("CONFIG", -2, NONE, Server),
    c("INFO", -1, NONE, Server),
    c("TIME", 1, NONE, Server),
    conn("SHUTDOWN", -1, Server),
    conn("SAVE", 1, Server),
    c("REPLICAOF", 3, NONE, Server),
    c("SLAVEOF", 3, NONE, Server),
    c("ROLE", 1, NONE, Server),
];

/// `cmd`'s position in [`COMMANDS`] (for per-command counters).
pub fn index(cmd: &Command) -> usize {
    let at = (cmd as *const Command as usize).wrapping_sub(COMMANDS.as_ptr() as usize) / std::mem::size_of::<Command>();
    assert!(at < COMMANDS.len() && std::ptr::eq(&COMMANDS[at], cmd), "a command of the table");
    at
}

/// The command named `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.name.as_bytes().eq_ignore_ascii_case(name))
}

/// The data commands that only read (every other data command may write): what a
/// read-only script (EVAL_RO, `#!lua flags=no-writes`) may call.
const READS: &[&str] = &[
    "GET",
    "DUMP",
    "MGET",
    "STRLEN",
    "GETRANGE",
    "SUBSTR",
    "GETBIT",
    "BITCOUNT",
    "BITPOS",
    "LCS",
    "HRANDFIELD",
    "TOUCH",
    "RANDOMKEY",
    "MEMORY",
    "HGET",
    "HMGET",
    "HEXISTS",
    "HLEN",
    "HSTRLEN",
    "HGETALL",
    "HKEYS",
    "HVALS",
    "HSCAN",
    "EXISTS",
    "TYPE",
    "KEYS",
    "SCAN",
    "DBSIZE",
    "PMKV.RANGE",
    "TTL",
    "PTTL",
    "EXPIRETIME",
    "PEXPIRETIME",
];

impl Command {
    /// Whether the command may change data (Redis's `write` flag): a data command that is
    /// not one of the reads.
    pub fn writes(&self) -> bool {
        matches!(self.group, Group::Strings | Group::Hashes | Group::Keys | Group::Expiry)
            && !READS.contains(&self.name)
    }

    /// Whether `n` arguments (the name included) fit the arity.
    pub fn arity_ok(&self, n: usize) -> bool {
        if self.arity >= 0 {
            n == self.arity as usize
        } else {
            n >= (-self.arity) as usize
        }
    }

    /// The keys among `args` (the name included).
    pub fn keys<'a>(&self, args: &'a [Vec<u8>]) -> Vec<&'a [u8]> {
        let k = self.keys;
        if k.first == 0 || args.len() <= k.first {
            return Vec::new();
        }
        let last = if k.last < 0 { args.len() as isize + k.last } else { k.last };
        let last = (last.max(0) as usize).min(args.len() - 1);
        (k.first..=last).step_by(k.step.max(1)).map(|i| args[i].as_slice()).collect()
    }
}

/// The error for an unknown command, as Redis words it.
pub fn unknown(args: &[Vec<u8>]) -> String {
    format!(
        "ERR unknown command '{}', with args beginning with: {}",
        String::from_utf8_lossy(&args[0]),
        args[1..].iter().take(3).map(|x| format!("'{}' ", String::from_utf8_lossy(x))).collect::<String>()
    )
}

/// The error for a wrong number of arguments, as Redis words it.
pub fn wrong_args(name: &str) -> String {
    format!("ERR wrong number of arguments for '{}' command", name.to_ascii_lowercase())
}

/// Refuse `args` before anything runs: unknown command or wrong arity.
pub fn check(args: &[Vec<u8>]) -> Result<&'static Command, String> {
    let cmd = lookup(&args[0]).ok_or_else(|| unknown(args))?;
    if cmd.arity_ok(args.len()) {
        Ok(cmd)
    } else {
        Err(wrong_args(cmd.name))
    }
}

/// The supported commands, grouped, for `pmkv serve --help`.
pub fn help() -> String {
    let mut t = String::new();
    for g in Group::ALL {
        let names: Vec<&str> = COMMANDS.iter().filter(|c| c.group == g).map(|c| c.name).collect();
        t.push_str(&format!("  {:<13} {}\n", format!("{}:", g.name()), names.join(" ")));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_arity_follow_the_table() {
        let a = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        let mset = lookup(b"mset").unwrap();
        assert_eq!(mset.keys(&a(&["MSET", "a", "1", "b", "2"])), vec![&b"a"[..], b"b"]);
        assert!(mset.arity_ok(3) && mset.arity_ok(5) && !mset.arity_ok(2));
        assert_eq!(lookup(b"DEL").unwrap().keys(&a(&["DEL", "x", "y"])), vec![&b"x"[..], b"y"]);
        assert!(lookup(b"KEYS").unwrap().keys(&a(&["KEYS", "*"])).is_empty());
        assert!(check(&a(&["GET"])).unwrap_err().contains("wrong number"));
        assert!(check(&a(&["NOPE", "x"])).unwrap_err().contains("unknown command 'NOPE'"));
        assert!(lookup(b"set").unwrap().writes() && lookup(b"del").unwrap().writes());
        assert!(!lookup(b"get").unwrap().writes() && !lookup(b"hgetall").unwrap().writes());
        assert!(!lookup(b"ping").unwrap().writes(), "not a data command");
        assert!(READS.iter().all(|r| lookup(r.as_bytes()).is_some()), "every read is a command");
        // Every name once.
        for (i, c) in COMMANDS.iter().enumerate() {
            assert!(COMMANDS[..i].iter().all(|d| d.name != c.name), "{} twice", c.name);
        }
    }
}
