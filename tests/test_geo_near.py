"""$near, $nearSphere and the $geoNear stage over a 2dsphere index
(csrc/query/plan_near.c, docs/geo.md): the order and the distances
checked against great-circle distances computed here (haversine), the
same answers with the index hinted, across getMore batches, with other
conditions and compound indexes, and mongod's errors.
"""
from __future__ import annotations

import math
import random

import pytest
from pymongo.errors import OperationFailure

from test_geo import haversine

SEED = 20261207
R = 6378.1 * 1000  # mongod's kRadiusOfEarthInMeters


def point(lng, lat):
    return {"type": "Point", "coordinates": [lng, lat]}


def load(coll, n=4000, seed=SEED):
    rng = random.Random(seed)
    pts = [(round(rng.uniform(-180, 180), 6), round(rng.uniform(-85, 85), 6)) for _ in range(n)]
    coll.insert_many([{"_id": i, "loc": point(*p), "k": i % 5} for i, p in enumerate(pts)])
    return pts


def by_distance(pts, lng, lat, keep=lambda i: True):
    d = {i: haversine(lng, lat, *p) for i, p in enumerate(pts) if keep(i)}
    return sorted(d, key=lambda i: (d[i], i)), d


@pytest.fixture
def geo(client):
    c = client.t.c
    c.create_index([("loc", "2dsphere")])
    return c, load(c)


def test_near_order_and_limit_against_haversine(geo):
    c, pts = geo
    rng = random.Random(SEED + 1)
    for _ in range(12):
        lng, lat = rng.uniform(-180, 180), rng.uniform(-80, 80)
        want, _ = by_distance(pts, lng, lat)
        q = {"loc": {"$near": {"$geometry": point(lng, lat)}}}
        assert [d["_id"] for d in c.find(q).limit(10)] == want[:10]
        assert [d["_id"] for d in c.find(q, hint="loc_2dsphere").limit(25)] == want[:25]


def test_near_sphere_legacy_in_radians_with_min_and_max(geo):
    c, pts = geo
    lng, lat = 30, -20
    want, dist = by_distance(pts, lng, lat)
    lo, hi = 0.2, 0.45
    q = {"loc": {"$nearSphere": [lng, lat], "$minDistance": lo, "$maxDistance": hi}}
    got = [d["_id"] for d in c.find(q)]
    assert got == [i for i in want if lo <= dist[i] <= hi]
    assert len(got) > 50
    # the GeoJSON form: meters
    q = {"loc": {"$nearSphere": {"$geometry": point(lng, lat), "$minDistance": lo * R,
                                 "$maxDistance": hi * R}}}
    assert [d["_id"] for d in c.find(q)] == got


def test_near_with_other_conditions_and_batches(geo):
    c, pts = geo
    want, dist = by_distance(pts, -100, 40, keep=lambda i: i % 5 == 3)
    q = {"k": 3, "loc": {"$near": {"$geometry": point(-100, 40), "$maxDistance": 3e6}}}
    got = [d["_id"] for d in c.find(q).batch_size(7)]
    assert got == [i for i in want if dist[i] * R <= 3e6]
    assert len(got) > 20


def test_near_over_shapes_uses_their_nearest_point(client):
    c = client.t.c
    c.create_index([("loc", "2dsphere")])
    square = {"type": "Polygon", "coordinates": [[[0, 0], [2, 0], [2, 2], [0, 2], [0, 0]]]}
    c.insert_many([
        {"_id": "inside", "loc": square},
        {"_id": "line", "loc": {"type": "LineString", "coordinates": [[5, -1], [5, 3]]}},
        {"_id": "far", "loc": point(20, 1)},
        {"_id": "multi", "loc": {"type": "MultiPoint", "coordinates": [[40, 40], [3.5, 1]]}},
        {"_id": "none"},
    ])
    q = {"loc": {"$near": {"$geometry": point(1, 1)}}}
    assert [d["_id"] for d in c.find(q)] == ["inside", "multi", "line", "far"]
    r = list(c.aggregate([{"$geoNear": {"near": point(1, 1), "distanceField": "d",
                                        "includeLocs": "at"}}]))
    assert r[0]["d"] == 0 and r[0]["at"] == square
    assert r[1]["_id"] == "multi" and r[1]["at"] == r[1]["loc"]
    assert abs(r[1]["d"] - haversine(1, 1, 3.5, 1) * R) < 1e-6 * r[1]["d"]


