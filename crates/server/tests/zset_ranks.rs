//! Sorted-set ranks under concurrent clients: while writers change a large sorted set
//! (ZADD, ZINCRBY, ZREM, and DEL with a refill, so that its DRAM rank index is dropped and
//! rebuilt again and again), readers ask ranks inside MULTI/EXEC beside a ZRANGEBYSCORE
//! of the whole set (a walk of the records, not the index) in the same EXEC: every rank
//! must be the member's position in that listing. At the end, every member's ZRANK and
//! ZRANGE by rank agree with the records.

mod common;

use common::{start, Client};
use pmkv_server::Config;
use pmkv_testutil::XorShift;

fn fill(c: &mut Client, n: u64, rng: &mut XorShift) {
    let mut cmd: Vec<String> = vec!["ZADD".into(), "lb".into()];
    for i in 0..n {
        cmd.push(format!("{}", rng.below(100)));
        cmd.push(format!("m{i}"));
    }
    let a: Vec<&str> = cmd.iter().map(String::as_str).collect();
    assert!(c.cmd(&a).starts_with(':'));
}

/// Members of a flat `[m,s,m,s…]` reply, in order.
fn members(reply: &str) -> Vec<String> {
    let inner = reply.trim_start_matches('[').trim_end_matches(']');
    inner.split(',').step_by(2).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

#[test]
fn ranks_match_the_records_under_concurrent_writers() {
    for engine in ["hart", "nbtree"] {
        let s = start(engine, 32, Config { threads: 2, ..Config::default() });
        let port = s.port;
        fill(&mut Client::new(port), 400, &mut XorShift::new(1));
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                std::thread::spawn(move || {
                    let mut c = Client::new(port);
                    let mut rng = XorShift::new(100 + w);
                    for _ in 0..600 {
                        let m = format!("m{}", rng.below(450));
                        let sc = format!("{}", rng.below(100));
                        match rng.below(20) {
                            0 => {
                                c.cmd(&["DEL", "lb"]);
                                fill(&mut c, 200 + rng.below(200), &mut rng);
                            }
                            1..=8 => drop(c.cmd(&["ZADD", "lb", &sc, &m])),
                            9..=13 => drop(c.cmd(&["ZINCRBY", "lb", "1", &m])),
                            _ => drop(c.cmd(&["ZREM", "lb", &m])),
                        }
                    }
                })
            })
            .collect();
        let readers: Vec<_> = (0..2u64)
            .map(|r| {
                std::thread::spawn(move || {
                    let mut c = Client::new(port);
                    let mut rng = XorShift::new(200 + r);
                    let mut checked = 0;
                    for _ in 0..300 {
                        let probes: Vec<String> = (0..3).map(|_| format!("m{}", rng.below(450))).collect();
                        assert_eq!(c.cmd(&["MULTI"]), "+OK");
                        c.cmd(&["ZRANGEBYSCORE", "lb", "-inf", "+inf", "WITHSCORES"]);
                        for p in &probes {
                            c.cmd(&["ZRANK", "lb", p]);
                            c.cmd(&["ZREVRANK", "lb", p]);
                        }
                        c.cmd(&["ZRANGE", "lb", "150", "160"]);
                        // The EXEC's replies: the listing, two ranks per probe, a range.
                        let exec = c.cmd(&["EXEC"]);
                        let body = exec.strip_prefix('[').and_then(|x| x.strip_suffix(']')).unwrap();
                        let list_end = body.find(']').unwrap() + 1;
                        let all = members(&body[..list_end]);
                        let rest: Vec<&str> = body[list_end + 1..].splitn(7, ',').collect();
                        for (i, p) in probes.iter().enumerate() {
                            let pos = all.iter().position(|m| m == p);
                            let want = pos.map_or("(nil)".to_string(), |x| format!(":{x}"));
                            let want_rev = pos.map_or("(nil)".to_string(), |x| format!(":{}", all.len() - 1 - x));
                            assert_eq!(rest[2 * i], want, "{engine}: ZRANK {p} in one EXEC with the listing");
                            assert_eq!(rest[2 * i + 1], want_rev, "{engine}: ZREVRANK {p}");
                            checked += 1;
                        }
                        let range: Vec<String> = rest[6]
                            .trim_matches(|c| c == '[' || c == ']')
                            .split(',')
                            .filter(|s| !s.is_empty())
                            .map(str::to_string)
                            .collect();
                        let want: Vec<String> = all.iter().skip(150).take(11).cloned().collect();
                        assert_eq!(range, want, "{engine}: ZRANGE 150 160 in one EXEC with the listing");
                    }
                    checked
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        for r in readers {
            assert_eq!(r.join().unwrap(), 900);
        }
        let mut c = Client::new(port);
        let all = members(&c.cmd(&["ZRANGEBYSCORE", "lb", "-inf", "+inf", "WITHSCORES"]));
        assert!(all.len() > 128, "the set stays large enough for its rank index");
        for (i, m) in all.iter().enumerate() {
            assert_eq!(c.cmd(&["ZRANK", "lb", m]), format!(":{i}"), "{engine}: final ZRANK {m}");
        }
        assert_eq!(members(&c.cmd(&["ZRANGE", "lb", "0", "-1", "WITHSCORES"])), all);
    }
}
