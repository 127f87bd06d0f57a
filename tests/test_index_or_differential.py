"""$or, $and and $nor planning, differentially: for random filter trees
(nested $or, one-clause $or, $or of equalities on one path, a $or beside
other conditions, $and of several $or, $nor, MinKey/MaxKey ranges) the
planner's choice and each hinted index must answer as a collection scan
({$natural: 1}) does -- the same documents, the same order where the sort
is total, the same counts and distinct values -- and stay so while the
documents change. A hinted sparse or partial index answers the documents
it holds: the collection scan's answer intersected with them.

It guards, among others, two planner bugs: a partial index
{x: {$exists: true}} was taken for {x: {$lte: MaxKey}} or
{x: {$gt: MinKey}}, which also match documents without x, and a sparse
index on x was too."""
from __future__ import annotations

import math
import random

import pytest
from bson import Int64, MaxKey, MinKey

NATURAL = {"$natural": 1}

# Indexes that hold every document: a hinted one answers the whole filter.
# (Hinted by name: a_1 and a_if_b_gt_2 share a key pattern.)
PLAIN = {
    "a_1": [("a", 1)],
    "b_1": [("b", 1)],
    "a_1_b_-1": [("a", 1), ("b", -1)],
    "b_1_a_1": [("b", 1), ("a", 1)],
    "c.d_1": [("c.d", 1)],
    "a_1_c.d_1": [("a", 1), ("c.d", 1)],
}

# Indexes that hold some documents: name -> (key, options, which documents).
PARTIAL = {
    "b_cd_if_a": ([("b", 1), ("c.d", 1)], {"partialFilterExpression": {"a": {"$exists": True}}},
                  {"a": {"$exists": True}}),
    "e_a_if_e": ([("e", 1), ("a", 1)], {"partialFilterExpression": {"e": {"$exists": True}}},
                 {"e": {"$exists": True}}),
    "a_if_b_gt_2": ([("a", 1)], {"partialFilterExpression": {"b": {"$gt": 2}}},
                    {"b": {"$gt": 2}}),
    "b_sparse": ([("b", -1)], {"sparse": True}, {"b": {"$exists": True}}),
}

PATHS = ["a", "b", "c.d", "c.e", "e"]
STRINGS = ["", "a", "b", "ba", "z"]


# ---------------------------------------------------------------- documents

def rand_value(rng, array_ok):
    r = rng.random()
    if r < 0.45:
        return rng.randint(-3, 12)
    if r < 0.52:
        return rng.randint(-3, 12) + 0.5
    if r < 0.57:
        return Int64(rng.randint(-3, 12))
    if r < 0.60:
        return float(rng.randint(-3, 12))
    if r < 0.70:
        return rng.choice(STRINGS)
    if r < 0.78:
        return None
    if r < 0.82:
        return rng.choice([True, False, float("nan"), MinKey(), MaxKey(), {"x": 1}])
    if array_ok and r < 0.95:
        return [rand_value(rng, False) for _ in range(rng.randint(0, 3))]
    return rng.randint(-3, 12)


def rand_doc(rng, i):
    # at most one of a and c.d is an array: {a: 1, c.d: 1} cannot index
    # parallel arrays, and a sort on both could not order them
    array_in = rng.choice(["a", "c", None, None])
    d = {"_id": i}
    if rng.random() < 0.88:
        d["a"] = rand_value(rng, array_in == "a")
    if rng.random() < 0.8:
        d["b"] = rand_value(rng, False)
    r = rng.random()
    if r < 0.5:
        d["c"] = {"d": rand_value(rng, array_in == "c")}
    elif r < 0.65:
        if array_in == "c":
            d["c"] = [{"d": rng.randint(-3, 12), "e": rng.randint(0, 4)} if rng.random() < 0.6
                      else {"d": rng.randint(-3, 12)} for _ in range(rng.randint(0, 3))]
        else:
            d["c"] = {"d": rng.randint(-3, 12), "e": rng.randint(0, 4)}
    elif r < 0.72:
        d["c"] = rng.choice([5, None, {"e": 1}, {"d": None}, "s"])
    if rng.random() < 0.5:
        d["e"] = rng.choice([rng.randint(0, 5), rng.randint(0, 5), None, 2.5])
    return d


