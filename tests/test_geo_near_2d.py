"""$near, $nearSphere and the $geoNear stage over a "2d" index
(csrc/query/plan_near.c, mongod's GEO_NEAR_2D): flat distances checked
against Euclidean ones computed here, spherical ones (a legacy centre
under $nearSphere, in radians) against haversine, the same answers
hinted and across getMore batches, documents with several points,
dense clusters that make the search narrow its rings, an index with its
own square, and mongod's errors.
"""
from __future__ import annotations

import math
import random

import pytest
from pymongo.errors import OperationFailure

from test_geo import haversine

SEED = 20261208


def flat(a, b):
    return math.hypot(a[0] - b[0], a[1] - b[1])


def points_of(loc):
    return loc if isinstance(loc[0], list) else [loc]


def nearest(loc, c, dist=flat):
    return min(dist(p, c) for p in points_of(loc))


def load(coll, n=3000, seed=SEED):
    rng = random.Random(seed)
    docs = [{"_id": i, "loc": [rng.uniform(-180, 180), rng.uniform(-90, 90)], "k": i % 4}
            for i in range(n)]
    coll.insert_many(docs)
    return docs


def want(docs, c, lo=0.0, hi=math.inf, keep=lambda d: True, dist=flat):
    d = {x["_id"]: nearest(x["loc"], c, dist) for x in docs if keep(x)}
    return sorted((i for i in d if lo <= d[i] <= hi), key=lambda i: (d[i], i))


@pytest.fixture
def geo(client):
    c = client.t.c
    c.create_index([("loc", "2d")])
    return c, load(c)


def test_flat_near_order_against_euclid(geo):
    c, docs = geo
    rng = random.Random(SEED + 1)
    for _ in range(10):
        centre = [rng.uniform(-170, 170), rng.uniform(-80, 80)]
        q = {"loc": {"$near": centre}}
        assert [d["_id"] for d in c.find(q).limit(15)] == want(docs, centre)[:15]
        assert [d["_id"] for d in c.find(q, hint="loc_2d").limit(40)] == want(docs, centre)[:40]


def test_flat_near_whole_collection_in_batches(geo):
    c, docs = geo
    centre = [12.5, -7.25]
    got = [d["_id"] for d in c.find({"loc": {"$near": centre}}, batch_size=101)]
    assert got == want(docs, centre)  # every document once, by distance


def test_flat_min_and_max_distance(geo):
    c, docs = geo
    rng = random.Random(SEED + 2)
    for _ in range(6):
        centre = [rng.uniform(-150, 150), rng.uniform(-60, 60)]
        lo, hi = rng.uniform(0, 20), rng.uniform(20, 60)
        q = {"loc": {"$near": centre, "$minDistance": lo, "$maxDistance": hi}}
        assert [d["_id"] for d in c.find(q)] == want(docs, centre, lo, hi)
        # the legacy third element is $maxDistance too
        q = {"loc": {"$near": centre + [hi]}}
        assert [d["_id"] for d in c.find(q)] == want(docs, centre, 0, hi)


def test_near_sphere_legacy_in_radians(geo):
    c, docs = geo

    def rad(p, q):
        return haversine(q[0], q[1], p[0], p[1])

    for centre in ([30, -20], [-120.5, 45.25], [100, 60]):
        lo, hi = 0.1, 0.6
        q = {"loc": {"$nearSphere": centre, "$minDistance": lo, "$maxDistance": hi}}
        assert [d["_id"] for d in c.find(q)] == want(docs, centre, lo, hi, dist=rad)
        r = list(c.aggregate([{"$geoNear": {"near": centre, "distanceField": "d",
                                            "spherical": True, "maxDistance": hi}}]))
        assert [d["_id"] for d in r] == want(docs, centre, 0, hi, dist=rad)
        for d in r:
            assert abs(d["d"] - rad(d["loc"], centre)) < 1e-9
    # the search covers the plane of the index, which does not wrap at the
    # antimeridian (mongod's isWrappingQuery is false for a legacy centre)
    centre = [179, 0]
    east = want(docs, centre, 0, 0.6, dist=rad)
    got = [d["_id"] for d in c.find({"loc": {"$nearSphere": centre, "$maxDistance": 0.6}})]
    assert got == [i for i in east if docs[i]["loc"][0] > 0] != east


