//! Errors as values, with a stable kind.
//!
//! Front ends need two things from an error: a line a person can read, and a cause a
//! program can branch on. The second must not change when the first does, and must cross
//! into C (an `int`) and Python (an exception class), so it is a closed, numbered
//! [`ErrorKind`] rather than the type of whichever layer failed. The layer's own error is
//! kept as the [`std::error::Error::source`] for people who want the chain.

use pmkv_substrate::PoolError;
use std::fmt;

/// Result alias of the engine contract.
pub type Result<T> = std::result::Result<T, Error>;

/// What went wrong, as a program sees it. The numeric [`code`](ErrorKind::code) of each
/// kind is stable: it is part of the C API and never reused. New kinds may be added.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A bad argument or option (an unknown engine parameter, a size out of range, ...).
    InvalidArgument,
    /// The key is longer than the engine allows; nothing was changed.
    KeyTooLarge,
    /// The value is longer than the engine allows; nothing was changed.
    ValueTooLarge,
    /// No engine of that name is registered.
    UnknownEngine,
    /// The pool file does not exist (and `create` was off).
    NotFound,
    /// A pool file is already there (creating one).
    AlreadyExists,
    /// The file is not a pmkv pool at all (foreign file, bad magic).
    NotAPool,
    /// The pool belongs to another engine (its header names another layout).
    WrongEngine,
    /// The pool's format version is not one this build reads.
    Version,
    /// The pool is damaged: a header, an allocator structure or an engine structure failed
    /// verification. Nothing was returned from the damaged part.
    Corrupt,
    /// The pool is open elsewhere (another process or handle holds its lock).
    Locked,
    /// The store was opened read-only, or the file cannot be written.
    ReadOnly,
    /// The pool was not closed cleanly and a read-only open cannot recover it: open it
    /// read-write once.
    NeedsRecovery,
    /// The pool reached its maximum size; nothing was changed.
    Full,
    /// The engine does not offer this operation.
    Unsupported,
    /// An operating-system error (I/O, mapping, locking).
    Io,
    /// An earlier operation panicked inside the engine: the store refuses further work, and
    /// the pool stays marked unclean so that the next open runs recovery.
    Poisoned,
    /// A bug: the engine panicked during this call (the store is now poisoned).
    Internal,
}

impl ErrorKind {
    /// Every kind, in code order.
    pub const ALL: [ErrorKind; 18] = [
        ErrorKind::InvalidArgument,
        ErrorKind::KeyTooLarge,
        ErrorKind::ValueTooLarge,
        ErrorKind::UnknownEngine,
        ErrorKind::NotFound,
        ErrorKind::AlreadyExists,
        ErrorKind::NotAPool,
        ErrorKind::WrongEngine,
        ErrorKind::Version,
        ErrorKind::Corrupt,
        ErrorKind::Locked,
        ErrorKind::ReadOnly,
        ErrorKind::NeedsRecovery,
        ErrorKind::Full,
        ErrorKind::Unsupported,
        ErrorKind::Io,
        ErrorKind::Poisoned,
        ErrorKind::Internal,
    ];

    /// The stable numeric code (C: `PMKV_E_*`, negated there by convention). 0 is never a
    /// kind: it means success in the C API.
    pub fn code(self) -> i32 {
        match self {
            ErrorKind::InvalidArgument => 1,
            ErrorKind::KeyTooLarge => 2,
            ErrorKind::ValueTooLarge => 3,
            ErrorKind::UnknownEngine => 4,
            ErrorKind::NotFound => 5,
            ErrorKind::AlreadyExists => 6,
            ErrorKind::NotAPool => 7,
            ErrorKind::WrongEngine => 8,
            ErrorKind::Version => 9,
            ErrorKind::Corrupt => 10,
            ErrorKind::Locked => 11,
            ErrorKind::ReadOnly => 12,
            ErrorKind::NeedsRecovery => 13,
            ErrorKind::Full => 14,
            ErrorKind::Unsupported => 15,
            ErrorKind::Io => 16,
            ErrorKind::Poisoned => 17,
            ErrorKind::Internal => 18,
        }
    }

    /// The kind of a code, if it is one.
    pub fn from_code(code: i32) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.code() == code)
    }

    /// A stable snake_case name (Python exception mapping, server error prefixes, logs).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::KeyTooLarge => "key_too_large",
            ErrorKind::ValueTooLarge => "value_too_large",
            ErrorKind::UnknownEngine => "unknown_engine",
            ErrorKind::NotFound => "not_found",
            ErrorKind::AlreadyExists => "already_exists",
            ErrorKind::NotAPool => "not_a_pool",
            ErrorKind::WrongEngine => "wrong_engine",
            ErrorKind::Version => "version",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Locked => "locked",
            ErrorKind::ReadOnly => "read_only",
            ErrorKind::NeedsRecovery => "needs_recovery",
            ErrorKind::Full => "full",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Io => "io",
            ErrorKind::Poisoned => "poisoned",
            ErrorKind::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An error: a stable [`kind`](Error::kind), a message for people, and the underlying
/// error of the layer that failed, if any.
///
/// One pointer wide: the contents live in a box, so `Result<()>` is 8 bytes and
/// `Result<bool>` 16, and every call of the API returns its result in registers instead
/// of through memory (with the contents inline, `Result<bool>` was 56 bytes, written and
/// read back on every `get`, `put` and `delete`). Errors are rare; the allocation is paid
/// only when one happens.
pub struct Error(Box<Inner>);

