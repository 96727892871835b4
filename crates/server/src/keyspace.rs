//! Redis's data model — typed keys with expiry times — over one ordered byte map.
//!
//! An engine stores bytes under bytes. The server keeps Redis's model on top of that
//! without changing what a plain string is, so that a pool written by `pmkv put`, Python or
//! C reads the same through `pmkv serve` and back:
//!
//! * a string key `k` without an expiry time is the record `k → value`, nothing else;
//! * anything more about a key — its type when it is not a string, its expiry time, a
//!   collection's element count — is one **meta record** under a reserved prefix,
//!   `P 'm' k → Meta` (24 bytes, or 32 for a type with a type word; see [`Meta::encode`]);
//! * an element of a collection (a hash's field, a list's element) is the record
//!   `P tag len(k) k suffix → value`, `len(k)` a 4-byte big-endian length, so that the
//!   elements of one key are one contiguous key range and no key's run into another's.
//!
//! What differs between types is said once per type, in [`crate::types`]; everything
//! here (expiry, deletion, RENAME/COPY, restore, key walks, recovery) works from that.
//!
//! `P` is [`PREFIX`], `\xffpmkv\0`: keys that begin with it are refused by every command
//! and hidden from KEYS, SCAN and DBSIZE. The byte layout is in docs/format/server.md.
//!
//! **One command, one atomic batch.** A command (or a whole EXEC) runs against a [`Tx`]: its
//! reads see its own earlier writes, and its writes — the string, the meta record, the
//! fields — are applied at the end as one engine write batch, which every pool engine
//! applies all-or-nothing across a crash. So a hash's field count and its fields, or a
//! value and its expiry time, never disagree after a crash.
//!
//! **DRAM mirror.** The meta records are also held in DRAM (a map, and the expiry times in
//! order), loaded once at start by a walk over the meta range only. A GET of a key with no
//! meta record then costs one look in an empty-or-small map, and nothing at all while no
//! key has one; the active expiry sweep looks at the first expiry time only. This is
//! Redis's own arrangement (its `expires` dictionary), with the same memory: a few dozen
//! bytes per key that has a TTL or is a hash.

pub use crate::record::{db_prefix, meta_key, Kind, Meta, DATABASES, DB_MAP_KEY, PREFIX};
use crate::record::{elem_prefix, split_elem, DB, ELEM_OVERHEAD, FUNCTIONS_KEY, META};
use crate::resp::Reply;
use pmkv::{Direction, KeyRange, Store, WriteBatch};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

/// The replication record's key (`P` `R`; docs/format/server.md): a replica's primary, the
/// stream's offset and whether a full sync is unfinished (`crate::replica::Record`).
pub const REPLICA_KEY: &[u8] = b"\xffpmkv\x00R";

/// The common prefix of hash `k`'s field records.
pub fn field_prefix(k: &[u8]) -> Vec<u8> {
    elem_prefix(crate::record::hash::TAG, k)
}

/// Milliseconds since the Unix epoch: expiry times are absolute wall-clock times, as in
/// Redis, so that they keep their meaning across a restart.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The keyspace's side of the blocking commands ([`crate::blocking`]): the number of
/// clients waiting, and the keys committed to while any did. A commit only marks its
/// keys here; the blocking module serves them after the command.
#[derive(Default)]
pub(crate) struct Ready {
    /// Registered waiters (read without a lock on every commit).
    pub(crate) waiting: AtomicUsize,
    /// Keys committed to while someone waited (a leaf lock: taken inside commits).
    pub(crate) keys: Mutex<Vec<Vec<u8>>>,
}

impl Ready {
    /// Note that `keys` were committed to (a cheap load when nobody waits).
    pub(crate) fn signal(&self, keys: &mut dyn Iterator<Item = &[u8]>) {
        if self.waiting.load(Ordering::Acquire) == 0 {
            return;
        }
        self.keys.lock().unwrap_or_else(|e| e.into_inner()).extend(keys.map(<[u8]>::to_vec));
    }

