//! One module per subcommand.

pub mod bench;
pub mod bench_alloc;
pub mod check;
pub mod info;
pub mod kv;

/// Errors of commands: anything printable as one line.
pub type CmdResult = Result<crate::Outcome, Box<dyn std::error::Error>>;
