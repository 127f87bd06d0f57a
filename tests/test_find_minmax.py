"""find's `min` and `max` (csrc/query/plan.c, plan_minmax): the hinted
index's keys from min (included) to max (excluded), compared as whole keys
in the index's order, with mongod's errors 51173-51176 and the filter,
sort, skip, limit and getMore working over that range as over any scan.

The reference is the old jstests/core/minmax.js shape (a 2x2 grid on
{a: 1, b: 1}) and, for randomized ranges, a Python comparator of whole keys
that knows only what the data holds: numbers, strings and a missing field
(null), with each descending field's order reversed."""
from __future__ import annotations

import functools
import random

import pytest
from bson import MaxKey, MinKey
from pymongo.errors import OperationFailure


def find(db, name, **kw):
    """The raw find command: pymongo refuses min/max without a hint
    client-side, and the server's own errors are what is tested here."""
    cmd = {"find": name}
    cmd.update(kw)
    reply = db.command(cmd)
    docs = list(reply["cursor"]["firstBatch"])
    cid = reply["cursor"]["id"]
    while cid:
        more = db.command({"getMore": cid, "collection": name, "batchSize": kw.get("batchSize", 101)})
        docs += more["cursor"]["nextBatch"]
        cid = more["cursor"]["id"]
    return docs


def error(db, name, **kw):
    with pytest.raises(OperationFailure) as ei:
        find(db, name, **kw)
    return ei.value.code, ei.value.details.get("codeName"), ei.value.details["errmsg"]


@pytest.fixture
def grid(client):
    db = client.test
    db.g.insert_many([{"_id": i, "a": a, "b": b} for i, (a, b) in
                      enumerate([(1, 1), (1, 2), (2, 1), (2, 2)])])
    db.g.create_index([("a", 1), ("b", 1)])
    return db


def ab(docs):
    return [(d["a"], d["b"]) for d in docs]


def test_grid_ranges(grid):
    h = "a_1_b_1"
    assert ab(find(grid, "g", min={"a": 1, "b": 2}, max={"a": 2, "b": 1}, hint=h)) == [(1, 2)]
    assert ab(find(grid, "g", min={"a": 1, "b": 2}, max={"a": 2, "b": 1.5}, hint=h)) == \
        [(1, 2), (2, 1)]
    assert ab(find(grid, "g", min={"a": 1, "b": 2}, max={"a": 2, "b": 2}, hint=h)) == \
        [(1, 2), (2, 1)]
    # One bound: the other end of the index.
    assert ab(find(grid, "g", min={"a": 1, "b": 2}, hint=h)) == [(1, 2), (2, 1), (2, 2)]
    assert ab(find(grid, "g", max={"a": 2, "b": 1.5}, hint={"a": 1, "b": 1})) == \
        [(1, 1), (1, 2), (2, 1)]
    # Empty documents are not given: the whole index, by the hint.
    assert len(find(grid, "g", min={}, max={}, hint=h)) == 4


def test_filter_is_applied_to_every_document_in_the_range(grid):
    docs = find(grid, "g", filter={"b": 1}, min={"a": 1, "b": 1}, max={"a": 2, "b": 2},
                hint="a_1_b_1")
    assert ab(docs) == [(1, 1), (2, 1)]


def test_errors(grid):
    h = "a_1_b_1"
    code, name, msg = error(grid, "g", min={"a": 1, "b": 2}, max={"a": 2, "b": 1})
    assert (code, name) == (51173, "Location51173")
    assert "a hint of which index to use must be provided" in msg
    code, name, msg = error(grid, "g", min={"a": 1, "b": 2}, max={"a": 2}, hint=h)
    assert (code, msg) == (51176, "min and max must have the same field names")
    code, name, msg = error(grid, "g", min={"a": 1, "b": 2}, max={"b": 2, "a": 1}, hint=h)
    assert code == 51176
    # Not the key pattern's fields, all of them, in order.
    for bad in ({"a": 1}, {"b": 1, "a": 1}, {"a": 1, "b": 1, "c": 1}, {"a": 1, "c": 1}):
        code, name, msg = error(grid, "g", min=bad, hint=h)
        assert (code, msg) == (51174, "The index chosen is not compatible with min/max"), bad
    code, name, msg = error(grid, "g", min={"a": 2, "b": 1}, max={"a": 1, "b": 2}, hint=h)
    assert code == 51175 and "does not come before the value provided for max()" in msg
    code, name, msg = error(grid, "g", min={"a": 2, "b": 1}, max={"a": 2, "b": 1}, hint=h)
    assert code == 51175
    # An empty min is the index's first key: a max of MinKey has nothing before it.
    assert error(grid, "g", max={"a": MinKey(), "b": MinKey()}, hint=h)[0] == 51175
    code, name, msg = error(grid, "g", min={"a": 1, "b": 2}, hint={"$natural": 1})
    assert (code, name, msg) == (291, "NoQueryExecutionPlans",
                                 "min and max are incompatible with $natural")
    code, name, msg = error(grid, "g", min={"a": 1, "b": 2}, hint="nope")
    assert code == 2
    assert error(grid, "g", min=5, hint=h)[0] == 14  # TypeMismatch, as any object field


