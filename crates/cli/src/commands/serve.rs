//! `pmkv serve POOL`: the Redis-protocol server (crates/server) on a pool, created if
//! missing. Prints `listening on ADDR:PORT` once it accepts connections; SIGINT, SIGTERM or
//! SHUTDOWN close the pool cleanly.

use super::kv::{NewPoolArgs, OpenArgs};
use super::size::parse_size;
use super::CmdResult;
use crate::Outcome;
use pmkv::{Registry, Store};
use std::path::PathBuf;

/// The command pmkv adds to Redis's, in `pmkv serve --help` (its design:
/// docs/design/front-ends.md, "PMKV.RANGE").
const RANGE_HELP: &str = "\
Besides Redis's commands, the server answers

  PMKV.RANGE start end [count] [REV]

with the records of a key range as a flat array key1 value1 key2 value2 ...,
in key order (REV: the same records, highest key first), at most count of them
(default: all, up to the client's output-buffer hard limit, past which the
connection is closed). The ends are written as in ZRANGEBYLEX:
  -       the open low end (as end: nothing)
  +       the open high end (as start: nothing)
  [key    key included
  (key    key excluded
  key     included as start, excluded as end: PMKV.RANGE a b is [a, b),
          the half-open range every pmkv front end means by two keys
A key that is - or +, or starts with [ or (, is written with a bracket: [-  [[x.
An end before its start gives an empty array. Page with: PMKV.RANGE (last-key + 100";

#[derive(clap::Args)]
#[command(after_help = supported())]
pub struct Args {
    pub pool: PathBuf,
    /// Engine for a new pool (an existing pool's engine is read from its header).
    #[arg(long, default_value = "hart")]
    pub engine: String,
    /// Address or host name to listen on (a name: every address it resolves to): loopback by
    /// default; any other needs a password (or --unprotected).
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// Port (0: any free port, printed).
    #[arg(long, default_value_t = 6379)]
    pub port: u16,
    /// Require AUTH with this password (an empty one is no password).
    #[arg(long, conflicts_with = "requirepass_file")]
    pub requirepass: Option<String>,
    /// Require AUTH with the password in this file (first line).
    #[arg(long)]
    pub requirepass_file: Option<PathBuf>,
    /// Most clients connected at once.
    #[arg(long, default_value_t = 1000)]
    pub maxclients: usize,
    /// Longest bulk string a client may send, e.g. 16mb (Redis's proto-max-bulk-len;
    /// default: the largest value, 16 MiB).
    #[arg(long, value_parser = parse_size)]
    pub proto_max_bulk_len: Option<usize>,
    /// Most input a client may have pending that is not yet a whole request; past it the
    /// client is disconnected (default 64 MiB).
    #[arg(long, value_parser = parse_size)]
    pub client_query_buffer_limit: Option<usize>,
    /// "HARD SOFT SECONDS": a reply that would leave more than HARD bytes pending, or
    /// pending output over SOFT bytes for SECONDS, disconnects the client (default
    /// "64mb 32mb 60"; SOFT 0: none).
    #[arg(long, value_parser = parse_output_limit)]
    pub client_output_buffer_limit: Option<pmkv_server::OutputLimits>,
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
    /// Serve as a Redis Cluster node: slots, MOVED/ASK redirects, CLUSTER commands; the
    /// topology comes from `pmkv cluster` (docs/design/cluster.md). A cluster pool keeps
    /// its keys after their slot: it is served with --cluster only, and a pool that
    /// already holds plain records is refused.
    #[arg(long)]
    pub cluster: bool,
    #[command(flatten)]
    pub size: NewPoolArgs,
    #[command(flatten)]
    pub open: OpenArgs,
}

/// The commands served, from the server's own table (so the list cannot drift).
fn supported() -> String {
    format!(
        "Commands served (anything else is refused before anything is applied; keys beginning \
         with \\xffpmkv\\x00 are reserved):\n{}\n{RANGE_HELP}",
        pmkv_server::table::help()
    )
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
    if password.as_deref() == Some("") {
        errln!("pmkv serve: the password is empty, which protects nothing: serving as without a password");
    }
    if a.threads == Some(0) {
        return Err("--threads must be at least 1".into());
    }
    let mut limits = pmkv_server::resp::Limits::default();
    if let Some(n) = a.proto_max_bulk_len {
        limits.max_bulk = n;
    }
    if let Some(n) = a.client_query_buffer_limit {
        limits.max_query = n;
    }
    if limits.max_bulk < 1024 || limits.max_query < limits.max_bulk {
        return Err(format!(
            "--proto-max-bulk-len ({}) must be at least 1kb and at most --client-query-buffer-limit ({})",
            limits.max_bulk, limits.max_query
        )
        .into());
    }
    let opts = a.open.options()?;
    let store = if a.pool.exists() {
        a.open.waiting(|| Store::open_existing(&a.pool, &opts))?
    } else {
        let f = Registry::builtin().get(&a.engine)?;
        Store::open_with(f, &a.pool, &a.size.apply(opts.clone().create(true)))?
    };
    // What acknowledged writes survive, said once at start-up (INFO's Persistence section
    // says it too), and the warning if the mode promises more than the medium gives.
    let d = store.durability();
    errln!(
        "pmkv serve: {}: mode {} on {}: acknowledged writes survive: {}",
        a.pool.display(),
        d.label(),
        d.medium,
        d.summary()
    );
    let mode_name = d.mode.name();
    // The server waits for the log before sending replies (its `flush`), once per pass
    // over a connection's pipeline, instead of once per write.
    store.defer_acknowledgements();
    if let Some(w) = d.warning() {
        errln!("pmkv serve: warning: {w}");
    }
    let cfg = pmkv_server::Config {
        bind: a.bind.clone(),
        port: a.port,
        password,
        max_clients: a.maxclients.max(1),
        idle_timeout: std::time::Duration::from_secs(a.timeout),
        unprotected: a.unprotected,
        threads: a.threads.unwrap_or(0),
        cluster: a.cluster,
        limits,
        output: a.client_output_buffer_limit.unwrap_or_default(),
        // Redis's defaults for the rest (the pubsub output-buffer limit).
        ..pmkv_server::Config::default()
    };
    let server = pmkv_server::Server::bind(store, mode_name, cfg).map_err(|e| format!("{}:{}: {e}", a.bind, a.port))?;
    let addrs = server.addrs();
    if addrs.len() != 1 || addrs[0].ip().to_string() != a.bind {
        let list: Vec<String> = addrs.iter().map(|s| s.to_string()).collect();
        errln!("pmkv serve: {} is served on {}", a.bind, list.join(", "));
    }
    outln!("listening on {}:{}", a.bind, server.port())?;
    crate::output::flush()?;
    server.run(true)?;
    Ok(Outcome::Ok)
}

/// `HARD SOFT SECONDS`, as Redis's `client-output-buffer-limit normal ...` takes them.
fn parse_output_limit(s: &str) -> Result<pmkv_server::OutputLimits, String> {
    let w: Vec<&str> = s.split_whitespace().collect();
    let [hard, soft, secs] = w[..] else {
        return Err(format!("{s:?}: want \"HARD SOFT SECONDS\", e.g. \"64mb 32mb 60\""));
    };
    let secs: u64 = secs.parse().map_err(|_| format!("{secs:?} is not a number of seconds"))?;
    let o = pmkv_server::OutputLimits {
        hard: parse_size(hard)?,
        soft: parse_size(soft)?,
        soft_time: std::time::Duration::from_secs(secs),
    };
    if o.hard < 1024 {
        return Err("the hard limit must be at least 1kb".into());
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_limits_parse_as_redis_writes_them() {
        let o = parse_output_limit("64mb 32mb 60").unwrap();
        assert_eq!((o.hard, o.soft, o.soft_time.as_secs()), (64 << 20, 32 << 20, 60));
        assert!(parse_output_limit("64mb 32mb").is_err() && parse_output_limit("1 0 0").is_err());
    }
}
