"""The 2dsphere index kind (csrc/query/index_2dsphere.c, docs/geo.md):
its spec, its keys against an independent model of S2 cell ids (the
s2sphere package), differential queries (the same documents with the
index, hinted, and with no index), the planner's rules for a geo index,
explain, mongod's errors, and kill -9 during a build.
"""
from __future__ import annotations

import random

import pymongo
import pytest
import s2sphere
from pymongo.errors import OperationFailure, WriteError

import multifora
from conftest import build_killed_before_commit
from test_geo import convex_polygon, destination, haversine, sphere_side

SEED = 20261207


def leaf_cell(lng, lat):
    """mongod's key for a point: the signed id of its leaf S2 cell."""
    cid = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, lng)).id()
    return cid - (1 << 64) if cid >= 1 << 63 else cid


def point(lng, lat):
    return {"type": "Point", "coordinates": [lng, lat]}


def ids(coll, flt, **kw):
    return sorted(d["_id"] for d in coll.find(flt, **kw))


def plan_stages(explain):
    out, p = [], explain["queryPlanner"]["winningPlan"]
    while p:
        out.append(p["stage"])
        p = p.get("inputStage")
    return out


# ---------------------------------------------------------------- the spec


def test_spec_stored_with_version_3_and_listed(client):
    c = client.t.c
    assert c.create_index([("loc", "2dsphere"), ("a", 1)]) == "loc_2dsphere_a_1"
    spec = [i for i in c.list_indexes() if i["name"] == "loc_2dsphere_a_1"][0]
    assert spec["key"] == {"loc": "2dsphere", "a": 1}
    assert spec["2dsphereIndexVersion"] == 3
    # an explicit version 3 and levels are kept as given
    c.create_index([("p", "2dsphere")], **{"2dsphereIndexVersion": 3, "finestIndexedLevel": 20,
                                           "coarsestIndexedLevel": 5})
    spec = [i for i in c.list_indexes() if i["name"] == "p_2dsphere"][0]
    assert (spec["finestIndexedLevel"], spec["coarsestIndexedLevel"]) == (20, 5)


@pytest.mark.parametrize("opts, code, msg", [
    ({"2dsphereIndexVersion": 4}, 67,
     "unsupported geo index version { 2dsphereIndexVersion: 4 }, only versions: [1,2,3] are "
     "supported"),
    ({"2dsphereIndexVersion": 0.0}, 67, "Invalid value for geo index version"),
    ({"2dsphereIndexVersion": 2}, 67, "2dsphereIndexVersion 2 is not supported by MultiforaDB"),
    ({"2dsphereIndexVersion": 1}, 67, "2dsphereIndexVersion 1 is not supported by MultiforaDB"),
    ({"finestIndexedLevel": 31}, 16748, "finestIndexedLevel must be <= 30"),
    ({"coarsestIndexedLevel": -1}, 16747, "coarsestIndexedLevel must be >= 0"),
    ({"finestIndexedLevel": 3, "coarsestIndexedLevel": 5}, 16749,
     "finestIndexedLevel must be >= coarsestIndexedLevel"),
    ({"finestIndexedLevel": "x"}, 14,
     "The field 'finestIndexedLevel' must be a number, but got string"),
    ({"finestIndexedLevel": 1.5}, 2, "exactly representable as a 64-bit integer"),
])
def test_spec_errors(client, opts, code, msg):
    with pytest.raises(OperationFailure) as e:
        client.t.c.create_index([("loc", "2dsphere")], **opts)
    assert e.value.code == code and msg in e.value.details["errmsg"], e.value.details
    assert [i["name"] for i in client.t.c.list_indexes()] in ([], ["_id_"])


def test_key_pattern_with_another_kind_is_refused(client):
    for key in ([("loc", "2dsphere"), ("t", "text")], [("loc", "2dsphere"), ("h", "hashed")]):
        with pytest.raises(OperationFailure) as e:
            client.t.c.create_index(key)
        assert e.value.code == 67, e.value.details


# ---------------------------------------------------------------- keys


def test_point_keys_are_the_leaf_cells_of_s2(client):
    # returnKey shows each document's key: a point's is its leaf cell id,
    # computed here by s2sphere, an implementation of S2 of its own.
    rng = random.Random(SEED)
    c = client.t.c
    c.create_index([("loc", "2dsphere")])
    pts = {i: (round(rng.uniform(-180, 180), 6), round(rng.uniform(-90, 90), 6))
           for i in range(300)}
    c.insert_many([{"_id": i, "loc": point(*p) if i % 2 else list(p)} for i, p in pts.items()])
    # two scans of the index in its order: the documents, and their keys
    docs = list(c.find({}, hint="loc_2dsphere"))
    cur = c.find({}, hint="loc_2dsphere", return_key=True)
    keys = {d["_id"]: k["loc"] for d, k in zip(docs, cur)}
    assert len(keys) == 300
    for i, (lng, lat) in pts.items():
        assert keys[i] == leaf_cell(lng, lat), (i, lng, lat)


