"""Server behaviours the driver specification tests rely on (issue 8), each
checked against mongod 7.0's replies on a standalone:

- the Stable API parameters (apiVersion, apiStrict, apiDeprecationErrors)
  and mongod's API version test commands;
- read concerns a standalone cannot satisfy (snapshot, linearizable,
  cluster times);
- clustered collections (create with clusteredIndex, listCollections,
  listIndexes);
- changeStreamPreAndPostImages in create and collMod;
- collMod index.prepareUnique and the conversion to unique with its
  violations.
"""
from __future__ import annotations

import bson
import pymongo
import pytest
from bson.int64 import Int64
from pymongo.errors import DuplicateKeyError, OperationFailure
from pymongo.server_api import ServerApi

import multifora


def _fails(db, cmd, code, msg=None):
    with pytest.raises(OperationFailure) as ei:
        db.command(cmd)
    e = ei.value
    assert e.code == code, e.details
    if msg is not None:
        assert e.details["errmsg"] == msg, e.details
    return e.details


# ------------------------------------------------------------------ API version

def test_api_parameters_types_and_values(client):
    db = client.test
    _fails(db, {"ping": 1, "apiStrict": True}, 4886600,
           "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion")
    _fails(db, {"ping": 1, "apiDeprecationErrors": False}, 4886600)
    d = _fails(db, {"ping": 1, "apiVersion": 1}, 14,
               "BSON field 'APIParametersFromClient.apiVersion' is the wrong type 'int', "
               "expected type 'string'")
    assert d["codeName"] == "TypeMismatch"
    d = _fails(db, {"ping": 1, "apiVersion": "2"}, 322, "Cannot accept API version 2")
    assert d["codeName"] == "APIVersionError"
    _fails(db, {"ping": 1, "apiVersion": "server_will_never_support_this_api_version"}, 322,
           'API version must be "1"')
    _fails(db, {"ping": 1, "apiVersion": "1", "apiStrict": "true"}, 14,
           "BSON field 'APIParametersFromClient.apiStrict' is the wrong type 'string', "
           "expected type 'bool'")
    _fails(db, {"ping": 1, "apiVersion": "1", "apiDeprecationErrors": 0}, 14)
    for extra in ({}, {"apiStrict": True, "apiDeprecationErrors": True},
                  {"apiStrict": False, "apiDeprecationErrors": False}):
        assert db.command({"ping": 1, "apiVersion": "1", **extra}) == {"ok": 1.0}


def test_api_strict_refuses_commands_outside_v1(client):
    db = client.test
    db.c.insert_one({"x": 1})
    assert db.command({"listCommands": 1, "apiVersion": "1"})["ok"] == 1.0
    d = _fails(db, {"distinct": "c", "key": "x", "apiVersion": "1", "apiStrict": True}, 323,
               "Provided apiStrict:true, but the command distinct is not in API Version 1. "
               "Information on supported commands and migrations in API Version 1 can be "
               "found at https://dochub.mongodb.org/core/manual-versioned-api.")
    assert d["codeName"] == "APIStrictError"
    for name in ("isMaster", "ismaster", "buildInfo", "serverStatus", "listCommands"):
        d = _fails(db, {name: 1, "apiVersion": "1", "apiStrict": True}, 323)
        # an alias is reported under its command's name, as mongod does
        canonical = {"ismaster": "isMaster"}.get(name, name)
        assert f"the command {canonical} is not" in d["errmsg"]
    # commands in V1 run under strict
    for cmd in ({"hello": 1}, {"ping": 1}, {"count": "c"}, {"find": "c"},
                {"listCollections": 1}, {"insert": "c", "documents": [{"x": 2}]}):
        assert db.command({**cmd, "apiVersion": "1", "apiStrict": True})["ok"] == 1.0


def test_api_strict_refuses_stages_outside_v1(client):
    d = _fails(client.admin, {"aggregate": 1, "pipeline": [{"$listLocalSessions": {}}],
                              "cursor": {}, "apiVersion": "1", "apiStrict": True}, 323,
               "$listLocalSessions is not allowed with 'apiStrict: true' in API Version 1")
    assert d["codeName"] == "APIStrictError"
    db = client.test
    db.c.insert_one({"x": 1})
    # inside a sub-pipeline too
    _fails(db, {"aggregate": "c", "cursor": {}, "apiVersion": "1", "apiStrict": True,
                "pipeline": [{"$facet": {"a": [{"$indexStats": {}}]}}]}, 323,
           "$indexStats is not allowed with 'apiStrict: true' in API Version 1")
    _fails(db, {"aggregate": "c", "cursor": {}, "apiVersion": "1", "apiStrict": True,
                "pipeline": [{"$lookup": {"from": "c", "as": "j",
                                          "pipeline": [{"$indexStats": {}}]}}]}, 323)
    # without strict the stage runs
    out = db.command({"aggregate": "c", "cursor": {}, "apiVersion": "1",
                      "pipeline": [{"$indexStats": {}}, {"$project": {"name": 1, "_id": 0}}]})
    assert out["cursor"]["firstBatch"] == [{"name": "_id_"}]


