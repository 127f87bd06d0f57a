"""The server's own collections, as a mongod 7.0 standalone has them from
its first start: admin.system.version (featureCompatibilityVersion),
local.startup_log (a document per start), config.system.sessions (the
sessions' records, refreshed every logicalSessionRefreshMillis), so that
listDatabases shows admin, config and local.  And the namespace rules that
go with them: any collection may be read; a client may create or write
only the system collections mongod lets it (userAllowedCreateNS).
"""
from __future__ import annotations

import time
import uuid

import multifora
import pymongo
import pytest
from bson.binary import Binary
from pymongo.errors import OperationFailure


def test_a_fresh_server_lists_admin_config_and_local(client):
    assert client.list_database_names() == ["admin", "config", "local"]
    dbs = {d["name"]: d for d in client.admin.command("listDatabases")["databases"]}
    assert dbs["admin"]["sizeOnDisk"] > 0 and dbs["local"]["sizeOnDisk"] > 0
    assert client.admin.list_collection_names() == ["system.version"]
    assert client.config.list_collection_names() == ["system.sessions"]
    assert client.local.list_collection_names() == ["startup_log"]


def test_feature_compatibility_version_document(client):
    assert client.admin.system.version.find_one() == {"_id": "featureCompatibilityVersion",
                                                      "version": "7.0"}


def test_startup_log_has_a_document_per_start(tmp_path):
    path = str(tmp_path / "db")
    starts, info = [], None
    for _ in range(3):
        with multifora.Server(path, port=0) as srv, \
                pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000) as c:
            starts = list(c.local.startup_log.find())
            info = c.local.command("listCollections", filter={"name": "startup_log"})
    assert len(starts) == 3
    doc = starts[-1]
    assert list(doc) == ["_id", "hostname", "startTime", "startTimeLocal", "cmdLine", "pid",
                         "buildinfo"]
    assert doc["_id"] == f"{doc['hostname']}-{int(doc['startTime'].timestamp() * 1000)}"
    assert doc["cmdLine"]["storage"]["dbPath"].endswith("db")
    assert doc["buildinfo"]["version"].startswith("7.0")
    assert info["cursor"]["firstBatch"][0]["options"] == {"capped": True, "size": 10485760}


def test_sessions_collection_and_its_ttl_index(client):
    ix = {i["name"]: i for i in client.config.system.sessions.list_indexes()}
    assert set(ix) == {"_id_", "lsidTTLIndex"}
    assert ix["lsidTTLIndex"]["key"] == {"lastUse": 1}
    assert ix["lsidTTLIndex"]["expireAfterSeconds"] == 1800


def _records(server):
    docs = server.command("config", {"find": "system.sessions"})["cursor"]["firstBatch"]
    return {bytes(d["_id"]["id"]): d for d in docs}


def test_refresh_writes_used_sessions_and_removes_ended_ones(server):
    sid = Binary(uuid.uuid4().bytes, 4)
    server.command("test", {"ping": 1, "lsid": {"id": sid}})
    assert bytes(sid) not in _records(server)
    server.command("admin", {"refreshLogicalSessionCacheNow": 1})
    rec = _records(server)[bytes(sid)]
    assert len(rec["_id"]["uid"]) == 32 and rec["lastUse"] is not None
    server.command("admin", {"endSessions": [{"id": sid}]})
    assert bytes(sid) in _records(server)          # until the next refresh
    server.command("admin", {"refreshLogicalSessionCacheNow": 1})
    assert bytes(sid) not in _records(server)


def test_refresh_runs_every_logical_session_refresh_millis(tmp_path):
    with multifora.Server(str(tmp_path / "db"), port=0, logical_session_refresh_ms=300) as srv:
        assert srv.command("admin", {"getParameter": 1, "logicalSessionRefreshMillis": 1})[
            "logicalSessionRefreshMillis"] == 300
        sid = Binary(uuid.uuid4().bytes, 4)
        srv.command("test", {"ping": 1, "lsid": {"id": sid}})
        deadline = time.monotonic() + 10
        while bytes(sid) not in _records(srv) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert bytes(sid) in _records(srv)


def test_refresh_is_a_test_command(tmp_path):
    with multifora.Server(str(tmp_path / "db"), port=0) as srv:
        with pytest.raises(multifora.server.CommandError) as ei:
            srv.command("admin", {"refreshLogicalSessionCacheNow": 1})
        assert ei.value.code == 59


# --------------------------------------------------------- namespace rules

def test_any_collection_may_be_read(client):
    assert client.test["system.foo"].find_one() is None
    assert client.test["system.foo"].count_documents({}) == 0
    assert list(client.test["system.foo"].aggregate([])) == []


@pytest.mark.parametrize("write", [
    lambda coll: coll.insert_one({"a": 1}),
    lambda coll: coll.update_one({}, {"$set": {"a": 1}}, upsert=True),
    lambda coll: coll.database.create_collection(coll.name),
    lambda coll: coll.create_index("a"),
])
def test_other_system_collections_are_not_for_clients(client, write):
    with pytest.raises(OperationFailure) as ei:
        write(client.test["system.foo"])
    assert (ei.value.code, ei.value.details["errmsg"]) == (
        73, "Invalid system namespace: test.system.foo")
    assert "system.foo" not in client.test.list_collection_names()


def test_the_system_collections_a_client_may_write(client):
    client.test["system.js"].insert_one({"_id": "f", "value": 1})
    client.admin["system.version"].insert_one({"_id": "mine", "v": 1})
    assert client.admin["system.version"].count_documents({}) == 2
