//! EXEC under the crash simulator: the writes of one transaction — strings with and
//! without expiry times, new, grown, shrunk and deleted hashes, a hash replaced by a
//! string — committed as the server commits an EXEC (one `Tx`), crashed at every flush
//! and fence point with the conformance suite's eviction patterns. Every recovered pool
//! must load (its meta records sound), count its keys right, and show exactly the state
//! before the transaction or exactly the state after it. The same again in a cluster
//! pool, whose records are keyed after their slot (on HART: the layout is the server's,
//! the same over every engine).
//! The same batch made by a Lua script (EVAL commits its writes as EXEC does) is crashed
//! at every point too: a SIGKILL during a script leaves all of it or none. So are the
//! writes of each collection type's commands, and RESTOREs of lists, sets and sorted sets.

use pmkv::{EngineFactory, Options, Registry, Store};
use pmkv_conformance::crash::evictions_at;
use pmkv_server::keyspace::{Keyspace, Kind, Meta, Ttl, Tx, REPLICA_KEY};
use pmkv_server::rdb::{self, Value};
use pmkv_substrate::{Eviction, Pool};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex};

/// Crash images taken, with where.
type Images = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

fn opts() -> Options {
    Options::default().initial_size(1 << 20).max_size(64 << 20)
}

/// Far in the future: nothing expires while the test runs.
const LATER: u64 = 4_102_444_800_000;

/// What a client can see: each key's type, value or fields, and expiry time, plus the
/// key count DBSIZE would answer. Fails when the pool's server records do not load or
/// disagree with each other.
fn state(s: &Store, slotted: bool) -> Result<BTreeMap<Vec<u8>, String>, String> {
    let ks = Keyspace::load(s, slotted).map_err(|e| format!("the server's records do not load: {e}"))?;
    let mut tx = Tx::new(s, &ks);
    let keys = keys_of(&tx)?;
    let mut out = BTreeMap::new();
    for k in &keys {
        let kind = tx.kind(k).map_err(|r| format!("{r:?}"))?;
        let ttl = tx.expire_time(k).map_err(|r| format!("{r:?}"))?;
        let desc = match kind {
            Some(k2) if k2 == Kind::STRING => {
                format!("string {:?} ttl {ttl:?}", tx.get(k).map_err(|r| format!("{r:?}"))?)
            }
            Some(k2) if k2 == Kind::HASH => {
                let mut fields = Vec::new();
                tx.hscan(k, None, |f, v| {
                    fields.push((f.to_vec(), v.to_vec()));
                    true
                })
                .map_err(|r| format!("{r:?}"))?;
                let n = tx.hlen(k).map_err(|r| format!("{r:?}"))?;
                if n != fields.len() as u64 {
                    return Err(format!("hash {k:?} counts {n} fields and has {}", fields.len()));
                }
                format!("hash {fields:?} ttl {ttl:?}")
            }
            // Any other type: its records as they are, the meta record's count checked.
            Some(kind) => {
                let recs = tx.records_of(k).map_err(|r| format!("{r:?}"))?;
                let meta = recs.iter().find_map(|(_, v)| Meta::decode(v).filter(|m| m.kind == kind));
                let elems = recs.len() as u64 - 1;
                if meta.map(|m| m.count) != Some(elems) {
                    return Err(format!("{} {k:?} counts {meta:?} and has {elems} elements", kind.name()));
                }
                if kind == Kind::ZSET {
                    zset_sound(&recs, k)?;
                }
                format!("{} {recs:?}", kind.name())
            }
            None => return Err(format!("{k:?} listed but absent")),
        };
        out.insert(k.clone(), desc);
    }
    // DB 0's records: the store's less the other databases' (under `P 'd'`).
    let mut others = 0u64;
    let p = [pmkv_server::keyspace::PREFIX, b"d"].concat();
    s.scan(&pmkv::KeyRange::prefix(p), pmkv::Direction::Forward, |_, _| {
        others += 1;
        true
    })
    .map_err(|e| e.to_string())?;
    let dbsize = ks.user_keys(s.len().map_err(|e| e.to_string())? - others);
    // The replication record (not a key: DBSIZE must not count it), part of the state.
    if let Some(r) = s.get(REPLICA_KEY).map_err(|e| e.to_string())? {
        out.insert(b"(replication record)".to_vec(), format!("{r:?}"));
    }
    if dbsize != keys.len() as u64 {
        return Err(format!("DBSIZE would say {dbsize} for {} keys", keys.len()));
    }
    Ok(out)
}

