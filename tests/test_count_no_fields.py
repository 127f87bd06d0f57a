"""Counting through aggregate (what countDocuments sends: $match, $skip,
$limit, then $group {_id: 1, n: {$sum: 1}}): a $group of constants reads no
field, so the collection read hands it empty documents and, where an
index's bounds answer the whole filter, counts index keys without reading
a record (csrc/agg/pipeline.c reads_no_field, cmd_aggregate.c).  Every
count must equal the documents a find returns."""
from __future__ import annotations

import random

import pytest


@pytest.fixture
def coll(client):
    c = client.countdb.docs
    rng = random.Random(3)
    docs = []
    for i in range(3000):
        d = {"_id": i, "k": rng.randrange(50), "x": rng.randrange(3),
             "a": [rng.randrange(20) for _ in range(rng.randrange(4))]}
        if i % 7 == 0:
            del d["k"]
        if i % 5 == 0:
            d["pad"] = "p" * 20000  # an overflow run
        docs.append(d)
    c.insert_many(docs)
    c.create_index("k")
    c.create_index("a")  # multikey: a document once, however many keys
    return c


FILTERS = [
    {}, {"k": 5}, {"k": {"$gte": 10, "$lt": 20}}, {"k": None}, {"a": 3},
    {"a": {"$in": [1, 2, 3]}}, {"k": 5, "x": 1}, {"x": {"$ne": 1}},
    {"k": {"$in": [1, 7, 9]}, "a": {"$size": 2}}, {"nope": {"$exists": False}},
]


@pytest.mark.parametrize("flt", FILTERS, ids=[str(f) for f in FILTERS])
def test_count_documents_equals_find(coll, flt):
    want = len(list(coll.find(flt)))
    assert coll.count_documents(flt) == want
    assert coll.count_documents(flt, skip=100, limit=500) == len(
        list(coll.find(flt).skip(100).limit(500)))
    got = list(coll.aggregate([{"$match": flt},
                               {"$group": {"_id": None, "n": {"$sum": 1}, "two": {"$sum": 2},
                                           "c": {"$count": {}}, "hi": {"$max": 7}}}]))
    if want == 0:
        assert got == []
    else:
        assert got == [{"_id": None, "n": want, "two": 2 * want, "c": want, "hi": 7}]


def test_a_group_that_reads_a_field_still_gets_documents(coll):
    want = sum(d.get("k", 0) for d in coll.find({"k": {"$gte": 10}}))
    got = list(coll.aggregate([{"$match": {"k": {"$gte": 10}}},
                               {"$group": {"_id": 1, "s": {"$sum": "$k"}}}]))
    assert got == [{"_id": 1, "s": want}]
    got = list(coll.aggregate([{"$match": {"k": 5}}, {"$group": {"_id": "$x", "n": {"$sum": 1}}},
                               {"$sort": {"_id": 1}}]))
    counts = {}
    for d in coll.find({"k": 5}):
        counts[d["x"]] = counts.get(d["x"], 0) + 1
    assert got == [{"_id": x, "n": n} for x, n in sorted(counts.items())]
    # $$ROOT is not a constant
    got = list(coll.aggregate([{"$match": {"_id": {"$lt": 3}}},
                               {"$group": {"_id": None, "ids": {"$push": "$$ROOT._id"}}}]))
    assert sorted(got[0]["ids"]) == [0, 1, 2]


def test_count_sees_writes_between_calls(coll):
    before = coll.count_documents({"k": 5})
    gone = coll.delete_many({"k": 5, "x": 0}).deleted_count
    coll.insert_many([{"k": 5} for _ in range(10)])
    assert coll.count_documents({"k": 5}) == before - gone + 10
