//! DUMP/RESTORE with Redis's serialization, against a real `redis-server` 7.0: values
//! DUMPed by Redis RESTORE into pmkv identically and the other way round (random strings
//! of every encoding Redis picks: integers, short, LZF-compressed, binary, 1 MiB; hashes
//! small (listpack) and big (hashtable); lists small (one listpack node) and big (a
//! quicklist of many); sets of integers (intset) and not, small and big (hashtable);
//! sorted sets small (listpack) and big (skiplist), with binary members and negative,
//! fractional and infinite scores), TTLs and the options carried over, and corrupt
//! payloads refused with Redis's words, by both, never a panic.

mod common;

use common::{request, start, Client, RealRedis};
use pmkv_server::{rdb, Config};
use pmkv_testutil::XorShift;
use std::io::{BufRead, Read, Write};

/// A reply with bulks as bytes (the common client renders them as text, lossily).
#[derive(Debug, PartialEq, Eq, Clone)]
enum Raw {
    Line(String),
    Bulk(Vec<u8>),
    Nil,
    Arr(Vec<Raw>),
}

fn read_raw(c: &mut Client) -> Raw {
    let mut line = String::new();
    c.r.read_line(&mut line).unwrap();
    let line = line.trim_end().to_string();
    match line.as_bytes()[0] {
        b'$' | b'*' if &line[1..] == "-1" => Raw::Nil,
        b'_' => Raw::Nil,
        b'$' => {
            let n: usize = line[1..].parse().unwrap();
            let mut b = vec![0u8; n + 2];
            c.r.read_exact(&mut b).unwrap();
            b.truncate(n);
            Raw::Bulk(b)
        }
        b'*' => {
            let n: usize = line[1..].parse().unwrap();
            Raw::Arr((0..n).map(|_| read_raw(c)).collect())
        }
        _ => Raw::Line(line),
    }
}

fn raw(c: &mut Client, args: &[&[u8]]) -> Raw {
    c.w.write_all(&request(args)).unwrap();
    read_raw(c)
}

