"""``Store.batch()``: several writes applied as one atomic batch, and the module's
namespace. The all-or-nothing promise is the Rust API's ``WriteBatch`` (``Store.write``),
crash-tested at every flush and fence (and every store in ``eadr``) by the
conformance suite for every engine (crates/conformance/tests/engines.rs:
``hart::atomic_batch_every_crash_point``, ``nbtree::...``, ``mangosteen::...`` and their
``eadr_atomic_batch_every_store_point``), and by crates/hart/tests/crash.rs
``atomic_batches_every_crash_point_and_eadr_store`` and crates/nbtree/tests/crash.rs
``atomic_batch_every_crash_point_and_eadr_store``; here a writer process is killed
(SIGKILL) while it commits batches through Python, and every batch must be whole."""
import os
import signal
import subprocess
import sys
import time

import pytest

import pmkv


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "t.pool")


def test_a_batch_applies_its_writes_together_at_the_end_of_the_block(path):
    with pmkv.open(path) as db:
        db["gone"] = "x"
        with db.batch() as b:
            b["a"] = "1"
            b.put(b"b", b"2")
            b["a"] = "3"  # a later write of a key wins
            del b["gone"]
            del b["never-there"]  # no KeyError: the store is not read
            assert len(b) == 5
            assert "a" not in db and db["gone"] == b"x"  # not applied yet
        assert dict(db.items()) == {b"a": b"3", b"b": b"2"}
        with pytest.raises(pmkv.Error, match="already committed"):
            b["c"] = "4"


def test_an_exception_in_the_block_discards_the_batch(path):
    with pmkv.open(path) as db:
        db["k"] = "old"
        with pytest.raises(RuntimeError):
            with db.batch() as b:
                b["k"] = "new"
                b["other"] = "x"
                raise RuntimeError("changed my mind")
        assert dict(db.items()) == {b"k": b"old"}
        b = db.batch()
        b["k"] = "new"
        b.discard()
        b2 = db.batch()
        b2["k"] = "newer"
        b2.commit()
        assert db["k"] == b"newer"


def test_a_failed_commit_writes_nothing(path):
    with pmkv.open(path) as db:
        db["k"] = "old"
        with pytest.raises(pmkv.TooLargeError):
            with db.batch() as b:
                b["k"] = "new"
                b["a"] = "1"
                b[b"x" * 100_000] = "key too long for any engine"
        assert dict(db.items()) == {b"k": b"old"}


def test_a_full_pool_refuses_the_whole_batch(tmp_path):
    with pmkv.open(str(tmp_path / "small.pool"), max_size=1 << 20) as db:
        db["k"] = "old"
        with pytest.raises(pmkv.FullError):
            with db.batch() as b:
                b["k"] = "new"
                for i in range(400):
                    b[f"big{i:03}"] = os.urandom(4000)
        assert dict(db.items()) == {b"k": b"old"}
        db["after"] = "still writable"


def test_engines_without_atomic_batches_refuse_a_batch(tmp_path):
    with pmkv.open(str(tmp_path / "w.pool"), engine="woart") as db:
        with pytest.raises(pmkv.Error, match="no atomic batches"):
            with db.batch() as b:
                b["a"] = "1"
                b["b"] = "2"
        assert len(db) == 0


_WRITER = r"""
import sys, pmkv
path, engine = sys.argv[1], sys.argv[2]
# A 256 MiB pool: mangosteen's region (1/64 of it) is then 4 MiB, quick to recover.
with pmkv.open(path, engine=engine, max_size=256 << 20) as db:
    g = 0
    while True:
        g += 1
        with db.batch() as b:
            for i in range(20):
                b[f"key{i:02}"] = f"{g}:{i}".encode() * (1 + i % 5)
        if g == 1:
            print("first", flush=True)
"""


@pytest.mark.parametrize("engine", ["hart", "nbtree", "mangosteen"])
def test_batches_are_whole_after_the_writer_is_killed(tmp_path, engine):
    path = str(tmp_path / f"{engine}.pool")
    seen = set()
    for round_ in range(6):
        w = subprocess.Popen([sys.executable, "-c", _WRITER, path, engine], stdout=subprocess.PIPE, text=True)
        assert w.stdout.readline().strip() == "first"
        time.sleep(0.05 + 0.03 * round_)
        w.send_signal(signal.SIGKILL)
        w.wait(timeout=60)
        with pmkv.open(path) as db:  # recovers the interrupted batch, if any
            values = dict(db.items())
            assert len(values) == 20, f"{engine} round {round_}: {sorted(values)}"
            gens = {v.split(b":")[0] for v in values.values()}
            assert len(gens) == 1, f"{engine} round {round_}: a batch applied in part: {sorted(gens)}"
            (g,) = gens
            for i in range(20):
                assert values[f"key{i:02}".encode()] == f"{g.decode()}:{i}".encode() * (1 + i % 5)
            seen.add(g)
            assert db.check()
    assert len(seen) > 1, "the writer should have committed several batches between kills"


def test_the_module_exports_only_its_api():
    public = {n for n in dir(pmkv) if not n.startswith("_")}
    assert public == set(pmkv.__all__), public ^ set(pmkv.__all__)
    for name in ("os", "time", "warnings", "Optional", "Union", "MutableMapping", "BytesLike"):
        assert not hasattr(pmkv, name), name
    ns = {}
    exec("from pmkv import *", ns)
    assert {n for n in ns if n != "__builtins__"} == set(pmkv.__all__)
