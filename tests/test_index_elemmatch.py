"""$elemMatch bounds an index (bounds.c, elem_match), as mongod's planner
does: on values, one element meets every condition, so the bounds are
their intersection; on documents, each field's conditions bound path.field
alone (two conditions on one field may be met by two values of an array
inside the element).  Differentially: planned, hinted and scanned, the
same documents, over arrays of values, of arrays and of documents with
arrays inside."""
from __future__ import annotations

import random

from test_planner import ID, bounds, ix, plan

INDEXES = [[("v", 1)], [("arr.a", 1)], [("arr.b", -1)], [("arr.a", 1), ("arr.b", 1)]]


def test_elem_match_bounds():
    assert bounds(plan({"v": {"$elemMatch": {"$gt": 1, "$lt": 5}}},
                       [ID, ix({"v": 1})])) == {"v": ["(1, 5)"]}
    # a multikey field: each condition alone (the planner takes one)
    assert bounds(plan({"arr": {"$elemMatch": {"a": {"$gte": 1, "$lt": 5}}}},
                       [ID, ix({"arr.a": 1}, multikey=1)])) == {"arr.a": ["[1, inf.0]"]}
    # while on values the intersection holds, multikey or not
    assert bounds(plan({"v": {"$elemMatch": {"$gt": 1, "$lt": 5}}},
                       [ID, ix({"v": 1}, multikey=1)])) == {"v": ["(1, 5)"]}
    assert bounds(plan({"arr": {"$elemMatch": {"a": 3, "b": {"$in": [1, 2]}}}},
                       [ID, ix({"arr.b": 1})])) == {"arr.b": ["[1, 1]", "[2, 2]"]}
    # an $elemMatch about the elements' own elements bounds nothing
    assert plan({"v": {"$elemMatch": {"$elemMatch": {"$gt": 1}}}},
                [ID, ix({"v": 1})])["stage"] == "COLLSCAN"
    # and it is never exact: the document is fetched and matched
    r = plan({"v": {"$elemMatch": {"$eq": 2}}}, [ID, ix({"v": 1})])
    assert r["explain"]["filter"] == {"v": {"$elemMatch": {"$eq": 2}}}


def test_elem_match_on_a_numbered_field_bounds_nothing(client):
    """Inside $elemMatch, {"0": 5} is field or position 0 of each element;
    the index path arr.0 is arr's first element."""
    c = client.t.n
    c.insert_many([{"_id": 1, "arr": [[5]]}, {"_id": 2, "arr": [[5, 6]]},
                   {"_id": 3, "arr": [{"x": 1}, [5]]}, {"_id": 4, "arr": [5]}])
    c.create_index("arr.0")
    f = {"arr": {"$elemMatch": {"0": 5}}}
    want = ids(c.find(f).hint({"$natural": 1}))
    assert want == [1, 2, 3]
    assert ids(c.find(f)) == want
    assert ids(c.find(f).hint("arr.0_1")) == want


def rand_scalar(rng):
    return rng.choice([rng.randint(0, 9), rng.randint(0, 9), "s", None, rng.randint(0, 9) + 0.5])


def rand_doc(rng, i):
    d = {"_id": i}
    if rng.random() < 0.9:
        d["v"] = [rand_scalar(rng) if rng.random() < 0.8 else [rand_scalar(rng)]
                  for _ in range(rng.randint(0, 4))] if rng.random() < 0.85 else rand_scalar(rng)
    if rng.random() < 0.9:
        els = []
        for _ in range(rng.randint(0, 3)):
            e = {}
            if rng.random() < 0.8:
                e["a"] = rand_scalar(rng) if rng.random() < 0.7 else [
                    rand_scalar(rng) for _ in range(rng.randint(0, 3))]
            if rng.random() < 0.7:
                e["b"] = rand_scalar(rng)
            els.append(e if rng.random() < 0.9 else rand_scalar(rng))
        d["arr"] = els
    return d


def rand_ops(rng):
    n = rng.randint(1, 3)
    ops = {}
    for _ in range(n):
        op = rng.choice(["$gt", "$gte", "$lt", "$lte", "$eq", "$ne", "$in", "$exists"])
        if op == "$in":
            ops[op] = [rng.randint(0, 9) for _ in range(rng.randint(0, 3))]
        elif op == "$exists":
            ops[op] = rng.random() < 0.7
        else:
            ops[op] = rng.randint(0, 9) if rng.random() < 0.9 else None
    return ops


def rand_filter(rng):
    r = rng.random()
    if r < 0.35:
        return {"v": {"$elemMatch": rand_ops(rng)}}
    if r < 0.45:
        return {"v": {"$elemMatch": {"$elemMatch": rand_ops(rng)}}}
    sub = {}
    for f in rng.sample(["a", "b"], rng.randint(1, 2)):
        sub[f] = rand_ops(rng) if rng.random() < 0.7 else rng.randint(0, 9)
    f = {"arr": {"$elemMatch": sub}}
    if rng.random() < 0.2:
        f["v"] = {"$elemMatch": rand_ops(rng)}
    return f


def ids(cursor):
    return sorted(d["_id"] for d in cursor)


def test_elem_match_differential(client):
    rng = random.Random(23)
    c = client.t.c
    c.insert_many([rand_doc(rng, i) for i in range(400)])
    for spec in INDEXES:
        c.create_index(spec)
    used = 0
    for _ in range(250):
        f = rand_filter(rng)
        want = ids(c.find(f).hint({"$natural": 1}))
        assert ids(c.find(f).batch_size(5)) == want, f
        for spec in INDEXES:
            assert ids(c.find(f).hint(spec)) == want, (f, spec)
        assert c.count_documents(f) == len(want), f
        e = client.t.command("explain", {"find": "c", "filter": f})
        used += e["queryPlanner"]["winningPlan"]["stage"] != "COLLSCAN"
    assert used > 120, used
