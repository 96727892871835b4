"""Move an amount between two accounts with one atomic batch: after a crash at any point,
both balances have changed or neither has. Engine "nbtree" (any engine with atomic
batches will do: hart, nbtree, mangosteen)."""
import pmkv

with pmkv.open("bank.pool", engine="nbtree") as db:
    if "alice" not in db:
        with db.batch() as b:
            b["alice"], b["bob"] = "100", "0"

    def transfer(src: str, dst: str, amount: int) -> None:
        have, other = int(db[src]), int(db[dst])
        if have < amount:
            raise ValueError(f"{src} has {have}, not {amount}")
        with db.batch() as b:  # both writes, or (after a crash) neither
            b[src] = str(have - amount)
            b[dst] = str(other + amount)

    transfer("alice", "bob", 30)
    try:
        transfer("bob", "alice", 1000)
    except ValueError as e:
        print("refused:", e)
    print({k.decode(): int(v) for k, v in db.items()})
