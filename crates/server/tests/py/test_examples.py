"""The server examples a user copies (crates/server/examples) run as they are against
`pmkv serve`: the redis-cli script and the redis-py program, each on a fresh pool of each
engine a user would pick."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import redis

PMKV = os.environ.get("PMKV_BIN", "target/debug/pmkv")
EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def _serve(pool, engine):
    p = subprocess.Popen(
        [PMKV, "serve", str(pool), "--port", "0", "--engine", engine], stdout=subprocess.PIPE, text=True
    )
    port = int(p.stdout.readline().strip().rsplit(":", 1)[1])
    return p, port


def _stop(p, port):
    redis.Redis(port=port).shutdown()
    assert p.wait(timeout=10) == 0


@pytest.mark.parametrize("engine", ["hart", "nbtree", "mangosteen"])
def test_redis_py_example(tmp_path, engine):
    p, port = _serve(tmp_path / "cart.pool", engine)
    try:
        env = dict(os.environ, PMKV_PORT=str(port))
        r = subprocess.run([sys.executable, str(EXAMPLES / "redis_py.py")], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == [
            "cart: {'apples': 3, 'pears': 0}",
            "stock: {'apples': 7, 'pears': 4}",
            "expires in an hour: True",
        ]
        assert redis.Redis(port=port).info()["pmkv_engine"] == engine
    finally:
        _stop(p, port)


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli (Debian: redis-tools) is not installed")
def test_redis_cli_example(tmp_path):
    p, port = _serve(tmp_path / "words.pool", "hart")
    try:
        env = dict(os.environ, PMKV_PORT=str(port))
        r = subprocess.run(["sh", str(EXAMPLES / "redis-cli.sh")], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["OK", "world", "1", "OK", "3600", "OK", "QUEUED", "QUEUED", "OK", "OK", "70", "30"]
    finally:
        _stop(p, port)
