"""The planner over secondary indexes (csrc/query/plan.c, bounds.c), through
the _plan test hook: which index a query uses, the bounds explain shows (as
mongod 7.0 prints them), whether the index provides the sort, and hints."""
from __future__ import annotations

import datetime
import json
import random
import re

import bson
import pymongo
import pytest
from bson import Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp

from multifora import _core

ID = {"key": {"_id": 1}, "name": "_id_", "unique": True}


def ix(key, name=None, **opts):
    if name is None:
        name = "_".join(f"{k}_{v}" for k, v in key.items())
    return {"key": key, "name": name, **opts}


def plan(filter, specs, sort=None, hint=None):
    r = _core._plan(
        bson.encode(filter),
        bson.encode(sort) if sort is not None else None,
        bson.encode({"hint": hint}) if hint is not None else None,
        [bson.encode(s) for s in specs],
    )
    r["explain"] = bson.decode(r["explain"])
    return r


def ixscan(r):
    assert r["explain"]["stage"] == "FETCH", r["explain"]
    return r["explain"]["inputStage"]


def bounds(r):
    return ixscan(r)["indexBounds"]


A = ix({"a": 1})
B = ix({"b": 1})
AB = ix({"a": 1, "b": 1})


# ------------------------------------------------------------ the choice


def test_no_index_collscan_with_filter():
    r = plan({"x": 1}, [ID, A])
    assert r["stage"] == "COLLSCAN" and r["index"] is None
    assert r["explain"] == {"stage": "COLLSCAN", "filter": {"x": 1}, "direction": "forward"}
    assert plan({}, [ID])["explain"] == {"stage": "COLLSCAN", "direction": "forward"}


def test_id_equality_is_idhack():
    r = plan({"_id": 5}, [ID, A])
    assert r["stage"] == "IDHACK" and r["index"] == "_id_"
    assert r["explain"] == {"stage": "IDHACK"}


def test_id_in_is_ixscan_points():
    r = plan({"_id": {"$in": [3, 1, 2, 1]}}, [ID])
    assert r["stage"] == "IXSCAN"
    assert bounds(r) == {"_id": ["[1, 1]", "[2, 2]", "[3, 3]"]}


def test_equality_on_secondary_index():
    r = plan({"a": 1, "x": 2}, [ID, A])
    assert r["index"] == "a_1"
    s = ixscan(r)
    assert s["keyPattern"] == {"a": 1} and s["indexName"] == "a_1"
    assert s["isMultiKey"] is False and s["multiKeyPaths"] == {"a": []}
    assert s["isUnique"] is False and s["isSparse"] is False and s["isPartial"] is False
    assert s["indexVersion"] == 2 and s["direction"] == "forward"
    assert s["indexBounds"] == {"a": ["[1, 1]"]}
    # the condition the bounds answer is gone from FETCH's filter
    assert r["explain"]["filter"] == {"x": 2}


def test_fetch_filter_absent_when_bounds_are_exact():
    r = plan({"a": {"$gt": 3}}, [ID, A])
    assert "filter" not in r["explain"]


def test_more_equality_fields_win():
    r = plan({"a": 1, "b": 2}, [ID, A, B, AB])
    assert r["index"] == "a_1_b_1"
    assert bounds(r) == {"a": ["[1, 1]"], "b": ["[2, 2]"]}


def test_equality_beats_range():
    r = plan({"a": {"$gt": 1}, "b": 2}, [ID, A, B])
    assert r["index"] == "b_1"


def test_unique_equality_preferred():
    u = ix({"c": 1}, unique=True)
    r = plan({"a": 1, "c": 2}, [ID, A, u])
    assert r["index"] == "c_1"
    assert ixscan(r)["isUnique"] is True


def test_id_equality_beats_other_unique():
    u = ix({"c": 1}, unique=True)
    assert plan({"_id": 1, "c": 2}, [ID, u])["index"] == "_id_"


def test_range_beats_nothing_and_ties_by_fewer_fields_then_name():
    r = plan({"a": {"$gte": 1}}, [ID, AB, A])
    assert r["index"] == "a_1"
    r = plan({"a": 1}, [ID, ix({"a": 1}, "zz"), ix({"a": 1}, "aa")])
    assert r["index"] == "aa"


def test_more_bounded_fields_beat_fewer_fields():
    # b past a's range is tested on the keys: a_1_b_1 fetches fewer documents
    assert plan({"a": {"$gte": 1}, "b": 2}, [ID, A, AB])["index"] == "a_1_b_1"
    assert plan({"a": Regex("x"), "b": 2}, [ID, A, AB])["index"] == "a_1_b_1"
    # an equality still comes first
    assert plan({"a": 1, "b": {"$gt": 2}}, [ID, AB, ix({"a": 1, "c": 1, "b": 1})])[
        "index"] == "a_1_b_1"


def test_index_without_leading_predicate_not_used():
    r = plan({"b": 1}, [ID, AB])
    assert r["stage"] == "COLLSCAN"


def test_exists_true_uses_index():
    r = plan({"a": {"$exists": True}}, [ID, A])
    assert bounds(r) == {"a": ["[MinKey, MaxKey]"]}


def test_hidden_never_used():
    h = ix({"a": 1}, hidden=True)
    assert plan({"a": 1}, [ID, h])["stage"] == "COLLSCAN"


# ---------------------------------------------------------------- bounds


@pytest.mark.parametrize(
    "cond,expected",
    [
        (5, ["[5, 5]"]),
        (5.5, ["[5.5, 5.5]"]),
        (Int64(7), ["[7, 7]"]),
        ("x", ['["x", "x"]']),
        ({"$eq": 3}, ["[3, 3]"]),
        ({"$gt": 3}, ["(3, inf.0]"]),
        ({"$gte": 3}, ["[3, inf.0]"]),
        ({"$lt": 3}, ["[-inf.0, 3)"]),
        ({"$lte": 3.0}, ["[-inf.0, 3.0]"]),
        ({"$gt": 1, "$lt": 5}, ["(1, 5)"]),
        ({"$gte": 1, "$lte": 5, "$lt": 4}, ["[1, 4)"]),
        ({"$gt": 5, "$lt": 1}, []),
        ({"$gt": "a"}, ['("a", {})']),
        ({"$lt": "b"}, ['["", "b")']),
        ({"$gte": "a", "$lt": "b"}, ['["a", "b")']),
        ({"$in": [3, 1, "z", 1]}, ["[1, 1]", "[3, 3]", '["z", "z"]']),
        ({"$in": []}, []),
        ({"$in": [1, 5], "$gt": 2}, ["[5, 5]"]),
        # null equals an undefined value too (mongod 7.0)
        (None, ["[undefined, undefined]", "[null, null]"]),
        ({"$eq": None}, ["[undefined, undefined]", "[null, null]"]),
        ({"$gte": None}, ["[undefined, undefined]", "[null, null]"]),
        ({"$in": [None, 1]}, ["[undefined, undefined]", "[null, null]", "[1, 1]"]),
        ({"$exists": False}, ["[null, null]"]),
        ([1, 2], ["[1, 1]", "[[ 1, 2 ], [ 1, 2 ]]"]),
        ([], ["[undefined, undefined]", "[[], []]"]),
        ({"$gt": True}, []),
        ({"$gte": False}, ["[false, true]"]),
        ({"$gt": datetime.datetime(2020, 1, 1)},
         ["(new Date(1577836800000), new Date(9223372036854775807)]"]),
        ({"$lt": ObjectId("5f0000000000000000000000")},
         ["[ObjectId('000000000000000000000000'), ObjectId('5f0000000000000000000000'))"]),
        ({"$gt": Timestamp(5, 1)}, ["(Timestamp(5, 1), Timestamp(4294967295, 4294967295)]"]),
        ({"$gt": {"x": 1}}, ["({ x: 1 }, [])"]),
        ({"$lte": MaxKey()}, ["[MinKey, MaxKey]"]),
        ({"$gt": float("inf")}, []),
        ({"$lt": float("nan")}, []),
        ({"$gte": float("nan")}, ["[nan.0, nan.0]"]),
    ],
)
def test_single_field_bounds(cond, expected):
    r = plan({"a": cond}, [ID, A])
    assert r["index"] == "a_1"
    assert bounds(r) == {"a": expected}


@pytest.mark.parametrize(
    "cond",
    [
        # negations of conditions whose bounds are wider than their values
        {"$ne": [1]},
        {"$nin": [1, [2]]},
        {"$nin": [[]]},
        {"$nin": [1, Regex("^x")]},
        {"$not": Regex("^x")},
        {"$not": {"$regex": "^x"}},
        {"$not": {"$type": "string"}},
        {"$not": {"$mod": [2, 0]}},
        {"$not": {"$elemMatch": {"$gt": 1}}},
        {"$not": {"$size": 1}},
        {"$not": {"$gt": 1, "$lt": 5}},
        {"$not": {"$lt": MaxKey()}},
        {"$not": {"$gt": MinKey()}},
        {"$not": {"$gt": {"x": 1}}},
        {"$not": {"$lt": float("nan")}},
        {"$not": {"$exists": False}},
        {"$elemMatch": {"$elemMatch": {"$gt": 1}}},
        {"$elemMatch": {"$size": 1}},
        {"$gt": None},
        {"$gt": [1]},
        {"$size": 2},
    ],
)
def test_conditions_without_bounds_do_not_use_the_index(cond):
    assert plan({"a": cond}, [ID, A])["stage"] == "COLLSCAN"


@pytest.mark.parametrize("cond, pattern, flags", [
    (Regex("a"), "a", ""),
    ({"$regex": "^a", "$options": "i"}, "^a", "i"),
    ({"$regex": "^.a"}, "^.a", ""),
    ({"$regex": Regex("b$", "m")}, "b$", "m"),
])
def test_regex_without_prefix_filters_the_keys(cond, pattern, flags):
    """mongod's IXSCAN for a regex with no literal prefix: every string and
    the regex value, the regex tested on each key (the IXSCAN's filter),
    and nothing left for FETCH on a field that is not multikey."""
    r = plan({"a": cond}, [ID, A])
    assert r["index"] == "a_1"
    s = ixscan(r)
    assert s["filter"] == {"a": {"$regex": pattern, **({"$options": flags} if flags else {})}}
    assert s["indexBounds"] == {"a": ['["", {})', f"[/{pattern}/{flags}, /{pattern}/{flags}]"]}
    assert "filter" not in r["explain"]


def test_regex_key_filter_only_on_the_first_field():
    # a later field's keys are not tested: its bounds stay open and FETCH judges
    r = plan({"a": 1, "b": Regex("x")}, [ID, AB])
    assert bounds(r) == {"a": ["[1, 1]"], "b": ["[MinKey, MaxKey]"]}
    assert "filter" not in ixscan(r) and r["explain"]["filter"] == {"b": Regex("x")}
    assert plan({"b": Regex("x")}, [ID, AB])["stage"] == "COLLSCAN"
    # with a range on the same field: both bounds, and the key filter
    r = plan({"$and": [{"a": {"$gte": "m"}}, {"a": Regex("x")}]}, [ID, A])
    assert bounds(r) == {"a": ['["m", {})']} and ixscan(r)["filter"] == {"a": {"$regex": "x"}}


