"""churn: how big the data file grows under rewrites, per round, until it stops growing.

For each mode x document size, a fresh MultiforaDB server process over a
fresh directory holds bench.churn: N documents {_id, k: <random int>,
p: <random bytes>} of exactly SIZE BSON bytes, with a secondary index on k.
Then rounds of:

  delete-refill   delete a random half of the documents (delete_many by
                  _id), insert as many new ones (insert_many, new _ids);
  random-update   N updates of random documents (with replacement), each
                  $set of a new p (same length) and a new k, sent with
                  bulk_write in batches of 1,000.

After each round: a checkpoint (the fsync command, which folds the log into
the data file), then the data file's allocated size (data.mf) over the live
data (N x SIZE bytes).  The series also has the data file and the log
(wal.*) as the round left them, before that checkpoint.  Rounds go on until the ratio
is flat (the last three within 2% of each other) or the round limit.  The
row is the ratio over the last three rounds; "series" has every round.

The answers are checked: the count every round; at the end, a sample of
documents byte for byte (against a hash of what was sent) and a range count
on the k index against the model.

Sizes: --full 40,000 x 16 KiB (655 MB live) and 100,000 x 200 B, 6 to 12
rounds; quick 1,000 x 16 KiB and 5,000 x 200 B, 3 rounds.  Disk in --full:
about 2 GB at the peak.
"""
from __future__ import annotations

import hashlib
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import _drvlib  # noqa: E402

MODES = ("delete-refill", "random-update")
K_RANGE = 1 << 31
FLAT = 0.02
UPDATE_BATCH = 1_000
DELETE_BATCH = 1_000
INSERT_BATCH_BYTES = 8 << 20


def digest(b: bytes) -> bytes:
    return hashlib.blake2b(b, digest_size=8).digest()


