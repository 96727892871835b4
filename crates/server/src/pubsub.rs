//! Pub/Sub as Redis 7.0 serves it: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE,
//! PUBLISH and PUBSUB CHANNELS/NUMSUB/NUMPAT, in RESP2 and RESP3.
//!
//! * A connection with a subscription gets an [`Outbox`]: PUBLISH encodes the message
//!   once per protocol and appends it there, then wakes the subscriber's connection task,
//!   which writes it out. A publisher never waits on a subscriber's socket.
//! * A slow subscriber does not make the server hold its messages without bound: as
//!   Redis's `client-output-buffer-limit pubsub 32mb 8mb 60` (the default), an outbox
//!   that would pass the hard limit, or stays over the soft limit for the soft time, is
//!   dropped and its connection closed. What a subscriber can make the server hold is its
//!   outbox (at most the hard limit) plus the batch its task is writing (taken from the
//!   outbox when it was under the limit): twice the hard limit.
//! * RESP2 subscribed mode (a connection with at least one subscription) takes only
//!   (P)SUBSCRIBE, (P)UNSUBSCRIBE, PING (answered `["pong", arg]`), QUIT and RESET, with
//!   Redis's error text for the rest; RESP3 takes every command, messages arriving as
//!   push frames between replies.
//!
//! Messages are not stored: as in Redis they go to whoever is subscribed when PUBLISH
//! runs, and are lost for a subscriber whose connection closes.

use crate::resp::Reply;
use crate::{OutputLimits, Shared};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Redis's default `client-output-buffer-limit pubsub 32mb 8mb 60`.
pub const PUBSUB_LIMITS: OutputLimits =
    OutputLimits { hard: 32 << 20, soft: 8 << 20, soft_time: Duration::from_secs(60) };

/// Messages published to one subscriber and not yet taken by its connection task.
pub(crate) struct Outbox {
    id: u64,
    state: Mutex<Pending>,
    wake: tokio::sync::Notify,
    /// Woken when the subscriber is dropped at a limit (its task may be blocked writing).
    dropped: tokio::sync::Notify,
    /// The subscriber's protocol (messages are push frames in RESP3).
    resp3: AtomicBool,
}

#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    /// When `bytes` last went over the soft limit (`None`: under it).
    soft_since: Option<Instant>,
    /// Passed a limit: nothing more is queued, the connection closes.
    dropped: bool,
}

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Outbox {
    /// Queue one frame; false when the subscriber passed its limits (dropped).
    fn push(&self, frame: &[u8], limits: &OutputLimits) -> bool {
        let mut p = guard(&self.state);
        if p.dropped {
            return false;
        }
        let len = p.bytes.len() + frame.len();
        let soft_over = limits.soft > 0 && len > limits.soft;
        let soft_expired = soft_over && p.soft_since.is_some_and(|t| t.elapsed() >= limits.soft_time);
        if len > limits.hard || soft_expired {
            p.dropped = true;
            p.bytes = Vec::new();
            drop(p);
            self.wake.notify_one();
            self.dropped.notify_waiters();
            return false;
        }
        if soft_over {
            p.soft_since.get_or_insert_with(Instant::now);
        } else {
            p.soft_since = None;
        }
        p.bytes.extend_from_slice(frame);
        drop(p);
        self.wake.notify_one();
        true
    }

    /// Move what is queued to `out`; an error when the subscriber was dropped at a limit.
    pub(crate) fn drain_into(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        let mut p = guard(&self.state);
        if p.dropped {
            return Err(std::io::Error::other("pubsub output limit passed"));
        }
        out.append(&mut p.bytes);
        p.soft_since = None;
        Ok(())
    }

    /// Wait until something is queued (or the subscriber was dropped).
    pub(crate) async fn ready(&self) {
        self.wake.notified().await
    }

    /// Wait until the subscriber is dropped at a limit (at once if it was).
    pub(crate) async fn dropped(&self) {
        let n = self.dropped.notified();
        tokio::pin!(n);
        // Registered before the flag is read: a drop in between still wakes it.
        n.as_mut().enable();
        if guard(&self.state).dropped {
            return;
        }
        n.await
    }
}

/// A connection's subscriptions.
pub(crate) struct Subs {
    outbox: Arc<Outbox>,
    /// In subscription order (UNSUBSCRIBE without arguments answers in this order).
    channels: Vec<Vec<u8>>,
    patterns: Vec<Vec<u8>>,
}

impl Subs {
    fn count(&self) -> i64 {
        (self.channels.len() + self.patterns.len()) as i64
    }
}

/// Who is subscribed to what, server-wide.
pub struct Hub {
    channels: Mutex<HashMap<Vec<u8>, Vec<Arc<Outbox>>>>,
    patterns: Mutex<BTreeMap<Vec<u8>, Vec<Arc<Outbox>>>>,
    limits: OutputLimits,
}

