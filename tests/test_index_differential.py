"""The index invariant, differentially: the same randomized queries run with
the planner's choice, with each index hinted, and as a collection scan
({$natural: 1}) must return the same documents -- in the same order where
the sort makes the order total -- and stay so while documents change."""
from __future__ import annotations

import random

import pytest
from bson import Int64

INDEXES = [
    [("a", 1)],
    [("a", 1), ("b", -1)],
    [("b", 1), ("a", 1)],
    [("c.d", 1)],
    [("tags", 1)],
    [("b", -1), ("c.d", 1)],
]


def rand_value(rng):
    r = rng.random()
    if r < 0.45:
        return rng.randint(-5, 15)
    if r < 0.55:
        return rng.randint(-5, 15) + 0.5
    if r < 0.7:
        return rng.choice(["", "a", "b", "ba", "z"])
    if r < 0.78:
        return None
    if r < 0.85:
        return Int64(rng.randint(-5, 15))
    return [rng.randint(-5, 15) for _ in range(rng.randint(0, 3))]


def rand_doc(rng, i):
    d = {"_id": i}
    if rng.random() < 0.9:
        d["a"] = rand_value(rng)
    if rng.random() < 0.8:
        b = rand_value(rng)
        d["b"] = b if not isinstance(b, list) else rng.randint(0, 9)  # b never an array
    if rng.random() < 0.7:
        d["c"] = {"d": rng.randint(0, 20)} if rng.random() < 0.8 else [
            {"d": rng.randint(0, 20)}, {"d": rng.randint(0, 20)}]
    if rng.random() < 0.6:
        d["tags"] = rng.sample(["x", "y", "z", "w"], rng.randint(0, 3))
    return d


def rand_pred(rng, field):
    v = lambda: rand_value(rng) if rng.random() < 0.7 else rng.randint(-5, 15)  # noqa: E731
    forms = [
        lambda: v(),
        lambda: {"$eq": v()},
        lambda: {"$in": [v() for _ in range(rng.randint(0, 4))]},
        lambda: {rng.choice(["$gt", "$gte", "$lt", "$lte"]): rng.randint(-5, 15)},
        lambda: {"$gt": rng.randint(-5, 5), "$lte": rng.randint(0, 15)},
        lambda: {"$gte": rng.choice(["a", "b"]), "$lt": "z"},
        lambda: {"$ne": v()},
        lambda: {"$exists": rng.random() < 0.5},
        lambda: None,
        lambda: {"$nin": [v(), v()]},
    ]
    return rng.choice(forms)()


def rand_filter(rng):
    fields = ["a", "b", "c.d", "tags"]
    f = {}
    for name in rng.sample(fields, rng.randint(0, 3)):
        f[name] = rand_pred(rng, name) if name != "tags" else rng.choice(
            ["x", {"$in": ["y", "w"]}, {"$all": ["x", "y"]}, {"$size": 2}, {"$gt": "x"}])
    if rng.random() < 0.15:
        f = {"$or": [f, {"a": rand_pred(rng, "a")}]}
    return f


def rand_sort(rng):
    r = rng.random()
    if r < 0.5:
        return None
    # at most one field that may hold arrays (a and c.d may), or the sort
    # fails with "parallel arrays" -- as mongod's does
    keys = rng.choice([["a"], ["b"], ["c.d"], ["a", "b"], ["b", "a"], ["c.d", "b"],
                       ["b", "c.d"]])
    return [(k, rng.choice([1, -1])) for k in keys] + [("_id", 1)]


def ids(cursor):
    return [d["_id"] for d in cursor]


def run(coll, f, sort, limit, hint):
    cur = coll.find(f)
    if sort:
        cur = cur.sort(sort)
    if limit:
        cur = cur.limit(limit)
    if hint is not None:
        cur = cur.hint(hint)
    return ids(cur.batch_size(7))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_indexed_answers_equal_collection_scans(client, seed):
    rng = random.Random(seed)
    coll = client.t.c
    coll.insert_many([rand_doc(rng, i) for i in range(300)])
    for spec in INDEXES:
        coll.create_index(spec)
    checked = 0
    for q in range(150):
        f, sort = rand_filter(rng), rand_sort(rng)
        limit = rng.choice([0, 0, 5, 20]) if sort else 0
        want = run(coll, f, sort, limit, [("$natural", 1)])
        got = run(coll, f, sort, limit, None)
        if sort:
            assert got == want, (f, sort, limit)
        else:
            assert sorted(got, key=repr) == sorted(want, key=repr), f
        for spec in INDEXES:
            hinted = run(coll, f, sort, limit, spec)
            if sort:
                assert hinted == want, (f, sort, limit, spec)
            else:
                assert sorted(hinted, key=repr) == sorted(want, key=repr), (f, spec)
        # counts agree too
        n = client.t.command("count", "c", query=f)["n"]
        assert n == len(run(coll, f, None, 0, [("$natural", 1)])), f
        checked += 1
        if q % 30 == 29:
            # change the data under the indexes, then go on comparing
            for _ in range(20):
                i = rng.randrange(300)
                op = rng.random()
                if op < 0.4:
                    coll.replace_one({"_id": i}, rand_doc(rng, i), upsert=True)
                elif op < 0.7:
                    coll.update_one({"_id": i}, {"$set": {"a": rand_value(rng)}})
                else:
                    coll.delete_one({"_id": i})
            v = client.t.command("validate", "c")
            assert v["valid"] is True, v
    assert checked == 150
