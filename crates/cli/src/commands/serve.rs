//! `pmkv serve POOL`: the Redis-protocol server (crates/server) on a pool, created if
//! missing. Prints `listening on ADDR:PORT` once it accepts connections; SIGINT, SIGTERM or
//! SHUTDOWN close the pool cleanly.

use super::kv::OpenArgs;
use super::CmdResult;
use crate::Outcome;
use pmkv::{Registry, Store};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    pub pool: PathBuf,
    /// Engine for a new pool (an existing pool's engine is read from its header).
    #[arg(long, default_value = "hart")]
    pub engine: String,
    /// Address to listen on: loopback by default; any other needs a password (or --unprotected).
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// Port (0: any free port, printed).
    #[arg(long, default_value_t = 6379)]
    pub port: u16,
    /// Require AUTH with this password.
    #[arg(long, conflicts_with = "requirepass_file")]
    pub requirepass: Option<String>,
    /// Require AUTH with the password in this file (first line).
    #[arg(long)]
    pub requirepass_file: Option<PathBuf>,
    /// Most clients connected at once.
    #[arg(long, default_value_t = 1000)]
    pub maxclients: usize,
    /// Close a client idle this many seconds (0: never).
    #[arg(long, default_value_t = 0)]
    pub timeout: u64,
    /// Serve a non-loopback address without a password.
    #[arg(long)]
    pub unprotected: bool,
    /// Worker threads serving connections (default: half the cores, at least one; see
    /// the README's "Server" figures for why not one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Initial size of a new pool, in MiB.
    #[arg(long, default_value_t = 64)]
    pub initial_mib: u64,
    #[command(flatten)]
    pub open: OpenArgs,
}

pub fn run(a: Args) -> CmdResult {
    let password = match (&a.requirepass, &a.requirepass_file) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(f)) => Some(
            std::fs::read_to_string(f)
                .map_err(|e| format!("{}: {e}", f.display()))?
                .lines()
                .next()
                .unwrap_or_default()
                .to_string(),
        ),
        (None, None) => None,
    };
    if a.threads == Some(0) {
        return Err("--threads must be at least 1".into());
    }
    let opts = a.open.options()?;
    let store = if a.pool.exists() {
        a.open.waiting(|| Store::open_existing(&a.pool, &opts))?
    } else {
        let f = Registry::builtin().get(&a.engine)?;
        Store::open_with(f, &a.pool, &opts.clone().create(true).initial_size(a.initial_mib << 20))?
    };
    let cfg = pmkv_server::Config {
        bind: a.bind.clone(),
        port: a.port,
        password,
        max_clients: a.maxclients.max(1),
        idle_timeout: std::time::Duration::from_secs(a.timeout),
        unprotected: a.unprotected,
        threads: a.threads.unwrap_or(0),
        ..Default::default()
    };
    let server =
        pmkv_server::Server::bind(store, a.open.mode.name(), cfg).map_err(|e| format!("{}:{}: {e}", a.bind, a.port))?;
    outln!("listening on {}:{}", a.bind, server.port())?;
    crate::output::flush()?;
    server.run(true)?;
    Ok(Outcome::Ok)
}
