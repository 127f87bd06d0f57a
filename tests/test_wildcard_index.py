"""Wildcard indexes (issue 49; csrc/query/index_wildcard.c) against mongod
7.0: keys compared with a Python model of mongod's WildcardKeyGenerator,
createIndexes' errors and codes, the planner's use of them and explain's
shapes, randomized differential queries (the index, hinted, and a
collection scan give the same documents), and kill -9 during a build."""
from __future__ import annotations

import random
import re
import struct

import bson
import pymongo
import pytest
from bson import SON, Regex
from pymongo.errors import OperationFailure

from conftest import build_killed_midway
from multifora import _core

UNDEF = object()  # BSON undefined (an empty array's key), which pymongo cannot encode


# ------------------------------------------------------ the key model


def _elem(key: str, v) -> bytes:
    if v is UNDEF:
        return b"\x06" + key.encode() + b"\x00"
    return bson.encode({key: v})[4:-1]


def _raw(values) -> bytes:
    body = b"".join(_elem(str(i), v) for i, v in enumerate(values))
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


def enc(values, desc=None):
    desc = desc or [False] * len(values)
    return _core._key_encode(_raw(values), "".join("1" if d else "0" for d in desc))


def model_leaves(doc, skip_id=True):
    """mongod's WildcardKeyGenerator::_traverseWildcard: (path, value)
    leaves and the paths that hold arrays."""
    leaves, multikey = [], set()

    def walk(obj, is_array, path):
        items = enumerate(obj) if is_array else obj.items()
        for k, v in items:
            if not is_array and "." in k:
                continue
            p = path if is_array else (f"{path}.{k}" if path else k)
            if isinstance(v, list):
                if is_array:
                    leaves.append((p, v))
                    continue
                multikey.add(p)
                if not v:
                    leaves.append((p, UNDEF))
                else:
                    walk(v, True, p)
            elif isinstance(v, dict):
                if not v:
                    leaves.append((p, v))
                else:
                    walk(v, False, p)
            else:
                leaves.append((p, v))

    top = {k: v for k, v in doc.items() if not (skip_id and k == "_id")}
    walk(top, False, "")
    return leaves, multikey


def model_keys(doc, desc=False):
    leaves, multikey = model_leaves(doc)
    ks = {enc([p, v], [False, desc]) for p, v in leaves}
    ks |= {enc([1, p]) for p in multikey}
    return sorted(ks)


def spec(key, **opts):
    d = SON([("v", 2), ("key", SON(key)), ("name", "w")])
    d.update(opts)
    return bson.encode(d)


def server_keys(key, doc, **opts):
    ks, mk = _core._index_keys(spec(key, **opts), bson.encode(doc))
    return ks, mk