/// A key's contents comparably: a string's bytes, a hash's fields and a set's members
/// sorted, a list's elements in order, a sorted set's members with their scores in order.
fn contents(c: &mut Client, k: &[u8]) -> Raw {
    match raw(c, &[b"TYPE", k]) {
        Raw::Line(t) if t == "+string" => raw(c, &[b"GET", k]),
        Raw::Line(t) if t == "+list" => raw(c, &[b"LRANGE", k, b"0", b"-1"]),
        Raw::Line(t) if t == "+zset" => raw(c, &[b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"]),
        Raw::Line(t) if t == "+set" => {
            let Raw::Arr(mut items) = raw(c, &[b"SMEMBERS", k]) else { panic!("SMEMBERS not an array") };
            items.sort_by_key(|m| format!("{m:?}"));
            Raw::Arr(items)
        }
        Raw::Line(t) if t == "+hash" => {
            let Raw::Arr(items) = raw(c, &[b"HGETALL", k]) else { panic!("HGETALL not an array") };
            let mut pairs: Vec<(Raw, Raw)> = items.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
            pairs.sort_by(|a, b| format!("{:?}", a.0).cmp(&format!("{:?}", b.0)));
            Raw::Arr(pairs.into_iter().flat_map(|(f, v)| [f, v]).collect())
        }
        other => other,
    }
}

/// Up to `max - 1` random bytes.
fn bytes(rng: &mut XorShift, max: u64) -> Vec<u8> {
    let n = rng.next_u64() % max;
    (0..n).map(|_| rng.next_u64() as u8).collect()
}

/// A random value's writing commands for key `k` (the value chosen to cover the
/// encodings Redis picks).
fn random_value(rng: &mut XorShift, k: &[u8], i: usize) -> Vec<Vec<Vec<u8>>> {
    let set = |v: Vec<u8>| vec![vec![b"SET".to_vec(), k.to_vec(), v]];
    let hset = |pairs: Vec<(Vec<u8>, Vec<u8>)>| {
        let mut c = vec![b"HSET".to_vec(), k.to_vec()];
        for (f, v) in pairs {
            c.push(f);
            c.push(v);
        }
        vec![c]
    };
    let cmd = |name: &str, args: Vec<Vec<u8>>| vec![[vec![name.as_bytes().to_vec(), k.to_vec()], args].concat()];
    let int = |rng: &mut XorShift| (rng.next_u64() as i64 >> (rng.next_u64() % 64)).to_string().into_bytes();
    let score = |rng: &mut XorShift| match rng.next_u64() % 6 {
        0 => b"-inf".to_vec(),
        1 => b"+inf".to_vec(),
        2 => (rng.next_u64() as i64 % 1000).to_string().into_bytes(),
        _ => format!("{:e}", (rng.next_u64() as i64 as f64) / (1u64 << (rng.next_u64() % 60)) as f64).into_bytes(),
    };
    match i % 16 {
        0 => set((rng.next_u64() as i64 >> (rng.next_u64() % 64)).to_string().into_bytes()),
        1 => set((rng.next_u64() as i32).to_string().into_bytes()),
        2 => set(bytes(rng, 20)),
        // Compressible, longer than 20 bytes: Redis DUMPs it LZF-compressed.
        3 => set(b"abcabcabc-".repeat(3 + (rng.next_u64() % 400) as usize)),
        4 => set([bytes(rng, 5000), bytes(rng, 1), vec![7; 21]].concat()),
        5 => set((0..(1 << 20)).map(|j: u32| (j % 251) as u8 ^ (j >> 13) as u8).collect()),
        // Small: a listpack in Redis, with integer fields and values.
        6 => hset(
            (0..1 + rng.next_u64() % 20)
                .map(|j| (j.to_string().into_bytes(), (rng.next_u64() as i64 % 100_000).to_string().into_bytes()))
                .collect(),
        ),
        // Big: a hashtable (more than 128 fields, or a value over 64 bytes).
        7 => hset((0..300).map(|j| (format!("field:{j}").into_bytes(), bytes(rng, 40))).collect()),
        8 => {
            hset(vec![(b"long".to_vec(), [bytes(rng, 100), vec![0; 65]].concat()), (vec![0, 1, 255], b"-12".to_vec())])
        }
        // Small: one listpack node in Redis (integers of every width, binary strings).
        9 => cmd(
            "RPUSH",
            (0..1 + rng.next_u64() % 20).map(|j| if j % 2 == 0 { int(rng) } else { bytes(rng, 70) }).collect(),
        ),
        // Big: many quicklist nodes, some elements over 8 KiB.
        10 => cmd("RPUSH", (0..1500).map(|j| if j % 300 == 7 { bytes(rng, 20_000) } else { bytes(rng, 90) }).collect()),
        // Integers only: an intset (small) or a hashtable (over 512 members).
        11 => cmd("SADD", (0..1 + rng.next_u64() % 40).map(|_| int(rng)).collect()),
        12 => cmd("SADD", (0..700).map(|_| int(rng)).collect()),
        // Strings: a hashtable in Redis 7.0, small or big.
        13 => cmd("SADD", (0..1 + rng.next_u64() % 600).map(|_| [bytes(rng, 30), vec![b'x']].concat()).collect()),
        // Small: a listpack in Redis; big (over 128 members or a member over 64 bytes):
        // a skiplist.
        14 => cmd("ZADD", (0..1 + rng.next_u64() % 30).flat_map(|_| [score(rng), bytes(rng, 20)]).collect()),
        _ => cmd(
            "ZADD",
            (0..200 + rng.next_u64() % 200)
                .flat_map(|j| [score(rng), [bytes(rng, if j == 0 { 200 } else { 50 }), vec![b'm']].concat()])
                .collect(),
        ),
    }
}

/// `args` sent to pmkv and to Redis: the same answer from both, which is returned.
fn both(p: &mut Client, r: &mut Client, args: &[&[u8]]) -> Raw {
    let (a, b) = (raw(p, args), raw(r, args));
    assert_eq!(a, b, "{:?}", args.iter().map(|x| String::from_utf8_lossy(x)).collect::<Vec<_>>());
    a
}

fn send(c: &mut Client, cmd: &[Vec<u8>]) -> Raw {
    let a: Vec<&[u8]> = cmd.iter().map(|x| x.as_slice()).collect();
    raw(c, &a)
}

#[test]
fn values_dumped_by_either_restore_in_the_other_identically() {
    let s = start("hart", 64, Config { threads: 2, ..Config::default() });
    let redis = RealRedis::start();
    let (mut p, mut r) = (Client::new(s.port), Client::new(redis.port));
    // Redis checks every payload pmkv writes deeply: each listpack entry's encoding,
    // length and back-length, the header's count, no member twice.
    assert_eq!(raw(&mut r, &[b"CONFIG", b"SET", b"sanitize-dump-payload", b"yes"]), Raw::Line("+OK".into()));
    let mut rng = XorShift::new(63);
    for i in 0..160 {
        let k = format!("k{i}").into_bytes();
        // Redis → pmkv, then pmkv → Redis under another name.
        let (from, to, name) =
            if i % 2 == 0 { (&mut r, &mut p, "redis→pmkv") } else { (&mut p, &mut r, "pmkv→redis") };
        for cmd in random_value(&mut rng, &k, i / 2) {
            assert!(matches!(send(from, &cmd), Raw::Line(_) | Raw::Bulk(_)));
        }
        let Raw::Bulk(payload) = raw(from, &[b"DUMP", &k]) else { panic!("DUMP gave no payload") };
        assert_eq!(raw(to, &[b"RESTORE", &k, b"0", &payload]), Raw::Line("+OK".into()), "{name} key {i}");
        assert_eq!(raw(to, &[b"TYPE", &k]), raw(from, &[b"TYPE", &k]), "{name} key {i}");
        assert_eq!(contents(to, &k), contents(from, &k), "{name} key {i}");
        // And back: what the receiver DUMPs restores in the sender as the original.
        let Raw::Bulk(again) = raw(to, &[b"DUMP", &k]) else { panic!("DUMP gave no payload") };
        let back = [&k[..], b"-back"].concat();
        assert_eq!(raw(from, &[b"RESTORE", &back, b"0", &again]), Raw::Line("+OK".into()));
        assert_eq!(contents(from, &back), contents(from, &k), "{name} key {i}, back");
    }
}

#[test]
fn restore_options_ttls_and_errors_answer_as_redis() {
    let s = start("hart", 16, Config { threads: 2, ..Config::default() });
    let redis = RealRedis::start();
    let (mut p, mut r) = (Client::new(s.port), Client::new(redis.port));
    both(&mut p, &mut r, &[b"SET", b"s", b"hello"]);
    both(&mut p, &mut r, &[b"HSET", b"h", b"f", b"1", b"g", b"two"]);
    let Raw::Bulk(sp) = raw(&mut r, &[b"DUMP", b"s"]) else { panic!() };
    let Raw::Bulk(hp) = raw(&mut p, &[b"DUMP", b"h"]) else { panic!() };
    both(&mut p, &mut r, &[b"DUMP", b"missing"]);
    both(&mut p, &mut r, &[b"RESTORE", b"s", b"0", &sp]);
    both(&mut p, &mut r, &[b"RESTORE", b"s", b"0", &hp, b"REPLACE"]);
    both(&mut p, &mut r, &[b"TYPE", b"s"]);
    both(&mut p, &mut r, &[b"RESTORE", b"t", b"-1", &sp]);
    both(&mut p, &mut r, &[b"RESTORE", b"t", b"x", &sp]);
    both(&mut p, &mut r, &[b"RESTORE", b"t", b"0", &sp, b"BOGUS"]);
    both(&mut p, &mut r, &[b"RESTORE", b"t", b"0", &sp, b"IDLETIME", b"-1"]);
    both(&mut p, &mut r, &[b"RESTORE", b"t", b"0", &sp, b"FREQ", b"256"]);
    both(&mut p, &mut r, &[b"RESTORE", b"t", b"0", &sp, b"FREQ", b"1", b"IDLETIME", b"1"]);
    both(&mut p, &mut r, &[b"RESTORE", b"t", b"0", &sp, b"IDLETIME", b"100"]);
    both(&mut p, &mut r, &[b"RESTORE", b"u", b"0", &sp, b"FREQ", b"5", b"REPLACE"]);
    // TTLs: relative, absolute, absolute in the past (nothing created; REPLACE deletes).
    both(&mut p, &mut r, &[b"RESTORE", b"e1", b"100000", &sp]);
    both(&mut p, &mut r, &[b"RESTORE", b"e2", b"4102444800000", &hp, b"ABSTTL"]);
    both(&mut p, &mut r, &[b"PEXPIRETIME", b"e2"]);
    for c in [&mut p, &mut r] {
        let Raw::Line(t) = raw(c, &[b"PTTL", b"e1"]) else { panic!() };
        let t: i64 = t[1..].parse().unwrap();
        assert!((90_000..=100_000).contains(&t), "{t}");
    }
    both(&mut p, &mut r, &[b"RESTORE", b"e3", b"1000", &sp, b"ABSTTL"]);
    both(&mut p, &mut r, &[b"EXISTS", b"e3"]);
    both(&mut p, &mut r, &[b"RESTORE", b"e2", b"1000", &sp, b"ABSTTL", b"REPLACE"]);
    both(&mut p, &mut r, &[b"EXISTS", b"e2"]);
    // Corrupt payloads: every truncation, a flipped byte anywhere, a later RDB version.
    for payload in [&sp, &hp] {
        for n in 0..payload.len() {
            both(&mut p, &mut r, &[b"RESTORE", b"c", b"0", &payload[..n]]);
            let mut b = payload.clone();
            b[n] ^= 0x20;
            both(&mut p, &mut r, &[b"RESTORE", b"c", b"0", &b]);
        }
        let mut later = payload.clone();
        let at = later.len() - 10;
        later[at] = 11;
        both(&mut p, &mut r, &[b"RESTORE", b"c", b"0", &later]);
    }
    both(&mut p, &mut r, &[b"RESTORE", b"c", b"0", b""]);
    both(&mut p, &mut r, &[b"EXISTS", b"c"]);
    assert_eq!(
        raw(&mut p, &[b"RESTORE", b"c", b"0", b"garbage-garbage"]),
        Raw::Line("-ERR DUMP payload version or checksum are wrong".into())
    );
}

/// Lists, sets and sorted sets: TTLs and REPLACE as for any type; every truncation and
/// flipped byte of their payloads (each server's) answered as Redis answers; and what
/// Redis refuses in a well-formed payload — a member twice, a NaN score, an empty
/// collection — refused with its words.
#[test]
fn collection_payloads_answer_as_redis_whole_corrupt_or_refused() {
    let s = start("hart", 16, Config { threads: 2, ..Config::default() });
    let redis = RealRedis::start();
    let (mut p, mut r) = (Client::new(s.port), Client::new(redis.port));
    both(&mut p, &mut r, &[b"RPUSH", b"l", b"a", b"-7", b"\x00\xff"]);
    both(&mut p, &mut r, &[b"SADD", b"si", b"3", b"-100000", b"7"]);
    both(&mut p, &mut r, &[b"SADD", b"ss", b"x", b"y"]);
    both(&mut p, &mut r, &[b"ZADD", b"z", b"-inf", b"lo", b"1.5", b"mid", b"+inf", b"hi"]);
    let mut payloads = Vec::new();
    for k in [&b"l"[..], b"si", b"ss", b"z"] {
        for c in [&mut p, &mut r] {
            let Raw::Bulk(b) = raw(c, &[b"DUMP", k]) else { panic!("DUMP gave no payload") };
            payloads.push(b);
        }
    }
    // Whole: into a key with a TTL, over another type with REPLACE, with ABSTTL.
    for (n, payload) in payloads.iter().enumerate() {
        let k = format!("t{n}").into_bytes();
        both(&mut p, &mut r, &[b"RESTORE", &k, b"100000", payload]);
        both(&mut p, &mut r, &[b"RESTORE", &k, b"0", payload]);
        both(&mut p, &mut r, &[b"SET", b"other", b"v"]);
        both(&mut p, &mut r, &[b"RESTORE", b"other", b"4102444800000", payload, b"ABSTTL", b"REPLACE"]);
        both(&mut p, &mut r, &[b"PEXPIRETIME", b"other"]);
        both(&mut p, &mut r, &[b"TYPE", b"other"]);
        assert_eq!(contents(&mut p, b"other"), contents(&mut r, b"other"));
        for c in [&mut p, &mut r] {
            let Raw::Line(t) = raw(c, &[b"PTTL", &k]) else { panic!() };
            let t: i64 = t[1..].parse().unwrap();
            assert!((90_000..=100_000).contains(&t), "{t}");
        }
    }
    // Corrupt: every truncation and a flipped byte anywhere.
    for payload in &payloads {
        for n in 0..payload.len() {
            both(&mut p, &mut r, &[b"RESTORE", b"c", b"0", &payload[..n]]);
            let mut b = payload.clone();
            b[n] ^= 0x20;
            both(&mut p, &mut r, &[b"RESTORE", b"c", b"0", &b]);
        }
    }
    both(&mut p, &mut r, &[b"EXISTS", b"c"]);
    // Well-formed, with a valid footer, and refused by Redis: a set member twice, a
    // sorted-set member twice, a NaN score, an empty set, list and sorted set.
    let body = |ty: u8, items: &[&[u8]], scores: Option<f64>| {
        let mut b = vec![ty, items.len() as u8];
        for it in items {
            b.push(it.len() as u8);
            b.extend_from_slice(it);
            if let Some(sc) = scores {
                b.extend_from_slice(&sc.to_le_bytes());
            }
        }
        rdb::with_footer(b)
    };
    for bad in [
        body(rdb::TYPE_SET, &[b"a", b"b", b"a"], None),
        body(rdb::TYPE_ZSET_2, &[b"a", b"a"], Some(1.0)),
        body(rdb::TYPE_ZSET_2, &[b"a"], Some(f64::NAN)),
        body(rdb::TYPE_SET, &[], None),
        body(rdb::TYPE_LIST, &[], None),
        body(rdb::TYPE_ZSET_2, &[], Some(1.0)),
        body(rdb::TYPE_LIST_QUICKLIST_2, &[], None),
    ] {
        both(&mut p, &mut r, &[b"RESTORE", b"c", b"0", &bad]);
    }
    // A sorted set big enough for pmkv's rank index, indexed by a ZRANK, then replaced
    // by RESTORE: the index follows the restored records.
    for (k, sign) in [(&b"big"[..], 1i64), (b"big2", -1)] {
        let mut args: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), k.to_vec()];
        for j in 0..300i64 {
            args.push((sign * j * 3 % 1000).to_string().into_bytes());
            args.push(format!("m{j}").into_bytes());
        }
        let a: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        both(&mut p, &mut r, &a);
    }
    both(&mut p, &mut r, &[b"ZRANK", b"big", b"m150"]);
    let Raw::Bulk(big2) = raw(&mut p, &[b"DUMP", b"big2"]) else { panic!("DUMP gave no payload") };
    both(&mut p, &mut r, &[b"RESTORE", b"big", b"0", &big2, b"REPLACE"]);
    for m in [&b"m0"[..], b"m150", b"m299", b"m7"] {
        both(&mut p, &mut r, &[b"ZRANK", b"big", m]);
        both(&mut p, &mut r, &[b"ZREVRANK", b"big", m]);
    }
    both(&mut p, &mut r, &[b"ZRANGE", b"big", b"140", b"160", b"WITHSCORES"]);
    // And the plain forms Redis reads though 7.0 no longer writes them.
    let plain = [
        body(rdb::TYPE_LIST, &[b"x", b"y", b"x"], None),
        body(rdb::TYPE_SET, &[b"5", b"-6"], None),
        body(rdb::TYPE_ZSET_2, &[b"a", b"b"], Some(-0.25)),
    ];
    for (n, ok) in plain.iter().enumerate() {
        let k = format!("plain{n}").into_bytes();
        assert_eq!(both(&mut p, &mut r, &[b"RESTORE", &k, b"0", ok]), Raw::Line("+OK".into()));
        assert_eq!(contents(&mut p, &k), contents(&mut r, &k));
    }
}

