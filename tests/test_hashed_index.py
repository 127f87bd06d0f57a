"""Hashed indexes (issue 49): mongod's hash of a BSON element, the keys,
the bounds (equality and $in only), mongod's refusals, and a build killed
before it commits.

The hash is checked three ways: against values mongod itself printed (its
own unit test's 42, the manual's "string to hash", and values from its
jstests), against an independent Python model of BSONElementHasher::hash64
(MD5 over the canonical type, the squashed number or the value's BSON
bytes, nested elements with their names), and through the index keys that
returnKey shows."""
from __future__ import annotations

import datetime
import hashlib
import math
import random
import struct

import bson
import pymongo
import pytest
from bson import Binary, Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from pymongo.errors import OperationFailure, WriteError

import multifora
from conftest import build_killed_before_commit

# ----------------------------------------------------------- the model

CANONICAL = {1: 10, 2: 15, 3: 20, 4: 25, 5: 30, 6: 0, 7: 35, 8: 40, 9: 45, 10: 5, 11: 50,
             12: 55, 13: 60, 14: 15, 15: 65, 16: 10, 17: 47, 18: 10, 19: 10, 0xFF: -1, 0x7F: 127}


def _value_size(t, raw, i):
    fixed = {1: 8, 7: 12, 8: 1, 9: 8, 16: 4, 17: 8, 18: 8, 19: 16, 6: 0, 10: 0, 0xFF: 0,
             0x7F: 0}
    if t in fixed:
        return fixed[t]
    if t in (2, 13, 14):
        return 4 + struct.unpack_from("<i", raw, i)[0]
    if t in (3, 4, 15):
        return struct.unpack_from("<i", raw, i)[0]
    if t == 5:
        return 5 + struct.unpack_from("<i", raw, i)[0]
    if t == 11:
        a = raw.index(b"\0", i)
        return raw.index(b"\0", a + 1) + 1 - i
    if t == 12:
        return 4 + struct.unpack_from("<i", raw, i)[0] + 12
    raise AssertionError(t)


def _number(t, value: bytes) -> int:
    if t == 16:
        return struct.unpack("<i", value)[0]
    if t == 18:
        return struct.unpack("<q", value)[0]
    if t == 1:
        d = struct.unpack("<d", value)[0]
        if math.isnan(d):
            return 0
        if d == 2.0 ** 63:
            return -(2 ** 63)
        if not d < 2.0 ** 63:
            return 2 ** 63 - 1
        if d < -(2.0 ** 63):
            return -(2 ** 63)
        return int(d)  # toward zero
    dec = Decimal128.from_bid(value).to_decimal()
    if dec.is_nan():
        return 0
    if dec > 2 ** 63 - 1:
        return 2 ** 63 - 1
    if dec < -(2 ** 63):
        return -(2 ** 63)
    return int(dec.to_integral_value(rounding="ROUND_HALF_EVEN"))


def _stream(t, value: bytes, name: bytes | None) -> bytes:
    out = struct.pack("<i", CANONICAL[t]) + (name or b"")
    if t in (1, 16, 18, 19):
        return out + struct.pack("<q", _number(t, value))
    if t in (3, 4):
        return out + _members(value) + struct.pack("<i", 0)
    if t == 15:
        code_len = struct.unpack_from("<i", value, 4)[0]
        code = value[8:8 + code_len]
        return out + code + _members(value[8 + code_len:]) + struct.pack("<i", 0)
    return out + value


def _members(doc: bytes) -> bytes:
    out = b""
    i = 4
    while doc[i] != 0:
        t = doc[i]
        end = doc.index(b"\0", i + 1)
        name = doc[i + 1:end + 1]
        i = end + 1
        size = _value_size(t, doc, i)
        out += _stream(t, doc[i:i + size], name)
        i += size
    return out


def model_hash(value) -> int:
    raw = bson.encode({"": value})
    t = raw[4]
    size = _value_size(t, raw, 6)
    stream = struct.pack("<i", 0) + _stream(t, raw[6:6 + size], None)
    return struct.unpack("<q", hashlib.md5(stream).digest()[:8])[0]