@pytest.mark.parametrize(
    "cond, want, exact",
    [
        # mongod 7.0's IndexBoundsBuilder: the complement of the bounds of
        # the condition negated, in [MinKey, MaxKey]
        ({"$ne": 5}, ["[MinKey, 5)", "(5, MaxKey]"], True),
        ({"$ne": "x"}, ['[MinKey, "x")', '("x", MaxKey]'], True),
        ({"$ne": {"x": 1}}, ["[MinKey, { x: 1 })", "({ x: 1 }, MaxKey]"], True),
        ({"$ne": MinKey()}, ["(MinKey, MaxKey]"], True),
        ({"$nin": [3, 1, 3]}, ["[MinKey, 1)", "(1, 3)", "(3, MaxKey]"], True),
        ({"$nin": []}, ["[MinKey, MaxKey]"], True),
        ({"$not": {"$eq": 5}}, ["[MinKey, 5)", "(5, MaxKey]"], True),
        ({"$not": {"$in": [1, 3]}}, ["[MinKey, 1)", "(1, 3)", "(3, MaxKey]"], True),
        ({"$not": {"$gt": 5}}, ["[MinKey, 5]", "(inf.0, MaxKey]"], True),
        ({"$not": {"$lt": 5}}, ["[MinKey, -inf.0)", "[5, MaxKey]"], True),
        ({"$not": {"$gte": "a"}}, ['[MinKey, "a")', "[{}, MaxKey]"], True),
        # null: undefined and null go, with nothing between them
        ({"$ne": None}, ["[MinKey, undefined)", "(null, MaxKey]"], True),
        ({"$nin": [None, 1]}, ["[MinKey, undefined)", "(null, 1)", "(1, MaxKey]"], True),
        ({"$not": {"$lte": None}}, ["[MinKey, undefined)", "(null, MaxKey]"], True),
        # [null, []] (canUseIndexForNin): always fetched
        ({"$nin": [None, []]}, ["[MinKey, undefined)", "(null, [])", "([], MaxKey]"], False),
        # $not: {$exists: true} is $exists: false
        ({"$not": {"$exists": True}}, ["[null, null]"], False),
        # beside a range: intersected
        ({"$ne": 5, "$gte": 1}, ["[1, 5)", "(5, inf.0]"], True),
    ],
)
def test_negation_bounds(cond, want, exact):
    r = plan({"a": cond}, [ID, A])
    assert r["index"] == "a_1"
    assert bounds(r) == {"a": want}
    assert ("filter" not in r["explain"]) == exact, r["explain"]


def test_negation_bounds_descending():
    r = plan({"a": {"$ne": None}}, [ID, ix({"a": -1})])
    assert bounds(r) == {"a": ["[MaxKey, null)", "(undefined, MinKey]"]}
    r = plan({"a": {"$ne": 5}}, [ID, ix({"a": -1})])
    assert bounds(r) == {"a": ["[MaxKey, 5)", "(5, MinKey]"]}


def test_negation_on_multikey_and_sparse_indexes():
    mk = ix({"a": 1}, multikey=1)
    # a scalar negation bounds a multikey field, with a fetch: {a: [5, 6]}
    # has the key 6 and does not match {$ne: 5}
    r = plan({"a": {"$ne": 5}}, [ID, mk])
    assert bounds(r) == {"a": ["[MinKey, 5)", "(5, MaxKey]"]}
    assert r["explain"]["filter"] == {"a": {"$ne": 5}}
    # a negated null does not: {a: []} matches {$ne: null}, and its key is
    # undefined, which the bounds leave out
    for cond in ({"$ne": None}, {"$nin": [None, 1]}, {"$not": {"$gte": None}}):
        assert plan({"a": cond}, [ID, mk])["stage"] == "COLLSCAN", cond
    # the rule is per field: here only b is multikey
    ab = ix({"a": 1, "b": 1}, multikey=2)
    r = plan({"a": {"$ne": None}, "b": {"$ne": None}}, [ID, ab])
    assert bounds(r) == {"a": ["[MinKey, undefined)", "(null, MaxKey]"], "b": ["[MinKey, MaxKey]"]}
    assert r["explain"]["filter"] == {"b": {"$ne": None}}
    # but [null, []] does, fetched
    r = plan({"a": {"$nin": [None, []]}}, [ID, mk])
    assert bounds(r) == {"a": ["[MinKey, undefined)", "(null, [])", "([], MaxKey]"]}
    # a sparse index lacks the documents without `a`: only {$ne: null}
    # cannot match those
    sp = ix({"a": 1}, sparse=True)
    assert plan({"a": {"$ne": None}}, [ID, sp])["index"] == "a_1"
    for cond in ({"$ne": 5}, {"$nin": [None, 1]}, {"$not": {"$gt": 5}}):
        assert plan({"a": cond}, [ID, sp])["stage"] == "COLLSCAN", cond


@pytest.mark.parametrize(
    "cond, want",
    [
        # mongod's simpleRegex: the literal prefix after ^ (or \A)
        (Regex("^abc"), ['["abc", "abd")', "[/^abc/, /^abc/]"]),
        ({"$regex": "^abc"}, ['["abc", "abd")', "[/^abc/, /^abc/]"]),
        ({"$regex": "\\Aab", "$options": "m"}, ['["ab", "ac")', "[/\\Aab/m, /\\Aab/m]"]),
        ({"$regex": "^ab", "$options": "s"}, ['["ab", "ac")', "[/^ab/s, /^ab/s]"]),
        (Regex("^ab", "u"), ['["ab", "ac")', "[/^ab/u, /^ab/u]"]),  # re.compile's flag
        ({"$regex": "^a bc", "$options": "x"}, ['["abc", "abd")', "[/^a bc/x, /^a bc/x]"]),
        # an x comment may end in a newline and a quantifier: b comes off
        ({"$regex": "^a b#c", "$options": "x"}, ['["a", "b")', "[/^a b#c/x, /^a b#c/x]"]),
        # it stops at a metacharacter or an escaped letter
        ({"$regex": "^ab.c"}, ['["ab", "ac")', "[/^ab.c/, /^ab.c/]"]),
        ({"$regex": "^ab\\dc"}, ['["ab", "ac")', "[/^ab\\dc/, /^ab\\dc/]"]),
        ({"$regex": "^ab$"}, ['["ab", "ac")', "[/^ab$/, /^ab$/]"]),
        # an escaped punctuation character or \Q...\E is itself
        ({"$regex": "^a\\.b"}, ['["a.b", "a.c")', "[/^a\\.b/, /^a\\.b/]"]),
        ({"$regex": "^\\Qa.b\\Ec"}, ['["a.bc", "a.bd")', "[/^\\Qa.b\\Ec/, /^\\Qa.b\\Ec/]"]),
        # a quantifier that allows none takes the last character off
        ({"$regex": "^abc*"}, ['["ab", "ac")', "[/^abc*/, /^abc*/]"]),
        ({"$regex": "^abc?d"}, ['["ab", "ac")', "[/^abc?d/, /^abc?d/]"]),
        ({"$regex": "^abc{0,2}"}, ['["ab", "ac")', "[/^abc{0,2}/, /^abc{0,2}/]"]),
        ({"$regex": "^abc{2}"}, ['["abc", "abd")', "[/^abc{2}/, /^abc{2}/]"]),
        ({"$regex": "^abc+"}, ['["abc", "abd")', "[/^abc+/, /^abc+/]"]),
        # a $in unites its regexes' bounds with its points
        ({"$in": [Regex("^b"), "a", Regex("^ab")]},
         ['["a", "a"]', '["ab", "ac")', '["b", "c")', "[/^ab/, /^ab/]", "[/^b/, /^b/]"]),
        ({"$in": [Regex("^ab"), "abx"]}, ['["ab", "ac")', "[/^ab/, /^ab/]"]),
    ],
)
def test_regex_prefix_bounds(cond, want):
    assert bounds(plan({"a": cond}, [ID, A])) == {"a": want}


@pytest.mark.parametrize(
    "pattern, want",
    [
        # the upper bound is the next character, so it stays text
        ("^п", '["п", "р")'),   # D0 BF: one byte up would be D0 C0, not UTF-8
        ("^a\x7f", '["a\x7f", "a\x80")'),
        # a quantified character comes off whole
        ("^aé*", '["a", "b")'),
        ("^aé?x", '["a", "b")'),
        ("^aé{0}", '["a", "b")'),
        # things PCRE2 reads as nothing: a quantifier after them reaches back
        ("^ab\\E*", '["a", "b")'),
        ("^ab(?#c)*", '["a", "b")'),
    ],
)
def test_regex_prefix_is_whole_characters(pattern, want):
    assert bounds(plan({"a": {"$regex": pattern}}, [ID, A]))["a"][0] == want


def test_regex_bounds_backward():
    r = plan({"a": Regex("^ab")}, [ID, A], sort={"a": -1})
    assert bounds(r) == {"a": ["[/^ab/, /^ab/]", '("ac", "ab"]']}
    assert r["explain"]["inputStage"]["direction"] == "backward"
    assert r["sorted"] is True


def test_regex_prefix_counts_from_keys_only_when_whole(client):
    """/^ab/ is exactly the strings from "ab" up to "ac" and the regex
    itself, so a count reads keys alone; /^ab./ needs its documents."""
    c = client.t.c
    c.create_index("a")
    c.insert_many([{"a": v} for v in ("a", "ab", "abc", "ac", "b", "AB")]
                  + [{"a": Regex("^ab")}, {"a": Regex("^ab", "i")}, {"a": ["x", "abz"]}, {}])

    def count_plan(f):
        e = client.t.command("explain", {"count": "c", "query": f}, verbosity="executionStats")
        st = e["executionStats"]
        stage = e["queryPlanner"]["winningPlan"]["inputStage"]["stage"]
        return stage, st["totalDocsExamined"]

    assert c.count_documents({"a": Regex("^ab")}) == 4  # ab, abc, the equal regex, abz
    assert c.count_documents({"a": Regex("^ab.")}) == 2
    # a multikey index: a document whose array has two keys in the bounds
    # is counted once (the RecordId set), from its keys all the same, as
    # mongod's exact bounds are on a multikey field
    assert count_plan({"a": Regex("^ab")}) == ("IXSCAN", 0)
    assert count_plan({"a": Regex("^ab.")})[0] == "FETCH"
    c.insert_one({"a": ["abc", "abd"]})
    assert c.count_documents({"a": Regex("^ab")}) == 5
    c.delete_many({"a": ["abc", "abd"]})
    c.drop_index("a_1")
    c.delete_many({"a": ["x", "abz"]})
    c.create_index("a")
    assert count_plan({"a": Regex("^ab")}) == ("IXSCAN", 0)
    assert c.count_documents({"a": Regex("^ab")}) == 3
    assert count_plan({"a": Regex("^ab.")})[0] == "FETCH"


def test_and_conditions_intersect():
    r = plan({"$and": [{"a": {"$gt": 1}}, {"a": {"$lte": 9}}]}, [ID, A])
    assert bounds(r) == {"a": ["(1, 9]"]}


