"""pytest tests of the pmkv Python package (SPEC U4)."""
import os
import threading
import time

import pytest
from hypothesis import given, settings, strategies as st

import pmkv


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "t.pool")


def test_mapping_basics(path):
    with pmkv.open(path) as db:
        assert db.engine == "hart" and len(db) == 0
        db["hello"] = "world"
        db[b"\x00bin"] = b"\xff\x00"
        db[bytearray(b"ba")] = memoryview(b"v")
        assert db["hello"] == b"world" and db[b"hello"] == b"world"
        assert db[b"\x00bin"] == b"\xff\x00"
        assert "hello" in db and b"nope" not in db and 42 not in db
        with pytest.raises(KeyError):
            db["nope"]
        with pytest.raises(KeyError):
            del db["nope"]
        assert db.get("nope") is None and db.get("nope", b"d") == b"d"
        assert db.pop("ba") == b"v" and "ba" not in db
        assert db.setdefault("sd", b"1") == b"1" and db.setdefault("sd", b"2") == b"1"
        db.update({"u1": "a", "u2": "b"})
        assert list(db) == [b"\x00bin", b"hello", b"sd", b"u1", b"u2"]
        assert dict(db.items())[b"u2"] == b"b"
        with pytest.raises(TypeError):
            db[1] = b"x"
        db.check()


def test_scan_chunks_bounds_limits_and_reverse(path):
    with pmkv.open(path) as db:
        for i in range(1000):
            db[b"k%04d" % i] = b"%d" % i
        keys = [k for k, _ in db.scan()]
        assert keys == [b"k%04d" % i for i in range(1000)]
        assert [k for k, _ in db.scan(b"k0100", b"k0600")] == [b"k%04d" % i for i in range(100, 600)]
        assert [k for k, _ in db.scan(limit=300)] == keys[:300]
        assert [k for k, _ in db.scan(reverse=True)] == keys[::-1]
        assert [k for k, _ in db.scan(b"k0100", b"k0600", limit=270, reverse=True)] == [
            b"k%04d" % i for i in range(599, 329, -1)
        ]
        # Writing while a scan runs: a record written past the chunk being read is seen,
        # one written behind the scan is not, and nothing is returned twice.
        seen = []
        for k, _ in db.scan():
            seen.append(k)
            if k == b"k0500":
                db[b"k0900x"] = b"new"
                db[b"k0100x"] = b"new"
        assert b"k0900x" in seen and b"k0100x" not in seen and len(seen) == len(set(seen)) == 1001


def test_reopen_read_only_and_closed(path):
    db = pmkv.open(path, mode="eadr")
    db["a"] = "1"
    db.close()
    db.close()  # a second close does nothing
    assert db.closed
    with pytest.raises(pmkv.ClosedError):
        db["a"]
    with pmkv.open(path, read_only=True) as ro:
        assert ro["a"] == b"1"
        with pytest.raises(PermissionError):  # pmkv.ReadOnlyError is one
            ro["b"] = "2"
    with pmkv.open(path) as db:
        assert dict(db.items()) == {b"a": b"1"}


def test_errors_have_their_types(path, tmp_path):
    db = pmkv.open(path)
    with pytest.raises(pmkv.LockedError):
        pmkv.open(path)
    with pytest.raises(pmkv.TooLargeError):
        db[b"x" * 100_000] = b"v"
    db.close()
    junk = tmp_path / "junk.pool"
    junk.write_bytes(b"this is not a pool" * 100)
    before = junk.read_bytes()
    with pytest.raises(pmkv.CorruptError):
        pmkv.open(str(junk))
    assert junk.read_bytes() == before
    with pytest.raises(FileNotFoundError) as e:
        pmkv.open(str(tmp_path / "missing.pool"), create=False)
    assert isinstance(e.value, pmkv.NotFoundError) and isinstance(e.value, pmkv.Error)
    assert "missing.pool" in str(e.value)
    with pytest.raises(pmkv.Error):
        pmkv.open(str(tmp_path / "e.pool"), engine="no-such-engine")
    with pytest.raises(ValueError):
        pmkv.open(str(tmp_path / "m.pool"), mode="warp")
    assert issubclass(pmkv.CorruptError, pmkv.Error) and issubclass(pmkv.Error, Exception)
    # A pool of another engine is not "damaged": its own error.
    other = tmp_path / "h.pool"
    pmkv.open(str(other), engine="hart").close()
    with pytest.raises(pmkv.WrongEngineError):
        pmkv.open(str(other), engine="nbtree")
    assert not issubclass(pmkv.WrongEngineError, pmkv.CorruptError)
    assert issubclass(pmkv.ExistsError, FileExistsError) and issubclass(pmkv.ExistsError, pmkv.Error)


