//! The native half of the `pmkv` Python package (SPEC U4): a thin layer over the `pmkv`
//! API crate. `python/pmkv/__init__.py` builds the `MutableMapping` on top of it.
//!
//! Every call into an engine releases the GIL (`allow_threads`), so Python threads run in
//! parallel; so does every wait for the store's lock (no blocking wait happens with the
//! GIL held, which is what lets `close()` in one thread wait for calls in others without a
//! deadlock); every error is a `pmkv.Error` subclass chosen by the stable `ErrorKind`; a
//! closed store raises instead of crashing; no Rust panic crosses into Python (pyo3 turns
//! one into `PanicException`, and the API crate already contains engine panics).

use pmkv::{Direction, ErrorKind, KeyRange, Options, Store as RStore, WriteBatch};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyFileExistsError, PyFileNotFoundError, PyPermissionError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyDict, PyType};

use std::ops::Bound as Edge;
use std::sync::RwLock;

create_exception!(_pmkv, Error, PyException, "Base class of every pmkv error.");
create_exception!(
    _pmkv,
    CorruptError,
    Error,
    "The pool is damaged, foreign, of another engine or of an unknown format version."
);
create_exception!(_pmkv, LockedError, Error, "The pool is open in another process (or elsewhere in this one).");
create_exception!(_pmkv, FullError, Error, "The pool (or the file system under it) is full.");
create_exception!(_pmkv, TooLargeError, Error, "A key or value exceeds the engine's limit.");
create_exception!(_pmkv, ClosedError, Error, "Use of a store after close().");
create_exception!(
    _pmkv,
    WrongEngineError,
    Error,
    "The pool holds another engine than the one asked for (an existing pool's engine is read from its header: pass engine=None)."
);

/// `NotFoundError`, `ExistsError` and `ReadOnlyError`: `pmkv.Error`s that are also
/// Python's `FileNotFoundError`, `FileExistsError` and `PermissionError` (a write to a
/// read-only store, or a pool file the process may not write), so that `except
/// FileNotFoundError` works as for any file API. Two bases, so made with `type()` at import (`create_exception!` takes
/// one).
static NOT_FOUND: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static EXISTS: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static READ_ONLY: GILOnceCell<Py<PyType>> = GILOnceCell::new();

fn two_based(py: Python<'_>, name: &str, os_base: Bound<'_, PyType>, doc: &str) -> PyResult<Py<PyType>> {
    let ns = PyDict::new(py);
    ns.set_item("__module__", "pmkv")?;
    ns.set_item("__doc__", doc)?;
    let t = py.get_type::<PyType>().call1((name, (py.get_type::<Error>(), os_base), ns))?;
    Ok(t.downcast_into::<PyType>()?.unbind())
}

/// An error of the class in `cell` (made at import), or a plain `pmkv.Error`.
fn raise_from(cell: &'static GILOnceCell<Py<PyType>>, msg: String) -> PyErr {
    Python::with_gil(|py| match cell.get(py) {
        Some(t) => PyErr::from_type(t.bind(py).clone(), msg),
        None => Error::new_err(msg),
    })
}

fn to_py(e: pmkv::Error) -> PyErr {
    let msg = e.to_string();
    match e.kind() {
        ErrorKind::Corrupt | ErrorKind::NotAPool | ErrorKind::Version => CorruptError::new_err(msg),
        ErrorKind::WrongEngine => WrongEngineError::new_err(msg),
        ErrorKind::NotFound => raise_from(&NOT_FOUND, msg),
        ErrorKind::AlreadyExists => raise_from(&EXISTS, msg),
        ErrorKind::Locked => LockedError::new_err(msg),
        ErrorKind::Full => FullError::new_err(msg),
        ErrorKind::KeyTooLarge | ErrorKind::ValueTooLarge => TooLargeError::new_err(msg),
        ErrorKind::ReadOnly => raise_from(&READ_ONLY, msg),
        _ => Error::new_err(format!("{msg} [{}]", e.kind().name())),
    }
}

/// An open store (see `pmkv.open`).
#[pyclass(module = "pmkv._pmkv", frozen)]
struct Store {
    inner: RwLock<Option<RStore>>,
}