def test_document_without_geo_value_is_not_indexed(client):
    c = client.t.c
    c.create_index([("loc", "2dsphere"), ("a", 1)])
    c.insert_many([{"_id": 1, "a": 1}, {"_id": 2, "loc": None, "a": 1}, {"_id": 3, "loc": [],
                   "a": 1}, {"_id": 4, "loc": {}, "a": 1},
                   {"_id": 5, "loc": point(1, 1), "a": 1}])
    v = client.t.command("validate", "c")
    assert v["keysPerIndex"]["loc_2dsphere_a_1"] == 1, v
    # a query on `a` alone cannot use the index: it would miss 1-4
    e = c.find({"a": 1}).explain()
    assert plan_stages(e) == ["COLLSCAN"], e["queryPlanner"]["winningPlan"]
    assert ids(c, {"a": 1}) == [1, 2, 3, 4, 5]
    # nor can a sort on `a`
    assert [d["_id"] for d in c.find({}).sort("a", 1)] == [1, 2, 3, 4, 5]


def test_compound_keys_are_the_product_of_the_fields(client):
    c = client.t.c
    c.create_index([("a.b.nongeo", 1), ("a.b.geo", "2dsphere")])
    c.insert_one({"_id": 1, "a": {"b": [{"nongeo": 1, "geo": point(0, 0)},
                                        {"nongeo": 2, "geo": point(3, 3)}]}})
    v = client.t.command("validate", "c")
    assert v["keysPerIndex"]["a.b.nongeo_1_a.b.geo_2dsphere"] == 4, v
    idx = [i for i in c.list_indexes() if i["name"] == "a.b.nongeo_1_a.b.geo_2dsphere"][0]
    assert idx["key"] == {"a.b.nongeo": 1, "a.b.geo": "2dsphere"}
    q = {"a.b.nongeo": 2, "a.b.geo": {"$geoWithin": {"$centerSphere": [[3, 3], 0.001]}}}
    assert ids(c, q) == [1]
    e = c.find(q).explain()["queryPlanner"]["winningPlan"]
    assert e["stage"] == "FETCH" and e["inputStage"]["stage"] == "IXSCAN", e
    # a.b is an array: the geo field's bounds are not compounded with the
    # first field's, yet the index serves (every document in it has a
    # geo value, as every document the query matches does)
    assert e["inputStage"]["indexBounds"] == {"a.b.nongeo": ["[2, 2]"],
                                              "a.b.geo": ["[MinKey, MaxKey]"]}, e
    assert e["inputStage"]["isMultiKey"] is True


def test_invalid_geometry_is_refused_and_nothing_written(client):
    c = client.t.c
    c.create_index([("loc", "2dsphere")])
    c.insert_one({"_id": 0, "loc": point(1, 1)})
    cases = [
        ({"_id": 1, "loc": point(200, 0)}, "Longitude/latitude is out of bounds, lng: 200 lat: 0"),
        ({"_id": 2, "loc": [200, 0]}, "can't project geometry into spherical CRS: [ 200, 0 ]"),
        ({"_id": 3, "loc": "here"}, "geo element must be an array or object: loc: \"here\""),
        ({"_id": 4, "loc": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1]]]}},
         "Loop is not closed"),
        ({"_id": 5, "loc": {"coordinates": [0, 0]}}, "unknown GeoJSON type"),
        ({"_id": 6, "loc": [[1, 2], [3, 4]]}, "Point must only contain numeric elements"),
    ]
    for doc, reason in cases:
        with pytest.raises(WriteError) as e:
            c.insert_one(doc)
        assert e.value.code == 16755, e.value.details
        msg = e.value.details["errmsg"]
        assert msg.startswith("Can't extract geo keys: { _id: %d, loc: " % doc["_id"]), msg
        assert reason in msg, msg
    # an update to an invalid value is refused too, the document unchanged
    with pytest.raises(WriteError) as e:
        c.update_one({"_id": 0}, {"$set": {"loc.coordinates": [0, 100]}})
    assert e.value.code == 16755
    assert c.find_one({"_id": 0})["loc"] == point(1, 1)
    assert ids(c, {}) == [0]
    # building the index over an invalid value fails the same way
    client.t.d.insert_one({"_id": 1, "loc": [500, 500]})
    with pytest.raises(OperationFailure) as e:
        client.t.d.create_index([("loc", "2dsphere")])
    assert e.value.code == 16755, e.value.details


# ---------------------------------------------------------------- queries


