"""DBRefs (issue 45): a {$ref, $id[, $db]} document is a plain value in
filters, updates and pipelines, its fields are reachable by path, and it
may be stored -- as mongod 7.0 does it.

mongod's rules, from its source:
- field_path.cpp, FieldPath: "$id", "$ref", "$db" (and mongod's metadata
  names) are the '$' names a path component may have; one rule for every
  path ($project, $group, $lookup, $unwind, $graphLookup, $facet's names,
  object literals ...), which checks the whole path (40352, 40353) before
  its components (15998, 16410, 16411, 16412).
- expression_parser.cpp, isExpressionDocument / isDBRefDocument: a filter
  value whose first field starts with '$' is an operator document unless it
  has a "$ref" and an "$id" field (any order, any position, names only);
  under $elemMatch any one of "$ref", "$id", "$db" is enough, and the
  operand is then a filter on the elements' fields.  $all refuses only a
  document led by a path operator ({$gt: 1}).  "$ref", "$id" and "$db" in a
  filter document are equalities on those fields (parseDBRef), only $id's
  following the collation.
- bsonobj.cpp, storageValidEmbedded: an _id may hold a DBRef ($ref a
  string first, then $id, then an optional string $db), and no other '$'
  name at any depth.
"""
from __future__ import annotations

import re

import pytest
from bson import SON, ObjectId
from bson.dbref import DBRef
from pymongo.errors import OperationFailure, WriteError

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


# ------------------------------------------------------- filters: values

FILTERS = [
    ({"r": FRONT}, [1, 3]),
    ({"r": {"$eq": FRONT}}, [1, 3]),
    ({"r": {"$ne": FRONT}}, [2, 4, 5, 6]),
    ({"r": {"$in": [FRONT, BACK_OTHER]}}, [1, 2, 3]),
    ({"r": {"$nin": [FRONT, "plain"]}}, [2, 4, 6]),
    ({"r": {"$all": [FRONT, WINDOW]}}, [3]),
    ({"r": {"$all": [FRONT_EXTRA]}}, [4, 6]),
    ({"r": FRONT_EXTRA}, [4, 6]),
    ({"r": BACK_OTHER}, [2]),
    ({"r": {"$not": {"$eq": FRONT}}}, [2, 4, 5, 6]),
    ({"r": {"$gte": FRONT}}, [1, 2, 3, 4, 6]),
    ({"$or": [{"r": FRONT}, {"r": WINDOW}]}, [1, 3]),
    # their fields by path
    ({"r.$id": OID1}, [1, 3, 4, 6]),
    ({"r.$ref": "windows"}, [3]),
    ({"r.$db": "other"}, [2]),
    ({"r.$id": {"$in": [OID2, 7]}}, [2, 3]),
    # under $elemMatch: a filter on the elements' fields, extra fields allowed
    ({"r": {"$elemMatch": SON([("$ref", "doors"), ("$id", OID1)])}}, [3, 6]),
    ({"r": {"$elemMatch": {"$ref": "windows"}}}, [3]),
    ({"r": {"$elemMatch": {"$id": 7}}}, [3]),
    ({"r": {"$elemMatch": SON([("$id", OID1), ("extra", 1)])}}, [6]),
    # ... whose values are taken as they are: a regex is a value there
    ({"r": {"$elemMatch": {"$ref": re.compile("^d")}}}, []),
    # "$ref" and "$id" anywhere make a DBRef, even after an operator name,
    # and even in the "wrong" order: an equality that matches nothing here
    ({"r": SON([("$id", OID1), ("$ref", "doors")])}, []),
    ({"r": SON([("$gt", 1), ("$ref", "doors"), ("$id", OID1)])}, []),
    ({"r": {"$in": [SON([("$id", OID1), ("$ref", "doors")])]}}, []),
    # $all refuses only a path operator: {$foo: 1} is a value
    ({"r": {"$all": [{"$foo": 1}]}}, []),
]


@pytest.mark.parametrize("flt,expected", FILTERS)
def test_filter(db, flt, expected):
    assert ids(db.c.find(flt)) == expected


@pytest.mark.parametrize("flt,expected", FILTERS)
def test_filter_through_an_index(db, flt, expected):
    """The index bounds read the filter as the matcher does: the same
    answer through an index on r and on r.$id (an under-approximating
    bound would lose documents 4 and 6)."""
    db.c.create_index("r")
    db.c.create_index("r.$id")
    assert ids(db.c.find(flt).hint("r_1")) == expected
    assert ids(db.c.find(flt).hint("r.$id_1")) == expected


def test_equality_uses_the_index(db):
    """A DBRef equality is a point on the index, not a scan of it."""
    db.c.create_index("r")
    ex = db.c.find({"r": FRONT}).explain()
    assert "IXSCAN" in str(ex["queryPlanner"]["winningPlan"])
    assert ex["executionStats"]["totalKeysExamined"] <= 3
    assert ex["executionStats"]["nReturned"] == 2


