"""Geospatial queries without an index (docs/geo.md): $geoWithin,
$geoIntersects, the legacy shapes, GeoJSON validation with mongod's
messages, and $near refused without a geo index.

Randomized cases are checked against an independent computation in
Python: great-circle polygon edges by vector cross products, haversine
distances for $centerSphere, plane geometry for $box / $polygon /
$center.  Points within a small margin of a boundary are left out, where
the two computations may round differently.
"""
from __future__ import annotations

import math
import random

import pymongo
import pytest

SEED = 20261207


# ---------------------------------------------------------------- model


def unit(lng, lat):
    lo, la = math.radians(lng), math.radians(lat)
    return (math.cos(la) * math.cos(lo), math.cos(la) * math.sin(lo), math.sin(la))


def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def norm(a):
    n = math.sqrt(dot(a, a))
    return (a[0] / n, a[1] / n, a[2] / n)


def destination(lng, lat, bearing_deg, dist_deg):
    """The point `dist_deg` along the great circle leaving (lng, lat) at
    `bearing_deg` (the usual spherical formula)."""
    la1, lo1 = math.radians(lat), math.radians(lng)
    b, d = math.radians(bearing_deg), math.radians(dist_deg)
    la2 = math.asin(math.sin(la1) * math.cos(d) + math.cos(la1) * math.sin(d) * math.cos(b))
    lo2 = lo1 + math.atan2(math.sin(b) * math.sin(d) * math.cos(la1),
                           math.cos(d) - math.sin(la1) * math.sin(la2))
    lng2 = (math.degrees(lo2) + 540) % 360 - 180
    return round(lng2, 9), round(math.degrees(la2), 9)


def convex_polygon(rng):
    """A convex spherical polygon: vertices at random bearings on a circle
    of random radius around a random centre; ring closed, and its edge
    normals oriented so that the centre is on their positive side."""
    clng, clat = rng.uniform(-150, 150), rng.uniform(-60, 60)
    radius = rng.uniform(0.5, 25)
    bearings = sorted(rng.uniform(0, 360) for _ in range(rng.randint(3, 9)))
    # no gap of 180 degrees or more, or the polygon would not hold the centre
    if any((b2 - b1) % 360 >= 170 for b1, b2 in zip(bearings, bearings[1:] + bearings[:1])):
        return convex_polygon(rng)
    ring = [destination(clng, clat, b, radius) for b in bearings]
    verts = [unit(*p) for p in ring]
    normals = [norm(cross(verts[i], verts[(i + 1) % len(verts)])) for i in range(len(verts))]
    c = unit(clng, clat)
    if dot(normals[0], c) < 0:
        normals = [(-n[0], -n[1], -n[2]) for n in normals]
    return (clng, clat, radius), ring + [ring[0]], normals


def sphere_side(normals, lng, lat):
    """+1 inside, -1 outside, 0 too near an edge to call."""
    p = unit(lng, lat)
    ds = [dot(n, p) for n in normals]
    if min(abs(d) for d in ds) < 1e-7:
        return 0
    return 1 if all(d > 0 for d in ds) else -1