impl Hub {
    pub fn new(limits: OutputLimits) -> Hub {
        Hub { channels: Mutex::default(), patterns: Mutex::default(), limits }
    }

    /// Send `msg` to `channel`'s subscribers and to those of every pattern it matches:
    /// how many received it (a client subscribed both ways counts twice, as in Redis).
    pub fn publish(&self, channel: &[u8], msg: &[u8]) -> i64 {
        let mut frames: [Option<Vec<u8>>; 2] = [None, None];
        let mut n = 0;
        let mut frame = |ob: &Outbox, parts: &[&[u8]]| {
            let r3 = ob.resp3.load(Ordering::Relaxed);
            let f = frames[r3 as usize].get_or_insert_with(|| encode(parts, r3));
            ob.push(f, &self.limits)
        };
        if let Some(subs) = guard(&self.channels).get(channel) {
            for ob in subs {
                frame(ob, &[b"message", channel, msg]);
                n += 1;
            }
        }
        for (pat, subs) in guard(&self.patterns).iter() {
            if crate::glob::glob(pat, channel) {
                // A frame per pattern: it names the pattern.
                let mut frames: [Option<Vec<u8>>; 2] = [None, None];
                for ob in subs {
                    let r3 = ob.resp3.load(Ordering::Relaxed);
                    let f = frames[r3 as usize].get_or_insert_with(|| encode(&[b"pmessage", pat, channel, msg], r3));
                    ob.push(f, &self.limits);
                    n += 1;
                }
            }
        }
        n
    }

    fn remove(map: &mut impl MapLike, key: &[u8], id: u64) {
        map.remove_sub(key, id);
    }
}

/// The two subscription maps, so subscribe/unsubscribe are written once for both.
trait MapLike {
    fn add_sub(&mut self, key: &[u8], ob: &Arc<Outbox>);
    fn remove_sub(&mut self, key: &[u8], id: u64);
}

macro_rules! map_like {
    ($t:ty) => {
        impl MapLike for $t {
            fn add_sub(&mut self, key: &[u8], ob: &Arc<Outbox>) {
                self.entry(key.to_vec()).or_default().push(ob.clone());
            }
            fn remove_sub(&mut self, key: &[u8], id: u64) {
                if let Some(v) = self.get_mut(key) {
                    v.retain(|o| o.id != id);
                    if v.is_empty() {
                        self.remove(key);
                    }
                }
            }
        }
    };
}
map_like!(HashMap<Vec<u8>, Vec<Arc<Outbox>>>);
map_like!(BTreeMap<Vec<u8>, Vec<Arc<Outbox>>>);

/// A message as the subscriber's protocol frames it.
fn encode(parts: &[&[u8]], resp3: bool) -> Vec<u8> {
    let mut v = Vec::with_capacity(parts.iter().map(|p| p.len() + 16).sum());
    Reply::Push(parts.iter().map(|p| Reply::bulk(p.to_vec())).collect())
        .write(&mut v, resp3)
        .expect("writing to a Vec does not fail");
    v
}

/// The connection's outbox, when it has subscriptions (the connection loop waits on it
/// beside the socket).
pub(crate) fn outbox(subs: &Option<Subs>) -> Option<Arc<Outbox>> {
    subs.as_ref().map(|s| s.outbox.clone())
}

/// Whether the connection is in RESP2 subscribed mode and `name` may not run there: the
/// refusal, Redis's words. PING there answers `["pong", arg]`.
pub(crate) fn refuse(subs: &Option<Subs>, resp3: bool, name: &str, a: &[Vec<u8>]) -> Option<Reply> {
    let subs = subs.as_ref()?;
    subs.outbox.resp3.store(resp3, Ordering::Relaxed);
    if resp3 || subs.count() == 0 {
        return None;
    }
    match name {
        "SUBSCRIBE" | "UNSUBSCRIBE" | "PSUBSCRIBE" | "PUNSUBSCRIBE" | "QUIT" | "RESET" => None,
        "PING" if a.len() <= 1 => Some(Reply::Array(vec![
            Reply::bulk(&b"pong"[..]),
            Reply::bulk(a.first().cloned().unwrap_or_default()),
        ])),
        "PING" => None,
        _ => Some(Reply::err(format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            name.to_ascii_lowercase()
        ))),
    }
}

/// Drop every subscription of the connection (RESET, the connection's end).
pub(crate) fn leave(sh: &Shared, subs: &mut Option<Subs>) {
    if let Some(s) = subs.take() {
        let mut ch = guard(&sh.pubsub.channels);
        for k in &s.channels {
            Hub::remove(&mut *ch, k, s.outbox.id);
        }
        drop(ch);
        let mut pt = guard(&sh.pubsub.patterns);
        for k in &s.patterns {
            Hub::remove(&mut *pt, k, s.outbox.id);
        }
    }
}

