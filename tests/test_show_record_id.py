"""find's showRecordId (cmd_find.c, reshape): each document returned gets
{$recordId: NumberLong} last, after any projection, through every path a
find takes -- a collection scan, an index scan, a blocking sort (with the
projection applied before or after sorting) and getMore.  It answered
NotImplemented before."""
from __future__ import annotations

import pytest
from bson import Int64


@pytest.fixture
def coll(client):
    c = client.test.r
    c.insert_many([{"_id": i, "a": i % 7, "b": (i * 37) % 101} for i in range(300)])
    c.create_index("a")
    return c


def rids(docs):
    return {d["_id"]: d["$recordId"] for d in docs}


def test_every_path_gives_each_document_its_record_id(coll):
    scanned = list(coll.find({}, show_record_id=True, batch_size=7))
    assert len(scanned) == 300
    for d in scanned:
        assert list(d)[-1] == "$recordId" and isinstance(d["$recordId"], Int64)
    by_id = rids(scanned)
    assert len(set(by_id.values())) == 300
    # Insertion order is record order.
    assert [d["_id"] for d in scanned] == sorted(by_id, key=by_id.get)
    # An index scan, a blocking sort, a projection before and after the sort.
    for kw in ({"filter": {"a": 3}},
               {"filter": {}, "sort": [("b", -1)]},
               {"filter": {}, "sort": [("b", 1)], "projection": {"b": 1}},
               {"filter": {}, "sort": [("b", 1)], "projection": {"a": 1}, "limit": 50},
               {"filter": {"a": {"$gte": 2}}, "projection": {"_id": 1}, "skip": 5}):
        docs = list(coll.find(kw.pop("filter"), show_record_id=True, batch_size=9, **kw))
        assert docs, kw
        for d in docs:
            assert list(d)[-1] == "$recordId", (kw, d)
            assert d["$recordId"] == by_id[d["_id"]], kw
        if "projection" in kw:
            want = {"_id", "$recordId", *kw["projection"]}
            assert all(set(d) == want for d in docs), kw


def test_off_by_default_and_when_false(coll):
    assert "$recordId" not in coll.find_one({"a": 1})
    reply = coll.database.command({"find": "r", "filter": {"_id": 4}, "showRecordId": False})
    assert reply["cursor"]["firstBatch"] == [{"_id": 4, "a": 4, "b": 47}]
    reply = coll.database.command({"find": "r", "filter": {"_id": 4}, "showRecordId": True})
    doc = reply["cursor"]["firstBatch"][0]
    assert list(doc) == ["_id", "a", "b", "$recordId"]
