"""Full-scan count: nanoseconds per document for an unindexed range predicate.

    python benchmarks/scan_count.py [--gb 1] [--reps 7] [--batch 512] [--dir DIR]

Builds collection bench.c of --gb GiB of 16 KiB documents (65,536 at
1 GiB): {_id: i, n: <a permutation of 0..N-1>, p: <random bytes>}, each
BSON document exactly 16,384 bytes, the payload incompressible.  They go in
through pymongo insert_many, in batches of --batch documents; the load time
is reported, then the data directory's allocated size, split into the log
(wal.* segments; the one being written is never deleted, up to 64 MiB) and
the rest, while open and after the server's close (checkpointed).

Then ``count`` with query {n: {$gte: N/4, $lt: 3N/4}} (n has no index, so
every document is read and matched; half match) is timed --reps times on
two paths, alternating which goes first:

  wire         ``db.command("count", ...)`` through pymongo over loopback TCP
  in-process   ``Server.command("bench", {...})``: the same dispatcher, no
               socket, no driver

Both reach the same open database: the server runs in this process
(``multifora.Server``, serving on its own C threads; no Python runs on
them), so the two paths share one page cache.  Reported per path: wall time
per repetition divided by N, in ns per document, min/median/max; and the
per-repetition ratio wire/in-process.  The data is just written and the
figures are warm-cache whenever the data directory fits in RAM; the report
states the directory size beside MemTotal and, where util-linux ``fincore``
exists, how much of the data file is resident.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bson
import pymongo

import multifora

DOC_BYTES = 16384
# BSON size of {_id: int32, n: int32, p: Binary(L)} is L + 29 bytes.
PAYLOAD = DOC_BYTES - 29


def dir_size(path: Path):
    """Allocated bytes of a data directory: (total, log segments, log
    segment count), the log being the files named wal.*."""
    total = log = nlog = 0
    for f in path.iterdir():
        if f.is_file():
            n = f.stat().st_blocks * 512
            total += n
            if f.name.startswith("wal."):
                log, nlog = log + n, nlog + 1
    return total, log, nlog


def describe_size(path: Path, data_bytes: int) -> str:
    total, log, nlog = dir_size(path)
    return (f"{total / 2**30:.3f} GiB allocated ({total / data_bytes:.3f}x the document "
            f"bytes): log {log / 2**30:.3f} GiB in {nlog} segment(s), the rest "
            f"{(total - log) / 2**30:.3f} GiB")


def mem_total() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def resident(path: Path) -> str:
    """Page-cache residency of the data files, from fincore, or ''."""
    exe = shutil.which("fincore")
    files = sorted(str(p) for p in path.iterdir() if p.is_file() and p.stat().st_size)
    if not exe or not files:
        return ""
    r = subprocess.run([exe, "--bytes", "--noheadings", "--raw", "-o", "RES,SIZE", *files],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return ""
    res = size = 0
    for line in r.stdout.split("\n"):
        if line.strip():
            a, b = line.split()
            res, size = res + int(a), size + int(b)
    return f"{res / 2**20:.0f} of {size / 2**20:.0f} MiB resident in the page cache"


def summary(values) -> str:
    return (f"min {min(values):.1f}, median {statistics.median(values):.1f}, "
            f"max {max(values):.1f}")


def load(coll, ndocs: int, batch: int) -> float:
    """Insert the documents; return the wall time in seconds."""
    rng = random.Random(20261129)
    order = list(range(ndocs))
    rng.shuffle(order)
    t = time.perf_counter()
    for start in range(0, ndocs, batch):
        coll.insert_many([{"_id": i, "n": order[i], "p": bson.Binary(rng.randbytes(PAYLOAD))}
                          for i in range(start, min(start + batch, ndocs))], ordered=True)
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0, help="GiB of documents")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--batch", type=int, default=512, help="documents per insert_many")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a fresh temp dir)")
    args = ap.parse_args(argv)

    ndocs = max(4, int(args.gb * 2**30) // DOC_BYTES)
    lo, hi = ndocs // 4, 3 * ndocs // 4
    query = {"n": {"$gte": lo, "$lt": hi}}
    work = Path(tempfile.mkdtemp(prefix="mf-scan-", dir=args.dir))
    dbpath = work / "db"
    dbpath.mkdir()
    try:
        with multifora.Server(str(dbpath), port=0) as server:
            client = pymongo.MongoClient(server.uri, maxPoolSize=1)
            db = client.bench
            secs = load(db.c, ndocs, args.batch)
            data_bytes = ndocs * DOC_BYTES
            print(f"load: {ndocs} documents x {DOC_BYTES} B = {data_bytes / 2**30:.3f} GiB "
                  f"in {secs:.1f} s ({data_bytes / 2**20 / secs:.0f} MiB/s), "
                  f"insert_many batches of {args.batch}")
            alloc = dir_size(dbpath)[0]
            print(f"size on disk after load: {describe_size(dbpath, data_bytes)}")

            paths = {
                "wire": lambda: db.command("count", "c", query=query)["n"],
                "in-process": lambda: server.command("bench", {"count": "c",
                                                               "query": query})["n"],
            }
            for run in paths.values():  # warm up; not timed
                got = run()
            ok = got == hi - lo
            print(f"count: {got} of {ndocs} match (expected {hi - lo}: "
                  f"{'correct' if ok else 'WRONG'})")
            ns_per_doc = {name: [] for name in paths}
            for r in range(args.reps):
                for name in (list(paths) if r % 2 == 0 else list(paths)[::-1]):
                    t = time.perf_counter_ns()
                    paths[name]()
                    ns_per_doc[name].append((time.perf_counter_ns() - t) / ndocs)
            cache = resident(dbpath)  # while the server still has the file mapped
            client.close()
        print(f"size on disk after close (checkpointed): {describe_size(dbpath, data_bytes)}")
        fits = "fits" if alloc < mem_total() else "does NOT fit"
        print(f"page cache: data directory {alloc / 2**30:.2f} GiB, MemTotal "
              f"{mem_total() / 2**30:.1f} GiB: {fits}; figures are warm-cache "
              f"(data just written, one untimed count first)"
              + (f"; after the timed counts {cache}" if cache else ""))
        print(f"ns per document scanned, {args.reps} repetitions, {os.cpu_count()} cores:")
        for name, v in ns_per_doc.items():
            print(f"  {name:<11} {summary(v)} ns/doc "
                  f"({statistics.median(v) * ndocs / 1e6:.0f} ms per count)")
        ratios = [a / b for a, b in zip(ns_per_doc["wire"], ns_per_doc["in-process"])]
        print(f"ratio wire/in-process per repetition: min {min(ratios):.3f}, "
              f"median {statistics.median(ratios):.3f}, max {max(ratios):.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
