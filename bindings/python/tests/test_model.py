"""A hypothesis state machine: the store behaves as a dict across puts, deletes, pops,
batches, bounded and reverse scans with limits, closes, reopens and read-only reopens;
and a pool is locked against a second open in this process and in another one."""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import pmkv

SMALL = {"initial_size": 1 << 20, "max_size": 64 << 20}

# Few short keys, so that operations collide; values of at most 8 bytes (HART keeps them
# inline in the leaf) and longer ones (out of line).
keys = st.binary(min_size=0, max_size=4).map(lambda b: b"k" + b) | st.sampled_from([b"", b"\x00", b"\xff" * 3])
values = st.binary(max_size=8) | st.binary(min_size=9, max_size=300)


class StoreMatchesDict(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="pmkv-model-")
        self.path = os.path.join(self.dir, "m.pool")
        self.store = pmkv.open(self.path, "hart", **SMALL)
        self.model = {}

    def teardown(self):
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(k=keys, v=values)
    def put(self, k, v):
        self.store[k] = v
        self.model[k] = v

    @rule(k=keys)
    def delete(self, k):
        if k in self.model:
            del self.store[k]
            del self.model[k]
        else:
            with pytest.raises(KeyError):
                del self.store[k]

    @rule(k=keys)
    def get(self, k):
        assert self.store.get(k) == self.model.get(k)
        assert (k in self.store) == (k in self.model)

    @rule(k=keys, d=values)
    def pop(self, k, d):
        assert self.store.pop(k, d) == self.model.pop(k, d)

    @rule(items=st.dictionaries(keys, values, max_size=8), dels=st.lists(keys, max_size=3))
    def batch(self, items, dels):
        self.store.update(items)
        self.model.update(items)
        for k in dels:
            self.store.pop(k, None)
            self.model.pop(k, None)

    @rule(lo=keys, hi=keys, limit=st.none() | st.integers(0, 5), rev=st.booleans())
    def scan(self, lo, hi, limit, rev):
        want = sorted(((k, v) for k, v in self.model.items() if lo <= k < hi), reverse=rev)
        if limit is not None:
            want = want[:limit]
        assert list(self.store.scan(lo, hi, limit, reverse=rev)) == want

    @rule()
    def reopen(self):
        self.store.close()
        self.store = pmkv.open(self.path)

    @precondition(lambda self: len(self.model) > 0)
    @rule()
    def reopen_read_only(self):
        self.store.close()
        with pmkv.open(self.path, read_only=True) as ro:
            assert dict(ro.items()) == self.model
            with pytest.raises(pmkv.ReadOnlyError):
                ro[b"k"] = b"v"
        self.store = pmkv.open(self.path)

    @invariant()
    def same_length(self):
        assert len(self.store) == len(self.model)

    @rule()
    def full_iteration(self):
        assert list(self.store.items()) == sorted(self.model.items())


StoreMatchesDict.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
test_store_matches_dict = StoreMatchesDict.TestCase


def test_locked_in_this_process_and_another(tmp_path):
    pool = str(tmp_path / "l.pool")
    with pmkv.open(pool, "hart", **SMALL):
        with pytest.raises(pmkv.LockedError):
            pmkv.open(pool)
        code = "import pmkv, sys\ntry:\n    pmkv.open(sys.argv[1])\nexcept pmkv.LockedError:\n    sys.exit(42)\n"
        r = subprocess.run([sys.executable, "-c", code, pool], timeout=60)
        assert r.returncode == 42
    # Closed: both may open it now (one after the other).
    code = "import pmkv, sys\nwith pmkv.open(sys.argv[1]) as s:\n    sys.exit(0 if len(s) == 0 else 1)\n"
    assert subprocess.run([sys.executable, "-c", code, pool], timeout=60).returncode == 0
