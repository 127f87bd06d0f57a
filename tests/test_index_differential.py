"""The index invariant, differentially: the same randomized queries run with
the planner's choice, with each index hinted, and as a collection scan
({$natural: 1}) must return the same documents -- in the same order where
the sort makes the order total -- and stay so while documents change."""
from __future__ import annotations

import random
import struct

import bson
import pytest
from bson import Code, Decimal128, Int64, MaxKey, MinKey, Regex
from bson.raw_bson import RawBSONDocument
from pymongo.errors import WriteError

INDEXES = [
    [("a", 1)],
    [("a", 1), ("b", -1)],
    [("b", 1), ("a", 1)],
    [("c.d", 1)],
    [("tags", 1)],
    [("b", -1), ("c.d", 1)],
]


# BSON undefined (deprecated; pymongo reads it as None and cannot write it):
# an equality to null matches it, so the bounds of null hold it too.
UNDEF = object()
# A dbPointer (deprecated too; pymongo reads it as a DBRef and cannot write it).
DBPOINTER = object()


def enc_elem(key, v):
    k = key.encode() + b"\x00"
    if v is UNDEF:
        return b"\x06" + k
    if v is DBPOINTER:
        return b"\x0c" + k + struct.pack("<i", 2) + b"c\x00" + bytes(range(12))
    if isinstance(v, RawBSONDocument):
        return b"\x03" + k + v.raw
    if isinstance(v, dict):
        return b"\x03" + k + enc_doc(v)
    if isinstance(v, list):
        return b"\x04" + k + enc_doc({str(i): x for i, x in enumerate(v)})
    return bson.encode({key: v})[4:-1]


def enc_doc(d):
    body = b"".join(enc_elem(k, v) for k, v in d.items())
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


def raw(d):
    return RawBSONDocument(enc_doc(d))


def rand_value(rng):
    r = rng.random()
    if r < 0.03:
        return UNDEF
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
    if r < 0.88:
        return rng.choice([float("nan"), True, False, MinKey(), {"x": 1}])
    return [rng.randint(-5, 15) for _ in range(rng.randint(0, 3))]


def rand_doc(rng, i):
    d = {"_id": i}
    if rng.random() < 0.9:
        d["a"] = rand_value(rng)
        if rng.random() < 0.05:  # the types at the end of the order, for $type
            d["a"] = rng.choice([Regex("a"), Regex("^b", "i"), Code("x"), Code(""),
                                 Code("x", {"s": 1}), DBPOINTER])
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
        # negations: bounded by the complement where mongod bounds them
        lambda: {"$ne": rng.choice([None, {"x": 1}, [], [1, 2], rng.randint(-5, 15)])},
        lambda: {"$nin": rng.choice([[None, []], [[], None], [None, 3], [[1], 2]])},
        lambda: {"$not": {rng.choice(["$gt", "$gte", "$lt", "$lte"]): rng.randint(-5, 15)}},
        lambda: {"$not": {"$in": [v() for _ in range(rng.randint(0, 3))]}},
        lambda: {"$not": rng.choice([{"$eq": None}, {"$lte": None}, {"$exists": True},
                                     {"$gte": "b"}, {"$eq": "a"}])},
        lambda: {"$ne": rng.randint(0, 9), "$gte": rng.randint(-5, 5)},
        # regexes with no literal prefix: every string key, tested by the scan
        lambda: rng.choice([Regex("a"), Regex("a$"), Regex("^.a"), Regex("z|^$"),
                            {"$regex": "B", "$options": "i"}]),
        # $type: the brackets of its types
        lambda: {"$type": rng.choice(["string", "number", "int", "double", "long", "null",
                                      "bool", "object", "array", "minKey", "regex", 2, 16,
                                      "javascript", "javascriptWithScope", "dbPointer",
                                      "undefined", 13, ["regex", "javascript"],
                                      ["string", "int"], ["null", "array"], ["bool", "null"]])},
        lambda: {"$mod": [rng.choice([2, 3, 4.5]), rng.randint(0, 1)]},
        lambda: {"$in": [rng.choice([Regex("a"), Regex("a$"), Regex("^b")]), v()]},
        # $all: each element bounds the field as {field: element} would
        lambda: {"$all": [v() for _ in range(rng.randint(0, 3))]},
        lambda: {"$all": [rng.choice([Regex("^b"), Regex("a"), "ba", 3])]},
        lambda: {"$all": [{"$elemMatch": {"$gt": rng.randint(-5, 10)}},
                          {"$elemMatch": {"$lt": rng.randint(0, 15)}}][:rng.randint(1, 2)]},
    ]
    value = rng.choice(forms)()
    return undef_as_null(value)


