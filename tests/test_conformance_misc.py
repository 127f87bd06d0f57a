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
    # $collStats: only its count under strict
    _fails(db, {"aggregate": "c", "cursor": {}, "apiVersion": "1", "apiStrict": True,
                "pipeline": [{"$collStats": {"storageStats": {}}}]}, 323,
           "only the 'count' option to $collStats is supported in API Version 1")
    out = db.command({"aggregate": "c", "cursor": {}, "apiVersion": "1", "apiStrict": True,
                      "pipeline": [{"$collStats": {"count": {}}}, {"$project": {"count": 1}}]})
    assert out["cursor"]["firstBatch"][0]["count"] == 1
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
    if "count" in cmd:
        # count takes every level but snapshot (its supportsReadConcern),
        # checked before what the node can do
        _fails(db, {**cmd, "readConcern": {"level": "snapshot"}}, 72,
               'Command count does not support { readConcern: { level: "snapshot", '
               'provenance: "clientSupplied" } } :: caused by :: read concern snapshot '
               'not supported')
    else:
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


# ------------------------------------------------------------------ clustered collections

def test_clustered_collection_create_and_list(client):
    db = client.test
    assert db.command({"create": "c", "clusteredIndex": {"key": {"_id": 1}, "unique": True,
                                                         "name": "test index"}}) == {"ok": 1.0}
    info = db.command({"listCollections": 1, "filter": {"name": "c"}})["cursor"]["firstBatch"]
    assert len(info) == 1
    assert info[0]["options"] == {"clusteredIndex": {"v": 2, "key": {"_id": 1},
                                                     "name": "test index", "unique": True}}
    assert type(info[0]["options"]["clusteredIndex"]["v"]) is int
    assert "idIndex" not in info[0]  # no separate _id index, as mongod
    assert list(db.c.list_indexes()) == [
        {"v": 2, "key": {"_id": 1}, "name": "test index", "unique": True, "clustered": True}]
    # the default name, and a collection default collation shown with the index
    db.command({"create": "d", "clusteredIndex": {"key": {"_id": 1}, "unique": 1},
                "collation": {"locale": "fr"}})
    (ix,) = list(db.d.list_indexes())
    assert ix["name"] == "_id_" and ix["clustered"] is True
    assert list(ix) == ["v", "key", "name", "unique", "collation", "clustered"]
    assert ix["collation"]["locale"] == "fr"
    opts = db.command({"listCollections": 1, "filter": {"name": "d"}})["cursor"]["firstBatch"][0]
    assert list(opts["options"]) == ["collation", "clusteredIndex"]


def test_clustered_collection_documents_keyed_by_id(client):
    db = client.test
    db.command({"create": "c", "clusteredIndex": {"key": {"_id": 1}, "unique": True}})
    db.c.insert_many([{"_id": 3, "x": "c"}, {"_id": 1, "x": "a"}])
    with pytest.raises(DuplicateKeyError):
        db.c.insert_one({"_id": 1, "x": "again"})
    assert db.c.find_one({"_id": 3}) == {"_id": 3, "x": "c"}
    assert [d["_id"] for d in db.c.find().sort("_id", 1)] == [1, 3]
    db.c.create_index("x")
    assert [ix["name"] for ix in db.c.list_indexes()] == ["_id_", "x_1"]


def test_clustered_index_cannot_be_dropped_hidden_or_recreated(client):
    db = client.test
    db.command({"create": "c", "clusteredIndex": {"key": {"_id": 1}, "unique": True,
                                                   "name": "cix"}})
    _fails(db, {"dropIndexes": "c", "index": "cix"}, 5979800)
    _fails(db, {"dropIndexes": "c", "index": {"_id": 1}}, 5979800)
    _fails(db, {"dropIndexes": "c", "index": ["cix"]}, 5979800)
    _fails(db, {"dropIndexes": "c", "index": "_id_"}, 27, "index not found with name [_id_]")
    _fails(db, {"collMod": "c", "index": {"name": "cix", "hidden": True}}, 6011800,
           "The 'hidden' option is not supported for a clusteredIndex")
    _fails(db, {"createIndexes": "c", "indexes": [{"key": {"_id": 1}, "name": "again"}]}, 67,
           "cannot create the _id index on a clustered collection")
    assert db.command({"dropIndexes": "c", "index": "*"})["ok"] == 1.0
    assert [ix["name"] for ix in db.c.list_indexes()] == ["cix"]


