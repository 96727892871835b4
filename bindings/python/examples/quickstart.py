import pmkv
with pmkv.open("words.pool", mode="adr") as db:  # creates it (engine "hart")
    db["hello"] = "world"  # str is stored as UTF-8; results are bytes
    assert db[b"hello"] == b"world" and "hello" in db
    with db.batch() as batch:  # all or nothing, across a crash too
        batch["a"] = "1"
        del batch["hello"]
    for key, value in db.scan(start=b"a", end=b"m", limit=10):
        print(key, value)