# ------------------------------------------------------------ fixtures


@pytest.fixture
def db(tmp_path):
    c = multifora.open(str(tmp_path / "db"), replica_set=None)
    yield c.t
    c.close()


def server_hash(db, value, missing=False):
    doc = {} if missing else {"v": value}
    out = list(db.aggregate([{"$documents": [doc]},
                             {"$project": {"_id": 0, "h": {"$toHashedIndexKey": "$v"}}}]))
    return out[0]["h"]


# ----------------------------------------------------------- the hash


def test_values_mongod_printed(db):
    # hasher.cpp's own startup test, the manual's example, and jstests'.
    assert server_hash(db, 42) == -944302157085130861
    assert server_hash(db, "string to hash") == 763543691661428748
    assert server_hash(db, "hello") == 5347277839332858538
    assert server_hash(db, None) == server_hash(db, None, missing=True) == 2338878944348059895
    assert model_hash(42) == -944302157085130861  # the model agrees with mongod too


def test_numbers_are_squashed_to_int64_as_mongod(db):
    one = server_hash(db, 1)
    for v in (1.0, 1.9, Int64(1), Decimal128("1"), Decimal128("1.4"), Decimal128("0.5000001")):
        assert server_hash(db, v) == one, v
    assert server_hash(db, Decimal128("2.5")) == server_hash(db, 2)   # half to even
    assert server_hash(db, Decimal128("3.5")) == server_hash(db, 4)
    assert server_hash(db, -1.9) == server_hash(db, -1)               # toward zero
    assert server_hash(db, float("nan")) == server_hash(db, 0) == server_hash(db, Decimal128("NaN"))
    assert server_hash(db, 2.0 ** 63) == server_hash(db, Int64(-(2 ** 63)))  # kept overflow
    assert server_hash(db, float("inf")) == server_hash(db, Int64(2 ** 63 - 1))
    assert server_hash(db, float("-inf")) == server_hash(db, Int64(-(2 ** 63)))
    assert server_hash(db, Decimal128("1E+30")) == server_hash(db, Int64(2 ** 63 - 1))


def _random_value(rng, depth=0):
    kinds = ["int", "long", "double", "dec", "str", "bool", "null", "date", "oid", "bin",
             "ts", "regex", "code", "minkey", "maxkey"]
    if depth < 2:
        kinds += ["doc", "arr", "cws"]
    k = rng.choice(kinds)
    if k == "int":
        return rng.randint(-2 ** 31, 2 ** 31 - 1)
    if k == "long":
        return Int64(rng.randint(-2 ** 63, 2 ** 63 - 1))
    if k == "double":
        return rng.choice([rng.uniform(-1e6, 1e6), rng.uniform(-1e20, 1e20), -0.0, 0.5,
                           float("inf"), float("nan"), 2.0 ** 63, -(2.0 ** 63)])
    if k == "dec":
        return Decimal128(rng.choice(["2.5", "-3.5", "1E+40", "-0", "123.456", "NaN", "Infinity"]))
    if k == "str":
        return "".join(rng.choice("aZ é漢\u00df0") for _ in range(rng.randint(0, 6)))
    if k == "bool":
        return rng.random() < 0.5
    if k == "null":
        return None
    if k == "date":
        return datetime.datetime(2020, 1, 1) + datetime.timedelta(seconds=rng.randint(0, 10 ** 8))
    if k == "oid":
        return ObjectId()
    if k == "bin":
        return Binary(bytes(rng.randrange(256) for _ in range(rng.randint(0, 5))),
                      rng.choice([0, 4, 128]))
    if k == "ts":
        return Timestamp(rng.randint(0, 2 ** 31), rng.randint(0, 100))
    if k == "regex":
        return Regex("^a.c", rng.choice(["", "i", "ms"]))
    if k == "code":
        return Code("function() { return 1; }")
    if k == "minkey":
        return MinKey()
    if k == "maxkey":
        return MaxKey()
    if k == "doc":
        return {f"f{i}": _random_value(rng, depth + 1) for i in range(rng.randint(0, 3))}
    if k == "arr":
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return Code("x + y", {"x": _random_value(rng, depth + 1)})


