"""txn: what a multi-document transaction costs in the one-member replica set
(issue 47), side by side with the same writes made without one.

One server (`python -m multifora serve --replSet rs0`), pymongo with its
defaults (retryable writes).  Each round measures, alternating the order:

  10 inserts       ten insert_one, each its own durable write, against one
                   transaction of the same ten inserts and its commit (one
                   engine write, one log sync): the row's ratio is the
                   transaction over the ten writes (below 1: cheaper);
  read-modify-write  find two documents and update both, in a transaction
                   (commit) against the same two updates without one.

  5-update transactions, N clients   N threads (1, 4, 16), each on five
                   documents of its own, commit transactions of five $inc
                   updates as fast as they can, against the same five
                   updates made as plain durable writes: commits per second
                   (groups of five per second for the floor; above 1: the
                   transactions commit more groups).

Sizes: --full 15 rounds of 200 repetitions, 5 rounds of 3 s per client
count; quick 5 x 50, 3 x 1 s; smoke 2 x 5, 1 x 0.2 s.
"""
from __future__ import annotations

import statistics
import threading
import time

import pymongo


def run(ctx) -> dict:
    rounds, reps = (15, 200) if ctx.full else (2, 5) if ctx.smoke else (5, 50)
    srv = ctx.start_multifora(args=["--replSet", "rs0"])
    client = pymongo.MongoClient(srv.uri)
    coll = client.bench.txn
    coll.insert_many([{"_id": f"acct{i}", "bal": 1000} for i in range(100)])
    counter = [0]

    def ten_inserts(in_txn: bool) -> float:
        times = []
        for _ in range(reps):
            base = counter[0]
            counter[0] += 10
            t = time.perf_counter()
            if in_txn:
                with client.start_session() as s, s.start_transaction():
                    for i in range(10):
                        coll.insert_one({"_id": base + i, "v": i}, session=s)
            else:
                for i in range(10):
                    coll.insert_one({"_id": base + i, "v": i})
            times.append((time.perf_counter() - t) * 1000)
        return statistics.median(times)

    def read_modify_write(in_txn: bool) -> float:
        times = []
        for r in range(reps):
            a, b = f"acct{r % 100}", f"acct{(r + 1) % 100}"
            t = time.perf_counter()
            if in_txn:
                with client.start_session() as s, s.start_transaction():
                    coll.find_one({"_id": a}, session=s)
                    coll.find_one({"_id": b}, session=s)
                    coll.update_one({"_id": a}, {"$inc": {"bal": -1}}, session=s)
                    coll.update_one({"_id": b}, {"$inc": {"bal": 1}}, session=s)
            else:
                coll.find_one({"_id": a})
                coll.find_one({"_id": b})
                coll.update_one({"_id": a}, {"$inc": {"bal": -1}})
                coll.update_one({"_id": b}, {"$inc": {"bal": 1}})
            times.append((time.perf_counter() - t) * 1000)
        return statistics.median(times)

    crounds, secs = (5, 3.0) if ctx.full else (1, 0.2) if ctx.smoke else (3, 1.0)
    grp = client.bench.groups
    grp.insert_many([{"_id": f"g{c}-{i}", "n": 0} for c in range(16) for i in range(5)])

    def groups_per_second(nclients: int, in_txn: bool) -> float:
        stop, counts = threading.Event(), [0] * nclients

        def work(c: int) -> None:
            ids = [f"g{c}-{i}" for i in range(5)]
            while not stop.is_set():
                if in_txn:
                    with client.start_session() as s, s.start_transaction():
                        for i in ids:
                            grp.update_one({"_id": i}, {"$inc": {"n": 1}}, session=s)
                else:
                    for i in ids:
                        grp.update_one({"_id": i}, {"$inc": {"n": 1}})
                counts[c] += 1

        ts = [threading.Thread(target=work, args=(c,)) for c in range(nclients)]
        t = time.perf_counter()
        for th in ts:
            th.start()
        time.sleep(secs)
        stop.set()
        for th in ts:
            th.join()
        return sum(counts) / (time.perf_counter() - t)

    ctx.log(f"{rounds} rounds of {reps}; {crounds} x {secs} s per client count")
    ins = ctx.alternate(rounds, lambda side: ten_inserts(side == "txn"), ("txn", "plain"))
    rmw = ctx.alternate(rounds, lambda side: read_modify_write(side == "txn"), ("txn", "plain"))
    conc = {n: ctx.alternate(crounds, lambda side, n=n: groups_per_second(n, side == "txn"),
                             ("txn", "plain")) for n in (1, 4, 16)}
    total = sum(d["bal"] for d in coll.find({"_id": {"$regex": "^acct"}}))
    client.close()
    ctx.stop_all()
    if total != 100 * 1000:
        raise RuntimeError(f"the transfers lost money: {total}")
    return {"part": "txn", "rows": [
        ctx.row("10 inserts: one transaction vs 10 durable insertOne", "ms", ins["txn"],
                floor=ins["plain"], note="floor: the same 10 inserts, each its own write"),
        ctx.row("read-modify-write of 2 documents: transaction vs plain", "ms", rmw["txn"],
                floor=rmw["plain"], note="floor: the same 2 finds and 2 updates, no transaction"),
    ] + [ctx.row(f"5-update transactions, {n} client{'s' if n > 1 else ''}", "commits/s",
                 conc[n]["txn"], floor=conc[n]["plain"],
                 note="floor: the same 5 updates, each a durable write (groups/s)")
         for n in (1, 4, 16)]}
