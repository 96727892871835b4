"""pmkv: a persistent-memory key-value toolkit, as a Python mapping.

    >>> import pmkv
    >>> with pmkv.open("words.pool") as db:      # creates the pool (engine "hart"; mode "wal" on a disk)
    ...     db[b"hello"] = b"world"              # str keys and values are stored as UTF-8
    ...     db["hello"]
    b'world'

A store is a ``collections.abc.MutableMapping`` over bytes, in key order: ``db[k]``,
``db[k] = v``, ``del db[k]``, ``k in db``, ``len(db)``, ``get``, ``pop``, ``setdefault``,
``update``, iteration over keys; ``batch()`` applies several writes as one atomic batch
(``with db.batch() as b: ...``: all of them or, after a crash, none); ``scan(start, end, limit)`` yields the ``(key, value)``
pairs of ``[start, end)`` (``end`` excluded, as in every pmkv front end) in chunks, never
the whole range at once. Every write is durable when it returns (in the pool's
persistence mode). Calls release the GIL, so threads run in parallel.

Several processes may open one pool with ``read_only=True`` at once; a writer excludes
everyone else. ``open(..., wait=SECONDS)`` waits for a pool held elsewhere instead of
raising ``LockedError`` at once.

What "durable" means depends on where the pool is: ``db.durability`` says what
acknowledged writes survive (a process crash, a kernel crash, a power loss, a reboot)
on the medium detected at open, and opening a pool for writing issues a
``DurabilityWarning`` when the mode promises more than the medium gives ("adr" on a
disk file or on tmpfs survives no power loss; on a disk file "wal", the default there,
and "msync" do).

Errors are ``pmkv.Error`` subclasses: ``CorruptError`` (damaged, foreign or
unknown-version pool), ``WrongEngineError`` (the pool holds another engine),
``NotFoundError`` (also a ``FileNotFoundError``), ``ExistsError`` (also a
``FileExistsError``), ``LockedError`` (open elsewhere), ``FullError``, ``TooLargeError``,
``ReadOnlyError`` (also a ``PermissionError``), ``ClosedError`` (use after
``close()``); a missing key is ``KeyError``.
A ``CorruptError`` from a call leaves the pool marked unclean; ``close()`` then raises
that damage again (a ``CorruptError``) rather than closing quietly, and leaving a ``with``
block on an exception raises that exception, with any error of the close as a note.
"""

# Imported under private names: the module's namespace is its API (``__all__``), so
# ``pmkv.os`` or ``from pmkv import *`` brings nothing that is not pmkv's.
from collections.abc import Iterator as _Iterator, MutableMapping as _MutableMapping
import os as _os
import time as _time
from typing import (
    Dict as _Dict,
    List as _List,
    NamedTuple as _NamedTuple,
    Optional as _Optional,
    Tuple as _Tuple,
    Union as _Union,
)
import warnings as _warnings

from . import _pmkv
from ._pmkv import (
    ClosedError,
    CorruptError,
    Error,
    ExistsError,
    FullError,
    LockedError,
    NotFoundError,
    ReadOnlyError,
    TooLargeError,
    WrongEngineError,
)

__all__ = [
    "open",
    "engines",
    "Store",
    "Batch",
    "Durability",
    "DurabilityWarning",
    "Error",
    "CorruptError",
    "WrongEngineError",
    "NotFoundError",
    "ExistsError",
    "LockedError",
    "FullError",
    "TooLargeError",
    "ReadOnlyError",
    "ClosedError",
]

_BytesLike = _Union[bytes, bytearray, memoryview, str]

_CHUNK = 256

# How long `open(..., wait=...)` sleeps between attempts (as `pmkv --wait`); a name of its
# own so that a test can see the wait happen.
_RETRY_EVERY = 0.02
_sleep = _time.sleep


def _b(x: _BytesLike) -> bytes:
    if isinstance(x, str):
        return x.encode("utf-8")
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x)
    raise TypeError(f"pmkv keys and values are bytes or str, not {type(x).__name__}")


