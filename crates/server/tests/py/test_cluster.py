"""pmkv serve --cluster driven by redis-py's RedisCluster: three nodes on loopback, every
command group routed by the client through the slot map and MOVED/ASK redirects.

Run by crates/server/tests/run_py.sh, which builds `pmkv` and passes its path in PMKV_BIN.
"""
import os
import subprocess

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

PMKV = os.environ.get("PMKV_BIN", "target/debug/pmkv")


def start(pool, port=0):
    p = subprocess.Popen(
        [PMKV, "serve", str(pool), "--cluster", "--port", str(port), "--mode", "adr"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = p.stdout.readline()
    return p, int(line.strip().rsplit(":", 1)[1])


def push(ports, epoch, ranges):
    """The topology: node i owns ranges[i] ("a-b ..."); pushed to every node."""
    ids = [redis.Redis(port=p).execute_command("CLUSTER", "MYID").decode() for p in ports]
    text = "".join(f"{i} 127.0.0.1:{p} {r}\n" for i, p, r in zip(ids, ports, ranges))
    for p in ports:
        assert redis.Redis(port=p).execute_command("PMKV.TOPOLOGY", "SET", epoch, text)
    return ids


@pytest.fixture
def cluster(tmp_path):
    procs = [start(tmp_path / f"n{i}.pool") for i in range(3)]
    ports = [port for _, port in procs]
    push(ports, 1, ["0-5460", "5461-10922", "10923-16383"])
    state = {"procs": procs, "ports": ports, "dir": tmp_path}
    yield state
    for p, port in state["procs"]:
        try:
            redis.Redis(port=port).shutdown()
        except (redis.exceptions.ConnectionError, redis.exceptions.ResponseError):
            pass
        assert p.wait(timeout=10) == 0


def client(ports):
    return RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports], decode_responses=False)


def test_the_client_sees_three_masters_and_keys_spread(cluster):
    rc = client(cluster["ports"])
    assert len(rc.get_primaries()) == 3
    for i in range(300):
        assert rc.set(f"key:{i}", i)
    assert all(rc.get(f"key:{i}") == str(i).encode() for i in range(300))
    # Each node holds exactly the keys of its slots.
    per_node = [redis.Redis(port=p).dbsize() for p in cluster["ports"]]
    assert sum(per_node) == 300 and all(n > 50 for n in per_node)
    for p in cluster["ports"]:
        r = redis.Redis(port=p)
        me = r.execute_command("CLUSTER", "MYID")
        for k in r.keys("*"):
            owner = rc.nodes_manager.get_node_from_slot(rc.keyslot(k))
            assert owner.port == p, (k, me)
    assert rc.cluster_keyslot("foo") == 12182 and rc.keyslot("{user1}:a") == rc.keyslot("user1")


def test_every_command_group_routes(cluster):
    rc = client(cluster["ports"])
    # Strings.
    assert rc.set("s", "v") and rc.append("s", "w") == 2 and rc.getrange("s", 0, 0) == b"v"
    assert rc.incr("n") == 1 and rc.incrbyfloat("n", 0.5) == 1.5
    assert rc.mset({"{t}a": "1", "{t}b": "2"}) and rc.mget("{t}a", "{t}b") == [b"1", b"2"]
    assert rc.getdel("{t}a") == b"1" and rc.exists("{t}a") == 0
    # Hashes.
    assert rc.hset("h", mapping={"f": "1", "g": "2"}) == 2
    assert rc.hgetall("h") == {b"f": b"1", b"g": b"2"} and rc.hlen("h") == 2
    assert sorted(rc.hscan_iter("h")) == [(b"f", b"1"), (b"g", b"2")]
    # Expiry.
    assert rc.expire("h", 100) and 0 < rc.ttl("h") <= 100 and rc.persist("h")
    assert rc.set("e", "x", px=100000) and rc.pttl("e") > 0
    # Keys.
    assert rc.type("h") == b"hash" and rc.delete("s") == 1
    # Transactions on one slot (hash tags), scripts with their keys.
    p = rc.pipeline(transaction=True)
    p.set("{acct}x", 10).incrby("{acct}x", 5).get("{acct}x")
    got = p.execute()
    # redis-py's cluster transactions return SET's raw reply.
    assert got[0] in (True, b"OK") and got[1:] == [15, b"15"]
    assert rc.eval("return redis.call('GET', KEYS[1])", 1, "{acct}x") == b"15"
    # Non-transactional pipelines split across nodes by the client.
    p = rc.pipeline(transaction=False)
    for i in range(100):
        p.set(f"p{i}", i)
    assert all(p.execute())
    # pmkv's range command on one slot's keys.
    for c in "abc":
        rc.set("{r}" + c, c)
    node = rc.get_node_from_key("{r}a")
    got = rc.execute_command("PMKV.RANGE", "{r}a", "{r}c", target_nodes=node)
    assert got == [b"{r}a", b"a", b"{r}b", b"b"]