def undef_as_null(x):
    """A filter cannot hold undefined: mongod refuses it as an operand."""
    if x is UNDEF:
        return None
    if isinstance(x, dict):
        return {k: undef_as_null(v) for k, v in x.items()}
    if isinstance(x, list):
        return [undef_as_null(v) for v in x]
    return x


def rand_filter(rng):
    fields = ["a", "b", "c.d", "tags"]
    f = {}
    for name in rng.sample(fields, rng.randint(0, 3)):
        f[name] = rand_pred(rng, name) if name != "tags" else rng.choice(
            ["x", {"$in": ["y", "w"]}, {"$all": ["x", "y"]}, {"$size": 2}, {"$gt": "x"},
             {"$ne": "x"}, {"$nin": ["x", "y"]}, {"$ne": None}, {"$nin": [None, []]},
             {"$not": {"$gte": "x"}}, Regex("x|w"), {"$regex": "^[XY]$", "$options": "i"},
             {"$all": ["w"]}, {"$all": [Regex("^x"), "y"]}, {"$all": []},
             {"$all": [{"$elemMatch": {"$gte": "x"}}]}])
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
    coll.insert_many([raw(rand_doc(rng, i)) for i in range(300)])
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
        # counts agree too, planned and hinted (a count may be answered from
        # the keys alone, where the bounds answer the whole filter)
        n = len(run(coll, f, None, 0, [("$natural", 1)]))
        assert client.t.command("count", "c", query=f)["n"] == n, f
        for spec in INDEXES:
            assert client.t.command("count", "c", query=f, hint=dict(spec))["n"] == n, (f, spec)
        checked += 1
        if q % 30 == 29:
            # change the data under the indexes, then go on comparing
            for _ in range(20):
                i = rng.randrange(300)
                op = rng.random()
                if op < 0.4:
                    coll.replace_one({"_id": i}, raw(rand_doc(rng, i)), upsert=True)
                elif op < 0.7:
                    coll.update_one({"_id": i}, raw({"$set": {"a": rand_value(rng)}}))
                else:
                    coll.delete_one({"_id": i})
            v = client.t.command("validate", "c")
            assert v["valid"] is True, v
    assert checked == 150


