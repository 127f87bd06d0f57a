"""find_one and insert_one latency: MultiforaDB beside a do-nothing wire stub.

    python benchmarks/crud_latency.py [--rounds 7] [--ops 2000] [--preload 10000]

Same arrangement as ping_latency.py (_harness.py): MultiforaDB served as a
subprocess and stub_server.c, each on loopback with one pymongo client in
this process, rounds alternating A, B then B, A.  MultiforaDB's collection
bench.c is first loaded with --preload small documents
{_id: k, n: k, s: <64 chars>}, k = 0 .. preload-1, so that each
``find_one({"_id": k})`` (k drawn at random from that range) is one _id
index lookup.  ``insert_one`` inserts a document of the same shape with a
fresh _id.  A round times --ops calls of one operation on one side; each
operation has its own alternation.  The stub answers both calls with the
same fixed body (an empty cursor, n: 1), so each ratio is the
server's own cost for that operation on top of the driver and the loopback
round trip.  Reported per operation: each side's median of round medians
and its range across rounds, and the per-round ratio (min, median, max).
"""
from __future__ import annotations

import argparse
import itertools
import random
import sys

import _harness as h

PAD = "s" * 64


def small_doc(k: int) -> dict:
    return {"_id": k, "n": k, "s": PAD}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ops", type=int, default=2000, help="calls per round and side")
    ap.add_argument("--preload", type=int, default=10000)
    args = ap.parse_args(argv)

    rng = random.Random(20261129)
    keys = [rng.randrange(args.preload) for _ in range(args.ops)]
    with h.two_servers() as clients:
        mf = clients["multifora"].bench.c
        for start in range(0, args.preload, 1000):
            mf.insert_many([small_doc(k) for k in range(start, min(start + 1000, args.preload))])
        coll = {side: c.bench.c for side, c in clients.items()}
        # Fresh _ids for every insert, on both sides alike.
        fresh = {side: itertools.count(args.preload) for side in h.SIDES}
        ops = {
            "find_one": {side: (lambda i, f=coll[side].find_one: f({"_id": keys[i % len(keys)]}))
                         for side in h.SIDES},
            "insert_one": {side: (lambda i, ins=coll[side].insert_one, ids=fresh[side]:
                                  ins(small_doc(next(ids))))
                           for side in h.SIDES},
        }
        for op in ops.values():  # connect and warm up
            for side in h.SIDES:
                h.time_calls(op[side], 200)

        medians = {name: h.alternate_rounds(args.rounds,
                                            lambda side, op=op: h.time_calls(op[side], args.ops))
                   for name, op in ops.items()}

        # The multifora side did real work: check it.
        inserted = next(fresh["multifora"]) - args.preload
        count = clients["multifora"].bench.command("count", "c")["n"]
        probe = mf.find_one({"_id": keys[0]})
        ok = count == args.preload + inserted and probe == small_doc(keys[0])
        h.header("find_one / insert_one round trip", args.rounds, args.ops, "calls")
        print(f"multifora collection: {args.preload} preloaded + {inserted} inserted = "
              f"{count} documents ({'correct' if ok else 'WRONG'})")
        for name in ops:
            h.report(medians[name], name)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