    /// Clients blocked now (INFO's `blocked_clients`).
    pub(crate) fn clients(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

/// The server's DRAM view of the meta records, and the watches of WATCH.
#[derive(Default)]
pub struct Keyspace {
    meta: RwLock<HashMap<Vec<u8>, Meta>>,
    /// Entries in `meta` (read without its lock on the hot paths).
    metas: AtomicUsize,
    /// (expiry time, key) of every key with one, first due first.
    expiries: Mutex<BTreeSet<(u64, Vec<u8>)>>,
    /// Records under [`PREFIX`]: meta records and elements (DBSIZE subtracts them).
    internal: AtomicU64,
    /// Collection keys (DBSIZE adds them: a collection has no record of its own name).
    collections: AtomicU64,
    /// WATCHed key → the flags of the connections watching it.
    watches: Mutex<HashMap<Vec<u8>, Vec<Weak<AtomicBool>>>>,
    watched: AtomicUsize,
    /// How many clients wait in blocking commands, and the keys committed to since: what
    /// a commit tells [`crate::blocking`] (which is above the keyspace and holds the
    /// waiters themselves).
    pub(crate) ready: Ready,
    /// A cluster pool: every record's engine key is its user key's slot (2 bytes,
    /// big-endian) and then the record key (docs/design/cluster.md).
    slotted: bool,
    /// Whether the pool holds the replication record ([`REPLICA_KEY`]; DBSIZE subtracts it).
    replica_record: AtomicBool,
    /// The physical database's record prefix ([`db_prefix`]): empty for DB 0.
    db: Vec<u8>,
    /// A database other than 0: its records in the engine (DB 0's are the store's count
    /// less every other database's), counted at start and kept by [`Tx::commit`].
    records: AtomicU64,
    /// Sorted sets' DRAM rank indexes ([`crate::record::zrank`]): kept by every commit,
    /// cleared with the keyspace.
    pub(crate) ranks: crate::record::zrank::Ranks,
}

/// The user key record `rk` belongs to: `rk` itself for a string's value, the key inside a
/// meta or element record's key.
pub fn record_user(rk: &[u8]) -> &[u8] {
    let Some(rest) = rk.strip_prefix(PREFIX) else { return rk };
    match rest.split_first() {
        Some((&META, k)) => k,
        _ => split_elem(rk).map_or(rk, |(_, user, _)| user),
    }
}

/// Damage in the server's own records, found at start.
fn malformed(k: &[u8]) -> pmkv::Error {
    pmkv::Error::new(
        pmkv::ErrorKind::Corrupt,
        format!("a malformed pmkv serve meta record under key {:?}", String::from_utf8_lossy(k)),
    )
}

impl Keyspace {
    /// Load the meta records of `s` (a walk over their range only; in a cluster pool,
    /// `slotted`, over each slot's meta range, and the cluster state record counts as one of
    /// the server's own).
    pub fn load(s: &Store, slotted: bool) -> pmkv::Result<Keyspace> {
        Keyspace::load_db(s, slotted, 0)
    }

    /// [`load`](Self::load) of physical database `n` (a cluster pool has only DB 0): its
    /// meta records, and for `n > 0` a count of its records (one walk over its range).
    pub fn load_db(s: &Store, slotted: bool, n: usize) -> pmkv::Result<Keyspace> {
        let ks = Keyspace { slotted, db: db_prefix(n), ..Keyspace::default() };
        if n > 0 {
            let mut count = 0u64;
            s.scan(&ks.range(), Direction::Forward, |_, _| {
                count += 1;
                true
            })?;
            ks.records.store(count, Ordering::Relaxed);
            if count == 0 {
                return Ok(ks);
            }
        }
        if slotted {
            ks.internal.store(1, Ordering::Relaxed);
        }
        if !slotted && s.contains(REPLICA_KEY)? {
            ks.set_replica_record(true);
        }
        let mut bad = None;
        let ranges: Vec<Vec<u8>> = if slotted {
            (0..crate::cluster::slot::SLOTS).map(|slot| [&slot.to_be_bytes()[..], &meta_key(b"")].concat()).collect()
        } else {
            vec![ks.phys(&meta_key(b"")).into_owned()]
        };
        for start in ranges {
            let mut map = ks.meta.write().unwrap_or_else(|e| e.into_inner());
            let mut exp = ks.expiries.lock().unwrap_or_else(|e| e.into_inner());
            s.scan(&KeyRange::prefix(start.clone()), Direction::Forward, |k, v| {
                let user = &k[start.len()..];
                match Meta::decode(v) {
                    Some(m) => {
                        if m.expire_ms != 0 {
                            exp.insert((m.expire_ms, user.to_vec()));
                        }
                        ks.internal.fetch_add(1 + m.count, Ordering::Relaxed);
                        if m.kind.collection() {
                            ks.collections.fetch_add(1, Ordering::Relaxed);
                        }
                        map.insert(user.to_vec(), m);
                        true
                    }
                    None => {
                        bad = Some(k.to_vec());
                        false
                    }
                }
            })?;
            ks.metas.store(map.len(), Ordering::Relaxed);
            if bad.is_some() {
                break;
            }
        }
        match bad {
            Some(k) => Err(malformed(&k)),
            None => Ok(ks),
        }
    }

    /// The engine key of record `rk`: `rk` itself, or in a cluster pool its user key's slot
    /// and then `rk`.
    pub fn phys<'a>(&self, rk: &'a [u8]) -> Cow<'a, [u8]> {
        if !self.db.is_empty() {
            return Cow::Owned([self.db.as_slice(), rk].concat());
        }
        if !self.slotted {
            return Cow::Borrowed(rk);
        }
        self.phys_at(crate::cluster::slot::key_slot(record_user(rk)), rk)
    }