def mutate(rng, coll, n_ids):
    """Replace, update, unset, insert and delete some documents."""
    for _ in range(rng.randint(15, 30)):
        i = rng.randrange(n_ids + 20)  # some new _ids: upserts insert them
        r = rng.random()
        if r < 0.35:
            coll.replace_one({"_id": i}, rand_doc(rng, i), upsert=True)
        elif r < 0.55:
            field = rng.choice(["a", "b", "e"])
            coll.update_one({"_id": i}, {"$set": {field: rand_value(rng, False)}})
        elif r < 0.65:
            coll.update_one({"_id": i}, {"$set": {"c": {"d": rand_value(rng, False)}}})
        elif r < 0.8:
            coll.update_one({"_id": i}, {"$unset": {rng.choice(["a", "b", "c", "e"]): ""}})
        else:
            coll.delete_one({"_id": i})


# ---------------------------------------------------------------- filters

def scalar(rng):
    r = rng.random()
    if r < 0.65:
        return rng.randint(-3, 12)
    if r < 0.72:
        return rng.randint(-3, 12) + 0.5
    if r < 0.76:
        return Int64(rng.randint(-3, 12))
    if r < 0.86:
        return rng.choice(STRINGS)
    if r < 0.94:
        return None
    return rng.choice([True, float("nan"), MinKey(), MaxKey(), [], [1, 2], {"x": 1}])


def extreme_range(rng):
    """A range reaching MinKey or MaxKey. One open at that end ({$lte: MaxKey},
    {$gt: MinKey}, ...) matches documents without the field too, so a partial
    {field: {$exists: true}} index cannot serve it."""
    return rng.choice([
        {"$lte": MaxKey()}, {"$lt": MaxKey()}, {"$gt": MinKey()}, {"$gte": MinKey()},
        {"$gte": MinKey(), "$lte": MaxKey()}, {"$gt": MinKey(), "$lt": 5},
        {"$gte": 3, "$lte": MaxKey()}, {"$gt": MaxKey()}, {"$lt": MinKey()},
        {"$not": {"$lt": MaxKey()}}, {"$ne": MinKey()},
    ])


def leaf_pred(rng, path):
    num = lambda: rng.randint(-3, 12)  # noqa: E731
    r = rng.random()
    if r < 0.14 or (r < 0.24 and path in ("a", "e")):
        return extreme_range(rng)
    if r < 0.40:
        return scalar(rng)
    if r < 0.45:
        return {"$eq": scalar(rng)}
    if r < 0.53:
        return {"$in": [scalar(rng) for _ in range(rng.randint(1, 4))]}
    if r < 0.63:
        return {rng.choice(["$gt", "$gte", "$lt", "$lte"]): rng.choice([num(), num(), "b", None])}
    if r < 0.69:
        lo, hi = num(), num() + 4
        return {rng.choice(["$gt", "$gte"]): lo, rng.choice(["$lt", "$lte"]): hi}
    if r < 0.74:
        return {"$ne": scalar(rng)}
    if r < 0.77:
        return {"$nin": [scalar(rng) for _ in range(rng.randint(1, 3))]}
    if r < 0.83:
        return {"$exists": rng.random() < 0.5}
    if r < 0.87:
        return None
    if r < 0.93:
        return {"$not": rng.choice([{"$gt": num()}, {"$lte": num()}, {"$in": [num(), None]},
                                    {"$eq": None}, {"$exists": True}, {"$gte": "a"}])}
    return {"$elemMatch": rng.choice([{"$gt": num()}, {"$gte": num(), "$lt": num() + 5},
                                      {"$eq": num()}, {"$ne": None}])}


def leaf(rng):
    path = rng.choice(PATHS)
    return {path: leaf_pred(rng, path)}


def equalities(rng, path):
    """Clauses that are each an equality on `path`."""
    out = []
    for _ in range(rng.randint(2, 4)):
        v = scalar(rng)
        out.append({path: v} if rng.random() < 0.7 else {path: {"$eq": v}})
    return out


def clauses(rng, depth, lo=1, hi=3):
    return [clause(rng, depth) for _ in range(rng.randint(lo, hi))]


def beside(rng, d):
    """Add conditions beside what `d` holds (a path not there already)."""
    for _ in range(rng.randint(1, 2)):
        for path, pred in leaf(rng).items():
            d.setdefault(path, pred)
    return d