def test_compound_index_with_and_without_a_prefix_equality(client):
    c = client.t.c
    c.create_index([("k", 1), ("loc", "2dsphere")])
    pts = load(c, 2000)
    want, dist = by_distance(pts, 60, 10, keep=lambda i: i % 5 == 1)
    q = {"k": 1, "loc": {"$near": {"$geometry": point(60, 10)}}}
    assert [d["_id"] for d in c.find(q).limit(15)] == want[:15]
    # no equality on k: every key is read, the geo part tested
    want, _ = by_distance(pts, 60, 10)
    q = {"loc": {"$near": {"$geometry": point(60, 10)}}}
    assert [d["_id"] for d in c.find(q).limit(15)] == want[:15]


def test_geo_near_stage_distances_and_options(geo):
    c, pts = geo
    want, dist = by_distance(pts, 5, 5, keep=lambda i: i % 5 == 0)
    r = list(c.aggregate([
        {"$geoNear": {"near": point(5, 5), "distanceField": "out.dist", "query": {"k": 0},
                      "maxDistance": 2e6, "distanceMultiplier": 0.001, "includeLocs": "out.loc",
                      "spherical": True}},
        {"$project": {"out": 1}},
    ]))
    exp = [i for i in want if dist[i] * R <= 2e6]
    assert [d["_id"] for d in r] == exp and len(exp) > 5
    for d in r:
        assert abs(d["out"]["dist"] - dist[d["_id"]] * R / 1000) < 1e-6
        assert d["out"]["loc"] == point(*pts[d["_id"]])
    # a legacy point with spherical: radians
    r = list(c.aggregate([{"$geoNear": {"near": [5, 5], "distanceField": "d",
                                        "spherical": True}}, {"$limit": 5}]))
    assert [d["_id"] for d in r] == by_distance(pts, 5, 5)[0][:5]
    assert all(abs(d["d"] - dist.get(d["_id"], haversine(5, 5, *pts[d["_id"]]))) < 1e-9
               for d in r)


@pytest.mark.parametrize("stage, code", [
    ({"distanceField": "d"}, 5860400),
    ({"near": [1, 1]}, 16606),
    ({"near": [1, 1], "distanceField": 5}, 16606),
    ({"near": "x", "distanceField": "d"}, 5860401),
    ({"near": [1, 1], "distanceField": "d", "limit": 3}, 50858),
    ({"near": [1, 1], "distanceField": "d", "num": 3}, 50857),
    ({"near": [1, 1], "distanceField": "d", "maxDistance": -1}, 2),
    ({"near": [1, 1], "distanceField": "d", "minDistance": "x"}, 14),
    ({"near": [1, 1], "distanceField": "d", "query": 5}, 14),
    ({"near": [1, 1], "distanceField": "d", "includeLocs": 5}, 16607),
    ({"near": [1, 1], "distanceField": "d", "key": ""}, 2),
    ({"near": [1, 1], "distanceField": "d", "key": 5}, 14),
    ({"near": [1, 1], "distanceField": "d", "collation": {"locale": "en"}}, 40227),
])
def test_geo_near_stage_errors(client, stage, code):
    client.t.c.insert_one({"loc": [1, 1]})
    with pytest.raises(OperationFailure) as e:
        list(client.t.c.aggregate([{"$geoNear": stage}]))
    assert e.value.code == code, e.value.details


def test_geo_near_must_be_first_and_needs_one_index(client):
    c = client.t.c
    c.insert_one({"loc": point(1, 1), "b": point(2, 2)})
    stage = {"$geoNear": {"near": point(0, 0), "distanceField": "d"}}
    with pytest.raises(OperationFailure) as e:
        list(c.aggregate([{"$match": {}}, stage]))
    assert e.value.code == 40602
    with pytest.raises(OperationFailure) as e:
        list(c.aggregate([stage]))
    assert e.value.code == 27 and "requires a 2d or 2dsphere index" in str(e.value)
    c.create_index([("loc", "2dsphere")])
    c.create_index([("b", "2dsphere")])
    with pytest.raises(OperationFailure) as e:
        list(c.aggregate([stage]))
    assert e.value.code == 27 and "more than one 2dsphere index" in str(e.value)
    r = list(c.aggregate([{"$geoNear": {"near": point(0, 0), "distanceField": "d",
                                        "key": "b"}}]))
    assert abs(r[0]["d"] - haversine(0, 0, 2, 2) * R) < 1e-6