class Churn:
    """One collection and the model of what it should hold."""

    def __init__(self, coll, size: int, rng: random.Random):
        import bson
        self.bson = bson
        self.coll = coll
        self.size = size
        self.rng = rng
        overhead = len(bson.encode({"_id": 0, "k": 0, "p": bson.Binary(b"")}))
        self.payload = size - overhead
        if self.payload < 1:
            raise ValueError(f"documents of {size} B cannot hold the fields")
        self.model: Dict[int, tuple] = {}   # _id -> (k, digest of p)
        self.next_id = 0

    def _doc(self, i: int) -> dict:
        p = os.urandom(self.payload)
        k = self.rng.randrange(K_RANGE)
        self.model[i] = (k, digest(p))
        return {"_id": i, "k": k, "p": self.bson.Binary(p)}

    def insert(self, count: int) -> None:
        per_batch = max(1, INSERT_BATCH_BYTES // self.size)
        while count > 0:
            n = min(per_batch, count)
            docs = [self._doc(self.next_id + j) for j in range(n)]
            self.next_id += n
            self.coll.insert_many(docs, ordered=False)
            count -= n

    def delete_refill(self) -> None:
        ids = self.rng.sample(sorted(self.model), len(self.model) // 2)
        # 1,000 _ids per delete_many: MultiforaDB's $in costs grow with the
        # square of the list's length (10,000 took seconds per call).
        for j in range(0, len(ids), DELETE_BATCH):
            part = ids[j:j + DELETE_BATCH]
            self.coll.delete_many({"_id": {"$in": part}})
            for i in part:
                del self.model[i]
        self.insert(len(ids))

    def random_update(self) -> None:
        from pymongo import UpdateOne
        live = sorted(self.model)
        ops = []
        for _ in range(len(live)):
            i = self.rng.choice(live)
            p = os.urandom(self.payload)
            k = self.rng.randrange(K_RANGE)
            self.model[i] = (k, digest(p))
            ops.append(UpdateOne({"_id": i}, {"$set": {"p": self.bson.Binary(p), "k": k}}))
            if len(ops) == UPDATE_BATCH:
                self.coll.bulk_write(ops, ordered=True)
                ops = []
        if ops:
            self.coll.bulk_write(ops, ordered=True)

    def check(self, sample: int) -> str:
        """'' when a sample of documents and a k-range count match the model,
        else what does not."""
        count = self.coll.count_documents({})
        if count != len(self.model):
            return f"count {count}, expected {len(self.model)}"
        for i in self.rng.sample(sorted(self.model), min(sample, len(self.model))):
            d = self.coll.find_one({"_id": i})
            if d is None or (d["k"], digest(bytes(d["p"]))) != self.model[i]:
                return f"document {i} differs from what was written"
        lo, hi = K_RANGE // 4, K_RANGE // 2
        want = sum(1 for k, _ in self.model.values() if lo <= k < hi)
        got = self.coll.count_documents({"k": {"$gte": lo, "$lt": hi}}, hint="k_1")
        if got != want:
            return f"k_1 range count {got}, expected {want}"
        return ""


def churn_one(ctx, mode: str, size: int, n: int, min_rounds: int, max_rounds: int,
              sample: int) -> tuple:
    """Run one mode at one document size; return (row, series, problem)."""
    dbpath = Path(ctx.workdir) / f"churn-{mode}-{size}"
    shutil.rmtree(dbpath, ignore_errors=True)
    dbpath.mkdir(parents=True)
    s = _drvlib.Served(dbpath).start()
    series: List[dict] = []
    problem = ""
    try:
        client = s.client()
        admin, coll = client.admin, client.bench.churn
        coll.create_index("k", name="k_1")
        c = Churn(coll, size, random.Random(size * 31 + len(mode)))
        c.insert(n)
        live = n * size

        def measure(rnd: int, secs: float) -> float:
            # As the engine left it (data file + log), then after a
            # checkpoint (the fsync command), which folds the log into the
            # data file: the data file's size is then comparable round to round.
            left = _drvlib.dir_bytes(dbpath)
            admin.command("fsync")
            d = _drvlib.dir_bytes(dbpath)
            ratio = d["alloc"] / live
            series.append({"round": rnd, "seconds": round(secs, 3), "data_alloc": d["alloc"],
                           "data_apparent": d["apparent"], "wal_alloc": d["wal_alloc"],
                           "left_data_alloc": left["alloc"], "left_wal_alloc": left["wal_alloc"],
                           "live": live, "ratio": round(ratio, 4)})
            return ratio

        ratios = [measure(0, 0.0)]
        step = c.delete_refill if mode == "delete-refill" else c.random_update
        rnd = 0
        while rnd < max_rounds:
            rnd += 1
            t = time.perf_counter()
            step()
            secs = time.perf_counter() - t
            got = coll.count_documents({})
            if got != n:
                problem = f"round {rnd}: count {got}, expected {n}"
                break
            ratios.append(measure(rnd, secs))
            last = ratios[-3:]
            if rnd >= min_rounds and len(last) == 3 and \
                    (max(last) - min(last)) / statistics.median(last) <= FLAT:
                break
        if not problem:
            problem = c.check(sample)
    finally:
        s.stop()
        _drvlib.remove_db(dbpath)
    last = ratios[-3:]
    flat = (max(last) - min(last)) / statistics.median(last) <= FLAT
    label = _drvlib.human_bytes(size) if size >= 1024 else f"{size} B"
    note = (f"{n:,} documents x {size} B ({_drvlib.human_bytes(live)} live), index on k; "
            f"{rnd} rounds; the last three {'within' if flat else 'NOT within'} "
            f"{FLAT:.0%} (flat: {'yes' if flat else 'no'}); after loading "
            f"{ratios[0]:.2f}x; before the last checkpoint, data file + log were "
            f"{(series[-1]['left_data_alloc'] + series[-1]['left_wal_alloc']) / live:.2f}x")
    if problem:
        note += "; WRONG: " + problem
    ctx.log(f"churn: {mode} {label}: data file / live {ratios[-1]:.2f}x after {rnd} rounds"
            + (f" -- WRONG: {problem}" if problem else ""))
    row = _drvlib.row(f"churn: {mode}, {label} documents: data file / live data", "x", last,
                      note=note)
    return row, series, problem


def run(ctx) -> dict:
    if ctx.full:
        sizes = [(16_384, 40_000), (200, 100_000)]
        min_rounds, max_rounds, sample = 6, 12, 1_000
    elif _drvlib.ctx_get(ctx, "smoke"):
        sizes = [(16_384, 200), (200, 1_000)]
        min_rounds, max_rounds, sample = 2, 2, 20
    else:
        sizes = [(16_384, 1_000), (200, 5_000)]
        min_rounds, max_rounds, sample = 3, 3, 100
    out = {"part": "churn", "rows": [], "notes": [], "series": {"churn": {}}}
    problems = []
    for size, n in sizes:
        for mode in MODES:
            row, series, problem = churn_one(ctx, mode, size, n, min_rounds, max_rounds, sample)
            out["rows"].append(row)
            out["series"]["churn"][f"{mode} {size}"] = series
            if problem:
                problems.append(f"{mode} {size} B: {problem}")
    out["notes"].append("ratio: allocated blocks of data.mf after a checkpoint (fsync) / "
                        "(documents x their BSON size); the log (wal.*) is in the series")
    if problems:
        out["notes"].extend("WRONG: " + p for p in problems)
    else:
        out["notes"].append("every round's count, a sample of documents byte for byte and a "
                            "k_1 range count matched the model (correct)")
    return out


if __name__ == "__main__":
    sys.exit(_drvlib.main(run))