def haversine(lng1, lat1, lng2, lat2):
    """Great-circle distance in radians."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lng2 - lng1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * math.asin(min(1.0, math.sqrt(h)))


def ray_crossing(poly, x, y):
    """Even-odd point in a plane polygon (open ring)."""
    inside = False
    n = len(poly)
    for i in range(n):
        (x1, y1), (x2, y2) = poly[i], poly[(i + 1) % n]
        if (y1 > y) != (y2 > y):
            xi = x1 + (y - y1) * (x2 - x1) / (y2 - y1)
            if x < xi:
                inside = not inside
    return inside


def ids(coll, flt):
    return sorted(d["_id"] for d in coll.find(flt, {"_id": 1}))


def point(lng, lat):
    return {"type": "Point", "coordinates": [lng, lat]}


# ----------------------------------------------------- randomized checks


def test_points_within_random_polygons(client):
    rng = random.Random(SEED)
    coll = client.geo.pts
    checked = 0
    for round_ in range(12):
        coll.drop()
        (clng, clat, radius), ring, normals = convex_polygon(rng)
        docs, want = [], []
        for i in range(150):
            lng = max(-180, min(180, clng + rng.uniform(-2, 2) * radius))
            lat = max(-90, min(90, clat + rng.uniform(-2, 2) * radius))
            lng, lat = round(lng, 6), round(lat, 6)
            side = sphere_side(normals, lng, lat)
            if side == 0:
                continue
            # GeoJSON and legacy pairs alike
            docs.append({"_id": i, "loc": point(lng, lat) if i % 2 else [lng, lat]})
            if side > 0:
                want.append(i)
        coll.insert_many(docs)
        poly = {"type": "Polygon", "coordinates": [ring]}
        assert ids(coll, {"loc": {"$geoWithin": {"$geometry": poly}}}) == want, (round_, ring)
        assert ids(coll, {"loc": {"$geoIntersects": {"$geometry": poly}}}) == want
        # the same through aggregate's $match
        got = sorted(d["_id"] for d in coll.aggregate(
            [{"$match": {"loc": {"$geoWithin": {"$geometry": poly}}}}]))
        assert got == want
        checked += len(docs)
    assert checked > 1000


def test_center_sphere_against_haversine(client):
    rng = random.Random(SEED + 1)
    coll = client.geo.caps
    for round_ in range(10):
        coll.drop()
        clng, clat = rng.uniform(-170, 170), rng.uniform(-80, 80)
        rad = rng.uniform(0.001, 0.5)
        docs, want = [], []
        for i in range(150):
            lng = round(rng.uniform(-180, 180) if i % 3 == 0 else
                        max(-180, min(180, clng + rng.uniform(-1.5, 1.5) * math.degrees(rad))), 6)
            lat = round(rng.uniform(-90, 90) if i % 3 == 0 else
                        max(-90, min(90, clat + rng.uniform(-1.5, 1.5) * math.degrees(rad))), 6)
            d = haversine(clng, clat, lng, lat)
            if abs(d - rad) < 1e-7:
                continue
            docs.append({"_id": i, "loc": [lng, lat] if i % 2 else point(lng, lat)})
            if d < rad:
                want.append(i)
        coll.insert_many(docs)
        got = ids(coll, {"loc": {"$geoWithin": {"$centerSphere": [[clng, clat], rad]}}})
        assert got == want, round_


def test_flat_shapes_against_plane_geometry(client):
    rng = random.Random(SEED + 2)
    coll = client.geo.flat
    for round_ in range(10):
        coll.drop()
        # points on a half-unit grid, so boxes and circles meet some exactly
        docs = [{"_id": i, "loc": [rng.randint(-40, 40) / 2, rng.randint(-40, 40) / 2]}
                for i in range(200)]
        # GeoJSON points answer flat shapes by their coordinates too
        docs += [{"_id": 1000 + i, "loc": point(rng.randint(-40, 40) / 2, rng.randint(-40, 40) / 2)}
                 for i in range(50)]
        coll.insert_many(docs)
        xy = {d["_id"]: (d["loc"] if isinstance(d["loc"], list) else d["loc"]["coordinates"])
              for d in docs}

        x1, x2 = sorted(rng.randint(-40, 40) / 2 for _ in range(2))
        y1, y2 = sorted(rng.randint(-40, 40) / 2 for _ in range(2))
        want = sorted(k for k, (x, y) in xy.items() if x1 <= x <= x2 and y1 <= y <= y2)
        # corners given in either order
        assert ids(coll, {"loc": {"$geoWithin": {"$box": [[x2, y1], [x1, y2]]}}}) == want

        cx, cy, r = rng.randint(-20, 20) / 2, rng.randint(-20, 20) / 2, rng.randint(1, 16) / 2
        want = sorted(k for k, (x, y) in xy.items() if math.hypot(x - cx, y - cy) <= r)
        assert ids(coll, {"loc": {"$geoWithin": {"$center": [[cx, cy], r]}}}) == want

        # a star-shaped, often concave polygon; points off the grid
        coll.drop()
        pts = {i: (rng.uniform(-20, 20), rng.uniform(-20, 20)) for i in range(200)}
        coll.insert_many([{"_id": i, "loc": list(p)} for i, p in pts.items()])
        angles = sorted(rng.uniform(0, 2 * math.pi) for _ in range(rng.randint(3, 10)))
        poly = [(math.cos(a) * rng.uniform(3, 20), math.sin(a) * rng.uniform(3, 20)) for a in angles]
        want = sorted(i for i, (x, y) in pts.items() if ray_crossing(poly, x, y))
        assert ids(coll, {"loc": {"$geoWithin": {"$polygon": [list(p) for p in poly]}}}) == want


def test_lines_and_polygons_within_and_intersecting(client):
    rng = random.Random(SEED + 3)
    coll = client.geo.shapes
    for round_ in range(8):
        coll.drop()
        (clng, clat, radius), ring, normals = convex_polygon(rng)
        inside = []
        while len(inside) < 6:
            lng = round(clng + rng.uniform(-0.5, 0.5) * radius, 6)
            lat = round(clat + rng.uniform(-0.5, 0.5) * radius, 6)
            if sphere_side(normals, lng, lat) > 0:
                inside.append([lng, lat])
        far = [[(clng + 180) % 360 - 180, -clat], [(clng + 175) % 360 - 180, -clat + 1]]
        out = [round((clng + radius * 3 + 180) % 360 - 180, 6), clat]
        docs = [
            {"_id": "in_line", "loc": {"type": "LineString", "coordinates": inside[:2]}},
            {"_id": "cross_line", "loc": {"type": "LineString", "coordinates": [inside[0], out]}},
            {"_id": "far_line", "loc": {"type": "LineString", "coordinates": far}},
            {"_id": "in_tri", "loc": {"type": "Polygon", "coordinates": [
                inside[2:5] + [inside[2]]]}},
            {"_id": "in_multi", "loc": {"type": "MultiPoint", "coordinates": inside[:3]}},
            {"_id": "half_multi", "loc": {"type": "MultiPoint", "coordinates": [inside[0], out]}},
            {"_id": "coll", "loc": {"type": "GeometryCollection", "geometries": [
                {"type": "Point", "coordinates": inside[5]},
                {"type": "LineString", "coordinates": inside[:2]}]}},
            {"_id": "arr", "loc": [out, inside[1]]},
        ]
        # a triangle of three interior points may be degenerate; skip those rounds' triangle
        try:
            coll.insert_many(docs, ordered=False)
        except pymongo.errors.BulkWriteError:
            pass
        poly = {"type": "Polygon", "coordinates": [ring]}
        within = set(ids(coll, {"loc": {"$geoWithin": {"$geometry": poly}}}))
        meets = set(ids(coll, {"loc": {"$geoIntersects": {"$geometry": poly}}}))
        assert within == {"in_line", "in_tri", "in_multi", "coll", "arr"}, (round_, within)
        assert meets == within | {"cross_line", "half_multi"}, (round_, meets)


# --------------------------------------------------------- fixed cases


def test_polygon_with_hole_and_multipolygon(client):
    coll = client.geo.hole
    coll.insert_many([{"_id": i, "loc": point(x, y)} for i, (x, y) in
                      enumerate([(1, 1), (5, 5), (9, 9), (11, 11), (25, 25), (5, 2)])])
    holed = {"type": "Polygon", "coordinates": [
        [[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]],
        [[4, 4], [6, 4], [6, 6], [4, 6], [4, 4]]]}
    assert ids(coll, {"loc": {"$geoWithin": {"$geometry": holed}}}) == [0, 2, 5]
    multi = {"type": "MultiPolygon", "coordinates": [
        [[[4, 4], [6, 4], [6, 6], [4, 6], [4, 4]]],
        [[[20, 20], [30, 20], [30, 30], [20, 30], [20, 20]]]]}
    assert ids(coll, {"loc": {"$geoWithin": {"$geometry": multi}}}) == [1, 4]
    # a point on an edge or a vertex is within (its leaf cell meets the polygon)
    coll.insert_many([{"_id": 10, "loc": point(10, 0)}, {"_id": 11, "loc": point(0, 5)}])
    assert {10, 11} <= set(ids(coll, {"loc": {"$geoWithin": {"$geometry": holed}}}))


def test_values_that_are_not_geometry_never_match(client):
    coll = client.geo.bad
    coll.insert_many([
        {"_id": 1, "loc": "x"}, {"_id": 2, "loc": {"type": "Point", "coordinates": "a"}},
        {"_id": 3, "loc": [200, 0]}, {"_id": 4},
        {"_id": 5, "loc": {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [0, 0]]]}},
        {"_id": 6, "loc": {"x": 1, "y": 1}},
        {"_id": 7, "loc": {"type": "Point", "coordinates": [1, 1],
                           "crs": {"type": "name", "properties": {"name": "EPSG:9999"}}}},
    ])
    box = {"type": "Polygon", "coordinates": [[[-5, -5], [5, -5], [5, 5], [-5, 5], [-5, -5]]]}
    # {x: 1, y: 1} is a legacy pair; [200, 0] is one too, but not on the sphere
    assert ids(coll, {"loc": {"$geoWithin": {"$geometry": box}}}) == [6]
    assert ids(coll, {"loc": {"$geoWithin": {"$box": [[-5, -5], [300, 5]]}}}) == [3, 6]


def test_legacy_pairs_on_the_sphere_and_geojson_in_flat_shapes(client):
    coll = client.geo.mix
    coll.insert_many([{"_id": 1, "loc": [10, 10]}, {"_id": 2, "loc": point(10, 10)},
                      {"_id": 3, "loc": {"lng": 10, "lat": 10}}, {"_id": 4, "loc": [10, 10, 99]}])
    assert ids(coll, {"loc": {"$geoWithin": {"$centerSphere": [[10, 10.001], 0.001]}}}) == [1, 2, 3, 4]
    assert ids(coll, {"loc": {"$geoWithin": {"$center": [[10, 11], 1]}}}) == [1, 2, 3, 4]
    assert ids(coll, {"loc": {"$geoIntersects": {"$geometry": [10, 10]}}}) == [1, 2, 3, 4]
    assert ids(coll, {"loc": {"$within": {"$box": [[0, 0], [10, 10]]}}}) == [1, 2, 3, 4]


# -------------------------------------------------------------- errors


def err(coll, flt):
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        list(coll.find(flt))
    return e.value.code, e.value.details["errmsg"]


SQ = {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]}


@pytest.mark.parametrize("flt,code,msg", [
    ({"loc": {"$geoWithin": 5}}, 2, "geometry must be an object"),
    ({"loc": {"$geoWithin": {}}}, 2, "geo query doesn't have any geometry"),
    ({"loc": {"$geoWithin": {"$foo": [1, 2]}}}, 2, "unknown geo specifier: $foo: [ 1, 2 ]"),
    ({"loc": {"$geoWithin": {"$geometry": SQ, "$box": [[0, 0], [1, 1]]}}}, 2,
     "$geoWithin doesn't accept multiple shapes"),
    ({"loc": {"$geoWithin": {"$geometry": SQ}, "$exists": True}}, 2, "can't parse extra field"),
    ({"loc": {"$geoWithin": {"$geometry": point(1, 1)}}}, 2,
     "$within not supported with provided geometry: { $geoWithin: { $geometry: "),
    ({"loc": {"$geoIntersects": {"$box": [[0, 0], [1, 1]]}}}, 2,
     "$geoIntersect not supported with provided geometry"),
    ({"loc": {"$geoWithin": {"$box": [[0, 0]]}}}, 2,
     "Point must be an array or object, instead got type missing"),
    ({"loc": {"$geoWithin": {"$center": [[0, 0], -1]}}}, 2, "Radius must be a non-negative number: -1"),
    ({"loc": {"$geoWithin": {"$center": [[0, 0], 1, 2]}}}, 2,
     "Only 2 fields allowed for circular region, but more were provided"),
    ({"loc": {"$geoWithin": {"$centerSphere": [[200, 0], 1]}}}, 2,
     "Longitude/latitude is out of bounds, lng: 200 lat: 0"),
    ({"loc": {"$geoWithin": {"$polygon": [[0, 0], [1, 1]]}}}, 2,
     "Polygon must have at least 3 points, instead got 2 vertices"),
    ({"loc": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": "hi"}}}}, 2,
     "Polygon coordinates must be an array, instead got type string"),
    ({"loc": {"$geoWithin": {"$geometry": {"type": "Polygon",
                                           "coordinates": [[[0, 0], [1, 2], [2, 3]]]}}}}, 2,
     "Loop is not closed, first vertex does not equal last vertex: [ [ 0, 0 ], [ 1, 2 ], [ 2, 3 ] ]"),
    ({"loc": {"$geoWithin": {"$geometry": {"type": "Polygon",
                                           "coordinates": [[[0, 0], [1, 2], [0, 0]]]}}}}, 2,
     "Loop must have at least 3 different vertices, 2 unique vertices were provided: "),
    ({"loc": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [
        [[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]], [[5, 5], [6, 5], [6, 6], [5, 5]]]}}}}, 2,
     "Secondary loops not contained by first exterior loop - secondary loops must be holes"),
    ({"loc": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [
        [[0, 0], [2, 2], [2, 0], [0, 2], [0, 0]]]}}}}, 2, "Loop is not valid: "),
    ({"loc": {"$geoWithin": {"$geometry": {"type": "MultiPolygon", "coordinates": ""}}}}, 2,
     "MultiPolygon coordinates must be an array, instead got type string"),
    ({"loc": {"$geoWithin": {"$geometry": {"type": "MultiPolygon", "coordinates": []}}}}, 2,
     "MultiPolygon coordinates must have at least 1 element"),
    ({"loc": {"$geoIntersects": {"$geometry": {"type": "LineString", "coordinates": [5.0, 5]}}}}, 2,
     "GeoJSON coordinates must be an array, instead got type double"),
    ({"loc": {"$geoIntersects": {"$geometry": {"type": "LineString", "coordinates": 5.0}}}}, 2,
     "GeoJSON coordinates must be an array of coordinates, instead got type double"),
    ({"loc": {"$geoIntersects": {"$geometry": {"type": "LineString", "coordinates": [[1, 1]]}}}},
     2, "GeoJSON LineString must have at least 2 vertices, instead got 1 vertices"),
    ({"loc": {"$geoIntersects": {"$geometry": {"type": "Point", "coordinates": ["a", 5]}}}}, 2,
     "Point must only contain numeric elements, instead got type string"),
    ({"loc": {"$geoIntersects": {"$geometry": {"type": "Point", "coordinates": [float("inf"), 5]}}}},
     2, "Point coordinates must be finite numbers"),
    ({"loc": {"$geoIntersects": {"$geometry": {"type": "Square", "coordinates": [1, 5]}}}}, 2,
     "unknown GeoJSON type: { type: \"Square\", coordinates: [ 1, 5 ] }"),
    ({"loc": {"$geoIntersects": {"$geometry": {"type": "GeometryCollection",
                                               "geometries": [point(1, 1), 5]}}}}, 2,
     "Element 1 of \"geometries\" must be an object, instead got type int: 5"),
    ({"loc": {"$geoIntersects": {"$geometry": {"type": "GeometryCollection", "geometries": [
        {"type": "GeometryCollection", "geometries": [point(1, 1)]}]}}}}, 2,
     "GeometryCollections cannot be nested"),
    ({"loc": {"$geoIntersects": {"$geometry": {**SQ, "crs": {"type": "name"}}}}}, 2,
     "CRS must have field \"properties\" which is an object, instead got type missing"),
    ({"loc": {"$geoIntersects": {"$geometry": {**SQ, "crs": {
        "type": "name", "properties": {"nam": "x"}}}}}}, 2,
     "In CRS, \"properties.name\" must be a string, instead got type missing"),
    ({"loc": {"$geoIntersects": {"$geometry": {**point(1, 1), "crs": {
        "type": "name", "properties": {"name": "urn:x-mongodb:crs:strictwinding:EPSG:4326"}}}}}}, 2,
     "Strict winding order CRS is only supported by polygon"),
    ({"loc": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [
        [[10, 10], [-10, 10], [-10, -10], [10, -10], [10, 10]], []], "crs": {
        "type": "name", "properties": {"name": "urn:x-mongodb:crs:strictwinding:EPSG:4326"}}}}}},
     2, "Only one simple loop is allowed in a big polygon, instead provided 2"),
    # $near: checked, then refused without a geo index (mongod's planner)
    ({"loc": {"$near": [0, 0]}}, 291, "unable to find index for $geoNear query"),
    ({"loc": {"$nearSphere": {"$geometry": point(0, 0), "$maxDistance": 10}}}, 291,
     "unable to find index for $geoNear query"),
    ({"loc": {"$near": [0, 0], "$maxDistance": -1}}, 16896, "$maxDistance must be non-negative"),
    ({"loc": {"$near": [0, 0], "$minDistance": "a"}}, 16893, "$minDistance must be a number"),
    ({"loc": {"$near": [0, 0, -5]}}, 18522, "max distance must be non-negative"),
    ({"loc": {"$near": [0, 0], "$foo": 1}}, 34413, "invalid argument in geo near query: $foo"),
    ({"loc": {"$near": {"$geometry": point(0, 0), "$maxDistance": "x"}}}, 2,
     "$maxDistance must be a number"),
    ({"loc": {"$near": {"$geometry": [0, 0]}}}, 2, "$near requires geojson point, given "),
    ({"loc": {"$near": {"$maxDistance": 1}}}, 2, "$geometry is required for geo near query"),
    ({"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": ["a", 0]}}}}, 2,
     "invalid point in geo near query $geometry argument: "),
    ({"loc": {"$exists": True, "$near": [0, 0]}}, 2, "near must be first in: "),
    ({"loc": {"$nearSphere": [200, 0]}}, 2, "Legacy point is out of bounds for spherical query"),
])
def test_errors(client, flt, code, msg):
    coll = client.geo.errs
    coll.insert_one({"loc": [0, 0]})
    got_code, got_msg = err(coll, flt)
    assert got_code == code and msg in got_msg, (got_code, got_msg)


# ------------------------------------------------------- differential


def test_btree_index_on_the_path_changes_nothing(client):
    """A b-tree index on the geo path (hinted, or there for the planner)
    only ever yields candidates: the geo conditions stay the matcher's,
    so the documents are those of the collection scan."""
    rng = random.Random(SEED + 4)
    coll = client.geo.diff
    docs = []
    for i in range(400):
        lng, lat = round(rng.uniform(-20, 20), 4), round(rng.uniform(-20, 20), 4)
        docs.append({"_id": i, "a": i % 5,
                     "loc": [lng, lat] if i % 3 == 0 else point(lng, lat) if i % 3 == 1
                     else {"type": "MultiPoint", "coordinates": [[lng, lat], [lat, lng]]}})
    coll.insert_many(docs)
    filters = []
    for _ in range(10):
        (clng, clat, radius), ring, _ = convex_polygon(rng)
        ring = [[max(-20, min(20, x)), max(-20, min(20, y))] for x, y in ring]
        filters.append({"loc": {"$geoIntersects": {"$geometry": point(*ring[0])}}})
        filters.append({"loc": {"$geoWithin": {"$centerSphere": [ring[0], 0.1]}}, "a": {"$lt": 3}})
        filters.append({"loc": {"$geoWithin": {"$box": [ring[0], ring[1]]}}})
        filters.append({"$or": [{"loc": {"$geoWithin": {"$center": [ring[1], 5]}}}, {"a": 4}]})
    plain = [ids(coll, f) for f in filters]
    coll.create_index("loc")
    coll.create_index([("a", 1), ("loc", 1)])
    for f, want in zip(filters, plain):
        assert ids(coll, f) == want, f
        assert sorted(d["_id"] for d in coll.find(f).hint("loc_1")) == want, f
        assert sorted(d["_id"] for d in coll.find(f).hint("a_1_loc_1")) == want, f
        assert coll.count_documents(f) == len(want)
    assert sum(len(w) for w in plain) > 100
