//! `pmkv`: the command line (SPEC U2). Each subcommand lives in `commands/`; this file only
//! parses arguments and maps errors to exit codes: 0 success, 1 "not found" answers
//! (`get` of a missing key), 2 errors, printed as one line on stderr — never a panic.

mod commands;

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
    /// Benchmarks.
    Bench(commands::bench::Args),
}

/// What a command reports besides success.
pub enum Outcome {
    Ok,
    /// A well-formed question whose answer is "no" (exit 1).
    NotFound,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Info(a) => commands::info::run(a),
        Cmd::Bench(a) => commands::bench::run(a),
    };
    match r {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::NotFound) => ExitCode::from(1),
        Err(e) => {
            eprintln!("pmkv: {e}");
            ExitCode::from(2)
        }
    }
}