    /// [`phys`](Self::phys) of a record whose slot the caller computed already.
    pub fn phys_at<'a>(&self, slot: u16, rk: &'a [u8]) -> Cow<'a, [u8]> {
        if !self.slotted {
            return self.phys(rk);
        }
        let mut p = Vec::with_capacity(rk.len() + 2);
        p.extend_from_slice(&slot.to_be_bytes());
        p.extend_from_slice(rk);
        Cow::Owned(p)
    }

    /// The record key of engine key `pk` (the inverse of [`phys`](Self::phys)); `None` for
    /// a key in no slot (the cluster state record).
    /// In DB 0, `None` also for the records of the other databases and the database map,
    /// which are no record of DB 0's.
    pub fn logical<'a>(&self, pk: &'a [u8]) -> Option<&'a [u8]> {
        if !self.db.is_empty() {
            return pk.strip_prefix(self.db.as_slice());
        }
        if !self.slotted {
            let other = pk.strip_prefix(PREFIX).is_some_and(|r| r.first() == Some(&DB) || r == b"D");
            return (!other).then_some(pk);
        }
        match pk {
            [hi, _, rest @ ..] if *hi < 0x40 => Some(rest),
            _ => None,
        }
    }

    /// The engine-key range that holds this database's records (all of them for DB 0,
    /// whose walks skip the other databases' records by [`logical`](Self::logical)).
    pub fn range(&self) -> KeyRange {
        if self.db.is_empty() {
            KeyRange::all()
        } else {
            KeyRange::prefix(self.db.clone())
        }
    }

    /// Whether this is physical database 0.
    pub fn is_db0(&self) -> bool {
        self.db.is_empty()
    }

    /// A database other than 0: its records in the engine (0 for DB 0, which the
    /// store counts: see [`user_keys`](Self::user_keys)).
    pub fn records(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    /// Whether this is a cluster pool's keyspace.
    pub fn slotted(&self) -> bool {
        self.slotted
    }

    /// Whether `k` may have a meta record (false: it surely has none).
    pub fn may_have_meta(&self, k: &[u8]) -> bool {
        self.metas.load(Ordering::Acquire) > 0 && self.meta.read().unwrap_or_else(|e| e.into_inner()).contains_key(k)
    }

    /// Whether `k` has an expiry time that has passed by `now`.
    pub fn expired(&self, k: &[u8], now: u64) -> bool {
        self.meta_of(k).is_some_and(|m| m.expired(now))
    }

    fn meta_of(&self, k: &[u8]) -> Option<Meta> {
        if self.metas.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.meta.read().unwrap_or_else(|e| e.into_inner()).get(k).copied()
    }

    /// Keys the user sees: the database's records (`records`, for DB 0: the store's less
    /// the other databases'; any other database counts its own), less the server's own,
    /// plus the collections.
    pub fn user_keys(&self, records: u64) -> u64 {
        let records = if self.db.is_empty() { records } else { self.records() };
        let own = self.internal.load(Ordering::Relaxed) + self.replica_record.load(Ordering::Relaxed) as u64;
        (records + self.collections.load(Ordering::Relaxed)).saturating_sub(own)
    }

    /// Note whether the pool holds the replication record (written or deleted).
    pub fn set_replica_record(&self, present: bool) {
        self.replica_record.store(present, Ordering::Relaxed);
    }

    /// Keys with an expiry time (INFO's `expires`).
    pub fn expiring(&self) -> usize {
        self.expiries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Up to `n` keys whose expiry time has passed, first due first.
    pub fn due(&self, now: u64, n: usize) -> Vec<Vec<u8>> {
        let exp = self.expiries.lock().unwrap_or_else(|e| e.into_inner());
        exp.iter().take_while(|(t, _)| *t <= now).take(n).map(|(_, k)| k.clone()).collect()
    }

    /// Watch `k` for the connection whose flag is `flag`: any write to `k` sets it.
    pub fn watch(&self, k: &[u8], flag: &Arc<AtomicBool>) {
        let mut w = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        let list = w.entry(k.to_vec()).or_default();
        if !list.iter().any(|x| x.as_ptr() == Arc::as_ptr(flag)) {
            list.push(Arc::downgrade(flag));
        }
        self.watched.store(w.len(), Ordering::Release);
    }

    /// Forget every watch of the connection whose flag is `flag`.
    pub fn unwatch(&self, keys: &[Vec<u8>], flag: &Arc<AtomicBool>) {
        let mut w = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        for k in keys {
            if let Some(list) = w.get_mut(k) {
                list.retain(|x| x.strong_count() > 0 && x.as_ptr() != Arc::as_ptr(flag));
                if list.is_empty() {
                    w.remove(k);
                }
            }
        }
        self.watched.store(w.len(), Ordering::Release);
    }

    /// Tell the watchers of `keys` that they were written.
    pub fn touch(&self, keys: &mut dyn Iterator<Item = &[u8]>) {
        if self.watched.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut w = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        let fire = |list: &mut Vec<Weak<AtomicBool>>| {
            list.retain(|x| match x.upgrade() {
                Some(f) => {
                    f.store(true, Ordering::Release);
                    true
                }
                None => false,
            })
        };
        for k in keys {
            if let Some(list) = w.get_mut(k) {
                fire(list);
            }
        }
        w.retain(|_, l| !l.is_empty());
        self.watched.store(w.len(), Ordering::Release);
    }

    /// Tell every watcher of this database that its keys changed (SWAPDB).
    pub fn touch_all(&self) {
        let keys: Vec<Vec<u8>> = self.watches.lock().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
        self.touch(&mut keys.iter().map(Vec::as_slice));
    }

    /// Forget every meta record (FLUSHDB, after the records were deleted).
    pub fn clear(&self) {
        let mut map = self.meta.write().unwrap_or_else(|e| e.into_inner());
        map.clear();
        self.metas.store(0, Ordering::Release);
        self.expiries.lock().unwrap_or_else(|e| e.into_inner()).clear();
        // A cluster pool keeps its state record.
        self.internal.store(self.slotted as u64, Ordering::Relaxed);
        self.records.store(0, Ordering::Relaxed);
        self.collections.store(0, Ordering::Relaxed);
        self.ranks.clear();
    }

    /// Make the DRAM view follow a committed change of `k`'s meta record.
    fn apply(&self, k: &[u8], old: Option<Meta>, new: Option<Meta>) {
        let mut map = self.meta.write().unwrap_or_else(|e| e.into_inner());
        let mut exp = self.expiries.lock().unwrap_or_else(|e| e.into_inner());
        let records = |m: &Option<Meta>| m.map_or(0, |m| 1 + m.count);
        let hash = |m: &Option<Meta>| u64::from(m.is_some_and(|m| m.kind.collection()));
        if let Some(o) = old.filter(|o| o.expire_ms != 0) {
            exp.remove(&(o.expire_ms, k.to_vec()));
        }
        match new {
            Some(n) => {
                if n.expire_ms != 0 {
                    exp.insert((n.expire_ms, k.to_vec()));
                }
                map.insert(k.to_vec(), n);
            }
            None => {
                map.remove(k);
            }
        }
        self.metas.store(map.len(), Ordering::Release);
        let (ro, rn) = (records(&old), records(&new));
        if rn >= ro {
            self.internal.fetch_add(rn - ro, Ordering::Relaxed);
        } else {
            self.internal.fetch_sub(ro - rn, Ordering::Relaxed);
        }
        let (ho, hn) = (hash(&old), hash(&new));
        if hn >= ho {
            self.collections.fetch_add(hn - ho, Ordering::Relaxed);
        } else {
            self.collections.fetch_sub(ho - hn, Ordering::Relaxed);
        }
    }
}

/// Key `src`'s records (from [`Tx::records_of`]) renamed to be key `dst`'s.
pub fn rename_records(records: Vec<(Vec<u8>, Vec<u8>)>, src: &[u8], dst: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let (src_meta, dst_meta) = (meta_key(src), meta_key(dst));
    records
        .into_iter()
        .map(|(rk, v)| {
            let nk = if rk == src_meta {
                dst_meta.clone()
            } else if let Some((kind, _, suffix)) = split_elem(&rk) {
                let tag = kind.tag().expect("an element's type has a tag");
                [elem_prefix(tag, dst).as_slice(), suffix].concat()
            } else {
                dst.to_vec()
            };
            (nk, v)
        })
        .collect()
}

/// The reply for a key of the wrong type.
pub fn wrongtype() -> Reply {
    Reply::err("WRONGTYPE Operation against a key holding the wrong kind of value")
}

/// The reply for a key under the reserved prefix.
pub fn reserved() -> Reply {
    Reply::err("ERR keys beginning with \\xffpmkv\\x00 are reserved for pmkv serve's own records")
}

/// Whether `k` is a key a client may name.
pub fn allowed(k: &[u8]) -> bool {
    !k.starts_with(PREFIX)
}

/// What a write does to the key's expiry time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// Remove it (a plain SET).
    Clear,
    /// Keep it (SET … KEEPTTL, APPEND, INCR, HSET …).
    Keep,
    /// Set it, in ms since the epoch.
    At(u64),
}

/// A command's (or an EXEC's) view of the keyspace: reads see its own writes, and
/// [`commit`](Tx::commit) applies them all as one atomic engine batch. Errors are replies,
/// ready to send (`WRONGTYPE`, a reserved key, a store error).
pub struct Tx<'a> {
    s: &'a Store,
    ks: &'a Keyspace,
    now: u64,
    /// Record writes pending (`None`: delete).
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// User key → (its meta before this Tx, after).
    metas: BTreeMap<Vec<u8>, (Option<Meta>, Option<Meta>)>,
    /// User keys written (for WATCH).
    touched: BTreeSet<Vec<u8>>,
    /// What each change since the first [`savepoint`](Tx::savepoint) replaced, newest
    /// last (`None`: nothing is logged, no savepoint was taken). An undo log instead of a
    /// copy per savepoint: a script or EXEC of n writes takes a savepoint per command,
    /// and copying the maps each time made it O(n²) (16,000 SETs in one script took
    /// over a minute).
    undo: Option<Vec<Undo>>,
    /// User keys deleted here because their time had passed (lazy expiry), which a
    /// primary streams to its replicas as DELs (`repl_stream::expired`).
    pub(crate) expired: Vec<Vec<u8>>,
}