struct Inner {
    kind: ErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    /// An error of `kind` with a message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error(Box::new(Inner { kind, message: message.into(), source: None }))
    }

    /// An error of `kind` whose cause is `source` (its text becomes the message).
    pub fn with_source(kind: ErrorKind, source: impl std::error::Error + Send + Sync + 'static) -> Error {
        Error(Box::new(Inner { kind, message: source.to_string(), source: Some(Box::new(source)) }))
    }

    /// The stable kind.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The kind's stable numeric code.
    pub fn code(&self) -> i32 {
        self.0.kind.code()
    }

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// Shorthand constructors for the kinds engines report most.
    pub fn key_too_large(len: usize, max: usize) -> Error {
        Error::new(ErrorKind::KeyTooLarge, format!("key of {len} bytes is too large (limit {max})"))
    }
    /// See [`Error::key_too_large`].
    pub fn value_too_large(len: usize, max: usize) -> Error {
        Error::new(ErrorKind::ValueTooLarge, format!("value of {len} bytes is too large (limit {max})"))
    }
    /// See [`Error::key_too_large`].
    pub fn corrupt(what: impl Into<String>) -> Error {
        Error::new(ErrorKind::Corrupt, what)
    }
    /// See [`Error::key_too_large`].
    pub fn unsupported(engine: &str, what: &str) -> Error {
        Error::new(ErrorKind::Unsupported, format!("engine '{engine}' does not support {what}"))
    }
    /// See [`Error::key_too_large`].
    pub fn invalid(what: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidArgument, what)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({}: {})", self.0.kind.name(), self.0.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The kind of each way the substrate refuses or fails.
fn pool_kind(e: &PoolError) -> ErrorKind {
    match e {
        PoolError::NotFound { .. } => ErrorKind::NotFound,
        PoolError::AlreadyExists { .. } => ErrorKind::AlreadyExists,
        PoolError::NotAPool { .. } | PoolError::NotARegularFile { .. } => ErrorKind::NotAPool,
        PoolError::Truncated { .. }
        | PoolError::CorruptHeader { .. }
        | PoolError::CorruptAllocator(_)
        | PoolError::CorruptBatchLog(_) => ErrorKind::Corrupt,
        PoolError::Version { .. } | PoolError::AllocatorVersion { .. } => ErrorKind::Version,
        PoolError::WrongLayout { .. } => ErrorKind::WrongEngine,
        PoolError::Locked { .. } => ErrorKind::Locked,
        PoolError::TooSmall { .. } | PoolError::InvalidOption(_) | PoolError::LayoutName(_) => {
            ErrorKind::InvalidArgument
        }
        PoolError::ReadOnly { .. } => ErrorKind::ReadOnly,
        PoolError::NeedsRecovery { .. } => ErrorKind::NeedsRecovery,
        PoolError::Full { .. } => ErrorKind::Full,
        PoolError::Poisoned { .. } | PoolError::BatchUnfinished(_) => ErrorKind::Poisoned,
        PoolError::Allocator(_) => ErrorKind::Unsupported,
        PoolError::Io { source, .. } => match source.kind() {
            std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => ErrorKind::ReadOnly,
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded | std::io::ErrorKind::FileTooLarge => {
                ErrorKind::Full
            }
            _ => ErrorKind::Io,
        },
        // `PoolError` is non-exhaustive: a variant added later is an I/O-class failure
        // until it is given a kind of its own here.
        #[allow(unreachable_patterns)]
        _ => ErrorKind::Io,
    }
}

impl From<PoolError> for Error {
    fn from(e: PoolError) -> Error {
        Error::with_source(pool_kind(&e), e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The API's results fit in registers (see [`Error`]): an error is one pointer.
    #[test]
    fn results_are_register_sized() {
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
        assert_eq!(std::mem::size_of::<Result<()>>(), std::mem::size_of::<usize>());
        assert!(std::mem::size_of::<Result<bool>>() <= 16);
        let e = Error::with_source(ErrorKind::Io, std::io::Error::other("disk on fire"));
        assert_eq!((e.kind(), e.message()), (ErrorKind::Io, "disk on fire"));
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn codes_are_unique_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for k in ErrorKind::ALL {
            assert!(k.code() > 0, "{k}: code 0 means success in C");
            assert!(seen.insert(k.code()), "{k}: code {} reused", k.code());
            assert_eq!(ErrorKind::from_code(k.code()), Some(k));
        }
        assert_eq!(ErrorKind::from_code(0), None);
        assert_eq!(ErrorKind::from_code(999), None);
    }

    #[test]
    fn pool_errors_map_to_kinds_and_keep_their_source() {
        let e: Error = PoolError::Locked { path: "/x".into(), holder: String::new() }.into();
        assert_eq!(e.kind(), ErrorKind::Locked);
        assert!(e.to_string().contains("/x"));
        assert!(std::error::Error::source(&e).is_some());
        let e: Error = PoolError::WrongLayout { path: "/x".into(), found: "a".into(), expected: "b".into() }.into();
        assert_eq!(e.kind(), ErrorKind::WrongEngine);
        let io = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let e: Error = PoolError::Io { context: "open".into(), source: io }.into();
        assert_eq!(e.kind(), ErrorKind::ReadOnly);
    }
}
