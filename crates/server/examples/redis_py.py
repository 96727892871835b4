"""pmkv serve from redis-py: a cart in a hash with an expiry, and a MULTI/EXEC transaction
that moves an item from stock to the cart (both writes, or after a crash neither).
Start the server first (any engine: `--engine nbtree` when it creates the pool):
    pmkv serve cart.pool --port 6379 &
"""
import os

import redis

r = redis.Redis(port=int(os.environ.get("PMKV_PORT", "6379")))
r.hset("stock", mapping={"apples": 10, "pears": 4})
r.hset("cart:42", mapping={"apples": 0, "pears": 0})
r.expire("cart:42", 3600)  # the cart goes after an hour
with r.pipeline(transaction=True) as p:  # MULTI ... EXEC
    p.hincrby("stock", "apples", -3)
    p.hincrby("cart:42", "apples", 3)
    p.execute()
print("cart:", {k.decode(): int(v) for k, v in sorted(r.hgetall("cart:42").items())})
print("stock:", {k.decode(): int(v) for k, v in sorted(r.hgetall("stock").items())})
print("expires in an hour:", 3590 < r.ttl("cart:42") <= 3600)
