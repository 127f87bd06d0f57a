"""Collations in the aggregation pipeline and its expression language, as
mongod 7.0: the aggregate's collation (the command's `collation`, else the
collection's default, else simple) governs every comparison of strings --
$match, $sort, $group keys, accumulators, expressions, $lookup /
$graphLookup / $unionWith reads, $facet, window partitions and ranks,
$bucket / $bucketAuto -- and never $regex*, $strcasecmp, $indexOfCP,
$split, $replaceAll or field names.

Where values are equal under the collation, the one mongod keeps is the
first seen: a $group's _id, $addToSet's element, $max/$min's value, a set
operator's element (mongod's ValueSet keeps the first inserted).  Expected
orders come from the manual's collation examples (Canadian French
cote < côte < coté < côté; "café"/"cafe"/"cafE" equal at strength 1) and
from ICU's rules (strength 2 ignores case; numericOrdering compares digit
runs as numbers)."""
from __future__ import annotations

import re

import pymongo
import pytest
from bson import Int64
from pymongo.errors import OperationFailure

import multifora
from test_agg_stages import typed

CI = {"locale": "en_US", "strength": 2}       # case-insensitive
NUM = {"locale": "en", "numericOrdering": True}


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = multifora.Server(str(tmp_path_factory.mktemp("aggcoll") / "db"), port=0,
                         enable_test_commands=True)
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def mc(srv):
    c = pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000)
    yield c
    c.close()


@pytest.fixture
def db(mc):
    mc.drop_database("aggcoll")
    return mc.aggcoll


def load(coll, values, field="x"):
    coll.insert_many([{"_id": i + 1, field: v} for i, v in enumerate(values)])


def one(db, expr, collation=CI, **kw):
    """The value of `expr` evaluated once ({$documents: [{}]}) under `collation`."""
    r = list(db.aggregate([{"$documents": [{}]}, {"$project": {"r": expr}}],
                          collation=collation, **kw))
    return r[0].get("r", "MISSING")


# ------------------------------------------------------------------ $match

def test_match_case_insensitive(db):
    """aggregate-collation.json: {$match: {x: "PING"}} finds "ping" at
    strength 2; without a collation only the exact string matches."""
    load(db.c, ["ping", "PING", "pong"])
    assert list(db.c.aggregate([{"$match": {"x": "PING"}}], collation=CI)) == [
        {"_id": 1, "x": "ping"}, {"_id": 2, "x": "PING"}]
    assert list(db.c.aggregate([{"$match": {"x": "PING"}}])) == [{"_id": 2, "x": "PING"}]
    # a $match that is not pushed into the read, and ranges
    assert list(db.c.aggregate([{"$project": {"y": "$x"}}, {"$match": {"y": {"$lt": "PO"}}}],
                               collation=CI)) == [{"_id": 1, "y": "ping"}, {"_id": 2, "y": "PING"}]
    assert list(db.c.aggregate([{"$match": {"x": {"$in": ["PONG", "nope"]}}}, {"$count": "n"}],
                               collation=CI)) == [{"n": 1}]


def test_match_strength1_accents(db):
    """The manual's places example: café, cafe and cafE are one at
    {locale: "fr", strength: 1}."""
    load(db.c, ["café", "cafe", "cafE", "cafés"], "category")
    r = list(db.c.aggregate([{"$match": {"category": "cafe"}}, {"$count": "n"}],
                            collation={"locale": "fr", "strength": 1}))
    assert typed(r) == typed([{"n": 3}])
    r = list(db.c.aggregate([{"$match": {"category": "cafe"}}, {"$count": "n"}]))
    assert typed(r) == typed([{"n": 1}])


