//! Which node runs a command in a cluster: the keys a command is routed by, and the
//! redirect when its slot is not served here. Shared by the dispatcher and by scripts'
//! `redis.call` (a module of its own, so that `commands` and `script` do not import each
//! other).

use crate::command::Command;
use crate::data::int;
use crate::resp::Reply;
use crate::Shared;

/// The keys a cluster node routes `args` by: the table's, EVAL's declared keys, and the
/// ends of PMKV.RANGE that are keys.
pub(crate) fn route_keys<'a>(cmd: &Command, args: &'a [Vec<u8>]) -> Vec<&'a [u8]> {
    match cmd.name {
        "EVAL" | "EVALSHA" | "EVAL_RO" | "EVALSHA_RO" | "FCALL" | "FCALL_RO" => {
            let n = int(&args[2]).unwrap_or(0).max(0) as usize;
            args.iter().skip(3).take(n).map(|k| k.as_slice()).collect()
        }
        "PMKV.RANGE" => args[1..3]
            .iter()
            .filter(|e| !matches!(e.as_slice(), b"-" | b"+"))
            .map(|e| match e.first() {
                Some(b'[' | b'(') => &e[1..],
                _ => e.as_slice(),
            })
            .collect(),
        _ => cmd.keys(args),
    }
}

/// How many of `keys` exist on this node, and how many there are (a migrating slot's
/// question; an expired key not yet removed counts as there, as in Redis).
fn present(sh: &Shared, keys: &[&[u8]]) -> (usize, usize) {
    let here = keys
        .iter()
        .filter(|k| sh.ks(0).may_have_meta(k) || sh.store.contains(&sh.ks(0).phys(k)).unwrap_or(false))
        .count();
    (here, keys.len())
}

/// On a cluster node: `Some(redirect)` when the command on `slot` with `keys` does not run
/// here (the caller holds the gate; see [`crate::cluster::Cluster::route`]).
pub(crate) fn misrouted(sh: &Shared, slot: Option<u16>, asking: bool, keys: &[&[u8]]) -> Option<Reply> {
    let (Some(cl), Some(slot)) = (&sh.cluster, slot) else { return None };
    cl.route(slot, asking, || present(sh, keys)).err()
}
