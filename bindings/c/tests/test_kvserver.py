"""kvserver (bindings/c/demos/kvserver: uthash behind RESP, durable by pmkv-cc) driven by
redis-py and by raw sockets: the commands, pipelines, malformed input (an error, never a
crash), a full region, and SIGKILL during traffic: after every restart each acknowledged
SET or DEL is there, whole, and an unacknowledged one is either wholly there or not.
The server runs in verify mode (a write its capture missed would fail the request and
stop the server), with a small region so that the check per batch stays cheap.

Usage: test_kvserver.py KVSERVER_BINARY DIR (run by bindings/c/tests/run.sh).
KVSERVER_ROUNDS sets the number of SIGKILLs (default 12).
"""
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import atexit

import redis

BIN, DIR = sys.argv[1], sys.argv[2]
ROUNDS = int(os.environ.get("KVSERVER_ROUNDS", "12"))


LIVE = []


@atexit.register
def kill_leftovers():
    # A failed check must not leave a server running.
    for p in LIVE:
        if p.poll() is None:
            p.kill()


class Server:
    def __init__(self, pool, region_mib=8, verify=True):
        args = [BIN, "--pool", pool, "--port", "0", "--region-mib", str(region_mib)]
        if verify:
            args.append("--verify")
        self.log = open(pool + ".log", "ab")
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log)
        LIVE.append(self.p)
        line = self.p.stdout.readline().decode()
        assert line.startswith("ready "), f"kvserver did not start: {line!r} (see {pool}.log)"
        self.port = int(line.split()[1])

    def client(self, **kw):
        return redis.Redis(port=self.port, socket_timeout=20, **kw)

    def alive(self):
        return self.p.poll() is None

    def kill(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()
        self.log.close()

    def stop(self):
        assert self.alive(), f"kvserver exited with {self.p.returncode}"
        self.kill()


def raw(port, data, read=True):
    """Send `data` on a fresh connection; return what came back until the server closed
    or went quiet."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(data)
        if not read:
            return b""
        s.settimeout(0.2)
        got = b""
        while True:
            try:
                b = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not b:
                break
            got += b
        return got
    finally:
        s.close()


def test_commands(srv):
    r = srv.client()
    assert r.ping()
    assert r.flushall()
    assert r.dbsize() == 0
    assert r.get("missing") is None
    assert r.set("k", "v") and r.get("k") == b"v"
    assert r.set("k", "w") and r.get("k") == b"w"  # same length: in place
    assert r.set("k", "longer value") and r.get("k") == b"longer value"
    binary = bytes(range(256)) * 3 + b"\r\n\x00$*"
    assert r.set(b"\x00bin\r\nkey", binary) and r.get(b"\x00bin\r\nkey") == binary
    assert r.set("empty", "") and r.get("empty") == b""
    big = os.urandom(300_000)
    assert r.set("big", big) and r.get("big") == big
    assert r.exists("k", "empty", "nope", "k") == 3
    assert r.dbsize() == 4
    assert r.delete("k", "nope", "empty") == 2
    assert r.get("k") is None and r.dbsize() == 2
    info = r.info()
    assert info["db0"]["keys"] == 2, info
    # Pipelines of mixed reads and writes, answered in order.
    p = r.pipeline(transaction=False)
    expect = []
    model = {}
    rng = random.Random(7)
    for i in range(3000):
        key = f"p{rng.randrange(300)}"
        op = rng.randrange(4)
        if op < 2:
            val = os.urandom(rng.randrange(1, 200))
            p.set(key, val)
            model[key] = val
            expect.append(True)
        elif op == 2:
            p.get(key)
            expect.append(model.get(key))
        else:
            p.delete(key)
            expect.append(1 if model.pop(key, None) is not None else 0)
        if i % 500 == 0:
            p.ping()
            expect.append(True)
    assert p.execute() == expect
    assert r.dbsize() == 2 + len(model)
    # Errors: answered, the connection goes on.
    for bad in (("NOSUCH", "x"), ("GET",), ("SET", "a"), ("SET", "a", "b", "EX", "1"), ("DEL",)):
        try:
            r.execute_command(*bad)
            raise AssertionError(f"{bad} did not fail")
        except redis.ResponseError as e:
            assert "unknown command" in str(e) or "wrong number" in str(e), e
    assert raw(srv.port, b"*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n") == b"$2\r\nhi\r\n"
    assert r.execute_command("SELECT", "0")
    # Inline commands, as typed into telnet.
    assert raw(srv.port, b"SET inl 123\r\nGET inl\r\nPING\r\nQUIT\r\n") == b"+OK\r\n$3\r\n123\r\n+PONG\r\n+OK\r\n"
    assert r.flushall() and r.dbsize() == 0
    # Many clients at once: their writes are combined into shared batches.
    def writer(t):
        c = srv.client()
        for i in range(300):
            assert c.set(f"c{t}:{i}", f"{t}-{i}" * (i % 7 + 1))
    ts = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert r.dbsize() == 2400
    assert r.get("c5:123") == b"5-123" * (123 % 7 + 1)
    assert srv.alive()


MALFORMED = [
    b"*abc\r\n",
    b"*1\r\n$-5\r\n",
    b"*1\r\n$3\r\nabcd\r\n",
    b"*2\r\n$3\r\nGET\r\n:1\r\n",
    b"*1\r\n$99999999999999999999\r\n",
    b"*99999999999\r\n",
    b"*1\r\n$3\r\nab",  # incomplete, then the connection closes
    b"*-1\r\n*0\r\nPING\r\n",
    b"\r\n\n\n   \r\n",
    b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$",
    b"$5\r\nhello\r\n",
    b"*1\r\n$0\r\n\r\n",
    b"\x00\xff\xfe" * 100 + b"\r\n",
    b"x" * 70000,  # an inline line too long
]


def test_malformed(srv):
    for m in MALFORMED:
        got = raw(srv.port, m)
        assert not got or got.startswith((b"-ERR", b"+PONG")), (m, got)
        assert srv.alive(), m
    # Protocol errors say so.
    assert raw(srv.port, b"*abc\r\n").startswith(b"-ERR Protocol error")
    assert raw(srv.port, b"*1\r\n$3\r\nabcd\r\n").startswith(b"-ERR Protocol error")
    rng = random.Random(1)
    pieces = [b"*", b"$", b"\r\n", b"1", b"3", b"-1", b"SET", b"GET", b"DEL", b"k", b"\x00", b"99999", b" "]
    for _ in range(400):
        m = b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 30)))
        raw(srv.port, m, read=rng.random() < 0.1)
    for _ in range(100):
        raw(srv.port, os.urandom(rng.randrange(1, 2000)), read=False)
    assert srv.alive()
    r = srv.client()
    assert r.ping() and r.set("after", "fuzz") and r.get("after") == b"fuzz"


def test_full_region(tmp):
    srv = Server(os.path.join(tmp, "full.pool"), region_mib=1)
    r = srv.client()
    stored = []
    val = b"v" * 4000
    for i in range(10_000):
        try:
            r.set(f"f{i}", val)
        except redis.ResponseError as e:
            assert "region is full" in str(e), e
            break
        stored.append(f"f{i}")
    else:
        raise AssertionError("a 1 MiB region took 40 MB")
    assert len(stored) > 50
    assert r.dbsize() == len(stored)
    for k in stored[:: max(1, len(stored) // 20)]:
        assert r.get(k) == val
    assert r.flushall() and r.dbsize() == 0
    assert r.set("again", val) and r.get("again") == val
    srv.stop()


def value_of(key, version):
    """A value whose every byte depends on its key and version, of a length that varies:
    a torn or mixed value cannot pass for another."""
    rng = random.Random(f"{key}/{version}")
    return rng.randbytes(rng.randrange(0, 600))


def test_sigkill(tmp):
    pool = os.path.join(tmp, "kill.pool")
    # Per key: the value now known to be durable (None: absent), and per round the values
    # sent but not acknowledged, each of which may or may not have survived.
    durable = {}
    rng = random.Random(2026)
    writers = 4
    total_acked = 0
    for rnd in range(ROUNDS):
        srv = Server(pool)
        r = srv.client()
        # Everything acknowledged before is here, whole.
        keys = sorted(durable)
        p = r.pipeline(transaction=False)
        for k in keys:
            p.get(k)
        got = p.execute() if keys else []
        for k, v in zip(keys, got):
            assert v == durable[k], f"round {rnd}: {k}: {v!r:.60} != {durable[k]!r:.60}"
        assert r.dbsize() == sum(v is not None for v in durable.values())
        pending = [dict() for _ in range(writers)]  # key -> list of candidate values
        acked = [dict() for _ in range(writers)]
        stop = threading.Event()

        def work(t, seed):
            wr = random.Random(seed)
            c = srv.client()
            version = 0
            try:
                while not stop.is_set():
                    batch = []
                    for _ in range(wr.choice((1, 1, 1, 4, 16))):
                        key = f"t{t}:{wr.randrange(400)}"
                        version += 1
                        v = None if wr.random() < 0.15 else value_of(key, f"{rnd}.{version}")
                        batch.append((key, v))
                    for key, v in batch:
                        pending[t].setdefault(key, []).append(v)
                    p = c.pipeline(transaction=False)
                    for key, v in batch:
                        if v is None:
                            p.delete(key)
                        else:
                            p.set(key, v)
                    res = p.execute()
                    for (key, v), ok in zip(batch, res):
                        assert ok is True or v is None, (key, ok)
                        acked[t][key] = v
                        assert pending[t][key].pop(0) is v
            except (redis.ConnectionError, redis.TimeoutError, ConnectionResetError, BrokenPipeError):
                pass

        ts = [threading.Thread(target=work, args=(t, rng.random())) for t in range(writers)]
        for t in ts:
            t.start()
        time.sleep(rng.uniform(0.3, 1.2))
        assert srv.alive(), "kvserver stopped during traffic (verify mode failed?)"
        srv.kill()
        stop.set()
        for t in ts:
            t.join()
        # Now reopen and resolve: each key holds its last acknowledged value or one of
        # the values sent after it.
        srv = Server(pool)
        r = srv.client()
        for t in range(writers):
            for key in set(acked[t]) | set(pending[t]):
                base = acked[t].get(key, durable.get(key))
                candidates = [base] + pending[t].get(key, [])
                v = r.get(key)
                assert any(v == c for c in candidates), f"round {rnd}: {key}: {v!r:.60} is none of {len(candidates)}"
                durable[key] = v
            total_acked += len(acked[t])
        srv.stop()
    print(f"kvserver: {ROUNDS} SIGKILLs during traffic, {total_acked} keys acknowledged across rounds, all found whole")


def main():
    srv = Server(os.path.join(DIR, "kv.pool"))
    try:
        test_commands(srv)
        test_malformed(srv)
        # Survives a restart of its own.
        srv.client().set("persist", "yes")
        srv.stop()
        srv = Server(os.path.join(DIR, "kv.pool"))
        assert srv.client().get("persist") == b"yes"
    finally:
        if srv.alive():
            srv.stop()
    test_full_region(DIR)
    test_sigkill(DIR)
    print("kvserver: all checks passed")


if __name__ == "__main__":
    main()
