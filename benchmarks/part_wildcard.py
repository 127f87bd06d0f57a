"""wildcard: what a {"$**": 1} index costs to keep and what it saves (issue 49).

One server (`python -m multifora serve`), pymongo.

  insert cost      insert_many of documents with 12 leaves (nested documents,
                   one array of 3 numbers) in batches of 1,000 into a new
                   collection with a {"$**": 1} index against one with none;
                   alternating rounds.  Microseconds per document; the
                   row's ratio is with over without.
  nested equality  find({"m.k.v7": x}) (10 matching documents) over 100,000
                   such documents, through the wildcard index against a
                   collection scan ({$natural: 1} hint) of the same
                   collection; alternating rounds of 20 queries each.  The
                   row's ratio is the collection scan over the index (above
                   1: the index is faster).

Sizes: --full 50,000 documents per insert round and 7 rounds, 100,000 for the
query; quick 20,000 and 3 rounds, 100,000; smoke 500 and 1 round, 2,000.
"""
from __future__ import annotations

import time


def _doc(i: int) -> dict:
    return {"_id": i, "name": f"n{i}", "n": i,
            "m": {"a": i % 7, "b": f"s{i % 13}", "k": {f"v{j}": (i * 31 + j) % 10000
                                                        for j in range(8)}},
            "tags": [i % 5, i % 11, i % 17]}


def run(ctx) -> dict:
    per_round = 500 if ctx.smoke else 50_000 if ctx.full else 20_000
    rounds = 1 if ctx.smoke else 7 if ctx.full else 3
    qdocs = 2_000 if ctx.smoke else 100_000
    srv = ctx.start_multifora()
    client = srv.client()
    db = client.bench
    seq = [0]

    def inserts(side: str) -> float:
        name = f"w{seq[0]}"
        seq[0] += 1
        coll = db[name]
        db.create_collection(name)
        if side == "wildcard":
            coll.create_index([("$**", 1)])
        t = time.perf_counter()
        for at in range(0, per_round, 1000):
            coll.insert_many([_doc(i) for i in range(at, min(at + 1000, per_round))],
                             ordered=False)
        us = (time.perf_counter() - t) / per_round * 1e6
        coll.drop()
        return us

    ctx.log(f"{rounds} rounds of {per_round} inserts, $** index vs none")
    ins = ctx.alternate(rounds, inserts, ("wildcard", "none"))

    coll = db.q
    for at in range(0, qdocs, 1000):
        coll.insert_many([_doc(i) for i in range(at, min(at + 1000, qdocs))], ordered=False)
    coll.create_index([("$**", 1)])
    # v7 = (31 i + 7) % 10000: 10 documents per value at 100,000
    targets = [(31 * i + 7) % 10000 for i in range(20)]
    plan = coll.find({"m.k.v7": targets[0]}).explain()["queryPlanner"]["winningPlan"]
    if plan["inputStage"]["stage"] != "IXSCAN":
        raise RuntimeError(f"the wildcard index is not used: {plan}")

    def queries(side: str) -> float:
        hint = [("$natural", 1)] if side == "scan" else "$**_1"
        t = time.perf_counter()
        for v in targets:
            list(coll.find({"m.k.v7": v}).hint(hint))
        return (time.perf_counter() - t) / len(targets) * 1e3

    qrounds = 1 if ctx.smoke else 5
    ctx.log(f"{qrounds} rounds of {len(targets)} queries over {qdocs} documents")
    q = ctx.alternate(qrounds, queries, ("index", "scan"))
    ctx.stop_all()
    return {"part": "wildcard", "rows": [
        ctx.row('insert_many with a {"$**": 1} index vs none', "us/doc", ins["wildcard"],
                floor=ins["none"],
                note=f"{per_round} documents of 12 leaves per round, batches of 1,000; "
                     "floor: no secondary index"),
        ctx.row(f"find on a nested path, {qdocs} documents: collection scan / wildcard index",
                "ms", q["scan"], floor=q["index"],
                note="10 matches per query; the ratio is how many times faster the index is"),
    ]}
