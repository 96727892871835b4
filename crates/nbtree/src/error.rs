//! Errors of NBTree: the engine kit's shared error ([`pmkv_core::EngineError`]), as every
//! tree engine's.

pub use pmkv_core::{EngineError as Error, EngineResult as Result};