impl Store {
    /// Run `f` on the open store with the GIL released — the wait for the store's lock
    /// included. A thread that waited for the lock while holding the GIL would deadlock
    /// with `close()` in another thread: `close` waits (GIL released) for this lock's
    /// readers to finish, and a reader leaving `allow_threads` waits for the GIL.
    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&RStore) -> pmkv::Result<R> + Send) -> PyResult<R> {
        py.allow_threads(|| {
            let g = self.inner.read().map_err(|_| Failure::Poisoned)?;
            let s = g.as_ref().ok_or(Failure::Closed)?;
            f(s).map_err(Failure::Pmkv)
        })
        .map_err(Failure::into_py)
    }
}

/// Why a call failed, built without the GIL (a `PyErr` is made only once it is held).
enum Failure {
    Closed,
    Poisoned,
    Pmkv(pmkv::Error),
}

impl Failure {
    fn into_py(self) -> PyErr {
        match self {
            Failure::Closed => ClosedError::new_err("the store is closed"),
            Failure::Poisoned => Error::new_err("store lock poisoned (a call panicked)"),
            Failure::Pmkv(e) => to_py(e),
        }
    }
}

#[pymethods]
impl Store {
    /// The value of `key` as bytes, or None.
    fn get<'py>(&self, py: Python<'py>, key: &[u8]) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let v = self.with(py, |s| s.get(key))?;
        Ok(v.map(|v| PyBytes::new(py, &v)))
    }

    /// Insert or replace; durable when it returns (in the store's mode).
    fn put(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<()> {
        self.with(py, |s| s.put(key, value))
    }

    /// Delete `key`; returns whether it was there.
    fn delete(&self, py: Python<'_>, key: &[u8]) -> PyResult<bool> {
        self.with(py, |s| s.delete(key))
    }

    /// Apply `ops` — `(key, value)` to put, `(key, None)` to delete, in order — as one
    /// atomic batch (`pmkv::WriteBatch::new`): after a crash, all of them or none. Refused
    /// before anything is written on an engine without atomic batches (the papers'
    /// competitors), whose `write_batch` would keep a prefix.
    fn write_batch(&self, py: Python<'_>, ops: Vec<(Vec<u8>, Option<Vec<u8>>)>) -> PyResult<()> {
        let mut batch = WriteBatch::new();
        for (k, v) in ops {
            match v {
                Some(v) => batch.put(k, v),
                None => batch.delete(k),
            };
        }
        self.with(py, |s| {
            if !s.info().atomic_batches {
                return Err(pmkv::Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "engine {} has no atomic batches (a crash may keep a prefix): write one key at a time",
                        s.info().name
                    ),
                ));
            }
            s.write(&batch)
        })
    }

    /// Number of records.
    fn len(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |s| s.len())
    }

    /// Up to `limit` records of [start, end) in key order (or reverse), as (key, value)
    /// pairs. `start_open`: start is exclusive (to continue after a key). None = unbounded.
    #[pyo3(signature = (start, end, limit, reverse=false, start_open=false))]
    fn range<'py>(
        &self,
        py: Python<'py>,
        start: Option<Vec<u8>>,
        end: Option<Vec<u8>>,
        limit: usize,
        reverse: bool,
        start_open: bool,
    ) -> PyResult<Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        let lo = match start {
            None => Edge::Unbounded,
            Some(k) if start_open => Edge::Excluded(k),
            Some(k) => Edge::Included(k),
        };
        let hi = match end {
            None => Edge::Unbounded,
            Some(k) => Edge::Excluded(k),
        };
        let dir = if reverse { Direction::Reverse } else { Direction::Forward };
        let recs = self.with(py, |s| s.collect(&KeyRange { start: lo, end: hi }, dir, limit))?;
        Ok(recs.into_iter().map(|(k, v)| (PyBytes::new(py, &k), PyBytes::new(py, &v))).collect())
    }

    /// Check the store's invariants: a report string, or CorruptError.
    fn check(&self, py: Python<'_>) -> PyResult<String> {
        let r = self.with(py, |s| s.check())?;
        if r.is_ok() {
            Ok(r.to_string())
        } else {
            Err(CorruptError::new_err(r.to_string()))
        }
    }

    /// Make every write durable (matters in `msync` mode).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |s| s.sync())
    }

    /// What acknowledged writes survive: (medium, mode, [(event, survives)], warning,
    /// sync), survives being "yes", "no", "if-eadr", "all-but-last-second" or "prefix";
    /// warning None unless the mode promises more than the medium gives; sync mode wal's
    /// policy, None in other modes. `pmkv.Store.durability` makes it a named tuple.
    #[allow(clippy::type_complexity)]
    fn durability(
        &self,
        py: Python<'_>,
    ) -> PyResult<(
        &'static str,
        &'static str,
        Vec<(&'static str, &'static str)>,
        Option<&'static str>,
        Option<&'static str>,
    )> {
        let d = self.with(py, |s| Ok(s.durability()))?;
        let table = d.table().iter().map(|(e, v)| (e.name(), v.name())).collect();
        Ok((d.medium.name(), d.mode.name(), table, d.warning(), d.sync.map(|p| p.name())))
    }

    /// The engine's name.
    fn engine(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |s| Ok(s.info().name.to_string()))
    }

    /// Close (a second close does nothing). Pending writes are made durable; errors the
    /// close meets are raised.
    ///
    /// Calls running in other threads finish first (each holds the store's lock for one
    /// call, one chunk of a scan); the wait for them, and the close itself, run with the
    /// GIL released, so those threads can return. Later calls raise `ClosedError`.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.allow_threads(|| {
            let s = self.inner.write().map_err(|_| Failure::Poisoned)?.take();
            match s {
                Some(s) => s.close().map_err(Failure::Pmkv),
                None => Ok(()),
            }
        })
        .map_err(Failure::into_py)
    }

    /// Whether the store is open (waits, GIL released, for a `close` under way).
    #[getter]
    fn is_open(&self, py: Python<'_>) -> bool {
        py.allow_threads(|| self.inner.read().map(|g| g.is_some()).unwrap_or(false))
    }
}