@pytest.mark.parametrize("spec, code", [
    ({"key": {"_id": 1}}, 40414),
    ({"unique": True}, 40414),
    ({"key": {"_id": 1}, "unique": False}, 5979700),
    ({"key": {"a": 1}, "unique": True}, 5979701),
    ({"key": {"_id": -1}, "unique": True}, 5979701),
    ({"key": {"_id": 1, "a": 1}, "unique": True}, 5979701),
    ({"key": {"_id": 1}, "unique": True, "v": 1}, 5979704),
    ({"key": {"_id": 1}, "unique": True, "randField": 1}, 40415),
    ({"key": {"_id": 1}, "unique": True, "name": 5}, 14),
    ("yes", 14),
    (True, 5979703),
])
def test_clustered_index_option_errors(client, spec, code):
    _fails(client.test, {"create": "c", "clusteredIndex": spec}, code)
    assert "c" not in client.test.list_collection_names()


def test_clustered_collection_survives_restart(tmp_path):
    srv = multifora.Server(str(tmp_path / "db"), port=0)
    srv.start()
    c = pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000)
    c.test.command({"create": "c", "clusteredIndex": {"key": {"_id": 1}, "unique": True}})
    c.close()
    srv.stop()
    srv = multifora.Server(str(tmp_path / "db"), port=0)
    srv.start()
    try:
        c = pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000)
        assert [ix["name"] for ix in c.test.c.list_indexes()] == ["_id_"]
        assert list(c.test.c.list_indexes())[0]["clustered"] is True
        c.close()
    finally:
        srv.stop()


# ------------------------------------------------------------------ pre- and post-images

def test_change_stream_pre_and_post_images_options(client):
    db = client.test
    db.command({"create": "off", "changeStreamPreAndPostImages": {"enabled": False}})
    db.command({"create": "on", "changeStreamPreAndPostImages": {"enabled": True},
                "collation": {"locale": "en"}})
    infos = {i["name"]: i for i in db.list_collections()}
    uuid = infos["off"]["info"]["uuid"]
    assert isinstance(uuid, bson.Binary) and uuid.subtype == 4
    assert infos["off"]["options"] == {}  # mongod shows the option only when enabled
    assert list(infos["on"]["options"]) == ["changeStreamPreAndPostImages", "collation"]
    assert infos["on"]["options"]["changeStreamPreAndPostImages"] == {"enabled": True}

    assert db.command({"collMod": "off",
                       "changeStreamPreAndPostImages": {"enabled": True}}) == {"ok": 1.0}
    assert db.command({"collMod": "on",
                       "changeStreamPreAndPostImages": {"enabled": False}}) == {"ok": 1.0}
    infos = {i["name"]: i for i in db.list_collections()}
    assert infos["off"]["options"] == {"changeStreamPreAndPostImages": {"enabled": True}}
    assert list(infos["on"]["options"]) == ["collation"]
    assert infos["off"]["info"]["uuid"] == uuid  # the collection is the same


@pytest.mark.parametrize("cmd", ["create", "collMod"])
def test_change_stream_pre_and_post_images_errors(client, cmd):
    db = client.test
    db.create_collection("exists")
    name = "exists" if cmd == "collMod" else "x"
    _fails(db, {cmd: name, "changeStreamPreAndPostImages": {}}, 40414,
           f"BSON field '{cmd}.changeStreamPreAndPostImages.enabled' is missing but a "
           "required field")
    _fails(db, {cmd: name, "changeStreamPreAndPostImages": {"enabled": True, "b": 1}}, 40415,
           f"BSON field '{cmd}.changeStreamPreAndPostImages.b' is an unknown field.")
    _fails(db, {cmd: name, "changeStreamPreAndPostImages": True}, 14,
           f"BSON field '{cmd}.changeStreamPreAndPostImages' is the wrong type 'bool', "
           "expected type 'object'")
    _fails(db, {cmd: name, "changeStreamPreAndPostImages": {"enabled": 1}}, 14)


# ------------------------------------------------------------------ prepareUnique, unique