#[test]
fn dump_and_restore_run_in_scripts_and_multi_as_in_redis() {
    let s = start("hart", 16, Config { threads: 2, ..Config::default() });
    let redis = RealRedis::start();
    let (mut p, mut r) = (Client::new(s.port), Client::new(redis.port));
    for c in [&mut p, &mut r] {
        assert_eq!(raw(c, &[b"RPUSH", b"l", b"a", b"b"]), Raw::Line(":2".into()));
    }
    let Raw::Bulk(payload) = raw(&mut r, &[b"DUMP", b"l"]) else { panic!("DUMP gave no payload") };
    for c in [&mut p, &mut r] {
        // DUMP and RESTORE run in a script and in MULTI, as in Redis.
        let script: &[u8] = b"local d = redis.call('DUMP', KEYS[1]); return redis.call('RESTORE', KEYS[2], 0, d)";
        assert_eq!(raw(c, &[b"EVAL", script, b"2", b"l", b"copy"]), Raw::Line("+OK".into()));
        assert_eq!(raw(c, &[b"MULTI"]), Raw::Line("+OK".into()));
        assert_eq!(raw(c, &[b"RESTORE", b"m", b"0", &payload]), Raw::Line("+QUEUED".into()));
        assert_eq!(raw(c, &[b"LLEN", b"m"]), Raw::Line("+QUEUED".into()));
        assert_eq!(raw(c, &[b"EXEC"]), Raw::Arr(vec![Raw::Line("+OK".into()), Raw::Line(":2".into())]));
        let two = Raw::Arr(vec![Raw::Bulk(b"a".to_vec()), Raw::Bulk(b"b".to_vec())]);
        assert_eq!(raw(c, &[b"LRANGE", b"copy", b"0", b"-1"]), two);
    }
}