/// Every user key `tx`'s database shows, in order.
fn keys_of(tx: &Tx) -> Result<Vec<Vec<u8>>, String> {
    let mut keys = Vec::new();
    tx.keys(Bound::Unbounded, |k, _| {
        keys.push(k.to_vec());
        true
    })
    .map_err(|r| format!("{r:?}"))?;
    Ok(keys)
}

/// A sorted set's member records and score-index records pair up one to one
/// (docs/format/server.md): member `m` with score bytes `e` has the index record `e m`.
fn zset_sound(recs: &[(Vec<u8>, Vec<u8>)], k: &[u8]) -> Result<(), String> {
    let p = [pmkv_server::keyspace::PREFIX, b"z", &(k.len() as u32).to_be_bytes(), k].concat();
    let (mut members, mut index) = (Vec::new(), Vec::new());
    for (rk, v) in recs {
        match rk.strip_prefix(p.as_slice()).and_then(|r| r.split_first()) {
            Some((0, m)) => members.push([v.as_slice(), m].concat()),
            Some((1, r)) => index.push(r.to_vec()),
            _ => {}
        }
    }
    members.sort();
    if members != index {
        return Err(format!("zset {k:?}: member records and score index disagree"));
    }
    Ok(())
}

fn before(tx: &mut Tx) {
    tx.set(b"plain", b"x", Ttl::Clear).unwrap();
    tx.set(b"timed", b"t", Ttl::At(LATER)).unwrap();
    for i in 0..12u8 {
        tx.hset(b"h", &[b'f', i], &[i; 9]).unwrap();
        tx.hset(b"gone", &[b'g', i], b"v").unwrap();
        tx.set(&[b's', i], &[i; 20], Ttl::Clear).unwrap();
    }
    tx.hset(b"replaced", b"f", b"v").unwrap();
    script_done(tx, LISTS_BEFORE);
}

/// Run script `src` (no keys, no arguments) in `tx`: it must answer "done".
fn script_done(tx: &mut Tx, src: &str) {
    assert_eq!(pmkv_server::script::run_in(tx, src, &[], &[]), pmkv_server::resp::Reply::bulk("done"));
}

/// The lists the list commands below work on.
const LISTS_BEFORE: &str = r#"
for i = 1, 12 do redis.call('RPUSH', 'q', 'e' .. i) end
for i = 1, 6 do redis.call('LPUSH', 'stack', 's' .. i) end
redis.call('RPUSH', 'dup', 'x', 'y', 'x', 'z', 'x')
redis.call('RPUSH', 'short', 'only')
redis.call('SADD', 'set1', 'a', 'b', 'c', 'd')
redis.call('SADD', 'set2', 'c', 'd', 'e')
redis.call('SADD', 'lone', 'x')
for i = 1, 10 do redis.call('ZADD', 'z1', i, 'm' .. i) end
redis.call('ZADD', 'z2', 1, 'm1', 20, 'm2', 30, 'x')
redis.call('ZADD', 'lex', 0, 'a', 0, 'b', 0, 'c', 0, 'd')
redis.call('ZADD', 'zone', 5, 'only')
return 'done'
"#;