def load(db, rng, n=1500):
    """Points (GeoJSON and legacy pairs), some lines and polygons, and
    documents without a location, into three collections: one with the
    index, one without any."""
    docs = []
    for i in range(n):
        lng, lat = round(rng.uniform(-180, 180), 5), round(rng.uniform(-85, 85), 5)
        r = rng.random()
        if r < 0.45:
            loc = point(lng, lat)
        elif r < 0.7:
            loc = [lng, lat]
        elif r < 0.8:
            a = destination(lng, lat, rng.uniform(0, 360), rng.uniform(0.1, 5))
            loc = {"type": "LineString", "coordinates": [[lng, lat], list(a)]}
        elif r < 0.9:
            _, ring, _ = convex_polygon(rng)
            loc = {"type": "Polygon", "coordinates": [[list(p) for p in ring]]}
        elif r < 0.95:
            loc = {"type": "MultiPoint", "coordinates": [[lng, lat], [lng / 2, lat / 2]]}
        else:
            loc = None
        docs.append({"_id": i, "loc": loc, "k": i % 7})
    db.ix.create_index([("loc", "2dsphere")])
    db.ix.insert_many(docs)
    db.none.insert_many(docs)
    return docs


def queries(rng):
    out = []
    for _ in range(25):
        _, ring, _ = convex_polygon(rng)
        poly = {"type": "Polygon", "coordinates": [[list(p) for p in ring]]}
        out.append({"loc": {"$geoWithin": {"$geometry": poly}}})
        out.append({"loc": {"$geoIntersects": {"$geometry": poly}}})
        lng, lat = rng.uniform(-180, 180), rng.uniform(-80, 80)
        out.append({"loc": {"$geoWithin": {"$centerSphere": [[lng, lat], rng.uniform(0.01, 0.6)]}}})
        b = destination(lng, lat, rng.uniform(0, 360), rng.uniform(1, 30))
        line = {"type": "LineString", "coordinates": [[lng, lat], list(b)]}
        out.append({"loc": {"$geoIntersects": {"$geometry": line}}})
        out.append({"k": rng.randrange(7),
                    "loc": {"$geoWithin": {"$centerSphere": [[lng, lat], rng.uniform(0.05, 1)]}}})
    out.append({"loc": {"$geoIntersects": {"$geometry": point(10, 10)}}})
    out.append({"loc": {"$geoWithin": {"$geometry": {
        "type": "MultiPolygon",
        "coordinates": [[[[0, 0], [20, 0], [20, 20], [0, 20], [0, 0]]],
                        [[[-50, -50], [-40, -50], [-40, -40], [-50, -40], [-50, -50]]]]}}}})
    return out


def test_differential_with_index_hinted_and_without(client):
    rng = random.Random(SEED)
    db = client.t
    load(db, rng)
    nonempty = 0
    for q in queries(rng):
        want = ids(db.none, q)
        assert ids(db.ix, q) == want, q
        assert ids(db.ix, q, hint="loc_2dsphere") == want, q
        assert db.ix.count_documents(q) == len(want)
        nonempty += bool(want)
        e = db.ix.find(q).explain()
        assert plan_stages(e) == ["FETCH", "IXSCAN"], (q, e["queryPlanner"]["winningPlan"])
    assert nonempty > 40  # the queries select something


def test_points_within_polygons_against_the_model(client):
    # the index's answers checked against great-circle geometry in Python
    rng = random.Random(SEED + 1)
    c = client.t.c
    c.create_index([("loc", "2dsphere")])
    pts = [(round(rng.uniform(-180, 180), 6), round(rng.uniform(-80, 80), 6))
           for _ in range(3000)]
    c.insert_many([{"_id": i, "loc": point(*p)} for i, p in enumerate(pts)])
    for _ in range(15):
        (clng, clat, radius), ring, normals = convex_polygon(rng)
        poly = {"type": "Polygon", "coordinates": [[list(p) for p in ring]]}
        got = set(ids(c, {"loc": {"$geoWithin": {"$geometry": poly}}}))
        for i, (lng, lat) in enumerate(pts):
            side = sphere_side(normals, lng, lat)
            if side:
                assert (i in got) == (side > 0), (i, lng, lat, poly)
        r = rng.uniform(0.01, 0.3)
        got = set(ids(c, {"loc": {"$geoWithin": {"$centerSphere": [[clng, clat], r]}}}))
        for i, (lng, lat) in enumerate(pts):
            d = haversine(clng, clat, lng, lat)
            if abs(d - r) > 1e-9:
                assert (i in got) == (d < r), (i, lng, lat, clng, clat, r)


