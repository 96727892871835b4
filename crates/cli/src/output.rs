//! The one path by which every command writes its output, so that
//! a failed write is reported the same way everywhere: a full device (`> /dev/full`), a
//! file-size limit or an I/O error is an [`OutputError`], which `main` prints as one line
//! (`pmkv: writing output: ...`, exit 2); a closed pipe (`pmkv dump POOL | head -1`) is
//! an `OutputError` too, which `main` ends quietly with, as Unix tools do.
//!
//! Lines go to the standard output's own line buffer ([`line`]), so that a line a
//! long-running command prints (`serve`'s address) is out at once; records go through a
//! larger buffer ([`Records`]) whose every write and final flush are checked. Rust
//! ignores SIGPIPE, so a closed pipe is an `EPIPE` write error here, never a signal.

use std::io::{BufWriter, StdoutLock, Write};

/// A write to the standard output that failed.
#[derive(Debug)]
pub struct OutputError(pub std::io::Error);

impl OutputError {
    /// The reader went away (EPIPE): not worth a message.
    pub fn is_closed_pipe(&self) -> bool {
        self.0.kind() == std::io::ErrorKind::BrokenPipe
    }
}

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "writing output: {}", self.0)
    }
}

impl std::error::Error for OutputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl From<std::io::Error> for OutputError {
    fn from(e: std::io::Error) -> Self {
        OutputError(e)
    }
}

/// Write one line (`outln!`).
pub fn line(args: std::fmt::Arguments<'_>) -> Result<(), OutputError> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// Flush what the standard output still buffers.
pub fn flush() -> Result<(), OutputError> {
    Ok(std::io::stdout().lock().flush()?)
}

/// Many lines (a scan's records) through a 64 KiB buffer.
pub struct Records(BufWriter<StdoutLock<'static>>);

impl Records {
    pub fn new() -> Records {
        Records(BufWriter::with_capacity(64 << 10, std::io::stdout().lock()))
    }

    /// Write one line of `parts` (written one after the other).
    pub fn line(&mut self, parts: &[&[u8]]) -> Result<(), OutputError> {
        for p in parts {
            self.0.write_all(p)?;
        }
        Ok(self.0.write_all(b"\n")?)
    }

    /// Flush the buffer: the last records' write error, if any, is reported here.
    pub fn finish(mut self) -> Result<(), OutputError> {
        self.0.flush()?;
        Ok(self.0.get_mut().flush()?)
    }
}
