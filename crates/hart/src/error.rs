//! HART's errors: the engine kit's shared error ([`pmkv_core::EngineError`]), as every
//! tree engine's. A hash key length out of range is `Invalid`.

pub use pmkv_core::{EngineError as Error, EngineResult as Result};
