"""pmkv serve driven by redis-py, the most used Redis client library (SPEC U3).

Run by crates/server/tests/run_py.sh, which builds `pmkv` and passes its path in PMKV_BIN.
"""
import os
import subprocess
import threading
import time

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
    assert r.set("t", "v", ex=10) and r.ttl("t") == 10
    assert r.exists("b", "k") == 2 and r.delete("b", "nope") == 1
    assert r.type("k") == b"string" and r.dbsize() == 3
    assert sorted(r.keys("*")) == [b"k", b"n", b"t"]
    assert sorted(r.scan_iter(match="*", count=1)) == [b"k", b"n", b"t"]
    assert r.info()["pmkv_engine"] == "hart"
    p = r.pipeline(transaction=False)
    for i in range(1000):
        p.set(f"p{i}", i)
    assert all(p.execute())
    assert r.get("p999") == b"999"
    assert r.flushdb() and r.dbsize() == 0


@pytest.mark.parametrize("protocol", [2, 3])
def test_pipelines_transactional_or_not(server, protocol):
    r = redis.Redis(port=server, protocol=protocol)
    # redis-py's default pipeline is a MULTI/EXEC transaction.
    p = r.pipeline()
    p.set("a", 1).incr("a").hset("h", mapping={"f": "v", "g": "w"}).get("a")
    assert p.execute() == [True, 2, 2, b"2"]
    p = r.pipeline(transaction=False)
    p.set("b", 1).incr("b").hgetall("h")
    assert p.execute() == [True, 2, {b"f": b"v", b"g": b"w"}]
    # A command the server refuses while queueing aborts the whole transaction.
    p = r.pipeline()
    p.set("c", 1).execute_command("NOSUCH", "c")
    with pytest.raises(redis.exceptions.ResponseError):
        p.execute()
    assert r.exists("c") == 0


def test_watch_conflicts_abort_the_transaction(server):
    r = redis.Redis(port=server)
    other = redis.Redis(port=server)
    r.set("balance", 10)

    def spend(pipe):
        cur = int(pipe.get("balance"))
        other_writes.append(cur)
        if len(other_writes) == 1:
            other.set("balance", 100)  # a conflicting write between WATCH and EXEC
        pipe.multi()
        pipe.set("balance", cur - 1)

    other_writes = []
    r.transaction(spend, "balance")
    # The first attempt saw 10, was aborted by the conflicting write, and retried on 100.
    assert other_writes == [10, 100]
    assert r.get("balance") == b"99"
    with r.pipeline() as p:
        p.watch("balance")
        other.set("balance", 1)
        p.multi()
        p.set("balance", 2)
        with pytest.raises(redis.exceptions.WatchError):
            p.execute()
    assert r.get("balance") == b"1"


def test_locks_expiry_and_hashes(server):
    r = redis.Redis(port=server)
    lock = r.lock("resource", timeout=5)
    assert lock.acquire(blocking=False)
    assert not r.lock("resource", timeout=5).acquire(blocking=False)
    assert 0 < r.pttl("resource") <= 5000
    lock.extend(5)
    lock.release()
    assert r.exists("resource") == 0
    with r.lock("resource", timeout=1, blocking_timeout=2):
        assert r.exists("resource") == 1
    r.set("s", "v", px=150)
    assert r.get("s") == b"v"
    time.sleep(0.3)
    assert r.get("s") is None
    r.set("s", "v", ex=100)
    assert r.ttl("s") == 100 and r.persist("s") and r.ttl("s") == -1
    assert r.hset("user:1", mapping={"name": "ada", "visits": 1}) == 2
    assert r.hincrby("user:1", "visits", 2) == 3
    assert r.hgetall("user:1") == {b"name": b"ada", b"visits": b"3"}
    assert r.hlen("user:1") == 2 and r.type("user:1") == b"hash"
    assert sorted(r.hscan_iter("user:1", count=1)) == [(b"name", b"ada"), (b"visits", b"3")]
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        r.get("user:1")
    assert r.eval("return redis.call('HGET', KEYS[1], ARGV[1])", 1, "user:1", "name") == b"ada"


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


# A server no client can crash, stall or bloat (the pmkv binary, its flags).

import socket
import time


