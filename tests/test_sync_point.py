"""Durability in one place (issue 46): every write command replies only
after the one sync the dispatcher makes for it.  With the log's sync made
to fail (the storageFault fail point at "wal.sync"), a write command that
wrote anything must not answer ok: its writes were never made durable,
and the server turns read-only, as a failed fsync demands
(docs/reliability.md)."""
from __future__ import annotations

import pymongo
import pytest

import multifora
from multifora.server import CommandError


def _setup(db):
    db.c.insert_many([{"_id": i, "a": i} for i in range(5)])
    db.c.create_index("a")


CASES = {
    "insert": {"insert": "c", "documents": [{"x": 1}]},
    "update": {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"b": 1}}}]},
    "delete": {"delete": "c", "deletes": [{"q": {"_id": 1}, "limit": 1}]},
    "findAndModify": {"findAndModify": "c", "query": {"_id": 2}, "update": {"$set": {"b": 2}}},
    "drop": {"drop": "c"},
    "dropDatabase": {"dropDatabase": 1},
    "createIndexes": {"createIndexes": "c", "indexes": [{"key": {"b": 1}, "name": "b_1"}]},
    "dropIndexes": {"dropIndexes": "c", "index": "a_1"},
    "collMod": {"collMod": "c", "index": {"name": "a_1", "hidden": True}},
    "convertToCapped": {"convertToCapped": "c", "size": 4096},
    "cloneCollectionAsCapped": {"cloneCollectionAsCapped": "c", "toCollection": "d",
                                "size": 4096},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_write_command_cannot_reply_before_its_sync(tmp_path, name):
    with multifora.Server(str(tmp_path / "db"), port=0, enable_test_commands=True) as srv, \
            pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000, retryWrites=False) as c:
        _setup(c.t)
        c.admin.command({"configureFailPoint": "storageFault", "mode": {"times": 1},
                         "data": {"site": "wal.sync", "error": "EIO"}})
        with pytest.raises(CommandError) as ei:
            srv.command("t", CASES[name])
        reply = ei.value.details
        assert "could not be made durable" in reply["errmsg"], reply
        assert c.admin.command("hello")["readOnly"] is True


def test_rename_cannot_reply_before_its_sync(tmp_path):
    with multifora.Server(str(tmp_path / "db"), port=0, enable_test_commands=True) as srv, \
            pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000) as c:
        _setup(c.t)
        c.admin.command({"configureFailPoint": "storageFault", "mode": {"times": 1},
                         "data": {"site": "wal.sync", "error": "EIO"}})
        with pytest.raises(CommandError) as ei:
            srv.command("admin", {"renameCollection": "t.c", "to": "t.d"})
        assert "could not be made durable" in ei.value.details["errmsg"]


@pytest.mark.parametrize("cmd", [
    {"convertToCapped": "c", "size": 4096},
    {"cloneCollectionAsCapped": "c", "toCollection": "d", "size": 4096}])
def test_capped_copies_reply_after_the_last_sync(tmp_path, cmd):
    """Creating the new collection syncs (coll/catalog.c); its documents
    and convertToCapped's rename wait for the dispatcher's sync: that one
    failing, no ok."""
    with multifora.Server(str(tmp_path / "db"), port=0, enable_test_commands=True) as srv, \
            pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000) as c:
        _setup(c.t)
        c.admin.command({"configureFailPoint": "storageFault", "mode": {"skip": 1},
                         "data": {"site": "wal.sync", "error": "EIO"}})
        with pytest.raises(CommandError) as ei:
            srv.command("t", cmd)
        assert "could not be made durable" in ei.value.details["errmsg"]