def test_prepare_unique_then_convert_with_violations(client):
    db = client.test
    db.c.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 1}, {"_id": 3, "x": 2},
                      {"_id": 4, "x": 3}, {"_id": 5, "x": 3}, {"_id": 6, "x": 3}])
    db.c.create_index("x")
    r = db.command({"collMod": "c", "index": {"keyPattern": {"x": 1}, "prepareUnique": True}})
    assert r == {"prepareUnique_old": False, "prepareUnique_new": True, "ok": 1.0}
    spec = [ix for ix in db.c.list_indexes() if ix["name"] == "x_1"][0]
    assert spec["prepareUnique"] is True and "unique" not in spec
    # existing duplicates stay, new ones are refused, by insert and by update
    with pytest.raises(DuplicateKeyError) as ei:
        db.c.insert_one({"_id": 7, "x": 2})
    assert "index: x_1 dup key: { x: 2 }" in str(ei.value)
    with pytest.raises(DuplicateKeyError):
        db.c.update_one({"_id": 3}, {"$set": {"x": 1}})
    db.c.update_one({"_id": 3}, {"$set": {"x": 2, "y": 1}})  # its own key is no duplicate
    db.c.insert_one({"_id": 8, "x": 4})
    # again: a no-op without the *_old/new fields
    assert db.command({"collMod": "c", "index": {"name": "x_1", "prepareUnique": 1}}) == {
        "ok": 1.0}

    d = _fails(db, {"collMod": "c", "index": {"keyPattern": {"x": 1}, "unique": True}}, 359,
               "Cannot convert the index to unique. Please resolve conflicting documents "
               "before running collMod again.")
    assert d["codeName"] == "CannotConvertIndexToUnique"
    assert d["violations"] == [{"ids": [1, 2]}, {"ids": [4, 5, 6]}]
    # the index is unchanged
    spec = [ix for ix in db.c.list_indexes() if ix["name"] == "x_1"][0]
    assert spec["prepareUnique"] is True and "unique" not in spec

    db.c.delete_many({"_id": {"$in": [2, 5, 6]}})
    r = db.command({"collMod": "c", "index": {"keyPattern": {"x": 1}, "unique": True}})
    assert r == {"unique_new": True, "ok": 1.0}
    spec = [ix for ix in db.c.list_indexes() if ix["name"] == "x_1"][0]
    assert spec == {"v": 2, "key": {"x": 1}, "name": "x_1", "unique": True}
    with pytest.raises(DuplicateKeyError):
        db.c.insert_one({"_id": 9, "x": 4})
    # the rebuilt index answers queries
    assert [d["_id"] for d in db.c.find({"x": {"$gte": 2}}).hint("x_1")] == [3, 4, 8]
    assert db.command({"validate": "c"})["valid"] is True
    # unique again: a no-op
    assert db.command({"collMod": "c", "index": {"name": "x_1", "unique": True}}) == {"ok": 1.0}


def test_convert_to_unique_rules(client):
    db = client.test
    db.c.insert_one({"_id": 1, "x": 1})
    db.c.create_index("x")
    _fails(db, {"collMod": "c", "index": {"name": "x_1", "unique": True}}, 72,
           "Cannot make index unique with 'prepareUnique=false'. Run collMod to set it first.")
    _fails(db, {"collMod": "c", "index": {"name": "x_1", "unique": False}}, 2,
           "Cannot make index non-unique")
    _fails(db, {"collMod": "c", "index": {"name": "x_1", "keyPattern": {"x": 1},
                                          "hidden": True}}, 72,
           "Cannot specify both key pattern and name.")
    _fails(db, {"collMod": "c", "index": {"hidden": True}}, 72,
           "Must specify either index name or key pattern.")
    _fails(db, {"collMod": "c", "index": {"name": "x_1"}}, 72,
           "no expireAfterSeconds, hidden, unique, or prepareUnique field")
    _fails(db, {"collMod": "c", "index": {"name": "x_1", "prepareUnique": "yes"}}, 14)
    _fails(db, {"collMod": "c", "index": {"name": "_id_", "hidden": True}}, 2,
           "can't hide _id index")
    _fails(db, {"collMod": "c", "index": {"name": "_id_", "expireAfterSeconds": 5}}, 72,
           "the _id field does not support TTL indexes")
    # prepareUnique on a unique index is a no-op
    db.c.create_index("y", unique=True)
    assert db.command({"collMod": "c", "index": {"name": "y_1", "prepareUnique": True}}) == {
        "ok": 1.0}


def test_prepare_unique_at_create_and_after_restart(tmp_path):
    srv = multifora.Server(str(tmp_path / "db"), port=0)
    srv.start()
    c = pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000)
    c.test.c.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 1}])
    # createIndexes with prepareUnique builds over existing duplicates
    c.test.c.create_index("x", prepareUnique=True)
    c.close()
    srv.stop()
    srv = multifora.Server(str(tmp_path / "db"), port=0)
    srv.start()
    try:
        c = pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000)
        with pytest.raises(DuplicateKeyError):
            c.test.c.insert_one({"_id": 3, "x": 1})
        c.test.c.delete_one({"_id": 2})
        c.test.command({"collMod": "c", "index": {"name": "x_1", "unique": True}})
        c.close()
        srv.stop()
        srv = multifora.Server(str(tmp_path / "db"), port=0)
        srv.start()
        c = pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=5000)
        spec = [ix for ix in c.test.c.list_indexes() if ix["name"] == "x_1"][0]
        assert spec["unique"] is True and "prepareUnique" not in spec
        with pytest.raises(DuplicateKeyError):
            c.test.c.insert_one({"_id": 3, "x": 1})
        assert c.test.command({"validate": "c"})["valid"] is True
        c.close()
    finally:
        srv.stop()