/// Every list write command, in one script: pushes and pops at both ends (one element
/// record each), a move between lists and within one, an insert (which moves the
/// shorter side), LREM (which rewrites the rest), LSET, LTRIM, LMPOP, and a list that
/// empties (its meta record goes).
const LISTS: &str = r#"
redis.call('LPUSH', 'q', 'head1', 'head2')
redis.call('RPUSH', 'q', 'tail1')
assert(redis.call('LPOP', 'q') == 'head2')
assert(redis.call('RPOP', 'q', 2)[1] == 'tail1')
assert(redis.call('LMOVE', 'q', 'stack', 'LEFT', 'RIGHT') == 'head1')
assert(redis.call('RPOPLPUSH', 'stack', 'stack') == 'head1')
assert(redis.call('LINSERT', 'q', 'BEFORE', 'e3', 'mid') == 12)
assert(redis.call('LINSERT', 'q', 'AFTER', 'e10', 'late') == 13)
assert(redis.call('LREM', 'dup', 0, 'x') == 3)
redis.call('LSET', 'stack', -1, 'changed')
redis.call('LTRIM', 'q', 1, -2)
assert(redis.call('LMPOP', 2, 'none', 'short', 'LEFT', 'COUNT', 5)[1] == 'short')
redis.call('RPUSHX', 'dup', 'w')
redis.call('LPUSHX', 'absent', 'w')
return 'done'
"#;

fn lists(tx: &mut Tx) {
    script_done(tx, LISTS);
}