def test_match_expr_and_let(db):
    """$expr in a (pushed-down) $match and the command's `let` compare
    under the collation too."""
    load(db.c, ["ping", "PING", "pong"])
    p = [{"$match": {"$expr": {"$eq": ["$x", "$$want"]}}}, {"$project": {"_id": 1}}]
    assert list(db.c.aggregate(p, collation=CI, let={"want": "Ping"})) == [{"_id": 1}, {"_id": 2}]
    assert list(db.c.aggregate(p, let={"want": "Ping"})) == []
    # a let variable computed under the collation
    r = list(db.c.aggregate([{"$limit": 1}, {"$project": {"_id": 0, "v": "$$v"}}],
                            collation=CI, let={"v": {"$eq": ["a", "A"]}}))
    assert r == [{"v": True}]


# ------------------------------------------------------------------ $sort

def test_sort_canadian_french(db):
    """The manual: fr_CA orders cote, côte, coté, côté (the last accent
    decides); binary order is cote, coté, côte, côté."""
    load(db.c, ["côté", "coté", "cote", "côte"], "w")
    p = [{"$sort": {"w": 1}}, {"$project": {"_id": 0, "w": 1}}]
    assert [d["w"] for d in db.c.aggregate(p, collation={"locale": "fr_CA"})] == [
        "cote", "côte", "coté", "côté"]
    assert [d["w"] for d in db.c.aggregate(p)] == ["cote", "coté", "côte", "côté"]


def test_sort_numeric_ordering_and_case(db):
    load(db.c, ["10", "9", "a", "B", "2", "b", "A"])
    p = [{"$sort": {"x": 1, "_id": 1}}, {"$project": {"_id": 0, "x": 1}}]
    assert [d["x"] for d in db.c.aggregate(p, collation=NUM)] == [
        "2", "9", "10", "a", "A", "b", "B"]
    assert [d["x"] for d in db.c.aggregate(p, collation=CI)] == [
        "10", "2", "9", "a", "A", "B", "b"]
    assert [d["x"] for d in db.c.aggregate(p)] == ["10", "2", "9", "A", "B", "a", "b"]
    # descending, and a top-k ($sort + $limit)
    p = [{"$sort": {"x": -1, "_id": 1}}, {"$limit": 3}, {"$project": {"_id": 0, "x": 1}}]
    assert [d["x"] for d in db.c.aggregate(p, collation=NUM)] == ["B", "b", "A"]


def test_sort_nested_strings(db):
    """Strings inside documents and arrays of a sort key are collated."""
    db.c.insert_many([{"_id": 1, "k": {"s": "b"}}, {"_id": 2, "k": {"s": "A"}},
                      {"_id": 3, "k": {"s": "C"}}])
    p = [{"$sort": {"k": 1}}, {"$project": {"_id": 1}}]
    assert [d["_id"] for d in db.c.aggregate(p, collation=CI)] == [2, 1, 3]
    assert [d["_id"] for d in db.c.aggregate(p)] == [2, 3, 1]


# ----------------------------------------------------------------- $group

def test_group_keys_first_seen(db):
    """Keys equal under the collation are one group; its _id is the first
    value seen (as mongod's ValueUnorderedMap keeps it)."""
    load(db.c, ["apple", "Apple", "APPLE", "banana", "BANANA"])
    p = [{"$sort": {"_id": 1}}, {"$group": {"_id": "$x", "n": {"$sum": 1}}},
         {"$sort": {"_id": 1}}]
    assert typed(list(db.c.aggregate(p, collation=CI))) == typed(
        [{"_id": "apple", "n": 3}, {"_id": "banana", "n": 2}])
    assert len(list(db.c.aggregate(p))) == 5
    # a compound _id: strings at any depth
    p = [{"$sort": {"_id": 1}}, {"$group": {"_id": {"k": "$x", "a": ["$x"]}, "n": {"$sum": 1}}},
         {"$sort": {"n": 1}}]
    assert typed(list(db.c.aggregate(p, collation=CI))) == typed(
        [{"_id": {"k": "banana", "a": ["banana"]}, "n": 2},
         {"_id": {"k": "apple", "a": ["apple"]}, "n": 3}])
    # $sortByCount groups alike
    r = list(db.c.aggregate([{"$sortByCount": "$x"}], collation=CI))
    assert typed(r) == typed([{"_id": "apple", "count": 3}, {"_id": "banana", "count": 2}])


