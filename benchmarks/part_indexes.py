"""indexes: what each index kind costs a write and saves a query (issue 49).

One served replica-set-less server (`python -m multifora serve`), pymongo.

  writes           insert_many in batches of 1,000 into an empty collection
                   with one secondary index of the kind against the same
                   documents with none (ascending {a: 1} shown too, for
                   scale); alternating rounds, a fresh collection each.
                   Each row's ratio is with the index over without (below
                   1: slower with it).
  hashed lookups   equality queries on a unique-valued string field of
                   100,000 documents through {a: "hashed"} against the same
                   queries as a collection scan (hint $natural); the ratio
                   is how many times faster the index is.

Sizes: --full 100,000 documents and 5 rounds; quick 20,000 and 3; smoke
1,000 and 1.
"""
from __future__ import annotations

import random
import time

import pymongo


def _docs(n, seed):
    rng = random.Random(seed)
    return [{"_id": i, "a": f"user{rng.randrange(10 ** 9)}", "n": rng.randrange(10 ** 6),
             "pad": "x" * 50} for i in range(n)]


def run(ctx) -> dict:
    n = 100_000 if ctx.full else 1_000 if ctx.smoke else 20_000
    rounds = 5 if ctx.full else 1 if ctx.smoke else 3
    srv = ctx.start_multifora()
    client = pymongo.MongoClient(srv.uri)
    db = client.bench
    docs = _docs(n, 49)
    kinds = {"none": None, "ascending": [("a", 1)], "hashed": [("a", "hashed")]}

    def load(kind: str) -> float:
        db.drop_collection("w")
        if kinds[kind]:
            db.w.create_index(kinds[kind])
        t = time.perf_counter()
        for i in range(0, n, 1000):
            db.w.insert_many(docs[i:i + 1000], ordered=False)
        return n / (time.perf_counter() - t)

    ctx.log(f"writes: {rounds} rounds of {n} documents per kind")
    w = ctx.alternate(rounds, load, tuple(kinds))
    db.drop_collection("w")

    # -- lookups through the hashed index and by a scan
    for i in range(0, n, 1000):
        db.q.insert_many(docs[i:i + 1000])
    db.q.create_index([("a", "hashed")])
    rng = random.Random(1)
    keys = [docs[rng.randrange(n)]["a"] for _ in range(200)]

    def lookups(side: str) -> float:
        hint = "a_hashed" if side == "hashed" else {"$natural": 1}
        batch = keys[:100] if side == "hashed" else keys[:5]
        t = time.perf_counter()
        for k in batch:
            if len(list(db.q.find({"a": k}, hint=hint))) != 1:
                raise RuntimeError(f"{k} not found once")
        return len(batch) / (time.perf_counter() - t)

    ctx.log(f"lookups: {rounds} rounds through the hashed index and by a scan")
    q = ctx.alternate(rounds, lookups, ("hashed", "scan"))
    client.close()
    ctx.stop_all()
    return {"part": "indexes", "rows": [
        ctx.row("insert_many with an ascending index vs none", "docs/s", w["ascending"],
                floor=w["none"], note=f"{n} documents, batches of 1,000; floor: no index"),
        ctx.row("insert_many with a hashed index vs none", "docs/s", w["hashed"],
                floor=w["none"], note=f"{n} documents, batches of 1,000; floor: no index"),
        ctx.row("equality lookup through a hashed index vs a collection scan", "queries/s",
                q["hashed"], floor=q["scan"],
                note=f"{n} documents; floor: the same queries hinted $natural"),
    ]}
