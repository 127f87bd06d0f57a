"""DBRefs (issue 45): a {$ref, $id[, $db]} document is a plain value in
filters, updates and pipelines, its fields are reachable by path, and it
may be stored -- as mongod 7.0 does it.

mongod's rules, from its source:
- field_path.cpp, FieldPath: "$id", "$ref", "$db" (and mongod's metadata
  names) are the '$' names a path component may have; one rule for every
  path ($project, $group, $lookup, $unwind, $graphLookup, $facet's names,
  object literals ...), which checks the whole path (40352, 40353) before
  its components (15998, 16410, 16411, 16412).
"""
from __future__ import annotations

import pytest
from bson import SON, ObjectId
from bson.dbref import DBRef
from pymongo.errors import OperationFailure

OID1 = ObjectId("6500000000000000000000a1")
OID2 = ObjectId("6500000000000000000000a2")
FRONT = DBRef("doors", OID1)
BACK_OTHER = DBRef("doors", OID2, "other")
WINDOW = DBRef("windows", 7)
# a DBRef with a field of its own after $id (drivers keep such fields)
FRONT_EXTRA = SON([("$ref", "doors"), ("$id", OID1), ("extra", 1)])

DOCS = [
    {"_id": 1, "r": FRONT},
    {"_id": 2, "r": BACK_OTHER},
    {"_id": 3, "r": [FRONT, WINDOW]},
    {"_id": 4, "r": FRONT_EXTRA},
    {"_id": 5, "r": "plain"},
    {"_id": 6, "r": [FRONT_EXTRA]},
]


@pytest.fixture
def db(client):
    d = client.t
    d.c.insert_many(DOCS)
    d.doors.insert_many([{"_id": OID1, "name": "front"}, {"_id": OID2, "name": "back"}])
    return d


def ids(cursor):
    return sorted(d["_id"] for d in cursor)


def find_err(db, flt, coll="c"):
    with pytest.raises(OperationFailure) as ei:
        list(db[coll].find(flt))
    return ei.value.code, ei.value.details["errmsg"]


def agg_err(db, pipeline, coll="c"):
    with pytest.raises(OperationFailure) as ei:
        list(db[coll].aggregate(pipeline))
    return ei.value.code, ei.value.details["errmsg"]


# ----------------------------------------------------------- field paths

def test_lookup_by_dbref_id(db):
    out = list(db.c.aggregate([
        {"$match": {"_id": {"$in": [1, 2, 3]}}},
        {"$lookup": {"from": "doors", "localField": "r.$id", "foreignField": "_id", "as": "d"}},
        {"$project": {"names": "$d.name"}},
        {"$sort": {"_id": 1}},
    ]))
    assert out == [{"_id": 1, "names": ["front"]}, {"_id": 2, "names": ["back"]},
                   {"_id": 3, "names": ["front"]}]


def test_expression_paths(db):
    out = list(db.c.aggregate([
        {"$match": {"_id": {"$in": [1, 2, 3]}}},
        {"$project": {"id": "$r.$id", "ref": "$r.$ref", "db": "$$ROOT.r.$db",
                      "lit": {"$mergeObjects": [{"a": 1, "$id": "$r.$id"}]}}},
        {"$sort": {"_id": 1}},
    ]))
    assert out == [
        {"_id": 1, "id": OID1, "ref": "doors", "lit": {"a": 1, "$id": OID1}},
        {"_id": 2, "id": OID2, "ref": "doors", "db": "other", "lit": {"a": 1, "$id": OID2}},
        {"_id": 3, "id": [OID1, 7], "ref": ["doors", "windows"], "db": [],
         "lit": {"a": 1, "$id": [OID1, 7]}},
    ]


def test_group_sort_unwind(db):
    out = list(db.c.aggregate([
        {"$match": {"_id": {"$in": [1, 2, 3]}}},
        {"$unwind": "$r"},
        {"$group": {"_id": "$r.$ref", "ids": {"$push": "$r.$id"}}},
        {"$sort": {"_id": 1}},
    ]))
    assert out == [{"_id": "doors", "ids": [OID1, OID2, OID1]}, {"_id": "windows", "ids": [7]}]
    out = list(db.c.aggregate([{"$match": {"_id": {"$in": [1, 2]}}},
                               {"$sort": {"r.$id": -1}}, {"$unwind": "$r.$id"}]))
    assert [d["_id"] for d in out] == [2, 1]


