"""Secondary indexes: point lookups that do not grow with the collection, and
an indexed 1% range query against a full scan.

    python benchmarks/index_bench.py [--docs 1000000] [--small 10000]
        [--rounds 7] [--ops 2000] [--reps 7] [--batch 10000] [--keys int|str]
        [--doc-bytes 100]

The server runs in this process (``multifora.Server``, port 0, serving on
its own C threads; no Python runs on them) with one pymongo client
(``maxPoolSize=1``) over loopback TCP, as in scan_count.py.  Two collections
of documents of exactly --doc-bytes (100) BSON bytes, {_id: i, k: <unique
random key>, r: <uniform in [0, N)>, s: <padding>}, are loaded with insert_many in
batches of --batch (only the insert_many calls are timed): bench.small with
--small documents and bench.big with --docs.  Then indexes k_1 and r_1 are
built on each (timed).  k is a random 62-bit int, or its 16-hex-digit string
with --keys str.

Part 1, point lookups.  explain (executionStats) of find {k: v} on each
collection must show an IXSCAN on k_1 and totalDocsExamined 1.  Then rounds
alternate big, small, then small, big ...; a round times --ops calls on one
collection, each with a key drawn at random from that collection's keys:

  find_one     ``coll.find_one({"k": v})`` through pymongo and the socket
  in-process   ``Server.command("bench", {find, filter, limit 1,
               singleBatch})``: the same dispatcher, no socket, no driver,
               so the server's own share is less diluted by the round trip

Reported per path: each collection's median of round medians and its range,
and the per-round ratio big/small (min, median, max).  The claim is that it
stays near 1.

Part 2, a range query.  Each of --reps repetitions draws lo at random and
runs {r: {$gte: lo, $lt: lo + N/100}} (1% of the big collection) on
bench.big twice: as planned (explain must show an IXSCAN on r_1) and with
hint {$natural: 1} (a COLLSCAN of every document), alternating which goes
first.  Three forms are timed: ``list(find(...))``, every document
materialized in Python; the ``count`` command; and ``in-process``, the
find command run through ``Server._core.command`` (raw BSON in and out,
no socket, no decoding: the server's own cost, in one batch).  The forms
run in turn, so each indexed query follows a collection scan.  Every form
and plan must return the same documents (compared sorted by _id) and the
count computed from the generated data.  Reported: each plan's time per
query (min/median/max) and the per-repetition speedup unindexed/indexed
(min, median, max).

The data has just been written and fits in RAM, so every figure is
warm-cache.  The exit status is 1 if any correctness check failed.
"""
from __future__ import annotations

import argparse
import bisect
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import bson
import pymongo

import _harness as h
import multifora

DOC_BYTES = 100  # the default of --doc-bytes
SIDES = ("big", "small")


def make_keys(rng: random.Random, n: int, kind: str) -> list:
    """n distinct random keys: 62-bit ints, or their fixed-width hex strings
    (so that every document has the same size)."""
    ints = rng.sample(range(2**62), n)
    return ints if kind == "int" else [f"{x:016x}" for x in ints]


def padding(key, doc_bytes: int) -> str:
    """The 's' value that brings a document with this kind of key to
    doc_bytes of BSON."""
    base = len(bson.encode({"_id": 0, "k": key, "r": 0, "s": ""}))
    return "s" * (doc_bytes - base)


def load(coll, keys: list, rs: list, batch: int, doc_bytes: int) -> float:
    """Insert {_id: i, k: keys[i], r: rs[i], s: pad}; return the seconds
    spent inside insert_many (building the batches is not timed)."""
    pad = padding(keys[0], doc_bytes)
    spent = 0.0
    for start in range(0, len(keys), batch):
        docs = [{"_id": i, "k": keys[i], "r": rs[i], "s": pad}
                for i in range(start, min(start + batch, len(keys)))]
        t = time.perf_counter()
        coll.insert_many(docs, ordered=True)
        spent += time.perf_counter() - t
    return spent


def plan_stages(explain: dict) -> list:
    """The winning plan as a list of (stage, indexName or '') from the root
    down the inputStage chain."""
    out, node = [], explain["queryPlanner"]["winningPlan"]
    while node:
        out.append((node["stage"], node.get("indexName", "")))
        node = node.get("inputStage")
    return out


def describe_plan(stages: list) -> str:
    return " <- ".join(f"{s} {ix}".strip() for s, ix in stages)


def verdict(ok: bool) -> str:
    return "correct" if ok else "WRONG"


def summary(values: list, unit: str = "") -> str:
    return (f"min {min(values):.1f}, median {statistics.median(values):.1f}, "
            f"max {max(values):.1f}{unit}")


def ratio_line(what: str, a: list, b: list) -> str:
    r = [x / y for x, y in zip(a, b)]
    return (f"{what}: min {min(r):.3f}, median {statistics.median(r):.3f}, "
            f"max {max(r):.3f}")


