//! `pmkv`: the command line (SPEC U2). Each subcommand lives in `commands/`; this file only
//! parses arguments and maps errors to exit codes: 0 success, 1 "not found" answers
//! (`get` of a missing key), 2 errors, printed as one line on stderr — never a panic.

/// `println!` through the one output path ([`output::line`]): returns an
/// [`output::OutputError`] instead of panicking when stdout is a closed pipe
/// (`pmkv check POOL | head -1`) or a full device (`> /dev/full`).
macro_rules! outln {
    ($($t:tt)*) => {
        $crate::output::line(format_args!($($t)*))
    };
}

/// `eprintln!` that never panics: a diagnostic that cannot be written (`2>/dev/full`) is
/// dropped, the exit status still says what happened.
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($t)*);
    }};
}

mod commands;
mod output;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "pmkv", version, about = "pmkv: persistent-memory key-value toolkit")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Show a pool's header: layout, size, mode-independent state, clean-shutdown flag.
    Info(commands::info::Args),
    /// Benchmarks (built with `--features bench`).
    #[cfg(feature = "bench")]
    Bench(commands::bench::Args),
    /// Benchmarks: not in this build (rebuild with `--features bench`).
    #[cfg(not(feature = "bench"))]
    #[command(disable_help_flag = true)]
    Bench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
    /// Check a pool: the allocator (EPallocator) and, for an engine's pool, the engine's
    /// invariants (HART: every leaf reachable once, bits consistent, no leak).
    Check(commands::check::Args),
    /// Create a new, empty pool (refused if the file exists).
    Create(commands::create::Args),
    /// List the engines of this build, what each offers, and its `--param`s.
    Engines(commands::engines::Args),
    /// Load keys from a file (one per line; value = line number), creating the pool.
    Load(commands::kv::LoadArgs),
    /// Print the value of a key (exit 1 if missing).
    Get(commands::kv::KeyArgs),
    /// Insert or replace a key.
    Put(commands::kv::PutArgs),
    /// Delete a key (exit 1 if missing).
    Del(commands::kv::KeyArgs),
    /// Print records in key order as key<TAB>value: --from A --before B is [A, B), B
    /// excluded as in every pmkv range; --through B includes B.
    Scan(commands::kv::ScanArgs),
    /// Print every record in key order as key<TAB>value (bytes escaped as \xNN).
    Dump(commands::kv::DumpArgs),
    /// Copy every intact record of a damaged pool (one every other command refuses) into
    /// a new pool; the damaged file is only read.
    Salvage(commands::salvage::Args),
    /// Serve a pool over the Redis protocol (RESP2/RESP3) to redis-cli, redis-benchmark and
    /// Redis client libraries: strings, hashes, expiry, transactions, Lua scripts (the
    /// full list: `pmkv serve --help`); every write is durable before its reply.
    Serve(commands::serve::Args),
    /// Drive a cluster of `pmkv serve --cluster` nodes, as `redis-cli --cluster` does:
    /// create, add-node, reshard, rebalance, check, fix.
    Cluster(commands::cluster::Args),
}

/// What a command reports besides success.
pub enum Outcome {
    Ok,
    /// A well-formed question whose answer is "no" (exit 1).
    NotFound,
}

fn main() -> ExitCode {
    // A file-size limit (`ulimit -f`) must be an error a command reports, not SIGXFSZ
    // killing it mid-write: with the signal ignored, growing the file fails with EFBIG.
    // SAFETY: setting a signal's disposition to SIG_IGN at start-up, before any thread.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Info(a) => commands::info::run(a),
        #[cfg(feature = "bench")]
        Cmd::Bench(a) => commands::bench::run(a),
        #[cfg(not(feature = "bench"))]
        Cmd::Bench { .. } => Err("this pmkv was built without benchmarks: rebuild with \
                                  `cargo build --release -p pmkv-cli --features bench`"
            .into()),
        Cmd::Check(a) => commands::check::run(a),
        Cmd::Create(a) => commands::create::run(a),
        Cmd::Engines(a) => commands::engines::run(a),
        Cmd::Load(a) => commands::kv::load(a),
        Cmd::Get(a) => commands::kv::get(a),
        Cmd::Put(a) => commands::kv::put(a),
        Cmd::Del(a) => commands::kv::del(a),
        Cmd::Scan(a) => commands::kv::scan(a),
        Cmd::Dump(a) => commands::kv::dump(a),
        Cmd::Salvage(a) => commands::salvage::run(a),
        Cmd::Serve(a) => commands::serve::run(a),
        Cmd::Cluster(a) => commands::cluster::run(a),
    };
    // Output still buffered must reach its destination too (or fail like the rest).
    let r = r.and_then(|o| {
        output::flush()?;
        Ok(o)
    });
    match r {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::NotFound) => ExitCode::from(1),
        // The reader went away (`| head`): what it wanted it has; end quietly, as cat does.
        Err(e) if e.downcast_ref::<output::OutputError>().is_some_and(output::OutputError::is_closed_pipe) => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("pmkv: {e}");
            ExitCode::from(2)
        }
    }
}
