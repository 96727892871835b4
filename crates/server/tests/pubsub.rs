//! Pub/Sub over the wire, every step sent to `pmkv serve` and to a real `redis-server`
//! (the control) alike: subscription replies, messages, RESP2 subscribed mode and its
//! errors, RESP3 pushes, PUBSUB introspection, and the output-buffer limit that
//! disconnects a subscriber that does not read.

mod common;

use common::{start, Client, RealRedis};
use pmkv_server::{Config, OutputLimits};
use std::time::{Duration, Instant};

/// A connection to each: pmkv's first, the control's second.
struct Pair {
    p: Client,
    r: Client,
}

impl Pair {
    fn new(pmkv: u16, redis: u16) -> Pair {
        Pair { p: Client::new(pmkv), r: Client::new(redis) }
    }
    /// Send to both; both answer the same.
    fn cmd(&mut self, args: &[&str]) -> String {
        let a = self.p.cmd(args);
        assert_eq!(a, self.r.cmd(args), "pmkv and redis-server differ on {args:?}");
        a
    }
    /// Read one more reply (a message, or a further subscription reply) from both.
    fn reply(&mut self) -> String {
        let a = self.p.reply();
        assert_eq!(a, self.r.reply(), "pmkv and redis-server differ on an unsolicited reply");
        a
    }
}

fn servers() -> (common::Running, RealRedis) {
    (start("hart", 16, Config { threads: 2, ..Config::default() }), RealRedis::start())
}