def clause(rng, depth):
    """A filter document with up to `depth` levels of $or/$and/$nor."""
    if depth <= 0 or rng.random() < 0.25:
        d = leaf(rng)
        return beside(rng, d) if rng.random() < 0.25 else d
    sub = depth - 1
    shape = rng.choice(["or", "or", "one_clause_or", "or_of_equalities", "nested_or",
                        "or_with_inner_or", "and_of_ors", "nor", "and"])
    if shape == "or":
        d = {"$or": clauses(rng, sub, 2, 4)}
    elif shape == "one_clause_or":
        d = {"$or": [clause(rng, sub)]}
    elif shape == "or_of_equalities":
        path = rng.choice(PATHS)
        kids = equalities(rng, path)
        if rng.random() < 0.3:  # and a $or alone of more equalities on it
            kids.append({"$or": equalities(rng, path)})
        if rng.random() < 0.3:  # and a clause of another kind
            kids.insert(rng.randrange(len(kids) + 1), clause(rng, sub))
        d = {"$or": kids}
    elif shape == "nested_or":  # a clause that is a $or alone
        kids = clauses(rng, sub, 0, 2) + [{"$or": clauses(rng, sub - 1, 1, 3)}]
        rng.shuffle(kids)
        d = {"$or": kids}
    elif shape == "or_with_inner_or":  # a clause with its own $or beside a condition
        inner = beside(rng, {"$or": clauses(rng, sub - 1, 1, 3)})
        kids = [inner] + clauses(rng, sub, 0, 2)
        rng.shuffle(kids)
        d = {"$or": kids}
    elif shape == "and_of_ors":
        d = {"$and": [{"$or": clauses(rng, sub - 1, 1, 3)} for _ in range(rng.randint(2, 3))]}
    elif shape == "nor":
        d = {"$nor": clauses(rng, sub, 1, 3)}
    else:
        d = {"$and": clauses(rng, sub, 1, 3)}
    return beside(rng, d) if rng.random() < 0.3 else d


def rand_filter(rng):
    f = clause(rng, rng.randint(1, 4))
    if rng.random() < 0.1:
        f = {"$or": [f]}
    return f


def rand_sort(rng):
    keys = rng.choice([["a"], ["b"], ["c.d"], ["e"], ["a", "b"], ["b", "a"], ["e", "a"],
                       ["b", "c.d"], ["c.d", "b"]])
    return [(k, rng.choice([1, -1])) for k in keys] + [("_id", rng.choice([1, -1]))]


# ---------------------------------------------------------------- comparing

def value_key(v):
    """A distinct value, as the server compares it (1, 1.0 and Int64(1) are one)."""
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, (int, float)):
        return ("num", "nan" if math.isnan(v) else float(v))
    if isinstance(v, list):
        return ("array", tuple(value_key(x) for x in v))
    if isinstance(v, dict):
        return ("doc", tuple((k, value_key(x)) for k, x in v.items()))
    return (type(v).__name__, repr(v))


def find_ids(coll, f, hint=None, sort=None, limit=0):
    cur = coll.find(f, {"_id": 1})
    if sort:
        cur = cur.sort(sort)
    if limit:
        cur = cur.limit(limit)
    if hint is not None:
        cur = cur.hint(hint)
    ids = [d["_id"] for d in cur.batch_size(50)]  # getMores too
    return ids if sort else sorted(ids)


def count(db, f, hint=None):
    cmd = {"count": "c", "query": f}
    if hint is not None:
        cmd["hint"] = hint
    return db.command(cmd)["n"]


def distinct(db, key, f, hint=None):
    cmd = {"distinct": "c", "key": key, "query": f}
    if hint is not None:
        cmd["hint"] = hint
    return sorted((value_key(v) for v in db.command(cmd)["values"]), key=repr)


def check_filter(db, f, rng, members):
    coll = db.c
    want = find_ids(coll, f, NATURAL)
    assert find_ids(coll, f) == want, f"planner: {f!r}"
    assert count(db, f, NATURAL) == len(want), f"count $natural: {f!r}"
    assert count(db, f) == len(want), f"count planner: {f!r}"
    for name in PLAIN:
        assert find_ids(coll, f, name) == want, f"hint {name}: {f!r}"
        assert count(db, f, name) == len(want), f"count hint {name}: {f!r}"
    for name, held in members.items():
        part = [i for i in want if i in held]
        assert find_ids(coll, f, name) == part, f"hint {name}: {f!r}"
        assert count(db, f, name) == len(part), f"count hint {name}: {f!r}"

    key = rng.choice(["a", "b", "c.d", "e"])
    values = distinct(db, key, f, NATURAL)
    assert distinct(db, key, f) == values, f"distinct {key} planner: {f!r}"
    for name in rng.sample(sorted(PLAIN), 2):
        assert distinct(db, key, f, name) == values, f"distinct {key} hint {name}: {f!r}"

    # a total sort (it ends with _id) and a limit: the order is checked too
    sort, limit = rand_sort(rng), rng.choice([0, 1, 5, 20])
    full = find_ids(coll, f, NATURAL, sort)
    top = full[:limit] if limit else full
    assert find_ids(coll, f, None, sort, limit) == top, f"planner sort {sort} limit {limit}: {f!r}"
    for name in PLAIN:
        assert find_ids(coll, f, name, sort, limit) == top, \
            f"hint {name} sort {sort} limit {limit}: {f!r}"
    for name, held in members.items():
        part = [i for i in full if i in held]
        assert find_ids(coll, f, name, sort, limit) == (part[:limit] if limit else part), \
            f"hint {name} sort {sort} limit {limit}: {f!r}"