def test_every_type_against_the_model(db):
    rng = random.Random(49)
    values = [_random_value(rng) for _ in range(300)]
    docs = [{"_id": i, "v": v} for i, v in enumerate(values)]
    db.vals.insert_many(docs)
    got = {d["_id"]: d["h"] for d in db.vals.aggregate(
        [{"$project": {"h": {"$toHashedIndexKey": "$v"}}}])}
    for i, v in enumerate(values):
        assert got[i] == model_hash(v), (i, v)


def test_toHashedIndexKey_takes_one_operand_an_array_included(db):
    assert server_hash(db, [1, 2]) == model_hash([1, 2])
    out = list(db.aggregate([{"$documents": [{}]},
                             {"$project": {"_id": 0, "h": {"$toHashedIndexKey": [1, "$x"]}}}]))
    assert out[0]["h"] == model_hash([1, None])  # a missing element of an array is null


# ---------------------------------------------------------- the index


def keys_of(coll, index="a_hashed"):
    return sorted(coll.find({}, return_key=True).hint(index), key=repr)


def test_keys_are_the_models(db):
    rng = random.Random(7)
    docs = []
    for i in range(200):
        d = {"_id": i}
        r = rng.random()
        if r < 0.8:
            d["a"] = _random_value(rng, depth=2) if rng.random() < 0.5 else {"x": rng.randint(0, 5)}
        elif r < 0.9:
            d["a"] = None
        docs.append(d)
    db.c.create_index([("a", "hashed")])
    db.c.insert_many(docs)
    want = sorted(({"a": model_hash(d.get("a"))} for d in docs), key=repr)
    assert keys_of(db.c) == want
    v = db.command("validate", "c")
    assert v["valid"] and v["keysPerIndex"]["a_hashed"] == 200, v


def test_compound_keys_and_sparse(db):
    db.c.create_index([("x.y", "hashed"), ("z", -1)], sparse=True)
    db.c.insert_many([{"_id": 1}, {"_id": 2, "z": 1}, {"_id": 3, "x": {"y": "q"}},
                      {"_id": 4, "x": 5, "z": "s"}])
    got = keys_of(db.c, "x.y_hashed_z_-1")
    # _id 1 has neither field: a sparse index skips it; a missing field is null
    assert got == sorted([{"x.y": model_hash(None), "z": 1},
                          {"x.y": model_hash("q"), "z": None},
                          {"x.y": model_hash(None), "z": "s"}], key=repr)


def test_arrays_are_refused_with_16766(db):
    db.c.create_index([("a.b", "hashed")])
    for doc, path in (({"a": [1]}, "a"), ({"a": {"b": []}}, "a.b"), ({"a": [{"b": 1}]}, "a")):
        with pytest.raises(WriteError) as e:
            db.c.insert_one(doc)
        assert e.value.code == 16766
        assert e.value.details["errmsg"] == ("Error: hashed indexes do not currently support "
                                             f"array values. Found array at path: {path}")
    db.c.insert_one({"_id": 1, "a": {"b": {"c": [1, 2]}}})  # an array inside the value is hashed
    with pytest.raises(WriteError) as e:
        db.c.update_one({"_id": 1}, {"$set": {"a.b": [1]}})
    assert e.value.code == 16766
    assert db.c.find_one({"_id": 1})["a"] == {"b": {"c": [1, 2]}}
    assert db.c.count_documents({}) == 1


def test_a_build_over_an_array_fails_and_leaves_no_index(db):
    db.c.insert_many([{"a": 1}, {"a": [2]}])
    with pytest.raises(OperationFailure) as e:
        db.c.create_index([("a", "hashed")])
    assert e.value.code == 16766
    assert [i["name"] for i in db.c.list_indexes()] == ["_id_"]


