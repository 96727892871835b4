"""Python API benchmark: ops/s of put, get and iteration for pmkv against PyPI `lmdb`, the
standard library's `dbm` and a plain `dict`, in one run (SPEC U4).

    ./bindings/python/tests/run.sh                      # creates target/pyenv
    VIRTUAL_ENV=$PWD/target/pyenv PATH=$PWD/target/pyenv/bin:$PATH \
        maturin develop --release -m bindings/python/Cargo.toml   # an optimised build
    target/pyenv/bin/pip install lmdb
    target/pyenv/bin/python bindings/python/bench.py [N]

Every store gets the same N 16-byte keys (shuffled) and 8-byte values, on /dev/shm.
Durability differs and is printed: pmkv `eadr` and `adr` persist every put before it
returns; lmdb runs with writemap, no sync (survives a process crash, not power loss),
one transaction per put as a mapping user would; dbm and dict keep nothing durable per put.
"""
import dbm
import os
import random
import shutil
import sys
import tempfile
import time

import pmkv

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
random.seed(42)
KEYS = [b"key%013d" % i for i in range(N)]
random.shuffle(KEYS)
VAL = b"12345678"
DIR = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)


def timed(f):
    t = time.perf_counter()
    n = f()
    return n / (time.perf_counter() - t)


def run(name, durability, db, close=None):
    def put():
        for k in KEYS:
            db[k] = VAL
        return N

    def get():
        s = 0
        for k in KEYS:
            s += len(db[k])
        assert s == 8 * N
        return N

    def iterate():
        n = 0
        for _ in db.keys() if hasattr(db, "keys") and not isinstance(db, dict) else db:
            n += 1
        assert n == N, (name, n)
        return N

    r = (timed(put), timed(get), timed(iterate))
    if close:
        close()
    print(f"| {name} | {durability} | {r[0] / 1e3:.0f} | {r[1] / 1e3:.0f} | {r[2] / 1e3:.0f} |")


print(f"Python {sys.version.split()[0]}, {N} keys of 16 bytes, 8-byte values, files on {DIR}")
print("| store | durability of a put | put kops/s | get kops/s | iterate kops/s |")
print("|---|---|---:|---:|---:|")
for mode in ("eadr", "adr"):
    db = pmkv.open(os.path.join(DIR, f"{mode}.pool"), mode=mode, initial_size=256 << 20)
    run(f"pmkv (hart, {mode})", "persistent when it returns", db, db.close)

try:
    import lmdb

    env = lmdb.open(os.path.join(DIR, "lmdb"), map_size=1 << 30, writemap=True, sync=False, metasync=False)

    class LmdbMap:
        def __setitem__(self, k, v):
            with env.begin(write=True) as t:
                t.put(k, v)

        def __getitem__(self, k):
            with env.begin() as t:
                return t.get(k)

        def keys(self):
            with env.begin() as t:
                for k, _ in t.cursor():
                    yield k

    run("lmdb (writemap, nosync)", "process crash only", LmdbMap(), env.close)
except ImportError:
    print("| lmdb | (not installed: pip install lmdb) | | | |")

d = dbm.open(os.path.join(DIR, "dbm"), "n")
run(f"dbm ({getattr(dbm, '_defaultmod', dbm).__name__})", "none per put", d, d.close)
run("dict", "none (memory)", {})
shutil.rmtree(DIR)