# One pipeline per place a field path is checked: each accepts a DBRef
# field, as mongod's one FieldPath rule does.
ACCEPTED = [
    [{"$project": {"x": "$r.$id"}}],
    [{"$project": {"r.$id": 1}}],
    [{"$project": {"r": {"$ref": 1}}}],
    [{"$addFields": {"r.$id": 1}}],
    [{"$unset": "r.$db"}],
    [{"$group": {"_id": "$r.$ref", "n": {"$sum": "$r.$id"}}}],
    [{"$sort": {"r.$id": 1}}],
    [{"$unwind": "$r.$id"}],
    [{"$unwind": {"path": "$r.$id", "preserveNullAndEmptyArrays": True}}],
    [{"$lookup": {"from": "doors", "localField": "r.$id", "foreignField": "_id", "as": "d"}}],
    [{"$lookup": {"from": "doors", "localField": "_id", "foreignField": "x.$id", "as": "d"}}],
    [{"$graphLookup": {"from": "c", "startWith": "$r.$id", "connectFromField": "r.$id",
                       "connectToField": "r.$id", "as": "g", "depthField": "d.$id"}}],
    [{"$bucketAuto": {"groupBy": "$r.$ref", "buckets": 2}}],
    [{"$sortByCount": "$r.$ref"}],
    [{"$setWindowFields": {"partitionBy": "$r.$ref", "sortBy": {"r.$id": 1},
                           "output": {"w.$id": {"$count": {}}}}}],
    [{"$densify": {"field": "r.$id", "range": {"step": 1, "bounds": "full"}}}],
    [{"$facet": {"$id": [{"$count": "n"}]}}],
    [{"$replaceWith": {"a": 1, "$id": "$_id"}}],
]


@pytest.mark.parametrize("pipeline", ACCEPTED, ids=lambda p: next(iter(p[0])))
def test_dbref_fields_are_valid_field_paths(client, pipeline):
    db = client.t
    db.n.insert_many([{"_id": 1, "r": DBRef("doors", 1)}, {"_id": 2, "r": DBRef("doors", 3)}])
    db.doors.insert_one({"_id": 1})
    list(db.n.aggregate(pipeline))


HINT = " Consider using $getField or $setField."


@pytest.mark.parametrize("pipeline,code,msg", [
    ([{"$project": {"x": "$r.$x"}}], 16410, "FieldPath field names may not start with '$'." + HINT),
    ([{"$group": {"_id": "$$ROOT.$x"}}], 16410,
     "FieldPath field names may not start with '$'." + HINT),
    ([{"$unwind": "$r.$x"}], 16410, "FieldPath field names may not start with '$'." + HINT),
    ([{"$lookup": {"from": "d", "localField": "$x", "foreignField": "_id", "as": "d"}}], 16410,
     "FieldPath field names may not start with '$'." + HINT),
    ([{"$facet": {"$x": [{"$count": "n"}]}}], 16410,
     "FieldPath field names may not start with '$'." + HINT),
    # an object literal's names (ExpressionObject::parse)
    ([{"$replaceWith": {"a": 1, "$x": 2}}], 16410,
     "FieldPath field names may not start with '$'." + HINT),
    ([{"$replaceWith": {"a": 1, "b.c": 2}}], 16412,
     "FieldPath field names may not contain '.'." + HINT),
    ([{"$replaceWith": {"a": 1, "": 2}}], 15998,
     "FieldPath field names may not be empty strings."),
    ([{"$facet": {"a.b": [{"$count": "n"}]}}], 16412,
     "FieldPath field names may not contain '.'." + HINT),
    # the whole path before its components: a trailing '.' is 40353
    ([{"$unwind": "$a."}], 40353, "FieldPath must not end with a '.'."),
    ([{"$lookup": {"from": "d", "localField": "a.", "foreignField": "_id", "as": "d"}}], 40353,
     "FieldPath must not end with a '.'."),
    ([{"$project": {"x": "$$ROOT.a."}}], 40353, "FieldPath must not end with a '.'."),
    ([{"$project": {"x": "$$ROOT."}}], 40353, "FieldPath must not end with a '.'."),
    # a NUL in a path: mongod's message ends at the NUL of its own literal
    ([{"$project": {"x": "$a\x00b"}}], 16411, "FieldPath field names may not contain '"),
])
def test_field_path_errors(client, pipeline, code, msg):
    db = client.t
    db.n.insert_one({"_id": 1})
    got_code, got_msg = agg_err(db, pipeline, coll="n")
    assert got_code == code
    assert got_msg.endswith(msg)
