//! The engine registry: which engines a build offers, found by name or by pool layout.
//!
//! The API names no engine anywhere but in [`crate::with_engines!`], the one list of the
//! factories (one cargo feature each) this build may have. Adding an engine is: its crate
//! implements the engine kit's `NativeFactory` (or `EngineFactory`), and one line there. Code outside pmkv (a test engine, a baseline in
//! the benchmark harness) registers its own factory with [`Registry::register`] on a
//! registry of its own.

use pmkv_core::{EngineFactory, Error, ErrorKind, Result};
use pmkv_substrate::Pool;
use std::path::Path;
use std::sync::OnceLock;

/// A set of engine factories.
#[derive(Clone, Default)]
pub struct Registry {
    factories: Vec<&'static dyn EngineFactory>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// The engines compiled into this build.
    pub fn builtin() -> &'static Registry {
        static BUILTIN: OnceLock<Registry> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            let mut r = Registry::new();
            crate::register_builtin(&mut r);
            r
        })
    }

    /// Add a factory (a later one of the same name replaces the earlier).
    pub fn register(&mut self, factory: &'static dyn EngineFactory) -> &mut Self {
        let name = factory.info().name;
        self.factories.retain(|f| f.info().name != name);
        self.factories.push(factory);
        self
    }

    /// The registered engines' names.
    pub fn names(&self) -> Vec<&'static str> {
        self.factories.iter().map(|f| f.info().name).collect()
    }

    /// The factories, in registration order.
    pub fn factories(&self) -> &[&'static dyn EngineFactory] {
        &self.factories
    }

    /// The factory named `name`.
    pub fn get(&self, name: &str) -> Result<&'static dyn EngineFactory> {
        self.factories.iter().copied().find(|f| f.info().name == name).ok_or_else(|| {
            Error::new(
                ErrorKind::UnknownEngine,
                format!("unknown engine '{name}' (available: {})", self.names().join(", ")),
            )
        })
    }

    /// The factory whose pools carry `layout` in their header.
    pub fn for_layout(&self, layout: &str) -> Option<&'static dyn EngineFactory> {
        self.factories.iter().copied().find(|f| f.layout() == Some(layout))
    }

    /// The factory of the existing pool at `path`, read from its header (the file is not
    /// changed, and a pool open elsewhere can still be inspected).
    pub fn for_pool(&self, path: &Path) -> Result<&'static dyn EngineFactory> {
        let info = Pool::inspect(path)?;
        let layout = info.header.layout;
        self.for_layout(&layout).ok_or_else(|| {
            Error::new(
                ErrorKind::UnknownEngine,
                format!(
                    "{}: pool has layout '{layout}', which no engine of this build reads (available: {})",
                    path.display(),
                    self.names().join(", ")
                ),
            )
        })
    }
}