def test_near_errors(client):
    c = client.t.c
    c.insert_one({"loc": point(1, 1)})
    near = {"$near": {"$geometry": point(0, 0)}}
    with pytest.raises(OperationFailure) as e:  # no geo index
        list(c.find({"loc": near}))
    assert e.value.code == 291 and "unable to find index for $geoNear query" in str(e.value)
    c.create_index([("loc", "2dsphere")])
    # a legacy $near is flat: a 2dsphere index cannot serve it
    with pytest.raises(OperationFailure) as e:
        list(c.find({"loc": {"$near": [0, 0]}}))
    assert e.value.code == 291
    with pytest.raises(OperationFailure) as e:  # a hint that cannot serve
        list(c.find({"loc": near}, hint="_id_"))
    assert e.value.code == 291
    with pytest.raises(OperationFailure) as e:  # the argument's own checks
        list(c.find({"loc": {"$near": {"$geometry": point(0, 0), "$maxDistance": -1}}}))
    assert e.value.code == 2
    assert [d["loc"] for d in c.find({"loc": near})] == [point(1, 1)]


def test_geo_near_metadata_in_find_and_aggregate(client):
    c = client.t.c
    c.create_index([("loc", "2dsphere")])
    c.insert_many([{"_id": i, "loc": point(i, i)} for i in range(5)])
    q = {"loc": {"$near": {"$geometry": point(0, 0)}}}
    r = list(c.find(q, {"d": {"$meta": "geoNearDistance"}, "p": {"$meta": "geoNearPoint"}}))
    assert [d["_id"] for d in r] == [0, 1, 2, 3, 4]
    for d in r:
        assert abs(d["d"] - haversine(0, 0, d["_id"], d["_id"]) * R) < 1e-6
        assert d["p"] == point(d["_id"], d["_id"])
    # $geoNear: the metadata keep the distance unmultiplied, as mongod's
    r = list(c.aggregate([
        {"$geoNear": {"near": point(0, 0), "distanceField": "x", "distanceMultiplier": 2}},
        {"$project": {"x": 1, "d": {"$meta": "geoNearDistance"},
                      "p": {"$meta": "geoNearPoint"}}}]))
    for d in r:
        assert abs(d["x"] - 2 * d["d"]) < 1e-6 and d["p"] == point(d["_id"], d["_id"])
    with pytest.raises(OperationFailure) as e:
        list(c.aggregate([{"$match": {}}, {"$project": {"d": {"$meta": "geoNearDistance"}}}]))
    assert e.value.code == 40218
    with pytest.raises(OperationFailure) as e:
        list(c.find({}, {"d": {"$meta": "geoNearDistance"}}))
    assert e.value.code == 40218


def test_where_a_near_condition_may_be(client):
    """mongod's CanonicalQuery checks: one near condition, at the top level
    (a $and's clause or a one-clause $or's counts, as mongod's optimizer
    flattens them), not with a $natural sort or hint, nor with $text; and
    its parser refuses one in a $match (so count_documents) with 5626500."""
    c = client.t.c
    c.create_index([("loc", "2dsphere")])
    c.create_index([("t", "text")])
    c.insert_many([{"_id": i, "loc": point(i, i), "k": i % 2, "t": "x"} for i in range(6)])
    near = {"$near": {"$geometry": point(0, 0)}}
    top = [d["_id"] for d in c.find({"loc": near, "k": 1})]
    assert top == [1, 3, 5]
    assert [d["_id"] for d in c.find({"$and": [{"loc": near}, {"k": 1}]})] == top
    assert [d["_id"] for d in c.find({"$and": [{"$and": [{"k": 1}, {"loc": near}]}]})] == top
    assert [d["_id"] for d in c.find({"$or": [{"loc": near}], "k": 1})] == top
    cases = [
        ({"$or": [{"loc": near}, {"k": 1}]}, {}, "geoNear must be top-level expr"),
        ({"$nor": [{"loc": near}]}, {}, "geoNear must be top-level expr"),
        ({"a": {"$elemMatch": {"loc": near}}}, {}, "geoNear must be top-level expr"),
        ({"loc": {"$not": near}}, {}, "geoNear must be top-level expr"),
        ({"loc": near, "$and": [{"b": near}]}, {}, "Too many geoNear expressions"),
        ({"loc": near}, {"hint": {"$natural": 1}},
         "geoNear expression not allowed with $natural hint"),
        ({"loc": near}, {"sort": [("$natural", 1)]},
         "geoNear expression not allowed with $natural sort order"),
        ({"loc": near, "$text": {"$search": "x"}}, {},
         "text and geoNear not allowed in same query"),
    ]
    for flt, kw, msg in cases:
        with pytest.raises(OperationFailure) as e:
            list(c.find(flt, **kw))
        assert e.value.code == 2 and msg in str(e.value), (flt, e.value.details)
    for run in (lambda: list(c.aggregate([{"$match": {"loc": near}}])),
                lambda: c.count_documents({"loc": near})):
        with pytest.raises(OperationFailure) as e:
            run()
        assert e.value.code == 5626500 and "not allowed in this context" in str(e.value)