def test_negations_answer_as_collection_scans(client):
    """Every negation form, over the values whose keys sit at the edges of
    the bounds (MinKey, MaxKey, NaN, undefined, null, empty and nested
    arrays, documents), planned and hinted, against a collection scan --
    on a plain index and on a multikey one."""
    from bson import MaxKey, MinKey, Regex
    values = [MinKey(), MaxKey(), float("nan"), float("inf"), UNDEF, None, [], [[]], [None],
              [1], [1, 2], [5, 6], 5, 5.0, Int64(6), "a", "b", {"x": 1}, {"x": 2}, True,
              Regex("^x")]
    conds = [
        {"$ne": 5}, {"$ne": None}, {"$ne": []}, {"$ne": [1, 2]}, {"$ne": {"x": 1}},
        {"$ne": MinKey()}, {"$ne": MaxKey()}, {"$ne": float("nan")},
        {"$nin": [None, []]}, {"$nin": [[], None, None]}, {"$nin": [None, 1]},
        {"$nin": [[1], 2]}, {"$nin": []}, {"$nin": [[]]}, {"$nin": [[], 5]},
        {"$nin": [Regex("^x"), 5]},
        {"$not": {"$lt": MaxKey()}}, {"$not": {"$gt": MinKey()}}, {"$not": {"$lte": MaxKey()}},
        {"$not": {"$gte": MinKey()}}, {"$not": {"$lt": float("nan")}},
        {"$not": {"$gte": float("nan")}}, {"$not": {"$gt": {"x": 1}}}, {"$not": {"$lt": [2]}},
        {"$not": {"$gt": 5}}, {"$not": {"$lte": 5}}, {"$not": {"$gte": "a"}},
        {"$not": {"$lte": None}}, {"$not": {"$gt": None}}, {"$not": {"$in": [None, 5]}},
        {"$not": {"$exists": True}}, {"$not": {"$exists": False}},
        {"$not": Regex("^x")},
    ]
    cases = [("a", False, lambda v: {"a": v}), ("a", True, lambda v: {"a": v}),
             # dotted and positional paths through arrays: an array with no
             # document in it gives a.b the key null
             ("a.b", True, lambda v: {"a": [{"b": v}]}), ("a.b", True, lambda v: {"a": v}),
             ("a.b", False, lambda v: {"a": {"b": v}}), ("a.0", True, lambda v: {"a": v})]
    for n, (path, multikey, shape) in enumerate(cases):
        coll = client.t[f"neg{n}"]
        docs = [{"_id": i, **shape(v)} for i, v in enumerate(values)
                if multikey or not isinstance(v, list)]
        docs.append({"_id": 100})  # a missing
        if path == "a.b":
            docs += [{"_id": 101, "a": [{"b": 1}, {"c": 1}]}, {"_id": 102, "a": [2, {"b": 5}]}]
        coll.insert_many([raw(d) for d in docs])
        coll.create_index(path)
        for c in conds:
            f = {path: c}
            want = sorted(ids(coll.find(f).hint([("$natural", 1)])))
            assert sorted(ids(coll.find(f))) == want, (path, multikey, c)
            assert sorted(ids(coll.find(f).hint(path + "_1"))) == want, (path, multikey, c)
            assert client.t.command("count", coll.name, query=f)["n"] == len(want), (path, c)


@pytest.mark.parametrize("cond, msg", [
    (UNDEF, "cannot compare to undefined"),
    ({"$eq": UNDEF}, "cannot compare to undefined"),
    ({"$ne": UNDEF}, "cannot compare to undefined"),
    ({"$gt": UNDEF}, "cannot compare to undefined"),
    ({"$not": {"$lte": UNDEF}}, "cannot compare to undefined"),
    ({"$all": [1, UNDEF]}, "cannot compare to undefined"),
    ({"$in": [1, UNDEF]}, "InMatchExpression equality cannot be undefined"),
    ({"$nin": [UNDEF]}, "InMatchExpression equality cannot be undefined"),
    ({"$elemMatch": {"$ne": UNDEF}}, "cannot compare to undefined"),
])
def test_undefined_operands_are_refused(client, cond, msg):
    """mongod's ComparisonMatchExpression and InMatchExpression refuse an
    undefined operand (BadValue); with or without an index."""
    import pymongo.errors
    coll = client.t.u
    coll.insert_one({"_id": 1, "a": 1})
    coll.create_index("a")
    # (the find command by hand: pymongo's cursor re-encodes a filter that
    # comes with a hint, and undefined becomes null)
    for hint in (None, "a_1", {"$natural": 1}):
        cmd = {"find": "u", "filter": raw({"a": cond})}
        if hint:
            cmd["hint"] = hint
        with pytest.raises(pymongo.errors.OperationFailure) as e:
            client.t.command(cmd)
        assert e.value.code == 2 and msg in str(e.value), (cond, hint, e.value)
    with pytest.raises(pymongo.errors.OperationFailure) as e:
        client.t.command("count", "u", query=raw({"a": cond}))
    assert e.value.code == 2