def test_group_spilled_under_collation(db, mc):
    """With a tiny $group memory limit and allowDiskUse the partial groups
    spill and merge by their collated keys: the groups of the words
    case-folded, each reported with its first spelling."""
    words = ["Alpha", "alpha", "ALPHA", "beta", "Beta", "gamma"]
    docs = [{"_id": i, "x": words[(i * 5) % len(words)] + str(i % 40)} for i in range(600)]
    db.c.insert_many(docs)
    want = {}
    for d in docs:
        g = want.setdefault(d["x"].lower(), {"_id": d["x"], "n": 0, "first": d["_id"]})
        g["n"] += 1
    want = sorted(want.values(), key=lambda g: g["first"])
    p = [{"$sort": {"_id": 1}}, {"$group": {"_id": "$x", "n": {"$sum": 1},
                                            "first": {"$first": "$_id"}}},
         {"$sort": {"first": 1}}]
    assert typed(list(db.c.aggregate(p, collation=CI))) == typed(want)
    mc.admin.command("setParameter", 1, internalDocumentSourceGroupMaxMemoryBytes=4000)
    try:
        with pytest.raises(OperationFailure) as e:  # the limit is passed: it spills
            list(db.c.aggregate(p, collation=CI))
        assert e.value.code == 292
        got = list(db.c.aggregate(p, collation=CI, allowDiskUse=True))
    finally:
        mc.admin.command("setParameter", 1,
                         internalDocumentSourceGroupMaxMemoryBytes=100 * 1024 * 1024)
    assert typed(got) == typed(want)


def test_accumulators(db):
    """$addToSet keeps the first of equal values, $max/$min compare under
    the collation (the first of equal extremes kept), $top/$bottom sort,
    $minN/$maxN order -- equal values in input order."""
    load(db.c, ["a", "b", "A", "C", "B", "c"])
    p = [{"$sort": {"_id": 1}},
         {"$group": {"_id": None,
                     "set": {"$addToSet": "$x"},
                     "mx": {"$max": "$x"}, "mn": {"$min": "$x"},
                     "top": {"$top": {"output": "$_id", "sortBy": {"x": -1, "_id": 1}}},
                     "bottom": {"$bottom": {"output": "$_id", "sortBy": {"x": -1, "_id": 1}}},
                     "minN": {"$minN": {"input": "$x", "n": 3}},
                     "maxN": {"$maxN": {"input": "$x", "n": 3}}}},
         {"$project": {"_id": 0}}]
    r = list(db.c.aggregate(p, collation=CI))[0]
    assert sorted(r.pop("set")) == ["C", "a", "b"]
    assert r == {"mx": "C", "mn": "a", "top": 4, "bottom": 3,
                 "minN": ["a", "A", "b"], "maxN": ["C", "c", "b"]}
    r = list(db.c.aggregate(p))[0]
    assert sorted(r.pop("set")) == ["A", "B", "C", "a", "b", "c"]
    assert r == {"mx": "c", "mn": "A", "top": 6, "bottom": 3,
                 "minN": ["A", "B", "C"], "maxN": ["c", "b", "a"]}


# ------------------------------------------------------------ expressions

