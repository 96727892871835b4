"""pytest tests of the pmkv Python package (SPEC U4)."""
import os
import threading

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
        with pytest.raises(pmkv.ReadOnlyError):
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
    with pytest.raises(pmkv.Error):
        pmkv.open(str(tmp_path / "missing.pool"), create=False)
    with pytest.raises(pmkv.Error):
        pmkv.open(str(tmp_path / "e.pool"), engine="no-such-engine")
    with pytest.raises(ValueError):
        pmkv.open(str(tmp_path / "m.pool"), mode="warp")
    assert issubclass(pmkv.CorruptError, pmkv.Error) and issubclass(pmkv.Error, Exception)


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
