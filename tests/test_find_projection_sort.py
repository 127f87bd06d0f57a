"""find with projections and sorts end to end through pymongo: the
projection forms and their errors, sort orders (several keys, dotted
paths, arrays, mixed BSON types), sorts across getMore batches, and the
100 MB in-memory sort limit with and without allowDiskUse.

mongod 7.0 is the reference; the projection and sort engines are tested
alone by test_projection.py and test_sort.py."""
from __future__ import annotations

import datetime

import pytest
from bson import (Binary, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, SON,
                  Timestamp)
from pymongo.errors import ExecutionTimeout, OperationFailure

SORT_LIMIT_MSG = ("Executor error during find command :: caused by :: Sort exceeded memory "
                  "limit of 104857600 bytes, but did not opt in to external sorting.")


def ids(cursor):
    return [d["_id"] for d in cursor]


def find_error(db, **kw) -> OperationFailure:
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", **kw)
    return e.value


@pytest.fixture
def shaped(client):
    c = client.t.c
    c.insert_many([
        {"_id": 1, "a": {"b": 1, "c": 2}, "arr": [1, 2, 3, 4, 5], "s": "one",
         "items": [{"k": 1, "v": "x"}, {"k": 2, "v": "y"}, {"k": 2, "v": "z"}]},
        {"_id": 2, "a": {"b": 3}, "arr": [9], "s": "two", "items": [{"k": 3}]},
        {"_id": 3, "a": [{"b": 4, "c": 5}, 7, {"c": 6}], "s": "three"},
    ])
    return c


# -------------------------------------------------------------- projection


def test_inclusion_and_the_id_rules(shaped):
    assert list(shaped.find({"_id": 1}, {"s": 1})) == [{"_id": 1, "s": "one"}]
    assert list(shaped.find({"_id": 1}, {"s": 1, "_id": 0})) == [{"s": "one"}]
    assert list(shaped.find({"_id": 1}, {"_id": 1})) == [{"_id": 1}]
    assert list(shaped.find({"_id": 2}, {"_id": 0})) == [
        {"a": {"b": 3}, "arr": [9], "s": "two", "items": [{"k": 3}]}]
    # a field that no document has is simply absent
    assert list(shaped.find({"_id": 2}, {"nope": 1, "s": 1})) == [{"_id": 2, "s": "two"}]
    # an inclusion keeps the document's own field order, not the projection's
    doc = shaped.find_one({"_id": 1}, SON([("s", 1), ("arr", 1), ("a", 1)]))
    assert list(doc) == ["_id", "a", "arr", "s"]


def test_exclusion(shaped):
    assert shaped.find_one({"_id": 1}, {"items": 0, "arr": 0, "a": 0}) == {"_id": 1, "s": "one"}
    assert shaped.find_one({"_id": 2}, {"_id": 0, "items": 0, "arr": 0}) == {
        "a": {"b": 3}, "s": "two"}


def test_dotted_paths(shaped):
    got = list(shaped.find({}, {"a.b": 1}).sort("_id", 1))
    # through an array the path applies to each document element and
    # drops the scalars
    assert got == [{"_id": 1, "a": {"b": 1}}, {"_id": 2, "a": {"b": 3}},
                   {"_id": 3, "a": [{"b": 4}, {}]}]
    got = list(shaped.find({}, {"a.c": 0, "items.v": 0, "arr": 0, "s": 0}).sort("_id", 1))
    assert got == [{"_id": 1, "a": {"b": 1}, "items": [{"k": 1}, {"k": 2}, {"k": 2}]},
                   {"_id": 2, "a": {"b": 3}, "items": [{"k": 3}]},
                   {"_id": 3, "a": [{"b": 4}, 7, {}]}]
    assert shaped.find_one({"_id": 1}, {"items.k": 1, "_id": 0}) == {
        "items": [{"k": 1}, {"k": 2}, {"k": 2}]}