def _after_prefix(p: bytes) -> _Optional[bytes]:
    """The least key above every key that begins with ``p`` (``None``: there is none, ``p``
    being all 0xff bytes or empty): trailing 0xff bytes dropped, the last one left + 1."""
    p = p.rstrip(b"\xff")
    return p[:-1] + bytes([p[-1] + 1]) if p else None


class DurabilityWarning(UserWarning):
    """The store's persistence mode promises more than the medium its pool sits on gives
    (see ``Store.durability``). Silence it with ``warnings.filterwarnings("ignore",
    category=pmkv.DurabilityWarning)`` once you have chosen."""


class Durability(_NamedTuple):
    """What a store's acknowledged writes survive. Each event is True (every acknowledged
    write survives it), False (some may be lost), or None: only on eADR hardware (mode
    "eadr" on persistent memory; no interface tells whether a machine has eADR). In mode
    "wal" with sync "everysec" or "no", a power loss or kernel crash is False: ``survives``
    says what is kept (all but about the last second, or a consistent prefix)."""

    medium: str
    """"dax" (persistent memory mapped with MAP_SYNC), "memory" (tmpfs, ramfs), "disk"
    (any other file system) or "anonymous" (an engine without a pool)."""
    mode: str
    process_crash: _Optional[bool]
    kernel_crash: _Optional[bool]
    power_loss: _Optional[bool]
    reboot: _Optional[bool]
    warning: _Optional[str]
    """Why the mode promises more than the medium gives, or None."""
    sync: _Optional[str]
    """Mode "wal"'s sync policy ("always", "everysec", "no"); None in other modes."""
    survives: _Dict[str, str]
    """For each event ("process_crash", "kernel_crash", "power_loss", "reboot"), the
    library's word: "yes", "no", "if-eadr", "all-but-last-second" (sync "everysec") or
    "prefix" (sync "no": a consistent prefix of the writes, of unbounded age)."""


_SURVIVES = {"yes": True, "no": False, "if-eadr": None, "all-but-last-second": False, "prefix": False}


def engines() -> list:
    """The engines of this build ("hart", "volatile", ...)."""
    return list(_pmkv.engines())


def open(  # noqa: A001 - the conventional name (dbm.open, lmdb.open, sqlite3.connect)
    path: _Union[str, "_os.PathLike[str]"],
    engine: _Optional[str] = None,
    mode: _Optional[str] = None,
    create: bool = True,
    read_only: bool = False,
    initial_size: _Optional[int] = None,
    max_size: _Optional[int] = None,
    wait: float = 0,
    sync: _Optional[str] = None,
) -> "Store":
    """Open (or, with ``create``, create) the pool at ``path``.

    ``engine``: for a new pool, which engine ("hart" by default); an existing pool's
    engine is read from its header. ``mode``: "wal" (a redo log, one fdatasync per
    group of writes: survives a power loss on a disk file), "adr" (flush and fence per
    write: survives a power loss on persistent memory, a process crash anywhere), "eadr"
    (fences only, for eADR hardware), "msync" (msync per commit: survives a power loss on
    a disk file too, much slower than "wal") or "none" (no persistence); None (the
    default): "wal" for a pool on a disk file, "adr" elsewhere, as the ``pmkv`` command.
    ``sync``, mode "wal" only, as Redis's appendfsync: "always" (the default: a write
    returns once it is on the device), "everysec" (once written to the kernel, which a
    process crash does not lose; synced every second, so a power loss loses at most about
    the last second) or "no" (synced when the kernel writes back: a power loss keeps a
    consistent prefix of unbounded age). ``read_only``: refuse writes, change nothing; any number
    of processes (and opens) may hold a pool read-only at once, while none holds it for
    writing. A pool that was not closed cleanly needs one read-write open (its crash
    recovery) before it opens read-only. ``initial_size`` (default 64 KiB; the pool grows
    on demand) and ``max_size`` (bytes) bound a new pool's file: a pool that cannot grow
    further raises ``FullError`` and keeps what it has. A read-write open whose mode
    promises more than the pool's medium gives issues a ``DurabilityWarning`` (see
    ``Store.durability``).

    ``wait``: seconds to wait, retrying every 20 ms, while the pool is held where this
    open cannot share it (a writer, or readers when opening to write): ``LockedError``
    only once they have passed (0, the default: at once; ``math.inf``: no limit). As
    ``pmkv --wait``. The wait sleeps with the GIL released and can be interrupted.
    """
    if not wait >= 0:  # also refuses NaN
        raise ValueError(f"wait must be a non-negative number of seconds, not {wait!r}")
    deadline = _time.monotonic() + wait
    while True:
        try:
            native = _pmkv.open_store(_os.fspath(path), engine, mode, create, read_only, initial_size, max_size, sync)
        except LockedError:
            left = deadline - _time.monotonic()
            if left <= 0:
                raise
            _sleep(min(_RETRY_EVERY, left))
            continue
        break
    db = Store(native)
    w = db.durability.warning
    if w is not None and not read_only:
        _warnings.warn(f"{_os.fspath(path)}: {w}", DurabilityWarning, stacklevel=2)
    return db