def rand_value(rng, depth):
    r = rng.random()
    if depth < 3 and r < 0.18:
        return {rng.choice("abcd"): rand_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    if depth < 3 and r < 0.32:
        return [rand_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return rng.choice([rng.randint(-3, 3), rng.randint(-3, 3) + 0.5, rng.choice("xyz"),
                       None, True, "xa", "xb"])


def rand_doc(rng, i):
    d = {"_id": i}
    for _ in range(rng.randint(0, 4)):
        d[rng.choice("abcde")] = rand_value(rng, 0)
    return d


# ------------------------------------------------------------ keys


def test_keys_targeted():
    doc = {"_id": 7, "a": 1, "b": {"c": "s", "d": [1, [2, 3], {"e": 4}, []]}, "f": {}, "g": [],
           "h.i": 5}
    ks, mk = server_keys([("$**", 1)], doc)
    assert ks == model_keys(doc)
    assert mk != 0  # b.d and g are arrays
    leaves, multikey = model_leaves(doc)
    assert ("b.d", [2, 3]) in leaves and ("b.d.e", 4) in leaves and ("b.d", UNDEF) not in leaves
    assert ("f", {}) in leaves and ("g", UNDEF) in leaves and multikey == {"b.d", "g"}
    # no array: no multikey bit, no metadata key
    ks, mk = server_keys([("$**", 1)], {"a": {"b": 1}})
    assert ks == [enc(["a.b", 1])] and mk == 0
    # descending: the value's encoding inverted, the path's not
    ks, _ = server_keys([("$**", -1)], {"a": 2})
    assert ks == [enc(["a", 2], [False, True])]


def test_keys_of_a_subtree_and_projections():
    doc = {"_id": 1, "a": {"b": 1, "c": [2, {"d": 3}]}, "x": 9, "ab": 4}
    ks, _ = server_keys([("a.$**", 1)], doc)
    sub = {"a": doc["a"]}
    assert ks == model_keys(sub)
    ks, _ = server_keys([("$**", 1)], doc, wildcardProjection={"a.b": 1, "x": 1})
    assert ks == model_keys({"a": {"b": 1}, "x": 9})
    ks, _ = server_keys([("$**", 1)], doc, wildcardProjection={"a": 0})
    assert ks == model_keys({"x": 9, "ab": 4})
    # _id only when the projection includes it
    ks, _ = server_keys([("$**", 1)], doc, wildcardProjection={"_id": 1, "x": 1})
    assert ks == sorted({enc(["_id", 1]), enc(["x", 9])})
    ks, _ = server_keys([("$**", 1)], {"_id": {"k": 1}, "x": 2})
    assert ks == [enc(["x", 2])]


def test_keys_of_a_compound_wildcard_index():
    key = [("r", 1), ("$**", 1)]
    ks, _ = server_keys(key, {"r": 5, "a": 1, "b": [2]}, wildcardProjection={"r": 0})
    want = {enc([5, "a", 1]), enc([5, "b", 2]), enc([bson.MinKey(), 1, "b"])}
    assert ks == sorted(want)
    # a document without any leaf: one key, $_path and value MinKey
    ks, _ = server_keys(key, {"r": 5}, wildcardProjection={"r": 0})
    assert ks == [enc([5, bson.MinKey(), bson.MinKey()])]
    with pytest.raises(_core.MultiforaError):
        server_keys(key, {"r": [1, 2], "a": 1}, wildcardProjection={"r": 0})


def test_keys_random_against_the_model():
    rng = random.Random(49)
    for i in range(600):
        doc = rand_doc(rng, i)
        ks, mk = server_keys([("$**", 1)], doc)
        assert ks == model_keys(doc), doc
        assert (mk != 0) == bool(model_leaves(doc)[1]), doc


# ------------------------------------------------- createIndexes errors


ERRORS = [
    # (key, options, code, message fragment)
    ({"$**": 1}, {"unique": True}, 67, "Index type 'wildcard' does not support the unique option"),
    ({"$**": 1}, {"sparse": True}, 67, "Index type 'wildcard' does not support the sparse option"),
    ({"$**": 1}, {"expireAfterSeconds": 10}, 67, "Index type 'wildcard' cannot be a TTL index"),
    ({"a.$**": 1}, {"wildcardProjection": {"b": 1}}, 9,
     "The field 'wildcardProjection' is only allowed when 'key' is {\"$**\": ±1}"),
    ({"a": 1}, {"wildcardProjection": {"b": 1}}, 2,
     "The field 'wildcardProjection' is only allowed in 'wildcard' indexes"),
    ({"$**": 1}, {"wildcardProjection": {}}, 9, "The 'wildcardProjection' field can't be an empty object"),
    ({"$**": 1}, {"wildcardProjection": 1}, 14, "The field 'wildcardProjection' must be a non-empty object"),
    ({"$**": 1}, {"wildcardProjection": {"a": 1, "b": 0}}, 31254, "Failed to parse projection: wildcardProjection"),
    ({"$**": "wildcard"}, {}, 67, "must be a non-zero number, not a string"),
    ({"a.$**": 1, "b.$**": 1}, {}, 7246201, "Index Key can contain only one wildcard index field"),
    ({"a.b": 1, "a.$**": 1}, {}, 7246204, "should not overlap"),
    ({"r": 1, "$**": 1}, {}, 67, "Compound wildcard indexes on all fields must also specify 'wildcardProjection'"),
    ({"r": 1, "$**": 1}, {"wildcardProjection": {"r": 1}}, 7246208, "overlapping fields"),
    ({"r": 1, "$**": 1}, {"wildcardProjection": {"s": 0}}, 7246209, "must exclude all regular index fields"),
    ({"r": 1, "$**": 1}, {"wildcardProjection": {"a": 1, "a.b": 1}}, 7246200, "cannot overlap"),
    ({"r": 1, "$**": 1}, {"wildcardProjection": {"a": 1, "r": 0}}, 7246211, "Inclusion and exclusion"),
    ({"$**": 1, "r": 1}, {"expireAfterSeconds": 1}, 67, "TTL indexes are single-field indexes"),
]


@pytest.mark.parametrize("key,opts,code,fragment", ERRORS)
def test_create_errors(client, key, opts, code, fragment):
    with pytest.raises(OperationFailure) as e:
        client.t.w.create_index(list(key.items()), name="w", **opts)
    assert e.value.code == code, e.value.details
    assert fragment in e.value.details["errmsg"], e.value.details
    assert "w" not in [ix["name"] for ix in client.t.w.list_indexes()]


def test_created_indexes_are_listed_as_given(client):
    c = client.t.w
    assert c.create_index([("$**", 1)]) == "$**_1"
    assert c.create_index([("a.$**", -1)]) == "a.$**_-1"
    c.create_index([("$**", 1)], name="proj", wildcardProjection={"a": 1, "_id": 1})
    c.create_index([("r", 1), ("$**", 1)], wildcardProjection={"r": 0})
    got = {ix["name"]: ix for ix in c.list_indexes()}
    assert got["proj"]["wildcardProjection"] == {"a": 1, "_id": 1}
    assert got["r_1_$**_1"]["key"] == SON([("r", 1), ("$**", 1)])


# --------------------------------------------------- planner and explain


def winning(coll, filt, **kw):
    plan = coll.find(filt, **kw).explain()["queryPlanner"]["winningPlan"]
    return plan


def ixscan(plan):
    while plan.get("stage") != "IXSCAN":
        if "inputStage" not in plan:
            return None
        plan = plan["inputStage"]
    return plan


@pytest.fixture
def wcoll(client):
    c = client.t.w
    c.insert_many([{"_id": i, "a": i, "b": {"c": i % 3, "d": [i, i + 1]}, "s": f"s{i % 5}",
                    "o": {} if i % 2 else {"p": i}} for i in range(40)])
    c.create_index([("$**", 1)])
    return c


def test_explain_equality(wcoll):
    ix = ixscan(winning(wcoll, {"b.c": 1}))
    assert ix["keyPattern"] == {"$_path": 1, "b.c": 1} and ix["indexName"] == "$**_1"
    assert ix["indexBounds"] == {"$_path": ['["b.c", "b.c"]'], "b.c": ["[1, 1]"]}
    assert ix["isMultiKey"] is False


def test_explain_multikey_path_and_range(wcoll):
    ix = ixscan(winning(wcoll, {"b.d": {"$gt": 5, "$lte": 7}}))
    assert ix["keyPattern"] == {"$_path": 1, "b.d": 1} and ix["isMultiKey"] is True
    assert ix["multiKeyPaths"]["$_path"] == [] and ix["multiKeyPaths"]["b.d"] != []
    assert ix["indexBounds"]["$_path"] == ['["b.d", "b.d"]']


def test_explain_exists_reads_subpaths(wcoll):
    ix = ixscan(winning(wcoll, {"o": {"$exists": True}}))
    assert ix["indexBounds"] == {"$_path": ['["o", "o"]', '["o.", "o/")'],
                                 "o": ["[MinKey, MaxKey]"]}
    assert ix["isMultiKey"] is True  # a document under several paths, returned once
    assert wcoll.count_documents({"o": {"$exists": True}}) == 40


def test_explain_in_and_prefix_regex(wcoll):
    ix = ixscan(winning(wcoll, {"a": {"$in": [3, 4]}}))
    assert ix["indexBounds"]["a"] == ["[3, 3]", "[4, 4]"]
    ix = ixscan(winning(wcoll, {"s": Regex("^s1")}))
    assert ix["indexBounds"]["$_path"] == ['["s", "s"]']
    assert ix["indexBounds"]["s"] == ['["s1", "s2")', "[/^s1/, /^s1/]"]


@pytest.mark.parametrize("filt", [
    {"a": None}, {"a": {"$exists": False}}, {"a": {"$ne": 3}}, {"a": {"$nin": [1]}},
    {"o": {"p": 2}}, {"b.d": [2, 3]}, {"a": {"$not": {"$gt": 3}}}, {"s": Regex("1$")},
    {"_id": {"$gt": 3}, "zz": {"$exists": False}},
])
def test_refused_queries(wcoll, filt):
    ix = ixscan(winning(wcoll, filt))
    assert ix is None or ix["indexName"] != "$**_1", ix


def test_sort_only_on_a_path_that_is_not_multikey(wcoll):
    plan = winning(wcoll, {"a": {"$gt": 30}}, sort=[("a", 1)])
    assert plan["stage"] != "SORT" and ixscan(plan)["indexName"] == "$**_1"
    plan = winning(wcoll, {"b.d": {"$gt": 30}}, sort=[("b.d", 1)])
    assert plan["stage"] == "SORT"


def test_hints(wcoll):
    for hint in ("$**_1", [("$**", 1)]):
        got = list(wcoll.find({"a": {"$lt": 3}}).hint(hint))
        assert sorted(d["_id"] for d in got) == [0, 1, 2]
    with pytest.raises(OperationFailure) as e:
        list(wcoll.find({}).hint("$**_1"))
    assert e.value.code == 2


def test_hint_by_a_key_pattern_two_indexes_share(client):
    c = client.t.w
    c.insert_many([{"_id": i, "a": i, "b": i} for i in range(5)])
    c.create_index([("$**", 1)], name="pa", wildcardProjection={"a": 1})
    c.create_index([("$**", 1)], name="pb", wildcardProjection={"b": 1})
    with pytest.raises(OperationFailure) as e:
        list(c.find({"a": 1}).hint([("$**", 1)]))
    assert e.value.code == 27 and "Hint matched multiple indexes" in str(e.value)
    assert [d["_id"] for d in c.find({"a": 1}).hint("pa")] == [1]
    assert ixscan(winning(c, {"b": 2}))["indexName"] == "pb"


def test_subtree_and_projection_serve_their_paths_only(client):
    c = client.t.w
    c.insert_many([{"_id": i, "a": {"b": i}, "x": i} for i in range(10)])
    c.create_index([("a.$**", 1)])
    assert ixscan(winning(c, {"a.b": 3}))["indexName"] == "a.$**_1"
    assert ixscan(winning(c, {"x": 3})) is None
    c.drop_indexes()
    c.create_index([("$**", 1)], wildcardProjection={"a": 0})
    assert ixscan(winning(c, {"a.b": 3})) is None
    assert ixscan(winning(c, {"x": 3}))["indexName"] == "$**_1"
    assert ixscan(winning(c, {"_id": {"$gt": 3}})) is None or \
        ixscan(winning(c, {"_id": {"$gt": 3}}))["indexName"] == "_id_"


def test_compound_wildcard_prefix_and_path(client):
    c = client.t.w
    c.insert_many([{"_id": i, "r": i % 4, "a": i} for i in range(40)] +
                  [{"_id": 100 + i, "r": i % 4} for i in range(8)])
    c.create_index([("r", 1), ("$**", 1)], wildcardProjection={"r": 0})
    ix = ixscan(winning(c, {"r": 1, "a": {"$gt": 10}}))
    assert ix["keyPattern"] == {"r": 1, "$_path": 1, "a": 1}
    assert ix["indexBounds"]["$_path"] == ['["a", "a"]']
    got = sorted(d["_id"] for d in c.find({"r": 1, "a": {"$gt": 10}}))
    assert got == [i for i in range(11, 40) if i % 4 == 1]
    # the regular prefix alone: documents without any leaf too
    ix = ixscan(winning(c, {"r": 2}))
    assert ix["keyPattern"] == {"r": 1, "$_path": 1}
    got = sorted(d["_id"] for d in c.find({"r": 2}))
    assert got == [i for i in range(40) if i % 4 == 2] + [102, 106]
    assert c.count_documents({"r": 2}) == 12


def test_compound_path_without_a_usable_condition(client):
    # {r: 1, a: {$ne: 3}}: the virtual index of `a` has no bounds of its
    # own; read, it would return each document once per leaf (found by
    # hand: 8 documents for 4).  The regular prefix alone serves it.
    c = client.t.w
    c.insert_many([{"_id": i, "r": i % 2, "a": i, "b": i} for i in range(10)])
    c.create_index([("r", 1), ("$**", 1)], wildcardProjection={"r": 0})
    q = {"r": 1, "a": {"$ne": 3}}
    assert sorted(d["_id"] for d in c.find(q)) == [1, 5, 7, 9]
    assert sorted(d["_id"] for d in c.find(q).hint("r_1_$**_1")) == [1, 5, 7, 9]
    assert c.count_documents(q) == 4
    assert ixscan(winning(c, q))["keyPattern"] == {"r": 1, "$_path": 1}


def test_writes_keep_the_index(client):
    c = client.t.w
    c.create_index([("$**", 1)])
    c.insert_one({"_id": 1, "a": {"b": 1}})
    c.update_one({"_id": 1}, {"$set": {"a.b": [5, 6], "c": 2}})
    assert [d["_id"] for d in c.find({"a.b": 6})] == [1]
    assert list(c.find({"a.b": 1})) == []
    c.delete_one({"_id": 1})
    assert list(c.find({"c": 2})) == []
    v = client.t.command("validate", "w")
    assert v["valid"] is True and v["keysPerIndex"]["$**_1"] == 0


# ------------------------------------------------------- differential


def rand_query(rng):
    path = rng.choice(["a", "b", "c", "a.a", "a.b", "b.c", "c.d", "a.b.c", "d.a", "e", "a.0"])
    v = rand_value(rng, 3)
    kind = rng.randrange(12)
    if kind == 0:
        return {path: v}
    if kind == 1:
        return {path: {"$gt" if rng.random() < 0.5 else "$lte": v}}
    if kind == 2:
        return {path: {"$in": [rand_value(rng, 3) for _ in range(rng.randint(1, 3))]}}
    if kind == 3:
        return {path: {"$exists": rng.random() < 0.7}}
    if kind == 4:
        return {path: Regex("^x")}
    if kind == 5:
        return {path: {"$gte": rng.randint(-3, 0), "$lt": rng.randint(0, 3)}}
    if kind == 6:
        return {"$and": [rand_query(rng), rand_query(rng)]}
    if kind == 7:
        return {"$or": [rand_query(rng), rand_query(rng)]}
    if kind == 8:
        return {path: {"$ne": v}}
    if kind == 9:
        return {path: {}} if rng.random() < 0.5 else {path: {"a": 1}}
    if kind == 10:
        return {path: {"$elemMatch": {"$gt": 0}}}
    return {path: rng.choice([1, "x", None, [1], 0.5])}


@pytest.mark.parametrize("key,opts", [
    ([("$**", 1)], {}), ([("a.$**", 1)], {}), ([("$**", -1)], {"wildcardProjection": {"a": 0}}),
    ([("r", 1), ("$**", 1)], {"wildcardProjection": {"r": 0}}),
    ([("a.$**", 1), ("r", -1)], {})])
def test_differential(client, key, opts):
    rng = random.Random(f"49-{key}-{opts}")
    docs = [rand_doc(rng, i) for i in range(400)]
    compound = len(key) > 1
    if compound:
        for d in docs:
            d["r"] = rng.randint(0, 3)
    plain, wild = client.t.plain, client.t.wild
    plain.insert_many(docs)
    wild.insert_many(docs)
    wild.create_index(key, name="w", **opts)
    used = 0
    for _ in range(300):
        q = rand_query(rng)
        d = rng.choice(docs)
        if rng.random() < 0.2 and len(d) > 1:
            # a value the data holds: objects and arrays matched whole
            k = rng.choice([k for k in d if k != "_id"])
            q = {k: d[k]}
        if compound and rng.random() < 0.5:
            q = {"r": rng.randint(0, 3), **q} if "r" not in q else q
        want = sorted(d["_id"] for d in plain.find(q))
        got = sorted(d["_id"] for d in wild.find(q))
        assert got == want, q
        assert wild.count_documents(q) == len(want), q
        ix = ixscan(wild.find(q).explain()["queryPlanner"]["winningPlan"])
        if ix and ix["indexName"] == "w":
            used += 1
        try:
            hinted = sorted(d["_id"] for d in wild.find(q).hint("w"))
        except OperationFailure as e:
            assert e.code == 2, q  # no path of the query the index serves
            continue
        assert hinted == want, q
    assert used > 40


# ------------------------------------------------------------ kill -9


def test_build_killed_midway_leaves_all_or_nothing(tmp_path):
    docs = [{"_id": k * 5000 + i, "a": i, "b": {"c": -i, "d": [i, "x"]}}
            for k in range(4) for i in range(5000)]
    s = build_killed_midway(tmp_path / "db", docs, [("$**", 1)])
    try:
        c = s.client()
        v = c.t.command("validate", "c")
        assert v["valid"] is True, v
        kpi = v["keysPerIndex"]
        # 4 leaves per document (a, b.c, b.d twice) and b.d's metadata key
        assert kpi in ({"_id_": 20000}, {"_id_": 20000, "$**_1": 100000}), kpi
        if "$**_1" in kpi:
            assert c.t.c.count_documents({"b.c": -7}) == 4
    finally:
        s.stop()


def test_return_key(client):
    c = client.t.w
    c.insert_many([{"_id": 1, "a": {"b": [3, 4]}, "r": 2}, {"_id": 2, "a": {"b": 5}, "r": 2}])
    c.create_index([("$**", 1)])
    got = list(c.find({"a.b": {"$gte": 4}}, return_key=True))  # in key order
    assert got == [{"$_path": "a.b", "a.b": 4}, {"$_path": "a.b", "a.b": 5}]
    c.drop_indexes()
    c.create_index([("r", 1), ("$**", 1)], wildcardProjection={"r": 0})
    got = list(c.find({"r": 2, "a.b": 5}, return_key=True))
    assert got == [{"r": 2, "$_path": "a.b", "a.b": 5}]