/// Every set write command, in one script: adds, removes, a move, a pop that empties a
/// set, and the STORE forms replacing a set and a list.
const SETS: &str = r#"
assert(redis.call('SADD', 'set1', 'e', 'f', 'a') == 2)
assert(redis.call('SREM', 'set1', 'b', 'zz') == 1)
assert(redis.call('SMOVE', 'set1', 'set2', 'f') == 1)
assert(redis.call('SPOP', 'lone') == 'x')
assert(redis.call('SINTERSTORE', 'both', 'set1', 'set2') == 3)
assert(redis.call('SUNIONSTORE', 'set2', 'set1', 'set2') == 5)
assert(redis.call('SDIFFSTORE', 'q', 'set2', 'set1') == 1)
assert(redis.call('SDIFFSTORE', 'short', 'set1', 'set2') == 0)
assert(#redis.call('SPOP', 'set1', 2) == 2)
return 'done'
"#;

fn sets(tx: &mut Tx) {
    script_done(tx, SETS);
}

/// Every sorted-set write command, in one script: ZADD with each flag (new members,
/// score changes that move index records, INCR), ZINCRBY, removals by member, rank,
/// score and lex range, pops from both ends and a ZMPOP that empties a set, and the
/// STORE forms replacing a sorted set, a list and a plain set.
const ZSETS: &str = r#"
assert(redis.call('ZADD', 'z1', 0.5, 'new', 11, 'm1') == 1)
assert(redis.call('ZADD', 'z1', 'CH', 'GT', 3, 'm2', 1, 'm3') == 1)
assert(redis.call('ZADD', 'z1', 'XX', 'LT', -1, 'm4', 1, 'absent') == 0)
assert(redis.call('ZADD', 'z1', 'NX', 'INCR', 2.5, 'fresh') == '2.5')
assert(redis.call('ZINCRBY', 'z2', 5, 'm1') == '6')
assert(redis.call('ZREM', 'z1', 'm5', 'nope') == 1)
assert(redis.call('ZREMRANGEBYRANK', 'z1', 0, 1) == 2)
assert(redis.call('ZREMRANGEBYSCORE', 'z1', '(8', 9) == 1)
assert(redis.call('ZREMRANGEBYLEX', 'lex', '[b', '(d') == 2)
assert(#redis.call('ZPOPMIN', 'z1', 2) == 4)
assert(#redis.call('ZPOPMAX', 'z2') == 2)
assert(redis.call('ZMPOP', 2, 'none', 'zone', 'MAX')[1] == 'zone')
assert(redis.call('ZRANGESTORE', 'q', 'z1', 0, -1) == 6)
assert(redis.call('ZUNIONSTORE', 'u', 2, 'z1', 'z2', 'WEIGHTS', 2, 3, 'AGGREGATE', 'MAX') == 7)
assert(redis.call('ZINTERSTORE', 'set1', 2, 'z1', 'z2') == 1)
assert(redis.call('ZDIFFSTORE', 'z2', 2, 'z2', 'z1') == 1)
return 'done'
"#;

fn zsets(tx: &mut Tx) {
    script_done(tx, ZSETS);
}

#[test]
fn zset_writes_are_all_or_nothing_at_every_crash_point() {
    all_or_nothing("hart", false, zsets);
    all_or_nothing("nbtree", false, zsets);
}

#[test]
fn set_writes_are_all_or_nothing_at_every_crash_point() {
    all_or_nothing("hart", false, sets);
    all_or_nothing("nbtree", false, sets);
}

#[test]
fn list_writes_are_all_or_nothing_at_every_crash_point() {
    all_or_nothing("hart", false, lists);
    all_or_nothing("nbtree", false, lists);
}

/// RESTOREs of Redis payloads (as pmkv's DUMP writes them) in one script: a new list, a
/// list over an existing one (REPLACE), a new sorted set with an absolute TTL, a sorted
/// set over an existing one and a set over a set. Each key's records — a list's element
/// records, a sorted set's member and score-index records, the meta record with its
/// count and expiry time — land together or not at all.
const RESTORES: &str = r#"
assert(redis.call('RESTORE', 'rl', 0, ARGV[1]).ok == 'OK')
assert(redis.call('RESTORE', 'q', 0, ARGV[1], 'REPLACE').ok == 'OK')
assert(redis.call('RESTORE', 'rz', ARGV[4], ARGV[2], 'ABSTTL').ok == 'OK')
assert(redis.call('RESTORE', 'z1', 0, ARGV[2], 'REPLACE').ok == 'OK')
assert(redis.call('RESTORE', 'set1', 0, ARGV[3], 'REPLACE').ok == 'OK')
return 'done'
"#;

fn restores(tx: &mut Tx) {
    let list = rdb::dump(&Value::List((0..40).map(|i| format!("element {i}").into_bytes()).collect()));
    let zset = rdb::dump(&Value::ZSet((0..30).map(|i| (vec![b'm', i as u8, 0], i as f64 - 10.5)).collect()));
    let set = rdb::dump(&Value::Set((0..25).map(|i| (i * 1000).to_string().into_bytes()).collect()));
    let r = pmkv_server::script::run_in(tx, RESTORES, &[], &[list, zset, set, LATER.to_string().into_bytes()]);
    assert_eq!(r, pmkv_server::resp::Reply::bulk("done"));
}

#[test]
fn restores_of_lists_sets_and_zsets_are_all_or_nothing_at_every_crash_point() {
    all_or_nothing("hart", false, restores);
    all_or_nothing("nbtree", false, restores);
}

/// One EXEC's worth of writes.
fn transaction(tx: &mut Tx) {
    tx.set(b"plain", b"y", Ttl::At(LATER + 1)).unwrap();
    tx.set(b"timed", b"u", Ttl::Clear).unwrap();
    for i in 0..12u8 {
        if i % 2 == 0 {
            tx.hdel(b"h", &[b'f', i]).unwrap();
        } else {
            tx.hset(b"h", &[b'f', i], b"new").unwrap();
        }
        tx.hset(b"fresh", &[b'n', i], &[i; 30]).unwrap();
        tx.set(&[b's', i], &[b'w'; 40], Ttl::Keep).unwrap();
    }
    assert!(tx.del(b"gone").unwrap());
    tx.set(b"replaced", b"now a string", Ttl::Clear).unwrap();
    assert!(tx.set_expire(b"fresh", LATER).unwrap());
}

/// The same writes as [`transaction`], made by a Lua script through `redis.call` (EVAL
/// commits a script's writes as EXEC commits its queue: one Tx).
const SCRIPT: &str = r#"
local at = tonumber(ARGV[1])
redis.call('SET', 'plain', 'y', 'PXAT', at + 1)
redis.call('SET', 'timed', 'u')
for i = 0, 11 do
  local c = string.char(i)
  if i % 2 == 0 then redis.call('HDEL', 'h', 'f' .. c) else redis.call('HSET', 'h', 'f' .. c, 'new') end
  redis.call('HSET', 'fresh', 'n' .. c, string.rep(c, 30))
  redis.call('SET', 's' .. c, string.rep('w', 40), 'KEEPTTL')
end
assert(redis.call('DEL', 'gone') == 1)
redis.call('SET', 'replaced', 'now a string')
assert(redis.call('PEXPIREAT', 'fresh', at) == 1)
return 'done'
"#;

fn exec_is_all_or_nothing(engine: &str, slotted: bool) {
    all_or_nothing(engine, slotted, transaction);
}

fn script(tx: &mut Tx) {
    let r = pmkv_server::script::run_in(tx, SCRIPT, &[], &[LATER.to_string().into_bytes()]);
    assert_eq!(r, pmkv_server::resp::Reply::bulk("done"));
}

fn all_or_nothing(engine: &str, slotted: bool, transaction: fn(&mut Tx)) {
    all_or_nothing_from(engine, slotted, before, transaction);
}

/// A replication record as docs/format/server.md lays it out: version 1, the sync flag,
/// port 6379, `offset`, a 40-character replication ID, the host.
fn replication_record(syncing: bool, offset: u64) -> Vec<u8> {
    let mut b = vec![1, syncing as u8];
    b.extend_from_slice(&6379u16.to_le_bytes());
    b.extend_from_slice(&offset.to_le_bytes());
    b.extend_from_slice(b"8f3c1e0d2b4a69788f3c1e0d2b4a69788f3c1e0d");
    b.extend_from_slice(&9u16.to_le_bytes());
    b.extend_from_slice(b"127.0.0.1");
    b
}

/// A full sync's state when its last batch is written: the record says the sync is in
/// progress, the earlier batches' keys are in.
fn sync_underway(tx: &mut Tx) {
    before(tx);
    tx.put_server_record(REPLICA_KEY, replication_record(true, 1000));
}

/// The last batch of a full sync (`replica_link::load`): keys, a hash, a timed string,
/// and the record with its sync flag cleared, in one Tx.
fn last_sync_batch(tx: &mut Tx) {
    for i in 0..40u8 {
        tx.set(&[b'r', i], &[i; 25], Ttl::Clear).unwrap();
        tx.hset(b"rh", &[b'f', i], &[i; 7]).unwrap();
    }
    tx.set(b"rt", b"timed", Ttl::At(LATER)).unwrap();
    tx.put_server_record(REPLICA_KEY, replication_record(false, 1000));
}

#[test]
fn a_full_syncs_last_batch_clears_its_flag_with_the_keys_at_every_crash_point() {
    all_or_nothing_from("hart", false, sync_underway, last_sync_batch);
    all_or_nothing_from("nbtree", false, sync_underway, last_sync_batch);
}

fn all_or_nothing_from(engine: &str, slotted: bool, before: fn(&mut Tx), transaction: fn(&mut Tx)) {
    let commit = |s: &Store, f: fn(&mut Tx)| {
        let ks = Keyspace::load(s, slotted).unwrap();
        let mut tx = Tx::new(s, &ks);
        f(&mut tx);
        tx.commit().unwrap();
    };
    let setup = |s: &Store| {
        if slotted {
            // A new node: its state record, the one record in no slot.
            pmkv_server::cluster::Cluster::open(s).unwrap();
        }
        commit(s, before);
    };
    crash_each(engine, 10, setup, |s| commit(s, transaction), |s| state(s, slotted).map(|m| format!("{m:?}")));
}

/// The key-moving and bit commands (RENAME of a hash, COPY of a timed string, SETRANGE,
/// SETBIT, BITOP), made in one script: each rewrites a key's records under a new name
/// or in place, and all of them must land together or not at all.
const MOVES: &str = r#"
assert(redis.call('RENAME', 'h', 'h2').ok == 'OK')
assert(redis.call('COPY', 'timed', 'plain', 'REPLACE') == 1)
assert(redis.call('RENAMENX', 'replaced', 'moved') == 1)
redis.call('SETRANGE', 's' .. string.char(1), 30, 'tail')
redis.call('SETBIT', 'bits', 1000, 1)
redis.call('BITOP', 'XOR', 's' .. string.char(2), 's' .. string.char(3), 's' .. string.char(4))
return 'done'
"#;

fn moves(tx: &mut Tx) {
    script_done(tx, MOVES);
}

#[test]
fn renames_copies_and_bit_writes_are_all_or_nothing_at_every_crash_point() {
    all_or_nothing("hart", false, moves);
    all_or_nothing("nbtree", false, moves);
}

#[test]
fn exec_is_all_or_nothing_at_every_crash_point_hart() {
    exec_is_all_or_nothing("hart", false);
}

#[test]
fn exec_is_all_or_nothing_at_every_crash_point_hart_cluster_pool() {
    exec_is_all_or_nothing("hart", true);
}

#[test]
fn exec_is_all_or_nothing_at_every_crash_point_nbtree() {
    exec_is_all_or_nothing("nbtree", false);
}

#[test]
fn a_script_is_all_or_nothing_at_every_crash_point_hart() {
    all_or_nothing("hart", false, script);
}

#[test]
fn a_script_is_all_or_nothing_at_every_crash_point_nbtree() {
    all_or_nothing("nbtree", false, script);
}

#[test]
fn a_script_makes_the_writes_an_exec_makes() {
    // The script above is the transaction: the two tests crash the same batch.
    let f: &'static dyn EngineFactory = Registry::builtin().get("hart").unwrap();
    let states: Vec<_> = [transaction as fn(&mut Tx), script]
        .into_iter()
        .map(|t| {
            let pool = Arc::new(Pool::create_sim(f.layout().unwrap(), &opts().pool_options()).unwrap());
            let s = Store::from_engine(f.open_pool(pool, &opts()).unwrap());
            let ks = Keyspace::load(&s, false).unwrap();
            let mut tx = Tx::new(&s, &ks);
            before(&mut tx);
            tx.commit().unwrap();
            let mut tx = Tx::new(&s, &ks);
            t(&mut tx);
            tx.commit().unwrap();
            state(&s, false).unwrap()
        })
        .collect();
    assert_eq!(states[0], states[1]);
}

/// Crash `op` (run on a pool that `setup` filled) at every flush and fence point (more
/// than `min_images` crash images): every recovered pool's `seen`, and the pool's after
/// `op`, must be what it was before `op` or after it.
fn crash_each(
    engine: &str,
    min_images: usize,
    setup: impl FnOnce(&Store),
    op: impl FnOnce(&Store),
    seen: impl Fn(&Store) -> Result<String, String>,
) {
    let f: &'static dyn EngineFactory = Registry::builtin().get(engine).unwrap();
    let layout = f.layout().unwrap();
    let pool = Arc::new(Pool::create_sim(layout, &opts().pool_options()).unwrap());
    let s = Store::from_engine(f.open_pool(pool.clone(), &opts()).unwrap());
    setup(&s);
    let old = seen(&s).unwrap();
    let images: Images = Arc::default();
    let taken = images.clone();
    pool.sim().unwrap().set_hook(true, move |pt| {
        let mut t = taken.lock().unwrap();
        for ev in evictions_at(pt, 4) {
            t.push((format!("point {} ({:?}, {ev:?})", pt.index, pt.kind), pt.image(ev)));
        }
    });
    op(&s);
    pool.sim().unwrap().clear_hook();
    let new = seen(&s).unwrap();
    assert_ne!(old, new);
    let images = std::mem::take(&mut *images.lock().unwrap());
    assert!(images.len() > min_images, "{engine}: only {} crash images", images.len());
    let mut failures = Vec::new();
    let n = images.len();
    let last = pool.sim().unwrap().image_now(&pool, Eviction::None);
    for (at, img) in images.into_iter().chain([("after the commit".to_string(), last)]) {
        let p = Pool::from_image(&img, Some(layout), &opts().pool_options()).unwrap();
        match f.open_pool(Arc::new(p), &opts()).map_err(|e| e.to_string()).and_then(|e| seen(&Store::from_engine(e))) {
            Ok(g) if g == old || g == new => {}
            Ok(g) => failures.push(format!("{at}: neither before nor after: {g}")),
            Err(e) => failures.push(format!("{at}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{engine}, {} of {n} crash images:\n{}", failures.len(), failures.join("\n"));
}

/// Databases 0 and 3 as a client sees them (DB 3's records carry its prefix).
fn two_dbs(s: &Store) -> Result<String, String> {
    let db0 = state(s, false)?;
    let ks = Keyspace::load_db(s, false, 3).map_err(|e| format!("DB 3 does not load: {e}"))?;
    let mut tx = Tx::new(s, &ks);
    let keys = keys_of(&tx)?;
    let mut db3 = Vec::new();
    for k in &keys {
        db3.push((k.clone(), tx.records_of(k).map_err(|r| format!("{r:?}"))?));
    }
    if ks.user_keys(0) != keys.len() as u64 {
        return Err(format!("DB 3's DBSIZE would say {} for {} keys", ks.user_keys(0), keys.len()));
    }
    Ok(format!("{db0:?} | {db3:?}"))
}

/// MOVE between databases (a hash to DB 3, a timed string back to DB 0), committed as
/// the server commits it: both databases' Txs in one batch.
#[test]
fn a_move_between_databases_is_all_or_nothing_at_every_crash_point() {
    fn setup(s: &Store) {
        let (k0, k3) = (Keyspace::load(s, false).unwrap(), Keyspace::load_db(s, false, 3).unwrap());
        let mut tx = Tx::new(s, &k0);
        before(&mut tx);
        tx.commit().unwrap();
        let mut tx = Tx::new(s, &k3);
        tx.set(b"back", b"to db 0", Ttl::At(LATER)).unwrap();
        tx.hset(b"h", b"other", b"db 3's h").unwrap();
        tx.commit().unwrap();
    }
    fn op(s: &Store) {
        let (k0, k3) = (Keyspace::load(s, false).unwrap(), Keyspace::load_db(s, false, 3).unwrap());
        let (mut t0, mut t3) = (Tx::new(s, &k0), Tx::new(s, &k3));
        assert!(t0.transfer(&mut t3, b"gone", b"gone", false, true).unwrap());
        assert!(!t0.transfer(&mut t3, b"h", b"h", false, true).unwrap(), "h exists in DB 3");
        assert!(t3.transfer(&mut t0, b"back", b"back", false, true).unwrap());
        assert!(t0.transfer(&mut t3, b"replaced", b"copied", false, false).unwrap());
        Tx::commit_all(vec![t0, t3]).unwrap();
    }
    crash_each("hart", 10, setup, op, two_dbs);
    crash_each("nbtree", 10, setup, op, two_dbs);
}

/// SWAPDB's map record is one engine write: after a crash it is the old map or the new.
#[test]
fn swapdbs_map_is_old_or_new_at_every_crash_point() {
    fn setup(s: &Store) {
        let ks = Keyspace::load_db(s, false, 2).unwrap();
        let mut tx = Tx::new(s, &ks);
        tx.set(b"k", b"v", Ttl::Clear).unwrap();
        tx.commit().unwrap();
        s.put(pmkv_server::keyspace::DB_MAP_KEY, &[1, 0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]).unwrap();
    }
    fn op(s: &Store) {
        s.put(pmkv_server::keyspace::DB_MAP_KEY, &[1, 0, 5, 3, 4, 2, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]).unwrap();
    }
    fn map(s: &Store) -> Result<String, String> {
        let m = s.get(pmkv_server::keyspace::DB_MAP_KEY).map_err(|e| e.to_string())?;
        Ok(format!("{m:?}"))
    }
    crash_each("hart", 0, setup, op, map);
}

/// SORT … STORE, the one SORT form that writes: a list stored over a list, over a hash
/// (another type) and over a set, and an empty result deleting its destination, all in
/// one script: they land together or not at all.
const SORTS: &str = r#"
assert(redis.call('SORT', 'q', 'ALPHA', 'DESC', 'STORE', 'stack') == 12)
assert(redis.call('SORT', 'z1', 'BY', 'nosort', 'LIMIT', 2, 5, 'STORE', 'h') == 5)
assert(redis.call('SORT', 'set1', 'ALPHA', 'GET', '#', 'GET', 's*', 'STORE', 'set2') == 8)
assert(redis.call('SORT', 'absent', 'STORE', 'short') == 0)
return 'done'
"#;

fn sorts(tx: &mut Tx) {
    script_done(tx, SORTS);
}

#[test]
fn sort_stores_are_all_or_nothing_at_every_crash_point() {
    all_or_nothing("hart", false, sorts);
    all_or_nothing("nbtree", false, sorts);
}
