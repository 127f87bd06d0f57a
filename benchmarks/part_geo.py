"""geo: what a 2dsphere index and a 2d index buy and cost (issue 49).

One server (`python -m multifora serve`), pymongo.  Documents with a
GeoJSON point spread uniformly over the sphere (`loc`) and a small pad.

  $near limit 10   find({loc: {$near: {$geometry: P}}}).limit(10) at random
                   centres P, through the 2dsphere index; the floor is the
                   same ten found without an index: a $geoWithin
                   $centerSphere hinted $natural (a collection scan) whose
                   radius holds them, sorted by distance in the client --
                   what one writes without a geo index, since $near needs
                   one.  Both answers are checked against a Python model
                   first.  queries/s; the ratio is the index's over the
                   scan's: above 1, the index is faster.
  $near over 2d    the same over legacy pairs [x, y] uniform in the plane
                   [-180, 180] x [-90, 90] with a 2d index:
                   find({loc: {$near: [x, y]}}).limit(10), against a
                   $geoWithin $center hinted $natural sorted in the client.
  $geoWithin       count_documents of a $centerSphere of 1 degree (about
                   0.015% of the sphere's area) through the index, against
                   the same count hinted $natural.
  inserts          insert_many of 1,000 such documents at a time into a
                   collection with a 2dsphere index on loc, against one
                   with only _id; alternating rounds.  docs/s; the ratio is
                   with over without (below 1: slower with the index).

Sizes: --full 100,000 documents, 7 rounds; quick 20,000 and 3; smoke 1,000
and 1.
"""
from __future__ import annotations

import math
import random
import time

import pymongo

R = 6378.1 * 1000


def _docs(n, seed):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        z = rng.uniform(-1, 1)  # uniform on the sphere
        lat = math.degrees(math.asin(z))
        lng = rng.uniform(-180, 180)
        out.append({"_id": i, "loc": {"type": "Point", "coordinates": [lng, lat]},
                    "pad": "x" * 40})
    return out


def _hav(a, b):
    lo1, la1, lo2, la2 = map(math.radians, (a[0], a[1], b[0], b[1]))
    h = (math.sin((la2 - la1) / 2) ** 2 +
         math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2)
    return 2 * math.asin(min(1.0, math.sqrt(h)))


