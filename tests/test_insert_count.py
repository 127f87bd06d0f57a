"""insert (with the _id index) and count, on the storage engine."""
import signal

import bson
import pytest
from pymongo import WriteConcern
from pymongo.errors import BulkWriteError, DuplicateKeyError

from conftest import ServedProcess


def count(coll, query=None, **kw):
    cmd = {"count": coll.name}
    if query is not None:
        cmd["query"] = query
    cmd.update(kw)
    return coll.database.command(cmd)["n"]


def test_insert_and_count(any_client):
    coll = any_client.db.items
    ids = coll.insert_many([{"a": i, "tag": "x" if i % 2 else "y"} for i in range(100)]).inserted_ids
    assert len(ids) == 100 and all(isinstance(i, bson.ObjectId) for i in ids)
    assert count(coll) == 100
    assert count(coll, {"a": {"$gte": 90}}) == 10
    assert count(coll, {"tag": "x", "a": {"$lt": 10}}) == 5
    assert count(coll, {"a": {"$gte": 90}}, skip=3) == 7
    assert count(coll, {}, limit=-4) == 4
    assert count(coll, {"_id": {"$type": "objectId"}}) == 100
    assert count(any_client.db.nothing) == 0
    # created on first insert, with its _id index
    info = next(any_client.db.list_collections(filter={"name": "items"}))
    assert info["idIndex"]["name"] == "_id_"


def test_duplicate_id_is_11000_with_key_pattern_and_value(client):
    coll = client.db.c
    coll.insert_one({"_id": 1, "v": 1})
    with pytest.raises(DuplicateKeyError) as e:
        coll.insert_one({"_id": 1.0, "v": 2})  # numerically equal: the same key
    d = e.value.details
    assert d["code"] == 11000 and d["keyPattern"] == {"_id": 1} and d["keyValue"] == {"_id": 1.0}
    assert d["errmsg"] == "E11000 duplicate key error collection: db.c index: _id_ dup key: { _id: 1.0 }"
    assert count(coll) == 1


def test_ordered_stops_unordered_continues(client):
    coll = client.db.o
    with pytest.raises(BulkWriteError) as e:
        coll.insert_many([{"_id": 1}, {"_id": 1}, {"_id": 2}])
    assert e.value.details["nInserted"] == 1
    assert [w["index"] for w in e.value.details["writeErrors"]] == [1]
    with pytest.raises(BulkWriteError) as e:
        coll.insert_many([{"_id": 3}, {"_id": 1}, {"_id": 4}, {"_id": [1]}], ordered=False)
    assert e.value.details["nInserted"] == 2
    errs = {w["index"]: w["code"] for w in e.value.details["writeErrors"]}
    assert errs == {1: 11000, 3: 53}
    assert count(coll) == 3  # _id 1, 3 and 4


def test_dollar_field_names(client):
    # mongod 5.0+: '$'-prefixed names are stored, except inside _id
    client.db.d.insert_one({"_id": 1, "$a": 1, "b": {"$c": 2}})
    assert client.db.d.find_one({"_id": 1}) == {"_id": 1, "$a": 1, "b": {"$c": 2}}
    with pytest.raises(BulkWriteError) as e:
        client.db.d.insert_many([{"_id": {"$bad": 1}}])
    err = e.value.details["writeErrors"][0]
    assert err["code"] == 52
    assert err["errmsg"] == ("_id fields may not contain '$'-prefixed fields: $bad is not "
                             "valid for storage.")


def test_unacknowledged_insert_and_opcounters(client):
    before = client.admin.command("serverStatus")["opcounters"]["insert"]
    client.db.w.with_options(write_concern=WriteConcern(w=0)).insert_one({"x": 1})
    client.db.w.insert_many([{"x": 2}, {"x": 3}])
    assert count(client.db.w) == 3
    assert client.admin.command("serverStatus")["opcounters"]["insert"] - before == 3


def test_acknowledged_inserts_survive_kill_9(tmp_path):
    s = ServedProcess(tmp_path / "db").start()
    c = s.client()
    for i in range(50):
        c.db.k.insert_one({"i": i, "pad": "p" * 2000})
    c.close()
    s.proc.kill()
    s.proc.wait(timeout=30)
    s.stop()
    again = ServedProcess(tmp_path / "db").start()
    c = again.client()
    assert count(c.db.k) == 50
    assert count(c.db.k, {"i": 49}) == 1
    c.close()
    assert again.signal(signal.SIGTERM) == 0
    again.stop()