#[test]
fn resp2_subscriptions_messages_and_subscribed_mode_answer_as_redis() {
    let (s, redis) = servers();
    let mut sub = Pair::new(s.port, redis.port);
    let mut publ = Pair::new(s.port, redis.port);
    // Nothing to unsubscribe from.
    assert_eq!(sub.cmd(&["UNSUBSCRIBE"]), "[unsubscribe,(nil),:0]");
    assert_eq!(sub.cmd(&["PUNSUBSCRIBE", "x"]), "[punsubscribe,x,:0]");
    assert_eq!(sub.cmd(&["SUBSCRIBE", "news", "sport"]), "[subscribe,news,:1]");
    assert_eq!(sub.reply(), "[subscribe,sport,:2]");
    assert_eq!(sub.cmd(&["SUBSCRIBE", "news"]), "[subscribe,news,:2]");
    assert_eq!(sub.cmd(&["PSUBSCRIBE", "n*"]), "[psubscribe,n*,:3]");
    // Subscribed mode in RESP2: only (un)subscribing, PING, QUIT, RESET.
    sub.cmd(&["GET", "k"]);
    sub.cmd(&["set", "k", "v"]);
    assert_eq!(sub.cmd(&["PING"]), "[pong,]");
    assert_eq!(sub.cmd(&["PING", "hi"]), "[pong,hi]");
    sub.cmd(&["HELLO", "3"]);
    // Messages: the channel's, then the pattern's (a client subscribed both ways gets both).
    assert_eq!(publ.cmd(&["PUBLISH", "news", "hello"]), ":2");
    assert_eq!(sub.reply(), "[message,news,hello]");
    assert_eq!(sub.reply(), "[pmessage,n*,news,hello]");
    assert_eq!(publ.cmd(&["PUBLISH", "nothing-here", "x"]), ":1");
    assert_eq!(sub.reply(), "[pmessage,n*,nothing-here,x]");
    assert_eq!(publ.cmd(&["PUBLISH", "other", "x"]), ":0");
    let binary = "a\r\nb\u{0}c";
    assert_eq!(publ.cmd(&["PUBLISH", "sport", binary]), ":1");
    assert_eq!(sub.reply(), format!("[message,sport,{binary}]"));
    // Introspection, from another client.
    assert_eq!(publ.cmd(&["PUBSUB", "NUMSUB", "news", "sport", "none"]), "[news,:1,sport,:1,none,:0]");
    assert_eq!(publ.cmd(&["PUBSUB", "NUMPAT"]), ":1");
    assert_eq!(publ.cmd(&["PUBSUB", "CHANNELS", "s*"]), "[sport]");
    publ.cmd(&["PUBSUB", "NUMPAT", "x"]);
    publ.cmd(&["PUBSUB", "CHANNELS", "a", "b"]);
    publ.cmd(&["PUBSUB", "nope"]);
    publ.cmd(&["PUBLISH", "a"]);
    publ.cmd(&["SUBSCRIBE"]);
    // Unsubscribing: by name, then the rest.
    assert_eq!(sub.cmd(&["UNSUBSCRIBE", "news", "never"]), "[unsubscribe,news,:2]");
    assert_eq!(sub.reply(), "[unsubscribe,never,:2]");
    assert_eq!(sub.cmd(&["PUNSUBSCRIBE"]), "[punsubscribe,n*,:1]");
    assert_eq!(publ.cmd(&["PUBSUB", "NUMPAT"]), ":0");
    assert_eq!(sub.cmd(&["UNSUBSCRIBE"]), "[unsubscribe,sport,:0]");
    // Out of subscribed mode: commands again.
    assert_eq!(sub.cmd(&["PING"]), "+PONG");
    sub.cmd(&["GET", "k"]);
    assert_eq!(publ.cmd(&["PUBLISH", "sport", "x"]), ":0");
    assert_eq!(publ.cmd(&["PUBSUB", "CHANNELS"]), "[]");
    // RESET leaves subscribed mode; a closed subscriber's subscriptions go with it.
    sub.cmd(&["SUBSCRIBE", "a"]);
    assert_eq!(sub.cmd(&["RESET"]), "+RESET");
    assert_eq!(publ.cmd(&["PUBSUB", "NUMSUB", "a"]), "[a,:0]");
    sub.cmd(&["PSUBSCRIBE", "*"]);
    drop(sub);
    for c in [&mut publ.p, &mut publ.r] {
        let deadline = Instant::now() + Duration::from_secs(10);
        while c.cmd(&["PUBSUB", "NUMPAT"]) != ":0" {
            assert!(Instant::now() < deadline, "a closed subscriber stayed subscribed");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn resp3_subscribers_get_pushes_and_may_run_any_command() {
    let (s, redis) = servers();
    let mut sub = Pair::new(s.port, redis.port);
    let mut publ = Pair::new(s.port, redis.port);
    // HELLO's map names the server: not compared.
    for c in [&mut sub.p, &mut sub.r] {
        assert!(c.cmd(&["HELLO", "3"]).starts_with("[server,"));
    }
    assert_eq!(sub.cmd(&["SUBSCRIBE", "c1", "c2"]), ">[subscribe,c1,:1]");
    assert_eq!(sub.reply(), ">[subscribe,c2,:2]");
    assert_eq!(sub.cmd(&["PSUBSCRIBE", "c*"]), ">[psubscribe,c*,:3]");
    // Any command runs, with its usual reply.
    assert_eq!(sub.cmd(&["SET", "k", "v"]), "+OK");
    assert_eq!(sub.cmd(&["GET", "k"]), "v");
    assert_eq!(sub.cmd(&["PING"]), "+PONG");
    assert_eq!(publ.cmd(&["PUBLISH", "c1", "m"]), ":2");
    assert_eq!(sub.reply(), ">[message,c1,m]");
    assert_eq!(sub.reply(), ">[pmessage,c*,c1,m]");
    // Publishing to itself: the pushes come before PUBLISH's own reply, as in Redis.
    assert_eq!(sub.cmd(&["PUBLISH", "c2", "self"]), ">[message,c2,self]");
    assert_eq!(sub.reply(), ">[pmessage,c*,c2,self]");
    assert_eq!(sub.reply(), ":2");
    // (UNSUBSCRIBE without names goes in Redis's dict order: one name at a time here.)
    assert_eq!(sub.cmd(&["UNSUBSCRIBE", "c1"]), ">[unsubscribe,c1,:2]");
    assert_eq!(sub.cmd(&["UNSUBSCRIBE"]), ">[unsubscribe,c2,:1]");
    assert_eq!(sub.cmd(&["PUNSUBSCRIBE"]), ">[punsubscribe,c*,:0]");
    assert_eq!(sub.cmd(&["UNSUBSCRIBE"]), ">[unsubscribe,(nil),:0]");
}

/// A subscriber that never reads: publishers go on at full speed, and once its pending
/// messages pass the pubsub output limit it is disconnected (its subscription gone), in
/// pmkv as in Redis with the same limits.
#[test]
fn a_subscriber_that_does_not_read_is_disconnected_at_the_pubsub_limit() {
    let limits = OutputLimits { hard: 1 << 20, soft: 256 << 10, soft_time: Duration::from_secs(1) };
    let s = start("hart", 16, Config { threads: 2, pubsub_output: limits, ..Config::default() });
    let redis = RealRedis::start();
    let mut r = Client::new(redis.port);
    assert_eq!(r.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 256kb 1"]), "+OK");
    for port in [s.port, redis.port] {
        let mut sub = Client::new(port);
        // The final read ends at the close; the timeout fails it if the close never comes.
        sub.w.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(sub.cmd(&["SUBSCRIBE", "firehose"]), "[subscribe,firehose,:1]");
        let mut publ = Client::new(port);
        let msg = "x".repeat(64 << 10);
        // 64 MiB published: far past what the socket buffers and the hard limit hold.
        let mut delivered_to = Vec::new();
        for _ in 0..1024 {
            delivered_to.push(publ.cmd(&["PUBLISH", "firehose", &msg]));
        }
        assert_eq!(delivered_to[0], ":1", "port {port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while publ.cmd(&["PUBSUB", "NUMSUB", "firehose"]) != "[firehose,:0]" {
            assert!(Instant::now() < deadline, "port {port}: a subscriber over its limit stayed subscribed");
            std::thread::sleep(Duration::from_millis(20));
        }
        // What it can still read ends with the connection closed, not with 64 MiB.
        let mut got = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            use std::io::Read;
            match sub.r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        assert!(got < 16 << 20, "port {port}: {got} bytes delivered to a subscriber over its limit");
    }
    // Counted where INFO shows disconnections at the output limits.
    let info = Client::new(s.port).cmd(&["INFO", "stats"]);
    assert!(!info.contains("client_output_buffer_limit_disconnections:0\r\n"), "{info}");
}