def check_point_plan(db, name: str, key) -> bool:
    """explain find {k: key}: an IXSCAN on k_1 that fetched one document."""
    e = db.command("explain", {"find": name, "filter": {"k": key}},
                   verbosity="executionStats")
    stages = plan_stages(e)
    st = e["executionStats"]
    ok = (("IXSCAN", "k_1") in stages and st["totalDocsExamined"] == 1
          and st["nReturned"] == 1)
    print(f"explain find {{k: v}} on {name}: {describe_plan(stages)}; "
          f"totalKeysExamined {st['totalKeysExamined']}, totalDocsExamined "
          f"{st['totalDocsExamined']}, nReturned {st['nReturned']} ({verdict(ok)})")
    return ok


def point_lookups(server, db, keys: dict, args) -> bool:
    rng = random.Random(7)
    probes = {side: [rng.choice(keys[side]) for _ in range(args.ops)] for side in SIDES}
    ok = all(check_point_plan(db, side, probes[side][0]) for side in SIDES)

    ops = {
        "find_one": {side: (lambda i, f=db[side].find_one, p=probes[side]: f({"k": p[i]}))
                     for side in SIDES},
        "in-process": {side: (lambda i, p=probes[side], side=side: server.command(
            "bench", {"find": side, "filter": {"k": p[i]}, "limit": 1, "singleBatch": True}))
                       for side in SIDES},
    }
    # Every lookup must find the document with that key: check a sample on
    # both paths, untimed (the timed calls also warm up this way).
    nprobe = min(200, args.ops)
    for side in SIDES:
        where = {k: i for i, k in enumerate(keys[side])}
        for p in probes[side][:nprobe]:
            doc = db[side].find_one({"k": p})
            got = server.command("bench", {"find": side, "filter": {"k": p}, "limit": 1,
                                           "singleBatch": True})["cursor"]["firstBatch"]
            ok = ok and doc is not None and doc["_id"] == where[p] and got == [doc]
    print(f"lookups checked: {nprobe} keys per collection on both paths ({verdict(ok)})")

    medians = {name: h.alternate_rounds(args.rounds,
                                        lambda side, op=op: h.time_calls(op[side], args.ops),
                                        SIDES)
               for name, op in ops.items()}
    print(f"\npoint lookups {{k: v}}: big = {len(keys['big'])} documents, "
          f"small = {len(keys['small'])}; {args.rounds} rounds x {args.ops} calls, "
          f"alternating")
    for name in ops:
        h.report(medians[name], name, SIDES)
    return ok