/// Run a Pub/Sub command (`name` as the table spells it, `a` its arguments) for
/// connection `id`, whose subscriptions are `subs` and protocol `resp3`.
pub(crate) fn command(
    sh: &Shared,
    subs: &mut Option<Subs>,
    (id, resp3): (u64, bool),
    name: &str,
    a: &[Vec<u8>],
) -> Reply {
    let hub = &sh.pubsub;
    match name {
        "PUBLISH" => Reply::Int(hub.publish(&a[0], &a[1])),
        "PUBSUB" => pubsub(hub, a),
        "SUBSCRIBE" | "PSUBSCRIBE" => {
            let pattern = name == "PSUBSCRIBE";
            let subs = subs.get_or_insert_with(|| Subs {
                outbox: Arc::new(Outbox {
                    id,
                    state: Mutex::default(),
                    wake: tokio::sync::Notify::new(),
                    dropped: tokio::sync::Notify::new(),
                    resp3: AtomicBool::new(resp3),
                }),
                channels: Vec::new(),
                patterns: Vec::new(),
            });
            let mut replies = Vec::with_capacity(a.len());
            for k in a {
                let list = if pattern { &mut subs.patterns } else { &mut subs.channels };
                if !list.contains(k) {
                    list.push(k.clone());
                    if pattern {
                        guard(&hub.patterns).add_sub(k, &subs.outbox);
                    } else {
                        guard(&hub.channels).add_sub(k, &subs.outbox);
                    }
                }
                let kind = if pattern { &b"psubscribe"[..] } else { b"subscribe" };
                replies.push(Reply::Push(vec![Reply::bulk(kind), Reply::bulk(k.clone()), Reply::Int(subs.count())]));
            }
            Reply::Seq(replies)
        }
        _ => {
            let pattern = name == "PUNSUBSCRIBE";
            let kind = if pattern { &b"punsubscribe"[..] } else { b"unsubscribe" };
            let Some(subs) = subs.as_mut() else {
                return Reply::Seq(if a.is_empty() {
                    vec![Reply::Push(vec![Reply::bulk(kind), Reply::Nil, Reply::Int(0)])]
                } else {
                    a.iter()
                        .map(|k| Reply::Push(vec![Reply::bulk(kind), Reply::bulk(k.clone()), Reply::Int(0)]))
                        .collect()
                });
            };
            let list = if pattern { &mut subs.patterns } else { &mut subs.channels };
            let which: Vec<Vec<u8>> = if a.is_empty() { list.clone() } else { a.to_vec() };
            if which.is_empty() {
                return Reply::Seq(vec![Reply::Push(vec![Reply::bulk(kind), Reply::Nil, Reply::Int(subs.count())])]);
            }
            let mut replies = Vec::with_capacity(which.len());
            for k in which {
                let list = if pattern { &mut subs.patterns } else { &mut subs.channels };
                if let Some(i) = list.iter().position(|x| *x == k) {
                    list.remove(i);
                    if pattern {
                        Hub::remove(&mut *guard(&hub.patterns), &k, subs.outbox.id);
                    } else {
                        Hub::remove(&mut *guard(&hub.channels), &k, subs.outbox.id);
                    }
                }
                replies.push(Reply::Push(vec![Reply::bulk(kind), Reply::bulk(k), Reply::Int(subs.count())]));
            }
            Reply::Seq(replies)
        }
    }
}

/// PUBSUB CHANNELS [pattern] | NUMSUB [channel ...] | NUMPAT, with Redis's errors.
fn pubsub(hub: &Hub, a: &[Vec<u8>]) -> Reply {
    let sub = String::from_utf8_lossy(&a[0]).into_owned();
    match (sub.to_ascii_uppercase().as_str(), a.len()) {
        ("CHANNELS", 1 | 2) => {
            let ch = guard(&hub.channels);
            let mut names: Vec<&Vec<u8>> =
                ch.keys().filter(|k| a.get(1).is_none_or(|p| crate::glob::glob(p, k))).collect();
            names.sort();
            Reply::Array(names.into_iter().map(|k| Reply::bulk(k.clone())).collect())
        }
        ("NUMSUB", _) => {
            let ch = guard(&hub.channels);
            Reply::Array(
                a[1..]
                    .iter()
                    .flat_map(|k| [Reply::bulk(k.clone()), Reply::Int(ch.get(k).map_or(0, |v| v.len()) as i64)])
                    .collect(),
            )
        }
        ("NUMPAT", 1) => Reply::Int(guard(&hub.patterns).len() as i64),
        ("NUMPAT", _) => Reply::err("ERR wrong number of arguments for 'pubsub|numpat' command"),
        ("CHANNELS", _) => {
            Reply::err(format!("ERR unknown subcommand or wrong number of arguments for '{sub}'. Try PUBSUB HELP."))
        }
        _ => Reply::err(format!("ERR unknown subcommand '{sub}'. Try PUBSUB HELP.")),
    }
}