def test_match_count_distinct_delete(db):
    assert db.c.count_documents({"r": FRONT}) == 2
    assert sorted(db.c.distinct("_id", {"r": {"$in": [WINDOW]}})) == [3]
    assert ids(db.c.aggregate([{"$match": {"r": FRONT}}])) == [1, 3]
    assert db.c.delete_many({"r": {"$all": [FRONT, WINDOW]}}).deleted_count == 1
    assert ids(db.c.find()) == [1, 2, 4, 5, 6]


def test_top_level_dbref_fields_are_equalities(db):
    """mongod's parseDBRef: {$ref: v} at the top of a filter is an equality
    on the field "$ref" -- v as it is, even an operator document."""
    db.top.insert_many([SON([("_id", 1), ("$ref", "a"), ("$id", {"$gt": 1})]),
                        SON([("_id", 2), ("$ref", "b"), ("$id", 5), ("$db", "x")])])
    # (pymongo reads such a document back as a DBRef: ask for the _ids)
    assert db.top.distinct("_id", {"$ref": "a"}) == [1]
    assert db.top.distinct("_id", {"$id": {"$gt": 1}}) == [1]
    assert db.top.distinct("_id", {"$id": 5, "$db": "x"}) == [2]


def test_only_id_follows_the_collation(db):
    """parseDBRef: "$id" compares under the query's collation, "$ref" and
    "$db" compare bytes."""
    db.coll.insert_one({"_id": 1, "r": [DBRef("Doors", "A", "Db")]})
    ci = {"locale": "en", "strength": 2}
    assert ids(db.coll.find({"r": {"$elemMatch": {"$id": "a"}}}, collation=ci)) == [1]
    assert ids(db.coll.find({"r": {"$elemMatch": {"$ref": "doors"}}}, collation=ci)) == []
    assert ids(db.coll.find({"r": {"$elemMatch": {"$db": "db"}}}, collation=ci)) == []
    assert ids(db.coll.find({"r": {"$elemMatch": {"$ref": "Doors"}}}, collation=ci)) == [1]


# ------------------------------------------------------- filters: errors

@pytest.mark.parametrize("flt,code,msg", [
    # an incomplete DBRef outside $elemMatch is an operator document
    ({"r": {"$ref": "doors"}}, 2, "unknown operator: $ref"),
    ({"r": {"$id": OID1}}, 2, "unknown operator: $id"),
    ({"r": {"$in": [{"$ref": "doors"}]}}, 2, "cannot nest $ under $in"),
    ({"r": {"$nin": [{"$gt": 1}]}}, 2, "cannot nest $ under $nin"),
    ({"r": {"$all": [{"$gt": 1}]}}, 2, "no $ expressions in $all"),
    ({"r": {"$all": [FRONT, {"$elemMatch": {"$id": 1}}]}}, 2, "no $ expressions in $all"),
    ({"r": {"$all": [{"$elemMatch": {"$id": 1}}, FRONT]}}, 2,
     "$all/$elemMatch has to be consistent"),
    ({"r": {"$not": FRONT}}, 2, "unknown operator: $ref"),
    # a DBRef field makes $elemMatch's operand a document filter, where
    # $gt stands alone
    ({"r": {"$elemMatch": SON([("$gt", 1), ("$id", 2)])}}, 2, "unknown top level operator: $gt"),
])
def test_filter_errors(db, flt, code, msg):
    got_code, got_msg = find_err(db, flt)
    assert got_code == code
    assert got_msg.startswith(msg)


def test_partial_index_on_a_dbref_equality(db):
    """{r: DBRef} is an equality, which a partialFilterExpression may hold."""
    db.c.create_index("n", partialFilterExpression={"r": FRONT})
    db.c.update_many({}, {"$set": {"n": 1}})
    plan = db.c.find({"r": FRONT, "n": 1}).explain()["queryPlanner"]["winningPlan"]
    assert "n_1" in str(plan)
    assert ids(db.c.find({"r": FRONT, "n": 1})) == [1, 3]


# --------------------------------------------------------------- updates

def test_update_operators_store_dbrefs(db):
    c = db.c
    c.update_one({"_id": 5}, {"$set": {"r": WINDOW}})
    c.update_one({"_id": 5}, {"$push": {"refs": FRONT}})
    c.update_one({"_id": 5}, {"$addToSet": {"refs": FRONT}})
    c.update_one({"_id": 5}, {"$addToSet": {"refs": {"$each": [FRONT, BACK_OTHER]}}})
    doc = c.find_one({"_id": 5})
    assert doc["r"] == WINDOW
    assert doc["refs"] == [FRONT, BACK_OTHER]
    assert ids(c.find({"refs": BACK_OTHER})) == [5]


def test_update_by_dbref_and_set_its_fields(db):
    c = db.c
    res = c.update_many({"r": FRONT}, {"$set": {"hit": True}})
    assert res.matched_count == 2
    c.update_one({"_id": 2}, {"$set": {"r.$id": 9}, "$unset": {"r.$db": 1}})
    assert c.find_one({"_id": 2})["r"] == DBRef("doors", 9)
    doc = c.find_one_and_update({"r": {"$in": [DBRef("doors", 9)]}}, {"$inc": {"k": 1}},
                                return_document=True)
    assert doc["_id"] == 2 and doc["k"] == 1


