"""pmkv serve driven by redis-py, the most used Redis client library (SPEC U3).

Run by crates/server/tests/run_py.sh, which builds `pmkv` and passes its path in PMKV_BIN.
"""
import os
import subprocess
import threading

import pytest
import redis

PMKV = os.environ.get("PMKV_BIN", "target/debug/pmkv")


@pytest.fixture
def server(tmp_path):
    p = subprocess.Popen(
        [PMKV, "serve", str(tmp_path / "r.pool"), "--port", "0", "--mode", "adr"],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = p.stdout.readline()
    port = int(line.strip().rsplit(":", 1)[1])
    yield port
    try:
        redis.Redis(port=port).shutdown()
    except (redis.exceptions.ConnectionError, redis.exceptions.ResponseError):
        pass
    assert p.wait(timeout=10) == 0


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_basics(server, protocol):
    r = redis.Redis(port=server, protocol=protocol)
    assert r.ping()
    assert r.set("k", "v") and r.get("k") == b"v"
    assert r.set("k", "w", nx=True) is None
    assert r.set("k", "w", xx=True, get=True) == b"v"
    assert r.setnx("n", 1) and not r.setnx("n", 2)
    assert r.incr("n") == 2 and r.incrby("n", 10) == 12 and r.decr("n") == 11
    assert r.append("k", "xy") == 3 and r.strlen("k") == 3
    assert r.mset({"a": "1", "b": "2"}) and r.mget("a", "zz", "b") == [b"1", None, b"2"]
    assert r.getset("a", "9") == b"1" and r.getdel("a") == b"9"
    assert r.exists("b", "k") == 2 and r.delete("b", "nope") == 1
    assert r.type("k") == b"string" and r.dbsize() == 2
    assert sorted(r.keys("*")) == [b"k", b"n"]
    assert sorted(r.scan_iter(match="*", count=1)) == [b"k", b"n"]
    assert r.info()["pmkv_engine"] == "hart"
    with pytest.raises(redis.exceptions.ResponseError):
        r.set("t", "v", ex=10)
    p = r.pipeline(transaction=False)
    for i in range(1000):
        p.set(f"p{i}", i)
    assert all(p.execute())
    assert r.get("p999") == b"999"
    assert r.flushdb() and r.dbsize() == 0


def test_concurrent_clients_increment_atomically(server):
    def work():
        c = redis.Redis(port=server)
        for _ in range(200):
            c.incr("counter")

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert redis.Redis(port=server).get("counter") == b"800"
