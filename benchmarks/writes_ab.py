"""The write rows of two builds side by side in one run: what a change to
the write path costs when nobody uses what it adds.

    python benchmarks/writes_ab.py --a PYTHON_A --b PYTHON_B [--rounds 7] [--n 400]
                                   [--replset] [--dir DIR]

PYTHON_A and PYTHON_B are the interpreters of two virtual environments
each with a build of multifora installed (e.g. this checkout's .venv and a
clone of the previous commit's).  Each runs `python -m multifora serve`
(with --replSet rs0 when --replset: every write then also logs its oplog
entry).  Each round runs, on one server then the other (which goes first
alternates):

  insert_one    --n durable single-document inserts, one at a time;
  insert_many   one call of --n * 10 documents;
  update_one    --n $inc updates by _id;
  delete_one    --n deletes by _id.

Reported per row: each side's median over rounds (per-operation
microseconds, per-document for insert_many) and the per-round ratio b/a
(its median and range; above 1: b is slower).
"""
from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import tempfile
import time

import pymongo


def serve(python: str, dbpath: str, replset: bool):
    args = [python, "-m", "multifora", "serve", "--dbpath", dbpath, "--port", "0",
            "--log-level", "warning"] + (["--replSet", "rs0"] if replset else [])
    p = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())
    for line in p.stdout:
        m = re.search(r"connect with: (mongodb://\S+)", line)
        if m:
            return p, m.group(1)
    raise RuntimeError(f"{python}: the server did not start")


def rows(client, n: int, base: int) -> dict:
    c = client.bench.w
    out = {}
    t = time.perf_counter()
    for i in range(n):
        c.insert_one({"_id": base + i, "v": i, "s": "x" * 80})
    out["insert_one"] = (time.perf_counter() - t) / n * 1e6
    t = time.perf_counter()
    c.insert_many([{"_id": base + n + i, "v": i, "s": "x" * 80} for i in range(n * 10)])
    out["insert_many"] = (time.perf_counter() - t) / (n * 10) * 1e6
    t = time.perf_counter()
    for i in range(n):
        c.update_one({"_id": base + i}, {"$inc": {"v": 1}})
    out["update_one"] = (time.perf_counter() - t) / n * 1e6
    t = time.perf_counter()
    for i in range(n):
        c.delete_one({"_id": base + i})
    out["delete_one"] = (time.perf_counter() - t) / n * 1e6
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--replset", action="store_true")
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    work = tempfile.mkdtemp(dir=args.dir)
    procs, clients = {}, {}
    try:
        for side in ("a", "b"):
            procs[side], uri = serve(getattr(args, side), f"{work}/{side}", args.replset)
            clients[side] = pymongo.MongoClient(uri)
        got = {"a": [], "b": []}
        for r in range(args.rounds):
            for side in (("a", "b") if r % 2 == 0 else ("b", "a")):
                got[side].append(rows(clients[side], args.n, r * args.n * 20))
        print(f"{args.rounds} rounds, n={args.n}, {'replica set' if args.replset else 'standalone'}")
        print(f"{'row':12} {'a us':>9} {'b us':>9} {'b/a median':>11} {'b/a range':>14}")
        for row in got["a"][0]:
            a = [x[row] for x in got["a"]]
            b = [x[row] for x in got["b"]]
            ratios = [y / x for x, y in zip(a, b)]
            print(f"{row:12} {statistics.median(a):9.1f} {statistics.median(b):9.1f} "
                  f"{statistics.median(ratios):11.3f} {min(ratios):6.3f}..{max(ratios):.3f}")
    finally:
        for c in clients.values():
            c.close()
        for p in procs.values():
            p.terminate()
            p.wait(30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
