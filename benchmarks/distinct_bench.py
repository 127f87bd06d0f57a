"""distinct over an index (DISTINCT_SCAN) against the same distinct scanning
the collection, side by side.

    python benchmarks/distinct_bench.py [--docs 200000] [--reps 7] [--values 20]

The server runs in this process (``multifora.Server``, port 0) with one
pymongo client over loopback.  One collection of --docs documents
{_id: i, k: i % --values, u: <uniform random double>, pad: 60 bytes} gets
indexes k_1 and u_1.  For each key (k: few values; u and _id: every value
distinct) each repetition runs the distinct command twice, in alternating
order: as planned (explain must show a DISTINCT_SCAN) and with hint
{$natural: 1} (a collection scan).  The two answers must be equal.
Reported per key: each plan's time per command (min/median/max) and the
per-repetition ratio scan/DISTINCT_SCAN (min, median, max): above 1, the
index is faster.  Warm cache.  The exit status is 1 if a check failed.
"""
from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time

import pymongo

import multifora


def leaf_stage(plan):
    """The stage at the bottom of a plan: the one that reads."""
    while "inputStage" in plan:
        plan = plan["inputStage"]
    return plan["stage"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--values", type=int, default=20)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="distinct_bench_")
    srv = multifora.Server(f"{tmp}/db", port=0)
    srv.start()
    ok = True
    try:
        client = pymongo.MongoClient(srv.uri, maxPoolSize=1)
        db = client.bench
        rng = random.Random(1)
        batch = []
        for i in range(args.docs):
            batch.append({"_id": i, "k": i % args.values, "u": rng.random(), "pad": "x" * 60})
            if len(batch) == 10_000:
                db.d.insert_many(batch)
                batch = []
        if batch:
            db.d.insert_many(batch)
        db.d.create_index("k")
        db.d.create_index("u")
        print(f"{args.docs} documents, {args.reps} repetitions per key (warm cache)")
        for key in ("k", "u", "_id"):
            plan = db.command("explain", {"distinct": "d", "key": key},
                              verbosity="queryPlanner")["queryPlanner"]["winningPlan"]
            if leaf_stage(plan) != "DISTINCT_SCAN":
                print(f"FAIL {key}: planned {leaf_stage(plan)}, not a DISTINCT_SCAN")
                ok = False
            times = {"index": [], "scan": []}
            for rep in range(args.reps):
                order = ("index", "scan") if rep % 2 == 0 else ("scan", "index")
                answers = {}
                for which in order:
                    cmd = {"distinct": "d", "key": key}
                    if which == "scan":
                        cmd["hint"] = {"$natural": 1}
                    t0 = time.perf_counter()
                    answers[which] = db.command(cmd)["values"]
                    times[which].append(time.perf_counter() - t0)
                if sorted(answers["index"]) != sorted(answers["scan"]):
                    print(f"FAIL {key}: the two plans disagree")
                    ok = False
            print(f"{key}: {len(answers['index'])} values")
            for which in ("index", "scan"):
                ms = [t * 1000 for t in times[which]]
                print(f"  {which:<6} ms min {min(ms):.2f} median {statistics.median(ms):.2f} "
                      f"max {max(ms):.2f}")
            ratios = [s / i for s, i in zip(times["scan"], times["index"])]
            print(f"  ratio scan/index per repetition: min {min(ratios):.2f} "
                  f"median {statistics.median(ratios):.2f} max {max(ratios):.2f}")
        client.close()
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