class Batch:
    """Writes to apply to a store together, as one atomic batch (the Rust API's
    ``WriteBatch``): all of them or, after a crash at any point, none. Collected in memory
    in order (a later write of a key wins) and applied when the ``with`` block ends
    without an exception, or by ``commit()``; an exception in the block, or
    ``discard()``, drops them. Until then reads of the store do not see them. A commit
    that fails (``FullError``, ``TooLargeError``, ...) writes none of them. ``del b[k]``
    of a key the store lacks is no error. Engines without atomic batches (the papers'
    competitors: "woart", "artcow", "fastfair") refuse the commit with ``Error``.

    One batch is committed or discarded once; using it afterwards raises ``Error``."""

    def __init__(self, store: "Store") -> None:
        self._store = store
        self._ops: _List[_Tuple[bytes, _Optional[bytes]]] = []
        self._done = False

    def _open(self) -> None:
        if self._done:
            raise Error("this batch was already committed or discarded")

    def put(self, key: _BytesLike, value: _BytesLike) -> None:
        """Insert or replace ``key`` when the batch is applied."""
        self._open()
        self._ops.append((_b(key), _b(value)))

    def delete(self, key: _BytesLike) -> None:
        """Remove ``key`` (if present) when the batch is applied."""
        self._open()
        self._ops.append((_b(key), None))

    __setitem__ = put
    __delitem__ = delete

    def __len__(self) -> int:
        """The number of writes collected."""
        return len(self._ops)

    def commit(self) -> None:
        """Apply the writes, atomically; durable when it returns."""
        self._open()
        self._done = True
        ops, self._ops = self._ops, []
        if ops:
            self._store._s.write_batch(ops)

    def discard(self) -> None:
        """Drop the writes (nothing is written)."""
        self._open()
        self._done = True
        self._ops = []

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._done:
            return
        if exc is None:
            self.commit()
        else:
            self.discard()