def test_or_left_to_the_matcher_when_an_index_serves_the_rest_or_a_clause_has_none():
    # the conditions beside the $or have an index: it is used, the $or filters
    r = plan({"$or": [{"b": 1}], "a": 2}, [ID, A, B])
    assert bounds(r) == {"a": ["[2, 2]"]}
    assert r["explain"]["filter"] == {"b": 1}  # a $or of one clause is that clause
    # a path the filter has already (a dotted one too): the clause is an
    # element of a $and, not a second key of that name
    for path in ("b", "c.d"):
        r = plan({path: {"$gt": 0}, "$or": [{path: 1}], "a": 2}, [ID, A])
        assert r["explain"]["filter"] == {path: {"$gt": 0}, "$and": [{path: 1}]}
    # a clause no index serves: the whole $or scans
    assert plan({"$or": [{"a": 1}, {"c": 2}]}, [ID, A])["stage"] == "COLLSCAN"
    assert plan({"$or": [{"a": 1}, {"$or": [{"a": 2}, {"c": 1}]}]}, [ID, A])["stage"] == "COLLSCAN"
    # a nested $or is taken up into its $or, whose equalities of one path
    # are that path's $in (mongod's canonical form)
    assert bounds(plan({"$or": [{"a": 1}, {"$or": [{"a": 2}]}]}, [ID, A])) == {
        "a": ["[1, 1]", "[2, 2]"]}
    # a hint is obeyed: the hinted index, whole
    assert bounds(plan({"$or": [{"a": 1}, {"b": 2}]}, [ID, A, B], hint="a_1")) == {
        "a": ["[MinKey, MaxKey]"]}
    assert plan({"$or": [{"a": 1}, {"b": 2}]}, [ID, A, B],
                hint={"$natural": 1})["stage"] == "COLLSCAN"


def test_rooted_or_is_an_or_of_index_scans():
    r = plan({"$or": [{"a": 1}, {"b": {"$gt": 2}, "c": 3}, {"_id": 7}]}, [ID, A, B])
    assert r["stage"] == "OR" and r["index"] is None and r["sorted"] is False
    sub = r["explain"]
    assert sub["stage"] == "SUBPLAN"
    fetch = sub["inputStage"]
    assert fetch["stage"] == "FETCH" and "filter" not in fetch
    ors = fetch["inputStage"]
    assert ors["stage"] == "OR"
    kids = ors["inputStages"]
    assert [k["stage"] for k in kids] == ["IXSCAN", "FETCH", "IXSCAN"]
    assert kids[0]["indexName"] == "a_1" and kids[0]["indexBounds"] == {"a": ["[1, 1]"]}
    assert kids[1]["filter"] == {"c": 3}
    assert kids[1]["inputStage"]["indexBounds"] == {"b": ["(2, inf.0]"]}
    assert kids[2]["indexName"] == "_id_" and kids[2]["indexBounds"] == {"_id": ["[7, 7]"]}
    # each clause takes its best index, as it would alone
    r = plan({"$or": [{"a": 1, "b": 2}, {"b": 3}]}, [ID, A, B, AB])
    assert [k["indexName"] for k in r["explain"]["inputStage"]["inputStage"]["inputStages"]] == [
        "a_1_b_1", "b_1"]


@pytest.mark.parametrize(
    "filter, rest",
    [
        # beside conditions no index serves: FETCH with them, over OR, and
        # no SUBPLAN (mongod's contained $or)
        ({"$or": [{"a": 1}, {"b": 2}], "d": 4}, {"d": 4}),
        # in a top-level $and, alone or with other conditions in its element
        ({"$and": [{"d": 4}, {"$or": [{"a": 1}, {"b": 2}]}]}, {"$and": [{"d": 4}]}),
        ({"$and": [{"$or": [{"a": 1}, {"b": 2}], "e": 5}, {"d": 4}]},
         {"$and": [{"e": 5}, {"d": 4}]}),
        ({"$and": [{"$or": [{"a": 1}, {"b": 2}]}], "d": 4}, {"d": 4}),
        # the first $or whose clauses all have an index is not looked past
        ({"$and": [{"$or": [{"a": 1}, {"b": 2}]}, {"$or": [{"d": 1}, {"a": 3}]}]},
         {"$and": [{"$or": [{"d": 1}, {"a": 3}]}]}),
    ],
)
def test_contained_or_is_an_or_of_index_scans(filter, rest):
    r = plan(filter, [ID, A, B])
    assert r["stage"] == "OR"
    fetch = r["explain"]
    assert fetch["stage"] == "FETCH" and fetch["filter"] == rest
    ors = fetch["inputStage"]
    assert ors["stage"] == "OR"
    assert [k["indexName"] for k in ors["inputStages"]] == ["a_1", "b_1"]


def test_or_plan_beats_an_index_only_negations_bound():
    f = {"c": {"$ne": 1}, "$or": [{"a": 1}, {"b": 2}]}
    r = plan(f, [ID, A, B, ix({"c": 1})])
    assert r["stage"] == "OR" and r["explain"]["filter"] == {"c": {"$ne": 1}}
    # not when the negation's index gives the sort, nor over an equality
    assert plan(f, [ID, A, B, ix({"c": 1})], sort={"c": 1})["index"] == "c_1"
    f = {"c": {"$ne": 1}, "d": 2, "$or": [{"a": 1}, {"b": 2}]}
    assert plan(f, [ID, A, B, ix({"d": 1, "c": 1})])["index"] == "d_1_c_1"


def test_fields_past_the_ranges_are_tested_on_the_keys():
    # the ranges stop at a's range: b's bounds are shown, and each key's b
    # is tested against them before its document is fetched (mongod's
    # IndexBoundsChecker), so b leaves the FETCH filter
    for f in ({"a": {"$gt": 0}, "b": 1}, {"a": {"$ne": 7}, "b": 1},
              {"a": {"$ne": 1}, "b": {"$ne": 1}}):
        r = plan(f, [ID, AB])
        assert r["index"] == "a_1_b_1"
        assert "filter" not in r["explain"], f
        assert ixscan(r)["indexBounds"]["b"] == (
            ["[1, 1]"] if f["b"] == 1 else ["[MinKey, 1)", "(1, MaxKey]"])
    r = plan({"b": 5}, [ID, ix({"a": 1, "b": -1})], hint="a_1_b_-1")
    assert "filter" not in r["explain"]
    assert bounds(r) == {"a": ["[MinKey, MaxKey]"], "b": ["[5, 5]"]}
    # 3,000 points of a by 3 intervals of b pass MAX_RANGES (4,096): the
    # ranges stop before b, whose bounds the keys are tested against
    r = plan({"a": {"$in": list(range(3000))}, "b": {"$nin": [1, 2]}}, [ID, AB])
    assert "filter" not in r["explain"]
    r = plan({"a": {"$in": list(range(1000))}, "b": {"$nin": [1, 2]}}, [ID, AB])
    assert "filter" not in r["explain"]
    # a multikey field past the ranges is tested too: a key of one of its
    # elements passing an equality is a document that matches it
    r = plan({"a": {"$gt": 0}, "b": 1}, [ID, ix({"a": 1, "b": 1}, multikey=2)])
    assert "filter" not in r["explain"]
    # but not a negation, which every element must meet
    r = plan({"a": {"$gt": 0}, "b": {"$ne": 1}}, [ID, ix({"a": 1, "b": 1}, multikey=2)])
    assert r["explain"]["filter"] == {"b": {"$ne": 1}}


def test_multikey_fields_past_the_32nd():
    # key generation marks fields from the 32nd on in bit 31
    key = {f"f{i}": 1 for i in range(32)}
    mk = ix(key, "big", multikey=1 << 31)
    assert plan({"f31": {"$ne": None}, "f0": 0}, [ID, mk])["stage"] == "IXSCAN"
    r = plan({"f0": 0, "f31": {"$ne": None}}, [ID, mk])
    assert r["explain"]["inputStage"]["indexBounds"]["f31"] == ["[MinKey, MaxKey]"]


def test_contained_or_not_planned_when_a_clause_has_no_index():
    assert plan({"$and": [{"$or": [{"a": 1}, {"d": 2}]}, {"d": 4}]}, [ID, A])["stage"] == (
        "COLLSCAN")
    # a $or in $and after one that fails is planned in its place
    assert plan({"$and": [{"$or": [{"d": 1}, {"a": 3}]}, {"$or": [{"a": 1}, {"b": 2}]}]},
                [ID, A, B])["stage"] == "OR"
    # an index on the other conditions is taken instead, as before
    assert plan({"$or": [{"a": 1}, {"b": 2}], "c": 4}, [ID, A, B, ix({"c": 1})])["index"] == "c_1"


def test_compound_bounds_all_fields_shown():
    r = plan({"a": {"$in": [1, 2]}, "b": {"$gt": 3}}, [ID, AB])
    assert bounds(r) == {"a": ["[1, 1]", "[2, 2]"], "b": ["(3, inf.0]"]}
    r = plan({"a": {"$gt": 1}, "b": 2}, [ID, AB])
    assert bounds(r) == {"a": ["(1, inf.0]"], "b": ["[2, 2]"]}
    r = plan({"a": 1}, [ID, AB])
    assert bounds(r) == {"a": ["[1, 1]"], "b": ["[MinKey, MaxKey]"]}


def test_descending_field_bounds_reversed():
    r = plan({"a": {"$gt": 3}, "b": {"$in": [1, 2]}}, [ID, ix({"a": -1, "b": 1})])
    assert bounds(r) == {"a": ["[inf.0, 3)"], "b": ["[1, 1]", "[2, 2]"]}
    r = plan({"a": {"$in": [1, 2]}}, [ID, ix({"a": -1})])
    assert bounds(r) == {"a": ["[2, 2]", "[1, 1]"]}
    r = plan({"a": 1}, [ID, ix({"a": 1, "b": -1})])
    assert bounds(r) == {"a": ["[1, 1]"], "b": ["[MaxKey, MinKey]"]}


def test_dotted_paths():
    r = plan({"a.b": {"$lt": 2}}, [ID, ix({"a.b": 1})])
    assert bounds(r) == {"a.b": ["[-inf.0, 2)"]}
    # {a: {b: 1}} is equality on a to a document, not on a.b
    assert plan({"a": {"b": 1}}, [ID, ix({"a.b": 1})])["stage"] == "COLLSCAN"
    r = plan({"a": {"b": 1}}, [ID, A])
    assert bounds(r) == {"a": ["[{ b: 1 }, { b: 1 }]"]}


# -------------------------------------------------------------- multikey


def test_multikey_does_not_intersect_ranges():
    mk = ix({"a": 1}, multikey=1)
    r = plan({"a": {"$gt": 1, "$lt": 5}}, [ID, mk])
    s = ixscan(r)
    assert s["isMultiKey"] is True and s["multiKeyPaths"] == {"a": ["a"]}
    assert s["indexBounds"] == {"a": ["(1, inf.0]"]}
    # the condition left out stays in the filter
    assert r["explain"]["filter"] == {"a": {"$gt": 1, "$lt": 5}}


def test_multikey_shared_prefix_not_compounded():
    mk = ix({"a.b": 1, "a.c": 1}, multikey=3)
    r = plan({"a.b": 1, "a.c": 2}, [ID, mk])
    assert bounds(r) == {"a.b": ["[1, 1]"], "a.c": ["[MinKey, MaxKey]"]}
    mk2 = ix({"a": 1, "b": 1}, multikey=1)
    r = plan({"a": 1, "b": 2}, [ID, mk2])
    assert bounds(r) == {"a": ["[1, 1]"], "b": ["[2, 2]"]}


# ----------------------------------------------------------------- sparse


def test_sparse_not_used_for_null_or_exists_false():
    sp = ix({"a": 1}, sparse=True)
    assert plan({"a": None}, [ID, sp])["stage"] == "COLLSCAN"
    assert plan({"a": {"$exists": False}}, [ID, sp])["stage"] == "COLLSCAN"
    assert plan({"a": {"$in": [1, None]}}, [ID, sp])["stage"] == "COLLSCAN"
    r = plan({"a": 1}, [ID, sp])
    assert r["index"] == "a_1" and ixscan(r)["isSparse"] is True
    r = plan({"a": {"$exists": True}}, [ID, sp])
    assert r["index"] == "a_1"