def _assert_plans_agree(coll, f, hints):
    """`f` finds and counts the same documents as planned, with each hint,
    and as the collection scan; returns the scan's _ids."""
    want = sorted(d["_id"] for d in coll.find(f).hint([("$natural", 1)]))
    for hint in (None, *hints):
        cur = coll.find(f) if hint is None else coll.find(f).hint(hint)
        assert sorted(d["_id"] for d in cur) == want, (f, hint)
    assert coll.count_documents(f) == len(want), f
    return want


def test_missing_through_a_positional_path_is_not_bounded(client):
    # {"arr.0": null} matches {arr: [{x: 1}]}: through the array the matcher
    # reads the element's field "0", which is missing; the index on "arr.0"
    # keys the element itself ({x: 1}), never null for it. Found by a
    # randomized differential run: the index lost such documents.
    coll = client.t.pos
    docs = [{"_id": 1, "arr": []}, {"_id": 2, "arr": 5}, {"_id": 3}, {"_id": 4, "arr": [None]},
            {"_id": 5, "arr": [[]]}, {"_id": 6, "arr": [[None]]}, {"_id": 7, "arr": [1]},
            {"_id": 8, "arr": {"0": None}}, {"_id": 9, "arr": [{"x": 1}]},
            {"_id": 10, "arr": [[1, 2]]}, {"_id": 11, "arr": {"1": 2}},
            {"_id": 12, "arr": [[], 3]}, {"_id": 13, "c": [{"d": 1}, {"e": 2}]},
            {"_id": 14, "c": [{"e": 1}]}, {"_id": 15, "c": [[{"d": 3}]]}]
    coll.insert_many(docs)
    coll.create_index("arr.0")
    coll.create_index("c.0.d")
    filters = [{"arr.0": None}, {"arr.0": {"$in": [None, 0]}}, {"arr.0": {"$exists": False}},
               {"arr.0": {"$gte": MinKey()}}, {"arr.0": {"$lte": MaxKey()}},
               {"arr.0": {"$ne": 1}}, {"arr.0": {"$nin": [None, 5]}},
               {"c.0.d": None}, {"c.0.d": {"$in": [None, 1]}}, {"c.0.d": {"$gte": None, "$lt": 2}}]
    for f in filters:
        _assert_plans_agree(coll, f, ("arr.0_1", "c.0.d_1"))
    assert 9 in sorted(d["_id"] for d in coll.find({"arr.0": None}))


def test_an_equality_on_a_multikey_field_does_not_fix_its_sort_key(client):
    # {a: [0, 1.5]} matches {a: 1.5} and sorts by 0: the index {_id: -1,
    # a: 1} does not give the order {a: 1, _id: -1} (a SORT is needed).
    # Found by a randomized differential run (skip 3, limit 5 differed).
    coll = client.t.mk
    coll.insert_many([{"_id": 1, "a": 1.5}, {"_id": 2, "a": [0, 1.5]}, {"_id": 3, "a": 1.5},
                      {"_id": 4, "a": [1.5, 9]}])
    coll.create_index([("_id", -1), ("a", 1)])
    for hint in ([("$natural", 1)], "_id_-1_a_1"):
        got = [d["_id"] for d in coll.find({"a": 1.5}).sort([("a", 1), ("_id", -1)]).hint(hint)]
        assert got == [2, 4, 3, 1], hint
        got = [d["_id"] for d in coll.find({"a": 1.5}).sort([("a", -1), ("_id", -1)]).hint(hint)]
        assert got == [4, 3, 2, 1], hint


def test_an_array_equality_past_the_ranges_finds_its_keys(client):
    # {a: [true]} is two points, [true] and true; true sorts after arrays,
    # and the key check past b's range bisects the points: unsorted, it
    # missed every document. Found by a randomized differential run.
    coll = client.t.ae
    coll.insert_many([{"_id": i, "b": i, "a": [True]} for i in range(5)])
    coll.create_index([("b", 1), ("a", 1)])
    f = {"b": {"$gte": 0}, "a": [True]}
    assert sorted(d["_id"] for d in coll.find(f)) == list(range(5))
    assert coll.count_documents(f) == 5
    assert coll.update_many(f, {"$set": {"u": 1}}).matched_count == 5


