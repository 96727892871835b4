//! One module per subcommand.

pub mod bench;
pub mod info;

/// Errors of commands: anything printable as one line.
pub type CmdResult = Result<crate::Outcome, Box<dyn std::error::Error>>;