def test_a_full_pool_raises_full_and_keeps_what_it_has(path):
    with pmkv.open(path, initial_size=1 << 20, max_size=1 << 20) as db:
        written = 0
        with pytest.raises(pmkv.FullError):
            for i in range(1_000_000):
                db[b"f%07d" % i] = b"v" * 100
                written += 1
        assert len(db) == written and db[b"f%07d" % (written - 1)] == b"v" * 100
        db.check()


def test_threads_in_parallel(path):
    with pmkv.open(path) as db:
        def work(t):
            for i in range(500):
                db[b"t%d-%04d" % (t, i)] = b"%d" % i
                assert db[b"t%d-%04d" % (t, i)] == b"%d" % i
        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(db) == 2000
        db.check()



# close() while other threads are inside calls. The scenario runs in
# a child interpreter so that a deadlock (close waiting for the store's lock with the GIL
# held, the callers waiting for the GIL) fails the test on a timeout instead of hanging
# the suite.
_CLOSE_WHILE_BUSY = r"""
import sys, threading, time
import pmkv

path, engine = sys.argv[1], sys.argv[2]
db = pmkv.open(path, engine=engine)
for i in range(2000):
    db[b"k%05d" % i] = b"v" * 64
busy = [threading.Event() for _ in range(4)]
outcome = {}


def loop(n, step):
    try:
        while True:
            step()
            busy[n].set()
    except BaseException as e:  # what ended the loop, checked below
        outcome[n] = e


steps = [
    lambda: db.get(b"k00007"),
    lambda: sum(1 for _ in db.scan(limit=700)),
    lambda: db.__setitem__(b"w", b"x"),
    lambda: (len(db), b"k00001" in db, db.closed),
]
threads = [threading.Thread(target=loop, args=(n, f)) for n, f in enumerate(steps)]
for t in threads:
    t.start()
for e in busy:
    assert e.wait(60), "a thread never completed a call"
time.sleep(0.05)
db.close()
for t in threads:
    t.join(60)
    assert not t.is_alive(), "a thread still runs after close"
for n in range(len(steps)):
    e = outcome.get(n)
    assert isinstance(e, pmkv.ClosedError) and "closed" in str(e), (n, repr(e))
assert db.closed
for call in (lambda: db[b"k00001"], lambda: len(db), lambda: list(db.scan()), lambda: db.sync()):
    try:
        call()
    except pmkv.ClosedError as e:
        assert "closed" in str(e)
    else:
        raise AssertionError("a call after close() did not raise ClosedError")
db.close()  # a second close still does nothing
print("ok")
"""


@pytest.mark.parametrize("engine", pmkv.engines())
def test_close_while_other_threads_are_inside_calls(tmp_path, engine):
    import subprocess
    import sys

    path = str(tmp_path / f"{engine}.pool")
    try:
        r = subprocess.run(
            [sys.executable, "-c", _CLOSE_WHILE_BUSY, path, engine],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{engine}: close() with calls in other threads hangs (deadlock)")
    assert r.returncode == 0 and r.stdout.strip() == "ok", f"{engine}: {r.stdout}{r.stderr}"

keys = st.binary(min_size=0, max_size=12)
values = st.binary(min_size=0, max_size=40)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), keys, values),
        st.tuples(st.just("del"), keys, st.just(b"")),
        st.tuples(st.just("reopen"), st.just(b""), st.just(b"")),
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_model_against_a_dict_with_reopens(tmp_path_factory, ops):
    path = str(tmp_path_factory.mktemp("m") / "m.pool")
    model = {}
    db = pmkv.open(path)
    try:
        for op, k, v in ops:
            if op == "put":
                db[k] = v
                model[k] = v
            elif op == "del":
                if k in model:
                    del db[k]
                    del model[k]
                else:
                    with pytest.raises(KeyError):
                        del db[k]
            else:
                db.close()
                db = pmkv.open(path)
            assert len(db) == len(model)
        assert dict(db.items()) == model
        assert list(db) == sorted(model)
    finally:
        db.close()


# -- ranges ---------------------------------------------------------------------------

EDGE_KEYS = [b"", b"a", b"b", b"ba", b"bb", b"b\xff", b"c"]