@pytest.mark.parametrize("expr,collated,simple", [
    ({"$eq": ["PING", "ping"]}, True, False),
    ({"$ne": ["PING", "ping"]}, False, True),
    ({"$gt": ["b", "A"]}, True, True),
    ({"$gt": ["a", "B"]}, False, True),
    ({"$lte": ["a", "A"]}, True, False),
    ({"$cmp": ["a", "B"]}, -1, 1),
    ({"$cmp": ["abc", "ABC"]}, 0, 1),
    ({"$cmp": [["a", {"k": "B"}], ["A", {"k": "b"}]]}, 0, 1),   # nested strings
    ({"$in": ["X", ["a", "x"]]}, True, False),
    ({"$indexOfArray": [["a", "B", "b"], "b"]}, 1, 2),
    ({"$setUnion": [["a", "B"], ["A", "b", "c"]]}, ["a", "B", "c"], ["A", "B", "a", "b", "c"]),
    ({"$setIntersection": [["a", "B", "c"], ["b", "A"]]}, ["A", "b"], []),
    ({"$setIntersection": [["a", "B"], ["b", "A", "c"]]}, ["a", "B"], []),
    ({"$setDifference": [["b", "a", "B", "c"], ["C"]]}, ["b", "a"], ["b", "a", "B", "c"]),
    ({"$setEquals": [["a", "b"], ["B", "A", "a"]]}, True, False),
    ({"$setIsSubset": [["A"], ["a", "b"]]}, True, False),
    ({"$max": ["a", "B"]}, "B", "a"),
    ({"$min": [["a", "B", "A"]]}, "a", "A"),
    ({"$sortArray": {"input": ["b", "A", "a", "B"], "sortBy": 1}}, ["A", "a", "b", "B"],
     ["A", "B", "a", "b"]),
    ({"$sortArray": {"input": ["b", "A", "a", "B"], "sortBy": -1}}, ["b", "B", "A", "a"],
     ["b", "a", "B", "A"]),
    ({"$sortArray": {"input": [{"n": "b"}, {"n": "A"}, {"n": "C"}], "sortBy": {"n": 1}}},
     [{"n": "A"}, {"n": "b"}, {"n": "C"}], [{"n": "A"}, {"n": "C"}, {"n": "b"}]),
    ({"$minN": {"input": ["b", "A", "a", "C"], "n": 2}}, ["A", "a"], ["A", "C"]),
    ({"$maxN": {"input": ["b", "A", "a", "B"], "n": 3}}, ["b", "B", "A"], ["b", "a", "B"]),
])
def test_expression_compares_under_collation(db, expr, collated, simple):
    assert typed(one(db, expr)) == typed(collated)
    assert typed(one(db, expr, collation=None)) == typed(simple)


def test_expression_numeric_ordering(db):
    assert one(db, {"$lt": ["item9", "item10"]}, collation=NUM) is True
    assert one(db, {"$lt": ["item9", "item10"]}, collation=None) is False
    assert one(db, {"$sortArray": {"input": ["10", "9", "100"], "sortBy": 1}},
               collation=NUM) == ["9", "10", "100"]


@pytest.mark.parametrize("expr,want", [
    ({"$regexMatch": {"input": "A", "regex": "a"}}, False),
    ({"$strcasecmp": ["a", "B"]}, -1),
    ({"$indexOfCP": ["xA", "a"]}, -1),
    ({"$split": ["aXb", "x"]}, ["aXb"]),
    ({"$replaceAll": {"input": "aA", "find": "a", "replacement": "-"}}, "-A"),
    ({"$toUpper": "a"}, "A"),
    ({"$type": "A"}, "string"),
    ({"$getField": {"field": "A", "input": {"a": 1}}}, "MISSING"),
])
def test_expression_not_collated(db, expr, want):
    """Regexes, the string operators and field names ignore the collation."""
    assert typed(one(db, expr)) == typed(want)


def test_field_names_not_collated(db):
    db.c.insert_one({"_id": 1, "a": "x", "A": "y"})
    r = list(db.c.aggregate([{"$project": {"_id": 0, "v": "$A", "w": "$a"}},
                             {"$match": {"v": "Y"}}], collation=CI))
    assert r == [{"v": "y", "w": "x"}]


# ----------------------------------------------- stages reading other data

