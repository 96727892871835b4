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