def test_api_version_test_commands(client):
    db = client.test
    d = _fails(db, {"testVersion2": 1, "apiVersion": "1", "apiStrict": True}, 323)
    assert "command testVersion2 is not in API Version 1" in d["errmsg"]
    assert db.command({"testVersion2": 1}) == {"ok": 1.0}
    assert db.command({"testVersion2": 1, "apiVersion": "1"}) == {"apiVersion": "1", "ok": 1.0}
    assert db.command({"testVersions1And2": 1, "apiVersion": "1", "apiStrict": True,
                       "apiDeprecationErrors": False}) == {
        "apiVersion": "1", "apiStrict": True, "apiDeprecationErrors": False, "ok": 1.0}
    d = _fails(db, {"testDeprecation": 1, "apiVersion": "1", "apiDeprecationErrors": True},
               324, "Provided apiDeprecationErrors:true, but the command testDeprecation is "
                    "deprecated in API Version 1.")
    assert d["codeName"] == "APIDeprecationError"
    # deprecated only in version 2: fine in version 1
    assert db.command({"testDeprecationInVersion2": 1, "apiVersion": "1",
                       "apiDeprecationErrors": True})["ok"] == 1.0
    cmds = client.admin.command("listCommands")["commands"]
    assert cmds["testVersion2"]["apiVersions"] == ["2"]
    assert cmds["testVersions1And2"]["apiVersions"] == ["1", "2"]
    assert cmds["testDeprecation"]["deprecatedApiVersions"] == ["1"]
    assert cmds["find"]["apiVersions"] == ["1"] and cmds["find"]["deprecatedApiVersions"] == []
    assert cmds["distinct"]["apiVersions"] == []


def test_api_version_test_commands_need_test_commands(tmp_path):
    srv = multifora.Server(str(tmp_path / "db"), port=0)
    srv.start()
    try:
        c = pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000)
        _fails(c.test, {"testVersion2": 1}, 59, "no such command: 'testVersion2'")
        assert "testVersion2" not in c.admin.command("listCommands")["commands"]
        c.close()
    finally:
        srv.stop()


def test_strict_client_over_pymongo(server):
    c = pymongo.MongoClient(server.uri, server_api=ServerApi("1", strict=True),
                            serverSelectionTimeoutMS=5000)
    try:
        coll = c.test.c
        coll.insert_many([{"x": 1}, {"x": 2}])
        assert coll.count_documents({}) == 2
        with pytest.raises(OperationFailure) as ei:
            coll.distinct("x")
        assert ei.value.code == 323
    finally:
        c.close()


# ------------------------------------------------------------------ read concern

@pytest.mark.parametrize("cmd", [
    {"find": "c"},
    {"aggregate": "c", "pipeline": [], "cursor": {}},
    {"distinct": "c", "key": "x"},
    {"count": "c"},
])
def test_read_concern_a_standalone_cannot_satisfy(client, cmd):
    db = client.test
    db.c.insert_one({"x": 1})
    d = _fails(db, {**cmd, "readConcern": {"level": "snapshot"}}, 123,
               "node needs to be a replica set member to use readConcern: snapshot")
    assert d["codeName"] == "NotAReplicaSet"
    _fails(db, {**cmd, "readConcern": {"level": "linearizable"}}, 123,
           "node needs to be a replica set member to use read concern")
    _fails(db, {**cmd, "readConcern": {"level": "local",
                                       "afterClusterTime": bson.Timestamp(1, 1)}}, 20,
           "Cannot specify afterClusterTime readConcern without replication enabled")
    _fails(db, {**cmd, "readConcern": {"afterOpTime": {"ts": bson.Timestamp(1, 1),
                                                       "t": Int64(1)}}}, 123)
    for level in ("local", "available", "majority"):
        assert db.command({**cmd, "readConcern": {"level": level}})["ok"] == 1.0


def test_snapshot_session_on_a_standalone(client):
    coll = client.test.c
    coll.insert_one({"_id": 1, "x": 11})
    with client.start_session(snapshot=True) as s:
        with pytest.raises(OperationFailure) as ei:
            list(coll.find({}, session=s))
        assert ei.value.code == 123
        with pytest.raises(OperationFailure):
            coll.distinct("x", session=s)