def test_other_conditions_and_a_compound_index(client):
    c = client.t.c
    c.create_index([("loc", "2d"), ("k", 1)])
    docs = load(c)
    centre = [-3, 4]
    q = {"k": 2, "loc": {"$near": centre, "$maxDistance": 50}}
    expect = want(docs, centre, 0, 50, keep=lambda d: d["k"] == 2)
    assert [d["_id"] for d in c.find(q, batch_size=7)] == expect
    plan = c.find(q).explain()["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "GEO_NEAR_2D" and plan["keyPattern"] == {"loc": "2d", "k": 1}


def test_documents_with_several_points_come_once_at_their_nearest(client):
    c = client.t.c
    c.create_index([("loc", "2d")])
    rng = random.Random(SEED + 3)
    docs = []
    for i in range(600):
        pts = [[rng.uniform(-100, 100), rng.uniform(-80, 80)] for _ in range(rng.randint(1, 4))]
        docs.append({"_id": i, "loc": pts})
    c.insert_many(docs)
    for centre in ([0, 0], [55, -30], [-99, 79]):
        got = list(c.aggregate([{"$geoNear": {"near": centre, "distanceField": "d",
                                              "includeLocs": "at"}}]))
        assert [d["_id"] for d in got] == want(docs, centre)
        for d in got:
            assert d["at"] in points_of(d["loc"])
            assert d["d"] == pytest.approx(flat(d["at"], centre), abs=1e-12)
            assert d["d"] == pytest.approx(nearest(d["loc"], centre), abs=1e-12)


def test_dense_clusters_and_sparse_space(client):
    """Thousands of points on a few spots and a sparse scatter around:
    rings that return more than 600 documents halve the next one, rings
    with fewer than 300 double it; every document is still returned once,
    in order."""
    c = client.t.c
    c.create_index([("loc", "2d")])
    rng = random.Random(SEED + 4)
    docs, i = [], 0
    for spot in ([1, 1], [1.001, 1], [40, 40]):
        for _ in range(900):
            docs.append({"_id": i, "loc": [spot[0] + rng.uniform(-1e-3, 1e-3),
                                           spot[1] + rng.uniform(-1e-3, 1e-3)]})
            i += 1
    for _ in range(400):
        docs.append({"_id": i, "loc": [rng.uniform(-180, 180), rng.uniform(-90, 90)]})
        i += 1
    c.insert_many(docs)
    centre = [1.0005, 1.0002]
    got = [d["_id"] for d in c.find({"loc": {"$near": centre}}, batch_size=500)]
    assert got == want(docs, centre)
    stats = c.find({"loc": {"$near": centre}}).explain()["executionStats"]
    assert stats["executionStages"]["searchIntervals"] > 2
    # no cell is scanned twice; the density estimate read one key more
    assert stats["totalKeysExamined"] == len(docs) + 1


def test_an_index_with_its_own_square(client):
    c = client.t.c
    c.create_index([("loc", "2d")], min=0, max=1000, bits=20)
    rng = random.Random(SEED + 5)
    docs = [{"_id": i, "loc": [rng.uniform(0, 1000), rng.uniform(0, 1000)]} for i in range(1500)]
    c.insert_many(docs)
    centre = [500, 500]
    assert [d["_id"] for d in c.find({"loc": {"$near": centre}}).limit(50)] == \
        want(docs, centre)[:50]
    got = [d["_id"] for d in c.find({"loc": {"$near": centre, "$maxDistance": 120}})]
    assert got == want(docs, centre, 0, 120)
    # the centre must lie in the index's square (mongod's GeoHashConverter)
    with pytest.raises(OperationFailure) as e:
        list(c.find({"loc": {"$near": [1500, 0]}}))
    assert e.value.code == 16433 and "point not in interval of [ 0, 1000 ]" in str(e.value)


def test_geo_near_stage_over_2d(geo):
    c, docs = geo
    centre = [10, 10]
    r = list(c.aggregate([{"$geoNear": {"near": centre, "distanceField": "dist",
                                        "distanceMultiplier": 2, "query": {"k": 1},
                                        "maxDistance": 25}}]))
    assert [d["_id"] for d in r] == want(docs, centre, 0, 25, keep=lambda d: d["k"] == 1)
    for d in r:
        assert d["dist"] == pytest.approx(2 * flat(d["loc"], centre), abs=1e-12)
    # without a key, the one 2d index is chosen before a 2dsphere one
    c.create_index([("s", "2dsphere")])
    r = list(c.aggregate([{"$geoNear": {"near": centre, "distanceField": "d"}}, {"$limit": 3}]))
    assert [d["_id"] for d in r] == want(docs, centre)[:3]


def test_errors_and_explain(client):
    c = client.t.c
    c.create_index([("loc", "2d")])
    c.insert_many([{"loc": [1, 1]}, {"loc": [2, 2]}])
    geojson = {"type": "Point", "coordinates": [0, 0]}
    # a GeoJSON centre wraps the sphere: a 2d index cannot serve it
    for q in ({"$near": {"$geometry": geojson}}, {"$nearSphere": {"$geometry": geojson}}):
        with pytest.raises(OperationFailure) as e:
            list(c.find({"loc": q}))
        assert e.value.code == 291, q
    with pytest.raises(OperationFailure) as e:  # outside [-180, 180]
        list(c.find({"loc": {"$near": [181, 0]}}))
    assert e.value.code == 16433
    with pytest.raises(OperationFailure) as e:  # a hint that cannot serve
        list(c.find({"loc": {"$near": [0, 0]}}, hint="_id_"))
    assert e.value.code == 291
    plan = c.find({"loc": {"$near": [0, 0]}}).explain()
    win = plan["queryPlanner"]["winningPlan"]
    assert win == {"stage": "GEO_NEAR_2D", "keyPattern": {"loc": "2d"}, "indexName": "loc_2d",
                   "indexVersion": 2}
    st = plan["executionStats"]
    assert st["nReturned"] == 2 and st["executionStages"]["stage"] == "GEO_NEAR_2D"
    # a deleted document is not returned by a later batch
    cur = c.find({"loc": {"$near": [0, 0]}}, batch_size=1)
    assert next(cur)["loc"] == [1, 1]
    c.delete_one({"loc": [2, 2]})
    assert list(cur) == []