def test_mongods_refusals(db):
    with pytest.raises(OperationFailure) as e:
        db.c.create_index([("a", "hashed"), ("b", "hashed")])
    assert e.value.code == 31303
    assert e.value.details["errmsg"] == ("A maximum of one index field is allowed to be hashed "
                                         "but found 2 for 'key' { a: \"hashed\", b: \"hashed\" }")
    with pytest.raises(OperationFailure) as e:
        db.c.create_index([("a", "hashed")], unique=True)
    assert e.value.code == 16764
    assert e.value.details["errmsg"] == ("Currently hashed indexes cannot guarantee "
                                         "uniqueness. Use a regular index.")
    with pytest.raises(OperationFailure) as e:
        db.c.create_index([("a", "hashed"), ("b", "2dsphere")])
    assert e.value.code == 67  # one plugin per index
    assert [i["name"] for i in db.c.list_indexes()] == []  # nothing made, nor the collection
    db.c.create_index([("a", 1), ("b", "hashed"), ("c", -1)])  # compound: allowed
    spec = [i for i in db.c.list_indexes() if i["name"] == "a_1_b_hashed_c_-1"][0]
    assert spec["key"] == {"a": 1, "b": "hashed", "c": -1}


# -------------------------------------------------------- the planner


def _plan(coll, flt, **kw):
    return coll.find(flt, **kw).explain()["queryPlanner"]["winningPlan"]


def test_equality_and_in_use_the_hashes(db):
    db.c.create_index([("a", "hashed")])
    db.c.insert_many([{"_id": i, "a": i % 7} for i in range(70)])
    p = _plan(db.c, {"a": 3})
    assert p["stage"] == "FETCH" and p["filter"] == {"a": 3}  # the matcher checks each hash's values
    ix = p["inputStage"]
    assert ix["stage"] == "IXSCAN" and ix["keyPattern"] == {"a": "hashed"}
    assert ix["indexBounds"] == {"a": [f"[{model_hash(3)}, {model_hash(3)}]"]}
    p = _plan(db.c, {"a": {"$in": [5, 1, 3]}})
    hs = sorted(model_hash(v) for v in (5, 1, 3))
    assert p["inputStage"]["indexBounds"] == {"a": [f"[{h}, {h}]" for h in hs]}
    # null: the hashes of null (missing too) and of undefined
    p = _plan(db.c, {"a": None})
    assert p["inputStage"]["stage"] == "IXSCAN"
    assert len(p["inputStage"]["indexBounds"]["a"]) == 2


@pytest.mark.parametrize("flt", [{"a": {"$gt": 3}}, {"a": {"$exists": True}},
                                 {"a": {"$ne": 3}}, {"a": {"$regex": "^x"}},
                                 {"a": {"$in": [1, Regex("^x")]}}, {"a": {"$exists": False}}])
def test_other_predicates_do_not_use_it(db, flt):
    db.c.create_index([("a", "hashed")])
    db.c.insert_many([{"_id": i, "a": i} for i in range(10)])
    assert _plan(db.c, flt)["stage"] == "COLLSCAN"
    hinted = _plan(db.c, flt, hint="a_hashed")  # hinted: a full scan of the index
    assert hinted["inputStage"]["indexBounds"] == {"a": ["[MinKey, MaxKey]"]}
    assert sorted(d["_id"] for d in db.c.find(flt, hint="a_hashed")) == \
        sorted(d["_id"] for d in db.c.find(flt, hint={"$natural": 1}))


def test_no_sort_and_no_distinct_scan_from_a_hashed_field(db):
    db.c.create_index([("a", "hashed")])
    db.c.insert_many([{"_id": i, "a": 9 - i} for i in range(10)])
    p = _plan(db.c, {}, sort=[("a", 1)], hint="a_hashed")
    assert p["stage"] == "SORT"
    assert [d["a"] for d in db.c.find({}, sort=[("a", 1)], hint="a_hashed")] == list(range(10))
    assert db.c.distinct("a") == list(range(10))
    expl = db.command("explain", {"distinct": "c", "key": "a", "query": {"a": {"$in": [1, 2]}}})
    assert "DISTINCT_SCAN" not in str(expl["queryPlanner"]["winningPlan"])