def test_scan_range_edge_cases(path):
    """The cases of docs/design/api.md, "Range edge cases" (1-9; Python names no inclusive
    end or exclusive start, so not 10): ``scan(start, end)`` is ``[start, end)``."""
    with pmkv.open(path) as db:
        for k in EDGE_KEYS:
            db[k] = b"v:" + k

        def keys(*args, **kw):
            got = list(db.scan(*args, **kw))
            assert all(v == b"v:" + k for k, v in got)
            return [k for k, _ in got]

        # 1: no key between the bounds.
        assert keys(b"a\x00", b"b") == []
        # 2: start == end, present and absent.
        assert keys(b"b", b"b") == [] and keys(b"b0", b"b0") == []
        # 3: end before start: nothing, no error, not swapped.
        assert keys(b"c", b"a") == [] and keys(b"c", b"a", reverse=True) == []
        # 4: bounds at present keys: start in, end out.
        assert keys(b"a", b"ba") == [b"a", b"b"]
        # 5: bounds at absent keys.
        assert keys(b"a0", b"bc") == [b"b", b"ba", b"bb"]
        # 6: open ends.
        assert keys(b"b") == [b"b", b"ba", b"bb", b"b\xff", b"c"]
        assert keys(None, b"b") == [b"", b"a"]
        assert keys() == EDGE_KEYS
        # 7: the empty key is a key, not an open end.
        assert keys(b"") == EDGE_KEYS and keys(None, b"") == [] and keys("", "") == []
        # 8: reverse: the same pairs, highest first; a limit keeps the highest.
        assert keys(b"a", b"bb", reverse=True) == [b"ba", b"b", b"a"]
        assert keys(b"a", b"bb", limit=2, reverse=True) == [b"ba", b"b"]
        assert keys(b"a", b"bb", limit=2) == [b"a", b"b"] and keys(limit=0) == []
        # 9: prefixes, and the half-open range a prefix is.
        assert keys(prefix=b"b") == keys(b"b", b"c") == [b"b", b"ba", b"bb", b"b\xff"]
        assert keys(prefix=b"b\xff") == [b"b\xff"]
        assert keys(prefix=b"") == EDGE_KEYS
        assert keys(prefix="b", reverse=True, limit=1) == [b"b\xff"]
        with pytest.raises(ValueError):
            list(db.scan(b"a", prefix=b"b"))


def test_prefix_ranges_over_chunks_and_all_ff(path):
    with pmkv.open(path) as db:
        for i in range(600):
            db[b"p%04d" % i] = b"x"
        db[b"\xff\xff"] = b"y"
        db[b"\xff\xff\x00"] = b"y"
        db[b"q"] = b"z"
        assert len(list(db.scan(prefix=b"p"))) == 600
        assert [k for k, _ in db.scan(prefix=b"p", reverse=True, limit=300)][-1] == b"p0300"
        assert [k for k, _ in db.scan(prefix=b"\xff\xff")] == [b"\xff\xff", b"\xff\xff\x00"]
        assert pmkv._after_prefix(b"a\xff\xff") == b"b" and pmkv._after_prefix(b"\xff") is None


# -- damage, closing ------------------------------------------------------------------


def _damaged_pool(path):
    """A pool whose value of b"key007" is damaged (a flipped byte); the rest intact."""
    with pmkv.open(path) as db:
        for i in range(50):
            db[b"key%03d" % i] = (b"VALUE-%03d-" % i) * 20
    data = bytearray(open(path, "rb").read())
    at = data.find(b"VALUE-007-")
    assert at > 0
    data[at + 3] ^= 0xFF
    open(path, "wb").write(bytes(data))


def test_close_after_damage_reports_the_damage(path):
    _damaged_pool(path)
    db = pmkv.open(path)
    with pytest.raises(pmkv.CorruptError) as met:
        db[b"key007"]
    assert db[b"key008"] == b"VALUE-008-" * 20, "the rest stays readable"
    with pytest.raises(pmkv.CorruptError) as closed:
        db.close()
    assert str(met.value) in str(closed.value), (met.value, closed.value)
    assert "next open recovers" not in str(closed.value)
    assert db.closed
    db.close()  # a second close does nothing


def test_with_block_keeps_the_exception_that_left_it(path):
    _damaged_pool(path)
    with pytest.raises(pmkv.CorruptError) as e:
        with pmkv.open(path) as db:
            db[b"key007"]
    assert "fails its check" in str(e.value) or "corrupt" in str(e.value).lower()
    assert db.closed
    notes = getattr(e.value, "__notes__", None)
    if hasattr(e.value, "add_note"):
        assert notes and "closing the store then failed too: CorruptError" in notes[0], notes
    # Any exception, not only pmkv's: the with block's own exception is what is raised.
    with pytest.raises(ZeroDivisionError):
        with pmkv.open(path) as db:
            try:
                db[b"key007"]
            except pmkv.CorruptError:
                pass
            1 / 0
    # Without an exception, the close's error is raised.
    with pytest.raises(pmkv.CorruptError):
        with pmkv.open(path) as db:
            try:
                db[b"key007"]
            except pmkv.CorruptError:
                pass