def run(ctx) -> dict:
    n = 100_000 if ctx.full else 1_000 if ctx.smoke else 20_000
    rounds = 7 if ctx.full else 1 if ctx.smoke else 3
    srv = ctx.start_multifora()
    client = pymongo.MongoClient(srv.uri)
    db = client.bench
    docs = _docs(n, 49)

    # -- inserts with and without the index
    def load(kind: str) -> float:
        db.drop_collection("w")
        if kind == "2dsphere":
            db.w.create_index([("loc", "2dsphere")])
        t = time.perf_counter()
        for i in range(0, n, 1000):
            db.w.insert_many(docs[i:i + 1000], ordered=False)
        return n / (time.perf_counter() - t)

    ctx.log(f"inserts: {rounds} rounds of {n} documents with and without a 2dsphere index")
    w = ctx.alternate(rounds, load, ("2dsphere", "none"))
    db.drop_collection("w")

    # -- queries
    for i in range(0, n, 1000):
        db.q.insert_many(docs[i:i + 1000])
    db.q.create_index([("loc", "2dsphere")])
    rng = random.Random(7)
    centres = [(rng.uniform(-180, 180), math.degrees(math.asin(rng.uniform(-1, 1))))
               for _ in range(50)]
    # the radius that holds the ten nearest, from the expected density
    radius = math.sqrt(40 / n) * 3  # about 90 points expected

    def near(side: str) -> float:
        batch = centres[:20] if side == "near" else centres[:3]
        t = time.perf_counter()
        for c in batch:
            if side == "near":
                q = {"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": list(c)}}}}
                ids = [d["_id"] for d in db.q.find(q).limit(10)]
            else:
                q = {"loc": {"$geoWithin": {"$centerSphere": [list(c), radius]}}}
                got = list(db.q.find(q, hint={"$natural": 1}))
                got.sort(key=lambda d: (_hav(c, d["loc"]["coordinates"]), d["_id"]))
                ids = [d["_id"] for d in got[:10]]
            if len(ids) != min(10, n):
                raise RuntimeError(f"{side}: {len(ids)} found at {c}")
        return len(batch) / (time.perf_counter() - t)

    # the two answers agree
    for c in centres[:3]:
        q = {"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": list(c)}}}}
        a = [d["_id"] for d in db.q.find(q).limit(10)]
        want = sorted(docs, key=lambda d: (_hav(c, d["loc"]["coordinates"]), d["_id"]))[:10]
        if a != [d["_id"] for d in want]:
            raise RuntimeError(f"$near disagrees with the model at {c}")
    ctx.log(f"$near: {rounds} rounds, indexed against a scan")
    nq = ctx.alternate(rounds, near, ("near", "scan"))

    def within(side: str) -> float:
        batch = centres[:20] if side == "index" else centres[:3]
        hint = "loc_2dsphere" if side == "index" else {"$natural": 1}
        t = time.perf_counter()
        for c in batch:
            db.q.count_documents({"loc": {"$geoWithin": {"$centerSphere": [list(c), 0.01745]}}},
                                 hint=hint)
        return len(batch) / (time.perf_counter() - t)

    ctx.log(f"$geoWithin: {rounds} rounds, indexed against a scan")
    wq = ctx.alternate(rounds, within, ("index", "scan"))
    db.drop_collection("q")

    # -- $near over a 2d index
    flat = [{"_id": d["_id"], "loc": [rng.uniform(-180, 180), rng.uniform(-90, 90)],
             "pad": d["pad"]} for d in docs]
    for i in range(0, n, 1000):
        db.f.insert_many(flat[i:i + 1000])
    db.f.create_index([("loc", "2d")])
    pts = [[rng.uniform(-170, 170), rng.uniform(-80, 80)] for _ in range(20)]
    # the radius that holds the ten nearest: about 60 points expected
    flat_radius = math.sqrt(60 * 360 * 180 / (math.pi * n))

    def by_flat(c, got):
        got.sort(key=lambda d: (math.hypot(d["loc"][0] - c[0], d["loc"][1] - c[1]), d["_id"]))
        return [d["_id"] for d in got[:10]]

    for c in pts[:3]:
        a = [d["_id"] for d in db.f.find({"loc": {"$near": c}}).limit(10)]
        if a != by_flat(c, list(flat)):
            raise RuntimeError(f"$near over 2d disagrees with the model at {c}")

    def near2d(side: str) -> float:
        batch = pts if side == "near" else pts[:3]
        t = time.perf_counter()
        for c in batch:
            if side == "near":
                ids = [d["_id"] for d in db.f.find({"loc": {"$near": c}}).limit(10)]
            else:
                q = {"loc": {"$geoWithin": {"$center": [c, flat_radius]}}}
                ids = by_flat(c, list(db.f.find(q, hint={"$natural": 1})))
            if len(ids) != min(10, n):
                raise RuntimeError(f"{side}: {len(ids)} found at {c}")
        return len(batch) / (time.perf_counter() - t)

    ctx.log(f"$near over 2d: {rounds} rounds, indexed against a scan")
    fq = ctx.alternate(rounds, near2d, ("near", "scan"))
    client.close()
    ctx.stop_all()
    return {"part": "geo", "rows": [
        ctx.row("$near limit 10 through a 2dsphere index vs a scan", "queries/s", nq["near"],
                floor=nq["scan"],
                note=f"{n} points; floor: $geoWithin hinted $natural, sorted in the client"),
        ctx.row("$near limit 10 through a 2d index vs a scan", "queries/s", fq["near"],
                floor=fq["scan"],
                note=f"{n} legacy pairs; floor: $geoWithin $center hinted $natural, sorted "
                     "in the client"),
        ctx.row("$geoWithin 1-degree $centerSphere count, index vs scan", "queries/s",
                wq["index"], floor=wq["scan"], note=f"{n} points; floor: hinted $natural"),
        ctx.row("insert_many with a 2dsphere index vs none", "docs/s", w["2dsphere"],
                floor=w["none"], note=f"{n} GeoJSON points, batches of 1,000; floor: no index"),
    ]}
