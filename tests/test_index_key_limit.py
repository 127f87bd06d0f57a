"""Index keys longer than a B+tree key (32 KiB): the write or the build is
refused with KeyTooLong (17280) before anything is written, and the
database takes the next write.  Before, the write was half applied (the
document in the collection, not in its index), and the engine refused
every write until reopened.  mongod has had no such limit since 4.2
(docs/indexes.md, "Key sizes")."""
from __future__ import annotations

import pymongo
import pytest
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

import multifora

LONG = "x" * 40000  # its key: about 40 KB
FITS = "y" * 32000  # its key: under 32 KiB, with or without the RecordId


def ids(coll, hint=None):
    cur = coll.find({}, {"_id": 1}).hint(hint or [("$natural", 1)])
    return sorted(d["_id"] for d in cur)


def assert_writable(client):
    client.other.probe.insert_one({"ok": 1})
    assert client.other.probe.count_documents({}) >= 1


def test_a_long_id_is_refused_and_the_database_stays_writable(client):
    coll = client.t.c
    with pytest.raises(WriteError) as e:
        coll.insert_one({"_id": LONG})
    assert e.value.code == 17280
    assert ids(coll) == []
    coll.insert_one({"_id": FITS})
    assert coll.find_one({"_id": FITS}, {"_id": 1}) == {"_id": FITS}
    assert_writable(client)
    assert client.admin.command("hello").get("readOnly", False) is False


def test_long_secondary_keys_leave_documents_and_indexes_as_they_were(client):
    coll = client.t.c
    coll.create_index("a")
    coll.insert_many([{"_id": 1, "a": "short"}, {"_id": 2, "a": FITS}])
    with pytest.raises(WriteError) as e:
        coll.insert_one({"_id": 3, "a": LONG})
    assert e.value.code == 17280
    with pytest.raises(WriteError) as e:
        coll.update_one({"_id": 1}, {"$set": {"a": LONG}})
    assert e.value.code == 17280
    with pytest.raises(OperationFailure) as e:
        coll.find_one_and_update({"_id": 1}, {"$set": {"a": [1, LONG]}})
    assert e.value.code == 17280
    with pytest.raises(WriteError) as e:
        coll.replace_one({"_id": 2}, {"a": LONG})
    assert e.value.code == 17280
    assert list(coll.find().sort("_id", 1)) == [{"_id": 1, "a": "short"}, {"_id": 2, "a": FITS}]
    assert ids(coll, "a_1") == [1, 2]
    assert [d["_id"] for d in coll.find({"a": FITS}).hint("a_1")] == [2]
    assert client.t.command("validate", "c", full=True)["valid"] is True
    # A long value in a field no index names is no key at all.
    coll.insert_one({"_id": 4, "b": LONG})
    assert_writable(client)


def test_a_batch_stops_at_the_long_key_when_ordered(client):
    coll = client.t.c
    coll.create_index("a")
    docs = [{"_id": 1, "a": 1}, {"_id": 2, "a": LONG}, {"_id": 3, "a": 3}]
    with pytest.raises(BulkWriteError) as e:
        coll.insert_many(docs)
    errs = e.value.details["writeErrors"]
    assert [(w["index"], w["code"]) for w in errs] == [(1, 17280)]
    assert ids(coll) == [1]
    coll.delete_many({})
    with pytest.raises(BulkWriteError) as e:
        coll.insert_many(docs, ordered=False)
    assert [(w["index"], w["code"]) for w in e.value.details["writeErrors"]] == [(1, 17280)]
    assert ids(coll) == [1, 3] == ids(coll, "a_1")


def test_a_build_over_a_long_value_fails_and_leaves_no_index(client):
    coll = client.t.c
    coll.insert_many([{"_id": 1, "a": "short"}, {"_id": 2, "a": LONG}])
    with pytest.raises(OperationFailure) as e:
        coll.create_index("a")
    assert e.value.code == 17280
    assert e.value.details["codeName"] == "KeyTooLong"
    assert [i["name"] for i in coll.list_indexes()] == ["_id_"]
    coll.insert_one({"_id": 3, "a": "more"})
    coll.delete_one({"_id": 2})
    assert coll.create_index("a") == "a_1"
    assert ids(coll, "a_1") == [1, 3]


def test_refused_writes_leave_nothing_to_replay(tmp_path):
    path = str(tmp_path / "db")
    srv = multifora.Server(path, port=0)
    srv.start()
    try:
        c = pymongo.MongoClient(srv.uri)
        c.t.c.create_index("a")
        c.t.c.insert_one({"_id": 1, "a": FITS})
        for doc in ({"_id": LONG}, {"_id": 2, "a": LONG}):
            with pytest.raises(WriteError):
                c.t.c.insert_one(doc)
        c.t.c.insert_one({"_id": 3, "a": "after"})
        c.close()
    finally:
        srv.stop()
    srv = multifora.Server(path, port=0)
    srv.start()
    try:
        c = pymongo.MongoClient(srv.uri)
        assert ids(c.t.c) == [1, 3] == ids(c.t.c, "a_1")
        assert c.t.command("validate", "c", full=True)["valid"] is True
        assert_writable(c)
        c.close()
    finally:
        srv.stop()