/// Open a store (see `pmkv.open`, which documents the arguments).
#[pyfunction]
#[pyo3(signature = (path, engine=None, mode=None, create=true, read_only=false, initial_size=None, max_size=None, sync=None))]
#[allow(clippy::too_many_arguments)]
fn open_store(
    py: Python<'_>,
    path: std::path::PathBuf,
    engine: Option<String>,
    mode: Option<String>,
    create: bool,
    read_only: bool,
    initial_size: Option<u64>,
    max_size: Option<u64>,
    sync: Option<String>,
) -> PyResult<Store> {
    let value_error = |e: String| pyo3::exceptions::PyValueError::new_err(e);
    // No mode given: mode wal on a disk file, adr elsewhere, as the CLI (the library's
    // own default stays adr; docs/design/substrate.md, "Defaults").
    let mut o = Options::default().create(create && !read_only).read_only(read_only).wal_on_disk(true);
    if let Some(m) = mode {
        o = o.mode(m.parse().map_err(value_error)?);
    }
    if let Some(p) = sync {
        o = o.sync(p.parse().map_err(value_error)?);
    }
    if let Some(n) = initial_size {
        o = o.initial_size(n);
    }
    if let Some(n) = max_size {
        o = o.max_size(n);
    }
    let s = py
        .allow_threads(|| match engine {
            Some(e) if !path.exists() => RStore::open(&path, &e, &o),
            Some(e) => RStore::open(&path, &e, &o.clone().create(false)),
            None if path.exists() => RStore::open_existing(&path, &o),
            None => RStore::open(&path, "hart", &o),
        })
        .map_err(to_py)?;
    Ok(Store { inner: RwLock::new(Some(s)) })
}

/// The engines of this build.
#[pyfunction]
fn engines() -> Vec<&'static str> {
    pmkv::Registry::builtin().names()
}

#[pymodule]
fn _pmkv(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Store>()?;
    m.add_function(wrap_pyfunction!(open_store, m)?)?;
    m.add_function(wrap_pyfunction!(engines, m)?)?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("CorruptError", py.get_type::<CorruptError>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("FullError", py.get_type::<FullError>())?;
    m.add("TooLargeError", py.get_type::<TooLargeError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("WrongEngineError", py.get_type::<WrongEngineError>())?;
    let nf = NOT_FOUND.get_or_try_init(py, || {
        two_based(py, "NotFoundError", py.get_type::<PyFileNotFoundError>(), "The pool file does not exist.")
    })?;
    m.add("NotFoundError", nf.bind(py))?;
    let ex = EXISTS.get_or_try_init(py, || {
        two_based(py, "ExistsError", py.get_type::<PyFileExistsError>(), "A pool file is already there.")
    })?;
    m.add("ExistsError", ex.bind(py))?;
    let ro = READ_ONLY.get_or_try_init(py, || {
        two_based(
            py,
            "ReadOnlyError",
            py.get_type::<PyPermissionError>(),
            "A write to a store opened read-only, or to a pool file this process may not write.",
        )
    })?;
    m.add("ReadOnlyError", ro.bind(py))?;
    Ok(())
}
