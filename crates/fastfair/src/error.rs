//! Errors of FAST&FAIR: the engine kit's shared error ([`pmkv_core::EngineError`]), as
//! every tree engine's.

pub use pmkv_core::{EngineError as Error, EngineResult as Result};

/// A `Corrupt` error saying `what`.
pub(crate) fn corrupt(what: impl Into<String>) -> Error {
    Error::Corrupt(what.into())
}