def test_same_field_names_checked_before_the_collection_is_looked_at(client):
    code, _, _ = error(client.test, "absent", min={"a": 1}, max={"b": 2}, hint="a_1")
    assert code == 51176
    assert find(client.test, "absent", min={"a": 1}, hint="a_1") == []


def test_collation_other_than_the_index_s(client):
    db = client.test
    db.s.insert_many([{"s": s} for s in ["a", "B", "c", "D"]])
    db.s.create_index("s", collation={"locale": "en", "strength": 2})
    # The index orders strings case-insensitively: a, B, c, D.
    docs = find(db, "s", min={"s": "b"}, max={"s": "d"}, hint="s_1",
                collation={"locale": "en", "strength": 2})
    assert [d["s"] for d in docs] == ["B", "c"]
    # A string bound under another collation than the index's: 51174 ...
    assert error(db, "s", min={"s": "b"}, hint="s_1")[0] == 51174
    # ... but a number compares alike under any collation.
    assert len(find(db, "s", min={"s": 0}, hint="s_1")) == 4


def test_descending_field_and_index_order(client):
    db = client.test
    db.d.insert_many([{"a": a, "b": b} for a in range(3) for b in range(3)])
    db.d.create_index([("a", 1), ("b", -1)])
    h = "a_1_b_-1"
    # Index order: (0,2) (0,1) (0,0) (1,2) (1,1) (1,0) (2,2) ...
    got = ab(find(db, "d", min={"a": 0, "b": 1}, max={"a": 1, "b": 0}, hint=h))
    assert got == [(0, 1), (0, 0), (1, 2), (1, 1)]
    # An empty max on a descending last field ends at (2, MinKey), excluded.
    assert ab(find(db, "d", min={"a": 2, "b": 1}, hint=h)) == [(2, 1), (2, 0)]
    # min above max in index order, though below it field by field as numbers.
    assert error(db, "d", min={"a": 0, "b": 0}, max={"a": 0, "b": 1}, hint=h)[0] == 51175


def test_sort_skip_limit_and_getmore_over_the_range(client):
    db = client.test
    db.n.insert_many([{"_id": i, "a": i % 50, "b": i} for i in range(500)])
    db.n.create_index("a")
    kw = {"min": {"a": 10}, "max": {"a": 20}, "hint": "a_1"}
    everything = find(db, "n", batchSize=7, **kw)
    assert len(everything) == 100 and all(10 <= d["a"] < 20 for d in everything)
    assert [d["a"] for d in everything] == sorted(d["a"] for d in everything)
    back = find(db, "n", sort={"a": -1}, batchSize=7, **kw)
    assert [d["a"] for d in back] == sorted((d["a"] for d in everything), reverse=True)
    assert {d["_id"] for d in back} == {d["_id"] for d in everything}
    by_b = find(db, "n", sort={"b": 1}, skip=5, limit=10, **kw)
    assert [d["b"] for d in by_b] == sorted(d["b"] for d in everything)[5:15]
    plan = db.command("explain", {"find": "n", "sort": {"a": -1}, "limit": 3, **kw},
                      verbosity="executionStats")
    ixscan = plan["queryPlanner"]["winningPlan"]["inputStage"]["inputStage"]
    assert plan["queryPlanner"]["winningPlan"]["stage"] == "LIMIT"
    assert ixscan["stage"] == "IXSCAN" and ixscan["direction"] == "backward"
    assert ixscan["indexBounds"] == {}
    assert plan["executionStats"]["totalKeysExamined"] == 3