def test_slice(shaped):
    assert shaped.find_one({"_id": 1}, {"arr": {"$slice": 2}, "s": 1}) == {
        "_id": 1, "arr": [1, 2], "s": "one"}
    # $slice alone keeps every other field
    assert shaped.find_one({"_id": 1}, {"arr": {"$slice": -2}, "items": 0}) == {
        "_id": 1, "a": {"b": 1, "c": 2}, "arr": [4, 5], "s": "one"}
    got = list(shaped.find({"arr": {"$exists": True}},
                           {"arr": {"$slice": [1, 2]}, "_id": 0, "s": 1}).sort("_id", 1))
    assert got == [{"arr": [2, 3], "s": "one"}, {"arr": [], "s": "two"}]
    assert shaped.find_one({"_id": 1}, {"arr": {"$slice": [-4, 2]}, "_id": 0, "s": 1}) == {
        "arr": [2, 3], "s": "one"}
    # on a non-array the field comes back as it is
    assert shaped.find_one({"_id": 1}, {"s": {"$slice": 1}, "_id": 0, "a": 0, "arr": 0,
                                        "items": 0}) == {"s": "one"}


def test_elem_match(shaped):
    got = list(shaped.find({}, {"items": {"$elemMatch": {"k": 2}}}).sort("_id", 1))
    # only the first matching element; no field when nothing matches
    assert got == [{"_id": 1, "items": [{"k": 2, "v": "y"}]}, {"_id": 2}, {"_id": 3}]
    assert shaped.find_one({"_id": 1}, {"items": {"$elemMatch": {"k": 2, "v": "z"}},
                                        "s": 1}) == {
        "_id": 1, "s": "one", "items": [{"k": 2, "v": "z"}]}


def test_positional(shaped):
    assert list(shaped.find({"items.k": 2}, {"items.$": 1})) == [
        {"_id": 1, "items": [{"k": 2, "v": "y"}]}]
    assert shaped.find_one({"arr": {"$gt": 3}}, {"arr.$": 1, "s": 1}) == {
        "_id": 1, "arr": [4], "s": "one"}
    got = list(shaped.find({"arr": {"$gte": 5}}, {"arr.$": 1, "_id": 0}).sort("_id", 1))
    assert got == [{"arr": [5]}, {"arr": [9]}]
    assert list(shaped.find({"items": {"$elemMatch": {"k": 2, "v": "z"}}},
                            {"items.$": 1, "_id": 0})) == [{"items": [{"k": 2, "v": "z"}]}]


PROJECTION_ERRORS = [
    ({"a": 1, "s": 0}, 31254, "Cannot do exclusion on field s in inclusion projection"),
    ({"a": 0, "s": 1}, 31253, "Cannot do inclusion on field s in exclusion projection"),
    ({"a": 1, "a.b": 1}, 31249, None),  # messages not pinned: only the codes
    ({"a.b": 1, "a": 1}, 31250, None),
    ({"items.$": 1, "items": {"$elemMatch": {"k": 1}}}, 31255,
     "Cannot specify positional operator and $elemMatch."),
]


@pytest.mark.parametrize("projection,code,msg", PROJECTION_ERRORS,
                         ids=["exclusion-in-inclusion", "inclusion-in-exclusion",
                              "collision-below", "collision-above", "positional+elemMatch"])
def test_illegal_projections(shaped, projection, code, msg):
    e = find_error(shaped.database, filter={"items.k": 2}, projection=projection)
    assert e.code == code
    if msg is not None:
        assert e.details["errmsg"] == msg


def test_positional_in_the_middle_of_a_path(shaped):
    e = find_error(shaped.database, filter={"items.k": 2}, projection={"items.$.k": 1})
    assert e.code == 31394
    with pytest.raises(OperationFailure) as e:
        list(shaped.find({}, {"x": {"$bogus": 1}}))
    assert e.value.code == 31325


# -------------------------------------------------------------------- sort