# Documents that reach 42 through every mix of arrays and fields named "0"
# (the shapes mongod's numeric-component tests use), and a few more.
def _nested_42(depth):
    if depth == 0:
        return [42]
    return [[x] for x in _nested_42(depth - 1)] + [{"0": x} for x in _nested_42(depth - 1)]


def test_value_elem_match_through_a_position_is_not_bounded(client):
    # An index on "arr.0" keys the array the position names whole ({arr:
    # [[2]]} has the one key [2]), while {"arr.0": {$elemMatch: {$gt: 1}}}
    # is about that array's elements: bounds from the $elemMatch missed
    # both documents below. Found by a randomized differential run.
    coll = client.t.pem
    docs = [{"_id": 1, "arr": [[2]]}, {"_id": 2, "arr": [[0, 5]]}, {"_id": 3, "arr": [2]},
            {"_id": 4, "arr": {"0": [3]}}, {"_id": 5, "arr": [{"0": [4]}]},
            {"_id": 6, "c": {"d": [[7, 1]]}}, {"_id": 7, "c": [{"d": [[0], [9]]}]},
            {"_id": 8, "arr": [[{"x": 2}], [{"x": 0}]]}]
    docs += [{"_id": 100 + i, "a": v} for i, v in enumerate(v for n in range(4) for v in _nested_42(n))]
    indexes = ["arr.0", "c.d.0", "a.0", "a.0.0", "arr.0.x", "a.0.1"]
    for ix in indexes:
        coll.create_index(ix)
    refused = 0
    for d in docs:  # a field named "0" in an array's element is refused (16746)
        try:
            coll.insert_one(d)
        except WriteError as e:
            assert e.code == 16746, e
            refused += 1
    assert 3 < refused < len(docs) - 10, refused
    filters = [{"arr.0": {"$elemMatch": {"$gt": 1}}},
               {"arr.0": {"$all": [{"$elemMatch": {"$gt": 1}}]}},
               {"arr.0": {"$elemMatch": {"$in": [2, 5]}}},
               {"c.d.0": {"$elemMatch": {"$gte": 7}}},
               {"a.0": {"$elemMatch": {"$eq": 42}}}, {"a.0.0": {"$elemMatch": {"$eq": 42}}},
               {"a.0": {"$elemMatch": {"0": 42}}}, {"a.0": {"$all": [{"$elemMatch": {"0": 42}}]}},
               {"a.0": {"$elemMatch": {"$eq": [42]}}}, {"a.0.1": {"$elemMatch": {"$gt": 0}}},
               {"arr.0": {"$elemMatch": {"x": 2}}}, {"arr.0": {"$elemMatch": {"x": {"$gt": 1}}}},
               {"a.0": 42}, {"a.0.0": 42}, {"a.0": {"$gt": 41}}, {"a.0": {"$in": [41, 42]}}]
    for f in filters:
        _assert_plans_agree(coll, f, [ix + "_1" for ix in indexes])
    # the answers themselves, as mongod gives them
    ids = lambda f: sorted(d["_id"] for d in coll.find(f))  # noqa: E731
    assert ids({"arr.0": {"$elemMatch": {"$gt": 1}}}) == [1, 2, 4]
    assert ids({"c.d.0": {"$elemMatch": {"$gte": 7}}}) == [6]