/// FUNCTION DUMP's payload is Redis's: a dump of either restores in the other (all its
/// libraries), and FUNCTION RESTORE's policies and errors answer as Redis's.
#[test]
fn function_dumps_restore_in_either_server_with_redis_policies() {
    let s = start("hart", 64, Config { threads: 2, ..Config::default() });
    let redis = RealRedis::start();
    let (mut p, mut r) = (Client::new(s.port), Client::new(redis.port));
    let lib = |name: &str, f: &str, v: &str| {
        format!("#!lua name={name}\nredis.register_function('{f}', function() return '{v}' end)").into_bytes()
    };
    let ok = || Raw::Line("+OK".into());
    for pmkv_first in [false, true] {
        let (from, to) = if pmkv_first { (&mut p, &mut r) } else { (&mut r, &mut p) };
        for c in [&mut *from, &mut *to] {
            assert_eq!(raw(c, &[b"FUNCTION", b"FLUSH"]), ok());
        }
        assert_eq!(raw(from, &[b"FUNCTION", b"LOAD", &lib("l1", "f1", "one")]), Raw::Bulk(b"l1".to_vec()));
        assert_eq!(raw(from, &[b"FUNCTION", b"LOAD", &lib("l2", "f2", "two")]), Raw::Bulk(b"l2".to_vec()));
        let Raw::Bulk(payload) = raw(from, &[b"FUNCTION", b"DUMP"]) else { panic!("FUNCTION DUMP gave no payload") };
        // APPEND (the default) refuses a library that exists, and loads nothing then.
        assert_eq!(raw(to, &[b"FUNCTION", b"LOAD", &lib("l1", "g", "old")]), Raw::Bulk(b"l1".to_vec()));
        assert_eq!(raw(to, &[b"FUNCTION", b"RESTORE", &payload]), Raw::Line("-ERR Library l1 already exists".into()));
        assert_eq!(raw(to, &[b"FCALL", b"f2", b"0"]), Raw::Line("-ERR Function not found".into()));
        // REPLACE replaces it; FLUSH starts from nothing.
        assert_eq!(raw(to, &[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"]), ok());
        assert_eq!(raw(to, &[b"FCALL", b"f1", b"0"]), Raw::Bulk(b"one".to_vec()));
        assert_eq!(raw(to, &[b"FCALL", b"f2", b"0"]), Raw::Bulk(b"two".to_vec()));
        assert_eq!(raw(to, &[b"FUNCTION", b"RESTORE", &payload, b"FLUSH"]), ok());
        assert_eq!(raw(to, &[b"FCALL", b"g", b"0"]), Raw::Line("-ERR Function not found".into()));
        // And back: the receiver's dump restores in the sender (each server dumps the
        // libraries in its own order: Redis's hash order, pmkv's name order).
        let Raw::Bulk(again) = raw(to, &[b"FUNCTION", b"DUMP"]) else { panic!("FUNCTION DUMP gave no payload") };
        assert_eq!(again.len(), payload.len());
        assert_eq!(raw(from, &[b"FUNCTION", b"RESTORE", &again, b"FLUSH"]), ok());
        assert_eq!(raw(from, &[b"FCALL", b"f2", b"0"]), Raw::Bulk(b"two".to_vec()));
        let mut bad = payload.clone();
        bad[2] ^= 1;
        for c in [&mut *from, &mut *to] {
            assert_eq!(
                raw(c, &[b"FUNCTION", b"RESTORE", &bad]),
                Raw::Line("-ERR DUMP payload version or checksum are wrong".into())
            );
            assert_eq!(
                raw(c, &[b"FUNCTION", b"RESTORE", &payload, b"BOGUS"]),
                Raw::Line("-ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.".into())
            );
            assert_eq!(
                raw(c, &[b"FUNCTION", b"RESTORE", b"a", b"b", b"c"]),
                Raw::Line(
                    "-ERR unknown subcommand or wrong number of arguments for 'RESTORE'. Try FUNCTION HELP.".into()
                )
            );
        }
    }
}

/// A ziplist (RDB 7–9's compact encoding) of entries given as their encoding and data
/// bytes: each gets its previous entry's length in front, the header its size, the
/// offset of its last entry and its count, exactly as Redis's deep check wants them.
fn ziplist(entries: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    let (mut prev, mut tail) = (0usize, 10usize);
    for e in entries {
        tail = 10 + body.len();
        body.push(prev as u8);
        body.extend_from_slice(e);
        prev = e.len() + 1;
    }
    let total = (10 + body.len() + 1) as u32;
    [&total.to_le_bytes()[..], &(tail as u32).to_le_bytes(), &(entries.len() as u16).to_le_bytes(), &body, &[0xFF]]
        .concat()
}

/// A payload of RDB type `ty` whose body is `parts`, one after the other.
fn legacy(ty: u8, parts: &[Vec<u8>]) -> Vec<u8> {
    let mut b = vec![ty];
    for p in parts {
        b.extend_from_slice(p);
    }
    rdb::with_footer(b)
}

fn blob(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    rdb::write_len(&mut out, b.len() as u64);
    out.extend_from_slice(b);
    out
}

/// The forms only Redis before 7.0 wrote (ziplists, quicklists of ziplists, text
/// scores), which a Redis 7.0 still RESTOREs, and a quicklist's plain node: pmkv reads
/// each as Redis does — every ziplist integer encoding (immediate 0–12, 8, 16, 24, 32,
/// 64-bit) and string length.
#[test]
fn older_forms_restore_as_in_redis() {
    let s = start("hart", 16, Config { threads: 2, ..Config::default() });
    let redis = RealRedis::start();
    let (mut p, mut r) = (Client::new(s.port), Client::new(redis.port));
    let long = [&[0x40u8, 100][..], &[b'L'; 100]].concat();
    let entries: Vec<Vec<u8>> = vec![
        vec![0x01, b'a'],
        long,
        vec![0xC0, 0x39, 0x30],
        vec![0xD0, 0x00, 0x00, 0x00, 0x80],
        [vec![0xE0], (-5_000_000_000i64).to_le_bytes().to_vec()].concat(),
        vec![0xF0, 0xFF, 0xFF, 0x7F],
        vec![0xFE, 0x80],
        vec![0xF1],
        vec![0xFD],
        vec![0x00],
    ];
    let all: Vec<&[u8]> = entries.iter().map(Vec::as_slice).collect();
    let zl = ziplist(&all);
    // In score order, as Redis writes a compact sorted set (Redis trusts the order; pmkv
    // orders what it reads).
    let scores: Vec<Vec<u8>> = vec![
        vec![0x01, b'n'],
        vec![0x04, b'-', b'i', b'n', b'f'],
        vec![0x01, b'o'],
        vec![0xC0, 0x18, 0xFC],
        vec![0x01, b'm'],
        vec![0x03, b'1', b'.', b'5'],
        vec![0x01, b'p'],
        vec![0xF4],
    ];
    let pairs: Vec<&[u8]> = scores.iter().map(Vec::as_slice).collect();
    let hash: Vec<&[u8]> = vec![&[0x01, b'f'], &[0xFE, 0x07], &[0x02, b'g', b'h'], &[0x00]];
    let mut quick = vec![2u8];
    quick.extend(blob(&ziplist(&all[..4])));
    quick.extend(blob(&ziplist(&all[4..])));
    let mut text = vec![3u8];
    for (m, sc) in [(&b"x"[..], &[3, b'2', b'.', b'5'][..]), (b"y", &[255]), (b"z", &[254])] {
        text.extend(blob(m));
        text.extend_from_slice(sc);
    }
    // A quicklist of listpacks with a plain node (one element as it is) between them,
    // as Redis 7 writes an element over its packed threshold.
    let lp_a = [10, 0, 0, 0, 1, 0, 0x81, b'a', 2, 0xFF];
    let mut plain = vec![3u8];
    for (container, data) in [(2u8, &lp_a[..]), (1, &b"a plain node"[..]), (2, &lp_a[..])] {
        plain.push(container);
        plain.extend(blob(data));
    }
    let payloads = [
        legacy(rdb::TYPE_LIST_QUICKLIST_2, &[plain]),
        legacy(rdb::TYPE_LIST_ZIPLIST, &[blob(&zl)]),
        legacy(rdb::TYPE_LIST_QUICKLIST, &[quick]),
        legacy(rdb::TYPE_ZSET_ZIPLIST, &[blob(&ziplist(&pairs))]),
        legacy(rdb::TYPE_HASH_ZIPLIST, &[blob(&ziplist(&hash))]),
        legacy(rdb::TYPE_ZSET, &[text]),
    ];
    for (n, payload) in payloads.iter().enumerate() {
        let k = format!("old{n}").into_bytes();
        assert_eq!(both(&mut p, &mut r, &[b"RESTORE", &k, b"0", payload]), Raw::Line("+OK".into()), "payload {n}");
        both(&mut p, &mut r, &[b"TYPE", &k]);
        assert_eq!(contents(&mut p, &k), contents(&mut r, &k), "payload {n}");
    }
}
