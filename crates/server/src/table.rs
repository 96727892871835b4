//! The command table: every command the server knows, found by name.
//!
//! The table is [`BASE`] (the server's own commands, strings and hashes, dispatched by
//! [`crate::data`]) and then each data type's list ([`crate::types`]), where every
//! command is registered next to its handler ([`Command::run`]). What a command is (arity,
//! keys, group, handler) is [`crate::command`]; this module only gathers the lists, so it
//! sits above the types: adding a type adds one line to [`commands`].

use crate::command::{c, conn, unknown, wrong_args, Command, Group, Keys, ALL_ARGS, NONE, ONE};
use std::collections::HashMap;
use std::sync::OnceLock;

use Group::*;

/// The server's own commands, strings and hashes, by group.
pub const BASE: &[Command] = &[
    c("GET", 2, ONE, Strings),
    c("SET", -3, ONE, Strings),
    c("SETNX", 3, ONE, Strings),
    c("SETEX", 4, ONE, Strings),
    c("PSETEX", 4, ONE, Strings),
    c("GETSET", 3, ONE, Strings),
    c("GETDEL", 2, ONE, Strings),
    c("GETEX", -2, ONE, Strings),
    c("MGET", -2, ALL_ARGS, Strings),
    c("MSET", -3, Keys { first: 1, last: -1, step: 2, numkeys: 0 }, Strings),
    c("MSETNX", -3, Keys { first: 1, last: -1, step: 2, numkeys: 0 }, Strings),
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
    c("BITOP", -4, Keys { first: 2, last: -1, step: 1, numkeys: 0 }, Strings),
    c("LCS", -3, Keys { first: 1, last: 2, step: 1, numkeys: 0 }, Strings),
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
    c("RENAME", 3, Keys { first: 1, last: 2, step: 1, numkeys: 0 }, Keys),
    c("RENAMENX", 3, Keys { first: 1, last: 2, step: 1, numkeys: 0 }, Keys),
    c("COPY", -3, Keys { first: 1, last: 2, step: 1, numkeys: 0 }, Keys),
    c("MOVE", 3, ONE, Keys),
    c("SWAPDB", 3, NONE, Keys),
    c("RANDOMKEY", 1, NONE, Keys),
    crate::command::read("DUMP", 2, ONE, Keys, crate::dump::dump),
    crate::command::write("RESTORE", -4, ONE, Keys, crate::dump::restore),
    crate::command::read("OBJECT", -2, Keys { first: 2, last: 2, step: 1, numkeys: 0 }, Keys, crate::object::object),
    crate::command::write("SORT", -2, ONE, Keys, crate::sort::sort),
    crate::command::read("SORT_RO", -2, ONE, Keys, crate::sort::sort),
    c("MEMORY", -2, Keys { first: 2, last: 2, step: 1, numkeys: 0 }, Keys),
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
    Command { no_multi: true, ..c("WATCH", -2, ALL_ARGS, Transactions) },
    c("UNWATCH", 1, NONE, Transactions),
    c("EVAL", -3, NONE, Scripting),
    c("EVALSHA", -3, NONE, Scripting),
    c("EVAL_RO", -3, NONE, Scripting),
    c("EVALSHA_RO", -3, NONE, Scripting),
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
    conn("SYNC", 1, Server),
    conn("PSYNC", -3, Server),
    c("REPLCONF", -1, NONE, Server),
    conn("WAIT", 3, Server),
];

/// Every command: [`BASE`], then each type's.
pub fn commands() -> &'static [&'static Command] {
    static ALL: OnceLock<Vec<&'static Command>> = OnceLock::new();
    ALL.get_or_init(|| {
        [BASE, crate::types::list::COMMANDS, crate::types::set::COMMANDS, crate::types::zset::COMMANDS]
            .iter()
            .flat_map(|l| l.iter())
            .collect()
    })
}

/// `cmd`'s position in [`commands`] (for per-command counters).
pub fn index(cmd: &Command) -> usize {
    static AT: OnceLock<HashMap<usize, usize>> = OnceLock::new();
    let at =
        AT.get_or_init(|| commands().iter().enumerate().map(|(i, c)| (*c as *const Command as usize, i)).collect());
    *at.get(&(cmd as *const Command as usize)).expect("a command of the table")
}

/// The command named `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    commands().iter().copied().find(|c| c.name.as_bytes().eq_ignore_ascii_case(name))
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
        let names: Vec<&str> = commands().iter().filter(|c| c.group == g).map(|c| c.name).collect();
        t.push_str(&format!("  {:<13} {}\n", format!("{}:", g.name()), names.join(" ")));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::READS;

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
        let all = commands();
        for (i, c) in all.iter().enumerate() {
            assert!(all[..i].iter().all(|d| d.name != c.name), "{} twice", c.name);
            assert_eq!(index(c), i);
        }
        // A type's commands are in the table, with their handlers.
        let lpush = lookup(b"lpush").unwrap();
        assert!(lpush.run.is_some() && lpush.writes() && !lookup(b"lrange").unwrap().writes());
    }
}