def test_crossslot_and_redirects_on_a_plain_connection(cluster):
    a = redis.Redis(port=cluster["ports"][0])
    # redis-py turns the error codes into exception classes and drops them from the text.
    with pytest.raises(redis.exceptions.ClusterCrossSlotError):
        a.mget("foo", "bar")
    with pytest.raises(redis.exceptions.MovedError, match="^12182 127.0.0.1:"):
        a.get("foo")
    p = a.pipeline(transaction=True)
    p.set("{x}1", 1).set("{y}1", 1)
    with pytest.raises(redis.exceptions.ResponseError):
        p.execute()
    assert a.execute_command("CLUSTER", "KEYSLOT", "foo") == 12182
    info = a.execute_command("CLUSTER", "INFO").decode()
    assert "cluster_state:ok" in info and "cluster_slots_assigned:16384" in info


def test_a_restarted_node_serves_its_slots_again(cluster):
    rc = client(cluster["ports"])
    for i in range(200):
        rc.set(f"k{i}", i)
    p, port = cluster["procs"][1]
    redis.Redis(port=port).shutdown()
    assert p.wait(timeout=10) == 0
    cluster["procs"][1] = start(cluster["dir"] / "n1.pool", port)
    rc = client(cluster["ports"])
    assert all(rc.get(f"k{i}") == str(i).encode() for i in range(200))
    topo = redis.Redis(port=port).execute_command("PMKV.TOPOLOGY", "GET")
    assert topo[0] == 1 and b"5461-10922" in topo[1]


def test_a_slot_moves_with_ask_in_between(cluster):
    ports = cluster["ports"]
    rc = client(ports)
    slot = rc.keyslot("foo")  # 12182, on the third node
    src, dst = redis.Redis(port=ports[2]), redis.Redis(port=ports[0])
    src_id, dst_id = (r.execute_command("CLUSTER", "MYID").decode() for r in (src, dst))
    rc.set("foo", "old")
    rc.hset("{foo}h", mapping={"f": "v"})
    assert dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
    assert src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
    assert src.execute_command("MIGRATE", "127.0.0.1", ports[0], "", 0, 5000, "REPLACE", "KEYS", "foo")
    # foo is gone from the source: the client follows ASK; {foo}h is still served there.
    assert rc.get("foo") == b"old" and rc.hget("{foo}h", "f") == b"v"
    rc.set("{foo}new", "1")  # absent on the source: made on the target through ASK
    keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)
    assert keys == [b"{foo}h"]
    assert src.execute_command("MIGRATE", "127.0.0.1", ports[0], "", 0, 5000, "REPLACE", "KEYS", *keys)
    assert src.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    assert dst.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 3
    ids = [redis.Redis(port=p).execute_command("CLUSTER", "MYID").decode() for p in ports]
    text = (
        f"{ids[0]} 127.0.0.1:{ports[0]} 0-5460 {slot}\n{ids[1]} 127.0.0.1:{ports[1]} 5461-10922\n"
        f"{ids[2]} 127.0.0.1:{ports[2]} 10923-{slot - 1} {slot + 1}-16383\n"
    )
    for p in (ports[0], ports[2], ports[1]):
        assert redis.Redis(port=p).execute_command("PMKV.TOPOLOGY", "SET", 2, text)
    with pytest.raises(redis.exceptions.ResponseError, match="stale"):
        src.execute_command("PMKV.TOPOLOGY", "SET", 1, text)
    with pytest.raises(redis.exceptions.MovedError, match=f"^{slot} "):
        src.get("foo")
    rc = client(ports)
    assert rc.get("foo") == b"old" and rc.hgetall("{foo}h") == {b"f": b"v"} and rc.get("{foo}new") == b"1"


def test_redis_cli_follows_redirects(cluster):
    """`redis-cli -c` (cluster mode) asked at the first node reaches every key's owner."""
    ports = cluster["ports"]

    def cli(*args):
        out = subprocess.run(
            ["redis-cli", "-c", "-p", str(ports[0]), *args], capture_output=True, text=True, timeout=30
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    rc = client(ports)
    keys = [f"cli:{i}" for i in range(30)]
    owners = {rc.nodes_manager.get_node_from_slot(rc.keyslot(k)).port for k in keys}
    assert owners == set(ports), "the keys should land on every node"
    for k in keys:
        assert cli("set", k, k.upper()) == "OK"
    for k in keys:
        assert cli("get", k) == k.upper()
        assert rc.get(k) == k.upper().encode()
    assert cli("cluster", "keyslot", "foo") == "12182"
    # A multi-key command on one slot (hash tag) is routed whole.
    assert cli("mset", "{tag}a", "1", "{tag}b", "2") == "OK"
    assert cli("mget", "{tag}a", "{tag}b").split() == ["1", "2"]