def test_sort_several_keys_and_dotted(client):
    c = client.t.c
    c.insert_many([{"_id": i, "g": i % 3, "x": (i * 7) % 10, "n": {"d": -i}} for i in range(10)])
    got = list(c.find({}, {"g": 1, "x": 1}).sort([("g", 1), ("x", -1)]))
    want = sorted(({"_id": i, "g": i % 3, "x": (i * 7) % 10} for i in range(10)),
                  key=lambda d: (d["g"], -d["x"]))
    assert got == want
    assert ids(c.find().sort("n.d", 1)) == list(range(9, -1, -1))
    assert ids(c.find().sort([("g", -1), ("n.d", 1)])) == [8, 5, 2, 7, 4, 1, 9, 6, 3, 0]
    # the sort is applied before skip and limit
    assert ids(c.find().sort("n.d", -1).skip(2).limit(3)) == [2, 3, 4]
    assert ids(c.find().sort("n.d", 1).skip(8).limit(5)) == [1, 0]
    r = client.t.command("find", "c", sort={"n.d": 1}, skip=1, limit=2)
    assert ids(r["cursor"]["firstBatch"]) == [8, 7] and r["cursor"]["id"] == 0


def test_sort_arrays_by_min_ascending_and_max_descending(client):
    c = client.t.c
    c.insert_many([{"_id": "a", "v": [5, 1, 9]}, {"_id": "b", "v": 3},
                   {"_id": "c", "v": [4, 6]}, {"_id": "d", "v": [2, 10]}])
    assert ids(c.find().sort("v", 1)) == ["a", "d", "b", "c"]  # keys 1, 2, 3, 4
    assert ids(c.find().sort("v", -1)) == ["d", "a", "c", "b"]  # keys 10, 9, 6, 3
    # a dotted path through an array of documents
    c.insert_one({"_id": "e", "w": [{"x": 8}, {"x": 0}]})
    c.insert_one({"_id": "f", "w": [{"x": 4}]})
    assert ids(c.find({"w": {"$exists": True}}).sort("w.x", 1)) == ["e", "f"]
    assert ids(c.find({"w": {"$exists": True}}).sort("w.x", -1)) == ["e", "f"]


def test_sort_mixed_types_in_mongodb_order(client):
    c = client.t.c
    c.insert_many([
        {"_id": 1, "v": 5}, {"_id": 2, "v": "a"}, {"_id": 3, "v": None}, {"_id": 4},
        {"_id": 5, "v": {"a": 1}}, {"_id": 6, "v": [3, 9]}, {"_id": 7, "v": True},
        {"_id": 8, "v": ObjectId("000000000000000000000001")},
        {"_id": 9, "v": datetime.datetime(2020, 1, 1)}, {"_id": 10, "v": MinKey()},
        {"_id": 11, "v": MaxKey()}, {"_id": 12, "v": 2.5}, {"_id": 13, "v": Int64(4)},
        {"_id": 14, "v": Decimal128("4.5")}, {"_id": 15, "v": []}, {"_id": 16, "v": Binary(b"x")},
        {"_id": 17, "v": Regex("a")}, {"_id": 18, "v": Timestamp(1, 1)},
        {"_id": 19, "v": [None]}, {"_id": 20, "v": [[1]]}, {"_id": 21, "v": False},
    ])
    # MinKey < [] < null = missing = [null] < numbers < strings < objects
    # < arrays < BinData < ObjectId < booleans < dates < timestamps
    # < regexes < MaxKey; an array sorts by its least (greatest) element
    assert ids(c.find().sort([("v", 1), ("_id", 1)])) == [
        10, 15, 3, 4, 19, 12, 6, 13, 14, 1, 2, 5, 20, 16, 8, 21, 7, 9, 18, 17, 11]
    assert ids(c.find().sort([("v", -1), ("_id", 1)])) == [
        11, 17, 18, 9, 7, 21, 8, 16, 20, 5, 2, 6, 1, 14, 13, 12, 3, 4, 19, 15, 10]


def test_sort_across_getmore_batches(client):
    db = client.t
    n = 250
    db.c.insert_many([{"_id": i, "k": (i * 101) % n} for i in range(n)])
    want = sorted(range(n), key=lambda i: -((i * 101) % n))
    r = db.command("find", "c", sort={"k": -1}, batchSize=7)
    got = ids(r["cursor"]["firstBatch"])
    cid = r["cursor"]["id"]
    assert len(got) == 7 and cid != 0
    sizes = [11, 50, 1, 200]
    while cid:
        r = db.command("getMore", Int64(cid), collection="c",
                       batchSize=sizes.pop(0) if sizes else 101)
        got += ids(r["cursor"]["nextBatch"])
        cid = r["cursor"]["id"]
    assert got == want
    assert ids(db.c.find().sort("k", -1).batch_size(13)) == want
    assert ids(db.c.find().sort("k", -1)) == want  # the default 101 and a getMore
    assert ids(db.c.find().sort("k", -1).skip(100).limit(120).batch_size(9)) == want[100:220]