def test_sparse_hinted_is_used_whole():
    sp = ix({"a": 1}, sparse=True)
    r = plan({"a": None}, [ID, sp], hint="a_1")
    assert bounds(r) == {"a": ["[MinKey, MaxKey]"]}


def test_sparse_does_not_provide_sort_alone():
    sp = ix({"a": 1}, sparse=True)
    r = plan({}, [ID, sp], sort={"a": 1})
    assert r["stage"] == "COLLSCAN" and not r["sorted"]
    r = plan({"a": {"$gt": 0}}, [ID, sp], sort={"a": 1})
    assert r["index"] == "a_1" and r["sorted"]


# ---------------------------------------------------------------- partial


PARTIAL = ix({"a": 1}, partialFilterExpression={"b": {"$gt": 5}})


@pytest.mark.parametrize(
    "filter,used",
    [
        ({"a": 1, "b": {"$gt": 5}}, True),
        ({"a": 1, "b": {"$gt": 7}}, True),
        ({"a": 1, "b": {"$gte": 6}}, True),
        ({"a": 1, "b": 9}, True),
        ({"a": 1, "b": {"$in": [6, 8]}}, True),
        ({"a": 1, "$and": [{"b": {"$gt": 10}}]}, True),
        ({"a": 1, "b": {"$gte": 5}}, False),
        ({"a": 1, "b": {"$gt": 4}}, False),
        ({"a": 1, "b": 5}, False),
        ({"a": 1, "b": "x"}, False),
        ({"a": 1, "b": {"$in": [6, 1]}}, False),
        ({"a": 1}, False),
        ({"a": 1, "b": {"$lt": 9}}, False),
    ],
)
def test_partial_used_only_when_implied(filter, used):
    r = plan(filter, [ID, PARTIAL])
    assert (r["index"] == "a_1") == used
    if used:
        assert ixscan(r)["isPartial"] is True


def test_partial_exists_and_equality():
    p = ix({"a": 1}, partialFilterExpression={"c": {"$exists": True}, "d": "x"})
    assert plan({"a": 1, "c": 3, "d": "x"}, [ID, p])["index"] == "a_1"
    assert plan({"a": 1, "c": None, "d": "x"}, [ID, p])["stage"] == "COLLSCAN"
    assert plan({"a": 1, "c": {"$gt": 0}, "d": "x"}, [ID, p])["index"] == "a_1"
    assert plan({"a": 1, "c": 3, "d": "y"}, [ID, p])["stage"] == "COLLSCAN"


@pytest.mark.parametrize("cond,used", [
    ({"$gt": MinKey()}, False), ({"$gte": MinKey()}, False), ({"$lt": MaxKey()}, False),
    ({"$lte": MaxKey()}, False), ({"$gt": 0}, True), ({"$lte": "z"}, True),
    ({"$eq": MinKey()}, True), ({"$in": [MaxKey()]}, True),
])
def test_partial_exists_not_implied_by_ranges_past_the_ends(cond, used):
    # {$gt: MinKey} and {$lte: MaxKey} take null and missing fields too (as
    # mongod's comparison does), so they do not imply {$exists: true}: the
    # partial index lacks the documents without c that they match
    p = ix({"a": 1}, partialFilterExpression={"c": {"$exists": True}})
    assert (plan({"a": 1, "c": cond}, [ID, p]).get("index") == "a_1") == used


def test_partial_hinted_not_implied_scans_whole_index():
    r = plan({"a": 1}, [ID, PARTIAL], hint={"a": 1})
    assert bounds(r) == {"a": ["[MinKey, MaxKey]"]}


# ------------------------------------------------------------------- sort


def test_sort_by_index_either_direction():
    r = plan({}, [ID, A], sort={"a": 1})
    assert r["index"] == "a_1" and r["sorted"]
    assert ixscan(r)["direction"] == "forward"
    assert bounds(r) == {"a": ["[MinKey, MaxKey]"]}
    r = plan({}, [ID, A], sort={"a": -1})
    assert r["sorted"] and ixscan(r)["direction"] == "backward"
    assert bounds(r) == {"a": ["[MaxKey, MinKey]"]}


def test_sort_backward_bounds_in_scan_order():
    r = plan({"a": {"$in": [1, 5]}, "b": {"$gt": 2}}, [ID, AB], sort={"a": -1, "b": -1})
    assert r["sorted"] and ixscan(r)["direction"] == "backward"
    assert bounds(r) == {"a": ["[5, 5]", "[1, 1]"], "b": ["[inf.0, 2)"]}


def test_sort_after_equality_prefix():
    r = plan({"a": 1}, [ID, AB], sort={"b": -1})
    assert r["sorted"] and ixscan(r)["direction"] == "backward"
    r = plan({"a": 1}, [ID, AB], sort={"a": 1, "b": 1})
    assert r["sorted"]
    r = plan({"a": 1}, [ID, AB], sort={"b": 1, "a": -1})
    assert r["sorted"]


def test_sort_not_provided_after_in_or_range():
    r = plan({"a": {"$in": [1, 2]}}, [ID, AB], sort={"b": 1})
    assert r["index"] == "a_1_b_1" and not r["sorted"]
    r = plan({"a": {"$gt": 1}}, [ID, AB], sort={"b": 1})
    assert not r["sorted"]


def test_sort_mixed_directions_need_matching_index():
    mixed = ix({"a": 1, "b": -1})
    assert plan({}, [ID, mixed], sort={"a": 1, "b": -1})["sorted"]
    assert plan({}, [ID, mixed], sort={"a": -1, "b": 1})["sorted"]
    assert not plan({}, [ID, mixed], sort={"a": 1, "b": 1})["sorted"]


def test_sort_never_through_multikey():
    mk = ix({"a": 1}, multikey=1)
    r = plan({}, [ID, mk], sort={"a": 1})
    assert r["stage"] == "COLLSCAN" and not r["sorted"]
    r = plan({"a": 1}, [ID, mk], sort={"a": 1})
    assert r["index"] == "a_1" and not r["sorted"]


def test_sort_breaks_ties_between_equal_candidates():
    r = plan({"a": 1}, [ID, ix({"a": 1, "c": 1}), ix({"a": 1, "b": 1})], sort={"b": 1})
    assert r["index"] == "a_1_b_1" and r["sorted"]


def test_sort_by_id_and_points_in_order():
    r = plan({}, [ID], sort={"_id": -1})
    assert r["sorted"] and ixscan(r)["direction"] == "backward"
    r = plan({"_id": {"$in": [1, 2]}}, [ID], sort={"_id": -1})
    assert r["sorted"]
    assert bounds(r) == {"_id": ["[2, 2]", "[1, 1]"]}


def test_equality_wins_over_sort():
    r = plan({"b": 1}, [ID, A, B], sort={"a": 1})
    assert r["index"] == "b_1" and not r["sorted"]


def test_meta_sort_not_provided():
    assert not plan({}, [ID, A], sort={"a": {"$meta": "textScore"}})["sorted"]


# ------------------------------------------------------------------- hint


def test_hint_by_name_and_pattern():
    r = plan({"b": 1}, [ID, A, B], hint="a_1")
    assert r["index"] == "a_1"
    assert bounds(r) == {"a": ["[MinKey, MaxKey]"]}
    r = plan({"a": 3}, [ID, A, B], hint={"a": 1})
    assert bounds(r) == {"a": ["[3, 3]"]}
    r = plan({"a": 3}, [ID, A, B], hint={"a": 1.0})
    assert r["index"] == "a_1"
    assert plan({"a": 3}, [ID, A], hint={"_id": 1})["index"] == "_id_"


def test_hint_natural_and_empty():
    r = plan({"a": 1}, [ID, A], hint={"$natural": -1})
    assert r["explain"] == {"stage": "COLLSCAN", "filter": {"a": 1}, "direction": "backward"}
    assert plan({"a": 1}, [ID, A], hint={})["index"] == "a_1"


@pytest.mark.parametrize("hint", ["nope", {"b": 1}, {"a": -1}, {"a": 1, "b": 1}])
def test_hint_unknown_is_bad_value(hint):
    with pytest.raises(_core.MultiforaError) as e:
        plan({}, [ID, A], hint=hint)
    assert e.value.code == 2
    assert str(e.value) == "hint provided does not correspond to an existing index"


def test_hint_hidden_is_bad_value():
    h = ix({"a": 1}, hidden=True)
    with pytest.raises(_core.MultiforaError) as e:
        plan({}, [ID, h], hint="a_1")
    assert e.value.code == 2


def test_hint_pattern_matching_two_indexes():
    with pytest.raises(_core.MultiforaError) as e:
        plan({}, [ID, ix({"a": 1}, "one"), ix({"a": 1}, "two")], hint={"a": 1})
    assert e.value.code == 27
    assert str(e.value).startswith("Hint matched multiple indexes, must hint by index name.")


def test_hint_provides_sort():
    r = plan({"b": 1}, [ID, A, B], hint="a_1", sort={"a": -1})
    assert r["index"] == "a_1" and r["sorted"]


def test_no_descriptors_and_no_collection_is_collscan():
    assert plan({"_id": 1}, [])["stage"] == "COLLSCAN"


def test_numbers_and_types_in_bounds():
    r = plan({"a": {"$in": [Decimal128("1.5"), Int64(2), MinKey()]}}, [ID, A])
    assert bounds(r) == {"a": ["[MinKey, MinKey]", '[NumberDecimal("1.5"), NumberDecimal("1.5")]',
                               "[2, 2]"]}


def test_regex_bounds_never_lose_a_document(client):
    """Random anchored patterns built from literals, metacharacters,
    quantifiers, escapes and flags, over random strings (some in arrays,
    some regex values): as planned, with the index hinted, and as a
    collection scan, the same documents match."""
    import random

    rng = random.Random(41)
    c = client.t.r
    c.create_index("a")
    alphabet = ["a", "b", "A", "B", ".", "c", "\n", "*", "{", "}", "0", "|", "é", "п", "р",
                "\u2028", "ÿ", "\x7f"]
    docs = []
    for i in range(600):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(5)))
        v = [s, "b" + s] if i % 7 == 0 else Regex("^" + s) if i % 11 == 0 else s
        docs.append({"_id": i, "a": v})
    c.insert_many(docs)
    pieces = ["a", "b", "c", ".", "*", "?", "+", "{0}", "{2}", "{0,1}", "\\.", "\\*",
              "\\Qa.\\E", "\\Qb", "$", "|", "[ab]", "(a)", "\\d", "\\n", " ", "#",
              "é", "п", "ÿ", "\x7f", "\\E", "(?#c)", "{ 0}", "\u2028", "\n"]
    planned = 0
    for _ in range(300):
        pat = rng.choice(["^", "^", "\\A", ""]) + "".join(
            rng.choice(pieces) for _ in range(rng.randrange(1, 5)))
        flags = rng.choice(["", "", "m", "s", "x", "u", "i", "mx"])
        for f in ({"a": Regex(pat, flags)}, {"a": {"$regex": pat, "$options": flags}},
                  {"a": {"$in": [Regex(pat, flags), "ab", Regex("^c")]}}):
            try:
                want = sorted(d["_id"] for d in c.find(f).hint({"$natural": 1}))
            except pymongo.errors.OperationFailure:
                continue  # not a valid pattern: mongod refuses it too
            assert sorted(d["_id"] for d in c.find(f)) == want, f
            assert sorted(d["_id"] for d in c.find(f).hint("a_1")) == want, f
            assert c.count_documents(f) == len(want), f
            e = client.t.command("explain", {"find": "r", "filter": f})
            planned += e["queryPlanner"]["winningPlan"]["stage"] != "COLLSCAN"
    assert planned > 100  # most patterns have a prefix and use the index