def make_collection(db, rng, n):
    db.c.insert_many([rand_doc(rng, i) for i in range(n)])
    for name, spec in PLAIN.items():
        assert db.c.create_index(spec) == name
    for name, (spec, options, _) in PARTIAL.items():
        db.c.create_index(spec, name=name, **options)


def membership(db):
    """The _ids each sparse or partial index holds."""
    return {name: {d["_id"] for d in db.c.find(held, {"_id": 1}).hint(NATURAL)}
            for name, (_, _, held) in PARTIAL.items()}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_or_trees_answer_as_collection_scans(client, seed):
    rng = random.Random(seed)
    db = client.t
    n = 400
    make_collection(db, rng, n)
    checked = 0
    for _ in range(4):
        members = membership(db)
        for _ in range(20):
            check_filter(db, rand_filter(rng), rng, members)
            checked += 1
        mutate(rng, db.c, n)
        v = db.command("validate", "c")
        assert v["valid"] is True, v
    assert checked == 80


def test_minkey_maxkey_ranges_skip_exists_partial_indexes(client):
    """A range reaching MinKey or MaxKey matches documents that lack the
    field, so an index holding only documents where it exists cannot answer
    it -- alone, in a one-clause or nested $or, or in a $and."""
    db = client.t
    values = ["missing", None, [], [None], 1, 5.5, "s", MinKey(), MaxKey(), [1, 5], {"x": 1},
              float("nan")]
    docs = []
    for i, v in enumerate(values):
        for b in (1, 2):
            d = {"_id": 10 * i + b, "b": b, "e": i % 3}
            if v != "missing":
                d["a"] = v
            docs.append(d)
    db.c.insert_many(docs)
    db.c.create_index([("b", 1), ("c.d", 1)], name="b_cd_if_a",
                      partialFilterExpression={"a": {"$exists": True}})
    db.c.create_index([("a", 1)], name="a_if_a", partialFilterExpression={"a": {"$exists": True}})
    db.c.create_index([("e", 1), ("a", 1)], name="e_a_if_a",
                      partialFilterExpression={"a": {"$exists": True}})
    ranges = [{"$lte": MaxKey()}, {"$lt": MaxKey()}, {"$gt": MinKey()}, {"$gte": MinKey()},
              {"$gte": MinKey(), "$lte": MaxKey()}, {"$gt": MinKey(), "$lt": MaxKey()},
              {"$not": {"$lt": MinKey()}}, {"$not": {"$gt": MaxKey()}}]
    shapes = [
        lambda r: {"a": r},
        lambda r: {"b": 1, "a": r},
        lambda r: {"e": 0, "a": r},
        lambda r: {"b": 1, "$or": [{"a": r}]},
        lambda r: {"$or": [{"$or": [{"a": r}]}], "e": 1},
        lambda r: {"$and": [{"a": r}, {"b": 2}]},
        lambda r: {"$or": [{"a": r, "b": 1}, {"b": 2, "a": r}]},
        lambda r: {"$and": [{"$or": [{"a": r}]}, {"$or": [{"b": 1}, {"e": 2}]}]},
    ]
    for r in ranges:
        for shape in shapes:
            f = shape(r)
            want = find_ids(db.c, f, NATURAL)
            assert find_ids(db.c, f) == want, f"planner: {f!r}"
            assert count(db, f) == len(want), f"count planner: {f!r}"


def test_minkey_maxkey_ranges_skip_sparse_indexes(client):
    """The same for a sparse index: it holds no document without the field,
    so it cannot answer a range that matches them (docs/indexes.md: a sparse
    index is not used where missing fields could match)."""
    db = client.t
    db.c.insert_many([{"_id": 1, "a": 1}, {"_id": 2, "a": 1, "b": 1},
                      {"_id": 3, "a": 2, "b": None}])
    db.c.create_index([("b", -1)], name="b_sparse", sparse=True)
    db.c.create_index([("a", 1)])
    for f in ({"b": {"$gte": MinKey()}}, {"b": {"$lte": MaxKey()}}, {"b": {"$gt": MinKey()}},
              {"$or": [{"a": 2}, {"a": 1}], "b": {"$lte": MaxKey()}}):
        want = find_ids(db.c, f, NATURAL)
        assert find_ids(db.c, f) == want, f"planner: {f!r}"
        assert count(db, f) == len(want), f"count planner: {f!r}"