def test_compound_sort_after_an_equality_on_the_hashed_field(db):
    db.c.create_index([("a", "hashed"), ("b", 1)])
    db.c.insert_many([{"_id": i, "a": i % 3, "b": -i} for i in range(30)])
    p = _plan(db.c, {"a": 1}, sort=[("b", 1)])
    assert p["stage"] == "FETCH", p  # the index gives b's order under one hash
    assert [d["b"] for d in db.c.find({"a": 1}, sort=[("b", 1)])] == sorted(
        -i for i in range(30) if i % 3 == 1)


def test_differential_with_and_without_the_index(db):
    rng = random.Random(1)
    pool = [0, 1, 1.0, 1.5, Int64(1), Decimal128("1"), 2, "x", "X", "y", None, True, {"k": 1},
            {"k": 1.0}, {"k": 2}, datetime.datetime(2021, 5, 1), MinKey(), MaxKey()]
    docs = []
    for i in range(400):
        d = {"_id": i, "b": rng.randint(0, 3)}
        if rng.random() < 0.9:
            d["a"] = rng.choice(pool)
        docs.append(d)
    db.c.insert_many(docs)
    db.c.create_index([("a", "hashed")])
    db.c.create_index([("b", 1), ("a", "hashed")])
    filters = [{"a": v} for v in pool] + [
        {"a": {"$in": rng.sample(pool, 4)}} for _ in range(20)] + [
        {"a": v, "b": rng.randint(0, 3)} for v in pool] + [{"a": {"$eq": 1.5}}]
    for flt in filters:
        want = sorted(d["_id"] for d in db.c.find(flt, hint={"$natural": 1}))
        for hint in ("a_hashed", "b_1_a_hashed", None):
            got = sorted(d["_id"] for d in db.c.find(flt, hint=hint))
            assert got == want, (flt, hint)
        assert db.c.count_documents(flt, hint="a_hashed") == len(want)


def test_collation_finds_equal_strings(db):
    db.c.create_index([("a", "hashed")], collation={"locale": "en", "strength": 2})
    db.c.insert_many([{"_id": 1, "a": "Hello"}, {"_id": 2, "a": "hello"}, {"_id": 3, "a": "x"}])
    coll = {"locale": "en", "strength": 2}
    assert sorted(d["_id"] for d in db.c.find({"a": "HELLO"}, collation=coll)) == [1, 2]
    assert _plan(db.c, {"a": "HELLO"}, collation=coll)["inputStage"]["stage"] == "IXSCAN"
    # the simple collation cannot use that index for a string
    assert _plan(db.c, {"a": "HELLO"})["stage"] == "COLLSCAN"


def test_keys_survive_a_restart(tmp_path):
    c = multifora.open(str(tmp_path / "db"), replica_set=None)
    c.t.c.create_index([("a", "hashed")])
    c.t.c.insert_many([{"_id": i, "a": str(i)} for i in range(100)])
    c.close()
    c = multifora.open(str(tmp_path / "db"), replica_set=None)
    try:
        assert [d["_id"] for d in c.t.c.find({"a": "42"})] == [42]
        assert c.t.command("validate", "c")["valid"]
    finally:
        c.close()


def test_build_killed_before_commit_leaves_no_index(tmp_path):
    # The whole hashed index written and synced, not committed (the fail
    # point holds the build there): after kill -9 it is gone, and the
    # collection validates; built again it is whole.
    docs = [{"_id": i, "a": i, "pad": "x" * 500} for i in range(20000)]
    s = build_killed_before_commit(tmp_path / "db", docs, [("a", "hashed")])
    try:
        c = s.client()
        v = c.t.command("validate", "c")
        assert v["valid"] and v["keysPerIndex"] == {"_id_": 20000}, v
        c.t.c.create_index([("a", "hashed")])
        v = c.t.command("validate", "c")
        assert v["keysPerIndex"] == {"_id_": 20000, "a_hashed": 20000}, v
        assert [d["_id"] for d in c.t.c.find({"a": 777})] == [777]
    finally:
        s.stop()
