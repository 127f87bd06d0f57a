"""2 MiB pages against 4 KiB pages for the data file, side by side in one run.

    python benchmarks/huge_pages_ab.py [--docs 1000000] [--reps 31] [--dir DIR]

Two servers run in this process (``multifora.Server``, port 0), one opened
with ``huge_pages="auto"`` (the default) and one with ``"off"``.  Each is
loaded alike, as index_bench.py loads bench.big: --docs documents of 100
BSON bytes {_id: i, k: <random 62-bit int>, r: <uniform in [0, N)>, s:
<padding>}, insert_many in batches of 10,000 (each batch to both servers,
which first alternating, each call timed), then indexes r_1 and k_1.

Each of --reps repetitions draws lo at random and runs, on one server then
on the other (which goes first alternates), a collection scan (hint
{$natural: 1}) and then the indexed query {r: {$gte: lo, $lt: lo + N/100}},
through ``Server._core.command`` (raw BSON, one batch) as index_bench.py's
in-process form does.  So each indexed query follows a scan, as there.

Reported: how much of each data file is mapped by 2 MiB entries
(FilePmdMapped in /proc/self/smaps), the per-batch ratio of insert times
off/auto, each side's median query times and speedup unindexed/indexed,
and the per-repetition ratio of indexed times off/auto (above 1: the
2 MiB pages are faster).  Both plans must return
the same number of documents on both servers; the exit status is 1 if not.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

import bson
import pymongo

import multifora

MODES = ("auto", "off")


def pmd_kb(dbpath: str) -> int:
    """kB of dbpath/data.mf mapped by 2 MiB entries in this process."""
    target = os.path.realpath(os.path.join(dbpath, "data.mf"))
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and not head[0].endswith(":"):
                inside = head[-1] == target
            elif inside and line.startswith("FilePmdMapped:"):
                total += int(head[1])
    return total


def load(servers: dict, n: int, keys: list, rs: list) -> dict:
    """Load both servers alike, batch by batch, the order alternating; the
    insert_many times (ns) per side, one per batch."""
    pad = "s" * (100 - len(bson.encode({"_id": 0, "k": keys[0], "r": 0, "s": ""})))
    clients = {m: pymongo.MongoClient(s.uri) for m, s in servers.items()}
    ns = {m: [] for m in servers}
    for b, start in enumerate(range(0, n, 10_000)):
        docs = [{"_id": i, "k": keys[i], "r": rs[i], "s": pad}
                for i in range(start, min(n, start + 10_000))]
        for m in (MODES if b % 2 == 0 else MODES[::-1]):
            t = time.perf_counter_ns()
            clients[m].bench.big.insert_many(docs)
            ns[m].append(time.perf_counter_ns() - t)
    for c in clients.values():
        c.bench.big.create_index("r")
        c.bench.big.create_index("k")
        c.close()
    return ns


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=31)
    ap.add_argument("--dir", default=None, help="where the two data directories go")
    args = ap.parse_args(argv)
    n, width = args.docs, max(1, args.docs // 100)
    rng = random.Random(20261130)
    keys = rng.sample(range(2**62), n)
    rs = [rng.randrange(n) for _ in range(n)]

    dirs = {m: tempfile.mkdtemp(prefix=f"huge_{m}_", dir=args.dir) for m in MODES}
    servers = {}
    try:
        for m in MODES:
            servers[m] = multifora.Server(dirs[m], port=0, huge_pages=m).start()
        load_ns = load(servers, n, keys, rs)
        med = statistics.median
        print(f"huge_pages_ab: {n} documents, {args.reps} repetitions, range width {width}")
        for m in MODES:
            size = os.path.getsize(os.path.join(dirs[m], "data.mf")) // 1024
            print(f"  {m:<5} data.mf {size} kB, mapped by 2 MiB entries {pmd_kb(dirs[m])} kB; "
                  f"insert_many of 10,000 median {med(load_ns[m]) / 1e6:.1f} ms")
        lr = sorted(b / a for a, b in zip(load_ns["auto"], load_ns["off"]))
        print(f"  insert_many time off/auto per batch: median {med(lr):.3f} "
              f"(min {lr[0]:.3f}, max {lr[-1]:.3f})")

        def query(m: str, lo: int, hint) -> bytes:
            """The raw reply: decoding it would cost more than the indexed query."""
            cmd = {"find": "big", "filter": {"r": {"$gte": lo, "$lt": lo + width}},
                   "batchSize": n, "singleBatch": True}
            if hint:
                cmd["hint"] = hint
            return servers[m]._core.command("bench", bson.encode(cmd))

        los = [rng.randrange(n - width + 1) for _ in range(args.reps)]
        ms = {(m, p): [] for m in MODES for p in ("scan", "idx")}
        same = 0
        for m in MODES:  # warm up; not timed
            query(m, los[0], None)
            query(m, los[0], {"$natural": 1})
        for r, lo in enumerate(los):
            counts = set()
            for m in (MODES if r % 2 == 0 else MODES[::-1]):
                for p, hint in (("scan", {"$natural": 1}), ("idx", None)):
                    t = time.perf_counter_ns()
                    raw = query(m, lo, hint)
                    ms[m, p].append((time.perf_counter_ns() - t) / 1e6)
                    counts.add(len(bson.decode(raw)["cursor"]["firstBatch"]))
            same += len(counts) == 1
        for m in MODES:
            sp = [a / b for a, b in zip(ms[m, "scan"], ms[m, "idx"])]
            print(f"  {m:<5} indexed median {med(ms[m, 'idx']):.2f} ms, scan median "
                  f"{med(ms[m, 'scan']):.1f} ms, speedup per repetition median {med(sp):.1f} "
                  f"({min(sp):.1f}..{max(sp):.1f})")
        ratio = sorted(b / a for a, b in zip(ms["auto", "idx"], ms["off", "idx"]))
        print(f"  indexed time off/auto per repetition: median {med(ratio):.3f} "
              f"(min {ratio[0]:.3f}, max {ratio[-1]:.3f})")
        ok = same == len(los)
        print(f"  same count from both plans on both servers: {same} of {len(los)} "
              f"({'correct' if ok else 'WRONG'})")
        return 0 if ok else 1
    finally:
        for s in servers.values():
            s.stop()
        for d in dirs.values():
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