def test_multikey_documents_once(client):
    db = client.test
    db.m.insert_many([{"_id": 1, "t": [1, 5, 9]}, {"_id": 2, "t": [2, 3]}, {"_id": 3, "t": 7}])
    db.m.create_index("t")
    docs = find(db, "m", min={"t": 1}, max={"t": 8}, hint="t_1")
    assert sorted(d["_id"] for d in docs) == [1, 2, 3]
    assert sorted(d["_id"] for d in find(db, "m", min={"t": 6}, hint="t_1")) == [1, 3]


def test_explain_shows_the_range_scan(grid):
    e = grid.command("explain", {"find": "g", "filter": {"b": {"$gt": 1}},
                                 "min": {"a": 1, "b": 2}, "hint": "a_1_b_1"},
                     verbosity="executionStats")
    wp = e["queryPlanner"]["winningPlan"]
    assert wp["stage"] == "FETCH" and wp["filter"] == {"b": {"$gt": 1}}
    assert wp["inputStage"]["indexBounds"] == {}
    assert wp["inputStage"]["indexName"] == "a_1_b_1"
    es = e["executionStats"]
    # Keys (1,2), (2,1), (2,2): three examined, no key past the end.
    assert (es["nReturned"], es["totalKeysExamined"], es["totalDocsExamined"]) == (2, 3, 3)
    assert error(grid, "g", min={"a": 1}, max={"b": 1}, hint="a_1_b_1")[0] == 51176
    with pytest.raises(OperationFailure) as ei:
        grid.command("explain", {"find": "g", "min": {"a": 1}, "max": {"b": 1},
                                 "hint": "a_1_b_1"})
    assert ei.value.code == 51176


# ------------------------------------------------------ randomized ranges

def _rank(v):
    """MongoDB's order over what the data holds: MinKey < null (missing) <
    numbers < strings < MaxKey."""
    if isinstance(v, MinKey):
        return (0, 0)
    if v is None:
        return (1, 0)
    if isinstance(v, (int, float)):
        return (2, v)
    if isinstance(v, str):
        return (3, v)
    assert isinstance(v, MaxKey)
    return (4, 0)


def _key_cmp(dirs):
    def cmp(x, y):
        for a, b, d in zip(x, y, dirs):
            ra, rb = _rank(a), _rank(b)
            if ra != rb:
                return (-1 if ra < rb else 1) * d
        return 0
    return cmp


@pytest.mark.parametrize("dirs", [(1,), (-1,), (1, 1), (1, -1), (-1, 1)])
def test_random_ranges_match_a_reference(client, dirs):
    rng = random.Random(7 + sum((i + 1) * d for i, d in enumerate(dirs)))
    db = client.test
    fields = ["a", "b"][:len(dirs)]
    values = [None, -2, 0, 1, 1.5, 3, "", "a", "ab", "b"]
    docs = []
    for i in range(300):
        d = {"_id": i}
        for f in fields:
            v = rng.choice(values)
            if v is not None or rng.random() < 0.5:
                d[f] = v
        docs.append(d)
    db.r.insert_many(docs)
    pattern = list(zip(fields, dirs))
    name = db.r.create_index(pattern)
    cmp = _key_cmp(dirs)
    keyf = functools.cmp_to_key(cmp)

    def key(d):
        return tuple(d.get(f) for f in fields)

    checked = 0
    for _ in range(60):
        lo = tuple(rng.choice(values + [MinKey(), MaxKey()]) for _ in fields)
        hi = tuple(rng.choice(values + [MinKey(), MaxKey()]) for _ in fields)
        use_lo, use_hi = rng.random() < 0.8, rng.random() < 0.8
        kw = {"hint": name, "batchSize": 13}
        if use_lo:
            kw["min"] = dict(zip(fields, lo))
        if use_hi:
            kw["max"] = dict(zip(fields, hi))
        if not use_lo and not use_hi:
            continue
        first = tuple(MinKey() if d > 0 else MaxKey() for d in dirs)
        last = tuple(MaxKey() if d > 0 else MinKey() for d in dirs)
        start, end = (lo if use_lo else first), (hi if use_hi else last)
        if cmp(start, end) >= 0:
            assert error(db, "r", **kw)[0] == 51175, kw
            continue
        want = sorted((d for d in docs if cmp(start, key(d)) <= 0 and cmp(key(d), end) < 0),
                      key=lambda d: (keyf(key(d)), d["_id"]))
        got = find(db, "r", **kw)
        assert [d["_id"] for d in got] == [d["_id"] for d in want], kw
        checked += 1
    assert checked >= 20
