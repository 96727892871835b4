//! What a command is: its arity, which of its arguments are keys, its group, and — for a
//! data type's command — its handler, as in Redis's own command table. The table itself
//! (every command, found by name) is [`crate::table`], above the types whose commands it
//! lists; this module is below them, so a type module can describe its commands
//! ([`write`], [`read`], [`blocking`]) without importing the table.
//!
//! One description serves four needs, so they cannot disagree: a command is refused
//! before anything is applied when it has the wrong number of arguments; the key
//! positions say which stripe locks a command takes; `pmkv serve --help` lists the
//! commands; `COMMAND COUNT` counts them.

use crate::keyspace::{Tx, TxResult};
use crate::resp::Reply;

/// Where a command's keys are (Redis's `first key`, `last key`, `step`; `last` < 0 counts
/// from the end, `first` 0: no keys).
#[derive(Clone, Copy, Debug)]
pub struct Keys {
    pub first: usize,
    pub last: isize,
    pub step: usize,
    /// Non-zero: the keys are counted by the argument at this position (Redis's
    /// `keynum`): that many keys follow it (LMPOP); `first`/`last`/`step` are unused.
    pub numkeys: usize,
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
    /// Only reads data (Redis's `readonly` flag): what a read-only script may call.
    pub read_only: bool,
    /// The handler of a data type's command (`None`: dispatched by [`crate::data`]).
    pub(crate) run: Option<Handler>,
    /// A blocking command's non-blocking try (`None`: not a blocking command): its reply,
    /// or `None` when it would block ([`crate::blocking`]).
    pub(crate) attempt: Option<Attempt>,
}

/// A blocking command's try: the command's name, its arguments after the name.
pub(crate) type Attempt = fn(&mut Tx, &str, &[Vec<u8>]) -> TxResult<Option<Reply>>;

/// A data command's handler: the command's name (upper case), its arguments after the
/// name, over the command's [`Tx`].
pub(crate) type Handler = fn(&mut Tx, &mut Ctx, &str, &[Vec<u8>]) -> TxResult<Reply>;

/// The groups `serve --help` lists the commands in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    Connection,
    Server,
    Keys,
    Strings,
    Hashes,
    Lists,
    Sets,
    SortedSets,
    Expiry,
    Transactions,
    Scripting,
    Cluster,
}

impl Group {
    pub const ALL: [Group; 12] = [
        Group::Strings,
        Group::Hashes,
        Group::Lists,
        Group::Sets,
        Group::SortedSets,
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
            Group::Lists => "lists",
            Group::Sets => "sets",
            Group::SortedSets => "sorted sets",
            Group::Expiry => "expiry",
            Group::Transactions => "transactions",
            Group::Scripting => "scripting",
            Group::Cluster => "cluster",
        }
    }
}

pub(crate) const NONE: Keys = Keys { first: 0, last: 0, step: 0, numkeys: 0 };
pub(crate) const ONE: Keys = Keys { first: 1, last: 1, step: 1, numkeys: 0 };
pub(crate) const ALL_ARGS: Keys = Keys { first: 1, last: -1, step: 1, numkeys: 0 };
/// The first two arguments (a move's source and destination).
pub(crate) const TWO: Keys = Keys { first: 1, last: 2, step: 1, numkeys: 0 };
/// A count at argument 1, then that many keys (LMPOP, SINTERCARD, ZUNION …).
pub(crate) const NUMKEYS: Keys = Keys { first: 2, last: 2, step: 1, numkeys: 1 };
/// A count at argument 2 (after a timeout), then that many keys (BLMPOP, BZMPOP).
pub(crate) const NUMKEYS_AT_2: Keys = Keys { first: 3, last: 3, step: 1, numkeys: 2 };
/// Every argument but the last, a timeout (BLPOP, BZPOPMIN).
pub(crate) const ALL_BUT_LAST: Keys = Keys { first: 1, last: -2, step: 1, numkeys: 0 };

pub(crate) const fn c(name: &'static str, arity: i32, keys: Keys, group: Group) -> Command {
    Command { name, arity, keys, group, no_multi: false, read_only: false, run: None, attempt: None }
}

pub(crate) const fn conn(name: &'static str, arity: i32, group: Group) -> Command {
    Command { name, arity, keys: NONE, group, no_multi: true, read_only: false, run: None, attempt: None }
}

/// A data type's command that writes, with its handler.
pub(crate) const fn write(name: &'static str, arity: i32, keys: Keys, group: Group, run: Handler) -> Command {
    Command { name, arity, keys, group, no_multi: false, read_only: false, run: Some(run), attempt: None }
}

/// A data type's blocking command: its handler (the form MULTI runs: never blocks) and
/// its try ([`crate::blocking`]).
pub(crate) const fn blocking(
    name: &'static str,
    arity: i32,
    keys: Keys,
    group: Group,
    run: Handler,
    attempt: Attempt,
) -> Command {
    Command { name, arity, keys, group, no_multi: false, read_only: false, run: Some(run), attempt: Some(attempt) }
}

/// A data type's command that only reads, with its handler.
pub(crate) const fn read(name: &'static str, arity: i32, keys: Keys, group: Group, run: Handler) -> Command {
    Command { name, arity, keys, group, no_multi: false, read_only: true, run: Some(run), attempt: None }
}

/// Per-command context the data commands need from the connection.
pub(crate) struct Ctx<'c> {
    /// Bytes of reply allowed before the output limit.
    pub budget: usize,
    pub resp3: bool,
    /// The connection's scan cursors (cursor n → the key or field to resume after).
    pub cursors: &'c mut Vec<Vec<u8>>,
    /// Redis's encoding thresholds as `CONFIG SET` left them (OBJECT ENCODING answers
    /// with them); `None`: Redis's defaults.
    pub encodings: Option<&'c std::sync::Mutex<std::collections::BTreeMap<&'static str, String>>>,
}

/// An integer argument, as Redis reads one.
pub(crate) fn int(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// The data commands that only read (every other data command may write): what a
/// read-only script (EVAL_RO, `#!lua flags=no-writes`) may call.
pub(crate) const READS: &[&str] = &[
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
        self.data() && !self.read_only && !READS.contains(&self.name)
    }

    /// Whether this is a data command (strings, a type's, keys, expiry).
    pub fn data(&self) -> bool {
        matches!(
            self.group,
            Group::Strings
                | Group::Hashes
                | Group::Lists
                | Group::Sets
                | Group::SortedSets
                | Group::Keys
                | Group::Expiry
        )
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
        if k.numkeys > 0 {
            let n = args.get(k.numkeys).and_then(|n| int(n)).unwrap_or(0).max(0) as usize;
            // Keys before the count (a STORE form's destination): `first..=last`.
            let before = if k.first > 0 && k.first < k.numkeys { k.first..k.last as usize + 1 } else { 0..0 };
            return before
                .filter_map(|i| args.get(i))
                .chain(args.iter().skip(k.numkeys + 1).take(n))
                .map(Vec::as_slice)
                .collect();
        }
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