def test_lookup_equality_and_pipeline(db):
    """The aggregate's collation applies to $lookup's foreign side: the
    localField/foreignField equality and a sub-pipeline's $match / $expr."""
    db.a.insert_many([{"_id": 1, "k": "abc"}, {"_id": 2, "k": "XYZ"}])
    db.b.insert_many([{"_id": 10, "k": "ABC"}, {"_id": 11, "k": "abc"}, {"_id": 12, "k": "xyz"},
                      {"_id": 13, "k": "abd"}])
    eq = [{"$lookup": {"from": "b", "localField": "k", "foreignField": "k", "as": "j"}},
          {"$project": {"j": "$j._id"}}]
    assert list(db.a.aggregate(eq, collation=CI)) == [{"_id": 1, "j": [10, 11]},
                                                       {"_id": 2, "j": [12]}]
    assert list(db.a.aggregate(eq)) == [{"_id": 1, "j": [11]}, {"_id": 2, "j": []}]
    sub = [{"$lookup": {"from": "b", "let": {"kk": "$k"},
                        "pipeline": [{"$match": {"$expr": {"$eq": ["$k", "$$kk"]}}},
                                     {"$sort": {"_id": -1}}], "as": "j"}},
           {"$project": {"j": "$j._id"}}]
    assert list(db.a.aggregate(sub, collation=CI)) == [{"_id": 1, "j": [11, 10]},
                                                        {"_id": 2, "j": [12]}]
    plain = [{"$lookup": {"from": "b", "pipeline": [{"$match": {"k": {"$gte": "ABD"}}}],
                          "as": "j"}}, {"$limit": 1}, {"$project": {"j": "$j._id"}}]
    assert list(db.a.aggregate(plain, collation=CI)) == [{"_id": 1, "j": [12, 13]}]
    assert list(db.a.aggregate(plain)) == [{"_id": 1, "j": [11, 12, 13]}]


def test_graph_lookup(db):
    """$graphLookup's connectToField query and its visited set compare
    under the collation ("B" reaches "b", then "C" reaches "c")."""
    db.g.insert_many([{"_id": 1, "name": "a", "to": "B"}, {"_id": 2, "name": "b", "to": "C"},
                      {"_id": 3, "name": "c", "to": "A"}, {"_id": 4, "name": "B", "to": None}])
    p = [{"$match": {"_id": 1}},
         {"$graphLookup": {"from": "g", "startWith": "$to", "connectFromField": "to",
                           "connectToField": "name", "as": "p", "depthField": "d"}},
         {"$project": {"p": {"$sortArray": {"input": {"$map": {
             "input": "$p", "in": ["$$this._id", "$$this.d"]}}, "sortBy": 1}}}}]
    assert typed(list(db.g.aggregate(p, collation=CI))) == typed(
        [{"_id": 1, "p": [[1, Int64(2)], [2, Int64(0)], [3, Int64(1)], [4, Int64(0)]]}])
    assert typed(list(db.g.aggregate(p))) == typed([{"_id": 1, "p": [[4, Int64(0)]]}])


def test_graph_lookup_restrict_search(db):
    db.g.insert_many([{"_id": 1, "to": "x"}, {"_id": 2, "name": "X", "kind": "Keep", "to": "y"},
                      {"_id": 3, "name": "Y", "kind": "drop"}])
    p = [{"$match": {"_id": 1}},
         {"$graphLookup": {"from": "g", "startWith": "$to", "connectFromField": "to",
                           "connectToField": "name", "as": "p",
                           "restrictSearchWithMatch": {"kind": "keep"}}},
         {"$project": {"p": "$p._id"}}]
    assert list(db.g.aggregate(p, collation=CI)) == [{"_id": 1, "p": [2]}]


def test_graph_lookup_on_id_index(db):
    db.g.insert_many([{"_id": "a", "to": "B"}, {"_id": "b", "to": None}])
    p = [{"$match": {"_id": "a"}},
         {"$graphLookup": {"from": "g", "startWith": "$to", "connectFromField": "to",
                           "connectToField": "_id", "as": "p"}},
         {"$project": {"p": "$p._id"}}]
    assert list(db.g.aggregate(p, collation=CI)) == [{"_id": "a", "p": ["b"]}]