def test_pull_a_dbref(db):
    """$pull's object condition is a filter on the elements: a DBRef's
    "$ref" and "$id" are equalities, other fields may differ."""
    db.c.update_one({"_id": 3}, {"$push": {"r": FRONT_EXTRA}})
    db.c.update_one({"_id": 3}, {"$pull": {"r": FRONT}})
    assert db.c.find_one({"_id": 3})["r"] == [WINDOW]


def test_replacement_and_set_on_insert(db):
    c = db.c
    c.replace_one({"_id": 5}, {"r": BACK_OTHER, "refs": [WINDOW]})
    assert c.find_one({"_id": 5}) == {"_id": 5, "r": BACK_OTHER, "refs": [WINDOW]}
    c.update_one({"_id": 50}, {"$setOnInsert": {"r": WINDOW}}, upsert=True)
    assert c.find_one({"_id": 50}) == {"_id": 50, "r": WINDOW}


@pytest.mark.parametrize("flt", [
    {"q": DBRef("z", 9)},
    {"q": {"$eq": DBRef("z", 9)}},
    {"q": {"$in": [DBRef("z", 9)]}},
    {"$and": [{"q": DBRef("z", 9)}]},
])
def test_upsert_seed_takes_the_dbref(db, flt):
    res = db.c.update_one(flt, {"$set": {"k": 1}}, upsert=True)
    doc = db.c.find_one({"_id": res.upserted_id})
    assert doc["q"] == DBRef("z", 9)
    assert doc["k"] == 1


def test_upsert_seed_from_dbref_field_paths(db):
    res = db.c.update_one(SON([("q.$ref", "z"), ("q.$id", 9)]), {"$set": {"k": 1}}, upsert=True)
    doc = db.c.find_one({"_id": res.upserted_id})
    assert list(doc["q"].as_doc().items()) == [("$ref", "z"), ("$id", 9)]


def test_lookup_foreign_field_and_pipeline_match(db):
    out = list(db.doors.aggregate([
        {"$lookup": {"from": "c", "localField": "_id", "foreignField": "r.$id", "as": "by"}},
        {"$lookup": {"from": "c", "pipeline": [{"$match": {"r": BACK_OTHER}}], "as": "m"}},
        {"$project": {"by": "$by._id", "m": "$m._id"}},
        {"$sort": {"_id": 1}},
    ]))
    assert [sorted(d["by"]) for d in out] == [[1, 3, 4, 6], [2]]
    assert [d["m"] for d in out] == [[2], [2]]


# --------------------------------------------------------------- storing

@pytest.mark.parametrize("id_value", [
    DBRef("c", 1),
    DBRef("c", 1, "db"),
    SON([("$ref", "c"), ("$id", 1), ("x", {"y": 1})]),
    {"a": DBRef("c", 1)},
    {"a": [DBRef("c", 1)]},
])
def test_id_may_be_a_dbref(db, id_value):
    db.ids.insert_one({"_id": id_value, "v": 1})
    assert db.ids.find_one({"_id": id_value})["v"] == 1


@pytest.mark.parametrize("id_value,bad", [
    (SON([("$ref", 1), ("$id", 2)]), "$ref"),                 # $ref not a string
    (SON([("$id", 2), ("$ref", "c")]), "$id"),                # not $ref first
    (SON([("$ref", "c"), ("x", 2)]), "$ref"),                 # no $id after it
    (SON([("$ref", "c"), ("$id", 1), ("$db", 5)]), "$db"),    # $db not a string
    (SON([("$ref", "c"), ("$id", 1), ("$x", 5)]), "$x"),
    ({"a": {"$x": 1}}, "$x"),                                 # at any depth
    ({"a": [{"$x": 1}]}, "$x"),
    (SON([("a", 1), ("$ref", "c"), ("$id", 1)]), "$ref"),     # DBRef not first
])
def test_id_refuses_other_dollar_names(db, id_value, bad):
    with pytest.raises(WriteError) as ei:
        db.ids.insert_one({"_id": id_value})
    assert ei.value.code == 52
    assert ei.value.details["errmsg"] == (
        f"_id fields may not contain '$'-prefixed fields: {bad} is not valid for storage.")


def test_upsert_with_a_dbref_id(db):
    res = db.ids.update_one({"_id": DBRef("c", 1)}, {"$set": {"k": 1}}, upsert=True)
    assert res.upserted_id == DBRef("c", 1)
    res = db.ids.replace_one({"x": 1}, {"_id": DBRef("c", 2), "k": 2}, upsert=True)
    assert res.upserted_id == DBRef("c", 2)
    found = list(db.ids.find({"_id": {"$in": [DBRef("c", 1), DBRef("c", 2)]}}, {"k": 1}))
    assert sorted(d["k"] for d in found) == [1, 2]