def test_all_bounds_as_its_elements():
    """mongod rewrites {a: {$all: [x, y]}} into {$and: [{a: x}, {a: y}]}:
    each element bounds `a` as {a: element} would; on a multikey field one
    of them does, on any other field their intersection.  The FETCH keeps
    the $all."""
    mk = ix({"a": 1}, multikey=1)
    r = plan({"a": {"$all": ["x", "y"]}}, [ID, mk])
    assert bounds(r) == {"a": ['["x", "x"]']}
    assert r["explain"]["filter"] == {"a": {"$all": ["x", "y"]}}
    r = plan({"a": {"$all": ["x", "y"]}}, [ID, A])
    assert bounds(r) == {"a": []}
    r = plan({"a": {"$all": [5]}}, [ID, A])
    assert bounds(r) == {"a": ["[5, 5]"]}
    r = plan({"a": {"$all": [Regex("^ab"), "abc"]}}, [ID, mk])
    assert bounds(r) == {"a": ['["ab", "ac")', "[/^ab/, /^ab/]"]}
    r = plan({"a": {"$all": [{"$elemMatch": {"$gt": 1, "$lt": 5}}]}}, [ID, mk])
    assert bounds(r) == {"a": ["(1, 5)"]}
    r = plan({"a": {"$all": [{"$elemMatch": {"b": 2}}]}}, [ID, ix({"a.b": 1}, multikey=1)])
    assert bounds(r) == {"a.b": ["[2, 2]"]}
    # nothing to bound with: the matcher alone (no document matches $all: [])
    assert plan({"a": {"$all": []}}, [ID, A])["stage"] == "COLLSCAN"
    assert plan({"a": {"$not": {"$all": [1]}}}, [ID, A])["stage"] == "COLLSCAN"


def test_all_on_a_multikey_index_fetches_only_its_first_elements_keys(client):
    db = client.t
    db.tg.insert_many([{"_id": i, "t": [f"x{i % 5}", f"y{i % 3}"]} for i in range(300)])
    db.tg.create_index("t")
    for flt, n in (({"t": {"$all": ["x1", "y2"]}}, 20), ({"t": {"$all": [Regex("^x1")]}}, 60),
                   ({"t": {"$all": [{"$elemMatch": {"$gte": "y2"}}]}}, 100)):
        e = db.command("explain", {"find": "tg", "filter": flt}, verbosity="executionStats")
        assert e["queryPlanner"]["winningPlan"]["inputStage"]["stage"] == "IXSCAN", flt
        s = e["executionStats"]
        assert s["nReturned"] == n and s["totalDocsExamined"] < 300, (flt, s)
        assert sorted(d["_id"] for d in db.tg.find(flt)) == sorted(
            d["_id"] for d in db.tg.find(flt, hint=[("$natural", 1)]))


@pytest.mark.parametrize("types, want", [
    ("string", ['["", {})']),
    ("symbol", ['["", {})']),
    ("double", ["[nan.0, inf.0]"]),
    ("number", ["[nan.0, inf.0]"]),
    (16, ["[nan.0, inf.0]"]),
    ("object", ["[{}, [])"]),
    ("bool", ["[false, true]"]),
    ("date", ["[new Date(-9223372036854775808), new Date(9223372036854775807)]"]),
    ("null", ["[null, null]"]),
    ("objectId", ["[ObjectId('000000000000000000000000'), ObjectId('ffffffffffffffffffffffff')]"]),
    ("timestamp", ["[Timestamp(0, 0), Timestamp(4294967295, 4294967295)]"]),
    ("minKey", ["[MinKey, MinKey]"]),
    ("maxKey", ["[MaxKey, MaxKey]"]),
    ("array", ["[MinKey, MaxKey]"]),
    (["string", "int", "long"], ["[nan.0, inf.0]", '["", {})']),
    (["bool", "null", "minKey"], ["[MinKey, MinKey]", "[null, null]", "[false, true]"]),
    # the types after timestamps: each to where the next begins (mongod
    # includes that first value; here it is left out, as for strings)
    ("regex", ["[//, DBRef('', 000000000000000000000000))"]),
    ("dbPointer", ["[DBRef('', 000000000000000000000000), )"]),
    ("javascript", ["[, CodeWScope( , {}))"]),
    ("javascriptWithScope", ["[CodeWScope( , {}), MaxKey)"]),
    ("undefined", ["[undefined, undefined]"]),
    (["string", "javascript"], ['["", {})', "[, CodeWScope( , {}))"]),
])
def test_type_bounds(types, want):
    """mongod's bounds for $type: each type's whole bracket (numbers from
    NaN, strings to the empty object exclusive), the union sorted; an array
    type: every key.  Never exact: the FETCH keeps the $type."""
    r = plan({"a": {"$type": types}}, [ID, A])
    assert bounds(r) == {"a": want}
    assert r["explain"]["filter"] == {"a": {"$type": types}}
    # a descending index: the same intervals, each turned round, last first
    r = plan({"a": {"$type": types}}, [ID, ix({"a": -1})])
    assert len(bounds(r)["a"]) == len(want)


@pytest.mark.parametrize("cond, want", [
    (Code("abc"), ["[abc, abc]"]),
    ({"$gt": Code("a")}, ["(a, CodeWScope( , {}))"]),
    ({"$lte": Code("b")}, ["[, b]"]),
    ({"$in": [Code("x"), 3]}, ["[3, 3]", "[x, x]"]),
])
def test_code_bounds_print_the_code(cond, want):
    """A code value's text in the bounds (its length was once read before
    libbson set it: the first end printed empty, or bytes past the value)."""
    assert bounds(plan({"a": cond}, [ID, A])) == {"a": want}


def test_type_bounds_descending():
    r = plan({"a": {"$type": ["string", "number"]}}, [ID, ix({"a": -1})])
    assert bounds(r) == {"a": ['({}, ""]', "[inf.0, nan.0]"]}


def test_type_fetches_only_its_brackets_keys(client):
    db = client.t
    vals = ["s", 1, 2.5, float("nan"), None, True, {"x": 1}, [1, "t"], Int64(3), MinKey(),
            Regex("r"), Code("f"), Code("g", {"s": 1})]
    db.ty.insert_many([{"_id": i, "a": vals[i % len(vals)]} for i in range(300)] +
                      [{"_id": 300 + i} for i in range(30)])
    db.ty.create_index("a")
    for types in ("string", "number", "double", "null", "object", ["bool", "minKey"], "array",
                  "regex", "javascript", "javascriptWithScope", ["regex", "javascript"]):
        flt = {"a": {"$type": types}}
        want = sorted(d["_id"] for d in db.ty.find(flt, hint=[("$natural", 1)]))
        assert want and sorted(d["_id"] for d in db.ty.find(flt)) == want, types
        e = db.command("explain", {"find": "ty", "filter": flt}, verbosity="executionStats")
        assert e["queryPlanner"]["winningPlan"]["inputStage"]["stage"] == "IXSCAN", types
        if types != "array":
            assert e["executionStats"]["totalDocsExamined"] < 200, (types, e["executionStats"])


def test_mod_bounds_the_numbers(client):
    """mongod bounds $mod by the numbers' bracket and keeps it in the FETCH."""
    r = plan({"a": {"$mod": [4, 1]}}, [ID, A])
    assert bounds(r) == {"a": ["[nan.0, inf.0]"]}
    assert r["explain"]["filter"] == {"a": {"$mod": [4, 1]}}
    assert plan({"a": {"$not": {"$mod": [4, 1]}}}, [ID, A])["stage"] == "COLLSCAN"
    db = client.t
    db.md.insert_many([{"_id": i, "a": i if i % 3 else str(i)} for i in range(90)])
    db.md.create_index("a")
    want = [i for i in range(90) if i % 3 and i % 4 == 1]
    assert sorted(d["_id"] for d in db.md.find({"a": {"$mod": [4, 1]}})) == want
    e = db.command("explain", {"find": "md", "filter": {"a": {"$mod": [4, 1]}}},
                   verbosity="executionStats")
    assert e["executionStats"]["totalDocsExamined"] == 60
    # a bad operand is the matcher's error, index or not
    for bad in (5, [4], [0, 1]):
        codes = set()
        for hint in (None, [("$natural", 1)]):
            with pytest.raises(pymongo.errors.OperationFailure) as exc:
                list(db.md.find({"a": {"$mod": bad}}, hint=hint))
            codes.add(exc.value.code)
        assert len(codes) == 1, (bad, codes)


def test_no_prefix_regex_in_an_in_bounds_every_string():
    """mongod bounds a $in's regex with no prefix by every string and the
    regex value, united with the other elements; the FETCH tests it."""
    r = plan({"a": {"$in": [Regex("b"), 5]}}, [ID, A])
    assert bounds(r) == {"a": ["[5, 5]", '["", {})', "[/b/, /b/]"]}
    assert r["explain"]["filter"] == {"a": {"$in": [Regex("b"), 5]}}
    r = plan({"a": {"$in": [Regex("b"), Regex("^c"), "zz"]}}, [ID, A])
    assert bounds(r) == {"a": ['["", {})', "[/^c/, /^c/]", "[/b/, /b/]"]}


def test_no_prefix_regex_in_an_in_answers_as_the_scan(client):
    db = client.t
    db.ri.insert_many([{"_id": i, "a": v} for i, v in enumerate(
        ["abc", "b", "xbx", "c", 5, 6, ["q", "b"], None, "B", Regex("b")])])
    db.ri.create_index("a")
    db.ri.create_index("a", name="a_en", collation={"locale": "en", "strength": 2})
    for flt in ({"a": {"$in": [Regex("b"), 5]}}, {"a": {"$in": [Regex("^c"), Regex("x$")]}},
                {"a": {"$in": [Regex("B", "i"), None]}}):
        want = sorted(d["_id"] for d in db.ri.find(flt, hint=[("$natural", 1)]))
        for hint in (None, "a_1"):
            assert sorted(d["_id"] for d in db.ri.find(flt, hint=hint)) == want, (flt, hint)
        # a regex does not depend on a collation: a query under one may use
        # the simple index's bounds, never the collated index's (its keys
        # are sort keys, which a regex cannot bound)
        e = db.command("explain", {"find": "ri", "filter": flt,
                                   "collation": {"locale": "en", "strength": 2}})
        assert "a_en" not in str(e["queryPlanner"]["winningPlan"]), flt
        got = db.ri.find(flt, collation={"locale": "en", "strength": 2})
        assert sorted(d["_id"] for d in got) == want, flt


# ------------------------------------------------------ trial runs


def _query_planners(explain):
    """Every queryPlanner in an explain reply, at any depth (aggregate
    nests find's under $cursor)."""
    out = []
    if isinstance(explain, dict):
        if "winningPlan" in explain:
            out.append(explain)
        for v in explain.values():
            out += _query_planners(v)
    elif isinstance(explain, list):
        for v in explain:
            out += _query_planners(v)
    return out


def _plans(explain):
    """Every (winningPlan, rejectedPlans) in an explain reply."""
    return [(qp["winningPlan"], qp["rejectedPlans"]) for qp in _query_planners(explain)]


def _index_names(plan):
    """The indexes a plan tree scans, in tree order."""
    if not isinstance(plan, dict):
        return []
    names = [plan["indexName"]] if "indexName" in plan else []
    for k in ("inputStage", "inputStages"):
        v = plan.get(k)
        for p in (v if isinstance(v, list) else [v]):
            names += _index_names(p)
    return names