def range_queries(server, db, rs_sorted: list, ndocs: int, args) -> bool:
    coll = db.big
    width = max(1, ndocs // 100)
    rng = random.Random(11)
    los = [rng.randrange(ndocs - width + 1) for _ in range(args.reps)]

    def query(lo):
        return {"r": {"$gte": lo, "$lt": lo + width}}

    def expected(lo):
        return bisect.bisect_left(rs_sorted, lo + width) - bisect.bisect_left(rs_sorted, lo)

    ok = True
    for hint, want in ((None, ("IXSCAN", "r_1")), ({"$natural": 1}, ("COLLSCAN", ""))):
        cmd = {"find": "big", "filter": query(los[0])}
        if hint:
            cmd["hint"] = hint
        e = db.command("explain", cmd, verbosity="executionStats")
        stages, st = plan_stages(e), e["executionStats"]
        docs_want = expected(los[0]) if hint is None else ndocs
        good = (want in stages and st["nReturned"] == expected(los[0])
                and st["totalDocsExamined"] == docs_want)
        ok = ok and good
        print(f"explain find range {'hint $natural' if hint else 'as planned'}: "
              f"{describe_plan(stages)}; totalKeysExamined {st['totalKeysExamined']}, "
              f"totalDocsExamined {st['totalDocsExamined']}, nReturned {st['nReturned']}, "
              f"executionTimeMillis {st['executionTimeMillis']} ({verdict(good)})")
    e = db.command("explain", {"count": "big", "query": query(los[0])},
                   verbosity="executionStats")
    print(f"explain count range as planned: {describe_plan(plan_stages(e))}")

    plans = {"indexed": {}, "unindexed": {"hint": {"$natural": 1}}}
    def in_process(lo, kw):
        # The dispatcher's raw reply (Server._core), decoded after the
        # timing: decoding 10,000 documents in Python costs more than the
        # indexed query itself, which is what this form isolates.
        cmd = {"find": "big", "filter": query(lo), "batchSize": ndocs, "singleBatch": True}
        return server._core.command("bench", bson.encode({**cmd, **kw}))

    forms = {
        "find": lambda lo, kw: list(coll.find(query(lo), **kw)),
        "count": lambda lo, kw: db.command("count", "big", query=query(lo), **kw)["n"],
        "in-process": in_process,
    }
    for form in forms.values():  # warm up; not timed
        for kw in plans.values():
            form(los[0], kw)
    ms = {(f, p): [] for f in forms for p in plans}
    nsame = 0
    for r, lo in enumerate(los):
        results = {}
        for f, form in forms.items():
            for p in (list(plans) if r % 2 == 0 else list(plans)[::-1]):
                t = time.perf_counter_ns()
                results[f, p] = form(lo, plans[p])
                ms[f, p].append((time.perf_counter_ns() - t) / 1e6)
        a = sorted(results["find", "indexed"], key=lambda d: d["_id"])
        b = sorted(results["find", "unindexed"], key=lambda d: d["_id"])
        raw = [sorted(bson.decode(results["in-process", p])["cursor"]["firstBatch"],
                      key=lambda d: d["_id"]) for p in plans]
        n = expected(lo)
        if (a == b and raw == [a, a] and len(a) == n and results["count", "indexed"] == n
                and results["count", "unindexed"] == n
                and all(lo <= d["r"] < lo + width for d in a)):
            nsame += 1
    ok = ok and nsame == len(los)
    nret = [expected(lo) for lo in los]
    print(f"same documents from both plans, and count = expected: {nsame} of {len(los)} "
          f"repetitions ({verdict(nsame == len(los))}); {min(nret)}..{max(nret)} documents "
          f"of {ndocs} per query")
    print(f"\nrange {{r: {{$gte: lo, $lt: lo + {width}}}}} on big, {args.reps} repetitions, "
          f"alternating; ms per query:")
    for f in forms:
        for p in plans:
            print(f"  {f:<11}{p:<10} {summary(ms[f, p], ' ms')}")
        print("  " + ratio_line(f"{f} speedup unindexed/indexed per repetition",
                                ms[f, "unindexed"], ms[f, "indexed"]))
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1_000_000, help="documents in bench.big")
    ap.add_argument("--small", type=int, default=10_000, help="documents in bench.small")
    ap.add_argument("--rounds", type=int, default=7, help="point-lookup rounds")
    ap.add_argument("--ops", type=int, default=2000, help="lookups per round and collection")
    ap.add_argument("--reps", type=int, default=7, help="range-query repetitions")
    ap.add_argument("--batch", type=int, default=10_000, help="documents per insert_many")
    ap.add_argument("--keys", choices=("int", "str"), default="int")
    ap.add_argument("--doc-bytes", type=int, default=DOC_BYTES,
                    help="BSON bytes of every document (at least 64)")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a fresh temp dir)")
    args = ap.parse_args(argv)
    if args.docs < 100 or args.small < 1:
        ap.error("--docs must be at least 100 and --small at least 1")
    if args.doc_bytes < 64:
        ap.error("--doc-bytes must be at least 64")

    rng = random.Random(20261130)
    sizes = {"big": args.docs, "small": args.small}
    keys = {side: make_keys(rng, n, args.keys) for side, n in sizes.items()}
    rs = {side: [rng.randrange(n) for _ in range(n)] for side, n in sizes.items()}
    work = Path(tempfile.mkdtemp(prefix="mf-ixbench-", dir=args.dir))
    (work / "db").mkdir()
    try:
        with multifora.Server(str(work / "db"), port=0) as server:
            client = pymongo.MongoClient(server.uri, maxPoolSize=1)
            db = client.bench
            h.header("index_bench, in-process multifora.Server", args.rounds, args.ops,
                     "lookups")
            for side in SIDES:
                secs = load(db[side], keys[side], rs[side], args.batch, args.doc_bytes)
                n = sizes[side]
                print(f"load {side}: {n} documents x {args.doc_bytes} B ({args.keys} keys) in "
                      f"{secs:.2f} s ({n / secs:,.0f} docs/s, "
                      f"{n * args.doc_bytes / 2**20 / secs:.1f} MiB/s), insert_many batches "
                      f"of {args.batch}")
            for side in SIDES:
                built = []
                for field in ("k", "r"):
                    t = time.perf_counter()
                    db[side].create_index(field)
                    built.append(f"{field}_1 {time.perf_counter() - t:.2f} s")
                print(f"index builds on {side}: {', '.join(built)}")
            counts = {side: db.command("count", side)["n"] for side in SIDES}
            ok = counts == sizes
            print(f"documents: big {counts['big']}, small {counts['small']} ({verdict(ok)})")

            ok = point_lookups(server, db, keys, args) and ok
            print()
            ok = range_queries(server, db, sorted(rs["big"]), args.docs, args) and ok
            client.close()
        print(f"\nwarm cache: {(args.docs + args.small) * args.doc_bytes / 2**20:.0f} MiB of "
              f"documents, just written; {'all checks passed' if ok else 'A CHECK FAILED'}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