def start(tmp_path, *flags, name="r.pool"):
    """pmkv serve with `flags`: (process, port), or (process, None) if it exited."""
    p = subprocess.Popen(
        [PMKV, "serve", str(tmp_path / name), "--port", "0", "--mode", "adr", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = p.stdout.readline()
    if not line:
        p.wait(timeout=10)
        return p, None
    return p, int(line.strip().rsplit(":", 1)[1])


def stop(p, port, password=None):
    try:
        redis.Redis(port=port, password=password).shutdown()
    except (redis.exceptions.ConnectionError, redis.exceptions.ResponseError):
        pass
    assert p.wait(timeout=10) == 0


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("flags", [["--requirepass", ""], ["--requirepass-file", "/dev/null"]])
def test_an_empty_password_is_no_password(tmp_path, flags):
    # Every interface with an empty password: refused as without a password.
    p, port = start(tmp_path, "--bind", "0.0.0.0", *flags)
    assert port is None and p.returncode != 0
    err = p.stderr.read()
    assert "the password is empty" in err and "without a password" in err, err
    # On loopback it serves, and AUTH "" is no way in: there is no password.
    p, port = start(tmp_path, *flags)
    r = redis.Redis(port=port)
    with pytest.raises(redis.exceptions.ResponseError, match="without any password configured"):
        r.execute_command("AUTH", "")
    stop(p, port)


def test_bind_localhost(tmp_path):
    p, port = start(tmp_path, "--bind", "localhost")
    assert port is not None, p.stderr.read()
    assert redis.Redis(host="127.0.0.1", port=port).ping()
    assert redis.Redis(host="localhost", port=port).ping()
    stop(p, port)


def test_limit_flags_show_in_config_get(tmp_path):
    p, port = start(
        tmp_path,
        "--proto-max-bulk-len", "1mb",
        "--client-query-buffer-limit", "4mb",
        "--client-output-buffer-limit", "8mb 2mb 5",
    )
    r = redis.Redis(port=port)
    assert r.config_get("proto-max-bulk-len") == {"proto-max-bulk-len": "1048576"}
    assert r.config_get("client-query-buffer-limit") == {"client-query-buffer-limit": "4194304"}
    assert r.config_get("client-output-buffer-limit") == {"client-output-buffer-limit": "normal 8388608 2097152 5"}
    # Over proto-max-bulk-len: an error, and the connection closed (redis-py sees either
    # first, as the reply and the close race with its sending).
    with pytest.raises((redis.exceptions.ConnectionError, redis.exceptions.ResponseError)):
        r.set("k", b"v" * ((1 << 20) + 1))
    assert r.ping()  # a new connection from the pool
    stop(p, port)


def test_pathological_patterns_answer_and_ping_stays_answered(tmp_path):
    p, port = start(tmp_path)
    r = redis.Redis(port=port, socket_timeout=30)
    r.mset({b"a" * n: b"v" for n in range(30, 81)})
    done = []

    def attack():
        c = redis.Redis(port=port, socket_timeout=30)
        t = time.monotonic()
        assert len(c.keys(b"*" * 100_000)) == 51
        assert c.scan(0, match=b"*" * 200_000, count=1000)[1]
        assert c.keys(b"a*" * 12 + b"b") == []
        done.append(time.monotonic() - t)

    th = threading.Thread(target=attack)
    th.start()
    slowest = 0.0
    while th.is_alive():
        t = time.monotonic()
        assert redis.Redis(port=port, socket_timeout=10).ping()
        slowest = max(slowest, time.monotonic() - t)
        time.sleep(0.02)
    th.join()
    assert done and done[0] < 2.0, done
    assert slowest < 2.0
    stop(p, port)


def test_a_client_that_never_reads_keeps_the_server_small(tmp_path):
    p, port = start(tmp_path, "--client-output-buffer-limit", "64mb 1mb 1")
    r = redis.Redis(port=port, socket_timeout=30)
    r.set("big", b"v" * (8 << 20))
    base = rss_mib(p.pid)
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * 300)  # and never read
    peak = base
    for _ in range(30):
        time.sleep(0.1)
        peak = max(peak, rss_mib(p.pid))
        assert r.ping()
    # 300 replies of 8 MiB would be 2.4 GiB; the server holds about one.
    assert peak - base < 100, (base, peak)
    info = r.info("stats")
    assert info["client_output_buffer_limit_disconnections"] == 1
    s.close()
    stop(p, port)


def test_before_auth_a_client_gets_a_few_kib(tmp_path):
    p, port = start(tmp_path, "--requirepass", "s3cret")
    base = rss_mib(p.pid)
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", port))
        s.settimeout(10)
        try:
            s.sendall(b"*2\r\n$4\r\nAUTH\r\n$10485760\r\n" + b"z" * (10 << 20))
        except OSError:
            pass  # closed by the server before all was sent
        try:
            assert s.recv(100).startswith(b"-ERR Protocol error")
        except ConnectionResetError:
            pass
        s.close()
    assert rss_mib(p.pid) - base < 32
    r = redis.Redis(port=port, password="s3cret")
    assert r.ping() and r.set("k", b"v" * (1 << 20))
    stop(p, port, password="s3cret")