def _skewed(db, n=3000):
    """a is 1 in 9 documents of 10 (2 in the rest); b is unique."""
    db.mp.insert_many([{"_id": i, "a": 1 if i % 10 else 2, "b": i} for i in range(n)])
    db.mp.create_index("a")
    db.mp.create_index("b")


def test_trials_choose_the_productive_index(client):
    """As mongod's multi-planner: {a: 1} is an equality, which the planner
    ranks above a range, but it matches 90% of the documents and the range
    {b: {$gte: 2990}} 10: trial runs pick b_1, and a_1's plan is rejected --
    for find, count, aggregate and the writes, at every verbosity."""
    db = client.t
    _skewed(db)
    q = {"a": 1, "b": {"$gte": 2990}}
    want = sorted(d["_id"] for d in db.mp.find(q, hint=[("$natural", 1)]))
    assert len(want) == 9 and sorted(d["_id"] for d in db.mp.find(q)) == want
    e = db.command("explain", {"find": "mp", "filter": q}, verbosity="executionStats")
    assert e["executionStats"]["totalKeysExamined"] == 10
    assert e["executionStats"]["totalDocsExamined"] == 10
    cmds = [{"find": "mp", "filter": q}, {"count": "mp", "query": q},
            {"aggregate": "mp", "pipeline": [{"$match": q}], "cursor": {}},
            {"delete": "mp", "deletes": [{"q": q, "limit": 0}]},
            {"update": "mp", "updates": [{"q": q, "u": {"$set": {"x": 1}}, "multi": True}]},
            {"findAndModify": "mp", "query": q, "update": {"$set": {"x": 1}}}]
    for cmd in cmds:
        for verbosity in ("queryPlanner", "executionStats"):
            plans = _plans(db.command("explain", cmd, verbosity=verbosity))
            assert plans, cmd
            for winning, rejected in plans:
                assert _index_names(winning) == ["b_1"], (cmd, verbosity, winning)
                assert [_index_names(r) for r in rejected] == [["a_1"]], (cmd, verbosity)
    assert db.mp.count_documents({"x": 1}) == 0  # explain wrote nothing


def test_trials_keep_a_selective_equality(client):
    """The other way round: {a: 2} matches 300 documents, all of which
    {b: {$gte: 0}} holds; b_1 would read every key to find them."""
    db = client.t
    _skewed(db)
    q = {"a": 2, "b": {"$gte": 0}}
    e = db.command("explain", {"find": "mp", "filter": q}, verbosity="executionStats")
    (winning, rejected), = _plans(e)
    assert _index_names(winning) == ["a_1"] and [_index_names(r) for r in rejected] == [["b_1"]]
    assert e["executionStats"]["totalKeysExamined"] == 300
    assert e["executionStats"]["nReturned"] == 300


def test_trial_winner_runs_from_its_start(client):
    """The winner of a trial that already returned rows (b_1 returns 101
    first) runs from its start: across getMores every document comes once."""
    db = client.t
    _skewed(db)
    q = {"a": 1, "b": {"$gte": 1500}}
    want = sorted(d["_id"] for d in db.mp.find(q, hint=[("$natural", 1)]))
    got = [d["_id"] for d in db.mp.find(q, batch_size=50)]
    assert len(want) == 1350 and sorted(got) == want
    (winning, _), = _plans(db.command("explain", {"find": "mp", "filter": q},
                                      verbosity="queryPlanner"))
    assert _index_names(winning) == ["b_1"]


def test_no_trials_for_a_hint_or_a_single_candidate(client):
    db = client.t
    _skewed(db)
    q = {"a": 1, "b": {"$gte": 2990}}
    e = db.command("explain", {"find": "mp", "filter": q, "hint": "a_1"}, verbosity="queryPlanner")
    assert [(_index_names(w), r) for w, r in _plans(e)] == [(["a_1"], [])]
    e = db.command("explain", {"find": "mp", "filter": {"b": {"$gte": 5}}},
                   verbosity="queryPlanner")
    assert [(_index_names(w), r) for w, r in _plans(e)] == [(["b_1"], [])]


def test_index_stats_count_the_index_trials_choose(client):
    """$indexStats counts an access for the index the trials chose (b_1),
    not for the planner's first guess (a_1), once per query; the count
    and the aggregate read count too, explain not at all."""
    db = client.t
    _skewed(db)
    q = {"a": 1, "b": {"$gte": 2990}}

    def ops():
        return {d["name"]: d["accesses"]["ops"] for d in db.mp.aggregate([{"$indexStats": {}}])}

    before = ops()
    for _ in range(3):  # the first plans by trials, the next two from the cache
        assert len(list(db.mp.find(q))) == 9
    assert db.mp.count_documents(q) == 9
    assert len(list(db.mp.aggregate([{"$match": q}]))) == 9
    db.command("explain", {"find": "mp", "filter": q}, verbosity="executionStats")
    after = ops()
    assert after["b_1"] - before["b_1"] == 5
    assert after["a_1"] - before["a_1"] == 0


# ------------------------------------------- trial runs under a sort


def _stages(plan):
    """The stage names of a plan tree, top down (first input only)."""
    out = []
    while isinstance(plan, dict):
        out.append(plan["stage"])
        plan = plan.get("inputStage")
    return out


def _statuses(db, n=4000):
    """status is "A" in every other document, "rare" in 5; created rises
    with _id; indexes status_1 and created_1."""
    db.ss.insert_many([{"_id": i, "status": "A" if i % 2 else "B", "created": i}
                       for i in range(n)]
                      + [{"_id": n + i, "status": "rare", "created": 7 * i} for i in range(5)])
    db.ss.create_index("status")
    db.ss.create_index("created")


def test_trials_weigh_an_index_in_sort_order_against_a_blocking_sort(client):
    """{status: "A"} sorted by created, limit 10: status_1 bounds the
    query, but its plan must read all 2,000 "A" keys before its SORT
    gives a row; created_1 read backward gives the sort and finds ten "A"
    documents in 20 keys.  As mongod's multi-planner, the trials choose
    created_1 (no SORT stage), and status_1 under its SORT is rejected --
    in find, aggregate and findAndModify."""
    db = client.t
    _statuses(db)
    q, order = {"status": "A"}, [("created", -1)]
    want = [3999 - 2 * i for i in range(10)]
    for _ in range(3):  # planned by trials, then from the plan cache
        assert [d["_id"] for d in db.ss.find(q).sort(order).limit(10)] == want
    assert [d["_id"] for d in db.ss.find(q).sort(order).limit(10).hint("status_1")] == want
    e = db.command("explain", {"find": "ss", "filter": q, "sort": {"created": -1}, "limit": 10},
                   verbosity="executionStats")
    (winning, rejected), = _plans(e)
    assert _index_names(winning) == ["created_1"] and "SORT" not in _stages(winning)
    assert [(_stages(r)[0], _index_names(r)) for r in rejected] == [("SORT", ["status_1"])]
    assert rejected[0]["sortPattern"] == {"created": -1}
    assert e["executionStats"]["totalKeysExamined"] <= 25
    assert e["executionStats"]["nReturned"] == 10
    pipeline = [{"$match": q}, {"$sort": {"created": -1}}, {"$limit": 10}]
    assert [d["_id"] for d in db.ss.aggregate(pipeline)] == want
    (winning, rejected), = _plans(db.command("explain", {"aggregate": "ss", "pipeline": pipeline,
                                                         "cursor": {}}))
    assert _index_names(winning) == ["created_1"]
    assert [_stages(r)[0] for r in rejected] == ["SORT"]
    e = db.command("explain", {"findAndModify": "ss", "query": q, "sort": {"created": -1},
                               "update": {"$set": {"x": 1}}}, verbosity="executionStats")
    (winning, _), = _plans(e)
    assert _index_names(winning) == ["created_1"]
    got = db.ss.find_one_and_update(q, {"$set": {"x": 1}}, sort=order)
    assert got["_id"] == 3999 and db.ss.find_one({"x": 1})["_id"] == 3999


def test_trials_keep_a_selective_index_and_its_sort(client):
    """{status: "rare"}: status_1 reads its 5 keys, then its SORT gives
    them, before created_1 read in order has found one: status_1 and its
    SORT win, every row in order across getMores."""
    db = client.t
    _statuses(db)
    q = {"status": "rare"}
    e = db.command("explain", {"find": "ss", "filter": q, "sort": {"created": -1}},
                   verbosity="executionStats")
    (winning, rejected), = _plans(e)
    assert _stages(winning)[0] == "SORT" and _index_names(winning) == ["status_1"]
    assert [(_stages(r)[0], _index_names(r)) for r in rejected] == [("FETCH", ["created_1"])]
    assert e["executionStats"]["totalKeysExamined"] == 5
    got = [d["created"] for d in db.ss.find(q, batch_size=2).sort("created", -1)]
    assert got == [28, 21, 14, 7, 0]
    # The same shape after {status: "A"} cached created_1: that plan does
    # not finish within its budget, all plan again, the answer is the same.
    for status, n in (("A", 10), ("rare", 5), ("A", 10), ("rare", 5)):
        got = [d["created"] for d in db.ss.find({"status": status}).sort("created", -1).limit(10)]
        want = sorted((d["created"] for d in db.ss.find({"status": status},
                                                         hint=[("$natural", 1)])), reverse=True)
        assert got == want[:10] and len(got) == n


def test_sorted_trial_winner_returns_every_row_in_order(client):
    """Without a limit, created_1 (backward) still wins on the first 101
    rows; the rows of its trial come back first, then the rest, in order,
    once each across getMores of 7."""
    db = client.t
    _statuses(db)
    got = [d["created"] for d in db.ss.find({"status": "A"}, batch_size=7).sort("created", -1)]
    assert got == list(range(3999, 0, -2))
    e = db.command("explain", {"find": "ss", "filter": {"status": "A"}, "sort": {"created": -1}},
                   verbosity="queryPlanner")
    (winning, _), = _plans(e)
    assert _index_names(winning) == ["created_1"]


# ------------------------------------- planCacheClear and $planCacheStats


def _cache(coll):
    return list(coll.aggregate([{"$planCacheStats": {}}]))


def test_plan_cache_stats_lists_the_trials_winners(client):
    """Each query shape whose trials chose a plan has an entry: the query
    that made it, the plan (with a blocking SORT when it has one), its
    works; a query with one candidate, a hint, or explain makes none."""
    db = client.t
    _skewed(db)
    assert _cache(db.mp) == []
    assert len(list(db.mp.find({"a": 1, "b": {"$gte": 2990}}))) == 9
    assert len(list(db.mp.find({"a": 2, "b": {"$gte": 0}}).sort("b", -1).limit(3))) == 3
    list(db.mp.find({"b": 5}))
    list(db.mp.find({"a": 1, "b": 5}, hint="a_1"))
    db.command("explain", {"find": "mp", "filter": {"a": 1, "b": 5, "c": 1}})
    entries = {json.dumps(e["createdFromQuery"]["query"]): e for e in _cache(db.mp)}
    assert set(entries) == {'{"a": 1, "b": {"$gte": 2990}}', '{"a": 2, "b": {"$gte": 0}}'}
    one = entries['{"a": 1, "b": {"$gte": 2990}}']
    assert one["createdFromQuery"]["sort"] == {} and one["createdFromQuery"]["projection"] == {}
    assert _index_names(one["cachedPlan"]) == ["b_1"] and one["cachedPlan"]["stage"] == "FETCH"
    assert one["works"] > 0 and one["isActive"] is False and one["indexFilterSet"] is False
    assert re.fullmatch(r"[0-9A-F]{8}", one["queryHash"])
    assert re.fullmatch(r"[0-9A-F]{8}", one["planCacheKey"])
    assert isinstance(one["timeOfCreation"], datetime.datetime) and one["host"]
    two = entries['{"a": 2, "b": {"$gte": 0}}']  # b_1 backward finds 3 in 30 keys
    assert two["createdFromQuery"]["sort"] == {"b": -1}
    assert _stages(two["cachedPlan"])[:2] == ["FETCH", "IXSCAN"]
    assert _index_names(two["cachedPlan"]) == ["b_1"]
    _statuses(db)  # a plan with a blocking SORT is cached with it
    list(db.ss.find({"status": "rare"}).sort("created", -1))
    (three,) = _cache(db.ss)
    assert _stages(three["cachedPlan"]) == ["SORT", "FETCH", "IXSCAN"]
    assert three["cachedPlan"]["sortPattern"] == {"created": -1}
    assert _index_names(three["cachedPlan"]) == ["status_1"]
    db.other.insert_one({})
    assert _cache(db.other) == []
    # A new index makes the entries of the old set of indexes stale: not shown.
    db.mp.create_index("c")
    assert _cache(db.mp) == []


