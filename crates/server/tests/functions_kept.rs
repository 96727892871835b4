//! Function libraries are kept in the pool as Redis keeps them in its RDB/AOF: a library
//! loaded, replaced, deleted, flushed or restored is there after a restart as it was
//! before (FUNCTION LIST and FCALL answer the same), FLUSHALL leaves it (as in Redis), and
//! a pool whose library record is damaged is refused at start with an error naming it
//! rather than served without its functions.

mod common;

use common::{serve, Client};
use pmkv::{Options, Store};

const LIB_A: &str = "#!lua name=liba\nredis.register_function('fa', function(keys, args) return 'a1' end)";
const LIB_A2: &str = "#!lua name=liba\nredis.register_function('fa', function(keys, args) return 'a2' end)";
const LIB_B: &str =
    "#!lua name=libb\nredis.register_function('fb', function(keys, args) return redis.call('GET', keys[1]) end)";

type Served = (Client, Box<dyn Fn()>, std::thread::JoinHandle<pmkv::Result<()>>);

/// A server over the pool in `dir`, and a client of it.
fn up(dir: &std::path::Path) -> Served {
    let (port, stop, h) = serve(dir, false);
    (Client::new(port), Box::new(stop), h)
}

/// Stop the server (after its client).
fn down((c, stop, h): Served) {
    drop(c);
    stop();
    h.join().unwrap().unwrap();
}

#[test]
fn libraries_survive_restarts_as_they_were_changed() {
    let dir = pmkv_testutil::pool_dir();
    let mut s = up(dir.path());
    assert_eq!(s.0.cmd(&["FUNCTION", "LOAD", LIB_A]), "liba");
    assert_eq!(s.0.cmd(&["FUNCTION", "LOAD", LIB_B]), "libb");
    assert_eq!(s.0.cmd(&["SET", "k", "v"]), "+OK");
    assert_eq!(s.0.cmd(&["FLUSHALL"]), "+OK");
    assert_eq!(s.0.cmd(&["SET", "k", "v2"]), "+OK");
    assert_eq!(s.0.cmd(&["DBSIZE"]), ":1", "the libraries' record is not a key");
    assert_eq!(s.0.cmd(&["KEYS", "*"]), "[k]");
    down(s);

    let mut s = up(dir.path());
    assert_eq!(s.0.cmd(&["FCALL", "fa", "0"]), "a1");
    assert_eq!(s.0.cmd(&["FCALL", "fb", "1", "k"]), "v2");
    let list = s.0.cmd(&["FUNCTION", "LIST"]);
    assert!(list.contains("liba") && list.contains("libb"), "{list}");
    // A replaced library is kept in its new form, a deleted one is gone.
    assert_eq!(s.0.cmd(&["FUNCTION", "LOAD", "REPLACE", LIB_A2]), "liba");
    assert_eq!(s.0.cmd(&["FUNCTION", "DELETE", "libb"]), "+OK");
    let dump = s.0.bulk(&[b"FUNCTION", b"DUMP"]).expect("a payload");
    down(s);

    let mut s = up(dir.path());
    assert_eq!(s.0.cmd(&["FCALL", "fa", "0"]), "a2");
    assert!(s.0.cmd(&["FCALL", "fb", "1", "k"]).starts_with("-ERR"), "libb was deleted");
    assert_eq!(s.0.cmd(&["FUNCTION", "FLUSH"]), "+OK");
    down(s);

    let mut s = up(dir.path());
    assert_eq!(s.0.cmd(&["FUNCTION", "LIST"]), "[]");
    // RESTORE is kept too.
    assert_eq!(s.0.try_cmd(&[b"FUNCTION", b"RESTORE", &dump]).unwrap(), "+OK");
    down(s);

    let mut s = up(dir.path());
    assert_eq!(s.0.cmd(&["FCALL", "fa", "0"]), "a2");
    down(s);
}

#[test]
fn a_damaged_library_record_is_refused_at_start() {
    let dir = pmkv_testutil::pool_dir();
    {
        let s = Store::open(dir.path().join("s.pool"), "hart", &Options::default().initial_size(16 << 20)).unwrap();
        s.put(b"\xffpmkv\x00F", b"not a function payload").unwrap();
        s.close().unwrap();
    }
    let store = Store::open(dir.path().join("s.pool"), "hart", &Options::default()).unwrap();
    let cfg = pmkv_server::Config { port: 0, threads: 2, ..pmkv_server::Config::default() };
    let e = match pmkv_server::Server::bind(store, "adr", cfg) {
        Ok(_) => panic!("a server started over a pool whose libraries do not load"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("function libraries"), "{e}");
}