# -- sharing a pool between processes ------------------------------------------------

_READER = r"""
import sys, pmkv
path, wait = sys.argv[1], float(sys.argv[2])
try:
    with pmkv.open(path, read_only=True, wait=wait) as db:
        print("read", db[b"k"].decode(), len(db), flush=True)
        sys.stdin.readline()  # hold the pool open until told to go
except pmkv.LockedError as e:
    print("locked", e, flush=True)
"""


def _reader(path, wait=0.0):
    import subprocess
    import sys

    return subprocess.Popen(
        [sys.executable, "-c", _READER, path, str(wait)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_read_only_opens_are_shared_between_processes(path):
    with pmkv.open(path) as db:
        db[b"k"] = b"v1"
    # Three processes (two children and this one) hold the pool read-only at once.
    a, b = _reader(path), _reader(path)
    try:
        assert a.stdout.readline().strip() == "read v1 1"
        assert b.stdout.readline().strip() == "read v1 1"
        with pmkv.open(path, read_only=True) as ro:
            assert ro[b"k"] == b"v1"
        # A writer is refused while they read.
        with pytest.raises(pmkv.LockedError):
            pmkv.open(path)
    finally:
        for p in (a, b):
            p.communicate("\n", timeout=60)
    assert a.returncode == 0 and b.returncode == 0
    # A writer excludes readers.
    with pmkv.open(path) as db:
        c = _reader(path)
        assert c.communicate("\n", timeout=60)[0].startswith("locked")
        db[b"k"] = b"v2"
    # ... and once it has closed, they read what it wrote.
    d = _reader(path)
    assert d.communicate("\n", timeout=60)[0].strip() == "read v2 1"


def test_wait_outlasts_a_holder(path, monkeypatch):
    """``wait`` retries while the pool is held and opens once it is free. A second open in
    this process is refused like one from another process (the file lock is per open), and
    the holder closes only once the waiter has been refused at least once (seen through
    the sleep between attempts), so the wait is exercised without timing anything."""
    holder = pmkv.open(path)
    holder[b"k"] = b"old"
    refused = threading.Event()

    def sleep(s):
        refused.set()
        time.sleep(s)

    monkeypatch.setattr(pmkv, "_sleep", sleep)
    with pytest.raises(pmkv.LockedError):
        pmkv.open(path, read_only=True)  # no wait: at once
    assert not refused.is_set()
    got = {}

    def waiter():
        try:
            with pmkv.open(path, read_only=True, wait=120) as db:
                got["k"] = db[b"k"]
        except BaseException as e:  # reported below
            got["error"] = e

    t = threading.Thread(target=waiter)
    t.start()
    assert refused.wait(60), "the waiter never retried"
    holder[b"k"] = b"written before the close"
    holder.close()
    t.join(120)
    assert not t.is_alive()
    assert got == {"k": b"written before the close"}, got
    # A wait that runs out raises LockedError; a bad wait is a ValueError.
    with pmkv.open(path):
        with pytest.raises(pmkv.LockedError):
            pmkv.open(path, wait=0.05)
    for bad in (-1, float("nan")):
        with pytest.raises(ValueError):
            pmkv.open(path, wait=bad)


def test_wait_for_a_writer_in_another_process(path):
    with pmkv.open(path) as db:
        db[b"k"] = b"v1"
    with pmkv.open(path) as db:
        r = _reader(path, wait=120)
        # The reader cannot have opened yet: the writer holds the pool.
        db[b"k"] = b"v2"
    out, _ = r.communicate("\n", timeout=120)
    assert out.strip() == "read v2 1", out


def _mount_fs(path):
    """The file-system type of the mount holding ``path`` (the longest mount point that
    is a prefix of it), read from the mount table: the oracle for ``durability.medium``."""
    path = os.path.realpath(path)
    best = ("", None)
    with open("/proc/self/mounts") as f:
        for line in f:
            at, fs = line.split()[1:3]
            at = at.replace("\\040", " ")
            if (path == at or path.startswith(at.rstrip("/") + "/")) and len(at) >= len(best[0]):
                best = (at, fs)
    return best[1]


def _expected_medium(path):
    fs = _mount_fs(path)
    return "memory" if fs in ("tmpfs", "ramfs", "hugetlbfs") else "disk"


def test_durability_reports_the_medium_and_warns_once_at_a_write_open(tmp_path):
    import warnings as w

    dirs = [str(tmp_path)]
    if os.path.isdir("/dev/shm"):
        import tempfile

        shm = tempfile.mkdtemp(dir="/dev/shm")
        dirs.append(shm)
    try:
        for d in dirs:
            path = os.path.join(d, "dur.pool")
            medium = _expected_medium(d)
            with pytest.warns(pmkv.DurabilityWarning) as caught:
                db = pmkv.open(path, mode="adr")
            assert len(caught) == 1 and path in str(caught[0].message)
            with db:
                dur = db.durability
                assert dur.medium == medium and dur.mode == "adr" and dur.sync is None
                assert dur.process_crash is True and dur.power_loss is False and dur.kernel_crash is False
                assert dur.reboot is (medium == "disk")
                assert dur.warning is not None
                for i in range(100):
                    db[f"k{i}"] = b"v"
            # Read-only opens acknowledge no writes; "none" promises nothing; "msync" on a
            # disk keeps its promise.
            for kw in ({"read_only": True}, {"mode": "none"}, {"mode": "msync"}):
                with w.catch_warnings(record=True) as got:
                    w.simplefilter("always")
                    with pmkv.open(path, **kw) as db:
                        assert db.durability.mode == kw.get("mode", "wal" if medium == "disk" else "adr")
                expect = 1 if kw.get("mode") == "msync" and medium == "memory" else 0
                assert len([g for g in got if issubclass(g.category, pmkv.DurabilityWarning)]) == expect, kw
            if medium == "disk":
                with pmkv.open(path, mode="msync") as db:
                    d = db.durability
                    assert (d.process_crash, d.kernel_crash, d.power_loss, d.reboot) == (True,) * 4
                    assert d.warning is None
    finally:
        if len(dirs) > 1:
            import shutil

            shutil.rmtree(dirs[1], ignore_errors=True)


def test_wal_is_the_default_on_a_disk_and_says_what_each_sync_policy_keeps(tmp_path):
    """No mode on a disk file: "wal" with sync "always", no warning. Each policy is
    reported with what a power loss keeps: every write, all but about the last second,
    or a consistent prefix."""
    import warnings as w

    if _expected_medium(str(tmp_path)) != "disk":
        pytest.skip("the temporary directory is not on a disk file system")
    path = str(tmp_path / "wal.pool")
    want = {None: "yes", "always": "yes", "everysec": "all-but-last-second", "no": "prefix"}
    for sync, power_loss in want.items():
        with w.catch_warnings(record=True) as got:
            w.simplefilter("always")
            with pmkv.open(path, sync=sync) as db:
                db[b"k"] = sync or "default"
                d = db.durability
        assert not [g for g in got if issubclass(g.category, pmkv.DurabilityWarning)], sync
        assert (d.medium, d.mode, d.sync, d.warning) == ("disk", "wal", sync or "always", None)
        assert d.survives == {
            "process_crash": "yes",
            "kernel_crash": power_loss,
            "power_loss": power_loss,
            "reboot": "yes",
        }
        # The bools say "every acknowledged write survives" only when it does.
        assert d.power_loss is (power_loss == "yes") and d.process_crash is True
    with pmkv.open(path, read_only=True) as db:
        assert db[b"k"] == b"no"
    with pytest.raises(ValueError, match="sometimes"):
        pmkv.open(path, sync="sometimes")


# -- errors that say what to do next --------------------------------------------------


def test_damage_error_names_check_and_salvage(path):
    """A CorruptError names the pool and the two commands that help; the salvage it
    suggests is what recovers the rest (the CLI's tests run it)."""
    _damaged_pool(path)
    with pmkv.open(path) as db:
        with pytest.raises(pmkv.CorruptError) as e:
            db[b"key007"]
        try:
            db.close()
        except pmkv.CorruptError:
            pass
    text = str(e.value)
    assert f"pmkv check {path}" in text, text
    assert f"pmkv salvage {path} NEW_POOL" in text, text


def test_locked_error_names_the_holder_and_the_wait(path):
    """A pool held by another process: the error names that process's id and the
    ``wait=`` that outlasts it."""
    with pmkv.open(path) as db:
        db[b"k"] = b"v1"
    holder = _reader(path)
    try:
        assert holder.stdout.readline().startswith("read")
        with pytest.raises(pmkv.LockedError) as e:
            pmkv.open(path)
    finally:
        holder.communicate("\n", timeout=60)
    text = str(e.value)
    assert f"pid {holder.pid}" in text, text
    assert "wait=SECONDS" in text and "--wait SECONDS" in text, text
