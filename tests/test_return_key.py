"""find's returnKey: each result is the index key the plan found it by,
named by the key pattern's fields (mongod's RETURN_KEY stage over its
index key metadata); {} from a collection scan.  On a multikey index the
key is the entry the scan met first: the element of the array, not the
array."""
from __future__ import annotations

import random

import pytest
from bson import Int64
from pymongo.errors import OperationFailure

from planlib import stages


@pytest.fixture
def db(client):
    db = client.t
    db.c.insert_many([
        {"_id": 1, "a": 3, "b": "x"},
        {"_id": 2, "a": [5, 1, 9], "b": "y"},
        {"_id": 3, "b": "z"},
        {"_id": 4, "a": 7.5, "b": "w"},
    ])
    db.c.create_index([("a", 1), ("b", -1)])
    return db


def keys(db, **kw):
    return db.command("find", "c", returnKey=True, **kw)["cursor"]["firstBatch"]


def test_collection_scan_returns_empty_documents(db):
    assert keys(db) == [{}, {}, {}, {}]
    assert keys(db, filter={"b": "x"}) == [{}]


def test_index_scan_returns_the_entry_it_found(db):
    # doc 2's entries are a = 1, 5, 9: the scan meets 5 first in [2, inf)
    assert keys(db, filter={"a": {"$gte": 2}}) == [
        {"a": 3, "b": "x"}, {"a": 5, "b": "y"}, {"a": 7.5, "b": "w"}]
    # a multikey index cannot give a sort on its field over these bounds:
    # a SORT (doc 2 first, by 9) over the forward scan, which met 5
    assert keys(db, filter={"a": {"$gte": 2}}, sort={"a": -1}) == [
        {"a": 5, "b": "y"}, {"a": 7.5, "b": "w"}, {"a": 3, "b": "x"}]
    # a backward scan
    assert keys(db, filter={"_id": {"$gte": 3}}, sort={"_id": -1}) == [{"_id": 4}, {"_id": 3}]
    # every entry: doc 2 first at a = 1
    assert keys(db, hint="a_1_b_-1") == [
        {"a": None, "b": "z"}, {"a": 1, "b": "y"}, {"a": 3, "b": "x"}, {"a": 7.5, "b": "w"}]
    # the type is the document's
    got = keys(db, filter={"a": 7.5})
    assert got == [{"a": 7.5, "b": "w"}] and isinstance(got[0]["a"], float)


def test_blocking_sort_and_batches(db):
    # sorted by b (not in the index's order): keys in the documents' order
    assert keys(db, filter={"a": {"$gte": 2}}, sort={"b": 1}) == [
        {"a": 7.5, "b": "w"}, {"a": 3, "b": "x"}, {"a": 5, "b": "y"}]
    cur = db.c.find({"a": {"$gte": 0}}, return_key=True, batch_size=1, hint="a_1_b_-1")
    assert list(cur) == [{"a": 1, "b": "y"}, {"a": 3, "b": "x"}, {"a": 7.5, "b": "w"}]


def test_id_lookup_and_or(db):
    assert keys(db, filter={"_id": 2}) == [{"_id": 2}]
    assert keys(db, hint="_id_", filter={"_id": {"$gt": 2}}) == [{"_id": 3}, {"_id": 4}]
    # each $or clause's own index
    got = keys(db, filter={"$or": [{"a": 3}, {"_id": 4}]})
    assert sorted(got, key=str) == sorted([{"a": 3, "b": "x"}, {"_id": 4}], key=str)


def test_projection_and_show_record_id_give_way(db):
    """The key replaces the document: a projection is parsed (and refused
    if bad) but not applied, and showRecordId adds nothing."""
    assert keys(db, filter={"a": 3}, projection={"b": 1, "_id": 0}) == [{"a": 3, "b": "x"}]
    assert keys(db, filter={"a": 3}, showRecordId=True) == [{"a": 3, "b": "x"}]
    with pytest.raises(OperationFailure) as plain:
        db.command("find", "c", projection={"a": 1, "b": 0})
    with pytest.raises(OperationFailure) as with_key:
        db.command("find", "c", projection={"a": 1, "b": 0}, returnKey=True)
    assert with_key.value.code == plain.value.code


def test_explain_shows_return_key(db):
    e = db.command("explain", {"find": "c", "filter": {"a": 3}, "returnKey": True},
                   verbosity="executionStats")
    assert stages(e["queryPlanner"]["winningPlan"]) == ["RETURN_KEY", "FETCH", "IXSCAN"]
    assert e["executionStats"]["executionStages"]["nReturned"] == 1


def test_returned_keys_against_a_model(client):
    """Random documents whose `a` is a number or an array of numbers, and
    $elemMatch ranges (whose bounds a multikey index intersects): each key
    is the element in the range that the forward scan meets first, the
    least, of the document's own type; the documents are the plain
    query's.  Unhinted (the index the trials choose; a trial's rows are
    returned with their keys), or hinted to a compound index {a: 1, b: -1}."""
    rng = random.Random(5)
    db = client.t
    docs = []
    for i in range(300):
        if rng.random() < 0.5:
            a = [rng.randrange(100) for _ in range(rng.randrange(1, 5))]
        else:
            a = rng.choice([rng.randrange(100), float(rng.randrange(100)), Int64(rng.randrange(100))])
        docs.append({"_id": i, "a": a, "b": rng.randrange(3)})
    db.m.insert_many(docs)
    db.m.create_index("a")
    db.m.create_index([("a", 1), ("b", -1)])
    by_id = {d["_id"]: d for d in docs}
    checked = 0
    for _ in range(40):
        lo = rng.randrange(100)
        hi = lo + rng.randrange(1, 30)
        flt = {"a": {"$elemMatch": {"$gte": lo, "$lt": hi}}}
        for hint in (None, "a_1_b_-1"):
            kw = {"hint": hint} if hint else {}
            plain = list(db.m.find(flt, **kw))
            got = list(db.m.find(flt, return_key=True, **kw))
            assert len(got) == len(plain)
            # unhinted, trial runs (or the plan cache) choose between the
            # two indexes: one of them, for every row
            fields = tuple(got[0]) if got else ("a",)
            assert fields in (("a",), ("a", "b")) and (hint is None or fields == ("a", "b"))
            for key, doc in zip(got, plain):
                d = by_id[doc["_id"]]
                want = min(v for v in d["a"] if lo <= v < hi)
                assert key == {f: want if f == "a" else d[f] for f in fields}
                assert type(key["a"]) is type(next(v for v in d["a"] if v == want))
                checked += 1
    assert checked > 500