def test_arrays_of_geo_values_along_the_path(client):
    c = client.t.c
    c.create_index([("a.loc", "2dsphere")])
    c.insert_many([
        {"_id": 1, "a": [{"loc": point(1, 1)}, {"loc": point(50, 50)}]},
        {"_id": 2, "a": {"loc": point(50, 50)}},
        {"_id": 3, "a": [{"x": 1}]},
    ])
    q = {"a.loc": {"$geoWithin": {"$centerSphere": [[1, 1], 0.01]}}}
    assert ids(c, q) == [1]
    q = {"a.loc": {"$geoWithin": {"$centerSphere": [[50, 50], 0.01]}}}
    assert ids(c, q) == [1, 2]
    assert ids(c, q, hint="a.loc_2dsphere") == [1, 2]


def test_flat_shapes_do_not_use_a_2dsphere_index(client):
    c = client.t.c
    c.create_index([("loc", "2dsphere")])
    c.insert_many([{"_id": 1, "loc": [1, 1]}, {"_id": 2, "loc": [50, 50]}])
    for q in ({"loc": {"$geoWithin": {"$box": [[0, 0], [2, 2]]}}},
              {"loc": {"$geoWithin": {"$center": [[0, 0], 2]}}},
              {"loc": {"$geoWithin": {"$polygon": [[0, 0], [3, 0], [3, 3], [0, 3]]}}}):
        assert ids(c, q) == [1], q
        assert plan_stages(c.find(q).explain()) == ["COLLSCAN"], q


def test_no_sort_by_a_geo_field(client):
    c = client.t.c
    c.create_index([("loc", "2dsphere")])
    c.insert_many([{"_id": i, "loc": [i, i]} for i in range(5)])
    q = {"loc": {"$geoWithin": {"$centerSphere": [[0, 0], 1]}}}
    got = [d["_id"] for d in c.find(q).sort("loc", -1)]
    assert got == [4, 3, 2, 1, 0]
    assert "SORT" in plan_stages(c.find(q).sort("loc", -1).explain())


def test_updates_and_deletes_keep_the_index_whole(client):
    c = client.t.c
    c.create_index([("loc", "2dsphere")])
    c.insert_many([{"_id": i, "loc": point(i, i)} for i in range(50)])
    c.update_many({"_id": {"$lt": 25}}, [{"$set": {"loc.coordinates": [{"$add": ["$_id", 100]},
                                                                      0]}}])
    c.delete_many({"_id": {"$gte": 40}})
    c.update_one({"_id": 30}, {"$unset": {"loc": ""}})
    v = client.t.command("validate", "c")
    assert v["valid"] and v["keysPerIndex"]["loc_2dsphere"] == 39, v
    q = {"loc": {"$geoWithin": {"$centerSphere": [[110, 0], 0.1]}}}
    # _id < 25 moved to (100 + _id, 0): within 0.1 radians of (110, 0)
    want = [i for i in range(25) if haversine(110, 0, 100 + i, 0) < 0.1]
    assert want and ids(c, q) == want
    assert ids(c, q, hint="loc_2dsphere") == ids(c, q, hint={"$natural": 1})


# ---------------------------------------------------------------- crash


def test_build_killed_before_commit_leaves_no_index(tmp_path):
    rng = random.Random(SEED)
    docs = [{"_id": i, "loc": point(rng.uniform(-180, 180), rng.uniform(-90, 90)), "pad": "x" * 300}
            for i in range(20000)]
    s = build_killed_before_commit(tmp_path / "db", docs, [("loc", "2dsphere")])
    try:
        c = s.client()
        v = c.t.command("validate", "c")
        assert v["valid"] and v["keysPerIndex"] == {"_id_": 20000}, v
        c.t.c.create_index([("loc", "2dsphere")])
        v = c.t.command("validate", "c")
        assert v["keysPerIndex"] == {"_id_": 20000, "loc_2dsphere": 20000}, v
        q = {"loc": {"$geoWithin": {"$centerSphere": [[0, 0], 0.2]}}}
        assert ids(c.t.c, q) == ids(c.t.c, q, hint={"$natural": 1})
    finally:
        s.stop()


def test_index_survives_reopen(tmp_path):
    c = multifora.open(str(tmp_path / "db"), replica_set=None)
    c.t.c.create_index([("loc", "2dsphere")], finestIndexedLevel=25)
    c.t.c.insert_many([{"_id": i, "loc": point(i, -i)} for i in range(80)])
    c.close()
    c = multifora.open(str(tmp_path / "db"), replica_set=None)
    try:
        q = {"loc": {"$geoWithin": {"$centerSphere": [[10, -10], 0.03]}}}
        assert ids(c.t.c, q) == [9, 10, 11]
        assert plan_stages(c.t.c.find(q).explain()) == ["FETCH", "IXSCAN"]
        assert c.t.command("validate", "c")["valid"]
    finally:
        c.close()