def _score(entry):
    """mongod's PlanRanker score of an allPlansExecution entry, from its own
    counters: 1 + returned/works, an epsilon for each of no FETCH, no SORT
    and no index intersection, and 1 when the plan reached its end."""
    root = entry["executionStages"]
    works = root["works"]
    eps = min(1 / (10 * works), 1e-4)
    stages = _stages(root)
    return (1 + entry["nReturned"] / works + (0 if "FETCH" in stages else eps)
            + (0 if "SORT" in stages else eps) + eps + (1 if root["isEOF"] else 0))


def test_all_plans_execution_shows_each_trial_with_its_score(client):
    """allPlansExecution holds each candidate's trial, the winner's first,
    then the rejected plans' in their order, each with mongod's score (and
    only there: not in the plans or the executionStats' root); the
    winner's score is the highest.  One candidate: an empty array."""
    db = client.t
    _skewed(db)
    _statuses(db)
    for cmd, winner in (({"find": "mp", "filter": {"a": 1, "b": {"$gte": 2990}}}, "b_1"),
                        ({"find": "ss", "filter": {"status": "rare"}, "sort": {"created": -1}},
                         "status_1"),
                        ({"count": "mp", "query": {"a": 2, "b": {"$lt": 100}}}, "b_1"),
                        ({"aggregate": "mp", "pipeline": [{"$match": {"a": 1, "b": {"$gt": 2990}}}],
                          "cursor": {}}, "b_1")):
        e = db.command("explain", cmd, verbosity="allPlansExecution")
        (won, rejected), = _plans(e)
        trials = e["executionStats"]["allPlansExecution"]
        assert len(trials) == 1 + len(rejected) >= 2
        assert _index_names(trials[0]["executionStages"]) == [winner] == _index_names(won)
        assert [_index_names(t["executionStages"]) for t in trials[1:]] == \
            [_index_names(r) for r in rejected]
        for t in trials:
            assert set(t) == {"nReturned", "executionTimeMillisEstimate", "totalKeysExamined",
                              "totalDocsExamined", "score", "executionStages"}
            assert t["score"] == pytest.approx(_score(t), abs=1e-12)
        assert trials[0]["score"] == max(t["score"] for t in trials)
        assert "score" not in json.dumps([won, rejected, e["executionStats"]["executionStages"]])
    # the blocking SORT's counters in its trial: status_1 read every "rare" key
    e = db.command("explain", {"find": "ss", "filter": {"status": "rare"},
                               "sort": {"created": -1}}, verbosity="allPlansExecution")
    sort_trial = e["executionStats"]["allPlansExecution"][0]
    assert _stages(sort_trial["executionStages"]) == ["SORT", "FETCH", "IXSCAN"]
    assert sort_trial["executionStages"]["isEOF"] is True
    assert sort_trial["nReturned"] == db.ss.count_documents({"status": "rare"})
    # aggregate's $cursor below a stage that stays in the pipeline
    e = db.command("explain", {"aggregate": "mp", "cursor": {}, "pipeline": [
        {"$match": {"a": 1, "b": {"$gte": 2990}}}, {"$group": {"_id": "$a"}}]},
        verbosity="allPlansExecution")
    trials = e["stages"][0]["$cursor"]["executionStats"]["allPlansExecution"]
    assert [_index_names(t["executionStages"]) for t in trials] == [["b_1"], ["a_1"]]
    assert trials[0]["score"] > trials[1]["score"] > 1
    e = db.command("explain", {"find": "mp", "filter": {"b": 5}}, verbosity="allPlansExecution")
    assert e["executionStats"]["allPlansExecution"] == []
    e = db.command("explain", {"find": "mp", "filter": {"a": 1, "b": {"$gte": 2990}}},
                   verbosity="executionStats")
    assert "allPlansExecution" not in e["executionStats"]


def test_explain_shows_the_query_hash_and_plan_cache_key(client):
    """queryPlanner's queryHash and planCacheKey are those of the query's
    $planCacheStats entry: the same for a shape whatever its values, for
    find, count and aggregate alike; another shape, another hash."""
    db = client.t
    _skewed(db)
    list(db.mp.find({"a": 1, "b": {"$gte": 2990}}))
    (entry,) = _cache(db.mp)
    def hashes(cmd):
        (qp,) = _query_planners(db.command("explain", cmd, verbosity="queryPlanner"))
        return qp["queryHash"], qp["planCacheKey"]
    want = (entry["queryHash"], entry["planCacheKey"])
    for q in ({"a": 1, "b": {"$gte": 2990}}, {"a": 7, "b": {"$gte": -4}}):
        assert hashes({"find": "mp", "filter": q}) == want
        assert hashes({"count": "mp", "query": q}) == want
        assert hashes({"aggregate": "mp", "pipeline": [{"$match": q}], "cursor": {}}) == want
    other = hashes({"find": "mp", "filter": {"a": 1, "b": {"$lt": 2990}}})
    assert other[0] != want[0] and other[1] != want[1]
    # one candidate plan, a write: hashed all the same
    assert re.fullmatch(r"[0-9A-F]{8}", hashes({"find": "mp", "filter": {"b": 5}})[0])
    assert re.fullmatch(r"[0-9A-F]{8}", hashes(
        {"delete": "mp", "deletes": [{"q": {"b": 5}, "limit": 0}]})[1])


def test_plan_cache_entries_keep_each_candidates_trial(client):
    """$planCacheStats' creationExecStats holds each candidate's trial,
    best first, without scores; candidatePlanScores their scores, highest
    first: those explain's allPlansExecution shows for the same query."""
    db = client.t
    _skewed(db)
    q = {"a": 1, "b": {"$gte": 2990}}
    list(db.mp.find(q))
    (entry,) = _cache(db.mp)
    creation, scores = entry["creationExecStats"], entry["candidatePlanScores"]
    assert len(creation) == len(scores) == 2
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[1] > 1
    assert _index_names(creation[0]["executionStages"]) == _index_names(entry["cachedPlan"])
    assert all("score" not in c for c in creation)
    e = db.command("explain", {"find": "mp", "filter": q}, verbosity="allPlansExecution")
    trials = e["executionStats"]["allPlansExecution"]
    assert [t["score"] for t in trials] == scores
    assert [{k: v for k, v in t.items() if k != "score"} for t in trials] == creation


def test_plan_cache_entries_start_inactive(client):
    """mongod's entry states: the first trials' winner is cached inactive
    (queries of the shape still run their trials); a later winner of no
    more works makes it active, one of more works grows its works to the
    lesser of its own and twice the entry's; an active entry's plan that
    does not finish in ten times its works deactivates it, and the trials
    that follow decide as for an inactive one."""
    db = client.t
    _skewed(db)  # b_1 finds {a: 1, b: {$gte: 2990}} in 11 works
    def state():
        (e,) = _cache(db.mp)
        return e["isActive"], e["works"], _index_names(e["cachedPlan"])
    def run(q, n):
        assert len(list(db.mp.find(q))) == n
        return state()
    assert run({"a": 1, "b": {"$gte": 2990}}, 9) == (False, 11, ["b_1"])
    assert run({"a": 1, "b": {"$gte": 2990}}, 9) == (True, 11, ["b_1"])
    # b_1 needs 112 works for a first batch: over 10 x 11, so replanned;
    # the winner's 112 works grow the now inactive entry's to 22
    assert run({"a": 1, "b": {"$gte": 2000}}, 900) == (False, 22, ["b_1"])
    assert run({"a": 2, "b": {"$gte": 0}}, 300) == (False, 44, ["b_1"])
    assert run({"a": 1, "b": {"$gte": 2995}}, 5) == (True, 6, ["b_1"])
    assert run({"a": 1, "b": {"$gte": 2995}}, 5) == (True, 6, ["b_1"])


def test_rejected_plans_show_the_stages_above_their_scan(client):
    """As mongod's candidate plans: a rejected plan of find carries the
    SKIP, LIMIT and projection the winner does (its blocking SORT takes
    the limit as limitAmount instead of a LIMIT); count's are scans only,
    COUNT being above the winner."""
    db = client.t
    _skewed(db)
    _statuses(db)
    q = {"a": 1, "b": {"$gte": 2990}}
    e = db.command("explain", {"find": "mp", "filter": q, "skip": 1, "limit": 5,
                               "projection": {"b": 1}}, verbosity="queryPlanner")
    (won, rejected), = _plans(e)
    assert e["queryPlanner"]["parsedQuery"] == q
    assert _stages(won) == ["PROJECTION_SIMPLE", "LIMIT", "SKIP", "FETCH", "IXSCAN"]
    assert [_stages(r) for r in rejected] == [_stages(won)]
    assert _index_names(rejected[0]) == ["a_1"]
    assert rejected[0]["inputStage"]["limitAmount"] == 5
    e = db.command("explain", {"find": "ss", "filter": {"status": "A"}, "sort": {"created": -1},
                               "limit": 10}, verbosity="queryPlanner")
    (won, rejected), = _plans(e)
    assert _stages(won) == ["LIMIT", "FETCH", "IXSCAN"] and _index_names(won) == ["created_1"]
    assert [_stages(r) for r in rejected] == [["SORT", "FETCH", "IXSCAN"]]
    assert rejected[0]["limitAmount"] == 10 and list(rejected[0]).index("limitAmount") == 3
    e = db.command("explain", {"count": "mp", "query": q}, verbosity="queryPlanner")
    (won, rejected), = _plans(e)
    assert _stages(won)[0] == "COUNT" and [_stages(r) for r in rejected] == [["FETCH", "IXSCAN"]]