def test_a_negated_null_through_a_position_is_not_bounded(client):
    # {"a.0": {$ne: null}}: an empty array at the position is keyed
    # undefined without making the index multikey, so the bounds left out
    # {a: [[]]}; and through an array of documents the matcher reads each
    # element's missing field "0" as null, which the key ({b: 3}) does not
    # show, so a COUNT_SCAN counted {a: [{b: 3}]}.  Found by a randomized
    # differential run.
    coll = client.t.pnn
    coll.insert_many([{"_id": 1, "a": [[]]}, {"_id": 2, "a": [5]}, {"_id": 3, "a": [{"b": 3}]},
                      {"_id": 4, "a": [1, []]}, {"_id": 5, "a": {"b": [[]]}},
                      {"_id": 6, "a": [[[]]]}, {"_id": 7, "c": [{"d": 7}]}, {"_id": 8},
                      {"_id": 9, "a": [None]}, {"_id": 10, "a": []}])
    indexes = ["a.0", "a.1", "a.b.0", "a.0.0", "c.0.d"]
    for ix in indexes:
        coll.create_index(ix)
    coll.create_index("a.0", sparse=True, name="a0_sparse")
    filters = [{p: cond} for p in ["a.0", "a.1", "a.b.0", "a.0.0", "c.0.d"]
               for cond in ({"$ne": None}, {"$nin": [None]}, {"$nin": [None, 5]},
                            {"$not": {"$lte": None}}, {"$not": {"$eq": None}})]
    for f in filters:
        want = _assert_plans_agree(coll, f, [ix + "_1" for ix in indexes])
        assert client.t.command("count", "pnn", query=f)["n"] == len(want), f
    ids = lambda f: sorted(d["_id"] for d in coll.find(f))  # noqa: E731
    # [] at the position is not null; {a: []} has no element 0 and no
    # element with a field "0": no value at all, which mongod's $ne takes
    assert ids({"a.0": {"$ne": None}}) == [1, 2, 4, 6, 10]


def test_a_partial_filter_on_nan_is_not_implied_by_a_range(client):
    # {a: {$gt: 5}} does not imply {a: {$gt: NaN}} (no number is above
    # NaN): the partial index holds none of the query's documents, and
    # planning the query over it found nothing.
    coll = client.t.pnan
    coll.insert_many([{"_id": 1, "a": 6}, {"_id": 2, "a": float("nan")}, {"_id": 3, "a": 4}])
    for i, op in enumerate(["$gt", "$gte", "$lt", "$lte"]):
        coll.create_index("a", name=f"p{i}", partialFilterExpression={"a": {op: float("nan")}})
    client.t.pnan2.insert_many([{"_id": 1, "a": 6}, {"_id": 2, "a": bson.Decimal128("NaN")}])
    client.t.pnan2.create_index("a", partialFilterExpression={"a": {"$gte": bson.Decimal128("NaN")}})
    assert [d["_id"] for d in client.t.pnan2.find({"a": {"$gte": 5}})] == [1]
    for f, want in [({"a": {"$gt": 5}}, [1]), ({"a": {"$gte": 4}}, [1, 3]), ({"a": {"$lt": 5}}, [3]),
                    ({"a": {"$lte": 6}}, [1, 3])]:
        assert sorted(d["_id"] for d in coll.find(f)) == want, f
        assert coll.count_documents(f) == len(want), f


def test_subnormal_doubles_are_found_and_sorted_through_an_index(client):
    """Subnormal doubles (and a decimal below the smallest) are keyed in
    their order: before keyenc.c made the mantissa odd, 1e-323 was keyed
    above 1.5e-323, so a hinted range missed it and the sort was wrong."""
    coll = client.t.subnormal
    coll.create_index("a")
    tiny = 5e-324
    coll.insert_many([{"_id": 1, "a": 1e-323}, {"_id": 2, "a": 1.5e-323}, {"_id": 3, "a": tiny},
                      {"_id": 4, "a": Decimal128("4.940656458412465441765687928682213E-324")},
                      {"_id": 5, "a": -1e-323}, {"_id": 6, "a": 2.0 ** -1022 - tiny}])
    assert _assert_plans_agree(coll, {"a": {"$lt": 1.5e-323}}, ["a_1"]) == [1, 3, 4, 5]
    assert _assert_plans_agree(coll, {"a": {"$lte": tiny}}, ["a_1"]) == [3, 4, 5]
    assert _assert_plans_agree(coll, {"a": {"$gt": 1e-323}}, ["a_1"]) == [2, 6]
    for hint in ("a_1", [("$natural", 1)]):
        got = [d["_id"] for d in coll.find().sort([("a", 1), ("_id", 1)]).hint(hint)]
        assert got == [5, 4, 3, 1, 2, 6], hint