/// One change to a [`Tx`]'s maps, as it is taken back.
enum Undo {
    /// The record write `key` replaced (`None`: there was none).
    Write(Vec<u8>, Option<Option<Vec<u8>>>),
    /// The meta change `key` replaced (`None`: there was none).
    Meta(Vec<u8>, Option<(Option<Meta>, Option<Meta>)>),
    /// `key` was added to the touched set.
    Touch(Vec<u8>),
}

pub type TxResult<T> = Result<T, Reply>;

/// A [`Tx`]'s writes at one point (see [`Tx::savepoint`]): the length of its undo log.
pub struct Savepoint(usize);

pub fn store_reply(e: pmkv::Error) -> Reply {
    Reply::err(format!("ERR {} ({})", e, e.kind().name()))
}

fn check_key(k: &[u8]) -> TxResult<()> {
    if allowed(k) {
        Ok(())
    } else {
        Err(reserved())
    }
}

impl<'a> Tx<'a> {
    pub fn new(s: &'a Store, ks: &'a Keyspace) -> Tx<'a> {
        Tx {
            s,
            ks,
            now: now_ms(),
            writes: BTreeMap::new(),
            metas: BTreeMap::new(),
            touched: BTreeSet::new(),
            undo: None,
            expired: Vec::new(),
        }
    }

    /// The time this Tx reads expiry times against (fixed for its life, as Redis fixes it
    /// for a command and for a whole EXEC).
    pub fn now(&self) -> u64 {
        self.now
    }

    pub fn store(&self) -> &Store {
        self.s
    }

    /// The Tx's state now, to [`rollback`](Tx::rollback) to when a command of a
    /// transaction fails. From the first savepoint on, every change logs what it
    /// replaced (a key copy; the replaced value is moved, not copied).
    pub fn savepoint(&mut self) -> Savepoint {
        Savepoint(self.undo.get_or_insert_with(Vec::new).len())
    }

    /// Forget what was written since `sp` was taken.
    pub fn rollback(&mut self, sp: Savepoint) {
        let Some(undo) = self.undo.as_mut() else { return };
        while undo.len() > sp.0 {
            match undo.pop().expect("longer than the savepoint") {
                Undo::Write(k, Some(v)) => {
                    self.writes.insert(k, v);
                }
                Undo::Write(k, None) => {
                    self.writes.remove(&k);
                }
                Undo::Meta(k, Some(m)) => {
                    self.metas.insert(k, m);
                }
                Undo::Meta(k, None) => {
                    self.metas.remove(&k);
                }
                Undo::Touch(k) => {
                    self.touched.remove(&k);
                }
            }
        }
    }

    /// Record write `k` (engine key) := `v`, logged for rollback.
    fn write(&mut self, k: Vec<u8>, v: Option<Vec<u8>>) {
        match self.undo.as_mut() {
            Some(undo) => {
                let old = self.writes.insert(k.clone(), v);
                undo.push(Undo::Write(k, old));
            }
            None => {
                self.writes.insert(k, v);
            }
        }
    }

    /// The keyspace this Tx reads and writes.
    pub(crate) fn keyspace(&self) -> &Keyspace {
        self.ks
    }

    /// Whether this Tx has uncommitted writes in engine-key `range` (its reads there
    /// differ from the store's).
    pub(crate) fn writes_in(&self, range: &KeyRange) -> bool {
        fn b(x: &Bound<Vec<u8>>) -> Bound<&[u8]> {
            x.as_ref().map(Vec::as_slice)
        }
        self.writes.range::<[u8], _>((b(&range.start), b(&range.end))).next().is_some()
    }

    /// Whether the Tx wrote nothing.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.metas.is_empty()
    }

    // The record operations take record keys (docs/format/server.md) and translate them to
    // engine keys ([`Keyspace::phys`]); `writes` and the walks are in engine keys, so that
    // the overlay and the store agree on order.

    pub(crate) fn raw_get(&self, k: &[u8]) -> TxResult<Option<Vec<u8>>> {
        let k = self.ks.phys(k);
        match self.writes.get(&*k) {
            Some(v) => Ok(v.clone()),
            None => self.s.get(&k).map_err(store_reply),
        }
    }

    pub(crate) fn raw_contains(&self, k: &[u8]) -> TxResult<bool> {
        let k = self.ks.phys(k);
        match self.writes.get(&*k) {
            Some(v) => Ok(v.is_some()),
            None => self.s.contains(&k).map_err(store_reply),
        }
    }

    /// Write one of the server's own records (`k` under [`PREFIX`], e.g. [`REPLICA_KEY`])
    /// in this Tx's atomic batch, beside the data it describes.
    pub fn put_server_record(&mut self, k: &[u8], v: Vec<u8>) {
        debug_assert!(k.starts_with(PREFIX));
        self.raw_put(k.to_vec(), v);
    }

    pub(crate) fn raw_put(&mut self, k: Vec<u8>, v: Vec<u8>) {
        let k = self.ks.phys(&k).into_owned();
        self.write(k, Some(v));
    }

    pub(crate) fn raw_delete(&mut self, k: Vec<u8>) {
        let k = self.ks.phys(&k).into_owned();
        self.write(k, None);
    }

    /// The engine-key range of the records whose keys begin with record key prefix `p`
    /// (all of one user key: one slot).
    pub(crate) fn prefix_range(&self, p: &[u8]) -> KeyRange {
        KeyRange::prefix(self.ks.phys(p).into_owned())
    }

    /// The engine-key range of the records from record key `first` to `last`, both
    /// included (all of one user key: one slot).
    pub(crate) fn record_range(&self, first: &[u8], last: &[u8]) -> KeyRange {
        KeyRange {
            start: Bound::Included(self.ks.phys(first).into_owned()),
            end: Bound::Included(self.ks.phys(last).into_owned()),
        }
    }

    /// Visit the records of engine-key `range` as this Tx sees them (the store's, with the
    /// Tx's writes laid over), in key order, until `f` returns false.
    pub fn raw_scan(&self, range: &KeyRange, f: impl FnMut(&[u8], &[u8]) -> bool) -> TxResult<()> {
        self.raw_scan_dir(range, Direction::Forward, f)
    }

    /// [`raw_scan`](Self::raw_scan) in direction `dir` (a sorted set's highest scores first).
    pub(crate) fn raw_scan_dir(
        &self,
        range: &KeyRange,
        dir: Direction,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> TxResult<()> {
        let mut over: Vec<(&Vec<u8>, &Option<Vec<u8>>)> =
            self.writes.range::<Vec<u8>, _>((range.start.as_ref(), range.end.as_ref())).collect();
        let rev = dir == Direction::Reverse;
        if rev {
            over.reverse();
        }
        // Whether overlay key `o` comes before store key `k` in the walk's order.
        let before = |o: &[u8], k: &[u8]| if rev { o > k } else { o < k };
        let mut i = 0;
        let mut go = true;
        self.s
            .scan(range, dir, |k, v| {
                while i < over.len() && before(over[i].0, k) {
                    if let Some(ov) = over[i].1 {
                        if !f(over[i].0, ov) {
                            go = false;
                            return false;
                        }
                    }
                    i += 1;
                }
                if i < over.len() && over[i].0.as_slice() == k {
                    let ov = over[i].1.as_deref();
                    i += 1;
                    match ov {
                        Some(ov) => go = f(k, ov),
                        None => return true,
                    }
                } else {
                    go = f(k, v);
                }
                go
            })
            .map_err(store_reply)?;
        while go && i < over.len() {
            if let Some(ov) = over[i].1 {
                go = f(over[i].0, ov);
            }
            i += 1;
        }
        Ok(())
    }

    /// `k`'s meta record as this Tx sees it.
    pub(crate) fn meta(&self, k: &[u8]) -> Option<Meta> {
        match self.metas.get(k) {
            Some((_, new)) => *new,
            None => self.ks.meta_of(k),
        }
    }

    pub(crate) fn set_meta(&mut self, k: &[u8], m: Option<Meta>) {
        let old = self.meta(k);
        if old == m {
            return;
        }
        match m {
            Some(m) => self.raw_put(meta_key(k), m.encode()),
            None => self.raw_delete(meta_key(k)),
        }
        let before = match self.metas.get(k) {
            Some((before, _)) => *before,
            None => old,
        };
        let old = self.metas.insert(k.to_vec(), (before, m));
        if let Some(undo) = self.undo.as_mut() {
            undo.push(Undo::Meta(k.to_vec(), old));
        }
    }

    pub(crate) fn touch(&mut self, k: &[u8]) {
        if !self.touched.contains(k) {
            self.touched.insert(k.to_vec());
            if let Some(undo) = self.undo.as_mut() {
                undo.push(Undo::Touch(k.to_vec()));
            }
        }
    }

    /// Remove `k` whatever its type (its meta record, and its elements or its value).
    fn remove(&mut self, k: &[u8], m: Option<Meta>) -> TxResult<()> {
        match m.and_then(|m| m.kind.tag()) {
            Some(tag) => {
                let mut elems = Vec::new();
                self.raw_scan(&self.prefix_range(&elem_prefix(tag, k)), |ek, _| {
                    elems.push(ek.to_vec());
                    true
                })?;
                for e in elems {
                    self.write(e, None);
                }
            }
            None => self.raw_delete(k.to_vec()),
        }
        self.set_meta(k, None);
        self.touch(k);
        Ok(())
    }

    /// `k`'s type, or `None` if absent; an expired key is deleted here (lazy expiry).
    pub fn kind(&mut self, k: &[u8]) -> TxResult<Option<Kind>> {
        check_key(k)?;
        match self.meta(k) {
            Some(m) if m.expired(self.now) => {
                self.remove(k, Some(m))?;
                self.expired.push(k.to_vec());
                Ok(None)
            }
            Some(m) => Ok(Some(m.kind)),
            None => Ok(self.raw_contains(k)?.then_some(Kind::STRING)),
        }
    }

    /// Whether `k` exists as a `want` (WRONGTYPE when it is another type).
    pub(crate) fn expect(&mut self, k: &[u8], want: Kind) -> TxResult<bool> {
        match self.kind(k)? {
            Some(kind) if kind == want => Ok(true),
            Some(_) => Err(wrongtype()),
            None => Ok(false),
        }
    }

    /// The string at `k` (WRONGTYPE for another type).
    pub fn get(&mut self, k: &[u8]) -> TxResult<Option<Vec<u8>>> {
        if !self.expect(k, Kind::STRING)? {
            return Ok(None);
        }
        self.raw_get(k)
    }

    /// Set the string at `k` (replacing a key of any type), its expiry time per `ttl`.
    pub fn set(&mut self, k: &[u8], v: &[u8], ttl: Ttl) -> TxResult<()> {
        let kind = self.kind(k)?;
        let old = self.meta(k);
        if kind.is_some_and(Kind::collection) {
            self.remove(k, old)?;
        }
        let keep = match (ttl, old) {
            (Ttl::Keep, Some(m)) if kind == Some(Kind::STRING) => m.expire_ms,
            (Ttl::At(t), _) => t,
            _ => 0,
        };
        self.set_meta(k, (keep != 0).then_some(Meta { expire_ms: keep, ..Meta::new(Kind::STRING) }));
        self.raw_put(k.to_vec(), v.to_vec());
        self.touch(k);
        Ok(())
    }

    /// Delete `k`; whether it existed.
    pub fn del(&mut self, k: &[u8]) -> TxResult<bool> {
        if self.kind(k)?.is_none() {
            return Ok(false);
        }
        let m = self.meta(k);
        self.remove(k, m)?;
        Ok(true)
    }

    /// `k`'s expiry time: `None` absent, `Some(0)` none, else ms since the epoch.
    pub fn expire_time(&mut self, k: &[u8]) -> TxResult<Option<u64>> {
        Ok(self.kind(k)?.map(|_| self.meta(k).map_or(0, |m| m.expire_ms)))
    }

    /// Set `k`'s expiry time (`0`: remove it); whether `k` exists. A time not in the
    /// future deletes the key, as Redis does.
    pub fn set_expire(&mut self, k: &[u8], at: u64) -> TxResult<bool> {
        let Some(kind) = self.kind(k)? else { return Ok(false) };
        if at != 0 && at <= self.now {
            self.del(k)?;
            return Ok(true);
        }
        let m = self.meta(k);
        let new = if kind.collection() {
            m.map(|m| Meta { expire_ms: at, ..m })
        } else {
            (at != 0).then_some(Meta { expire_ms: at, ..Meta::new(kind) })
        };
        if new != m {
            self.set_meta(k, new);
            self.touch(k);
        }
        Ok(true)
    }

    /// Refuse an element record whose key would pass the engine's key limit: `what` names
    /// the key and its element ("hash key and field"), `n` is their length together.
    pub(crate) fn check_elem_key(&self, what: &str, n: usize) -> TxResult<()> {
        let max = self.s.info().max_key_len;
        if n + ELEM_OVERHEAD > max {
            return Err(Reply::err(format!(
                "ERR {what} together are {n} bytes; at most {} with this engine",
                max.saturating_sub(ELEM_OVERHEAD)
            )));
        }
        Ok(())
    }

    /// Field `f` of hash `k`.
    pub fn hget(&mut self, k: &[u8], f: &[u8]) -> TxResult<Option<Vec<u8>>> {
        if !self.expect(k, Kind::HASH)? {
            return Ok(None);
        }
        self.raw_get(&[field_prefix(k).as_slice(), f].concat())
    }

    /// Set field `f` of hash `k` (creating the hash); whether the field is new.
    pub fn hset(&mut self, k: &[u8], f: &[u8], v: &[u8]) -> TxResult<bool> {
        self.check_elem_key("hash key and field", k.len() + f.len())?;
        self.s.info().check_sizes(b"", Some(v)).map_err(store_reply)?;
        let exists = self.expect(k, Kind::HASH)?;
        let fk = [field_prefix(k).as_slice(), f].concat();
        let new = !exists || !self.raw_contains(&fk)?;
        if new {
            let m = self.meta(k).unwrap_or(Meta::new(Kind::HASH));
            self.set_meta(k, Some(Meta { count: m.count + 1, ..m }));
        }
        self.raw_put(fk, v.to_vec());
        self.touch(k);
        Ok(new)
    }

    /// Delete field `f` of hash `k` (the hash with its last field); whether it was there.
    pub fn hdel(&mut self, k: &[u8], f: &[u8]) -> TxResult<bool> {
        if !self.expect(k, Kind::HASH)? {
            return Ok(false);
        }
        let fk = [field_prefix(k).as_slice(), f].concat();
        if !self.raw_contains(&fk)? {
            return Ok(false);
        }
        self.raw_delete(fk);
        let m = self.meta(k).expect("a hash has a meta record");
        self.set_meta(k, (m.count > 1).then_some(Meta { count: m.count - 1, ..m }));
        self.touch(k);
        Ok(true)
    }

    /// Number of fields of hash `k`.
    pub fn hlen(&mut self, k: &[u8]) -> TxResult<u64> {
        if !self.expect(k, Kind::HASH)? {
            return Ok(0);
        }
        Ok(self.meta(k).map_or(0, |m| m.count))
    }

    /// Visit the fields of hash `k` from `after` (exclusive; `None`: the first), in field
    /// order, until `f` returns false.
    pub fn hscan(&mut self, k: &[u8], after: Option<&[u8]>, f: impl FnMut(&[u8], &[u8]) -> bool) -> TxResult<()> {
        self.scan_elems(Kind::HASH, k, after, f)
    }

    /// Visit the element records of collection `k` of type `kind` (WRONGTYPE for another
    /// type) from suffix `after` (exclusive; `None`: the first), in suffix order, until
    /// `f` (suffix, value) returns false.
    pub fn scan_elems(
        &mut self,
        kind: Kind,
        k: &[u8],
        after: Option<&[u8]>,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> TxResult<()> {
        if !self.expect(k, kind)? {
            return Ok(());
        }
        let tag = kind.tag().expect("a collection has a tag");
        let p = self.ks.phys(&elem_prefix(tag, k)).into_owned();
        let mut range = KeyRange::prefix(p.clone());
        if let Some(a) = after {
            range.start = Bound::Excluded([p.as_slice(), a].concat());
        }
        self.raw_scan(&range, |fk, v| f(&fk[p.len()..], v))
    }

    /// Visit the user keys from `start` in key order (the store's order of their records:
    /// a collection is met at its meta record), skipping expired ones and the server's
    /// own records, until `f` returns false. `f` gets the user key and the engine key a
    /// cursor resumes after.
    pub fn keys(&self, start: Bound<Vec<u8>>, mut f: impl FnMut(&[u8], &[u8]) -> bool) -> TxResult<()> {
        self.typed_keys(start, |k, pk, _| f(k, pk))
    }

    /// [`keys`](Self::keys), with each key's type (SCAN TYPE).
    pub fn typed_keys(&self, start: Bound<Vec<u8>>, mut f: impl FnMut(&[u8], &[u8], Kind) -> bool) -> TxResult<()> {
        let all = self.ks.range();
        let start = if matches!(start, Bound::Unbounded) { all.start } else { start };
        if !self.ks.is_db0() || self.ks.slotted {
            return self.keys_in(&KeyRange { start, end: all.end }, f);
        }
        // DB 0: around the other databases' records (`P 'd' …`), which it never shows, so
        // that a SCAN of DB 0 does not walk them.
        let (lo, hi) = ([PREFIX, &[DB]].concat(), [PREFIX, &[DB + 1]].concat());
        let from = match &start {
            Bound::Included(s) | Bound::Excluded(s) => Some(s.clone()),
            Bound::Unbounded => None,
        };
        if from.as_ref().is_none_or(|s| *s < lo) {
            let mut go = true;
            self.keys_in(&KeyRange { start: start.clone(), end: Bound::Excluded(lo) }, |k, pk, t| {
                go = f(k, pk, t);
                go
            })?;
            if !go {
                return Ok(());
            }
        }
        let start = if from.is_some_and(|s| s >= hi) { start } else { Bound::Included(hi) };
        self.keys_in(&KeyRange { start, end: Bound::Unbounded }, f)
    }

    /// The engine key of record key `rk` in this Tx's database (a walk's start).
    pub(crate) fn engine_key(&self, rk: &[u8]) -> Vec<u8> {
        self.ks.phys(rk).into_owned()
    }

    /// [`keys`](Self::keys) over engine-key `range` (a cluster pool's slot: [`Tx::slot_range`]).
    pub fn keys_in(&self, range: &KeyRange, mut f: impl FnMut(&[u8], &[u8], Kind) -> bool) -> TxResult<()> {
        let mp = meta_key(b"");
        let now = self.now;
        self.raw_scan(range, |pk, v| {
            let Some(rk) = self.ks.logical(pk) else { return true };
            if let Some(user) = rk.strip_prefix(mp.as_slice()) {
                return match Meta::decode(v) {
                    Some(m) if m.kind.collection() && !m.expired(now) => f(user, pk, m.kind),
                    _ => true,
                };
            }
            if !allowed(rk) {
                return true;
            }
            match self.meta(rk) {
                Some(m) if m.expired(now) => true,
                _ => f(rk, pk, Kind::STRING),
            }
        })
    }

    /// The engine-key range of `slot`'s records in a cluster pool.
    pub fn slot_range(slot: u16) -> KeyRange {
        KeyRange::prefix(slot.to_be_bytes().to_vec())
    }

    /// Every record of key `k` as this Tx sees it (record key, value): its value, or its
    /// elements, and its meta record. Empty when `k` is absent (or expired).
    pub fn records_of(&mut self, k: &[u8]) -> TxResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        match self.kind(k)?.map(Kind::tag) {
            None => return Ok(out),
            Some(None) => out.push((k.to_vec(), self.raw_get(k)?.unwrap_or_default())),
            Some(Some(tag)) => {
                let range = self.prefix_range(&elem_prefix(tag, k));
                self.raw_scan(&range, |pk, v| {
                    if let Some(rk) = self.ks.logical(pk) {
                        out.push((rk.to_vec(), v.to_vec()));
                    }
                    true
                })?;
            }
        }
        if let Some(m) = self.meta(k) {
            out.push((meta_key(k), m.encode()));
        }
        Ok(out)
    }

    /// Make `k` what `records` (from [`records_of`](Self::records_of) on another node)
    /// say, replacing what `k` was when `replace`, else refusing an existing `k` with
    /// `BUSYKEY`. The records are checked first: all of `k`, a value or elements of the
    /// meta record's type, as many as it counts.
    pub fn restore(&mut self, k: &[u8], records: &[(Vec<u8>, Vec<u8>)], replace: bool) -> TxResult<()> {
        check_key(k)?;
        let bad = |why: &str| Err(Reply::err(format!("ERR PMKV.RESTORE: {why}")));
        let mk = meta_key(k);
        let (mut meta, mut value, mut elems) = (None, None, Vec::new());
        for (rk, v) in records {
            if *rk == mk {
                match Meta::decode(v) {
                    Some(m) if meta.is_none() => meta = Some(m),
                    _ => return bad("a malformed or second meta record"),
                }
            } else if rk.as_slice() == k && value.is_none() {
                value = Some(v);
            } else if split_elem(rk).is_some_and(|(_, user, _)| user == k) {
                elems.push((rk, v));
            } else {
                return bad("a record of another key");
            }
        }
        let kind = meta.map_or(Kind::STRING, |m| m.kind);
        let whole = match kind.tag() {
            None => value.is_some() && elems.is_empty(),
            Some(tag) => {
                let p = elem_prefix(tag, k);
                value.is_none()
                    && elems.iter().all(|(rk, _)| rk.starts_with(&p))
                    && meta.is_some_and(|m| m.count == elems.len() as u64)
            }
        };
        if !whole {
            return bad("the records do not make one key of one type");
        }
        if self.kind(k)?.is_some() {
            if !replace {
                return Err(Reply::err("BUSYKEY Target key name already exists."));
            }
            self.del(k)?;
        }
        if let Some(v) = value {
            self.raw_put(k.to_vec(), v.clone());
        }
        for (rk, v) in elems {
            self.raw_put(rk.clone(), v.clone());
        }
        self.set_meta(k, meta);
        self.touch(k);
        Ok(())
    }

    /// Make `dst` a copy of `src` — its value or fields and its expiry time — replacing
    /// `dst` when `replace` (RENAME, COPY REPLACE). False, changing nothing, when `src` is
    /// absent or `dst` exists and not `replace`. One key's records are rewritten under the
    /// new name, so the copy is as atomic as the command's batch.
    pub fn copy_key(&mut self, src: &[u8], dst: &[u8], replace: bool) -> TxResult<bool> {
        let records = self.records_of(src)?;
        if records.is_empty() || (!replace && self.kind(dst)?.is_some()) {
            return Ok(false);
        }
        self.restore(dst, &rename_records(records, src, dst), true)?;
        Ok(true)
    }

    /// Write `src`'s records as key `dst` in `into` (a Tx of another database: MOVE,
    /// COPY … DB), replacing `dst` when `replace`, deleting `src` here when `remove`
    /// (MOVE). Whether it was done: false, changing nothing, when `src` is absent or `dst`
    /// exists and not `replace`. Commit both with [`Tx::commit_all`] (one batch).
    pub fn transfer(&mut self, into: &mut Tx, src: &[u8], dst: &[u8], replace: bool, remove: bool) -> TxResult<bool> {
        let records = self.records_of(src)?;
        if records.is_empty() || (!replace && into.kind(dst)?.is_some()) {
            return Ok(false);
        }
        let renamed = if src == dst { records } else { rename_records(records, src, dst) };
        into.restore(dst, &renamed, true)?;
        if remove {
            self.del(src)?;
        }
        Ok(true)
    }

    /// Delete every key (FLUSHDB), in rounds of at most `round` keys so that memory
    /// stays bounded. Each round deletes whole keys (a string with its meta record, a hash
    /// with all its fields) in one atomic batch, so a crash between rounds leaves some keys
    /// gone and the rest whole, never a hash without its count or a TTL without its
    /// string. A last walk deletes whatever records are left (expired keys, which the
    /// rounds skip), then the DRAM view is reset.
    pub fn flush_all(s: &Store, ks: &Keyspace, round: usize) -> pmkv::Result<()> {
        let fail = |r: Reply| pmkv::Error::new(pmkv::ErrorKind::Io, format!("FLUSHDB: {r:?}"));
        // As Redis: a flush fails the EXEC of those watching a key that existed (and had
        // not expired); watching a key that was absent is not disturbed.
        let watched: Vec<Vec<u8>> = ks.watches.lock().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
        let mut probe = Tx::new(s, ks);
        let mut existed = Vec::new();
        for k in watched {
            if probe.kind(&k).map_err(fail)?.is_some() {
                existed.push(k);
            }
        }
        drop(probe);
        loop {
            let mut tx = Tx::new(s, ks);
            let mut keys = Vec::new();
            tx.keys(Bound::Unbounded, |k, _| {
                keys.push(k.to_vec());
                keys.len() < round
            })
            .map_err(fail)?;
            for k in &keys {
                tx.del(k).map_err(fail)?;
            }
            tx.commit()?;
            if keys.len() < round {
                break;
            }
        }
        loop {
            let mut keys = Vec::new();
            s.scan(&ks.range(), Direction::Forward, |k, _| {
                // Not the cluster state record (in no slot), nor the replication record,
                // which a full sync's flush must keep (it says the sync is unfinished),
                // nor the function libraries (FLUSHDB and FLUSHALL keep functions, as in
                // Redis). The SWAPDB map is no database's record (`logical`).
                if ks.logical(k).is_some() && !matches!(k, REPLICA_KEY | FUNCTIONS_KEY) {
                    keys.push(k.to_vec());
                }
                keys.len() < round
            })?;
            // What is left is unreachable to clients: no atomicity needed.
            let mut b = WriteBatch::independent();
            for k in &keys {
                b.delete(k.clone());
            }
            s.write(&b)?;
            if keys.len() < round {
                break;
            }
        }
        ks.clear();
        ks.touch(&mut existed.iter().map(Vec::as_slice));
        Ok(())
    }

    /// Apply the writes as one atomic batch, then the DRAM view, then wake the watchers.
    /// On an error nothing was applied (the engines' batches are all-or-nothing).
    pub fn commit(self) -> pmkv::Result<()> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let delta = self.record_delta()?;
        if self.writes.len() == 1 {
            let (k, v) = self.writes.iter().next().expect("one write");
            match v {
                Some(v) => self.s.put(k, v)?,
                None => {
                    self.s.delete(k)?;
                }
            }
        } else {
            let mut b = WriteBatch::new();
            for (k, v) in &self.writes {
                match v {
                    Some(v) => b.put(k.clone(), v.clone()),
                    None => b.delete(k.clone()),
                };
            }
            self.s.write(&b)?;
        }
        self.applied(delta);
        Ok(())
    }

    /// Commit `txs` (each of another database of the same store: MOVE, COPY … DB, an
    /// EXEC that SELECTs) as one atomic batch, so a crash leaves all of them or none.
    pub fn commit_all(txs: Vec<Tx<'_>>) -> pmkv::Result<()> {
        if txs.len() == 1 {
            return txs.into_iter().try_for_each(Tx::commit);
        }
        let deltas = txs.iter().map(Tx::record_delta).collect::<pmkv::Result<Vec<i64>>>()?;
        let mut b = WriteBatch::new();
        for (k, v) in txs.iter().flat_map(|t| t.writes.iter()) {
            match v {
                Some(v) => b.put(k.clone(), v.clone()),
                None => b.delete(k.clone()),
            };
        }
        if let Some(t) = txs.first().filter(|_| !b.ops().is_empty()) {
            t.s.write(&b)?;
        }
        for (t, d) in txs.iter().zip(deltas) {
            t.applied(d);
        }
        Ok(())
    }

    /// For a database other than 0, how many records the writes add (negative: remove),
    /// read before they are applied (the caller holds the keys' locks).
    fn record_delta(&self) -> pmkv::Result<i64> {
        if self.ks.db.is_empty() {
            return Ok(0);
        }
        let mut d = 0i64;
        for (k, v) in &self.writes {
            d += i64::from(v.is_some()) - i64::from(self.s.contains(k)?);
        }
        Ok(d)
    }

    /// After the batch: the record count, the DRAM view, the watchers, the waiters.
    fn applied(&self, delta: i64) {
        if delta >= 0 {
            self.ks.records.fetch_add(delta as u64, Ordering::Relaxed);
        } else {
            self.ks.records.fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
        }
        for (k, (old, new)) in &self.metas {
            self.ks.apply(k, *old, *new);
        }
        self.ks.ranks.committed(self.writes.iter().map(|(k, v)| (self.ks.logical(k), v.is_some())));
        self.ks.touch(&mut self.touched.iter().map(|k| k.as_slice()));
        self.ks.ready.signal(&mut self.touched.iter().map(|k| k.as_slice()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_round_trips_and_refuses_nonsense() {
        let m = Meta { count: 3, ..Meta::new(Kind::HASH) };
        assert_eq!(Meta::decode(&m.encode()), Some(m));
        assert_eq!(m.encode().len(), 24, "a hash's meta record is version 1's 24 bytes");
        let s = Meta { expire_ms: 1_700_000_000_000, ..Meta::new(Kind::STRING) };
        assert_eq!(Meta::decode(&s.encode()), Some(s));
        let l = Meta { count: 2, aux: 1 << 63, ..Meta::new(Kind::LIST) };
        assert_eq!(l.encode().len(), 32, "a list's carries its head after them");
        assert_eq!(Meta::decode(&l.encode()), Some(l));
        // A string without an expiry time, a hash or list without elements, a bad
        // version, length or type: not a record the server writes.
        assert_eq!(Meta::decode(&Meta { expire_ms: 0, ..s }.encode()), None);
        assert_eq!(Meta::decode(&Meta { count: 0, ..m }.encode()), None);
        assert_eq!(Meta::decode(&Meta { count: 0, ..l }.encode()), None);
        assert_eq!(Meta::decode(&l.encode()[..24]), None);
        let mut b = m.encode();
        b[0] = 2;
        assert_eq!(Meta::decode(&b), None);
        let mut b = m.encode();
        b[1] = 0xee;
        assert_eq!(Meta::decode(&b), None);
        assert_eq!(Meta::decode(&m.encode()[..23]), None);
    }

    /// A version-1 meta record as pmkv 0.1 wrote it, byte for byte, still reads the same.
    #[test]
    fn version_1_records_still_decode() {
        let mut hash = vec![1u8, 1, 0, 0, 0, 0, 0, 0];
        hash.extend_from_slice(&0u64.to_le_bytes());
        hash.extend_from_slice(&5u64.to_le_bytes());
        assert_eq!(Meta::decode(&hash), Some(Meta { count: 5, ..Meta::new(Kind::HASH) }));
        let mut string = vec![1u8, 0, 0, 0, 0, 0, 0, 0];
        string.extend_from_slice(&1_700_000_000_000u64.to_le_bytes());
        string.extend_from_slice(&0u64.to_le_bytes());
        assert_eq!(Meta::decode(&string), Some(Meta { expire_ms: 1_700_000_000_000, ..Meta::new(Kind::STRING) }));
    }

    /// Rolling back to a savepoint restores exactly the maps as they were when it was
    /// taken (checked against copies), over random commands, nested savepoints included.
    #[test]
    fn rollback_restores_the_state_at_the_savepoint() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("v.pool"), "volatile", &pmkv::Options::default()).unwrap();
        let ks = Keyspace::load(&store, false).unwrap();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        for _ in 0..20 {
            let mut tx = Tx::new(&store, &ks);
            let mut marks = Vec::new();
            for _ in 0..300 {
                let k = [b'k', b'0' + next(6) as u8];
                let f = [b'f', b'0' + next(4) as u8];
                match next(8) {
                    0 => marks.push((tx.savepoint(), tx.writes.clone(), tx.metas.clone(), tx.touched.clone())),
                    1 => {
                        if let Some((sp, w, m, t)) = marks.pop() {
                            tx.rollback(sp);
                            assert!(tx.writes == w && tx.metas == m && tx.touched == t);
                        }
                    }
                    2 => drop(tx.set(&k, b"v", Ttl::Clear)),
                    3 => drop(tx.set(&k, b"w", Ttl::At(4_102_444_800_000 + next(9)))),
                    4 => drop(tx.del(&k)),
                    5 => drop(tx.hset(&k, &f, b"x")),
                    6 => drop(tx.hdel(&k, &f)),
                    _ => drop(tx.set_expire(&k, 4_102_444_800_000)),
                }
            }
            while let Some((sp, w, m, t)) = marks.pop() {
                tx.rollback(sp);
                assert!(tx.writes == w && tx.metas == m && tx.touched == t);
            }
        }
    }
}
