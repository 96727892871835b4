//! `mangosteen-kv POOL [PORT]`: the small key-value application `pmkv_mangosteen::KvApp`
//! served in RPC mode on 127.0.0.1 (port 0 = any free one). Creates the pool if needed,
//! recovers it otherwise, prints `listening PORT` once it accepts connections.

use pmkv_mangosteen::{Frontend, KvApp, Mangosteen, Options};
use pmkv_substrate::{Mode, Pool, PoolError, PoolOptions};
use std::io::Write;
use std::sync::Arc;

fn main() {
    if let Err(e) = run() {
        eprintln!("mangosteen-kv: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: mangosteen-kv POOL [PORT]")?;
    let port: u16 = args.next().map(|p| p.parse()).transpose()?.unwrap_or(0);
    let po = PoolOptions::default().mode(Mode::Adr).initial_size(8 << 20);
    let pool = match Pool::open(&path, Some("mangosteen"), &po) {
        Err(PoolError::NotFound { .. }) => Pool::create(&path, "mangosteen", &po)?,
        r => r?,
    };
    let opts = Options { region_size: 1 << 20, background: true, ..Options::default() };
    let m = Mangosteen::open(Arc::new(pool), opts)?;
    let listener = std::net::TcpListener::bind(("127.0.0.1", port))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening {}", listener.local_addr()?.port())?;
    out.flush()?;
    drop(out);
    pmkv_mangosteen::serve(listener, Arc::new(Frontend::new(KvApp, m)))?;
    Ok(())
}
