//! The server's SET path under a simulated power loss: `pmkv serve`'s store (mode `wal`,
//! sync `always`, acknowledgements deferred to the reply path as `serve` does) on a disk
//! file, SETs sent one at a time and then pipelined, each reply counted as an
//! acknowledgement. At every `fdatasync` of the run (the pool's and its log's), the files a
//! power cut leaves (unsynced writes dropped, kept, or torn at 512-byte sectors: the
//! substrate's `PowerLog`) must recover to a prefix of the SETs that holds every
//! acknowledged one, with the server's records loading.

mod common;

use common::Client;
use pmkv::{Mode, Options, Store, SyncPolicy};
use pmkv_server::keyspace::{Keyspace, Tx};
use pmkv_server::{Config, Server};

fn key(i: u64) -> Vec<u8> {
    format!("key:{i:04}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("value {i}, long enough to need a record of its own").into_bytes()
}

/// The SETs of a recovered pool: how many of `n` there are (a prefix), or why not.
fn prefix(s: &Store, n: u64) -> Result<u64, String> {
    let ks = Keyspace::load(s, false).map_err(|e| format!("the server's records do not load: {e}"))?;
    let mut tx = Tx::new(s, &ks);
    let mut len = 0;
    for i in 0..n {
        let got = tx.get(&key(i)).map_err(|r| format!("GET {i}: {r:?}"))?;
        match got {
            Some(v) if v == value(i) && len == i => len += 1,
            None if len <= i => {}
            other => return Err(format!("key {i}: {other:?} (a prefix of {len} so far)")),
        }
    }
    Ok(len)
}

fn run(engine: &str) {
    let Some(dir) = pmkv_testutil::disk_dir(std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))) else {
        eprintln!("no disk file system to write to here: not checked");
        return;
    };
    let path = dir.path().join("s.pool");
    let log = dir.path().join("s.pool.wal");
    let opts = Options::default().mode(Mode::Wal).sync(SyncPolicy::Always).initial_size(1 << 20);
    let store = Store::open(&path, engine, &opts).unwrap();
    store.defer_acknowledgements();
    let pool = store.engine().pool().unwrap().clone();
    pool.sync_log().unwrap();
    let rec = pool.record_power().unwrap();
    let base = (std::fs::read(&path).unwrap(), std::fs::read(&log).unwrap());
    let srv = Server::bind(store, "wal", Config { port: 0, ..Config::default() }).unwrap();
    let (port, stop) = (srv.port(), srv.stopper());
    let h = std::thread::spawn(move || srv.run(false));
    let mut c = Client::new(port);
    // One at a time: each reply acknowledges its SET.
    let single = 24;
    for i in 0..single {
        assert_eq!(c.try_cmd(&[b"SET", &key(i), &value(i)]).unwrap(), "+OK");
        rec.mark(i + 1);
    }
    // Pipelined by 8: a reply acknowledges its SET and every earlier one.
    let n = single + 3 * 8;
    for first in (single..n).step_by(8) {
        for i in first..first + 8 {
            c.send(&[b"SET", &key(i), &value(i)]);
        }
        for i in first..first + 8 {
            assert_eq!(c.reply(), "+OK");
            rec.mark(i + 1);
        }
    }
    drop(c);
    stop();
    h.join().unwrap().unwrap();
    drop(pool);
    let points = rec.sync_points();
    assert!(points.len() as u64 > single, "{engine}: {} sync points for {n} acknowledged SETs", points.len());
    let scratch = tempfile::tempdir_in(dir.path()).unwrap();
    let (p2, l2) = (scratch.path().join("s.pool"), scratch.path().join("s.pool.wal"));
    let images = rec.each_image(&base.0, &base.1, |cut, acked, p, l| {
        std::fs::write(&p2, &p).unwrap();
        std::fs::write(&l2, &l).unwrap();
        let what = format!("{engine}: {cut}");
        let s = Store::open(&p2, engine, &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
        let len = prefix(&s, n).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(len >= acked, "{what}: a prefix of {len} SETs, {acked} acknowledged");
        s.check().unwrap_or_else(|e| panic!("{what}: check: {e}"));
    });
    // The last image is the closed pool: everything.
    assert_eq!(rec.marks_before(*points.last().unwrap()).into_iter().max(), Some(n));
    eprintln!("{engine}: {images} power-loss images recovered, {n} SETs acknowledged");
}

#[test]
fn hart_server_keeps_every_acknowledged_set_across_a_power_loss() {
    run("hart");
}

#[test]
fn nbtree_server_keeps_every_acknowledged_set_across_a_power_loss() {
    run("nbtree");
}
