"""The core aggregation stages against mongod 7.0's behaviour: $match
$project $addFields $set $unset $group (every accumulator) $sort $limit
$skip $count $sortByCount $unwind $documents $replaceRoot $replaceWith
$sample, their parse errors, and the aggregate command's options.

Results are compared exactly, BSON number types and field order included
(`typed`).  Expected values come from mongod's documentation and sources
(accumulator_*.cpp, document_source_*.cpp, jstests/core/query/unwind.js)."""
from __future__ import annotations

import math

import pymongo
import pytest
from bson import Int64, SON
from pymongo.errors import OperationFailure

import multifora
from planlib import stages as _stages_of

EXEC = "PlanExecutor error during aggregation :: caused by :: "


def typed(v):
    """`v` with every value tagged by its BSON type, documents as ordered
    (key, value) lists: equal only if types, values and field order are."""
    if isinstance(v, dict):
        return ("doc", [(k, typed(x)) for k, x in v.items()])
    if isinstance(v, (list, tuple)):
        return ("arr", [typed(x) for x in v])
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, Int64):
        return ("long", int(v))
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, float):
        return ("double", "nan" if math.isnan(v) else v)
    return (type(v).__name__, v)


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = multifora.Server(str(tmp_path_factory.mktemp("aggstages") / "db"), port=0,
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
    mc.drop_database("aggt")
    return mc.aggt


def run(db, docs, pipeline, **kw):
    db.c.drop()
    if docs:
        db.c.insert_many([dict(d) for d in docs])
    return list(db.c.aggregate(pipeline, **kw))


def fail(db, docs, pipeline, **kw) -> OperationFailure:
    db.c.drop()
    if docs:
        db.c.insert_many([dict(d) for d in docs])
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", "c", pipeline=pipeline, cursor={}, **kw)
    return e.value


# ----------------------------------------------------------------- data

ABC = [{"_id": 1, "a": 1, "b": 2, "c": 3}]
SALES = [
    {"_id": 1, "item": "abc", "price": 10, "qty": 2},
    {"_id": 2, "item": "jkl", "price": 20, "qty": 1},
    {"_id": 3, "item": "xyz", "price": 5, "qty": 10},
    {"_id": 4, "item": "xyz", "price": 5, "qty": 20},
    {"_id": 5, "item": "abc", "price": 10, "qty": 10},
]
GAMES = [
    {"_id": 1, "p": "A", "g": "G1", "score": 31},
    {"_id": 2, "p": "B", "g": "G1", "score": 33},
    {"_id": 3, "p": "C", "g": "G1", "score": 99},
    {"_id": 4, "p": "D", "g": "G1", "score": 1},
    {"_id": 5, "p": "A", "g": "G2", "score": 10},
    {"_id": 6, "p": "B", "g": "G2", "score": 14},
    {"_id": 7, "p": "C", "g": "G2", "score": 66},
    {"_id": 8, "p": "D", "g": "G2", "score": 80},
]
MIXED = [{"_id": 1, "a": 1}, {"_id": 2}, {"_id": 3, "a": None}, {"_id": 4, "a": 3},
         {"_id": 5, "a": "s"}]


def grp(acc, data_id=None):
    """{$group: {_id: null, r: acc}} then the result's r."""
    return [{"$group": {"_id": data_id, "r": acc}}, {"$project": {"_id": 0, "r": 1}}]


def by_game(acc):
    return [{"$sort": {"_id": 1}}, {"$group": {"_id": "$g", "r": acc}}, {"$sort": {"_id": 1}}]


CASES = [
    # ---- $match
    ("match-cmp", MIXED, [{"$match": {"a": {"$gte": 1}}}],
     [{"_id": 1, "a": 1}, {"_id": 4, "a": 3}]),
    ("match-null-missing", MIXED, [{"$match": {"a": None}}],
     [{"_id": 2}, {"_id": 3, "a": None}]),
    ("match-after-project", MIXED,
     [{"$project": {"b": "$a"}}, {"$match": {"b": {"$exists": False}}}], [{"_id": 2}]),
    ("match-two-stages", MIXED,
     [{"$match": {"_id": {"$gt": 1}}}, {"$match": {"a": {"$type": "number"}}}],
     [{"_id": 4, "a": 3}]),
    ("match-empty", MIXED, [{"$match": {}}, {"$count": "n"}], [{"n": 5}]),
    # ---- $project
    ("project-inclusion-input-order", ABC, [{"$project": {"c": 1, "a": 1}}],
     [{"_id": 1, "a": 1, "c": 3}]),
    ("project-computed-after-included", ABC,
     [{"$project": {"x": {"$add": ["$a", 1]}, "c": 1}}], [{"_id": 1, "c": 3, "x": 2}]),
    ("project-computed-same-name", ABC, [{"$project": {"a": "$c", "b": 1}}],
     [{"_id": 1, "b": 2, "a": 3}]),
    ("project-exclusion", ABC, [{"$project": {"b": 0}}], [{"_id": 1, "a": 1, "c": 3}]),
    ("project-id-only-excluded", ABC, [{"$project": {"_id": 0}}], [{"a": 1, "b": 2, "c": 3}]),
    ("project-id-excluded-inclusion", ABC, [{"$project": {"_id": 0, "b": 1}}], [{"b": 2}]),
    ("project-nested", [{"_id": 1, "m": {"y": 1, "x": 2}}], [{"$project": {"m.x": 1}}],
     [{"_id": 1, "m": {"x": 2}}]),
    ("project-nested-object-form", [{"_id": 1, "m": {"y": 1, "x": 2}}],
     [{"$project": {"m": {"x": 1}}}], [{"_id": 1, "m": {"x": 2}}]),
    ("project-through-array", [{"_id": 1, "a": [{"b": 1, "c": 2}, {"c": 3}, 5]}],
     [{"$project": {"a.b": 1}}], [{"_id": 1, "a": [{"b": 1}, {}]}]),
    ("project-missing-included", ABC, [{"$project": {"zz": 1}}], [{"_id": 1}]),
    ("project-literal", ABC, [{"$project": {"x": {"$literal": "$a"}}}],
     [{"_id": 1, "x": "$a"}]),
    ("project-remove", ABC,
     [{"$project": {"a": 1, "b": {"$cond": [{"$gt": ["$b", 5]}, "$b", "$$REMOVE"]}}}],
     [{"_id": 1, "a": 1}]),
    ("project-computed-missing-dropped", ABC, [{"$project": {"x": "$nope", "a": 1}}],
     [{"_id": 1, "a": 1}]),
    ("project-exclude-nested", [{"_id": 1, "m": {"y": 1, "x": 2}, "k": 0}],
     [{"$project": {"m.y": 0}}], [{"_id": 1, "m": {"x": 2}, "k": 0}]),
    ("project-bool-inclusion", ABC, [{"$project": {"b": True}}], [{"_id": 1, "b": 2}]),
    # ---- $addFields / $set
    ("addfields-append", ABC, [{"$addFields": {"s": {"$add": ["$a", "$b"]}}}],
     [{"_id": 1, "a": 1, "b": 2, "c": 3, "s": 3}]),
    ("addfields-overwrite-keeps-position", ABC, [{"$addFields": {"a": 10}}],
     [{"_id": 1, "a": 10, "b": 2, "c": 3}]),
    ("addfields-sees-input-not-siblings", ABC, [{"$addFields": {"a": 10, "z": "$a"}}],
     [{"_id": 1, "a": 10, "b": 2, "c": 3, "z": 1}]),
    ("addfields-nested-into-doc", [{"_id": 1, "x": {"z": 1}}], [{"$addFields": {"x.y": 1}}],
     [{"_id": 1, "x": {"z": 1, "y": 1}}]),
    ("addfields-nested-replaces-scalar", [{"_id": 1, "x": 5}], [{"$addFields": {"x.y": 1}}],
     [{"_id": 1, "x": {"y": 1}}]),
    ("addfields-nested-new", [{"_id": 1}], [{"$addFields": {"x.y.z": "v"}}],
     [{"_id": 1, "x": {"y": {"z": "v"}}}]),
    ("addfields-through-array", [{"_id": 1, "a": [1, {"c": 2}]}],
     [{"$addFields": {"a.b": 1}}], [{"_id": 1, "a": [{"b": 1}, {"c": 2, "b": 1}]}]),
    ("addfields-remove", ABC, [{"$addFields": {"b": "$$REMOVE"}}],
     [{"_id": 1, "a": 1, "c": 3}]),
    ("addfields-object-literal", ABC, [{"$addFields": {"o": {"p": "$a", "q": "$zz"}}}],
     [{"_id": 1, "a": 1, "b": 2, "c": 3, "o": {"p": 1}}]),
    ("set-alias", ABC, [{"$set": {"c": "$$ROOT._id", "d": True}}],
     [{"_id": 1, "a": 1, "b": 2, "c": 1, "d": True}]),
    ("set-id", ABC, [{"$set": {"_id": "x"}}], [{"_id": "x", "a": 1, "b": 2, "c": 3}]),
    # ---- $unset
    ("unset-string", ABC, [{"$unset": "b"}], [{"_id": 1, "a": 1, "c": 3}]),
    ("unset-array", ABC, [{"$unset": ["a", "c"]}], [{"_id": 1, "b": 2}]),
    ("unset-nested", [{"_id": 1, "m": {"x": 1, "y": 2}}], [{"$unset": "m.x"}],
     [{"_id": 1, "m": {"y": 2}}]),
    ("unset-id", ABC, [{"$unset": "_id"}], [{"a": 1, "b": 2, "c": 3}]),
    ("unset-missing", ABC, [{"$unset": "zz"}], ABC),
    ("unset-through-array", [{"_id": 1, "a": [{"x": 1, "y": 1}, {"x": 2}]}],
     [{"$unset": "a.x"}], [{"_id": 1, "a": [{"y": 1}, {}]}]),
    # ---- $group: keys
    ("group-sales", SALES,
     [{"$group": {"_id": "$item", "total": {"$sum": {"$multiply": ["$price", "$qty"]}},
                  "n": {"$sum": 1}, "avgQty": {"$avg": "$qty"}}}, {"$sort": {"_id": 1}}],
     [{"_id": "abc", "total": 120, "n": 2, "avgQty": 6.0},
      {"_id": "jkl", "total": 20, "n": 1, "avgQty": 1.0},
      {"_id": "xyz", "total": 150, "n": 2, "avgQty": 15.0}]),
    ("group-null-and-missing-together", MIXED,
     [{"$group": {"_id": "$a", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}],
     [{"_id": None, "n": 2}, {"_id": 1, "n": 1}, {"_id": 3, "n": 1}, {"_id": "s", "n": 1}]),
    ("group-numbers-equal-across-types",
     [{"_id": 1, "a": 1}, {"_id": 2, "a": 1.0}, {"_id": 3, "a": Int64(1)}, {"_id": 4, "a": 2}],
     [{"$sort": {"_id": 1}}, {"$group": {"_id": "$a", "n": {"$sum": 1}}},
      {"$sort": {"_id": 1}}],
     [{"_id": 1, "n": 3}, {"_id": 2, "n": 1}]),
    ("group-id-object", [{"_id": 1, "x": 1, "y": 2}, {"_id": 2, "x": 1, "y": 2},
                         {"_id": 3, "x": 1}],
     [{"$group": {"_id": {"x": "$x", "y": "$y"}, "n": {"$sum": 1}}}, {"$sort": {"n": 1}}],
     [{"_id": {"x": 1}, "n": 1}, {"_id": {"x": 1, "y": 2}, "n": 2}]),
    ("group-id-constant", SALES, [{"$group": {"_id": "k", "n": {"$count": {}}}}],
     [{"_id": "k", "n": 5}]),
    ("group-id-expression", SALES,
     [{"$group": {"_id": {"$gt": ["$qty", 5]}, "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}],
     [{"_id": False, "n": 2}, {"_id": True, "n": 3}]),
    ("group-id-array", [{"_id": 1, "a": [1, 2]}, {"_id": 2, "a": [1, 2]}, {"_id": 3, "a": [2]}],
     [{"$group": {"_id": "$a", "n": {"$sum": 1}}}, {"$sort": {"n": 1}}],
     [{"_id": [2], "n": 1}, {"_id": [1, 2], "n": 2}]),
    ("group-only-id", SALES, [{"$group": {"_id": "$item"}}, {"$sort": {"_id": -1}}],
     [{"_id": "xyz"}, {"_id": "jkl"}, {"_id": "abc"}]),
    ("group-empty-input", [], [{"$group": {"_id": None, "n": {"$sum": 1}}}], []),
    # ---- $sum
    ("sum-int", [{"_id": 1, "a": 1}, {"_id": 2, "a": 2}], grp({"$sum": "$a"}), [{"r": 3}]),
    ("sum-int-overflows-to-long", [{"_id": 1, "a": 2147483647}, {"_id": 2, "a": 1}],
     grp({"$sum": "$a"}), [{"r": Int64(2147483648)}]),
    ("sum-int-long", [{"_id": 1, "a": 1}, {"_id": 2, "a": Int64(2)}], grp({"$sum": "$a"}),
     [{"r": Int64(3)}]),
    ("sum-int-double", [{"_id": 1, "a": 1}, {"_id": 2, "a": 2.5}], grp({"$sum": "$a"}),
     [{"r": 3.5}]),
    ("sum-long-overflows-to-double",
     [{"_id": 1, "a": Int64(2**63 - 1)}, {"_id": 2, "a": 1}], grp({"$sum": "$a"}),
     [{"r": 9.223372036854776e18}]),
    ("sum-long-overflow-comes-back",
     [{"_id": 1, "a": Int64(2**63 - 1)}, {"_id": 2, "a": 1}, {"_id": 3, "a": -1}],
     grp({"$sum": "$a"}), [{"r": Int64(2**63 - 1)}]),
    ("sum-no-numbers", [{"_id": 1, "a": "x"}, {"_id": 2}, {"_id": 3, "a": None}],
     grp({"$sum": "$a"}), [{"r": 0}]),
    ("sum-compensated", [{"_id": 1, "a": 0.1}, {"_id": 2, "a": 0.2}, {"_id": 3, "a": 0.3}],
     grp({"$sum": "$a"}), [{"r": 0.6}]),
    ("sum-ignores-arrays", [{"_id": 1, "a": [1, 2]}, {"_id": 2, "a": 5}],
     grp({"$sum": "$a"}), [{"r": 5}]),
    ("sum-literal-one", SALES, grp({"$sum": 1}), [{"r": 5}]),
    ("sum-literal-double", SALES, grp({"$sum": 0.5}), [{"r": 2.5}]),
    ("sum-array-form", SALES, grp({"$sum": ["$qty"]}), [{"r": 43}]),
    # ---- $avg
    ("avg-ints-double", [{"_id": 1, "a": 1}, {"_id": 2, "a": 2}, {"_id": 3, "a": 3}],
     grp({"$avg": "$a"}), [{"r": 2.0}]),
    ("avg-mixed", MIXED, grp({"$avg": "$a"}), [{"r": 2.0}]),
    ("avg-no-numbers", [{"_id": 1, "a": "x"}, {"_id": 2}], grp({"$avg": "$a"}), [{"r": None}]),
    ("avg-longs", [{"_id": 1, "a": Int64(1)}, {"_id": 2, "a": Int64(2)}], grp({"$avg": "$a"}),
     [{"r": 1.5}]),
    # ---- $min / $max
    ("min-skips-null-missing", MIXED, grp({"$min": "$a"}), [{"r": 1}]),
    ("max-types-order", MIXED, grp({"$max": "$a"}), [{"r": "s"}]),
    ("min-all-null", [{"_id": 1, "a": None}, {"_id": 2}], grp({"$min": "$a"}), [{"r": None}]),
    ("max-object-over-string", [{"_id": 1, "a": "z"}, {"_id": 2, "a": {"x": 1}}],
     grp({"$max": "$a"}), [{"r": {"x": 1}}]),
    ("max-arrays-whole", [{"_id": 1, "a": [1, 2]}, {"_id": 2, "a": [3]}],
     grp({"$max": "$a"}), [{"r": [3]}]),
    ("min-first-of-equal", [{"_id": 1, "a": 1.0}, {"_id": 2, "a": 1}],
     [{"$sort": {"_id": 1}}] + grp({"$min": "$a"}), [{"r": 1.0}]),
    # ---- $first / $last
    ("first-missing-is-null", MIXED, [{"$sort": {"_id": -1}}] + grp({"$first": "$b"}),
     [{"r": None}]),
    ("first-last", MIXED,
     [{"$sort": {"_id": 1}}, {"$group": {"_id": None, "f": {"$first": "$a"},
                                         "l": {"$last": "$a"}}}],
     [{"_id": None, "f": 1, "l": "s"}]),
    ("last-missing-is-null", MIXED, [{"$sort": {"_id": 1}}, {"$match": {"_id": {"$lt": 3}}}]
     + grp({"$last": "$a"}), [{"r": None}]),
    # ---- $push / $addToSet
    ("push-skips-missing-keeps-null", MIXED, [{"$sort": {"_id": 1}}] + grp({"$push": "$a"}),
     [{"r": [1, None, 3, "s"]}]),
    ("push-object", SALES[:2],
     [{"$sort": {"_id": 1}}] + grp({"$push": {"i": "$item", "q": "$qty", "z": "$zz"}}),
     [{"r": [{"i": "abc", "q": 2}, {"i": "jkl", "q": 1}]}]),
    ("addtoset-dedup",
     [{"_id": 1, "a": 1}, {"_id": 2, "a": 1.0}, {"_id": 3, "a": Int64(1)}, {"_id": 4, "a": 2},
      {"_id": 5, "a": "x"}, {"_id": 6, "a": {"k": 1}}, {"_id": 7, "a": {"k": 1}},
      {"_id": 8, "a": None}, {"_id": 9}],
     [{"$sort": {"_id": 1}}, {"$group": {"_id": None, "s": {"$addToSet": "$a"}}},
      {"$unwind": "$s"}, {"$sort": {"s": 1}}, {"$project": {"_id": 0}}],
     [{"s": None}, {"s": 1}, {"s": 2}, {"s": "x"}, {"s": {"k": 1}}]),
    ("addtoset-arrays-as-values", [{"_id": 1, "a": [1, 2]}, {"_id": 2, "a": [1, 2]}],
     grp({"$addToSet": "$a"}), [{"r": [[1, 2]]}]),
    # ---- $count, $mergeObjects
    ("count-acc", SALES, [{"$group": {"_id": "$item", "n": {"$count": {}}}},
                          {"$sort": {"_id": 1}}],
     [{"_id": "abc", "n": 2}, {"_id": "jkl", "n": 1}, {"_id": "xyz", "n": 2}]),
    ("mergeobjects",
     [{"_id": 1, "m": {"a": 1, "b": 1}}, {"_id": 2, "m": {"b": 2, "c": 2}}, {"_id": 3, "m": None},
      {"_id": 4}],
     [{"$sort": {"_id": 1}}] + grp({"$mergeObjects": "$m"}), [{"r": {"a": 1, "b": 2, "c": 2}}]),
    ("mergeobjects-none", [{"_id": 1}], grp({"$mergeObjects": "$m"}), [{"r": {}}]),
    # ---- $stdDevPop / $stdDevSamp
    ("stddev", [{"_id": i, "a": i} for i in range(1, 5)] + [{"_id": 9, "a": "x"}],
     [{"$group": {"_id": None, "p": {"$stdDevPop": "$a"}, "s": {"$stdDevSamp": "$a"}}}],
     [{"_id": None, "p": 1.118033988749895, "s": 1.2909944487358056}]),
    ("stddev-one-value", [{"_id": 1, "a": 5}],
     [{"$group": {"_id": None, "p": {"$stdDevPop": "$a"}, "s": {"$stdDevSamp": "$a"}}}],
     [{"_id": None, "p": 0.0, "s": None}]),
    ("stddev-none", [{"_id": 1, "a": "x"}],
     [{"$group": {"_id": None, "p": {"$stdDevPop": "$a"}, "s": {"$stdDevSamp": "$a"}}}],
     [{"_id": None, "p": None, "s": None}]),
    # ---- $top $bottom $topN $bottomN $firstN $lastN $maxN $minN
    ("top", GAMES, by_game({"$top": {"output": ["$p", "$score"], "sortBy": {"score": -1}}}),
     [{"_id": "G1", "r": ["C", 99]}, {"_id": "G2", "r": ["D", 80]}]),
    ("bottom", GAMES,
     by_game({"$bottom": {"output": ["$p", "$score"], "sortBy": {"score": -1}}}),
     [{"_id": "G1", "r": ["D", 1]}, {"_id": "G2", "r": ["A", 10]}]),
    ("topN", GAMES,
     by_game({"$topN": {"n": 3, "output": ["$p", "$score"], "sortBy": {"score": -1}}}),
     [{"_id": "G1", "r": [["C", 99], ["B", 33], ["A", 31]]},
      {"_id": "G2", "r": [["D", 80], ["C", 66], ["B", 14]]}]),
    ("bottomN", GAMES,
     by_game({"$bottomN": {"n": 3, "output": ["$p", "$score"], "sortBy": {"score": -1}}}),
     [{"_id": "G1", "r": [["B", 33], ["A", 31], ["D", 1]]},
      {"_id": "G2", "r": [["C", 66], ["B", 14], ["A", 10]]}]),
    ("topN-ties-input-order", [{"_id": i, "k": 1, "v": i} for i in range(5)],
     [{"$sort": {"_id": 1}}] + grp({"$topN": {"n": 2, "output": "$v", "sortBy": {"k": 1}}}),
     [{"r": [0, 1]}]),
    ("topN-missing-output-null", [{"_id": 1, "s": 1}, {"_id": 2, "s": 2, "v": 7}],
     grp({"$topN": {"n": 5, "output": "$v", "sortBy": {"s": 1}}}), [{"r": [None, 7]}]),
    ("top-missing-sort-key-first", [{"_id": 1, "s": 1, "v": "a"}, {"_id": 2, "v": "b"}],
     grp({"$top": {"output": "$v", "sortBy": {"s": 1}}}), [{"r": "b"}]),
    ("topN-n-larger", GAMES[:2],
     grp({"$topN": {"n": 10, "output": "$score", "sortBy": {"score": 1}}}),
     [{"r": [31, 33]}]),
    ("firstN", GAMES, by_game({"$firstN": {"n": 3, "input": "$p"}}),
     [{"_id": "G1", "r": ["A", "B", "C"]}, {"_id": "G2", "r": ["A", "B", "C"]}]),
    ("lastN", GAMES, by_game({"$lastN": {"n": 3, "input": "$p"}}),
     [{"_id": "G1", "r": ["B", "C", "D"]}, {"_id": "G2", "r": ["B", "C", "D"]}]),
    ("maxN", GAMES, by_game({"$maxN": {"n": 3, "input": "$score"}}),
     [{"_id": "G1", "r": [99, 33, 31]}, {"_id": "G2", "r": [80, 66, 14]}]),
    ("minN", GAMES, by_game({"$minN": {"n": 3, "input": "$score"}}),
     [{"_id": "G1", "r": [1, 31, 33]}, {"_id": "G2", "r": [10, 14, 66]}]),
    ("firstN-n-from-id", GAMES,
     by_game({"$firstN": {"input": "$score",
                          "n": {"$cond": [{"$eq": ["$_id", "G2"]}, 1, 3]}}}),
     [{"_id": "G1", "r": [31, 33, 99]}, {"_id": "G2", "r": [10]}]),
    ("firstN-lastN-missing-null", MIXED,
     [{"$sort": {"_id": 1}}, {"$group": {"_id": None, "f": {"$firstN": {"n": 2, "input": "$a"}},
                                         "l": {"$lastN": {"n": 2, "input": "$b"}}}}],
     [{"_id": None, "f": [1, None], "l": [None, None]}]),
    ("maxN-minN-skip-null", MIXED,
     [{"$group": {"_id": None, "x": {"$maxN": {"n": 5, "input": "$a"}},
                  "m": {"$minN": {"n": 2, "input": "$a"}}}}],
     [{"_id": None, "x": ["s", 3, 1], "m": [1, 3]}]),
    ("firstN-n-long-and-double", GAMES,
     [{"$sort": {"_id": 1}}, {"$group": {"_id": None,
                                         "a": {"$firstN": {"n": Int64(1), "input": "$p"}},
                                         "b": {"$firstN": {"n": 2.0, "input": "$p"}}}}],
     [{"_id": None, "a": ["A"], "b": ["A", "B"]}]),
    # ---- $sort
    ("sort-desc", SALES, [{"$sort": {"qty": -1}}, {"$project": {"qty": 1}}],
     [{"_id": 4, "qty": 20}, {"_id": 3, "qty": 10}, {"_id": 5, "qty": 10},
      {"_id": 1, "qty": 2}, {"_id": 2, "qty": 1}]),
    ("sort-compound", SALES, [{"$sort": {"item": 1, "_id": -1}}, {"$project": {"_id": 1}}],
     [{"_id": 5}, {"_id": 1}, {"_id": 2}, {"_id": 4}, {"_id": 3}]),
    ("sort-stable-ties", [{"_id": i, "k": i % 2} for i in range(6)],
     [{"$addFields": {"z": 1}}, {"$sort": {"k": 1}}, {"$project": {"_id": 1}}],
     [{"_id": 0}, {"_id": 2}, {"_id": 4}, {"_id": 1}, {"_id": 3}, {"_id": 5}]),
    ("sort-types", [{"_id": 1, "a": "s"}, {"_id": 2, "a": 2}, {"_id": 3, "a": None},
                    {"_id": 4, "a": {"x": 1}}, {"_id": 5, "a": True}, {"_id": 6, "a": 1.5}],
     [{"$sort": {"a": 1}}, {"$project": {"_id": 1}}],
     [{"_id": 3}, {"_id": 6}, {"_id": 2}, {"_id": 1}, {"_id": 4}, {"_id": 5}]),
    ("sort-arrays-asc-min", [{"_id": 1, "a": [1, 5]}, {"_id": 2, "a": [2, 3]},
                             {"_id": 3, "a": [0, 9]}],
     [{"$sort": {"a": 1}}, {"$project": {"_id": 1}}], [{"_id": 3}, {"_id": 1}, {"_id": 2}]),
    ("sort-arrays-desc-max", [{"_id": 1, "a": [1, 5]}, {"_id": 2, "a": [2, 3]},
                              {"_id": 3, "a": [0, 9]}],
     [{"$sort": {"a": -1}}, {"$project": {"_id": 1}}], [{"_id": 3}, {"_id": 1}, {"_id": 2}]),
    ("sort-limit-topk", [{"_id": i, "a": v} for i, v in enumerate([5, 3, 9, 1, 7])],
     [{"$addFields": {"z": 1}}, {"$sort": {"a": -1}}, {"$limit": 2}, {"$project": {"a": 1}}],
     [{"_id": 2, "a": 9}, {"_id": 4, "a": 7}]),
    ("sort-skip-limit", [{"_id": i, "a": v} for i, v in enumerate([5, 3, 9, 1, 7])],
     [{"$sort": {"a": -1}}, {"$skip": 1}, {"$limit": 2}, {"$project": {"a": 1}}],
     [{"_id": 4, "a": 7}, {"_id": 0, "a": 5}]),
    ("sort-limit-topk-ties", [{"_id": i, "k": 0} for i in range(8)],
     [{"$addFields": {"z": 1}}, {"$sort": {"k": 1}}, {"$limit": 3}, {"$project": {"_id": 1}}],
     [{"_id": 0}, {"_id": 1}, {"_id": 2}]),
    ("sort-dotted", [{"_id": 1, "m": {"x": 2}}, {"_id": 2, "m": {"x": 1}}, {"_id": 3}],
     [{"$sort": {"m.x": 1}}, {"$project": {"_id": 1}}], [{"_id": 3}, {"_id": 2}, {"_id": 1}]),
    ("sort-after-group", SALES,
     [{"$group": {"_id": "$item", "q": {"$sum": "$qty"}}}, {"$sort": {"q": -1}}],
     [{"_id": "xyz", "q": 30}, {"_id": "abc", "q": 12}, {"_id": "jkl", "q": 1}]),
    # ---- $limit / $skip
    ("limit", SALES, [{"$limit": 2}, {"$project": {"_id": 1}}], [{"_id": 1}, {"_id": 2}]),
    ("limit-long-double", SALES, [{"$limit": Int64(1)}, {"$limit": 3.0},
                                  {"$project": {"_id": 1}}], [{"_id": 1}]),
    ("skip", SALES, [{"$skip": 3}, {"$project": {"_id": 1}}], [{"_id": 4}, {"_id": 5}]),
    ("skip-zero", SALES[:2], [{"$skip": 0}, {"$project": {"_id": 1}}], [{"_id": 1}, {"_id": 2}]),
    ("skip-past-end", SALES, [{"$skip": 10}], []),
    ("limit-then-skip", SALES, [{"$limit": 3}, {"$skip": 1}, {"$project": {"_id": 1}}],
     [{"_id": 2}, {"_id": 3}]),
    # ---- $count / $sortByCount
    ("count", SALES, [{"$count": "total"}], [{"total": 5}]),
    ("count-empty", [], [{"$count": "total"}], []),
    ("count-after-match", SALES, [{"$match": {"item": "xyz"}}, {"$count": "n"}], [{"n": 2}]),
    ("sortbycount", [{"_id": i, "t": t} for i, t in enumerate("abacab")],
     [{"$sortByCount": "$t"}], [{"_id": "a", "count": 3}, {"_id": "b", "count": 2},
                                {"_id": "c", "count": 1}]),
    ("sortbycount-expression", [{"_id": i, "t": t} for i, t in enumerate("abAcab")],
     [{"$sortByCount": {"$toUpper": "$t"}}],
     [{"_id": "A", "count": 3}, {"_id": "B", "count": 2}, {"_id": "C", "count": 1}]),
    # ---- $replaceRoot / $replaceWith
    ("replaceroot", [{"_id": 1, "m": {"x": 1, "y": 2}}], [{"$replaceRoot": {"newRoot": "$m"}}],
     [{"x": 1, "y": 2}]),
    ("replaceroot-merge", [{"_id": 1, "m": {"y": 2}}],
     [{"$replaceRoot": {"newRoot": {"$mergeObjects": [{"x": 0, "y": 0}, "$m"]}}}],
     [{"x": 0, "y": 2}]),
    ("replacewith", [{"_id": 1, "m": {"x": 1}}], [{"$replaceWith": "$m"}], [{"x": 1}]),
    ("replacewith-object-expr", [{"_id": 1, "a": 2}],
     [{"$replaceWith": {"k": "$_id", "v": "$a"}}], [{"k": 1, "v": 2}]),
    # ---- $unwind
    ("unwind-string-form", [{"_id": 1, "a": [1, 2]}], [{"$unwind": "$a"}],
     [{"_id": 1, "a": 1}, {"_id": 1, "a": 2}]),
    ("unwind-keeps-field-position", [{"_id": 1, "a": [1, 2], "b": 0}], [{"$unwind": "$a"}],
     [{"_id": 1, "a": 1, "b": 0}, {"_id": 1, "a": 2, "b": 0}]),
    ("unwind-index-long", [{"_id": 1, "a": ["x", "y"]}],
     [{"$unwind": {"path": "$a", "includeArrayIndex": "i"}}],
     [{"_id": 1, "a": "x", "i": Int64(0)}, {"_id": 1, "a": "y", "i": Int64(1)}]),
    ("unwind-nested-array-of-docs", [{"_id": 1, "a": {"b": [{"c": 1}, {"c": 2}]}}],
     [{"$unwind": "$a.b"}], [{"_id": 1, "a": {"b": {"c": 1}}}, {"_id": 1, "a": {"b": {"c": 2}}}]),
    ("unwind-path-through-array-is-missing", [{"_id": 1, "a": [{"b": [1, 2]}]}],
     [{"$unwind": {"path": "$a.b", "preserveNullAndEmptyArrays": True}}],
     [{"_id": 1, "a": [{"b": [1, 2]}]}]),
    ("unwind-index-nested-field", [{"_id": 1, "a": [5]}],
     [{"$unwind": {"path": "$a", "includeArrayIndex": "x.y"}}],
     [{"_id": 1, "a": 5, "x": {"y": Int64(0)}}]),
    ("unwind-twice", [{"_id": 1, "a": [1, 2], "b": ["x", "y"]}],
     [{"$unwind": "$a"}, {"$unwind": "$b"}, {"$project": {"_id": 0}}],
     [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]),
]


@pytest.mark.parametrize("name,docs,pipeline,expected", CASES, ids=[c[0] for c in CASES])
def test_stage(db, name, docs, pipeline, expected):
    assert typed(run(db, docs, pipeline)) == typed(expected)


# mongod's jstests/core/query/unwind.js, as (input, spec, output) rows.
UNWIND = []
for inp in [{}, {"a": None}, {"a": []}, {"a": 1}, {"a": {}}, {"a": [None]}, {"a": [[]]},
            {"a": [1]}]:
    inp = {"_id": 0, **inp}
    a = inp.get("a", "MISSING")
    unwound = isinstance(a, list) and len(a) > 0
    scalar = not isinstance(a, list) and a not in ("MISSING", None)
    for preserve in (False, True):
        for idx in (None, "i", "a"):
            spec = {"path": "$a"}
            if preserve:
                spec["preserveNullAndEmptyArrays"] = True
            if idx:
                spec["includeArrayIndex"] = idx
            if idx == "a" and not preserve:
                continue
            if unwound:
                out = {"_id": 0, "a": a[0]}
                ix = Int64(0)
            elif scalar:
                out = dict(inp)
                ix = None
            elif preserve:
                out = {"_id": 0} if a == [] or a == "MISSING" else dict(inp)
                ix = None
            else:
                UNWIND.append((inp, spec, []))
                continue
            if idx:
                out[idx] = ix
            UNWIND.append((inp, spec, [out]))
DOTTED = [
    ({"_id": 0}, {"path": "$a.b", "preserveNullAndEmptyArrays": True, "includeArrayIndex": "_id"},
     [{"_id": None}]),
    ({"_id": 0, "a": {}}, {"path": "$a.b", "preserveNullAndEmptyArrays": True},
     [{"_id": 0, "a": {}}]),
    ({"_id": 0, "a": {"b": None}}, {"path": "$a.b"}, []),
    ({"_id": 0, "a": {"b": None}}, {"path": "$a.b", "preserveNullAndEmptyArrays": True,
                                    "includeArrayIndex": "i"},
     [{"_id": 0, "a": {"b": None}, "i": None}]),
    ({"_id": 0, "a": {"b": []}}, {"path": "$a.b", "preserveNullAndEmptyArrays": True},
     [{"_id": 0, "a": {}}]),
    ({"_id": 0, "a": {"b": []}}, {"path": "$a.b", "preserveNullAndEmptyArrays": True,
                                  "includeArrayIndex": "a"}, [{"_id": 0, "a": None}]),
    ({"_id": 0, "a": {"b": 1}}, {"path": "$a.b", "includeArrayIndex": "i"},
     [{"_id": 0, "a": {"b": 1}, "i": None}]),
]


@pytest.mark.parametrize("inp,spec,out", UNWIND + DOTTED,
                         ids=[f"{i}" for i in range(len(UNWIND + DOTTED))])
def test_unwind_table(db, inp, spec, out):
    assert typed(run(db, [inp], [{"$unwind": spec}])) == typed(out)


# ---------------------------------------------------------------- errors

ERRORS = [
    # the pipeline
    ("unknown-stage", [{"$foo": 1}], 40324, "Unrecognized pipeline stage name: '$foo'"),
    ("two-fields", [{"$match": {}, "$limit": 1}], 40323,
     "A pipeline stage specification object must contain exactly one field."),
    ("empty-stage", [{}], 40323,
     "A pipeline stage specification object must contain exactly one field."),
    ("stage-not-object", [1], 14, "Each element of the 'pipeline' array must be an object"),
    # $match
    ("match-not-object", [{"$match": 1}], 15959,
     "the match filter must be an expression in an object"),
    ("match-bad-operator", [{"$match": {"a": {"$foo": 1}}}], 2, "unknown operator: $foo"),
    # $limit / $skip
    ("limit-zero", [{"$limit": 0}], 15958, "the limit must be positive"),
    ("limit-negative", [{"$limit": -1}], 5107201,
     "invalid argument to $limit stage: Expected a non-negative number in: $limit: -1"),
    ("limit-fraction", [{"$limit": 1.5}], 5107201,
     "invalid argument to $limit stage: Expected an integer: $limit: 1.5"),
    ("limit-string", [{"$limit": "x"}], 5107201,
     'invalid argument to $limit stage: Expected a number in: $limit: "x"'),
    ("limit-huge", [{"$limit": 1e19}], 5107201,
     "invalid argument to $limit stage: Cannot represent as a 64-bit integer: $limit: 1e+19"),
    ("skip-negative", [{"$skip": -1}], 5107200,
     "invalid argument to $skip stage: Expected a non-negative number in: $skip: -1"),
    ("skip-bool", [{"$skip": True}], 5107200,
     "invalid argument to $skip stage: Expected a number in: $skip: true"),
    ("skip-nan", [{"$skip": float("nan")}], 5107200,
     "invalid argument to $skip stage: Expected an integer, but found NaN in: $skip: nan"),
    # $sort
    ("sort-not-object", [{"$sort": 1}], 15973, "the $sort key specification must be an object"),
    ("sort-empty", [{"$sort": {}}], 15976, "$sort stage must have at least one sort key"),
    ("sort-bad-order", [{"$sort": {"a": 2}}], 15975,
     "$sort key ordering must be 1 (for ascending) or -1 (for descending)"),
    # $count
    ("count-not-string", [{"$count": 1}], 40156, "the count field must be a non-empty string"),
    ("count-empty", [{"$count": ""}], 40157, "the count field must be a non-empty string"),
    ("count-dollar", [{"$count": "$n"}], 40158, "the count field cannot be a $-prefixed path"),
    ("count-dot", [{"$count": "a.b"}], 40160, "the count field cannot contain '.'"),
    # $group
    ("group-not-object", [{"$group": 1}], 15947,
     "a group's fields must be specified in an object"),
    ("group-no-id", [{"$group": {"n": {"$sum": 1}}}], 15955,
     "a group specification must include an _id"),
    ("group-unknown-acc", [{"$group": {"_id": None, "n": {"$foo": 1}}}], 15952,
     "unknown group operator '$foo'"),
    ("group-acc-not-object", [{"$group": {"_id": None, "n": 1}}], 40234,
     "The field 'n' must be an accumulator object"),
    ("group-two-accs", [{"$group": {"_id": None, "n": {"$sum": 1, "$avg": 1}}}], 40238,
     "The field 'n' must specify one accumulator"),
    ("group-dotted-field", [{"$group": {"_id": None, "a.b": {"$sum": 1}}}], 40235,
     "The field name 'a.b' cannot contain '.'"),
    ("group-dollar-field", [{"$group": {"_id": None, "$a": {"$sum": 1}}}], 40236,
     "The field name '$a' cannot be an operator name"),
    ("group-unary-array", [{"$group": {"_id": None, "n": {"$sum": [1, 2]}}}], 40237,
     "The $sum accumulator is a unary operator"),
    ("group-count-args", [{"$group": {"_id": None, "n": {"$count": {"x": 1}}}}], 14,
     "$count takes no arguments, i.e. $count:{}"),
    ("firstN-n-zero", [{"$group": {"_id": None, "n": {"$firstN": {"n": 0, "input": "$a"}}}}],
     5787908, EXEC + "'n' must be greater than 0, found 0"),
    ("firstN-n-fraction",
     [{"$group": {"_id": None, "n": {"$firstN": {"n": 1.5, "input": "$a"}}}}], 5787902,
     EXEC + "Value for 'n' must be of integral type, but found 1.5"),
    ("firstN-no-n", [{"$group": {"_id": None, "n": {"$firstN": {"input": "$a"}}}}], 5787906,
     "Missing value for 'n'"),
    ("firstN-no-input", [{"$group": {"_id": None, "n": {"$firstN": {"n": 1}}}}], 5787907,
     "Missing value for 'input'"),
    ("firstN-not-object", [{"$group": {"_id": None, "n": {"$firstN": 1}}}], 5787801, None),
    ("topN-no-sortby",
     [{"$group": {"_id": None, "n": {"$topN": {"n": 1, "output": "$a"}}}}], 5788604, None),
    ("mergeobjects-non-object", [{"$group": {"_id": None, "m": {"$mergeObjects": "$a"}}}],
     40400, EXEC + "$mergeObjects requires object inputs, but input 1 is of type int"),
    # $project / $addFields / $unset
    ("project-not-object", [{"$project": 1}], 15969, "$project specification must be an object"),
    ("project-empty", [{"$project": {}}], 51272,
     "Invalid $project :: caused by :: projection specification must have at least one field"),
    ("project-mixed", [{"$project": {"a": 1, "b": 0}}], 31254,
     "Invalid $project :: caused by :: Cannot do exclusion on field b in inclusion projection"),
    ("project-collision", [{"$project": {"a": 1, "a.b": 1}}], 31249,
     "Invalid $project :: caused by :: Path collision at a.b remaining portion b"),
    ("addfields-not-object", [{"$addFields": 1}], 40272,
     "$addFields specification stage must be an object, got int"),
    ("set-not-object", [{"$set": "x"}], 40272,
     "$set specification stage must be an object, got string"),
    ("unset-number", [{"$unset": 1}], 31002, "$unset specification must be a string or an array"),
    ("unset-empty-array", [{"$unset": []}], 31119,
     "$unset specification must be a string or an array with at least one field"),
    ("unset-array-number", [{"$unset": ["a", 1]}], 31120,
     "$unset specification must be a string or an array containing only string values"),
    # $unwind
    ("unwind-number", [{"$unwind": 1}], 15981,
     "expected either a string or an object as specification for $unwind stage, got int"),
    ("unwind-no-dollar", [{"$unwind": "a"}], 28818,
     "path option to $unwind stage should be prefixed with a '$': a"),
    ("unwind-no-path", [{"$unwind": {}}], 28812, "no path specified to $unwind stage"),
    ("unwind-path-type", [{"$unwind": {"path": 1}}], 28808,
     "expected a string as the path for $unwind stage, got int"),
    ("unwind-preserve-type", [{"$unwind": {"path": "$a", "preserveNullAndEmptyArrays": 1}}],
     28809, "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, "
            "got int"),
    ("unwind-index-dollar", [{"$unwind": {"path": "$a", "includeArrayIndex": "$i"}}], 28822,
     "includeArrayIndex option to $unwind stage should not be prefixed with a '$': $i"),
    ("unwind-unknown-option", [{"$unwind": {"path": "$a", "foo": 1}}], 28811,
     "unrecognized option to $unwind stage: foo"),
    ("unwind-empty-path", [{"$unwind": "$"}], 40352, None),
    # $replaceRoot / $replaceWith
    ("replaceroot-not-object", [{"$replaceRoot": 1}], 40229,
     "expected an object as specification for $replaceRoot stage, got int"),
    ("replaceroot-no-newroot", [{"$replaceRoot": {}}], 40414,
     "BSON field '$replaceRoot.newRoot' is missing but a required field"),
    ("replaceroot-unknown", [{"$replaceRoot": {"newRoot": "$a", "x": 1}}], 40415,
     "BSON field '$replaceRoot.x' is an unknown field."),
    ("replaceroot-scalar", [{"$replaceRoot": {"newRoot": "$a"}}], 40228,
     EXEC + "'newRoot' expression  must evaluate to an object, but resulting value was: 1. "
            "Type of resulting value: 'int'. Input document: {_id: 1, a: 1}"),
    ("replaceroot-missing", [{"$replaceRoot": {"newRoot": "$zz"}}], 40228,
     EXEC + "'newRoot' expression  must evaluate to an object, but resulting value was: "
            "MISSING. Type of resulting value: 'missing'. Input document: {_id: 1, a: 1}"),
    ("replacewith-array", [{"$replaceWith": ["$a"]}], 40228,
     EXEC + "'replacement document' must evaluate to an object, but resulting value was: "
            "[1]. Type of resulting value: 'array'. Input document: {_id: 1, a: 1}"),
    # $sample / $sortByCount
    ("sample-not-object", [{"$sample": 1}], 28745, None),
    ("sample-no-size", [{"$sample": {}}], 28749, None),
    ("sample-negative", [{"$sample": {"size": -1}}], 28747, None),
    ("sample-size-string", [{"$sample": {"size": "x"}}], 28746, None),
    ("sample-unknown", [{"$sample": {"size": 1, "x": 1}}], 28748, None),
    ("sortbycount-number", [{"$sortByCount": 1}], 40149, None),
    ("sortbycount-no-dollar", [{"$sortByCount": "a"}], 40148, None),
    ("sortbycount-object-not-expr", [{"$sortByCount": {"a": 1}}], 40147, None),
    # runtime errors carry mongod's executor context
    ("runtime-expression", [{"$project": {"x": {"$divide": [1, 0]}}}], None,
     EXEC + "can't $divide by zero"),
]


@pytest.mark.parametrize("name,pipeline,code,msg", ERRORS, ids=[e[0] for e in ERRORS])
def test_stage_error(db, name, pipeline, code, msg):
    e = fail(db, [{"_id": 1, "a": 1}], pipeline)
    if code is not None:
        assert e.code == code, e.details
    if msg is not None:
        assert e.details["errmsg"] == msg


# ------------------------------------------------------------- $sample

def test_sample_sizes(db):
    docs = [{"_id": i} for i in range(20)]
    got = run(db, docs, [{"$sample": {"size": 5}}])
    assert len(got) == 5 and len({d["_id"] for d in got}) == 5
    assert all(0 <= d["_id"] < 20 for d in got)
    everything = run(db, docs, [{"$sample": {"size": 50}}])
    assert sorted(d["_id"] for d in everything) == list(range(20))
    assert run(db, docs, [{"$sample": {"size": 0}}]) == []


def test_sample_is_random(db):
    docs = [{"_id": i} for i in range(50)]
    seen = {tuple(d["_id"] for d in run(db, docs, [{"$sample": {"size": 3}}]))
            for _ in range(8)}
    assert len(seen) > 1


# ------------------------------------------------------- database pipelines

def test_documents_database_pipeline(db):
    r = db.command("aggregate", 1, pipeline=[
        {"$documents": [{"x": 1}, {"x": 2}, {"x": 3}]},
        {"$match": {"x": {"$gte": 2}}}, {"$group": {"_id": None, "s": {"$sum": "$x"}}}],
        cursor={})
    assert typed(r["cursor"]["firstBatch"]) == typed([{"_id": None, "s": 5}])
    assert r["cursor"]["ns"] == "aggt.$cmd.aggregate"


def test_documents_expression(db):
    r = db.aggregate([{"$documents": {"$map": {"input": {"$range": [0, 3]},
                                                "in": {"i": "$$this"}}}}])
    assert typed(list(r)) == typed([{"i": 0}, {"i": 1}, {"i": 2}])


def test_documents_errors(db):
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", 1, pipeline=[{"$match": {}}], cursor={})
    assert e.value.code == 73
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", 1, pipeline=[{"$documents": [{"a": 1}]},
                                             {"$documents": [{"a": 1}]}], cursor={})
    assert e.value.code == 40602
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", 1, pipeline=[{"$documents": 1}], cursor={})
    assert e.value.code == 5858203


# ------------------------------------------------------ command options

def test_batch_size_and_getmore(db):
    db.c.insert_many([{"_id": i} for i in range(250)])
    r = db.command("aggregate", "c", pipeline=[{"$sort": {"_id": -1}}],
                   cursor={"batchSize": 100})
    cur = r["cursor"]
    assert len(cur["firstBatch"]) == 100 and cur["id"] != 0
    got = [d["_id"] for d in cur["firstBatch"]]
    sizes = []
    while cur["id"]:
        cur = db.command("getMore", cur["id"], collection="c", batchSize=60)["cursor"]
        sizes.append(len(cur["nextBatch"]))
        got += [d["_id"] for d in cur["nextBatch"]]
    assert sizes == [60, 60, 30]
    assert got == list(range(249, -1, -1))


def test_batch_size_zero_and_default(db):
    db.c.insert_many([{"_id": i} for i in range(150)])
    r = db.command("aggregate", "c", pipeline=[{"$match": {}}], cursor={"batchSize": 0})
    assert r["cursor"]["firstBatch"] == [] and r["cursor"]["id"] != 0
    r2 = db.command("getMore", r["cursor"]["id"], collection="c")
    assert len(r2["cursor"]["nextBatch"]) == 150 and r2["cursor"]["id"] == 0
    r = db.command("aggregate", "c", pipeline=[], cursor={})
    assert len(r["cursor"]["firstBatch"]) == 101
    db.command("killCursors", "c", cursors=[r["cursor"]["id"]])


def test_batch_size_errors(db):
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", "c", pipeline=[], cursor={"batchSize": -1})
    assert e.value.code == 51024
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", "c", pipeline=[])
    assert e.value.code == 9
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", "c", pipeline=[], cursor={"foo": 1})
    assert e.value.code == 40415


def test_let(db):
    db.c.insert_many([{"_id": 1, "a": 5}, {"_id": 2, "a": 7}])
    r = db.command("aggregate", "c", cursor={}, let={"lim": 6, "twice": {"$multiply": [2, 3]}},
                   pipeline=[{"$project": {"t": "$$twice", "l": "$$lim",
                                           "big": {"$gt": ["$a", "$$lim"]}}}])
    assert typed(r["cursor"]["firstBatch"]) == typed([{"_id": 1, "t": 6, "l": 6, "big": False},
                                                      {"_id": 2, "t": 6, "l": 6, "big": True}])
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", "c", cursor={}, pipeline=[], let={"Bad": 1})
    assert e.value.code == 16867
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", "c", cursor={}, pipeline=[{"$project": {"x": "$$nope"}}])
    assert e.value.code == 17276


def test_hint(db):
    db.c.insert_many([{"_id": i, "a": i % 3, "b": i} for i in range(30)])
    db.c.create_index("a", name="a_idx")
    pipe = [{"$match": {"a": 1, "b": {"$gte": 10}}}, {"$sort": {"b": 1}},
            {"$project": {"_id": 1}}]
    want = [{"_id": i} for i in range(10, 30) if i % 3 == 1]
    for hint in ("a_idx", {"a": 1}, {"$natural": 1}):
        r = db.command("aggregate", "c", pipeline=pipe, cursor={}, hint=hint)
        assert r["cursor"]["firstBatch"] == want
    ex = db.command("aggregate", "c", pipeline=pipe, explain=True, hint="a_idx")
    assert "a_idx" in str(ex)
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", "c", pipeline=pipe, cursor={}, hint="nope")
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", "c", pipeline=pipe, cursor={}, hint={"zz": 1})
    assert e.value.code == 2


def test_comment_and_maxtime(db):
    db.c.insert_many([{"_id": i} for i in range(3)])
    r = db.command("aggregate", "c", pipeline=[{"$count": "n"}], cursor={},
                   comment={"why": "test"}, maxTimeMS=60000)
    assert r["cursor"]["firstBatch"] == [{"n": 3}]
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", "c", pipeline=[], cursor={}, maxTimeMS=-1)
    assert e.value.code == 51024  # aggregate's IDL: "value must be >= 0"
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", "c", pipeline=[], cursor={}, maxTimeMS="x")
    assert e.value.code == 14


def test_maxtime_expires(db):
    db.c.insert_many([{"_id": i, "a": [j for j in range(50)]} for i in range(3000)])
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", "c", cursor={}, maxTimeMS=1, pipeline=[
            {"$unwind": "$a"}, {"$unwind": {"path": "$a", "includeArrayIndex": "i"}},
            {"$group": {"_id": {"x": "$_id", "a": "$a"}, "s": {"$push": "$i"}}},
            {"$sort": {"_id.a": -1, "_id.x": 1}}, {"$count": "n"}])
    assert e.value.code == 50


def test_explain_forms(db):
    db.c.insert_many([{"_id": i, "g": i % 2} for i in range(10)])
    pipe = [{"$match": {"_id": {"$gte": 2}}}, {"$group": {"_id": "$g", "n": {"$sum": 1}}},
            {"$sort": {"_id": 1}}]
    ex = db.command("aggregate", "c", pipeline=pipe, explain=True)
    names = [next(iter(s)) for s in ex["stages"]]
    assert names == ["$cursor", "$group", "$sort"]
    assert "nReturned" not in ex["stages"][1]
    for verbosity in ("queryPlanner", "executionStats", "allPlansExecution"):
        ex = db.command("explain", {"aggregate": "c", "pipeline": pipe, "cursor": {}},
                        verbosity=verbosity)
        assert [next(iter(s)) for s in ex["stages"]] == names
        if verbosity == "queryPlanner":
            assert "nReturned" not in ex["stages"][1]
        else:
            assert ex["stages"][0]["nReturned"] == 8
            assert ex["stages"][1]["nReturned"] == 2
            assert ex["stages"][2]["nReturned"] == 2
    # explain runs nothing: a pipeline that would fail at run time explains
    ex = db.command("aggregate", "c", pipeline=[{"$project": {"x": {"$divide": [1, 0]}}}],
                    explain=True)
    assert ex["ok"] == 1
    # a pipeline entirely pushed into the read explains as the read
    ex = db.command("aggregate", "c", pipeline=[{"$match": {"g": 1}}], explain=True)
    assert "queryPlanner" in ex and "stages" not in ex


def test_allow_disk_use_flag_type(db):
    with pytest.raises(OperationFailure) as e:
        db.command("aggregate", "c", pipeline=[], cursor={}, allowDiskUse=1)
    assert e.value.code == 14
    r = db.command("aggregate", "c", pipeline=[], cursor={}, allowDiskUse=False)
    assert r["ok"] == 1


# ------------------------------------------------- results past the BSON limit


def test_result_document_too_large(db):
    """A pipeline may build a document past 16 MiB; returning it fails with
    BSONObjectTooLarge (10334), as mongod, and the cursor is gone."""
    big = "x" * (6 * 1024 * 1024)
    db.big.insert_many([{"_id": i, "s": big} for i in range(3)])
    with pytest.raises(OperationFailure) as ei:
        list(db.big.aggregate([{"$group": {"_id": None, "all": {"$push": "$s"}}}]))
    assert ei.value.code == 10334
    assert "is invalid. Size must be between 0 and 16793600(16MB) First element: _id: null" \
        in str(ei.value)
    # just under the limit is returned whole
    out = list(db.big.aggregate([{"$match": {"_id": {"$lt": 2}}},
                                 {"$group": {"_id": None, "all": {"$push": "$s"}}}]))
    assert len(out) == 1 and len(out[0]["all"]) == 2


# ------------------------------------------------ indexes through the planner


def test_leading_match_and_sort_use_indexes(db):
    """A leading $match becomes the read's filter and a following $sort the
    read's sort: the planner serves both from an index (IXSCAN, no SORT
    stage left in the pipeline), and the answers equal the unindexed ones."""
    db.ix.insert_many([{"_id": i, "a": (i * 7) % 50, "b": i % 3} for i in range(200)])
    pipe = [{"$match": {"a": {"$gte": 10, "$lt": 20}}}, {"$sort": {"a": -1, "_id": -1}},
            {"$limit": 5}, {"$project": {"_id": 1, "a": 1}}]
    before = list(db.ix.aggregate(pipe))
    db.ix.create_index([("a", 1), ("_id", 1)])
    ex = db.command("aggregate", "ix", pipeline=pipe, explain=True)
    cursor = ex["stages"][0]["$cursor"]
    plan = _stages_of(cursor["queryPlanner"]["winningPlan"])
    assert plan[-1] == "IXSCAN", plan
    ix = cursor["queryPlanner"]["winningPlan"]
    while ix["stage"] != "IXSCAN":
        ix = ix["inputStage"]
    assert ix["indexName"] == "a_1__id_1" and ix["direction"] == "backward"
    # the $sort was absorbed by the index: no $sort stage remains
    assert [next(iter(s)) for s in ex["stages"]][1:] == ["$limit", "$project"]
    after = list(db.ix.aggregate(pipe))
    assert after == before and len(after) == 5
    assert [d["a"] for d in after] == sorted((d["a"] for d in after), reverse=True)
    # executionStats: only the matching keys were examined
    ex = db.command("explain", {"aggregate": "ix", "pipeline": pipe[:1], "cursor": {}},
                    verbosity="executionStats")
    n = db.ix.count_documents({"a": {"$gte": 10, "$lt": 20}})
    assert ex["executionStats"]["nReturned"] == n
    assert ex["executionStats"]["totalDocsExamined"] == n
