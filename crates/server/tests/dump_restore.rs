//! DUMP/RESTORE with Redis's serialization, against a real `redis-server` 7.0: values
//! DUMPed by Redis RESTORE into pmkv identically and the other way round (random strings
//! of every encoding Redis picks: integers, short, LZF-compressed, binary, 1 MiB; hashes
//! small (listpack) and big (hashtable)), TTLs and the options carried over, and corrupt
//! payloads refused with Redis's words, by both, never a panic.

mod common;

use common::{request, start, Client, RealRedis};
use pmkv_server::Config;
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

/// A key's contents comparably: a string's bytes, a hash's fields sorted.
fn contents(c: &mut Client, k: &[u8]) -> Raw {
    match raw(c, &[b"TYPE", k]) {
        Raw::Line(t) if t == "+string" => raw(c, &[b"GET", k]),
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
    match i % 9 {
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
        _ => {
            hset(vec![(b"long".to_vec(), [bytes(rng, 100), vec![0; 65]].concat()), (vec![0, 1, 255], b"-12".to_vec())])
        }
    }
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
    let mut rng = XorShift::new(63);
    for i in 0..90 {
        let k = format!("k{i}").into_bytes();
        // Redis → pmkv, then pmkv → Redis under another name.
        let (from, to, name) =
            if i % 2 == 0 { (&mut r, &mut p, "redis→pmkv") } else { (&mut p, &mut r, "pmkv→redis") };
        for cmd in random_value(&mut rng, &k, i / 2) {
            assert!(matches!(send(from, &cmd), Raw::Line(_) | Raw::Bulk(_)));
        }
        let Raw::Bulk(payload) = raw(from, &[b"DUMP", &k]) else { panic!("DUMP gave no payload") };
        assert_eq!(raw(to, &[b"RESTORE", &k, b"0", &payload]), Raw::Line("+OK".into()), "{name} key {i}");
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
    let both = |p: &mut Client, r: &mut Client, args: &[&[u8]]| {
        let (a, b) = (raw(p, args), raw(r, args));
        assert_eq!(a, b, "{:?}", args.iter().map(|x| String::from_utf8_lossy(x)).collect::<Vec<_>>());
        a
    };
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