def test_all_plans_execution_shows_the_stages_above_each_trial(client):
    """Each trial of allPlansExecution carries find's SKIP, LIMIT and
    projection as its plan does, each with the rows it passed up, and the
    entry's nReturned is its root's."""
    db = client.t
    _skewed(db)
    _statuses(db)
    q = {"a": 1, "b": {"$gte": 2990}}
    e = db.command("explain", {"find": "mp", "filter": q, "skip": 2, "limit": 5,
                               "projection": {"b": 1}}, verbosity="allPlansExecution")
    trials = e["executionStats"]["allPlansExecution"]
    assert [_index_names(t["executionStages"]) for t in trials] == [["b_1"], ["a_1"]]
    for t in trials:
        root = t["executionStages"]
        assert _stages(root) == ["PROJECTION_SIMPLE", "LIMIT", "SKIP", "FETCH", "IXSCAN"]
        limit, skip = root["inputStage"], root["inputStage"]["inputStage"]
        fetched = skip["inputStage"]["nReturned"]
        assert skip["skipAmount"] == 2 and skip["nReturned"] == max(0, fetched - 2)
        assert limit["limitAmount"] == 5 and limit["nReturned"] == min(5, skip["nReturned"])
        assert root["transformBy"] == {"b": 1}
        assert t["nReturned"] == root["nReturned"] == limit["nReturned"]
    assert trials[0]["nReturned"] == 5  # b_1's trial read enough rows
    # below a blocking SORT: its limitAmount, no LIMIT
    e = db.command("explain", {"find": "ss", "filter": {"status": "A"}, "sort": {"created": -1},
                               "limit": 10}, verbosity="allPlansExecution")
    trials = e["executionStats"]["allPlansExecution"]
    assert [_stages(t["executionStages"]) for t in trials] == [
        ["LIMIT", "FETCH", "IXSCAN"], ["SORT", "FETCH", "IXSCAN"]]
    assert trials[1]["executionStages"]["limitAmount"] == 10
    assert trials[0]["executionStages"]["limitAmount"] == 10
    # returnKey
    e = db.command("explain", {"find": "mp", "filter": q, "returnKey": True},
                   verbosity="allPlansExecution")
    assert {_stages(t["executionStages"])[0] for t in e["executionStats"]["allPlansExecution"]} \
        == {"RETURN_KEY"}


def test_plan_cache_clear_one_shape_or_all(client):
    db = client.t
    _skewed(db)
    _statuses(db)
    for v in (1, 2):  # the same shape: one entry
        list(db.mp.find({"a": v, "b": {"$gte": 2990}}))
    list(db.mp.find({"a": 1, "b": 5}))
    list(db.ss.find({"status": "A"}).sort("created", -1).limit(3))
    assert len(_cache(db.mp)) == 2 and len(_cache(db.ss)) == 1
    # values do not matter, paths and operators do; an unknown shape is no error
    assert db.command("planCacheClear", "mp", query={"x": 1})["ok"] == 1
    assert len(_cache(db.mp)) == 2
    assert db.command("planCacheClear", "mp", query={"b": {"$gte": 7}, "a": 3})["ok"] == 1
    assert len(_cache(db.mp)) == 2  # field order is part of the shape
    db.command("planCacheClear", "mp", query={"a": 3, "b": {"$gte": 7}})
    assert [e["createdFromQuery"]["query"] for e in _cache(db.mp)] == [{"a": 1, "b": 5}]
    # with its sort: the sort is part of the shape
    db.command("planCacheClear", "ss", query={"status": "B"})
    assert len(_cache(db.ss)) == 1
    db.command("planCacheClear", "ss", query={"status": "B"}, sort={"created": -1})
    assert _cache(db.ss) == []
    # without a query: every entry of the collection, no other's
    list(db.ss.find({"status": "A"}).sort("created", -1).limit(3))
    assert db.command("planCacheClear", "mp") == {"ok": 1.0}
    assert _cache(db.mp) == [] and len(_cache(db.ss)) == 1
    # planned again by trials, and cached again
    assert len(list(db.mp.find({"a": 1, "b": {"$gte": 2990}}))) == 9
    assert len(_cache(db.mp)) == 1
    assert db.command("planCacheClear", "nosuch", sort={"a": 1}) == {"ok": 1.0}


def test_the_projection_is_part_of_the_shape(client):
    """As mongod keys its plan cache: the same filter under another
    projection is another entry, shown with its projection, and
    planCacheClear names it with that projection."""
    db = client.t
    _skewed(db)
    f = {"a": 1, "b": {"$gte": 2990}}
    list(db.mp.find(f))
    list(db.mp.find(f, {"b": 1, "_id": 0}))
    list(db.mp.find({"a": 2, "b": {"$gte": 0}}, {"b": 1, "_id": 0}))  # the same shape again
    entries = _cache(db.mp)
    assert sorted(json.dumps(e["createdFromQuery"]["projection"]) for e in entries) == [
        '{"b": 1, "_id": 0}', "{}"]
    assert len({e["queryHash"] for e in entries}) == 2
    db.command("planCacheClear", "mp", query={"a": 5, "b": {"$gte": 1}},
               projection={"b": 1, "_id": 0})
    (left,) = _cache(db.mp)
    assert left["createdFromQuery"]["projection"] == {}
    db.command("planCacheClear", "mp", query={"a": 5, "b": {"$gte": 1}})
    assert _cache(db.mp) == []


@pytest.mark.parametrize("args, code, msg", [
    ({"sort": {"a": 1}}, 2, "sort, projection, or collation provided without query"),
    ({"collation": {"locale": "en"}}, 2, "provided without query"),
    ({"query": 1}, 2, "required field query must be an object"),
    ({"query": {}, "sort": [1]}, 2, "optional field sort must be an object"),
    ({"query": {}, "projection": 1}, 2, "optional field projection must be an object"),
    ({"query": {}, "collation": {}}, 2, "optional field collation cannot be an empty object"),
    ({"query": {"$bad": 1}}, 2, "unknown top level operator: $bad"),
    ({"query": {"$expr": {"$eq": ["$a", "$$unbound"]}}}, 17276, "unbound"),
])
def test_plan_cache_clear_errors(client, args, code, msg):
    db = client.t
    _skewed(db)
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        db.command("planCacheClear", "mp", **args)
    assert e.value.code == code and msg in str(e.value)


@pytest.mark.parametrize("pipeline, code", [
    ([{"$planCacheStats": 1}], 9),
    ([{"$planCacheStats": {"x": 1}}], 9),
    ([{"$match": {}}, {"$planCacheStats": {}}], 40602),
])
def test_plan_cache_stats_errors(client, pipeline, code):
    db = client.t
    _skewed(db)
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        list(db.mp.aggregate(pipeline))
    assert e.value.code == code
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        list(db.nosuch.aggregate([{"$planCacheStats": {}}]))
    assert e.value.code == 50933 and "collection 't.nosuch' does not exist" in str(e.value)


# ------------------------------------------- trial runs: an OR plan


def _three(db, n=6000):
    """a is 1 in 9 documents of 10; b rises, c falls; a_1, b_1, c_1."""
    db.o3.insert_many([{"_id": i, "a": 1 if i % 10 else 2, "b": i, "c": -i} for i in range(n)])
    for k in "abc":
        db.o3.create_index(k)


def test_trials_weigh_an_or_plan_against_an_index(client):
    """{a: 1, $or: [{b: 5}, {c: -7}]}: a_1 bounds the query, but reads
    5,400 keys; the OR of b_1 and c_1 reads 2.  As mongod's planner
    enumerates both, the trials take the OR; with {a: 2} and clauses that
    match everything, a_1 (600 keys) wins.  Counts agree."""
    db = client.t
    _three(db)
    q = {"a": 1, "$or": [{"b": 5}, {"c": -7}]}
    for _ in range(3):  # by trials, then from the plan cache
        assert sorted(d["_id"] for d in db.o3.find(q)) == [5, 7]
    assert db.o3.count_documents(q) == 2
    e = db.command("explain", {"find": "o3", "filter": q}, verbosity="executionStats")
    (winning, rejected), = _plans(e)
    assert _stages(winning) == ["FETCH", "OR"]
    assert [_index_names(s) for s in winning["inputStage"]["inputStages"]] == [["b_1"], ["c_1"]]
    assert [_index_names(r) for r in rejected] == [["a_1"]]
    assert e["executionStats"]["totalKeysExamined"] == 2
    q = {"a": 2, "$or": [{"b": {"$gte": 0}}, {"c": {"$lte": 0}}]}
    assert sorted(d["_id"] for d in db.o3.find(q)) == list(range(0, 6000, 10))
    (winning, rejected), = _plans(db.command("explain", {"find": "o3", "filter": q}))
    assert _index_names(winning) == ["a_1"] and rejected[0]["inputStage"]["stage"] == "OR"


def test_or_trial_winner_returns_its_rows_once_with_their_keys(client):
    """The OR (70 keys) wins over a_1 (which meets these documents after
    5,300 keys) once it has returned the rows of both clauses in its
    trial: returnKey gives each row the key of the clause that found it
    (kept with the trial's rows), and across getMores of 4 every row
    comes once."""
    db = client.t
    _three(db)
    q = {"a": 1, "$or": [{"b": {"$gte": 5930, "$lt": 5960}}, {"c": {"$lt": -5960}}]}
    want = sorted(d["_id"] for d in db.o3.find(q, hint=[("$natural", 1)]))
    assert len(want) == 63
    keys = list(db.o3.find(q, return_key=True))  # every row from the trial
    assert len(keys) == 63
    assert all(list(k) == ["b"] and 5930 <= k["b"] < 5960 or list(k) == ["c"] and k["c"] < -5960
               for k in keys), keys
    assert {list(k)[0] for k in keys} == {"b", "c"}
    db.command("planCacheClear", "o3")
    for _ in range(2):  # by trials, then from the plan cache
        assert sorted(d["_id"] for d in db.o3.find(q, batch_size=4)) == want
        assert len(list(db.o3.find(q, batch_size=4, return_key=True))) == 63
    (winning, _), = _plans(db.command("explain", {"find": "o3", "filter": q}))
    assert winning["inputStage"]["stage"] == "OR"


def test_cached_plans_never_change_an_answer(client):
    """Queries of a few shapes, each shape's values drawn so that a cached
    winner is sometimes the better plan and sometimes far over its budget
    (entries made, activated, deactivated, replaced), with sorts, limits
    and batch sizes: every answer is the collection scan's, in the sort's
    order where one is given."""
    rng = random.Random(41)
    db = client.t
    db.mp.insert_many([{"_id": i, "a": 1 if i % 10 else 2, "b": i, "c": i % 37,
                        "d": (i * 7) % 101} for i in range(3000)])
    for f in ("a", "b", "c", "d"):
        db.mp.create_index(f)
    shapes = [
        lambda: {"a": rng.choice([1, 2]), "b": {"$gte": rng.choice([0, 1500, 2990, 2999])}},
        lambda: {"a": rng.choice([1, 2]), "c": rng.randrange(37),
                 "b": {"$lt": rng.choice([10, 1000, 3000])}},
        lambda: {"$and": [{"$or": [{"c": rng.randrange(37)}, {"d": rng.randrange(101)}]},
                          {"$or": [{"a": 2}, {"b": {"$lt": rng.choice([5, 2000])}}]}]},
    ]
    for q in range(150):
        f = rng.choice(shapes)()
        sort = rng.choice([None, [("b", -1)], [("d", 1), ("_id", 1)]])
        limit = rng.choice([0, 0, 3, 50])
        batch = rng.choice([2, 101, 1000])
        want = list(db.mp.find(f, sort=sort, limit=limit).hint([("$natural", 1)]))
        got = list(db.mp.find(f, sort=sort, limit=limit).batch_size(batch))
        if sort:
            assert [d["_id"] for d in got] == [d["_id"] for d in want], (f, sort, limit)
        elif limit:
            full = {d["_id"] for d in db.mp.find(f).hint([("$natural", 1)])}
            assert len(got) == len(want) and {d["_id"] for d in got} <= full, (f, limit)
        else:
            assert sorted(d["_id"] for d in got) == sorted(d["_id"] for d in want), f
        assert db.command("count", "mp", query=f)["n"] == db.mp.count_documents(
            f, hint=[("$natural", 1)]), f
    states = {e["isActive"] for e in db.mp.aggregate([{"$planCacheStats": {}}])}
    assert states == {True, False}  # both kinds were made along the way
