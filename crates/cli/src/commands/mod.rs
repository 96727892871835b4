//! One module per subcommand.

#[cfg(feature = "bench")]
pub mod bench;
pub mod check;
pub mod cluster;
pub mod create;
pub mod engines;
pub mod info;
pub mod kv;
pub mod salvage;
pub mod serve;
mod size;

/// Errors of commands: anything printable as one line.
pub type CmdResult = Result<crate::Outcome, Box<dyn std::error::Error>>;
