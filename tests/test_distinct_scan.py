"""distinct over an index (csrc/query/plan.c, plan_distinct, and
plan_exec.c, distinct_skip): mongod's "simple distinct" index for an empty query, and
the DISTINCT_SCAN that seeks past every key sharing a returned document's
value of the distinct field.  Explain's counts follow jstests/core/
distinct_index1.js; the answers must be those of the same data without an
index, whatever the types, nulls, missing fields, collations and key
patterns."""
from __future__ import annotations

import math
import random

import pytest
from bson import Int64, Decimal128

from planlib import stages


def explain(db, name, key, query=None, **kw):
    e = db.command("explain", {"distinct": name, "key": key, "query": query or {}, **kw},
                   verbosity="executionStats")
    es = e["executionStats"]
    return (stages(e["queryPlanner"]["winningPlan"]), es["nReturned"],
            es["totalKeysExamined"], es["totalDocsExamined"])


def test_distinct_index1_counts(client):
    """jstests/core/distinct_index1.js's data and numbers (mongod covers
    the DISTINCT_SCAN with its keys; here each group's first document is
    fetched, so docsExamined is the number of values)."""
    db = client.test
    r = lambda x: int(math.floor(math.sqrt(x * 123123))) % 10  # noqa: E731
    db.t.insert_many([{"a": r(i * 5), "b": r(i)} for i in range(1000)])
    assert explain(db, "t", "a") == (["PROJECTION_DEFAULT", "COLLSCAN"], 1000, 0, 1000)
    db.t.create_index("a")
    assert explain(db, "t", "a") == (["PROJECTION_DEFAULT", "FETCH", "DISTINCT_SCAN"], 10, 10, 10)
    assert sorted(db.t.distinct("a")) == list(range(10))
    assert explain(db, "t", "a", {"a": {"$gt": 5}})[1:] == (4, 4, 4)
    assert db.t.distinct("a", {"a": {"$gt": 5}}) == [6, 7, 8, 9]
    # Over 'b' the index on 'a' cannot skip: every key of a > 5.
    assert explain(db, "t", "b", {"a": {"$gt": 5}}) == \
        (["PROJECTION_DEFAULT", "FETCH", "IXSCAN"], 398, 398, 398)
    # A trailing field of a compound index, after a point on the first.
    db.t.create_index([("a", 1), ("b", 1)])
    plan, n, keys, docs = explain(db, "t", "b", {"a": 5}, hint="a_1_b_1")
    assert plan[-1] == "DISTINCT_SCAN" and n == keys == docs
    assert sorted(db.t.distinct("b", {"a": 5})) == \
        sorted({d["b"] for d in db.t.find({"a": 5})})


def test_missing_field_is_not_its_null_group(client):
    """A document without the field has the key null; skipping past it
    would lose a later document's explicit null under the same key."""
    db = client.test
    db.n.insert_many([{"x": 1}, {"x": 2}, {"a": None}, {"a": 3}, {"x": 3}])
    db.n.create_index("a")
    assert explain(db, "n", "a")[0][-1] == "DISTINCT_SCAN"
    assert db.n.distinct("a") == [None, 3]
    db.m.insert_many([{"x": 1}, {"a": 3}])
    db.m.create_index("a")
    assert db.m.distinct("a") == [3]


def test_multikey_and_other_collation_fall_back(client):
    db = client.test
    db.k.insert_many([{"a": 1}, {"a": [1, 2]}, {"a": [[3]]}])
    db.k.create_index("a")
    assert "DISTINCT_SCAN" not in explain(db, "k", "a")[0]
    assert sorted(db.k.distinct("a"), key=str) == sorted([1, 2, [3]], key=str)
    db.s.insert_many([{"s": "a"}, {"s": "A"}, {"s": "b"}])
    db.s.create_index("s", collation={"locale": "en", "strength": 2})
    # The query's simple collation is not the index's: no DISTINCT_SCAN.
    assert "DISTINCT_SCAN" not in explain(db, "s", "s")[0]
    assert sorted(db.s.distinct("s")) == ["A", "a", "b"]
    # Under the index's collation it is, and "a" and "A" are one value.
    coll = {"locale": "en", "strength": 2}
    assert explain(db, "s", "s", collation=coll)[0][-1] == "DISTINCT_SCAN"
    got = db.command({"distinct": "s", "key": "s", "collation": coll})["values"]
    assert len(got) == 2 and got[0] in ("a", "A") and got[1] == "b"


VALUES = [None, 0, 1, 1.0, Int64(1), Decimal128("1.0"), -3, 2.5, "", "a", "A", "b",
          True, False, {"x": 1}, {"x": 1, "y": 2}, "MISSING"]


def canon(v):
    """Equal in MongoDB's sense, equal here: numbers by value."""
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, Decimal128):
        return ("num", float(v.to_decimal()))
    if isinstance(v, (int, float)):
        return ("num", float(v))
    return (type(v).__name__, repr(v))


@pytest.mark.parametrize("pattern,key,queries", [
    ([("a", 1)], "a", [{}, {"a": {"$gte": 0}}, {"a": {"$in": [1, "a", None]}}]),
    ([("a", -1)], "a", [{}, {"a": {"$lt": "b"}}]),
    ([("a", 1), ("b", 1)], "a", [{}, {"a": {"$in": [0, 1, 2.5]}}]),
    ([("b", 1), ("a", -1)], "a", [{"b": 1}, {"b": {"$in": ["a", None, 2.5]}}, {"b": "b"}]),
    ([("b", -1), ("a", 1)], "b", [{}, {"b": {"$gt": 0}}]),
    # bounds on the field after the distinct one: keys failing them sought past
    ([("a", 1), ("b", 1)], "a", [{"a": {"$gte": 0}, "b": 1},
                                 {"a": {"$lt": "b"}, "b": {"$in": [0, "a"]}},
                                 {"a": {"$gte": ""}, "b": {"$gte": 1}}]),
    ([("a", -1), ("b", 1)], "a", [{"a": {"$lte": 2.5}, "b": {"$lt": "b"}}]),
])
def test_random_data_same_answer_as_without_the_index(client, pattern, key, queries):
    rng = random.Random(len(pattern) * 31 + len(key) + len(queries))
    db = client.test
    docs = []
    for i in range(400):
        d = {"_id": i}
        for f in ("a", "b"):
            v = rng.choice(VALUES)
            if v != "MISSING":
                d[f] = v
        docs.append(d)
    db.plain.insert_many(docs)
    db.ix.insert_many(docs)
    name = db.ix.create_index(pattern)
    used = 0
    for q in queries:
        want = sorted(map(canon, db.plain.distinct(key, q)))
        got = sorted(map(canon, db.ix.distinct(key, q)))
        assert got == want, (q, got, want)
        hinted = db.command({"distinct": "ix", "key": key, "query": q, "hint": name})["values"]
        assert sorted(map(canon, hinted)) == want, q
        used += explain(db, "ix", key, q, hint=name)[0][-1] == "DISTINCT_SCAN"
    assert used >= 1
