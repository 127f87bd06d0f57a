"""$group over a collection, beside $match + $count over the same one.

    python benchmarks/agg_group.py [--docs 1000000] [--keys 1000] [--reps 5] [--dir DIR]

Loads bench.g with --docs documents {_id: i, k: i % keys, v: <random int>,
x: <random double>, s: <8-character string>} through pymongo insert_many
(batches of 10,000), then times, --reps times each and alternating which
goes first:

  group   [{$group: {_id: "$k", n: {$sum: 1}, t: {$sum: "$v"}, a: {$avg: "$x"}}}]
  count   [{$match: {v: {$gte: 0}}}, {$count: "n"}]     (every document matches)

Both read every document of the collection through the pipeline (no index
on v), so their difference is what $group's hashing and accumulators cost
over the matcher.  Reported per pipeline: documents per second (min, median,
max over the repetitions) and the per-round ratio group/count of the times.
The server runs in this process (multifora.Server); the client is pymongo
over loopback.  The answers are checked against the loaded data.
"""
from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pymongo

import multifora

GROUP = [{"$group": {"_id": "$k", "n": {"$sum": 1}, "t": {"$sum": "$v"},
                     "a": {"$avg": "$x"}}}]
COUNT = [{"$match": {"v": {"$gte": 0}}}, {"$count": "n"}]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    a = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="mf-agg-", dir=a.dir))
    srv = multifora.Server(str(root / "db"), port=0)
    srv.start()
    try:
        client = pymongo.MongoClient(f"mongodb://127.0.0.1:{srv.port}/?directConnection=true")
        coll = client.bench.g
        rng = random.Random(7)
        total_v = 0
        t0 = time.perf_counter()
        batch = []
        for i in range(a.docs):
            v = rng.randrange(0, 1_000_000)
            total_v += v
            batch.append({"_id": i, "k": i % a.keys, "v": v, "x": rng.random(),
                          "s": "%08x" % rng.getrandbits(32)})
            if len(batch) == 10_000:
                coll.insert_many(batch, ordered=False)
                batch = []
        if batch:
            coll.insert_many(batch, ordered=False)
        load = time.perf_counter() - t0
        print(f"loaded {a.docs:,} documents in {load:.1f} s "
              f"({a.docs / load:,.0f} docs/s through insert_many)")

        times = {"group": [], "count": []}
        for r in range(a.reps):
            order = ("group", "count") if r % 2 == 0 else ("count", "group")
            for name in order:
                t = time.perf_counter()
                out = list(coll.aggregate(GROUP if name == "group" else COUNT,
                                          allowDiskUse=True))
                times[name].append(time.perf_counter() - t)
                if name == "group":
                    assert len(out) == min(a.keys, a.docs), len(out)
                    assert sum(d["n"] for d in out) == a.docs
                    assert sum(d["t"] for d in out) == total_v
                else:
                    assert out == [{"n": a.docs}], out
        print(f"\n{a.docs:,} documents, {a.keys:,} keys, {a.reps} repetitions each "
              "(docs/s: min / median / max)")
        for name, pipe in (("group", GROUP), ("count", COUNT)):
            rates = sorted(a.docs / t for t in times[name])
            print(f"  {name:6} {rates[0]:>13,.0f} {statistics.median(rates):>13,.0f} "
                  f"{rates[-1]:>13,.0f}   {pipe}")
        ratios = sorted(g / c for g, c in zip(times["group"], times["count"]))
        print(f"  time ratio group/count per round: min {ratios[0]:.2f}, "
              f"median {statistics.median(ratios):.2f}, max {ratios[-1]:.2f}")
        client.close()
    finally:
        srv.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