def test_union_with_and_facet(db):
    load(db.a, ["abc", "XYZ"], "k")
    db.b.insert_many([{"_id": 10, "k": "xyz"}, {"_id": 11, "k": "ABC"}])
    p = [{"$unionWith": {"coll": "b", "pipeline": [{"$match": {"k": "Xyz"}}]}},
         {"$match": {"k": "xYz"}}]
    assert list(db.a.aggregate(p, collation=CI)) == [{"_id": 2, "k": "XYZ"},
                                                      {"_id": 10, "k": "xyz"}]
    assert list(db.a.aggregate(p)) == []
    p = [{"$facet": {"m": [{"$match": {"k": "ABC"}}, {"$project": {"_id": 1}}],
                     "s": [{"$sort": {"k": -1}}, {"$project": {"_id": 1}}]}}]
    assert list(db.a.aggregate(p, collation=CI)) == [{"m": [{"_id": 1}],
                                                      "s": [{"_id": 2}, {"_id": 1}]}]


# --------------------------------------------------- windows and buckets

def test_set_window_fields(db):
    """Partitions are runs of keys equal under the collation; $rank ties
    on collated sortBy values; a bounded $addToSet comes out in collated
    order."""
    load(db.c, ["b", "A", "a", "B", "c"], "s")
    p = [{"$setWindowFields": {"partitionBy": "$s", "sortBy": {"_id": 1},
                               "output": {"n": {"$documentNumber": {}}}}},
         {"$sort": {"_id": 1}}, {"$project": {"_id": 0, "n": 1}}]
    assert [d["n"] for d in db.c.aggregate(p, collation=CI)] == [1, 1, 2, 2, 1]
    assert [d["n"] for d in db.c.aggregate(p)] == [1, 1, 1, 1, 1]
    p = [{"$setWindowFields": {"sortBy": {"s": 1},
                               "output": {"r": {"$rank": {}}, "d": {"$denseRank": {}}}}},
         {"$sort": {"_id": 1}}, {"$project": {"_id": 0, "r": 1, "d": 1}}]
    assert [(d["r"], d["d"]) for d in db.c.aggregate(p, collation=CI)] == [
        (3, 2), (1, 1), (1, 1), (3, 2), (5, 3)]
    p = [{"$setWindowFields": {"sortBy": {"_id": 1}, "output": {"set": {
        "$addToSet": "$s", "window": {"documents": [0, 2]}}}}},
         {"$limit": 2}, {"$project": {"_id": 0, "set": 1}}]
    assert list(db.c.aggregate(p, collation=CI)) == [{"set": ["A", "b"]}, {"set": ["A", "B"]}]
    assert list(db.c.aggregate(p)) == [{"set": ["A", "a", "b"]}, {"set": ["A", "B", "a"]}]


def test_bucket_and_bucket_auto(db):
    load(db.c, ["b", "A", "a", "B", "c"], "s")
    p = [{"$bucket": {"groupBy": "$s", "boundaries": ["a", "B", "z"]}}]
    assert typed(list(db.c.aggregate(p, collation=CI))) == typed(
        [{"_id": "a", "count": 2}, {"_id": "B", "count": 3}])
    # under the simple collation "B" < "a": the boundaries are not sorted
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate(p))
    assert e.value.code == 40194
    p = [{"$bucketAuto": {"groupBy": "$s", "buckets": 2}}]
    assert typed(list(db.c.aggregate(p, collation=CI))) == typed(
        [{"_id": {"min": "A", "max": "c"}, "count": 4}, {"_id": {"min": "c", "max": "c"},
                                                         "count": 1}])
    assert typed(list(db.c.aggregate(p))) == typed(
        [{"_id": {"min": "A", "max": "b"}, "count": 3}, {"_id": {"min": "b", "max": "c"},
                                                         "count": 2}])


def test_densify_partitions(db):
    """$densify's partitions are keys equal under the collation ("a" and
    "A" are one partition: 1 is generated between 0 and 2)."""
    db.c.insert_many([{"_id": 1, "p": "a", "v": 0}, {"_id": 2, "p": "A", "v": 2},
                      {"_id": 3, "p": "b", "v": 0}])
    p = [{"$densify": {"field": "v", "partitionByFields": ["p"],
                       "range": {"step": 1, "bounds": "partition"}}},
         {"$project": {"_id": 0, "v": 1}}]
    assert [d["v"] for d in db.c.aggregate(p, collation=CI)] == [0, 1, 2, 0]
    assert [d["v"] for d in db.c.aggregate(p)] == [2, 0, 0]