def test_sort_with_a_projection_that_drops_the_sort_field(client):
    c = client.t.c
    c.insert_many([{"_id": i, "k": (i * 3) % 7, "o": i} for i in range(7)])
    want = sorted(range(7), key=lambda i: (i * 3) % 7)
    got = list(c.find({}, {"k": 0}).sort("k", 1))
    assert got == [{"_id": i, "o": i} for i in want]
    got = list(c.find({}, {"o": 1, "_id": 0}).sort("k", -1).batch_size(2))
    assert got == [{"o": i} for i in reversed(want)]


def test_sort_argument_errors(client):
    db = client.t
    db.c.insert_one({"_id": 1})
    e = find_error(db, sort={"a": 2})
    assert (e.code, e.details["errmsg"]) == (
        15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
    e = find_error(db, sort={"a": "x"})
    assert (e.code, e.details["errmsg"]) == (15974, 'Illegal key in $sort specification: a: "x"')


# ------------------------------------------------------ memory and time


def big_docs(coll, n=110):
    """n documents of 1 MiB each (about n MiB in all), k a permutation of
    range(n) so the sort moves every document."""
    pad = "x" * (1 << 20)
    coll.insert_many([{"_id": i, "k": (i * 37) % n, "pad": pad} for i in range(n)])
    return sorted(range(n), key=lambda i: (i * 37) % n)


def test_in_memory_sort_limit_and_allow_disk_use(client):
    db = client.t
    want = big_docs(db.c)
    e = find_error(db, sort={"k": 1})
    assert (e.code, e.details["codeName"], e.details["errmsg"]) == (
        292, "QueryExceededMemoryLimitNoDiskUseAllowed", SORT_LIMIT_MSG)
    with pytest.raises(OperationFailure) as ei:
        list(db.c.find().sort("k", -1))
    assert ei.value.code == 292
    # a projection that keeps the pad (and skip, which does not bound the
    # sort) still sorts 110 MiB
    e = find_error(db, sort={"k": 1}, projection={"k": 1, "pad": 1}, skip=2)
    assert e.code == 292
    # with allowDiskUse the same sort returns everything, in order
    seen = []
    for d in db.c.find().sort("k", 1).allow_disk_use(True).batch_size(20):
        assert len(d["pad"]) == 1 << 20
        seen.append(d["_id"])
    assert seen == want
    # a top-k sort holds only k documents: no disk needed
    assert ids(db.c.find().sort("k", -1).limit(5)) == want[::-1][:5]
    assert ids(db.c.find().sort("k", 1).skip(50).limit(3)) == want[50:53]
    # a projection that keeps the sort field runs before the sort (mongod's
    # pushdown beneath SORT), so only small documents are sorted
    assert ids(db.c.find({}, {"k": 1}).sort("k", 1)) == want


def test_projection_without_the_sort_field_sorts_whole_documents(client):
    db = client.t
    big_docs(db.c)
    e = find_error(db, sort={"k": 1}, projection={"_id": 1})
    assert e.code == 292


def test_max_time_ms_on_a_large_sort(client):
    db = client.t
    n = 100_000
    db.c.insert_many([{"_id": i, "k": (i * 7919) % 100_003} for i in range(n)])
    try:
        got = list(db.c.find().sort("k", -1).max_time_ms(1))
    except ExecutionTimeout as e:
        assert e.code == 50
        assert e.details["codeName"] == "MaxTimeMSExpired"
    else:  # a machine fast enough to finish within 1 ms
        assert len(got) == n
    r = db.command("find", "c", sort={"k": 1}, limit=3, maxTimeMS=60_000)
    assert [d["k"] for d in r["cursor"]["firstBatch"]] == sorted(
        (i * 7919) % 100_003 for i in range(n))[:3]