class Store(_MutableMapping):
    """An open pmkv store (see the module documentation)."""

    def __init__(self, native: "_pmkv.Store") -> None:
        self._s = native

    # -- the mapping ------------------------------------------------------------
    def __getitem__(self, key: _BytesLike) -> bytes:
        v = self._s.get(_b(key))
        if v is None:
            raise KeyError(key)
        return v

    def __setitem__(self, key: _BytesLike, value: _BytesLike) -> None:
        self._s.put(_b(key), _b(value))

    def __delitem__(self, key: _BytesLike) -> None:
        if not self._s.delete(_b(key)):
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, (bytes, bytearray, memoryview, str)):
            return False
        return self._s.get(_b(key)) is not None

    def __len__(self) -> int:
        return self._s.len()

    def __iter__(self) -> _Iterator[bytes]:
        for k, _ in self.scan():
            yield k

    def get(self, key: _BytesLike, default=None):
        """The value of ``key``, or ``default``."""
        v = self._s.get(_b(key))
        return default if v is None else v

    # -- beyond the mapping -----------------------------------------------------
    def scan(
        self,
        start: _Optional[_BytesLike] = None,
        end: _Optional[_BytesLike] = None,
        limit: _Optional[int] = None,
        reverse: bool = False,
        prefix: _Optional[_BytesLike] = None,
    ) -> _Iterator[_Tuple[bytes, bytes]]:
        """``(key, value)`` pairs with ``start <= key < end``: the range is half-open, as
        in every pmkv front end (``end`` excluded; an ``end`` at or before ``start``: no
        pairs). ``None`` leaves that side open; ``b""`` is the empty key, a bound like any
        other. ``prefix``: the keys that begin with it (instead of ``start``/``end``). In
        key order, or with ``reverse`` the same pairs highest first; at most ``limit`` (the
        first met: with ``reverse``, the highest).

        Fetched in chunks of 256 records with no lock held between chunks: writes may run
        meanwhile; the next chunk starts after the last key fetched, so records written
        past it are seen, none is seen twice."""
        if prefix is not None:
            if start is not None or end is not None:
                raise ValueError("scan: give prefix, or start and end, not both")
            start, end = _b(prefix), _after_prefix(_b(prefix))
        lo = None if start is None else _b(start)
        hi = None if end is None else _b(end)
        left = limit
        # Each chunk resumes at the last key returned: walking backwards, the chunk ends
        # (exclusively) there; forwards, it starts there with that key skipped.
        start_open = False
        while left is None or left > 0:
            n = _CHUNK if left is None else min(_CHUNK, left)
            chunk = self._s.range(lo, hi, n, reverse, start_open)
            for kv in chunk:
                yield kv
            if left is not None:
                left -= len(chunk)
            if len(chunk) < n:
                return
            if reverse:
                hi = chunk[-1][0]
            else:
                lo, start_open = chunk[-1][0], True

    def batch(self) -> "Batch":
        """Writes applied together: ``with db.batch() as b: b[k] = v; del b[k2]`` applies
        them when the block ends, as one atomic batch (after a crash: all or none of
        them; see ``Batch``). ``update`` by contrast writes one key at a time."""
        return Batch(self)

    def items(self):  # type: ignore[override]
        """(key, value) pairs in key order (one scan, not a lookup per key)."""
        return self.scan()

    def check(self) -> str:
        """Check the store's invariants; a report, or ``CorruptError``."""
        return self._s.check()

    def sync(self) -> None:
        """Make every write durable (matters in ``msync`` mode)."""
        self._s.sync()

    @property
    def engine(self) -> str:
        """The engine's name."""
        return self._s.engine()

    @property
    def durability(self) -> Durability:
        """What acknowledged writes survive: the medium the pool sits on (detected at
        open) and the mode, and for each event whether writes survive it."""
        medium, mode, table, warning, sync = self._s.durability()
        words = dict(table)
        t = {event: _SURVIVES[v] for event, v in words.items()}
        return Durability(
            medium, mode, t["process_crash"], t["kernel_crash"], t["power_loss"], t["reboot"], warning, sync, words
        )

    def close(self) -> None:
        """Close the store; later use raises ``ClosedError``. A second close does nothing.

        Errors the close meets are raised (the store is closed all the same). After a call
        raised ``CorruptError``, the pool is left marked unclean and ``close`` raises that
        damage again, as a ``CorruptError``: reopening does not repair it (``pmkv check``
        reports it, ``pmkv salvage`` copies out what is intact).

        Safe while other threads are inside calls on this store: ``close`` waits (with the
        GIL released) for the call each of them is in to finish — for a ``scan``, the
        chunk being fetched — and their next call raises ``ClosedError``."""
        self._s.close()

    @property
    def closed(self) -> bool:
        return not self._s.is_open

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is None:
            self.close()
            return
        # An exception is leaving the block: it is the one to see. What the close meets
        # (after a CorruptError, that same damage again) is added to it as a note rather
        # than raised in its place.
        try:
            self.close()
        except Error as e:
            if hasattr(exc, "add_note"):  # Python 3.11+
                exc.add_note(f"pmkv: closing the store then failed too: {type(e).__name__}: {e}")

    def __repr__(self) -> str:
        return f"<pmkv.Store {'closed' if self.closed else self.engine}>"