# ---------------------------------------------------- the command itself

def test_explain_shows_collation(db):
    load(db.c, ["ping"])
    e = db.command("explain", {"aggregate": "c", "pipeline": [{"$match": {"x": "PING"}}],
                               "cursor": {}, "collation": CI})
    qp = e["queryPlanner"]
    assert list(qp)[:4] == ["namespace", "indexFilterSet", "parsedQuery", "collation"]
    version = qp["collation"]["version"]
    assert re.fullmatch(r"\d+\.\d+", version)
    assert qp["collation"] == {"locale": "en_US", "caseLevel": False, "caseFirst": "off",
                               "strength": 2, "numericOrdering": False,
                               "alternate": "non-ignorable", "maxVariable": "punct",
                               "normalization": False, "backwards": False, "version": version}
    e = db.command("explain", {"aggregate": "c", "pipeline": [{"$match": {"x": "PING"}}],
                               "cursor": {}})
    assert "collation" not in e["queryPlanner"]
    # not everything pushed down: the $cursor stage's queryPlanner
    e = db.command("explain", {"aggregate": "c", "pipeline": [{"$match": {"x": "PING"}},
                                                              {"$group": {"_id": "$x"}}],
                               "cursor": {}, "collation": CI})
    assert e["stages"][0]["$cursor"]["queryPlanner"]["collation"]["strength"] == 2


def test_simple_and_empty_collation(db):
    """{locale: "simple"} is the binary order; an empty collation is none
    given (the collection's default applies)."""
    load(db.c, ["b", "A", "a"])
    p = [{"$sort": {"x": 1}}, {"$project": {"_id": 0, "x": 1}}]
    assert [d["x"] for d in db.c.aggregate(p, collation={"locale": "simple"})] == ["A", "a", "b"]
    assert [d["x"] for d in db.c.aggregate(p, collation={})] == ["A", "a", "b"]


@pytest.mark.parametrize("coll,code,msg", [
    (5, 14, "BSON field 'aggregate.collation' is the wrong type 'int', expected type 'object'"),
    ("en", 14,
     "BSON field 'aggregate.collation' is the wrong type 'string', expected type 'object'"),
    ({"strength": 2}, 4, 'Missing expected field "locale"'),
    ({"locale": "en", "strength": 9}, 9,
     "Field 'strength' must be an integer 1 through 5. Got: 9"),
])
def test_collation_errors(db, coll, code, msg):
    db.c.insert_one({"x": 1})
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", "c", pipeline=[], cursor={}, collation=coll)
    assert (e.value.code, e.value.details["errmsg"]) == (code, msg)


def test_collection_default_collation(db):
    """A collection created with a collation: aggregates without one use
    it (and so does $lookup's foreign read); the command's own wins."""
    db.create_collection("dc", collation=CI)
    load(db.dc, ["ping", "PING", "pong"])
    assert [d["_id"] for d in db.dc.aggregate([{"$match": {"x": "PING"}}])] == [1, 2]
    assert [d["_id"] for d in db.dc.aggregate([{"$match": {"x": "PING"}}],
                                              collation={"locale": "simple"})] == [2]
    assert [d["_id"] for d in db.dc.aggregate([{"$match": {"x": "PING"}}], collation={})] == [1, 2]
    g = list(db.dc.aggregate([{"$group": {"_id": "$x", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}]))
    assert g == [{"_id": "ping", "n": 2}, {"_id": "pong", "n": 1}]
    db.local.insert_one({"_id": 1, "k": "PONG"})
    p = [{"$lookup": {"from": "dc", "localField": "k", "foreignField": "x", "as": "j"}}]
    assert list(db.local.aggregate(p)) == [{"_id": 1, "k": "PONG", "j": []}]
